//! The shape of an MSM: its tuning ([`MsmConfig`]) and, per batch, the window width and the sizes
//! of the bucket machinery ([`Plan`]).

use cuzk_field::CurveId;

use crate::kernels::msm::SUM_THREADS as BLOCK;
use crate::kernels::MulUnits;
use crate::CudaError;

/// Tuning of the MSM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsmConfig {
    /// Window width in bits (2..=24) without a table; `None` picks it from the batch size and the
    /// curve ([`Plan::default_window_for`]).
    pub window_bits: Option<u32>,
    /// Most points per batch, unless the bases have their own ([`crate::GpuBases::set_batch`]).
    pub batch: usize,
    /// How the first summing round adds a bucket's points.
    pub first_round: FirstRound,
    /// Chains per thread of [`FirstRound::BatchAffine`] (pieces added at once, sharing an inversion
    /// per step); `None` picks the curve's default.
    pub batch_chains: Option<u32>,
    /// How the sort puts the digits' entries in bucket order.
    pub sort: Sort,
    /// Which units the products of G1's batched first round ([`FirstRound::BatchAffine`]) use; G2
    /// and the other rounds multiply on the integer units whatever this says.
    pub units: MulUnits,
    /// Where the points whose scalar is 1 are added.
    pub ones: Ones,
}

impl Default for MsmConfig {
    fn default() -> Self {
        Self {
            window_bits: None,
            batch: 1 << 24,
            first_round: FirstRound::Auto,
            batch_chains: None,
            sort: Sort::Binned,
            units: MulUnits::Integer,
            ones: Ones::Auto,
        }
    }
}

/// How the sort writes each digit's entry at its place in bucket order, once the digits are counted
/// per bucket and the counts scanned. Both give the same buckets (the order inside a bucket differs,
/// the sums do not).
///
/// On the H200 the binned sort wins (docs/benchmarks/cuda-msm.md): for G1 2^24 with a table its two
/// passes take 2.4 + 1.5 ms against the direct scatter's 9.8, whose cost is two scattered L2
/// requests per digit (an atomic with return and a 4-byte store), where the binned passes write
/// their output in runs staged in shared memory and make one global atomic per run. The binned sort
/// needs a temporary of 8 bytes per entry (1.75 GB for 13 x 2^24 entries), counted in the MSMs'
/// buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// In one pass, each entry written straight to its bucket: an atomic on the bucket's cursor and a
    /// random 4-byte store per digit over the whole entries array.
    Direct,
    /// In two passes through a temporary of (bucket, entry) pairs grouped by runs of 1024 buckets or
    /// more (8 bytes per entry, kept once per size on the sort's stream), each pass sorting a tile of
    /// its output in shared memory (the first by run of buckets, the second by bucket) and writing it
    /// out in runs. Sets of more than 2^22 buckets in all (20-bit windows without a table) are sorted
    /// a few sets at a time through the temporary, which then holds the largest part's entries.
    #[default]
    Binned,
}

/// Fewest points per batch that take [`FirstRound::BatchAffine`] under [`FirstRound::Auto`], per
/// curve. On the H200 (docs/benchmarks/cuda-msm.md): at 2^24 points it is 15% faster for G1 and 25%
/// for G2; G1 loses below 2^22 (2^20: 18.9 ms against 13.4, too few threads to hide its latency),
/// G2 still gains at 2^20 (32.1 against 45.8 ms).
pub const fn batch_affine_from(curve: CurveId) -> usize {
    match curve {
        CurveId::G1 => 1 << 22,
        CurveId::G2 => 1 << 20,
    }
}

/// How the first summing round adds the sorted points into bucket partials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FirstRound {
    /// [`FirstRound::BatchAffine`] for batches of at least [`batch_affine_from`] points, else
    /// [`FirstRound::Xyzz`].
    #[default]
    Auto,
    /// One piece per thread, each point added into an XYZZ accumulator (a mixed addition: 8
    /// multiplications and 2 squarings).
    Xyzz,
    /// Many pieces per thread, added in affine coordinates one step of all of them at a time, their
    /// inversions shared (Montgomery's trick: 5 multiplications and a squaring per addition, and one
    /// inversion per step for all of them).
    BatchAffine,
}

