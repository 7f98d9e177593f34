//! Bucket sums and the window reduction of one sorted batch, on the compute stream.
//!
//! The first summing round cuts the sorted entries of the sets' buckets (and of the ones' bucket after
//! them, [`Ones::InRound`]) into equal pieces, one per thread, whatever the bucket boundaries (so
//! sparse scalars still occupy every thread), and a thread writes one XYZZ partial per bucket its
//! piece touches (at slot thread + bucket, so no scan is needed to place them): uneven buckets cost
//! nothing extra (the batched affine round writes its partials affine, half the bytes, and the first
//! later round adds them by mixed additions). Later rounds add each bucket's few partials in chunks
//! until every bucket holds one. Per window, `Σ j·B_j` by running sums over segments of buckets, then
//! block-wide adds of the segments. The ones' sum is then taken out of its bucket, or, added apart
//! ([`Ones::Apart`]), comes from a kernel of their own (a fixed share per thread, then block-wide
//! adds) before the first round.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr};
use cuzk_field::Curve;

use super::plan::{check_chains, FirstRound, Ones, Plan, WIDE_WINDOW_BITS};
use super::sort::{chunk_counts, Segments, Sorted};
use crate::kernels::msm::{self as k, SUM_THREADS};
use crate::kernels::MulUnits;
use crate::modules::CurveKernels;
use crate::profile::Probe;
use crate::scratch::ScratchBuf;
use crate::{CudaError, Gpu, GpuAffine, Xyzz};

/// Entries per chunk in later summing rounds.
const LATER_CHUNK: u32 = 16;
/// Most inputs one `G_reduce` block adds: four per thread before the tree, as the adds of one thread
/// are a chain whose latency the few threads of these small launches cannot hide.
const REDUCE_PER: u32 = 256;

/// Blocks of the batched affine round per multiprocessor (its launch bounds in msm.cu: G1 four, G2
/// two; G1 on the FP64 units three). G1 at four rather than three (128 registers, 32 bytes spilled):
/// 2.6 ms less at 2^24 with a table on the H200, the round faster by more than the later rounds lose
/// to its extra partials. Its FP64 variants spill some 200 bytes at four, none at three.
fn batch_blocks<C: Curve>(plan: &Plan) -> u32 {
    match (C::ID, plan.units) {
        (cuzk_field::CurveId::G1, MulUnits::Integer) => 4,
        (cuzk_field::CurveId::G1, MulUnits::Fp64 | MulUnits::Mixed) => 3,
        (cuzk_field::CurveId::G2, _) => 2,
    }
}

/// Threads of the batched affine round for a batch of `points` bases on a device of `sms`
/// multiprocessors: a full wave of the device, but no more than leave each chain at least 8 of the
/// most entries the batch can have.
fn batch_threads<C: Curve>(sms: u32, plan: &Plan, points: usize, chains: u32) -> u32 {
    let wave = sms.max(1) as u64 * batch_blocks::<C>(plan) as u64 * SUM_THREADS as u64;
    // Entries: at most one per window of each point (`points` counts a table's multiples too).
    let entries = (points as u64).div_ceil(plan.multiples as u64) * plan.windows as u64;
    let needed = entries.div_ceil(8 * chains as u64).next_multiple_of(SUM_THREADS as u64);
    wave.min(needed).max(SUM_THREADS as u64) as u32
}

