#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod config;
mod degradation;
mod engine;
mod error;
mod key;
mod partition;
mod pipeline;

pub use config::{BackendKind, Config, MulUnits, UnknownMulUnits};
pub use degradation::Degradation;
pub use engine::{Engine, ProofReport};
pub use error::{Error, ErrorKind};
pub use key::{Key, KeyMemory};
pub use partition::SynthesisMode;
pub use pipeline::{Pipeline, PipelineJobs, PipelineRun, ProofJob};

/// The proving-key store: keys and recorded R1CS shapes on disk, for [`Engine::load_key_from_store`].
pub use cuzk_keystore as keystore;
/// The scheduler: its configuration, job ids and priorities, the host budget, the timeline and its
/// report.
pub use cuzk_sched as sched;
/// Synthesis: recorded R1CS shapes, synthesized partitions (for tools that check proofs outside the
/// engine).
pub use cuzk_synth as synth;

pub use ark_bls12_381::{Bls12_381, Fr};
pub use ark_groth16::{Proof, ProvingKey, VerifyingKey};
pub use ark_relations::gr1cs::{ConstraintSynthesizer, SynthesisError};
pub use cuzk_groth16::{
    generate_key, quantile, setup_host_bytes, PerStage, SetupError, Stage, StageTimes, Summary,
};
pub use cuzk_synth::{Counts, R1csShape};

/// The layers below the facade, for users who need more than the engine.
pub mod layers {
    pub use cuzk_field as field;
    pub use cuzk_groth16 as groth16;
}
