#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod porep;
mod poseidon;
mod sha256;
mod synthetic;

pub use porep::{LabelHash, PorepLike, PorepParams, ShapeCounts};
pub use poseidon::poseidon_config;
pub use synthetic::Synthetic;

/// Why a workload circuit could not be built with the parameters given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CircuitError {
    /// A size was asked for outside the supported range.
    #[error("log2 of the constraint count is {k}; supported are {min} to {max}")]
    LogConstraintsOutOfRange {
        /// The size asked for.
        k: u32,
        /// The smallest supported.
        min: u32,
        /// The largest supported.
        max: u32,
    },
    /// A parameter is out of its range.
    #[error("parameter `{name}` is {value}, expected {expected}")]
    BadParameter {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: u64,
        /// What is allowed.
        expected: &'static str,
    },
    /// Synthesizing the circuit (to count its constraints) failed.
    #[error("synthesis failed: {0}")]
    Synthesis(#[from] ark_relations::gr1cs::SynthesisError),
}
