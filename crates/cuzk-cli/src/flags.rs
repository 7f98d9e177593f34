//! Every command's flags, in one place: `cuzk prove`, `cuzk bench` (and `bench synth`, `bench load`,
//! `bench daemon`), `cuzk keygen`, `cuzk timeline`, `cuzk serve` and `cuzk config`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use cuzk::BackendKind;
use serde::Serialize;

#[derive(Parser)]
#[command(name = "cuzk", version, about = "A Groth16 proving engine for BLS12-381")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Generate a key for the built-in synthetic circuit, prove partitions, verify them, report times.
    Prove(Workload),
    /// Prove repeatedly, side by side with ark-groth16 on the same partitions and randomness, and
    /// report each figure's median, minimum and maximum; `cuzk bench synth` measures synthesis alone.
    ///
    /// Both sides prove one partition untimed first, then take turns, --repeat times: a cuzk run,
    /// an ark-groth16 run. ark-groth16 proves the partitions one after another, each with all cores
    /// (its own parallelism). cuzk proves them all at once: without --pipeline each partition is
    /// synthesized and proved by its own task (the GPUs taken in turn); with --pipeline, through the
    /// scheduler (partition workers synthesize while GPU workers upload and prove). Every run's proofs
    /// must equal ark-groth16's. Two ratios: end to end (median wall over median wall, synthesis on
    /// both sides) and GPU time (ark-groth16's proving after its synthesis over cuzk's device time of
    /// the witness map and MSMs).
    #[command(args_conflicts_with_subcommands = true)]
    Bench(BenchArgs),
    /// Generate a proving key for a built-in circuit and save it, with its recorded R1CS shape, to a
    /// key store.
    Keygen(KeygenArgs),
    /// Run the proving daemon: gRPC on TCP or a Unix socket, metrics over HTTP, until SIGINT or
    /// SIGTERM.
    Serve(ServeArgs),
    /// Print the daemon's default configuration, or check a configuration file.
    Config(ConfigArgs),
    /// Summarise a pipeline timeline (JSON lines as the scheduler writes them): kernel utilisation from
    /// the kernel spans (placed by the device clock on a GPU) beside the lock-bracket figure, the
    /// device's idle time by cause, per-proof times.
    Timeline(TimelineArgs),
    /// Filecoin's own proofs: seal a test sector, prove PoRep C2 from a C1 output, prove a PoSt,
    /// verify with Filecoin's verifier.
    Filecoin(crate::filecoin::FilecoinArgs),
}

/// Flags of `cuzk timeline`.
#[derive(Args)]
pub(crate) struct TimelineArgs {
    /// The timeline file.
    pub(crate) file: PathBuf,
    /// Also write it as a Chrome trace (opens in Perfetto).
    #[arg(long)]
    pub(crate) chrome: Option<PathBuf>,
    /// Also draw it as a Gantt chart (SVG): a row per synthesis worker, GPU worker and device.
    #[arg(long)]
    pub(crate) svg: Option<PathBuf>,
}

/// Flags of `cuzk bench`.
#[derive(Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    pub(crate) what: Option<BenchWhat>,
    #[command(flatten)]
    pub(crate) workload: Workload,
    /// Timed repetitions of each side (median, minimum and maximum are reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub(crate) repeat: u64,
    /// Skip the ark-groth16 baseline.
    #[arg(long)]
    pub(crate) no_baseline: bool,
}

#[derive(Subcommand)]
pub(crate) enum BenchWhat {
    /// Synthesize partitions (no proving) and report the rate, full or witness-only.
    Synth(SynthArgs),
    /// Load a key and its recorded shape from a key store (written by `cuzk keygen`) into the engine,
    /// and report the times and throughput.
    Load(LoadArgs),
    /// A bounded load test against the daemon (in-process, or `--connect ADDR`): clients keep large
    /// proofs in flight while urgent small ones are sent; sweeps partition workers, GPU workers and
    /// proofs in flight; every proof is checked against the verifying key.
    Daemon(DaemonArgs),
}

