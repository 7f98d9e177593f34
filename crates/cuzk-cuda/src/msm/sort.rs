//! The counting sort of one batch: each scalar's signed digits (one per window) become (base, sign)
//! entries of the bucket their digit names (the base is the point, or with a table the point's
//! multiple for the digit's window); a histogram of the digits, its scan into bucket offsets,
//! and a scatter put the entries in bucket order (directly, or in two passes through a temporary
//! grouped by runs of buckets: [`Sort`]). Scalars 0 make no entries, scalars 1 one entry in
//! the extra bucket after the windows' (the ones: added by the first summing round or apart,
//! [`super::Ones`]).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView};

use super::plan::{Plan, Sort};
use crate::kernels::msm::{self as k, BatchScalars, SegmentsRef, SCAN_BLOCK};
use crate::profile::Probe;
use crate::scratch::ScratchBuf;
use crate::{CudaError, DriverContext, Gpu, GpuFr};

/// Counts per bucket and where each bucket's items start: how a data array is cut by bucket.
pub(crate) struct Segments {
    pub(crate) count: ScratchBuf<u32>,
    pub(crate) off: ScratchBuf<u32>,
}

impl Segments {
    pub(crate) fn as_ref(&self) -> SegmentsRef<'_> {
        SegmentsRef { count: &self.count, off: &self.off }
    }
}

/// A batch's bucket entries, sorted by bucket.
pub(crate) struct Sorted {
    pub(crate) seg: Segments,
    pub(crate) entries: ScratchBuf<u32>,
}

