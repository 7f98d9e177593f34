//! Pippenger multi-scalar multiplication on the device (kernels in `kernels/msm/msm.cu`).
//!
//! [`msm`] cuts a large MSM into batches of at most [`MsmConfig::batch`] points. Each batch runs
//! entirely on the compute stream: digits and bucket counts, a scan, the scatter of (point, sign)
//! entries into buckets, rounds of chunked bucket sums, and the per-window reduction; its window sums
//! (a few XYZZ points) are copied into one of two pinned host buffers and an event is recorded. The
//! host waits for batch `i`'s event only after batch `i + 1` has been queued, so it converts and adds
//! batch `i`'s windows while the device works on the next one. Nothing synchronises the device as a
//! whole.

use std::sync::Arc;

use ark_bls12_381::{g1, g2};
use ark_ec::short_weierstrass::{Affine, Projective, SWCurveConfig};
use ark_ec::AdditiveGroup;
use ark_ff::{Field, Zero};
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, CudaView, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
use cuzk_field::{DeviceFq, DeviceFq2, DeviceG1Affine, DeviceG2Affine, DeviceRepr as Layout, LayoutError};

use crate::{CudaError, DriverContext, Gpu, GpuFr};

/// A G1 affine point as the kernels see it (identity = all-zero coordinates).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuG1Affine(pub DeviceG1Affine);
/// A G2 affine point as the kernels see it.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuG2Affine(pub DeviceG2Affine);

/// A point in XYZZ coordinates, `x = X/ZZ`, `y = Y/ZZZ`, identity when `ZZ = 0`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Xyzz<F> {
    x: F,
    y: F,
    zz: F,
    zzz: F,
}

// SAFETY: transparent wrappers of #[repr(C)] structs of u64 limbs (no padding, no pointers, every bit
// pattern a valid value); the kernels declare the same layout (`Affine<F>`: x then y).
unsafe impl DeviceRepr for GpuG1Affine {}
// SAFETY: as above.
unsafe impl DeviceRepr for GpuG2Affine {}
// SAFETY: #[repr(C)] of four field elements of u64 limbs, as the kernels' `Xyzz<F>` (X, Y, ZZ, ZZZ).
unsafe impl DeviceRepr for Xyzz<DeviceFq> {}
// SAFETY: as above.
unsafe impl DeviceRepr for Xyzz<DeviceFq2> {}
// SAFETY: all-zero coordinates are the identity.
unsafe impl ValidAsZeroBits for GpuG1Affine {}
// SAFETY: as above.
unsafe impl ValidAsZeroBits for GpuG2Affine {}
// SAFETY: all-zero XYZZ coordinates are the identity (ZZ = 0).
unsafe impl ValidAsZeroBits for Xyzz<DeviceFq> {}
// SAFETY: as above.
unsafe impl ValidAsZeroBits for Xyzz<DeviceFq2> {}

/// The MSM module's kernels.
pub(crate) struct MsmKernels {
    pub(crate) count: CudaFunction,
    pub(crate) scatter: CudaFunction,
    pub(crate) chunk_counts: CudaFunction,
    pub(crate) scan_blocks: CudaFunction,
    pub(crate) scan_add: CudaFunction,
    pub(crate) g1: CurveKernels,
    pub(crate) g2: CurveKernels,
}

/// One curve's bucket and window kernels.
pub(crate) struct CurveKernels {
    pub(crate) sum_affine: CudaFunction,
    pub(crate) sum_xyzz: CudaFunction,
    pub(crate) window_segments: CudaFunction,
    pub(crate) window_sums: CudaFunction,
}

