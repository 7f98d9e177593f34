//! The daemon on a loopback port with the CPU backend: concurrent clients whose proofs verify, bad
//! input, timeouts, cancellation, a client that goes away, metrics, and shutdown by either policy.

use std::sync::Arc;
use std::time::Duration;

use ark_bls12_381::{Bls12_381, Fr};
use ark_groth16::{Groth16, Proof, VerifyingKey};
use ark_serialize::CanonicalDeserialize;
use cuzk_service::proto::prover_client::ProverClient;
use cuzk_service::proto::{self as pb};
use cuzk_service::{Daemon, KindError, Listen, Registry, ServiceConfig, ShutdownPolicy};
use tonic::transport::Channel;
use tonic::Code;

mod common;
use common::{cpu_daemon, metric, temp_dir, TempDir};

/// A daemon serving on 127.0.0.1 with a fresh key directory.
struct Running {
    served: cuzk_service::Background,
    _dir: TempDir,
}

async fn start(name: &str, tune: impl FnOnce(&mut ServiceConfig)) -> Running {
    let dir = temp_dir(name);
    let mut config = ServiceConfig {
        listen: "127.0.0.1:0".into(),
        metrics_listen: String::new(),
        key_dir: dir.path().to_path_buf(),
        generate_missing_keys: true,
        backend: "cpu".into(),
        partition_workers: 2,
        ..ServiceConfig::default()
    };
    tune(&mut config);
    let daemon = Arc::new(Daemon::new(config, Registry::default()).expect("daemon"));
    let served = cuzk_service::spawn(daemon, Listen::Tcp("127.0.0.1:0".into())).await.expect("serve");
    Running { served, _dir: dir }
}

async fn client(r: &Running) -> ProverClient<Channel> {
    ProverClient::connect(format!("http://{}", r.served.addr)).await.expect("connect")
}

