//! OpenTelemetry metrics with DAQIRI's names and labels, exposed in
//! Prometheus text format (`daqiri.rx.packets` reads
//! `daqiri_rx_packets_total{daqiri_interface_name=...}` there), so DAQIRI's
//! own dashboard queries work against the gateway unchanged.
//!
//! Every instrument is observable: its callback takes an engine snapshot at
//! scrape time, so the data path only ever bumps its own atomics.
//!
//! Queue series carry `daqiri_queue_id` = the queue id, plus one `all`
//! series per interface summing its queues (DAQIRI's dashboards filter
//! `daqiri_queue_id!="all"`). Drops that happen before a queue is chosen
//! (unmatched flow, truncated, socket overflow) carry `daqiri_queue_id="port"`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use daqiri::{Direction, EngineStats, PlanStats, PortStats, QueueStatsSnapshot};

use crate::capture::{CaptureInfo, CaptureManager};
use crate::live::LiveEngine;
use crate::subscriptions::{Hub, SubscriptionStats};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{AsyncInstrument, MeterProvider};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use prometheus::{Encoder, TextEncoder};

/// The meter provider and the registry it exports into.
#[derive(Debug)]
pub(crate) struct Telemetry {
    _provider: SdkMeterProvider,
    registry: prometheus::Registry,
    snapshot: Arc<Snapshot>,
    renders: Mutex<Renders>,
}

/// Scrapes as fast as clients ask, fresh each time, until clients ask for
/// more than [`Renders::BUSY`] a second (pipelined scrapes nobody reads
/// kept the admin API's worker rendering and its probes waiting): then a
/// render younger than [`Renders::REUSE`] is served again.
#[derive(Debug, Default)]
struct Renders {
    last: Option<(std::time::Instant, axum::body::Bytes)>,
    /// Renders in the second that began at `window`.
    window: Option<std::time::Instant>,
    in_window: u32,
}

impl Renders {
    const BUSY: u32 = 20;
    const REUSE: std::time::Duration = std::time::Duration::from_millis(100);

    /// The last render, when scrapes come faster than a busy rate and it is recent.
    fn reusable(&mut self) -> Option<axum::body::Bytes> {
        let now = std::time::Instant::now();
        if self.window.is_none_or(|start| now.duration_since(start) >= std::time::Duration::from_secs(1)) {
            (self.window, self.in_window) = (Some(now), 0);
        }
        self.in_window += 1;
        let (at, text) = self.last.as_ref()?;
        (self.in_window > Self::BUSY && now.duration_since(*at) < Self::REUSE).then(|| text.clone())
    }
}

/// The engine snapshot the instruments of one scrape read.
#[derive(Debug)]
struct Snapshot {
    live: Arc<LiveEngine>,
    last: Mutex<Option<EngineStats>>,
}

impl Snapshot {
    /// While the engine restarts there is nothing to report: engine series are absent.
    fn take(&self) -> EngineStats {
        self.live.get().map(|engine| engine.stats()).unwrap_or_default()
    }

    fn refresh(&self) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(self.take());
    }

    /// Runs `read` on this scrape's snapshot, without copying it.
    fn with<R>(&self, read: impl FnOnce(&EngineStats) -> R) -> R {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        read(last.get_or_insert_with(|| self.take()))
    }
}

type Series = Vec<(u64, Vec<KeyValue>)>;

