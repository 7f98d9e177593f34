//! Filecoin's own circuits proved by cuzk: a 2 KiB test sector sealed offline, its PoRep C2, its
//! WinningPoSt and WindowPoSt, each byte for byte bellperson's proof for the same `r` and `s`, each
//! accepted by Filecoin's verifier, and bad input refused with an error that says what is wrong.
//!
//! Parameters are generated once into Filecoin's parameter directory (see `common::filecoin_env`) and
//! checked on every load (counts against the circuit, the `.vk` against the `.params`).

mod common;

use std::time::Instant;

use bellpepper_core::Circuit;
use blstrs::Scalar;
use common::{filecoin_env, TempDir};
use cuzk::{Config, Engine};
use cuzk_filecoin::{
    ensure_parameters, post, post_circuits, prove_circuits, random_field_bytes, seal_circuits,
    seal_commit_phase2, Error, FilecoinCircuit, FilecoinKey, Partitions, PoStType, ProofType,
    RegisteredPoStProof, RegisteredSealProof, SectorId, TestSector, Witness, Witnesses,
};
use ff::Field;

const SEAL: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;

fn key_for(engine: &Engine, proof: ProofType) -> FilecoinKey {
    filecoin_env();
    let t = Instant::now();
    let generated = ensure_parameters(proof).expect("parameters");
    println!("{proof}: parameters {} in {:.1?}", if generated { "generated" } else { "found" }, t.elapsed());
    let key = FilecoinKey::load(engine, proof).expect("load the key");
    println!("{proof}: {:?}, load {:?}", key.counts(), key.load_report());
    key
}

fn sector(test: &str, dir: &TempDir) -> TestSector {
    let mut rng = cuzk_testkit::seeded_rng(test);
    let t = Instant::now();
    let sector = TestSector::seal(dir.path(), SEAL, &mut rng).expect("seal a 2 KiB sector");
    println!("sealed in {:.1?}", t.elapsed());
    sector
}

/// Bellperson's proofs of `circuits` with the same parameter file and blinding.
fn bellperson_proofs(
    proof: ProofType,
    circuits: Vec<FilecoinCircuit>,
    blinding: &[(Scalar, Scalar)],
) -> Vec<u8> {
    let b = cuzk_filecoin::baseline::bellperson(proof, circuits, blinding).expect("bellperson proves");
    println!("{proof}: bellperson read the parameters in {:.1?}, proved in {:.1?}", b.read, b.prove);
    b.proofs
}

fn blinding(test: &str, n: usize) -> Vec<(Scalar, Scalar)> {
    let mut rng = cuzk_testkit::seeded_rng(test);
    (0..n).map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng))).collect()
}

fn flipped(proof: &[u8], at: usize) -> Vec<u8> {
    let mut p = proof.to_vec();
    p[at] ^= 0x04;
    p
}

fn post_end_to_end(test: &str, post_proof: RegisteredPoStProof) {
    let engine = Engine::new(Config::cpu()).expect("engine");
    let proof = ProofType::Post(post_proof);
    let key = key_for(&engine, proof);
    let dir = TempDir::new(test);
    let sector = sector(test, &dir);
    let mut rng = cuzk_testkit::seeded_rng(test);
    let randomness = random_field_bytes(&mut rng);
    let vanilla = vec![sector.vanilla_post(post_proof, &randomness).expect("vanilla proof")];
    let prover = sector.info.prover_id;

    // Byte for byte bellperson's proof with the same r and s.
    let circuits =
        || post_circuits(post_proof, &randomness, prover, &vanilla, Partitions::All).expect("circuits");
    let n = circuits().len();
    let b = blinding(test, n);
    let t = Instant::now();
    let ours = prove_circuits(&engine, &key, circuits(), Some(b.clone())).expect("cuzk proves");
    println!("{proof}: cuzk {:.1?}", t.elapsed());
    let t = Instant::now();
    assert_eq!(ours, bellperson_proofs(proof, circuits(), &b), "cuzk's proof differs from bellperson's");
    println!("{proof}: bellperson {:.1?}", t.elapsed());
    assert_eq!(ours.len(), 192 * n);

    // The public API, with fresh blinding, and Filecoin's verifier.
    let fresh = post(&engine, &key, &randomness, prover, &vanilla, Partitions::All).expect("post");
    assert!(
        sector.verify_post(post_proof, &randomness, &fresh).expect("verify"),
        "Filecoin refuses the PoSt"
    );
    assert!(sector.verify_post(post_proof, &randomness, &ours).expect("verify"));
    for at in [0, 60, 150, 191] {
        assert!(!matches!(sector.verify_post(post_proof, &randomness, &flipped(&fresh, at)), Ok(true)));
    }

    // One partition, as curio asks for it: partition 0 of a one-sector PoSt is the whole PoSt.
    if post_proof.typ() == PoStType::Window {
        let one =
            post(&engine, &key, &randomness, prover, &vanilla, Partitions::One(0)).expect("partition 0");
        assert!(sector.verify_post(post_proof, &randomness, &one).expect("verify"), "partition 0 refused");
        let later =
            post(&engine, &key, &randomness, prover, &vanilla, Partitions::One(3)).expect("partition 3");
        assert_eq!(later.len(), 192);
        let two = vec![vanilla[0].clone(); 3];
        let e =
            post(&engine, &key, &randomness, prover, &two, Partitions::One(0)).expect_err("too many sectors");
        assert!(e.to_string().contains("at most 2 sectors"), "{e}");
        let e = post(&engine, &key, &randomness, prover, &vanilla, Partitions::One(usize::MAX))
            .expect_err("no such partition");
        assert!(e.to_string().contains("at most 3000 partitions"), "{e}");
    }

    // Other randomness is refused, even when its first challenge is the vanilla proof's first leaf
    // (any single challenge of a 2 KiB sector matches one time in 64).
    let challenges = sector.post_challenges(post_proof, &randomness).expect("challenges");
    let (other, tries) = (1..)
        .map(|n| (random_field_bytes(&mut rng), n))
        .find(|(r, _)| sector.post_challenges(post_proof, r).expect("challenges")[0] == challenges[0])
        .expect("an endless search");
    println!("other randomness with the same first challenge after {tries} tries");
    let partitions = [Partitions::All, Partitions::One(0)];
    for partitions in &partitions[..if post_proof.typ() == PoStType::Window { 2 } else { 1 }] {
        let e = post(&engine, &key, &other, prover, &vanilla, *partitions).expect_err("other randomness");
        assert!(matches!(e, Error::BadInput(_)), "{e}");
        println!("other randomness ({partitions:?}): {e}");
    }

    // Bad input: garbage bytes, no proofs, randomness that is not a field element.
    let e =
        post(&engine, &key, &randomness, prover, &[vec![7u8; 100]], Partitions::All).expect_err("garbage");
    assert!(matches!(e, Error::Decode { .. }), "{e}");
    let e = post(&engine, &key, &randomness, prover, &[], Partitions::All).expect_err("none");
    assert!(e.to_string().contains("no vanilla proofs"), "{e}");
    let mut bad_id = randomness;
    bad_id[31] = 0xff;
    let e = post(&engine, &key, &bad_id, prover, &vanilla, Partitions::All).expect_err("not a field element");
    println!("randomness not a field element: {e}");
}

