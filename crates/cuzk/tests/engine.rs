//! The facade contract and every bad input, against the ark-groth16 oracle.

use ark_bls12_381::{Bls12_381, Fr};
use ark_ff::UniformRand;
use ark_groth16::Groth16;
use cuzk::sched::SpanKind;
use cuzk::{BackendKind, Config, Engine, Error, Stage};
use cuzk_circuits::Synthetic;
use cuzk_groth16::ProveError;
use cuzk_synth::SynthError;
use cuzk_testkit::{keygen, seeded_rng, FailingCircuit, OneConstraint, Unsatisfied};
use rand::{rngs::StdRng, RngCore, SeedableRng};

fn engine() -> Engine {
    Engine::new(Config::cpu()).unwrap()
}

#[test]
fn prove_with_randomness_equals_ark_groth16() {
    let mut rng = seeded_rng("prove_with_randomness");
    let circuit = Synthetic {
        constraints: 200,
        public_inputs: 3,
        seed: rng.next_u64(),
        zero_witness: false,
        bit_share_per_mille: 0,
    };
    let pk = keygen(circuit, &mut rng);
    let e = engine();
    let key = e.load_key(pk.clone()).unwrap();
    let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
    let proof = e.prove_with_randomness(&key, circuit, r, s).unwrap();
    assert_eq!(proof, Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s).unwrap());
    assert!(e.verify(&key, &proof, &circuit.public_input_values()).unwrap());
    assert!(!e.verify(&key, &proof, &[Fr::from(1u64), Fr::from(2u64), Fr::from(3u64)]).unwrap());
}

#[test]
fn prove_draws_r_then_s_like_ark_groth16() {
    let mut rng = seeded_rng("prove_rng");
    let circuit = Synthetic::new(100, rng.next_u64());
    let pk = keygen(circuit, &mut rng);
    let e = engine();
    let key = e.load_key(pk.clone()).unwrap();
    let seed = rng.next_u64();
    let ours = e.prove(&key, circuit, &mut StdRng::seed_from_u64(seed)).unwrap();
    let ark = Groth16::<Bls12_381>::create_random_proof_with_reduction(
        circuit,
        &pk,
        &mut StdRng::seed_from_u64(seed),
    )
    .unwrap();
    assert_eq!(ours, ark);
}

#[test]
fn prove_partitions_keeps_order_and_matches_each_partition() {
    let mut rng = seeded_rng("prove_partitions");
    let circuits: Vec<Synthetic> = (0..5)
        .map(|i| Synthetic {
            constraints: 60,
            public_inputs: 2,
            seed: i,
            zero_witness: i == 3,
            bit_share_per_mille: 0,
        })
        .collect();
    let pk = keygen(circuits[0], &mut rng);
    let e = engine();
    let key = e.load_key(pk.clone()).unwrap();
    let seed = rng.next_u64();
    let proofs = e.prove_partitions(&key, circuits.clone(), &mut StdRng::seed_from_u64(seed)).unwrap();
    let mut replay = StdRng::seed_from_u64(seed);
    for (c, proof) in circuits.iter().zip(&proofs) {
        let (r, s) = (Fr::rand(&mut replay), Fr::rand(&mut replay));
        assert_eq!(*proof, Groth16::<Bls12_381>::create_proof_with_reduction(*c, &pk, r, s).unwrap());
    }
    assert_eq!(proofs.len(), 5);
}

#[test]
fn cuda_is_refused_clearly_without_a_gpu_and_auto_falls_back_with_a_reason() {
    let auto = Engine::new(Config::default()).unwrap();
    assert!(engine().backend_note().is_none());
    match Engine::new(Config::cuda()) {
        // A machine with a usable GPU: auto picks it and has nothing to explain.
        Ok(cuda) => {
            assert_eq!(cuda.backend_name(), "cuda");
            assert_eq!(auto.backend_name(), "cuda");
            assert!(auto.backend_note().is_none());
        }
        Err(err) => {
            assert!(matches!(err, Error::BackendUnavailable { backend: BackendKind::Cuda, .. }), "{err}");
            assert!(err.to_string().contains("no usable CUDA GPU"), "{err}");
            assert_eq!(auto.backend_name(), "cpu");
            assert!(auto.backend_note().is_some_and(|n| n.contains("no usable CUDA GPU")));
        }
    }
}

