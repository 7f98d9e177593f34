//! Proving through the scheduler: partitions synthesized by a pool of CPU workers while the backend
//! proves the ones already synthesized, with a timeline of every step.
//!
//! "Upload" (under the scheduler's memory lock) moves the synthesized partition's `a`, `b`, `c` and `z`
//! into the key's backend memory (`cuzk_groth16::stage`: on CUDA, pinned staging buffers and the copy
//! stream); the "kernels" step (witness map, MSMs, assembly) takes the kernel lock and releases it as
//! soon as every kernel is queued (`KernelLog::kernels_queued`), so collecting the MSMs, assembly and
//! the timer reads overlap the next partition's kernels; the self-check runs after the slot is
//! released, in "finish".
//! So partition `N + 1`'s upload overlaps partition `N`'s kernels, and synthesis of the next partitions
//! overlaps both. On the CPU the upload is a copy and one partition proves at a time with all cores.

use std::marker::PhantomData;
use std::sync::Arc;

use ark_bls12_381::{Bls12_381, Fr};
use ark_groth16::Proof;
use ark_relations::gr1cs::ConstraintSynthesizer;
use cuzk_groth16::{ProveOptions, Stage, StageTimes};
use cuzk_sched::{KernelLog, PartitionRef, Placement, StageError, Stages};
use cuzk_synth::{SynthesisOptions, Synthesized};

use crate::key::{reserve_slots, KeyInner, StagedInner};
use crate::partition::{synthesize_compact, synthesize_partition, Against};
use crate::{Error, Key, SynthesisMode};

/// Host bytes of one synthesized partition of domain size `n`: `a`, `b`, `c` and `z`, four vectors of
/// at most `n` elements of 32 bytes.
pub(crate) fn partition_host_bytes(n: usize) -> u64 {
    (n as u64).saturating_mul(4 * 32)
}

/// The engine's partition stages for the scheduler.
pub(crate) struct EngineStages<C> {
    pub(crate) key: Key,
    /// What partitions are synthesized against: nothing (full synthesis), the host's shape, or the
    /// shape on the GPUs (compact partitions, evaluated there).
    pub(crate) against: Against,
    pub(crate) synthesis: SynthesisOptions,
    pub(crate) prove: ProveOptions,
    pub(crate) circuit: PhantomData<fn(C)>,
}

/// A partition in flight: its synthesized data and blinding scalars.
pub(crate) struct Partition {
    data: PartitionData,
    r: Fr,
    s: Fr,
}

/// What synthesis left on the host.
pub(crate) enum PartitionData {
    /// `a`, `b`, `c` and `z` (emptied of `a`, `b`, `c` once they are uploaded).
    Host(Synthesized),
    /// The compact assignment, for evaluation on the GPU (dropped once uploaded; the public inputs stay).
    Compact(cuzk_synth::CompactWitness),
    /// A compact partition after its upload: what the kernel half still needs.
    Uploaded { counts: cuzk_synth::Counts, public_inputs: Vec<Fr> },
}

/// Host bytes a partition synthesized against `against` holds at most, from the start of its
/// synthesis to the end of its upload: a compact one by its counts, any other as `a`, `b`, `c`, `z`.
fn partition_bytes(against: &Against, domain_size: usize) -> u64 {
    match against {
        Against::Device { counts, .. } => cuzk_synth::CompactWitness::peak_bytes(*counts),
        _ => partition_host_bytes(domain_size),
    }
}

/// A partition whose data is in backend memory.
pub(crate) struct StagedPartition {
    part: Partition,
    staged: StagedInner,
}

/// A failure of `stage`, its cause the engine's own error (so a pipeline's caller gets it back
/// structured, see [`Error::root`]).
fn stage_error(stage: &'static str) -> impl Fn(Error) -> StageError {
    move |e| StageError::new(stage, e)
}

