//! The CUDA backend on one GPU: the prover's backend traits over device memory, so
//! `cuzk_groth16::prove` runs on the GPU end to end.
//!
//! A proof's `a`, `b`, `c` are converted into pooled pinned staging buffers (on a few threads of the
//! backend's own, as the global pool is busy synthesizing) and uploaded on the copy stream
//! (`polys_from_host`) into buffers from the device's [`Arena`]; the assignment `z` is uploaded the
//! same way once per proof (`scalars_from_host`) and the A, B and L MSMs read ranges of it. The compute
//! stream waits for those copies' events (`await_uploads`) before the witness map's device timer
//! starts, so stage times are kernel times; the upload is timed apart on the copy stream, from the
//! start of staging to the last copy. `h` stays on the device for its MSM.
//!
//! Each timed stage of a proof gets a device timer (events on the compute stream) holding an enabled
//! [`Probe`]; the prover passes the timer back to the timed operations (`witness_map_timed`,
//! `msm_deferred`), which time their kernels into it, so a stage's report splits into steps. MSMs are
//! queued and collected later (`msm_deferred`), so the prover queues the next MSM's kernels before the
//! host combines this one's window sums.
//!
//! [`CudaBackend::reserve_partition_slots`] allocates the arena's slots (and one partition's pinned
//! staging) up front, as many as free memory allows after a reserve for the MSMs, and fails with a
//! clear error when not even one fits; [`CudaBackend::reserve_msm_workspace`] fills the MSMs' scratch
//! shelves for a key's five MSMs. With the `fault-injection` feature, `inject_fault_after` fails a
//! chosen device operation once, for tests of the error path.

use std::collections::HashMap;
#[cfg(feature = "fault-injection")]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ark_bls12_381::Fr;
use ark_ff::Zero;
use cudarc::driver::{CudaSlice, CudaView, DevicePtr, PinnedHostSlice};
use cuzk_field::{from_device_vec, to_device_vec, Affine, Curve, DeviceFr, DeviceRepr, Projective, G1, G2};
use cuzk_groth16::{
    Backend, BackendError, Bases, Deferred, DeviceBackend, DeviceTimer, MsmScalars, NttKind, PolyBackend,
    PreparedKey, Timing,
};
use rayon::prelude::*;

use crate::arena::{self, Arena, ArenaBuffer};
use crate::kernels::{MulUnits, Twiddles};
use crate::msm::{self, GpuBases, MsmConfig, Residency, MSM_RESERVE};
use crate::ntt::{self, CosetPowers, NttTables, MAX_LOG_N};
use crate::profile::Probe;
use crate::{kernels, CudaError, DriverContext, Gpu, GpuFr};

/// A polynomial resident in device memory.
#[derive(Debug)]
pub struct GpuPoly {
    pub(crate) buf: ArenaBuffer,
}

impl GpuPoly {
    /// The device buffer.
    pub fn buffer(&self) -> &CudaSlice<GpuFr> {
        &self.buf
    }

    /// Number of coefficients.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the polynomial has no coefficients (never, for polynomials made by the backend).
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

impl<C: Curve> Bases for GpuBases<C> {
    fn len(&self) -> usize {
        GpuBases::len(self)
    }

    fn host_bytes(&self) -> u64 {
        GpuBases::host_bytes(self)
    }
}

/// The CUDA backend on one GPU.
pub struct CudaBackend {
    gpu: Gpu,
    tables: Mutex<HashMap<u32, Arc<NttTables>>>,
    msm: MsmConfig,
    /// The units the NTT passes multiply on (the MSM's are in `msm`).
    ntt_units: MulUnits,
    /// The power tables of the standalone coset transforms (the witness map has its own).
    coset_powers: CosetPowers,
    /// Pinned, write-combined buffers that polynomials are converted into before their upload on the
    /// copy stream, kept between proofs (partitions of one key have one size).
    staging: Mutex<Vec<PinnedHostSlice<GpuFr>>>,
    /// Partition-sized device buffers (`a`, `b`, `c`, `z`), reused by every proof.
    arena: Arc<Arena>,
    /// Staging buffers kept between proofs.
    staging_keep: AtomicUsize,
    /// Device operations left before an injected failure; `u64::MAX` for none.
    #[cfg(feature = "fault-injection")]
    fault: AtomicU64,
}

/// Runs `f` on the threads that fill staging buffers, apart from the global pool (which synthesis
/// keeps busy); on the caller's pool if those threads could not be started (only slower).
pub(crate) fn stage_in_parallel<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, STAGING_THREADS);
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("cuzk-staging-{i}"))
            .build()
            .ok()
    });
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// Threads filling staging buffers: enough to convert a 2^24-element polynomial in a few
/// milliseconds, few enough to leave the cores to synthesis.
const STAGING_THREADS: usize = 4;