#[test]
fn a_device_list_that_cannot_be_right_is_refused_before_any_gpu_is_opened() {
    for (devices, says) in [(vec![], "empty"), (vec![0, 1, 0], "listed twice")] {
        let config = Config { cuda_devices: Some(devices.clone()), ..Config::cuda() };
        let err = Engine::new(config).expect_err("a bad device list");
        assert!(matches!(err, Error::BackendUnavailable { backend: BackendKind::Cuda, .. }), "{err}");
        assert!(err.to_string().contains(says), "{devices:?}: {err}");
    }
    // The CPU backend has no devices to list.
    assert!(engine().cuda_devices().is_empty());
}

#[test]
fn unsatisfied_witness_names_the_constraint() {
    let mut rng = seeded_rng("unsatisfied");
    let inner =
        Synthetic { constraints: 80, public_inputs: 1, seed: 1, zero_witness: false, bit_share_per_mille: 0 };
    let key = engine().load_key(keygen(inner, &mut rng)).unwrap();
    let err = engine().prove(&key, Unsatisfied { inner, bad: 41 }, &mut rng).unwrap_err();
    assert!(
        matches!(err, Error::Synthesis(SynthError::Unsatisfied { index: 41, num_constraints: 80 })),
        "{err}"
    );
    assert!(err.to_string().contains("constraint 41"), "{err}");
}

#[test]
fn unchecked_unsatisfied_witness_is_caught_by_the_self_check() {
    let mut rng = seeded_rng("self_check");
    let inner =
        Synthetic { constraints: 80, public_inputs: 1, seed: 1, zero_witness: false, bit_share_per_mille: 0 };
    let e = Engine::new(Config { check_witness: false, ..Config::cpu() }).unwrap();
    let key = e.load_key(keygen(inner, &mut rng)).unwrap();
    let err = e.prove(&key, Unsatisfied { inner, bad: 7 }, &mut rng).unwrap_err();
    assert!(matches!(err, Error::Prove(ProveError::SelfCheckFailed)), "{err}");
}

#[test]
fn self_check_rejects_a_key_with_a_foreign_verifying_key() {
    let mut rng = seeded_rng("foreign_vk");
    let circuit = Synthetic::new(50, 2);
    let mut pk = keygen(circuit, &mut rng);
    pk.vk = keygen(circuit, &mut rng).vk;
    let e = engine();
    let key = e.load_key(pk).unwrap();
    let err = e.prove(&key, circuit, &mut rng).unwrap_err();
    assert!(matches!(err, Error::Prove(ProveError::SelfCheckFailed)), "{err}");
}

#[test]
fn pipelined_proofs_are_self_checked_after_the_kernel_step() {
    // The pipeline checks proofs in its finish stage, outside the kernel lock: a wrong proof still
    // never comes back.
    let mut rng = seeded_rng("pipelined_self_check");
    let circuit = Synthetic::new(50, 2);
    let mut pk = keygen(circuit, &mut rng);
    pk.vk = keygen(circuit, &mut rng).vk;
    let e = engine();
    let key = e.load_key(pk).unwrap();
    let randomness = vec![(Fr::from(3u64), Fr::from(4u64))];
    let err = e.prove_pipelined(&key, vec![circuit], randomness, Default::default()).unwrap_err();
    assert!(err.to_string().contains("self-check"), "{err}");
}

#[test]
fn the_host_budget_counts_the_key_and_must_hold_a_partition() {
    let mut rng = seeded_rng("pipelined_budget");
    let circuit = Synthetic::new(200, 1);
    let e = engine();
    let key = e.load_key(keygen(circuit, &mut rng)).unwrap();
    let run = |budget: u64| {
        let sched =
            cuzk::sched::Config { partition_workers: 1, host_budget_bytes: budget, ..Default::default() };
        e.prove_pipelined(&key, vec![circuit], vec![(Fr::from(3u64), Fr::from(4u64))], sched)
    };
    // The CPU backend keeps every base on the host: far more than one partition's a, b, c and z.
    let err = run(64 << 10).unwrap_err();
    let Error::HostBudget { budget, key: held, partition } = err else { panic!("{err}") };
    assert_eq!((budget, partition), (64 << 10, 256 * 128));
    assert!(held > budget, "a 256-row key's bases are over 64 KiB: {held}");
    assert!(err_text(run(held + partition - 1)).contains("raise host_budget_bytes"));
    assert_eq!(run(held + partition).unwrap().proofs.len(), 1, "the key and exactly one partition fit");
}

