//! The Poseidon parameters the workload circuits hash with.

use std::sync::OnceLock;

use ark_bls12_381::Fr;
use ark_crypto_primitives::crh::poseidon::TwoToOneCRH;
use ark_crypto_primitives::crh::TwoToOneCRHScheme;
use ark_crypto_primitives::sponge::poseidon::{find_poseidon_ark_and_mds, PoseidonConfig};
use ark_ff::PrimeField;

/// Poseidon parameters over Fr: width 3 (rate 2, capacity 1), 8 full and 57 partial rounds, `x^5`,
/// round constants and MDS matrix from arkworks' Grain LFSR. Built once per process.
pub fn poseidon_config() -> PoseidonConfig<Fr> {
    static CONFIG: OnceLock<PoseidonConfig<Fr>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let (full, partial, rate) = (8, 57, 2);
            let (ark, mds) =
                find_poseidon_ark_and_mds::<Fr>(Fr::MODULUS_BIT_SIZE as u64, rate, full, partial, 0);
            PoseidonConfig::new(full as usize, partial as usize, 5, mds, ark, rate, 1)
        })
        .clone()
}

/// The two-to-one Poseidon compression `H(l, r)` outside the circuit.
pub(crate) fn compress(params: &PoseidonConfig<Fr>, l: Fr, r: Fr) -> Fr {
    // Compression over Fr with well-formed parameters cannot fail; 0 keeps this total anyway, and the
    // circuit's own check would then reject the witness.
    TwoToOneCRH::<Fr>::compress(params, l, r).unwrap_or_default()
}
