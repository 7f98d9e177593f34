//! A Pippenger multi-scalar multiplication with batch-affine bucket accumulation.
//!
//! For short Weierstrass curves (both groups of BLS12-381) on affine bases:
//!
//! * Scalars above `(r-1)/2` are replaced by `r - s` with the base negated (a sign flag), so every
//!   scalar has at most `MODULUS_BIT_SIZE - 1` bits and small negative scalars stay small.
//! * Each scalar is cut into signed (Booth) digits of `c` bits, `d ∈ [-2^(c-1), 2^(c-1)]`, each digit
//!   read straight from the scalar's bits, so windows are independent and run in parallel.
//! * Within a window, points go to `2^(c-1)` affine buckets. Additions into occupied buckets are
//!   collected into batches of independent affine additions whose denominators share one field
//!   inversion (Montgomery's trick): about 5M+1S per addition instead of 8M+2S for a mixed
//!   XYZZ addition. A point whose bucket already waits in the current batch is deferred to the next
//!   (up to a batch's worth of deferrals; beyond that, and for the last few stragglers, it goes into a
//!   per-bucket XYZZ accumulator, so skewed digit distributions cannot make the batching quadratic).
//!   Windows are grouped so that one batch draws from at least `TARGET_BUCKETS` buckets.
//!   Doublings (`P + P`) and cancellations (`P + (-P)`) are handled exactly.
//! * Buckets are summed with the running-sum trick in XYZZ coordinates, windows combined by doublings.

use ark_ec::short_weierstrass::{Affine, Bucket, Projective, SWCurveConfig};
use ark_ec::{AffineRepr, CurveGroup, VariableBaseMSM};
use ark_ff::{AdditiveGroup, BigInteger, Field, PrimeField, Zero};
use rayon::prelude::*;

/// Below this many points ark-ec's own MSM is used.
const SMALL_MSM: usize = 64;

/// The largest number of additions sharing one inversion.
const MAX_BATCH: usize = 256;

/// Pending additions below this count are finished without a batch inversion.
const MIN_BATCH: usize = 16;

/// The number of buckets a batch should draw from, to keep collisions rare.
const TARGET_BUCKETS: usize = 2048;

/// The scalar of one point after folding large scalars onto their negation.
#[derive(Clone, Copy)]
struct Scalar<B> {
    /// The scalar, at most `MODULUS_BIT_SIZE - 1` bits; zero for skipped points.
    bits: B,
    /// Whether the base is to be negated.
    neg: bool,
}

/// `Σ scalars[i]·bases[i]` over the common length of both slices.
pub(crate) fn msm<P: SWCurveConfig>(bases: &[Affine<P>], scalars: &[P::ScalarField]) -> Projective<P> {
    let n = bases.len().min(scalars.len());
    let (bases, scalars) = (&bases[..n], &scalars[..n]);
    if n < SMALL_MSM {
        let bigints: Vec<_> = scalars.iter().map(|s| s.into_bigint()).collect();
        return Projective::<P>::msm_bigint(bases, &bigints);
    }
    let half = P::ScalarField::MODULUS_MINUS_ONE_DIV_TWO;
    let prepared: Vec<Scalar<<P::ScalarField as PrimeField>::BigInt>> = scalars
        .par_iter()
        .zip(bases.par_iter())
        .with_min_len(1 << 10)
        .map(|(s, b)| {
            let s = s.into_bigint();
            if b.is_zero() || s.is_zero() {
                Scalar { bits: Default::default(), neg: false }
            } else if s > half {
                let mut m = P::ScalarField::MODULUS;
                m.sub_with_borrow(&s);
                Scalar { bits: m, neg: true }
            } else {
                Scalar { bits: s, neg: false }
            }
        })
        .collect();
    let nonzero = prepared.par_iter().with_min_len(1 << 12).filter(|s| !s.bits.is_zero()).count();
    if nonzero == 0 {
        return Projective::zero();
    }
    let scalar_bits = P::ScalarField::MODULUS_BIT_SIZE as usize;
    let c = window_bits(nonzero, scalar_bits);
    msm_prepared(bases, &prepared, c, scalar_bits)
}

