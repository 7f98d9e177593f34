//! Circuits built from ark-r1cs-std and ark-crypto-primitives gadgets.

use ark_bls12_381::Fr;
use ark_crypto_primitives::crh::poseidon::constraints::{CRHParametersVar, TwoToOneCRHGadget};
use ark_crypto_primitives::crh::poseidon::TwoToOneCRH;
use ark_crypto_primitives::crh::sha256::constraints::Sha256Gadget;
use ark_crypto_primitives::crh::{TwoToOneCRHScheme, TwoToOneCRHSchemeGadget};
use ark_crypto_primitives::sponge::poseidon::PoseidonConfig;
use ark_r1cs_std::{
    alloc::AllocVar, boolean::Boolean, eq::EqGadget, fields::fp::FpVar, select::CondSelectGadget,
    uint8::UInt8,
};
use ark_relations::gr1cs::{ConstraintSynthesizer, ConstraintSystemRef, SynthesisError};

pub use cuzk_circuits::poseidon_config;

fn compress(params: &PoseidonConfig<Fr>, l: Fr, r: Fr) -> Fr {
    TwoToOneCRH::<Fr>::compress(params, l, r).expect("poseidon over Fr")
}

/// Proves knowledge of `(l, r)` with `Poseidon(l, r) = digest`, `digest` public.
#[derive(Debug, Clone)]
pub struct PoseidonHash {
    /// Parameters.
    pub params: PoseidonConfig<Fr>,
    /// The preimage.
    pub preimage: (Fr, Fr),
}

impl PoseidonHash {
    /// The public digest.
    pub fn digest(&self) -> Fr {
        compress(&self.params, self.preimage.0, self.preimage.1)
    }
}

impl ConstraintSynthesizer<Fr> for PoseidonHash {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        let digest = <FpVar<Fr> as AllocVar<Fr, Fr>>::new_input(cs.clone(), || Ok(self.digest()))?;
        let params = CRHParametersVar::new_constant(cs.clone(), &self.params)?;
        let l = <FpVar<Fr> as AllocVar<Fr, Fr>>::new_witness(cs.clone(), || Ok(self.preimage.0))?;
        let r = <FpVar<Fr> as AllocVar<Fr, Fr>>::new_witness(cs, || Ok(self.preimage.1))?;
        TwoToOneCRHGadget::<Fr>::compress(&params, &l, &r)?.enforce_equal(&digest)
    }
}

fn sha256(message: &[u8]) -> Vec<u8> {
    use ark_crypto_primitives::crh::{sha256::Sha256, CRHScheme};
    <Sha256 as CRHScheme>::evaluate(&(), message.to_vec()).expect("sha256 of bytes")
}

/// Proves knowledge of a message whose SHA-256 digest is public. The 32 digest bytes are public
/// inputs packed as `UInt8::new_input_vec` packs them (31 bytes per field element: two inputs).
#[derive(Debug, Clone)]
pub struct Sha256Preimage {
    /// The secret message.
    pub message: Vec<u8>,
}

impl Sha256Preimage {
    /// The digest as the verifier's public inputs (bytes packed little-endian, 31 per element).
    pub fn public_inputs(&self) -> Vec<Fr> {
        use ark_ff::ToConstraintField;
        sha256(&self.message).to_field_elements().unwrap_or_default()
    }
}

impl ConstraintSynthesizer<Fr> for Sha256Preimage {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        let digest = sha256(&self.message);
        let public = UInt8::new_input_vec(cs.clone(), &digest)?;
        let message = UInt8::new_witness_vec(cs, &self.message)?;
        let computed = Sha256Gadget::<Fr>::digest(&message)?;
        computed.0.enforce_equal(&public)
    }
}

/// Proves that `leaf` sits in a Poseidon Merkle tree with public `root`, along a path of siblings.
#[derive(Debug, Clone)]
pub struct MerklePath {
    /// Parameters.
    pub params: PoseidonConfig<Fr>,
    /// The leaf.
    pub leaf: Fr,
    /// From the leaf up: the sibling, and whether the current node is the right child.
    pub path: Vec<(Fr, bool)>,
}

impl MerklePath {
    /// The root the path leads to (the public input).
    pub fn root(&self) -> Fr {
        self.path.iter().fold(self.leaf, |node, (sib, is_right)| {
            if *is_right {
                compress(&self.params, *sib, node)
            } else {
                compress(&self.params, node, *sib)
            }
        })
    }
}

impl ConstraintSynthesizer<Fr> for MerklePath {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        let root = <FpVar<Fr> as AllocVar<Fr, Fr>>::new_input(cs.clone(), || Ok(self.root()))?;
        let params = CRHParametersVar::new_constant(cs.clone(), &self.params)?;
        let mut node = <FpVar<Fr> as AllocVar<Fr, Fr>>::new_witness(cs.clone(), || Ok(self.leaf))?;
        for (sib, is_right) in &self.path {
            let sib = <FpVar<Fr> as AllocVar<Fr, Fr>>::new_witness(cs.clone(), || Ok(*sib))?;
            let bit = Boolean::new_witness(cs.clone(), || Ok(*is_right))?;
            let left = FpVar::conditionally_select(&bit, &sib, &node)?;
            let right = FpVar::conditionally_select(&bit, &node, &sib)?;
            node = TwoToOneCRHGadget::<Fr>::compress(&params, &left, &right)?;
        }
        node.enforce_equal(&root)
    }
}