/// A curve the MSM runs on: its device types and the way back to arkworks.
pub trait MsmCurve: Sized + 'static {
    /// The arkworks curve.
    type Config: SWCurveConfig;
    /// Device affine points.
    type Affine: DeviceRepr + ValidAsZeroBits + Copy + Send + Sync;
    /// Device XYZZ points.
    type Xyzz: DeviceRepr + ValidAsZeroBits + Copy + Default + Send + Sync;
    /// "G1" or "G2".
    const NAME: &'static str;
    /// An XYZZ point back in arkworks, checked to lie on the curve.
    fn to_ark(p: &Self::Xyzz) -> Result<Projective<Self::Config>, LayoutError>;
    /// An arkworks affine point in device layout.
    fn from_ark(p: &Affine<Self::Config>) -> Self::Affine;
}

fn xyzz_to_ark<P: SWCurveConfig, D: Layout<Ark = P::BaseField>>(
    p: &Xyzz<D>,
    curve: &'static str,
) -> Result<Projective<P>, LayoutError> {
    let zz = p.zz.to_ark_checked(0)?;
    if zz.is_zero() {
        return Ok(Projective::zero());
    }
    let (x, y, zzz) = (p.x.to_ark_checked(0)?, p.y.to_ark_checked(0)?, p.zzz.to_ark_checked(0)?);
    let not_on_curve = LayoutError::NotOnCurve { index: 0, curve };
    let (Some(zz_inv), Some(zzz_inv)) = (zz.inverse(), zzz.inverse()) else { return Err(not_on_curve) };
    let a = Affine::<P>::new_unchecked(x * zz_inv, y * zzz_inv);
    if a.is_on_curve() {
        Ok(a.into())
    } else {
        Err(not_on_curve)
    }
}

/// BLS12-381 G1.
#[derive(Debug)]
pub enum G1 {}
/// BLS12-381 G2.
#[derive(Debug)]
pub enum G2 {}

impl MsmCurve for G1 {
    type Config = g1::Config;
    type Affine = GpuG1Affine;
    type Xyzz = Xyzz<DeviceFq>;
    const NAME: &'static str = "G1";
    fn to_ark(p: &Self::Xyzz) -> Result<Projective<g1::Config>, LayoutError> {
        xyzz_to_ark(p, "G1")
    }
    fn from_ark(p: &Affine<g1::Config>) -> GpuG1Affine {
        GpuG1Affine(DeviceG1Affine::from_ark(p))
    }
}

impl MsmCurve for G2 {
    type Config = g2::Config;
    type Affine = GpuG2Affine;
    type Xyzz = Xyzz<DeviceFq2>;
    const NAME: &'static str = "G2";
    fn to_ark(p: &Self::Xyzz) -> Result<Projective<g2::Config>, LayoutError> {
        xyzz_to_ark(p, "G2")
    }
    fn from_ark(p: &Affine<g2::Config>) -> GpuG2Affine {
        GpuG2Affine(DeviceG2Affine::from_ark(p))
    }
}

/// Tuning of the MSM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsmConfig {
    /// Window width in bits (2..=16); `None` picks it from the batch size.
    pub window_bits: Option<u32>,
    /// Most points per batch.
    pub batch: usize,
}

impl Default for MsmConfig {
    fn default() -> Self {
        Self { window_bits: None, batch: 1 << 24 }
    }
}

/// Per-kernel timing of an MSM: CUDA events around each launch, read after the MSM. Off by default;
/// the events cost a little host time per launch.
#[derive(Default)]
pub struct Probe {
    enabled: bool,
    open: Option<cudarc::driver::CudaEvent>,
    marks: Vec<(&'static str, cudarc::driver::CudaEvent, cudarc::driver::CudaEvent)>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe").field("enabled", &self.enabled).field("marks", &self.marks.len()).finish()
    }
}

impl Probe {
    /// A probe that records.
    pub fn enabled() -> Self {
        Self { enabled: true, ..Self::default() }
    }

    fn event(gpu: &Gpu, stream: &Arc<CudaStream>) -> Result<cudarc::driver::CudaEvent, CudaError> {
        let ev = gpu
            .context()
            .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
            .during("creating an event")?;
        ev.record(stream).during("recording an event")?;
        Ok(ev)
    }

