//! Keys resident in a backend: [`Key`] (what users hold), and inside it one prepared key per GPU (or
//! one for the CPU), with the operations the engine and the pipeline run on them: staging a partition
//! on a device, proving it there, checking a proof.

use std::sync::Arc;

use ark_bls12_381::{Bls12_381, Fr};
use ark_groth16::{Proof, ProvingKey, VerifyingKey};
use cuzk_cuda::{CudaBackend, GpuShape};
use cuzk_groth16::{
    BackendError, CpuBackend, PolyBackend, PreparedKey, ProveError, ProveOptions, StageTimes,
};
use cuzk_synth::{CompactWitness, Counts, R1csShape, Synthesized};

use crate::Error;

pub(crate) fn device_error(op: &'static str, e: cuzk_cuda::CudaError) -> Error {
    Error::Prove(cuzk_groth16::ProveError::Backend(cuzk_groth16::BackendError::Device {
        op,
        source: Box::new(e),
    }))
}

/// Reserves device buffers for up to `want` of `key`'s partitions on `backend` (see
/// [`CudaBackend::reserve_partition_slots_for`]); returns how many were reserved.
pub(crate) fn reserve_slots(
    backend: &CudaBackend,
    key: &PreparedKey<CudaBackend>,
    want: usize,
) -> Result<usize, Error> {
    backend.reserve_partition_slots_for(key, want).map_err(|e| device_error("reserve_partition_slots", e))
}

/// A key resident on one GPU, with that GPU's backend.
pub(crate) struct CudaKey {
    pub(crate) key: PreparedKey<CudaBackend>,
    pub(crate) backend: Arc<CudaBackend>,
    /// The MSMs given tables of precomputed multiples on this GPU.
    pub(crate) tables: Vec<cuzk_cuda::TableReport>,
    /// The MSMs given larger batches than the backend's on this GPU.
    pub(crate) batches: Vec<cuzk_cuda::BatchReport>,
    /// Device bytes of the MSMs' buffers once reserved for this key (on shelves shared with the
    /// device's other keys), and free device memory when the key was loaded.
    pub(crate) memory: KeyMemory,
}

/// Device memory of a key on one GPU, as it was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyMemory {
    /// The GPU's ordinal.
    pub device: usize,
    /// Bytes the MSMs' points (or their tables) take.
    pub bases: u64,
    /// Bytes the device's MSM buffers held after this key's were reserved.
    pub msm_workspace: u64,
    /// Bytes free on the device once the key, its MSM buffers and one partition's were in place.
    pub free: u64,
}

impl std::fmt::Display for KeyMemory {
    /// One sentence: `GPU 0: bases 125.60 GB, MSM buffers 10.41 GB, 12.02 GB free`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gb = |b: u64| b as f64 / 1e9;
        write!(
            f,
            "GPU {}: bases {:.2} GB, MSM buffers {:.2} GB, {:.2} GB free",
            self.device,
            gb(self.bases),
            gb(self.msm_workspace),
            gb(self.free)
        )
    }
}

/// Partitions' buffers a key's MSM tables and batches leave room for on each GPU: a pipeline reserves
/// one per GPU worker (`cuzk_sched::Config::gpu_workers_per_device`, 2 by default), the scheduler's
/// memory lock holding one while a partition uploads into it and the kernel lock letting the other
/// worker's partition prove. A pipeline with more workers per device than that gets fewer slots than
/// workers on a device the tables filled ([`crate::Degradation::FewerSlots`]).
const TABLE_KEEP_SLOTS: usize = 2;