impl Telemetry {
    /// Registers every instrument for `engine`.
    pub(crate) fn new(
        live: Arc<LiveEngine>,
        (captures, hub): (Arc<CaptureManager>, Arc<Hub>),
        reloads: Arc<ReloadCounters>,
    ) -> anyhow::Result<Self> {
        let registry = prometheus::Registry::new();
        let exporter = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .without_units()
            .build()
            .context("cannot build the Prometheus exporter")?;
        let provider = SdkMeterProvider::builder().with_reader(exporter).build();
        let meter = provider.meter("daqiri");
        let snapshot = Arc::new(Snapshot { live, last: Mutex::new(None) });
        let counter = |name: &'static str, description: &'static str, series: fn(&EngineStats) -> Series| {
            let snapshot = Arc::clone(&snapshot);
            meter
                .u64_observable_counter(name)
                .with_description(description)
                .with_callback(move |observer| observe(observer, snapshot.with(series)))
                .build();
        };
        counter("daqiri.rx.packets", "Packets delivered to RX queues", |s| queues(s, Direction::Rx, |q| q.packets));
        counter("daqiri.rx.bytes", "Bytes delivered to RX queues", |s| queues(s, Direction::Rx, |q| q.bytes));
        counter("daqiri.tx.packets", "Packets sent by TX queues", |s| queues(s, Direction::Tx, |q| q.packets));
        counter("daqiri.tx.bytes", "Bytes sent by TX queues", |s| queues(s, Direction::Tx, |q| q.bytes));
        counter("daqiri.dropped.packets", "Packets dropped, by reason", drops);
        counter("daqiri.flow.packets", "Packets matched per RX flow", |s| flows(s, |f| f.packets));
        counter("daqiri.flow.bytes", "Bytes matched per RX flow", |s| flows(s, |f| f.bytes));
        counter("daqiri.nic.counter", "A NIC's own counters (DPDK xstats), by the driver's name", nic_counters);
        counter(
            "daqiri.link.recoveries",
            "Times a port brought its link back from an error a peer caused (a RoCE ingest queue pair from the error state)",
            link_recoveries,
        );
        counter("daqiri.reorder.batches", "Reorder aggregates, by how they were emitted", reorder_batches);
        counter("daqiri.reorder.packets", "Packets offered to reorder plans, by outcome", reorder_packets);
        let series_gauge = |name: &'static str, description: &'static str, series: fn(&EngineStats) -> Series| {
            let snapshot = Arc::clone(&snapshot);
            meter
                .u64_observable_gauge(name)
                .with_description(description)
                .with_callback(move |observer| observe(observer, snapshot.with(series)))
                .build();
        };
        let gauge = |name: &'static str, description: &'static str, value: fn(&daqiri::RegionStats) -> u64| {
            let snapshot = Arc::clone(&snapshot);
            meter
                .u64_observable_gauge(name)
                .with_description(description)
                .with_callback(move |observer| {
                    snapshot.with(|stats| {
                        for r in &stats.regions {
                            let mut labels = vec![
                                KeyValue::new("daqiri.memory_region.name", r.name.clone()),
                                KeyValue::new("daqiri.memory_region.kind", r.kind),
                            ];
                            // Only memory a GPU holds or maps has the label.
                            if let Some(gpu) = r.gpu {
                                labels.push(KeyValue::new("daqiri.memory_region.gpu", i64::from(gpu)));
                            }
                            observer.observe(value(r), &labels);
                        }
                    })
                })
                .build();
        };
        let capture_counter = |name: &'static str, description: &'static str, value: fn(&CaptureInfo) -> u64| {
            let captures = Arc::clone(&captures);
            meter
                .u64_observable_counter(name)
                .with_description(description)
                .with_callback(move |observer| {
                    for c in captures.list() {
                        let labels = [
                            KeyValue::new("daqiri.capture.id", c.id as i64),
                            KeyValue::new("daqiri.capture.name", c.name.clone()),
                            KeyValue::new("daqiri.port.id", i64::from(c.port)),
                        ];
                        observer.observe(value(&c), &labels);
                    }
                })
                .build();
        };
        type Field = fn(&ReloadCounters) -> &AtomicU64;
        let reload_counters: [(_, _, Field); 3] = [
            ("daqiri.config.reloads", "Configs applied by reload", |r| &r.applied),
            ("daqiri.config.reload_failures", "Reloads refused (invalid, or failed to start)", |r| &r.failed),
            ("daqiri.engine.restarts", "Engine restarts for changes beyond RX flows", |r| &r.restarts),
        ];
        for (name, description, counter) in reload_counters {
            let reloads = Arc::clone(&reloads);
            meter
                .u64_observable_counter(name)
                .with_description(description)
                .with_callback(move |observer| observer.observe(counter(&reloads).load(Relaxed), &[]))
                .build();
        }
        let subscription =
            |name: &'static str, description: &'static str, value: fn(&SubscriptionStats) -> u64, gauge: bool| {
                let hub = Arc::clone(&hub);
                let callback = move |observer: &dyn AsyncInstrument<u64>| {
                    for s in hub.stats() {
                        let (port, source, which) = s.target.describe();
                        let labels = [
                            KeyValue::new("daqiri.subscription.id", s.id as i64),
                            KeyValue::new("daqiri.port.id", i64::from(port)),
                            KeyValue::new("daqiri.subscription.source", source),
                            KeyValue::new("daqiri.subscription.which", i64::from(which)),
                        ];
                        observer.observe(value(&s), &labels);
                    }
                };
                if gauge {
                    meter.u64_observable_gauge(name).with_description(description).with_callback(callback).build();
                } else {
                    meter.u64_observable_counter(name).with_description(description).with_callback(callback).build();
                }
            };
        subscription(
            "daqiri.consumer.bursts",
            "Bursts handed to a consumer outside the gateway",
            |s| s.delivered,
            false,
        );
        subscription(
            "daqiri.consumer.lag",
            "Bursts dropped for one consumer alone, its ring full (receive dropped nothing)",
            |s| s.consumer_lag,
            false,
        );
        subscription(
            "daqiri.consumer.over_budget",
            "Bursts dropped for a consumer because it held its part of the consumers' budget (a share of a queue's metadata entries or a region's buffers)",
            |s| s.over_budget,
            false,
        );
        subscription("daqiri.consumer.held", "Bursts a consumer holds now", |s| s.held as u64, true);
        let refusing = Arc::clone(&hub);
        meter
            .u64_observable_counter("daqiri.consumer.refused_connections")
            .with_description("Connections to the consumer socket turned away before a hello, by reason")
            .with_callback(move |observer| {
                for (why, n) in refusing.refusals() {
                    observer.observe(n, &[KeyValue::new("daqiri.refusal.reason", why.as_str())]);
                }
            })
            .build();
        capture_counter("daqiri.capture.packets", "Packets written by captures", |c| c.packets);
        capture_counter("daqiri.capture.bytes", "Bytes written by captures", |c| c.bytes);
        capture_counter(
            "daqiri.capture.dropped.packets",
            "Capture copies dropped because the writer was behind",
            |c| c.capture_drops,
        );
        series_gauge(
            "daqiri.port.kernel_rx_backlog_bytes",
            "Bytes waiting in the kernel's receive buffers of a socket port, not yet read",
            kernel_backlog,
        );
        series_gauge(
            "daqiri.roce.ingest.pages",
            "Pages in a RoCE ingest ring, labelled with what its sender is programmed with (QPN, rkey, GID, page size)",
            ingest_rings,
        );
        series_gauge("daqiri.reorder.open_batches", "Batches a reorder plan is filling now", |s| {
            plan_series(s, |p| vec![("open", u64::from(p.open_batches))])
        });
        series_gauge(
            "daqiri.reorder.batches_in_flight",
            "Batches of a GPU reorder plan whose kernel is launched and not yet finished",
            |s| {
                plan_series(s, |p| match p.gpu {
                    Some(_) => vec![("in_flight", u64::from(p.batches_in_flight))],
                    None => Vec::new(),
                })
            },
        );
        gauge("daqiri.memory_region.buffers", "Buffers in each memory region", |r| u64::from(r.num_bufs));
        gauge("daqiri.memory_region.buffers.in_use", "Buffers held by bursts or workers", |r| u64::from(r.in_use));
        gauge("daqiri.memory_region.bytes", "Bytes of buffers in each memory region", |r| {
            u64::from(r.num_bufs) * r.buf_size as u64
        });
        Ok(Self { _provider: provider, registry, snapshot, renders: Mutex::default() })
    }