/// Where the points whose scalar is 1 are added. The sort lists them in one bucket after the sets'
/// buckets (the ones' bucket), and their sum enters the result once, unweighted. Witnesses are
/// mostly zeros and ones: with 45% ones, the ones' kernel took 35.3 ms of a 2^27 G1 MSM of 86.7 ms
/// (H200, docs/benchmarks/cuda-msm.md), 0.58 ns an addition, where the batched round's additions of
/// the same MSM took 0.30.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ones {
    /// [`Ones::InRound`] with the batched first round ([`FirstRound::BatchAffine`]), else
    /// [`Ones::Apart`].
    #[default]
    Auto,
    /// By a kernel of their own before the first round (`G_sum_ones`: a fixed share a thread, each
    /// point added into an XYZZ accumulator by a mixed addition), its partials then added up.
    Apart,
    /// By the first summing round, as one more bucket after the sets' (the later rounds add its
    /// partials like any bucket's), its sum then taken out of the buckets (`G_bucket_sum`).
    InRound,
}

/// Widest window the kernels take.
pub const MAX_WINDOW_BITS: u32 = 24;

/// Fewest points per batch from which a G1 MSM without a table takes [`WIDE_WINDOW_BITS`] by
/// default. On the H200, G1 random scalars in one batch (docs/benchmarks/cuda-msm.md): 2^25 points
/// 199.4 ms at 20 bits against 203.2 at 16; 2^26 371.9 against 399.4; 2^27 718.8 against 795.1 (18
/// and 22 bits in between or worse). Below 2^25 the reduction of 2^19 buckets per window costs more
/// than the fewer additions save (16 bits is best at 2^24). G2 keeps [`Plan::default_window`]: not
/// measured wider in one batch.
pub const WIDE_WINDOW_FROM: usize = 1 << 25;

/// The default window of G1 batches of at least [`WIDE_WINDOW_FROM`] points.
pub const WIDE_WINDOW_BITS: u32 = 20;

/// Fails unless `c` is a window width the kernels take (2..=[`MAX_WINDOW_BITS`]).
pub(crate) fn check_window(c: u32) -> Result<(), CudaError> {
    if (2..=MAX_WINDOW_BITS).contains(&c) {
        Ok(())
    } else {
        Err(CudaError::Size { op: "msm", size: c as usize, reason: "window width must be 2..=24" })
    }
}

/// Fails unless `chains` (chains per thread of a batched affine first round; `None`: the default) is
/// 1..=1024.
pub(crate) fn check_chains(chains: Option<u32>) -> Result<(), CudaError> {
    match chains {
        Some(k) if !(1..=1024).contains(&k) => Err(CudaError::Size {
            op: "msm",
            size: k as usize,
            reason: "batched affine chains per thread must be 1..=1024",
        }),
        _ => Ok(()),
    }
}

/// The shape of one batch's bucket machinery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Window width `c`.
    pub c: u32,
    /// Windows, `ceil(256 / c)` (signed digits of a 255-bit scalar never carry out of the top one).
    pub windows: u32,
    /// Buckets per set, `2^(c-1)`.
    pub half: u32,
    /// Windows per bucket set: the multiples per point of the bases' table (`2^(c·j)·P` for
    /// `j < multiples`), 1 without a table.
    pub multiples: u32,
    /// Bucket sets, `ceil(windows / multiples)`: combined on the host as `Σ_s 2^(c·multiples·s)·S_s`.
    pub sets: u32,
    /// Segments per set in the window reduction (a power of two dividing `half`).
    pub segments: u32,
    /// Threads of the first summing round: the windows' entries are cut into this many equal pieces
    /// (fewer when there are fewer entries than pieces).
    pub pieces: u32,
    /// Threads of the batch addition of the ones (a power of two, a multiple of the block size).
    pub ones_threads: u32,
    /// How the first summing round adds ([`FirstRound::Xyzz`] or [`FirstRound::BatchAffine`]: never
    /// `Auto` once [`Plan::with_first_round`] has resolved it).
    pub first_round: FirstRound,
    /// Chains per thread of a batched affine first round (`None`: the curve's default).
    pub batch_chains: Option<u32>,
    /// How the sort writes the entries in bucket order.
    pub sort: Sort,
    /// Which units the products of G1's batched first round use.
    pub units: MulUnits,
    /// Where the ones are added ([`Ones::Apart`] or [`Ones::InRound`]: never `Auto` once
    /// [`Plan::with_ones`] has resolved it).
    pub ones: Ones,
}