/// The window width minimising the estimated cost for `n` nonzero scalars of `bits` bits.
fn window_bits(n: usize, bits: usize) -> usize {
    // Per window: one batch-affine addition per point, about four additions' worth of work per
    // bucket (two XYZZ additions each), 2^(c-1) buckets.
    (4..=18usize).min_by_key(|&c| bits.div_ceil(c) * (n + (1usize << (c + 1)))).unwrap_or(8)
}

/// The MSM over prepared scalars with window width `c`; `scalar_bits` is the scalar field's bit size.
fn msm_prepared<P: SWCurveConfig, B: BigInteger>(
    bases: &[Affine<P>],
    scalars: &[Scalar<B>],
    c: usize,
    scalar_bits: usize,
) -> Projective<P> {
    // Scalars have at most `scalar_bits - 1` bits; the top Booth digit must see a zero sign bit.
    let windows = scalar_bits.div_ceil(c);
    // Windows are processed in groups sharing one batch, so that a batch has enough distinct buckets
    // to draw from; but at least as many groups as threads.
    let buckets = 1usize << (c - 1);
    let threads = rayon::current_num_threads().max(1);
    let group = TARGET_BUCKETS.div_ceil(buckets).min(windows.div_ceil(threads)).max(1);
    let sums: Vec<Bucket<P>> = (0..windows)
        .step_by(group)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|w0| group_sums(bases, scalars, w0, group.min(windows - w0), c))
        .collect::<Vec<Vec<_>>>()
        .concat();
    let mut total = Projective::<P>::zero();
    for (w, s) in sums.iter().enumerate().rev() {
        if w + 1 < windows {
            for _ in 0..c {
                total.double_in_place();
            }
        }
        total += s;
    }
    total
}

/// The Booth digit of window `w` (width `c`) of `limbs`: `Σ_{j<c-1} 2^j b_{wc+j} - 2^(c-1)·b_{wc+c-1} + b_{wc-1}`.
#[inline(always)]
fn booth_digit(limbs: &[u64], w: usize, c: usize) -> i64 {
    // Read the c+1 bits [wc-1, wc+c), with b_{-1} = 0.
    let v = if w == 0 {
        (limbs.first().copied().unwrap_or(0) << 1) & ((1u64 << (c + 1)) - 1)
    } else {
        let start = w * c - 1;
        let (limb, off) = (start / 64, start % 64);
        let lo = limbs.get(limb).copied().unwrap_or(0) >> off;
        let hi = if off + c + 1 > 64 { limbs.get(limb + 1).copied().unwrap_or(0) << (64 - off) } else { 0 };
        (lo | hi) & ((1u64 << (c + 1)) - 1)
    };
    (((v + 1) >> 1) as i64) - (((v >> c) << c) as i64)
}

/// The per-window state: affine buckets and the pending batch of additions.
struct Window<P: SWCurveConfig> {
    /// Bucket coordinates (valid where `occupied`).
    buckets: Vec<(P::BaseField, P::BaseField)>,
    /// Whether a bucket holds a point (an empty bucket is the identity).
    occupied: Vec<bool>,
    /// Whether a bucket is the target of an addition in the current batch.
    busy: Vec<bool>,
    /// Pending additions: bucket index and the affine point to add.
    batch: Vec<(u32, P::BaseField, P::BaseField)>,
    /// Additions whose bucket was busy, to retry after the batch.
    deferred: Vec<(u32, P::BaseField, P::BaseField)>,
    /// Per-bucket XYZZ accumulators for additions that neither fit the batch nor the deferred list.
    overflow: Vec<Bucket<P>>,
    /// Scratch for the retried additions.
    retry: Vec<(u32, P::BaseField, P::BaseField)>,
    /// Denominators of the batch.
    dens: Vec<P::BaseField>,
    /// Prefix products of the denominators.
    prefix: Vec<P::BaseField>,
    /// Batch size that triggers a flush.
    max_batch: usize,
}

