//! The engine: backend selection, resident keys, and proving through the layers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_bls12_381::{Bls12_381, Fr};
use ark_ff::UniformRand;
use ark_groth16::{Proof, ProvingKey, VerifyingKey};
use ark_relations::gr1cs::ConstraintSynthesizer;
use cuzk_cuda::CudaBackend;
use cuzk_groth16::{CpuBackend, PolyBackend, PreparedKey, ProveOptions, StageTimes};
use cuzk_keystore::{KeyStore, LoadReport};
use cuzk_synth::{Counts, R1csShape, SynthError, SynthesisOptions, Synthesized};
use rand::{CryptoRng, RngCore};
use rayon::prelude::*;

use crate::{BackendKind, Config, Error};

/// The CUDA backends of `devices` (every device when `None`) with every kernel module loaded, or why
/// they cannot be used.
fn open_cuda(devices: Option<&[usize]>) -> Result<Vec<Arc<CudaBackend>>, String> {
    let ordinals: Vec<usize> = match devices {
        Some([]) => return Err("the list of CUDA devices is empty".into()),
        Some(list) => list.to_vec(),
        None => {
            (0..cuzk_cuda::Gpu::discover().map_err(|e| format!("no usable CUDA GPU: {e}"))?.len()).collect()
        }
    };
    if let Some(d) = ordinals.iter().enumerate().find_map(|(i, d)| ordinals[..i].contains(d).then_some(d)) {
        return Err(format!("CUDA device {d} is listed twice"));
    }
    ordinals
        .into_iter()
        .map(|ordinal| {
            let backend =
                CudaBackend::new(ordinal).map_err(|e| format!("no usable CUDA GPU {ordinal}: {e}"))?;
            backend
                .load_kernels()
                .map_err(|e| format!("the CUDA kernels do not load on GPU {ordinal}: {e}"))?;
            Ok(Arc::new(backend))
        })
        .collect()
}

enum Backends {
    Cpu(CpuBackend),
    /// One backend per GPU the engine proves on.
    Cuda(Vec<Arc<CudaBackend>>),
}

fn device_error(op: &'static str, e: cuzk_cuda::CudaError) -> Error {
    Error::Prove(cuzk_groth16::ProveError::Backend(cuzk_groth16::BackendError::Device {
        op,
        source: Box::new(e),
    }))
}

/// Reserves device buffers for up to `want` of `key`'s partitions on `backend` (see
/// [`CudaBackend::reserve_partition_slots`]); returns how many were reserved.
fn reserve_slots(backend: &CudaBackend, key: &PreparedKey<CudaBackend>, want: usize) -> Result<usize, Error> {
    backend
        .reserve_partition_slots(key.domain_size(), key.variables(), want)
        .map_err(|e| device_error("reserve_partition_slots", e))
}

/// A key resident on one GPU, with that GPU's backend.
pub(crate) struct CudaKey {
    key: PreparedKey<CudaBackend>,
    backend: Arc<CudaBackend>,
}

impl CudaKey {
    /// Makes `pk` resident on `backend`'s GPU with the MSMs' buffers and one partition's device
    /// buffers reserved: a key whose partitions cannot fit beside it is refused here, and proofs
    /// allocate nothing.
    fn load(backend: &Arc<CudaBackend>, pk: ProvingKey<Bls12_381>) -> Result<Self, Error> {
        let key = PreparedKey::new(&**backend, pk)?;
        backend.reserve_msm_workspace(&key).map_err(|e| device_error("reserve_msm_workspace", e))?;
        reserve_slots(backend, &key, 1)?;
        Ok(Self { key, backend: backend.clone() })
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
    first: CudaKey,
    others: Vec<CudaKey>,
    /// The device the next single proof goes to (in turn).
    next: std::sync::atomic::AtomicUsize,
}

impl CudaKeys {
    fn len(&self) -> usize {
        1 + self.others.len()
    }