impl Plan {
    /// The default window width for a batch of `n` points: `log2(n) - 6`, at most 16 (at 2^22 and
    /// 2^24 points, 16 beats both 15 and everything from 17 to 22 on the H200).
    pub fn default_window(n: usize) -> u32 {
        let log_n = usize::BITS - n.max(1).leading_zeros();
        log_n.saturating_sub(7).clamp(4, 16)
    }

    /// The default window width for a batch of `n` points of `curve`: [`WIDE_WINDOW_BITS`] for G1
    /// from [`WIDE_WINDOW_FROM`] points, else [`Plan::default_window`].
    pub fn default_window_for(curve: CurveId, n: usize) -> u32 {
        match curve {
            CurveId::G1 if n >= WIDE_WINDOW_FROM => WIDE_WINDOW_BITS,
            _ => Self::default_window(n),
        }
    }

    /// The plan for a batch of `n` points, a bucket set per window.
    pub fn new(n: usize, window_bits: Option<u32>) -> Result<Self, CudaError> {
        Self::with_multiples(n, window_bits.unwrap_or_else(|| Self::default_window(n)), 1)
    }

    /// The plan for a batch of `n` points of `curve` without a table, a bucket set per window of
    /// `window_bits` or [`Plan::default_window_for`] the curve.
    pub fn for_curve(curve: CurveId, n: usize, window_bits: Option<u32>) -> Result<Self, CudaError> {
        Self::with_multiples(n, window_bits.unwrap_or_else(|| Self::default_window_for(curve, n)), 1)
    }

    /// The plan for a batch of `n` points whose bases come with a table of `multiples` multiples per
    /// point, `2^(c·j)·P` for `j < multiples`: windows go `multiples` to a bucket set. Fails unless
    /// `c` is 2..=24 and `multiples` is 1..=windows.
    pub fn with_multiples(n: usize, c: u32, multiples: u32) -> Result<Self, CudaError> {
        check_window(c)?;
        let windows = 256u32.div_ceil(c);
        if !(1..=windows).contains(&multiples) {
            return Err(CudaError::Size {
                op: "msm",
                size: multiples as usize,
                reason: "multiples per point must be 1..=windows",
            });
        }
        let sets = windows.div_ceil(multiples);
        let half = 1u32 << (c - 1);
        // Buckets per segment. A thread adds two points per bucket of its segment, one after the other,
        // then multiplies by the segment's offset. Below 2^15 buckets in all, the few threads are bound
        // by that chain's latency: segments of 2 buckets (2^16 points: 0.33 ms against 0.80 ms with
        // 16). From 2^15 up the GPU is busy anyway and the offset multiplications cost: at least 16
        // buckets per segment, at most 64, about 2^16 threads (2^20 points: 0.99 ms with 16, 1.20 ms
        // with 4).
        let buckets = sets as u64 * half as u64;
        let per = if buckets < 1 << 15 { 2 } else { (buckets >> 16).clamp(16, 64).next_power_of_two() };
        let per = per.min(half as u64) as u32;
        let segments = half / per;
        let entries = windows as u64 * n as u64;
        // Pieces of 8 to 512 entries when every digit is nonzero, about 2^17 of them from 2^20 points up.
        let pieces = u32::try_from(entries.div_ceil((entries >> 17).clamp(8, 512).next_power_of_two()))
            .map_err(|_| CudaError::Size { op: "msm", size: n, reason: "batch too large for one launch" })?;
        // Up to 16 ones per thread when all n scalars are 1, with at most 2^16 threads.
        let ones_threads = (n as u64 / 16).next_power_of_two().clamp(BLOCK as u64, 1 << 16) as u32;
        Ok(Self {
            c,
            windows,
            half,
            multiples,
            sets,
            segments,
            pieces,
            ones_threads,
            first_round: FirstRound::Xyzz,
            batch_chains: None,
            sort: Sort::default(),
            units: MulUnits::Integer,
            ones: Ones::Apart,
        })
    }

