//! The facade's error type, and its kinds: what a caller (a daemon turning errors into status
//! codes, say) decides on without reading messages.

use cuzk_groth16::{BackendError, ProveError};
use cuzk_sched::{JobError, SubmitError};
use cuzk_synth::SynthError;

/// What kind of failure an [`Error`] is, whichever layer it came from ([`Error::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller's input is wrong: a witness that does not satisfy its circuit, a circuit or key of
    /// another shape, a malformed key, a bad argument.
    InvalidInput,
    /// Something asked for does not exist (a key file).
    NotFound,
    /// Not enough memory: the host budget, or device memory.
    ResourceExhausted,
    /// The proof was cancelled.
    Cancelled,
    /// A deadline passed, or waiting for a proof timed out.
    DeadlineExceeded,
    /// The engine cannot serve now: the backend asked for is missing, or the pipeline is shutting down.
    Unavailable,
    /// A device operation failed (a CUDA call, a kernel).
    Device,
    /// Stored data is corrupt (a key or shape file that fails its checks).
    Corrupt,
    /// A failure that is nobody's input: a step that panicked, a proof that failed its self-check, an
    /// I/O error.
    Internal,
}

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

impl Error {
    /// The engine error at the bottom of this one: the partition's own error for a batch's failed
    /// partition ([`Error::Partition`]) or a pipeline's ([`Error::Pipeline`], whose step kept the
    /// error it failed with), else this error itself. A pipeline's failure is thus as structured as
    /// the same failure from [`crate::Engine::prove`].
    pub fn root(&self) -> &Error {
        match self {
            Error::Partition { source, .. } => source.root(),
            Error::Pipeline(JobError::Partition { source, .. }) => match source.downcast_ref::<Error>() {
                Some(inner) => inner.root(),
                None => self,
            },
            _ => self,
        }
    }

    /// What kind of failure this is (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        use ErrorKind as K;
        match self.root() {
            Error::BackendUnavailable { .. } => K::Unavailable,
            Error::HostBudget { .. } => K::ResourceExhausted,
            Error::KeyBackend { .. } | Error::RandomnessCount { .. } => K::InvalidInput,
            Error::ShapeMismatch { .. } | Error::ShapeUnsatisfied { .. } => K::InvalidInput,
            Error::Synthesis(_) => K::InvalidInput,
            Error::Store(e) => store_kind(e),
            Error::Prove(e) => prove_kind(e),
            Error::Pipeline(e) => job_kind(e),
            Error::Submit(SubmitError::ShutDown) => K::Unavailable,
            Error::Submit(_) => K::InvalidInput,
            Error::Partition { source, .. } => source.kind(),
        }
    }
}

fn store_kind(e: &cuzk_keystore::Error) -> ErrorKind {
    use cuzk_keystore::Error as S;
    match e {
        S::InvalidShapeId { .. } => ErrorKind::InvalidInput,
        S::NotFound { .. } => ErrorKind::NotFound,
        S::Io { .. } | S::Stream { .. } | S::NotAFile { .. } => ErrorKind::Internal,
        _ => ErrorKind::Corrupt,
    }
}

impl Error {
    /// A prover's error as the engine reports it: a constraint the device's evaluation found
    /// unsatisfied is the key shape's [`Error::ShapeUnsatisfied`], as the host's evaluation reports it.
    pub(crate) fn from_prove(e: ProveError) -> Self {
        match e {
            ProveError::Unsatisfied { index, num_constraints } => {
                Error::ShapeUnsatisfied { index, num_constraints }
            }
            other => Error::Prove(other),
        }
    }
}

fn prove_kind(e: &ProveError) -> ErrorKind {
    match e {
        ProveError::KeyMismatch { .. } | ProveError::MalformedKey(_) | ProveError::Unsatisfied { .. } => {
            ErrorKind::InvalidInput
        }
        ProveError::Backend(BackendError::Device { source, .. }) => device_kind(source.as_ref()),
        ProveError::Backend(_) => ErrorKind::InvalidInput,
        ProveError::SelfCheckFailed | ProveError::Verification(_) => ErrorKind::Internal,
    }
}

/// A device failure, or device memory that ran out.
fn device_kind(e: &(dyn std::error::Error + 'static)) -> ErrorKind {
    match e.downcast_ref::<cuzk_cuda::CudaError>() {
        Some(e) if e.is_out_of_memory() => ErrorKind::ResourceExhausted,
        Some(cuzk_cuda::CudaError::NoDriver | cuzk_cuda::CudaError::NoDevice(_)) => ErrorKind::Unavailable,
        _ => ErrorKind::Device,
    }
}

fn job_kind(e: &JobError) -> ErrorKind {
    match e {
        // A cause that is an engine error is classified by `Error::root`; what is left here is a
        // step's panic, or a cause from outside the engine.
        JobError::Partition { .. } => ErrorKind::Internal,
        JobError::Budget { .. } => ErrorKind::ResourceExhausted,
        JobError::Cancelled => ErrorKind::Cancelled,
        JobError::DeadlineExceeded { .. } | JobError::Timeout => ErrorKind::DeadlineExceeded,
        JobError::ShutDown => ErrorKind::Unavailable,
    }
}
