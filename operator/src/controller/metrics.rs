//! The operator's own metrics: passes, what triggered them, failures, durations.

use std::time::Duration;

use prometheus::{Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts, Registry};

use super::error::Error;

/// Pass counters and the registry they live in.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    passes: IntCounter,
    triggers: IntCounter,
    failures: IntCounterVec,
    duration: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let registry = Registry::new();
        let passes = IntCounter::new("daqiri_operator_sync_passes_total", "Sync passes run over the namespace")
            .expect("valid metric");
        let triggers = IntCounter::new(
            "daqiri_operator_sync_triggers_total",
            "Changes that asked for a pass (several are coalesced into one pass)",
        )
        .expect("valid metric");
        let failures = IntCounterVec::new(
            Opts::new("daqiri_operator_sync_errors_total", "Passes that failed, by cause (conflict, api)"),
            &["cause"],
        )
        .expect("valid metric");
        let duration = Histogram::with_opts(
            HistogramOpts::new("daqiri_operator_sync_duration_seconds", "Pass duration")
                .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
        )
        .expect("valid metric");
        for collector in [
            Box::new(passes.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(triggers.clone()),
            Box::new(failures.clone()),
            Box::new(duration.clone()),
        ] {
            registry.register(collector).expect("metric names are unique");
        }
        Self { registry, passes, triggers, failures, duration }
    }
}

impl Metrics {
    /// Records one pass and the number of triggers it served.
    pub fn observe_pass(&self, took: Duration, triggers: usize, error: Option<&Error>) {
        self.passes.inc();
        self.triggers.inc_by(triggers as u64);
        match error {
            Some(Error::Conflict(_)) => self.failures.with_label_values(&["conflict"]).inc(),
            Some(Error::Kube(_)) => self.failures.with_label_values(&["api"]).inc(),
            None => {}
        }
        self.duration.observe(took.as_secs_f64());
    }

    /// Passes run so far.
    pub fn passes(&self) -> u64 {
        self.passes.get()
    }

    /// Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        prometheus::TextEncoder::new().encode(&self.registry.gather(), &mut out).expect("text encoding cannot fail");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}
