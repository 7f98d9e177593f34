//! SHA-256 for witness-only synthesis: the values ark-crypto-primitives' `Sha256Gadget` allocates,
//! computed on machine words.
//!
//! The gadget computes every value through field elements. Each 32-bit addition turns its operands'
//! bits into field elements (a Montgomery multiplication per bit), sums them with field arithmetic,
//! and splits the sum back into bits through its canonical form; every allocated bit becomes a field
//! element through another multiplication. Witness-only synthesis needs none of that: only the values
//! of the variables, in the order the gadget allocates them. [`digest_witness`] runs SHA-256 on `u32`
//! words and pushes each variable the gadget would allocate straight into the constraint system's
//! assignment, as the field's constant 0 or 1.
//!
//! It follows the gadget's allocation rules exactly, bit by bit: a bit is a constant or a variable;
//! XOR and AND of two variables allocate one new variable, with a constant they fold (`x ^ 0 = x`,
//! `x ^ 1 = !x` without a new variable, `x & 0 = 0`, `x & 1 = x`); NOT, rotations and shifts allocate
//! nothing; an addition of `k` words (not all constant) allocates the `32 + ⌈log2 k⌉` low bits of the
//! exact sum. The tests compare the assignment with the gadget's, bit for bit, on messages of every
//! padding case and with constant and variable bytes mixed. The constraints themselves are only ever
//! built by the gadget: this path is taken only when the constraint system builds neither matrices nor
//! linear-combination values ([`witness_only`]).

use ark_bls12_381::Fr;
use ark_ff::{AdditiveGroup, Field, PrimeField};
use ark_r1cs_std::{
    convert::ToBitsGadget, fields::fp::AllocatedFp, fields::fp::FpVar, uint8::UInt8, GR1CSVar,
};
use ark_relations::gr1cs::{ConstraintSystemRef, LinearCombination, SynthesisError, Variable};

/// The round constants.
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// The initial hash value.
const H: [u32; 8] =
    [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// Whether `cs` runs witness-only: it builds neither matrices nor the values of linear combinations,
/// so only the variables' values matter (the case [`digest_witness`] is for).
pub(crate) fn witness_only(cs: &ConstraintSystemRef<Fr>) -> bool {
    !cs.is_in_setup_mode()
        && !cs.should_construct_matrices()
        && cs.borrow().is_some_and(|inner| !inner.should_generate_lc_assignments())
}

/// A 32-bit word as the gadget holds it: its value, and which of its bits are variables (the others
/// are constants).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Word {
    value: u32,
    vars: u32,
}

impl Word {
    const fn constant(value: u32) -> Self {
        Self { value, vars: 0 }
    }

    fn not(self) -> Self {
        Self { value: !self.value, vars: self.vars }
    }

    fn rotr(self, by: u32) -> Self {
        Self { value: self.value.rotate_right(by), vars: self.vars.rotate_right(by) }
    }

    fn shr(self, by: u32) -> Self {
        Self { value: self.value >> by, vars: self.vars >> by }
    }
}

/// The variables allocated so far, in order.
struct Allocations {
    bits: Vec<bool>,
}

impl Allocations {
    /// Allocates the bits of `value` selected by `mask`, lowest first.
    fn push_masked(&mut self, value: u64, mut mask: u64) {
        while mask != 0 {
            let i = mask.trailing_zeros();
            self.bits.push(value >> i & 1 == 1);
            mask &= mask - 1;
        }
    }

    /// XOR: a new variable where both bits are variables; `x ^ 0 = x` and `x ^ 1 = !x` otherwise.
    fn xor(&mut self, a: Word, b: Word) -> Word {
        let value = a.value ^ b.value;
        self.push_masked(u64::from(value), u64::from(a.vars & b.vars));
        Word { value, vars: a.vars | b.vars }
    }

    /// AND: a new variable where both bits are variables; `x & 0 = 0` and `x & 1 = x` otherwise.
    fn and(&mut self, a: Word, b: Word) -> Word {
        let value = a.value & b.value;
        let both = a.vars & b.vars;
        self.push_masked(u64::from(value), u64::from(both));
        let vars = both | (a.vars & !b.vars & b.value) | (b.vars & !a.vars & a.value);
        Word { value, vars }
    }

    /// Wrapping addition of `words`: constant when every bit is, else the `32 + ⌈log2 k⌉` low bits of
    /// the exact sum are allocated and the low 32 are the result's.
    fn add(&mut self, words: &[Word]) -> Word {
        if let [one] = words {
            return *one;
        }
        let sum: u64 = words.iter().map(|w| u64::from(w.value)).sum();
        if words.iter().all(|w| w.vars == 0) {
            return Word::constant(sum as u32);
        }
        let bits = 32 + words.len().next_power_of_two().trailing_zeros();
        self.push_masked(sum, (1u64 << bits) - 1);
        Word { value: sum as u32, vars: u32::MAX }
    }

