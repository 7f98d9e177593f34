//! Filecoin's circuit kinds through the daemon: a 2 KiB WinningPoSt and PoRep C2 of a sector sealed
//! offline, proved from their requests (one input each, all partitions), accepted by Filecoin's
//! verifier; bad key parameters and bad requests refused with their reason, the daemon serving on.

mod common;

use common::{cpu_daemon, temp_dir};
use cuzk::sched::Priority;
use cuzk_filecoin::request::{C2Request, PostRequest};
use cuzk_filecoin::{
    ensure_parameters, random_field_bytes, Partitions, ProofType, RegisteredPoStProof, RegisteredSealProof,
    TestSector,
};
use cuzk_service::{Registry, ServiceError};

fn invalid(e: ServiceError) -> String {
    match e {
        ServiceError::InvalidArgument(m) => m,
        other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filecoin_proofs_through_the_daemon() {
    cuzk_testkit::filecoin_parameter_dir();
    let winning = RegisteredPoStProof::StackedDrgWinning2KiBV1;
    let seal = RegisteredSealProof::StackedDrg2KiBV1_1;
    ensure_parameters(ProofType::Post(winning)).expect("WinningPoSt parameters");
    ensure_parameters(ProofType::Seal(seal)).expect("PoRep parameters");
    let dir = temp_dir("filecoin");
    let d = cpu_daemon(&dir, Registry::default(), |_| {});

    // Key parameters that name no proof, or another family's, are refused.
    for (kind, params) in [
        ("filecoin-winning-post", &br#"{"registered_proof": "StackedDrgWindow2KiBV1_2"}"#[..]),
        ("filecoin-winning-post", br#"{"registered_proof": "NoSuchProof"}"#),
        ("filecoin-porep-c2", br#"{"registered_proof": "StackedDrgWinning2KiBV1"}"#),
        ("filecoin-porep-c2", b"{}"),
    ] {
        let e = invalid(d.load_key("bad", kind, params).expect_err("bad key parameters"));
        println!("{kind} {}: {e}", String::from_utf8_lossy(params));
    }
    d.load_key("winning", "filecoin-winning-post", br#"{"registered_proof": "StackedDrgWinning2KiBV1"}"#)
        .expect("WinningPoSt key");
    d.load_key("c2", "filecoin-porep-c2", br#"{"registered_proof": "StackedDrg2KiBV1_1"}"#).expect("C2 key");

    let sector_dir = temp_dir("filecoin-sector");
    let mut rng = cuzk_testkit::seeded_rng("daemon-filecoin");
    let sector = TestSector::seal(sector_dir.path(), seal, &mut rng).expect("seal");
    let randomness = random_field_bytes(&mut rng);
    let vanilla = sector.vanilla_post(winning, &randomness).expect("vanilla");
    let request = PostRequest {
        randomness,
        prover_id: sector.info.prover_id,
        vanilla_proofs: vec![vanilla],
        partitions: Partitions::All,
    };

    // Bad requests: not JSON, two inputs, another PoSt's randomness.
    let e = invalid(d.submit("winning", &[b"nope".to_vec()], Priority::Normal, None).expect_err("not JSON"));
    assert!(e.contains("PoSt request"), "{e}");
    let two = vec![request.to_json(), request.to_json()];
    let e = invalid(d.submit("winning", &two, Priority::Normal, None).expect_err("two inputs"));
    assert!(e.contains("one input"), "{e}");
    let mut other = request.clone();
    other.randomness = random_field_bytes(&mut rng);
    let e = invalid(
        d.submit("winning", &[other.to_json()], Priority::Normal, None).expect_err("other randomness"),
    );
    println!("other randomness: {e}");

    // The WinningPoSt, then the C2, each accepted by Filecoin's verifier.
    let job = d.submit("winning", &[request.to_json()], Priority::Normal, None).expect("submit");
    let done = d.await_proof(&job, None).await.expect("WinningPoSt");
    let proof = done.proofs.concat();
    assert_eq!(proof.len(), 192);
    assert!(sector.verify_post(winning, &randomness, &proof).expect("verify"), "Filecoin refuses the PoSt");

    let c2 = C2Request {
        c1: sector.c1().expect("C1"),
        prover_id: sector.info.prover_id,
        sector_id: sector.info.sector_id,
    };
    let job = d.submit("c2", &[c2.to_json().expect("json")], Priority::Normal, None).expect("submit C2");
    let done = d.await_proof(&job, None).await.expect("C2");
    assert!(sector.verify_seal(&done.proofs.concat()).expect("verify_seal"), "verify_seal refuses the C2");

    // A C1 output claimed for another sector proves, but Filecoin's verifier refuses it: the proof
    // fails instead of leaving the daemon.
    let wrong = C2Request { sector_id: c2.sector_id + 1, ..c2.clone() };
    let job = d.submit("c2", &[wrong.to_json().expect("json")], Priority::Normal, None).expect("submit");
    let e = d.await_proof(&job, None).await.expect_err("another sector's C2 leaves the daemon");
    assert!(e.to_string().contains("refuse"), "{e}");
}
