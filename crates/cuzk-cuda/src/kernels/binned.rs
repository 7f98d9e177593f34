//! The binned sort's kernels (`msm_bin_cursors`, `msm_scatter_bins`, `msm_place` in
//! `kernels/msm/msm.cu`): [`crate::msm::Sort::Binned`], the direct scatter's result in two passes
//! through a temporary grouped by runs of buckets, each pass staging its output in shared memory.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::msm::{buckets, BatchScalars, Digits};
use super::{count as count32, expect_at_least, expect_len, grid};
use crate::modules::{
    MAX_BINS, PLACE_KEYS, PLACE_PAIRS, PLACE_SHARED_BYTES, SCATTER_BINS_SHARED_BYTES, STAGE_PAIRS,
};
use crate::profile::Probe;
use crate::{CudaError, DriverContext, Gpu};

/// Fewest bits of a bin's bucket range: runs of at least 1024 buckets.
const MIN_BIN_SHIFT: u32 = 10;
/// Threads per block of both passes (`STAGE_THREADS` in msm.cu).
const STAGE_THREADS: u32 = 256;
/// Scalars a block of `msm_scatter_bins` takes at most (`STAGE_THREADS * STAGE_SCALARS_PER_THREAD`).
const STAGE_SCALARS: u32 = 1024;

/// Scalars per block of `msm_scatter_bins` for `windows` digits per scalar: as many as the staged
/// pairs hold, at most [`STAGE_SCALARS`].
fn scatter_tile(windows: u32) -> u32 {
    (STAGE_PAIRS / windows.max(1)).clamp(1, STAGE_SCALARS)
}

fn staged(blocks: usize, shared: u32, op: &'static str) -> Result<LaunchConfig, CudaError> {
    let blocks = u32::try_from(blocks.max(1)).map_err(|_| CudaError::Size {
        op,
        size: blocks,
        reason: "too many blocks for one launch",
    })?;
    Ok(LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (STAGE_THREADS, 1, 1), shared_mem_bytes: shared })
}

/// The bins of the binned scatter: runs of `2^shift` consecutive buckets of the sets, `count` of them
/// (at most [`MAX_BINS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bins {
    pub(crate) shift: u32,
    pub(crate) count: u32,
}

impl Bins {
    /// The narrowest bins (of at least 2^10 buckets) that cover `window_buckets` buckets in at most
    /// [`MAX_BINS`].
    pub(crate) fn of(window_buckets: u32) -> Self {
        let mut shift = MIN_BIN_SHIFT;
        while window_buckets.div_ceil(1 << shift) > MAX_BINS {
            shift += 1;
        }
        Self { shift, count: window_buckets.div_ceil(1 << shift).max(1) }
    }
}

/// Most buckets of one [`SortPart`]: as many as [`MAX_BINS`] bins of the buckets a block of
/// `msm_place` stages its segment by (`PLACE_KEYS`). A part over more (a single set wider than that:
/// windows of 24 bits) places its segments' entries one atomic each.
pub(crate) const MAX_PART_BUCKETS: u32 = MAX_BINS * PLACE_KEYS;

/// One part of the binned sort of a batch: the buckets `lo .. hi` of whole bucket sets, sorted through
/// the temporary (its pairs from 0) before the next part reuses it. A batch whose sets have more
/// buckets than [`MAX_PART_BUCKETS`] is sorted in several parts, so that each part's bins stay narrow
/// enough for `msm_place` to stage its segments (with 20-bit windows and no table, 13 sets of 2^19
/// buckets: bins of 2^13 buckets in one part, of 2^12 in two), and the temporary holds one part's
/// entries, not the batch's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SortPart {
    /// First bucket (key) of the part.
    pub(crate) lo: u32,
    /// One past its last bucket.
    pub(crate) hi: u32,
    /// The part's bins, over its buckets from `lo`.
    pub(crate) bins: Bins,
    /// Windows whose digits fall in the part: at most this many entries per point.
    pub(crate) windows: u32,
    /// Whether this part writes the ones' entries (the first part of each batch).
    pub(crate) ones: bool,
}

