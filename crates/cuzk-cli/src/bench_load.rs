//! `cuzk bench load`: loading a stored key and its shape into the engine, and how fast.

use std::time::Instant;

use cuzk::{Config, Engine};
use serde::Serialize;

use crate::flags::LoadArgs;
use crate::output::{median, print, CmdError};
use crate::progress::Progress;

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

/// Runs `cuzk bench load`.
pub(crate) fn run(a: &LoadArgs) -> Result<(), CmdError> {
    let out = bench_load(a)?;
    print(a.json, &out, |o| {
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

fn bench_load(a: &LoadArgs) -> Result<LoadOutput, CmdError> {
    let shape_id = a.circuit.shape_id()?;
    let store = cuzk::keystore::KeyStore::open(&a.key_dir)?;
    let engine = Engine::new(Config::cpu())?;
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
        repeats,
    })
}
