//! cuzk's proofs of bellpepper circuits against bellperson's prover: the same bytes for the same
//! parameters, assignment, `r` and `s`; and parameter files that go both ways unchanged.

mod common;

use ark_serialize::CanonicalSerialize;
use bellpepper::gadgets::{multipack, sha256::sha256};
use bellpepper_core::boolean::{AllocatedBit, Boolean};
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use common::TempDir;
use cuzk::{Config, Engine};
use cuzk_filecoin::{field, read_params, write_params, Bellpepper, Witness};
use ff::Field;
use rand::RngCore;

/// Awkward on purpose: inputs allocated between auxiliary variables, a variable only in `C` (under
/// empty `A` and `B`), terms of one variable that cancel, a zero coefficient, the constant one in `B`,
/// and namespaces.
#[derive(Clone)]
struct Awkward {
    x: Scalar,
}

/// Its witness is synthesized whole.
impl Witness for Awkward {}

impl Circuit<Scalar> for Awkward {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x2 = self.x.square();
        let x = cs.alloc(|| "x", || Ok(self.x))?;
        let p1 = cs.alloc_input(|| "x^2", || Ok(x2))?;
        let only_c = cs.alloc(|| "only in C", || Ok(Scalar::from(5u64)))?;
        let cancels = cs.alloc(|| "cancels", || Ok(Scalar::from(9u64)))?;
        let y = cs.alloc(|| "x^3", || Ok(x2 * self.x))?;
        cs.enforce(|| "x*x = x^2", |lc| lc + x, |lc| lc + x, |lc| lc + p1);
        let p2 = cs.alloc_input(|| "x^3 + 1", || Ok(x2 * self.x + Scalar::ONE))?;
        cs.enforce(
            || "cancelling terms",
            |lc| lc + x + cancels - cancels,
            |lc| lc + p1 + (Scalar::ZERO, cancels),
            |lc| lc + y,
        );
        let mut ns = cs.namespace(|| "inner");
        ns.enforce(|| "one in B", |lc| lc + y + CS::one(), |lc| lc + CS::one(), |lc| lc + p2);
        drop(ns);
        cs.enforce(
            || "0 * 0 = only_c - 5 + cancels - 9",
            |lc| lc,
            |lc| lc,
            |lc| lc + only_c - (Scalar::from(14u64), CS::one()) + cancels,
        );
        Ok(())
    }
}

/// SHA-256 of a random 512-bit message, the digest packed into inputs: about 30,000 constraints of the
/// gadgets Filecoin's circuits are made of.
#[derive(Clone)]
struct Sha {
    message: Vec<bool>,
}

impl Witness for Sha {}

impl Circuit<Scalar> for Sha {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let bits = self
            .message
            .iter()
            .enumerate()
            .map(|(i, b)| {
                Ok(Boolean::from(AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), Some(*b))?))
            })
            .collect::<Result<Vec<_>, SynthesisError>>()?;
        let digest = sha256(cs.namespace(|| "sha256"), &bits)?;
        multipack::pack_into_inputs(cs.namespace(|| "digest"), &digest)
    }
}

fn proof_bytes_ark(p: &ark_groth16::Proof<ark_bls12_381::Bls12_381>) -> Vec<u8> {
    let mut out = Vec::new();
    p.serialize_compressed(&mut out).expect("serialize");
    out
}

fn proof_bytes_bell(p: &bellperson::groth16::Proof<Bls12>) -> Vec<u8> {
    let mut out = Vec::new();
    p.write(&mut out).expect("write");
    out
}

/// Bellperson's parameters for `circuit`, written to a file, read back for cuzk; a proof from each
/// prover with the same `r` and `s`; the bytes compared; the file written back from the arkworks key.
fn same_proof_as_bellperson<C: Witness + Clone + Send + 'static>(test: &str, circuit: C) {
    let mut rng = cuzk_testkit::seeded_rng(test);
    let params = bellperson::groth16::generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng)
        .expect("bellperson parameters");
    let dir = TempDir::new(test);
    let (path, vk_path) = (dir.path().join("circuit.params"), dir.path().join("circuit.vk"));
    let mut file = Vec::new();
    params.write(&mut file).expect("write params");
    std::fs::write(&path, &file).expect("save params");
    let mut vk = Vec::new();
    params.vk.write(&mut vk).expect("write vk");
    std::fs::write(&vk_path, &vk).expect("save vk");

    // Record the circuit once (counts and densities), then read the file for it.
    let engine = Engine::new(Config::cpu()).expect("engine");
    let recording = Bellpepper::new(circuit.clone());
    let report = recording.report();
    cuzk::synth::synthesize(recording, &Default::default()).expect("synthesize");
    let (counts, densities) = report.recorded().expect("recorded");
    let pk = read_params(&path, Some(&vk_path), &counts, &densities).expect("read params");

    let back = dir.path().join("back.params");
    write_params(&pk, &densities, &back, None).expect("write back");
    assert!(std::fs::read(&back).expect("read back") == file, "the file written back differs");

    let key = engine.load_key(pk).expect("load key");
    for _ in 0..2 {
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let theirs =
            bellperson::groth16::create_proof(circuit.clone(), &params, r, s).expect("bellperson proof");
        let ours = engine
            .prove_with_randomness(
                &key,
                Bellpepper::new(circuit.clone()),
                field::to_ark(&r),
                field::to_ark(&s),
            )
            .expect("cuzk proof");
        assert_eq!(proof_bytes_ark(&ours), proof_bytes_bell(&theirs));
    }
}