impl CudaKey {
    /// Makes `pk` resident on `backend`'s GPU with the MSMs' buffers and one partition's device
    /// buffers reserved: a key whose partitions cannot fit beside it is refused here, and proofs
    /// allocate nothing. With `tables: Some(keep)`, the MSMs get tables of precomputed multiples, then
    /// batches larger than the backend's, then partial tables for H where memory is still left, then
    /// more chains a thread for H, in the memory that `keep` bytes (a recorded shape to come) and
    /// [`TABLE_KEEP_SLOTS`] partitions leave ([`CudaBackend::precompute_tables`],
    /// [`CudaBackend::widen_batches`], [`CudaBackend::precompute_partial_tables`],
    /// [`CudaBackend::grant_chains`]).
    pub(crate) fn load(
        backend: &Arc<CudaBackend>,
        pk: ProvingKey<Bls12_381>,
        tables: Option<usize>,
    ) -> Result<Self, Error> {
        let mut key = PreparedKey::new(&**backend, pk)?;
        let (tables, batches) = if let Some(keep) = tables {
            let slot = cuzk_cuda::arena::slot_bytes(key.domain_size(), key.variables());
            let keep = slot.saturating_mul(TABLE_KEEP_SLOTS).saturating_add(keep);
            let mut built = backend
                .precompute_tables(&mut key, keep, cuzk_cuda::TABLE_MIN_POINTS)
                .map_err(|e| device_error("precompute_tables", e))?;
            let mut batches =
                backend.widen_batches(&mut key, keep).map_err(|e| device_error("widen_batches", e))?;
            built.extend(
                backend
                    .precompute_partial_tables(&mut key, keep, cuzk_cuda::PARTIAL_TABLE_MIN_POINTS)
                    .map_err(|e| device_error("precompute_partial_tables", e))?,
            );
            // An MSM granted chains is reported once, as it now runs.
            for granted in
                backend.grant_chains(&mut key, keep).map_err(|e| device_error("grant_chains", e))?
            {
                batches.retain(|b| b.msm != granted.msm);
                batches.push(granted);
            }
            let device = backend.gpu().info().ordinal;
            for t in &built {
                tracing::info!(
                    device,
                    msm = t.msm,
                    window_bits = t.table.window_bits,
                    multiples = t.table.multiples,
                    device_bytes = t.device_bytes,
                    build_ms = t.build.as_millis() as u64,
                    "MSM table built"
                );
            }
            for b in &batches {
                tracing::info!(
                    device,
                    msm = b.msm,
                    batch = b.batch,
                    batches = b.batches,
                    window_bits = b.window_bits,
                    chains = b.chains,
                    "MSM batches widened"
                );
            }
            (built, batches)
        } else {
            (Vec::new(), Vec::new())
        };
        let workspace =
            backend.reserve_msm_workspace(&key).map_err(|e| device_error("reserve_msm_workspace", e))?;
        reserve_slots(backend, &key, 1)?;
        let (free, _) = backend.gpu().memory().map_err(|e| device_error("memory", e))?;
        let bases =
            key.g1_bases().iter().map(|b| b.device_bytes()).sum::<u64>() + key.g2_bases().device_bytes();
        let device = backend.gpu().info().ordinal;
        let memory = KeyMemory { device, bases, msm_workspace: workspace as u64, free: free as u64 };
        tracing::info!(
            device,
            bases = memory.bases,
            msm_workspace = memory.msm_workspace,
            free = memory.free,
            "key resident"
        );
        Ok(Self { key, backend: backend.clone(), tables, batches, memory })
    }
}

/// A key prepared by one backend. A CUDA key is resident on every GPU of the engine, each copy with
/// its backend.
// One per key and always behind an Arc: the variants' size difference costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum KeyInner {
    Cpu(PreparedKey<CpuBackend>),
    Cuda(CudaKeys),
}

/// A key resident on several GPUs: GPU 0's copy, then the others'.
pub(crate) struct CudaKeys {
    pub(crate) first: CudaKey,
    pub(crate) others: Vec<CudaKey>,
    /// The device the next single proof goes to (in turn).
    pub(crate) next: std::sync::atomic::AtomicUsize,
}

impl CudaKeys {
    pub(crate) fn len(&self) -> usize {
        1 + self.others.len()
    }

