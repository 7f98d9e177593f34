//! Bellpepper circuits as arkworks circuits, so every path of the engine (shape recording,
//! witness-only synthesis, the pipeline, the daemon) proves them unchanged.
//!
//! [`Bellpepper`] runs the bellpepper circuit on a `Recorder`, a bellpepper constraint system of its
//! own, then replays what it recorded into the arkworks constraint system it is given: the inputs in
//! order (bellpepper's input 0 is arkworks' constant one), the auxiliary variables in order, and, when
//! that system builds matrices, every constraint with its merged, non-zero terms. Arkworks numbers
//! instance and witness variables separately, so interleaved `alloc_input` and `alloc` calls land in
//! the same columns as bellperson's. A witness-only system gets the assignment alone, computed on a
//! [`Witnesses`] system (the constraints' closures are never called), on several threads where the
//! circuit allows ([`Witness`]).
//!
//! In setup mode (shape recording, key generation) a blank circuit's missing values are taken as
//! zero: only the shape is wanted there, as in bellperson's parameter generator.
//!
//! The recorder keeps bellperson's constraint system flags: it is not a witness generator (neptune's
//! Poseidon gadget would drop its constraints otherwise) and not extensible (WindowPoSt then
//! synthesizes its sectors one after another, which gives the same system as its parallel path).
//!
//! While it records constraints, the recorder also computes bellperson's densities: which auxiliary
//! variables appear in `A`, and which inputs and auxiliary variables appear in `B`, with a non-zero
//! coefficient after the terms of one variable are merged. Bellperson's parameter files leave out the
//! bases where these bits are zero; [`crate::params`] needs them to put the bases back in their
//! columns.

use std::sync::{Arc, Mutex, PoisonError};

use ark_bls12_381::Fr;
use ark_relations::gr1cs::{
    ConstraintSynthesizer, ConstraintSystemRef, LinearCombination as ArkLc, SynthesisError as ArkError,
    Variable as ArkVariable,
};
use bellpepper_core::{ConstraintSystem, Index, LinearCombination, SynthesisError as BellError, Variable};
use ff::Field;

use crate::field::to_ark;
use crate::witness::{Witness, Witnesses};

/// A growable bit vector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bits {
    words: Vec<u64>,
    len: usize,
}

impl Bits {
    fn push(&mut self) {
        if self.len.is_multiple_of(64) {
            self.words.push(0);
        }
        self.len += 1;
    }

    fn set(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    /// Bit `i`.
    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// The number of bits.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of bits set.
    pub fn count_ones(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }
}

/// Bellperson's densities of a circuit: which variables a proof's `A` and `B` MSMs touch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Densities {
    /// Auxiliary variables with a non-zero coefficient in some `A` (every input is in `A`).
    pub a_aux: Bits,
    /// Inputs, the constant one first, with a non-zero coefficient in some `B`.
    pub b_input: Bits,
    /// Auxiliary variables with a non-zero coefficient in some `B`.
    pub b_aux: Bits,
}

/// The sizes of a recorded bellpepper circuit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CircuitCounts {
    /// The circuit's own constraints (without bellperson's input rows).
    pub constraints: usize,
    /// Inputs, the constant one included.
    pub inputs: usize,
    /// Auxiliary variables.
    pub aux: usize,
}

/// What a synthesis left behind for its caller: bellpepper's own error when it failed, and, when it
/// recorded constraints, the counts and densities.
#[derive(Debug, Default)]
struct Outcome {
    error: Option<String>,
    recorded: Option<(CircuitCounts, Densities)>,
}

/// A bellpepper circuit over blstrs' scalars, seen as an arkworks circuit over `Fr`.
pub struct Bellpepper<C> {
    circuit: C,
    outcome: Arc<Mutex<Outcome>>,
}

/// Reads what a [`Bellpepper`] left after its synthesis; it stays valid after the circuit was consumed.
#[derive(Debug, Clone)]
pub struct Report(Arc<Mutex<Outcome>>);

