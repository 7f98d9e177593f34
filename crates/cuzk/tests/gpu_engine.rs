//! The engine on the GPUs: every device of the machine proves, and every proof equals ark-groth16's.
//! Compiled only with the `gpu-tests` feature (`cargo xtask gpu-test`); without a GPU every test
//! fails, never passes.
#![cfg(feature = "gpu-tests")]

use std::collections::BTreeSet;

use ark_bls12_381::{Bls12_381, Fr};
use ark_ff::UniformRand;
use ark_groth16::Groth16;
use cuzk::{Config, Engine};
use cuzk_circuits::Synthetic;
use cuzk_testkit::{keygen, seeded_rng};
use rand::Rng;

fn engine() -> Engine {
    let engine =
        Engine::new(Config::cuda()).unwrap_or_else(|e| panic!("the GPU suite needs a CUDA GPU: {e}"));
    eprintln!("engine on GPUs {:?}", engine.cuda_devices());
    engine
}

#[test]
fn a_pipeline_proves_on_every_gpu_and_every_proof_equals_ark_groth16() {
    let engine = engine();
    let devices = engine.cuda_devices();
    let mut rng = seeded_rng("gpu_engine_pipeline");
    let shape = Synthetic::with_log_rows(12, rng.gen()).with_bit_share(300);
    let pk = keygen(shape, &mut rng);
    let key = engine.load_key(pk.clone()).unwrap();
    assert_eq!(key.devices(), devices.len(), "the key is resident on every GPU");
    // Three proofs of four partitions: enough partitions for every GPU worker of every device.
    let jobs: Vec<Vec<(Synthetic, Fr, Fr)>> = (0..3)
        .map(|_| {
            (0..4)
                .map(|_| {
                    let c = Synthetic::with_log_rows(12, rng.gen()).with_bit_share(300);
                    (c, Fr::rand(&mut rng), Fr::rand(&mut rng))
                })
                .collect()
        })
        .collect();
    let sched = cuzk::sched::Config { partition_workers: 4, gpu_workers_per_device: 2, ..Default::default() };
    let run = engine.prove_pipelined_jobs(&key, jobs.clone(), sched).unwrap();
    for (j, (proofs, inputs)) in run.proofs.iter().zip(&jobs).enumerate() {
        assert_eq!(proofs.len(), inputs.len());
        for (p, (proof, (c, r, s))) in proofs.iter().zip(inputs).enumerate() {
            let ark = Groth16::<Bls12_381>::create_proof_with_reduction(*c, &pk, *r, *s).unwrap();
            assert_eq!(proof, &ark, "job {j}, partition {p}");
        }
    }
    // Every device ran kernels.
    let lanes: BTreeSet<cuzk::sched::Lane> =
        run.timeline.spans().into_iter().filter(|s| s.kind.is_kernel()).map(|s| s.lane).collect();
    let expected: BTreeSet<cuzk::sched::Lane> =
        (0..devices.len()).map(|device| cuzk::sched::Lane::Kernels { device }).collect();
    assert_eq!(lanes, expected, "kernel lanes of the timeline");
    check_each_partition_ran_where_its_worker_was(&run.timeline.spans());
}

/// Each partition's copies and kernels are on the lanes of the device whose GPU worker uploaded it, and
/// its kernels ran (by the device's clock) after its worker took the kernel lock and before it
/// finished.
fn check_each_partition_ran_where_its_worker_was(spans: &[cuzk::sched::Span]) {
    use cuzk::sched::{Lane, SpanKind};
    let parts: BTreeSet<(u64, usize)> =
        spans.iter().filter(|s| s.job != 0).map(|s| (s.job, s.partition)).collect();
    // The anchors' error and the timeline's rounding: well under a millisecond.
    let slack_us = 1_000.0;
    for (job, partition) in parts {
        let of = |kind: SpanKind| -> Vec<&cuzk::sched::Span> {
            spans.iter().filter(|s| (s.job, s.partition) == (job, partition) && s.kind == kind).collect()
        };
        let upload = of(SpanKind::Upload);
        let [upload] = upload.as_slice() else {
            panic!("job {job} partition {partition}: {} uploads", upload.len())
        };
        let Lane::GpuWorker { device, .. } = upload.lane else { panic!("upload on {}", upload.lane) };
        let lock = of(SpanKind::KernelLock)[0];
        let finish = of(SpanKind::Finish)[0];
        let copies = of(SpanKind::Copy);
        assert!(!copies.is_empty(), "job {job} partition {partition}: no copy span");
        assert!(copies.iter().all(|c| c.lane == Lane::Copies { device }), "copies off device {device}");
        let kernels: Vec<_> =
            spans.iter().filter(|s| (s.job, s.partition) == (job, partition) && s.kind.is_kernel()).collect();
        assert!(!kernels.is_empty(), "job {job} partition {partition}: no kernels");
        for k in kernels {
            assert_eq!(k.lane, Lane::Kernels { device }, "job {job} partition {partition}: {}", k.kind);
            assert!(
                k.start_us + slack_us >= lock.start_us && k.end_us <= finish.start_us + slack_us,
                "job {job} partition {partition}: {} placed at {}..{} us, outside its worker's {}..{} us",
                k.kind,
                k.start_us,
                k.end_us,
                lock.start_us,
                finish.start_us
            );
        }
    }
}