    fn get(&self, device: usize) -> Result<&CudaKey, cuzk_groth16::ProveError> {
        match device.checked_sub(1) {
            None => Ok(&self.first),
            Some(i) => self.others.get(i).ok_or_else(|| no_device(device, self.len())),
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &CudaKey> {
        std::iter::once(&self.first).chain(&self.others)
    }
}

/// A partition moved into a key's backend memory ([`KeyInner::stage`]); on CUDA, with the device.
pub(crate) enum StagedInner {
    Cpu(cuzk_groth16::Staged<CpuBackend>),
    Cuda(cuzk_groth16::Staged<CudaBackend>, usize),
}

/// `shape` resident on every GPU of `keys`, or the degradation that says which could not hold it.
fn upload_shape(keys: &CudaKeys, shape: &R1csShape) -> Result<Vec<Arc<GpuShape>>, crate::Degradation> {
    keys.iter()
        .map(|k| {
            GpuShape::upload(k.backend.gpu(), shape).map(Arc::new).map_err(|e| {
                crate::Degradation::HostEvaluation {
                    device: k.backend.gpu().info().ordinal,
                    reason: e.to_string(),
                }
            })
        })
        .collect()
}

fn no_device(device: usize, devices: usize) -> cuzk_groth16::ProveError {
    cuzk_groth16::ProveError::Backend(cuzk_groth16::BackendError::Device {
        op: "prove",
        source: format!("GPU {device} asked for, the key is resident on {devices}").into(),
    })
}

impl KeyInner {
    /// GPUs the key is resident on (one for the CPU backend: the host).
    pub(crate) fn devices(&self) -> usize {
        match self {
            KeyInner::Cpu(_) => 1,
            KeyInner::Cuda(keys) => keys.len(),
        }
    }

    /// Moves a synthesized partition's data into the memory of the key's backend on `device` (an
    /// index among the engine's GPUs; 0 on the CPU): the upload half of [`KeyInner::prove`].
    pub(crate) fn stage(
        &self,
        device: usize,
        syn: &Synthesized,
    ) -> Result<StagedInner, cuzk_groth16::ProveError> {
        match self {
            KeyInner::Cpu(k) => cuzk_groth16::stage(&CpuBackend, k, syn).map(StagedInner::Cpu),
            KeyInner::Cuda(keys) => {
                let d = keys.get(device)?;
                cuzk_groth16::stage(&*d.backend, &d.key, syn).map(|st| StagedInner::Cuda(st, device))
            }
        }
    }

    /// The kernel half of [`KeyInner::prove`], on a partition [`KeyInner::stage`] moved; `queued` runs
    /// once every kernel is issued (see [`cuzk_groth16::prove_staged_queued`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn prove_staged(
        &self,
        syn: &Synthesized,
        staged: StagedInner,
        r: Fr,
        s: Fr,
        options: &ProveOptions,
        queued: impl FnOnce(),
    ) -> Result<(Proof<Bls12_381>, StageTimes), cuzk_groth16::ProveError> {
        match (self, staged) {
            (KeyInner::Cpu(k), StagedInner::Cpu(st)) => {
                cuzk_groth16::prove_staged_queued(&CpuBackend, k, syn, st, r, s, options, queued)
            }
            (KeyInner::Cuda(keys), StagedInner::Cuda(st, device)) => {
                // The device the partition was staged on: its buffers never cross devices.
                let d = keys.get(device)?;
                cuzk_groth16::prove_staged_queued(&*d.backend, &d.key, syn, st, r, s, options, queued)
            }
            _ => Err(cuzk_groth16::ProveError::Backend(cuzk_groth16::BackendError::Device {
                op: "prove_staged",
                source: "the partition was staged on another backend than the key's".into(),
            })),
        }
    }

    /// Moves a compact partition into GPU `device`'s memory for evaluation against the key's resident
    /// shape there (`shapes`, one per GPU): the upload half of [`KeyInner::prove_compact`].
    pub(crate) fn stage_compact(
        &self,
        device: usize,
        shapes: &DeviceShapes,
        w: &CompactWitness,
    ) -> Result<StagedInner, ProveError> {
        let KeyInner::Cuda(keys) = self else {
            return Err(ProveError::Backend(BackendError::Device {
                op: "stage_compact",
                source: "a compact partition needs a key resident on a GPU".into(),
            }));
        };
        let d = keys.get(device)?;
        let shape = shapes.get(device).ok_or_else(|| no_device(device, shapes.len()))?;
        let upload = || {
            d.backend
                .stage_compact(shape, w)
                .map_err(|e| BackendError::Device { op: "stage_compact", source: Box::new(e) })
        };
        cuzk_groth16::stage_evaluated(&*d.backend, &d.key, &w.counts(), upload)
            .map(|st| StagedInner::Cuda(st, device))
    }

    /// The kernel half of [`KeyInner::prove_compact`], on a partition [`KeyInner::stage_compact`] moved.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn prove_compact_staged(
        &self,
        counts: Counts,
        public_inputs: &[Fr],
        staged: StagedInner,
        r: Fr,
        s: Fr,
        options: &ProveOptions,
        queued: impl FnOnce(),
    ) -> Result<(Proof<Bls12_381>, StageTimes), ProveError> {
        match (self, staged) {
            (KeyInner::Cuda(keys), StagedInner::Cuda(st, device)) => {
                let d = keys.get(device)?;
                cuzk_groth16::prove_witness_queued(
                    &*d.backend,
                    &d.key,
                    counts,
                    public_inputs,
                    st,
                    r,
                    s,
                    options,
                    queued,
                )
            }
            _ => Err(ProveError::Backend(BackendError::Device {
                op: "prove_compact_staged",
                source: "a compact partition is proved on the GPU it was staged on".into(),
            })),
        }
    }

