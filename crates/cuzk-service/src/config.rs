//! The daemon's configuration: a TOML file in which every field is optional, with command-line flags
//! applied on top. [`DEFAULT_TOML`] documents every field with its default, and a test checks that it
//! parses to [`ServiceConfig::default`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Why a configuration cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The reason.
        #[source]
        source: std::io::Error,
    },
    /// The text is not a valid configuration (TOML syntax, an unknown field, a wrong type).
    #[error("{}{source}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    Parse {
        /// The file, when read from one.
        path: Option<PathBuf>,
        /// The parser's error.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// A field holds a value the daemon cannot use.
    #[error("{field} = {value}: {expected}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// Its value, as written.
        value: String,
        /// What it must be.
        expected: String,
    },
}

/// Where the API listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address (`HOST:PORT`; port 0 picks a free one).
    Tcp(String),
    /// A Unix socket path (`unix:///path`).
    Unix(std::path::PathBuf),
}

/// An address that is neither `HOST:PORT` nor `unix:///path`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// Neither form.
    #[error("{0:?} is neither HOST:PORT nor unix:///path")]
    Unknown(String),
    /// The Unix socket path is empty.
    #[error("{0:?}: the Unix socket path is empty")]
    EmptySocketPath(String),
}

impl std::str::FromStr for Listen {
    type Err = AddressError;

    fn from_str(s: &str) -> Result<Self, AddressError> {
        match s.strip_prefix("unix://") {
            Some("") => Err(AddressError::EmptySocketPath(s.to_owned())),
            Some(path) => Ok(Listen::Unix(path.into())),
            None if s.contains(':') => Ok(Listen::Tcp(s.to_owned())),
            None => Err(AddressError::Unknown(s.to_owned())),
        }
    }
}

/// How the daemon writes its logs (to standard error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// What happens to proofs still queued or running when the daemon is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShutdownPolicy {
    /// Finish them (up to `shutdown_grace_secs`), then cancel what is left.
    Finish,
    /// Cancel them at once.
    Cancel,
}

/// The daemon's settings. See [`DEFAULT_TOML`] for each field's meaning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceConfig {
    /// `HOST:PORT` or `unix:///path/to/socket`.
    pub listen: String,
    /// `HOST:PORT` for Prometheus metrics over HTTP at `/metrics`; empty for none.
    pub metrics_listen: String,
    /// The key directory: keys and recorded shapes, by shape id.
    pub key_dir: PathBuf,
    /// Generate a key that the key directory lacks (and save it there) instead of refusing.
    pub generate_missing_keys: bool,
    /// `auto`, `cpu` or `cuda`.
    pub backend: String,
    /// CUDA device ordinals; empty for every device.
    pub devices: Vec<usize>,
    /// CPU workers synthesizing partitions per key; 0 for the number of cores.
    pub partition_workers: usize,
    /// More synthesis workers per key that take only high and urgent partitions.
    pub priority_workers: usize,
    /// GPU workers per device.
    pub gpu_workers_per_device: usize,
    /// Give each key's large MSMs tables of precomputed multiples of their bases on the GPU, then
    /// fewer, larger batches in the memory left ([`cuzk::Config::msm_tables`]).
    pub msm_tables: bool,
    /// `integer`, `fp64` or `mixed`: the units the GPU's NTT passes and G1's batched MSM round
    /// multiply on ([`cuzk::Config::mul_units`]); the proofs are the same.
    pub mul_units: String,
    /// Timeline spans each key's scheduler keeps (the newest; about 17 per partition), so memory
    /// stays bounded however long the daemon runs.
    pub timeline_spans: usize,
    /// Host memory budget of all keys together, in GiB; 0 for three quarters of the available memory.
    pub host_budget_gib: f64,
    /// Most gRPC connections open at once (lowered to what the open files limit allows).
    pub max_connections: usize,
    /// Most metrics (HTTP) connections open at once.
    pub metrics_max_connections: usize,
    /// Seconds a new connection may take to send its first byte before it is closed.
    pub handshake_timeout_secs: u64,
    /// Seconds a connection may send nothing before it is closed (the gRPC server pings its clients
    /// at half this, so a live client always answers in time).
    pub idle_timeout_secs: u64,
    /// Largest request accepted, in bytes.
    pub max_request_bytes: usize,
    /// Most partitions in one proof.
    pub max_partitions: usize,
    /// Largest circuit a key may be loaded or generated for, as log2 of its rows.
    pub max_log_rows: u32,
    /// Most proofs queued or running (or finished and not yet collected) at once.
    pub max_jobs: usize,
    /// Seconds a finished proof waits to be collected before it is forgotten; 0 for ever.
    pub result_ttl_secs: u64,
    /// Most keys resident (or loading) at once.
    pub max_keys: usize,
    /// What to do with live proofs on SIGINT or SIGTERM.
    pub shutdown: ShutdownPolicy,
    /// How long `shutdown = "finish"` waits before cancelling what is left.
    pub shutdown_grace_secs: u64,
    /// Verify every proof against its key before returning it.
    pub verify_proofs: bool,
    /// Which logs to write: a level (`error`, `warn`, `info`, `debug`, `trace`) or `tracing` filter
    /// directives; `RUST_LOG`, when set, takes precedence.
    pub log_level: String,
    /// `text` or `json`.
    pub log_format: LogFormat,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9820".into(),
            metrics_listen: "127.0.0.1:9821".into(),
            key_dir: PathBuf::from("cuzk-keys"),
            generate_missing_keys: false,
            backend: "auto".into(),
            devices: Vec::new(),
            partition_workers: 0,
            priority_workers: 1,
            gpu_workers_per_device: 2,
            msm_tables: false,
            mul_units: cuzk::MulUnits::default().name().into(),
            timeline_spans: 65536,
            host_budget_gib: 0.0,
            max_connections: 256,
            metrics_max_connections: 16,
            handshake_timeout_secs: 10,
            idle_timeout_secs: 120,
            max_request_bytes: 16 << 20,
            max_partitions: 64,
            max_log_rows: 27,
            max_jobs: 1024,
            result_ttl_secs: 3600,
            max_keys: 8,
            shutdown: ShutdownPolicy::Finish,
            shutdown_grace_secs: 600,
            verify_proofs: true,
            log_level: "info".into(),
            log_format: LogFormat::Text,
        }
    }
}

