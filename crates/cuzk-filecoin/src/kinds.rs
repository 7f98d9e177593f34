//! Filecoin's proof types, their circuits and where their parameters live.
//!
//! A [`ProofType`] is a registered seal proof (PoRep C2) or PoSt proof (WinningPoSt, WindowPoSt) of the
//! Filecoin proofs API. Each has one circuit per sector size, a blank instance of which (no witness)
//! gives the shape, and one parameter file named after the circuit's identity
//! (`v28-{prefix}-{sha256 of the public parameters}.params`) in Filecoin's parameter directory,
//! `FIL_PROOFS_PARAMETER_CACHE` (default `/var/tmp/filecoin-proof-parameters/`). Filecoin's own
//! verifier reads its `.vk` file from the same directory.

use std::path::PathBuf;

use filecoin_proofs::constants::DefaultPieceHasher;
use filecoin_proofs::parameters::{public_params, window_post_public_params, winning_post_public_params};
use filecoin_proofs::{PoRepConfig, PoStType};
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::{
    parameter_cache_params_path, parameter_cache_verifying_key_path, CacheableParameters,
};
use storage_proofs_porep::stacked::{StackedCircuit, StackedCompound, StackedDrg};
use storage_proofs_post::fallback::{FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound};

use crate::partition::SealPartition;
use crate::witness::{Witness, Witnesses};
use crate::Error;

/// A Filecoin proof whose SNARK cuzk proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProofType {
    /// PoRep's commit phase 2 for sectors of this registered seal proof.
    Seal(RegisteredSealProof),
    /// A WinningPoSt or WindowPoSt of this registered PoSt proof.
    Post(RegisteredPoStProof),
}

impl ProofType {
    /// The sector size in bytes.
    pub fn sector_size(&self) -> u64 {
        match self {
            Self::Seal(p) => u64::from(p.sector_size()),
            Self::Post(p) => u64::from(p.sector_size()),
        }
    }

    /// `porep-c2`, `winning-post` or `window-post`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Seal(_) => "porep-c2",
            Self::Post(p) if p.typ() == PoStType::Winning => "winning-post",
            Self::Post(_) => "window-post",
        }
    }

    /// The seal configuration, refusing what cuzk does not prove (non-interactive PoRep, whose
    /// partition proofs are aggregated).
    pub(crate) fn porep_config(proof: RegisteredSealProof) -> Result<PoRepConfig, Error> {
        let config = proof.as_v1_config();
        if config.feature_enabled(storage_proofs_core::api_version::ApiFeature::NonInteractivePoRep) {
            return Err(Error::Unsupported(format!(
                "{proof:?}: non-interactive PoRep aggregates its partition proofs, which cuzk does not do"
            )));
        }
        Ok(config)
    }

    /// A blank circuit of this proof type: its shape, no witness (what parameters are made from).
    pub fn blank_circuit(&self) -> Result<FilecoinCircuit, Error> {
        with_tree!(self.sector_size(), blank, self)
    }

    /// The circuit's identity, which names its parameter files.
    pub fn cache_id(&self) -> Result<String, Error> {
        with_tree!(self.sector_size(), cache_id_for, self)
    }

    /// The `.params` file of this proof's circuit in Filecoin's parameter directory.
    pub fn params_path(&self) -> Result<PathBuf, Error> {
        Ok(parameter_cache_params_path(&self.cache_id()?))
    }

    /// The `.vk` file of this proof's circuit in Filecoin's parameter directory.
    pub fn vk_path(&self) -> Result<PathBuf, Error> {
        Ok(parameter_cache_verifying_key_path(&self.cache_id()?))
    }
}

impl std::fmt::Display for ProofType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Seal(p) => write!(f, "{p:?}"),
            Self::Post(p) => write!(f, "{p:?}"),
        }
    }
}

/// The seal compound proof of a tree shape.
pub(crate) type Seal<Tree> = StackedCompound<Tree, DefaultPieceHasher>;
/// The seal circuit of a tree shape.
pub(crate) type SealCircuit<Tree> = StackedCircuit<Tree, DefaultPieceHasher>;

/// A tree shape of Filecoin's sector sizes, which can name its circuits in [`FilecoinCircuit`].
pub trait Shape: 'static + MerkleTreeTrait + Sized {
    /// The seal circuit as a [`FilecoinCircuit`] (a blank one: the shape).
    fn seal(c: SealCircuit<Self>) -> FilecoinCircuit;
    /// A seal partition to prove as a [`FilecoinCircuit`].
    fn seal_partition(c: SealPartition<Self>) -> FilecoinCircuit;
    /// The PoSt circuit as a [`FilecoinCircuit`].
    fn post(c: FallbackPoStCircuit<Self>) -> FilecoinCircuit;
}

