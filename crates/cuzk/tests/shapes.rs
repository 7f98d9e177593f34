//! Witness-only synthesis in the engine: keys with a recorded R1CS shape, from a circuit or a key
//! store; the same proofs as full synthesis; circuits of another shape refused; fallback without one.

use std::sync::Arc;

use ark_bls12_381::{Bls12_381, Fr};
use ark_ff::UniformRand;
use ark_groth16::Groth16;
use cuzk::keystore::KeyStore;
use cuzk::{Config, Engine, Error, R1csShape, SynthesisMode};
use cuzk_circuits::{PorepLike, Synthetic};
use cuzk_groth16::ProveError;
use cuzk_testkit::{keygen, seeded_rng, TempDir, Unsatisfied};
use rand::RngCore;

fn engine() -> Engine {
    Engine::new(Config::cpu()).unwrap()
}

#[test]
fn witness_only_and_full_synthesis_give_identical_proofs() {
    let mut rng = seeded_rng("witness_only_equals_full");
    // A chain with bit rows, and a porep-like partition (SHA-free at 2^11: Poseidon labels and paths).
    let synthetic = Synthetic::new(300, rng.next_u64()).with_bit_share(250);
    let porep = PorepLike::for_log_constraints(11, rng.next_u64(), 3).unwrap();
    let e = engine();
    check_modes(&e, synthetic, &mut rng);
    check_modes(&e, porep, &mut rng);
}

/// Proves `circuit` with the same `(r, s)` witness-only (shape recorded at load), in full (the same key
/// without its shape, and an engine with witness-only synthesis off), and with ark-groth16.
fn check_modes<C>(e: &Engine, circuit: C, rng: &mut rand::rngs::StdRng)
where
    C: cuzk::ConstraintSynthesizer<Fr> + Copy + Send + 'static,
{
    let pk = keygen(circuit, rng);
    let shaped = e.load_key_recording_shape(pk.clone(), circuit).unwrap();
    assert!(shaped.shape().is_some());
    let (r, s) = (Fr::rand(rng), Fr::rand(rng));

    let witness_only = e.prove_report(&shaped, circuit, r, s).unwrap();
    assert_eq!(witness_only.synthesis_mode, SynthesisMode::WitnessOnly);
    let full = e.prove_report(&shaped.without_shape(), circuit, r, s).unwrap();
    assert_eq!(full.synthesis_mode, SynthesisMode::Full);
    let off = Engine::new(Config { witness_only: false, ..Config::cpu() }).unwrap();
    assert_eq!(off.synthesis_mode(&shaped), SynthesisMode::Full);
    let full_by_config = off.prove_report(&shaped, circuit, r, s).unwrap();
    assert_eq!(full_by_config.synthesis_mode, SynthesisMode::Full);

    let ark = Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s).unwrap();
    assert_eq!(witness_only.proof, ark);
    assert_eq!(full.proof, ark);
    assert_eq!(full_by_config.proof, ark);
    assert_eq!(witness_only.counts, full.counts);
}

#[test]
fn partitions_and_the_pipeline_prove_witness_only_with_the_same_proofs() {
    let mut rng = seeded_rng("witness_only_partitions");
    // One shape (constraints, inputs, bit share), four witnesses.
    let circuits: Vec<Synthetic> = (0..4).map(|i| Synthetic::new(1500, i).with_bit_share(300)).collect();
    let pk = keygen(circuits[0], &mut rng);
    let e = engine();
    let key = e.load_key_recording_shape(pk.clone(), circuits[0]).unwrap();
    let randomness: Vec<(Fr, Fr)> = (0..4).map(|_| (Fr::rand(&mut rng), Fr::rand(&mut rng))).collect();

    let reports = e.prove_partitions_report(&key, circuits.clone(), randomness.clone()).unwrap();
    let sched = cuzk::sched::Config { partition_workers: 2, ..Default::default() };
    let run = e.prove_pipelined(&key, circuits.clone(), randomness.clone(), sched.clone()).unwrap();
    assert_eq!(run.synthesis_mode, SynthesisMode::WitnessOnly);
    let full_run =
        e.prove_pipelined(&key.without_shape(), circuits.clone(), randomness.clone(), sched).unwrap();
    assert_eq!(full_run.synthesis_mode, SynthesisMode::Full);
    for (i, (c, (r, s))) in circuits.iter().zip(&randomness).enumerate() {
        let ark = Groth16::<Bls12_381>::create_proof_with_reduction(*c, &pk, *r, *s).unwrap();
        assert_eq!(reports[i].synthesis_mode, SynthesisMode::WitnessOnly);
        assert_eq!(reports[i].proof, ark, "partition {i}, prove_partitions_report");
        assert_eq!(run.proofs[i], ark, "partition {i}, pipelined witness-only");
        assert_eq!(full_run.proofs[i], ark, "partition {i}, pipelined full");
    }
}

