//! Witness-only synthesis: a circuit shape's R1CS matrices, recorded once, evaluated against each
//! partition's witness.
//!
//! A shape's matrices do not depend on the witness, so synthesizing every partition in full rebuilds
//! them needlessly (the linear-combination map, inlining and matrix construction dominate full
//! synthesis). [`R1csShape::record`] builds them once, in compressed sparse rows with the coefficients
//! interned in one table; [`synthesize_into`] then runs the circuit with arkworks'
//! `SynthesisMode::Prove { construct_matrices: false }`, which only allocates variables and assigns them,
//! and computes `a = A·z`, `b = B·z`, `c = C·z` with a parallel sparse product. The results equal
//! [`crate::synthesize`]'s bit for bit: the same variable numbering, the same rows, exact field
//! arithmetic.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ark_bls12_381::Fr;
use ark_ff::{One, Zero};
use ark_relations::gr1cs::{
    ConstraintSynthesizer, ConstraintSystem, ConstraintSystemRef, Matrix, OptimizationGoal, SynthesisError,
    SynthesisMode, R1CS_PREDICATE_LABEL,
};
use rayon::prelude::*;

use crate::{Counts, Density, RowProfile, SynthError, Synthesized};

/// Rows evaluated per parallel task.
const ROWS_PER_TASK: usize = 1024;

/// What is wrong with the parts of a shape (from a corrupt or hand-made file, say).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeProblem {
    /// A matrix has the wrong number of rows.
    #[error("matrix {matrix} has {found} row lengths, the shape has {expected} constraints")]
    Rows {
        /// "A", "B" or "C".
        matrix: &'static str,
        /// Constraints.
        expected: usize,
        /// Rows given.
        found: usize,
    },
    /// Row lengths and entries do not add up.
    #[error("matrix {matrix}: the row lengths add up to {rows_total} entries, but {entries} are given")]
    Entries {
        /// "A", "B" or "C".
        matrix: &'static str,
        /// Sum of the row lengths.
        rows_total: u64,
        /// Column (and coefficient) entries given.
        entries: usize,
    },
    /// An entry names a variable the shape does not have.
    #[error("matrix {matrix}, entry {entry}: variable {column} of {variables}")]
    Column {
        /// "A", "B" or "C".
        matrix: &'static str,
        /// The entry.
        entry: usize,
        /// The variable named.
        column: u32,
        /// Variables in the shape.
        variables: usize,
    },
    /// An entry names a coefficient the table does not have.
    #[error("matrix {matrix}, entry {entry}: coefficient {coefficient} of {coefficients}")]
    Coefficient {
        /// "A", "B" or "C".
        matrix: &'static str,
        /// The entry.
        entry: usize,
        /// The coefficient index named.
        coefficient: u32,
        /// Coefficients in the table.
        coefficients: usize,
    },
    /// The coefficient table does not start with 1 (its fixed first entry).
    #[error("the coefficient table must start with 1")]
    FirstCoefficient,
    /// The shape has no instance variable (the constant 1 is always one).
    #[error("a shape has at least one instance variable (the constant 1)")]
    NoInstance,
    /// More variables or coefficients than 32-bit indices can name.
    #[error("{what} {count} exceed the 32-bit indices of the shape format")]
    TooMany {
        /// "variables" or "coefficients".
        what: &'static str,
        /// How many.
        count: usize,
    },
}

/// One R1CS matrix in compressed sparse rows: row `i` holds the entries
/// `row_starts[i]..row_starts[i + 1]`, each a variable index into `z` and a coefficient index into the
/// shape's coefficient table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Csr {
    row_starts: Vec<usize>,
    columns: Vec<u32>,
    coefficients: Vec<u32>,
}