/// The default configuration as a commented TOML file (`cuzk config --print-default`).
pub const DEFAULT_TOML: &str = r#"# cuzk serve: every field is optional; these are the defaults. Flags of `cuzk serve` override them.

# Where the gRPC API listens: "HOST:PORT" or "unix:///path/to/socket".
listen = "127.0.0.1:9820"
# Prometheus metrics over HTTP at /metrics ("HOST:PORT"); "" for none. Also served by GetMetrics.
metrics_listen = "127.0.0.1:9821"
# The key directory (proving keys and recorded shapes, by shape id). The daemon reads and writes no
# other files.
key_dir = "cuzk-keys"
# LoadKey of a key the directory lacks: generate it (and save it there) instead of refusing. Off by
# default: a generated key is not from a trusted setup, and each one takes disk space.
generate_missing_keys = false
# "auto" (CUDA when a usable GPU and the kernels are present, else the CPU), "cpu" or "cuda".
backend = "auto"
# CUDA device ordinals to prove on; [] for every device.
devices = []
# CPU workers synthesizing partitions, per resident key; 0 for the number of cores.
partition_workers = 0
# More synthesis workers, per resident key, that take only high and urgent proofs: those start at
# once even while every other worker is busy with bulk proofs.
priority_workers = 1
# GPU workers per device (two overlap one partition's upload with another's kernels).
gpu_workers_per_device = 2
# Tables of precomputed multiples for each resident key's MSMs of 2^20 points or more, built on each
# GPU at key load in the memory left beside the key, its recorded shape and a few partitions: faster
# MSMs (H200, G1 2^24: 132 -> 112 ms) for 13 times the bases' memory and seconds of load time. A key
# loaded later gets what the earlier keys' tables left; turn this on where one key has each device
# to itself. What memory is left then gives MSMs of more than 2^24 points fewer, larger batches.
# GetStatus (and a log line each) says which MSMs got a table or larger batches.
msm_tables = false
# The units the GPU's NTT passes and G1's large MSMs multiply on: "integer" (32-bit multiply-adds),
# "fp64" (the FP64 units) or "mixed" (both, alternate warps). The proofs are the same; which is
# fastest is not yet measured (docs/benchmarks/cuda-field-ntt.md): keep the default until it is.
mul_units = "integer"
# Timeline spans each resident key keeps, the newest (about 17 per partition; ~100 bytes each), so
# the daemon's memory stays bounded however long it runs.
timeline_spans = 65536
# Host memory budget of all resident keys together, in GiB (fractions allowed); 0 for three quarters
# of the available memory. Each key holds its host-resident part while resident, each partition its working set until
# it is on the device; a key that does not fit beside the others (with room for a partition) is
# refused.
host_budget_gib = 0
# The most gRPC and metrics connections open at once. More clients wait to be accepted (their first
# call waits) until one closes. Lowered, with a warning, to what the open files limit (ulimit -n)
# leaves room for; `cuzk serve` raises its soft limit to the hard one first.
max_connections = 256
metrics_max_connections = 16
# A connection that sends nothing for handshake_timeout_secs after it opens, or for
# idle_timeout_secs later, is closed. The gRPC server pings its clients every idle_timeout_secs / 2,
# so a client waiting for a long proof stays connected.
handshake_timeout_secs = 10
idle_timeout_secs = 120
# The largest request accepted, in bytes.
max_request_bytes = 16777216
# The most partitions in one proof.
max_partitions = 64
# The largest circuit a key may be loaded or generated for, as log2 of its rows.
max_log_rows = 27
# The most proofs queued, running or finished but not yet collected, at once.
max_jobs = 1024
# Seconds a finished proof is kept for AwaitProof before it is forgotten; 0 keeps it until collected.
result_ttl_secs = 3600
# The most keys resident or loading at once. Each has its own pipeline; all share the host budget.
max_keys = 8
# On SIGINT or SIGTERM the daemon stops accepting proofs, then either lets the live ones finish and
# be collected ("finish", for at most shutdown_grace_secs; then it cancels the rest) or cancels them
# at once ("cancel"). A second signal cancels everything.
shutdown = "finish"
shutdown_grace_secs = 600
# Verify every proof against its key before returning it.
verify_proofs = true
# Logs go to standard error: a level ("error", "warn", "info", "debug", "trace") or filter directives
# such as "info,cuzk_sched=debug" (partition spans and steps are at debug); RUST_LOG, when set, wins.
log_level = "info"
# "text" (human-readable lines) or "json" (one object per line, with the job and partition spans).
log_format = "text"
"#;

