//! Key generation in the daemon: admitted by the host budget before it starts, done once for loads
//! of one missing key, and stopped when its caller goes away or the daemon shuts down.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_service::proto::{self as pb};
use cuzk_service::{Listen, Registry};
use tonic::Code;

mod common;
use common::{cpu_daemon, metric, temp_dir};

fn load(key_id: &str, log_rows: u32) -> pb::LoadKeyRequest {
    pb::LoadKeyRequest {
        key_id: key_id.into(),
        circuit_kind: "synthetic".into(),
        params: format!(r#"{{"log_rows": {log_rows}}}"#).into_bytes(),
    }
}

fn key_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_too_large_for_the_budget_is_refused_before_generation_starts() {
    let dir = temp_dir("keygen-budget");
    // 2^20 rows need about 1.8 GiB to generate: far more than a 512 MiB budget.
    let daemon = cpu_daemon(&dir, Registry::default(), |c| c.host_budget_gib = 0.5);
    let served = cuzk_service::spawn(daemon, Listen::Tcp("127.0.0.1:0".into())).await.unwrap();
    let mut c = cuzk_service::client::connect(&served.addr).await.unwrap();
    let t = Instant::now();
    let status = c.load_key(load("big", 20)).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("needs about 1.75 GiB of host memory"), "{status:?}");
    assert!(status.message().contains("0.50 GiB of 0.50 GiB free now"), "{status:?}");
    // Refused at once (generating 2^20 rows takes a minute here), and nothing was written.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(key_files(dir.path()).is_empty(), "{:?}", key_files(dir.path()));
    // A key that fits is generated as before.
    assert!(c.load_key(load("small", 6)).await.unwrap().into_inner().generated);
    served.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn loads_of_one_missing_key_generate_it_once() {
    let dir = temp_dir("keygen-once");
    let daemon = cpu_daemon(&dir, Registry::default(), |c| c.max_keys = 16);
    let served = cuzk_service::spawn(daemon, Listen::Tcp("127.0.0.1:0".into())).await.unwrap();
    let client = cuzk_service::client::connect(&served.addr).await.unwrap();
    let loads: Vec<_> = (0..8)
        .map(|i| {
            let mut c = client.clone();
            tokio::spawn(async move { c.load_key(load(&format!("k{i}"), 11)).await.map(|r| r.into_inner()) })
        })
        .collect();
    let mut replies = Vec::new();
    for l in loads {
        replies.push(l.await.unwrap().expect("every load succeeds"));
    }
    let generated = replies.iter().filter(|r| r.generated).count();
    assert_eq!(generated, 1, "one load generated the key, the others read it");
    assert!(replies.iter().all(|r| r.verifying_key == replies[0].verifying_key), "one key for all");
    let mut c = client.clone();
    assert_eq!(c.get_status(pb::StatusRequest {}).await.unwrap().into_inner().keys.len(), 8);
    served.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_stops_when_its_caller_goes_away_or_the_daemon_shuts_down() {
    let dir = temp_dir("keygen-stop");
    let daemon = cpu_daemon(&dir, Registry::default(), |_| {});
    let served = cuzk_service::spawn(Arc::clone(&daemon), Listen::Tcp("127.0.0.1:0".into())).await.unwrap();
    let mut c = cuzk_service::client::connect(&served.addr).await.unwrap();
    // Generating 2^18 rows takes tens of seconds here; the client gives up after half a second.
    let mut request = tonic::Request::new(load("gone", 18));
    request.set_timeout(Duration::from_millis(500));
    let given_up = Instant::now();
    let status = c.load_key(request).await.unwrap_err();
    assert!(matches!(status.code(), Code::Cancelled | Code::DeadlineExceeded), "{status:?}");
    // The load ends (and counts as failed) soon after, not when the key would have been done.
    while metric(&mut c, "cuzk_key_loads_failed_total").await < 1.0 {
        assert!(given_up.elapsed() < Duration::from_secs(8), "generation went on after its caller left");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        key_files(dir.path()).is_empty(),
        "a stopped generation saves nothing: {:?}",
        key_files(dir.path())
    );
    // A shutdown stops a generation in progress rather than waiting for it.
    let mut c2 = c.clone();
    let pending = tokio::spawn(async move { c2.load_key(load("late", 18)).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopping = Instant::now();
    served.stop().await.unwrap();
    assert!(stopping.elapsed() < Duration::from_secs(8), "shutdown waited {:?}", stopping.elapsed());
    let status = pending.await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
    assert!(status.message().contains("shutting down"), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_waiting_for_another_generation_of_its_key_can_be_given_up() {
    let dir = temp_dir("keygen-wait");
    let daemon = cpu_daemon(&dir, Registry::default(), |_| {});
    let served = cuzk_service::spawn(Arc::clone(&daemon), Listen::Tcp("127.0.0.1:0".into())).await.unwrap();
    let mut c = cuzk_service::client::connect(&served.addr).await.unwrap();
    // The first load generates 2^18 rows (tens of seconds here); the second waits for it.
    let mut first = c.clone();
    let generating = tokio::spawn(async move { first.load_key(load("first", 18)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut request = tonic::Request::new(load("second", 18));
    request.set_timeout(Duration::from_millis(300));
    let given_up = Instant::now();
    let status = c.load_key(request).await.unwrap_err();
    assert!(matches!(status.code(), Code::Cancelled | Code::DeadlineExceeded), "{status:?}");
    // The waiting load ends soon after its caller left, while the first one still generates.
    while metric(&mut c, "cuzk_key_loads_failed_total").await < 1.0 {
        assert!(given_up.elapsed() < Duration::from_secs(5), "the waiting load went on waiting");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!generating.is_finished(), "the first load is still generating");
    served.stop().await.unwrap();
    let status = generating.await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
}