impl Csr {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.row_starts.len().saturating_sub(1)
    }

    /// Non-zero entries.
    pub fn entries(&self) -> usize {
        self.columns.len()
    }

    /// The length of every row, in order.
    pub fn row_lengths(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        self.row_starts.windows(2).map(|w| w[1] - w[0])
    }

    /// How the rows fall on a warp's lanes when the device evaluates this matrix, rows of more than
    /// `long_above` entries a warp each (`None`: every row a thread's); see [`RowProfile`].
    pub fn row_profile(&self, long_above: Option<usize>) -> RowProfile {
        let products = self.coefficients.iter().filter(|&&c| c != 0).count();
        RowProfile::of(self.row_lengths(), products, long_above)
    }

    /// The variable index of every entry, row by row.
    pub fn columns(&self) -> &[u32] {
        &self.columns
    }

    /// The coefficient index of every entry, row by row.
    pub fn coefficient_indices(&self) -> &[u32] {
        &self.coefficients
    }

    /// Writes `M·z` for every row into `out` (as long as the rows), in parallel.
    fn mul_into(&self, table: &[Fr], z: &[Fr], out: &mut [Fr]) {
        out.par_chunks_mut(ROWS_PER_TASK).enumerate().for_each(|(task, chunk)| {
            let first = task * ROWS_PER_TASK;
            for (o, w) in chunk.iter_mut().zip(self.row_starts[first..].windows(2)) {
                let mut acc = Fr::zero();
                for k in w[0]..w[1] {
                    let (column, coefficient) = (self.columns[k] as usize, self.coefficients[k]);
                    if coefficient == 0 {
                        acc += z[column];
                    } else {
                        acc += z[column] * table[coefficient as usize];
                    }
                }
                *o = acc;
            }
        });
    }
}

/// Which variables a matrix uses at all. The proving key's base of a variable that no row of A
/// (B) uses is the identity, so an MSM may skip it whatever its value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VariableUse {
    len: usize,
    in_a: Vec<u64>,
    in_b: Vec<u64>,
}

impl VariableUse {
    fn of(variables: usize, instance: usize, a: &Csr, b: &Csr) -> Self {
        let words = variables.div_ceil(64);
        let mark = |bits: &mut Vec<u64>, i: usize| bits[i / 64] |= 1 << (i % 64);
        let (mut in_a, mut in_b) = (vec![0u64; words], vec![0u64; words]);
        a.columns.iter().for_each(|&c| mark(&mut in_a, c as usize));
        // The input-consistency rows put every instance variable in A.
        (0..instance).for_each(|i| mark(&mut in_a, i));
        b.columns.iter().for_each(|&c| mark(&mut in_b, c as usize));
        Self { len: variables, in_a, in_b }
    }

    /// Variables covered.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no variables.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether variable `i` appears in A (instance variables always do). False past the end.
    pub fn in_a(&self, i: usize) -> bool {
        i < self.len && self.in_a[i / 64] >> (i % 64) & 1 == 1
    }

    /// Whether variable `i` appears in B. False past the end.
    pub fn in_b(&self, i: usize) -> bool {
        i < self.len && self.in_b[i / 64] >> (i % 64) & 1 == 1
    }

    /// Variables that appear in A.
    pub fn count_a(&self) -> usize {
        self.in_a.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Variables that appear in B.
    pub fn count_b(&self) -> usize {
        self.in_b.iter().map(|w| w.count_ones() as usize).sum()
    }
}

/// A circuit shape: its counts and its R1CS matrices A, B, C, with the variable numbering of full
/// synthesis (`z = [1, public inputs.., witness..]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct R1csShape {
    counts: Counts,
    table: Vec<Fr>,
    matrices: [Csr; 3],
    usage: VariableUse,
}

const NAMES: [&str; 3] = ["A", "B", "C"];

impl R1csShape {
    /// Records the shape of `circuit` by synthesizing it in setup mode (no witness is needed, so a
    /// key-generation circuit serves), with the settings of [`crate::synthesize`].
    pub fn record<C: ConstraintSynthesizer<Fr>>(circuit: C) -> Result<Self, SynthError> {
        let cs = ConstraintSystem::<Fr>::new_ref();
        cs.set_optimization_goal(OptimizationGoal::Constraints);
        cs.set_mode(SynthesisMode::Setup);
        circuit.generate_constraints(cs.clone())?;
        cs.finalize();
        let matrices = crate::synthesize::r1cs_matrices(&cs)?;
        let counts = Counts {
            constraints: cs.num_constraints(),
            instance: cs.num_instance_variables(),
            witness: cs.num_witness_variables(),
        };
        drop(cs);
        Self::from_matrices(counts, &matrices)
    }