/// Logs where the kernel step's stages ran. From a backend that places its device work (CUDA): the
/// upload's copies on the copy stream and each device stage where the device's clock says it ran, so
/// an idle device shows as a gap. Otherwise the host's phases as they ran (the witness map, the MSM
/// phase, assembly); the host's upload is the scheduler's own upload span, so it is not repeated.
fn log_stages(log: &mut KernelLog<'_>, t: &StageTimes) {
    for &(stage, from, to) in &t.spans {
        match stage {
            Stage::Upload if t.spans_on_device => log.record_copy(from, to),
            Stage::Upload => {}
            _ => log.record(stage, from, to),
        }
    }
}

impl<C: ConstraintSynthesizer<Fr> + Send + 'static> Stages for EngineStages<C> {
    type Input = (C, Fr, Fr);
    type Synthesized = Partition;
    type Staged = StagedPartition;
    /// The proof and, when the engine checks its proofs, the public inputs to check it against.
    type Computed = (Proof<Bls12_381>, Option<Vec<Fr>>);
    type Output = Proof<Bls12_381>;

    fn host_bytes(&self, _input: &Self::Input) -> u64 {
        partition_bytes(&self.against, self.key.domain_size())
    }

    fn held_bytes(&self, part: &Partition) -> u64 {
        match &part.data {
            PartitionData::Compact(w) => w.host_bytes(),
            _ => u64::MAX,
        }
    }

    fn synthesize(&self, _part: PartitionRef, (circuit, r, s): Self::Input) -> Result<Partition, StageError> {
        let host_shape = match &self.against {
            Against::Device { counts, .. } => {
                let w = synthesize_compact(*counts, circuit).map_err(stage_error("synthesis"))?;
                return Ok(Partition { data: PartitionData::Compact(w), r, s });
            }
            Against::Host(shape) => Some(&**shape),
            Against::Nothing => None,
        };
        let (syn, _mode) =
            synthesize_partition(host_shape, circuit, &self.synthesis).map_err(stage_error("synthesis"))?;
        Ok(Partition { data: PartitionData::Host(syn), r, s })
    }

    fn upload(
        &self,
        _part: PartitionRef,
        at: Placement,
        mut part: Partition,
    ) -> Result<StagedPartition, StageError> {
        let failed = |e| stage_error("upload")(Error::from_prove(e));
        let staged = match &mut part.data {
            PartitionData::Host(syn) => {
                let staged = self.key.inner.stage(at.device, syn).map_err(failed)?;
                // a, b and c live in backend memory now; only z is still read from the host.
                for v in [&mut syn.a, &mut syn.b, &mut syn.c] {
                    *v = Vec::new();
                }
                staged
            }
            PartitionData::Compact(w) => {
                let shapes = match &self.against {
                    Against::Device { shapes, .. } => Some(shapes),
                    _ => None,
                };
                let shapes = shapes.ok_or_else(|| {
                    stage_error("upload")(Error::Prove(cuzk_groth16::ProveError::Backend(
                        cuzk_groth16::BackendError::Device {
                            op: "upload",
                            source: "a compact partition without the key's shape on the GPU".into(),
                        },
                    )))
                })?;
                let staged = self.key.inner.stage_compact(at.device, shapes, w).map_err(failed)?;
                // Everything but the public inputs is on the device now.
                let (counts, public_inputs) = (w.counts(), w.public_inputs().to_vec());
                part.data = PartitionData::Uploaded { counts, public_inputs };
                staged
            }
            PartitionData::Uploaded { .. } => {
                return Err(stage_error("upload")(Error::Prove(cuzk_groth16::ProveError::Backend(
                    cuzk_groth16::BackendError::Device {
                        op: "upload",
                        source: "the partition was uploaded already".into(),
                    },
                ))))
            }
        };
        Ok(StagedPartition { part, staged })
    }

    fn kernels(
        &self,
        _part: PartitionRef,
        _at: Placement,
        p: StagedPartition,
        log: &mut KernelLog<'_>,
    ) -> Result<Self::Computed, StageError> {
        let StagedPartition { part: p, staged } = p;
        // The self-check is host work: it runs in `finish`, after the slot is released.
        let no_check = ProveOptions { verify: false };
        // The kernel lock is released as soon as every kernel is queued: the MSMs' collection, the
        // assembly and the timer reads then overlap the next partition's kernels.
        let inner = &self.key.inner;
        let queued = || log.kernels_queued();
        let (result, public_inputs) = match &p.data {
            PartitionData::Host(syn) => {
                (inner.prove_staged(syn, staged, p.r, p.s, &no_check, queued), syn.public_inputs())
            }
            PartitionData::Uploaded { counts, public_inputs } => (
                inner.prove_compact_staged(*counts, public_inputs, staged, p.r, p.s, &no_check, queued),
                &public_inputs[..],
            ),
            PartitionData::Compact(_) => {
                return Err(stage_error("kernels")(Error::Prove(cuzk_groth16::ProveError::Backend(
                    cuzk_groth16::BackendError::Device {
                        op: "kernels",
                        source: "the partition was not uploaded".into(),
                    },
                ))))
            }
        };
        let (proof, times) = result.map_err(|e| stage_error("kernels")(Error::from_prove(e)))?;
        log_stages(log, &times);
        Ok((proof, self.prove.verify.then(|| public_inputs.to_vec())))
    }

    fn finish(
        &self,
        _part: PartitionRef,
        (proof, inputs): Self::Computed,
    ) -> Result<Proof<Bls12_381>, StageError> {
        if let Some(inputs) = inputs {
            self.key.inner.verify(&proof, &inputs).map_err(|e| stage_error("self-check")(e.into()))?;
        }
        Ok(proof)
    }
}