    fn get(&self, device: usize) -> Result<&CudaKey, cuzk_groth16::ProveError> {
        match device.checked_sub(1) {
            None => Ok(&self.first),
            Some(i) => self.others.get(i).ok_or_else(|| no_device(device, self.len())),
        }
    }

    fn iter(&self) -> impl Iterator<Item = &CudaKey> {
        std::iter::once(&self.first).chain(&self.others)
    }
}

/// A partition moved into a key's backend memory ([`KeyInner::stage`]); on CUDA, with the device.
pub(crate) enum StagedInner {
    Cpu(cuzk_groth16::Staged<CpuBackend>),
    Cuda(cuzk_groth16::Staged<CudaBackend>, usize),
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

/// A proving key resident in an engine's backend, optionally with the recorded R1CS shape of its
/// circuit. Cheap to clone; shared by every proof that uses it.
///
/// With a shape, the engine synthesizes partitions witness-only (see [`SynthesisMode`]); without one it
/// synthesizes them in full.
#[derive(Clone)]
pub struct Key {
    pub(crate) inner: Arc<KeyInner>,
    shape: Option<Arc<R1csShape>>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("backend", &self.backend_name())
            .field("domain_size", &self.domain_size())
            .field("shape", &self.shape.as_ref().map(|s| s.counts()))
            .finish()
    }
}

impl Key {
    /// The recorded R1CS shape attached to this key, if any.
    pub fn shape(&self) -> Option<&Arc<R1csShape>> {
        self.shape.as_ref()
    }

    /// This key with `shape` attached, so partitions are synthesized witness-only against it. The
    /// shape's counts must be the key's (instance, witness and all variables, NTT domain size);
    /// otherwise the first count that differs is named. The key's bases are shared, not copied.
    pub fn with_shape(&self, shape: Arc<R1csShape>) -> Result<Key, Error> {
        match &*self.inner {
            KeyInner::Cpu(k) => k.check_fits(&shape.counts())?,
            KeyInner::Cuda(keys) => keys.first.key.check_fits(&shape.counts())?,
        }
        Ok(Key { inner: self.inner.clone(), shape: Some(shape) })
    }

    /// This key without a shape: partitions are synthesized in full. The key's bases are shared.
    pub fn without_shape(&self) -> Key {
        Key { inner: self.inner.clone(), shape: None }
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

    fn backend_name(&self) -> &'static str {
        match &*self.inner {
            KeyInner::Cpu(_) => CpuBackend.name(),
            KeyInner::Cuda(keys) => keys.first.backend.name(),
        }
    }
}

/// How a partition's circuit was synthesized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SynthesisMode {
    /// The circuit built its own R1CS matrices (`cuzk_synth::synthesize`): the key carries no recorded
    /// shape, or [`Config::witness_only`] is off.
    Full,
    /// The circuit only assigned its variables; `a`, `b`, `c` came from the key's recorded shape
    /// (`cuzk_synth::synthesize_witness_only`), always with the satisfaction check.
    WitnessOnly,
}

impl SynthesisMode {
    /// "full" or "witness-only".
    pub fn name(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::WitnessOnly => "witness-only",
        }
    }
}

impl std::fmt::Display for SynthesisMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Synthesizes one partition: witness-only against `shape` when there is one, in full otherwise.
///
/// Witness-only synthesis always checks that the witness satisfies the shape's constraints, whatever
/// `options` say: the matrices are the key's, not the circuit's, so this check is what refuses a
/// circuit of another shape with equal variable counts.
pub(crate) fn synthesize_partition<C: ConstraintSynthesizer<Fr>>(
    shape: Option<&R1csShape>,
    circuit: C,
    options: &SynthesisOptions,
) -> Result<(Synthesized, SynthesisMode), Error> {
    let Some(shape) = shape else {
        return Ok((cuzk_synth::synthesize(circuit, options)?, SynthesisMode::Full));
    };
    let checked = SynthesisOptions { check_satisfied: true };
    match cuzk_synth::synthesize_witness_only(circuit, shape, &checked) {
        Ok((syn, _peak)) => Ok((syn, SynthesisMode::WitnessOnly)),
        Err(SynthError::ShapeMismatch { what, shape, circuit }) => {
            Err(Error::ShapeMismatch { what, shape, circuit })
        }
        Err(SynthError::Unsatisfied { index, num_constraints }) => {
            Err(Error::ShapeUnsatisfied { index, num_constraints })
        }
        Err(other) => Err(other.into()),
    }
}

