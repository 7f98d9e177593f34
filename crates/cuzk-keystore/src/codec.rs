//! Points as raw Montgomery limbs, and parallel encoding and decoding of point slices.
//!
//! A G1 point is `x, y`, a G2 point `x.c0, x.c1, y.c0, y.c1`, each coordinate 6 little-endian `u64`
//! limbs of arkworks' Montgomery form (`.0 .0`), so a record is 96 or 192 bytes: exactly the layout of
//! `cuzk_field::DeviceG1Affine` / `DeviceG2Affine`. The identity is all-zero limbs, which is never a
//! curve point (both curves have `b != 0`). Decoding checks that limbs are reduced below the modulus,
//! and nothing else: no curve or subgroup checks (the payload checksum vouches for the data).

use std::sync::atomic::{AtomicUsize, Ordering};

use ark_bls12_381::{g1, g2, Fq, Fq2};
use ark_ec::short_weierstrass::Affine;
use ark_ec::AffineRepr;
use ark_ff::{BigInt, PrimeField};
use rayon::prelude::*;

/// Points per rayon task at least: enough work to amortise the task, small enough to balance.
const MIN_POINTS_PER_TASK: usize = 1024;

/// Why a record does not decode to a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PointProblem {
    /// A coordinate's limbs are not below the base field modulus.
    #[error("coordinate {coordinate} is not reduced below the modulus")]
    NotReduced {
        /// Which coordinate: 0 = x (x.c0), 1 = y (x.c1), and for G2 2 = y.c0, 3 = y.c1.
        coordinate: usize,
    },
}

/// A point with a fixed-size raw record.
pub(crate) trait Codec: Copy + Send + Sync + 'static {
    /// Bytes per record.
    const SIZE: usize;
    /// Writes the record; `out` has exactly [`Codec::SIZE`] bytes.
    fn encode(&self, out: &mut [u8]);
    /// Reads a record of exactly [`Codec::SIZE`] bytes.
    fn decode(record: &[u8]) -> Result<Self, PointProblem>;
    /// The identity, a placeholder for records that fail to decode.
    fn zero() -> Self;
}

const FQ_LIMBS: usize = 6;
const FQ_BYTES: usize = 8 * FQ_LIMBS;

fn put_fq(out: &mut [u8], fq: &Fq) {
    for (bytes, limb) in out.chunks_exact_mut(8).zip(fq.0 .0) {
        bytes.copy_from_slice(&limb.to_le_bytes());
    }
}

/// The little-endian `u64` words of `record`. Words past its end read as all ones, which is never a
/// reduced limb, so a short record (which callers never pass) is refused rather than misread.
fn words<const W: usize>(record: &[u8]) -> [u64; W] {
    let mut out = [u64::MAX; W];
    let (chunks, _) = record.as_chunks::<8>();
    for (word, chunk) in out.iter_mut().zip(chunks) {
        *word = u64::from_le_bytes(*chunk);
    }
    out
}

/// Coordinate `coordinate` (limbs `6 * coordinate ..`) of `words`, checked to be reduced.
fn fq(words: &[u64], coordinate: usize) -> Result<Fq, PointProblem> {
    let limbs = words.get(coordinate * FQ_LIMBS..).and_then(|w| w.first_chunk::<FQ_LIMBS>());
    let limbs = BigInt::new(limbs.copied().unwrap_or([u64::MAX; FQ_LIMBS]));
    if limbs < Fq::MODULUS {
        Ok(Fq::new_unchecked(limbs))
    } else {
        Err(PointProblem::NotReduced { coordinate })
    }
}

impl Codec for Affine<g1::Config> {
    const SIZE: usize = 2 * FQ_BYTES;

    fn encode(&self, out: &mut [u8]) {
        if self.is_zero() {
            out.fill(0);
            return;
        }
        for (slot, fq) in out.chunks_exact_mut(FQ_BYTES).zip([&self.x, &self.y]) {
            put_fq(slot, fq);
        }
    }

    fn decode(record: &[u8]) -> Result<Self, PointProblem> {
        let w = words::<{ 2 * FQ_LIMBS }>(record);
        if w == [0; 2 * FQ_LIMBS] {
            return Ok(Self::identity());
        }
        Ok(Self::new_unchecked(fq(&w, 0)?, fq(&w, 1)?))
    }

    fn zero() -> Self {
        Self::identity()
    }
}

impl Codec for Affine<g2::Config> {
    const SIZE: usize = 4 * FQ_BYTES;

