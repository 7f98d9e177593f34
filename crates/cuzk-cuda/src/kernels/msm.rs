//! The MSM module's kernels (`kernels/msm/msm.cu`): the counting sort of a batch's (point, digit)
//! entries into buckets, the scans, the bucket sums and the window reductions.
//!
//! A selection (`select`) says which scalar each point takes; its entries are made by the backend from
//! the bases it uploaded (`crate::msm::bases`) and are trusted to lie below the scalars' length.

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DeviceRepr, LaunchConfig, PushKernelArg,
};
use cuzk_field::Curve;

#[cfg(test)]
pub(crate) use super::binned::Bins;
pub(crate) use super::binned::{bin_cursors, place, scatter_bins, SortPart};
use super::{count as count32, expect_at_least, expect_len, grid, MulUnits};
use crate::modules::CurveKernels;
use crate::profile::Probe;
use crate::{CudaError, DriverContext, Gpu, GpuAffine, GpuFr, Xyzz};

/// Threads per block of the summing kernels (`SUM_THREADS` in msm.cu, which caps their registers).
pub(crate) const SUM_THREADS: u32 = 128;
/// Threads per block of `G_reduce` (`REDUCE_THREADS` in msm.cu).
pub(crate) const REDUCE_THREADS: u32 = 64;
/// Elements one `scan_blocks` block scans (`SCAN_BLOCK` in msm.cu).
pub(crate) const SCAN_BLOCK: usize = 1024;

/// Buckets of a plan with windows of `c` bits taken `m` to a bucket set: `ceil(windows / m) * 2^(c-1)`,
/// and the ones' bucket after them.
pub(super) fn buckets(c: u32, windows: u32, m: u32) -> usize {
    windows.div_ceil(m.max(1)) as usize * (1usize << (c - 1)) + 1
}

/// The digits' shape: window width `c`, `windows` windows, and `m` windows per bucket set (the
/// multiples per point of the bases' table; 1 without one).
#[derive(Clone, Copy)]
pub(crate) struct Digits {
    pub(crate) c: u32,
    pub(crate) windows: u32,
    pub(crate) m: u32,
}

/// The scalars a batch's points take: a batch of `n` scalars, or with a selection, the point's
/// entry of `select` into all of them.
#[derive(Clone, Copy)]
pub(crate) struct BatchScalars<'s, 'v> {
    /// The scalars.
    pub(crate) scalars: &'s CudaView<'v, GpuFr>,
    /// The batch's part of the selection, when there is one.
    pub(crate) select: Option<&'s CudaView<'v, u32>>,
    /// Points in the batch.
    pub(crate) n: usize,
}

impl<'s, 'v> BatchScalars<'s, 'v> {
    /// The batch's point count, checked against what the kernels read for it.
    pub(super) fn check(&self, op: &'static str) -> Result<u32, CudaError> {
        match self.select {
            Some(s) => expect_at_least(op, self.n, s.len())?,
            None => expect_at_least(op, self.n, self.scalars.len())?,
        }
        count32(op, self.n)
    }

    /// The selection's kernel arguments: whether there is one, and it (or `dummy`, never read).
    pub(super) fn select_args(&self, dummy: &'s CudaView<'v, u32>) -> (u32, &'s CudaView<'v, u32>) {
        (u32::from(self.select.is_some()), self.select.unwrap_or(dummy))
    }
}

