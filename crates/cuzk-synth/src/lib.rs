#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod compact;
mod density;
mod profile;
mod shape;
mod synthesize;

pub use compact::{synthesize_compact, CompactWitness};
pub use density::{Density, ScalarClass, ValueSizes};
pub use profile::{RowProfile, WARP_LANES};
pub use shape::{
    synthesize_into, synthesize_witness_only, Csr, Evaluations, R1csShape, ShapeCache, ShapeProblem,
    VariableUse, Witness,
};
pub use synthesize::{synthesize, synthesize_all, Counts, SynthesisOptions, Synthesized};

/// Why a circuit could not be synthesized into a provable partition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SynthError {
    /// The circuit's own `generate_constraints` failed.
    #[error("circuit synthesis failed: {0}")]
    Circuit(#[from] ark_relations::gr1cs::SynthesisError),
    /// The witness does not satisfy a constraint.
    #[error("the witness does not satisfy constraint {index} of {num_constraints} (a·b != c)")]
    Unsatisfied {
        /// Index of the first unsatisfied R1CS constraint.
        index: usize,
        /// Number of constraints in the circuit.
        num_constraints: usize,
    },
    /// The circuit uses a generalised (non-R1CS) predicate, which Groth16 cannot prove.
    #[error(
        "the circuit enforces {constraints} constraints of predicate `{label}`; Groth16 proves only R1CS"
    )]
    UnsupportedPredicate {
        /// The predicate's label.
        label: String,
        /// Constraints under it.
        constraints: usize,
    },
    /// A circuit does not have the variable counts of the shape it is synthesized against.
    #[error("the circuit has {circuit} {what} but the recorded shape has {shape}")]
    ShapeMismatch {
        /// "instance variables" or "witness variables".
        what: &'static str,
        /// The shape's count.
        shape: usize,
        /// The circuit's count.
        circuit: usize,
    },
    /// A caller's evaluation buffer has the wrong length.
    #[error("evaluation buffer `{buffer}` holds {found} elements; the shape has {expected} rows")]
    BufferLength {
        /// "a", "b" or "c".
        buffer: &'static str,
        /// The shape's rows.
        expected: usize,
        /// The buffer's length.
        found: usize,
    },
    /// The parts of a shape are inconsistent.
    #[error("malformed R1CS shape: {0}")]
    MalformedShape(#[from] ShapeProblem),
    /// The circuit is too large for an NTT domain over Fr (2^32 rows).
    #[error("{rows} rows (constraints + instance variables) exceed the largest NTT domain, 2^32")]
    TooLarge {
        /// Constraints plus instance variables.
        rows: usize,
    },
}