#[test]
fn pipelines_sharing_a_budget_reserve_their_keys_from_it() {
    use cuzk::sched::{Budget, JobId, Priority};
    let mut rng = seeded_rng("shared_budget");
    let circuit = Synthetic::new(200, 1);
    let e = engine();
    let key = e.load_key(keygen(circuit, &mut rng)).unwrap();
    let sched = cuzk::sched::Config { partition_workers: 1, ..Default::default() };
    let roomy = Budget::new(1 << 40);
    let p = e.pipeline_sharing::<Synthetic>(&key, sched.clone(), &roomy).unwrap();
    let (held, partition) = (p.key_host_bytes(), p.partition_host_bytes());
    assert!(held > 0 && partition > 0);
    assert_eq!(roomy.used(), held, "the key's host bytes are reserved while the pipeline lives");
    drop(p);
    assert_eq!(roomy.used(), 0, "and given back when it is dropped");

    // Room for two keys and one partition: a second pipeline fits, a third does not.
    let budget = Budget::new(2 * held + partition);
    let a = e.pipeline_sharing::<Synthetic>(&key, sched.clone(), &budget).unwrap();
    let b = e.pipeline_sharing::<Synthetic>(&key, sched.clone(), &budget).unwrap();
    let err = e.pipeline_sharing::<Synthetic>(&key, sched, &budget).unwrap_err();
    assert!(matches!(err, Error::HostBudget { budget: free, .. } if free == partition), "{err}");
    // Both prove in the room left for one partition.
    let (r, s) = (Fr::from(3u64), Fr::from(4u64));
    let jobs = [&a, &b].map(|p| p.submit(JobId(1), Priority::Normal, None, vec![(circuit, r, s)]).unwrap());
    let mut proofs = Vec::new();
    for j in jobs {
        proofs.extend(j.wait().unwrap());
    }
    let direct = e.prove_with_randomness(&key, circuit, r, s).unwrap();
    assert!(proofs.iter().all(|p| *p == direct), "the same proof through either pipeline");
    assert_eq!(budget.used(), 2 * held, "the partitions gave their bytes back; the keys hold theirs");
    drop((a, b));
    assert_eq!(budget.used(), 0);
}

fn err_text<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn key_for_another_circuit_says_which_counts_differ() {
    let mut rng = seeded_rng("key_mismatch");
    let e = engine();
    let key = e.load_key(keygen(Synthetic::new(50, 1), &mut rng)).unwrap();
    let cases = [
        (
            Synthetic {
                constraints: 50,
                public_inputs: 2,
                seed: 1,
                zero_witness: false,
                bit_share_per_mille: 0,
            },
            "instance variables",
        ),
        (Synthetic::new(51, 1), "witness variables"),
    ];
    for (circuit, what) in cases {
        match e.prove(&key, circuit, &mut rng).unwrap_err() {
            Error::Prove(ProveError::KeyMismatch { what: w, .. }) => assert_eq!(w, what),
            other => panic!("expected a key mismatch on {what}, got {other}"),
        }
    }
    let err = e.prove(&key, OneConstraint { x: Fr::from(2u64) }, &mut rng).unwrap_err();
    assert!(err.to_string().contains("the key has"), "{err}");
}

#[test]
fn malformed_keys_are_refused_at_load() {
    let mut rng = seeded_rng("malformed_key");
    let pk = keygen(Synthetic::new(30, 1), &mut rng);
    let mut short_l = pk.clone();
    short_l.l_query.pop();
    let mut short_b = pk.clone();
    short_b.b_g2_query.pop();
    let mut bad_h = pk;
    bad_h.h_query.push(bad_h.h_query[0]);
    for bad in [short_l, short_b, bad_h] {
        let err = engine().load_key(bad).unwrap_err();
        assert!(matches!(err, Error::Prove(ProveError::MalformedKey(_))), "{err}");
    }
}

