//! Proving through the scheduler: partitions synthesized by a pool of CPU workers while the backend
//! proves the ones already synthesized, with a timeline of every step.
//!
//! "Upload" hands the synthesized partition over and the "kernels" step (witness map, MSMs, assembly,
//! self-check) runs under the scheduler's kernel lock on the key's backend: on the CPU one partition
//! proves at a time with all cores; on CUDA the whole proof runs in that step (its uploads included),
//! not yet split into a separate upload stage. Synthesis of the next partitions overlaps it either way.

use std::marker::PhantomData;
use std::sync::Arc;

use ark_bls12_381::{Bls12_381, Fr};
use ark_groth16::Proof;
use ark_relations::gr1cs::ConstraintSynthesizer;
use cuzk_groth16::{ProveOptions, StageTimes};
use cuzk_sched::{KernelLog, PartitionRef, Placement, StageError, Stages};
use cuzk_synth::{R1csShape, SynthesisOptions, Synthesized};

use crate::engine::synthesize_partition;
use crate::{Key, SynthesisMode};

/// The engine's partition stages for the scheduler.
pub(crate) struct EngineStages<C> {
    pub(crate) key: Key,
    /// The shape to synthesize witness-only against; `None` for full synthesis.
    pub(crate) shape: Option<Arc<R1csShape>>,
    pub(crate) synthesis: SynthesisOptions,
    pub(crate) prove: ProveOptions,
    pub(crate) circuit: PhantomData<fn(C)>,
}

/// A partition in flight: its synthesized data and blinding scalars.
pub(crate) struct Partition {
    syn: Synthesized,
    r: Fr,
    s: Fr,
}

fn stage_error(stage: &'static str) -> impl Fn(String) -> StageError {
    move |m| StageError::new(stage, m)
}

/// Logs the prover's phases back to back, as they ran: the witness map, the MSMs (five of them,
/// concurrent, so their phase's wall time), then assembly and the self-check.
fn log_stages(log: &mut KernelLog, t: &StageTimes) {
    let msms = t.total.saturating_sub(t.witness_map + t.assemble + t.verify);
    for (name, d) in [("witness_map", t.witness_map), ("msms", msms), ("assembly", t.assemble + t.verify)] {
        log.record(name, d.as_secs_f64());
    }
}

impl<C: ConstraintSynthesizer<Fr> + Send + 'static> Stages for EngineStages<C> {
    type Input = (C, Fr, Fr);
    type Synthesized = Partition;
    type Staged = Partition;
    type Computed = Proof<Bls12_381>;
    type Output = Proof<Bls12_381>;

    fn host_bytes(&self, _input: &Self::Input) -> u64 {
        // a, b, c and z: four vectors of at most the domain size, 32 bytes per element.
        (self.key.domain_size() as u64).saturating_mul(4 * 32)
    }

    fn synthesize(&self, _part: PartitionRef, (circuit, r, s): Self::Input) -> Result<Partition, StageError> {
        let (syn, _mode) = synthesize_partition(self.shape.as_deref(), circuit, &self.synthesis)
            .map_err(|e| stage_error("synthesis")(e.to_string()))?;
        Ok(Partition { syn, r, s })
    }

    fn upload(&self, _part: PartitionRef, _at: Placement, data: Partition) -> Result<Partition, StageError> {
        Ok(data)
    }

    fn kernels(
        &self,
        _part: PartitionRef,
        _at: Placement,
        p: Partition,
        log: &mut KernelLog,
    ) -> Result<Proof<Bls12_381>, StageError> {
        let (proof, times) = self
            .key
            .inner
            .prove(&p.syn, p.r, p.s, &self.prove)
            .map_err(|e| stage_error("kernels")(e.to_string()))?;
        log_stages(log, &times);
        Ok(proof)
    }

    fn finish(&self, _part: PartitionRef, proof: Proof<Bls12_381>) -> Result<Proof<Bls12_381>, StageError> {
        Ok(proof)
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