#[test]
fn a_circuit_of_another_shape_is_refused_never_proved() {
    let mut rng = seeded_rng("shape_mismatch");
    let circuit = Synthetic::new(120, 5);
    let pk = keygen(circuit, &mut rng);
    // Every check the caller can turn off is off: the shape check still holds.
    let e = Engine::new(Config { check_witness: false, verify_proofs: false, ..Config::cpu() }).unwrap();
    let key = e.load_key_recording_shape(pk, circuit).unwrap();

    // Other variable counts (the chain has one witness variable more than constraints).
    match e.prove(&key, Synthetic::new(121, 5), &mut rng).unwrap_err() {
        Error::ShapeMismatch { what: "witness variables", shape: 121, circuit: 122 } => {}
        other => panic!("expected a witness-count mismatch, got {other}"),
    }
    let two_inputs = Synthetic {
        constraints: 120,
        public_inputs: 2,
        seed: 5,
        zero_witness: false,
        bit_share_per_mille: 0,
    };
    let err = e.prove(&key, two_inputs, &mut rng).unwrap_err();
    assert!(
        matches!(err, Error::ShapeMismatch { what: "instance variables", shape: 2, circuit: 3 }),
        "{err}"
    );
    assert!(err.to_string().contains("recorded R1CS shape"), "{err}");

    // The same counts but other constraints (bit rows where the key's circuit has chain rows).
    let other = circuit.with_bit_share(500);
    assert_eq!(R1csShape::record(other).unwrap().counts(), key.shape().unwrap().counts());
    let err = e.prove(&key, other, &mut rng).unwrap_err();
    assert!(matches!(err, Error::ShapeUnsatisfied { num_constraints: 120, .. }), "{err}");
    assert!(err.to_string().contains("not of the key's shape"), "{err}");

    // An honest circuit with a wrong witness is refused the same way, naming the constraint.
    let err = e.prove(&key, Unsatisfied { inner: circuit, bad: 17 }, &mut rng).unwrap_err();
    assert!(matches!(err, Error::ShapeUnsatisfied { index: 17, num_constraints: 120 }), "{err}");

    // Through partitions and the pipeline, the failed partition is named.
    let pair = || vec![circuit, other];
    let randomness = vec![(Fr::from(1u64), Fr::from(2u64)); 2];
    let err = e.prove_partitions_report(&key, pair(), randomness.clone()).unwrap_err();
    assert!(matches!(&err, Error::Partition { index: 1, count: 2, .. }), "{err}");
    let err = e.prove_pipelined(&key, pair(), randomness, Default::default()).unwrap_err();
    assert!(err.to_string().contains("partition 1 failed in synthesis"), "{err}");
    assert!(err.to_string().contains("recorded R1CS shape"), "{err}");
}

#[test]
fn a_shape_that_does_not_fit_the_key_is_refused_at_attach() {
    let mut rng = seeded_rng("shape_key_mismatch");
    let e = engine();
    let key = e.load_key(keygen(Synthetic::new(60, 1), &mut rng)).unwrap();
    let wrong = Arc::new(R1csShape::record(Synthetic::new(61, 1)).unwrap());
    let err = key.with_shape(wrong).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Prove(ProveError::KeyMismatch { what: "witness variables", key: 61, circuit: 62 })
        ),
        "{err}"
    );
    assert!(key.shape().is_none(), "a refused shape leaves the key as it was");
}