#[test]
fn single_proofs_take_the_gpus_in_turn_and_equal_ark_groth16() {
    let engine = engine();
    let mut rng = seeded_rng("gpu_engine_single");
    let shape = Synthetic::with_log_rows(10, rng.gen()).with_bit_share(500);
    let pk = keygen(shape, &mut rng);
    let key = engine.load_key(pk.clone()).unwrap();
    // Twice as many proofs as devices, in parallel: each device proves some.
    let circuits: Vec<Synthetic> =
        (0..2 * key.devices()).map(|_| Synthetic::with_log_rows(10, rng.gen()).with_bit_share(500)).collect();
    prove_and_compare(&engine, &key, &pk, circuits, &mut rng, "single proofs");
}

/// Proves `circuits` on `key` with fresh randomness and compares each proof with ark-groth16's.
fn prove_and_compare(
    engine: &Engine,
    key: &cuzk::Key,
    pk: &ark_groth16::ProvingKey<Bls12_381>,
    circuits: Vec<Synthetic>,
    rng: &mut impl Rng,
    what: &str,
) {
    let randomness: Vec<(Fr, Fr)> = circuits.iter().map(|_| (Fr::rand(rng), Fr::rand(rng))).collect();
    let reports = engine.prove_partitions_report(key, circuits.clone(), randomness.clone()).unwrap();
    for (i, (report, (c, (r, s)))) in reports.iter().zip(circuits.iter().zip(&randomness)).enumerate() {
        let ark = Groth16::<Bls12_381>::create_proof_with_reduction(*c, pk, *r, *s).unwrap();
        assert_eq!(report.proof, ark, "{what}: proof {i}");
    }
}

#[test]
fn proofs_with_the_fp64_units_equal_ark_groth16() {
    // Config::mul_units reaches the NTT passes (every proof's witness map); G1's batched MSM round
    // takes it from 2^22 points, which the MSM tests of cuzk-cuda cover.
    let mut rng = seeded_rng("gpu_engine_units");
    let shape = Synthetic::with_log_rows(12, rng.gen()).with_bit_share(300);
    let pk = keygen(shape, &mut rng);
    for units in [cuzk::MulUnits::Fp64, cuzk::MulUnits::Mixed] {
        let engine = Engine::new(Config { mul_units: units, ..Config::cuda() }).unwrap();
        let key = engine.load_key(pk.clone()).unwrap();
        let circuits: Vec<Synthetic> =
            (0..2).map(|_| Synthetic::with_log_rows(12, rng.gen()).with_bit_share(300)).collect();
        prove_and_compare(&engine, &key, &pk, circuits, &mut rng, &format!("{units:?}"));
    }
}

#[test]
fn a_device_list_with_a_missing_gpu_is_refused_clearly() {
    let count = engine().cuda_devices().len();
    let config = Config { cuda_devices: Some(vec![0, count]), ..Config::cuda() };
    let err = Engine::new(config).expect_err("a GPU that does not exist");
    assert!(err.to_string().contains(&format!("GPU {count}")), "{err}");
    let config = Config { cuda_devices: Some(vec![0, 0]), ..Config::cuda() };
    let err = Engine::new(config).expect_err("a GPU listed twice");
    assert!(err.to_string().contains("listed twice"), "{err}");
}

