#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod config;
mod engine;
mod error;
mod pipeline;
pub mod timing_key;

pub use config::{BackendKind, Config};
pub use engine::{Engine, Key, ProofReport, SynthesisMode};
pub use error::Error;
pub use pipeline::{Pipeline, PipelineJobs, PipelineRun, ProofJob};

/// The scheduler's configuration and timeline, for [`Engine::prove_pipelined`].
pub use cuzk_sched as sched;
/// Synthesis (re-exported for tools that check proofs outside the engine).
pub use cuzk_synth as synth;

pub use ark_bls12_381::{Bls12_381, Fr};
pub use ark_groth16::{Proof, ProvingKey, VerifyingKey};
pub use ark_relations::gr1cs::{ConstraintSynthesizer, SynthesisError};
pub use cuzk_groth16::{DeviceStageTimes, StageTimes};
pub use cuzk_synth::{Counts, R1csShape};

/// The proving-key store: keys and recorded R1CS shapes on disk, for [`Engine::load_key_from_store`].
pub use cuzk_keystore as keystore;

/// The layers below the facade, for users who need more than the engine.
pub mod layers {
    pub use cuzk_field as field;
    pub use cuzk_groth16 as groth16;
    pub use cuzk_synth as synth;
}

/// The built-in workload circuits.
pub use cuzk_circuits as circuits;