/// A long-lived pipeline over one key ([`crate::Engine::pipeline`]): submit proofs at any time, each as
/// its partitions with their blinding scalars; every submission gets a [`ProofJob`]. Dropping the
/// pipeline fails the jobs still live with [`cuzk_sched::JobError::ShutDown`] and stops its workers
/// once the partitions already on them are done.
pub struct Pipeline<C: ConstraintSynthesizer<Fr> + Send + 'static> {
    scheduler: cuzk_sched::Scheduler<EngineStages<C>>,
    synthesis_mode: SynthesisMode,
    /// The key's host bytes, reserved from the budget while the pipeline lives, with its partitions'
    /// size.
    key_bytes: cuzk_sched::ResidentReservation,
    /// The key's degradations and the pipeline's own (fewer slots than GPU workers).
    degradations: Vec<crate::Degradation>,
}

impl<C: ConstraintSynthesizer<Fr> + Send + 'static> std::fmt::Debug for Pipeline<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("config", self.scheduler.config())
            .field("live_jobs", &self.scheduler.live_jobs())
            .finish()
    }
}

impl<C: ConstraintSynthesizer<Fr> + Send + 'static> Pipeline<C> {
    /// Starts a pipeline over `key` reserving host memory from `budget` (see
    /// [`crate::Engine::pipeline_sharing`]): partitions synthesized against `shape` (full synthesis
    /// without one), proved with `prove`'s checks.
    pub(crate) fn start(
        key: &Key,
        against: Against,
        synthesis: SynthesisOptions,
        prove: ProveOptions,
        sched: cuzk_sched::Config,
        budget: &cuzk_sched::Budget,
    ) -> Result<Self, Error> {
        let synthesis_mode = against.mode();
        let partition = partition_bytes(&against, key.domain_size());
        let stages = EngineStages::<C> {
            key: key.clone(),
            against,
            synthesis,
            prove,
            circuit: std::marker::PhantomData,
        };
        let mut sched = sched;
        let mut degradations = key.degradations();
        if let KeyInner::Cuda(keys) = &*key.inner {
            // Every GPU the key is resident on, each with one device slot per GPU worker, as many as
            // its free memory allows (the fewest any device has, for all).
            sched.devices = keys.len();
            let want = sched.gpu_workers_per_device.max(1);
            let mut slots = want;
            for d in keys.iter() {
                let fit = reserve_slots(&d.backend, &d.key, want)?;
                if fit < want {
                    let device = d.backend.gpu().info().ordinal;
                    let cut = crate::Degradation::FewerSlots { device, slots: fit, workers: want };
                    crate::degradation::warn(std::slice::from_ref(&cut));
                    degradations.push(cut);
                }
                slots = slots.min(fit);
            }
            sched.slots_per_device = slots;
        }
        // What the key holds on the host (and the pinned staging) is reserved for the pipeline's life,
        // and every pipeline's widest partition must still fit beside all such reservations.
        let fixed = key.inner.host_bytes();
        let key_bytes = budget.reserve_resident(fixed, partition).map_err(|e| match e {
            cuzk_sched::BudgetError::NoRoom { available, .. } => {
                Error::HostBudget { budget: available, key: fixed, partition }
            }
            cuzk_sched::BudgetError::TooLarge { capacity, .. } => {
                Error::HostBudget { budget: capacity, key: fixed, partition }
            }
        })?;
        sched.host_budget_bytes = budget.capacity();
        let scheduler = cuzk_sched::Scheduler::with_budget(stages, sched, budget.clone());
        Ok(Self { scheduler, synthesis_mode, key_bytes, degradations })
    }

    /// What this pipeline does less well than configured: its key's degradations, and GPUs with fewer
    /// partition slots than GPU workers (each logged as a warning when the pipeline started).
    pub fn degradations(&self) -> &[crate::Degradation] {
        &self.degradations
    }

    /// Queues a proof: its partitions, each with its blinding scalars `r` and `s`. Refused
    /// ([`Error::Submit`]) when a live job has the same id, the proof has no partitions, or the
    /// pipeline is shutting down.
    pub fn submit(
        &self,
        id: cuzk_sched::JobId,
        priority: cuzk_sched::Priority,
        deadline: Option<std::time::Instant>,
        partitions: Vec<(C, Fr, Fr)>,
    ) -> Result<ProofJob<C>, Error> {
        Ok(ProofJob(self.scheduler.submit(id, priority, deadline, partitions)?))
    }

    /// How partitions are synthesized.
    pub fn synthesis_mode(&self) -> SynthesisMode {
        self.synthesis_mode
    }

    /// Every step of every partition so far.
    pub fn timeline(&self) -> &Arc<cuzk_sched::Timeline> {
        self.scheduler.timeline()
    }

    /// The host memory budget the key and the partitions reserve from (possibly shared with other
    /// pipelines; see [`crate::Engine::pipeline_sharing`]).
    pub fn budget(&self) -> &cuzk_sched::Budget {
        self.scheduler.budget()
    }

    /// Host bytes the key holds in the budget while this pipeline lives.
    pub fn key_host_bytes(&self) -> u64 {
        self.key_bytes.bytes()
    }

    /// Host bytes each partition reserves from synthesis until its upload is done.
    pub fn partition_host_bytes(&self) -> u64 {
        self.key_bytes.partition()
    }

    /// The scheduler's layout (devices, workers, slots, budget).
    pub fn config(&self) -> &cuzk_sched::Config {
        self.scheduler.config()
    }

    /// Jobs queued or running.
    pub fn live_jobs(&self) -> usize {
        self.scheduler.live_jobs()
    }

    /// Cancels job `id` (see [`ProofJob::cancel`]); false when it is not live.
    pub fn cancel(&self, id: cuzk_sched::JobId) -> bool {
        self.scheduler.cancel(id)
    }

    /// Where job `id`'s partitions are, or `None` when it is not live.
    pub fn status(&self, id: cuzk_sched::JobId) -> Option<cuzk_sched::JobStatus> {
        self.scheduler.status(id)
    }
}