/// Chains per thread of the batched round by default: the curve's ([`k::batch_chains`]), halved
/// while at that many the batch's entries (at most one per window of each point) would not give
/// every thread of a wave 8 per chain. Fewer threads than a wave leave the round's latency exposed;
/// more chains give fewer partials per bucket in the later rounds only while they fill the wave.
/// G1 batches that would give every chain of a wave [`LONG_CHAIN`] entries or more take half as many
/// chains again ([`LONG_BATCH_CHAINS`]); those of wide windows with [`LONGEST_CHAIN`] or more, twice
/// as many ([`LONGEST_BATCH_CHAINS`]).
fn default_chains<C: Curve>(sms: u32, plan: &Plan, points: usize) -> u32 {
    let wave = sms.max(1) as u64 * batch_blocks::<C>(plan) as u64 * SUM_THREADS as u64;
    let entries = (points as u64).div_ceil(plan.multiples as u64) * plan.windows as u64;
    let mut chains = k::batch_chains::<C>();
    if C::ID == cuzk_field::CurveId::G1 && entries >= wave * LONG_CHAIN * chains as u64 {
        if plan.c >= WIDE_WINDOW_BITS && entries >= wave * LONGEST_CHAIN * chains as u64 {
            return LONGEST_BATCH_CHAINS;
        }
        return LONG_BATCH_CHAINS;
    }
    while chains > 64 && entries < wave * 8 * chains as u64 {
        chains /= 2;
    }
    chains
}

/// Entries per chain (at the curve's default chains) from which a G1 batch takes
/// [`LONG_BATCH_CHAINS`]: 2^26 points of 13 windows give 101, 2^24 give 25.
const LONG_CHAIN: u64 = 64;

/// Chains per thread of long G1 batches. On the H200, G1 2^26 random in one batch
/// (docs/benchmarks/cuda-msm.md), with a 20-bit table of 13 multiples: 96 / 128 / 160 / 192 chains
/// 335.0 / 331.5 / 330.0 / 326.8 ms; 20-bit windows without a table 377.7 / 371.7 / 366.5 / 366.8.
/// At 2^24 with the table 128 is best (85.5 ms against 86.8 with 96; 256 slower).
const LONG_BATCH_CHAINS: u32 = 192;

/// Entries per chain (at the curve's default chains) from which a G1 batch of windows of
/// [`WIDE_WINDOW_BITS`] or more takes [`LONGEST_BATCH_CHAINS`]: 2^27 random points of 13 windows
/// give 202 (the `h` MSM of a 2^27 partition, one batch), 2^26 give 101.
const LONGEST_CHAIN: u64 = 192;

/// Chains per thread of the longest wide-window G1 batches. On the H200, G1 2^27 random in one
/// batch at 20 bits without a table (docs/benchmarks/cuda-msm.md): 192 / 256 chains 680.2 / 677.1 ms
/// (four in a row 680.7 / 674.8), and 701.5 / 694.8 on an earlier build. Batches of 16-bit windows
/// (the engine's MSMs over the witness, mostly zeros and ones) keep [`LONG_BATCH_CHAINS`]: 256 was
/// not measured there.
const LONGEST_BATCH_CHAINS: u32 = 256;

/// Chains per thread of the batches that would take the longest chains by default (256: G1, wide
/// windows, the longest batches), where device memory allows their partials:
/// [`crate::CudaBackend::widen_batches`] grants them from what the key's batches leave, as the last
/// use of it. On the H200, G1 2^27 random in one batch at 20 bits (the
/// `h` MSM of a 2^27 partition alone), twice alternating in one call: 512 / 256 chains 650.0 / 649.8
/// ms against 657.2 / 657.2, the round 16.8 ms faster and the next round 9.3 slower
/// (docs/benchmarks/cuda-msm.md); the extra partials take about 5 GB at 2^27.
pub const ROOMY_BATCH_CHAINS: u32 = 512;

/// [`ROOMY_BATCH_CHAINS`] for a batch of `points` bases (a table's multiples counted) on a device of
/// `sms` multiprocessors whose plan leaves its chains to the default and would take
/// [`LONGEST_BATCH_CHAINS`] (G1, wide windows, the longest batches, batched first round); `None`
/// for any other.
pub(crate) fn roomy_chains<C: Curve>(sms: u32, plan: &Plan, points: usize) -> Option<u32> {
    let longest = plan.first_round == FirstRound::BatchAffine
        && plan.batch_chains.is_none()
        && default_chains::<C>(sms, plan, points) == LONGEST_BATCH_CHAINS;
    longest.then_some(ROOMY_BATCH_CHAINS)
}