    /// One compression of `block` (16 words, big-endian from the message bytes) into `state`, with
    /// the gadget's order of operations.
    fn compress(&mut self, state: &mut [Word; 8], block: &[Word; 16]) {
        let mut w = [Word::constant(0); 64];
        w[..16].copy_from_slice(block);
        for i in 16..64 {
            let s0 = {
                let x = self.xor(w[i - 15].rotr(7), w[i - 15].rotr(18));
                self.xor(x, w[i - 15].shr(3))
            };
            let s1 = {
                let x = self.xor(w[i - 2].rotr(17), w[i - 2].rotr(19));
                self.xor(x, w[i - 2].shr(10))
            };
            w[i] = self.add(&[w[i - 16], s0, w[i - 7], s1]);
        }
        let mut h = *state;
        for i in 0..64 {
            let ch = {
                let x1 = self.and(h[4], h[5]);
                let x2 = self.and(h[4].not(), h[6]);
                self.xor(x1, x2)
            };
            let ma = {
                let x1 = self.and(h[0], h[1]);
                let x2 = self.and(h[0], h[2]);
                let x3 = self.and(h[1], h[2]);
                let x = self.xor(x1, x2);
                self.xor(x, x3)
            };
            let s0 = {
                let x = self.xor(h[0].rotr(2), h[0].rotr(13));
                self.xor(x, h[0].rotr(22))
            };
            let s1 = {
                let x = self.xor(h[4].rotr(6), h[4].rotr(11));
                self.xor(x, h[4].rotr(25))
            };
            let t0 = self.add(&[h[7], s1, ch, Word::constant(K[i]), w[i]]);
            let t1 = self.add(&[s0, ma]);
            h[7] = h[6];
            h[6] = h[5];
            h[5] = h[4];
            h[4] = self.add(&[h[3], t0]);
            h[3] = h[2];
            h[2] = h[1];
            h[1] = h[0];
            h[0] = self.add(&[t0, t1]);
        }
        for (s, hi) in state.iter_mut().zip(h) {
            *s = self.add(&[*s, hi]);
        }
    }
}

/// A message byte: its value and which of its bits are variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Byte {
    value: u8,
    vars: u8,
}

fn byte_of(b: &UInt8<Fr>) -> Result<Byte, SynthesisError> {
    let mut byte = Byte { value: 0, vars: 0 };
    for (i, bit) in b.to_bits_le()?.iter().enumerate() {
        byte.value |= u8::from(bit.value()?) << i;
        byte.vars |= u8::from(!bit.is_constant()) << i;
    }
    Ok(byte)
}

/// SHA-256 of `message` with the gadget's padding, on words: the digest's bytes and which of their
/// bits are variables.
fn digest_words(message: &[Byte], allocations: &mut Allocations) -> [Byte; 32] {
    let mut padded = message.to_vec();
    padded.push(Byte { value: 0x80, vars: 0 });
    while padded.len() % 64 != 56 {
        padded.push(Byte { value: 0, vars: 0 });
    }
    let bit_len = 8 * message.len() as u64;
    padded.extend(bit_len.to_be_bytes().map(|value| Byte { value, vars: 0 }));
    let mut state = H.map(Word::constant);
    for chunk in padded.chunks_exact(64) {
        let mut block = [Word::constant(0); 16];
        for (word, b) in block.iter_mut().zip(chunk.chunks_exact(4)) {
            *word = Word {
                value: u32::from_be_bytes([b[0].value, b[1].value, b[2].value, b[3].value]),
                vars: u32::from_be_bytes([b[0].vars, b[1].vars, b[2].vars, b[3].vars]),
            };
        }
        allocations.compress(&mut state, &block);
    }
    let mut digest = [Byte { value: 0, vars: 0 }; 32];
    for (bytes, word) in digest.chunks_exact_mut(4).zip(state) {
        let (values, vars) = (word.value.to_be_bytes(), word.vars.to_be_bytes());
        for (j, b) in bytes.iter_mut().enumerate() {
            *b = Byte { value: values[j], vars: vars[j] };
        }
    }
    digest
}

