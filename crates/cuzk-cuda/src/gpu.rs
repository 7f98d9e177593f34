//! Devices, streams, buffers and timing.
//!
//! A [`Gpu`] owns one device's context and streams, its loaded kernel modules, a pool of pinned result
//! buffers and the MSMs' scratch shelves; it knows nothing of what the kernels compute.

use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaSlice, CudaStream, DeviceRepr, PinnedHostSlice, ValidAsZeroBits,
};

use crate::clock::{ClockAnchor, DeviceClock};
#[cfg(feature = "bench-kernels")]
use crate::modules::FieldKernels;
use crate::modules::{MsmKernels, NttKernels, R1csKernels};
use crate::scratch::Scratch;
use crate::{CudaError, DriverContext, GpuFr};

/// What a device is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device ordinal.
    pub ordinal: usize,
    /// The device's name.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Total device memory in bytes.
    pub total_memory: usize,
    /// Streaming multiprocessors.
    pub multiprocessors: i32,
}

/// One GPU: its context, a compute stream, a copy stream and a side stream (work that overlaps the
/// compute stream, such as sorting the next MSM batch), and the loaded kernels.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    compute: Arc<CudaStream>,
    copy: Arc<CudaStream>,
    side: Arc<CudaStream>,
    info: DeviceInfo,
    pub(crate) ntt: NttKernels,
    #[cfg(feature = "bench-kernels")]
    field: OnceLock<Result<FieldKernels, CudaError>>,
    msm: OnceLock<Result<MsmKernels, CudaError>>,
    r1cs: OnceLock<Result<R1csKernels, CudaError>>,
    /// A one-element buffer passed where a kernel takes a table it will not read.
    pub(crate) dummy: CudaSlice<GpuFr>,
    /// The same, for kernels taking an optional index array.
    pub(crate) dummy_u32: CudaSlice<u32>,
    /// Pinned buffers that MSM results are copied into, kept between calls (allocating pinned memory
    /// costs more than a small MSM).
    results: Mutex<Vec<PinnedHostSlice<u8>>>,
    /// The MSMs' working buffers, kept between calls.
    scratch: Arc<Scratch>,
    /// The device's event clock calibrated against the host's.
    clock: DeviceClock,
}

/// Pinned result buffers kept per device: two per MSM for the five MSMs of a proof, for two proofs in
/// flight at once (a pipeline's GPU workers collect one proof's MSMs while the next one's are queued),
/// and some to spare.
const KEPT_RESULT_BUFFERS: usize = 32;

/// A pinned buffer lent by [`Gpu::result_buffer`]; it goes back to the device's pool when dropped.
pub(crate) struct ResultBuffer<'g> {
    gpu: &'g Gpu,
    buf: Option<PinnedHostSlice<u8>>,
}

impl ResultBuffer<'_> {
    pub(crate) fn get_mut(&mut self) -> &mut PinnedHostSlice<u8> {
        self.buf.as_mut().expect("present until dropped")
    }

    pub(crate) fn get(&self) -> &PinnedHostSlice<u8> {
        self.buf.as_ref().expect("present until dropped")
    }
}

impl Drop for ResultBuffer<'_> {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            let mut pool = self.gpu.results.lock().unwrap_or_else(|p| p.into_inner());
            if pool.len() < KEPT_RESULT_BUFFERS {
                pool.push(buf);
            }
        }
    }
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("info", &self.info).finish()
    }
}

fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the driver library; cudarc panics on the first driver call when it is
    // missing, which is why this probe comes first.
    unsafe { sys::is_culib_present() }
}

/// Stream-ordered allocations come from the device's default memory pool. By default the pool hands
/// freed memory back to the driver at every synchronisation, so each proof would allocate afresh; with
/// no release threshold freed blocks stay in the pool and the next proof's buffers of the same sizes
/// reuse them without calls into the driver's allocator.
fn keep_freed_memory(ctx: &Arc<CudaContext>) -> Result<(), CudaError> {
    ctx.bind_to_thread().during("binding the context")?;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: pool is a valid out-pointer and the device handle comes from a live context.
    unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) }
        .result()
        .during("getting the device's memory pool")?;
    let mut threshold: u64 = u64::MAX;
    // SAFETY: CU_MEMPOOL_ATTR_RELEASE_THRESHOLD takes a pointer to a cuuint64_t, which threshold is.
    unsafe {
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
    }
    .result()
    .during("setting the memory pool's release threshold")
}