/// A proof with what it took to make it.
#[derive(Debug, Clone)]
pub struct ProofReport {
    /// The proof.
    pub proof: Proof<Bls12_381>,
    /// The circuit's counts.
    pub counts: Counts,
    /// Circuit synthesis (witness generation and a, b, c evaluation).
    pub synthesis: Duration,
    /// Whether synthesis was full or witness-only.
    pub synthesis_mode: SynthesisMode,
    /// The prover's stages.
    pub stages: StageTimes,
    /// Synthesis plus proving.
    pub total: Duration,
}

/// The proving engine.
///
/// ```
/// use ark_groth16::Groth16;
/// use cuzk::{circuits::Synthetic, Bls12_381, Config, Engine, Fr};
/// use rand::{rngs::StdRng, SeedableRng};
///
/// # fn main() -> Result<(), cuzk::Error> {
/// let mut rng = StdRng::seed_from_u64(1);
/// let circuit = Synthetic::new(30, 7);
/// let pk = Groth16::<Bls12_381>::generate_random_parameters_with_reduction(circuit, &mut rng).unwrap();
///
/// let engine = Engine::new(Config::cpu())?;
/// let key = engine.load_key(pk.clone())?;
/// let (r, s) = (Fr::from(3u64), Fr::from(5u64));
/// let proof = engine.prove_with_randomness(&key, circuit, r, s)?;
/// assert_eq!(proof, Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s).unwrap());
/// assert!(engine.verify(&key, &proof, &circuit.public_input_values())?);
/// # Ok(()) }
/// ```
pub struct Engine {
    config: Config,
    backend: Backends,
    note: Option<String>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("backend", &self.backend_name()).field("config", &self.config).finish()
    }
}

impl Engine {
    /// Creates an engine. `BackendKind::Cuda` fails when the CUDA backend cannot be used (no driver,
    /// no device, or kernels that do not load); `BackendKind::Auto` then falls back to the CPU and says
    /// why in [`Engine::backend_note`].
    pub fn new(config: Config) -> Result<Self, Error> {
        let devices = config.cuda_devices.as_deref();
        let (backend, note) = match config.backend {
            BackendKind::Cpu => (Backends::Cpu(CpuBackend), None),
            BackendKind::Auto => match open_cuda(devices) {
                Ok(b) => (Backends::Cuda(b), None),
                Err(why) => (Backends::Cpu(CpuBackend), Some(format!("using the CPU: {why}"))),
            },
            BackendKind::Cuda => match open_cuda(devices) {
                Ok(b) => (Backends::Cuda(b), None),
                Err(reason) => return Err(Error::BackendUnavailable { backend: BackendKind::Cuda, reason }),
            },
        };
        Ok(Self { config, backend, note })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The backend in use ("cpu", "cuda").
    pub fn backend_name(&self) -> &'static str {
        match &self.backend {
            Backends::Cpu(b) => b.name(),
            Backends::Cuda(_) => "cuda",
        }
    }

    /// The devices the engine proves on: the GPUs' ordinals with CUDA, none with the CPU backend.
    pub fn cuda_devices(&self) -> Vec<usize> {
        match &self.backend {
            Backends::Cpu(_) => Vec::new(),
            Backends::Cuda(b) => b.iter().map(|b| b.gpu().info().ordinal).collect(),
        }
    }

