//! The daemon's metrics, kept and written by `prometheus-client` in the OpenMetrics text format (which
//! Prometheus scrapes): counters of what happened, a histogram of proof times, and gauges of the
//! state (live jobs, resident keys, the host budget) set from the daemon each time they are read.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// A resident key's label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct KeyLabel {
    pub(crate) key: String,
}

/// A listener's label ("grpc" or "metrics").
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ListenerLabel {
    pub(crate) listener: String,
}

/// A degradation's label: the key, its kind and the GPU.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct DegradationLabel {
    pub(crate) key: String,
    pub(crate) kind: String,
    pub(crate) device: u64,
}

/// What the daemon counts, and the gauges it sets before each read.
pub(crate) struct Metrics {
    registry: Registry,
    pub(crate) submitted: Counter,
    pub(crate) succeeded: Counter,
    pub(crate) failed: Counter,
    pub(crate) cancelled: Counter,
    pub(crate) rejected: Counter,
    pub(crate) expired: Counter,
    pub(crate) key_loads_failed: Counter,
    pub(crate) partitions: Counter,
    pub(crate) proof_seconds: Histogram,
    pub(crate) uptime: Gauge<f64, AtomicU64>,
    pub(crate) jobs_live: Gauge,
    pub(crate) jobs_uncollected: Gauge,
    pub(crate) keys_resident: Gauge,
    pub(crate) budget: Gauge,
    pub(crate) budget_used: Gauge,
    pub(crate) budget_peak: Gauge,
    pub(crate) key_host_bytes: Family<KeyLabel, Gauge>,
    pub(crate) backend_fallback: Gauge,
    pub(crate) key_degradations: Family<DegradationLabel, Gauge>,
    pub(crate) connections_open: Family<ListenerLabel, Gauge>,
    pub(crate) connections_max: Family<ListenerLabel, Gauge>,
    pub(crate) connections_closed_quiet: Family<ListenerLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("cuzk");
        let counter = |registry: &mut Registry, name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let g = Gauge::default();
            registry.register(name, help, g.clone());
            g
        };
        let submitted = counter(&mut registry, "proofs_submitted", "Proofs accepted.");
        let succeeded = counter(&mut registry, "proofs_succeeded", "Proofs finished.");
        let failed = counter(&mut registry, "proofs_failed", "Proofs that failed.");
        let cancelled = counter(&mut registry, "proofs_cancelled", "Proofs cancelled.");
        let rejected = counter(&mut registry, "requests_rejected", "Submissions refused.");
        let expired = counter(
            &mut registry,
            "results_expired",
            "Finished proofs forgotten uncollected after result_ttl_secs.",
        );
        let key_loads_failed = counter(&mut registry, "key_loads_failed", "LoadKey calls refused or failed.");
        let partitions = counter(&mut registry, "partitions_proved", "Partitions of finished proofs.");
        // 10 ms to about 45 minutes.
        let proof_seconds = Histogram::new(exponential_buckets(0.01, 2.0, 18));
        registry.register(
            "proof_seconds",
            "Seconds from submission to the last partition, of proofs that succeeded.",
            proof_seconds.clone(),
        );
        let uptime = Gauge::<f64, AtomicU64>::default();
        registry.register("uptime_seconds", "Seconds since the daemon started.", uptime.clone());
        let jobs_live = gauge(&mut registry, "jobs_live", "Proofs queued or running.");
        let jobs_uncollected = gauge(&mut registry, "jobs_uncollected", "Finished proofs not yet collected.");
        let keys_resident = gauge(&mut registry, "keys_resident", "Resident keys.");
        let budget = gauge(&mut registry, "host_budget_bytes", "The host memory budget of all keys.");
        let budget_used = gauge(
            &mut registry,
            "host_budget_used_bytes",
            "Host memory reserved now (keys and partitions on the host).",
        );
        let budget_peak = gauge(&mut registry, "host_budget_peak_bytes", "Most host memory ever reserved.");
        let key_host_bytes = Family::<KeyLabel, Gauge>::default();
        registry.register("key_host_bytes", "Host memory each resident key holds.", key_host_bytes.clone());
        let backend_fallback = gauge(
            &mut registry,
            "backend_fallback",
            "1 when the backend in use is not the one configured (GetStatus's backend_note says why).",
        );
        let key_degradations = Family::<DegradationLabel, Gauge>::default();
        registry.register(
            "key_degradations",
            "Degradations of each resident key by kind and GPU (streamed_bases, fewer_slots); see GetStatus.",
            key_degradations.clone(),
        );
        let connections_open = Family::<ListenerLabel, Gauge>::default();
        registry.register(
            "connections_open",
            "Connections open now, per listener.",
            connections_open.clone(),
        );
        let connections_max = Family::<ListenerLabel, Gauge>::default();
        registry.register(
            "connections_max",
            "The most connections open at once, per listener (after the open files limit).",
            connections_max.clone(),
        );
        let connections_closed_quiet = Family::<ListenerLabel, Counter>::default();
        registry.register(
            "connections_closed_quiet",
            "Connections closed for sending nothing within the handshake or idle timeout.",
            connections_closed_quiet.clone(),
        );
        Self {
            registry,
            submitted,
            succeeded,
            failed,
            cancelled,
            rejected,
            expired,
            key_loads_failed,
            partitions,
            proof_seconds,
            uptime,
            jobs_live,
            jobs_uncollected,
            keys_resident,
            budget,
            budget_used,
            budget_peak,
            key_host_bytes,
            backend_fallback,
            key_degradations,
            connections_open,
            connections_max,
            connections_closed_quiet,
        }
    }
}

impl Metrics {
    /// Every metric in the OpenMetrics text format.
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// A byte count as a gauge value (saturating).
pub(crate) fn gauge_value(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