    fn before(&mut self, gpu: &Gpu, stream: &Arc<CudaStream>) -> Result<(), CudaError> {
        if self.enabled {
            self.open = Some(Self::event(gpu, stream)?);
        }
        Ok(())
    }

    fn after(&mut self, gpu: &Gpu, stream: &Arc<CudaStream>, name: &'static str) -> Result<(), CudaError> {
        if let Some(start) = self.open.take() {
            self.marks.push((name, start, Self::event(gpu, stream)?));
        }
        Ok(())
    }

    /// Milliseconds per launch, in launch order (waits for the last event).
    pub fn kernel_times(&self) -> Result<Vec<(&'static str, f32)>, CudaError> {
        self.marks
            .iter()
            .map(|(name, a, b)| {
                b.synchronize().during("waiting for an event")?;
                Ok((*name, a.elapsed_ms(b).during("reading an event time")?))
            })
            .collect()
    }
}

/// Entries per chunk in later summing rounds.
const LATER_CHUNK: u32 = 16;
const BLOCK: u32 = 128;

/// The shape of one batch's bucket machinery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Window width `c`.
    pub c: u32,
    /// Windows, `ceil(256 / c)` (signed digits of a 255-bit scalar never carry out of the top one).
    pub windows: u32,
    /// Buckets per window, `2^(c-1)`.
    pub half: u32,
    /// Segments per window in the window reduction.
    pub segments: u32,
    /// Entries per chunk in the first summing round.
    pub first_chunk: u32,
}

impl Plan {
    /// The plan for a batch of `n` points.
    pub fn new(n: usize, window_bits: Option<u32>) -> Result<Self, CudaError> {
        let log_n = usize::BITS - n.max(1).leading_zeros();
        let c = window_bits.unwrap_or_else(|| log_n.saturating_sub(8).clamp(4, 16));
        if !(2..=16).contains(&c) {
            return Err(CudaError::Size {
                op: "msm",
                size: c as usize,
                reason: "window width must be 2..=16",
            });
        }
        let windows = 256u32.div_ceil(c);
        let half = 1u32 << (c - 1);
        let segments = (half / 64).clamp(1, 512);
        let buckets = windows as usize * half as usize + 1;
        let average = (windows as usize * n).div_ceil(buckets).max(1);
        let first_chunk = average.next_power_of_two().clamp(16, 1024) as u32;
        Ok(Self { c, windows, half, segments, first_chunk })
    }

    /// Buckets including the ones bucket.
    pub fn buckets(&self) -> u32 {
        self.windows * self.half + 1
    }
}

fn grid(threads: usize, block: u32) -> Result<LaunchConfig, CudaError> {
    let blocks = u32::try_from(threads.div_ceil(block as usize).max(1)).map_err(|_| CudaError::Size {
        op: "msm",
        size: threads,
        reason: "too many threads for one launch",
    })?;
    Ok(LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 })
}

const SCAN_BLOCK: usize = 1024;