/// Staging buffers kept per backend without a reservation.
const KEPT_STAGING: usize = 6;

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend").field("gpu", &self.gpu).finish()
    }
}

pub(crate) fn device(op: &'static str) -> impl Fn(CudaError) -> BackendError {
    move |e| BackendError::Device { op, source: Box::new(e) }
}

impl CudaBackend {
    /// A backend on device `ordinal`.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        Ok(Self {
            gpu: Gpu::new(ordinal)?,
            tables: Mutex::new(HashMap::new()),
            msm: MsmConfig::default(),
            ntt_units: MulUnits::Integer,
            coset_powers: CosetPowers::default(),
            staging: Mutex::new(Vec::new()),
            arena: Arc::new(Arena::default()),
            staging_keep: AtomicUsize::new(KEPT_STAGING),
            #[cfg(feature = "fault-injection")]
            fault: AtomicU64::new(u64::MAX),
        })
    }

    /// Makes the device operation after the next `ops` ones (polynomial uploads, NTT calls, the witness
    /// map, MSMs) fail with [`CudaError::Injected`], once, to test how callers handle a CUDA failure in
    /// the middle of a proof. `None` cancels a pending failure. Only with the `fault-injection` feature
    /// (the GPU suite's); without it no device operation counts or checks anything.
    #[cfg(feature = "fault-injection")]
    pub fn inject_fault_after(&self, ops: Option<u64>) {
        self.fault.store(ops.unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// Counts one device operation (without fault injection, nothing to count).
    #[cfg(not(feature = "fault-injection"))]
    fn step(&self, _op: &'static str) -> Result<(), CudaError> {
        Ok(())
    }

    /// Counts one device operation; fails it when an injected failure is due.
    #[cfg(feature = "fault-injection")]
    fn step(&self, op: &'static str) -> Result<(), CudaError> {
        let due = self
            .fault
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| match left {
                u64::MAX => None,
                0 => Some(u64::MAX),
                n => Some(n - 1),
            })
            .is_ok_and(|left| left == 0);
        if due {
            Err(CudaError::Injected { op })
        } else {
            Ok(())
        }
    }

    /// An MSM on host scalars or on a range of a device polynomial, its kernels queued (and timed into
    /// `probe`); the result is collected by `finish` on the returned value.
    fn msm_scalars<C: Curve>(
        &self,
        bases: &GpuBases<C>,
        scalars: MsmScalars<'_, GpuPoly>,
        probe: &mut Probe,
    ) -> Result<msm::PendingMsm<'_, C>, BackendError> {
        let op = C::MSM;
        self.step(op).map_err(device(op))?;
        BackendError::expect_len(op, bases.len(), scalars.len())?;
        let mut start = |s: &CudaView<'_, GpuFr>| {
            msm::msm_start::<C>(&self.gpu, &bases.msm_bases(), s, &self.msm, probe).map_err(device(op))
        };
        match scalars {
            MsmScalars::Host(s) => {
                // Freed in stream order once the kernels that read it have run.
                let dev = self.scalars_to_device(s).map_err(device(op))?;
                start(&dev.slice(..))
            }
            MsmScalars::Poly { poly, offset, len } => {
                let range = MsmScalars::<GpuPoly>::checked_range(op, offset, len, poly.len())?;
                start(&poly.buf.slice(range))
            }
        }
    }

    /// Uploads several polynomials of `size` elements: each is converted into a pinned staging buffer
    /// (in parallel) and copied on the copy stream; kernels on the compute stream that use them wait
    /// for their copies through the buffers' events.
    pub fn upload_polys(&self, values: &[&[Fr]], size: usize) -> Result<Vec<GpuPoly>, CudaError> {
        if let Some(v) = values.iter().find(|v| v.len() > size) {
            return Err(CudaError::Length { op: "upload_polys", expected: size, got: v.len() });
        }
        let mut staged = self.take_staging(size, values.len())?;
        let copy = self.gpu.copy_stream();
        let mut polys = Vec::with_capacity(values.len());
        for (v, buf) in values.iter().zip(staged.iter_mut()) {
            // Waits for this buffer's previous upload, if it is still in flight.
            let host = buf.as_mut_slice().during("writing a staging buffer")?;
            let (front, tail) = host.split_at_mut(v.len());
            // On the backend's own threads: the global pool may be busy synthesizing the next
            // partitions, and the GPU waits for this upload.
            stage_in_parallel(|| {
                front.par_chunks_mut(1 << 14).zip(v.par_chunks(1 << 14)).for_each(|(dst, src)| {
                    for (d, s) in dst.iter_mut().zip(src) {
                        *d = GpuFr(DeviceFr::from_ark(s));
                    }
                });
                tail.par_chunks_mut(1 << 14).for_each(|t| t.fill(GpuFr::default()));
            });
            // The copy below fills all `size` elements (the staging buffer is exactly that long).
            let mut buf_dev = self.arena.take(&self.gpu, copy, size)?;
            copy.memcpy_htod(&*buf, &mut *buf_dev).during("uploading a polynomial")?;
            polys.push(GpuPoly { buf: buf_dev });
        }
        self.return_staging(staged);
        Ok(polys)
    }

    /// `count` pinned staging buffers of `size` elements: kept ones first, new ones for the rest.
    pub(crate) fn take_staging(
        &self,
        size: usize,
        count: usize,
    ) -> Result<Vec<PinnedHostSlice<GpuFr>>, CudaError> {
        let mut taken = {
            let mut pool = self.staging.lock().unwrap_or_else(|p| p.into_inner());
            let mut taken = Vec::with_capacity(count);
            while taken.len() < count {
                match pool.iter().position(|b| b.len() == size) {
                    Some(i) => taken.push(pool.swap_remove(i)),
                    None => break,
                }
            }
            taken
        };
        while taken.len() < count {
            taken.push(self.gpu.pinned::<GpuFr>(size, false)?);
        }
        Ok(taken)
    }

    /// Gives staging buffers back to the pool (those over its size are freed).
    pub(crate) fn return_staging(&self, staged: Vec<PinnedHostSlice<GpuFr>>) {
        let mut pool = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        for buf in staged {
            if pool.len() < self.staging_keep.load(Ordering::SeqCst) {
                pool.push(buf);
            }
        }
    }

    /// The arena, shared (its buffers go back to it when dropped).
    pub(crate) fn arena_handle(&self) -> &Arc<Arena> {
        &self.arena
    }

    /// Reserves device buffers for up to `want` partitions of `domain` rows and `variables` variables
    /// (`a`, `b`, `c` and `z` each: one slot), as many as fit in the device's free memory with a
    /// reserve kept for the MSMs' own buffers (less what their workspace already holds), plus one
    /// partition's pinned staging buffers to upload from. Returns the slots reserved, at least one:
    /// fails with [`CudaError::OutOfMemory`] when not even one fits. Slots reserved earlier for the
    /// same sizes count again, so calling this once per run costs nothing after the first.
    pub fn reserve_partition_slots(
        &self,
        domain: usize,
        variables: usize,
        want: usize,
    ) -> Result<usize, CudaError> {
        // The reserve is for the MSMs' buffers: what the workspace already holds is part of it.
        let reserve = MSM_RESERVE.saturating_sub(self.gpu.scratch().owned_bytes());
        self.reserve_slots_leaving(domain, variables, want, reserve)
    }

    /// [`CudaBackend::reserve_partition_slots`] for `key`'s partitions, keeping free only what
    /// `key`'s MSM buffers still need beyond what the shelves hold ([`CudaBackend::msm_workspace_estimate`]
    /// less their bytes): after [`CudaBackend::reserve_msm_workspace`], next to nothing.
    pub fn reserve_partition_slots_for(
        &self,
        key: &PreparedKey<CudaBackend>,
        want: usize,
    ) -> Result<usize, CudaError> {
        let reserve = self.msm_workspace_estimate(key)?.saturating_sub(self.gpu.scratch().owned_bytes());
        self.reserve_slots_leaving(key.domain_size(), key.variables(), want, reserve)
    }

    fn reserve_slots_leaving(
        &self,
        domain: usize,
        variables: usize,
        want: usize,
        reserve: usize,
    ) -> Result<usize, CudaError> {
        // The domain's NTT tables first, so that the slots leave room for them.
        if domain.is_power_of_two() && domain.trailing_zeros() <= crate::ntt::MAX_LOG_N {
            self.tables(domain.trailing_zeros())?;
        }
        let (free, _) = self.gpu.memory()?;
        let held = self.arena.slots_held(domain, variables);
        let fit = arena::slots_that_fit(free, reserve, domain, variables).saturating_add(held);
        if fit == 0 {
            return Err(CudaError::OutOfMemory {
                what: "one partition's a, b, c and z",
                need: arena::slot_bytes(domain, variables),
                free: free.saturating_sub(reserve),
            });
        }
        let slots = want.max(1).min(fit);
        let stream = self.gpu.copy_stream();
        if domain == variables {
            self.arena.reserve(&self.gpu, stream, domain, 4 * slots)?;
        } else {
            self.arena.reserve(&self.gpu, stream, domain, 3 * slots)?;
            self.arena.reserve(&self.gpu, stream, variables, slots)?;
        }
        self.reserve_staging(&[(domain, 3), (variables, 1)])?;
        Ok(slots)
    }

    /// Fills the device's MSM buffer shelves ([`crate::scratch`]) for `key`'s five MSMs: runs them
    /// twice on all-zero scalars, as a proof issues them, so every buffer a proof's MSMs take is on its
    /// shelf and no proof with this key allocates MSM memory. Returns the device bytes the MSM buffers
    /// hold now. Call it before [`CudaBackend::reserve_partition_slots`], which counts the memory left.
    /// The key's MSMs claim those buffers: when the key is dropped, the buffers no other key's claim
    /// needs are freed.
    pub fn reserve_msm_workspace(&self, key: &PreparedKey<CudaBackend>) -> Result<usize, CudaError> {
        // The shelves keep what this key's MSMs take, however large, instead of freeing the excess,
        // for as long as the key lives (its MSMs' claims, made first: another key's going recomputes
        // the limit from the claims).
        self.claim_workspace(key)?;
        let scratch = self.gpu.scratch();
        scratch.keep_at_least(scratch.owned_bytes().saturating_add(self.msm_workspace_estimate(key)?));
        let g1 = key.g1_bases();
        let g2 = key.g2_bases();
        let longest = g1.iter().map(|b| b.msm_bases().scalars()).chain([g2.msm_bases().scalars()]).max();
        let zeros = self.gpu.zeros::<GpuFr>(self.gpu.compute_stream(), longest.unwrap_or(1))?;
        let mut probe = Probe::default();
        for _round in 0..crate::scratch::SPARE {
            let mut g1_pending = Vec::with_capacity(g1.len());
            for b in g1 {
                let bases = b.msm_bases();
                let scalars = zeros.slice(..bases.scalars());
                g1_pending.push(msm::msm_start::<G1>(&self.gpu, &bases, &scalars, &self.msm, &mut probe)?);
            }
            let bases = g2.msm_bases();
            let scalars = zeros.slice(..bases.scalars());
            let g2_pending = msm::msm_start::<G2>(&self.gpu, &bases, &scalars, &self.msm, &mut probe)?;
            // All-zero scalars: anything but the identity means the MSM machinery is broken.
            let mut identity = g2_pending.finish()?.is_zero();
            for p in g1_pending {
                identity &= p.finish()?.is_zero();
            }
            if !identity {
                return Err(CudaError::SelfCheck {
                    op: "reserve_msm_workspace",
                    what: "an MSM of all-zero scalars did not give the identity",
                });
            }
        }
        Ok(self.gpu.scratch().owned_bytes())
    }

    /// Makes sure the staging pool holds `count` pinned buffers of each `len`, and keeps them.
    fn reserve_staging(&self, wanted: &[(usize, usize)]) -> Result<(), CudaError> {
        let mut need: HashMap<usize, usize> = HashMap::new();
        for &(len, count) in wanted {
            *need.entry(len).or_default() += count;
        }
        let total: usize = need.values().sum();
        self.staging_keep.fetch_max(total, Ordering::SeqCst);
        for (len, count) in need {
            let have = {
                let pool = self.staging.lock().unwrap_or_else(|p| p.into_inner());
                pool.iter().filter(|b| b.len() == len).count()
            };
            for _ in have..count {
                let buf = self.gpu.pinned::<GpuFr>(len, false)?;
                self.staging.lock().unwrap_or_else(|p| p.into_inner()).push(buf);
            }
        }
        Ok(())
    }

    /// Bytes of pinned host memory in the staging pool (the buffers uploads are converted into).
    pub fn staging_bytes(&self) -> u64 {
        let pool = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        pool.iter().map(|b| (b.len() * std::mem::size_of::<GpuFr>()) as u64).sum()
    }

    /// The arena of partition-sized device buffers.
    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    /// Loads every kernel module now (the MSM module otherwise loads on first use), so a backend that
    /// is ready here will not fail later for want of kernels.
    pub fn load_kernels(&self) -> Result<(), CudaError> {
        self.gpu.msm_kernels().map(|_| ())
    }

    /// The same backend with other MSM tuning (window width, batch size).
    pub fn with_msm_config(mut self, config: MsmConfig) -> Self {
        self.msm = config;
        self
    }

    /// The MSM tuning in use.
    pub fn msm_config(&self) -> MsmConfig {
        self.msm
    }

    /// The same backend with its NTT passes and G1's batched MSM round multiplying on `units`
    /// (`MsmConfig::units` for the MSMs; every choice gives the same bits). Set before the first
    /// transform: tables already built keep their units.
    pub fn with_mul_units(mut self, units: MulUnits) -> Self {
        self.msm.units = units;
        self.ntt_units = units;
        self
    }

    /// The same backend with its coset powers in `form` ([`CosetPowers::Folded`] unless set: the
    /// first and middle passes carry part of them, in the standalone coset transforms and the
    /// witness map;
    /// full tables take `n` elements a direction of device memory that the prover's witness map
    /// never reads). Set before the first transform: tables already built keep theirs.
    pub fn with_coset_powers(mut self, form: CosetPowers) -> Self {
        self.coset_powers = form;
        self
    }

    /// Converts MSM bases and keeps them where they fit ([`Residency::Auto`]).
    pub fn upload_bases<C: Curve>(&self, bases: &[Affine<C>]) -> Result<GpuBases<C>, CudaError> {
        self.upload_bases_to(bases, Residency::Auto)
    }

    /// Converts MSM bases and keeps them as `residency` says. When at least an eighth of them are
    /// points at infinity (the parts of a Groth16 key for variables a query does not use), only the
    /// others are kept, with a selection of their scalars: the MSM neither stores nor sorts the rest.
    pub fn upload_bases_to<C: Curve>(
        &self,
        bases: &[Affine<C>],
        residency: Residency,
    ) -> Result<GpuBases<C>, CudaError> {
        msm::upload_bases(&self.gpu, bases, residency)
    }

    /// `Σ scalars[i]·bases[i]` with scalars from the host.
    pub fn msm_host<C: Curve>(
        &self,
        bases: &GpuBases<C>,
        scalars: &[Fr],
    ) -> Result<Projective<C>, CudaError> {
        if scalars.len() != bases.len() {
            return Err(CudaError::Length { op: "msm", expected: bases.len(), got: scalars.len() });
        }
        let dev = self.scalars_to_device(scalars)?;
        msm::msm::<C>(&self.gpu, &bases.msm_bases(), &dev.slice(..), &self.msm)
    }

    /// Host scalars converted and copied to the device on the compute stream.
    fn scalars_to_device(&self, scalars: &[Fr]) -> Result<CudaSlice<GpuFr>, CudaError> {
        let host: Vec<GpuFr> = to_device_vec::<DeviceFr>(scalars).into_iter().map(GpuFr).collect();
        self.gpu.upload(self.gpu.compute_stream(), &host)
    }

    /// The GPU.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The NTT tables for `2^log_n`, built on first use and kept.
    pub fn tables(&self, log_n: u32) -> Result<Arc<NttTables>, CudaError> {
        let mut map = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = map.get(&log_n) {
            return Ok(t.clone());
        }
        // On the integer units the passes multiply by their twiddles with Shoup's product, whose
        // table is twice the Montgomery one (2 GiB more a direction at 2^27); the FP64 units have only
        // the Montgomery product.
        let form = match self.ntt_units {
            MulUnits::Integer => Twiddles::Shoup,
            MulUnits::Fp64 | MulUnits::Mixed => Twiddles::Montgomery,
        };
        let stream = self.gpu.compute_stream();
        let t = Arc::new(
            NttTables::with_twiddles(&self.gpu, stream, log_n, form)?
                .with_units(self.ntt_units)
                .with_coset_powers(&self.gpu, stream, self.coset_powers)?,
        );
        map.insert(log_n, t.clone());
        Ok(t)
    }

    /// Uploads `values` into a new device polynomial of `size` elements (zero-padded).
    pub fn upload_poly(&self, values: &[Fr], size: usize) -> Result<GpuPoly, CudaError> {
        if values.len() > size {
            return Err(CudaError::Length { op: "upload_poly", expected: size, got: values.len() });
        }
        let stream = self.gpu.compute_stream();
        let mut buf = self.gpu.zeros::<GpuFr>(stream, size)?;
        let host: Vec<GpuFr> = to_device_vec::<DeviceFr>(values).into_iter().map(GpuFr).collect();
        self.gpu.upload_into(stream, &host, &mut buf)?;
        Ok(GpuPoly { buf: ArenaBuffer::loose(buf) })
    }

    /// Copies a device polynomial back, checking every element is reduced.
    pub fn download_poly(&self, poly: &GpuPoly) -> Result<Vec<Fr>, CudaError> {
        let host = self.gpu.download(self.gpu.compute_stream(), &poly.buf)?;
        let host: Vec<DeviceFr> = host.into_iter().map(|g| g.0).collect();
        Ok(from_device_vec(&host)?)
    }

    /// Transforms a device polynomial in place.
    pub fn ntt_in_place(&self, poly: &mut GpuPoly, kind: NttKind) -> Result<(), CudaError> {
        let n = poly.len();
        if !n.is_power_of_two() || n > 1 << MAX_LOG_N {
            return Err(CudaError::Size { op: "ntt", size: n, reason: "not a power of two up to 2^28" });
        }
        let tables = self.tables(n.trailing_zeros())?;
        ntt::ntt(&self.gpu, self.gpu.compute_stream(), &tables, &mut poly.buf, kind)
    }
}

