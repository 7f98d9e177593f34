//! End to end against the oracle: proofs from the CPU backend equal ark-groth16's byte for byte.

use ark_bls12_381::{Bls12_381, Fr};
use ark_ff::{UniformRand, Zero};
use ark_groth16::{Groth16, Proof};
use ark_relations::gr1cs::ConstraintSynthesizer;
use ark_serialize::CanonicalSerialize;
use cuzk_groth16::{prove, CpuBackend, PreparedKey, ProveOptions};
use cuzk_synth::{synthesize, SynthesisOptions};
use cuzk_testkit::{
    keygen, poseidon_config, seeded_rng, MerklePath, OneConstraint, PoseidonHash, Sha256Preimage, Synthetic,
};
use rand::{Rng, RngCore};

fn bytes(p: &Proof<Bls12_381>) -> Vec<u8> {
    let mut v = Vec::new();
    p.serialize_compressed(&mut v).unwrap();
    v
}

/// Proves `circuit` with ark-groth16 and with cuzk for the same key, r and s; asserts equal bytes.
fn assert_matches_oracle<C: ConstraintSynthesizer<Fr> + Clone>(name: &str, circuit: C) {
    let mut rng = seeded_rng(name);
    let pk = keygen(circuit.clone(), &mut rng);
    let key = PreparedKey::new(&CpuBackend, pk.clone()).unwrap();
    let mut randomness = vec![(Fr::rand(&mut rng), Fr::rand(&mut rng))];
    if rng.next_u32().is_multiple_of(2) {
        randomness.push((Fr::zero(), Fr::zero()));
    } else {
        randomness.push((Fr::zero(), Fr::rand(&mut rng)));
    }
    for (r, s) in randomness {
        let expected = Groth16::<Bls12_381>::create_proof_with_reduction(circuit.clone(), &pk, r, s).unwrap();
        let syn = synthesize(circuit.clone(), &SynthesisOptions::default()).unwrap();
        let (proof, times) = prove(&CpuBackend, &key, &syn, r, s, &ProveOptions::default()).unwrap();
        assert_eq!(bytes(&proof), bytes(&expected), "{name}: proof differs from ark-groth16 (r={r}, s={s})");
        assert!(times.total >= times.witness_map);
    }
}

#[test]
fn one_constraint() {
    assert_matches_oracle("one_constraint", OneConstraint { x: Fr::from(12345u64) });
}

#[test]
fn rows_just_below_on_and_above_a_power_of_two() {
    // rows = constraints + 2 instance variables; 2^10 is the boundary.
    for rows in [1023usize, 1024, 1025] {
        assert_matches_oracle(&format!("rows_{rows}"), Synthetic::new(rows - 2, rows as u64));
    }
}

#[test]
fn many_public_inputs() {
    let c = Synthetic {
        constraints: 300,
        public_inputs: 97,
        seed: 5,
        zero_witness: false,
        bit_share_per_mille: 0,
    };
    assert_matches_oracle("many_public_inputs", c);
}

#[test]
fn all_zero_witness() {
    let c = Synthetic {
        constraints: 500,
        public_inputs: 2,
        seed: 11,
        zero_witness: true,
        bit_share_per_mille: 0,
    };
    assert_matches_oracle("all_zero_witness", c);
}

#[test]
fn poseidon_gadget() {
    let mut rng = seeded_rng("poseidon_inputs");
    let c = PoseidonHash { params: poseidon_config(), preimage: (Fr::rand(&mut rng), Fr::rand(&mut rng)) };
    assert_matches_oracle("poseidon", c);
}

#[test]
fn merkle_path_gadget() {
    let mut rng = seeded_rng("merkle_inputs");
    let path = (0..5).map(|_| (Fr::rand(&mut rng), rng.gen())).collect();
    let c = MerklePath { params: poseidon_config(), leaf: Fr::rand(&mut rng), path };
    assert_matches_oracle("merkle_path", c);
}

#[test]
fn sha256_gadget() {
    let mut rng = seeded_rng("sha256_inputs");
    let len = rng.gen_range(1..40);
    let message = (0..len).map(|_| rng.gen()).collect();
    assert_matches_oracle("sha256", Sha256Preimage { message });
}
