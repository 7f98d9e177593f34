//! Where an MSM's bases live and which scalar each one takes.
//!
//! A key's bases are converted to device layout once and kept in device memory, or, when they do not
//! fit beside a reserve for the MSMs' own buffers, in pinned host memory, from which each batch is
//! uploaded on the copy stream ([`Residency`]). When at least an eighth of them are points at infinity
//! (the parts of a Groth16 key for variables a query does not use) only the others are kept, with a
//! selection of their scalars, so the MSM neither stores nor sorts the rest.
//!
//! Resident bases may be replaced by a table of multiples ([`GpuBases::precompute`]): `2^(c·j)·P` for
//! `j < m` per point, so that `m` windows of width `c` share one set of buckets. The MSM then adds
//! as many points as before but reduces `m` times fewer buckets, which makes wider windows (fewer
//! additions per point) pay; the table costs `m` times the bases' device memory and is built once.

use ark_ec::AffineRepr;
use cudarc::driver::{CudaSlice, PinnedHostSlice};
use cuzk_field::{Affine, Curve};
use rayon::prelude::*;
use std::sync::Mutex;

use crate::msm::Plan;
use crate::scratch::Claim;
use crate::{CudaError, DriverContext, Gpu, GpuAffine};

/// Device memory left free for the MSMs' own buffers where their plans are not known yet: when
/// deciding where bases go, for [`GpuBases::precompute`] alone, and for partitions' buffers reserved
/// without a key. A 2^24-point batch's bucket entries take 1 GiB (872 MB with a 20-bit table), and
/// with the batched affine first round its chains and partials about 2.8 GB more in G1 and 3.9 GB in
/// G2; a key's workspace keeps two sets of the sort's buffers (`scratch::SPARE`) and one of the
/// sums'. A key's own tables and partitions leave what `workspace` counts for its MSMs instead.
pub(crate) const MSM_RESERVE: usize = 12 << 30;

/// Where `upload` keeps bases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residency {
    /// Device memory when they fit (with a reserve for the MSM's own buffers), else pinned host memory.
    Auto,
    /// Device memory; an error when they do not fit.
    Device,
    /// Pinned host memory, streamed to the device batch by batch.
    Host,
}

#[derive(Debug)]
enum Stored<A> {
    Device(CudaSlice<A>),
    Host(PinnedHostSlice<A>),
}

/// MSM bases as the device uses them: in device memory (or pinned host memory when they do not fit),
/// with the points at infinity dropped when they are many, and a selection saying which scalar each
/// kept point takes.
#[derive(Debug)]
pub struct GpuBases<C: Curve> {
    points: Stored<GpuAffine<C>>,
    select: Option<CudaSlice<u32>>,
    /// Points kept (the buffers hold one placeholder when none are).
    kept: usize,
    /// Bases given, and scalars an MSM takes.
    len: usize,
    /// With a table: the window width it was built for and the multiples per point (`points` then
    /// holds `kept * multiples` points, point-major).
    table: Option<Table>,
    /// Batch size and window width chosen for these bases ([`GpuBases::set_batch`],
    /// [`GpuBases::set_window`]); what is `None` there is left to the [`crate::MsmConfig`] of the call.
    batching: Batching,
    /// The shelves' buffers a key's reserve made for MSMs on these bases, kept while they live
    /// ([`crate::CudaBackend::reserve_msm_workspace`]).
    claim: Mutex<Option<Claim>>,
}

/// The batch size, window width, sort and chains per thread chosen for one MSM's bases, over the
/// backend-wide [`crate::MsmConfig`]: `None` leaves each to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Batching {
    /// Most points per batch.
    pub batch: Option<usize>,
    /// Window width of batches without a table (a table fixes its own).
    pub window: Option<u32>,
    /// How a batch's digits are sorted into buckets.
    pub sort: Option<super::Sort>,
    /// Chains per thread of a batched affine first round.
    pub chains: Option<u32>,
}