    fn from_matrices(counts: Counts, matrices: &[Matrix<Fr>]) -> Result<Self, SynthError> {
        if counts.rows() > 1 << 32 {
            return Err(SynthError::TooLarge { rows: counts.rows() });
        }
        let mut table = vec![Fr::one()];
        let mut index: HashMap<Fr, u32> = HashMap::from([(Fr::one(), 0)]);
        let empty = Matrix::new();
        let mut parts: [(Vec<usize>, Vec<u32>, Vec<u32>); 3] = Default::default();
        for (i, part) in parts.iter_mut().enumerate() {
            let m = matrices.get(i).unwrap_or(&empty);
            let mut lengths = Vec::with_capacity(counts.constraints);
            for row in m.iter() {
                lengths.push(row.len());
                for (coeff, column) in row {
                    let next = u32::try_from(table.len())
                        .map_err(|_| ShapeProblem::TooMany { what: "coefficients", count: table.len() })?;
                    let k = *index.entry(*coeff).or_insert_with(|| {
                        table.push(*coeff);
                        next
                    });
                    let column = u32::try_from(*column).map_err(|_| ShapeProblem::TooMany {
                        what: "variables",
                        count: counts.variables(),
                    })?;
                    part.1.push(column);
                    part.2.push(k);
                }
            }
            lengths.resize(counts.constraints, 0);
            part.0 = lengths;
        }
        let [a, b, c] = parts;
        Ok(Self::from_parts(counts, table, [a, b, c])?)
    }

    /// A shape from its parts, checked: per matrix `(row lengths, variable per entry, coefficient index
    /// per entry)`, and the coefficient table, which starts with 1. Every row length list must have one
    /// entry per constraint, every variable must exist, every coefficient index must be in the table.
    pub fn from_parts(
        counts: Counts,
        table: Vec<Fr>,
        matrices: [(Vec<usize>, Vec<u32>, Vec<u32>); 3],
    ) -> Result<Self, ShapeProblem> {
        if counts.instance == 0 {
            return Err(ShapeProblem::NoInstance);
        }
        if table.first() != Some(&Fr::one()) {
            return Err(ShapeProblem::FirstCoefficient);
        }
        if u32::try_from(counts.variables()).is_err() {
            return Err(ShapeProblem::TooMany { what: "variables", count: counts.variables() });
        }
        if u32::try_from(table.len()).is_err() {
            return Err(ShapeProblem::TooMany { what: "coefficients", count: table.len() });
        }
        let mut built: [Csr; 3] = Default::default();
        for (i, (lengths, columns, coefficients)) in matrices.into_iter().enumerate() {
            let matrix = NAMES[i];
            if lengths.len() != counts.constraints {
                return Err(ShapeProblem::Rows {
                    matrix,
                    expected: counts.constraints,
                    found: lengths.len(),
                });
            }
            let total = lengths.iter().map(|&l| l as u64).sum::<u64>();
            if total != columns.len() as u64 || coefficients.len() != columns.len() {
                return Err(ShapeProblem::Entries { matrix, rows_total: total, entries: columns.len() });
            }
            if let Some(entry) = columns.iter().position(|&c| c as usize >= counts.variables()) {
                let column = columns[entry];
                return Err(ShapeProblem::Column { matrix, entry, column, variables: counts.variables() });
            }
            if let Some(entry) = coefficients.iter().position(|&k| k as usize >= table.len()) {
                let coefficient = coefficients[entry];
                return Err(ShapeProblem::Coefficient {
                    matrix,
                    entry,
                    coefficient,
                    coefficients: table.len(),
                });
            }
            let mut row_starts = Vec::with_capacity(lengths.len() + 1);
            row_starts.push(0);
            let mut at = 0;
            for l in lengths {
                at += l;
                row_starts.push(at);
            }
            built[i] = Csr { row_starts, columns, coefficients };
        }
        let usage = VariableUse::of(counts.variables(), counts.instance, &built[0], &built[1]);
        Ok(Self { counts, table, matrices: built, usage })
    }

    /// The shape's counts.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The distinct coefficients of the matrices; entry 0 is 1.
    pub fn coefficients(&self) -> &[Fr] {
        &self.table
    }

    /// Matrix A.
    pub fn a(&self) -> &Csr {
        &self.matrices[0]
    }

    /// Matrix B.
    pub fn b(&self) -> &Csr {
        &self.matrices[1]
    }

    /// Matrix C.
    pub fn c(&self) -> &Csr {
        &self.matrices[2]
    }

    /// Which variables A and B use.
    pub fn variable_use(&self) -> &VariableUse {
        &self.usage
    }

    /// Bytes the shape holds in memory (its vectors' lengths).
    pub fn memory_bytes(&self) -> u64 {
        let csr = |m: &Csr| (m.row_starts.len() * 8 + m.columns.len() * 8) as u64;
        (self.table.len() * 32) as u64
            + self.matrices.iter().map(csr).sum::<u64>()
            + (self.usage.in_a.len() * 16) as u64
    }
}

