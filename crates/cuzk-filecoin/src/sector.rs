//! Test sectors: a sector of random data sealed offline with the Filecoin proofs API (PC1, PC2 and C1),
//! so that C2 and PoSt can be proved and checked end to end without a chain; and Filecoin's own
//! verifiers for what cuzk proves.
//!
//! A sealed sector is a folder: `staged` (the piece), `sealed` (the replica), `cache/` (its trees and
//! labels), `c1.json` (the C1 output) and `sector.json` ([`SectorInfo`]: what `verify_seal` and the
//! PoSt verifiers need besides the proof).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use filecoin_proofs::PoStType;
use filecoin_proofs_api::post::{
    generate_fallback_sector_challenges, generate_single_vanilla_proof, verify_window_post,
    verify_winning_post,
};
use filecoin_proofs_api::seal::{
    seal_commit_phase1, seal_pre_commit_phase1, seal_pre_commit_phase2, write_and_preprocess,
    SealCommitPhase1Output,
};
use filecoin_proofs_api::{
    ChallengeSeed, Commitment, PrivateReplicaInfo, ProverId, PublicReplicaInfo, RegisteredPoStProof,
    RegisteredSealProof, SectorId, UnpaddedBytesAmount,
};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::Error;

/// What a sealed sector's verifiers need besides its proofs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectorInfo {
    /// The seal proof type.
    pub registered_proof: RegisteredSealProof,
    /// The prover id (a field element: the top two bits of byte 31 clear).
    pub prover_id: ProverId,
    /// The sector number.
    pub sector_id: u64,
    /// The sealing ticket.
    pub ticket: [u8; 32],
    /// The interactive seed of C1.
    pub seed: [u8; 32],
    /// The replica commitment.
    pub comm_r: Commitment,
    /// The data commitment.
    pub comm_d: Commitment,
}

/// A sealed test sector on disk.
#[derive(Debug, Clone)]
pub struct TestSector {
    /// Its folder.
    pub dir: PathBuf,
    /// What its verifiers need.
    pub info: SectorInfo,
}

fn fail(step: &'static str) -> impl Fn(anyhow::Error) -> Error {
    move |e| Error::Filecoin(format!("{step}: {e:#}"))
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::BadInput(format!("{}: {e}", path.display()))
}

/// 32 random bytes that are a valid field element (the top two bits of the last byte clear), as
/// Filecoin requires of prover ids, tickets and randomness.
pub fn random_field_bytes(rng: &mut impl RngCore) -> [u8; 32] {
    let mut b = [0u8; 32];
    rng.fill_bytes(&mut b);
    b[31] &= 0x3f;
    b
}

impl TestSector {
    /// Seals a sector of random data of `proof`'s size into `dir` (created if needed): add piece, PC1,
    /// PC2, C1. Needs no parameters; only small sector sizes seal in seconds.
    pub fn seal(dir: &Path, proof: RegisteredSealProof, rng: &mut impl RngCore) -> Result<Self, Error> {
        let cache = dir.join("cache");
        std::fs::create_dir_all(&cache).map_err(io(&cache))?;
        let (staged, sealed) = (dir.join("staged"), dir.join("sealed"));
        let size = u64::from(proof.sector_size());
        let unpadded = UnpaddedBytesAmount(size - size / 128);
        let mut data = vec![0u8; unpadded.0 as usize];
        rng.fill_bytes(&mut data);
        let target = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&staged)
            .map_err(io(&staged))?;
        let (piece, _) =
            write_and_preprocess(proof, &data[..], target, unpadded).map_err(fail("add piece"))?;
        File::create(&sealed).map_err(io(&sealed))?;