    /// Proves one compact partition on the next GPU in turn, `a`, `b`, `c` evaluated there.
    pub(crate) fn prove_compact(
        &self,
        shapes: &DeviceShapes,
        w: &CompactWitness,
        r: Fr,
        s: Fr,
        options: &ProveOptions,
    ) -> Result<(Proof<Bls12_381>, StageTimes), ProveError> {
        let turn = match self {
            KeyInner::Cuda(keys) => keys.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % keys.len(),
            KeyInner::Cpu(_) => 0,
        };
        let start = std::time::Instant::now();
        let staged = self.stage_compact(turn, shapes, w)?;
        let (proof, mut times) =
            self.prove_compact_staged(w.counts(), w.public_inputs(), staged, r, s, options, || {})?;
        times.total = start.elapsed();
        Ok((proof, times))
    }

    /// Host bytes the key holds for as long as it lives: its bases where the backend keeps them on the
    /// host, and for CUDA the backend's pinned staging buffers.
    pub(crate) fn host_bytes(&self) -> u64 {
        match self {
            KeyInner::Cpu(k) => k.host_bytes(),
            KeyInner::Cuda(keys) => keys.iter().map(|d| d.key.host_bytes() + d.backend.staging_bytes()).sum(),
        }
    }

    /// Checks a proof against the key's verifying key.
    pub(crate) fn verify(
        &self,
        proof: &Proof<Bls12_381>,
        inputs: &[Fr],
    ) -> Result<(), cuzk_groth16::ProveError> {
        match self {
            KeyInner::Cpu(k) => cuzk_groth16::verify(k, proof, inputs),
            KeyInner::Cuda(keys) => cuzk_groth16::verify(&keys.first.key, proof, inputs),
        }
    }

    /// Proves one synthesized partition on the backend the key lives in.
    pub(crate) fn prove(
        &self,
        syn: &Synthesized,
        r: Fr,
        s: Fr,
        options: &ProveOptions,
    ) -> Result<(Proof<Bls12_381>, StageTimes), cuzk_groth16::ProveError> {
        match self {
            KeyInner::Cpu(k) => cuzk_groth16::prove(&CpuBackend, k, syn, r, s, options),
            KeyInner::Cuda(keys) => {
                // Single proofs take the GPUs in turn.
                let turn = keys.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % keys.len();
                let d = keys.get(turn)?;
                cuzk_groth16::prove(&*d.backend, &d.key, syn, r, s, options)
            }
        }
    }
}

