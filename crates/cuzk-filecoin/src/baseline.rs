//! Bellperson's own prover over the same parameter file and circuits: the oracle the bridge's proofs
//! are compared with, and the baseline of its benchmarks.

use std::time::{Duration, Instant};

use blstrs::{Bls12, Scalar};

use crate::{Error, FilecoinCircuit, ProofType};

/// Bellperson's proofs and what they took.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// The proofs, 192 bytes per partition.
    pub proofs: Vec<u8>,
    /// Reading the `.params` file with bellperson's reader (`Parameters::read`, unchecked, as Filecoin
    /// reads it).
    pub read: Duration,
    /// `create_proof_batch`: synthesis and proving of every partition.
    pub prove: Duration,
}

/// Proves `circuits` with bellperson's `create_proof_batch` and the parameters of `proof`, with the
/// given `(r, s)` per partition.
pub fn bellperson(
    proof: ProofType,
    circuits: Vec<FilecoinCircuit>,
    blinding: &[(Scalar, Scalar)],
) -> Result<Baseline, Error> {
    let path = proof.params_path()?;
    let t = Instant::now();
    let file = std::fs::File::open(&path).map_err(|e| Error::BadInput(format!("{}: {e}", path.display())))?;
    let params = bellperson::groth16::Parameters::<Bls12>::read(
        std::io::BufReader::with_capacity(1 << 22, file),
        false,
    )
    .map_err(|e| Error::Filecoin(format!("bellperson reads {}: {e}", path.display())))?;
    let read = t.elapsed();
    let (r, s) = blinding.iter().copied().unzip();
    let t = Instant::now();
    let proofs = bellperson::groth16::create_proof_batch(circuits, &params, r, s)
        .map_err(|e| Error::Filecoin(format!("bellperson's prover: {e}")))?;
    let prove = t.elapsed();
    let mut out = Vec::with_capacity(192 * proofs.len());
    for p in &proofs {
        p.write(&mut out).map_err(|e| Error::Filecoin(format!("writing bellperson's proof: {e}")))?;
    }
    Ok(Baseline { proofs: out, read, prove })
}

/// Fresh `(r, s)` for `n` partitions, to give cuzk and bellperson the same blinding.
pub fn random_blinding(n: usize) -> Vec<(Scalar, Scalar)> {
    use ff::Field;
    let mut rng = rand::rngs::OsRng;
    (0..n).map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng))).collect()
}