        let prover_id = random_field_bytes(rng);
        let ticket = random_field_bytes(rng);
        let seed = random_field_bytes(rng);
        let sector_id = u64::from(rng.next_u32());
        let id = SectorId::from(sector_id);
        let pieces = [piece];
        let pc1 = seal_pre_commit_phase1(proof, &cache, &staged, &sealed, prover_id, id, ticket, &pieces)
            .map_err(fail("PC1"))?;
        let pc2 = seal_pre_commit_phase2(pc1, &cache, &sealed).map_err(fail("PC2"))?;
        let (comm_r, comm_d) = (pc2.comm_r, pc2.comm_d);
        let c1 = seal_commit_phase1(&cache, &sealed, prover_id, id, ticket, seed, pc2, &pieces)
            .map_err(fail("C1"))?;
        let json = serde_json::to_vec(&c1)
            .map_err(|e| Error::BadInput(format!("cannot write the C1 output: {e}")))?;
        let c1_path = dir.join("c1.json");
        std::fs::write(&c1_path, json).map_err(io(&c1_path))?;
        let info = SectorInfo { registered_proof: proof, prover_id, sector_id, ticket, seed, comm_r, comm_d };
        let info_path = dir.join("sector.json");
        let text =
            serde_json::to_vec_pretty(&info).map_err(|e| Error::BadInput(format!("sector.json: {e}")))?;
        std::fs::write(&info_path, text).map_err(io(&info_path))?;
        Ok(Self { dir: dir.into(), info })
    }

    /// Opens a sector sealed by [`TestSector::seal`].
    pub fn open(dir: &Path) -> Result<Self, Error> {
        let path = dir.join("sector.json");
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        let info = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Decode { what: "sector.json", message: e.to_string() })?;
        Ok(Self { dir: dir.into(), info })
    }

    /// The C1 output.
    pub fn c1(&self) -> Result<SealCommitPhase1Output, Error> {
        let path = self.dir.join("c1.json");
        crate::decode_c1(&std::fs::read(&path).map_err(io(&path))?)
    }

    /// Filecoin's `verify_seal` on `proof` for this sector.
    pub fn verify_seal(&self, proof: &[u8]) -> Result<bool, Error> {
        let i = &self.info;
        filecoin_proofs_api::seal::verify_seal(
            i.registered_proof,
            i.comm_r,
            i.comm_d,
            i.prover_id,
            SectorId::from(i.sector_id),
            i.ticket,
            i.seed,
            proof,
        )
        .map_err(fail("verify_seal"))
    }

    /// The leaves a PoSt with `randomness` challenges in this sector, in order.
    pub fn post_challenges(
        &self,
        post: RegisteredPoStProof,
        randomness: &ChallengeSeed,
    ) -> Result<Vec<u64>, Error> {
        let id = SectorId::from(self.info.sector_id);
        let mut challenges =
            generate_fallback_sector_challenges(post, randomness, &[id], self.info.prover_id)
                .map_err(fail("PoSt challenges"))?;
        challenges.remove(&id).ok_or_else(|| Error::Filecoin("no challenges for the sector".into()))
    }

    /// The vanilla proof of this sector for a PoSt with `randomness` (one sector's challenges).
    pub fn vanilla_post(
        &self,
        post: RegisteredPoStProof,
        randomness: &ChallengeSeed,
    ) -> Result<Vec<u8>, Error> {
        let id = SectorId::from(self.info.sector_id);
        let ours = self.post_challenges(post, randomness)?;
        let replica =
            PrivateReplicaInfo::new(post, self.info.comm_r, self.dir.join("cache"), self.dir.join("sealed"));
        generate_single_vanilla_proof(post, id, &replica, &ours).map_err(fail("vanilla PoSt proof"))
    }

    /// Filecoin's PoSt verifier on `proof`, a PoSt of this sector alone.
    pub fn verify_post(
        &self,
        post: RegisteredPoStProof,
        randomness: &ChallengeSeed,
        proof: &[u8],
    ) -> Result<bool, Error> {
        let replicas = BTreeMap::from([(
            SectorId::from(self.info.sector_id),
            PublicReplicaInfo::new(post, self.info.comm_r),
        )]);
        match post.typ() {
            PoStType::Winning => verify_winning_post(randomness, proof, &replicas, self.info.prover_id),
            PoStType::Window => {
                verify_window_post(randomness, &[(post, proof)], &replicas, self.info.prover_id)
            }
        }
        .map_err(fail("PoSt verification"))
    }
}
