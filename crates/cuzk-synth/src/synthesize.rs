//! Running a circuit and evaluating its constraint matrices against the assignment.

use ark_bls12_381::Fr;
use ark_ff::Zero;
use ark_relations::gr1cs::{
    ConstraintSynthesizer, ConstraintSystem, ConstraintSystemRef, Matrix, OptimizationGoal, SynthesisMode,
    R1CS_PREDICATE_LABEL,
};
use rayon::prelude::*;

use crate::{Density, SynthError};

/// How to synthesize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynthesisOptions {
    /// Check that the witness satisfies every constraint (on by default). A proof of an unsatisfied
    /// witness would fail verification; this check names the constraint instead.
    pub check_satisfied: bool,
}

impl Default for SynthesisOptions {
    fn default() -> Self {
        Self { check_satisfied: true }
    }
}

/// The shape of a circuit: what a proving key must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Counts {
    /// R1CS constraints.
    pub constraints: usize,
    /// Instance variables, including the constant 1.
    pub instance: usize,
    /// Witness (auxiliary) variables.
    pub witness: usize,
}

impl Counts {
    /// Rows of the QAP: constraints plus the input-consistency rows.
    pub fn rows(&self) -> usize {
        self.constraints + self.instance
    }

    /// The NTT domain size: the next power of two of [`Counts::rows`] (at least 1).
    pub fn domain_size(&self) -> usize {
        self.rows().next_power_of_two()
    }

    /// All variables, the constant 1 included.
    pub fn variables(&self) -> usize {
        self.instance + self.witness
    }
}

/// A synthesized partition: everything the prover needs from the circuit.
#[derive(Debug, Clone)]
pub struct Synthesized {
    pub(crate) counts: Counts,
    /// `A·z` per constraint, then `z[j]` for each instance variable `j` (input-consistency rows).
    pub a: Vec<Fr>,
    /// `B·z` per constraint, then zeros for the input-consistency rows.
    pub b: Vec<Fr>,
    /// `C·z` per constraint, then zeros for the input-consistency rows.
    pub c: Vec<Fr>,
    /// The full assignment `z = [1, public inputs.., witness..]`.
    pub assignment: Vec<Fr>,
    /// Which entries of `assignment` are 0, 1 or other.
    pub density: Density,
}

impl Synthesized {
    /// The circuit's counts.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The instance part of `z`, the leading 1 included.
    pub fn instance(&self) -> &[Fr] {
        &self.assignment[..self.counts.instance]
    }

    /// The public inputs as a verifier takes them (the instance without the leading 1).
    pub fn public_inputs(&self) -> &[Fr] {
        &self.assignment[1..self.counts.instance]
    }

    /// The witness part of `z`.
    pub fn witness(&self) -> &[Fr] {
        &self.assignment[self.counts.instance..]
    }
}

fn evaluate_row(row: &[(Fr, usize)], z: &[Fr]) -> Fr {
    let mut acc = Fr::zero();
    for (coeff, index) in row {
        let v = z[*index];
        if ark_ff::One::is_one(coeff) {
            acc += v;
        } else {
            acc += v * coeff;
        }
    }
    acc
}

fn evaluate(matrix: &Matrix<Fr>, z: &[Fr], rows: usize) -> Vec<Fr> {
    let mut out = Vec::with_capacity(rows);
    matrix.par_iter().with_min_len(1024).map(|row| evaluate_row(row, z)).collect_into_vec(&mut out);
    out.resize(rows, Fr::zero());
    out
}

/// The R1CS matrices of a finalized constraint system; other predicates with constraints are refused.
pub(crate) fn r1cs_matrices(cs: &ConstraintSystemRef<Fr>) -> Result<Vec<Matrix<Fr>>, SynthError> {
    let mut all = cs.to_matrices()?;
    for (label, matrices) in &all {
        let constraints = matrices.first().map_or(0, Vec::len);
        if label != R1CS_PREDICATE_LABEL && constraints > 0 {
            return Err(SynthError::UnsupportedPredicate { label: label.to_string(), constraints });
        }
    }
    Ok(all.remove(R1CS_PREDICATE_LABEL).unwrap_or_default())
}

/// Synthesizes one circuit with ark-groth16's settings and evaluates its matrices.
pub fn synthesize<C: ConstraintSynthesizer<Fr>>(
    circuit: C,
    options: &SynthesisOptions,
) -> Result<Synthesized, SynthError> {
    let cs = ConstraintSystem::<Fr>::new_ref();
    cs.set_optimization_goal(OptimizationGoal::Constraints);
    cs.set_mode(SynthesisMode::Prove { construct_matrices: true, generate_lc_assignments: false });
    circuit.generate_constraints(cs.clone())?;
    cs.finalize();

    let matrices = r1cs_matrices(&cs)?;
    let counts = Counts {
        constraints: cs.num_constraints(),
        instance: cs.num_instance_variables(),
        witness: cs.num_witness_variables(),
    };
    if counts.rows() > 1 << 32 {
        return Err(SynthError::TooLarge { rows: counts.rows() });
    }
    let assignment = {
        let inner = cs.borrow().ok_or(ark_relations::gr1cs::SynthesisError::MissingCS)?;
        let mut z = inner.instance_assignment()?.to_vec();
        z.extend_from_slice(inner.witness_assignment()?);
        z
    };
    drop(cs);

    let rows = counts.rows();
    let empty = Matrix::new();
    let matrix = |i: usize| matrices.get(i).unwrap_or(&empty);
    let ((mut a, b), (c, density)) = rayon::join(
        || rayon::join(|| evaluate(matrix(0), &assignment, rows), || evaluate(matrix(1), &assignment, rows)),
        || rayon::join(|| evaluate(matrix(2), &assignment, rows), || Density::of(&assignment)),
    );
    a[counts.constraints..].copy_from_slice(&assignment[..counts.instance]);

    if options.check_satisfied {
        let first_bad =
            (0..counts.constraints).into_par_iter().with_min_len(4096).find_first(|&i| a[i] * b[i] != c[i]);
        if let Some(index) = first_bad {
            return Err(SynthError::Unsatisfied { index, num_constraints: counts.constraints });
        }
    }
    Ok(Synthesized { counts, a, b, c, assignment, density })
}

/// Synthesizes many circuits in parallel, one result per circuit, in order.
pub fn synthesize_all<C>(circuits: Vec<C>, options: &SynthesisOptions) -> Vec<Result<Synthesized, SynthError>>
where
    C: ConstraintSynthesizer<Fr> + Send,
{
    circuits.into_par_iter().map(|c| synthesize(c, options)).collect()
}
