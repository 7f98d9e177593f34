//! Pippenger multi-scalar multiplication on the device (kernels in `kernels/msm/msm.cu`).
//!
//! [`msm`] cuts a large MSM into batches of at most [`MsmConfig::batch`] points. Each batch is sorted
//! on the side stream (digits and bucket counts, a scan, the scatter of (point, sign) entries into
//! buckets) and summed on the compute stream (rounds of bucket sums, the per-window reduction), so
//! batch `i + 1` is sorted while batch `i` is summed. Bases live in device memory or, when they do
//! not fit, in pinned host memory, from which each batch's bases are uploaded on the copy stream into
//! one of two device buffers while the other is in use. A batch's window sums (a few XYZZ points) are
//! copied into one of two pinned host buffers; the host waits for batch `i`'s copy only after batch
//! `i + 1` has been queued, so it combines batch `i`'s windows while the device works on the next.
//! Streams are ordered by events on the buffers they share; nothing synchronises the device as a
//! whole.

use std::sync::Arc;

use ark_bls12_381::{g1, g2};
use ark_ec::short_weierstrass::{Affine, Projective, SWCurveConfig};
use ark_ec::AdditiveGroup;
use ark_ff::{Field, Zero};
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DeviceRepr, LaunchConfig,
    PinnedHostSlice, PushKernelArg, ValidAsZeroBits,
};
use cuzk_field::{DeviceFq, DeviceFq2, DeviceG1Affine, DeviceG2Affine, DeviceRepr as Layout, LayoutError};

use crate::gpu::ResultBuffer;
use crate::scratch::ScratchBuf;
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
    pub(crate) flat_counts: CudaFunction,
    pub(crate) scan_blocks: CudaFunction,
    pub(crate) scan_add: CudaFunction,
    pub(crate) g1: CurveKernels,
    pub(crate) g2: CurveKernels,
}

/// One curve's bucket and window kernels.
pub(crate) struct CurveKernels {
    pub(crate) sum_ones: CudaFunction,
    pub(crate) sum_affine: CudaFunction,
    pub(crate) sum_xyzz: CudaFunction,
    pub(crate) window_segments: CudaFunction,
    pub(crate) reduce: CudaFunction,
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::G1 {}
    impl Sealed for super::G2 {}
}

/// A curve the MSM runs on: its device types and the way back to arkworks. Implemented by [`G1`] and
/// [`G2`] only: results are read back from pinned bytes, which needs `Xyzz` to be plain data.
pub trait MsmCurve: sealed::Sealed + Sized + 'static {
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