/// Flags of `cuzk bench load`.
#[derive(Args)]
pub(crate) struct LoadArgs {
    #[command(flatten)]
    pub(crate) circuit: CircuitChoice,
    /// The key store's directory.
    #[arg(long, default_value = "cuzk-keys")]
    pub(crate) key_dir: PathBuf,
    /// Timed loads (their median, minimum and maximum are reported; the file is in the page cache
    /// after the first).
    #[arg(long, default_value_t = 3)]
    pub(crate) repeat: usize,
    /// The backend the key is made resident on: cpu, cuda or auto.
    #[arg(long, default_value = "auto")]
    pub(crate) backend: BackendKind,
    /// CUDA devices to load onto, by ordinal, comma-separated (default: every device).
    #[arg(long, value_delimiter = ',')]
    pub(crate) devices: Option<Vec<usize>>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// A built-in circuit at a size.
#[derive(Args, Clone)]
pub(crate) struct CircuitChoice {
    /// The circuit.
    #[arg(long, value_enum, default_value_t = CircuitName::PorepLike)]
    pub(crate) circuit: CircuitName,
    /// log2 of the rows per partition (constraints + instance variables); porep-like takes 10 to 27.
    #[arg(long, short = 'k', default_value_t = 16, value_parser = clap::value_parser!(u32).range(2..=28))]
    pub(crate) log_constraints: u32,
    /// Per mille of bit rows in the synthetic circuit.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=1000))]
    pub(crate) bit_share: u16,
    /// Seed of the circuit (the replica, for porep-like) and its witnesses.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
}

/// `--mul-units`: the engine's [`cuzk::MulUnits`].
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MulUnitsArg {
    Integer,
    Fp64,
    Mixed,
}

impl From<MulUnitsArg> for cuzk::MulUnits {
    fn from(u: MulUnitsArg) -> Self {
        match u {
            MulUnitsArg::Integer => Self::Integer,
            MulUnitsArg::Fp64 => Self::Fp64,
            MulUnitsArg::Mixed => Self::Mixed,
        }
    }
}

/// A built-in workload circuit, by name.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CircuitName {
    /// The PoRep-shaped partition circuit (SHA-256 labels, Poseidon Merkle paths).
    PorepLike,
    /// The synthetic chain.
    Synthetic,
}

