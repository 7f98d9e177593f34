//! `cuzk filecoin`: Filecoin's own proofs. `test-sector` seals a sector of random data offline,
//! `c2` proves PoRep commit phase 2 from a C1 output, `post` proves a test sector's WinningPoSt or
//! WindowPoSt, `verify` runs Filecoin's verifier on a proof, `shape` records a circuit's shape and
//! profiles its rows.
//!
//! Parameters are read from Filecoin's parameter directory, `FIL_PROOFS_PARAMETER_CACHE` (default
//! `/var/tmp/filecoin-proof-parameters/`), as Filecoin names them.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use cuzk::{BackendKind, Config, Engine};
use cuzk_filecoin::{
    ensure_parameters, post, random_field_bytes, seal_commit_phase2, FilecoinKey, Partitions, ProofType,
    RegisteredPoStProof, RegisteredSealProof, SectorId, TestSector,
};
use serde::Serialize;

use crate::output::{print, CmdError};

/// Flags of `cuzk filecoin`.
#[derive(Args)]
pub(crate) struct FilecoinArgs {
    #[command(subcommand)]
    pub(crate) what: FilecoinWhat,
}

#[derive(Subcommand)]
pub(crate) enum FilecoinWhat {
    /// Seal a sector of random data offline (add piece, PC1, PC2, C1) into a folder, generating the
    /// test size's parameters into Filecoin's parameter directory when they are absent.
    TestSector(TestSectorArgs),
    /// Prove PoRep commit phase 2 from a C1 output; Filecoin's verify_seal must accept the proof.
    C2(C2Args),
    /// Prove a test sector's WinningPoSt or WindowPoSt and check it with Filecoin's verifier.
    Post(PostArgs),
    /// Run Filecoin's verify_seal on a test sector's proof.
    Verify(VerifyArgs),
    /// Record a circuit's shape from a blank circuit (no parameters, no sector) and print its sizes
    /// and how its rows fall on the device's warps.
    Shape(crate::filecoin_shape::ShapeArgs),
}

/// The sector sizes a test sector can be sealed at.
#[derive(ValueEnum, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TestSize {
    /// 2 KiB (seals in milliseconds; PoRep parameters take about 13 minutes to generate on 2 cores).
    #[value(name = "2KiB")]
    K2,
    /// 8 MiB.
    #[value(name = "8MiB")]
    M8,
}

impl TestSize {
    fn seal(self) -> RegisteredSealProof {
        match self {
            Self::K2 => RegisteredSealProof::StackedDrg2KiBV1_1,
            Self::M8 => RegisteredSealProof::StackedDrg8MiBV1_1,
        }
    }
}