macro_rules! circuits {
    ($($shape:ident => $seal:ident, $partition:ident, $post:ident;)*) => {
        /// One of Filecoin's circuits, of any sector size: what cuzk proves for a partition.
        #[allow(clippy::large_enum_variant)]
        pub enum FilecoinCircuit {
            $(
                #[doc = concat!("A blank seal (PoRep C2) circuit of ", stringify!($shape), ".")]
                $seal(SealCircuit<filecoin_proofs::constants::$shape>),
                #[doc = concat!("A seal (PoRep C2) partition of ", stringify!($shape), " to prove.")]
                $partition(SealPartition<filecoin_proofs::constants::$shape>),
                #[doc = concat!("A PoSt partition of ", stringify!($shape), ".")]
                $post(FallbackPoStCircuit<filecoin_proofs::constants::$shape>),
            )*
        }

        $(
            impl Shape for filecoin_proofs::constants::$shape {
                fn seal(c: SealCircuit<Self>) -> FilecoinCircuit {
                    FilecoinCircuit::$seal(c)
                }
                fn seal_partition(c: SealPartition<Self>) -> FilecoinCircuit {
                    FilecoinCircuit::$partition(c)
                }
                fn post(c: FallbackPoStCircuit<Self>) -> FilecoinCircuit {
                    FilecoinCircuit::$post(c)
                }
            }
        )*

        impl bellpepper_core::Circuit<blstrs::Scalar> for FilecoinCircuit {
            fn synthesize<CS: bellpepper_core::ConstraintSystem<blstrs::Scalar>>(
                self,
                cs: &mut CS,
            ) -> Result<(), bellpepper_core::SynthesisError> {
                match self {
                    $(
                        Self::$seal(c) => c.synthesize(cs),
                        Self::$partition(c) => c.synthesize(cs),
                        Self::$post(c) => c.synthesize(cs),
                    )*
                }
            }
        }

        /// A seal partition's challenges are synthesized in parts on several threads; a PoSt's sectors
        /// too (its circuit's own parallel path, [`Witnesses`] being extensible).
        impl Witness for FilecoinCircuit {
            fn witness(self, w: &mut Witnesses) -> Result<(), bellpepper_core::SynthesisError> {
                use bellpepper_core::Circuit;
                match self {
                    $(Self::$partition(c) => c.witness(w),)*
                    other => other.synthesize(w),
                }
            }
        }
    };
}

circuits! {
    // 2 KiB, 8 MiB and 512 MiB sectors share one tree shape (8-ary, no sub-trees).
    SectorShape2KiB => SealBase8, PartitionBase8, PostBase8;
    SectorShape32GiB => SealSub8, PartitionSub8, PostSub8;
    SectorShape64GiB => SealTop2, PartitionTop2, PostTop2;
}

impl std::fmt::Debug for FilecoinCircuit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FilecoinCircuit")
    }
}

pub(crate) fn filecoin(e: anyhow::Error) -> Error {
    Error::Filecoin(format!("{e:#}"))
}

/// The post configuration's public parameters.
pub(crate) fn post_public_params<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredPoStProof,
) -> Result<storage_proofs_post::fallback::PublicParams, Error> {
    let config = proof.as_v1_config();
    match config.typ {
        PoStType::Winning => winning_post_public_params::<Tree>(&config),
        PoStType::Window => window_post_public_params::<Tree>(&config),
    }
    .map_err(filecoin)
}

fn cache_id_for<Tree: 'static + MerkleTreeTrait>(proof: &ProofType) -> Result<String, Error> {
    Ok(match *proof {
        ProofType::Seal(p) => {
            let pp = public_params::<Tree>(&ProofType::porep_config(p)?).map_err(filecoin)?;
            <Seal<Tree> as CacheableParameters<SealCircuit<Tree>, _>>::cache_identifier(&pp)
        }
        ProofType::Post(p) => {
            let pp = post_public_params::<Tree>(p)?;
            <FallbackPoStCompound<Tree> as CacheableParameters<FallbackPoStCircuit<Tree>, _>>::cache_identifier(
                &pp,
            )
        }
    })
}

/// A blank circuit of the proof type (its shape, no witness).
pub(crate) fn blank<Tree: Shape>(proof: &ProofType) -> Result<FilecoinCircuit, Error> {
    Ok(match *proof {
        ProofType::Seal(p) => {
            let pp = public_params::<Tree>(&ProofType::porep_config(p)?).map_err(filecoin)?;
            Tree::seal(<Seal<Tree> as CompoundProof<
                'static,
                StackedDrg<'static, Tree, DefaultPieceHasher>,
                _,
            >>::blank_circuit(&pp))
        }
        ProofType::Post(p) => {
            let pp = post_public_params::<Tree>(p)?;
            Tree::post(<FallbackPoStCompound<Tree> as CompoundProof<
                'static,
                FallbackPoSt<'static, Tree>,
                _,
            >>::blank_circuit(&pp))
        }
    })
}
