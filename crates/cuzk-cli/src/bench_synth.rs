//! `cuzk bench synth`: synthesis alone, full or witness-only, and its rate.

use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use crate::flags::{SynthArgs, SynthMode};
use crate::output::{print, CmdError};

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
    /// Witness-only and compact: recording the shape (once per shape, not per proof; tiled from two
    /// challenges for a porep-like circuit).
    record_seconds: Option<f64>,
    /// Witness-only and compact: the estimated peak bytes of one partition's synthesis.
    peak_bytes_per_partition: Option<u64>,
    /// Witness-only and compact: host bytes the recorded shape holds.
    shape_bytes: Option<u64>,
}

/// Runs `cuzk bench synth`.
pub(crate) fn run(a: &SynthArgs) -> Result<(), CmdError> {
    let out = bench_synth(a)?;
    print(a.json, &out, |o| {
        let mode = match o.mode {
            SynthMode::Full => "full",
            SynthMode::WitnessOnly => "witness-only",
            SynthMode::Compact => "compact",
        };
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
        if let Some(b) = o.shape_bytes {
            println!("  recorded shape       {:>10.1} MiB", b as f64 / (1 << 20) as f64);
        }
    })
}

fn bench_synth(a: &SynthArgs) -> Result<SynthOutput, CmdError> {
    use cuzk::synth::{
        synthesize, synthesize_compact, synthesize_witness_only, CompactWitness, SynthError, SynthesisOptions,
    };
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(n) = a.threads {
        builder = builder.num_threads(n);
    }
    let pool = builder.build()?;
    let circuits = (0..a.partitions).map(|p| a.circuit.partition(p)).collect::<Result<Vec<_>, _>>()?;
    let options = SynthesisOptions { check_satisfied: false };
    // Witness-only modes record the shape once (tiled for a porep-like circuit), outside the timing.
    let (shape, record_seconds) = match a.mode {
        SynthMode::Full => (None, None),
        SynthMode::WitnessOnly | SynthMode::Compact => {
            let t = Instant::now();
            let shape = circuits[0].shape()?;
            (Some(shape), Some(t.elapsed().as_secs_f64()))
        }
    };
    let (seconds, constraints, peak) = pool.install(|| -> Result<_, SynthError> {
        match a.mode {
            SynthMode::Full => {
                let t = Instant::now();
                let done = circuits
                    .into_par_iter()
                    .map(|c| synthesize(c, &options).map(|s| s.counts().constraints))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((t.elapsed().as_secs_f64(), done[0], None))
            }
            SynthMode::WitnessOnly | SynthMode::Compact => {
                let Some(shape) = &shape else { return Ok((0.0, 0, None)) };
                let t = Instant::now();
                let peak = if a.mode == SynthMode::Compact {
                    circuits
                        .into_par_iter()
                        .try_for_each(|c| synthesize_compact(c, shape.counts()).map(drop))?;
                    CompactWitness::peak_bytes(shape.counts())
                } else {
                    let peaks = circuits
                        .into_par_iter()
                        .map(|c| synthesize_witness_only(c, shape, &options).map(|(_, peak)| peak))
                        .collect::<Result<Vec<_>, _>>()?;
                    peaks.first().copied().unwrap_or_default()
                };
                Ok((t.elapsed().as_secs_f64(), shape.counts().constraints, Some(peak)))
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
        shape_bytes: shape.as_ref().map(|s| s.memory_bytes()),
    })
}