/// A numeric field's name, how to read it, and its least and greatest allowed values. The bounds keep
/// every count a thread or allocation count the machine can have, every shift and size within its
/// type (shapes of at most 2^32 rows), and every duration far from overflowing an instant.
type Range = (&'static str, fn(&ServiceConfig) -> u64, u64, u64);

const DAY: u64 = 24 * 3600;

const RANGES: [Range; 15] = [
    ("max_connections", |c| c.max_connections as u64, 1, 1 << 20),
    ("metrics_max_connections", |c| c.metrics_max_connections as u64, 1, 1 << 16),
    ("handshake_timeout_secs", |c| c.handshake_timeout_secs, 1, 3600),
    ("idle_timeout_secs", |c| c.idle_timeout_secs, 2, DAY),
    ("timeline_spans", |c| c.timeline_spans as u64, 1, 1 << 24),
    ("partition_workers", |c| c.partition_workers as u64, 0, 4096),
    ("priority_workers", |c| c.priority_workers as u64, 0, 1024),
    ("gpu_workers_per_device", |c| c.gpu_workers_per_device as u64, 1, 64),
    ("max_request_bytes", |c| c.max_request_bytes as u64, 1 << 10, 1 << 32),
    ("max_partitions", |c| c.max_partitions as u64, 1, 1 << 20),
    ("max_log_rows", |c| u64::from(c.max_log_rows), 2, 32),
    ("max_jobs", |c| c.max_jobs as u64, 1, 1 << 20),
    ("result_ttl_secs", |c| c.result_ttl_secs, 0, 366 * DAY),
    ("max_keys", |c| c.max_keys as u64, 1, 1024),
    ("shutdown_grace_secs", |c| c.shutdown_grace_secs, 0, 7 * DAY),
];

impl ServiceConfig {
    /// Parses a TOML document; unknown fields are errors.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse { path: None, source: Box::new(e) })
    }

    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        toml::from_str(&text)
            .map_err(|e| ConfigError::Parse { path: Some(path.to_owned()), source: Box::new(e) })
    }

    /// The engine configuration these settings ask for.
    pub fn engine(&self) -> Result<cuzk::Config, ConfigError> {
        let backend: cuzk::BackendKind = self.backend.parse().map_err(|e| ConfigError::Invalid {
            field: "backend",
            value: format!("{:?}", self.backend),
            expected: e,
        })?;
        if !(self.host_budget_gib.is_finite() && self.host_budget_gib >= 0.0) {
            return Err(ConfigError::Invalid {
                field: "host_budget_gib",
                value: self.host_budget_gib.to_string(),
                expected: "0 or more GiB".into(),
            });
        }
        let mul_units: cuzk::MulUnits = self.mul_units.parse().map_err(|_| ConfigError::Invalid {
            field: "mul_units",
            value: format!("{:?}", self.mul_units),
            expected: cuzk::MulUnits::ALL.map(|u| format!("{:?}", u.name())).join(", "),
        })?;
        Ok(cuzk::Config {
            backend,
            verify_proofs: self.verify_proofs,
            msm_tables: self.msm_tables,
            mul_units,
            cuda_devices: (!self.devices.is_empty()).then(|| self.devices.clone()),
            ..cuzk::Config::default()
        })
    }

    /// Checks every field the daemon interprets (the backend, the budget, the listen addresses, the
    /// log filter, every count and duration against its range), naming the first that is wrong. The
    /// daemon runs it at start.
    pub fn check(&self) -> Result<(), ConfigError> {
        self.engine()?;
        log_filter(&self.log_level)?;
        for (field, value, lo, hi) in RANGES.iter().map(|(f, get, lo, hi)| (*f, get(self), *lo, *hi)) {
            if !(lo..=hi).contains(&value) {
                return Err(ConfigError::Invalid {
                    field,
                    value: value.to_string(),
                    expected: format!("must be {lo} to {hi}"),
                });
            }
        }
        self.listen.parse::<Listen>().map_err(|e| ConfigError::Invalid {
            field: "listen",
            value: format!("{:?}", self.listen),
            expected: e.to_string(),
        })?;
        Ok(())
    }

    /// The scheduler configuration for one resident key.
    pub fn scheduler(&self) -> cuzk::sched::Config {
        let mut c = cuzk::sched::Config::default();
        if self.partition_workers > 0 {
            c.partition_workers = self.partition_workers;
        }
        c.priority_workers = self.priority_workers;
        c.gpu_workers_per_device = self.gpu_workers_per_device.max(1);
        c.timeline_spans = Some(self.timeline_spans.max(1));
        if self.host_budget_gib > 0.0 {
            // Saturating: a float too large for u64 becomes u64::MAX.
            c.host_budget_bytes = (self.host_budget_gib * (1u64 << 30) as f64) as u64;
        }
        c
    }
}