    /// This plan, for batches of `n` points of `curve`, with its first summing round done by
    /// `first_round` (`Auto` resolved by `n` and the curve), with `batch_chains` chains per thread when
    /// batched (`None`: the curve's default).
    pub fn with_first_round(
        self,
        curve: CurveId,
        first_round: FirstRound,
        batch_chains: Option<u32>,
        n: usize,
    ) -> Self {
        let first_round = match first_round {
            FirstRound::Auto if n >= batch_affine_from(curve) => FirstRound::BatchAffine,
            FirstRound::Auto => FirstRound::Xyzz,
            other => other,
        };
        Self { first_round, batch_chains, ..self }
    }

    /// This plan with its entries put in bucket order by `sort`.
    pub fn with_sort(self, sort: Sort) -> Self {
        Self { sort, ..self }
    }

    /// This plan with G1's batched first round multiplying on `units`.
    pub fn with_units(self, units: MulUnits) -> Self {
        Self { units, ..self }
    }

    /// This plan with its ones added as `ones` says (`Auto` resolved by the plan's first round, so
    /// this comes after [`Plan::with_first_round`]).
    pub fn with_ones(self, ones: Ones) -> Self {
        let ones = match (ones, self.first_round) {
            (Ones::Auto, FirstRound::BatchAffine) => Ones::InRound,
            (Ones::Auto, _) => Ones::Apart,
            (other, _) => other,
        };
        Self { ones, ..self }
    }

    /// Buckets of the first and later summing rounds: the sets', and the ones' after them when the
    /// first round adds the ones ([`Ones::InRound`]).
    pub fn round_buckets(&self) -> u32 {
        match self.ones {
            Ones::InRound => self.buckets(),
            Ones::Auto | Ones::Apart => self.window_buckets(),
        }
    }

    /// The sets' buckets, `sets * 2^(c-1)`; the list of ones follows them as one more bucket.
    pub fn window_buckets(&self) -> u32 {
        self.sets * self.half
    }

    /// The digits' shape the kernels take for this plan.
    pub(crate) fn digits(&self) -> crate::kernels::msm::Digits {
        crate::kernels::msm::Digits { c: self.c, windows: self.windows, m: self.multiples }
    }