/// Events on the compute stream around a stretch of the backend's work, and (for a stage of a proof)
/// the probe its kernels are timed into. Every operation of the backend ends on the compute stream
/// (uploads and sorting on other streams are waited for there), so the span covers it all.
struct StageTimer {
    timer: crate::Timer,
    stream: Arc<cudarc::driver::CudaStream>,
    probe: Probe,
    /// The clock anchor the stretch is placed in time by, taken before it started.
    anchor: Arc<crate::clock::ClockAnchor>,
}

impl DeviceTimer for StageTimer {
    fn stop(&mut self) -> Result<(), BackendError> {
        self.timer.stop(&self.stream).map_err(device("device_timer"))
    }

    fn steps(&self) -> Result<Vec<(&'static str, std::time::Duration)>, BackendError> {
        self.probe.steps().map_err(device("device_timer"))
    }

    fn elapsed(&self) -> Result<std::time::Duration, BackendError> {
        let ms = self.timer.elapsed_ms().map_err(device("device_timer"))?;
        Ok(std::time::Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }

    fn placed(&self) -> Result<Option<(std::time::Instant, std::time::Instant)>, BackendError> {
        self.timer.placed(&self.anchor).map(Some).map_err(device("device_timer"))
    }
}

impl CudaBackend {
    /// A timer on `stream` from now on, its kernels timed into `probe`.
    fn stage_timer(
        &self,
        stream: &Arc<cudarc::driver::CudaStream>,
        probe: Probe,
        op: &'static str,
    ) -> Result<Option<Box<dyn DeviceTimer>>, BackendError> {
        let anchor = self.gpu.clock().anchor().map_err(device(op))?;
        let timer = self.gpu.timer().map_err(device(op))?;
        timer.start(stream).map_err(device(op))?;
        Ok(Some(Box::new(StageTimer { timer, stream: stream.clone(), probe, anchor })))
    }
}

/// The probe of the stage a timed operation runs in: this backend's own timer's, if it is one.
pub(crate) fn probe_of(timer: Timing<'_>) -> Option<&mut Probe> {
    let timer: &mut dyn std::any::Any = timer?;
    timer.downcast_mut::<StageTimer>().map(|t| &mut t.probe)
}

impl PolyBackend for CudaBackend {
    type Poly = GpuPoly;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn poly_from_host(&self, values: &[Fr], size: usize) -> Result<GpuPoly, BackendError> {
        if !size.is_power_of_two() || size > 1 << MAX_LOG_N {
            return Err(BackendError::UnsupportedSize {
                op: "poly_from_host",
                size,
                reason: "not a power of two up to 2^28",
            });
        }
        if values.len() > size {
            return Err(BackendError::LengthMismatch {
                op: "poly_from_host",
                expected: size,
                got: values.len(),
            });
        }
        self.step("poly_from_host").map_err(device("poly_from_host"))?;
        self.upload_poly(values, size).map_err(device("poly_from_host"))
    }