/// How one batched addition is finished.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AddKind {
    /// Distinct x: chord.
    Chord,
    /// Equal points: tangent.
    Tangent,
    /// Opposite points (or a 2-torsion doubling): the identity.
    Cancel,
}

impl<P: SWCurveConfig> Window<P> {
    fn new(num_buckets: usize) -> Self {
        let max_batch = (num_buckets / 8).clamp(MIN_BATCH, MAX_BATCH);
        Self {
            buckets: vec![(P::BaseField::ZERO, P::BaseField::ZERO); num_buckets],
            occupied: vec![false; num_buckets],
            busy: vec![false; num_buckets],
            batch: Vec::with_capacity(max_batch + 1),
            deferred: Vec::with_capacity(max_batch),
            overflow: vec![Bucket::<P>::ZERO; num_buckets],
            retry: Vec::with_capacity(max_batch),
            dens: Vec::with_capacity(max_batch + 1),
            prefix: Vec::with_capacity(max_batch + 1),
            max_batch,
        }
    }

    /// Adds `(x, y)` to bucket `b`, possibly deferred until the batch is flushed.
    #[inline(always)]
    fn insert(&mut self, b: u32, x: P::BaseField, y: P::BaseField) {
        let bi = b as usize;
        let (Some(busy), Some(occupied)) = (self.busy.get(bi).copied(), self.occupied.get(bi).copied())
        else {
            return;
        };
        if busy {
            if self.deferred.len() < self.max_batch {
                self.deferred.push((b, x, y));
            } else {
                self.overflow[bi] += Affine::new_unchecked(x, y);
            }
        } else if !occupied {
            self.buckets[bi] = (x, y);
            self.occupied[bi] = true;
        } else {
            self.batch.push((b, x, y));
            self.busy[bi] = true;
        }
    }

    /// Inserts and flushes when the batch is full.
    #[inline(always)]
    fn add(&mut self, b: u32, x: P::BaseField, y: P::BaseField) {
        self.insert(b, x, y);
        if self.batch.len() >= self.max_batch {
            self.flush();
        }
    }

    /// Performs the pending batch, then moves the deferred additions into the next batch.
    fn flush(&mut self) {
        self.run_batch();
        if !self.deferred.is_empty() {
            std::mem::swap(&mut self.deferred, &mut self.retry);
            let mut retry = std::mem::take(&mut self.retry);
            for &(b, x, y) in &retry {
                self.insert(b, x, y);
            }
            retry.clear();
            self.retry = retry;
        }
    }

    /// Flushes until nothing is pending; once a batch gets too small to pay for its inversion, the
    /// rest goes to the XYZZ accumulators.
    fn finish(&mut self) {
        while self.batch.len() >= MIN_BATCH {
            self.flush();
        }
        for &(b, x, y) in self.batch.iter().chain(&self.deferred) {
            if let Some(o) = self.overflow.get_mut(b as usize) {
                *o += Affine::new_unchecked(x, y);
            }
            if let Some(busy) = self.busy.get_mut(b as usize) {
                *busy = false;
            }
        }
        self.batch.clear();
        self.deferred.clear();
    }