#[test]
fn synthesis_errors_are_wrapped_and_partitions_named() {
    let mut rng = seeded_rng("synthesis_error");
    let e = engine();
    let key = e.load_key(keygen(OneConstraint { x: Fr::from(3u64) }, &mut rng)).unwrap();
    let err = e.prove(&key, FailingCircuit, &mut rng).unwrap_err();
    assert!(matches!(err, Error::Synthesis(SynthError::Circuit(_))), "{err}");

    let inner = Synthetic::new(40, 1);
    let key = e.load_key(keygen(inner, &mut rng)).unwrap();
    let circuits = vec![Unsatisfied { inner, bad: 40 }, Unsatisfied { inner, bad: 3 }];
    // Partition 0 is honest (bad = 40 is past the last constraint); partition 1 is not.
    let err = e.prove_partitions(&key, circuits, &mut rng).unwrap_err();
    assert!(matches!(&err, Error::Partition { index: 1, count: 2, .. }), "{err}");
    let err = e.prove_partitions_report(&key, vec![inner], vec![]).unwrap_err();
    assert!(matches!(err, Error::RandomnessCount { partitions: 1, pairs: 0 }), "{err}");
}

#[test]
fn pipelined_proofs_equal_ark_groth16_and_synthesis_overlaps_proving() {
    let mut rng = seeded_rng("pipelined");
    let circuits: Vec<Synthetic> = (0..4)
        .map(|i| Synthetic {
            constraints: 2000,
            public_inputs: 2,
            seed: i,
            zero_witness: false,
            bit_share_per_mille: 0,
        })
        .collect();
    let pk = keygen(circuits[0], &mut rng);
    let e = engine();
    let key = e.load_key(pk.clone()).unwrap();
    let randomness: Vec<(Fr, Fr)> = (0..4).map(|_| (Fr::rand(&mut rng), Fr::rand(&mut rng))).collect();
    let sched = cuzk::sched::Config { partition_workers: 2, gpu_workers_per_device: 2, ..Default::default() };
    let run = e.prove_pipelined(&key, circuits.clone(), randomness.clone(), sched).unwrap();
    for ((c, (r, s)), proof) in circuits.iter().zip(&randomness).zip(&run.proofs) {
        assert_eq!(*proof, Groth16::<Bls12_381>::create_proof_with_reduction(*c, &pk, *r, *s).unwrap());
    }
    let spans = run.timeline.spans();
    let synth: Vec<_> = spans.iter().filter(|s| s.kind == SpanKind::Synthesis).collect();
    let kernels: Vec<_> = spans.iter().filter(|s| s.kind == SpanKind::KernelLock).collect();
    assert_eq!((synth.len(), kernels.len()), (4, 4));
    let overlapped =
        synth.iter().any(|s| kernels.iter().any(|k| k.partition != s.partition && k.overlaps(s)));
    assert!(overlapped, "synthesis of one partition overlaps proving of another");
    for phase in [Stage::WitnessMap, Stage::Msms, Stage::Assembly].map(SpanKind::Kernel) {
        assert!(spans.iter().any(|s| s.kind == phase), "prover phase {phase} is on the kernel lane");
    }

    let bad = vec![Unsatisfied { inner: circuits[0], bad: 5 }];
    let err =
        e.prove_pipelined(&key, bad, vec![(Fr::from(1u64), Fr::from(2u64))], Default::default()).unwrap_err();
    assert!(err.to_string().contains("partition 0 failed in synthesis"), "{err}");
}

#[test]
fn several_pipelined_proofs_come_back_per_job_and_a_failing_job_fails_the_call() {
    let mut rng = seeded_rng("pipelined_jobs");
    let honest = |seed| Unsatisfied {
        inner: Synthetic {
            constraints: 300,
            public_inputs: 1,
            seed,
            zero_witness: false,
            bit_share_per_mille: 0,
        },
        bad: usize::MAX,
    };
    let pk = keygen(honest(0), &mut rng);
    let e = engine();
    let key = e.load_key(pk.clone()).unwrap();
    let mut job = |seeds: &[u64]| -> Vec<(Unsatisfied, Fr, Fr)> {
        seeds.iter().map(|&k| (honest(k), Fr::rand(&mut rng), Fr::rand(&mut rng))).collect()
    };
    let jobs = vec![job(&[1, 2]), job(&[3]), job(&[4, 5, 6])];
    let sched = cuzk::sched::Config { partition_workers: 2, ..Default::default() };
    let run = e.prove_pipelined_jobs(&key, jobs.clone(), sched.clone()).unwrap();
    assert_eq!(run.proofs.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1, 3]);
    for (job, proofs) in jobs.iter().zip(&run.proofs) {
        for ((c, r, s), proof) in job.iter().zip(proofs) {
            assert_eq!(*proof, Groth16::<Bls12_381>::create_proof_with_reduction(*c, &pk, *r, *s).unwrap());
        }
    }

    let mut bad_jobs = jobs;
    bad_jobs[1][0].0.bad = 7;
    let err = e.prove_pipelined_jobs(&key, bad_jobs, sched).unwrap_err();
    assert!(err.to_string().contains("partition 0 failed in synthesis"), "{err}");
}