/// XYZZ `(X, Y, ZZ, ZZZ)` to Jacobian without an inversion: with `Z = ZZ·ZZZ`, `X·ZZ·ZZZ²` over `Z²`
/// is `X/ZZ` and `Y·ZZ³·ZZZ²` over `Z³` is `Y/ZZZ`. The point is checked on the curve in Jacobian form,
/// `Y² = X³ + b·Z⁶` (both curves have a = 0).
fn xyzz_to_ark<P: SWCurveConfig, D: Layout<Ark = P::BaseField>>(
    p: &Xyzz<D>,
    curve: &'static str,
) -> Result<Projective<P>, LayoutError> {
    let zz = p.zz.to_ark_checked(0)?;
    if zz.is_zero() {
        return Ok(Projective::zero());
    }
    let (x, y, zzz) = (p.x.to_ark_checked(0)?, p.y.to_ark_checked(0)?, p.zzz.to_ark_checked(0)?);
    let zzz2 = zzz.square();
    let z = zz * zzz;
    let jx = x * zz * zzz2;
    let jy = y * zz.square() * zz * zzz2;
    let z2 = z.square();
    let on_curve = P::COEFF_A.is_zero() && jy.square() == jx.square() * jx + P::COEFF_B * z2.square() * z2;
    if z.is_zero() || !on_curve {
        return Err(LayoutError::NotOnCurve { index: 0, curve });
    }
    Ok(Projective::new_unchecked(jx, jy, z))
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
    /// Window width in bits (2..=24); `None` picks it from the batch size.
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
/// the events cost a little host time per launch. Kernels of different streams may overlap, so the
/// sum of the times can exceed the wall time of a batched MSM.
#[derive(Default)]
pub struct Probe {
    enabled: bool,
    open: Option<cudarc::driver::CudaEvent>,
    marks: Vec<(&'static str, cudarc::driver::CudaEvent, cudarc::driver::CudaEvent)>,
    host: Vec<(&'static str, std::time::Instant)>,
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

    pub(crate) fn before(&mut self, gpu: &Gpu, stream: &Arc<CudaStream>) -> Result<(), CudaError> {
        if self.enabled {
            self.open = Some(Self::event(gpu, stream)?);
        }
        Ok(())
    }

    pub(crate) fn after(
        &mut self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        name: &'static str,
    ) -> Result<(), CudaError> {
        if let Some(start) = self.open.take() {
            self.marks.push((name, start, Self::event(gpu, stream)?));
        }
        Ok(())
    }

    fn host_mark(&mut self, name: &'static str) {
        if self.enabled {
            self.host.push((name, std::time::Instant::now()));
        }
    }

    /// The host's side of the call, in milliseconds after it began: when the last batch was queued
    /// ("queued"), when its window sums had arrived ("copied") and when the result was ready
    /// ("combined").
    pub fn host_phases(&self) -> Vec<(&'static str, f64)> {
        let Some((_, origin)) = self.host.first() else { return Vec::new() };
        self.host.iter().skip(1).map(|(name, t)| (*name, (*t - *origin).as_secs_f64() * 1e3)).collect()
    }

    /// Milliseconds per launch, in launch order (waits for the last event).
    pub fn kernel_times(&self) -> Result<Vec<(&'static str, f32)>, CudaError> {
        Ok(self.kernel_spans()?.into_iter().map(|(name, a, b)| (name, b - a)).collect())
    }

    /// Per launch, start and end in milliseconds after the first launch's start (waits for the events).
    pub fn kernel_spans(&self) -> Result<Vec<(&'static str, f32, f32)>, CudaError> {
        let Some((_, origin, _)) = self.marks.first() else { return Ok(Vec::new()) };
        self.marks
            .iter()
            .map(|(name, a, b)| {
                b.synchronize().during("waiting for an event")?;
                let start = origin.elapsed_ms(a).during("reading an event time")?;
                Ok((*name, start, origin.elapsed_ms(b).during("reading an event time")?))
            })
            .collect()
    }

    /// Milliseconds during which at least one probed kernel ran (the union of the spans, so kernels
    /// overlapping on different streams count once; copies are not kernels).
    pub fn busy_ms(&self) -> Result<f32, CudaError> {
        let spans: Vec<(f32, f32)> = self
            .kernel_spans()?
            .into_iter()
            .filter(|(n, ..)| *n != DOWNLOAD)
            .map(|(_, a, b)| (a, b))
            .collect();
        Ok(union_length(spans))
    }
}

thread_local! {
    /// The probe of the device timer running on this thread, if any (see [`Probe::activate`]).
    static ACTIVE: std::cell::RefCell<Option<Probe>> = const { std::cell::RefCell::new(None) };
}

impl Probe {
    /// Makes a new enabled probe the one that this thread's MSMs and NTTs record into, until
    /// [`Probe::deactivate`].
    pub(crate) fn activate() {
        ACTIVE.with(|a| *a.borrow_mut() = Some(Probe::enabled()));
    }

    /// Takes this thread's active probe.
    pub(crate) fn deactivate() -> Option<Probe> {
        ACTIVE.with(|a| a.borrow_mut().take())
    }

    /// Runs `f` with this thread's active probe, or with a disabled one when none is active.
    pub(crate) fn with_active<R>(f: impl FnOnce(&mut Probe) -> R) -> R {
        let mut probe = ACTIVE.with(|a| a.borrow_mut().take()).unwrap_or_default();
        let result = f(&mut probe);
        if probe.enabled {
            ACTIVE.with(|a| *a.borrow_mut() = Some(probe));
        }
        result
    }

    /// Device time per kind of work, the kernels grouped into steps, in order of first launch
    /// (waits for the events).
    pub fn steps(&self) -> Result<Vec<(&'static str, std::time::Duration)>, CudaError> {
        let mut steps: Vec<(&'static str, f64)> = Vec::new();
        for (name, ms) in self.kernel_times()? {
            let step = step_of(name);
            match steps.iter_mut().find(|(s, _)| *s == step) {
                Some((_, total)) => *total += f64::from(ms),
                None => steps.push((step, f64::from(ms))),
            }
        }
        Ok(steps
            .into_iter()
            .map(|(s, ms)| (s, std::time::Duration::from_secs_f64(ms.max(0.0) / 1e3)))
            .collect())
    }
}

/// The probe's name for the copy of a batch's window sums to the host (a copy, not a kernel).
const DOWNLOAD: &str = "download (window sums)";

/// The step a kernel belongs to, for [`Probe::steps`].
fn step_of(kernel: &'static str) -> &'static str {
    match kernel {
        "msm_count" | "scan_blocks" | "scan_add" | "msm_scatter" => "sort",
        "sum_affine" | "sum_xyzz" | "msm_flat_counts" | "msm_chunk_counts" => "bucket sums",
        "sum_ones" => "ones (batch addition)",
        "window_segments" | "reduce" => "reductions",
        "ntt_pass" => "ntt passes",
        "scale" => "coset scaling",
        other => other,
    }
}

/// The total length of the union of intervals `(start, end)`.
fn union_length(mut spans: Vec<(f32, f32)>) -> f32 {
    spans.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (mut total, mut open): (f32, Option<(f32, f32)>) = (0.0, None);
    for (a, b) in spans {
        open = match open {
            Some((s, e)) if a <= e => Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    total + open.map_or(0.0, |(s, e)| e - s)
}

/// Entries per chunk in later summing rounds.
const LATER_CHUNK: u32 = 16;
/// Threads per block of the summing kernels (`SUM_THREADS` in msm.cu, which caps their registers).
const BLOCK: u32 = 128;
/// Threads per block of `G_reduce` (`REDUCE_THREADS` in msm.cu).
const REDUCE_THREADS: u32 = 64;
/// Most inputs one `G_reduce` block adds: four per thread before the tree, as the adds of one thread
/// are a chain whose latency the few threads of these small launches cannot hide.
const REDUCE_PER: u32 = 256;
/// Widest window the kernels take.
pub const MAX_WINDOW_BITS: u32 = 24;

/// The shape of one batch's bucket machinery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Window width `c`.
    pub c: u32,
    /// Windows, `ceil(256 / c)` (signed digits of a 255-bit scalar never carry out of the top one).
    pub windows: u32,
    /// Buckets per window, `2^(c-1)`.
    pub half: u32,
    /// Segments per window in the window reduction (a power of two dividing `half`).
    pub segments: u32,
    /// Threads of the first summing round: the windows' entries are cut into this many equal pieces
    /// (fewer when there are fewer entries than pieces).
    pub pieces: u32,
    /// Threads of the batch addition of the ones (a power of two, a multiple of the block size).
    pub ones_threads: u32,
}

impl Plan {
    /// The default window width for a batch of `n` points: `log2(n) - 6`, at most 16 (at 2^22 and
    /// 2^24 points, 16 beats both 15 and everything from 17 to 22 on the H200).
    pub fn default_window(n: usize) -> u32 {
        let log_n = usize::BITS - n.max(1).leading_zeros();
        log_n.saturating_sub(7).clamp(4, 16)
    }

    /// The plan for a batch of `n` points.
    pub fn new(n: usize, window_bits: Option<u32>) -> Result<Self, CudaError> {
        let c = window_bits.unwrap_or_else(|| Self::default_window(n));
        if !(2..=MAX_WINDOW_BITS).contains(&c) {
            return Err(CudaError::Size {
                op: "msm",
                size: c as usize,
                reason: "window width must be 2..=24",
            });
        }
        let windows = 256u32.div_ceil(c);
        let half = 1u32 << (c - 1);
        // Buckets per segment. A thread adds two points per bucket of its segment, one after the other,
        // then multiplies by the segment's offset. Below 2^15 buckets in all, the few threads are bound
        // by that chain's latency: segments of 2 buckets (2^16 points: 0.33 ms against 0.80 ms with
        // 16). From 2^15 up the GPU is busy anyway and the offset multiplications cost: at least 16
        // buckets per segment, at most 64, about 2^16 threads (2^20 points: 0.99 ms with 16, 1.20 ms
        // with 4).
        let buckets = windows as u64 * half as u64;
        let per = if buckets < 1 << 15 { 2 } else { (buckets >> 16).clamp(16, 64).next_power_of_two() };
        let per = per.min(half as u64) as u32;
        let segments = half / per;
        let entries = windows as u64 * n as u64;
        // Pieces of 8 to 512 entries when every digit is nonzero, about 2^17 of them from 2^20 points up.
        let pieces = u32::try_from(entries.div_ceil((entries >> 17).clamp(8, 512).next_power_of_two()))
            .map_err(|_| CudaError::Size { op: "msm", size: n, reason: "batch too large for one launch" })?;
        // Up to 16 ones per thread when all n scalars are 1, with at most 2^16 threads.
        let ones_threads = (n as u64 / 16).next_power_of_two().clamp(BLOCK as u64, 1 << 16) as u32;
        Ok(Self { c, windows, half, segments, pieces, ones_threads })
    }

    /// The windows' buckets, `windows * 2^(c-1)`; the list of ones follows them as one more bucket.
    pub fn window_buckets(&self) -> u32 {
        self.windows * self.half
    }

    /// Buckets sorted into, the windows' and the ones.
    pub fn buckets(&self) -> u32 {
        self.window_buckets() + 1
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
) -> Result<ScratchBuf<u32>, CudaError> {
    let n = input.len();
    let n32 = u32::try_from(n).map_err(|_| CudaError::Size {
        op: "scan",
        size: n,
        reason: "more than 2^32 - 1",
    })?;
    let blocks = n.div_ceil(SCAN_BLOCK).max(1);
    // Both are written whole: every element of out, one sum per block.
    let mut out = gpu.scratch().take::<u32>(stream, n)?;
    let mut sums = gpu.scratch().take::<u32>(stream, blocks)?;
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

/// Counts per bucket and where each bucket's items start: how a data array is cut by bucket.
struct Segments {
    count: ScratchBuf<u32>,
    off: ScratchBuf<u32>,
}

/// The next round's segments when each bucket's items are cut into chunks of `chunk`.
fn chunk_counts(
    gpu: &Gpu,
    k: &MsmKernels,
    stream: &Arc<CudaStream>,
    seg: &Segments,
    chunk: u32,
    probe: &mut Probe,
) -> Result<Segments, CudaError> {
    let buckets = seg.count.len() as u32;
    let mut count = gpu.scratch().take::<u32>(stream, seg.count.len())?;
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

/// Where an MSM's bases are.
#[derive(Debug, Clone, Copy)]
pub enum Points<'a, A> {
    /// Resident in device memory.
    Device(&'a CudaSlice<A>),
    /// In pinned host memory, uploaded batch by batch on the copy stream.
    Host(&'a PinnedHostSlice<A>),
}

/// The bases of an MSM, and optionally which scalar each one takes.
#[derive(Debug)]
pub struct MsmBases<'a, C: MsmCurve> {
    points: Points<'a, C::Affine>,
    /// Point `i` takes scalar `select[i]`; without it, scalar `i`.
    select: Option<&'a CudaSlice<u32>>,
    /// Points used (the front of the buffers).
    len: usize,
    /// How many scalars the MSM takes.
    scalars: usize,
}

impl<'a, C: MsmCurve> MsmBases<'a, C> {
    /// Device-resident bases, one per scalar.
    pub fn device(points: &'a CudaSlice<C::Affine>) -> Self {
        Self { points: Points::Device(points), select: None, len: points.len(), scalars: points.len() }
    }

    /// Bases in pinned host memory, one per scalar.
    pub fn host(points: &'a PinnedHostSlice<C::Affine>) -> Self {
        Self { points: Points::Host(points), select: None, len: points.len(), scalars: points.len() }
    }

    /// Bases that take the scalars `select[i]` out of `scalars`. The caller guarantees that `select`
    /// has one entry per point and that every entry is below `scalars`.
    pub(crate) fn selected(
        points: Points<'a, C::Affine>,
        select: &'a CudaSlice<u32>,
        scalars: usize,
    ) -> Self {
        let len = match points {
            Points::Device(p) => p.len(),
            Points::Host(p) => p.len(),
        };
        Self { points, select: Some(select), len, scalars }
    }

    /// No points at all, for `scalars` scalars (whose MSM is the identity).
    pub(crate) fn none(points: Points<'a, C::Affine>, scalars: usize) -> Self {
        Self { points, select: None, len: 0, scalars }
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many scalars an MSM on these bases takes.
    pub fn scalars(&self) -> usize {
        self.scalars
    }
}

/// A batch's bucket entries, sorted by bucket.
struct Sorted {
    seg: Segments,
    entries: ScratchBuf<u32>,
}

/// Digits, counts, scan and scatter of one batch on `stream`. `scalars` is the batch's scalars, or
/// with `select` (the batch's part of it) all of them.
fn sort(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    scalars: &CudaView<'_, GpuFr>,
    select: Option<&CudaView<'_, u32>>,
    n: usize,
    plan: &Plan,
    probe: &mut Probe,
) -> Result<Sorted, CudaError> {
    let k = gpu.msm_kernels()?;
    let n32 = u32::try_from(n).ok().filter(|&v| v < 1 << 31).ok_or(CudaError::Size {
        op: "msm",
        size: n,
        reason: "batch over 2^31 points",
    })?;
    if plan.windows as u64 * n as u64 >= 1 << 32 {
        return Err(CudaError::Size { op: "msm", size: n, reason: "batch over 2^32 bucket entries" });
    }
    let buckets = plan.buckets();
    let (c, windows) = (plan.c, plan.windows);
    let dummy = gpu.dummy_u32.slice(..);
    let selected = u32::from(select.is_some());
    let select = select.unwrap_or(&dummy);

    let mut count = gpu.scratch().take_zeroed::<u32>(stream, buckets as usize)?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_count(const Fr* scalars, const uint32_t* select, uint32_t selected, uint32_t n,
    // uint32_t c, uint32_t windows, uint32_t* counts)`; scalars hold n elements, or with a selection
    // every select[i] (i < n) indexes them; keys stay below windows * 2^(c-1) + 1 = buckets.
    unsafe {
        stream
            .launch_builder(&k.count)
            .arg(scalars)
            .arg(select)
            .arg(&selected)
            .arg(&n32)
            .arg(&c)
            .arg(&windows)
            .arg(&mut count)
            .launch(grid(n, 256)?)
    }
    .during("msm_count")?;
    probe.after(gpu, stream, "msm_count")?;
    let off = scan(gpu, k, stream, &count, probe)?;
    let mut cursor = gpu.scratch().take::<u32>(stream, buckets as usize)?;
    stream.memcpy_dtod(&*off, &mut *cursor).during("copying bucket offsets")?;
    // Only the counted entries are written, and nothing reads past them.
    let mut entries = gpu.scratch().take::<u32>(stream, windows as usize * n)?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_scatter(const Fr* scalars, const uint32_t* select, uint32_t selected, uint32_t n,
    // uint32_t c, uint32_t windows, uint32_t* cursor, uint32_t* entries)`; the scatter writes exactly the
    // entries msm_count counted, each inside its bucket's range, and a scalar has at most `windows`
    // entries, so entries (windows * n) suffices.
    unsafe {
        stream
            .launch_builder(&k.scatter)
            .arg(scalars)
            .arg(select)
            .arg(&selected)
            .arg(&n32)
            .arg(&c)
            .arg(&windows)
            .arg(&mut cursor)
            .arg(&mut entries)
            .launch(grid(n, 256)?)
    }
    .during("msm_scatter")?;
    probe.after(gpu, stream, "msm_scatter")?;
    Ok(Sorted { seg: Segments { count, off }, entries })
}

/// Adds each of `rows` consecutive runs of `per_row` points of `input` into `dst[row]` on `stream`, in
/// levels of at most `REDUCE_PER` inputs per block. `per_row` is a power of two.
#[allow(clippy::too_many_arguments)]
fn reduce_rows<C: MsmCurve>(
    gpu: &Gpu,
    ck: &CurveKernels,
    stream: &Arc<CudaStream>,
    input: ScratchBuf<C::Xyzz>,
    rows: u32,
    per_row: u32,
    dst: &mut CudaViewMut<'_, C::Xyzz>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let (mut level, mut per_row) = (input, per_row);
    loop {
        let per = per_row.min(REDUCE_PER);
        let groups = rows * (per_row / per);
        let cfg =
            LaunchConfig { grid_dim: (groups, 1, 1), block_dim: (REDUCE_THREADS, 1, 1), shared_mem_bytes: 0 };
        let last = per == per_row;
        let mut next =
            if last { None } else { Some(gpu.scratch().take::<C::Xyzz>(stream, groups as usize)?) };
        probe.before(gpu, stream)?;
        let mut launch = stream.launch_builder(&ck.reduce);
        launch.arg(&level).arg(&per);
        match next.as_mut() {
            Some(out) => launch.arg(out),
            None => launch.arg(&mut *dst),
        };
        // SAFETY: matches `G_reduce(const Xyzz<F>* in, uint32_t per, Xyzz<F>* out)`; block g reads
        // in[g * per .. g * per + per), inside `level` (groups * per points), and writes out[g], inside
        // `next` (groups points) or `dst` (rows points, and groups == rows at the last level).
        unsafe { launch.launch(cfg) }.during("reduce")?;
        probe.after(gpu, stream, "reduce")?;
        match next {
            Some(out) => level = out,
            None => return Ok(()),
        }
        per_row /= per;
    }
}

/// Bucket sums and window reduction of one sorted batch on `stream`: its window sums and the sum of
/// its ones (`windows + 1` XYZZ points) in a new device buffer.
fn reduce<C: MsmCurve>(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    bases: &CudaView<'_, C::Affine>,
    sorted: &Sorted,
    plan: &Plan,
    probe: &mut Probe,
) -> Result<ScratchBuf<C::Xyzz>, CudaError> {
    let k = gpu.msm_kernels()?;
    let ck = if C::NAME == G2::NAME { &k.g2 } else { &k.g1 };
    let n = bases.len();
    let buckets = plan.window_buckets();
    let windows = plan.windows;
    let pieces = plan.pieces;
    let mut sums = gpu.scratch().take::<C::Xyzz>(stream, windows as usize + 1)?;

    // The ones: a batch addition of the points listed in the bucket after the windows'.
    let ones = plan.ones_threads;
    let mut partials = gpu.scratch().take::<C::Xyzz>(stream, ones as usize)?;
    {
        // The stream waits for the sort (on the side stream) here, before the probe's start event,
        // so the first kernel's span is its own and not the sort's too.
        let _entries = sorted.entries.device_ptr(stream);
        let _count = sorted.seg.count.device_ptr(stream);
        let _off = sorted.seg.off.device_ptr(stream);
    }
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_sum_ones(const Affine<F>* bases, const uint32_t* entries, const uint32_t* count,
    // const uint32_t* off, uint32_t key, Xyzz<F>* out)`; bucket `buckets` (the ones) exists in count and
    // off (plan.buckets() = buckets + 1 long), its entries lie in `entries` and index bases below n;
    // the grid is exactly `ones` threads (a multiple of BLOCK), each writing out[t] of `partials`.
    unsafe {
        stream
            .launch_builder(&ck.sum_ones)
            .arg(bases)
            .arg(&sorted.entries)
            .arg(&sorted.seg.count)
            .arg(&sorted.seg.off)
            .arg(&buckets)
            .arg(&mut partials)
            .launch(grid(ones as usize, BLOCK)?)
    }
    .during("sum_ones")?;
    probe.after(gpu, stream, "sum_ones")?;
    reduce_rows::<C>(gpu, ck, stream, partials, 1, ones, &mut sums.slice_mut(windows as usize..), probe)?;

    // First round: the windows' entries in `pieces` equal runs, one per thread, whatever buckets they
    // fall in.
    let mut items = pieces as usize + buckets as usize;
    let mut next = Segments {
        count: gpu.scratch().take::<u32>(stream, buckets as usize)?,
        off: gpu.scratch().take(stream, buckets as usize)?,
    };
    probe.before(gpu, stream)?;
    // SAFETY: matches `msm_flat_counts(const uint32_t* count, const uint32_t* off, uint32_t buckets,
    // uint32_t pieces, uint32_t* next_count, uint32_t* next_off)`; the inputs hold buckets + 1 elements,
    // the outputs `buckets`, each written.
    unsafe {
        stream
            .launch_builder(&k.flat_counts)
            .arg(&sorted.seg.count)
            .arg(&sorted.seg.off)
            .arg(&buckets)
            .arg(&pieces)
            .arg(&mut next.count)
            .arg(&mut next.off)
            .launch(grid(buckets as usize, 256)?)
    }
    .during("msm_flat_counts")?;
    probe.after(gpu, stream, "msm_flat_counts")?;
    // Slots no thread writes are never read: msm_flat_counts points each bucket at its written ones.
    let mut data = gpu.scratch().take::<C::Xyzz>(stream, items)?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_sum_affine(const Affine<F>* bases, const uint32_t* entries, const uint32_t* count,
    // const uint32_t* off, uint32_t buckets, uint32_t pieces, Xyzz<F>* out)`; entries index bases below
    // n; thread t reads entries below the windows' total (at most windows * n, the length of entries)
    // and writes out[t + b] for buckets b < `buckets`, with t < pieces, so below `items`.
    unsafe {
        stream
            .launch_builder(&ck.sum_affine)
            .arg(bases)
            .arg(&sorted.entries)
            .arg(&sorted.seg.count)
            .arg(&sorted.seg.off)
            .arg(&buckets)
            .arg(&pieces)
            .arg(&mut data)
            .launch(grid(pieces as usize, BLOCK)?)
    }
    .during("sum_affine")?;
    probe.after(gpu, stream, "sum_affine")?;
    let mut seg = next;
    // Later rounds, until no bucket can have more than one partial sum: a bucket holds at most one
    // entry per point, so it meets at most n + 1 pieces, and there are at most `pieces`.
    let mut most = (pieces as usize).min(n + 1);
    while most > 1 {
        let next = chunk_counts(gpu, k, stream, &seg, LATER_CHUNK, probe)?;
        let next_items = items / LATER_CHUNK as usize + buckets as usize;
        let mut out = gpu.scratch().take::<C::Xyzz>(stream, next_items)?;
        probe.before(gpu, stream)?;
        // SAFETY: matches `G_sum_xyzz(const Xyzz<F>* in, const uint32_t* count, const uint32_t* off,
        // const uint32_t* off_next, uint32_t buckets, uint32_t L, Xyzz<F>* out)`; the ranges read lie in
        // `in` (the previous round's output, `items` long) and were written by it; thread q writes out[q]
        // only below the number of chunks, at most items / L + buckets = next_items.
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

    let (segments, half) = (plan.segments, plan.half);
    let mut level = gpu.scratch().take::<C::Xyzz>(stream, (windows * segments) as usize)?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `G_window_segments(const Xyzz<F>* data, const uint32_t* count, const uint32_t* off,
    // uint32_t windows, uint32_t half, uint32_t segments, Xyzz<F>* out)`; every bucket has count 0 or 1
    // here and off[b] < items, a written slot, when count[b] is 1; out holds windows * segments points,
    // one per thread.
    unsafe {
        stream
            .launch_builder(&ck.window_segments)
            .arg(&data)
            .arg(&seg.count)
            .arg(&seg.off)
            .arg(&windows)
            .arg(&half)
            .arg(&segments)
            .arg(&mut level)
            .launch(grid((windows * segments) as usize, 64)?)
    }
    .during("window_segments")?;
    probe.after(gpu, stream, "window_segments")?;
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
    Ok(sums)
}

/// `Σ scalars[i]·bases[i]` on the device. `bases` and `scalars` must have the same length.
pub fn msm<C: MsmCurve>(
    gpu: &Gpu,
    bases: &MsmBases<'_, C>,
    scalars: &CudaView<'_, GpuFr>,
    config: &MsmConfig,
) -> Result<Projective<C::Config>, CudaError> {
    Probe::with_active(|probe| msm_probed::<C>(gpu, bases, scalars, config, probe))
}

/// [`msm`], timing each kernel into `probe` when it is enabled.
pub fn msm_probed<C: MsmCurve>(
    gpu: &Gpu,
    bases: &MsmBases<'_, C>,
    scalars: &CudaView<'_, GpuFr>,
    config: &MsmConfig,
    probe: &mut Probe,
) -> Result<Projective<C::Config>, CudaError> {
    probe.host_mark("start");
    let pending = msm_start::<C>(gpu, bases, scalars, config, probe)?;
    probe.host_mark("queued");
    pending.finish_probed(probe)
}

/// An MSM whose kernels are all queued: [`PendingMsm::finish`] waits for the last batch's window sums
/// and combines them with the earlier batches'. Meanwhile the host may queue other work.
pub struct PendingMsm<'g, C: MsmCurve> {
    /// The result buffers, and which holds the last batch's sums (none for an empty MSM).
    last: Option<([ResultBuffer<'g>; 2], usize, Plan)>,
    /// The earlier batches' combined sums.
    total: Projective<C::Config>,
}

impl<C: MsmCurve> PendingMsm<'_, C> {
    /// The MSM's value (waits for its last copy).
    pub fn finish(self) -> Result<Projective<C::Config>, CudaError> {
        self.finish_probed(&mut Probe::default())
    }

    fn finish_probed(self, probe: &mut Probe) -> Result<Projective<C::Config>, CudaError> {
        let mut total = self.total;
        if let Some((host, last, plan)) = &self.last {
            host[*last].get().as_slice().during("waiting for window sums")?;
            probe.host_mark("copied");
            total += combine::<C>(host[*last].get(), plan)?;
        }
        probe.host_mark("combined");
        Ok(total)
    }
}

impl<C: MsmCurve> std::fmt::Debug for PendingMsm<'_, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingMsm").field("pending", &self.last.is_some()).finish()
    }
}

/// Queues the kernels of `Σ scalars[i]·bases[i]` (see [`msm`]); the host combines every batch but the
/// last while later batches run, and the last in [`PendingMsm::finish`].
pub fn msm_start<'g, C: MsmCurve>(
    gpu: &'g Gpu,
    bases: &MsmBases<'_, C>,
    scalars: &CudaView<'_, GpuFr>,
    config: &MsmConfig,
    probe: &mut Probe,
) -> Result<PendingMsm<'g, C>, CudaError> {
    let n = bases.len();
    if scalars.len() != bases.scalars() {
        return Err(CudaError::Length { op: "msm", expected: bases.scalars(), got: scalars.len() });
    }
    if let Some(select) = bases.select {
        if select.len() != n {
            return Err(CudaError::Length { op: "msm selection", expected: n, got: select.len() });
        }
    }
    if n == 0 {
        return Ok(PendingMsm { last: None, total: Projective::zero() });
    }
    if config.batch == 0 {
        return Err(CudaError::Size { op: "msm", size: 0, reason: "batch size must be positive" });
    }
    let (compute, side, copy) = (gpu.compute_stream(), gpu.side_stream(), gpu.copy_stream());
    let batch_len = config.batch.min(n);
    let plan = Plan::new(batch_len, config.window_bits)?;
    let ranges: Vec<std::ops::Range<usize>> =
        (0..n).step_by(batch_len).map(|s| s..(s + batch_len).min(n)).collect();
    let sort_batch = |r: &std::ops::Range<usize>, probe: &mut Probe| match bases.select {
        Some(select) => sort(gpu, side, scalars, Some(&select.slice(r.clone())), r.len(), &plan, probe),
        None => sort(gpu, side, &scalars.slice(r.clone()), None, r.len(), &plan, probe),
    };
    // Host-resident bases go through two device buffers, filled on the copy stream.
    let mut staged: Vec<ScratchBuf<C::Affine>> = Vec::new();
    let upload = |staged: &mut Vec<ScratchBuf<C::Affine>>, i: usize| -> Result<(), CudaError> {
        let Points::Host(host) = bases.points else { return Ok(()) };
        let r = &ranges[i];
        let src = host.as_slice().during("reading pinned bases")?;
        let dst = &mut staged[i % 2];
        let mut view = dst.slice_mut(..r.len());
        copy.memcpy_htod(&src[r.clone()], &mut view).during("uploading bases")
    };
    if let Points::Host(_) = bases.points {
        for _ in 0..ranges.len().min(2) {
            // Each batch reads only the front its upload filled.
            staged.push(gpu.scratch().take::<C::Affine>(copy, batch_len)?);
        }
        upload(&mut staged, 0)?;
    }
    let slots = plan.windows as usize + 1;
    let bytes = slots * std::mem::size_of::<C::Xyzz>();
    // Two pinned result buffers: batch i's copy lands in one while the host reads the other.
    let mut host = [gpu.result_buffer(bytes)?, gpu.result_buffer(bytes)?];
    let mut total = Projective::<C::Config>::zero();
    let mut pending: Option<usize> = None;
    let mut sorted = sort_batch(&ranges[0], probe)?;
    for (i, r) in ranges.iter().enumerate() {
        let next = match ranges.get(i + 1) {
            Some(nr) => {
                if !staged.is_empty() {
                    upload(&mut staged, i + 1)?;
                }
                Some(sort_batch(nr, probe)?)
            }
            None => None,
        };
        let points = match bases.points {
            Points::Device(p) => p.slice(r.clone()),
            Points::Host(_) => staged[i % 2].slice(..r.len()),
        };
        let sums = reduce::<C>(gpu, compute, &points, &sorted, &plan, probe)?;
        let slot = i % 2;
        // SAFETY: `sums` holds `slots` XYZZ points of plain u64 limbs, exactly `bytes` bytes.
        let raw = unsafe { sums.transmute::<u8>(bytes) }.ok_or(CudaError::Size {
            op: "msm",
            size: bytes,
            reason: "window sums buffer too small",
        })?;
        probe.before(gpu, compute)?;
        compute.memcpy_dtoh(&raw, host[slot].get_mut()).during("copying window sums")?;
        probe.after(gpu, compute, DOWNLOAD)?;
        if let Some(prev) = pending.replace(slot) {
            total += combine::<C>(host[prev].get(), &plan)?;
        }
        if let Some(s) = next {
            sorted = s;
        }
    }
    Ok(PendingMsm { last: pending.map(|last| (host, last, plan)), total })
}

/// Σ_w 2^(c·w)·W_w plus the ones bucket, from a batch's window sums (waits for their copy).
fn combine<C: MsmCurve>(host: &PinnedHostSlice<u8>, plan: &Plan) -> Result<Projective<C::Config>, CudaError> {
    let bytes = host.as_slice().during("reading window sums")?;
    let windows = plan.windows as usize;
    let size = std::mem::size_of::<C::Xyzz>();
    if bytes.len() != (windows + 1) * size {
        return Err(CudaError::Length {
            op: "msm window sums",
            expected: (windows + 1) * size,
            got: bytes.len(),
        });
    }
    let point = |w: usize| -> C::Xyzz {
        // SAFETY: the buffer holds windows + 1 XYZZ points copied from the device; C::Xyzz (sealed: G1
        // and G2 only) is plain u64 limbs, valid for any bits; read_unaligned needs no alignment.
        unsafe { std::ptr::read_unaligned(bytes.as_ptr().add(w * size).cast::<C::Xyzz>()) }
    };
    let mut acc = Projective::<C::Config>::zero();
    for w in (0..windows).rev() {
        for _ in 0..plan.c {
            acc.double_in_place();
        }
        acc += C::to_ark(&point(w))?;
    }
    Ok(acc + C::to_ark(&point(windows))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_spans_count_once() {
        assert_eq!(union_length(vec![]), 0.0);
        assert_eq!(union_length(vec![(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.7)]), 4.0);
        assert_eq!(union_length(vec![(4.0, 5.0), (0.0, 1.0), (1.0, 2.0)]), 3.0);
    }

    /// The XYZZ form of an affine point, scaled by a random λ (`ZZ = λ²`, `ZZZ = λ³`).
    fn scaled<P: SWCurveConfig, D: Layout<Ark = P::BaseField>>(
        a: &Affine<P>,
        rng: &mut impl rand::Rng,
    ) -> Xyzz<D> {
        let l = <P::BaseField as ark_std::UniformRand>::rand(rng);
        let (l2, l3) = (l.square(), l.square() * l);
        let d = |v: P::BaseField| D::from_ark(&v);
        Xyzz { x: d(a.x * l2), y: d(a.y * l3), zz: d(l2), zzz: d(l3) }
    }

    #[test]
    fn xyzz_points_come_back_as_the_same_point_and_off_curve_ones_are_refused() {
        use ark_ec::CurveGroup;
        use ark_std::UniformRand;
        let mut rng = cuzk_testkit::seeded_rng("xyzz_to_ark");
        for _ in 0..8 {
            let p1 = g1::G1Projective::rand(&mut rng).into_affine();
            assert_eq!(G1::to_ark(&scaled(&p1, &mut rng)).unwrap(), p1);
            let p2 = g2::G2Projective::rand(&mut rng).into_affine();
            assert_eq!(G2::to_ark(&scaled(&p2, &mut rng)).unwrap(), p2);
            let mut bad: Xyzz<DeviceFq> = scaled(&p1, &mut rng);
            bad.x = DeviceFq::from_ark(&(bad.x.to_ark_unchecked() + ark_bls12_381::Fq::ONE));
            assert!(matches!(G1::to_ark(&bad), Err(LayoutError::NotOnCurve { .. })));
            let mut no_zzz: Xyzz<DeviceFq2> = scaled(&p2, &mut rng);
            no_zzz.zzz = DeviceFq2::default();
            assert!(matches!(G2::to_ark(&no_zzz), Err(LayoutError::NotOnCurve { .. })));
        }
        assert!(G1::to_ark(&Xyzz::default()).unwrap().is_zero());
        assert!(G2::to_ark(&Xyzz::default()).unwrap().is_zero());
    }

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
        assert_eq!(Plan::new(1 << 24, None).unwrap().c, 16);
        assert_eq!(Plan::new(1 << 20, None).unwrap().c, 14);
        assert!(Plan::new(10, Some(1)).is_err());
        assert!(Plan::new(10, Some(25)).is_err());
    }
}
