//! The binned sort's kernels (`msm_bin_cursors`, `msm_scatter_bins`, `msm_place` in
//! `kernels/msm/msm.cu`): [`crate::msm::Sort::Binned`], the direct scatter's result in two passes
//! through a temporary grouped by runs of buckets, each pass staging its output in shared memory.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::msm::{buckets, BatchScalars, Digits};
use super::{count as count32, expect_at_least, expect_len, grid};
use crate::modules::{MAX_BINS, PLACE_PAIRS, PLACE_SHARED_BYTES, SCATTER_BINS_SHARED_BYTES, STAGE_PAIRS};
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

/// `msm_bin_cursors`: where each bin's entries start (`off` at its first bucket), and the ones'
/// (`off` at the last bucket), from the buckets' offsets `off`.
pub(crate) fn bin_cursors(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    off: &CudaSlice<u32>,
    bins: Bins,
    cursor: &mut CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let ones_key = count32("msm_bin_cursors", off.len().saturating_sub(1))?;
    if off.is_empty() || ((bins.count as u64 - 1) << bins.shift) >= ones_key as u64 {
        return Err(CudaError::Size {
            op: "msm_bin_cursors",
            size: off.len(),
            reason: "bins past the buckets",
        });
    }
    expect_len("msm_bin_cursors", bins.count as usize + 1, cursor.len())?;
    let k = gpu.msm_kernels()?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_bin_cursors(const uint32_t* off, uint32_t shift, uint32_t bins, uint32_t ones_key,
    // uint32_t* cursor)`; every bin's first bucket (b << shift, checked above) and ones_key = off.len() - 1
    // index off, and cursor holds bins + 1 elements.
    unsafe {
        stream
            .launch_builder(&k.bin_cursors)
            .arg(off)
            .arg(&bins.shift)
            .arg(&bins.count)
            .arg(&ones_key)
            .arg(cursor)
            .launch(grid("msm_bin_cursors", bins.count as usize + 1, 256)?)
    }
    .during("msm_bin_cursors")?;
    probe.after(gpu, stream, "msm_bin_cursors")
}

/// `msm_scatter_bins`: the first pass of the binned scatter. Each digit of the sets becomes a (bucket,
/// entry) pair in `pairs`, within its bin's range (`bin_cursor` from [`bin_cursors`]); the ones'
/// entries go to `entries` directly.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_bins(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    batch: BatchScalars<'_, '_>,
    digits: Digits,
    bins: Bins,
    bin_cursor: &mut CudaSlice<u32>,
    pairs: &mut CudaSlice<u64>,
    entries: &mut CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n32 = batch.check("msm_scatter_bins")?;
    let Digits { c, windows, m } = digits;
    let window_buckets = buckets(c, windows, m) - 1;
    if bins != Bins::of(window_buckets as u32) {
        return Err(CudaError::Size {
            op: "msm_scatter_bins",
            size: bins.count as usize,
            reason: "bins of another plan",
        });
    }
    expect_len("msm_scatter_bins", bins.count as usize + 1, bin_cursor.len())?;
    if (batch.n as u64) * (m as u64) >= 1 << 31 {
        return Err(CudaError::Size {
            op: "msm_scatter_bins",
            size: batch.n,
            reason: "base indices over 2^31",
        });
    }
    expect_at_least("msm_scatter_bins", windows as usize * batch.n, pairs.len().min(entries.len()))?;
    if windows > STAGE_PAIRS {
        return Err(CudaError::Size {
            op: "msm_scatter_bins",
            size: windows as usize,
            reason: "more windows than staged pairs",
        });
    }
    let tile = scatter_tile(windows);
    let cfg = staged(batch.n.div_ceil(tile as usize), SCATTER_BINS_SHARED_BYTES, "msm_scatter_bins")?;
    let k = gpu.msm_kernels()?;
    let dummy = gpu.dummy_u32.slice(..);
    let (selected, select) = batch.select_args(&dummy);
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_scatter_bins(const Fr* scalars, const uint32_t* select, uint32_t selected,
    // uint32_t n, uint32_t c, uint32_t windows, uint32_t m, uint32_t shift, uint32_t bins, uint32_t tile,
    // uint32_t* bin_cursor, uint2* pairs, uint32_t* entries)` (a u64 is a uint2's 8 bytes); the bins
    // are those of the digits' buckets (checked above, and at most MAX_BINS: the shared histogram's
    // length); a block's tile of scalars has at most STAGE_PAIRS digits (`scatter_tile`), the staged
    // pairs' room in the dynamic shared memory the launch gives and the function is configured for
    // (`SCATTER_BINS_SHARED_BYTES`). With the offsets of msm_count's counts for the same scalars and digits, each bin's
    // cursor moves through exactly its buckets' range, so the sets' pairs land below off[ones_key] and
    // the ones within their bucket's range, all below windows * n (checked above); base indices stay
    // below 2^31 (checked above).
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
            .arg(&tile)
            .arg(bin_cursor)
            .arg(pairs)
            .arg(entries)
            .launch(cfg)
    }
    .during("msm_scatter_bins")?;
    probe.after(gpu, stream, "msm_scatter_bins")
}

/// `msm_place`: the second pass of the binned scatter. Each of the `off[ones]` pairs that
/// [`scatter_bins`] wrote with `bins` for a batch of `windows * n` entries at most goes to its
/// bucket's range in `entries` (`cursor` starts as a copy of `off`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn place(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    pairs: &CudaSlice<u64>,
    off: &CudaSlice<u32>,
    bins: Bins,
    most: usize,
    cursor: &mut CudaSlice<u32>,
    entries: &mut CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let ones_key = count32("msm_place", off.len().saturating_sub(1))?;
    if off.is_empty() {
        return Err(CudaError::Size { op: "msm_place", size: 0, reason: "no buckets" });
    }
    expect_len("msm_place", off.len(), cursor.len())?;
    expect_at_least("msm_place", most, pairs.len().min(entries.len()))?;
    if bins != Bins::of(ones_key) {
        return Err(CudaError::Size {
            op: "msm_place",
            size: bins.count as usize,
            reason: "bins of another plan",
        });
    }
    let cfg = staged(most.div_ceil(PLACE_PAIRS as usize), PLACE_SHARED_BYTES, "msm_place")?;
    let k = gpu.msm_kernels()?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_place(const uint2* pairs, const uint32_t* off, uint32_t ones_key,
    // uint32_t shift, uint32_t* cursor, uint32_t* entries)`; the kernel reads the off[ones_key] <= most
    // pairs scatter_bins wrote with these bins (blocks past them return), each naming a bucket below
    // ones_key whose cursor stays within its range of entries (both hold `most`); a block stages at
    // most PLACE_PAIRS pairs over at most PLACE_KEYS buckets (more: it places them one by one), the
    // dynamic shared memory the launch gives and the function is configured for (`PLACE_SHARED_BYTES`).
    unsafe {
        stream
            .launch_builder(&k.place)
            .arg(pairs)
            .arg(off)
            .arg(&ones_key)
            .arg(&bins.shift)
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