    fn poly_to_host(&self, poly: &GpuPoly) -> Result<Vec<Fr>, BackendError> {
        self.download_poly(poly).map_err(device("poly_to_host"))
    }

    fn poly_len(&self, poly: &GpuPoly) -> usize {
        poly.len()
    }

    fn ntt(&self, polys: &mut [&mut GpuPoly], kind: NttKind) -> Result<(), BackendError> {
        self.step("ntt").map_err(device("ntt"))?;
        let Some(first) = polys.first() else { return Ok(()) };
        let n = first.len();
        for p in polys.iter() {
            BackendError::expect_len("ntt", n, p.len())?;
        }
        if !n.is_power_of_two() || n > 1 << MAX_LOG_N {
            return Err(BackendError::UnsupportedSize {
                op: "ntt",
                size: n,
                reason: "not a power of two up to 2^28",
            });
        }
        for p in polys.iter_mut() {
            self.ntt_in_place(p, kind).map_err(device("ntt"))?;
        }
        Ok(())
    }

    fn quotient(&self, a: &mut GpuPoly, b: &GpuPoly, c: &GpuPoly, z_inv: Fr) -> Result<(), BackendError> {
        self.step("quotient").map_err(device("quotient"))?;
        BackendError::expect_len("quotient", a.len(), b.len())?;
        BackendError::expect_len("quotient", a.len(), c.len())?;
        let stream = self.gpu.compute_stream();
        let z_inv = GpuFr(DeviceFr::from_ark(&z_inv));
        kernels::quotient(&self.gpu, stream, &mut a.buf, &b.buf, &c.buf, z_inv, &mut Probe::default())
            .map_err(device("quotient"))
    }

