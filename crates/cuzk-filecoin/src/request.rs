//! Requests as a daemon receives them: one JSON document per proof, carrying what Filecoin's own
//! prover is given (the C1 output, or the PoSt vanilla proofs, randomness and prover id).
//!
//! - PoRep C2: `{"phase1_out": <the C1 output as the proofs API writes it>, "prover_id": "<64 hex
//!   digits>", "sector_id": N}`; instead of `prover_id`, `"miner_id": N` (the actor id, from which
//!   Filecoin's prover id is its unsigned LEB128 bytes, left-aligned in 32 zero bytes).
//! - PoSt: `{"randomness": "<64 hex>", "prover_id": "<64 hex>" (or "miner_id": N), "vanilla_proofs":
//!   ["<hex of each vanilla proof, bincode as the proofs API returns it>", ...]}`, and for one WindowPoSt
//!   partition `"partition_index": K` (the vanilla proofs are then that partition's sectors only, as for
//!   Filecoin's `generate_single_window_post_with_vanilla`).

use std::collections::BTreeMap;

use filecoin_hashers::Domain;
use filecoin_proofs::FallbackPoStSectorProof;
use filecoin_proofs_api::{PublicReplicaInfo, RegisteredPoStProof, SectorId};
use serde::Deserialize;
use storage_proofs_core::merkle::MerkleTreeTrait;

use crate::{Error, Partitions, SealCommitPhase1Output};

/// A PoRep C2 request.
#[derive(Debug, Clone)]
pub struct C2Request {
    /// The C1 output.
    pub c1: SealCommitPhase1Output,
    /// The prover id.
    pub prover_id: [u8; 32],
    /// The sector number.
    pub sector_id: u64,
}

/// A WinningPoSt or WindowPoSt request.
#[derive(Debug, Clone)]
pub struct PostRequest {
    /// The challenge randomness.
    pub randomness: [u8; 32],
    /// The prover id.
    pub prover_id: [u8; 32],
    /// The vanilla proofs, bincode as the proofs API returns them.
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// Which partitions to prove.
    pub partitions: Partitions,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct C2Json {
    phase1_out: SealCommitPhase1Output,
    #[serde(default)]
    prover_id: Option<String>,
    #[serde(default)]
    miner_id: Option<u64>,
    sector_id: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PostJson {
    randomness: String,
    #[serde(default)]
    prover_id: Option<String>,
    #[serde(default)]
    miner_id: Option<u64>,
    vanilla_proofs: Vec<String>,
    #[serde(default)]
    partition_index: Option<usize>,
}

/// Filecoin's prover id of a miner actor: the actor id's unsigned LEB128 bytes, left-aligned in 32
/// zero bytes (the ID address's payload).
pub fn prover_id_of_miner(actor: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let (mut v, mut i) = (actor, 0);
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        out[i] = if v == 0 { byte } else { byte | 0x80 };
        i += 1;
        if v == 0 {
            return out;
        }
    }
}

/// Bytes from hex digits, naming `what` when they are not.
pub fn from_hex(what: &str, hex: &str) -> Result<Vec<u8>, Error> {
    let bad = || Error::BadInput(format!("{what}: not an even number of hex digits"));
    if !hex.len().is_multiple_of(2) {
        return Err(bad());
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(bad))
        .collect()
}

/// Hex digits of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn bytes32(what: &str, hex: &str) -> Result<[u8; 32], Error> {
    from_hex(what, hex)?
        .try_into()
        .map_err(|b: Vec<u8>| Error::BadInput(format!("{what}: {} bytes, expected 32", b.len())))
}

fn prover(prover_id: Option<String>, miner_id: Option<u64>) -> Result<[u8; 32], Error> {
    match (prover_id, miner_id) {
        (Some(hex), None) => bytes32("prover_id", &hex),
        (None, Some(actor)) => Ok(prover_id_of_miner(actor)),
        _ => Err(Error::BadInput("give exactly one of prover_id and miner_id".into())),
    }
}