impl Batching {
    /// `config` with these choices over its batch size, window width, sort and chains per thread.
    pub fn over(self, config: &crate::MsmConfig) -> crate::MsmConfig {
        crate::MsmConfig {
            batch: self.batch.unwrap_or(config.batch),
            window_bits: self.window.or(config.window_bits),
            sort: self.sort.unwrap_or(config.sort),
            batch_chains: self.chains.or(config.batch_chains),
            ..*config
        }
    }
}

/// Whether a table of `table` bytes replacing points of `points` bytes fits in `free` bytes of device
/// memory with `reserve` bytes left: the points stay until the table is built, so the build needs the
/// table's own size free; then they go, and the table less them must leave `reserve`.
pub(crate) fn table_fits(table: usize, points: usize, reserve: usize, free: usize) -> bool {
    table <= free && table.saturating_sub(points).saturating_add(reserve) <= free
}

/// The precomputed multiples of [`GpuBases`], as [`GpuBases::table`] reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    /// Window width `c` the multiples are spaced by (`2^(c·j)·P`).
    pub window_bits: u32,
    /// Multiples per point, `P` itself included.
    pub multiples: u32,
}

impl<C: Curve> GpuBases<C> {
    /// The bases as the MSM takes them.
    pub fn msm_bases(&self) -> MsmBases<'_, C> {
        let points = match &self.points {
            Stored::Device(p) => Points::Device(p),
            Stored::Host(p) => Points::Host(p),
        };
        if self.kept == 0 {
            return MsmBases {
                points,
                select: None,
                len: 0,
                scalars: self.len,
                table: None,
                batching: self.batching,
            };
        }
        MsmBases {
            points,
            select: self.select.as_ref(),
            len: self.kept,
            scalars: self.len,
            table: self.table,
            batching: self.batching,
        }
    }

    /// Sets the most points per batch of MSMs on these bases, over the [`crate::MsmConfig::batch`] of
    /// the call (`None` goes back to that). Fails on `Some(0)`.
    pub fn set_batch(&mut self, batch: Option<usize>) -> Result<(), CudaError> {
        if batch == Some(0) {
            return Err(CudaError::Size { op: "msm", size: 0, reason: "batch size must be positive" });
        }
        self.batching.batch = batch;
        Ok(())
    }

    /// The most points per batch chosen for these bases ([`GpuBases::set_batch`]), if any.
    pub fn batch(&self) -> Option<usize> {
        self.batching.batch
    }

    /// Sets the window width of MSMs on these bases without a table, over the
    /// [`crate::MsmConfig::window_bits`] of the call (`None` goes back to that). Fails outside 2..=24.
    pub fn set_window(&mut self, window: Option<u32>) -> Result<(), CudaError> {
        if let Some(c) = window {
            super::plan::check_window(c)?;
        }
        self.batching.window = window;
        Ok(())
    }

    /// Sets the sort of MSMs on these bases, over the [`crate::MsmConfig::sort`] of the call (`None`
    /// goes back to that).
    pub fn set_sort(&mut self, sort: Option<super::Sort>) {
        self.batching.sort = sort;
    }

    /// Sets the chains per thread of a batched affine first round of MSMs on these bases, over the
    /// [`crate::MsmConfig::batch_chains`] of the call (`None` goes back to that). Fails outside
    /// 1..=1024.
    pub fn set_chains(&mut self, chains: Option<u32>) -> Result<(), CudaError> {
        super::plan::check_chains(chains)?;
        self.batching.chains = chains;
        Ok(())
    }

    /// The batch size, window width, sort and chains per thread chosen for these bases.
    pub fn batching(&self) -> Batching {
        self.batching
    }

    /// Keeps `claim` while these bases live, in place of the one before.
    pub(crate) fn set_claim(&self, claim: Claim) {
        let old = self.claim.lock().unwrap_or_else(|p| p.into_inner()).replace(claim);
        drop(old);
    }

    /// Replaces the resident points by a table of `multiples` multiples per point, `2^(c·j)·P` for
    /// `j < multiples` with `c = window_bits`, built on the device (and waited for); MSMs on these
    /// bases then use windows of `c` bits, `multiples` to a set of buckets. `multiples == 1` goes back
    /// to the points alone. A table is rebuilt from the points it holds, so any width and count can
    /// follow any other.
    ///
    /// Fails when the bases are in host memory, when `window_bits` is not 2..=24 or `multiples` not
    /// 1..=ceil(256 / window_bits), or when the table and the MSMs' reserve (`MSM_RESERVE`) do not
    /// fit in free device memory (the bases are then unchanged).
    pub fn precompute(&mut self, gpu: &Gpu, window_bits: u32, multiples: u32) -> Result<(), CudaError> {
        self.precompute_leaving(gpu, window_bits, multiples, MSM_RESERVE)
    }

    /// [`GpuBases::precompute`], leaving `reserve` bytes free for the MSMs' buffers instead of
    /// [`MSM_RESERVE`].
    pub(crate) fn precompute_leaving(
        &mut self,
        gpu: &Gpu,
        window_bits: u32,
        multiples: u32,
        reserve: usize,
    ) -> Result<(), CudaError> {
        Plan::with_multiples(1, window_bits, multiples)?;
        let Stored::Device(points) = &self.points else {
            return Err(CudaError::Size {
                op: "precompute",
                size: self.kept,
                reason: "bases kept in host memory take no table",
            });
        };
        let old = self.table.map_or(1, |t| t.multiples);
        if self.kept == 0 || (old == 1 && multiples == 1) {
            self.table = None;
            return Ok(());
        }
        let len =
            self.kept.checked_mul(multiples as usize).filter(|&l| l < 1 << 31).ok_or(CudaError::Size {
                op: "precompute",
                size: self.kept,
                reason: "more than 2^31 table points",
            })?;
        let bytes = self.table_bytes(multiples);
        let (free, _) = gpu.memory()?;
        let points_bytes = self.device_bytes() as usize;
        if !table_fits(bytes, points_bytes, reserve, free) {
            let need = bytes.max(bytes.saturating_sub(points_bytes).saturating_add(reserve));
            return Err(CudaError::OutOfMemory { what: "an MSM table", need, free });
        }
        let stream = gpu.compute_stream();
        let mut table = gpu.zeros::<GpuAffine<C>>(stream, len)?;
        let ck = gpu.msm_kernels()?.curve::<C>();
        crate::kernels::msm::table(ck, stream, points, old, self.kept, window_bits, multiples, &mut table)?;
        stream.synchronize().during("building an MSM table")?;
        self.points = Stored::Device(table);
        self.table = (multiples > 1).then_some(Table { window_bits, multiples });
        // The old points' memory is free once the stream has passed their release: the next table's
        // decision reads free memory.
        stream.synchronize().during("releasing the points a table replaced")?;
        Ok(())
    }

    /// The table of multiples the points were replaced by, if any.
    pub fn table(&self) -> Option<Table> {
        self.table
    }

    /// Device bytes a table of `multiples` multiples per kept point takes.
    pub fn table_bytes(&self, multiples: u32) -> usize {
        self.kept.saturating_mul(multiples as usize).saturating_mul(std::mem::size_of::<GpuAffine<C>>())
    }

    /// Bytes of device memory the points (or their table) hold.
    pub fn device_bytes(&self) -> u64 {
        match &self.points {
            Stored::Device(p) => (p.len() * std::mem::size_of::<GpuAffine<C>>()) as u64,
            Stored::Host(_) => 0,
        }
    }

    /// Whether the points are in device memory (otherwise pinned host memory).
    pub fn is_resident(&self) -> bool {
        matches!(self.points, Stored::Device(_))
    }

    /// Points kept (the bases less the points at infinity, when those were dropped).
    pub fn kept(&self) -> usize {
        self.kept
    }

    /// Bases given, and scalars an MSM on them takes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no bases were given.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of pinned host memory the points hold (0 when they are in device memory).
    pub fn host_bytes(&self) -> u64 {
        match &self.points {
            Stored::Host(p) => (p.len() * std::mem::size_of::<GpuAffine<C>>()) as u64,
            Stored::Device(_) => 0,
        }
    }
}