impl SortPart {
    /// The parts of the binned sort for `digits`: as few as keep each within [`MAX_PART_BUCKETS`]
    /// (one at most set each when a set alone is wider), and at least two for a partial table
    /// (several sets of several windows each), their sets as even as possible, the larger parts
    /// first. A partial table's sets are few enough for one part, but the temporary holds a part's
    /// windows: G1 2^27 at 20 bits with two multiples (7 sets) takes pairs of 8 windows in two parts,
    /// 8.6 GB, against 13 windows, 14.0 GB, in one; and its bins are narrower, as they are for the
    /// 13 untabled sets in two parts (docs/benchmarks/cuda-msm.md).
    pub(crate) fn of(digits: Digits) -> Vec<SortPart> {
        let Digits { c, windows, m } = digits;
        let m = m.max(1);
        let sets = windows.div_ceil(m);
        let half = 1u32 << (c - 1);
        let per = (MAX_PART_BUCKETS / half).max(1);
        let parts = sets.div_ceil(per).max(if m > 1 { sets.min(2) } else { 1 });
        let mut out = Vec::with_capacity(parts as usize);
        let mut first = 0;
        for p in 0..parts {
            let count = sets / parts + u32::from(p < sets % parts);
            let end = first + count;
            let (lo, hi) = (first * half, end * half);
            out.push(SortPart {
                lo,
                hi,
                bins: Bins::of(hi - lo),
                windows: (end * m).min(windows) - (first * m).min(windows),
                ones: p == 0,
            });
            first = end;
        }
        out
    }

    /// The most bins of any of `parts` (not always the first's: a part of more buckets may take
    /// wider bins, fewer of them, than a smaller one).
    pub(crate) fn most_bins(parts: &[SortPart]) -> usize {
        parts.iter().map(|p| p.bins.count as usize).max().unwrap_or(1)
    }

    /// Checks that `self` is one of [`SortPart::of`]`(digits)`: the kernels' bounds rest on it.
    fn check(&self, op: &'static str, digits: Digits) -> Result<(), CudaError> {
        if SortPart::of(digits).contains(self) {
            Ok(())
        } else {
            Err(CudaError::Size { op, size: self.bins.count as usize, reason: "sort part of another plan" })
        }
    }
}