    /// Performs all additions of the batch with one inversion.
    fn run_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        self.dens.clear();
        self.prefix.clear();
        let mut acc = P::BaseField::ONE;
        for &(b, x2, y2) in &self.batch {
            let (x1, y1) = self.buckets[b as usize];
            let den = if x1 != x2 {
                x2 - x1
            } else if y1 == y2 && !y1.is_zero() {
                y1.double()
            } else {
                P::BaseField::ONE
            };
            self.prefix.push(acc);
            acc *= den;
            self.dens.push(den);
        }
        let Some(mut inv) = acc.inverse() else {
            // Unreachable (every denominator is nonzero), but stay exact regardless.
            self.run_batch_projective();
            return;
        };
        for j in (0..self.batch.len()).rev() {
            let (b, x2, y2) = self.batch[j];
            let bi = b as usize;
            let inv_j = inv * self.prefix[j];
            inv *= self.dens[j];
            let (x1, y1) = self.buckets[bi];
            let kind = if x1 != x2 {
                AddKind::Chord
            } else if y1 == y2 && !y1.is_zero() {
                AddKind::Tangent
            } else {
                AddKind::Cancel
            };
            match kind {
                AddKind::Chord => {
                    let lambda = (y2 - y1) * inv_j;
                    let x3 = lambda.square() - x1 - x2;
                    let y3 = lambda * (x1 - x3) - y1;
                    self.buckets[bi] = (x3, y3);
                }
                AddKind::Tangent => {
                    let x1x1 = x1.square();
                    let mut num = x1x1.double() + x1x1;
                    if !P::COEFF_A.is_zero() {
                        num += P::COEFF_A;
                    }
                    let lambda = num * inv_j;
                    let x3 = lambda.square() - x1.double();
                    let y3 = lambda * (x1 - x3) - y1;
                    self.buckets[bi] = (x3, y3);
                }
                AddKind::Cancel => self.occupied[bi] = false,
            }
            self.busy[bi] = false;
        }
        self.batch.clear();
    }

    /// The batch by plain projective arithmetic.
    fn run_batch_projective(&mut self) {
        for &(b, x2, y2) in &self.batch {
            let bi = b as usize;
            let (x1, y1) = self.buckets[bi];
            let sum = (Projective::<P>::from(Affine::new_unchecked(x1, y1)) + Affine::new_unchecked(x2, y2))
                .into_affine();
            match sum.xy() {
                Some(xy) => self.buckets[bi] = xy,
                None => self.occupied[bi] = false,
            }
            self.busy[bi] = false;
        }
        self.batch.clear();
    }

    /// `Σ_b (b+1)·bucket[start + b]` for `b < len`, by running sums.
    fn reduce(&self, start: usize, len: usize) -> Bucket<P> {
        let mut running = Bucket::<P>::ZERO;
        let mut sum = Bucket::<P>::ZERO;
        let end = (start + len).min(self.buckets.len());
        let buckets = self.buckets.get(start..end).unwrap_or(&[]);
        let occupied = self.occupied.get(start..end).unwrap_or(&[]);
        let overflow = self.overflow.get(start..end).unwrap_or(&[]);
        for ((&(x, y), &occ), o) in buckets.iter().zip(occupied).zip(overflow).rev() {
            if occ {
                running += Affine::new_unchecked(x, y);
            }
            running += o;
            sum += &running;
        }
        sum
    }
}

