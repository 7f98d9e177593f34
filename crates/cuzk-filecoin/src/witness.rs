//! Witness-only synthesis of bellpepper circuits, on several threads where the circuit is made of
//! independent pieces.
//!
//! [`Witnesses`] is a bellpepper constraint system that keeps the assignment alone: the inputs and
//! auxiliary values in allocation order (input 0 the constant one); constraints' closures are never
//! called. It is extensible in bellpepper's sense (`new`, `extend`), so Filecoin's PoSt circuits
//! synthesize their sectors on rayon's threads and join them in order, as bellperson's prover does.
//!
//! A circuit that can split itself further says how in [`Witness::witness`]: a PoRep partition
//! synthesizes its challenges in parts, each part the circuit's shared prefix (its public inputs and
//! commitments) and a run of challenges. The first part keeps its prefix; the others evaluate theirs
//! and drop it (`Witnesses::skipping`), and each part's prefix is checked against the prefix alone
//! before the parts are joined, so the joined assignment is the one sequential synthesis gives.
//! Indices are never read here: a witness-only system hands its variables to closures it does not
//! call, so a part's variables may be numbered from its own start.

use ark_bls12_381::Fr;
use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};

use crate::field::to_ark;

/// How a bellpepper circuit's witness is computed: whole by default (its `synthesize`); a circuit of
/// independent pieces may compute them on several threads.
pub trait Witness: Circuit<blstrs::Scalar> + Sized {
    /// Appends the circuit's assignment to `w`, in the order sequential synthesis allocates it.
    fn witness(self, w: &mut Witnesses) -> Result<(), SynthesisError> {
        self.synthesize(w)
    }
}

/// A witness-only bellpepper constraint system (see the module's documentation).
#[derive(Debug)]
pub struct Witnesses {
    inputs: Vec<Fr>,
    aux: Vec<Fr>,
    /// Inputs and auxiliary variables still to evaluate and drop: a shared prefix another part keeps.
    skip: (usize, usize),
    /// What was dropped, in order: inputs, then auxiliary values.
    skipped: (Vec<Fr>, Vec<Fr>),
}

impl Witnesses {
    /// A system holding only the constant one, as a circuit's synthesis begins.
    pub fn root() -> Self {
        Self { inputs: vec![Fr::from(1u64)], ..Self::new() }
    }

    /// A root system that evaluates and drops the first `inputs` inputs (after the constant one) and
    /// `aux` auxiliary variables allocated in it.
    pub(crate) fn skipping(inputs: usize, aux: usize) -> Self {
        Self { skip: (inputs, aux), ..Self::root() }
    }

    /// The inputs, the constant one first.
    pub fn inputs(&self) -> &[Fr] {
        &self.inputs
    }

    /// The auxiliary values.
    pub fn aux(&self) -> &[Fr] {
        &self.aux
    }

    /// The inputs and auxiliary values, to hand to another system.
    pub fn into_parts(self) -> (Vec<Fr>, Vec<Fr>) {
        (self.inputs, self.aux)
    }

    /// Whether this part dropped exactly `prefix`'s assignment (what a root system holds after the
    /// prefix alone), or, when it dropped nothing, begins with it.
    pub(crate) fn has_prefix(&self, prefix: &Witnesses) -> bool {
        let (inputs, aux) = (&prefix.inputs[1..], &prefix.aux[..]);
        if self.skip != (0, 0) {
            return false;
        }
        if self.skipped.0.is_empty() && self.skipped.1.is_empty() {
            self.inputs.get(1..=inputs.len()) == Some(inputs) && self.aux.get(..aux.len()) == Some(aux)
        } else {
            self.skipped.0 == inputs && self.skipped.1 == aux
        }
    }
}

/// Puts `value` in `skipped` while `left` says the prefix is not yet dropped, else in `kept`; the
/// index it returns is never read (see the module's documentation).
fn keep_or_skip(value: Fr, left: &mut usize, skipped: &mut Vec<Fr>, kept: &mut Vec<Fr>) -> usize {
    let to = if *left > 0 {
        *left -= 1;
        skipped
    } else {
        kept
    };
    to.push(value);
    to.len() - 1
}

impl ConstraintSystem<blstrs::Scalar> for Witnesses {
    type Root = Self;

    /// An empty system (bellpepper's extensible circuits allocate its constant one first).
    fn new() -> Self {
        Self { inputs: Vec::new(), aux: Vec::new(), skip: (0, 0), skipped: (Vec::new(), Vec::new()) }
    }

    fn alloc<F, A, AR>(&mut self, _annotation: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<blstrs::Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let at = keep_or_skip(to_ark(&f()?), &mut self.skip.1, &mut self.skipped.1, &mut self.aux);
        Ok(Variable::new_unchecked(Index::Aux(at)))
    }