/// The first summing round of a batch of `points` bases (a table's multiples counted) on a device of
/// `sms` multiprocessors: its pieces, and with batched affine additions its (threads, chains per
/// thread). `Auto` never reaches here (the plan resolves it); it would mean the XYZZ round.
pub(crate) fn first_round<C: Curve>(
    sms: u32,
    plan: &Plan,
    points: usize,
) -> Result<(u32, Option<(u32, u32)>), CudaError> {
    match plan.first_round {
        FirstRound::Xyzz | FirstRound::Auto => Ok((plan.pieces, None)),
        FirstRound::BatchAffine => {
            check_chains(plan.batch_chains)?;
            let chains = plan.batch_chains.unwrap_or_else(|| default_chains::<C>(sms, plan, points));
            let threads = batch_threads::<C>(sms, plan, points, chains);
            Ok((threads * chains, Some((threads, chains))))
        }
    }
}

/// The items of each later summing round after a first round of `pieces` pieces over `points` bases
/// into `items` items and `buckets` buckets: rounds go on until no bucket can have more than one
/// partial sum, and after a batched first round (`affine`, whose partials are affine) there is at
/// least one, which makes them XYZZ. A bucket holds at most one entry per base (a point, or with a
/// table one of its multiples: several windows share the bucket), so it meets at most `points + 1`
/// pieces, and there are at most `pieces`.
pub(crate) fn later_round_items(
    pieces: u32,
    points: usize,
    items: usize,
    buckets: usize,
    affine: bool,
) -> Vec<usize> {
    let (mut most, mut items) = ((pieces as usize).min(points + 1), items);
    let mut rounds = Vec::new();
    while most > 1 || (affine && rounds.is_empty()) {
        items = items / LATER_CHUNK as usize + buckets;
        rounds.push(items);
        most = most.div_ceil(LATER_CHUNK as usize);
    }
    rounds
}

/// The first summing round's partials: XYZZ, or affine from the batched round.
enum Partials<C: Curve> {
    Xyzz(ScratchBuf<Xyzz<C>>),
    Affine(ScratchBuf<GpuAffine<C>>),
}

/// Calls `level` with the groups of each intermediate level of [`reduce_rows`] over `rows` rows of
/// `per_row` inputs (the last level writes into the destination and takes nothing).
pub(crate) fn reduce_levels(rows: u32, per_row: u32, mut level: impl FnMut(usize)) {
    let mut per_row = per_row;
    loop {
        let per = per_row.min(REDUCE_PER);
        if per == per_row {
            return;
        }
        level((rows * (per_row / per)) as usize);
        per_row /= per;
    }
}

/// Adds each of `rows` consecutive runs of `per_row` points of `input` into `dst[row]` on `stream`, in
/// levels of at most `REDUCE_PER` inputs per block. `per_row` is a power of two.
#[allow(clippy::too_many_arguments)]
fn reduce_rows<C: Curve>(
    gpu: &Gpu,
    ck: &CurveKernels,
    stream: &Arc<CudaStream>,
    input: ScratchBuf<Xyzz<C>>,
    rows: u32,
    per_row: u32,
    dst: &mut CudaViewMut<'_, Xyzz<C>>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let mut groups = Vec::new();
    reduce_levels(rows, per_row, |g| groups.push(g));
    let (mut level, mut per_row) = (input, per_row);
    for g in groups {
        let per = per_row.min(REDUCE_PER);
        let mut next = gpu.scratch().take_serial::<Xyzz<C>>(stream, g)?;
        k::reduce(gpu, ck, stream, &level, per, &mut next.slice_mut(..g), probe)?;
        level = next;
        per_row /= per;
    }
    // The last level: one block per row, into `dst`.
    k::reduce(gpu, ck, stream, &level, per_row, dst, probe)
}