    fn witness_map_polys(
        &self,
        a: &mut GpuPoly,
        b: &mut GpuPoly,
        c: &mut GpuPoly,
        z_inv: Fr,
    ) -> Result<(), BackendError> {
        self.witness_map_probed(a, b, c, z_inv, &mut Probe::default())
    }
}

impl CudaBackend {
    /// The witness map's transforms (see [`PolyBackend::witness_map_polys`]), each kernel timed into
    /// `probe`.
    fn witness_map_probed(
        &self,
        a: &mut GpuPoly,
        b: &mut GpuPoly,
        c: &mut GpuPoly,
        z_inv: Fr,
        probe: &mut Probe,
    ) -> Result<(), BackendError> {
        self.step("witness_map").map_err(device("witness_map"))?;
        let n = a.len();
        BackendError::expect_len("witness_map", n, b.len())?;
        BackendError::expect_len("witness_map", n, c.len())?;
        if !n.is_power_of_two() || n > 1 << MAX_LOG_N {
            return Err(BackendError::UnsupportedSize {
                op: "witness_map",
                size: n,
                reason: "not a power of two up to 2^28",
            });
        }
        let tables = self.tables(n.trailing_zeros()).map_err(device("witness_map"))?;
        let stream = self.gpu.compute_stream();
        ntt::witness_map(&self.gpu, stream, &tables, &mut a.buf, &mut b.buf, &mut c.buf, z_inv, probe)
            .map_err(device("witness_map"))
    }
}

impl Backend for CudaBackend {
    type Bases<C: Curve> = GpuBases<C>;