    fn alloc_input<F, A, AR>(&mut self, _annotation: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<blstrs::Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let at = keep_or_skip(to_ark(&f()?), &mut self.skip.0, &mut self.skipped.0, &mut self.inputs);
        Ok(Variable::new_unchecked(Index::Input(at)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _annotation: A, _a: LA, _b: LB, _c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<blstrs::Scalar>) -> LinearCombination<blstrs::Scalar>,
        LB: FnOnce(LinearCombination<blstrs::Scalar>) -> LinearCombination<blstrs::Scalar>,
        LC: FnOnce(LinearCombination<blstrs::Scalar>) -> LinearCombination<blstrs::Scalar>,
    {
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

    fn is_extensible() -> bool {
        true
    }

    fn extend(&mut self, other: &Self) {
        self.inputs.extend_from_slice(other.inputs.get(1..).unwrap_or_default());
        self.aux.extend_from_slice(&other.aux);
    }
}

/// Synthesizes `parts` (each the circuit's shared prefix and a run of its pieces, in order) on rayon's
/// threads into `w`, given the prefix's own assignment (`prefix`, a root system after the prefix alone):
/// the first part keeps its prefix, the others drop theirs, and every part's prefix must equal it.
pub(crate) fn join_parts<P: Send>(
    w: &mut Witnesses,
    prefix: &Witnesses,
    parts: Vec<P>,
    synthesize: impl Fn(&mut Witnesses, P) -> Result<(), SynthesisError> + Sync,
) -> Result<(), SynthesisError> {
    use rayon::prelude::*;
    let (inputs, aux) = (prefix.inputs.len() - 1, prefix.aux.len());
    let done: Vec<Result<Witnesses, SynthesisError>> = parts
        .into_par_iter()
        .enumerate()
        .map(|(k, part)| {
            let mut sub = if k == 0 { Witnesses::root() } else { Witnesses::skipping(inputs, aux) };
            synthesize(&mut sub, part)?;
            Ok(sub)
        })
        .collect();
    let mut joined = Vec::with_capacity(done.len());
    for (k, part) in done.into_iter().enumerate() {
        let part = part?;
        if !part.has_prefix(prefix) {
            return Err(SynthesisError::IoError(std::io::Error::other(format!(
                "part {k} of the circuit's parallel synthesis does not begin with its shared prefix \
                 ({inputs} inputs, {aux} auxiliary values)"
            ))));
        }
        joined.push(part);
    }
    w.aux.reserve(joined.iter().map(|p| p.aux.len()).sum());
    for part in joined {
        w.extend(&part);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellpepper_core::num::AllocatedNum;
    use ff::Field;

    /// A prefix of one input and two auxiliary values, then `pieces` pieces, each squaring the
    /// prefix's value `piece + 1` times, allocating an input between its squarings.
    fn prefix_and_pieces<CS: ConstraintSystem<blstrs::Scalar>>(
        cs: &mut CS,
        x: u64,
        pieces: std::ops::Range<u64>,
    ) -> Result<(), SynthesisError> {
        let a = AllocatedNum::alloc(cs.namespace(|| "a"), || Ok(blstrs::Scalar::from(x)))?;
        a.inputize(cs.namespace(|| "a input"))?;
        let b = a.square(cs.namespace(|| "b"))?;
        for p in pieces {
            let mut v = b.clone();
            for i in 0..=p {
                v = v.mul(cs.namespace(|| format!("{p} {i}")), &a)?;
                if i == p / 2 {
                    v.inputize(cs.namespace(|| format!("{p} {i} input")))?;
                }
            }
        }
        Ok(())
    }

    #[test]
    fn parts_joined_give_the_sequential_assignment() {
        let cases = [(5u64, vec![0..2, 2..3, 3..5]), (3, vec![0..3, 3..3]), (4, vec![0..1, 1..4])];
        for (pieces, split) in cases {
            let mut whole = Witnesses::root();
            prefix_and_pieces(&mut whole, 7, 0..pieces).unwrap();
            let mut prefix = Witnesses::root();
            prefix_and_pieces(&mut prefix, 7, 0..0).unwrap();
            let mut joined = Witnesses::root();
            join_parts(&mut joined, &prefix, split, |w, r| prefix_and_pieces(w, 7, r)).unwrap();
            assert_eq!(joined.inputs(), whole.inputs(), "{pieces} pieces");
            assert_eq!(joined.aux(), whole.aux(), "{pieces} pieces");
            assert!(joined.inputs().len() > 2 && joined.aux().len() > 3);
        }
    }

    #[test]
    fn a_part_whose_prefix_differs_is_refused() {
        let mut prefix = Witnesses::root();
        prefix_and_pieces(&mut prefix, 7, 0..0).unwrap();
        let mut joined = Witnesses::root();
        // The second part's prefix is of another value: the join must not take it.
        let e = join_parts(&mut joined, &prefix, vec![(7, 0..1), (8, 1..2)], |w, (x, r)| {
            prefix_and_pieces(w, x, r)
        })
        .unwrap_err();
        assert!(e.to_string().contains("part 1"), "{e}");
    }

    #[test]
    fn extend_joins_root_systems_as_bellpeppers_extensible_circuits_expect() {
        let mut whole = Witnesses::root();
        prefix_and_pieces(&mut whole, 3, 0..2).unwrap();
        let mut w = Witnesses::root();
        for r in [0..1, 1..2] {
            let mut sub = Witnesses::new();
            sub.alloc_input(|| "one", || Ok(blstrs::Scalar::ONE)).unwrap();
            prefix_and_pieces(&mut sub, 3, r).unwrap();
            w.extend(&sub);
        }
        // Each piece repeats the prefix here (extend joins whole systems): the constant one, the
        // prefix's input twice and one input a piece.
        assert_eq!(w.inputs().len(), 1 + 2 + 2);
        assert_eq!(w.aux().len(), whole.aux().len() + 2);
    }
}
