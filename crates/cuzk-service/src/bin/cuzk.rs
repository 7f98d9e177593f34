//! The `cuzk` command line: prove and benchmark built-in circuits, generate and store their keys.

#![forbid(unsafe_code)]

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use ark_bls12_381::{Bls12_381, Fr};
use ark_ff::UniformRand;
use ark_groth16::Groth16;
use clap::{Args, Parser, Subcommand};
use cuzk::{circuits::Synthetic, BackendKind, Config, Engine, ProofReport};
use rand::{rngs::StdRng, SeedableRng};
use serde::Serialize;

#[derive(Parser)]
#[command(name = "cuzk", version, about = "A Groth16 proving engine for BLS12-381")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a key for the built-in synthetic circuit, prove partitions, verify them, report times.
    Prove(Workload),
    /// Prove repeatedly and report medians, side by side with ark-groth16 on the same circuits (run
    /// once; every repetition's proofs must equal its proofs); `cuzk bench synth` measures synthesis
    /// alone.
    #[command(args_conflicts_with_subcommands = true)]
    Bench {
        #[command(subcommand)]
        what: Option<BenchWhat>,
        #[command(flatten)]
        workload: Workload,
        /// Timed repetitions (the median is reported).
        #[arg(long, default_value_t = 3)]
        repeat: usize,
        /// Skip the ark-groth16 baseline.
        #[arg(long)]
        no_baseline: bool,
    },
    /// Generate a proving key for a built-in circuit and save it, with its recorded R1CS shape, to a
    /// key store.
    Keygen(KeygenArgs),
    /// Run the proving daemon: gRPC on TCP or a Unix socket, metrics over HTTP, until SIGINT or
    /// SIGTERM.
    Serve(cuzk_service::cli::ServeArgs),
    /// Print the daemon's default configuration, or check a configuration file.
    Config(cuzk_service::cli::ConfigArgs),
    /// Summarise a pipeline timeline (JSON lines as the scheduler writes them): kernel utilisation from
    /// device-measured kernel time beside the lock-bracket figure, gaps by cause, per-proof times.
    Timeline {
        /// The timeline file.
        file: std::path::PathBuf,
        /// Also write it as a Chrome trace (opens in Perfetto).
        #[arg(long)]
        chrome: Option<std::path::PathBuf>,
        /// Also draw it as a Gantt chart (SVG): a row per synthesis worker, GPU worker and device.
        #[arg(long)]
        svg: Option<std::path::PathBuf>,
    },
}

#[derive(Subcommand)]
enum BenchWhat {
    /// Synthesize partitions (no proving) and report the rate, full or witness-only.
    Synth(SynthArgs),
    /// Load a key and its recorded shape from a key store (written by `cuzk keygen`) into the engine,
    /// and report the times and throughput.
    Load(LoadArgs),
    /// A bounded load test against the daemon (in-process, or `--connect ADDR`): clients keep large
    /// proofs in flight while urgent small ones are sent; sweeps partition workers, GPU workers and
    /// proofs in flight; every proof is checked against the verifying key.
    Daemon(cuzk_service::load::LoadArgs),
}

#[derive(Args)]
struct LoadArgs {
    #[command(flatten)]
    circuit: CircuitChoice,
    /// The key store's directory.
    #[arg(long, default_value = "cuzk-keys")]
    key_dir: std::path::PathBuf,
    /// Timed loads (the median is reported; the file is in the page cache after the first).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct LoadOutput {
    command: &'static str,
    circuit: &'static str,
    shape_id: String,
    log_constraints: u32,
    constraints: usize,
    synthesis_mode: &'static str,
    key_bytes: u64,
    key_bytes_per_constraint: f64,
    /// Median key-file load (read, checksum, decode).
    key_file_seconds: f64,
    key_file_gb_per_s: f64,
    /// Median of the whole `Engine::load_key_from_store` (key file, shape file, making the key resident).
    engine_load_seconds: f64,
    repeats: usize,
}

fn bench_load(a: &LoadArgs) -> Result<LoadOutput, Box<dyn std::error::Error>> {
    let shape_id = a.circuit.shape_id()?;
    let store = cuzk_keystore::KeyStore::open(&a.key_dir)?;
    let engine = Engine::new(Config::cpu())?;
    let (mut file, mut whole) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..a.repeat.max(1) {
        drop(last.take());
        let t = Instant::now();
        let (key, report) = engine.load_key_from_store(&store, &shape_id)?;
        whole.push(t.elapsed().as_secs_f64());
        file.push(report.seconds);
        last = Some((key, report.bytes));
    }
    let (key, bytes) = last.ok_or("no load ran")?;
    let constraints = key.shape().map(|s| s.counts().constraints).unwrap_or_default();
    let key_file_seconds = median(file);
    Ok(LoadOutput {
        command: "bench load",
        circuit: a.circuit.name(),
        shape_id,
        log_constraints: a.circuit.log_constraints,
        constraints,
        synthesis_mode: engine.synthesis_mode(&key).name(),
        key_bytes: bytes,
        key_bytes_per_constraint: if constraints > 0 { bytes as f64 / constraints as f64 } else { 0.0 },
        key_file_seconds,
        key_file_gb_per_s: if key_file_seconds > 0.0 { bytes as f64 / key_file_seconds / 1e9 } else { 0.0 },
        engine_load_seconds: median(whole),
        repeats: a.repeat.max(1),
    })
}

/// A built-in circuit at a size.
#[derive(Args, Clone)]
struct CircuitChoice {
    /// The circuit.
    #[arg(long, value_enum, default_value_t = CircuitKind::PorepLike)]
    circuit: CircuitKind,
    /// log2 of the rows per partition (constraints + instance variables); porep-like takes 10 to 27.
    #[arg(long, short = 'k', default_value_t = 16, value_parser = clap::value_parser!(u32).range(2..=28))]
    log_constraints: u32,
    /// Per mille of bit rows in the synthetic circuit.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=1000))]
    bit_share: u16,
    /// Seed of the circuit (the replica, for porep-like) and its witnesses.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum CircuitKind {
    /// The PoRep-shaped partition circuit (SHA-256 labels, Poseidon Merkle paths).
    PorepLike,
    /// The synthetic chain.
    Synthetic,
}

