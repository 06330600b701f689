//! The operator's own metrics: reconciles, failures, durations.

use std::time::Duration;

use prometheus::{Encoder, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

/// Reconcile counters and the registry they live in.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    reconciles: IntCounterVec,
    failures: IntCounterVec,
    duration: HistogramVec,
}

impl Default for Metrics {
    fn default() -> Self {
        let registry = Registry::new();
        let reconciles = IntCounterVec::new(
            Opts::new("daqiri_operator_reconciles_total", "Reconciles run, by resource kind"),
            &["kind"],
        )
        .expect("valid metric");
        let failures = IntCounterVec::new(
            Opts::new("daqiri_operator_reconcile_errors_total", "Reconciles that failed, by resource kind"),
            &["kind"],
        )
        .expect("valid metric");
        let duration = HistogramVec::new(
            HistogramOpts::new("daqiri_operator_reconcile_duration_seconds", "Reconcile duration")
                .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
            &["kind"],
        )
        .expect("valid metric");
        for collector in [
            Box::new(reconciles.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(failures.clone()),
            Box::new(duration.clone()),
        ] {
            registry.register(collector).expect("metric names are unique");
        }
        Self { registry, reconciles, failures, duration }
    }
}

impl Metrics {
    /// Records one reconcile.
    pub fn observe(&self, kind: &str, took: Duration, ok: bool) {
        self.reconciles.with_label_values(&[kind]).inc();
        if !ok {
            self.failures.with_label_values(&[kind]).inc();
        }
        self.duration.with_label_values(&[kind]).observe(took.as_secs_f64());
    }

    /// Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        prometheus::TextEncoder::new().encode(&self.registry.gather(), &mut out).expect("text encoding cannot fail");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}