/// The sums of windows `w0..w0 + g`: `Σ_i d_i·bases[i]` for each window's digits `d_i`.
fn group_sums<P: SWCurveConfig, B: BigInteger>(
    bases: &[Affine<P>],
    scalars: &[Scalar<B>],
    w0: usize,
    g: usize,
    c: usize,
) -> Vec<Bucket<P>> {
    let nb = 1usize << (c - 1);
    let mut win = Window::<P>::new(g * nb);
    for (s, base) in scalars.iter().zip(bases) {
        let limbs = s.bits.as_ref();
        if limbs.iter().all(|&l| l == 0) {
            continue;
        }
        let Some((x, y)) = base.xy() else { continue };
        for j in 0..g {
            let d = booth_digit(limbs, w0 + j, c);
            if d == 0 {
                continue;
            }
            let y = if (d < 0) != s.neg { -y } else { y };
            win.add((j * nb) as u32 + (d.unsigned_abs() - 1) as u32, x, y);
        }
    }
    win.finish();
    (0..g).map(|j| win.reduce(j * nb, nb)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_bls12_381::{Fr, G1Affine, G1Projective};
    use ark_ec::PrimeGroup;
    use ark_ff::UniformRand;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn reference<P: SWCurveConfig>(bases: &[Affine<P>], scalars: &[P::ScalarField]) -> Projective<P> {
        let bigints: Vec<_> = scalars.iter().map(|s| s.into_bigint()).collect();
        Projective::<P>::msm_bigint(bases, &bigints)
    }

    fn naive<P: SWCurveConfig>(bases: &[Affine<P>], scalars: &[P::ScalarField]) -> Projective<P> {
        bases.iter().zip(scalars).map(|(b, s)| *b * *s).sum()
    }

    #[derive(Clone, Copy, Debug)]
    enum Scalars {
        Random,
        Zero,
        One,
        ZeroOne,
        NearModulus,
        Small,
        Mixed,
    }

    #[derive(Clone, Copy, Debug)]
    enum Bases {
        Random,
        WithIdentities,
        AllEqual,
        Opposite,
        FewDistinct,
    }

    fn make_scalars<F: PrimeField>(kind: Scalars, n: usize, rng: &mut StdRng) -> Vec<F> {
        (0..n)
            .map(|_| match kind {
                Scalars::Random => F::rand(rng),
                Scalars::Zero => F::zero(),
                Scalars::One => F::one(),
                Scalars::ZeroOne => F::from(rng.gen_range(0u64..2)),
                Scalars::NearModulus => -F::from(rng.gen_range(1u64..4)),
                Scalars::Small => F::from(rng.gen_range(0u64..1 << 20)),
                Scalars::Mixed => match rng.gen_range(0..6) {
                    0 => F::zero(),
                    1 => F::one(),
                    2 => -F::one(),
                    3 => -F::from(2u64),
                    4 => F::from(rng.gen::<u64>()),
                    _ => F::rand(rng),
                },
            })
            .collect()
    }

    fn make_bases<P: SWCurveConfig>(kind: Bases, n: usize, rng: &mut StdRng) -> Vec<Affine<P>>
    where
        Projective<P>: PrimeGroup,
    {
        // Distinct pseudo-random points: a chain start + i·step from random start and step.
        let g = Projective::<P>::generator();
        let (start, step) = (g * P::ScalarField::rand(rng), g * P::ScalarField::rand(rng));
        let mut acc = start;
        let chain: Vec<Projective<P>> = (0..n.max(4))
            .map(|_| {
                acc += step;
                acc
            })
            .collect();
        let pool = Projective::<P>::normalize_batch(&chain);
        let fixed = pool[0];
        let few = &pool[1..4];
        let mut out: Vec<Affine<P>> = Vec::with_capacity(n);
        for i in 0..n {
            out.push(match kind {
                Bases::Random => pool[i],
                Bases::WithIdentities => {
                    if rng.gen_range(0..4) == 0 {
                        Affine::zero()
                    } else {
                        pool[i]
                    }
                }
                Bases::AllEqual => fixed,
                Bases::Opposite => {
                    if i % 2 == 1 {
                        -out[i - 1]
                    } else {
                        pool[i]
                    }
                }
                Bases::FewDistinct => {
                    let p = few[rng.gen_range(0..few.len())];
                    if rng.gen() {
                        p
                    } else {
                        -p
                    }
                }
            });
        }
        out
    }

    fn sizes() -> Vec<usize> {
        let mut v = vec![0, 1, 2, 3, 5, 63, 64, 65, 100];
        for k in [7, 9, 12] {
            v.extend([(1 << k) - 1, 1 << k, (1 << k) + 1]);
        }
        v
    }

    fn check<P: SWCurveConfig>(group: &str, seed: u64, use_naive: bool)
    where
        Projective<P>: PrimeGroup,
    {
        let scalar_kinds = [
            Scalars::Random,
            Scalars::Zero,
            Scalars::One,
            Scalars::ZeroOne,
            Scalars::NearModulus,
            Scalars::Small,
            Scalars::Mixed,
        ];
        let base_kinds =
            [Bases::Random, Bases::WithIdentities, Bases::AllEqual, Bases::Opposite, Bases::FewDistinct];
        let mut rng = StdRng::seed_from_u64(seed);
        for n in sizes() {
            for (i, &sk) in scalar_kinds.iter().enumerate() {
                // Cover every scalar kind for every base kind over the sizes, without the full product.
                let bk = base_kinds[(i + n) % base_kinds.len()];
                let bases = make_bases::<P>(bk, n, &mut rng);
                let scalars = make_scalars::<P::ScalarField>(sk, n, &mut rng);
                let got = msm(&bases, &scalars);
                let want =
                    if use_naive && n <= 300 { naive(&bases, &scalars) } else { reference(&bases, &scalars) };
                assert_eq!(got, want, "{group}: seed {seed}, n {n}, scalars {sk:?}, bases {bk:?}");
            }
        }
    }

    #[test]
    fn g1_matches_ark() {
        check::<ark_bls12_381::g1::Config>("G1", 0x6731, true);
    }

    #[test]
    fn g2_matches_ark() {
        check::<ark_bls12_381::g2::Config>("G2", 0x6732, true);
    }

    #[test]
    fn every_window_width_matches() {
        let seed = 0x77;
        let mut rng = StdRng::seed_from_u64(seed);
        let n = 300;
        let bases = make_bases::<ark_bls12_381::g1::Config>(Bases::FewDistinct, n, &mut rng);
        let mut scalars = make_scalars::<Fr>(Scalars::Mixed, n, &mut rng);
        scalars.extend(make_scalars::<Fr>(Scalars::Random, 10, &mut rng));
        let bases: Vec<G1Affine> = bases.into_iter().chain(make_bases(Bases::Random, 10, &mut rng)).collect();
        let want = reference(&bases, &scalars);
        let prepared: Vec<_> = scalars
            .iter()
            .zip(&bases)
            .map(|(s, b)| {
                let s = s.into_bigint();
                if b.is_zero() || s.is_zero() {
                    Scalar { bits: Default::default(), neg: false }
                } else if s > Fr::MODULUS_MINUS_ONE_DIV_TWO {
                    let mut m = Fr::MODULUS;
                    m.sub_with_borrow(&s);
                    Scalar { bits: m, neg: true }
                } else {
                    Scalar { bits: s, neg: false }
                }
            })
            .collect();
        for c in 2..=17 {
            let got: G1Projective = msm_prepared(&bases, &prepared, c, 255);
            assert_eq!(got, want, "seed {seed}, c {c}");
        }
    }

    #[test]
    fn booth_digits_reconstruct() {
        let seed = 0x99;
        let mut rng = StdRng::seed_from_u64(seed);
        for c in 2..=17 {
            for _ in 0..20 {
                let mut s = Fr::rand(&mut rng).into_bigint();
                if s > Fr::MODULUS_MINUS_ONE_DIV_TWO {
                    let mut m = Fr::MODULUS;
                    m.sub_with_borrow(&s);
                    s = m;
                }
                let mut acc = Fr::zero();
                let base = Fr::from(1u64 << c);
                for w in (0..255usize.div_ceil(c)).rev() {
                    let d = booth_digit(s.as_ref(), w, c);
                    assert!(d.unsigned_abs() <= 1 << (c - 1), "seed {seed}, c {c}");
                    acc = acc * base + if d < 0 { -Fr::from(d.unsigned_abs()) } else { Fr::from(d as u64) };
                }
                assert_eq!(acc.into_bigint(), s, "seed {seed}, c {c}");
            }
        }
    }
}