/// A submitted proof: wait for its partitions' proofs (or `.await` it), cancel it, or ask where it is.
pub struct ProofJob<C: ConstraintSynthesizer<Fr> + Send + 'static>(cuzk_sched::JobHandle<EngineStages<C>>);

impl<C: ConstraintSynthesizer<Fr> + Send + 'static> std::fmt::Debug for ProofJob<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ProofJob").field(&self.0.id()).finish()
    }
}

impl<C: ConstraintSynthesizer<Fr> + Send + 'static> ProofJob<C> {
    /// The job's id.
    pub fn id(&self) -> cuzk_sched::JobId {
        self.0.id()
    }

    /// Waits for the proofs, in partition order. A failure is [`Error::Pipeline`]; [`Error::root`]
    /// and [`Error::kind`] see through it to the partition's own error, as [`crate::Engine::prove`]
    /// would have returned it.
    pub fn wait(self) -> Result<Vec<Proof<Bls12_381>>, Error> {
        Ok(self.0.wait()?)
    }

    /// Waits at most `timeout`; on a timeout (`cuzk_sched::JobError::Timeout`) the job goes on.
    pub fn wait_timeout(&self, timeout: std::time::Duration) -> Result<Vec<Proof<Bls12_381>>, Error> {
        Ok(self.0.wait_timeout(timeout)?)
    }

    /// Cancels the job: queued partitions are dropped, running ones finish and are discarded. False
    /// when it had already finished.
    pub fn cancel(&self) -> bool {
        self.0.cancel()
    }

    /// Where each partition is, while the job is live.
    pub fn status(&self) -> Option<cuzk_sched::JobStatus> {
        self.0.status()
    }
}

