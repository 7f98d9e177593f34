//! Density of an assignment: which scalars are 0, 1 or anything else.
//!
//! Groth16 witnesses are dominated by bits. MSM backends skip zeros, add the bases of ones with a plain
//! batch addition, and run the bucket method only on the rest.

use ark_bls12_381::Fr;
use ark_ff::{BigInteger, One, PrimeField, Zero};
use rayon::prelude::*;

/// The class of one scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScalarClass {
    /// The scalar is 0: its base can be skipped.
    Zero,
    /// The scalar is 1: its base is added as is.
    One,
    /// Any other value.
    Other,
}

/// Bitmaps marking the zeros and ones of a scalar vector, with counts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Density {
    len: usize,
    zero: Vec<u64>,
    one: Vec<u64>,
    num_zero: usize,
    num_one: usize,
}

impl Density {
    /// Classifies every scalar of `scalars`, in parallel.
    pub fn of(scalars: &[Fr]) -> Self {
        let (zero, one): (Vec<u64>, Vec<u64>) = scalars
            .par_chunks(64)
            .map(|chunk| {
                let (mut z, mut o) = (0u64, 0u64);
                for (bit, s) in chunk.iter().enumerate() {
                    if s.is_zero() {
                        z |= 1 << bit;
                    } else if s.is_one() {
                        o |= 1 << bit;
                    }
                }
                (z, o)
            })
            .unzip();
        let num_zero = zero.iter().map(|w| w.count_ones() as usize).sum();
        let num_one = one.iter().map(|w| w.count_ones() as usize).sum();
        Self { len: scalars.len(), zero, one, num_zero, num_one }
    }

    /// A density from its bitmaps (laid out as [`Density::zero_bits`]) over `len` scalars.
    pub(crate) fn from_bits(len: usize, zero: Vec<u64>, one: Vec<u64>) -> Self {
        let num_zero = zero.iter().map(|w| w.count_ones() as usize).sum();
        let num_one = one.iter().map(|w| w.count_ones() as usize).sum();
        Self { len, zero, one, num_zero, num_one }
    }

    /// Number of scalars classified.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no scalars were classified.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The class of scalar `i`. Panics if `i >= len()`, like slice indexing.
    pub fn class(&self, i: usize) -> ScalarClass {
        assert!(i < self.len, "density index {i} out of range {}", self.len);
        let (w, b) = (i / 64, i % 64);
        if self.zero[w] >> b & 1 == 1 {
            ScalarClass::Zero
        } else if self.one[w] >> b & 1 == 1 {
            ScalarClass::One
        } else {
            ScalarClass::Other
        }
    }

    /// Number of zero scalars.
    pub fn num_zero(&self) -> usize {
        self.num_zero
    }

    /// Number of scalars equal to one.
    pub fn num_one(&self) -> usize {
        self.num_one
    }

    /// Number of scalars that are neither zero nor one.
    pub fn num_other(&self) -> usize {
        self.len - self.num_zero - self.num_one
    }

    /// The zero bitmap: bit `i % 64` of word `i / 64` is set when scalar `i` is zero.
    pub fn zero_bits(&self) -> &[u64] {
        &self.zero
    }

    /// The one bitmap, laid out like [`Density::zero_bits`].
    pub fn one_bits(&self) -> &[u64] {
        &self.one
    }
}

/// Scalars by the bits of their values: 0, 1, then below 2^16, 2^64, 2^128, and the rest. What an
/// MSM does with a scalar depends on it: nothing for a zero, one addition for a one, and one entry
/// for each window its bits reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ValueSizes {
    /// Scalars counted.
    pub len: usize,
    /// Zeros.
    pub zeros: usize,
    /// Ones.
    pub ones: usize,
    /// From 2 to below 2^16.
    pub below_2_16: usize,
    /// From 2^16 to below 2^64.
    pub below_2_64: usize,
    /// From 2^64 to below 2^128.
    pub below_2_128: usize,
    /// From 2^128.
    pub wider: usize,
}

impl ValueSizes {
    /// Counts `scalars`, in parallel.
    pub fn of(scalars: &[Fr]) -> Self {
        scalars
            .par_chunks(1 << 14)
            .map(|chunk| {
                let mut s = Self { len: chunk.len(), ..Self::default() };
                for v in chunk {
                    let class = match v.into_bigint().num_bits() {
                        0 => &mut s.zeros,
                        1 => &mut s.ones,
                        2..=16 => &mut s.below_2_16,
                        17..=64 => &mut s.below_2_64,
                        65..=128 => &mut s.below_2_128,
                        _ => &mut s.wider,
                    };
                    *class += 1;
                }
                s
            })
            .reduce(Self::default, |a, b| Self {
                len: a.len + b.len,
                zeros: a.zeros + b.zeros,
                ones: a.ones + b.ones,
                below_2_16: a.below_2_16 + b.below_2_16,
                below_2_64: a.below_2_64 + b.below_2_64,
                below_2_128: a.below_2_128 + b.below_2_128,
                wider: a.wider + b.wider,
            })
    }

    /// `n` of these scalars as a percentage.
    pub fn percent(&self, n: usize) -> f64 {
        100.0 * n as f64 / self.len.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_ff::Field;

    #[test]
    fn values_are_counted_by_their_bits() {
        let two = |k: u64| Fr::from(2u64).pow([k]);
        let one = Fr::one();
        let values = [Fr::zero(), one, two(1), two(16) - one, two(16), two(64) - one, two(64), two(127)];
        let mut all = values.to_vec();
        all.extend([two(128), -one]);
        // Across chunks of the parallel count too.
        all.extend(std::iter::repeat_n(one, 1 << 15));
        let s = ValueSizes::of(&all);
        let expected = ValueSizes {
            len: 10 + (1 << 15),
            zeros: 1,
            ones: 1 + (1 << 15),
            below_2_16: 2,
            below_2_64: 2,
            below_2_128: 2,
            wider: 2,
        };
        assert_eq!(s, expected);
        assert_eq!(ValueSizes::of(&[]), ValueSizes::default());
    }
}
