//! WinningPoSt and WindowPoSt: vanilla proofs to SNARK proofs.
//!
//! The vanilla proofs are the bytes the Filecoin proofs API hands out (`generate_single_vanilla_proof`:
//! bincode of `FallbackPoStSectorProof`). The circuits are storage-proofs-post's own
//! (`FallbackPoStCompound::circuit` over the partitioned vanilla proofs, the last sector repeated when a
//! partition is short), proved by cuzk and written 192 bytes per partition.

use cuzk::Engine;
use filecoin_hashers::Hasher;
use filecoin_proofs::{as_safe_commitment, partition_vanilla_proofs, single_partition_vanilla_proofs};
use filecoin_proofs::{FallbackPoStSectorProof, PoStType};
use filecoin_proofs_api::{ChallengeSeed, ProverId, RegisteredPoStProof};
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_post::fallback::{self, FallbackPoSt, FallbackPoStCompound, PublicSector};

use crate::kinds::{filecoin, FilecoinCircuit, Shape};
use crate::{prove_circuits, Error, FilecoinKey, ProofType};

/// Which partitions of a WindowPoSt to prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitions {
    /// All of them, in order (WinningPoSt has one).
    All,
    /// One WindowPoSt partition, as curio's `WINDOW_POST_PARTITION` asks for.
    One(usize),
}

/// Proves a WinningPoSt or WindowPoSt from its vanilla proofs, with the key of its PoSt proof type: 192
/// bytes per partition proved.
pub fn post(
    engine: &Engine,
    key: &FilecoinKey,
    randomness: &ChallengeSeed,
    prover_id: ProverId,
    vanilla_proofs: &[Vec<u8>],
    partitions: Partitions,
) -> Result<Vec<u8>, Error> {
    let ProofType::Post(proof) = key.proof else {
        return Err(Error::BadInput(format!("the key of {} does not prove a PoSt", key.proof)));
    };
    let circuits = post_circuits(proof, randomness, prover_id, vanilla_proofs, partitions)?;
    prove_circuits(engine, key, circuits, None)
}

/// The circuits of a PoSt, one per partition proved, as storage-proofs-post builds them.
pub fn post_circuits(
    proof: RegisteredPoStProof,
    randomness: &ChallengeSeed,
    prover_id: ProverId,
    vanilla_proofs: &[Vec<u8>],
    partitions: Partitions,
) -> Result<Vec<FilecoinCircuit>, Error> {
    let size = u64::from(proof.sector_size());
    with_tree!(size, post_for, proof, randomness, prover_id, vanilla_proofs, partitions)
}

fn post_for<Tree: Shape>(
    registered: RegisteredPoStProof,
    randomness: &ChallengeSeed,
    prover_id: ProverId,
    vanilla_proofs: &[Vec<u8>],
    partitions: Partitions,
) -> Result<Vec<FilecoinCircuit>, Error> {
    let config = registered.as_v1_config();
    if vanilla_proofs.is_empty() {
        return Err(Error::BadInput("no vanilla proofs".into()));
    }
    let vanilla = vanilla_proofs
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            bincode::deserialize::<FallbackPoStSectorProof<Tree>>(bytes).map_err(|e| Error::Decode {
                what: "PoSt vanilla proof (bincode FallbackPoStSectorProof)",
                message: format!("proof {i}: {e}"),
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    if config.typ == PoStType::Winning && vanilla.len() != config.sector_count {
        return Err(Error::BadInput(format!(
            "WinningPoSt takes {} vanilla proofs, got {}",
            config.sector_count,
            vanilla.len()
        )));
    }
    if config.typ == PoStType::Winning && partitions != Partitions::All {
        return Err(Error::BadInput("WinningPoSt has one partition; prove all of it".into()));
    }
    let safe = |bytes: &[u8; 32], what: &str| {
        as_safe_commitment::<<Tree::Hasher as Hasher>::Domain, _>(bytes, what)
            .map_err(|e| Error::BadInput(format!("{e:#}")))
    };
    let count = (vanilla.len()).div_ceil(config.sector_count);
    let partition_count = (config.typ == PoStType::Window && count > 1).then_some(count);
    let setup = compound_proof::SetupParams {
        vanilla_params: match config.typ {
            PoStType::Winning => {
                filecoin_proofs::parameters::winning_post_setup_params(&config).map_err(filecoin)?
            }
            PoStType::Window => filecoin_proofs::parameters::window_post_setup_params(&config),
        },
        partitions: partition_count,
        priority: false,
    };
    type P<'a, Tree> = FallbackPoSt<'a, Tree>;
    let public_params =
        <FallbackPoStCompound<Tree> as CompoundProof<'static, P<'static, Tree>, _>>::setup(&setup)
            .map_err(filecoin)?;
    let mut public_inputs = fallback::PublicInputs {
        randomness: safe(randomness, "randomness")?,
        prover_id: safe(&prover_id, "prover_id")?,
        sectors: vanilla.iter().map(|p| PublicSector { id: p.sector_id, comm_r: p.comm_r }).collect(),
        k: None,
    };
    let partitioned = match partitions {
        Partitions::All => partition_vanilla_proofs(
            &config,
            &public_params.vanilla_params,
            &public_inputs,
            partition_count.unwrap_or(1),
            &vanilla,
        ),
        Partitions::One(index) => {
            if index >= count {
                return Err(Error::BadInput(format!(
                    "partition {index} of a WindowPoSt of {} sectors, which has {count}",
                    vanilla.len()
                )));
            }
            public_inputs.k = Some(index);
            single_partition_vanilla_proofs(&config, &public_params.vanilla_params, &public_inputs, &vanilla)
                .map(|p| vec![p])
        }
    }
    .map_err(|e| Error::BadInput(format!("the vanilla proofs do not fit the PoSt: {e:#}")))?;
    partitioned
        .iter()
        .enumerate()
        .map(|(k, proof)| {
            <FallbackPoStCompound<Tree> as CompoundProof<'static, P<'static, Tree>, _>>::circuit(
                &public_inputs,
                Default::default(),
                proof,
                &public_params.vanilla_params,
                Some(k),
            )
            .map(Tree::post)
            .map_err(filecoin)
        })
        .collect()
}
