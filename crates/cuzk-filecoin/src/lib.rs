#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

/// Calls `$f::<Tree>(args)` with the Merkle tree shape of a sector size, or fails naming the size.
macro_rules! with_tree {
    ($size:expr, $f:ident, $($arg:expr),* $(,)?) => {{
        use filecoin_proofs::constants as fc;
        match $size {
            fc::SECTOR_SIZE_2_KIB => $f::<fc::SectorShape2KiB>($($arg),*),
            fc::SECTOR_SIZE_8_MIB => $f::<fc::SectorShape8MiB>($($arg),*),
            fc::SECTOR_SIZE_512_MIB => $f::<fc::SectorShape512MiB>($($arg),*),
            fc::SECTOR_SIZE_32_GIB => $f::<fc::SectorShape32GiB>($($arg),*),
            fc::SECTOR_SIZE_64_GIB => $f::<fc::SectorShape64GiB>($($arg),*),
            other => Err($crate::Error::SectorSize(other)),
        }
    }};
}

pub mod baseline;
pub mod circuit;
pub mod field;
mod keys;
mod kinds;
pub mod params;
mod partition;
mod porep;
mod post;
pub mod request;
mod sector;
pub mod witness;

pub use circuit::{Bellpepper, Bits, CircuitCounts, Densities, Report};
pub use keys::{ensure_parameters, record_shape, FilecoinKey, KeyLoad};
pub use kinds::{FilecoinCircuit, ProofType, Shape};
pub use params::{read_params, read_verifying_key, write_params, ParamsError};
pub use partition::SealPartition;
pub use porep::{decode_c1, seal_circuits, seal_commit_phase2, verify_seal};
pub use post::{post, post_circuits, Partitions};
pub use sector::{random_field_bytes, SectorInfo, TestSector};
pub use witness::{Witness, Witnesses};

/// The Filecoin proofs API's types a caller of this crate needs.
pub use filecoin_proofs::PoStType;
pub use filecoin_proofs_api::{
    seal::SealCommitPhase1Output, ChallengeSeed, ProverId, RegisteredPoStProof, RegisteredSealProof, SectorId,
};

/// Why a Filecoin proof could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter file is missing, unreadable or not this circuit's.
    #[error(transparent)]
    Params(#[from] ParamsError),
    /// The engine failed (synthesis, the key, the backend, the self-check).
    #[error(transparent)]
    Engine(#[from] cuzk::Error),
    /// A partition's circuit failed in bellpepper's own code.
    #[error("{}circuit: {message}", partition.map(|k| format!("partition {k}: ")).unwrap_or_default())]
    Circuit {
        /// The partition, when known.
        partition: Option<usize>,
        /// Bellpepper's message, or the engine's.
        message: String,
    },
    /// An input could not be decoded.
    #[error("cannot decode the {what}: {message}")]
    Decode {
        /// What was being decoded.
        what: &'static str,
        /// Why not.
        message: String,
    },
    /// An input decodes but is not acceptable.
    #[error("{0}")]
    BadInput(String),
    /// A request for another proof type than the key's.
    #[error("the key is for {key}, the request for {request}")]
    WrongKey {
        /// The key's proof type.
        key: ProofType,
        /// The request's.
        request: ProofType,
    },
    /// No circuit of this sector size.
    #[error("no Filecoin circuit for sectors of {0} bytes (2 KiB, 8 MiB, 512 MiB, 32 GiB and 64 GiB exist)")]
    SectorSize(u64),
    /// Something Filecoin supports and cuzk does not.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Filecoin's own code failed.
    #[error("filecoin-proofs: {0}")]
    Filecoin(String),
    /// Filecoin's verifier refused the proof.
    #[error("{0}")]
    Rejected(String),
    /// The shape recording produced no densities (a bug: recording always records them).
    #[error("the circuit's densities were not recorded")]
    NotRecorded,
}

impl Error {
    /// An engine error from a bellpepper circuit, with bellpepper's own message when it left one.
    pub(crate) fn circuit(report: &Report, partition: Option<usize>, e: cuzk::Error) -> Self {
        match report.error() {
            Some(message) => Self::Circuit { partition, message },
            None => Self::Engine(e),
        }
    }
}

/// Proves `circuits` (one per partition, in order) with `key`: the proofs' bytes, 192 per partition,
/// one after another, as Filecoin writes them. `blinding` gives `(r, s)` per partition (a test's, to
/// compare with bellperson); `None` draws fresh ones from the operating system.
pub fn prove_circuits(
    engine: &cuzk::Engine,
    key: &FilecoinKey,
    circuits: Vec<FilecoinCircuit>,
    blinding: Option<Vec<(blstrs::Scalar, blstrs::Scalar)>>,
) -> Result<Vec<u8>, Error> {
    prove_circuits_report(engine, key, circuits, blinding).map(|(bytes, _)| bytes)
}

/// As [`prove_circuits`], with each partition's report (synthesis, the prover's stages, GPU time).
pub fn prove_circuits_report(
    engine: &cuzk::Engine,
    key: &FilecoinKey,
    circuits: Vec<FilecoinCircuit>,
    blinding: Option<Vec<(blstrs::Scalar, blstrs::Scalar)>>,
) -> Result<(Vec<u8>, Vec<cuzk::ProofReport>), Error> {
    let wrapped: Vec<Bellpepper<FilecoinCircuit>> = circuits.into_iter().map(Bellpepper::new).collect();
    let reports: Vec<Report> = wrapped.iter().map(Bellpepper::report).collect();
    let blinding = match blinding {
        None => porep::blinding(wrapped.len()),
        Some(given) if given.len() == wrapped.len() => {
            given.iter().map(|(r, s)| (field::to_ark(r), field::to_ark(s))).collect()
        }
        Some(given) => {
            return Err(Error::BadInput(format!(
                "{} blinding pairs for {} partitions",
                given.len(),
                wrapped.len()
            )))
        }
    };
    let proofs = engine.prove_partitions_report(&key.key, wrapped, blinding).map_err(|e| {
        match reports.iter().enumerate().find_map(|(k, r)| r.error().map(|m| (k, m))) {
            Some((k, message)) => Error::Circuit { partition: Some(k), message },
            None => Error::Engine(e),
        }
    })?;
    let mut out = Vec::with_capacity(192 * proofs.len());
    for p in &proofs {
        porep::proof_bytes(&p.proof, &mut out)?;
    }
    Ok((out, proofs))
}