/// A key's recorded shape resident on each of its GPUs (in the order of the key's devices), where
/// `a`, `b`, `c` are evaluated.
pub(crate) type DeviceShapes = Arc<Vec<Arc<GpuShape>>>;

/// A proving key resident in an engine's backend, optionally with the recorded R1CS shape of its
/// circuit. Cheap to clone; shared by every proof that uses it.
///
/// With a shape, the engine synthesizes partitions witness-only (see [`SynthesisMode`](crate::SynthesisMode)); without one it
/// synthesizes them in full. On GPUs the shape is also made resident beside the bases, so `a`, `b`,
/// `c` are evaluated there ([`crate::Config::evaluate_on_device`]); an engine that evaluates there
/// keeps only the shape's counts on the host ([`Key::shape_counts`]), not its matrices.
#[derive(Clone)]
pub struct Key {
    pub(crate) inner: Arc<KeyInner>,
    /// The shape's matrices on the host, where the host may evaluate them.
    pub(crate) shape: Option<Arc<R1csShape>>,
    /// The counts of the shape attached, whether or not the host keeps its matrices.
    pub(crate) counts: Option<Counts>,
    /// The shape on every GPU, when it could be made resident on all of them.
    pub(crate) device_shapes: Option<DeviceShapes>,
    /// Why the shape is not on the GPUs, when it is not.
    pub(crate) evaluation_note: Option<crate::Degradation>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("backend", &self.backend_name())
            .field("domain_size", &self.domain_size())
            .field("shape", &self.counts)
            .field("host_shape", &self.shape.is_some())
            .finish()
    }
}

impl Key {
    /// The recorded R1CS shape the host keeps for this key, if any: none when no shape is attached,
    /// and none when the shape is resident on every GPU and the engine evaluates it there (the host
    /// then keeps only [`Key::shape_counts`]).
    pub fn shape(&self) -> Option<&Arc<R1csShape>> {
        self.shape.as_ref()
    }

    /// The counts of the recorded shape attached to this key, if any (wherever its matrices are).
    pub fn shape_counts(&self) -> Option<Counts> {
        self.counts
    }

    /// This key with `shape` attached, so partitions are synthesized witness-only against it. The
    /// shape's counts must be the key's (instance, witness and all variables, NTT domain size);
    /// otherwise the first count that differs is named. The key's bases are shared, not copied. On
    /// GPUs the shape's matrices are copied to every device; where one has no room for them, the key
    /// says so in [`Key::degradations`] and its partitions are evaluated on the host.
    pub fn with_shape(&self, shape: Arc<R1csShape>) -> Result<Key, Error> {
        let (device_shapes, evaluation_note) = match &*self.inner {
            KeyInner::Cpu(k) => {
                k.check_fits(&shape.counts())?;
                (None, None)
            }
            KeyInner::Cuda(keys) => {
                keys.first.key.check_fits(&shape.counts())?;
                match upload_shape(keys, &shape) {
                    Ok(shapes) => (Some(Arc::new(shapes)), None),
                    Err(note) => {
                        crate::degradation::warn(std::slice::from_ref(&note));
                        (None, Some(note))
                    }
                }
            }
        };
        let counts = Some(shape.counts());
        Ok(Key { inner: self.inner.clone(), shape: Some(shape), counts, device_shapes, evaluation_note })
    }

    /// This key without the shape's matrices on the host, where every GPU holds them: what a key
    /// whose partitions are evaluated on the devices needs (GiBs fewer at 2^27 rows). Unchanged where
    /// the shape is not on the GPUs.
    pub(crate) fn without_host_shape(self) -> Key {
        match self.device_shapes {
            Some(_) => Key { shape: None, ..self },
            None => self,
        }
    }