/// Flags of `cuzk filecoin test-sector`.
#[derive(Args)]
pub(crate) struct TestSectorArgs {
    /// The folder to seal into (created when missing).
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// The sector size.
    #[arg(long, value_enum, default_value = "2KiB")]
    pub(crate) size: TestSize,
    /// Do not generate missing parameters (the sector still seals; C2 and PoSt then need them).
    #[arg(long)]
    pub(crate) no_parameters: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Where a proof's engine runs.
#[derive(Args)]
pub(crate) struct EngineArgs {
    /// Backend: cpu, cuda or auto.
    #[arg(long, default_value = "auto")]
    pub(crate) backend: BackendKind,
}

/// Side by side with bellperson.
#[derive(Args)]
pub(crate) struct CompareArgs {
    /// Also prove with bellperson's own prover (CPU), the same circuits and blinding, one after the
    /// other: both times, both parameter loads, and whether the bytes are equal (they must be).
    #[arg(long)]
    pub(crate) compare: bool,
}

/// Flags of `cuzk filecoin c2`.
#[derive(Args)]
pub(crate) struct C2Args {
    /// A test sector's folder (its C1 output, prover id and sector number).
    #[arg(long, conflicts_with_all = ["c1", "prover_id", "sector_id"])]
    pub(crate) sector: Option<PathBuf>,
    /// A C1 output (serde JSON, as seal_commit_phase1 returns it).
    #[arg(long, requires_all = ["prover_id", "sector_id"])]
    pub(crate) c1: Option<PathBuf>,
    /// The prover id, 64 hex digits.
    #[arg(long)]
    pub(crate) prover_id: Option<String>,
    /// The sector number.
    #[arg(long)]
    pub(crate) sector_id: Option<u64>,
    /// Where to write the proof (default: `proof.bin` in the sector's folder, else standard output as hex).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
    #[command(flatten)]
    pub(crate) compare: CompareArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Which PoSt.
#[derive(ValueEnum, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PostKind {
    /// WinningPoSt.
    Winning,
    /// WindowPoSt (all partitions).
    Window,
}

/// Flags of `cuzk filecoin post`.
#[derive(Args)]
pub(crate) struct PostArgs {
    /// A test sector's folder.
    #[arg(long)]
    pub(crate) sector: PathBuf,
    /// Which PoSt.
    #[arg(long, value_enum)]
    pub(crate) kind: PostKind,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
    #[command(flatten)]
    pub(crate) compare: CompareArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Flags of `cuzk filecoin verify`.
#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// A test sector's folder.
    #[arg(long)]
    pub(crate) sector: PathBuf,
    /// The proof (default: `proof.bin` in the sector's folder).
    #[arg(long)]
    pub(crate) proof: Option<PathBuf>,
}

/// Runs `cuzk filecoin`.
pub(crate) fn run(a: &FilecoinArgs) -> Result<(), CmdError> {
    match &a.what {
        FilecoinWhat::TestSector(a) => test_sector(a),
        FilecoinWhat::C2(a) => c2(a),
        FilecoinWhat::Post(a) => post_cmd(a),
        FilecoinWhat::Verify(a) => verify(a),
        FilecoinWhat::Shape(a) => crate::filecoin_shape::run(a),
    }
}

fn post_proofs(seal: RegisteredSealProof) -> [RegisteredPoStProof; 2] {
    use RegisteredPoStProof::*;
    match u64::from(seal.sector_size()) {
        2048 => [StackedDrgWinning2KiBV1, StackedDrgWindow2KiBV1_2],
        _ => [StackedDrgWinning8MiBV1, StackedDrgWindow8MiBV1_2],
    }
}

#[derive(Serialize)]
struct TestSectorOutput {
    dir: PathBuf,
    registered_proof: String,
    sector_id: u64,
    seal_seconds: f64,
    parameters_generated: Vec<String>,
    parameters_seconds: f64,
}

fn test_sector(a: &TestSectorArgs) -> Result<(), CmdError> {
    let seal = a.size.seal();
    let t = Instant::now();
    let mut generated = Vec::new();
    if !a.no_parameters {
        let [winning, window] = post_proofs(seal);
        for proof in [ProofType::Seal(seal), ProofType::Post(winning), ProofType::Post(window)] {
            if ensure_parameters(proof)? {
                generated.push(proof.to_string());
            }
        }
    }
    let parameters_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let sector = TestSector::seal(&a.dir, seal, &mut rand::rngs::OsRng)?;
    let out = TestSectorOutput {
        dir: a.dir.clone(),
        registered_proof: format!("{seal:?}"),
        sector_id: sector.info.sector_id,
        seal_seconds: t.elapsed().as_secs_f64(),
        parameters_generated: generated,
        parameters_seconds,
    };
    print(a.json, &out, |o| {
        println!(
            "cuzk filecoin test-sector: {} sector {} in {}",
            o.registered_proof,
            o.sector_id,
            o.dir.display()
        );
        println!("  sealed (add piece, PC1, PC2, C1)  {:>8.3} s", o.seal_seconds);
        println!("  parameters generated: {:?} in {:.1} s", o.parameters_generated, o.parameters_seconds);
    })
}

fn engine(a: &EngineArgs) -> Result<Engine, CmdError> {
    let engine = Engine::new(Config::default().with_backend(a.backend))?;
    if let Some(note) = engine.backend_note() {
        eprintln!("cuzk: {note}");
    }
    Ok(engine)
}

fn parse_prover_id(hex: &str) -> Result<[u8; 32], CmdError> {
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect::<Option<Vec<u8>>>();
    match bytes {
        Some(b) if b.len() == 32 => Ok(b.try_into().unwrap_or([0; 32])),
        _ => Err(format!("--prover-id: expected 64 hex digits, got {hex:?}").into()),
    }
}

#[derive(Serialize)]
struct ProofOutput {
    proof_type: String,
    backend: &'static str,
    constraints: usize,
    key_load_seconds: f64,
    key_read_seconds: f64,
    prove_seconds: f64,
    proof_bytes: usize,
    out: Option<PathBuf>,
    verified: bool,
    compared: Option<Compared>,
}

/// cuzk and bellperson on the same circuits and blinding.
#[derive(Serialize)]
struct Compared {
    cuzk_seconds: f64,
    /// cuzk's synthesis, summed over partitions (they run in parallel).
    cuzk_synthesis_seconds: f64,
    /// cuzk's GPU time (the device stages on the device's clock), summed over partitions; absent on
    /// the CPU backend.
    cuzk_gpu_seconds: Option<f64>,
    bellperson_seconds: f64,
    bellperson_read_seconds: f64,
    identical: bool,
}

fn report(o: &ProofOutput) {
    println!("cuzk filecoin: {} on {} ({} constraints a partition)", o.proof_type, o.backend, o.constraints);
    println!(
        "  key load   {:>8.3} s  (the .params file read in {:.3} s)",
        o.key_load_seconds, o.key_read_seconds
    );
    println!(
        "  proof      {:>8.3} s  {} bytes, verified by Filecoin: {}",
        o.prove_seconds, o.proof_bytes, o.verified
    );
    if let Some(c) = &o.compared {
        let gpu = c.cuzk_gpu_seconds.map_or("no GPU".into(), |g| format!("GPU time {g:.3} s"));
        println!("  cuzk with the same blinding: synthesis {:.3} s, {gpu}", c.cuzk_synthesis_seconds);
        println!(
            "  same blinding: cuzk {:.3} s, bellperson {:.3} s ({:.2}x), bellperson read the file in {:.3} s, identical: {}",
            c.cuzk_seconds,
            c.bellperson_seconds,
            c.bellperson_seconds / c.cuzk_seconds,
            c.bellperson_read_seconds,
            c.identical
        );
    }
    if let Some(out) = &o.out {
        println!("  written to {}", out.display());
    }
}

/// Proves `circuits()` with cuzk and with bellperson, the same blinding, one after the other.
fn compare(
    engine: &Engine,
    key: &FilecoinKey,
    circuits: impl Fn() -> Result<Vec<cuzk_filecoin::FilecoinCircuit>, cuzk_filecoin::Error>,
) -> Result<Compared, CmdError> {
    let n = circuits()?.len();
    let blinding = cuzk_filecoin::baseline::random_blinding(n);
    let t = Instant::now();
    let (ours, reports) =
        cuzk_filecoin::prove_circuits_report(engine, key, circuits()?, Some(blinding.clone()))?;
    let cuzk_seconds = t.elapsed().as_secs_f64();
    let cuzk_synthesis_seconds = reports.iter().map(|r| r.synthesis.as_secs_f64()).sum();
    let gpu: Option<Vec<f64>> =
        reports.iter().map(|r| r.stages.device_total().map(|d| d.as_secs_f64())).collect();
    let theirs = cuzk_filecoin::baseline::bellperson(key.proof(), circuits()?, &blinding)?;
    Ok(Compared {
        cuzk_seconds,
        cuzk_synthesis_seconds,
        cuzk_gpu_seconds: gpu.map(|g| g.iter().sum()),
        bellperson_seconds: theirs.prove.as_secs_f64(),
        bellperson_read_seconds: theirs.read.as_secs_f64(),
        identical: ours == theirs.proofs,
    })
}

fn finish(o: ProofOutput, json: bool) -> Result<(), CmdError> {
    print(json, &o, report)?;
    match &o.compared {
        Some(c) if !c.identical => Err("cuzk's proof differs from bellperson's for the same blinding".into()),
        _ if !o.verified => Err("Filecoin's verifier refuses the proof".into()),
        _ => Ok(()),
    }
}

fn c2(a: &C2Args) -> Result<(), CmdError> {
    let (c1, prover_id, sector_id, default_out) = match (&a.sector, &a.c1) {
        (Some(dir), _) => {
            let sector = TestSector::open(dir)?;
            (sector.c1()?, sector.info.prover_id, sector.info.sector_id, Some(dir.join("proof.bin")))
        }
        (None, Some(path)) => {
            let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let prover = parse_prover_id(a.prover_id.as_deref().unwrap_or_default())?;
            (cuzk_filecoin::decode_c1(&bytes)?, prover, a.sector_id.unwrap_or_default(), None)
        }
        (None, None) => return Err("give --sector DIR, or --c1 FILE with --prover-id and --sector-id".into()),
    };
    let engine = engine(&a.engine)?;
    let t = Instant::now();
    let key = FilecoinKey::load(&engine, ProofType::Seal(c1.registered_proof))?;
    let key_load_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let proof = seal_commit_phase2(&engine, &key, &c1, prover_id, SectorId::from(sector_id))?;
    let prove_seconds = t.elapsed().as_secs_f64();
    let out = a.out.clone().or(default_out);
    match &out {
        Some(path) => std::fs::write(path, &proof).map_err(|e| format!("{}: {e}", path.display()))?,
        None if !a.json => println!("{}", proof.iter().map(|b| format!("{b:02x}")).collect::<String>()),
        None => {}
    }
    let compared = if a.compare.compare {
        Some(compare(&engine, &key, || cuzk_filecoin::seal_circuits(&c1))?)
    } else {
        None
    };
    let o = ProofOutput {
        proof_type: key.proof().to_string(),
        backend: engine.backend_name(),
        constraints: key.counts().constraints,
        key_load_seconds,
        key_read_seconds: key.load_report().read.as_secs_f64(),
        prove_seconds,
        proof_bytes: proof.len(),
        out,
        verified: true,
        compared,
    };
    finish(o, a.json)
}

fn post_cmd(a: &PostArgs) -> Result<(), CmdError> {
    let sector = TestSector::open(&a.sector)?;
    let [winning, window] = post_proofs(sector.info.registered_proof);
    let registered = if a.kind == PostKind::Winning { winning } else { window };
    let engine = engine(&a.engine)?;
    let t = Instant::now();
    let key = FilecoinKey::load(&engine, ProofType::Post(registered))?;
    let key_load_seconds = t.elapsed().as_secs_f64();
    let randomness = random_field_bytes(&mut rand::rngs::OsRng);
    let vanilla = vec![sector.vanilla_post(registered, &randomness)?];
    let t = Instant::now();
    let proof = post(&engine, &key, &randomness, sector.info.prover_id, &vanilla, Partitions::All)?;
    let prove_seconds = t.elapsed().as_secs_f64();
    let verified = sector.verify_post(registered, &randomness, &proof)?;
    let compared = if a.compare.compare {
        let prover = sector.info.prover_id;
        Some(compare(&engine, &key, || {
            cuzk_filecoin::post_circuits(registered, &randomness, prover, &vanilla, Partitions::All)
        })?)
    } else {
        None
    };
    let o = ProofOutput {
        proof_type: key.proof().to_string(),
        backend: engine.backend_name(),
        constraints: key.counts().constraints,
        key_load_seconds,
        key_read_seconds: key.load_report().read.as_secs_f64(),
        prove_seconds,
        proof_bytes: proof.len(),
        out: None,
        verified,
        compared,
    };
    finish(o, a.json)
}

fn verify(a: &VerifyArgs) -> Result<(), CmdError> {
    let sector = TestSector::open(&a.sector)?;
    let path = a.proof.clone().unwrap_or_else(|| a.sector.join("proof.bin"));
    let proof = read(&path)?;
    if sector.verify_seal(&proof)? {
        println!("cuzk filecoin verify: verify_seal accepts {}", path.display());
        Ok(())
    } else {
        Err(format!("verify_seal refuses {}", path.display()).into())
    }
}

fn read(path: &Path) -> Result<Vec<u8>, CmdError> {
    Ok(std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?)
}
