//! End to end against the oracle: proofs from the CPU backend equal ark-groth16's byte for byte.

use ark_bls12_381::{Bls12_381, Fr};
use ark_ff::{UniformRand, Zero};
use ark_groth16::{Groth16, Proof};
use ark_relations::gr1cs::ConstraintSynthesizer;
use ark_serialize::CanonicalSerialize;
use cuzk_groth16::{
    prove, prove_staged, stage, Affine, Backend, BackendError, CpuBackend, CpuPoly, Curve, DeviceBackend,
    MsmScalars, NttKind, PolyBackend, PreparedKey, Projective, ProveOptions, Stage,
};
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
        assert!(times.total >= times.host[Stage::WitnessMap]);
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

/// The CPU backend, except that it keeps MSM scalars "in backend memory" (`scalars_from_host`), as the
/// CUDA backend does: the prover then reads `z` and the witness as ranges of one polynomial.
struct ScalarsInBackend;

impl PolyBackend for ScalarsInBackend {
    type Poly = CpuPoly;
    fn name(&self) -> &'static str {
        "cpu-scalars-in-backend"
    }
    fn poly_from_host(&self, values: &[Fr], size: usize) -> Result<CpuPoly, BackendError> {
        CpuBackend.poly_from_host(values, size)
    }
    fn poly_to_host(&self, poly: &CpuPoly) -> Result<Vec<Fr>, BackendError> {
        CpuBackend.poly_to_host(poly)
    }
    fn poly_len(&self, poly: &CpuPoly) -> usize {
        CpuBackend.poly_len(poly)
    }
    fn ntt(&self, polys: &mut [&mut CpuPoly], kind: NttKind) -> Result<(), BackendError> {
        CpuBackend.ntt(polys, kind)
    }
    fn quotient(&self, a: &mut CpuPoly, b: &CpuPoly, c: &CpuPoly, z_inv: Fr) -> Result<(), BackendError> {
        CpuBackend.quotient(a, b, c, z_inv)
    }
}

impl Backend for ScalarsInBackend {
    type Bases<C: Curve> = Vec<Affine<C>>;
    fn load_bases<C: Curve>(&self, bases: Vec<Affine<C>>) -> Result<Vec<Affine<C>>, BackendError> {
        Ok(bases)
    }
    fn msm<C: Curve>(
        &self,
        bases: &Vec<Affine<C>>,
        scalars: MsmScalars<'_, CpuPoly>,
    ) -> Result<Projective<C>, BackendError> {
        CpuBackend.msm::<C>(bases, scalars)
    }
}

impl DeviceBackend for ScalarsInBackend {
    fn scalars_from_host(&self, scalars: &[Fr]) -> Result<Option<CpuPoly>, BackendError> {
        Ok(Some(CpuPoly(scalars.to_vec())))
    }
}

#[test]
fn scalars_kept_in_the_backend_give_the_same_proofs() {
    let mut rng = seeded_rng("scalars_in_backend");
    let circuit = Synthetic { public_inputs: 9, ..Synthetic::new(500, 3) };
    let pk = keygen(circuit, &mut rng);
    let key = PreparedKey::new(&ScalarsInBackend, pk.clone()).unwrap();
    let syn = synthesize(circuit, &SynthesisOptions::default()).unwrap();
    for (r, s) in [(Fr::rand(&mut rng), Fr::rand(&mut rng)), (Fr::zero(), Fr::rand(&mut rng))] {
        let expected = Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s).unwrap();
        let (proof, _) = prove(&ScalarsInBackend, &key, &syn, r, s, &ProveOptions::default()).unwrap();
        assert_eq!(bytes(&proof), bytes(&expected), "proof differs from ark-groth16 (r={r}, s={s})");
    }
}

#[test]
fn partitions_staged_ahead_of_their_kernels_give_the_same_proofs() {
    // As a pipeline runs them: partition 1 is staged before partition 0's kernels run.
    let mut rng = seeded_rng("staged_ahead");
    let circuits = [Synthetic::new(300, 11), Synthetic::new(300, 12)];
    let pk = keygen(circuits[0], &mut rng);
    let cpu = PreparedKey::new(&CpuBackend, pk.clone()).unwrap();
    let kept = PreparedKey::new(&ScalarsInBackend, pk.clone()).unwrap();
    let syns: Vec<_> =
        circuits.iter().map(|c| synthesize(*c, &SynthesisOptions::default()).unwrap()).collect();
    let randomness: Vec<(Fr, Fr)> = (0..2).map(|_| (Fr::rand(&mut rng), Fr::rand(&mut rng))).collect();
    let expected: Vec<_> = circuits
        .iter()
        .zip(&randomness)
        .map(|(c, (r, s))| Groth16::<Bls12_381>::create_proof_with_reduction(*c, &pk, *r, *s).unwrap())
        .collect();
    let options = ProveOptions::default();
    let staged_cpu: Vec<_> = syns.iter().map(|syn| stage(&CpuBackend, &cpu, syn).unwrap()).collect();
    let staged_kept: Vec<_> = syns.iter().map(|syn| stage(&ScalarsInBackend, &kept, syn).unwrap()).collect();
    for (((syn, st_cpu), st_kept), ((r, s), want)) in
        syns.iter().zip(staged_cpu).zip(staged_kept).zip(randomness.iter().zip(&expected))
    {
        let (proof, times) = prove_staged(&CpuBackend, &cpu, syn, st_cpu, *r, *s, &options).unwrap();
        assert_eq!(bytes(&proof), bytes(want));
        assert!(times.total >= times.host[Stage::Upload] + times.host[Stage::WitnessMap]);
        let (proof, _) = prove_staged(&ScalarsInBackend, &kept, syn, st_kept, *r, *s, &options).unwrap();
        assert_eq!(bytes(&proof), bytes(want));
    }
}

#[test]
fn a_staged_partition_of_another_size_is_refused() {
    let mut rng = seeded_rng("staged_mismatch");
    let big = Synthetic::new(600, 1);
    let small = Synthetic::new(100, 1);
    let key = PreparedKey::new(&CpuBackend, keygen(big, &mut rng)).unwrap();
    let key_small = PreparedKey::new(&CpuBackend, keygen(small, &mut rng)).unwrap();
    let syn_big = synthesize(big, &SynthesisOptions::default()).unwrap();
    let syn_small = synthesize(small, &SynthesisOptions::default()).unwrap();
    assert!(stage(&CpuBackend, &key, &syn_small).is_err(), "a partition that does not fit the key");
    let staged_small = stage(&CpuBackend, &key_small, &syn_small).unwrap();
    let got = prove_staged(
        &CpuBackend,
        &key,
        &syn_big,
        staged_small,
        Fr::from(1u64),
        Fr::from(2u64),
        &ProveOptions::default(),
    );
    assert!(
        matches!(got, Err(cuzk_groth16::ProveError::Backend(BackendError::LengthMismatch { .. }))),
        "{got:?}"
    );
}
