//! `cuzk filecoin shape`: a Filecoin circuit's shape, recorded from a blank circuit (no parameters,
//! no sector), with its sizes and how the rows of A, B and C fall on a warp's lanes when the device
//! evaluates them (`cuzk::synth::RowProfile`): rows a thread each, and rows of more than a bound a
//! warp each, at several bounds. With a test sector, also the witness of its PoRep's first partition
//! by the size of its values (what the MSMs over the witness sum over). Recording takes memory in
//! proportion to the circuit: tens of GiB for a 32 GiB sector's PoRep partition.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};
use cuzk::synth::{synthesize_witness_only, RowProfile, SynthesisOptions, ValueSizes};
use cuzk_filecoin::{
    record_shape, seal_circuits, Bellpepper, ProofType, RegisteredPoStProof, RegisteredSealProof, TestSector,
};
use serde::Serialize;

use crate::output::{print, CmdError};

/// Bounds the profile is counted at: every row a thread's, then rows of more than 4, 8, 16 (the
/// device's default, `RowSplit::DEFAULT`) and 32 entries a warp's.
const BOUNDS: [Option<usize>; 5] = [None, Some(4), Some(8), Some(16), Some(32)];

/// Which circuit.
#[derive(ValueEnum, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CircuitKind {
    /// PoRep commit phase 2, one partition.
    Porep,
    /// WinningPoSt.
    Winning,
    /// WindowPoSt, one partition.
    Window,
}

/// Sector sizes.
#[derive(ValueEnum, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SectorSize {
    #[value(name = "2KiB")]
    K2,
    #[value(name = "8MiB")]
    M8,
    #[value(name = "512MiB")]
    M512,
    #[value(name = "32GiB")]
    G32,
    #[value(name = "64GiB")]
    G64,
}