/// One partition of a built-in circuit.
#[derive(Clone, Copy)]
enum BuiltIn {
    Porep(cuzk::circuits::PorepLike),
    Synthetic(Synthetic),
}

impl cuzk::ConstraintSynthesizer<Fr> for BuiltIn {
    fn generate_constraints(
        self,
        cs: ark_relations::gr1cs::ConstraintSystemRef<Fr>,
    ) -> Result<(), cuzk::SynthesisError> {
        match self {
            Self::Porep(c) => c.generate_constraints(cs),
            Self::Synthetic(c) => c.generate_constraints(cs),
        }
    }
}

impl CircuitChoice {
    /// Partition `p` of the workload.
    fn partition(&self, p: u64) -> Result<BuiltIn, String> {
        Ok(match self.circuit {
            CircuitKind::PorepLike => BuiltIn::Porep(
                cuzk::circuits::PorepLike::for_log_constraints(self.log_constraints, self.seed, p)
                    .map_err(|e| e.to_string())?,
            ),
            CircuitKind::Synthetic => BuiltIn::Synthetic(
                Synthetic::with_log_rows(self.log_constraints, self.seed.wrapping_add(p))
                    .with_bit_share(self.bit_share),
            ),
        })
    }

    fn name(&self) -> &'static str {
        match self.circuit {
            CircuitKind::PorepLike => "porep-like",
            CircuitKind::Synthetic => "synthetic",
        }
    }

    /// The key-store name of the shape.
    fn shape_id(&self) -> Result<String, String> {
        Ok(match self.partition(0)? {
            BuiltIn::Porep(c) => c.params.shape_id(),
            BuiltIn::Synthetic(c) => c.shape_id(),
        })
    }
}