/// `msm_bin_cursors`: where each of `part`'s bins starts in the temporary (`off` at its first bucket,
/// less `off` at the part's first), and where the ones' entries start (`off` at the last bucket), from
/// the buckets' offsets `off`. `cursor` holds at least the part's bins and one more.
pub(crate) fn bin_cursors(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    off: &CudaSlice<u32>,
    part: SortPart,
    cursor: &mut CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let ones_key = count32("msm_bin_cursors", off.len().saturating_sub(1))?;
    let bins = part.bins;
    if off.is_empty()
        || part.lo >= part.hi
        || part.hi > ones_key
        || part.lo as u64 + ((bins.count as u64 - 1) << bins.shift) >= part.hi as u64
    {
        return Err(CudaError::Size {
            op: "msm_bin_cursors",
            size: off.len(),
            reason: "bins past the buckets",
        });
    }
    expect_at_least("msm_bin_cursors", bins.count as usize + 1, cursor.len())?;
    let k = gpu.msm_kernels()?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_bin_cursors(const uint32_t* off, uint32_t shift, uint32_t bins, uint32_t key_lo,
    // uint32_t ones_key, uint32_t* cursor)`; every bin's first bucket (lo + (b << shift) < hi <= ones_key,
    // checked above) and ones_key = off.len() - 1 index off, and cursor holds at least bins + 1 elements.
    unsafe {
        stream
            .launch_builder(&k.bin_cursors)
            .arg(off)
            .arg(&bins.shift)
            .arg(&bins.count)
            .arg(&part.lo)
            .arg(&ones_key)
            .arg(cursor)
            .launch(grid("msm_bin_cursors", bins.count as usize + 1, 256)?)
    }
    .during("msm_bin_cursors")?;
    probe.after(gpu, stream, "msm_bin_cursors")
}

/// `msm_scatter_bins`: the first pass of the binned scatter, for one part of the batch's sort. Each
/// digit of the part's sets becomes a (bucket, entry) pair in `pairs`, within its bin's range
/// (`bin_cursor` from [`bin_cursors`] for the same part); the first part writes the ones' entries to
/// `entries` directly.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_bins(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    batch: BatchScalars<'_, '_>,
    digits: Digits,
    part: SortPart,
    bin_cursor: &mut CudaSlice<u32>,
    pairs: &mut CudaSlice<u64>,
    entries: &mut CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n32 = batch.check("msm_scatter_bins")?;
    let Digits { c, windows, m } = digits;
    part.check("msm_scatter_bins", digits)?;
    let bins = part.bins;
    expect_at_least("msm_scatter_bins", bins.count as usize + 1, bin_cursor.len())?;
    if (batch.n as u64) * (m as u64) >= 1 << 31 {
        return Err(CudaError::Size {
            op: "msm_scatter_bins",
            size: batch.n,
            reason: "base indices over 2^31",
        });
    }
    expect_at_least("msm_scatter_bins", part.windows as usize * batch.n, pairs.len())?;
    expect_at_least("msm_scatter_bins", windows as usize * batch.n, entries.len())?;
    if windows > STAGE_PAIRS {
        return Err(CudaError::Size {
            op: "msm_scatter_bins",
            size: windows as usize,
            reason: "more windows than staged pairs",
        });
    }
    let tile = scatter_tile(part.windows);
    let cfg = staged(batch.n.div_ceil(tile as usize), SCATTER_BINS_SHARED_BYTES, "msm_scatter_bins")?;
    let k = gpu.msm_kernels()?;
    let dummy = gpu.dummy_u32.slice(..);
    let (selected, select) = batch.select_args(&dummy);
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_scatter_bins(const Fr* scalars, const uint32_t* select, uint32_t selected,
    // uint32_t n, uint32_t c, uint32_t windows, uint32_t m, uint32_t shift, uint32_t bins, uint32_t key_lo,
    // uint32_t key_hi, uint32_t ones, uint32_t tile, uint32_t* bin_cursor, uint2* pairs, uint32_t* entries)`
    // (a u64 is a uint2's 8 bytes); the part is one of the digits' (checked above), so its bins cover
    // its buckets and number at most MAX_BINS (the shared histogram's length), and each point has at
    // most part.windows digits in it; a block's tile of scalars has at most STAGE_PAIRS of those
    // (`scatter_tile`), the staged pairs' room in the dynamic shared memory the launch gives and the
    // function is configured for (`SCATTER_BINS_SHARED_BYTES`). With the offsets of msm_count's counts
    // for the same scalars and digits, each bin's cursor moves through exactly its buckets' range less
    // off[lo], so the part's pairs land below off[hi] - off[lo] <= part.windows * n (pairs' length,
    // checked above) and the ones within their bucket's range, below windows * n (entries' length);
    // base indices stay below 2^31 (checked above).
    unsafe {
        stream
            .launch_builder(&k.scatter_bins)
            .arg(batch.scalars)
            .arg(select)
            .arg(&selected)
            .arg(&n32)
            .arg(&c)
            .arg(&windows)
            .arg(&m)
            .arg(&bins.shift)
            .arg(&bins.count)
            .arg(&part.lo)
            .arg(&part.hi)
            .arg(&u32::from(part.ones))
            .arg(&tile)
            .arg(bin_cursor)
            .arg(pairs)
            .arg(entries)
            .launch(cfg)
    }
    .during("msm_scatter_bins")?;
    probe.after(gpu, stream, "msm_scatter_bins")
}

/// `msm_place`: the second pass of the binned scatter, for one part of the batch's sort. Each of the
/// `off[hi] - off[lo]` pairs that [`scatter_bins`] wrote for `part` of a batch of `n` points goes to
/// its bucket's range in `entries` (`cursor` starts as a copy of `off`, and is shared by the parts,
/// whose buckets are apart).
#[allow(clippy::too_many_arguments)]
pub(crate) fn place(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    digits: Digits,
    part: SortPart,
    n: usize,
    pairs: &CudaSlice<u64>,
    off: &CudaSlice<u32>,
    cursor: &mut CudaSlice<u32>,
    entries: &mut CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    part.check("msm_place", digits)?;
    expect_len("msm_place", buckets(digits.c, digits.windows, digits.m), off.len())?;
    expect_len("msm_place", off.len(), cursor.len())?;
    let most = part.windows as usize * n;
    expect_at_least("msm_place", most, pairs.len())?;
    expect_at_least("msm_place", digits.windows as usize * n, entries.len())?;
    let cfg = staged(most.div_ceil(PLACE_PAIRS as usize), PLACE_SHARED_BYTES, "msm_place")?;
    let k = gpu.msm_kernels()?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_place(const uint2* pairs, const uint32_t* off, uint32_t key_lo, uint32_t key_hi,
    // uint32_t shift, uint32_t* cursor, uint32_t* entries)`; the part is one of the digits' (checked
    // above: hi <= the sets' buckets, off.len() - 1); the kernel reads the off[hi] - off[lo] <= most
    // pairs scatter_bins wrote for this part (blocks past them return), each naming a bucket of the
    // part whose cursor stays within its range of entries (entries hold windows * n); a block stages
    // at most PLACE_PAIRS pairs over at most PLACE_KEYS buckets (more: it places them one by one), the
    // dynamic shared memory the launch gives and the function is configured for (`PLACE_SHARED_BYTES`).
    unsafe {
        stream
            .launch_builder(&k.place)
            .arg(pairs)
            .arg(off)
            .arg(&part.lo)
            .arg(&part.hi)
            .arg(&part.bins.shift)
            .arg(cursor)
            .arg(entries)
            .launch(cfg)
    }
    .during("msm_place")?;
    probe.after(gpu, stream, "msm_place")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tile_of_scalars_stages_within_the_shared_memory() {
        for windows in 1..=256u32 {
            let tile = scatter_tile(windows);
            assert!((1..=STAGE_SCALARS).contains(&tile), "{windows}");
            assert!(tile * windows <= STAGE_PAIRS, "{windows}");
        }
        assert_eq!(scatter_tile(13), 630);
        assert_eq!(scatter_tile(16), 512);
    }

    #[test]
    fn sort_parts_cover_the_sets_once_in_bins_place_can_stage() {
        for c in 2..=24u32 {
            let windows = 256u32.div_ceil(c);
            for m in [1, 2, 3, windows] {
                let digits = Digits { c, windows, m };
                let parts = SortPart::of(digits);
                let half = 1u32 << (c - 1);
                let what = format!("c {c} m {m}: {parts:?}");
                // Whole sets, in order, each once; the windows add up; the first part takes the ones.
                assert_eq!(parts[0].lo, 0, "{what}");
                assert_eq!(parts.last().unwrap().hi as usize, buckets(c, windows, m) - 1, "{what}");
                assert!(parts.windows(2).all(|w| w[0].hi == w[1].lo), "{what}");
                assert_eq!(parts.iter().map(|p| p.windows).sum::<u32>(), windows, "{what}");
                assert!(parts.iter().enumerate().all(|(i, p)| p.ones == (i == 0)), "{what}");
                for p in &parts {
                    assert!(p.lo < p.hi && p.lo % half == 0 && p.hi % half == 0, "{what}");
                    assert_eq!(p.bins, Bins::of(p.hi - p.lo), "{what}");
                    // A part's bins are narrow enough for msm_place to stage, unless a set alone
                    // is too wide.
                    let sets = (p.hi - p.lo) / half;
                    assert!(p.hi - p.lo <= MAX_PART_BUCKETS || sets == 1, "{what}");
                    assert!(p.bins.shift <= PLACE_KEYS.ilog2() || half > MAX_PART_BUCKETS, "{what}");
                    assert!(p.windows <= sets * m && p.windows > (sets - 1) * m, "{what}");
                }
                // The first part has the most windows (the temporary's size); the bins' most is not
                // always the first's (c = 21, m = 3: 768 bins of 2^12, then 1024 of 2^11).
                assert!(parts.iter().all(|p| p.windows <= parts[0].windows), "{what}");
                assert!(parts.iter().all(|p| p.bins.count as usize <= SortPart::most_bins(&parts)));
                // As few parts as that allows (two at least for a partial table), as even as
                // possible, the larger first.
                let sets = windows.div_ceil(m);
                let per = (MAX_PART_BUCKETS / half).max(1);
                let least = if m > 1 { sets.min(2) } else { 1 };
                assert_eq!(parts.len() as u32, sets.div_ceil(per).max(least), "{what}");
                let sizes: Vec<u32> = parts.iter().map(|p| p.hi - p.lo).collect();
                assert!(sizes.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= half), "{what}");
            }
        }
        // 16-bit windows: one part, as before; 20-bit windows without a table: two parts of 7 and 6
        // sets in bins of 2^12 buckets; with a table of all 13 multiples one set, one part.
        assert_eq!(SortPart::of(Digits { c: 16, windows: 16, m: 1 }).len(), 1);
        let wide = SortPart::of(Digits { c: 20, windows: 13, m: 1 });
        assert_eq!(wide.iter().map(|p| (p.windows, p.bins.shift)).collect::<Vec<_>>(), [(7, 12), (6, 12)]);
        assert_eq!(SortPart::of(Digits { c: 20, windows: 13, m: 13 }).len(), 1);
        // A partial table at 20 bits: two parts whatever its multiples (sets 4 + 3 of two windows).
        let partial = SortPart::of(Digits { c: 20, windows: 13, m: 2 });
        assert_eq!(partial.iter().map(|p| p.windows).collect::<Vec<_>>(), [8, 5]);
        let uneven = SortPart::of(Digits { c: 21, windows: 13, m: 3 });
        assert_eq!(uneven.iter().map(|p| p.bins.count).collect::<Vec<_>>(), [768, 1024]);
        assert_eq!(SortPart::most_bins(&uneven), 1024);
    }

    #[test]
    fn bins_cover_the_buckets_in_runs_of_at_least_1024_and_at_most_max_bins() {
        for c in 2..=24u32 {
            let windows = 256u32.div_ceil(c);
            for m in [1, 2, windows] {
                let window_buckets = (buckets(c, windows, m) - 1) as u32;
                let b = Bins::of(window_buckets);
                assert!(b.shift >= MIN_BIN_SHIFT && (1..=MAX_BINS).contains(&b.count), "{c} {m}: {b:?}");
                // Every bucket lies in a bin, every bin starts at a bucket, and the shift is the least
                // that fits.
                assert!((b.count as u64) << b.shift >= window_buckets as u64, "{c} {m}: {b:?}");
                assert!(((b.count as u64 - 1) << b.shift) < window_buckets as u64, "{c} {m}: {b:?}");
                assert!(b.shift == MIN_BIN_SHIFT || window_buckets.div_ceil(1 << (b.shift - 1)) > MAX_BINS);
            }
        }
        assert_eq!(Bins::of(1 << 19), Bins { shift: 10, count: 512 });
        assert_eq!(Bins::of(11 << 23), Bins { shift: 17, count: 704 });
        assert_eq!(Bins::of(1), Bins { shift: 10, count: 1 });
    }
}