fn json<'a, T: Deserialize<'a>>(what: &'static str, bytes: &'a [u8]) -> Result<T, Error> {
    serde_json::from_slice(bytes).map_err(|e| Error::Decode { what, message: e.to_string() })
}

impl C2Request {
    /// Parses a C2 request.
    pub fn parse(bytes: &[u8]) -> Result<Self, Error> {
        let j: C2Json = json("PoRep C2 request (JSON)", bytes)?;
        Ok(Self { prover_id: prover(j.prover_id, j.miner_id)?, c1: j.phase1_out, sector_id: j.sector_id })
    }

    /// The request as JSON.
    pub fn to_json(&self) -> Result<Vec<u8>, Error> {
        let c1 = serde_json::to_value(&self.c1).map_err(|e| Error::BadInput(format!("C1 output: {e}")))?;
        let v = serde_json::json!({
            "phase1_out": c1,
            "prover_id": to_hex(&self.prover_id),
            "sector_id": self.sector_id,
        });
        Ok(v.to_string().into_bytes())
    }
}

impl PostRequest {
    /// Parses a PoSt request.
    pub fn parse(bytes: &[u8]) -> Result<Self, Error> {
        let j: PostJson = json("PoSt request (JSON)", bytes)?;
        let vanilla_proofs = j
            .vanilla_proofs
            .iter()
            .enumerate()
            .map(|(i, h)| from_hex(&format!("vanilla proof {i}"), h))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            randomness: bytes32("randomness", &j.randomness)?,
            prover_id: prover(j.prover_id, j.miner_id)?,
            vanilla_proofs,
            partitions: j.partition_index.map_or(Partitions::All, Partitions::One),
        })
    }

    /// The request as JSON.
    pub fn to_json(&self) -> Vec<u8> {
        let mut v = serde_json::json!({
            "randomness": to_hex(&self.randomness),
            "prover_id": to_hex(&self.prover_id),
            "vanilla_proofs": self.vanilla_proofs.iter().map(|p| to_hex(p)).collect::<Vec<_>>(),
        });
        if let Partitions::One(k) = self.partitions {
            v["partition_index"] = k.into();
        }
        v.to_string().into_bytes()
    }
}

/// Filecoin's verifier on a whole PoSt `proof` (every partition), the replicas taken from the vanilla
/// proofs (their sector numbers and `comm_r`).
pub fn verify_post(
    proof_type: RegisteredPoStProof,
    request: &PostRequest,
    proof: &[u8],
) -> Result<bool, Error> {
    let size = u64::from(proof_type.sector_size());
    let replicas = with_tree!(size, replicas_of, proof_type, &request.vanilla_proofs)?;
    let verify = match proof_type.typ() {
        filecoin_proofs::PoStType::Winning => filecoin_proofs_api::post::verify_winning_post(
            &request.randomness,
            proof,
            &replicas,
            request.prover_id,
        ),
        filecoin_proofs::PoStType::Window => filecoin_proofs_api::post::verify_window_post(
            &request.randomness,
            &[(proof_type, proof)],
            &replicas,
            request.prover_id,
        ),
    };
    verify.map_err(|e| Error::Rejected(format!("PoSt verification failed: {e:#}")))
}

fn replicas_of<Tree: 'static + MerkleTreeTrait>(
    proof_type: RegisteredPoStProof,
    vanilla: &[Vec<u8>],
) -> Result<BTreeMap<SectorId, PublicReplicaInfo>, Error> {
    vanilla
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let p: FallbackPoStSectorProof<Tree> =
                bincode::deserialize(bytes).map_err(|e| Error::Decode {
                    what: "PoSt vanilla proof (bincode FallbackPoStSectorProof)",
                    message: format!("proof {i}: {e}"),
                })?;
            let comm_r: [u8; 32] = p
                .comm_r
                .into_bytes()
                .try_into()
                .map_err(|_| Error::BadInput(format!("vanilla proof {i}: comm_r is not 32 bytes")))?;
            Ok((p.sector_id, PublicReplicaInfo::new(proof_type, comm_r)))
        })
        .collect()
}