/// The caller's buffers for one partition's evaluations; each exactly [`Counts::rows`] long.
#[derive(Debug)]
pub struct Evaluations<'a> {
    /// Receives `A·z`, then the input-consistency rows `z[j]`.
    pub a: &'a mut [Fr],
    /// Receives `B·z`, then zeros.
    pub b: &'a mut [Fr],
    /// Receives `C·z`, then zeros.
    pub c: &'a mut [Fr],
}

/// The rest of a witness-only synthesis: the assignment, its density, and memory use.
#[derive(Debug, Clone)]
pub struct Witness {
    /// The full assignment `z = [1, public inputs.., witness..]`.
    pub assignment: Vec<Fr>,
    /// Which entries of `assignment` are 0, 1 or other.
    pub density: Density,
    /// Peak bytes this partition's synthesis allocated: an estimate from the buffers it allocates
    /// (arkworks' instance and witness vectors at their lengths, the assignment, the density bitmaps,
    /// and the evaluations when [`synthesize_witness_only`] allocates them), not a measurement; Vec
    /// growth slack and the circuit's own allocations are not counted.
    pub peak_bytes: u64,
}

/// Runs `circuit` in witness-only mode and returns `z`, checked against `shape`'s variable counts.
fn assignment<C: ConstraintSynthesizer<Fr>>(circuit: C, shape: &R1csShape) -> Result<Vec<Fr>, SynthError> {
    let (mut z, witness) = assignment_parts(circuit, shape.counts)?;
    z.extend_from_slice(&witness);
    Ok(z)
}

/// Runs `circuit` in witness-only mode and returns its instance and witness assignments, checked
/// against a shape's variable counts. The witness vector is reserved at the shape's length first, so
/// it never grows by doubling.
pub(crate) fn assignment_parts<C: ConstraintSynthesizer<Fr>>(
    circuit: C,
    expected: Counts,
) -> Result<(Vec<Fr>, Vec<Fr>), SynthError> {
    let cs = ConstraintSystem::<Fr>::new_ref();
    cs.set_optimization_goal(OptimizationGoal::Constraints);
    cs.set_mode(SynthesisMode::Prove { construct_matrices: false, generate_lc_assignments: false });
    if let Some(mut inner) = cs.borrow_mut() {
        inner.assignments.witness_assignment.reserve_exact(expected.witness);
        // arkworks keeps a trace per constraint for naming an unsatisfied one (a span lookup and 40
        // bytes each, GiBs for a large partition) even when it builds no constraint. Nothing is
        // checked here, so none is kept: an R1CS constraint without its trace list is only counted.
        inner.predicate_traces.remove(R1CS_PREDICATE_LABEL);
    }
    circuit.generate_constraints(cs.clone())?;
    for (what, shape, circuit) in [
        ("instance variables", expected.instance, cs.num_instance_variables()),
        ("witness variables", expected.witness, cs.num_witness_variables()),
    ] {
        if shape != circuit {
            return Err(SynthError::ShapeMismatch { what, shape, circuit });
        }
    }
    Ok(take_parts(cs)?)
}

/// The instance and witness assignments out of a constraint system: moved when nothing else holds
/// it, copied otherwise.
fn take_parts(cs: ConstraintSystemRef<Fr>) -> Result<(Vec<Fr>, Vec<Fr>), SynthesisError> {
    let unique = matches!(&cs, ConstraintSystemRef::CS(rc) if std::rc::Rc::strong_count(rc) == 1);
    if unique {
        let inner = cs.into_inner().ok_or(SynthesisError::MissingCS)?;
        return Ok((inner.assignments.instance_assignment, inner.assignments.witness_assignment));
    }
    let inner = cs.borrow().ok_or(SynthesisError::MissingCS)?;
    Ok((inner.instance_assignment()?.to_vec(), inner.witness_assignment()?.to_vec()))
}

