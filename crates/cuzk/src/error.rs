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
    /// The host memory budget cannot hold what the key keeps on the host and one partition.
    #[error(
        "the host memory budget has {budget} bytes for this key, too few for its host-resident bases and \
         pinned buffers ({key} bytes) plus one partition ({partition} bytes): raise host_budget_bytes \
         (or, with a shared budget, drop another pipeline)"
    )]
    HostBudget {
        /// Bytes of the budget left for the key and one partition: its capacity, less what other
        /// pipelines' keys hold and the room their wider partitions need.
        budget: u64,
        /// Bytes the key holds on the host.
        key: u64,
        /// Bytes of one synthesized partition.
        partition: u64,
    },
    /// A key prepared by one backend given to an engine on another.
    #[error("the key was loaded by a {key} engine; this engine proves on {engine}: load the key into it")]
    KeyBackend {
        /// The key's backend.
        key: &'static str,
        /// The engine's backend.
        engine: &'static str,
    },
    /// The circuit failed to synthesize, or its witness does not satisfy it.
    #[error(transparent)]
    Synthesis(#[from] SynthError),
    /// Witness-only synthesis: the circuit's variable counts are not those of the key's recorded shape.
    #[error(
        "the circuit does not have the key's recorded R1CS shape: it has {circuit} {what}, the shape has \
         {shape}; prove it with a key made for its own shape"
    )]
    ShapeMismatch {
        /// "instance variables" or "witness variables".
        what: &'static str,
        /// The shape's count.
        shape: usize,
        /// The circuit's count.
        circuit: usize,
    },
    /// Witness-only synthesis: the circuit's witness does not satisfy a constraint of the key's recorded
    /// shape. Either the circuit is of another shape with the same variable counts, or its witness is
    /// wrong; no proof is made either way.
    #[error(
        "the circuit's witness does not satisfy constraint {index} of {num_constraints} of the key's \
         recorded R1CS shape (a·b != c): the circuit is not of the key's shape, or its witness is wrong"
    )]
    ShapeUnsatisfied {
        /// Index of the first unsatisfied constraint of the shape.
        index: usize,
        /// Constraints in the shape.
        num_constraints: usize,
    },
    /// Loading a key or a shape from a key store failed.
    #[error("key store: {0}")]
    Store(#[from] cuzk_keystore::Error),
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