#[test]
fn a_winning_post_proves_as_bellperson_does_and_verifies() {
    post_end_to_end("winning", RegisteredPoStProof::StackedDrgWinning2KiBV1);
}

#[test]
fn a_window_post_proves_as_bellperson_does_and_verifies() {
    post_end_to_end("window", RegisteredPoStProof::StackedDrgWindow2KiBV1_2);
}

#[test]
fn a_porep_c2_proves_as_bellperson_does_and_verifies() {
    let test = "porep";
    let engine = Engine::new(Config::cpu()).expect("engine");
    let proof = ProofType::Seal(SEAL);
    let key = key_for(&engine, proof);
    let dir = TempDir::new(test);
    let sector = sector(test, &dir);
    let c1 = sector.c1().expect("C1 output");
    let (prover, id) = (sector.info.prover_id, SectorId::from(sector.info.sector_id));

    let circuits = || seal_circuits(&c1).expect("circuits");
    // The witness of the challenges synthesized in parallel runs is the sequential synthesis's.
    let mut whole = Witnesses::root();
    let t = Instant::now();
    circuits().remove(0).synthesize(&mut whole).expect("sequential synthesis");
    let sequential = t.elapsed();
    let mut parted = Witnesses::root();
    let t = Instant::now();
    circuits().remove(0).witness(&mut parted).expect("synthesis in parts");
    println!(
        "C2: witness {:.1?} in parts on {} threads, {sequential:.1?} whole; {} values",
        t.elapsed(),
        rayon::current_num_threads(),
        parted.aux().len()
    );
    assert!(whole.aux().len() > 1_000_000);
    assert!(parted.inputs() == whole.inputs() && parted.aux() == whole.aux(), "the parts' witness differs");
    let b = blinding(test, 1);
    let t = Instant::now();
    let ours = prove_circuits(&engine, &key, circuits(), Some(b.clone())).expect("cuzk proves");
    println!("C2: cuzk {:.1?}", t.elapsed());
    assert!(sector.verify_seal(&ours).expect("verify_seal"), "verify_seal refuses cuzk's proof");
    let t = Instant::now();
    assert_eq!(ours, bellperson_proofs(proof, circuits(), &b), "cuzk's proof differs from bellperson's");
    println!("C2: bellperson {:.1?}", t.elapsed());

    let fresh = seal_commit_phase2(&engine, &key, &c1, prover, id).expect("C2");
    assert!(sector.verify_seal(&fresh).expect("verify_seal"));
    for at in [0, 47, 100, 191] {
        assert!(
            !matches!(sector.verify_seal(&flipped(&fresh, at)), Ok(true)),
            "a flipped byte at {at} verifies"
        );
    }

    // A C1 output of another sector (here: claimed for another sector number), a wrong comm_r.
    let e = seal_commit_phase2(&engine, &key, &c1, prover, SectorId::from(sector.info.sector_id + 1))
        .expect_err("another sector");
    assert!(matches!(e, Error::Rejected(_)), "{e}");
    let mut wrong = c1.clone();
    wrong.comm_r[3] ^= 1;
    let e = seal_commit_phase2(&engine, &key, &wrong, prover, id).expect_err("wrong comm_r");
    println!("wrong comm_r: {e}");
    let e = cuzk_filecoin::decode_c1(b"{\"registered_proof\": 3}").expect_err("truncated C1");
    assert!(matches!(e, Error::Decode { .. }), "{e}");
}