impl Gpu {
    /// The CUDA devices of this machine. An error (never a panic) when there is no driver or no device.
    pub fn discover() -> Result<Vec<DeviceInfo>, CudaError> {
        if !driver_present() {
            return Err(CudaError::NoDriver);
        }
        let count = CudaContext::device_count().during("counting devices")?;
        if count <= 0 {
            return Err(CudaError::NoDevice(count));
        }
        (0..count as usize)
            .map(|o| CudaContext::new(o).during("creating a context").and_then(|c| info(&c)))
            .collect()
    }

    /// Opens device `ordinal`: creates its context and streams and loads the NTT kernels.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        let devices = Self::discover()?;
        if ordinal >= devices.len() {
            return Err(CudaError::BadOrdinal { ordinal, count: devices.len() });
        }
        let ctx = CudaContext::new(ordinal).during("creating a context")?;
        keep_freed_memory(&ctx)?;
        let compute = ctx.new_stream().during("creating the compute stream")?;
        let copy = ctx.new_stream().during("creating the copy stream")?;
        let side = ctx.new_stream().during("creating the side stream")?;
        let ntt = NttKernels::load(&ctx)?;
        let dummy = compute.alloc_zeros::<GpuFr>(1).during("allocating")?;
        let dummy_u32 = compute.alloc_zeros::<u32>(1).during("allocating")?;
        compute.synchronize().during("initialising buffers")?;
        let clock = DeviceClock::new(&ctx)?;
        Ok(Self {
            info: info(&ctx)?,
            ctx,
            compute,
            copy,
            side,
            ntt,
            #[cfg(feature = "bench-kernels")]
            field: OnceLock::new(),
            msm: OnceLock::new(),
            r1cs: OnceLock::new(),
            dummy,
            dummy_u32,
            results: Mutex::new(Vec::new()),
            scratch: Arc::new(Scratch::default()),
            clock,
        })
    }

    pub(crate) fn msm_kernels(&self) -> Result<&MsmKernels, CudaError> {
        let loaded = self.msm.get_or_init(|| MsmKernels::load(&self.ctx));
        loaded.as_ref().map_err(|e| CudaError::KernelLoad(e.to_string()))
    }

    /// The R1CS module's kernels, loaded on first use.
    pub(crate) fn r1cs_kernels(&self) -> Result<&R1csKernels, CudaError> {
        let loaded = self.r1cs.get_or_init(|| R1csKernels::load(&self.ctx));
        loaded.as_ref().map_err(|e| CudaError::KernelLoad(e.to_string()))
    }

    /// The field module's test and throughput kernels, loaded on first use.
    #[cfg(feature = "bench-kernels")]
    pub(crate) fn field_kernels(&self) -> Result<&FieldKernels, CudaError> {
        let loaded = self.field.get_or_init(|| FieldKernels::load(&self.ctx));
        loaded.as_ref().map_err(|e| CudaError::KernelLoad(e.to_string()))
    }

    /// What this device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The stream kernels run on.
    pub fn compute_stream(&self) -> &Arc<CudaStream> {
        &self.compute
    }

    /// The stream uploads and downloads run on.
    pub fn copy_stream(&self) -> &Arc<CudaStream> {
        &self.copy
    }

    /// The stream for work that overlaps the compute stream (the next MSM batch's sorting).
    pub fn side_stream(&self) -> &Arc<CudaStream> {
        &self.side
    }

    /// A pinned host buffer of exactly `bytes` bytes from this device's pool (a new one when none of
    /// that size is free); it returns to the pool when dropped.
    pub(crate) fn result_buffer(&self, bytes: usize) -> Result<ResultBuffer<'_>, CudaError> {
        let kept = {
            let mut pool = self.results.lock().unwrap_or_else(|p| p.into_inner());
            pool.iter().position(|b| b.len() == bytes).map(|i| pool.swap_remove(i))
        };
        let buf = match kept {
            Some(b) => b,
            None => self.pinned::<u8>(bytes, true)?,
        };
        Ok(ResultBuffer { gpu: self, buf: Some(buf) })
    }

    /// The device's event clock calibrated against the host's (see [`crate::clock`]).
    pub fn clock(&self) -> &DeviceClock {
        &self.clock
    }

    /// The MSMs' working buffers on this device.
    pub fn scratch(&self) -> &Arc<Scratch> {
        &self.scratch
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Free and total device memory in bytes.
    pub fn memory(&self) -> Result<(usize, usize), CudaError> {
        self.ctx.mem_get_info().during("querying memory")
    }

    /// A zeroed device buffer of `n` elements, allocated in `stream`'s order.
    pub fn zeros<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        stream: &Arc<CudaStream>,
        n: usize,
    ) -> Result<CudaSlice<T>, CudaError> {
        stream.alloc_zeros::<T>(n.max(1)).during("allocating device memory")
    }

    /// A device buffer of `n` elements whose contents are left as they were, allocated in `stream`'s
    /// order: for buffers that a kernel or a copy fills before anything reads them.
    pub(crate) fn uninit<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        stream: &Arc<CudaStream>,
        n: usize,
    ) -> Result<CudaSlice<T>, CudaError> {
        // SAFETY: the element types are plain data for which every bit pattern is a value (the
        // `ValidAsZeroBits` bound stands for that here), so even a slot nobody wrote reads as some
        // value of T; callers only read what they wrote.
        unsafe { stream.alloc::<T>(n.max(1)) }.during("allocating device memory")
    }

    /// Copies host data into a new device buffer on `stream`.
    pub fn upload<T: DeviceRepr>(
        &self,
        stream: &Arc<CudaStream>,
        host: &[T],
    ) -> Result<CudaSlice<T>, CudaError> {
        stream.clone_htod(host).during("uploading")
    }

    /// Copies host data into the front of a device buffer on `stream`.
    pub fn upload_into<T: DeviceRepr>(
        &self,
        stream: &Arc<CudaStream>,
        host: &[T],
        dst: &mut CudaSlice<T>,
    ) -> Result<(), CudaError> {
        if host.len() > dst.len() {
            return Err(CudaError::Length { op: "upload_into", expected: dst.len(), got: host.len() });
        }
        let mut view = dst.slice_mut(..host.len());
        stream.memcpy_htod(host, &mut view).during("uploading")
    }

    /// Copies a device buffer back to the host (waits for `stream`).
    pub fn download<T: DeviceRepr + Default + Clone>(
        &self,
        stream: &Arc<CudaStream>,
        buf: &CudaSlice<T>,
    ) -> Result<Vec<T>, CudaError> {
        stream.clone_dtoh(buf).during("downloading")
    }

    /// A pinned host buffer of `n` elements. `read_back` buffers are cached (fast for the CPU to read);
    /// the others are write-combined (fastest to upload from, very slow to read).
    pub fn pinned<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        n: usize,
        read_back: bool,
    ) -> Result<PinnedHostSlice<T>, CudaError> {
        let flags = if read_back { 0 } else { sys::CU_MEMHOSTALLOC_WRITECOMBINED };
        let len = n.max(1);
        // SAFETY: the allocation is uninitialised; it is zeroed below before any reference to it exists.
        let mut buf = unsafe { self.ctx.alloc_pinned_with_flags::<T>(len, flags) }
            .during("allocating pinned memory")?;
        let ptr = buf.as_mut_ptr().during("mapping pinned memory")?;
        // SAFETY: `ptr` points to `len` elements just allocated for us; all-zero bits are a valid T.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(buf)
    }

    /// A pair of timing events.
    pub fn timer(&self) -> Result<Timer, CudaError> {
        let ev =
            || self.ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).during("creating an event");
        Ok(Timer { start: ev()?, stop: ev()? })
    }
}