/// Exclusive scan of `input` into a new buffer, on `stream`.
fn scan(
    gpu: &Gpu,
    k: &MsmKernels,
    stream: &Arc<CudaStream>,
    input: &CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<CudaSlice<u32>, CudaError> {
    let n = input.len();
    let n32 = u32::try_from(n).map_err(|_| CudaError::Size {
        op: "scan",
        size: n,
        reason: "more than 2^32 - 1",
    })?;
    let blocks = n.div_ceil(SCAN_BLOCK).max(1);
    let mut out = gpu.zeros::<u32>(stream, n)?;
    let mut sums = gpu.zeros::<u32>(stream, blocks)?;
    let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    probe.before(gpu, stream)?;
    // SAFETY: matches `scan_blocks(const uint32_t* in, uint32_t* out, uint32_t* sums, uint32_t n)`; in and
    // out hold n elements, sums one per block of 1024.
    unsafe {
        stream.launch_builder(&k.scan_blocks).arg(input).arg(&mut out).arg(&mut sums).arg(&n32).launch(cfg)
    }
    .during("scan_blocks")?;
    probe.after(gpu, stream, "scan_blocks")?;
    if blocks > 1 {
        let scanned = scan(gpu, k, stream, &sums, probe)?;
        probe.before(gpu, stream)?;
        // SAFETY: matches `scan_add(uint32_t* out, const uint32_t* scanned_sums, uint32_t n)`; one block per
        // 1024 elements of out, each reading its entry of scanned_sums (blocks entries).
        unsafe { stream.launch_builder(&k.scan_add).arg(&mut out).arg(&scanned).arg(&n32).launch(cfg) }
            .during("scan_add")?;
        probe.after(gpu, stream, "scan_add")?;
    }
    Ok(out)
}

/// Counts per bucket and their exclusive scan: a description of how a data array is cut by bucket.
struct Segments {
    count: CudaSlice<u32>,
    off: CudaSlice<u32>,
}

fn chunk_counts(
    gpu: &Gpu,
    k: &MsmKernels,
    stream: &Arc<CudaStream>,
    seg: &Segments,
    chunk: u32,
    probe: &mut Probe,
) -> Result<Segments, CudaError> {
    let buckets = seg.count.len() as u32;
    let mut count = gpu.zeros::<u32>(stream, seg.count.len())?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_chunk_counts(const uint32_t* count, uint32_t buckets, uint32_t L, uint32_t* next)`;
    // both buffers hold `buckets` elements.
    unsafe {
        stream
            .launch_builder(&k.chunk_counts)
            .arg(&seg.count)
            .arg(&buckets)
            .arg(&chunk)
            .arg(&mut count)
            .launch(grid(buckets as usize, 256)?)
    }
    .during("msm_chunk_counts")?;
    probe.after(gpu, stream, "msm_chunk_counts")?;
    let off = scan(gpu, k, stream, &count, probe)?;
    Ok(Segments { count, off })
}

/// One batch on `stream`: its window sums and the ones bucket (`windows + 1` XYZZ points) in a new
/// device buffer.
fn batch<C: MsmCurve>(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    bases: &CudaView<'_, C::Affine>,
    scalars: &CudaView<'_, GpuFr>,
    plan: &Plan,
    probe: &mut Probe,
) -> Result<CudaSlice<C::Xyzz>, CudaError> {
    let k = gpu.msm_kernels()?;
    let ck = if C::NAME == G2::NAME { &k.g2 } else { &k.g1 };
    let n = scalars.len();
    let n32 = u32::try_from(n).map_err(|_| CudaError::Size {
        op: "msm",
        size: n,
        reason: "batch over 2^31 points",
    })?;
    if n32 >= 1 << 31 {
        return Err(CudaError::Size { op: "msm", size: n, reason: "batch over 2^31 points" });
    }
    let buckets = plan.buckets();
    let (c, windows) = (plan.c, plan.windows);

    let mut count = gpu.zeros::<u32>(stream, buckets as usize)?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_count(const Fr* scalars, uint32_t n, uint32_t c, uint32_t windows, uint32_t* counts)`;
    // scalars hold n elements; keys stay below windows * 2^(c-1) + 1 = buckets.
    unsafe {
        stream
            .launch_builder(&k.count)
            .arg(scalars)
            .arg(&n32)
            .arg(&c)
            .arg(&windows)
            .arg(&mut count)
            .launch(grid(n, 256)?)
    }
    .during("msm_count")?;
    probe.after(gpu, stream, "msm_count")?;
    let off = scan(gpu, k, stream, &count, probe)?;
    let mut cursor = gpu.zeros::<u32>(stream, buckets as usize)?;
    stream.memcpy_dtod(&off, &mut cursor).during("copying bucket offsets")?;
    let mut entries = gpu.zeros::<u32>(stream, windows as usize * n)?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_scatter(const Fr* scalars, uint32_t n, uint32_t c, uint32_t windows, uint32_t* cursor,
    // uint32_t* entries)`; the scatter writes exactly the entries msm_count counted, each inside its
    // bucket's range, and a scalar has at most `windows` entries, so entries (windows * n) suffices.
    unsafe {
        stream
            .launch_builder(&k.scatter)
            .arg(scalars)
            .arg(&n32)
            .arg(&c)
            .arg(&windows)
            .arg(&mut cursor)
            .arg(&mut entries)
            .launch(grid(n, 256)?)
    }
    .during("msm_scatter")?;
    probe.after(gpu, stream, "msm_scatter")?;
    drop(cursor);

    // First round: chunks of affine bases.
    let mut seg = Segments { count, off };
    let next = chunk_counts(gpu, k, stream, &seg, plan.first_chunk, probe)?;
    let mut items = windows as usize * n / plan.first_chunk as usize + buckets as usize;
    let mut data = gpu.zeros::<C::Xyzz>(stream, items)?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_sum_affine(const Affine<F>* bases, const uint32_t* entries, const uint32_t* count,
    // const uint32_t* off, const uint32_t* off_next, uint32_t buckets, uint32_t L, Xyzz<F>* out)`; entries
    // index bases below n; thread q writes out[q] only when q is below the number of chunks, which is at
    // most (entries / L) + buckets = `items`, the length of out.
    unsafe {
        stream
            .launch_builder(&ck.sum_affine)
            .arg(bases)
            .arg(&entries)
            .arg(&seg.count)
            .arg(&seg.off)
            .arg(&next.off)
            .arg(&buckets)
            .arg(&plan.first_chunk)
            .arg(&mut data)
            .launch(grid(items, BLOCK)?)
    }
    .during("sum_affine")?;
    probe.after(gpu, stream, "sum_affine")?;
    drop(entries);
    seg = next;
    // Later rounds, until no bucket can have more than one partial sum.
    let mut most = n.div_ceil(plan.first_chunk as usize);
    while most > 1 {
        let next = chunk_counts(gpu, k, stream, &seg, LATER_CHUNK, probe)?;
        let next_items = items / LATER_CHUNK as usize + buckets as usize;
        let mut out = gpu.zeros::<C::Xyzz>(stream, next_items)?;
        probe.before(gpu, stream)?;
        // SAFETY: matches `G_sum_xyzz(const Xyzz<F>* in, const uint32_t* count, const uint32_t* off,
        // const uint32_t* off_next, uint32_t buckets, uint32_t L, Xyzz<F>* out)`; the ranges read lie in
        // `in` (the previous round's output, `items` long); writes as in the first round, bounded by
        // next_items.
        unsafe {
            stream
                .launch_builder(&ck.sum_xyzz)
                .arg(&data)
                .arg(&seg.count)
                .arg(&seg.off)
                .arg(&next.off)
                .arg(&buckets)
                .arg(&LATER_CHUNK)
                .arg(&mut out)
                .launch(grid(next_items, BLOCK)?)
        }
        .during("sum_xyzz")?;
        probe.after(gpu, stream, "sum_xyzz")?;
        data = out;
        items = next_items;
        seg = next;
        most = most.div_ceil(LATER_CHUNK as usize);
    }

    let segments = plan.segments;
    let half = plan.half;
    let mut seg_out = gpu.zeros::<C::Xyzz>(stream, (windows * segments) as usize)?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_window_segments(const Xyzz<F>* data, const uint32_t* count, const uint32_t* off,
    // uint32_t windows, uint32_t half, uint32_t segments, Xyzz<F>* out)`; every bucket has count 0 or 1
    // here and off[b] < items when count[b] is 1; out holds windows * segments points.
    unsafe {
        stream
            .launch_builder(&ck.window_segments)
            .arg(&data)
            .arg(&seg.count)
            .arg(&seg.off)
            .arg(&windows)
            .arg(&half)
            .arg(&segments)
            .arg(&mut seg_out)
            .launch(grid((windows * segments) as usize, 64)?)
    }
    .during("window_segments")?;
    probe.after(gpu, stream, "window_segments")?;
    let mut sums = gpu.zeros::<C::Xyzz>(stream, windows as usize + 1)?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_window_sums(const Xyzz<F>* seg, uint32_t windows, uint32_t half, uint32_t segments,
    // const Xyzz<F>* data, const uint32_t* count, const uint32_t* off, Xyzz<F>* out)`; out holds windows + 1.
    unsafe {
        stream
            .launch_builder(&ck.window_sums)
            .arg(&seg_out)
            .arg(&windows)
            .arg(&half)
            .arg(&segments)
            .arg(&data)
            .arg(&seg.count)
            .arg(&seg.off)
            .arg(&mut sums)
            .launch(grid(windows as usize + 1, 32)?)
    }
    .during("window_sums")?;
    probe.after(gpu, stream, "window_sums")?;
    Ok(sums)
}

/// `Σ scalars[i]·bases[i]` on the device. `bases` and `scalars` must have the same length.
pub fn msm<C: MsmCurve>(
    gpu: &Gpu,
    bases: &CudaSlice<C::Affine>,
    scalars: &CudaView<'_, GpuFr>,
    config: &MsmConfig,
) -> Result<Projective<C::Config>, CudaError> {
    msm_probed::<C>(gpu, bases, scalars, config, &mut Probe::default())
}

/// [`msm`], timing each kernel into `probe` when it is enabled.
pub fn msm_probed<C: MsmCurve>(
    gpu: &Gpu,
    bases: &CudaSlice<C::Affine>,
    scalars: &CudaView<'_, GpuFr>,
    config: &MsmConfig,
    probe: &mut Probe,
) -> Result<Projective<C::Config>, CudaError> {
    let n = scalars.len();
    if bases.len() != n {
        return Err(CudaError::Length { op: "msm", expected: bases.len(), got: n });
    }
    if n == 0 {
        return Ok(Projective::zero());
    }
    if config.batch == 0 {
        return Err(CudaError::Size { op: "msm", size: 0, reason: "batch size must be positive" });
    }
    let stream = gpu.compute_stream();
    let batch_len = config.batch.min(n);
    let plan = Plan::new(batch_len, config.window_bits)?;
    let slots = plan.windows as usize + 1;
    // Two pinned result buffers: batch i's copy lands in one while the host reads the other.
    let mut host = [gpu.pinned::<C::Xyzz>(slots, true)?, gpu.pinned::<C::Xyzz>(slots, true)?];
    let mut total = Projective::<C::Config>::zero();
    let mut pending: Option<usize> = None;
    for (i, start) in (0..n).step_by(batch_len).enumerate() {
        let end = (start + batch_len).min(n);
        let sums =
            batch::<C>(gpu, stream, &bases.slice(start..end), &scalars.slice(start..end), &plan, probe)?;
        let slot = i % 2;
        stream.memcpy_dtoh(&sums, &mut host[slot]).during("copying window sums")?;
        if let Some(prev) = pending.replace(slot) {
            total += combine::<C>(&host[prev], &plan)?;
        }
    }
    if let Some(last) = pending {
        total += combine::<C>(&host[last], &plan)?;
    }
    Ok(total)
}

/// Σ_w 2^(c·w)·W_w plus the ones bucket, from a batch's window sums (waits for their copy).
fn combine<C: MsmCurve>(
    host: &cudarc::driver::PinnedHostSlice<C::Xyzz>,
    plan: &Plan,
) -> Result<Projective<C::Config>, CudaError> {
    let sums = host.as_slice().during("reading window sums")?;
    let windows = plan.windows as usize;
    let mut acc = Projective::<C::Config>::zero();
    for w in (0..windows).rev() {
        for _ in 0..plan.c {
            acc.double_in_place();
        }
        acc += C::to_ark(&sums[w])?;
    }
    Ok(acc + C::to_ark(&sums[windows])?)
}
