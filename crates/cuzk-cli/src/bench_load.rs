//! `cuzk bench load`: loading a stored key and its shape into the engine, and how fast.

use std::time::Instant;

use cuzk::{Config, Engine, Summary};
use serde::Serialize;

use crate::flags::LoadArgs;
use crate::output::{print, CmdError};
use crate::progress::Progress;
use crate::report::Times;

#[derive(Serialize)]
struct LoadOutput {
    command: &'static str,
    /// The backend the key was made resident on.
    backend: &'static str,
    devices: Vec<usize>,
    circuit: &'static str,
    shape_id: String,
    log_constraints: u32,
    constraints: usize,
    synthesis_mode: &'static str,
    key_bytes: u64,
    key_bytes_per_constraint: f64,
    /// Key-file loads (read, checksum, decode).
    key_file: Times,
    /// At the median.
    key_file_gb_per_s: f64,
    /// The whole `Engine::load_key_from_store` (key file, shape file, making the key resident).
    engine_load: Times,
}

/// Runs `cuzk bench load`.
pub(crate) fn run(a: &LoadArgs) -> Result<(), CmdError> {
    let out = bench_load(a)?;
    print(a.json, &out, |o| {
        println!(
            "cuzk bench load: backend {}, {} 2^{} rows ({} constraints), shape {}",
            o.backend, o.circuit, o.log_constraints, o.constraints, o.shape_id
        );
        println!("  key file        {}", o.key_file);
        println!(
            "                  {} bytes ({:.0} per constraint), {:.2} GB/s at the median",
            o.key_bytes, o.key_bytes_per_constraint, o.key_file_gb_per_s
        );
        println!("  engine load     {}  (key, shape, resident)", o.engine_load);
        println!("  synthesis mode  {:>10}", o.synthesis_mode);
    })
}

fn bench_load(a: &LoadArgs) -> Result<LoadOutput, CmdError> {
    let shape_id = a.circuit.shape_id()?;
    let store = cuzk::keystore::KeyStore::open(&a.key_dir)?;
    let engine =
        Engine::new(Config { cuda_devices: a.devices.clone(), ..Config::default().with_backend(a.backend) })?;
    if let (Some(note), false) = (engine.backend_note(), a.json) {
        eprintln!("note: {note}");
    }
    let (mut file, mut whole) = (Vec::new(), Vec::new());
    let mut last = None;
    let repeats = a.repeat.max(1);
    let progress = Progress::bar("loading", repeats, a.json);
    for _ in 0..repeats {
        drop(last.take());
        let t = Instant::now();
        let (key, report) = engine.load_key_from_store(&store, &shape_id)?;
        whole.push(t.elapsed().as_secs_f64());
        file.push(report.seconds);
        last = Some((key, report.bytes));
        progress.tick();
    }
    drop(progress);
    let (key, bytes) = last.ok_or("no load ran")?;
    let constraints = key.shape_counts().map(|c| c.constraints).unwrap_or_default();
    let key_file = Summary::of(&file).ok_or("no load ran")?;
    let engine_load = Summary::of(&whole).ok_or("no load ran")?;
    let key_file_seconds = key_file.median;
    Ok(LoadOutput {
        command: "bench load",
        backend: engine.backend_name(),
        devices: engine.cuda_devices(),
        circuit: a.circuit.name(),
        shape_id,
        log_constraints: a.circuit.log_constraints,
        constraints,
        synthesis_mode: engine.synthesis_mode(&key).name(),
        key_bytes: bytes,
        key_bytes_per_constraint: if constraints > 0 { bytes as f64 / constraints as f64 } else { 0.0 },
        key_file: key_file.into(),
        key_file_gb_per_s: if key_file_seconds > 0.0 { bytes as f64 / key_file_seconds / 1e9 } else { 0.0 },
        engine_load: engine_load.into(),
    })
}
