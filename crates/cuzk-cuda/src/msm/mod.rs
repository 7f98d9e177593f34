//! Pippenger multi-scalar multiplication on the device (kernels in `kernels/msm/msm.cu`), by stage:
//! the plan (`plan`: window width, bucket machinery), the bases and where they live (`bases`), the
//! sort of a batch's digits into buckets (`sort`), the bucket sums and window reduction (`buckets`),
//! and the window combination on the host (`window`).
//!
//! [`msm_start`] is the driver: it cuts a large MSM into batches of at most [`MsmConfig::batch`]
//! points (or the bases' own batch size, [`GpuBases::set_batch`]). Each batch is sorted on the side
//! stream and summed on the compute stream, so batch `i + 1` is sorted while batch `i` is summed. Host-resident bases are uploaded per batch on the copy stream
//! into one of two device buffers while the other is in use. A batch's window sums (a few XYZZ points)
//! are copied into one of two pinned host buffers; the host waits for batch `i`'s copy only after
//! batch `i + 1` has been queued, so it combines batch `i`'s windows while the device works on the
//! next. Streams are ordered by events on the buffers they share; nothing synchronises the device as a
//! whole.

mod bases;
mod buckets;
mod plan;
mod sort;
mod window;
mod workspace;

use ark_ff::Zero;
use cudarc::driver::CudaView;
use cuzk_field::Projective;
pub use cuzk_field::{Curve, G1, G2};

pub(crate) use bases::{table_fits, upload as upload_bases, MSM_RESERVE};
pub use bases::{Batching, GpuBases, MsmBases, Points, Residency, Table};
pub use buckets::ROOMY_BATCH_CHAINS;
pub use plan::{
    batch_affine_from, FirstRound, MsmConfig, Ones, Plan, Sort, MAX_WINDOW_BITS, WIDE_WINDOW_BITS,
    WIDE_WINDOW_FROM,
};
pub(crate) use workspace::{msm_takes, shelved_bytes, Takes};

use crate::gpu::ResultBuffer;
use crate::profile::{Probe, DOWNLOAD};
use crate::scratch::ScratchBuf;
use crate::{CudaError, DriverContext, Gpu, GpuAffine, GpuFr, Xyzz};

/// `Σ scalars[i]·bases[i]` on the device. `bases` and `scalars` must have the same length.
pub fn msm<C: Curve>(
    gpu: &Gpu,
    bases: &MsmBases<'_, C>,
    scalars: &CudaView<'_, GpuFr>,
    config: &MsmConfig,
) -> Result<Projective<C>, CudaError> {
    msm_probed::<C>(gpu, bases, scalars, config, &mut Probe::default())
}

/// [`msm`], timing each kernel into `probe` when it is enabled.
pub fn msm_probed<C: Curve>(
    gpu: &Gpu,
    bases: &MsmBases<'_, C>,
    scalars: &CudaView<'_, GpuFr>,
    config: &MsmConfig,
    probe: &mut Probe,
) -> Result<Projective<C>, CudaError> {
    probe.host_mark("start");
    let pending = msm_start::<C>(gpu, bases, scalars, config, probe)?;
    probe.host_mark("queued");
    pending.finish_probed(probe)
}

/// An MSM whose kernels are all queued: [`PendingMsm::finish`] waits for the last batch's window sums
/// and combines them with the earlier batches'. Meanwhile the host may queue other work.
pub struct PendingMsm<'g, C: Curve> {
    /// The result buffers, and which holds the last batch's sums (none for an empty MSM).
    last: Option<([ResultBuffer<'g>; 2], usize, Plan)>,
    /// The earlier batches' combined sums.
    total: Projective<C>,
}

impl<C: Curve> PendingMsm<'_, C> {
    /// The MSM's value (waits for its last copy).
    pub fn finish(self) -> Result<Projective<C>, CudaError> {
        self.finish_probed(&mut Probe::default())
    }

    /// [`PendingMsm::finish`], marking on `probe`'s host side when the sums arrived and when they
    /// were combined.
    pub fn finish_probed(self, probe: &mut Probe) -> Result<Projective<C>, CudaError> {
        let mut total = self.total;
        if let Some((host, last, plan)) = &self.last {
            host[*last].get().as_slice().during("waiting for window sums")?;
            probe.host_mark("copied");
            total += window::combine::<C>(host[*last].get(), plan)?;
        }
        probe.host_mark("combined");
        Ok(total)
    }
}

impl<C: Curve> std::fmt::Debug for PendingMsm<'_, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingMsm").field("pending", &self.last.is_some()).finish()
    }
}