/// The log filter a `log_level` asks for: a level or `tracing` filter directives.
///
/// arkworks' gadgets open a span (target `gr1cs`, level INFO) for every operation on a bit or a field
/// variable, and a constraint system keeps one per constraint: at `info` a partition's synthesis
/// would spend more time in the log subscriber than in the circuit and hold a span per constraint.
/// They stay off unless the directives name `gr1cs` themselves.
pub fn log_filter(level: &str) -> Result<tracing_subscriber::EnvFilter, ConfigError> {
    directives_filter("log_level", level)
}

/// [`log_filter`] for directives from `field` (`log_level`, or `RUST_LOG`).
pub(crate) fn directives_filter(
    field: &'static str,
    directives: &str,
) -> Result<tracing_subscriber::EnvFilter, ConfigError> {
    let filter = tracing_subscriber::EnvFilter::try_new(directives).map_err(|e| ConfigError::Invalid {
        field,
        value: format!("{directives:?}"),
        expected: format!("a level or filter directives ({e})"),
    })?;
    if directives.contains(GADGET_SPANS) {
        return Ok(filter);
    }
    Ok(match format!("{GADGET_SPANS}=off").parse() {
        Ok(off) => filter.add_directive(off),
        Err(_) => filter,
    })
}

/// The `tracing` target of arkworks' per-gadget spans.
const GADGET_SPANS: &str = "gr1cs";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arkworks_gadget_spans_are_off_unless_asked_for() {
        use tracing_subscriber::layer::SubscriberExt;
        let enabled = |directives: &str| {
            let filter = log_filter(directives).unwrap();
            let subscriber = tracing_subscriber::registry().with(filter);
            tracing::subscriber::with_default(subscriber, || {
                (
                    tracing::span_enabled!(target: "gr1cs", tracing::Level::INFO),
                    tracing::event_enabled!(target: "cuzk_service", tracing::Level::INFO),
                )
            })
        };
        assert_eq!(enabled("info"), (false, true));
        assert_eq!(enabled("trace"), (false, true));
        assert_eq!(enabled("warn,gr1cs=info"), (true, false), "asked for by name");
    }

    #[test]
    fn the_documented_defaults_are_the_defaults() {
        assert_eq!(ServiceConfig::from_toml(DEFAULT_TOML).unwrap(), ServiceConfig::default());
        assert_eq!(ServiceConfig::from_toml("").unwrap(), ServiceConfig::default());
    }

    #[test]
    fn fields_are_optional_and_unknown_ones_refused() {
        let c = ServiceConfig::from_toml("listen = \"unix:///tmp/x.sock\"\nshutdown = \"cancel\"").unwrap();
        assert_eq!(c.listen, "unix:///tmp/x.sock");
        assert_eq!(c.shutdown, ShutdownPolicy::Cancel);
        assert_eq!(c.key_dir, ServiceConfig::default().key_dir);
        let e = ServiceConfig::from_toml("lisen = \"x\"").unwrap_err();
        assert!(e.to_string().contains("lisen"), "{e}");
        assert!(ServiceConfig::from_toml("max_partitions = -1").is_err());
        assert!(ServiceConfig { backend: "tpu".into(), ..ServiceConfig::default() }.engine().is_err());
        assert!(ServiceConfig { host_budget_gib: -1.0, ..ServiceConfig::default() }.engine().is_err());
        assert!(!ServiceConfig::default().engine().unwrap().msm_tables);
        assert!(ServiceConfig::from_toml("msm_tables = true").unwrap().engine().unwrap().msm_tables);
        assert_eq!(ServiceConfig::default().engine().unwrap().mul_units, cuzk::MulUnits::Integer);
        let mixed = ServiceConfig::from_toml("mul_units = \"mixed\"").unwrap().engine().unwrap();
        assert_eq!(mixed.mul_units, cuzk::MulUnits::Mixed);
        let err = ServiceConfig::from_toml("mul_units = \"fp32\"").unwrap().engine().unwrap_err().to_string();
        assert!(err.contains("mul_units") && err.contains("fp32"), "{err}");
        let half = ServiceConfig::from_toml("host_budget_gib = 0.5").unwrap();
        assert_eq!(half.scheduler().host_budget_bytes, 1 << 29);
    }

    #[test]
    fn every_count_and_duration_is_range_checked_naming_the_field() {
        assert!(ServiceConfig::default().check().is_ok());
        for (toml, field) in [
            ("shutdown_grace_secs = 9223372036854775807", "shutdown_grace_secs"),
            ("max_log_rows = 100", "max_log_rows"),
            ("max_log_rows = 1", "max_log_rows"),
            ("result_ttl_secs = 18446744073709551615", "result_ttl_secs"),
            ("gpu_workers_per_device = 0", "gpu_workers_per_device"),
            ("partition_workers = 1000000", "partition_workers"),
            ("max_jobs = 0", "max_jobs"),
            ("max_keys = 0", "max_keys"),
            ("max_partitions = 0", "max_partitions"),
            ("max_request_bytes = 10", "max_request_bytes"),
            ("max_connections = 0", "max_connections"),
            ("idle_timeout_secs = 0", "idle_timeout_secs"),
            ("handshake_timeout_secs = 86400", "handshake_timeout_secs"),
        ] {
            let c = ServiceConfig::from_toml(toml).unwrap();
            let e = c.check().expect_err(toml).to_string();
            assert!(e.contains(field), "{toml}: {e}");
        }
        // The edges are allowed.
        let edges = "max_log_rows = 32\nshutdown_grace_secs = 604800\ngpu_workers_per_device = 64";
        ServiceConfig::from_toml(edges).unwrap().check().unwrap();
    }
}