/// `msm_count`: how many entries each bucket of a batch gets; `counts` (zeroed) has one slot per
/// bucket of the windows and one for the ones.
#[allow(clippy::too_many_arguments)]
pub(crate) fn count(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    batch: BatchScalars<'_, '_>,
    digits: Digits,
    counts: &mut CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n32 = batch.check("msm_count")?;
    let Digits { c, windows, m } = digits;
    expect_len("msm_count", buckets(c, windows, m), counts.len())?;
    let k = gpu.msm_kernels()?;
    let dummy = gpu.dummy_u32.slice(..);
    let (selected, select) = batch.select_args(&dummy);
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_count(const Fr* scalars, const uint32_t* select, uint32_t selected, uint32_t n,
    // uint32_t c, uint32_t windows, uint32_t m, uint32_t* counts)`; scalars hold n elements, or with a
    // selection every select[i] (i < n) indexes them; keys stay below ceil(windows / m) * 2^(c-1) + 1
    // = counts.len().
    unsafe {
        stream
            .launch_builder(&k.count)
            .arg(batch.scalars)
            .arg(select)
            .arg(&selected)
            .arg(&n32)
            .arg(&c)
            .arg(&windows)
            .arg(&m)
            .arg(counts)
            .launch(grid("msm_count", batch.n, 256)?)
    }
    .during("msm_count")?;
    probe.after(gpu, stream, "msm_count")
}

/// `msm_scatter`: writes each (point, sign) entry at its bucket's cursor (`cursor` starts as the
/// buckets' offsets, from the scan of what [`count`] counted).
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    batch: BatchScalars<'_, '_>,
    digits: Digits,
    cursor: &mut CudaSlice<u32>,
    entries: &mut CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n32 = batch.check("msm_scatter")?;
    let Digits { c, windows, m } = digits;
    expect_len("msm_scatter", buckets(c, windows, m), cursor.len())?;
    if (batch.n as u64) * (m as u64) >= 1 << 31 {
        return Err(CudaError::Size { op: "msm_scatter", size: batch.n, reason: "base indices over 2^31" });
    }
    expect_at_least("msm_scatter", windows as usize * batch.n, entries.len())?;
    let k = gpu.msm_kernels()?;
    let dummy = gpu.dummy_u32.slice(..);
    let (selected, select) = batch.select_args(&dummy);
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_scatter(const Fr* scalars, const uint32_t* select, uint32_t selected, uint32_t n,
    // uint32_t c, uint32_t windows, uint32_t m, uint32_t* cursor, uint32_t* entries)`; with the same
    // scalars and digits as the count, the scatter writes exactly the entries msm_count counted, each
    // inside its bucket's range, and a scalar has at most `windows` entries, so entries (windows * n)
    // suffices; base indices i * m + j (j < m) stay below 2^31, checked above.
    unsafe {
        stream
            .launch_builder(&k.scatter)
            .arg(batch.scalars)
            .arg(select)
            .arg(&selected)
            .arg(&n32)
            .arg(&c)
            .arg(&windows)
            .arg(&m)
            .arg(cursor)
            .arg(entries)
            .launch(grid("msm_scatter", batch.n, 256)?)
    }
    .during("msm_scatter")?;
    probe.after(gpu, stream, "msm_scatter")
}

/// `scan_blocks`: the exclusive scan of each block of [`SCAN_BLOCK`] elements of `input` into `out`,
/// and each block's total into `sums`.
pub(crate) fn scan_blocks(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    input: &CudaSlice<u32>,
    out: &mut CudaSlice<u32>,
    sums: &mut CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n = input.len();
    let n32 = count32("scan_blocks", n)?;
    expect_len("scan_blocks", n, out.len())?;
    let blocks = n.div_ceil(SCAN_BLOCK).max(1);
    expect_at_least("scan_blocks", blocks, sums.len())?;
    let k = gpu.msm_kernels()?;
    let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    probe.before(gpu, stream)?;
    // SAFETY: matches `scan_blocks(const uint32_t* in, uint32_t* out, uint32_t* sums, uint32_t n)`; in and
    // out hold n elements, sums one per block of 1024.
    unsafe { stream.launch_builder(&k.scan_blocks).arg(input).arg(out).arg(sums).arg(&n32).launch(cfg) }
        .during("scan_blocks")?;
    probe.after(gpu, stream, "scan_blocks")
}

/// `scan_add`: adds each block's scanned total (`scanned`) to its elements of `out`.
pub(crate) fn scan_add(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    out: &mut CudaSlice<u32>,
    scanned: &CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n = out.len();
    let n32 = count32("scan_add", n)?;
    let blocks = n.div_ceil(SCAN_BLOCK).max(1);
    expect_at_least("scan_add", blocks, scanned.len())?;
    let k = gpu.msm_kernels()?;
    let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    probe.before(gpu, stream)?;
    // SAFETY: matches `scan_add(uint32_t* out, const uint32_t* scanned_sums, uint32_t n)`; one block per
    // 1024 elements of out, each reading its entry of scanned_sums (blocks entries).
    unsafe { stream.launch_builder(&k.scan_add).arg(out).arg(scanned).arg(&n32).launch(cfg) }
        .during("scan_add")?;
    probe.after(gpu, stream, "scan_add")
}

/// `msm_chunk_counts`: per bucket, how many chunks of `chunk` its `counts` entries make.
pub(crate) fn chunk_counts(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    counts: &CudaSlice<u32>,
    chunk: u32,
    next: &mut CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let buckets = count32("msm_chunk_counts", counts.len())?;
    expect_len("msm_chunk_counts", counts.len(), next.len())?;
    let k = gpu.msm_kernels()?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_chunk_counts(const uint32_t* count, uint32_t buckets, uint32_t L, uint32_t* next)`;
    // both buffers hold `buckets` elements.
    unsafe {
        stream.launch_builder(&k.chunk_counts).arg(counts).arg(&buckets).arg(&chunk).arg(next).launch(grid(
            "msm_chunk_counts",
            buckets as usize,
            256,
        )?)
    }
    .during("msm_chunk_counts")?;
    probe.after(gpu, stream, "msm_chunk_counts")
}

/// A bucket's entries in a data array: how many, and where the first is.
pub(crate) struct SegmentsRef<'a> {
    /// Entries per bucket.
    pub(crate) count: &'a CudaSlice<u32>,
    /// Where each bucket's entries start.
    pub(crate) off: &'a CudaSlice<u32>,
}

/// `msm_flat_counts`: the first summing round's segments when the first `buckets` buckets' entries (the
/// sets', and the ones' too when the round adds them) are cut into `pieces` equal runs, one per thread:
/// each thread writes one partial per bucket its run touches, at slot `thread + bucket`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn flat_counts(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    sorted: SegmentsRef<'_>,
    buckets: u32,
    pieces: u32,
    next_count: &mut CudaSlice<u32>,
    next_off: &mut CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let b = buckets as usize;
    expect_at_least("msm_flat_counts", b, sorted.count.len().min(sorted.off.len()))?;
    expect_at_least("msm_flat_counts", b, next_count.len().min(next_off.len()))?;
    let k = gpu.msm_kernels()?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_flat_counts(const uint32_t* count, const uint32_t* off, uint32_t buckets,
    // uint32_t pieces, uint32_t* next_count, uint32_t* next_off)`; the inputs hold at least `buckets`
    // elements (checked; it reads those), the outputs `buckets`, each written.
    unsafe {
        stream
            .launch_builder(&k.flat_counts)
            .arg(sorted.count)
            .arg(sorted.off)
            .arg(&buckets)
            .arg(&pieces)
            .arg(next_count)
            .arg(next_off)
            .launch(grid("msm_flat_counts", b, 256)?)
    }
    .during("msm_flat_counts")?;
    probe.after(gpu, stream, "msm_flat_counts")
}

/// `G_sum_ones`: a batch addition of the points listed in the ones' bucket (bucket `key`, after the
/// windows'), `out.len()` threads (a multiple of [`SUM_THREADS`]) each writing one partial sum.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sum_ones<C: Curve>(
    gpu: &Gpu,
    ck: &CurveKernels,
    stream: &Arc<CudaStream>,
    bases: &CudaView<'_, GpuAffine<C>>,
    entries: &CudaSlice<u32>,
    sorted: SegmentsRef<'_>,
    key: u32,
    out: &mut CudaSlice<Xyzz<C>>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    expect_at_least("sum_ones", key as usize + 1, sorted.count.len().min(sorted.off.len()))?;
    let threads = out.len();
    if !threads.is_multiple_of(SUM_THREADS as usize) {
        return Err(CudaError::Size { op: "sum_ones", size: threads, reason: "not whole blocks" });
    }
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_sum_ones(const Affine<F>* bases, const uint32_t* entries, const uint32_t* count,
    // const uint32_t* off, uint32_t key, Xyzz<F>* out)`; bucket `key` (the ones) exists in count and off
    // (checked), its entries lie in `entries` and index bases (the sort put them there from this batch);
    // the grid is exactly `out.len()` threads (whole blocks), each writing out[t].
    unsafe {
        stream
            .launch_builder(&ck.sum_ones)
            .arg(bases)
            .arg(entries)
            .arg(sorted.count)
            .arg(sorted.off)
            .arg(&key)
            .arg(out)
            .launch(grid("sum_ones", threads, SUM_THREADS)?)
    }
    .during("sum_ones")?;
    probe.after(gpu, stream, "sum_ones")
}

/// `G_bucket_sum`: `out[0]` = bucket `key`'s sum once the later rounds have left every bucket at most
/// one partial (`data[off[key]]`), or the identity for an empty bucket.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bucket_sum<C: Curve>(
    gpu: &Gpu,
    ck: &CurveKernels,
    stream: &Arc<CudaStream>,
    data: &CudaSlice<Xyzz<C>>,
    segments: SegmentsRef<'_>,
    key: u32,
    out: &mut CudaViewMut<'_, Xyzz<C>>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    expect_at_least("bucket_sum", key as usize + 1, segments.count.len().min(segments.off.len()))?;
    expect_at_least("bucket_sum", 1, out.len())?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_bucket_sum(const Xyzz<F>* data, const uint32_t* count, const uint32_t* off,
    // uint32_t key, Xyzz<F>* out)`; bucket `key` exists in count and off (checked), and when its count
    // is 1 off[key] indexes a written slot of `data` (the last round's output, whose segments these
    // are); one thread writes out[0] (checked to exist).
    unsafe {
        stream
            .launch_builder(&ck.bucket_sum)
            .arg(data)
            .arg(segments.count)
            .arg(segments.off)
            .arg(&key)
            .arg(out)
            .launch(grid("bucket_sum", 1, 32)?)
    }
    .during("bucket_sum")?;
    probe.after(gpu, stream, "bucket_sum")
}

/// `G_sum_affine`: the first summing round, thread `t` of `pieces` adding its run of the first
/// `buckets` buckets' sorted entries into one XYZZ partial per bucket it touches, at `out[t + bucket]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sum_affine<C: Curve>(
    gpu: &Gpu,
    ck: &CurveKernels,
    stream: &Arc<CudaStream>,
    bases: &CudaView<'_, GpuAffine<C>>,
    entries: &CudaSlice<u32>,
    sorted: SegmentsRef<'_>,
    buckets: u32,
    pieces: u32,
    out: &mut CudaSlice<Xyzz<C>>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    expect_at_least("sum_affine", buckets as usize, sorted.count.len().min(sorted.off.len()))?;
    expect_at_least("sum_affine", pieces as usize + buckets as usize, out.len())?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_sum_affine(const Affine<F>* bases, const uint32_t* entries, const uint32_t*
    // count, const uint32_t* off, uint32_t buckets, uint32_t pieces, Xyzz<F>* out)`; entries index
    // bases (the sort put them there from this batch); thread t reads entries below the first `buckets`
    // buckets' total (within the entries' length) and writes out[t + b] for buckets b < `buckets`, with
    // t < pieces, so below pieces + buckets <= out.len() (checked).
    unsafe {
        stream
            .launch_builder(&ck.sum_affine)
            .arg(bases)
            .arg(entries)
            .arg(sorted.count)
            .arg(sorted.off)
            .arg(&buckets)
            .arg(&pieces)
            .arg(out)
            .launch(grid("sum_affine", pieces as usize, SUM_THREADS)?)
    }
    .during("sum_affine")?;
    probe.after(gpu, stream, "sum_affine")
}

/// Chains per thread of `G_sum_batch` unless the configuration says otherwise: each thread adds this
/// many pieces' entries at once, sharing one inversion per step.
pub(crate) fn batch_chains<C: Curve>() -> u32 {
    match C::ID {
        // On the H200 at 2^24 points with a table: G1 sum 90.0 / 80.6 / 75.4 ms with 32 / 64 / 128
        // chains (256: the round faster, the later rounds' partials slower), G2 257.1 / 235.5 ms with
        // 32 / 64 and the MSM 248.9 against 260.7 ms with 128 (`msm::buckets` takes 64 in G2 when
        // 128 would leave the device's wave of threads short).
        cuzk_field::CurveId::G1 => 128,
        cuzk_field::CurveId::G2 => 128,
    }
}

/// u64 words of one chain's prefix product in `G_sum_batch`'s scratch (one coordinate; beside it each
/// chain has its affine accumulator and a `Chain` record of four u32 words).
pub(crate) fn batch_prefix_words<C: Curve>() -> usize {
    std::mem::size_of::<C::DeviceBase>() / 8
}

/// `G_sum_batch`: the first summing round by batched affine additions, `threads` threads of `chains`
/// chains each (pieces `threads * chains`), each piece's partial per bucket it touches at
/// `out[piece + bucket]`, where [`sum_affine`] writes them, but affine (the identity as (0, 0)). The
/// products run on `units` where the curve has such a kernel (G1), else on the integer units.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sum_batch<C: Curve>(
    gpu: &Gpu,
    ck: &CurveKernels,
    units: MulUnits,
    stream: &Arc<CudaStream>,
    bases: &CudaView<'_, GpuAffine<C>>,
    entries: &CudaSlice<u32>,
    sorted: SegmentsRef<'_>,
    buckets: u32,
    threads: u32,
    chains: u32,
    scratch: (&mut CudaSlice<GpuAffine<C>>, &mut CudaSlice<u64>, &mut CudaSlice<u32>),
    out: &mut CudaSlice<GpuAffine<C>>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let pieces = threads as usize * chains as usize;
    let (acc, prefix, records) = scratch;
    expect_at_least("sum_batch", buckets as usize, sorted.count.len().min(sorted.off.len()))?;
    expect_at_least("sum_batch", pieces + buckets as usize, out.len())?;
    expect_at_least("sum_batch", pieces, acc.len())?;
    expect_at_least("sum_batch", pieces * batch_prefix_words::<C>(), prefix.len())?;
    expect_at_least("sum_batch", pieces * 4, records.len())?;
    count32("sum_batch", pieces)?;
    let f = match (units, &ck.sum_batch_fp64) {
        (MulUnits::Fp64, Some([fp64, _])) => fp64,
        (MulUnits::Mixed, Some([_, mixed])) => mixed,
        _ => &ck.sum_batch,
    };
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_sum_batch(const Affine<F>* bases, const uint32_t* entries, const uint32_t*
    // count, const uint32_t* off, uint32_t buckets, uint32_t threads, uint32_t k, Affine<F>* acc, F*
    // prefix, Chain* chains, Affine<F>* out)` with k = chains; entries index bases (the sort put them
    // there from this batch); chain v < pieces = threads * k uses acc[v], prefix[v] (batch_prefix_words
    // u64 words each) and the record chains[v] (four u32 words), all checked above, reads entries below
    // the first `buckets` buckets' total and writes out[v + b] for buckets b < `buckets`, below pieces
    // + buckets <= out.len() (checked).
    unsafe {
        stream
            .launch_builder(f)
            .arg(bases)
            .arg(entries)
            .arg(sorted.count)
            .arg(sorted.off)
            .arg(&buckets)
            .arg(&threads)
            .arg(&chains)
            .arg(acc)
            .arg(prefix)
            .arg(records)
            .arg(out)
            .launch(grid("sum_batch", threads as usize, SUM_THREADS)?)
    }
    .during("sum_batch")?;
    probe.after(gpu, stream, "sum_batch")
}

/// `G_sum_xyzz`: a later summing round, adding each bucket's partials of `input` in chunks of
/// `chunk`, one output per chunk (at `next_off[bucket]` onwards), with `items` threads (the front of
/// `out` they may write).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sum_xyzz<C: Curve>(
    gpu: &Gpu,
    ck: &CurveKernels,
    stream: &Arc<CudaStream>,
    input: &CudaSlice<Xyzz<C>>,
    segments: SegmentsRef<'_>,
    next_off: &CudaSlice<u32>,
    buckets: u32,
    chunk: u32,
    out: (usize, &mut CudaSlice<Xyzz<C>>),
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let round = LaterRound { segments, next_off, buckets, chunk };
    later_round(gpu, (&ck.sum_xyzz, "sum_xyzz"), stream, input, round, out, probe)
}