/// The plan of an MSM over `n` points (`n` > 0), with `table`'s multiples per point or none, in
/// batches of at most `batching.batch` points (the bases' own choice) or else `config.batch`, at
/// `batching.window` or else `config.window_bits` without a table: the plan of its batches, the
/// multiples per point and the batch length.
pub(crate) fn plan_for<C: Curve>(
    n: usize,
    table: Option<Table>,
    batching: Batching,
    config: &MsmConfig,
) -> Result<(Plan, usize, usize), CudaError> {
    let config = &batching.over(config);
    let batch = config.batch;
    if batch == 0 {
        return Err(CudaError::Size { op: "msm", size: 0, reason: "batch size must be positive" });
    }
    let batch_len = batch.min(n.max(1));
    // A table fixes the window width; its multiples share bucket sets.
    let (plan, m) = match table {
        Some(t) => (Plan::with_multiples(batch_len, t.window_bits, t.multiples)?, t.multiples as usize),
        None => (Plan::for_curve(C::ID, batch_len, config.window_bits)?, 1),
    };
    let plan = plan
        .with_first_round(C::ID, config.first_round, config.batch_chains, batch_len)
        .with_sort(config.sort)
        .with_units(config.units)
        .with_ones(config.ones);
    Ok((plan, m, batch_len))
}

/// The chains per thread an MSM over `points` kept bases (with `table`'s multiples or none, in
/// `batching` over `config`) may take beyond its default where memory allows
/// ([`ROOMY_BATCH_CHAINS`], for batches that would take the longest chains); `None` for any other,
/// and where the call fixes its chains.
pub(crate) fn roomy_chains<C: Curve>(
    sms: u32,
    points: usize,
    table: Option<Table>,
    batching: Batching,
    config: &MsmConfig,
) -> Result<Option<u32>, CudaError> {
    if points == 0 {
        return Ok(None);
    }
    let (plan, m, batch_len) = plan_for::<C>(points, table, batching, config)?;
    Ok(buckets::roomy_chains::<C>(sms, &plan, batch_len * m))
}

/// Queues the kernels of `Σ scalars[i]·bases[i]` (see [`msm`]), timing them into `probe`; the host
/// combines every batch but the last while later batches run, and the last in
/// [`PendingMsm::finish`].
pub fn msm_start<'g, C: Curve>(
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
        return Ok(PendingMsm { last: None, total: Projective::<C>::zero() });
    }
    let (compute, side, copy) = (gpu.compute_stream(), gpu.side_stream(), gpu.copy_stream());
    let (plan, m, batch_len) = plan_for::<C>(n, bases.table, bases.batching, config)?;
    let ranges: Vec<std::ops::Range<usize>> =
        (0..n).step_by(batch_len).map(|s| s..(s + batch_len).min(n)).collect();
    let sort_batch = |r: &std::ops::Range<usize>, probe: &mut Probe| match bases.select {
        Some(select) => sort::sort(gpu, side, scalars, Some(&select.slice(r.clone())), r.len(), &plan, probe),
        None => sort::sort(gpu, side, &scalars.slice(r.clone()), None, r.len(), &plan, probe),
    };
    // Host-resident bases go through two device buffers, filled on the copy stream.
    let mut staged: Vec<ScratchBuf<GpuAffine<C>>> = Vec::new();
    let upload = |staged: &mut Vec<ScratchBuf<GpuAffine<C>>>, i: usize| -> Result<(), CudaError> {
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
            staged.push(gpu.scratch().take::<GpuAffine<C>>(copy, batch_len)?);
        }
        upload(&mut staged, 0)?;
    }
    let slots = plan.sets as usize + 1;
    let bytes = slots * std::mem::size_of::<Xyzz<C>>();
    // Two pinned result buffers: batch i's copy lands in one while the host reads the other.
    let mut host = [gpu.result_buffer(bytes)?, gpu.result_buffer(bytes)?];
    let mut total = Projective::<C>::zero();
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
            Points::Device(p) => p.slice(r.start * m..r.end * m),
            Points::Host(_) => staged[i % 2].slice(..r.len()),
        };
        let sums = buckets::reduce::<C>(gpu, compute, &points, &sorted, &plan, probe)?;
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
            total += window::combine::<C>(host[prev].get(), &plan)?;
        }
        if let Some(s) = next {
            sorted = s;
        }
    }
    Ok(PendingMsm { last: pending.map(|last| (host, last, plan)), total })
}