    /// Device bytes the key's recorded shape holds on each GPU (0 where it is not resident).
    pub fn shape_device_bytes(&self) -> u64 {
        self.device_shapes.as_ref().and_then(|s| s.first()).map_or(0, |s| s.device_bytes() as u64)
    }

    /// The MSMs given tables of precomputed multiples, per GPU ordinal (none on the CPU backend, or
    /// with [`crate::Config::msm_tables`] off): which MSM, the table's window width and multiples, the
    /// device bytes it takes and how long it took to build.
    pub fn msm_tables(&self) -> Vec<(usize, cuzk_cuda::TableReport)> {
        self.per_gpu(|k| &k.tables)
    }

    /// The MSMs given larger batches than the backend's, per GPU ordinal (none on the CPU backend, or
    /// with [`crate::Config::msm_tables`] off): which MSM, its batch size and count, and their window.
    pub fn msm_batches(&self) -> Vec<(usize, cuzk_cuda::BatchReport)> {
        self.per_gpu(|k| &k.batches)
    }

    /// What `of` lists for each GPU's copy of the key, with the GPU's ordinal (none on the CPU).
    fn per_gpu<T: Clone>(&self, of: impl Fn(&CudaKey) -> &[T]) -> Vec<(usize, T)> {
        let KeyInner::Cuda(keys) = &*self.inner else { return Vec::new() };
        keys.iter()
            .flat_map(|k| {
                let device = k.backend.gpu().info().ordinal;
                of(k).iter().map(move |t| (device, t.clone()))
            })
            .collect()
    }

    /// The key's device memory on each GPU, as it was loaded (none on the CPU backend).
    pub fn device_memory(&self) -> Vec<KeyMemory> {
        let KeyInner::Cuda(keys) = &*self.inner else { return Vec::new() };
        keys.iter().map(|k| k.memory).collect()
    }

    /// What this key does less well than a key resident in full: bases streamed from host memory
    /// because they did not fit on a GPU (logged as warnings when the key was loaded).
    pub fn degradations(&self) -> Vec<crate::Degradation> {
        let KeyInner::Cuda(keys) = &*self.inner else { return Vec::new() };
        keys.iter()
            .filter_map(|k| {
                let [a, b_g1, l, h] = k.key.g1_bases();
                let mut msms: Vec<&'static str> = [("a", a), ("b_g1", b_g1), ("l", l), ("h", h)]
                    .into_iter()
                    .filter(|(_, b)| !b.is_resident())
                    .map(|(name, _)| name)
                    .collect();
                if !k.key.g2_bases().is_resident() {
                    msms.push("b_g2");
                }
                let device = k.backend.gpu().info().ordinal;
                (!msms.is_empty()).then_some(crate::Degradation::StreamedBases { device, msms })
            })
            .chain(self.evaluation_note.clone())
            .collect()
    }

    /// This key without a shape: partitions are synthesized in full. The key's bases are shared.
    pub fn without_shape(&self) -> Key {
        Key {
            inner: self.inner.clone(),
            shape: None,
            counts: None,
            device_shapes: None,
            evaluation_note: None,
        }
    }

    /// The verifying key that matches this proving key.
    pub fn vk(&self) -> &VerifyingKey<Bls12_381> {
        match &*self.inner {
            KeyInner::Cpu(k) => k.vk(),
            KeyInner::Cuda(keys) => keys.first.key.vk(),
        }
    }

    /// Devices the key is resident on: the GPUs of a CUDA engine, 1 (the host) for the CPU backend.
    pub fn devices(&self) -> usize {
        self.inner.devices()
    }

    /// The NTT domain size of the circuit the key was made for.
    pub fn domain_size(&self) -> usize {
        match &*self.inner {
            KeyInner::Cpu(k) => k.domain_size(),
            KeyInner::Cuda(keys) => keys.first.key.domain_size(),
        }
    }

    pub(crate) fn backend_name(&self) -> &'static str {
        match &*self.inner {
            KeyInner::Cpu(_) => CpuBackend.name(),
            KeyInner::Cuda(keys) => keys.first.backend.name(),
        }
    }
}