    fn load_bases<C: Curve>(&self, bases: Vec<Affine<C>>) -> Result<GpuBases<C>, BackendError> {
        let op = match C::ID {
            cuzk_field::CurveId::G1 => "load_g1_bases",
            cuzk_field::CurveId::G2 => "load_g2_bases",
        };
        self.upload_bases::<C>(&bases).map_err(device(op))
    }

    fn msm<C: Curve>(
        &self,
        bases: &GpuBases<C>,
        scalars: MsmScalars<'_, GpuPoly>,
    ) -> Result<Projective<C>, BackendError> {
        self.msm_scalars(bases, scalars, &mut Probe::default())?.finish().map_err(device(C::MSM))
    }
}

impl DeviceBackend for CudaBackend {
    fn device_timer(&self) -> Result<Option<Box<dyn DeviceTimer>>, BackendError> {
        // The MSMs and NTTs issued under this timer time their kernels too (see `probe_of`).
        self.stage_timer(self.gpu.compute_stream(), Probe::enabled(), "device_timer")
    }

    fn upload_timer(&self) -> Result<Option<Box<dyn DeviceTimer>>, BackendError> {
        self.stage_timer(self.gpu.copy_stream(), Probe::default(), "upload_timer")
    }

    fn await_uploads(&self, polys: &[&GpuPoly]) -> Result<(), BackendError> {
        let stream = self.gpu.compute_stream();
        for p in polys {
            // Taking the pointer for the compute stream makes that stream wait for the buffer's last
            // write (its upload on the copy stream); nothing is launched.
            let (_, _read) = p.buf.device_ptr(stream);
        }
        self.gpu
            .context()
            .check_err()
            .map_err(|e| device("await_uploads")(CudaError::Driver { op: "waiting for uploads", source: e }))
    }