/// Flags of `cuzk keygen`.
#[derive(Args)]
pub(crate) struct KeygenArgs {
    #[command(flatten)]
    pub(crate) circuit: CircuitChoice,
    /// The key store's directory (created when missing).
    #[arg(long, default_value = "cuzk-keys")]
    pub(crate) key_dir: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Full or witness-only synthesis, for `cuzk bench synth`.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum SynthMode {
    /// Build the matrices for every partition (`cuzk_synth::synthesize`).
    Full,
    /// Record the shape once, then only the witness and a sparse product per partition.
    WitnessOnly,
    /// Record the shape once, then only the witness in its compact form per partition (the host's
    /// share when the GPU evaluates a, b, c).
    Compact,
}

/// Flags of `cuzk bench synth`.
#[derive(Args)]
pub(crate) struct SynthArgs {
    #[command(flatten)]
    pub(crate) circuit: CircuitChoice,
    /// Partitions to synthesize (in parallel).
    #[arg(long, short = 'p', default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub(crate) partitions: u64,
    /// Full synthesis or witness-only synthesis.
    #[arg(long, value_enum, default_value_t = SynthMode::Full)]
    pub(crate) mode: SynthMode,
    /// Worker threads (default: the number of cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The workload of `cuzk prove` and `cuzk bench`.
#[derive(Args, Clone)]
pub(crate) struct Workload {
    /// The circuit.
    #[arg(long, value_enum, default_value_t = CircuitName::Synthetic)]
    pub(crate) circuit: CircuitName,
    /// log2 of the rows per partition (constraints + instance variables); porep-like takes 10 to 27.
    #[arg(long, short = 'k', default_value_t = 16, value_parser = clap::value_parser!(u32).range(2..=28))]
    pub(crate) log_constraints: u32,
    /// Per mille of bit rows in the synthetic circuit.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=1000))]
    pub(crate) bit_share: u16,
    /// Proofs, each of --partitions partitions (more than one needs --pipeline, which submits them
    /// as separate jobs).
    #[arg(long, default_value_t = 1, requires = "pipeline", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub(crate) proofs: u64,
    /// Partitions per proof (same circuit shape, different witnesses).
    #[arg(long, short = 'p', default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub(crate) partitions: u64,
    /// Backend: cpu, cuda or auto.
    #[arg(long, default_value = "auto")]
    pub(crate) backend: BackendKind,
    /// CUDA devices to prove on, by ordinal, comma-separated (default: every device).
    #[arg(long, value_delimiter = ',')]
    pub(crate) devices: Option<Vec<usize>>,
    /// Seed of the circuits' witnesses, the key and the blinding scalars.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Prove through the scheduler: partition workers synthesize while the backend proves.
    #[arg(long)]
    pub(crate) pipeline: bool,
    /// Synthesis workers with --pipeline (default: the number of cores).
    #[arg(long, requires = "pipeline")]
    pub(crate) partition_workers: Option<usize>,
    /// GPU workers per device with --pipeline (default 2): one uploads the next partition while the
    /// other's kernels run.
    #[arg(long, requires = "pipeline", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub(crate) gpu_workers: Option<u64>,
    /// With --pipeline, one lock for upload and kernels instead of two (to measure what the split buys).
    #[arg(long, requires = "pipeline")]
    pub(crate) merge_locks: bool,
    /// With --pipeline, also prove the same partitions with one GPU worker and with the two locks
    /// merged into one, after the main runs, and report the three side by side (their proofs must
    /// equal the main run's).
    #[arg(long, requires = "pipeline")]
    pub(crate) compare: bool,
    /// With --pipeline, write the last run's timeline here as JSON lines (see `cuzk timeline`).
    #[arg(long, requires = "pipeline")]
    pub(crate) timeline: Option<PathBuf>,
    /// Record the circuit's R1CS shape when loading the key, so partitions are synthesized
    /// witness-only (the default synthesizes them in full).
    #[arg(long)]
    pub(crate) witness_only: bool,
    /// With --witness-only on a GPU, evaluate a, b, c on the host and upload them in full, instead of
    /// uploading the compact assignment and evaluating the key's shape on the device (to measure what
    /// the device evaluation buys).
    #[arg(long, requires = "witness_only")]
    pub(crate) host_evaluation: bool,
    /// On a GPU, give the key's MSMs no tables of precomputed multiples (to measure what the tables
    /// buy). By default this command, which loads one key, has them built where device memory allows
    /// (the engine's own default, for processes holding several keys, is without).
    #[arg(long)]
    pub(crate) no_msm_tables: bool,
    /// On a GPU, the units the NTT passes and G1's batched MSM round multiply on: `integer` (the
    /// default), `fp64`, or `mixed` (both, alternate warps). The proofs are the same.
    #[arg(long, value_enum, default_value_t = MulUnitsArg::Integer)]
    pub(crate) mul_units: MulUnitsArg,
    /// Use a timing key instead of a setup: the real key's shape and points at infinity, made in
    /// seconds even at 2^24 rows, but its proofs do not verify. Instead of the self-check, every
    /// proof is compared with ark-groth16's proof for the key in closed form (see
    /// the timing-key module of this crate), after the timed runs; any difference fails the command.
    #[arg(long)]
    pub(crate) timing_key: bool,
    /// With --timing-key, check only this many partitions (spread evenly over the run, the first and
    /// the last included) against the closed form instead of all; the report says how many were
    /// checked. For large runs, where each check costs a CPU synthesis and witness map; 0 checks
    /// none (at 2^27 rows one check is arkworks' full synthesis of the partition: minutes and tens
    /// of GiB), and the report says so.
    #[arg(long, requires = "timing_key")]
    pub(crate) check_sample: Option<u64>,
}

/// Flags of `cuzk bench daemon`.
#[derive(Debug, Clone, Args)]
pub(crate) struct DaemonArgs {
    /// A running daemon (`HOST:PORT` or `unix:///path`); without it, one is started in this process
    /// for each sweep point, on a loopback port.
    #[arg(long)]
    pub(crate) connect: Option<String>,
    /// The circuit kind of the large and the urgent proofs.
    #[arg(long, default_value = "porep-like")]
    pub(crate) circuit: String,
    /// log2 of the rows of a large proof's partitions.
    #[arg(long, short = 'k', default_value_t = 12)]
    pub(crate) log_constraints: u32,
    /// Partitions per large proof.
    #[arg(long, short = 'p', default_value_t = 4)]
    pub(crate) partitions: usize,
    /// Large proofs in all.
    #[arg(long, default_value_t = 8)]
    pub(crate) proofs: usize,
    /// log2 of the rows of an urgent proof's single partition, with its own key (and so its own
    /// pipeline); by default urgent proofs are one-partition proofs on the large proofs' key, so they
    /// overtake queued partitions in the same scheduler.
    #[arg(long)]
    pub(crate) urgent_log_constraints: Option<u32>,
    /// Urgent proofs, sent one after another while the large ones run.
    #[arg(long, default_value_t = 4)]
    pub(crate) urgent: usize,
    /// Proofs in flight (concurrent clients of large proofs); comma-separated to sweep.
    #[arg(long, value_delimiter = ',', default_value = "2")]
    pub(crate) in_flight: Vec<usize>,
    /// Partition workers of the in-process daemon; comma-separated to sweep (default: its default).
    #[arg(long, value_delimiter = ',')]
    pub(crate) partition_workers: Vec<usize>,
    /// Synthesis workers for high and urgent proofs only, of the in-process daemon; comma-separated to
    /// sweep.
    #[arg(long, value_delimiter = ',')]
    pub(crate) priority_workers: Vec<usize>,
    /// GPU workers per device of the in-process daemon; comma-separated to sweep.
    #[arg(long, value_delimiter = ',')]
    pub(crate) gpu_workers: Vec<usize>,
    /// The in-process daemon's backend.
    #[arg(long, default_value = "auto")]
    pub(crate) backend: String,
    /// Give the in-process daemon's keys tables of precomputed multiples for their MSMs (its
    /// `msm_tables` setting); the report lists the tables.
    #[arg(long)]
    pub(crate) msm_tables: bool,
    /// The in-process daemon's key directory.
    #[arg(long, default_value = "cuzk-keys")]
    pub(crate) key_dir: PathBuf,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Flags of `cuzk serve`; each overrides the configuration file.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The configuration file (TOML; `cuzk config --print-default` shows every field).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// `HOST:PORT` or `unix:///path/to/socket`.
    #[arg(long)]
    pub(crate) listen: Option<String>,
    /// `HOST:PORT` for `GET /metrics`; "" for none.
    #[arg(long)]
    pub(crate) metrics_listen: Option<String>,
    /// The key directory.
    #[arg(long)]
    pub(crate) key_dir: Option<PathBuf>,
    /// `auto`, `cpu` or `cuda`.
    #[arg(long)]
    pub(crate) backend: Option<String>,
    /// CUDA devices, e.g. `0,1`.
    #[arg(long, value_delimiter = ',')]
    pub(crate) devices: Option<Vec<usize>>,
    /// CPU workers synthesizing partitions per key.
    #[arg(long)]
    pub(crate) partition_workers: Option<usize>,
    /// Synthesis workers per key for high and urgent proofs only.
    #[arg(long)]
    pub(crate) priority_workers: Option<usize>,
    /// GPU workers per device.
    #[arg(long)]
    pub(crate) gpu_workers: Option<usize>,
    /// Host memory budget of all keys, GiB (0: three quarters of the available memory).
    #[arg(long)]
    pub(crate) host_budget_gib: Option<f64>,
    /// Generate (and save) keys the key directory lacks on LoadKey instead of refusing
    /// (`--generate-missing-keys=false` undoes a configuration file's `true`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) generate_missing_keys: Option<bool>,
    /// Tables of precomputed multiples for the keys' MSMs (`--msm-tables=false` undoes a
    /// configuration file's `true`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) msm_tables: Option<bool>,
    /// The units the GPU's NTT passes and large G1 MSMs multiply on: integer, fp64 or mixed.
    #[arg(long)]
    pub(crate) mul_units: Option<String>,
    /// Most proofs live or uncollected at once.
    #[arg(long)]
    pub(crate) max_jobs: Option<usize>,
    /// Most keys resident at once.
    #[arg(long)]
    pub(crate) max_keys: Option<usize>,
    /// Most partitions in one proof.
    #[arg(long)]
    pub(crate) max_partitions: Option<usize>,
    /// Largest request, bytes.
    #[arg(long)]
    pub(crate) max_request_bytes: Option<usize>,
    /// Seconds a finished proof waits to be collected (0: until collected).
    #[arg(long)]
    pub(crate) result_ttl_secs: Option<u64>,
    /// Check every proof against its key before returning it (`--verify-proofs=false` skips it).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) verify_proofs: Option<bool>,
    /// On SIGINT or SIGTERM: `finish` live proofs or `cancel` them.
    #[arg(long)]
    pub(crate) shutdown: Option<String>,
    /// How long `--shutdown finish` waits before cancelling, seconds.
    #[arg(long)]
    pub(crate) shutdown_grace_secs: Option<u64>,
    /// Which logs to write: a level or `tracing` filter directives (`RUST_LOG` wins when set).
    #[arg(long)]
    pub(crate) log_level: Option<String>,
    /// `text` or `json` logs on standard error.
    #[arg(long, value_parser = parse_log_format)]
    pub(crate) log_format: Option<cuzk_service::LogFormat>,
}

fn parse_log_format(s: &str) -> Result<cuzk_service::LogFormat, String> {
    match s {
        "text" => Ok(cuzk_service::LogFormat::Text),
        "json" => Ok(cuzk_service::LogFormat::Json),
        other => Err(format!("{other:?}: expected text or json")),
    }
}

/// Flags of `cuzk config`.
#[derive(Debug, Args)]
pub(crate) struct ConfigArgs {
    /// Print the default configuration, every field documented.
    #[arg(long)]
    pub(crate) print_default: bool,
    /// Check a configuration file and print it as the daemon reads it.
    #[arg(long)]
    pub(crate) check: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::MulUnitsArg;
    use clap::ValueEnum;

    #[test]
    fn mul_units_are_spelled_on_the_command_line_as_the_engine_names_them() {
        for arg in MulUnitsArg::value_variants() {
            let spelled = arg.to_possible_value().expect("no variant is skipped");
            let units = cuzk::MulUnits::from(*arg);
            assert_eq!(spelled.get_name(), units.name());
            assert_eq!(spelled.get_name().parse::<cuzk::MulUnits>(), Ok(units));
        }
        assert_eq!(MulUnitsArg::value_variants().len(), cuzk::MulUnits::ALL.len());
    }
}