/// Converts `bases` to device layout on `gpu` and keeps them as `residency` says, dropping the points
/// at infinity when at least an eighth of them are.
pub(crate) fn upload<C: Curve>(
    gpu: &Gpu,
    bases: &[Affine<C>],
    residency: Residency,
) -> Result<GpuBases<C>, CudaError> {
    let len = bases.len();
    if u32::try_from(len).is_err() {
        return Err(CudaError::Size { op: "upload_bases", size: len, reason: "more than 2^32 - 1 bases" });
    }
    let identities = bases.par_iter().filter(|p| p.is_zero()).count();
    let (host, select): (Vec<GpuAffine<C>>, Option<Vec<u32>>) = if identities > 0 && identities >= len / 8 {
        let kept: Vec<u32> = (0..len as u32).filter(|&i| !bases[i as usize].is_zero()).collect();
        (kept.par_iter().map(|&i| GpuAffine::from_ark(&bases[i as usize])).collect(), Some(kept))
    } else {
        (bases.par_iter().map(GpuAffine::from_ark).collect(), None)
    };
    let stream = gpu.compute_stream();
    let kept = host.len();
    if kept == 0 {
        let points = Stored::Device(gpu.zeros(stream, 1)?);
        return Ok(GpuBases {
            points,
            select: None,
            kept,
            len,
            table: None,
            batching: Batching::default(),
            claim: Mutex::default(),
        });
    }
    let select = select.map(|s| gpu.upload(stream, &s)).transpose()?;
    let bytes = std::mem::size_of_val(host.as_slice());
    let on_device = match residency {
        Residency::Device => true,
        Residency::Host => false,
        Residency::Auto => {
            let (free, _) = gpu.memory()?;
            bytes.saturating_add(MSM_RESERVE) <= free
        }
    };
    let points = if on_device {
        Stored::Device(gpu.upload(stream, &host)?)
    } else {
        let mut pinned = gpu.pinned::<GpuAffine<C>>(host.len(), false)?;
        pinned.as_mut_slice().during("filling pinned bases")?.copy_from_slice(&host);
        Stored::Host(pinned)
    };
    Ok(GpuBases {
        points,
        select,
        kept,
        len,
        table: None,
        batching: Batching::default(),
        claim: Mutex::default(),
    })
}