    fn scalars_from_host(&self, scalars: &[Fr]) -> Result<Option<GpuPoly>, BackendError> {
        if scalars.is_empty() {
            return Ok(None);
        }
        self.step("scalars_from_host").map_err(device("scalars_from_host"))?;
        let mut polys = self.upload_polys(&[scalars], scalars.len()).map_err(device("scalars_from_host"))?;
        Ok(polys.pop())
    }

    fn polys_from_host(&self, values: &[&[Fr]], size: usize) -> Result<Vec<GpuPoly>, BackendError> {
        if !size.is_power_of_two() || size > 1 << MAX_LOG_N {
            return Err(BackendError::UnsupportedSize {
                op: "polys_from_host",
                size,
                reason: "not a power of two up to 2^28",
            });
        }
        if let Some(v) = values.iter().find(|v| v.len() > size) {
            return Err(BackendError::LengthMismatch { op: "polys_from_host", expected: size, got: v.len() });
        }
        self.step("polys_from_host").map_err(device("polys_from_host"))?;
        self.upload_polys(values, size).map_err(device("polys_from_host"))
    }

    fn witness_map_timed(
        &self,
        a: &mut GpuPoly,
        b: &mut GpuPoly,
        c: &mut GpuPoly,
        z_inv: Fr,
        timer: Timing<'_>,
    ) -> Result<(), BackendError> {
        match probe_of(timer) {
            Some(probe) => self.witness_map_probed(a, b, c, z_inv, probe),
            None => self.witness_map_probed(a, b, c, z_inv, &mut Probe::default()),
        }
    }

    fn msm_deferred<C: Curve>(
        &self,
        bases: &GpuBases<C>,
        scalars: MsmScalars<'_, GpuPoly>,
        timer: Timing<'_>,
    ) -> Result<Deferred<'_, Projective<C>>, BackendError> {
        let pending = match probe_of(timer) {
            Some(probe) => self.msm_scalars(bases, scalars, probe)?,
            None => self.msm_scalars(bases, scalars, &mut Probe::default())?,
        };
        Ok(Deferred::Pending(Box::new(move || pending.finish().map_err(device(C::MSM)))))
    }
}
