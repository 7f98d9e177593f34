//! PoRep commit phase 2: a C1 output's vanilla proofs to the sector's SNARK proof.
//!
//! The circuits are filecoin-proofs' own (`StackedCompound::circuit`, one per partition, public inputs
//! `{replica_id, {comm_d, comm_r}, seed}`), proved by cuzk with fresh blinding and written one after
//! another, 192 bytes each, as Filecoin writes them. Before the proof is returned, Filecoin's
//! `verify_seal` must accept it for the given prover id and sector id: a C1 output of another sector
//! is refused there.

use ark_ff::UniformRand;
use ark_serialize::CanonicalSerialize;
use blstrs::Scalar;
use cuzk::{Engine, Fr};
use filecoin_hashers::Domain;
use filecoin_proofs::constants::DefaultPieceHasher;
use filecoin_proofs::{as_safe_commitment, DefaultPieceDomain};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::{ProverId, SectorId};
use storage_proofs_porep::stacked;

use crate::kinds::{FilecoinCircuit, Shape};
use crate::partition::{Commitments, SealPartition};
use crate::{prove_circuits, Error, FilecoinKey, ProofType};

/// Decodes a C1 output as the Filecoin proofs API (and lotus, and curio) write it: serde JSON.
pub fn decode_c1(json: &[u8]) -> Result<SealCommitPhase1Output, Error> {
    serde_json::from_slice(json)
        .map_err(|e| Error::Decode { what: "C1 output (JSON)", message: e.to_string() })
}

/// Proves PoRep commit phase 2 for `c1` (the output of `seal_commit_phase1`) with `key`: the proof
/// bytes, 192 per partition, which Filecoin's `verify_seal` must accept for `prover_id` and `sector_id`
/// before they are returned.
pub fn seal_commit_phase2(
    engine: &Engine,
    key: &FilecoinKey,
    c1: &SealCommitPhase1Output,
    prover_id: ProverId,
    sector_id: SectorId,
) -> Result<Vec<u8>, Error> {
    key.check(ProofType::Seal(c1.registered_proof))?;
    let circuits = seal_circuits(c1)?;
    let proof = prove_circuits(engine, key, circuits, None)?;
    if !verify_seal(c1, prover_id, sector_id, &proof)? {
        return Err(Error::Rejected(format!(
            "verify_seal refuses the proof for sector {} of this prover: the C1 output is not this sector's",
            u64::from(sector_id)
        )));
    }
    Ok(proof)
}

/// Filecoin's `verify_seal` on `proof`, a C2 proof of `c1` for `prover_id` and `sector_id`.
pub fn verify_seal(
    c1: &SealCommitPhase1Output,
    prover_id: ProverId,
    sector_id: SectorId,
    proof: &[u8],
) -> Result<bool, Error> {
    filecoin_proofs_api::seal::verify_seal(
        c1.registered_proof,
        c1.comm_r,
        c1.comm_d,
        prover_id,
        sector_id,
        c1.ticket,
        c1.seed,
        proof,
    )
    .map_err(|e| Error::Rejected(format!("verify_seal failed: {e:#}")))
}

/// The circuits of a C1 output, one per partition, as filecoin-proofs builds them for C2.
pub fn seal_circuits(c1: &SealCommitPhase1Output) -> Result<Vec<FilecoinCircuit>, Error> {
    with_tree!(u64::from(c1.registered_proof.sector_size()), circuits_for, c1)
}

fn circuits_for<Tree: Shape>(c1: &SealCommitPhase1Output) -> Result<Vec<FilecoinCircuit>, Error> {
    let SealCommitPhase1Output { registered_proof, vanilla_proofs, comm_r, comm_d, replica_id, seed, .. } =
        c1.clone();
    let config = ProofType::porep_config(registered_proof)?;
    let vanilla: Vec<Vec<stacked::Proof<Tree, DefaultPieceHasher>>> = vanilla_proofs
        .try_into()
        .map_err(|e: anyhow::Error| Error::Decode { what: "C1 vanilla proofs", message: format!("{e:#}") })?;
    let bad = |what: &'static str| Err(Error::BadInput(format!("C1 output: {what}")));
    if comm_d == [0; 32] {
        return bad("comm_d is all zeros");
    }
    if comm_r == [0; 32] {
        return bad("comm_r is all zeros");
    }
    if seed == [0; 32] {
        return bad("the seed is all zeros");
    }
    let partitions = usize::from(config.partitions);
    if vanilla.len() != partitions || vanilla.iter().any(Vec::is_empty) {
        return Err(Error::BadInput(format!(
            "C1 output: {} partitions of vanilla proofs (some empty: {}), the proof type has {partitions}",
            vanilla.len(),
            vanilla.iter().any(Vec::is_empty)
        )));
    }
    let comm_r_safe = as_safe_commitment(&comm_r, "comm_r").map_err(|e| Error::BadInput(format!("{e:#}")))?;
    let comm_d_safe =
        DefaultPieceDomain::try_from_bytes(&comm_d).map_err(|e| Error::BadInput(format!("comm_d: {e:#}")))?;
    let replica_id: Scalar = replica_id.into();
    vanilla
        .into_iter()
        .enumerate()
        .map(|(k, challenges)| {
            // Every challenge of a partition opens the same two trees (filecoin-proofs refuses otherwise).
            let (comm_r_last, comm_c) = (challenges[0].comm_r_last(), challenges[0].comm_c());
            if challenges.iter().any(|p| p.comm_r_last() != comm_r_last || p.comm_c() != comm_c) {
                return Err(Error::BadInput(format!(
                    "C1 output: partition {k}'s vanilla proofs disagree on comm_r_last or comm_c"
                )));
            }
            let commitments = Commitments {
                replica_id: replica_id.into(),
                comm_d: comm_d_safe,
                comm_r: comm_r_safe,
                comm_r_last,
                comm_c,
            };
            Ok(Tree::seal_partition(SealPartition { commitments, challenges }))
        })
        .collect()
}

/// Fresh blinding for `n` partitions, `r` then `s` for each, from the operating system's generator.
pub(crate) fn blinding(n: usize) -> Vec<(Fr, Fr)> {
    let mut rng = rand::rngs::OsRng;
    (0..n).map(|_| (Fr::rand(&mut rng), Fr::rand(&mut rng))).collect()
}

/// A proof's 192 bytes as Filecoin writes them: `a`, `b`, `c` compressed.
pub(crate) fn proof_bytes(proof: &cuzk::Proof<cuzk::Bls12_381>, out: &mut Vec<u8>) -> Result<(), Error> {
    proof.serialize_compressed(out).map_err(|e| Error::BadInput(format!("cannot serialize a proof: {e}")))
}