/// Synthesizes one partition of `shape`'s circuit without rebuilding its matrices: runs `circuit` in
/// witness-only mode, checks its variable counts against the shape, and writes `A·z`, `B·z`, `C·z`
/// (with the input-consistency rows, as [`crate::synthesize`] lays them out) into the caller's
/// buffers. With `options.check_satisfied` the first row with `a·b != c` is named.
///
/// The shape must be the circuit's: a circuit with the same variable counts but other constraints
/// gives evaluations that fail the satisfaction check (or, with the check off, the proof's self-check).
pub fn synthesize_into<C: ConstraintSynthesizer<Fr>>(
    circuit: C,
    shape: &R1csShape,
    out: Evaluations<'_>,
    options: &crate::SynthesisOptions,
) -> Result<Witness, SynthError> {
    let counts = shape.counts;
    let rows = counts.rows();
    for (buffer, len) in [("a", out.a.len()), ("b", out.b.len()), ("c", out.c.len())] {
        if len != rows {
            return Err(SynthError::BufferLength { buffer, expected: rows, found: len });
        }
    }
    let z = assignment(circuit, shape)?;
    let n_c = counts.constraints;
    let Evaluations { a, b, c } = out;
    let table = &shape.table;
    let density = {
        let (a_rows, a_inputs) = a.split_at_mut(n_c);
        let (b_rows, b_tail) = b.split_at_mut(n_c);
        let (c_rows, c_tail) = c.split_at_mut(n_c);
        let ((_, _), (_, density)) = rayon::join(
            || {
                rayon::join(
                    || shape.a().mul_into(table, &z, a_rows),
                    || shape.b().mul_into(table, &z, b_rows),
                )
            },
            || rayon::join(|| shape.c().mul_into(table, &z, c_rows), || Density::of(&z)),
        );
        a_inputs.copy_from_slice(&z[..counts.instance]);
        b_tail.fill(Fr::zero());
        c_tail.fill(Fr::zero());
        density
    };
    if options.check_satisfied {
        let first_bad = (0..n_c).into_par_iter().with_min_len(4096).find_first(|&i| a[i] * b[i] != c[i]);
        if let Some(index) = first_bad {
            return Err(SynthError::Unsatisfied { index, num_constraints: n_c });
        }
    }
    // arkworks' instance and witness vectors, then z; the density's two bitmaps.
    let peak_bytes = 2 * 32 * z.len() as u64 + 2 * 8 * z.len().div_ceil(64) as u64;
    Ok(Witness { assignment: z, density, peak_bytes })
}

/// As [`synthesize_into`], allocating the evaluations: a [`Synthesized`] equal to
/// [`crate::synthesize`]'s, and the peak bytes (with the evaluations counted).
pub fn synthesize_witness_only<C: ConstraintSynthesizer<Fr>>(
    circuit: C,
    shape: &R1csShape,
    options: &crate::SynthesisOptions,
) -> Result<(Synthesized, u64), SynthError> {
    let rows = shape.counts.rows();
    let (mut a, mut b, mut c) = (vec![Fr::zero(); rows], vec![Fr::zero(); rows], vec![Fr::zero(); rows]);
    let w = synthesize_into(circuit, shape, Evaluations { a: &mut a, b: &mut b, c: &mut c }, options)?;
    let peak = w.peak_bytes + 3 * 32 * rows as u64;
    Ok((Synthesized { counts: shape.counts, a, b, c, assignment: w.assignment, density: w.density }, peak))
}

/// Shapes in memory, shared: one [`R1csShape`] per shape id, recorded at most once.
#[derive(Debug, Default)]
pub struct ShapeCache {
    shapes: Mutex<HashMap<String, Arc<R1csShape>>>,
}

impl ShapeCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shape cached under `id`, if any.
    pub fn get(&self, id: &str) -> Option<Arc<R1csShape>> {
        self.lock().get(id).cloned()
    }

    /// Caches `shape` under `id` (replacing any before) and returns the shared handle.
    pub fn insert(&self, id: &str, shape: R1csShape) -> Arc<R1csShape> {
        let shape = Arc::new(shape);
        self.lock().insert(id.to_owned(), shape.clone());
        shape
    }

    /// The shape under `id`, recorded from `circuit` when not cached yet. Recording runs outside the
    /// lock; when two threads record the same id, the first insert wins and both get it.
    pub fn get_or_record<C: ConstraintSynthesizer<Fr>>(
        &self,
        id: &str,
        circuit: C,
    ) -> Result<Arc<R1csShape>, SynthError> {
        if let Some(s) = self.get(id) {
            return Ok(s);
        }
        let shape = Arc::new(R1csShape::record(circuit)?);
        Ok(self.lock().entry(id.to_owned()).or_insert(shape).clone())
    }

    /// Shapes cached.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no shape is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<R1csShape>>> {
        // A panic while holding the lock cannot leave the map half-updated (inserts are single calls).
        self.shapes.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