impl Report {
    fn with<T>(&self, f: impl FnOnce(&Outcome) -> T) -> T {
        f(&self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Bellpepper's own message when the circuit failed (arkworks' error types cannot carry it).
    pub fn error(&self) -> Option<String> {
        self.with(|o| o.error.clone())
    }

    /// The counts and densities of the last synthesis that recorded constraints.
    pub fn recorded(&self) -> Option<(CircuitCounts, Densities)> {
        self.with(|o| o.recorded.clone())
    }
}

impl<C> Bellpepper<C> {
    /// Wraps `circuit`.
    pub fn new(circuit: C) -> Self {
        Self { circuit, outcome: Arc::default() }
    }

    /// The handle through which the synthesis's outcome is read afterwards.
    pub fn report(&self) -> Report {
        Report(self.outcome.clone())
    }
}

impl<C> std::fmt::Debug for Bellpepper<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bellpepper").field("circuit", &std::any::type_name::<C>()).finish()
    }
}

fn to_ark_error(e: &BellError) -> ArkError {
    match e {
        BellError::DivisionByZero => ArkError::DivisionByZero,
        BellError::Unsatisfiable => ArkError::Unsatisfiable,
        BellError::PolynomialDegreeTooLarge => ArkError::PolynomialDegreeTooLarge,
        _ => ArkError::AssignmentMissing,
    }
}

impl<C: Witness> ConstraintSynthesizer<Fr> for Bellpepper<C> {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), ArkError> {
        let fail = |message: String, error: ArkError| {
            self.outcome.lock().unwrap_or_else(PoisonError::into_inner).error = Some(message);
            Err(error)
        };
        let (record, blank) = (cs.should_construct_matrices(), cs.is_in_setup_mode());
        if !record && !blank {
            let mut w = Witnesses::root();
            if let Err(e) = self.circuit.witness(&mut w) {
                return fail(e.to_string(), to_ark_error(&e));
            }
            let (inputs, aux) = w.into_parts();
            for v in &inputs[1..] {
                let _ = cs.new_input_variable(|| Ok(*v))?;
            }
            drop(inputs);
            for v in &aux {
                let _ = cs.new_witness_variable(|| Ok(*v))?;
            }
            return Ok(());
        }
        let mut rec = Recorder::new(record, blank);
        if let Err(e) = self.circuit.synthesize(&mut rec) {
            return fail(e.to_string(), to_ark_error(&e));
        }
        if let Some(problem) = rec.problem.take() {
            return fail(problem, ArkError::Unsatisfiable);
        }
        let mut inputs = Vec::with_capacity(rec.inputs.len());
        inputs.push(ArkVariable::One);
        for v in &rec.inputs[1..] {
            inputs.push(cs.new_input_variable(|| Ok(*v))?);
        }
        let mut aux = Vec::with_capacity(rec.aux.len());
        for v in &rec.aux {
            aux.push(cs.new_witness_variable(|| Ok(*v))?);
        }
        let Some(rows) = rec.rows.take() else { return Ok(()) };
        let counts = CircuitCounts { constraints: rows.constraints(), inputs: inputs.len(), aux: aux.len() };
        let column = |term: &(Slot, Fr)| {
            let var = match term.0 {
                Slot::Input(i) => inputs[i as usize],
                Slot::Aux(j) => aux[j as usize],
            };
            (term.1, var)
        };
        for k in 0..rows.constraints() {
            let [a, b, c] = [0, 1, 2].map(|l| rows.lc(3 * k + l).iter().map(column).collect::<Vec<_>>());
            cs.enforce_r1cs_constraint(|| ArkLc(a), || ArkLc(b), || ArkLc(c))?;
        }
        self.outcome.lock().unwrap_or_else(PoisonError::into_inner).recorded = Some((counts, rows.densities));
        Ok(())
    }
}

/// A recorded term's variable, checked against the variables allocated when it was recorded.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Input(u32),
    Aux(u32),
}

/// Constraints as flat term lists, three linear combinations per constraint.
#[derive(Debug, Default)]
struct Rows {
    terms: Vec<(Slot, Fr)>,
    /// Where each linear combination's terms end.
    ends: Vec<usize>,
    densities: Densities,
}

impl Rows {
    fn constraints(&self) -> usize {
        self.ends.len() / 3
    }

    fn lc(&self, i: usize) -> &[(Slot, Fr)] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.terms[start..self.ends[i]]
    }
}

