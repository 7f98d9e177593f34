//! Filecoin keys made resident in a cuzk engine, and parameters generated where none exist.
//!
//! Loading a key records its circuit's shape from a blank circuit (counts, bellperson's densities and
//! cuzk's CSR shape, so partitions are synthesized witness-only), reads the `.params` file against it
//! (checked against the `.vk` file beside it), and hands the key to the engine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk::{Engine, Key, R1csShape};
use rand::rngs::OsRng;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::StackedDrg;
use storage_proofs_post::fallback::{FallbackPoSt, FallbackPoStCompound};

use crate::kinds::{filecoin, post_public_params, Seal};
use crate::{read_params, Bellpepper, CircuitCounts, Densities, Error, ProofType};

/// A Filecoin proof type's key, resident in an engine.
#[derive(Clone)]
pub struct FilecoinKey {
    pub(crate) proof: ProofType,
    pub(crate) key: Key,
    counts: CircuitCounts,
    report: KeyLoad,
}

/// How long loading a key took, by step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeyLoad {
    /// Recording the circuit's shape from a blank circuit.
    pub record: Duration,
    /// Reading and decoding the `.params` file.
    pub read: Duration,
    /// Making the key resident in the engine's backend.
    pub resident: Duration,
}

impl std::fmt::Debug for FilecoinKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilecoinKey").field("proof", &self.proof).field("counts", &self.counts).finish()
    }
}

impl FilecoinKey {
    /// Loads the key of `proof` from Filecoin's parameter directory into `engine`.
    pub fn load(engine: &Engine, proof: ProofType) -> Result<Self, Error> {
        load_for(engine, proof)
    }

    /// The proof type.
    pub fn proof(&self) -> ProofType {
        self.proof
    }

    /// The engine's key.
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The circuit's sizes.
    pub fn counts(&self) -> CircuitCounts {
        self.counts
    }

    /// How the load went.
    pub fn load_report(&self) -> KeyLoad {
        self.report
    }

    /// Refuses a request for another proof type than the key's.
    pub(crate) fn check(&self, proof: ProofType) -> Result<(), Error> {
        if proof == self.proof {
            Ok(())
        } else {
            Err(Error::WrongKey { key: self.proof, request: proof })
        }
    }
}

/// The shape of `proof`'s circuit, recorded from a blank circuit (no parameters needed), with its
/// sizes and bellperson's densities.
pub fn record_shape(proof: ProofType) -> Result<(R1csShape, CircuitCounts, Densities), Error> {
    let recording = Bellpepper::new(proof.blank_circuit()?);
    let outcome = recording.report();
    let shape = R1csShape::record(recording).map_err(|e| Error::circuit(&outcome, None, e.into()))?;
    let (counts, densities) = outcome.recorded().ok_or(Error::NotRecorded)?;
    Ok((shape, counts, densities))
}

fn load_for(engine: &Engine, proof: ProofType) -> Result<FilecoinKey, Error> {
    let t = Instant::now();
    let (shape, counts, densities) = record_shape(proof)?;
    let record = t.elapsed();

    let t = Instant::now();
    let pk = read_params(&proof.params_path()?, Some(&proof.vk_path()?), &counts, &densities)?;
    let read = t.elapsed();

    let t = Instant::now();
    let key = engine.load_key_with_shape(pk, Arc::new(shape))?;
    let report = KeyLoad { record, read, resident: t.elapsed() };
    Ok(FilecoinKey { proof, key, counts, report })
}

/// Makes sure Filecoin's parameter directory holds the parameters and verifying key of `proof`,
/// generating random ones with Filecoin's own generator when they are absent (for test sector sizes;
/// production parameters come from Filecoin's trusted setup and are downloaded, never generated).
/// Returns whether anything was generated.
pub fn ensure_parameters(proof: ProofType) -> Result<bool, Error> {
    let (params, vk) = (proof.params_path()?, proof.vk_path()?);
    if params.is_file() && vk.is_file() {
        return Ok(false);
    }
    with_tree!(proof.sector_size(), generate, &proof)?;
    Ok(true)
}

fn generate<Tree: 'static + MerkleTreeTrait>(proof: &ProofType) -> Result<(), Error> {
    let mut rng = OsRng;
    match *proof {
        ProofType::Seal(p) => {
            let pp = filecoin_proofs::parameters::public_params::<Tree>(&ProofType::porep_config(p)?)
                .map_err(filecoin)?;
            type S<'a, Tree> = StackedDrg<'a, Tree, filecoin_proofs::constants::DefaultPieceHasher>;
            <Seal<Tree> as CompoundProof<'static, S<'static, Tree>, _>>::groth_params(Some(&mut rng), &pp)
                .map_err(filecoin)?;
            <Seal<Tree> as CompoundProof<'static, S<'static, Tree>, _>>::verifying_key(Some(&mut rng), &pp)
                .map_err(filecoin)?;
        }
        ProofType::Post(p) => {
            let pp = post_public_params::<Tree>(p)?;
            type P<'a, Tree> = FallbackPoSt<'a, Tree>;
            <FallbackPoStCompound<Tree> as CompoundProof<'static, P<'static, Tree>, _>>::groth_params(
                Some(&mut rng),
                &pp,
            )
            .map_err(filecoin)?;
            <FallbackPoStCompound<Tree> as CompoundProof<'static, P<'static, Tree>, _>>::verifying_key(
                Some(&mut rng),
                &pp,
            )
            .map_err(filecoin)?;
        }
    }
    Ok(())
}