#[test]
fn partitions_evaluated_on_the_gpu_equal_ark_groth16_and_a_bad_witness_is_refused() {
    use cuzk::{Error, SynthesisMode};
    use cuzk_circuits::PorepLike;
    let engine = engine();
    let mut rng = seeded_rng("gpu_engine_compact");
    let params = PorepLike::params_for_log_constraints(14).unwrap();
    let seed = rng.gen();
    let first = PorepLike::new(params, seed, 0).unwrap();
    let pk = keygen(first, &mut rng);
    let key = engine.load_key_recording_shape(pk.clone(), first).unwrap();
    assert_eq!(engine.synthesis_mode(&key), SynthesisMode::Compact, "{:?}", key.degradations());
    assert!(key.shape_device_bytes() > 0);
    // The shape's matrices are on the GPU only: the host keeps their counts.
    assert!(key.shape().is_none(), "no host copy of a shape the GPUs evaluate");
    assert_eq!(key.shape_counts().map(|c| c.rows()), Some(1 << 14));
    // Single proofs and a pipeline of two proofs of three partitions.
    let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
    let circuit = PorepLike::new(params, seed, 5).unwrap();
    let report = engine.prove_report(&key, circuit, r, s).unwrap();
    assert_eq!(report.synthesis_mode, SynthesisMode::Compact);
    let ark = Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s).unwrap();
    assert_eq!(report.proof, ark, "single proof");
    let jobs: Vec<Vec<(PorepLike, Fr, Fr)>> = (0..2)
        .map(|j| {
            (0..3)
                .map(|p| {
                    (PorepLike::new(params, seed ^ j, p).unwrap(), Fr::rand(&mut rng), Fr::rand(&mut rng))
                })
                .collect()
        })
        .collect();
    let sched = cuzk::sched::Config { partition_workers: 3, gpu_workers_per_device: 2, ..Default::default() };
    let run = engine.prove_pipelined_jobs(&key, jobs.clone(), sched.clone()).unwrap();
    assert_eq!(run.synthesis_mode, SynthesisMode::Compact);
    for (j, (proofs, inputs)) in run.proofs.iter().zip(&jobs).enumerate() {
        for (p, (proof, (c, r, s))) in proofs.iter().zip(inputs).enumerate() {
            let ark = Groth16::<Bls12_381>::create_proof_with_reduction(*c, &pk, *r, *s).unwrap();
            assert_eq!(proof, &ark, "job {j}, partition {p}");
        }
    }
    // SHA-256 labels (computed on words in witness-only synthesis) through the GPU's evaluation.
    let sha = cuzk_circuits::PorepParams {
        challenges: 2,
        depth: 3,
        base_parents: 1,
        expander_parents: 1,
        label_hash: cuzk_circuits::LabelHash::Sha256,
        filler: 5,
    };
    let sha_first = PorepLike::new(sha, seed, 0).unwrap();
    let sha_pk = keygen(sha_first, &mut rng);
    let sha_key = engine.load_key_recording_shape(sha_pk.clone(), sha_first).unwrap();
    assert_eq!(engine.synthesis_mode(&sha_key), SynthesisMode::Compact);
    for p in [1, 4] {
        let c = PorepLike::new(sha, seed ^ 3, p).unwrap();
        let ark = Groth16::<Bls12_381>::create_proof_with_reduction(c, &sha_pk, r, s).unwrap();
        assert_eq!(engine.prove_with_randomness(&sha_key, c, r, s).unwrap(), ark, "SHA-256 labels, {p}");
    }
    // The pipeline budgets a partition by its compact size.
    let pipeline = engine.pipeline::<PorepLike>(&key, sched.clone()).unwrap();
    let full = 4 * 32 * key.domain_size() as u64;
    assert!(pipeline.partition_host_bytes() < full, "{} of {full}", pipeline.partition_host_bytes());
    drop(pipeline);
    // With device evaluation off, the host evaluates and the proofs are the same.
    let host = Engine::new(Config { evaluate_on_device: false, ..Config::cuda() }).unwrap();
    let host_key = host.load_key_recording_shape(pk.clone(), first).unwrap();
    assert_eq!(host.synthesis_mode(&host_key), SynthesisMode::WitnessOnly);
    assert!(host_key.shape().is_some(), "the host evaluates, so it keeps the shape");
    assert_eq!(host.prove_with_randomness(&host_key, circuit, r, s).unwrap(), ark);
    // A witness that breaks the shape: refused with the constraint's index, no proof.
    let honest =
        cuzk_testkit::Unsatisfied { inner: Synthetic::with_log_rows(12, rng.gen()), bad: usize::MAX };
    let pk = keygen(honest, &mut rng);
    let key = engine.load_key_recording_shape(pk, honest).unwrap();
    let bad = cuzk_testkit::Unsatisfied { bad: 321, ..honest };
    let err = engine.prove_with_randomness(&key, bad, r, s).unwrap_err();
    assert!(matches!(err, Error::ShapeUnsatisfied { index: 321, .. }), "{err}");
    let run = engine.prove_pipelined(&key, vec![honest, bad], vec![(r, s), (r, s)], sched);
    let err = run.unwrap_err();
    assert!(matches!(err.root(), Error::ShapeUnsatisfied { index: 321, .. }), "{err}");
}