fn info(ctx: &Arc<CudaContext>) -> Result<DeviceInfo, CudaError> {
    use sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT as SMS;
    Ok(DeviceInfo {
        ordinal: ctx.ordinal(),
        name: ctx.name().during("reading the device name")?,
        compute_capability: ctx.compute_capability().during("reading the compute capability")?,
        total_memory: ctx.total_mem().during("reading the memory size")?,
        multiprocessors: ctx.attribute(SMS).during("reading the multiprocessor count")?,
    })
}

/// Device-side timing: events recorded on a stream, read when both have completed.
pub struct Timer {
    start: CudaEvent,
    stop: CudaEvent,
}

impl Timer {
    /// Records the start on `stream`.
    pub fn start(&self, stream: &CudaStream) -> Result<(), CudaError> {
        self.start.record(stream).during("recording an event")
    }

    /// Records the stop on `stream`.
    pub fn stop(&self, stream: &CudaStream) -> Result<(), CudaError> {
        self.stop.record(stream).during("recording an event")
    }

    /// Waits for the stop event and returns the milliseconds between the two events.
    pub fn elapsed_ms(&self) -> Result<f32, CudaError> {
        self.stop.synchronize().during("waiting for an event")?;
        self.start.elapsed_ms(&self.stop).during("reading an event time")
    }

    /// Waits for the stop event and returns when the device reached the start and the stop, on the
    /// host's clock, through `anchor` (taken before the start was recorded).
    pub fn placed(
        &self,
        anchor: &ClockAnchor,
    ) -> Result<(std::time::Instant, std::time::Instant), CudaError> {
        self.stop.synchronize().during("waiting for an event")?;
        Ok((anchor.to_host(&self.start)?, anchor.to_host(&self.stop)?))
    }
}