async fn load_synthetic(
    c: &mut ProverClient<Channel>,
    key_id: &str,
    log_rows: u32,
) -> VerifyingKey<Bls12_381> {
    let reply = c
        .load_key(pb::LoadKeyRequest {
            key_id: key_id.into(),
            circuit_kind: "synthetic".into(),
            params: format!(r#"{{"log_rows": {log_rows}}}"#).into_bytes(),
        })
        .await
        .expect("load key")
        .into_inner();
    VerifyingKey::deserialize_compressed(&reply.verifying_key[..]).expect("verifying key")
}

fn seed_input(seed: u64) -> Vec<u8> {
    format!(r#"{{"seed": {seed}}}"#).into_bytes()
}

fn submit(key_id: &str, seeds: &[u64]) -> pb::SubmitRequest {
    pb::SubmitRequest {
        key_id: key_id.into(),
        partitions: seeds.iter().map(|&s| seed_input(s)).collect(),
        ..pb::SubmitRequest::default()
    }
}

/// Checks each proof with ark-groth16 against the synthetic circuit's public inputs.
fn check_proofs(vk: &VerifyingKey<Bls12_381>, log_rows: u32, seeds: &[u64], proofs: &[Vec<u8>]) {
    assert_eq!(proofs.len(), seeds.len());
    let pvk = ark_groth16::prepare_verifying_key(vk);
    for (seed, bytes) in seeds.iter().zip(proofs) {
        let proof = Proof::<Bls12_381>::deserialize_compressed(&bytes[..]).expect("proof");
        let inputs: Vec<Fr> = cuzk_circuits::Synthetic::with_log_rows(log_rows, *seed).public_input_values();
        assert!(Groth16::<Bls12_381>::verify_proof(&pvk, &proof, &inputs).unwrap(), "seed {seed}");
    }
}

async fn stop(r: Running) {
    r.served.stop().await.expect("served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_clients_get_proofs_that_verify() {
    let r = start("concurrent", |_| {}).await;
    let mut c = client(&r).await;
    let vk = load_synthetic(&mut c, "syn6", 6).await;
    let tasks: Vec<_> = (0..4u64)
        .map(|i| {
            let mut c = c.clone();
            tokio::spawn(async move {
                let seeds = [10 * i + 1, 10 * i + 2];
                if i % 2 == 0 {
                    let reply = c.prove(submit("syn6", &seeds)).await.expect("prove").into_inner();
                    (seeds, reply.proofs)
                } else {
                    let job =
                        c.submit_proof(submit("syn6", &seeds)).await.expect("submit").into_inner().job_id;
                    let req = pb::AwaitRequest { job_id: job, timeout_ms: 0 };
                    (seeds, c.await_proof(req).await.expect("await").into_inner().proofs)
                }
            })
        })
        .collect();
    for t in tasks {
        let (seeds, proofs) = t.await.unwrap();
        check_proofs(&vk, 6, &seeds, &proofs);
    }
    assert_eq!(metric(&mut c, "cuzk_proofs_succeeded_total").await, 4.0);
    assert_eq!(metric(&mut c, "cuzk_partitions_proved_total").await, 8.0);
    assert_eq!(metric(&mut c, "cuzk_proofs_failed_total").await, 0.0);
    let status = c.get_status(pb::StatusRequest {}).await.unwrap().into_inner();
    assert_eq!(status.backend, "cpu");
    assert_eq!(status.keys.len(), 1);
    assert_eq!(status.keys[0].constraints, 62);
    assert!(status.jobs.is_empty(), "collected proofs are forgotten: {:?}", status.jobs);
    assert_eq!(
        status.circuit_kinds,
        ["filecoin-porep-c2", "filecoin-window-post", "filecoin-winning-post", "porep-like", "synthetic"]
    );
    // A second load of the same shape reads the key directory instead of generating.
    let again = c
        .load_key(pb::LoadKeyRequest {
            key_id: "syn6-again".into(),
            circuit_kind: "synthetic".into(),
            params: br#"{"log_rows": 6}"#.to_vec(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!again.generated);
    stop(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_requests_get_clear_codes_and_the_daemon_keeps_serving() {
    let r = start("bad", |c| {
        c.max_request_bytes = 64 << 10;
        c.max_partitions = 4;
        c.max_keys = 2;
    })
    .await;
    let mut c = client(&r).await;
    let vk = load_synthetic(&mut c, "k", 6).await;
    let load = |key_id: &str, kind: &str, params: &[u8]| pb::LoadKeyRequest {
        key_id: key_id.into(),
        circuit_kind: kind.into(),
        params: params.to_vec(),
    };
    let cases: Vec<(Code, &str, tonic::Status)> = vec![
        (Code::NotFound, "unknown circuit kind", c.load_key(load("x", "groth17", b"{}")).await.unwrap_err()),
        (
            Code::InvalidArgument,
            "outside",
            c.load_key(load("x", "synthetic", br#"{"log_rows": 60}"#)).await.unwrap_err(),
        ),
        (
            Code::InvalidArgument,
            "key parameters",
            c.load_key(load("x", "synthetic", b"\x00\x01")).await.unwrap_err(),
        ),
        (Code::InvalidArgument, "key id", c.load_key(load("../etc", "synthetic", b"{}")).await.unwrap_err()),
        (
            Code::AlreadyExists,
            "already resident",
            c.load_key(load("k", "synthetic", br#"{"log_rows": 6}"#)).await.unwrap_err(),
        ),
        (Code::NotFound, "no resident key", c.prove(submit("nope", &[1])).await.unwrap_err()),
        (Code::InvalidArgument, "partition 1", {
            let mut req = submit("k", &[1]);
            req.partitions.push(b"{\"seed\": -1}".to_vec());
            c.prove(req).await.unwrap_err()
        }),
        (Code::InvalidArgument, "1 to 4", c.prove(submit("k", &[1, 2, 3, 4, 5])).await.unwrap_err()),
        (Code::InvalidArgument, "1 to 4", c.prove(submit("k", &[])).await.unwrap_err()),
        (Code::InvalidArgument, "priority", {
            let mut req = submit("k", &[1]);
            req.priority = 99;
            c.prove(req).await.unwrap_err()
        }),
        (
            Code::NotFound,
            "no job",
            c.await_proof(pb::AwaitRequest { job_id: "job-999".into(), timeout_ms: 1 }).await.unwrap_err(),
        ),
    ];
    for (code, words, status) in cases {
        assert_eq!(status.code(), code, "{status:?}");
        assert!(status.message().contains(words), "{words:?} not in {:?}", status.message());
    }
    // A long id is refused by name, cut short in the message.
    let long =
        c.await_proof(pb::AwaitRequest { job_id: "j".repeat(20_000), timeout_ms: 0 }).await.unwrap_err();
    assert_eq!(long.code(), Code::InvalidArgument, "{long:?}");
    assert!(long.message().len() < 300, "{}", long.message().len());
    // At most max_keys keys.
    c.load_key(load("k2", "synthetic", br#"{"log_rows": 6}"#)).await.expect("a second key");
    let full = c.load_key(load("k3", "synthetic", br#"{"log_rows": 6}"#)).await.unwrap_err();
    assert_eq!(full.code(), Code::ResourceExhausted, "{full:?}");
    assert!(full.message().contains("max_keys"), "{full:?}");
    // Over the size limit: refused by the transport before the daemon sees it.
    let mut big = submit("k", &[1]);
    big.partitions[0] = vec![b' '; 100 << 10];
    let status = c.prove(big).await.unwrap_err();
    assert!(matches!(status.code(), Code::OutOfRange | Code::ResourceExhausted), "{status:?}");
    // And everyone else is still served.
    let reply = c.prove(submit("k", &[7])).await.unwrap().into_inner();
    check_proofs(&vk, 6, &[7], &reply.proofs);
    // Unknown key, bad partition input, too many and too few partitions, a bad priority.
    assert_eq!(metric(&mut c, "cuzk_requests_rejected_total").await, 5.0);
    // Unknown kind, bad parameters twice, a bad id, an id in use, one key too many.
    assert_eq!(metric(&mut c, "cuzk_key_loads_failed_total").await, 6.0);
    // Evicted keys take no new proofs.
    assert!(c.evict_key(pb::EvictKeyRequest { key_id: "k".into() }).await.unwrap().into_inner().evicted);
    assert_eq!(c.prove(submit("k", &[7])).await.unwrap_err().code(), Code::NotFound);
    stop(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn timeouts_cancellation_and_a_client_that_goes_away() {
    let r = start("cancel", |_| {}).await;
    let mut c = client(&r).await;
    load_synthetic(&mut c, "big", 13).await;
    let seeds: Vec<u64> = (0..24).collect();
    // Waiting times out; the job goes on and can be cancelled.
    let job = c.submit_proof(submit("big", &seeds)).await.unwrap().into_inner().job_id;
    let waited = c.await_proof(pb::AwaitRequest { job_id: job.clone(), timeout_ms: 1 }).await.unwrap_err();
    assert_eq!(waited.code(), Code::DeadlineExceeded, "{waited:?}");
    let status = c.get_status(pb::StatusRequest {}).await.unwrap().into_inner();
    let j = status.jobs.iter().find(|j| j.job_id == job).expect("the job is listed");
    assert_eq!(j.partitions, 24);
    assert!(!j.finished);
    assert!(c.cancel_proof(pb::CancelRequest { job_id: job.clone() }).await.unwrap().into_inner().cancelled);
    // Status says how it ended, not that every partition is done.
    let mut ended = None;
    for _ in 0..500 {
        let s = c.get_status(pb::StatusRequest {}).await.unwrap().into_inner();
        if let Some(j) = s.jobs.into_iter().find(|j| j.job_id == job && j.finished) {
            ended = Some(j);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ended = ended.expect("the cancelled job is listed as finished");
    assert_eq!(ended.outcome, "cancelled");
    assert!(ended.done < 24, "{ended:?}");
    let cancelled = c.await_proof(pb::AwaitRequest { job_id: job.clone(), timeout_ms: 0 }).await.unwrap_err();
    assert_eq!(cancelled.code(), Code::Cancelled, "{cancelled:?}");
    // Delivered once, then forgotten.
    let gone = c.await_proof(pb::AwaitRequest { job_id: job, timeout_ms: 0 }).await.unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);

    // Prove with a timeout cancels its job when the timeout runs out.
    let mut req = submit("big", &seeds);
    req.timeout_ms = 1;
    assert_eq!(c.prove(req).await.unwrap_err().code(), Code::DeadlineExceeded);

    // A client that disconnects mid-proof: its job is cancelled and forgotten.
    let mut gone_client = client(&r).await;
    let call = tokio::spawn(async move { gone_client.prove(submit("big", &seeds)).await });
    let mut listed = false;
    for _ in 0..200 {
        let s = c.get_status(pb::StatusRequest {}).await.unwrap().into_inner();
        if !s.jobs.is_empty() {
            listed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(listed, "the disconnecting client's job never showed up");
    call.abort();
    let mut forgotten = false;
    for _ in 0..500 {
        let s = c.get_status(pb::StatusRequest {}).await.unwrap().into_inner();
        if s.jobs.is_empty() && s.keys[0].live_jobs == 0 {
            forgotten = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(forgotten, "the job of a client that went away is still there");
    // Counted by the job's own task once its end is delivered, which may run a moment later.
    let mut cancelled = 0.0;
    for _ in 0..500 {
        cancelled = metric(&mut c, "cuzk_proofs_cancelled_total").await;
        if cancelled == 3.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(cancelled, 3.0);
    // The daemon still proves.
    load_synthetic(&mut c, "small", 6).await;
    c.prove(submit("small", &[3])).await.expect("a proof after all that");
    stop(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keys_share_one_budget_and_uncollected_proofs_expire() {
    // How much a key of this shape holds, and one partition, from a daemon with room to spare.
    let r = start("budget-probe", |_| {}).await;
    let mut c = client(&r).await;
    load_synthetic(&mut c, "probe", 6).await;
    let s = c.get_status(pb::StatusRequest {}).await.unwrap().into_inner();
    let held = s.keys[0].host_bytes;
    assert!(held > 0);
    assert_eq!(s.budget_used_bytes, held, "the key is reserved from the daemon's budget");
    let partition = s.keys[0].domain_size * 128;
    let Running { served, _dir: keys } = r;
    served.stop().await.unwrap();

    // Room for two such keys and one partition, not for three keys. The probe's key directory has
    // the key: generating it would need far more room than this budget (keygen.rs tests that).
    let bytes = 2 * held + partition + 1024;
    let r = start("budget", |c| {
        c.host_budget_gib = bytes as f64 / (1u64 << 30) as f64;
        c.result_ttl_secs = 1;
        c.key_dir = keys.path().to_path_buf();
    })
    .await;
    let mut c = client(&r).await;
    let vk = load_synthetic(&mut c, "a", 6).await;
    load_synthetic(&mut c, "b", 6).await;
    let refused = c
        .load_key(pb::LoadKeyRequest {
            key_id: "c".into(),
            circuit_kind: "synthetic".into(),
            params: br#"{"log_rows": 6}"#.to_vec(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("budget"), "{refused:?}");
    let s = c.get_status(pb::StatusRequest {}).await.unwrap().into_inner();
    assert_eq!(s.keys.len(), 2);
    assert_eq!(s.budget_used_bytes, 2 * held);
    // Both keys prove, their partitions sharing the room that is left.
    let (mut ca, mut cb) = (c.clone(), c.clone());
    let (pa, pb_) = tokio::join!(ca.prove(submit("a", &[1, 2])), cb.prove(submit("b", &[3])));
    check_proofs(&vk, 6, &[1, 2], &pa.unwrap().into_inner().proofs);
    check_proofs(&vk, 6, &[3], &pb_.unwrap().into_inner().proofs);
    let s = c.get_status(pb::StatusRequest {}).await.unwrap().into_inner();
    assert!(s.budget_peak_bytes <= s.budget_bytes, "{s:?}");
    assert_eq!(s.budget_used_bytes, 2 * held, "the partitions gave their bytes back: {s:?}");

    // Ids are unguessable: a sequence number, then 64 random bits.
    let first = c.submit_proof(submit("a", &[4])).await.unwrap().into_inner().job_id;
    let second = c.submit_proof(submit("a", &[5])).await.unwrap().into_inner().job_id;
    for id in [&first, &second] {
        let random = id.rsplit('-').next().unwrap();
        assert!(id.starts_with("job-") && random.len() == 16, "{id}");
        assert!(random.chars().all(|ch| ch.is_ascii_hexdigit()), "{id}");
    }
    assert_ne!(first.rsplit('-').next(), second.rsplit('-').next());
    // Nobody collects them: once finished, they are forgotten after result_ttl_secs.
    let mut gone = false;
    for _ in 0..400 {
        let s = c.get_status(pb::StatusRequest {}).await.unwrap().into_inner();
        if s.jobs.is_empty() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(gone, "uncollected proofs never expired");
    let e = c.await_proof(pb::AwaitRequest { job_id: first, timeout_ms: 0 }).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(metric(&mut c, "cuzk_results_expired_total").await, 2.0);
    assert_eq!(metric(&mut c, "cuzk_proof_seconds_count").await, 4.0);
    stop(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shutdown_finishes_or_cancels_live_proofs_by_policy() {
    for policy in [ShutdownPolicy::Finish, ShutdownPolicy::Cancel] {
        let r = start("shutdown", |c| c.shutdown = policy).await;
        let mut c = client(&r).await;
        let vk = load_synthetic(&mut c, "k", 12).await;
        let seeds: Vec<u64> = (0..6).collect();
        let mut caller = c.clone();
        let s2 = seeds.clone();
        let call = tokio::spawn(async move { caller.prove(submit("k", &s2)).await });
        // Stop once the proof is under way.
        loop {
            let s = c.get_status(pb::StatusRequest {}).await.unwrap().into_inner();
            if !s.jobs.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // A proof submitted without waiting: under "finish" it can still be collected while the
        // daemon drains.
        let job = c.submit_proof(submit("k", &[40])).await.unwrap().into_inner().job_id;
        let addr = r.served.addr.clone();
        let stopped = tokio::spawn(r.served.stop());
        let result = call.await.unwrap();
        match policy {
            ShutdownPolicy::Finish => {
                check_proofs(&vk, 12, &seeds, &result.expect("finished").into_inner().proofs);
                let refused = c.submit_proof(submit("k", &[41])).await.unwrap_err();
                assert_eq!(refused.code(), Code::Unavailable, "no new proofs while draining: {refused:?}");
                let collected = c.await_proof(pb::AwaitRequest { job_id: job, timeout_ms: 0 }).await;
                check_proofs(
                    &vk,
                    12,
                    &[40],
                    &collected.expect("collected while draining").into_inner().proofs,
                );
            }
            ShutdownPolicy::Cancel => assert_eq!(result.unwrap_err().code(), Code::Cancelled),
        }
        stopped.await.unwrap().expect("the server stops cleanly");
        // New connections are refused once it has stopped.
        assert!(ProverClient::connect(format!("http://{addr}")).await.is_err());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_unix_socket_serves_like_tcp_is_private_and_a_stale_one_is_replaced() {
    let dir = temp_dir("unix");
    let socket = dir.join("cuzk.sock");
    let config = ServiceConfig {
        key_dir: dir.join("keys"),
        generate_missing_keys: true,
        backend: "cpu".into(),
        partition_workers: 2,
        ..ServiceConfig::default()
    };
    let daemon = Arc::new(Daemon::new(config, Registry::default()).unwrap());
    let listen: Listen = format!("unix://{}", socket.display()).parse().unwrap();
    let served = cuzk_service::spawn(daemon, listen).await.unwrap();
    assert_eq!(served.addr, format!("unix://{}", socket.display()));
    let mut c = cuzk_service::client::connect(&served.addr).await.expect("connect over the socket");
    let vk = load_synthetic(&mut c, "k", 6).await;
    let reply = c.prove(submit("k", &[5, 6])).await.unwrap().into_inner();
    check_proofs(&vk, 6, &[5, 6], &reply.proofs);
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "only its user may connect: {mode:o}");
    }
    let fresh = || {
        Arc::new(
            Daemon::new(
                ServiceConfig {
                    key_dir: dir.join("keys"),
                    backend: "cpu".into(),
                    ..ServiceConfig::default()
                },
                Registry::default(),
            )
            .unwrap(),
        )
    };
    // A second daemon on the same live socket is refused; the first keeps serving.
    let e = cuzk_service::spawn(fresh(), Listen::Unix(socket.clone())).await.unwrap_err();
    assert!(matches!(e, cuzk_service::ServeError::SocketInUse(_)), "{e}");
    assert!(c.get_status(pb::StatusRequest {}).await.is_ok(), "the first daemon still answers");
    served.stop().await.unwrap();
    assert!(!socket.exists(), "the socket file is removed on shutdown");
    // A socket left by a daemon that died (nobody answers on it) is replaced.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let again =
        cuzk_service::spawn(fresh(), Listen::Unix(socket.clone())).await.expect("a stale socket is replaced");
    let mut c = cuzk_service::client::connect(&again.addr).await.expect("connect over the new socket");
    assert!(c.get_status(pb::StatusRequest {}).await.is_ok());
    again.stop().await.unwrap();
    // A path that is not a socket is refused, not taken over.
    std::fs::write(&socket, b"").unwrap();
    let e = cuzk_service::spawn(fresh(), Listen::Unix(socket.clone())).await.unwrap_err();
    assert!(matches!(e, cuzk_service::ServeError::SocketExists(_)), "{e}");
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert!(socket.exists(), "a file that is not a socket is left alone");
    assert!(["", "unix://", "nohost"].iter().all(|s| s.parse::<Listen>().is_err()));
}

/// Inputs a test holds in synthesis until it opens them: a worker stays busy exactly as long as
/// the test needs, however fast or slow the machine.
mod gate {
    use std::sync::{Condvar, Mutex};

    pub const FIRST: u64 = 1_000_001;
    pub const SECOND: u64 = 1_000_002;

    struct Gates {
        entered: Vec<u64>,
        open: Vec<u64>,
    }

    static GATES: Mutex<Gates> = Mutex::new(Gates { entered: Vec::new(), open: Vec::new() });
    static OPENED: Condvar = Condvar::new();

    fn gates() -> std::sync::MutexGuard<'static, Gates> {
        GATES.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Synthesis of a gated input waits here until the test opens its gate.
    pub fn hold(x: u64) {
        if x != FIRST && x != SECOND {
            return;
        }
        let mut g = gates();
        g.entered.push(x);
        while !g.open.contains(&x) {
            g = OPENED.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub fn open(x: u64) {
        gates().open.push(x);
        OPENED.notify_all();
    }

    /// Returns once a worker is held at `x`'s gate; fails the test after 30 s.
    pub async fn entered(x: u64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !gates().entered.contains(&x) {
            assert!(std::time::Instant::now() < deadline, "no worker reached gate {x}");
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// Opens both gates when dropped, so that a failing test unwinds instead of leaving a worker held
    /// (the daemon's shutdown would wait for it for ever).
    pub struct OpenOnDrop;

    impl Drop for OpenOnDrop {
        fn drop(&mut self) {
            open(FIRST);
            open(SECOND);
        }
    }
}

/// A kind registered by a library user: `x · x = y` with `y` public; its input is `x` as 8 bytes.
struct SquareKind;

struct SquareKey;

#[derive(Clone, Copy)]
struct Square(u64);

impl ark_relations::gr1cs::ConstraintSynthesizer<Fr> for Square {
    fn generate_constraints(
        self,
        cs: ark_relations::gr1cs::ConstraintSystemRef<Fr>,
    ) -> Result<(), ark_relations::gr1cs::SynthesisError> {
        use ark_relations::gr1cs::LinearCombination;
        gate::hold(self.0);
        // A circuit with a bug: the daemon must survive it.
        assert_ne!(self.0, 13, "unlucky input");
        // And a wrong witness for 11: y is not x · x.
        let wrong = Fr::from(u64::from(self.0 == 11));
        let x = cs.new_witness_variable(|| Ok(Fr::from(self.0)))?;
        let y = cs.new_input_variable(|| Ok(Fr::from(self.0) * Fr::from(self.0) + wrong))?;
        cs.enforce_r1cs_constraint(
            || LinearCombination::from(x),
            || LinearCombination::from(x),
            || LinearCombination::from(y),
        )
    }
}

impl cuzk_service::CircuitKind for SquareKind {
    fn name(&self) -> &str {
        "square"
    }

    fn key(&self, params: &[u8], _max_log_rows: u32) -> Result<Box<dyn cuzk_service::KindKey>, KindError> {
        if params.is_empty() {
            Ok(Box::new(SquareKey))
        } else {
            Err(KindError::circuit("square takes no parameters"))
        }
    }
}

fn square_input(input: &[u8]) -> Result<u64, KindError> {
    let bytes = input.try_into().map_err(|_| KindError::circuit(format!("{} bytes, not 8", input.len())))?;
    Ok(u64::from_le_bytes(bytes))
}

impl cuzk_service::KindKey for SquareKey {
    fn shape_id(&self) -> String {
        "square-v1".into()
    }

    fn template(&self) -> Result<cuzk_service::BoxedCircuit, KindError> {
        Ok(cuzk_service::BoxedCircuit::new(Square(3)))
    }

    fn keygen_seed(&self) -> u64 {
        9
    }

    fn rows(&self) -> u64 {
        2
    }

    fn partition(&self, input: &[u8]) -> Result<cuzk_service::BoxedCircuit, KindError> {
        square_input(input).map(|x| cuzk_service::BoxedCircuit::new(Square(x)))
    }

    fn public_inputs(&self, input: &[u8]) -> Result<Vec<Fr>, KindError> {
        square_input(input).map(|x| vec![Fr::from(x) * Fr::from(x)])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_registered_by_the_library_user_is_proved() {
    let dir = temp_dir("custom");
    let mut registry = Registry::default();
    registry.register(SquareKind);
    let daemon = cpu_daemon(&dir, registry, |_| {});
    let served = cuzk_service::spawn(daemon, Listen::Tcp("127.0.0.1:0".into())).await.unwrap();
    let mut c = cuzk_service::client::connect(&served.addr).await.unwrap();
    let reply = c
        .load_key(pb::LoadKeyRequest { key_id: "sq".into(), circuit_kind: "square".into(), params: vec![] })
        .await
        .unwrap()
        .into_inner();
    assert!(reply.generated && reply.shape_id == "square-v1");
    let vk = VerifyingKey::<Bls12_381>::deserialize_compressed(&reply.verifying_key[..]).unwrap();
    let req = pb::SubmitRequest {
        key_id: "sq".into(),
        partitions: vec![5u64.to_le_bytes().to_vec(), 7u64.to_le_bytes().to_vec()],
        ..pb::SubmitRequest::default()
    };
    let proofs = c.prove(req).await.unwrap().into_inner().proofs;
    let pvk = ark_groth16::prepare_verifying_key(&vk);
    for (x, bytes) in [5u64, 7].iter().zip(&proofs) {
        let proof = Proof::<Bls12_381>::deserialize_compressed(&bytes[..]).unwrap();
        assert!(Groth16::<Bls12_381>::verify_proof(&pvk, &proof, &[Fr::from(x * x)]).unwrap());
    }
    // A circuit that panics fails its proof with the panic's message; the daemon goes on.
    let req = pb::SubmitRequest {
        key_id: "sq".into(),
        partitions: vec![2u64.to_le_bytes().to_vec(), 13u64.to_le_bytes().to_vec()],
        ..pb::SubmitRequest::default()
    };
    let status = c.prove(req).await.unwrap_err();
    assert_eq!(status.code(), Code::Internal, "{status:?}");
    assert!(
        status.message().contains("partition 1") && status.message().contains("unlucky input"),
        "{status:?}"
    );
    let bad = pb::SubmitRequest {
        key_id: "sq".into(),
        partitions: vec![vec![1, 2, 3]],
        ..pb::SubmitRequest::default()
    };
    let status = c.prove(bad).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("3 bytes, not 8"), "{status:?}");
    served.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_of_engine_error_reaches_the_client_as_its_code() {
    let dir = temp_dir("codes");
    let mut registry = Registry::default();
    registry.register(SquareKind);
    let daemon = cpu_daemon(&dir, registry, |c| {
        c.partition_workers = 1;
        c.priority_workers = 0;
    });
    let served = cuzk_service::spawn(Arc::clone(&daemon), Listen::Tcp("127.0.0.1:0".into())).await.unwrap();
    let mut c = cuzk_service::client::connect(&served.addr).await.unwrap();
    let load = |key_id: &str, kind: &str, params: &[u8]| pb::LoadKeyRequest {
        key_id: key_id.into(),
        circuit_kind: kind.into(),
        params: params.to_vec(),
    };
    c.load_key(load("sq", "square", b"")).await.unwrap();
    let square = |xs: &[u64]| pb::SubmitRequest {
        key_id: "sq".into(),
        partitions: xs.iter().map(|x| x.to_le_bytes().to_vec()).collect(),
        ..pb::SubmitRequest::default()
    };
    // Bad input found while proving: a witness that does not satisfy the key's constraints.
    let status = c.prove(square(&[2, 11])).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("does not satisfy"), "{status:?}");
    // A bug in a circuit (it panics): INTERNAL.
    assert_eq!(c.prove(square(&[13])).await.unwrap_err().code(), Code::Internal);
    // A key file in the directory that is corrupt: DATA_LOSS, naming what is wrong.
    let store = cuzk::keystore::KeyStore::open(dir.path()).unwrap();
    let shape_id = "syn-corrupt";
    let synthetic = cuzk_circuits::Synthetic::with_log_rows(5, 1);
    let path = store.path_for(&synthetic.shape_id()).unwrap();
    std::fs::write(&path, b"CUZKPK but nothing after").unwrap();
    let status = c.load_key(load(shape_id, "synthetic", br#"{"log_rows": 5}"#)).await.unwrap_err();
    assert_eq!(status.code(), Code::DataLoss, "{status:?}");
    // A job whose deadline passes before its partition starts: the one worker is held in the busy
    // job's first partition while the late job (high priority: it goes next) waits past its deadline.
    // Declared after the daemon, so dropped (gates opened) before it on any failure below.
    let _open = gate::OpenOnDrop;
    let busy = c.submit_proof(square(&[gate::FIRST, gate::SECOND])).await.unwrap().into_inner().job_id;
    gate::entered(gate::FIRST).await;
    let mut late = square(&[3]);
    late.deadline_ms = 1;
    late.priority = pb::Priority::High.into();
    let late = c.submit_proof(late).await.unwrap().into_inner().job_id;
    tokio::time::sleep(Duration::from_millis(20)).await;
    gate::open(gate::FIRST);
    let status = c.await_proof(pb::AwaitRequest { job_id: late, timeout_ms: 30_000 }).await.unwrap_err();
    // The job's own deadline, not the wait's 30 s (which has the same code).
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("before partition 0 started"), "{status:?}");
    // Cancelled while the worker is held in the busy job's second partition.
    gate::entered(gate::SECOND).await;
    assert!(c.cancel_proof(pb::CancelRequest { job_id: busy.clone() }).await.unwrap().into_inner().cancelled);
    gate::open(gate::SECOND);
    let status = c.await_proof(pb::AwaitRequest { job_id: busy, timeout_ms: 0 }).await.unwrap_err();
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
    // Shutting down: UNAVAILABLE.
    daemon.stop_accepting();
    assert_eq!(c.prove(square(&[4])).await.unwrap_err().code(), Code::Unavailable);
    served.stop().await.unwrap();
}

/// Sends a request's bytes as they are, whatever they hold, and decodes the reply as a `LoadKeyReply`.
#[derive(Default)]
struct RawLoadKey;

struct RawEncoder;

impl tonic::codec::Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, buf: &mut tonic::codec::EncodeBuf<'_>) -> Result<(), tonic::Status> {
        bytes::BufMut::put_slice(buf, &item);
        Ok(())
    }
}

impl tonic::codec::Codec for RawLoadKey {
    type Encode = Vec<u8>;
    type Decode = pb::LoadKeyReply;
    type Encoder = RawEncoder;
    type Decoder = tonic_prost::ProstDecoder<pb::LoadKeyReply>;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstCodec::<(), pb::LoadKeyReply>::raw_decoder(Default::default())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_requests_and_key_files_that_are_no_files_are_refused_clearly() {
    let r = start("undecodable", |_| {}).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", r.served.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut raw = tonic::client::Grpc::new(channel);
    for (bytes, what) in [
        // key_id (field 1) holding bytes that are not UTF-8.
        (vec![0x0a, 0x02, 0xff, 0xfe], "invalid UTF-8"),
        // key_id announcing 9 bytes and holding 1.
        (vec![0x0a, 0x09, b'k'], "truncated"),
    ] {
        raw.ready().await.unwrap();
        let path = tonic::codegen::http::uri::PathAndQuery::from_static("/cuzk.v1.Prover/LoadKey");
        let status = raw.unary(tonic::Request::new(bytes), path, RawLoadKey).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
        assert!(status.message().contains("not a valid message"), "{what}: {status:?}");
    }
    // A FIFO where the key file would be: refused at once (opening it would wait for a writer).
    let mut c = client(&r).await;
    let shape = cuzk_circuits::Synthetic::with_log_rows(5, 0).shape_id();
    let path = cuzk::keystore::KeyStore::open(r._dir.path()).unwrap().path_for(&shape).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(&path).status().unwrap().success());
    let load = pb::LoadKeyRequest {
        key_id: "fifo".into(),
        circuit_kind: "synthetic".into(),
        params: br#"{"log_rows": 5}"#.to_vec(),
    };
    let status = tokio::time::timeout(Duration::from_secs(10), c.load_key(load))
        .await
        .expect("LoadKey answers instead of waiting on the FIFO")
        .unwrap_err();
    assert!(status.message().contains("is a FIFO, not a regular file"), "{status:?}");
    // The daemon still serves, and stops without waiting on the FIFO either.
    c.get_status(pb::StatusRequest {}).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), stop(r)).await.expect("the daemon stops");
}

#[test]
fn submitting_outside_a_runtime_is_an_error_not_a_panic() {
    let dir = temp_dir("no-runtime");
    let config = ServiceConfig {
        key_dir: dir.path().to_path_buf(),
        backend: "cpu".into(),
        ..ServiceConfig::default()
    };
    let daemon = Arc::new(Daemon::new(config.clone(), Registry::default()).unwrap());
    // By default a key the directory lacks is refused, not generated.
    let e = daemon.load_key("k", "synthetic", br#"{"log_rows": 6}"#).unwrap_err();
    assert!(e.to_string().contains("generating keys is off"), "{e}");
    let config = ServiceConfig { generate_missing_keys: true, ..config };
    let daemon = Arc::new(Daemon::new(config, Registry::default()).unwrap());
    let loaded = daemon.load_key("k", "synthetic", br#"{"log_rows": 6}"#).unwrap();
    assert!(loaded.generated);
    let e = daemon.submit("k", &[seed_input(1)], cuzk::sched::Priority::Normal, None).unwrap_err();
    assert!(e.to_string().contains("outside a tokio runtime"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_in_use_and_why_are_in_get_status_and_the_metrics() {
    for backend in ["cpu", "auto"] {
        let r = start(&format!("backend-{backend}"), |c| c.backend = backend.into()).await;
        let mut c = client(&r).await;
        load_synthetic(&mut c, "k", 6).await;
        let status = c.get_status(pb::StatusRequest {}).await.unwrap().into_inner();
        let metrics = c.get_metrics(pb::MetricsRequest {}).await.unwrap().into_inner().text;
        // `auto` on a machine without a usable GPU proves on the CPU and says why; asked for the CPU,
        // or finding a GPU, it has nothing to say.
        let fell_back = backend == "auto" && status.backend == "cpu";
        assert_eq!(!status.backend_note.is_empty(), fell_back, "{backend}: {:?}", status.backend_note);
        if fell_back {
            assert!(status.backend_note.contains("CUDA"), "{}", status.backend_note);
        }
        let gauge = format!("cuzk_backend_fallback {}", u8::from(fell_back));
        assert!(metrics.lines().any(|l| l == gauge), "{backend}: no `{gauge}` in\n{metrics}");
        // The units the GPU multiplies on; the CPU has none to name.
        assert_eq!(status.mul_units.is_empty(), status.backend == "cpu", "{:?}", status.mul_units);
        // The CPU backend has nothing to degrade: no streamed bases, no device slots.
        if status.backend == "cpu" {
            assert!(status.keys.iter().all(|k| k.degradations.is_empty()), "{:?}", status.keys);
            // Resident on no GPU: the host is not counted as a device.
            assert!(status.keys.iter().all(|k| k.devices == 0), "{:?}", status.keys);
            assert!(!metrics.contains("cuzk_key_degradations{"), "{metrics}");
        }
    }
}

#[test]
fn a_daemon_refuses_to_start_on_a_value_out_of_range_naming_it() {
    let dir = temp_dir("ranges");
    for (tune, field) in [
        (
            Box::new(|c: &mut ServiceConfig| c.shutdown_grace_secs = i64::MAX as u64)
                as Box<dyn Fn(&mut ServiceConfig)>,
            "shutdown_grace_secs",
        ),
        (Box::new(|c: &mut ServiceConfig| c.max_log_rows = 100), "max_log_rows"),
    ] {
        let mut config = ServiceConfig {
            key_dir: dir.path().to_path_buf(),
            backend: "cpu".into(),
            ..ServiceConfig::default()
        };
        tune(&mut config);
        let Err(err) = Daemon::new(config, Registry::default()) else { panic!("{field}: accepted") };
        assert!(matches!(err, cuzk_service::ServiceError::InvalidArgument(_)), "{err:?}");
        assert!(err.to_string().contains(field), "{err}");
    }
}