/// Where an MSM's bases are.
#[derive(Debug)]
pub enum Points<'a, A> {
    /// Resident in device memory.
    Device(&'a CudaSlice<A>),
    /// In pinned host memory, uploaded batch by batch on the copy stream.
    Host(&'a PinnedHostSlice<A>),
}

impl<A> Clone for Points<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for Points<'_, A> {}

/// The bases of an MSM, and optionally which scalar each one takes.
#[derive(Debug)]
pub struct MsmBases<'a, C: Curve> {
    pub(crate) points: Points<'a, GpuAffine<C>>,
    /// Point `i` takes scalar `select[i]`; without it, scalar `i`.
    pub(crate) select: Option<&'a CudaSlice<u32>>,
    /// Points used (the front of the buffers; with a table, `len * multiples` of them).
    len: usize,
    /// How many scalars the MSM takes.
    scalars: usize,
    /// With a table: its window width and multiples per point.
    pub(crate) table: Option<Table>,
    /// Batch size and window width, over the call's [`crate::MsmConfig`].
    pub(crate) batching: Batching,
}

impl<'a, C: Curve> MsmBases<'a, C> {
    /// Device-resident bases, one per scalar.
    pub fn device(points: &'a CudaSlice<GpuAffine<C>>) -> Self {
        Self {
            points: Points::Device(points),
            select: None,
            len: points.len(),
            scalars: points.len(),
            table: None,
            batching: Batching::default(),
        }
    }

    /// Bases in pinned host memory, one per scalar.
    pub fn host(points: &'a PinnedHostSlice<GpuAffine<C>>) -> Self {
        Self {
            points: Points::Host(points),
            select: None,
            len: points.len(),
            scalars: points.len(),
            table: None,
            batching: Batching::default(),
        }
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