/// Which of bellperson's densities a linear combination feeds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    A,
    B,
    C,
}

/// Bellpepper's side of the bridge: the assignment and, when asked, the constraints and densities.
struct Recorder {
    inputs: Vec<Fr>,
    aux: Vec<Fr>,
    rows: Option<Rows>,
    /// The first thing wrong with the circuit's constraints (a variable never allocated, too many).
    problem: Option<String>,
    /// Setup mode: a blank circuit's missing values are taken as zero (only the shape is wanted).
    blank: bool,
}

impl Recorder {
    fn new(record: bool, blank: bool) -> Self {
        let mut rows = record.then(Rows::default);
        if let Some(r) = rows.as_mut() {
            r.densities.b_input.push();
        }
        Self { inputs: vec![Fr::from(1u64)], aux: Vec::new(), rows, problem: None, blank }
    }

    fn value(&self, v: Result<blstrs::Scalar, BellError>) -> Result<Fr, BellError> {
        match v {
            Ok(v) => Ok(to_ark(&v)),
            Err(BellError::AssignmentMissing) if self.blank => Ok(Fr::from(0u64)),
            Err(e) => Err(e),
        }
    }

    fn note(&mut self, problem: impl FnOnce() -> String) {
        if self.problem.is_none() {
            self.problem = Some(problem());
        }
    }

    fn record(&mut self, lc: &LinearCombination<blstrs::Scalar>, side: Side) {
        let (inputs, aux) = (self.inputs.len(), self.aux.len());
        let Some(rows) = self.rows.as_mut() else { return };
        let mut bad = None;
        for (&i, coeff) in lc.iter_inputs() {
            if bool::from(coeff.is_zero()) {
                continue;
            }
            if i >= inputs || i > u32::MAX as usize {
                bad = Some(format!("input {i}, of {inputs} allocated"));
                continue;
            }
            if side == Side::B {
                rows.densities.b_input.set(i);
            }
            rows.terms.push((Slot::Input(i as u32), to_ark(coeff)));
        }
        for (&j, coeff) in lc.iter_aux() {
            if bool::from(coeff.is_zero()) {
                continue;
            }
            if j >= aux || j > u32::MAX as usize {
                bad = Some(format!("auxiliary variable {j}, of {aux} allocated"));
                continue;
            }
            match side {
                Side::A => rows.densities.a_aux.set(j),
                Side::B => rows.densities.b_aux.set(j),
                Side::C => {}
            }
            rows.terms.push((Slot::Aux(j as u32), to_ark(coeff)));
        }
        rows.ends.push(rows.terms.len());
        if let Some(what) = bad {
            let k = rows.constraints();
            self.note(|| format!("constraint {k} uses {what}"));
        }
    }
}

impl ConstraintSystem<blstrs::Scalar> for Recorder {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _annotation: A, f: F) -> Result<Variable, BellError>
    where
        F: FnOnce() -> Result<blstrs::Scalar, BellError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = self.value(f())?;
        self.aux.push(value);
        if let Some(rows) = self.rows.as_mut() {
            rows.densities.a_aux.push();
            rows.densities.b_aux.push();
        }
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _annotation: A, f: F) -> Result<Variable, BellError>
    where
        F: FnOnce() -> Result<blstrs::Scalar, BellError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = self.value(f())?;
        self.inputs.push(value);
        if let Some(rows) = self.rows.as_mut() {
            rows.densities.b_input.push();
        }
        Ok(Variable::new_unchecked(Index::Input(self.inputs.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _annotation: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<blstrs::Scalar>) -> LinearCombination<blstrs::Scalar>,
        LB: FnOnce(LinearCombination<blstrs::Scalar>) -> LinearCombination<blstrs::Scalar>,
        LC: FnOnce(LinearCombination<blstrs::Scalar>) -> LinearCombination<blstrs::Scalar>,
    {
        if self.rows.is_none() {
            return;
        }
        self.record(&a(LinearCombination::zero()), Side::A);
        self.record(&b(LinearCombination::zero()), Side::B);
        self.record(&c(LinearCombination::zero()), Side::C);
    }

    fn push_namespace<NR, N>(&mut self, _name_fn: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
