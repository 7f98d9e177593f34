//! Synthesizing a partition for a key: witness-only against the key's recorded shape when it has one,
//! in full otherwise.

use std::sync::Arc;

use ark_bls12_381::Fr;
use ark_relations::gr1cs::ConstraintSynthesizer;
use cuzk_synth::{Counts, R1csShape, SynthError, SynthesisOptions, Synthesized};

use crate::key::DeviceShapes;
use crate::Error;

/// How a partition's circuit was synthesized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SynthesisMode {
    /// The circuit built its own R1CS matrices (`cuzk_synth::synthesize`): the key carries no recorded
    /// shape, or [`Config::witness_only`](crate::Config::witness_only) is off.
    Full,
    /// The circuit only assigned its variables; `a`, `b`, `c` came from the key's recorded shape
    /// (`cuzk_synth::synthesize_witness_only`), always with the satisfaction check.
    WitnessOnly,
    /// Witness-only, and only the compact assignment left the host: `a`, `b`, `c` were evaluated and
    /// checked on the GPU against the key's resident shape ([`crate::Config::evaluate_on_device`]).
    Compact,
}

impl SynthesisMode {
    /// "full" or "witness-only".
    pub fn name(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::WitnessOnly => "witness-only",
            Self::Compact => "compact",
        }
    }
}

impl std::fmt::Display for SynthesisMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Synthesizes one partition compactly for a shape of `counts` (see [`SynthesisMode::Compact`]), with
/// the engine's errors for a circuit of other counts.
pub(crate) fn synthesize_compact<C: ConstraintSynthesizer<Fr>>(
    counts: Counts,
    circuit: C,
) -> Result<cuzk_synth::CompactWitness, Error> {
    match cuzk_synth::synthesize_compact(circuit, counts) {
        Ok(w) => Ok(w),
        Err(SynthError::ShapeMismatch { what, shape, circuit }) => {
            Err(Error::ShapeMismatch { what, shape, circuit })
        }
        Err(other) => Err(other.into()),
    }
}

/// What a key's partitions are synthesized against, as an engine sees the key.
#[derive(Clone)]
pub(crate) enum Against {
    /// Nothing: full synthesis (no shape, or witness-only synthesis turned off).
    Nothing,
    /// The shape the host keeps: witness-only synthesis, `a`, `b`, `c` evaluated on the host.
    Host(Arc<R1csShape>),
    /// The shape resident on the key's GPUs: compact synthesis, for which the host needs only the
    /// shape's counts.
    Device {
        /// The shape's counts.
        counts: Counts,
        /// The shape on each GPU.
        shapes: DeviceShapes,
    },
}

impl Against {
    /// The synthesis mode this gives.
    pub(crate) fn mode(&self) -> SynthesisMode {
        match self {
            Against::Nothing => SynthesisMode::Full,
            Against::Host(_) => SynthesisMode::WitnessOnly,
            Against::Device { .. } => SynthesisMode::Compact,
        }
    }
}

/// Synthesizes one partition: witness-only against `shape` when there is one, in full otherwise.
///
/// Witness-only synthesis always checks that the witness satisfies the shape's constraints, whatever
/// `options` say: the matrices are the key's, not the circuit's, so this check is what refuses a
/// circuit of another shape with equal variable counts.
pub(crate) fn synthesize_partition<C: ConstraintSynthesizer<Fr>>(
    shape: Option<&R1csShape>,
    circuit: C,
    options: &SynthesisOptions,
) -> Result<(Synthesized, SynthesisMode), Error> {
    let Some(shape) = shape else {
        return Ok((cuzk_synth::synthesize(circuit, options)?, SynthesisMode::Full));
    };
    let checked = SynthesisOptions { check_satisfied: true };
    match cuzk_synth::synthesize_witness_only(circuit, shape, &checked) {
        Ok((syn, _peak)) => Ok((syn, SynthesisMode::WitnessOnly)),
        Err(SynthError::ShapeMismatch { what, shape, circuit }) => {
            Err(Error::ShapeMismatch { what, shape, circuit })
        }
        Err(SynthError::Unsatisfied { index, num_constraints }) => {
            Err(Error::ShapeUnsatisfied { index, num_constraints })
        }
        Err(other) => Err(other.into()),
    }
}
