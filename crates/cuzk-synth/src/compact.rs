//! A partition's assignment in the form a device evaluates it from: the zeros and ones as two bitmaps
//! (its density's), every other value packed in order, and per 64-entry word of the bitmaps the
//! number of packed values before it, so entry `i` is found without a scan.
//!
//! Groth16 witnesses of hash circuits are mostly bits, so this is a small fraction of `z` (an eighth of
//! a byte per bit against 32 bytes). [`synthesize_compact`] runs a circuit witness-only and keeps only
//! this form: the sparse products `A·z`, `B·z`, `C·z` and the satisfaction check are left to the
//! backend, which holds the shape's matrices ([`crate::R1csShape`]) next to the key.

use ark_bls12_381::Fr;
use ark_ff::{One, Zero};
use ark_relations::gr1cs::ConstraintSynthesizer;
use rayon::prelude::*;

use crate::{Counts, Density, SynthError};

/// Words of the bitmaps one task packs the values of.
const WORDS_PER_BLOCK: usize = 1024;

/// A partition's assignment `z`, compact: see the module's docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactWitness {
    counts: Counts,
    density: Density,
    /// Per word of the bitmaps, the packed values before it.
    ranks: Vec<u64>,
    /// The values that are neither 0 nor 1, in order.
    others: Vec<Fr>,
    /// The instance part of `z` (the constant 1, then the public inputs), for the proof's check.
    instance: Vec<Fr>,
}

impl CompactWitness {
    /// Encodes `z` (a full assignment of a circuit of `counts`), classifying its entries on the way.
    ///
    /// Fails with [`SynthError::ShapeMismatch`] when `z` does not have `counts.variables()` entries.
    pub fn encode(counts: Counts, z: &[Fr]) -> Result<Self, SynthError> {
        if z.len() < counts.instance {
            return Err(SynthError::ShapeMismatch {
                what: "assignment entries",
                shape: counts.variables(),
                circuit: z.len(),
            });
        }
        let (instance, witness) = z.split_at(counts.instance);
        Self::encode_parts(counts, instance, witness)
    }

    /// [`CompactWitness::encode`] of `z = instance || witness`, without joining them.
    pub(crate) fn encode_parts(counts: Counts, instance: &[Fr], witness: &[Fr]) -> Result<Self, SynthError> {
        check_parts(counts, instance.len(), witness.len())?;
        let len = counts.variables();
        let at = |i: usize| if i < instance.len() { &instance[i] } else { &witness[i - instance.len()] };
        let words = len.div_ceil(64);
        let (zero, one, ranks, before) = classify(len, at);
        // Pass 2, per block of words: the packed values, written straight to their places.
        let mut others = vec![Fr::zero(); before];
        let mut blocks = Vec::with_capacity(words.div_ceil(WORDS_PER_BLOCK));
        let mut rest = &mut others[..];
        for first in (0..words).step_by(WORDS_PER_BLOCK) {
            let end = ranks.get(first + WORDS_PER_BLOCK).map_or(before, |&r| r as usize);
            let (block, tail) = rest.split_at_mut(end - ranks[first] as usize);
            blocks.push((first, block));
            rest = tail;
        }
        blocks.into_par_iter().for_each(|(first, block)| {
            let mut next = block.iter_mut();
            for w in first..words.min(first + WORDS_PER_BLOCK) {
                let packed = !(zero[w] | one[w]);
                for (b, i) in (w * 64..len.min(w * 64 + 64)).enumerate() {
                    if packed >> b & 1 == 1 {
                        if let Some(slot) = next.next() {
                            *slot = *at(i);
                        }
                    }
                }
            }
        });
        let density = Density::from_bits(len, zero, one);
        Ok(Self { counts, density, ranks, others, instance: instance.to_vec() })
    }

    /// [`CompactWitness::encode`] of `z = instance || witness`, taking the witness vector, whose other
    /// values are packed in place: no second vector of `z`'s size is ever held, so the most this
    /// needs is the assignment and the bitmaps ([`CompactWitness::peak_bytes`]).
    ///
    /// Fails like [`CompactWitness::encode`] when the vectors' lengths are not `counts`'.
    pub fn encode_owned(counts: Counts, instance: Vec<Fr>, witness: Vec<Fr>) -> Result<Self, SynthError> {
        check_parts(counts, instance.len(), witness.len())?;
        let len = counts.variables();
        let inst = instance.len();
        let (zero, one, ranks, before) = {
            let at = |i: usize| if i < inst { &instance[i] } else { &witness[i - inst] };
            classify(len, at)
        };
        // Each packed witness value moves to its rank among the witness's packed values, never past
        // where it was read: one forward pass in place, then the instance's few in front.
        let mut others = witness;
        let mut instance_others = Vec::new();
        let mut next = 0;
        for (w, (&zero, &one)) in zero.iter().zip(&one).enumerate() {
            let mut packed = !(zero | one);
            while packed != 0 {
                let i = 64 * w + packed.trailing_zeros() as usize;
                packed &= packed - 1;
                if i >= len {
                    break;
                }
                if i < inst {
                    instance_others.push(instance[i]);
                } else {
                    others[next] = others[i - inst];
                    next += 1;
                }
            }
        }
        others.truncate(next);
        others.splice(0..0, instance_others);
        others.shrink_to_fit();
        debug_assert_eq!(others.len(), before);
        let density = Density::from_bits(len, zero, one);
        Ok(Self { counts, density, ranks, others, instance })
    }

