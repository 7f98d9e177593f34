//! The daemon's errors by the gRPC status each maps to, and how an engine error's kind chooses one.
//! Errors keep their type through the engine (`cuzk::Error::kind`); only here, at the edge, do they
//! become a status code and a message.

use cuzk::ErrorKind;

/// Why a call failed, by the gRPC status it maps to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// The request is malformed or asks for something impossible.
    #[error("{0}")]
    InvalidArgument(String),
    /// An unknown key, job or circuit kind.
    #[error("{0}")]
    NotFound(String),
    /// A key id already in use.
    #[error("{0}")]
    AlreadyExists(String),
    /// Too many jobs, a request over the limits, or not enough memory.
    #[error("{0}")]
    ResourceExhausted(String),
    /// Waiting ran out of time; the job goes on.
    #[error("{0}")]
    WaitTimedOut(String),
    /// The job's own deadline passed before one of its partitions started.
    #[error("{0}")]
    DeadlineExceeded(String),
    /// The job was cancelled.
    #[error("{0}")]
    Cancelled(String),
    /// The daemon is shutting down, or the backend cannot serve.
    #[error("{0}")]
    Unavailable(String),
    /// Stored data (a key file in the key directory) is corrupt.
    #[error("{0}")]
    DataLoss(String),
    /// Proving failed for a reason that is not the caller's input (a device failure, a bug).
    #[error("{0}")]
    Failed(String),
}

impl ServiceError {
    /// The error for an engine failure while `doing` something, by its kind: bad input
    /// INVALID_ARGUMENT, budget or device memory RESOURCE_EXHAUSTED, cancelled CANCELLED, a device
    /// failure INTERNAL, and so on (see [`ServiceError::code`]).
    pub fn from_engine(doing: &str, e: &cuzk::Error) -> Self {
        let m = if doing.is_empty() { e.to_string() } else { format!("{doing}: {e}") };
        match e.kind() {
            ErrorKind::InvalidInput => ServiceError::InvalidArgument(m),
            ErrorKind::NotFound => ServiceError::NotFound(m),
            ErrorKind::ResourceExhausted => ServiceError::ResourceExhausted(m),
            ErrorKind::Cancelled => ServiceError::Cancelled(m),
            ErrorKind::DeadlineExceeded => ServiceError::DeadlineExceeded(m),
            ErrorKind::Unavailable => ServiceError::Unavailable(m),
            ErrorKind::Corrupt => ServiceError::DataLoss(m),
            // A device failure, or something that is nobody's input.
            _ => ServiceError::Failed(m),
        }
    }

    /// The gRPC status code this error is sent as.
    pub fn code(&self) -> tonic::Code {
        use tonic::Code;
        match self {
            ServiceError::InvalidArgument(_) => Code::InvalidArgument,
            ServiceError::NotFound(_) => Code::NotFound,
            ServiceError::AlreadyExists(_) => Code::AlreadyExists,
            ServiceError::ResourceExhausted(_) => Code::ResourceExhausted,
            ServiceError::WaitTimedOut(_) | ServiceError::DeadlineExceeded(_) => Code::DeadlineExceeded,
            ServiceError::Cancelled(_) => Code::Cancelled,
            ServiceError::Unavailable(_) => Code::Unavailable,
            ServiceError::DataLoss(_) => Code::DataLoss,
            ServiceError::Failed(_) => Code::Internal,
        }
    }
}

impl From<ServiceError> for tonic::Status {
    fn from(e: ServiceError) -> Self {
        tonic::Status::new(e.code(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    /// One engine error of each kind, as the layers below make them.
    fn of_each_kind() -> Vec<(cuzk::Error, Code)> {
        use cuzk::layers::groth16::{BackendError, ProveError};
        use cuzk::sched::{BudgetError, JobError, StageError};
        let device = |source: Box<dyn std::error::Error + Send + Sync>| {
            cuzk::Error::Prove(ProveError::Backend(BackendError::Device { op: "msm_g1", source }))
        };
        let in_pipeline = |e: cuzk::Error| {
            cuzk::Error::Pipeline(JobError::Partition { index: 2, source: StageError::new("kernels", e) })
        };
        vec![
            (cuzk::Error::ShapeUnsatisfied { index: 3, num_constraints: 9 }, Code::InvalidArgument),
            (
                in_pipeline(cuzk::Error::ShapeMismatch { what: "witness variables", shape: 1, circuit: 2 }),
                Code::InvalidArgument,
            ),
            (cuzk::Error::HostBudget { budget: 1, key: 2, partition: 3 }, Code::ResourceExhausted),
            (
                cuzk::Error::Pipeline(JobError::Budget {
                    index: 0,
                    source: BudgetError::TooLarge { requested: 5, capacity: 4 },
                }),
                Code::ResourceExhausted,
            ),
            (cuzk::Error::Pipeline(JobError::Cancelled), Code::Cancelled),
            (cuzk::Error::Pipeline(JobError::DeadlineExceeded { index: 1 }), Code::DeadlineExceeded),
            (cuzk::Error::Pipeline(JobError::ShutDown), Code::Unavailable),
            (
                cuzk::Error::BackendUnavailable { backend: cuzk::BackendKind::Cuda, reason: "none".into() },
                Code::Unavailable,
            ),
            (in_pipeline(device("the kernel failed".into())), Code::Internal),
            (
                cuzk::Error::Store(cuzk::keystore::Error::ChecksumMismatch { stored: 1, computed: 2 }),
                Code::DataLoss,
            ),
            (cuzk::Error::Store(cuzk::keystore::Error::NotFound { path: "k".into() }), Code::NotFound),
            (
                cuzk::Error::Pipeline(JobError::Partition {
                    index: 0,
                    source: StageError::new("synthesis", cuzk::sched::Panicked { message: "oops".into() }),
                }),
                Code::Internal,
            ),
        ]
    }

    #[test]
    fn every_engine_error_kind_maps_to_its_grpc_code() {
        for (e, code) in of_each_kind() {
            let status = tonic::Status::from(ServiceError::from_engine("proving", &e));
            assert_eq!(status.code(), code, "{e} ({:?})", e.kind());
            assert!(status.message().starts_with("proving: "), "{}", status.message());
        }
    }
}
