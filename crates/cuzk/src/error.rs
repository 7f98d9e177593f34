//! The facade's error type.

use cuzk_groth16::ProveError;
use cuzk_synth::SynthError;

/// Everything that can go wrong in the engine. No proof is ever returned alongside an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The requested backend cannot be used here.
    #[error("{backend} backend unavailable: {reason}")]
    BackendUnavailable {
        /// The backend asked for.
        backend: crate::BackendKind,
        /// Why it cannot be used.
        reason: String,
    },
    /// The circuit failed to synthesize, or its witness does not satisfy it.
    #[error(transparent)]
    Synthesis(#[from] SynthError),
    /// Proving failed: a key that does not fit, a backend failure, or a failed self-check.
    #[error(transparent)]
    Prove(#[from] ProveError),
    /// A pipelined job failed: the partition and stage are named.
    #[error("pipeline: {0}")]
    Pipeline(#[from] cuzk_sched::JobError),
    /// The scheduler refused a job.
    #[error("pipeline: {0}")]
    Submit(#[from] cuzk_sched::SubmitError),
    /// A batch was given a different number of `(r, s)` pairs than partitions.
    #[error("{pairs} (r, s) pairs given for {partitions} partitions")]
    RandomnessCount {
        /// Partitions in the batch.
        partitions: usize,
        /// Pairs given.
        pairs: usize,
    },
    /// One partition of a multi-partition proof failed; no proof of the batch is returned.
    #[error("partition {index} of {count}: {source}")]
    Partition {
        /// The failed partition.
        index: usize,
        /// Partitions in the batch.
        count: usize,
        /// What went wrong.
        #[source]
        source: Box<Error>,
    },
}