    /// Why `BackendKind::Auto` chose the backend it did, when it did not choose the best one.
    pub fn backend_note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    fn prove_options(&self) -> ProveOptions {
        ProveOptions { verify: self.config.verify_proofs }
    }

    fn synthesis_options(&self) -> SynthesisOptions {
        SynthesisOptions { check_satisfied: self.config.check_witness }
    }

    /// Checks a proving key and makes it resident in the backend (its bases move into backend memory).
    /// The key has no shape, so its partitions are synthesized in full; see
    /// [`Engine::load_key_with_shape`] and [`Engine::load_key_from_store`] for witness-only synthesis.
    pub fn load_key(&self, pk: ProvingKey<Bls12_381>) -> Result<Key, Error> {
        let inner = match &self.backend {
            Backends::Cpu(b) => KeyInner::Cpu(PreparedKey::new(b, pk)?),
            Backends::Cuda(backends) => {
                let (first, rest) = backends.split_first().ok_or_else(|| Error::BackendUnavailable {
                    backend: BackendKind::Cuda,
                    reason: "the engine has no CUDA device".into(),
                })?;
                // The other devices take a copy each, one at a time; the first takes the key itself.
                let others =
                    rest.iter().map(|b| CudaKey::load(b, pk.clone())).collect::<Result<Vec<_>, _>>()?;
                let first = CudaKey::load(first, pk)?;
                KeyInner::Cuda(CudaKeys { first, others, next: std::sync::atomic::AtomicUsize::new(0) })
            }
        };
        Ok(Key { inner: Arc::new(inner), shape: None })
    }

    /// As [`Engine::load_key`], with the recorded R1CS shape of the key's circuit attached (see
    /// [`Key::with_shape`]), so partitions are synthesized witness-only.
    pub fn load_key_with_shape(
        &self,
        pk: ProvingKey<Bls12_381>,
        shape: Arc<R1csShape>,
    ) -> Result<Key, Error> {
        self.load_key(pk)?.with_shape(shape)
    }

    /// As [`Engine::load_key_with_shape`], recording the shape from `circuit` (any circuit of the
    /// key's shape; no witness is needed, so the key-generation circuit serves).
    pub fn load_key_recording_shape<C: ConstraintSynthesizer<Fr>>(
        &self,
        pk: ProvingKey<Bls12_381>,
        circuit: C,
    ) -> Result<Key, Error> {
        let shape = R1csShape::record(circuit)?;
        self.load_key_with_shape(pk, Arc::new(shape))
    }

    /// Loads the proving key stored under `shape_id` and, when the store holds one, the recorded R1CS
    /// shape under the same id, and makes the key resident. With a shape the key proves with
    /// witness-only synthesis; without one it falls back to full synthesis. A shape file that exists
    /// but cannot be read, or that does not fit the key, is an error, never silently ignored.
    /// The report is the key file's load.
    pub fn load_key_from_store(&self, store: &KeyStore, shape_id: &str) -> Result<(Key, LoadReport), Error> {
        let (pk, report) = store.load(shape_id)?;
        let shape =
            if store.contains_shape(shape_id)? { Some(Arc::new(store.load_shape(shape_id)?)) } else { None };
        let key = self.load_key(pk)?;
        let key = match shape {
            Some(shape) => key.with_shape(shape)?,
            None => key,
        };
        Ok((key, report))
    }