/// Bucket sums and window reduction of one sorted batch on `stream`: its window sums and the sum of
/// its ones (`sets + 1` XYZZ points: a window's each, or with a table `multiples` windows' each) in a
/// new device buffer. `bases` is the batch's points, or its part of the table (`multiples` per point).
pub(crate) fn reduce<C: Curve>(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    bases: &CudaView<'_, GpuAffine<C>>,
    sorted: &Sorted,
    plan: &Plan,
    probe: &mut Probe,
) -> Result<ScratchBuf<Xyzz<C>>, CudaError> {
    let ck = gpu.msm_kernels()?.curve::<C>();
    let buckets = plan.window_buckets();
    // Bucket sets: one per window, or with a table one per `multiples` windows.
    let windows = plan.sets;
    let mut sums = gpu.scratch().take_serial::<Xyzz<C>>(stream, windows as usize + 1)?;

    // The rounds' buckets: the sets', then the ones' when the first round adds them too.
    let round_buckets = plan.round_buckets();
    {
        // The stream waits for the sort (on the side stream) here, before the probe's start event,
        // so the first kernel's span is its own and not the sort's too.
        let _entries = sorted.entries.device_ptr(stream);
        let _count = sorted.seg.count.device_ptr(stream);
        let _off = sorted.seg.off.device_ptr(stream);
    }
    if plan.ones != Ones::InRound {
        // The ones apart: a kernel of their own over the bucket after the sets', its partials added
        // into the last sum.
        let ones = plan.ones_threads;
        let mut partials = gpu.scratch().take_serial::<Xyzz<C>>(stream, ones as usize)?;
        k::sum_ones(
            gpu,
            ck,
            stream,
            bases,
            &sorted.entries,
            sorted.seg.as_ref(),
            buckets,
            &mut partials,
            probe,
        )?;
        reduce_rows::<C>(gpu, ck, stream, partials, 1, ones, &mut sums.slice_mut(windows as usize..), probe)?;
    }

    // First round: the rounds' entries in `pieces` equal runs, whatever buckets they fall in; one
    // per thread, or with batched affine additions (threads, chains per thread) many per thread.
    let sms = gpu.info().multiprocessors.max(1) as u32;
    let (pieces, batched) = first_round::<C>(sms, plan, bases.len())?;
    let items = pieces as usize + round_buckets as usize;
    let mut next = Segments {
        count: gpu.scratch().take::<u32>(stream, round_buckets as usize)?,
        off: gpu.scratch().take(stream, round_buckets as usize)?,
    };
    k::flat_counts(
        gpu,
        stream,
        sorted.seg.as_ref(),
        round_buckets,
        pieces,
        &mut next.count,
        &mut next.off,
        probe,
    )?;
    // Slots no thread writes are never read: msm_flat_counts points each bucket at its written ones.
    let mut data = match batched {
        None => {
            let mut data = gpu.scratch().take_serial::<Xyzz<C>>(stream, items)?;
            k::sum_affine(
                gpu,
                ck,
                stream,
                bases,
                &sorted.entries,
                sorted.seg.as_ref(),
                round_buckets,
                pieces,
                &mut data,
                probe,
            )?;
            Partials::Xyzz(data)
        }
        Some((threads, chains)) => {
            let mut data = gpu.scratch().take_serial::<GpuAffine<C>>(stream, items)?;
            let mut acc = gpu.scratch().take_serial::<GpuAffine<C>>(stream, pieces as usize)?;
            let prefix_words = pieces as usize * k::batch_prefix_words::<C>();
            let mut prefix = gpu.scratch().take_serial::<u64>(stream, prefix_words)?;
            let mut state = gpu.scratch().take_serial::<u32>(stream, pieces as usize * 4)?;
            k::sum_batch(
                gpu,
                ck,
                plan.units,
                stream,
                bases,
                &sorted.entries,
                sorted.seg.as_ref(),
                round_buckets,
                threads,
                chains,
                (&mut acc, &mut prefix, &mut state),
                &mut data,
                probe,
            )?;
            Partials::Affine(data)
        }
    };
    let mut seg = next;
    // The later rounds write into two buffers of their largest size in turn: after the first round's
    // partials, a few percent more than a partial per bucket each, whatever the number of rounds.
    let rounds = later_round_items(pieces, bases.len(), items, round_buckets as usize, batched.is_some());
    let len = rounds.iter().copied().max().unwrap_or(0);
    let mut spare: Option<ScratchBuf<Xyzz<C>>> = None;
    for next_items in rounds {
        let next = chunk_counts(gpu, stream, &seg, LATER_CHUNK, probe)?;
        let mut out = match spare.take() {
            Some(b) => b,
            None => gpu.scratch().take_serial::<Xyzz<C>>(stream, len)?,
        };
        let out_ref = (next_items, &mut *out);
        let (cut, off) = (seg.as_ref(), &next.off);
        match &data {
            Partials::Xyzz(d) => {
                k::sum_xyzz(gpu, ck, stream, d, cut, off, round_buckets, LATER_CHUNK, out_ref, probe)?
            }
            Partials::Affine(d) => {
                k::sum_partials(gpu, ck, stream, d, cut, off, round_buckets, LATER_CHUNK, out_ref, probe)?
            }
        }
        // A buffer of the later rounds' size is written next (the first round's, if it happens to
        // be that size); any other goes back to its shelf.
        if let Partials::Xyzz(read) = std::mem::replace(&mut data, Partials::Xyzz(out)) {
            if read.len() == len {
                spare = Some(read);
            }
        }
        seg = next;
    }
    let Partials::Xyzz(data) = data else {
        return Err(CudaError::Size {
            op: "msm",
            size: 0,
            reason: "affine partials left after the later rounds",
        });
    };

    let (segments, half) = (plan.segments, plan.half);
    let mut level = gpu.scratch().take_serial::<Xyzz<C>>(stream, (windows * segments) as usize)?;
    k::window_segments(gpu, ck, stream, &data, seg.as_ref(), windows, half, segments, &mut level, probe)?;
    reduce_rows::<C>(
        gpu,
        ck,
        stream,
        level,
        windows,
        segments,
        &mut sums.slice_mut(..windows as usize),
        probe,
    )?;
    if plan.ones == Ones::InRound {
        // The ones' bucket (after the sets') holds their sum now.
        k::bucket_sum(
            gpu,
            ck,
            stream,
            &data,
            seg.as_ref(),
            buckets,
            &mut sums.slice_mut(windows as usize..),
            probe,
        )?;
    }
    Ok(sums)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msm::{FirstRound, Plan, G1, G2};

    /// Chains per thread of the batched round for `n` points of `C` with a 20-bit table of 13
    /// multiples (or none), on the H200's 132 multiprocessors.
    fn chains<C: Curve>(n: usize, table: bool) -> u32 {
        chains_at::<C>(n, 20, table)
    }

    /// The same at windows of `c` bits.
    fn chains_at<C: Curve>(n: usize, c: u32, table: bool) -> u32 {
        let m = if table { 13 } else { 1 };
        let plan =
            Plan::with_multiples(n, c, m).unwrap().with_first_round(C::ID, FirstRound::BatchAffine, None, n);
        let (_, batched) = first_round::<C>(132, &plan, n * m as usize).unwrap();
        batched.expect("a batched round").1
    }

    #[test]
    fn long_g1_batches_take_more_chains_and_short_ones_fewer() {
        assert_eq!(chains::<G1>(1 << 24, true), 128);
        assert_eq!(chains::<G1>(1 << 25, false), 128);
        assert_eq!(chains::<G1>(1 << 26, true), LONG_BATCH_CHAINS);
        assert_eq!(chains::<G1>(1 << 26, false), LONG_BATCH_CHAINS);
        // The `h` MSM of a 2^27 partition (one batch, 20-bit windows) takes the most; one of
        // 16-bit windows (the MSMs over the witness) does not.
        assert_eq!(chains::<G1>(1 << 27, false), LONGEST_BATCH_CHAINS);
        assert_eq!(chains_at::<G1>((1 << 27) - 1, 20, false), LONGEST_BATCH_CHAINS);
        assert_eq!(chains_at::<G1>(1 << 27, 16, false), LONG_BATCH_CHAINS);
        assert_eq!(chains::<G2>(1 << 26, true), 128);
        assert_eq!(chains::<G1>(1 << 20, true), 64);
    }

    #[test]
    fn only_batches_that_take_the_longest_chains_may_be_granted_more() {
        let roomy = |n: usize, c: u32, chains: Option<u32>| {
            let plan = Plan::with_multiples(n, c, 1).unwrap().with_first_round(
                G1::ID,
                FirstRound::BatchAffine,
                chains,
                n,
            );
            roomy_chains::<G1>(132, &plan, n)
        };
        assert_eq!(roomy((1 << 27) - 1, 20, None), Some(ROOMY_BATCH_CHAINS));
        // Not where the default is shorter (16-bit windows, half the points), nor over chains set.
        assert_eq!(roomy(1 << 27, 16, None), None);
        assert_eq!(roomy(1 << 26, 20, None), None);
        assert_eq!(roomy(1 << 27, 20, Some(LONGEST_BATCH_CHAINS)), None);
        // Nor for G2, nor an XYZZ first round.
        let g2 = Plan::with_multiples(1 << 27, 20, 1).unwrap().with_first_round(
            G2::ID,
            FirstRound::BatchAffine,
            None,
            1 << 27,
        );
        assert_eq!(roomy_chains::<G2>(132, &g2, 1 << 27), None);
        let xyzz = Plan::with_multiples(1 << 27, 20, 1).unwrap();
        assert_eq!(roomy_chains::<G1>(132, &xyzz, 1 << 27), None);
        // What is granted passes the check every plan's chains pass.
        assert!(check_chains(Some(ROOMY_BATCH_CHAINS)).is_ok());
        assert!(check_chains(Some(0)).is_err() && check_chains(Some(1025)).is_err());
    }

    #[test]
    fn the_fp64_batched_round_fills_three_blocks_a_multiprocessor() {
        // Its launch bounds are three blocks (msm.cu's FP64_BATCH_BLOCKS): a wave of threads for four
        // would leave a quarter of them to a second wave. G2 has no such kernel and keeps its two.
        let n = 1 << 24;
        let plan = Plan::for_curve(G1::ID, n, None).unwrap().with_first_round(
            G1::ID,
            FirstRound::BatchAffine,
            None,
            n,
        );
        let threads = |units: MulUnits| {
            let (_, batched) = first_round::<G1>(132, &plan.with_units(units), n).unwrap();
            batched.expect("a batched round").0
        };
        assert_eq!(threads(MulUnits::Integer), 132 * 4 * SUM_THREADS);
        assert_eq!(threads(MulUnits::Fp64), 132 * 3 * SUM_THREADS);
        assert_eq!(threads(MulUnits::Mixed), 132 * 3 * SUM_THREADS);
        let g2 = Plan::for_curve(G2::ID, n, None).unwrap().with_first_round(
            G2::ID,
            FirstRound::BatchAffine,
            None,
            n,
        );
        let (_, batched) = first_round::<G2>(132, &g2.with_units(MulUnits::Fp64), n).unwrap();
        assert_eq!(batched.expect("a batched round").0, 132 * 2 * SUM_THREADS);
    }
}