/// What `Sha256Gadget::digest(message)` followed by `Boolean::le_bits_to_fp` of the digest's first
/// `bits` little-endian bits gives in a witness-only constraint system ([`witness_only`]): the same
/// variables allocated in `cs`, with the same values, and the field element of those bits.
///
/// Fails with `SynthesisError::AssignmentMissing` where a message bit has no value, and refuses a
/// constraint system that builds matrices or linear-combination values (the gadget is for those).
pub(crate) fn digest_witness(
    cs: &ConstraintSystemRef<Fr>,
    message: &[UInt8<Fr>],
    bits: usize,
) -> Result<FpVar<Fr>, SynthesisError> {
    if !witness_only(cs) || bits >= Fr::MODULUS_BIT_SIZE as usize {
        return Err(SynthesisError::Unsatisfiable);
    }
    let message = message.iter().map(byte_of).collect::<Result<Vec<_>, _>>()?;
    let mut allocations = Allocations { bits: Vec::with_capacity(48 * 1024 * (message.len() / 64 + 2)) };
    let digest = digest_words(&message, &mut allocations);
    for bit in allocations.bits {
        let _: Variable = cs.new_witness_variable(|| Ok(if bit { Fr::ONE } else { Fr::ZERO }))?;
    }
    let mut bytes = [0u8; 32];
    let mut variable = false;
    for (i, (b, d)) in bytes.iter_mut().zip(&digest).enumerate() {
        let keep = bits.saturating_sub(8 * i).min(8);
        let mask = if keep == 8 { 0xff } else { (1u8 << keep) - 1 };
        *b = d.value & mask;
        variable |= d.vars & mask != 0;
    }
    let value = Fr::from_le_bytes_mod_order(&bytes);
    if !variable {
        return Ok(FpVar::Constant(value));
    }
    // In a witness-only system a linear combination is only counted, never built, so the variable
    // stands for the digest's bits without them.
    let variable = cs.new_lc(LinearCombination::zero)?;
    Ok(FpVar::Var(AllocatedFp::new(Some(value), variable, cs.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_crypto_primitives::crh::sha256::constraints::Sha256Gadget;
    use ark_r1cs_std::{alloc::AllocVar, boolean::Boolean};
    use ark_relations::gr1cs::{ConstraintSystem, SynthesisMode};
    use rand::{Rng, SeedableRng};

    fn witness_only_cs() -> ConstraintSystemRef<Fr> {
        let cs = ConstraintSystem::<Fr>::new_ref();
        cs.set_mode(SynthesisMode::Prove { construct_matrices: false, generate_lc_assignments: false });
        cs
    }

    /// `message` in `cs`: bytes whose `vars` bits are witnesses, the others constants.
    fn alloc_message(cs: &ConstraintSystemRef<Fr>, message: &[Byte]) -> Vec<UInt8<Fr>> {
        message
            .iter()
            .map(|b| {
                let bits = (0..8)
                    .map(|i| {
                        let v = b.value >> i & 1 == 1;
                        if b.vars >> i & 1 == 1 {
                            Boolean::new_witness(cs.clone(), || Ok(v)).unwrap()
                        } else {
                            Boolean::Constant(v)
                        }
                    })
                    .collect::<Vec<_>>();
                UInt8::from_bits_le(&bits)
            })
            .collect()
    }

    fn witnesses(cs: &ConstraintSystemRef<Fr>) -> Vec<Fr> {
        cs.borrow().unwrap().witness_assignment().unwrap().to_vec()
    }

    /// The gadget and the word path on the same message: same variables, same values, same digest.
    fn agrees(message: &[Byte], bits: usize) {
        let (theirs, ours) = (witness_only_cs(), witness_only_cs());
        let digest = {
            let m = alloc_message(&theirs, message);
            let d = Sha256Gadget::digest(&m).unwrap();
            let b: Vec<Boolean<Fr>> =
                d.0.iter().flat_map(|byte| byte.to_bits_le().unwrap()).take(bits).collect();
            Boolean::le_bits_to_fp(&b).unwrap()
        };
        let m = alloc_message(&ours, message);
        let fast = digest_witness(&ours, &m, bits).unwrap();
        assert_eq!(witnesses(&ours), witnesses(&theirs), "{} bytes", message.len());
        let message_vars: usize = message.iter().map(|b| b.vars.count_ones() as usize).sum();
        if message_vars > 0 {
            // A compression allocates tens of thousands of variables: the comparison covers them.
            assert!(witnesses(&ours).len() > message_vars + 20_000, "{}", witnesses(&ours).len());
        }
        assert_eq!(fast.value().unwrap(), digest.value().unwrap());
        assert_eq!(fast.is_constant(), digest.is_constant());
    }

    #[test]
    fn the_word_path_allocates_what_the_gadget_allocates() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0x5a256);
        // Every padding case: lengths around the 56-byte boundary and whole blocks, with all bits
        // variables, all constants, and a random mix per bit.
        for len in [0, 1, 3, 4, 55, 56, 57, 63, 64, 65, 119, 120, 128, 150] {
            for kind in 0..3 {
                let message: Vec<Byte> = (0..len)
                    .map(|_| Byte {
                        value: rng.gen(),
                        vars: match kind {
                            0 => 0xff,
                            1 => 0,
                            _ => rng.gen(),
                        },
                    })
                    .collect();
                agrees(&message, 254);
            }
        }
        // Other widths of the digest's field element, and the message of a porep-like label.
        let message: Vec<Byte> = (0..72).map(|_| Byte { value: rng.gen(), vars: 0xff }).collect();
        for bits in [1, 8, 100, 253] {
            agrees(&message, bits);
        }
    }

    #[test]
    fn the_word_path_refuses_a_system_that_builds_constraints() {
        let cs = ConstraintSystem::<Fr>::new_ref();
        let m = UInt8::new_witness_vec(cs.clone(), &[1u8, 2, 3]).unwrap();
        assert!(!witness_only(&cs));
        assert!(digest_witness(&cs, &m, 254).is_err());
        let cs = witness_only_cs();
        let m = UInt8::new_witness_vec(cs.clone(), &[1u8, 2, 3]).unwrap();
        assert!(digest_witness(&cs, &m, 255).is_err(), "255 bits need a range check the gadget adds");
    }
}