#[test]
fn an_awkward_circuit_proves_as_bellperson_does() {
    same_proof_as_bellperson("awkward", Awkward { x: Scalar::from(3u64) });
}

#[test]
fn a_sha256_circuit_proves_as_bellperson_does() {
    let mut rng = cuzk_testkit::seeded_rng("sha");
    let message = (0..512).map(|_| rng.next_u32() & 1 == 1).collect();
    same_proof_as_bellperson("sha", Sha { message });
}

/// Every kind of damage to a parameter file is an error naming the file and what differs: each byte
/// flipped in turn, every truncation, bytes appended, the parameters of another circuit, another
/// circuit's `.vk`.
#[test]
fn damaged_parameter_files_are_refused_by_name() {
    let test = "damaged";
    let mut rng = cuzk_testkit::seeded_rng(test);
    let circuit = Awkward { x: Scalar::from(3u64) };
    let params = bellperson::groth16::generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng)
        .expect("bellperson parameters");
    let mut file = Vec::new();
    params.write(&mut file).expect("write params");
    let dir = TempDir::new(test);
    let path = dir.path().join("awkward.params");

    let recording = Bellpepper::new(circuit);
    let report = recording.report();
    cuzk::synth::synthesize(recording, &Default::default()).expect("synthesize");
    let (counts, densities) = report.recorded().expect("recorded");
    let read = |bytes: &[u8]| {
        std::fs::write(&path, bytes).expect("write");
        read_params(&path, None, &counts, &densities)
    };
    read(&file).expect("the intact file reads");

    for at in 0..file.len() {
        let mut bad = file.clone();
        bad[at] ^= 0x10;
        let e = read(&bad).expect_err("a flipped byte reads");
        assert!(e.to_string().contains("awkward.params"), "{e}");
    }
    for len in (0..file.len()).step_by(7) {
        let e = read(&file[..len]).expect_err("a truncated file reads");
        assert!(matches!(e, cuzk_filecoin::ParamsError::Truncated { .. }), "{len}: {e}");
    }
    let mut longer = file.clone();
    longer.extend_from_slice(&[0; 5]);
    assert!(matches!(read(&longer), Err(cuzk_filecoin::ParamsError::Trailing { extra: 5, .. })));

    // The parameters of another circuit (SHA-256) against this one's counts.
    let message = (0..512).map(|_| rng.next_u32() & 1 == 1).collect();
    let other = bellperson::groth16::generate_random_parameters::<Bls12, _, _>(Sha { message }, &mut rng)
        .expect("other parameters");
    let mut other_file = Vec::new();
    other.write(&mut other_file).expect("write");
    let e = read(&other_file).expect_err("another circuit's parameters read");
    assert!(matches!(e, cuzk_filecoin::ParamsError::Mismatch { .. }), "{e}");
    println!("{e}");

    // Another key's .vk beside this key's .params (same circuit, other randomness).
    let again = bellperson::groth16::generate_random_parameters::<Bls12, _, _>(
        Awkward { x: Scalar::from(3u64) },
        &mut rng,
    )
    .expect("parameters");
    let vk_path = dir.path().join("awkward.vk");
    let mut vk = Vec::new();
    again.vk.write(&mut vk).expect("vk");
    std::fs::write(&vk_path, &vk).expect("write vk");
    std::fs::write(&path, &file).expect("write");
    let e = read_params(&path, Some(&vk_path), &counts, &densities).expect_err("another .vk");
    assert!(matches!(e, cuzk_filecoin::ParamsError::VkDiffers { .. }), "{e}");
    let e = read_params(&dir.path().join("missing.params"), None, &counts, &densities).expect_err("missing");
    assert!(e.to_string().contains("missing.params"), "{e}");
}

/// Witness-only synthesis against the recorded shape equals full synthesis, bit for bit.
#[test]
fn witness_only_synthesis_equals_full_synthesis() {
    let mut rng = cuzk_testkit::seeded_rng("witness-only");
    let message: Vec<bool> = (0..512).map(|_| rng.next_u32() & 1 == 1).collect();
    let shape = cuzk::R1csShape::record(Bellpepper::new(Sha { message: message.clone() })).expect("record");
    let full =
        cuzk::synth::synthesize(Bellpepper::new(Sha { message: message.clone() }), &Default::default())
            .expect("full");
    let (only, _) =
        cuzk::synth::synthesize_witness_only(Bellpepper::new(Sha { message }), &shape, &Default::default())
            .expect("witness-only");
    assert_eq!(full.counts(), only.counts());
    assert!(full.assignment == only.assignment && full.a == only.a && full.b == only.b && full.c == only.c);
    let awkward =
        cuzk::R1csShape::record(Bellpepper::new(Awkward { x: Scalar::from(3u64) })).expect("record");
    let full =
        cuzk::synth::synthesize(Bellpepper::new(Awkward { x: Scalar::from(3u64) }), &Default::default())
            .expect("full");
    let (only, _) = cuzk::synth::synthesize_witness_only(
        Bellpepper::new(Awkward { x: Scalar::from(3u64) }),
        &awkward,
        &Default::default(),
    )
    .expect("witness-only");
    assert!(full.assignment == only.assignment && full.a == only.a && full.b == only.b && full.c == only.c);
}
