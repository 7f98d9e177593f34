//! The engine: backend selection, resident keys, and proving through the layers.
//!
//! `Engine::new` opens the CUDA backend on every GPU (`Config::cuda_devices`) when it can, else the
//! CPU, and says why in `backend_note`. A CUDA key is resident on each GPU (loaded one after another
//! from copies of the proving key), with the MSMs' buffers and one partition's device buffers reserved,
//! so a key whose partitions cannot fit beside it is refused at load and proofs allocate nothing.
//! Single proofs take the GPUs in turn; a pipeline gets one scheduler device per GPU, and a partition
//! is staged and proved on the device its worker belongs to. `prove_partitions` draws `(r, s)` per
//! partition in order and proves the partitions in parallel.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_bls12_381::{Bls12_381, Fr};
use ark_ff::UniformRand;
use ark_groth16::{Proof, ProvingKey};
use ark_relations::gr1cs::ConstraintSynthesizer;
use cuzk_cuda::CudaBackend;
use cuzk_groth16::{CpuBackend, PolyBackend, PreparedKey, ProveOptions, StageTimes};
use cuzk_keystore::{KeyStore, LoadReport};
use cuzk_synth::{Counts, R1csShape, SynthesisOptions};
use rand::{CryptoRng, RngCore};
use rayon::prelude::*;

use crate::key::{CudaKey, CudaKeys, KeyInner};
use crate::partition::{synthesize_partition, Against, SynthesisMode};
use crate::{BackendKind, Config, Error, Key};

/// The CUDA backends of `devices` (every device when `None`) with every kernel module loaded, or why
/// they cannot be used.
fn open_cuda(devices: Option<&[usize]>, units: crate::MulUnits) -> Result<Vec<Arc<CudaBackend>>, String> {
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
            let backend = CudaBackend::new(ordinal)
                .map_err(|e| format!("no usable CUDA GPU {ordinal}: {e}"))?
                .with_mul_units(units);
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
/// use cuzk::{Bls12_381, Config, Engine, Fr};
/// use cuzk_circuits::Synthetic;
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
            BackendKind::Auto => match open_cuda(devices, config.mul_units) {
                Ok(b) => (Backends::Cuda(b), None),
                Err(why) => (Backends::Cpu(CpuBackend), Some(format!("using the CPU: {why}"))),
            },
            BackendKind::Cuda => match open_cuda(devices, config.mul_units) {
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

    /// On a GPU, the units its kernels multiply on ([`Config::mul_units`]); `None` on the CPU, which
    /// has no such choice.
    pub fn mul_units(&self) -> Option<crate::MulUnits> {
        matches!(self.backend, Backends::Cuda(_)).then_some(self.config.mul_units)
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
        self.load_key_beside(pk, None)
    }

    /// [`Engine::load_key`], leaving room on each GPU for `shape` (uploaded next): the MSM tables
    /// ([`Config::msm_tables`]) take only memory that neither needs.
    fn load_key_beside(&self, pk: ProvingKey<Bls12_381>, shape: Option<&R1csShape>) -> Result<Key, Error> {
        let shape_bytes = shape.map_or(0, cuzk_cuda::GpuShape::device_bytes_of);
        let inner = match &self.backend {
            Backends::Cpu(b) => KeyInner::Cpu(PreparedKey::new(b, pk)?),
            Backends::Cuda(backends) => {
                let (first, rest) = backends.split_first().ok_or_else(|| Error::BackendUnavailable {
                    backend: BackendKind::Cuda,
                    reason: "the engine has no CUDA device".into(),
                })?;
                // The other devices take a copy each, one at a time; the first takes the key itself.
                // Tables leave room for the shape, when one follows.
                let tables = self.config.msm_tables.then_some(shape_bytes);
                let others = rest
                    .iter()
                    .map(|b| CudaKey::load(b, pk.clone(), tables))
                    .collect::<Result<Vec<_>, _>>()?;
                let first = CudaKey::load(first, pk, tables)?;
                KeyInner::Cuda(CudaKeys { first, others, next: std::sync::atomic::AtomicUsize::new(0) })
            }
        };
        let key = Key {
            inner: Arc::new(inner),
            shape: None,
            counts: None,
            device_shapes: None,
            evaluation_note: None,
        };
        crate::degradation::warn(&key.degradations());
        Ok(key)
    }

    /// As [`Engine::load_key`], with the recorded R1CS shape of the key's circuit attached (see
    /// [`Key::with_shape`]), so partitions are synthesized witness-only. Where every GPU holds the
    /// shape and this engine evaluates it there, the host keeps only its counts.
    pub fn load_key_with_shape(
        &self,
        pk: ProvingKey<Bls12_381>,
        shape: Arc<R1csShape>,
    ) -> Result<Key, Error> {
        Ok(self.host_shape_as_needed(self.load_key_beside(pk, Some(&shape))?.with_shape(shape)?))
    }

    /// `key` without the shape's matrices on the host when this engine evaluates them on the GPUs
    /// that hold them ([`Key::without_host_shape`]).
    fn host_shape_as_needed(&self, key: Key) -> Key {
        if self.config.evaluate_on_device && self.config.witness_only {
            key.without_host_shape()
        } else {
            key
        }
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
        let key = self.load_key_beside(pk, shape.as_deref())?;
        let key = match shape {
            Some(shape) => self.host_shape_as_needed(key.with_shape(shape)?),
            None => key,
        };
        Ok((key, report))
    }

    /// What partitions of `key` are synthesized against by this engine: the shape on the GPUs when it
    /// evaluates there, else the host's shape, else nothing (also when witness-only synthesis is off).
    fn against(&self, key: &Key) -> Against {
        if !self.config.witness_only {
            return Against::Nothing;
        }
        match (key.counts, &key.device_shapes, &key.shape) {
            (Some(counts), Some(shapes), _) if self.config.evaluate_on_device => {
                Against::Device { counts, shapes: shapes.clone() }
            }
            (_, _, Some(shape)) => Against::Host(shape.clone()),
            _ => Against::Nothing,
        }
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
        self.against(key).mode()
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
        let against = self.against(key);
        if let Against::Device { counts, shapes } = &against {
            let w = crate::partition::synthesize_compact(*counts, circuit)?;
            let synthesis = start.elapsed();
            self.check_key(key)?;
            let (proof, stages) = key
                .inner
                .prove_compact(shapes, &w, r, s, &self.prove_options())
                .map_err(Error::from_prove)?;
            let synthesis_mode = SynthesisMode::Compact;
            return Ok(ProofReport {
                proof,
                counts: w.counts(),
                synthesis,
                synthesis_mode,
                stages,
                total: start.elapsed(),
            });
        }
        let host_shape = match &against {
            Against::Host(shape) => Some(&**shape),
            _ => None,
        };
        let (syn, synthesis_mode) = synthesize_partition(host_shape, circuit, &self.synthesis_options())?;
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
        crate::pipeline::Pipeline::start(
            key,
            self.against(key),
            self.synthesis_options(),
            self.prove_options(),
            sched,
            budget,
        )
    }

    /// Verifies a proof against the key's verifying key.
    pub fn verify(&self, key: &Key, proof: &Proof<Bls12_381>, public_inputs: &[Fr]) -> Result<bool, Error> {
        let pvk = ark_groth16::prepare_verifying_key(key.vk());
        ark_groth16::Groth16::<Bls12_381>::verify_proof(&pvk, proof, public_inputs)
            .map_err(|e| Error::Prove(cuzk_groth16::ProveError::Verification(e)))
    }
}