    /// The current values in Prometheus text format.
    pub(crate) fn render(&self) -> anyhow::Result<axum::body::Bytes> {
        let mut renders = self.renders.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(text) = renders.reusable() {
            return Ok(text);
        }
        // One engine snapshot serves every instrument of this scrape.
        self.snapshot.refresh();
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out)?;
        let text = axum::body::Bytes::from(String::from_utf8(out)?);
        renders.last = Some((std::time::Instant::now(), text.clone()));
        Ok(text)
    }
}

fn observe(observer: &dyn AsyncInstrument<u64>, series: Series) {
    for (value, labels) in series {
        observer.observe(value, &labels);
    }
}

fn port_labels(p: &PortStats, queue: String) -> Vec<KeyValue> {
    vec![
        KeyValue::new("daqiri.engine", p.backend.as_str()),
        KeyValue::new("daqiri.interface.name", p.name.clone()),
        KeyValue::new("daqiri.port.id", i64::from(p.id)),
        KeyValue::new("daqiri.queue.id", queue),
    ]
}

fn queues(stats: &EngineStats, direction: Direction, field: fn(&QueueStatsSnapshot) -> u64) -> Series {
    let mut series = Vec::new();
    for p in &stats.ports {
        let list = match direction {
            Direction::Rx => &p.rx_queues,
            Direction::Tx => &p.tx_queues,
        };
        if list.is_empty() {
            continue;
        }
        for q in list {
            series.push((field(&q.stats), port_labels(p, q.id.to_string())));
        }
        series.push((list.iter().map(|q| field(&q.stats)).sum(), port_labels(p, "all".into())));
    }
    series
}