/// Exclusive scan of `input` into a new buffer, on `stream`.
pub(crate) fn scan(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    input: &CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<ScratchBuf<u32>, CudaError> {
    let n = input.len();
    if u32::try_from(n).is_err() {
        return Err(CudaError::Size { op: "scan", size: n, reason: "more than 2^32 - 1" });
    }
    let blocks = n.div_ceil(SCAN_BLOCK).max(1);
    // Both are written whole: every element of out, one sum per block.
    let mut out = gpu.scratch().take::<u32>(stream, n)?;
    let mut sums = gpu.scratch().take::<u32>(stream, blocks)?;
    k::scan_blocks(gpu, stream, input, &mut out, &mut sums, probe)?;
    if blocks > 1 {
        let scanned = scan(gpu, stream, &sums, probe)?;
        k::scan_add(gpu, stream, &mut out, &scanned, probe)?;
    }
    Ok(out)
}

/// The next round's segments when each bucket's items are cut into chunks of `chunk`.
pub(crate) fn chunk_counts(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    seg: &Segments,
    chunk: u32,
    probe: &mut Probe,
) -> Result<Segments, CudaError> {
    let mut count = gpu.scratch().take::<u32>(stream, seg.count.len())?;
    k::chunk_counts(gpu, stream, &seg.count, chunk, &mut count, probe)?;
    let off = scan(gpu, stream, &count, probe)?;
    Ok(Segments { count, off })
}

/// Whether the sort takes a batch of `n` points with `plan`: under 2^31 points (and table points:
/// an entry holds a point's index times the multiples, plus the multiple, in 31 bits) and 2^32
/// entries.
pub(crate) fn check_batch(n: usize, plan: &Plan) -> Result<(), CudaError> {
    if u32::try_from(n).ok().filter(|&v| v < 1 << 31).is_none() {
        return Err(CudaError::Size { op: "msm", size: n, reason: "batch over 2^31 points" });
    }
    if n as u64 * plan.multiples as u64 >= 1 << 31 {
        return Err(CudaError::Size { op: "msm", size: n, reason: "batch over 2^31 table points" });
    }
    if plan.windows as u64 * n as u64 >= 1 << 32 {
        return Err(CudaError::Size { op: "msm", size: n, reason: "batch over 2^32 bucket entries" });
    }
    Ok(())
}

/// Length of the entries buffer for a batch of `n` points and `windows` windows: room for one entry
/// per window and point, rounded up to a multiple of a quarter of the next power of two (less than
/// half as much again), so that the MSMs of a key share one shelf of these where their entries
/// differ by less than that, instead of each keeping its own (a key's reserve keeps two a shelf).
/// A 2^27-row porep-like key's H (13 windows of 2^27 - 1 points), L (16 of 2^27 - 2) and A (16 of
/// 86% of 2^27) all round to 2^31 entries: two buffers of 8.6 GB for the three, not six.
pub(crate) fn entries_len(windows: u32, n: usize) -> usize {
    round_up(windows as usize * n, 2)
}

/// Length of the binned sort's temporary of pairs for `n` points and `windows` windows (one part):
/// rounded up to a thirty-second of the next power of two or finer, so that nearly equal batches
/// share it. Only the sort's stream uses it, one buffer a length: the coarser rounding of
/// [`entries_len`] would only add to it.
pub(crate) fn pairs_len(windows: u32, n: usize) -> usize {
    round_up(windows as usize * n, 5)
}

/// `exact` rounded up to a multiple of the next power of two over `2^shift`.
fn round_up(exact: usize, shift: u32) -> usize {
    exact.next_multiple_of((exact.next_power_of_two() >> shift).max(1))
}

/// Digits, counts, scan and scatter of one batch of `n` points on `stream`. `scalars` is the batch's
/// scalars, or with `select` (the batch's part of it) all of them.
pub(crate) fn sort(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    scalars: &CudaView<'_, GpuFr>,
    select: Option<&CudaView<'_, u32>>,
    n: usize,
    plan: &Plan,
    probe: &mut Probe,
) -> Result<Sorted, CudaError> {
    check_batch(n, plan)?;
    let buckets = plan.buckets() as usize;
    let windows = plan.windows;
    let digits = plan.digits();
    let batch = BatchScalars { scalars, select, n };
    // The workspace count (`workspace::sort_takes`) follows these takes.
    let mut count = gpu.scratch().take_zeroed::<u32>(stream, buckets)?;
    k::count(gpu, stream, batch, digits, &mut count, probe)?;
    let off = scan(gpu, stream, &count, probe)?;
    let mut entries = gpu.scratch().take::<u32>(stream, entries_len(windows, n))?;
    match plan.sort {
        Sort::Direct => {
            let mut cursor = gpu.scratch().take::<u32>(stream, buckets)?;
            stream.memcpy_dtod(&*off, &mut *cursor).during("copying bucket offsets")?;
            // Only the counted entries are written, and nothing reads past them.
            k::scatter(gpu, stream, batch, digits, &mut cursor, &mut entries, probe)?;
        }
        Sort::Binned => {
            // The parts (one unless the sets have more buckets than `msm_place` stages in bins)
            // go through one temporary, sized for the first (it has the most windows).
            let parts = k::SortPart::of(digits);
            let mut bin_cursor = gpu.scratch().take::<u32>(stream, k::SortPart::most_bins(&parts) + 1)?;
            // Only this stream uses the pairs: one buffer per size is enough.
            let mut pairs = gpu.scratch().take_serial::<u64>(stream, pairs_len(parts[0].windows, n))?;
            let mut cursor = gpu.scratch().take::<u32>(stream, buckets)?;
            stream.memcpy_dtod(&*off, &mut *cursor).during("copying bucket offsets")?;
            for part in parts {
                k::bin_cursors(gpu, stream, &off, part, &mut bin_cursor, probe)?;
                k::scatter_bins(
                    gpu,
                    stream,
                    batch,
                    digits,
                    part,
                    &mut bin_cursor,
                    &mut pairs,
                    &mut entries,
                    probe,
                )?;
                k::place(gpu, stream, digits, part, n, &pairs, &off, &mut cursor, &mut entries, probe)?;
            }
        }
    }
    Ok(Sorted { seg: Segments { count, off }, entries })
}