    /// Buckets sorted into, the sets' and the ones.
    pub fn buckets(&self) -> u32 {
        self.window_buckets() + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_fit_the_kernels() {
        for log_n in 0..=26u32 {
            for c in [None, Some(2), Some(9), Some(16), Some(20), Some(24)] {
                let n = 1usize << log_n;
                let p = Plan::new(n, c).unwrap();
                assert_eq!(p.half, 1 << (p.c - 1));
                // The top window never carries: it holds at most c - 1 of the scalar's 255 bits.
                assert!(255 - (p.windows - 1) * p.c < p.c, "{p:?}");
                assert!(p.segments.is_power_of_two() && p.half.is_multiple_of(p.segments), "{p:?}");
                assert!((1..=64).contains(&(p.half / p.segments)), "{p:?}");
                assert!(p.half / p.segments >= 2 || p.half < 2, "{p:?}");
                let entries = p.windows as u64 * n as u64;
                assert!((1..=entries.div_ceil(8)).contains(&(p.pieces as u64)), "{p:?}");
                assert!(p.pieces as u64 >= entries / 512, "{p:?}");
                assert!(p.ones_threads.is_power_of_two() && p.ones_threads.is_multiple_of(BLOCK), "{p:?}");
                assert!(p.ones_threads as u64 * 16 >= n as u64 || p.ones_threads == 1 << 16, "{p:?}");
                assert!((p.buckets() as u64) < 1 << 32);
            }
        }
        for c in [2u32, 9, 16, 22, 24] {
            let windows = 256u32.div_ceil(c);
            for m in [1, 2, 3, windows] {
                let p = Plan::with_multiples(1 << 20, c, m).unwrap();
                assert_eq!((p.multiples, p.sets), (m, windows.div_ceil(m)), "{p:?}");
                assert!(p.sets * p.multiples >= p.windows && (p.sets - 1) * p.multiples < p.windows, "{p:?}");
                assert!(p.segments.is_power_of_two() && p.half.is_multiple_of(p.segments), "{p:?}");
            }
            assert!(Plan::with_multiples(10, c, 0).is_err());
            assert!(Plan::with_multiples(10, c, windows + 1).is_err());
        }
        assert_eq!(Plan::new(1 << 24, None).unwrap().c, 16);
        assert_eq!(Plan::new(1 << 24, None).unwrap().sets, 16);
        assert_eq!(Plan::new(1 << 20, None).unwrap().c, 14);
        let p = Plan::new(1 << 20, None).unwrap();
        assert_eq!(p.first_round, FirstRound::Xyzz);
        for curve in [CurveId::G1, CurveId::G2] {
            let from = batch_affine_from(curve);
            for (round, n, expected) in [
                (FirstRound::Auto, from, FirstRound::BatchAffine),
                (FirstRound::Auto, from - 1, FirstRound::Xyzz),
                (FirstRound::Xyzz, 1 << 24, FirstRound::Xyzz),
                (FirstRound::BatchAffine, 5, FirstRound::BatchAffine),
            ] {
                let q = p.with_first_round(curve, round, Some(7), n);
                assert_eq!(
                    (q.first_round, q.batch_chains, q.pieces),
                    (expected, Some(7), p.pieces),
                    "{curve:?} {round:?} {n}"
                );
            }
        }
        assert!(batch_affine_from(CurveId::G2) <= batch_affine_from(CurveId::G1));
        // The ones go into the batched round unless told otherwise; the rounds then take their bucket.
        assert_eq!(p.ones, Ones::Apart);
        for (round, ones, expected) in [
            (FirstRound::BatchAffine, Ones::Auto, Ones::InRound),
            (FirstRound::Xyzz, Ones::Auto, Ones::Apart),
            (FirstRound::BatchAffine, Ones::Apart, Ones::Apart),
            (FirstRound::Xyzz, Ones::InRound, Ones::InRound),
        ] {
            let q = p.with_first_round(CurveId::G1, round, None, 1 << 20).with_ones(ones);
            assert_eq!(q.ones, expected, "{round:?} {ones:?}");
            let round_buckets = if expected == Ones::InRound { q.buckets() } else { q.window_buckets() };
            assert_eq!(q.round_buckets(), round_buckets);
        }
        assert_eq!(MsmConfig::default().ones, Ones::Auto);
        // G1 batches of 2^25 points and more take 20-bit windows; G2's and smaller ones as before.
        for (curve, n, c) in [
            (CurveId::G1, (1 << 25) - 1, 16),
            (CurveId::G1, 1 << 25, 20),
            (CurveId::G1, 1 << 27, 20),
            (CurveId::G2, 1 << 27, 16),
            (CurveId::G1, 1 << 20, 14),
        ] {
            assert_eq!(Plan::for_curve(curve, n, None).unwrap().c, c, "{curve:?} {n}");
            assert_eq!(Plan::for_curve(curve, n, Some(9)).unwrap().c, 9);
        }
        assert!(Plan::new(10, Some(1)).is_err());
        assert!(Plan::new(10, Some(25)).is_err());
    }
}
