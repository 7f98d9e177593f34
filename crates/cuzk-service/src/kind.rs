//! What a circuit kind is: how a request's bytes become a key and partition circuits (the traits
//! [`CircuitKind`] and [`KindKey`]), and the boxed circuit every kind's partitions share.

use ark_bls12_381::Fr;
use ark_relations::gr1cs::{ConstraintSynthesizer, ConstraintSystemRef, SynthesisError};

/// Why a circuit kind refused key parameters or a partition's input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KindError {
    /// The bytes are not the JSON the kind reads.
    #[error("{what}: {source}")]
    Parse {
        /// What was being read ("synthetic key parameters", ...).
        what: &'static str,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A size outside what the kind (or the daemon's `max_log_rows`) allows.
    #[error("{what} {value} is outside {min}..={max}")]
    OutOfRange {
        /// The value's name.
        what: &'static str,
        /// The value given.
        value: u64,
        /// The least allowed.
        min: u64,
        /// The most allowed.
        max: u64,
    },
    /// The circuit refused the parameters or the input (its own error).
    #[error("{0}")]
    Circuit(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl KindError {
    /// A circuit's refusal: an error of its own, or a message.
    pub fn circuit(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        KindError::Circuit(e.into())
    }
}

/// A circuit behind a box, so partitions of any kind share one pipeline type.
pub struct BoxedCircuit(Box<dyn FnOnce(ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> + Send>);

impl BoxedCircuit {
    /// Boxes `circuit`.
    pub fn new<C: ConstraintSynthesizer<Fr> + Send + 'static>(circuit: C) -> Self {
        Self(Box::new(move |cs| circuit.generate_constraints(cs)))
    }
}

impl std::fmt::Debug for BoxedCircuit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BoxedCircuit")
    }
}

impl ConstraintSynthesizer<Fr> for BoxedCircuit {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        (self.0)(cs)
    }
}

/// A circuit kind that requests can name.
pub trait CircuitKind: Send + Sync + 'static {
    /// The name requests use.
    fn name(&self) -> &str;
    /// Parses `LoadKey` parameters. `max_log_rows` bounds the size a request may ask for.
    fn key(&self, params: &[u8], max_log_rows: u32) -> Result<Box<dyn KindKey>, KindError>;
}

/// A kind's key: its shape and its partitions.
pub trait KindKey: Send + Sync + 'static {
    /// The key-store name of the shape (ASCII letters, digits, `.`, `_`, `-`; checked by the store).
    fn shape_id(&self) -> String;
    /// A circuit of the shape, to generate the key and record the shape.
    fn template(&self) -> Result<BoxedCircuit, KindError>;
    /// The seed for generating the key, so a key directory can be rebuilt identically.
    fn keygen_seed(&self) -> u64;
    /// Rows of the key's circuit (constraints plus public inputs; at least the real count, a power
    /// of two is fine): what generating its key will need of the host budget is reckoned from it
    /// before generation starts.
    fn rows(&self) -> u64;
    /// One partition's circuit from its input bytes.
    fn partition(&self, input: &[u8]) -> Result<BoxedCircuit, KindError>;
    /// The partition's public inputs (for clients that check proofs; the daemon checks every proof
    /// against the key itself).
    fn public_inputs(&self, input: &[u8]) -> Result<Vec<Fr>, KindError>;

    /// A proof's circuits from its inputs, one per partition proved. By default one input is one
    /// partition; a kind whose request carries several partitions at once (a Filecoin C1 output holds
    /// all of a sector's) expands it here.
    fn circuits(&self, inputs: &[Vec<u8>]) -> Result<Vec<BoxedCircuit>, KindError> {
        inputs
            .iter()
            .enumerate()
            .map(|(i, input)| {
                self.partition(input).map_err(|e| KindError::circuit(format!("partition {i}: {e}")))
            })
            .collect()
    }

    /// The key itself when the kind reads it from somewhere else than the daemon's key directory
    /// (Filecoin's parameter files); `None`, the default, for keys the key directory holds (and the
    /// daemon may generate).
    fn resident_key(&self, _engine: &cuzk::Engine) -> Option<Result<cuzk::Key, KindError>> {
        None
    }

    /// The kind's own check of a finished proof (Filecoin's verifier), after the daemon's check of
    /// every partition against the key: an error fails the proof. By default there is none.
    fn check(&self, _inputs: &[Vec<u8>], _proofs: &[Vec<u8>]) -> Result<(), KindError> {
        Ok(())
    }
}