#[test]
fn porep_like_partitions_prove_like_ark_groth16_and_verify() {
    use cuzk_circuits::PorepLike;
    let mut rng = seeded_rng("porep_like");
    let seed = rng.next_u64();
    // At 2^10 the tree has two leaves, so two partitions may challenge the same node and share their
    // public inputs; take partition 0 and the first partition whose public inputs differ.
    let first = PorepLike::for_log_constraints(10, seed, 0).unwrap();
    let other = (1..64)
        .map(|p| first.with_partition(p))
        .find(|c| c.public_input_values() != first.public_input_values())
        .expect("some partition challenges the other leaf");
    let partitions = vec![first, other];
    // One key for every partition: they share the shape.
    let pk = keygen(partitions[0], &mut rng);
    let e = engine();
    let key = e.load_key(pk.clone()).unwrap();
    let randomness: Vec<(Fr, Fr)> = (0..2).map(|_| (Fr::rand(&mut rng), Fr::rand(&mut rng))).collect();
    let reports = e.prove_partitions_report(&key, partitions.clone(), randomness.clone()).unwrap();
    for ((c, (r, s)), report) in partitions.iter().zip(&randomness).zip(&reports) {
        assert_eq!(report.counts.rows(), 1 << 10);
        assert_eq!(report.proof, Groth16::<Bls12_381>::create_proof_with_reduction(*c, &pk, *r, *s).unwrap());
        assert!(e.verify(&key, &report.proof, &c.public_input_values()).unwrap());
    }
    // Each proof is bound to its own partition's public inputs.
    assert!(!e.verify(&key, &reports[0].proof, &partitions[1].public_input_values()).unwrap());
}

#[test]
fn failures_inside_a_pipeline_reach_the_caller_with_their_kind() {
    use cuzk::sched::{JobId, Priority};
    use cuzk::ErrorKind;
    let mut rng = seeded_rng("pipeline_error_kinds");
    let inner = Synthetic::new(40, 1);
    let e = engine();
    let key = e.load_key(keygen(inner, &mut rng)).unwrap();
    let (r, s) = (Fr::from(3u64), Fr::from(4u64));
    // The budget path: too small for the key and one partition.
    let tight =
        cuzk::sched::Config { partition_workers: 1, host_budget_bytes: 1 << 10, ..Default::default() };
    let err = e.pipeline::<Unsatisfied>(&key, tight).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceExhausted, "{err}");
    assert!(matches!(err.root(), Error::HostBudget { .. }), "{err}");
    // A partition that fails inside the pipeline: its own error comes back, as `prove` gives it.
    let p = e
        .pipeline::<Unsatisfied>(&key, cuzk::sched::Config { partition_workers: 1, ..Default::default() })
        .unwrap();
    let job = p
        .submit(
            JobId(1),
            Priority::Normal,
            None,
            vec![(Unsatisfied { inner, bad: 40 }, r, s), (Unsatisfied { inner, bad: 3 }, r, s)],
        )
        .unwrap();
    let err = job.wait().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let direct = e.prove_with_randomness(&key, Unsatisfied { inner, bad: 3 }, r, s).unwrap_err();
    assert!(matches!(err.root(), Error::Synthesis(SynthError::Unsatisfied { .. })), "{err}");
    assert_eq!(err.root().to_string(), direct.to_string(), "the same error as from prove");
    // Cancelled, through the pipeline.
    let job = p
        .submit(
            JobId(2),
            Priority::Normal,
            None,
            // Honest partitions (`bad` past the last constraint), far more than run before the cancel.
            (0..5000).map(|_| (Unsatisfied { inner, bad: 40 }, r, s)).collect(),
        )
        .unwrap();
    assert!(job.cancel());
    assert_eq!(job.wait().unwrap_err().kind(), ErrorKind::Cancelled);
    // A submission the scheduler refuses: no partitions.
    let err = p.submit(JobId(3), Priority::Normal, None, vec![]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // No GPU here: the CUDA backend is unavailable, by kind (on a GPU host the engine opens).
    if let Err(err) = Engine::new(Config::cuda()) {
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    }
}
