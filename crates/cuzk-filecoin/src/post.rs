//! WinningPoSt and WindowPoSt: vanilla proofs to SNARK proofs.
//!
//! The vanilla proofs are the bytes the Filecoin proofs API hands out (`generate_single_vanilla_proof`:
//! bincode of `FallbackPoStSectorProof`). The circuits are storage-proofs-post's own
//! (`FallbackPoStCompound::circuit` over the partitioned vanilla proofs, the last sector repeated when a
//! partition is short), proved by cuzk and written 192 bytes per partition.
//!
//! Two checks keep a PoSt for the wrong randomness, prover or sectors from leaving: the vanilla proofs
//! are verified against the challenges the randomness derives (for WinningPoSt with the sector
//! repeated once per challenge, as Filecoin's verifier lays it out, so every challenge is checked and
//! not only the first), and each SNARK proof is verified against the public inputs Filecoin's
//! verifier computes from the randomness, the prover and the sectors, not the ones the circuit produced.

use cuzk::Engine;
use filecoin_hashers::Hasher;
use filecoin_proofs::{as_safe_commitment, partition_vanilla_proofs, single_partition_vanilla_proofs};
use filecoin_proofs::{FallbackPoStSectorProof, PoStType};
use filecoin_proofs_api::{ChallengeSeed, ProverId, RegisteredPoStProof};
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_post::fallback::{self, FallbackPoSt, FallbackPoStCompound, PublicSector};

use crate::field::to_ark;
use crate::kinds::{filecoin, FilecoinCircuit, Shape};
use crate::{prove_circuits_report, Error, FilecoinKey, ProofType};

/// Which partitions of a WindowPoSt to prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitions {
    /// All of them, in order (WinningPoSt has one).
    All,
    /// One WindowPoSt partition, as curio's `WINDOW_POST_PARTITION` asks for: the vanilla proofs are
    /// that partition's sectors (at most the proof type's sectors per partition), the number is the
    /// partition's place in the whole PoSt.
    One(usize),
}

/// Most partitions in one deadline's WindowPoSt (the Filecoin actors' `max_partitions_per_deadline`):
/// a partition number beyond is refused before anything is laid out for it.
const MAX_PARTITIONS: usize = 3000;

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
    let size = u64::from(proof.sector_size());
    let Post { circuits, public_inputs } =
        with_tree!(size, post_for, proof, randomness, prover_id, vanilla_proofs, partitions)?;
    let (bytes, reports) = prove_circuits_report(engine, key, circuits, None)?;
    for (k, (report, inputs)) in reports.iter().zip(&public_inputs).enumerate() {
        let inputs: Vec<cuzk::Fr> = inputs.iter().map(to_ark).collect();
        if !engine.verify(key.key(), &report.proof, &inputs)? {
            return Err(Error::Rejected(format!(
                "partition {k} of the {proof:?} proof does not verify for this randomness, prover and these \
                 sectors: the vanilla proofs are not theirs"
            )));
        }
    }
    Ok(bytes)
}

/// A PoSt's circuits, one per partition proved, and the public inputs Filecoin's verifier expects of
/// each partition's proof.
struct Post {
    circuits: Vec<FilecoinCircuit>,
    public_inputs: Vec<Vec<blstrs::Scalar>>,
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
    with_tree!(size, post_for, proof, randomness, prover_id, vanilla_proofs, partitions).map(|p| p.circuits)
}

fn post_for<Tree: Shape>(
    registered: RegisteredPoStProof,
    randomness: &ChallengeSeed,
    prover_id: ProverId,
    vanilla_proofs: &[Vec<u8>],
    partitions: Partitions,
) -> Result<Post, Error> {
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
    let sectors: Vec<_> =
        vanilla.iter().map(|p| PublicSector { id: p.sector_id, comm_r: p.comm_r }).collect();
    let per_partition = public_params.vanilla_params.sector_count;
    let (randomness, prover_id) = (safe(randomness, "randomness")?, safe(&prover_id, "prover_id")?);
    let inputs = |sectors, k| fallback::PublicInputs { randomness, prover_id, sectors, k };
    // The public inputs as Filecoin's verifier lays them out, and the partitions proved.
    let (public_inputs, proved) = match (&config.typ, partitions) {
        // One sector, repeated once per challenge (each copy is one of the partition's "sectors").
        (PoStType::Winning, _) => {
            let repeated = (0..per_partition).flat_map(|_| sectors.iter().cloned()).collect();
            (inputs(repeated, None), vec![0])
        }
        (PoStType::Window, Partitions::All) => (inputs(sectors.clone(), None), (0..count).collect()),
        // The partition's own sectors, behind as many placeholders as the partitions before it hold,
        // so that partition `index`'s chunk is these sectors, as in the whole PoSt.
        (PoStType::Window, Partitions::One(index)) => {
            if vanilla.len() > config.sector_count {
                return Err(Error::BadInput(format!(
                    "a WindowPoSt partition holds at most {} sectors, got {} vanilla proofs",
                    config.sector_count,
                    vanilla.len()
                )));
            }
            if index >= MAX_PARTITIONS {
                return Err(Error::BadInput(format!(
                    "partition {index}: a deadline's WindowPoSt has at most {MAX_PARTITIONS} partitions"
                )));
            }
            let before = index * per_partition;
            let laid_out = std::iter::repeat_n(sectors[0].clone(), before).chain(sectors.iter().cloned());
            (inputs(laid_out.collect(), None), vec![index])
        }
    };
    // The vanilla proofs, checked against the randomness's challenges: a whole PoSt, or one partition.
    let partitioned = match partitions {
        Partitions::All => partition_vanilla_proofs(
            &config,
            &public_params.vanilla_params,
            &public_inputs,
            partition_count.unwrap_or(1),
            &vanilla,
        ),
        Partitions::One(index) => single_partition_vanilla_proofs(
            &config,
            &public_params.vanilla_params,
            &inputs(sectors.clone(), Some(index)),
            &vanilla,
        )
        .map(|p| vec![p]),
    }
    .map_err(|e| {
        Error::BadInput(format!(
            "the vanilla proofs do not fit the PoSt (made for other randomness, sectors or partition?): {e:#}"
        ))
    })?;
    let own = inputs(sectors, None);
    let circuits = partitioned
        .iter()
        .enumerate()
        .map(|(k, proof)| {
            // A partition's circuit reads its own chunk of the sectors: chunk k of the whole PoSt, or
            // all of them for one partition.
            let (sectors_of, k) = match partitions {
                Partitions::All => (&public_inputs, k),
                Partitions::One(_) => (&own, 0),
            };
            <FallbackPoStCompound<Tree> as CompoundProof<'static, P<'static, Tree>, _>>::circuit(
                sectors_of,
                Default::default(),
                proof,
                &public_params.vanilla_params,
                Some(k),
            )
            .map(Tree::post)
            .map_err(filecoin)
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let public_inputs = proved
        .into_iter()
        .map(|k| {
            <FallbackPoStCompound<Tree> as CompoundProof<'static, P<'static, Tree>, _>>::generate_public_inputs(
                &public_inputs,
                &public_params.vanilla_params,
                Some(k),
            )
            .map_err(filecoin)
        })
        .collect::<Result<_, Error>>()?;
    Ok(Post { circuits, public_inputs })
}