impl<C: ConstraintSynthesizer<Fr> + Send + 'static> std::future::Future for ProofJob<C> {
    type Output = Result<Vec<Proof<Bls12_381>>, Error>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.get_mut().0).poll(cx).map(|r| r.map_err(Error::from))
    }
}

/// The result of a pipelined run: proofs in partition order and the run's timeline.
#[derive(Debug)]
pub struct PipelineRun {
    /// One proof per partition, in order.
    pub proofs: Vec<Proof<Bls12_381>>,
    /// How every partition was synthesized.
    pub synthesis_mode: SynthesisMode,
    /// Every step of every partition.
    pub timeline: Arc<cuzk_sched::Timeline>,
}

/// The result of several pipelined proofs: per proof, its partitions' proofs in order, and the run's
/// timeline.
#[derive(Debug)]
pub struct PipelineJobs {
    /// Per job, one proof per partition, in order.
    pub proofs: Vec<Vec<Proof<Bls12_381>>>,
    /// How every partition was synthesized.
    pub synthesis_mode: SynthesisMode,
    /// Every step of every partition of every job.
    pub timeline: Arc<cuzk_sched::Timeline>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn placed_device_spans_go_to_the_kernel_and_copy_lanes_and_host_spans_skip_the_upload() {
        let t0 = std::time::Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let spans = vec![
            (Stage::Upload, at(0), at(4)),
            (Stage::WitnessMap, at(6), at(8)),
            (Stage::MsmH, at(8), at(12)),
            (Stage::MsmA, at(12), at(13)),
        ];
        let mut log = KernelLog::default();
        log_stages(
            &mut log,
            &StageTimes { spans: spans.clone(), spans_on_device: true, ..Default::default() },
        );
        assert_eq!(log.copies, [(at(0), at(4))], "the upload is the copy stream's, not a kernel");
        assert_eq!(log.kernels, spans[1..], "the device stages keep the device's placement");

        let mut host = spans;
        host.push((Stage::Assembly, at(13), at(14)));
        let mut log = KernelLog::default();
        log_stages(
            &mut log,
            &StageTimes { spans: host.clone(), spans_on_device: false, ..Default::default() },
        );
        assert!(log.copies.is_empty(), "a host upload is not a device copy");
        assert_eq!(log.kernels, host[1..], "the scheduler's upload step already spans the host upload");
    }
}