    /// `z` again, in full (the host's reference for a device's expansion).
    pub fn expand(&self) -> Vec<Fr> {
        let mut z = vec![Fr::zero(); self.counts.variables()];
        z.par_chunks_mut(64).enumerate().for_each(|(w, chunk)| {
            let (zero, one) = (self.density.zero_bits()[w], self.density.one_bits()[w]);
            let mut next = self.ranks[w] as usize;
            for (b, v) in chunk.iter_mut().enumerate() {
                if zero >> b & 1 == 1 {
                    *v = Fr::zero();
                } else if one >> b & 1 == 1 {
                    *v = Fr::one();
                } else {
                    *v = self.others[next];
                    next += 1;
                }
            }
        });
        z
    }

    /// The circuit's counts.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Which entries are 0, 1 or other.
    pub fn density(&self) -> &Density {
        &self.density
    }

    /// Per 64-entry word of the density's bitmaps, the number of packed values before it.
    pub fn ranks(&self) -> &[u64] {
        &self.ranks
    }

    /// The entries that are neither 0 nor 1, in order.
    pub fn others(&self) -> &[Fr] {
        &self.others
    }

    /// The instance part of `z`, the leading 1 included.
    pub fn instance(&self) -> &[Fr] {
        &self.instance
    }

    /// The public inputs as a verifier takes them (the instance without the leading 1).
    pub fn public_inputs(&self) -> &[Fr] {
        &self.instance[1..]
    }

    /// Bytes this form holds in host memory (its vectors' lengths), what a partition waiting for its
    /// upload keeps.
    pub fn host_bytes(&self) -> u64 {
        let words = self.ranks.len() as u64;
        3 * 8 * words + 32 * (self.others.len() + self.instance.len()) as u64
    }

    /// Bytes a device upload of this form copies: the bitmaps and ranks, and the packed values.
    pub fn upload_bytes(&self) -> u64 {
        3 * 8 * self.ranks.len() as u64 + 32 * self.others.len() as u64
    }

    /// The most bytes [`synthesize_compact`] holds for a circuit of `counts` at once: arkworks'
    /// assignment vectors (reserved at their final lengths), with the bitmaps and ranks beside them
    /// while the other values are packed in place, and the instance's packed values.
    pub fn peak_bytes(counts: Counts) -> u64 {
        let vars = counts.variables() as u64;
        32 * vars + 3 * 8 * vars.div_ceil(64) + 2 * 32 * counts.instance as u64
    }
}

/// Refuses instance and witness parts of other lengths than `counts`', naming which.
fn check_parts(counts: Counts, instance: usize, witness: usize) -> Result<(), SynthError> {
    for (what, shape, len) in
        [("instance variables", counts.instance, instance), ("witness variables", counts.witness, witness)]
    {
        if len != shape {
            return Err(SynthError::ShapeMismatch { what, shape, circuit: len });
        }
    }
    Ok(())
}

/// Pass 1 of an encoding, per word of `len` entries (`at(i)` is entry `i`): its zero and one bits
/// (the rest are the packed values), then per word the packed values before it, and their total.
fn classify<'a>(len: usize, at: impl Fn(usize) -> &'a Fr + Sync) -> (Vec<u64>, Vec<u64>, Vec<u64>, usize) {
    let words = len.div_ceil(64);
    let (zero, one): (Vec<u64>, Vec<u64>) = (0..words)
        .into_par_iter()
        .map(|w| {
            let (mut zero, mut one) = (0u64, 0u64);
            for (b, i) in (w * 64..len.min(w * 64 + 64)).enumerate() {
                let v = at(i);
                if v.is_zero() {
                    zero |= 1 << b;
                } else if v.is_one() {
                    one |= 1 << b;
                }
            }
            (zero, one)
        })
        .unzip();
    let mut ranks = Vec::with_capacity(words);
    let mut before = 0usize;
    for w in 0..words {
        ranks.push(before as u64);
        let entries = len.min(w * 64 + 64) - w * 64;
        before += entries - (zero[w] | one[w]).count_ones() as usize;
    }
    (zero, one, ranks, before)
}

/// Runs `circuit` witness-only for a shape of `counts` (its variable counts checked against them)
/// and returns only the compact form of its assignment: no `A·z`, `B·z`, `C·z` on the host and no
/// satisfaction check here, so the host needs the shape's counts, not its matrices. The backend that
/// evaluates the shape ([`crate::R1csShape`], resident beside the key) checks every row and names
/// the first with `a·b != c`.
pub fn synthesize_compact<C: ConstraintSynthesizer<Fr>>(
    circuit: C,
    counts: Counts,
) -> Result<CompactWitness, SynthError> {
    let (instance, witness) = crate::shape::assignment_parts(circuit, counts)?;
    CompactWitness::encode_owned(counts, instance, witness)
}