    fn encode(&self, out: &mut [u8]) {
        if self.is_zero() {
            out.fill(0);
            return;
        }
        for (slot, fq) in out.chunks_exact_mut(FQ_BYTES).zip([&self.x.c0, &self.x.c1, &self.y.c0, &self.y.c1])
        {
            put_fq(slot, fq);
        }
    }

    fn decode(record: &[u8]) -> Result<Self, PointProblem> {
        let w = words::<{ 4 * FQ_LIMBS }>(record);
        if w == [0; 4 * FQ_LIMBS] {
            return Ok(Self::identity());
        }
        let x = Fq2::new(fq(&w, 0)?, fq(&w, 1)?);
        let y = Fq2::new(fq(&w, 2)?, fq(&w, 3)?);
        Ok(Self::new_unchecked(x, y))
    }

    fn zero() -> Self {
        Self::identity()
    }
}

/// Encodes `points` into `out`, which holds `points.len() * P::SIZE` bytes, in parallel.
pub(crate) fn encode_slice<P: Codec>(points: &[P], out: &mut [u8]) {
    out.par_chunks_mut(P::SIZE)
        .zip(points.par_iter())
        .with_min_len(MIN_POINTS_PER_TASK)
        .for_each(|(record, point)| point.encode(record));
}

/// Decodes every whole record of `bytes` in parallel and appends the points to `out` (which must have
/// room reserved). On a bad record, returns its index within `bytes` and the problem; `out` then holds
/// placeholders and must be discarded.
pub(crate) fn decode_append<P: Codec>(bytes: &[u8], out: &mut Vec<P>) -> Result<(), (usize, PointProblem)> {
    let first_bad = AtomicUsize::new(usize::MAX);
    out.par_extend(bytes.par_chunks_exact(P::SIZE).enumerate().with_min_len(MIN_POINTS_PER_TASK).map(
        |(i, record)| {
            P::decode(record).unwrap_or_else(|_| {
                first_bad.fetch_min(i, Ordering::Relaxed);
                P::zero()
            })
        },
    ));
    let bad = first_bad.into_inner();
    if bad == usize::MAX {
        return Ok(());
    }
    let record = bytes.chunks_exact(P::SIZE).nth(bad).unwrap_or_default();
    match P::decode(record) {
        Err(problem) => Err((bad, problem)),
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_bls12_381::{G1Affine, G2Affine};
    use ark_ec::CurveGroup;
    use ark_std::test_rng;

    fn round_trip<P: Codec + PartialEq + std::fmt::Debug>(points: &[P]) {
        let mut bytes = vec![0u8; points.len() * P::SIZE];
        encode_slice(points, &mut bytes);
        let mut back: Vec<P> = Vec::with_capacity(points.len());
        assert_eq!(decode_append(&bytes, &mut back), Ok(()));
        assert_eq!(back, points);
    }

    /// `n` distinct points `p, p + q, p + 2q, ...` from two random ones (cheaper than `n` random points).
    fn points<G: CurveGroup>(n: usize) -> Vec<G::Affine> {
        let rng = &mut test_rng();
        let (p, q) = (G::rand(rng), G::rand(rng));
        let all: Vec<G> = std::iter::successors(Some(p), |x| Some(*x + q)).take(n).collect();
        G::normalize_batch(&all)
    }

    #[test]
    fn points_and_identities_round_trip() {
        let mut g1 = points::<ark_bls12_381::G1Projective>(3000);
        let mut g2 = points::<ark_bls12_381::G2Projective>(1500);
        for i in [0, 7, 2999] {
            if let Some(p) = g1.get_mut(i) {
                *p = G1Affine::identity();
            }
        }
        if let Some(p) = g2.get_mut(1499) {
            *p = G2Affine::identity();
        }
        round_trip(&g1);
        round_trip(&g2);
    }

    #[test]
    fn unreduced_limbs_are_named() {
        let mut bytes = vec![0u8; 3 * G2Affine::SIZE];
        encode_slice(&[G2Affine::generator(); 3], &mut bytes);
        // The top limb of y.c1 of point 1 becomes all ones: far above the modulus.
        let start = G2Affine::SIZE + 4 * FQ_BYTES - 8;
        bytes.get_mut(start..start + 8).unwrap_or_default().fill(0xff);
        let mut out = Vec::new();
        assert_eq!(
            decode_append::<G2Affine>(&bytes, &mut out),
            Err((1, PointProblem::NotReduced { coordinate: 3 }))
        );
    }
}