#[test]
fn a_store_without_a_shape_falls_back_to_full_synthesis_and_a_bad_shape_file_is_an_error() {
    let mut rng = seeded_rng("store_fallback");
    let dir = TempDir::new("shapes-fallback");
    let store = KeyStore::open(dir.path()).unwrap();
    let circuit = Synthetic::new(90, 3);
    let id = circuit.shape_id();
    let pk = keygen(circuit, &mut rng);
    store.save(&id, &pk).unwrap();

    let e = engine();
    let (key, report) = e.load_key_from_store(&store, &id).unwrap();
    assert!(report.bytes > 0);
    assert!(key.shape().is_none());
    assert_eq!(e.synthesis_mode(&key), SynthesisMode::Full);
    let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
    let full = e.prove_report(&key, circuit, r, s).unwrap();
    assert_eq!(full.synthesis_mode, SynthesisMode::Full);
    assert!(e.verify(&key, &full.proof, &circuit.public_input_values()).unwrap());

    // With the shape saved, the same load proves witness-only, and the proof is the same.
    store.save_shape(&id, &R1csShape::record(circuit).unwrap()).unwrap();
    let (key, _) = e.load_key_from_store(&store, &id).unwrap();
    let witness_only = e.prove_report(&key, circuit, r, s).unwrap();
    assert_eq!(witness_only.synthesis_mode, SynthesisMode::WitnessOnly);
    assert_eq!(witness_only.proof, full.proof);

    // A corrupt shape file is reported, not ignored.
    let path = store.shape_path_for(&id).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let err = e.load_key_from_store(&store, &id).unwrap_err();
    assert!(matches!(err, Error::Store(cuzk::keystore::Error::ShapeFileChecksum { .. })), "{err}");

    // A shape of other counts stored under the key's id is refused against the key.
    store.save_shape(&id, &R1csShape::record(Synthetic::new(91, 3)).unwrap()).unwrap();
    let err = e.load_key_from_store(&store, &id).unwrap_err();
    assert!(matches!(err, Error::Prove(ProveError::KeyMismatch { .. })), "{err}");

    let err = e.load_key_from_store(&store, "no-such-shape").unwrap_err();
    assert!(matches!(err, Error::Store(cuzk::keystore::Error::NotFound { .. })), "{err}");
}

/// Generates a key for porep-like partitions of `2^k` rows, saves it and the recorded shape to a key
/// store on disk, loads both back through the engine, and proves and verifies ten partitions
/// witness-only.
fn ten_porep_partitions_through_a_key_store(k: u32, test: &str) {
    const PARTITIONS: u64 = 10;
    let mut rng = seeded_rng(test);
    let seed = rng.next_u64();
    let circuits: Vec<PorepLike> =
        (0..PARTITIONS).map(|p| PorepLike::for_log_constraints(k, seed, p).unwrap()).collect();
    let id = circuits[0].params.shape_id();

    let dir = TempDir::new(&format!("shapes-{test}"));
    let store = KeyStore::open(dir.path()).unwrap();
    store.save(&id, &keygen(circuits[0], &mut rng)).unwrap();
    store.save_shape(&id, &R1csShape::record(circuits[0]).unwrap()).unwrap();

    let e = engine();
    let (key, _) = e.load_key_from_store(&store, &id).unwrap();
    assert_eq!(e.synthesis_mode(&key), SynthesisMode::WitnessOnly);
    let randomness: Vec<(Fr, Fr)> =
        (0..PARTITIONS).map(|_| (Fr::rand(&mut rng), Fr::rand(&mut rng))).collect();
    let reports = e.prove_partitions_report(&key, circuits.clone(), randomness).unwrap();

    assert_eq!(reports.len(), PARTITIONS as usize);
    for (p, (c, report)) in circuits.iter().zip(&reports).enumerate() {
        assert_eq!(report.counts.rows(), 1 << k, "partition {p}");
        assert_eq!(report.synthesis_mode, SynthesisMode::WitnessOnly, "partition {p}");
        assert!(e.verify(&key, &report.proof, &c.public_input_values()).unwrap(), "partition {p}");
    }
    // Each proof is bound to its own partition's public inputs.
    let inputs0 = circuits[0].public_input_values();
    let other = circuits.iter().position(|c| c.public_input_values() != inputs0).expect("partitions differ");
    assert!(!e.verify(&key, &reports[0].proof, &circuits[other].public_input_values()).unwrap());
}

/// The CPU suite's size: 2^14 rows has the profile of 2^16 (Poseidon labels with 2 + 2 parents, depth-12
/// Merkle paths), with 3 challenges per partition instead of 15.
#[test]
fn ten_porep_like_partitions_prove_witness_only_from_a_key_store() {
    ten_porep_partitions_through_a_key_store(14, "porep_store_2_14");
}

/// The full size; run in release: `cargo test --release -p cuzk --test shapes -- --ignored`.
#[test]
#[ignore = "2^16 rows x 10 partitions: minutes in the test profile; run with --release -- --ignored"]
fn ten_porep_like_partitions_of_2_16_rows_prove_witness_only_from_a_key_store() {
    ten_porep_partitions_through_a_key_store(16, "porep_store_2_16");
}
