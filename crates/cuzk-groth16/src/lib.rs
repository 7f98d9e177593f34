#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod backend;
mod cpu;
mod cpu_msm;
mod key;
mod prover;
mod setup;
mod stages;
mod summary;

pub use backend::{
    Backend, BackendError, Bases, Deferred, DeviceBackend, DeviceTimer, Evaluation, MsmScalars, NttKind,
    PolyBackend, Timing,
};
pub use cpu::{CpuBackend, CpuPoly};
pub use cuzk_field::{Affine, Curve, CurveId, Projective, G1, G2};
pub use key::PreparedKey;
pub use prover::{
    prove, prove_staged, prove_staged_queued, prove_witness_queued, stage, stage_evaluated, verify,
    witness_map, witness_map_from_evaluations, EvaluatedUpload, ProveOptions, Staged,
};
pub use setup::{generate_key, setup_host_bytes, SetupError};
pub use stages::{PerStage, Stage, StageTimes, UnknownStage};
pub use summary::{quantile, Summary};

/// Why a proof could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    /// The proving key does not fit the circuit.
    #[error("the proving key does not fit the circuit: the key has {key} {what}, the circuit {circuit}")]
    KeyMismatch {
        /// What differs ("variables", "witness variables", "instance variables", "constraint rows").
        what: &'static str,
        /// The count the key was made for.
        key: usize,
        /// The circuit's count.
        circuit: usize,
    },
    /// The proving key is inconsistent in itself.
    #[error("malformed proving key: {0}")]
    MalformedKey(String),
    /// A backend operation failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The backend that evaluated the partition's constraints found one the witness does not satisfy.
    #[error("the witness does not satisfy constraint {index} of {num_constraints} (a·b != c)")]
    Unsatisfied {
        /// The first unsatisfied constraint.
        index: usize,
        /// Constraints in the circuit.
        num_constraints: usize,
    },
    /// The proof failed verification against the key's verifying key; it was not returned.
    #[error("self-check failed: the proof does not verify against the key's verifying key")]
    SelfCheckFailed,
    /// The verifier itself reported an error.
    #[error("verification error: {0}")]
    Verification(ark_relations::gr1cs::SynthesisError),
}