/// Flags of `cuzk filecoin shape`.
#[derive(Args)]
pub(crate) struct ShapeArgs {
    /// Which circuit.
    #[arg(long, value_enum, default_value = "porep")]
    pub(crate) circuit: CircuitKind,
    /// The sector size.
    #[arg(long, value_enum, default_value = "2KiB")]
    pub(crate) size: SectorSize,
    /// A test sector's folder: the PoRep of its size, and its first partition's witness profiled too.
    #[arg(long, conflicts_with_all = ["circuit", "size"])]
    pub(crate) sector: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The proof type of `circuit` at `size`.
fn proof_type(circuit: CircuitKind, size: SectorSize) -> ProofType {
    use RegisteredPoStProof as P;
    use RegisteredSealProof as S;
    use SectorSize::*;
    let (seal, winning, window) = match size {
        K2 => (S::StackedDrg2KiBV1_1, P::StackedDrgWinning2KiBV1, P::StackedDrgWindow2KiBV1_2),
        M8 => (S::StackedDrg8MiBV1_1, P::StackedDrgWinning8MiBV1, P::StackedDrgWindow8MiBV1_2),
        M512 => (S::StackedDrg512MiBV1_1, P::StackedDrgWinning512MiBV1, P::StackedDrgWindow512MiBV1_2),
        G32 => (S::StackedDrg32GiBV1_1, P::StackedDrgWinning32GiBV1, P::StackedDrgWindow32GiBV1_2),
        G64 => (S::StackedDrg64GiBV1_1, P::StackedDrgWinning64GiBV1, P::StackedDrgWindow64GiBV1_2),
    };
    match circuit {
        CircuitKind::Porep => ProofType::Seal(seal),
        CircuitKind::Winning => ProofType::Post(winning),
        CircuitKind::Window => ProofType::Post(window),
    }
}

#[derive(Serialize)]
struct ShapeOutput {
    proof: String,
    record_seconds: f64,
    constraints: usize,
    inputs: usize,
    aux: usize,
    /// Per matrix (A, B, C), one profile per bound.
    matrices: Vec<MatrixOutput>,
    /// With a sector: its first partition's witness variables by the size of their values.
    witness: Option<WitnessOutput>,
}

/// Witness variables by value ([`ValueSizes`]): 0, 1, then below 2^16, 2^64, 2^128, and the rest.
#[derive(Serialize)]
struct WitnessOutput {
    variables: usize,
    zeros: usize,
    ones: usize,
    below_2_16: usize,
    below_2_64: usize,
    below_2_128: usize,
    wider: usize,
}

impl From<ValueSizes> for WitnessOutput {
    fn from(v: ValueSizes) -> Self {
        let ValueSizes { len, zeros, ones, below_2_16, below_2_64, below_2_128, wider } = v;
        Self { variables: len, zeros, ones, below_2_16, below_2_64, below_2_128, wider }
    }
}

#[derive(Serialize)]
struct MatrixOutput {
    matrix: &'static str,
    rows: usize,
    entries: usize,
    products: usize,
    longest: usize,
    bounds: Vec<BoundOutput>,
}

#[derive(Serialize)]
struct BoundOutput {
    /// Rows of more entries are a warp's (`null`: every row a thread's).
    long_above: Option<usize>,
    long_rows: usize,
    long_entries: usize,
    thread_steps: u64,
    warp_steps: u64,
    steps: u64,
}

impl MatrixOutput {
    fn of(matrix: &'static str, profiles: &[RowProfile]) -> Self {
        let p = profiles[0];
        let bounds = profiles
            .iter()
            .map(|q| BoundOutput {
                long_above: q.long_above,
                long_rows: q.long_rows,
                long_entries: q.long_entries,
                thread_steps: q.thread_steps,
                warp_steps: q.warp_steps,
                steps: q.steps(),
            })
            .collect();
        Self { matrix, rows: p.rows, entries: p.entries, products: p.products, longest: p.longest, bounds }
    }
}

/// Runs `cuzk filecoin shape`.
pub(crate) fn run(a: &ShapeArgs) -> Result<(), CmdError> {
    let c1 = a.sector.as_deref().map(|dir| TestSector::open(dir)?.c1()).transpose()?;
    let proof = c1.as_ref().map_or(proof_type(a.circuit, a.size), |c1| ProofType::Seal(c1.registered_proof));
    let t = Instant::now();
    let (shape, counts, _) = record_shape(proof)?;
    let record_seconds = t.elapsed().as_secs_f64();
    let witness = match &c1 {
        Some(c1) => {
            let first = seal_circuits(c1)?.into_iter().next().ok_or("the C1 output has no partitions")?;
            let options = SynthesisOptions::default();
            let (partition, _) = synthesize_witness_only(Bellpepper::new(first), &shape, &options)
                .map_err(|e| format!("partition 0: {e}"))?;
            Some(ValueSizes::of(&partition.assignment[shape.counts().instance..]).into())
        }
        None => None,
    };
    let matrices = [("A", shape.a()), ("B", shape.b()), ("C", shape.c())]
        .into_iter()
        .map(|(name, m)| MatrixOutput::of(name, &BOUNDS.map(|b| m.row_profile(b))))
        .collect();
    let out = ShapeOutput {
        proof: proof.to_string(),
        record_seconds,
        constraints: counts.constraints,
        inputs: counts.inputs,
        aux: counts.aux,
        matrices,
        witness,
    };
    print(a.json, &out, text)
}

fn text(o: &ShapeOutput) {
    println!(
        "{}: {} constraints, {} inputs, {} auxiliary variables (recorded in {:.1} s)",
        o.proof, o.constraints, o.inputs, o.aux, o.record_seconds
    );
    for m in &o.matrices {
        let share = 100.0 * m.products as f64 / m.entries.max(1) as f64;
        println!(
            "{}: {} rows, {} entries ({share:.1}% need a product), longest row {}",
            m.matrix, m.rows, m.entries, m.longest
        );
        for b in &m.bounds {
            let bound =
                b.long_above.map_or("every row a thread's".into(), |n| format!("rows over {n} a warp's"));
            println!(
                "  {bound}: {} long rows ({} entries), warp steps {} (rows a thread each {}, long rows {})",
                b.long_rows, b.long_entries, b.steps, b.thread_steps, b.warp_steps
            );
        }
    }
    if let Some(w) = &o.witness {
        let pct = |n: usize| 100.0 * n as f64 / w.variables.max(1) as f64;
        println!(
            "witness of partition 0: {} variables, zeros {:.1}%, ones {:.1}%, below 2^16 {:.1}%, below 2^64 \
             {:.1}%, below 2^128 {:.1}%, wider {:.1}%",
            w.variables,
            pct(w.zeros),
            pct(w.ones),
            pct(w.below_2_16),
            pct(w.below_2_64),
            pct(w.below_2_128),
            pct(w.wider)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_circuit_and_size_names_its_own_proof_type() {
        let mut names = std::collections::HashSet::new();
        for circuit in [CircuitKind::Porep, CircuitKind::Winning, CircuitKind::Window] {
            for size in [SectorSize::K2, SectorSize::M8, SectorSize::M512, SectorSize::G32, SectorSize::G64] {
                let proof = proof_type(circuit, size);
                assert!(names.insert(proof.to_string()), "{proof} twice");
                let kind = match circuit {
                    CircuitKind::Porep => "porep-c2",
                    CircuitKind::Winning => "winning-post",
                    CircuitKind::Window => "window-post",
                };
                assert_eq!(proof.kind(), kind, "{proof}");
            }
        }
        let sizes = [2 << 10, 8 << 20, 512 << 20, 32 << 30, 64u64 << 30];
        for (size, bytes) in
            [SectorSize::K2, SectorSize::M8, SectorSize::M512, SectorSize::G32, SectorSize::G64]
                .into_iter()
                .zip(sizes)
        {
            assert_eq!(proof_type(CircuitKind::Porep, size).sector_size(), bytes);
        }
    }
}