    /// The shape partitions of `key` are synthesized against: the key's, unless witness-only synthesis
    /// is turned off.
    fn shape_for<'k>(&self, key: &'k Key) -> Option<&'k Arc<R1csShape>> {
        key.shape.as_ref().filter(|_| self.config.witness_only)
    }

    /// Refuses a key prepared by another backend than this engine's.
    fn check_key(&self, key: &Key) -> Result<(), Error> {
        let (engine, key_backend) = (self.backend_name(), key.backend_name());
        if engine == key_backend {
            Ok(())
        } else {
            Err(Error::KeyBackend { key: key_backend, engine })
        }
    }

    /// How partitions of `key` are synthesized by this engine.
    pub fn synthesis_mode(&self, key: &Key) -> SynthesisMode {
        match self.shape_for(key) {
            Some(_) => SynthesisMode::WitnessOnly,
            None => SynthesisMode::Full,
        }
    }

    /// Proves `circuit` with blinding scalars `r` and `s`: exactly the proof of
    /// `ark_groth16::Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s)`.
    ///
    /// When the key carries a recorded shape (and [`Config::witness_only`] is on), the circuit is
    /// synthesized witness-only against it; a circuit of other variable counts is refused with
    /// [`Error::ShapeMismatch`], one whose witness does not satisfy the shape with
    /// [`Error::ShapeUnsatisfied`]. The proof is the same either way.
    pub fn prove_with_randomness<C>(
        &self,
        key: &Key,
        circuit: C,
        r: Fr,
        s: Fr,
    ) -> Result<Proof<Bls12_381>, Error>
    where
        C: ConstraintSynthesizer<Fr> + Send + 'static,
    {
        Ok(self.prove_report(key, circuit, r, s)?.proof)
    }

    /// As [`Engine::prove_with_randomness`], with the time each stage took.
    pub fn prove_report<C>(&self, key: &Key, circuit: C, r: Fr, s: Fr) -> Result<ProofReport, Error>
    where
        C: ConstraintSynthesizer<Fr> + Send + 'static,
    {
        let start = Instant::now();
        let (syn, synthesis_mode) =
            synthesize_partition(self.shape_for(key).map(|s| &**s), circuit, &self.synthesis_options())?;
        let synthesis = start.elapsed();
        self.check_key(key)?;
        let (proof, stages) = key.inner.prove(&syn, r, s, &self.prove_options())?;
        Ok(ProofReport {
            proof,
            counts: syn.counts(),
            synthesis,
            synthesis_mode,
            stages,
            total: start.elapsed(),
        })
    }

    /// Proves `circuit` with fresh blinding scalars `r` then `s` drawn from `rng`.
    pub fn prove<C, R>(&self, key: &Key, circuit: C, rng: &mut R) -> Result<Proof<Bls12_381>, Error>
    where
        C: ConstraintSynthesizer<Fr> + Send + 'static,
        R: RngCore + CryptoRng,
    {
        let (r, s) = (Fr::rand(rng), Fr::rand(rng));
        self.prove_with_randomness(key, circuit, r, s)
    }

    /// Proves several partitions of one proof with the same key, in parallel. Blinding scalars are drawn
    /// from `rng` in partition order (`r0, s0, r1, s1, ...`). Either every partition proves and the proofs
    /// come back in order, or the first failed partition's error comes back.
    pub fn prove_partitions<C, R>(
        &self,
        key: &Key,
        circuits: Vec<C>,
        rng: &mut R,
    ) -> Result<Vec<Proof<Bls12_381>>, Error>
    where
        C: ConstraintSynthesizer<Fr> + Send + 'static,
        R: RngCore + CryptoRng,
    {
        let randomness = circuits.iter().map(|_| (Fr::rand(rng), Fr::rand(rng))).collect();
        let reports = self.prove_partitions_report(key, circuits, randomness)?;
        Ok(reports.into_iter().map(|r| r.proof).collect())
    }

    /// As [`Engine::prove_partitions`], with explicit `(r, s)` per partition and a report per partition.
    pub fn prove_partitions_report<C>(
        &self,
        key: &Key,
        circuits: Vec<C>,
        randomness: Vec<(Fr, Fr)>,
    ) -> Result<Vec<ProofReport>, Error>
    where
        C: ConstraintSynthesizer<Fr> + Send + 'static,
    {
        self.prove_partitions_observed(key, circuits, randomness, &|_, _| {})
    }

    /// As [`Engine::prove_partitions_report`], calling `on_done(index, report)` as each partition
    /// finishes (from the worker thread that proved it), e.g. to drive a progress bar.
    pub fn prove_partitions_observed<C>(
        &self,
        key: &Key,
        circuits: Vec<C>,
        randomness: Vec<(Fr, Fr)>,
        on_done: &(dyn Fn(usize, &ProofReport) + Sync),
    ) -> Result<Vec<ProofReport>, Error>
    where
        C: ConstraintSynthesizer<Fr> + Send + 'static,
    {
        let count = circuits.len();
        if randomness.len() != count {
            return Err(Error::RandomnessCount { partitions: count, pairs: randomness.len() });
        }
        let results: Vec<Result<ProofReport, Error>> = circuits
            .into_par_iter()
            .zip(randomness)
            .enumerate()
            .map(|(i, (c, (r, s)))| {
                let report = self.prove_report(key, c, r, s);
                if let Ok(report) = &report {
                    on_done(i, report);
                }
                report
            })
            .collect();
        results
            .into_iter()
            .enumerate()
            .map(|(index, r)| r.map_err(|e| Error::Partition { index, count, source: Box::new(e) }))
            .collect()
    }

    /// Proves the partitions through the scheduler: `sched.partition_workers` CPU workers synthesize
    /// while the backend proves partitions already synthesized (one at a time, with all cores), and
    /// every step lands on the returned timeline. Blinding scalars are given per partition. The proofs
    /// equal [`Engine::prove_partitions_report`]'s, and synthesis is witness-only under the same
    /// condition.
    pub fn prove_pipelined<C>(
        &self,
        key: &Key,
        circuits: Vec<C>,
        randomness: Vec<(Fr, Fr)>,
        sched: cuzk_sched::Config,
    ) -> Result<crate::PipelineRun, Error>
    where
        C: ConstraintSynthesizer<Fr> + Send + 'static,
    {
        if randomness.len() != circuits.len() {
            return Err(Error::RandomnessCount { partitions: circuits.len(), pairs: randomness.len() });
        }
        let job = circuits.into_iter().zip(randomness).map(|(c, (r, s))| (c, r, s)).collect();
        let run = self.prove_pipelined_jobs(key, vec![job], sched)?;
        let proofs = run.proofs.into_iter().next().unwrap_or_default();
        Ok(crate::PipelineRun { proofs, synthesis_mode: run.synthesis_mode, timeline: run.timeline })
    }

    /// Several proofs through one scheduler: `jobs[j]` is proof `j`'s partitions with their blinding
    /// scalars. The jobs are submitted in order at one priority, so proof `j + 1`'s partitions are
    /// synthesized while proof `j`'s are proved, and the oldest proof finishes first. Proofs come back
    /// per job, in partition order; the first job that fails fails the call.
    pub fn prove_pipelined_jobs<C>(
        &self,
        key: &Key,
        jobs: Vec<Vec<(C, Fr, Fr)>>,
        sched: cuzk_sched::Config,
    ) -> Result<crate::PipelineJobs, Error>
    where
        C: ConstraintSynthesizer<Fr> + Send + 'static,
    {
        let pipeline = self.pipeline::<C>(key, sched)?;
        let handles = jobs
            .into_iter()
            .enumerate()
            .map(|(j, inputs)| {
                pipeline.submit(cuzk_sched::JobId(j as u64), cuzk_sched::Priority::Normal, None, inputs)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let proofs = handles.into_iter().map(|h| h.wait()).collect::<Result<Vec<_>, _>>()?;
        Ok(crate::PipelineJobs {
            proofs,
            synthesis_mode: pipeline.synthesis_mode(),
            timeline: pipeline.timeline().clone(),
        })
    }

    /// A long-lived pipeline for `key`: its workers start now and take proofs submitted at any time
    /// ([`crate::Pipeline::submit`]) until it is dropped. The scheduler's device count and slots per
    /// device are set here from the key: one device per GPU the key is resident on, one slot per GPU
    /// worker as far as every device's free memory allows. The pipeline has a budget of its own,
    /// `sched.host_budget_bytes`, from which the key's host bytes are reserved for its life.
    pub fn pipeline<C>(&self, key: &Key, sched: cuzk_sched::Config) -> Result<crate::Pipeline<C>, Error>
    where
        C: ConstraintSynthesizer<Fr> + Send + 'static,
    {
        let budget = cuzk_sched::Budget::new(sched.host_budget_bytes);
        self.pipeline_sharing(key, sched, &budget)
    }

    /// As [`Engine::pipeline`], reserving host memory from `budget`, which other pipelines (say, one
    /// per resident key of a daemon) may share, so that together they never reserve more than it
    /// holds: what the key keeps on the host is reserved for the pipeline's life
    /// ([`cuzk_sched::Budget::reserve_resident`]), and each partition's working set while it is on the
    /// host. Refused when the key would leave too little room for one partition of its own or of any
    /// other pipeline on the budget (so no pipeline's partitions can be starved for ever); waits while
    /// partitions in flight hold the room it needs. `sched.host_budget_bytes` is not used.
    pub fn pipeline_sharing<C>(
        &self,
        key: &Key,
        sched: cuzk_sched::Config,
        budget: &cuzk_sched::Budget,
    ) -> Result<crate::Pipeline<C>, Error>
    where
        C: ConstraintSynthesizer<Fr> + Send + 'static,
    {
        self.check_key(key)?;
        let synthesis_mode = self.synthesis_mode(key);
        let stages = crate::pipeline::EngineStages::<C> {
            key: key.clone(),
            shape: self.shape_for(key).cloned(),
            synthesis: self.synthesis_options(),
            prove: self.prove_options(),
            circuit: std::marker::PhantomData,
        };
        let mut sched = sched;
        if let KeyInner::Cuda(keys) = &*key.inner {
            // Every GPU the key is resident on, each with one device slot per GPU worker, as many as
            // its free memory allows (the fewest any device has, for all).
            sched.devices = keys.len();
            let want = sched.gpu_workers_per_device.max(1);
            let mut slots = want;
            for d in keys.iter() {
                slots = slots.min(reserve_slots(&d.backend, &d.key, want)?);
            }
            sched.slots_per_device = slots;
        }
        // What the key holds on the host (and the pinned staging) is reserved for the pipeline's life,
        // and every pipeline's widest partition must still fit beside all such reservations.
        let fixed = key.inner.host_bytes();
        let partition = crate::pipeline::partition_host_bytes(key.domain_size());
        let held = budget.reserve_resident(fixed, partition).map_err(|e| match e {
            cuzk_sched::BudgetError::NoRoom { available, .. } => {
                Error::HostBudget { budget: available, key: fixed, partition }
            }
            cuzk_sched::BudgetError::TooLarge { capacity, .. } => {
                Error::HostBudget { budget: capacity, key: fixed, partition }
            }
        })?;
        sched.host_budget_bytes = budget.capacity();
        let scheduler = cuzk_sched::Scheduler::with_budget(stages, sched, budget.clone());
        Ok(crate::Pipeline::new(scheduler, synthesis_mode, held))
    }

    /// Verifies a proof against the key's verifying key.
    pub fn verify(&self, key: &Key, proof: &Proof<Bls12_381>, public_inputs: &[Fr]) -> Result<bool, Error> {
        let pvk = ark_groth16::prepare_verifying_key(key.vk());
        ark_groth16::Groth16::<Bls12_381>::verify_proof(&pvk, proof, public_inputs)
            .map_err(|e| Error::Prove(cuzk_groth16::ProveError::Verification(e)))
    }
}