/// One series per plan and outcome, labelled with the interface and plan name.
fn plan_series(stats: &EngineStats, values: impl Fn(&PlanStats) -> Vec<(&'static str, u64)>) -> Series {
    let mut series = Vec::new();
    for p in &stats.ports {
        for plan in &p.reorder {
            for (outcome, value) in values(plan) {
                let mut labels = port_labels(p, plan.queue_id.to_string());
                labels.push(KeyValue::new("daqiri.reorder.plan", plan.name.clone()));
                labels.push(KeyValue::new("daqiri.reorder.outcome", outcome));
                if let Some(gpu) = plan.gpu {
                    labels.push(KeyValue::new("daqiri.reorder.gpu", i64::from(gpu)));
                }
                series.push((value, labels));
            }
        }
    }
    series
}

fn reorder_batches(stats: &EngineStats) -> Series {
    plan_series(stats, |p| {
        vec![
            ("complete", p.batches_complete),
            ("timed_out", p.batches_timed_out),
            ("evicted", p.batches_evicted),
            ("dropped", p.batches_dropped),
            ("discarded", p.batches_discarded),
        ]
    })
}

fn reorder_packets(stats: &EngineStats) -> Series {
    plan_series(stats, |p| {
        vec![
            ("placed", p.packets_placed),
            ("missing", p.packets_missing),
            ("late", p.packets_late),
            ("duplicate", p.packets_duplicate),
            ("out_of_window", p.packets_out_of_window),
            ("rejected", p.packets_rejected),
            ("discarded", p.packets_discarded),
        ]
    })
}

fn nic_counters(stats: &EngineStats) -> Series {
    let mut series = Vec::new();
    for p in &stats.ports {
        for (name, value) in &p.link.nic_counters {
            let mut labels = port_labels(p, "port".into());
            labels.push(KeyValue::new("daqiri.nic.counter.name", name.clone()));
            series.push((*value, labels));
        }
    }
    series
}

fn link_recoveries(stats: &EngineStats) -> Series {
    stats.ports.iter().filter_map(|p| Some((p.link.recoveries?, port_labels(p, "port".into())))).collect()
}

fn ingest_rings(stats: &EngineStats) -> Series {
    let mut series = Vec::new();
    for p in &stats.ports {
        let Some(roce) = &p.link.roce else { continue };
        let Some(ring) = &roce.ingest else { continue };
        let mut labels = port_labels(p, "0".into());
        labels.extend([
            KeyValue::new("daqiri.roce.device", roce.device.clone()),
            KeyValue::new("daqiri.roce.gid", roce.gid.to_string()),
            KeyValue::new("daqiri.roce.qpn", i64::from(ring.qpn)),
            KeyValue::new("daqiri.roce.rkey", i64::from(ring.rkey)),
            KeyValue::new("daqiri.roce.page_size", ring.page_size as i64),
            KeyValue::new("daqiri.roce.transport", ring.transport),
        ]);
        series.push((u64::from(ring.pages), labels));
    }
    series
}

fn kernel_backlog(stats: &EngineStats) -> Series {
    stats.ports.iter().filter_map(|p| Some((p.link.kernel_rx_backlog_bytes?, port_labels(p, "port".into())))).collect()
}

fn drops(stats: &EngineStats) -> Series {
    let mut series = Vec::new();
    for p in &stats.ports {
        let queues = p.rx_queues.iter().chain(&p.tx_queues).map(|q| (q.id.to_string(), &q.stats));
        let mut all = QueueStatsSnapshot::default();
        for (queue, s) in queues.chain(std::iter::once(("port".to_owned(), &p.rx_port_drops))) {
            for (reason, n) in s.drops_by_reason() {
                let mut labels = port_labels(p, queue.clone());
                labels.push(KeyValue::new("daqiri.drop.reason", reason.as_str()));
                series.push((n, labels));
            }
            for (total, n) in all.drops.iter_mut().zip(s.drops) {
                *total += n;
            }
        }
        for (reason, n) in all.drops_by_reason() {
            let mut labels = port_labels(p, "all".into());
            labels.push(KeyValue::new("daqiri.drop.reason", reason.as_str()));
            series.push((n, labels));
        }
    }
    series
}

fn flows(stats: &EngineStats, field: fn(&daqiri::FlowStatsEntry) -> u64) -> Series {
    let mut series = Vec::new();
    for p in &stats.ports {
        for f in &p.flows {
            let mut labels = port_labels(p, f.queue_ids.iter().map(u16::to_string).collect::<Vec<_>>().join(","));
            labels.push(KeyValue::new("daqiri.flow.id", i64::from(f.id)));
            labels.push(KeyValue::new("daqiri.flow.name", f.name.clone()));
            series.push((field(f), labels));
        }
    }
    series
}

/// Reload outcomes, for metrics.
#[derive(Debug, Default)]
pub(crate) struct ReloadCounters {
    pub applied: std::sync::atomic::AtomicU64,
    pub failed: std::sync::atomic::AtomicU64,
    /// Applied reloads that restarted the engine.
    pub restarts: std::sync::atomic::AtomicU64,
}
