//! The built-in workload circuits the commands prove: a circuit chosen by name and size, and its
//! partitions.

use ark_bls12_381::Fr;
use ark_relations::gr1cs::{ConstraintSynthesizer, ConstraintSystemRef, SynthesisError};
use cuzk_circuits::{PorepLike, Synthetic};

use crate::flags::{CircuitChoice, CircuitName, Workload};

/// One partition of a built-in circuit.
#[derive(Clone, Copy)]
pub(crate) enum Partition {
    Porep(PorepLike),
    Synthetic(Synthetic),
}

impl ConstraintSynthesizer<Fr> for Partition {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        match self {
            Self::Porep(c) => c.generate_constraints(cs),
            Self::Synthetic(c) => c.generate_constraints(cs),
        }
    }
}

impl Partition {
    /// The circuit's recorded R1CS shape: a porep-like circuit's tiled from two challenges (seconds
    /// where recording the whole circuit takes minutes; see `porep_shape`), others recorded.
    pub(crate) fn shape(&self) -> Result<cuzk::R1csShape, String> {
        match self {
            Partition::Porep(c) => crate::porep_shape::porep_shape(c.params),
            Partition::Synthetic(c) => cuzk::R1csShape::record(*c).map_err(|e| e.to_string()),
        }
    }

    /// The circuit's constraints.
    pub(crate) fn constraints(&self) -> Result<usize, String> {
        match self {
            Partition::Porep(c) => c.params.counts().map(|n| n.constraints).map_err(|e| e.to_string()),
            Partition::Synthetic(c) => Ok(c.constraints),
        }
    }
}

impl CircuitName {
    /// "porep-like" or "synthetic".
    pub(crate) fn name(self) -> &'static str {
        match self {
            CircuitName::PorepLike => "porep-like",
            CircuitName::Synthetic => "synthetic",
        }
    }
}

impl CircuitChoice {
    /// Partition `p` of the workload.
    pub(crate) fn partition(&self, p: u64) -> Result<Partition, String> {
        Ok(match self.circuit {
            CircuitName::PorepLike => Partition::Porep(
                PorepLike::for_log_constraints(self.log_constraints, self.seed, p)
                    .map_err(|e| e.to_string())?,
            ),
            CircuitName::Synthetic => Partition::Synthetic(
                Synthetic::with_log_rows(self.log_constraints, self.seed.wrapping_add(p))
                    .with_bit_share(self.bit_share),
            ),
        })
    }

    /// "porep-like" or "synthetic".
    pub(crate) fn name(&self) -> &'static str {
        self.circuit.name()
    }

    /// The key-store name of the shape.
    pub(crate) fn shape_id(&self) -> Result<String, String> {
        Ok(match self.partition(0)? {
            Partition::Porep(c) => c.params.shape_id(),
            Partition::Synthetic(c) => c.shape_id(),
        })
    }
}

impl Workload {
    /// The circuit, size and seed of the workload.
    pub(crate) fn choice(&self) -> CircuitChoice {
        CircuitChoice {
            circuit: self.circuit,
            log_constraints: self.log_constraints,
            bit_share: self.bit_share,
            seed: self.seed,
        }
    }

    /// The workload's partitions, proof after proof (partition 0 also gives the key its shape).
    pub(crate) fn partitions(&self) -> Result<Vec<Partition>, String> {
        (0..self.proofs * self.partitions).map(|i| self.choice().partition(i)).collect()
    }
}