/// `G_sum_partials`: [`sum_xyzz`] over the affine partials of [`sum_batch`] (mixed additions).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sum_partials<C: Curve>(
    gpu: &Gpu,
    ck: &CurveKernels,
    stream: &Arc<CudaStream>,
    input: &CudaSlice<GpuAffine<C>>,
    segments: SegmentsRef<'_>,
    next_off: &CudaSlice<u32>,
    buckets: u32,
    chunk: u32,
    out: (usize, &mut CudaSlice<Xyzz<C>>),
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let round = LaterRound { segments, next_off, buckets, chunk };
    later_round(gpu, (&ck.sum_partials, "sum_partials"), stream, input, round, out, probe)
}

/// Where a later round's inputs lie and how it cuts them.
struct LaterRound<'a> {
    segments: SegmentsRef<'a>,
    next_off: &'a CudaSlice<u32>,
    buckets: u32,
    chunk: u32,
}

/// A later summing round by `kernel` (`G_sum_xyzz` or `G_sum_partials`, whose inputs are `T`).
fn later_round<C: Curve, T: DeviceRepr>(
    gpu: &Gpu,
    (kernel, name): (&CudaFunction, &'static str),
    stream: &Arc<CudaStream>,
    input: &CudaSlice<T>,
    round: LaterRound<'_>,
    (items, out): (usize, &mut CudaSlice<Xyzz<C>>),
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let LaterRound { segments, next_off, buckets, chunk } = round;
    let b = buckets as usize;
    expect_at_least(name, b, segments.count.len().min(segments.off.len()).min(next_off.len()))?;
    expect_at_least(name, items, out.len())?;
    let threads = items;
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_sum_xyzz(const Xyzz<F>* in, ...)` and `G_sum_partials(const Affine<F>* in,
    // ...)`, both `(in, const uint32_t* count, const uint32_t* off, const uint32_t* off_next, uint32_t
    // buckets, uint32_t L, Xyzz<F>* out)`, with `T` the kernel's input (the callers pair them); the
    // ranges read lie in `input` (the previous round's output, whose segments these are) and were
    // written by it; thread q writes out[q] only below the number of chunks (threads past it return
    // at once), which the caller sized `items` for (at most the input's items / L + buckets), and
    // `items` <= out.len() (checked).
    unsafe {
        stream
            .launch_builder(kernel)
            .arg(input)
            .arg(segments.count)
            .arg(segments.off)
            .arg(next_off)
            .arg(&buckets)
            .arg(&chunk)
            .arg(out)
            .launch(grid(name, threads, SUM_THREADS)?)
    }
    .during(name)?;
    probe.after(gpu, stream, name)
}

/// `G_window_segments`: per window, `Σ j·B_j` over each of `segments` runs of its `half` buckets
/// (every bucket holds at most one partial by now), one output per (window, segment).
#[allow(clippy::too_many_arguments)]
pub(crate) fn window_segments<C: Curve>(
    gpu: &Gpu,
    ck: &CurveKernels,
    stream: &Arc<CudaStream>,
    data: &CudaSlice<Xyzz<C>>,
    segments_of: SegmentsRef<'_>,
    windows: u32,
    half: u32,
    segments: u32,
    out: &mut CudaSlice<Xyzz<C>>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let threads = windows as usize * segments as usize;
    expect_at_least("window_segments", windows as usize * half as usize, segments_of.count.len())?;
    expect_at_least("window_segments", threads, out.len())?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_window_segments(const Xyzz<F>* data, const uint32_t* count, const uint32_t* off,
    // uint32_t windows, uint32_t half, uint32_t segments, Xyzz<F>* out)`; every bucket has count 0 or 1
    // here and off[b] indexes a written slot of data when count[b] is 1; out holds windows * segments
    // points, one per thread.
    unsafe {
        stream
            .launch_builder(&ck.window_segments)
            .arg(data)
            .arg(segments_of.count)
            .arg(segments_of.off)
            .arg(&windows)
            .arg(&half)
            .arg(&segments)
            .arg(out)
            .launch(grid("window_segments", threads, 64)?)
    }
    .during("window_segments")?;
    probe.after(gpu, stream, "window_segments")
}

/// `G_reduce`: block `g` adds `input[g·per .. (g + 1)·per]` into `out[g]`, for `out.len()` blocks.
pub(crate) fn reduce<C: Curve>(
    gpu: &Gpu,
    ck: &CurveKernels,
    stream: &Arc<CudaStream>,
    input: &CudaSlice<Xyzz<C>>,
    per: u32,
    out: &mut CudaViewMut<'_, Xyzz<C>>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let groups = count32("reduce", out.len())?;
    expect_at_least("reduce", out.len() * per as usize, input.len())?;
    let cfg =
        LaunchConfig { grid_dim: (groups, 1, 1), block_dim: (REDUCE_THREADS, 1, 1), shared_mem_bytes: 0 };
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_reduce(const Xyzz<F>* in, uint32_t per, Xyzz<F>* out)`; block g reads
    // in[g * per .. g * per + per), inside `input` (at least groups * per points, checked), and writes
    // out[g], inside `out` (groups points).
    unsafe { stream.launch_builder(&ck.reduce).arg(input).arg(&per).arg(out).launch(cfg) }
        .during("reduce")?;
    probe.after(gpu, stream, "reduce")
}

/// `G_table`: `out[i·m + j] = 2^(c·j)·P_i` for `j < m` and the `n` points `P_i = bases[i·stride]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn table<C: Curve>(
    ck: &CurveKernels,
    stream: &Arc<CudaStream>,
    bases: &CudaSlice<GpuAffine<C>>,
    stride: u32,
    n: usize,
    c: u32,
    m: u32,
    out: &mut CudaSlice<GpuAffine<C>>,
) -> Result<(), CudaError> {
    let n32 = count32("table", n)?;
    if n > 0 {
        expect_at_least("table", (n - 1) * stride as usize + 1, bases.len())?;
    }
    expect_at_least("table", n * m as usize, out.len())?;
    // SAFETY: matches `G_table(const Affine<F>* bases, uint32_t stride, uint32_t n, uint32_t c, uint32_t
    // m, Affine<F>* out)`; thread i < n reads bases[i * stride] (inside `bases`, checked) and writes
    // out[i * m .. i * m + m), inside `out` (at least n * m points, checked).
    unsafe {
        stream
            .launch_builder(&ck.table)
            .arg(bases)
            .arg(&stride)
            .arg(&n32)
            .arg(&c)
            .arg(&m)
            .arg(out)
            .launch(grid("table", n, 128)?)
    }
    .during("table")?;
    Ok(())
}