#[derive(Args)]
struct KeygenArgs {
    #[command(flatten)]
    circuit: CircuitChoice,
    /// The key store's directory (created when missing).
    #[arg(long, default_value = "cuzk-keys")]
    key_dir: std::path::PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct KeygenOutput {
    circuit: &'static str,
    shape_id: String,
    log_constraints: u32,
    constraints: usize,
    keygen_seconds: f64,
    key_path: std::path::PathBuf,
    key_bytes: u64,
    save_seconds: f64,
    shape_path: std::path::PathBuf,
    shape_seconds: f64,
}

fn keygen(a: &KeygenArgs) -> Result<KeygenOutput, Box<dyn std::error::Error>> {
    let shape_id = a.circuit.shape_id()?;
    let circuit = a.circuit.partition(0)?;
    let store = cuzk_keystore::KeyStore::open(&a.key_dir)?;
    let mut rng = StdRng::seed_from_u64(a.circuit.seed);
    let t = Instant::now();
    let pk = Groth16::<Bls12_381>::generate_random_parameters_with_reduction(circuit, &mut rng)?;
    let keygen_seconds = t.elapsed().as_secs_f64();
    let saved = store.save(&shape_id, &pk)?;
    let t = Instant::now();
    let shape = cuzk_synth::R1csShape::record(circuit)?;
    let shape_saved = store.save_shape(&shape_id, &shape)?;
    Ok(KeygenOutput {
        circuit: a.circuit.name(),
        shape_id,
        log_constraints: a.circuit.log_constraints,
        constraints: shape.counts().constraints,
        keygen_seconds,
        key_path: saved.path,
        key_bytes: saved.bytes,
        save_seconds: saved.seconds,
        shape_path: shape_saved.path,
        shape_seconds: t.elapsed().as_secs_f64(),
    })
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum SynthMode {
    /// Build the matrices for every partition (`cuzk_synth::synthesize`).
    Full,
    /// Record the shape once, then only the witness and a sparse product per partition.
    WitnessOnly,
}

#[derive(Args)]
struct SynthArgs {
    #[command(flatten)]
    circuit: CircuitChoice,
    /// Partitions to synthesize (in parallel).
    #[arg(long, short = 'p', default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1024))]
    partitions: u64,
    /// Full synthesis or witness-only synthesis.
    #[arg(long, value_enum, default_value_t = SynthMode::Full)]
    mode: SynthMode,
    /// Worker threads (default: the number of cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct SynthOutput {
    command: &'static str,
    mode: SynthMode,
    circuit: &'static str,
    log_constraints: u32,
    constraints: usize,
    partitions: u64,
    threads: usize,
    /// Wall time of synthesizing every partition (recording the shape excluded).
    seconds: f64,
    /// Constraints of all partitions per second of `seconds`.
    constraints_per_second: f64,
    /// Witness-only: recording the shape (once per shape, not per proof).
    record_seconds: Option<f64>,
    /// Witness-only: the estimated peak bytes of one partition's synthesis.
    peak_bytes_per_partition: Option<u64>,
}

fn bench_synth(a: &SynthArgs) -> Result<SynthOutput, Box<dyn std::error::Error>> {
    use rayon::prelude::*;
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(n) = a.threads {
        builder = builder.num_threads(n);
    }
    let pool = builder.build()?;
    let circuits = (0..a.partitions).map(|p| a.circuit.partition(p)).collect::<Result<Vec<_>, _>>()?;
    let options = cuzk_synth::SynthesisOptions { check_satisfied: false };
    let (seconds, constraints, record_seconds, peak) =
        pool.install(|| -> Result<_, cuzk_synth::SynthError> {
            match a.mode {
                SynthMode::Full => {
                    let t = Instant::now();
                    let done = circuits
                        .into_par_iter()
                        .map(|c| cuzk_synth::synthesize(c, &options).map(|s| s.counts().constraints))
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok((t.elapsed().as_secs_f64(), done[0], None, None))
                }
                SynthMode::WitnessOnly => {
                    let t = Instant::now();
                    let shape = cuzk_synth::R1csShape::record(circuits[0])?;
                    let record = t.elapsed().as_secs_f64();
                    let t = Instant::now();
                    let peaks = circuits
                        .into_par_iter()
                        .map(|c| {
                            cuzk_synth::synthesize_witness_only(c, &shape, &options).map(|(_, peak)| peak)
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok((
                        t.elapsed().as_secs_f64(),
                        shape.counts().constraints,
                        Some(record),
                        peaks.first().copied(),
                    ))
                }
            }
        })?;
    Ok(SynthOutput {
        command: "bench synth",
        mode: a.mode,
        circuit: a.circuit.name(),
        log_constraints: a.circuit.log_constraints,
        constraints,
        partitions: a.partitions,
        threads: pool.current_num_threads(),
        seconds,
        constraints_per_second: (constraints as f64 * a.partitions as f64) / seconds.max(1e-9),
        record_seconds,
        peak_bytes_per_partition: peak,
    })
}

/// Prints `out` as pretty JSON or through `text`, or the error and its causes; exits 1 on error.
fn finish<T: Serialize>(json: bool, out: Result<T, Box<dyn std::error::Error>>, text: impl Fn(&T)) {
    match out {
        Ok(out) if json => println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default()),
        Ok(out) => text(&out),
        Err(e) => report_error(e.as_ref()),
    }
}

fn report_error(e: &dyn std::error::Error) -> ! {
    eprintln!("error: {e}");
    let mut source = e.source();
    while let Some(s) = source {
        eprintln!("  caused by: {s}");
        source = s.source();
    }
    std::process::exit(1);
}

fn timeline(
    file: &std::path::Path,
    chrome: Option<&std::path::Path>,
    svg: Option<&std::path::Path>,
) -> Result<(), String> {
    use cuzk_sched::report::{parse_json_lines, TimelineReport};
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let spans = parse_json_lines(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    if spans.is_empty() {
        return Err(format!("{}: no spans", file.display()));
    }
    let report = TimelineReport::from_spans(&spans);
    print!("{}", report.render());
    if let Some(out) = svg {
        let title = format!(
            "{}: kernel utilisation {:.1}% over a {:.3} s kernel window",
            file.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            100.0 * report.kernel_utilization,
            report.window_s
        );
        let drawing = cuzk_sched::svg::gantt(&spans, &title)?;
        std::fs::write(out, drawing).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    if let Some(out) = chrome {
        let t = cuzk_sched::Timeline::new();
        spans.into_iter().for_each(|s| t.push(s));
        std::fs::write(out, t.to_chrome_trace())
            .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    Ok(())
}

#[derive(Args, Clone)]
struct Workload {
    /// The circuit.
    #[arg(long, value_enum, default_value_t = CircuitKind::Synthetic)]
    circuit: CircuitKind,
    /// log2 of the rows per partition (constraints + instance variables); porep-like takes 10 to 27.
    #[arg(long, short = 'k', default_value_t = 16, value_parser = clap::value_parser!(u32).range(2..=28))]
    log_constraints: u32,
    /// Per mille of bit rows in the synthetic circuit.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=1000))]
    bit_share: u16,
    /// Proofs, each of --partitions partitions (more than one needs --pipeline, which submits them
    /// as separate jobs).
    #[arg(long, default_value_t = 1, requires = "pipeline", value_parser = clap::value_parser!(u64).range(1..=1024))]
    proofs: u64,
    /// Partitions per proof (same circuit shape, different witnesses).
    #[arg(long, short = 'p', default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1024))]
    partitions: u64,
    /// Backend: cpu, cuda or auto.
    #[arg(long, default_value = "auto")]
    backend: BackendKind,
    /// CUDA devices to prove on, by ordinal, comma-separated (default: every device).
    #[arg(long, value_delimiter = ',')]
    devices: Option<Vec<usize>>,
    /// Seed of the circuits' witnesses, the key and the blinding scalars.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Prove through the scheduler: partition workers synthesize while the backend proves.
    #[arg(long)]
    pipeline: bool,
    /// Synthesis workers with --pipeline (default: the number of cores).
    #[arg(long)]
    partition_workers: Option<usize>,
    /// GPU workers per device with --pipeline (default 2): one uploads the next partition while the
    /// other's kernels run.
    #[arg(long, requires = "pipeline", value_parser = clap::value_parser!(u64).range(1..=64))]
    gpu_workers: Option<u64>,
    /// With --pipeline, one lock for upload and kernels instead of two (to measure what the split buys).
    #[arg(long, requires = "pipeline")]
    merge_locks: bool,
    /// With --pipeline, also prove the same partitions with one GPU worker and with the two locks
    /// merged into one, after the main runs, and report the three side by side (their proofs must
    /// equal the main run's).
    #[arg(long, requires = "pipeline")]
    compare: bool,
    /// With --pipeline, write the last run's timeline here as JSON lines (see `cuzk timeline`).
    #[arg(long, requires = "pipeline")]
    timeline: Option<std::path::PathBuf>,
    /// Record the circuit's R1CS shape when loading the key, so partitions are synthesized
    /// witness-only (the default synthesizes them in full).
    #[arg(long)]
    witness_only: bool,
    /// Use a timing key instead of a setup: the real key's shape and points at infinity, made in
    /// seconds even at 2^24 rows, but its proofs do not verify. Instead of the self-check, every
    /// proof is compared with ark-groth16's proof for the key in closed form (see
    /// `cuzk::timing_key`), after the timed runs; any difference fails the command.
    #[arg(long)]
    timing_key: bool,
}

#[derive(Serialize, Default, Clone)]
struct Stages {
    synthesis: f64,
    /// Moving a, b, c and z into backend memory.
    upload: f64,
    witness_map: f64,
    msm_a: f64,
    msm_b_g1: f64,
    msm_b_g2: f64,
    msm_l: f64,
    msm_h: f64,
    /// Wall time of the MSM phase (the five MSMs may run concurrently).
    msm_phase: f64,
    assemble: f64,
    verify: f64,
    total: f64,
    /// The GPU stages on the device's clock (CUDA events), when the backend times them.
    device: Option<DeviceStages>,
}

/// Device time of the GPU stages of partition 0, in seconds.
#[derive(Serialize, Default, Clone)]
struct DeviceStages {
    witness_map: f64,
    msm_a: f64,
    msm_b_g1: f64,
    msm_b_g2: f64,
    msm_l: f64,
    msm_h: f64,
    /// Their sum: the partition's GPU time.
    total: f64,
    /// Uploading a, b, c and z, on the copy stream's clock from the start of staging to the last copy
    /// (host conversion included; not in `total`).
    upload: f64,
    /// Per stage, the kinds of work inside it: (stage, step, seconds).
    steps: Vec<(&'static str, &'static str, f64)>,
}

impl DeviceStages {
    fn of(d: &cuzk::DeviceStageTimes) -> Self {
        let parts = d.named().map(|(_, t)| t.as_secs_f64());
        Self {
            witness_map: parts[0],
            msm_a: parts[1],
            msm_b_g1: parts[2],
            msm_b_g2: parts[3],
            msm_l: parts[4],
            msm_h: parts[5],
            total: parts.iter().sum(),
            upload: d.upload.as_secs_f64(),
            steps: d.steps.iter().map(|(stage, step, t)| (*stage, *step, t.as_secs_f64())).collect(),
        }
    }
}

impl Stages {
    fn of(r: &ProofReport) -> Self {
        let s = &r.stages;
        Self {
            synthesis: r.synthesis.as_secs_f64(),
            upload: s.upload.as_secs_f64(),
            witness_map: s.witness_map.as_secs_f64(),
            msm_a: s.msm_a.as_secs_f64(),
            msm_b_g1: s.msm_b_g1.as_secs_f64(),
            msm_b_g2: s.msm_b_g2.as_secs_f64(),
            msm_l: s.msm_l.as_secs_f64(),
            msm_h: s.msm_h.as_secs_f64(),
            msm_phase: s.total.saturating_sub(s.upload + s.witness_map + s.assemble + s.verify).as_secs_f64(),
            assemble: s.assemble.as_secs_f64(),
            verify: s.verify.as_secs_f64(),
            total: r.total.as_secs_f64(),
            device: s.device.as_ref().map(DeviceStages::of),
        }
    }

    /// Partition 0's stages as the pipeline's timeline recorded them.
    fn from_timeline(spans: &[cuzk::sched::Span]) -> Self {
        // Partition 0 of the first job (every job has a partition 0).
        let job = spans.iter().map(|s| s.job).min().unwrap_or(0);
        let ours = || spans.iter().filter(move |s| s.job == job && s.partition == 0);
        let secs = |kind: &str| ours().filter(|s| s.kind == kind).map(|s| s.duration_us() / 1e6).sum::<f64>();
        let first = ours().map(|s| s.start_us).fold(f64::INFINITY, f64::min);
        let last = ours().map(|s| s.end_us).fold(0.0, f64::max);
        Self {
            synthesis: secs("synthesis"),
            upload: secs("upload"),
            witness_map: secs("kernel:witness_map"),
            // Per-MSM spans come from backends that time the device (the CPU logs one MSM phase).
            msm_a: secs("kernel:msm_a"),
            msm_b_g1: secs("kernel:msm_b_g1"),
            msm_b_g2: secs("kernel:msm_b_g2"),
            msm_l: secs("kernel:msm_l"),
            msm_h: secs("kernel:msm_h"),
            msm_phase: secs("kernel:msms")
                + ["a", "b_g1", "b_g2", "l", "h"]
                    .iter()
                    .map(|m| secs(&format!("kernel:msm_{m}")))
                    .sum::<f64>(),
            assemble: secs("kernel:assembly"),
            verify: 0.0,
            total: if first.is_finite() { (last - first) / 1e6 } else { 0.0 },
            device: None,
        }
    }

    /// Table rows; the per-MSM rows only when they were measured (a pipelined run on the CPU logs
    /// one MSM phase).
    fn rows(&self) -> Vec<(&'static str, f64)> {
        let per_msm = [
            ("MSM A (G1)", self.msm_a),
            ("MSM B (G1)", self.msm_b_g1),
            ("MSM B (G2)", self.msm_b_g2),
            ("MSM L (G1)", self.msm_l),
            ("MSM H (G1)", self.msm_h),
        ];
        let mut rows = vec![
            ("synthesis", self.synthesis),
            ("upload (a, b, c, z)", self.upload),
            ("witness map (7 NTTs)", self.witness_map),
        ];
        if per_msm.iter().any(|(_, s)| *s > 0.0) {
            rows.extend(per_msm);
        }
        rows.extend([
            ("all MSMs (wall)", self.msm_phase),
            ("assembly", self.assemble),
            ("self-check", self.verify),
            ("total", self.total),
        ]);
        rows
    }
}

#[derive(Serialize)]
struct Output {
    command: &'static str,
    backend: &'static str,
    /// The GPUs proved on, by ordinal (empty on the CPU).
    devices: Vec<usize>,
    backend_note: Option<String>,
    /// "synthetic" or "porep-like".
    circuit: &'static str,
    log_constraints: u32,
    constraints: usize,
    /// Partitions of all proofs together.
    partitions: usize,
    /// Proofs (jobs), each of `partitions / proofs` partitions.
    proofs: usize,
    /// With --pipeline: GPU workers per device, and whether upload and kernels shared one lock.
    gpu_workers: Option<usize>,
    merge_locks: Option<bool>,
    /// "full" or "witness-only".
    synthesis_mode: &'static str,
    /// "setup" (ark-groth16's key generation) or "timing" (see `cuzk::timing_key`).
    key: &'static str,
    keygen_seconds: f64,
    /// Wall time of proving all partitions (median over repetitions for `bench`).
    seconds: f64,
    seconds_per_partition: f64,
    seconds_per_proof: f64,
    proofs_verified: usize,
    /// Stage times of partition 0 (median run for `bench`).
    stages: Stages,
    /// With --pipeline: the last run's timeline figures.
    #[serde(flatten)]
    pipeline: Option<PipelineFigures>,
    /// With --compare: the same partitions with other GPU-worker and lock settings.
    variants: Vec<Variant>,
    arkworks_seconds: Option<f64>,
    speedup_vs_arkworks: Option<f64>,
    identical_to_arkworks: Option<bool>,
    /// With a timing key: whether every proof equals the key's closed-form proof (see
    /// `cuzk::timing_key`).
    equal_to_closed_form: Option<bool>,
}

/// What a pipelined run's timeline says.
#[derive(Serialize, Clone)]
struct PipelineFigures {
    /// Device-measured kernel time over the kernel window (CPU: prover-stage time).
    kernel_utilization: f64,
    /// Time a kernel lock was held over the window: what a bracket around the locked region claims.
    lock_utilization: f64,
    /// Kernel utilisation with the first and last tenth of the partitions left out.
    steady_kernel_utilization: Option<f64>,
    /// Kernel time per partition (sum of the kernel spans / partitions).
    kernel_seconds_per_partition: f64,
    /// Seconds per proof over kernel time per proof (divided among the devices): 1.0 when no GPU ever
    /// waits.
    per_proof_over_kernel_time: f64,
    /// Mean gap between consecutive proofs' completions, after the first.
    steady_state_seconds_per_proof: Option<f64>,
    /// Whether synthesis failed to keep the GPU fed for more than 5% of the window.
    synthesis_bound: bool,
    /// Gaps between kernels by cause, in seconds.
    gaps: std::collections::BTreeMap<&'static str, f64>,
    /// Per proof: seconds queued before its first partition started, and from then to its end.
    proof_queue_seconds: Vec<f64>,
    proof_prove_seconds: Vec<f64>,
}

impl PipelineFigures {
    fn of(
        timeline: &cuzk::sched::Timeline,
        partitions: usize,
        per_proof: usize,
        wall: f64,
        proofs: usize,
        devices: usize,
    ) -> Self {
        let spans = timeline.spans();
        let report = cuzk::sched::report::TimelineReport::from_spans(&spans);
        let kernel_s: f64 =
            spans.iter().filter(|s| s.kind.starts_with("kernel:")).map(|s| s.duration_us() / 1e6).sum();
        let per_partition = kernel_s / partitions.max(1) as f64;
        Self {
            kernel_utilization: report.kernel_utilization,
            lock_utilization: report.lock_utilization,
            steady_kernel_utilization: report.steady_kernel_utilization,
            kernel_seconds_per_partition: per_partition,
            per_proof_over_kernel_time: (wall / proofs.max(1) as f64)
                / (per_partition * per_proof as f64 / devices.max(1) as f64).max(1e-12),
            steady_state_seconds_per_proof: report.steady_state_s_per_job,
            synthesis_bound: report.synthesis_bound(),
            gaps: report.gaps.iter().map(|(c, s)| (c.name(), *s)).collect(),
            proof_queue_seconds: report.jobs.iter().map(|j| j.queue_s).collect(),
            proof_prove_seconds: report.jobs.iter().map(|j| j.prove_s).collect(),
        }
    }
}

/// One side-by-side configuration of `bench --compare`.
#[derive(Serialize)]
struct Variant {
    gpu_workers: usize,
    merge_locks: bool,
    seconds: f64,
    seconds_per_proof: f64,
    #[serde(flatten)]
    figures: PipelineFigures,
    /// Whether its proofs equal the main run's, partition for partition.
    same_proofs: bool,
}

/// Wall seconds, the proofs in order, and the timeline of a pipelined run.
type Pipelined = (f64, Vec<cuzk::Proof<Bls12_381>>, std::sync::Arc<cuzk::sched::Timeline>);

/// Proves `inputs` as jobs of `per_proof` partitions through the scheduler.
fn pipelined(
    engine: &Engine,
    key: &cuzk::Key,
    inputs: &[(BuiltIn, Fr, Fr)],
    per_proof: usize,
    sched: cuzk::sched::Config,
) -> Result<Pipelined, cuzk::Error> {
    let jobs = inputs.chunks(per_proof.max(1)).map(<[_]>::to_vec).collect();
    let t = Instant::now();
    let run = engine.prove_pipelined_jobs(key, jobs, sched)?;
    let wall = t.elapsed().as_secs_f64();
    Ok((wall, run.proofs.into_iter().flatten().collect(), run.timeline))
}

/// A one-line progress bar on stderr, drawn only when stderr is a terminal.
struct Progress {
    label: &'static str,
    total: usize,
    done: AtomicUsize,
    enabled: bool,
}

impl Progress {
    fn new(label: &'static str, total: usize, quiet: bool) -> Self {
        let p = Self {
            label,
            total,
            done: AtomicUsize::new(0),
            enabled: !quiet && std::io::stderr().is_terminal(),
        };
        p.draw(0);
        p
    }
    fn tick(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        self.draw(done);
    }
    fn draw(&self, done: usize) {
        if !self.enabled {
            return;
        }
        let width = 30;
        let filled = width * done / self.total.max(1);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{:<10} [{}{}] {done}/{}",
            self.label,
            "#".repeat(filled),
            " ".repeat(width - filled),
            self.total
        );
        if done == self.total {
            let _ = writeln!(err);
        }
    }
}

impl Workload {
    fn choice(&self) -> CircuitChoice {
        CircuitChoice {
            circuit: self.circuit,
            log_constraints: self.log_constraints,
            bit_share: self.bit_share,
            seed: self.seed,
        }
    }
}

/// The workload's partitions, proof after proof (partition 0 also gives the key its shape).
fn circuits(w: &Workload) -> Result<Vec<BuiltIn>, String> {
    (0..w.proofs * w.partitions).map(|i| w.choice().partition(i)).collect()
}

/// Constraints of a built-in circuit.
fn constraints_of(c: &BuiltIn) -> Result<usize, String> {
    match c {
        BuiltIn::Porep(c) => c.params.counts().map(|n| n.constraints).map_err(|e| e.to_string()),
        BuiltIn::Synthetic(c) => Ok(c.constraints),
    }
}

/// Partitions of up to 2^22 rows checked against a timing key's closed form at once.
const CHECKED_AT_ONCE: usize = 4;

/// The median of a non-empty list; of an even count, the lower of the middle two (always one of
/// the values, so the run it came from can be found again).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

fn run(w: &Workload, repeat: Option<usize>, baseline: bool) -> Result<Output, Box<dyn std::error::Error>> {
    let config = Config { cuda_devices: w.devices.clone(), ..Config::default().with_backend(w.backend) };
    let engine = Engine::new(Config { verify_proofs: config.verify_proofs && !w.timing_key, ..config })?;
    if let (Some(note), false) = (engine.backend_note(), w.json) {
        eprintln!("note: {note}");
    }
    let mut rng = StdRng::seed_from_u64(w.seed);
    let partitions = circuits(w)?;
    let shape = partitions[0];
    let t = Instant::now();
    // A timing key keeps only its closed form (and the shape it was made from) for the check: its
    // points go to the engine, so a key of tens of GiB is held once.
    let (pk, timing) = if w.timing_key {
        let recorded = std::sync::Arc::new(cuzk::R1csShape::record(shape)?);
        let tk = cuzk::timing_key::TimingKey::new(&recorded, &mut rng);
        (tk.pk, Some((tk.closed_form, recorded)))
    } else {
        (Groth16::<Bls12_381>::generate_random_parameters_with_reduction(shape, &mut rng)?, None)
    };
    let keygen_seconds = t.elapsed().as_secs_f64();
    // The ark-groth16 baseline proves with the key after the engine has loaded it: only then a copy.
    let (engine_pk, pk) = if baseline { (pk.clone(), Some(pk)) } else { (pk, None) };
    let key = match (&timing, w.witness_only) {
        (Some((_, recorded)), true) => engine.load_key_with_shape(engine_pk, recorded.clone())?,
        (None, true) => engine.load_key_recording_shape(engine_pk, shape)?,
        (_, false) => engine.load_key(engine_pk)?,
    };
    let randomness: Vec<(Fr, Fr)> =
        (0..partitions.len()).map(|_| (Fr::rand(&mut rng), Fr::rand(&mut rng))).collect();
    let per_proof = w.partitions as usize;

    let defaults = cuzk::sched::Config::default();
    let sched = cuzk::sched::Config {
        partition_workers: w.partition_workers.unwrap_or(defaults.partition_workers),
        gpu_workers_per_device: w.gpu_workers.map_or(defaults.gpu_workers_per_device, |g| g as usize),
        merge_locks: w.merge_locks,
        ..defaults
    };
    let inputs: Vec<_> = partitions.iter().zip(&randomness).map(|(c, (r, s))| (*c, *r, *s)).collect();
    let runs = repeat.unwrap_or(1).max(1);
    let (mut walls, mut ark_walls, mut all_runs) = (Vec::new(), Vec::new(), Vec::new());
    let mut last_timeline = None;
    let mut identical: Option<Vec<cuzk::Proof<Bls12_381>>> = None;
    for _ in 0..runs {
        // ark-groth16 once: it takes minutes at large sizes, and every run proves the same partitions
        // with the same randomness, so each run's proofs are compared with these.
        if let (Some(pk), None) = (&pk, &identical) {
            // ark-groth16 as a user would run it: one partition after another, each internally parallel.
            let progress = Progress::new("arkworks", partitions.len(), w.json);
            let t = Instant::now();
            let ark: Vec<_> = partitions
                .iter()
                .copied()
                .zip(&randomness)
                .map(|(c, (r, s))| {
                    let p = Groth16::<Bls12_381>::create_proof_with_reduction(c, pk, *r, *s);
                    progress.tick();
                    p
                })
                .collect::<Result<_, _>>()?;
            ark_walls.push(t.elapsed().as_secs_f64());
            identical = Some(ark);
        }
        let t = Instant::now();
        if w.pipeline {
            let (wall, proofs, timeline) = pipelined(&engine, &key, &inputs, per_proof, sched.clone())?;
            walls.push(wall);
            all_runs.push((proofs, Stages::from_timeline(&timeline.spans())));
            last_timeline = Some(timeline);
        } else {
            let progress = Progress::new(engine.backend_name(), partitions.len(), w.json);
            let reports =
                engine.prove_partitions_observed(&key, partitions.clone(), randomness.clone(), &|_, _| {
                    progress.tick()
                })?;
            walls.push(t.elapsed().as_secs_f64());
            let stages = Stages::of(&reports[0]);
            all_runs.push((reports.into_iter().map(|r| r.proof).collect::<Vec<_>>(), stages));
        }
    }
    let wall = median(walls.clone());
    let median_run = walls.iter().position(|x| *x == wall).unwrap_or(0);
    let (proofs, stages) = &all_runs[median_run];
    let same = identical.map(|ark| {
        all_runs
            .iter()
            .all(|(proofs, _)| proofs.len() == ark.len() && ark.iter().zip(proofs).all(|(a, p)| a == p))
    });
    let arkworks_seconds = baseline.then(|| median(ark_walls));
    let partitions = proofs.len();
    let proof_count = partitions.div_ceil(per_proof.max(1));
    let figures = |t: &cuzk::sched::Timeline, wall: f64| {
        PipelineFigures::of(t, partitions, per_proof, wall, proof_count, key.devices())
    };
    let pipeline = last_timeline.as_ref().map(|t| figures(t, walls[walls.len() - 1]));
    let (mut variants, mut variant_proofs) = (Vec::new(), Vec::new());
    if w.compare {
        let others = [
            cuzk::sched::Config { gpu_workers_per_device: 1, merge_locks: false, ..sched.clone() },
            cuzk::sched::Config { merge_locks: !sched.merge_locks, ..sched.clone() },
        ];
        for other in others {
            let (wall, theirs, timeline) = pipelined(&engine, &key, &inputs, per_proof, other.clone())?;
            let same_proofs = &theirs == proofs;
            variant_proofs.push(theirs);
            variants.push(Variant {
                gpu_workers: other.gpu_workers_per_device,
                merge_locks: other.merge_locks,
                seconds: wall,
                seconds_per_proof: wall / proof_count.max(1) as f64,
                figures: figures(&timeline, wall),
                same_proofs,
            });
        }
    }
    if let (Some(path), Some(t)) = (&w.timeline, &last_timeline) {
        std::fs::write(path, t.to_json_lines())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    // A timing key's proofs, checked against the closed form (every run proved the same partitions
    // with the same randomness, so each is compared with one expected proof per partition).
    let closed_form = match &timing {
        None => None,
        Some((tk, recorded)) => {
            let progress = Progress::new("checking", inputs.len(), w.json);
            // A few partitions at a time: synthesis is largely sequential per partition, and each one's
            // working set must fit in memory beside the others'.
            let at_once = if w.log_constraints <= 22 { CHECKED_AT_ONCE } else { 1 };
            let check = |i: usize| -> Result<bool, String> {
                let (c, r, s) = &inputs[i];
                let (syn, _) = cuzk::synth::synthesize_witness_only(*c, recorded, &Default::default())
                    .map_err(|e| e.to_string())?;
                let expected = tk.expected_proof(&syn, *r, *s)?;
                progress.tick();
                Ok(all_runs.iter().all(|(p, _)| p.get(i) == Some(&expected))
                    && variant_proofs.iter().all(|p| p.get(i) == Some(&expected)))
            };
            use rayon::prelude::*;
            let mut all = true;
            for start in (0..inputs.len()).step_by(at_once) {
                let end = (start + at_once).min(inputs.len());
                let oks = (start..end).into_par_iter().map(check).collect::<Result<Vec<bool>, String>>()?;
                all &= oks.into_iter().all(|ok| ok);
            }
            Some(all)
        }
    };
    Ok(Output {
        command: if repeat.is_some() { "bench" } else { "prove" },
        backend: engine.backend_name(),
        devices: engine.cuda_devices(),
        backend_note: engine.backend_note().map(str::to_owned),
        circuit: w.choice().name(),
        log_constraints: w.log_constraints,
        constraints: constraints_of(&shape)?,
        gpu_workers: w.pipeline.then(|| {
            w.gpu_workers.map_or(cuzk::sched::Config::default().gpu_workers_per_device, |g| g as usize)
        }),
        merge_locks: w.pipeline.then_some(w.merge_locks),
        partitions,
        proofs: proof_count,
        synthesis_mode: engine.synthesis_mode(&key).name(),
        key: if w.timing_key { "timing" } else { "setup" },
        keygen_seconds,
        seconds: wall,
        seconds_per_partition: wall / partitions as f64,
        seconds_per_proof: wall / proof_count.max(1) as f64,
        proofs_verified: if engine.config().verify_proofs { partitions } else { 0 },
        stages: stages.clone(),
        pipeline,
        variants,
        arkworks_seconds,
        speedup_vs_arkworks: arkworks_seconds.map(|a| a / wall),
        identical_to_arkworks: same,
        equal_to_closed_form: closed_form,
    })
}

fn print_table(o: &Output) {
    let on = match o.devices.as_slice() {
        [] => String::new(),
        [d] => format!(" (GPU {d})"),
        many => format!(" (GPUs {})", many.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")),
    };
    println!(
        "cuzk {}: backend {}{on}, {} circuit, 2^{} rows ({} constraints) x {} partitions",
        o.command, o.backend, o.circuit, o.log_constraints, o.constraints, o.partitions
    );
    if let (Some(g), Some(merged)) = (o.gpu_workers, o.merge_locks) {
        println!(
            "  pipeline: {g} GPU worker(s) per device, {}",
            if merged { "one lock" } else { "memory and kernel locks" }
        );
    }
    println!("  key generation            {:>10.3} s  ({} key)", o.keygen_seconds, o.key);
    println!("  synthesis mode            {:>10}", o.synthesis_mode);
    println!("  stages of partition 0:");
    for (name, secs) in o.stages.rows() {
        println!("    {name:<22}  {:>10.3} s", secs);
    }
    if let Some(d) = &o.stages.device {
        println!("  on the device (CUDA events), partition 0:");
        for (name, secs) in [
            ("witness map", d.witness_map),
            ("MSM A (G1)", d.msm_a),
            ("MSM B (G1)", d.msm_b_g1),
            ("MSM B (G2)", d.msm_b_g2),
            ("MSM L (G1)", d.msm_l),
            ("MSM H (G1)", d.msm_h),
            ("GPU time", d.total),
            ("upload (staging, copies)", d.upload),
        ] {
            println!("    {name:<22}  {:>10.3} s", secs);
        }
        if !d.steps.is_empty() {
            println!("  inside the stages (device time per kind of work):");
            for (stage, step, secs) in &d.steps {
                println!("    {:<32}  {:>10.4} s", format!("{stage}: {step}"), secs);
            }
        }
    }
    println!(
        "  all partitions (wall)     {:>10.3} s  ({:.3} s per partition)",
        o.seconds, o.seconds_per_partition
    );
    if o.proofs > 1 {
        println!("  per proof ({} proofs)      {:>10.3} s", o.proofs, o.seconds_per_proof);
    }
    println!("  proofs verified           {:>10} / {}", o.proofs_verified, o.partitions);
    if let Some(p) = &o.pipeline {
        println!(
            "  kernel utilisation        {:>9.1}% (device-measured; lock bracket {:.1}%)",
            100.0 * p.kernel_utilization,
            100.0 * p.lock_utilization
        );
        if let Some(u) = p.steady_kernel_utilization {
            println!(
                "  in steady state           {:>9.1}% (first and last tenth of the partitions left out)",
                100.0 * u
            );
        }
        println!(
            "  kernel time per partition {:>10.3} s  (s/proof = {:.3} x partitions x kernel time)",
            p.kernel_seconds_per_partition, p.per_proof_over_kernel_time
        );
        if p.synthesis_bound {
            println!("  synthesis did not keep up: the GPU waited for it over 5% of the window");
        }
    }
    if !o.variants.is_empty() {
        println!("  side by side (same partitions):");
        println!(
            "    {:<28} {:>10} {:>9} {:>9} {:>11} {:>6}",
            "configuration", "s/proof", "kernel", "lock", "synth-bound", "same"
        );
        let main = o.pipeline.as_ref().map(|p| {
            (o.gpu_workers.unwrap_or(0), o.merge_locks.unwrap_or(false), o.seconds_per_proof, p, true)
        });
        let rows = main.into_iter().chain(
            o.variants
                .iter()
                .map(|v| (v.gpu_workers, v.merge_locks, v.seconds_per_proof, &v.figures, v.same_proofs)),
        );
        for (g, merged, spp, f, same) in rows {
            let name = format!("{g} GPU worker(s), {}", if merged { "one lock" } else { "two locks" });
            println!(
                "    {name:<28} {spp:>10.3} {:>8.1}% {:>8.1}% {:>11} {:>6}",
                100.0 * f.kernel_utilization,
                100.0 * f.lock_utilization,
                if f.synthesis_bound { "yes" } else { "no" },
                if same { "yes" } else { "NO" }
            );
        }
    }
    if let (Some(a), Some(x)) = (o.arkworks_seconds, o.speedup_vs_arkworks) {
        println!("  ark-groth16 (wall)        {a:>10.3} s");
        println!("  speedup vs ark-groth16    {x:>10.2}x");
    }
    if let Some(ok) = o.equal_to_closed_form {
        println!("  proofs equal to the timing key's closed form: {}", if ok { "yes" } else { "NO" });
    }
    if let Some(same) = o.identical_to_arkworks {
        println!("  proofs identical to ark-groth16: {}", if same { "yes" } else { "NO" });
    }
}

fn main() {
    let cli = Cli::parse();
    let service = match &cli.command {
        Command::Serve(a) => Some(cuzk_service::cli::serve(a)),
        Command::Config(a) => Some(cuzk_service::cli::config(a)),
        _ => None,
    };
    if let Some(result) = service {
        if let Err(e) = result {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Command::Timeline { file, chrome, svg } = &cli.command {
        if let Err(e) = timeline(file, chrome.as_deref(), svg.as_deref()) {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        return;
    }
    let (w, result) = match &cli.command {
        Command::Timeline { .. } | Command::Serve(_) | Command::Config(_) => return,
        Command::Keygen(a) => {
            return finish(a.json, keygen(a), |o| {
                println!(
                    "cuzk keygen: {} 2^{} rows ({} constraints), shape {}",
                    o.circuit, o.log_constraints, o.constraints, o.shape_id
                );
                println!("  key generation  {:>10.3} s", o.keygen_seconds);
                println!(
                    "  saved key       {:>10.3} s  {} ({} bytes)",
                    o.save_seconds,
                    o.key_path.display(),
                    o.key_bytes
                );
                println!("  recorded shape  {:>10.3} s  {}", o.shape_seconds, o.shape_path.display());
            })
        }
        Command::Bench { what: Some(BenchWhat::Synth(a)), .. } => {
            return finish(a.json, bench_synth(a), |o| {
                let mode = if o.mode == SynthMode::Full { "full" } else { "witness-only" };
                println!(
                    "cuzk bench synth: {} 2^{} rows ({} constraints) x {} partitions, {mode}, {} threads",
                    o.circuit, o.log_constraints, o.constraints, o.partitions, o.threads
                );
                if let Some(r) = o.record_seconds {
                    println!("  record shape (once)  {r:>10.3} s");
                }
                println!("  all partitions       {:>10.3} s", o.seconds);
                println!("  constraints/s        {:>10.0}", o.constraints_per_second);
                if let Some(p) = o.peak_bytes_per_partition {
                    println!("  peak per partition   {:>10.1} MiB (estimate)", p as f64 / (1 << 20) as f64);
                }
            })
        }
        Command::Bench { what: Some(BenchWhat::Daemon(a)), .. } => {
            let runs = cuzk_service::load::run(a).map_err(Box::<dyn std::error::Error>::from);
            return finish(a.json, runs, |runs| {
                let urgent =
                    a.urgent_log_constraints.map_or("same key".to_owned(), |k| format!("own key, 2^{k}"));
                println!(
                    "cuzk bench daemon: {} 2^{} x {} partitions, {} proofs; urgent: {} one-partition proofs ({urgent})",
                    a.circuit, a.log_constraints, a.partitions, a.proofs, a.urgent
                );
                print!("{}", cuzk_service::load::table(runs));
            });
        }
        Command::Bench { what: Some(BenchWhat::Load(a)), .. } => {
            return finish(a.json, bench_load(a), |o| {
                println!(
                    "cuzk bench load: {} 2^{} rows ({} constraints), shape {}, median of {}",
                    o.circuit, o.log_constraints, o.constraints, o.shape_id, o.repeats
                );
                println!(
                    "  key file        {:>10.3} s  {} bytes ({:.0} per constraint), {:.2} GB/s",
                    o.key_file_seconds, o.key_bytes, o.key_bytes_per_constraint, o.key_file_gb_per_s
                );
                println!("  engine load     {:>10.3} s  (key, shape, resident)", o.engine_load_seconds);
                println!("  synthesis mode  {:>10}", o.synthesis_mode);
            })
        }
        Command::Prove(w) => (w, run(w, None, false)),
        Command::Bench { workload, repeat, no_baseline, what: None } => {
            (workload, run(workload, Some(*repeat), !no_baseline))
        }
    };
    match result {
        Ok(out) => {
            if w.json {
                println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
            } else {
                print_table(&out);
            }
            if out.variants.iter().any(|v| !v.same_proofs) {
                eprintln!("error: a side-by-side configuration proved different proofs");
                std::process::exit(1);
            }
            if out.equal_to_closed_form == Some(false) {
                eprintln!("error: proofs differ from the timing key's closed form");
                std::process::exit(1);
            }
            if out.identical_to_arkworks == Some(false) {
                eprintln!("error: proofs differ from ark-groth16's");
                std::process::exit(1);
            }
        }
        Err(e) => report_error(e.as_ref()),
    }
}
