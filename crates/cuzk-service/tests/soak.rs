//! A bounded soak: thousands of partitions through one resident key, the process's resident memory
//! sampled after a warm-up and at the end. A daemon that proves for weeks must not grow with the
//! partitions it has proved.

use std::sync::Arc;

use cuzk::sched::Priority;
use cuzk_service::{Daemon, Registry};

mod common;
use common::{cpu_daemon, temp_dir};

/// Resident memory of this process (`VmRSS`), bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    let kb: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("a number");
    kb * 1024
}

/// Proves `proofs` proofs of 64 partitions each, four in flight at a time.
async fn prove(d: &Arc<Daemon>, first_seed: u64, proofs: u64) {
    let mut seed = first_seed;
    for _ in 0..proofs.div_ceil(4) {
        let mut ids = Vec::new();
        for _ in 0..4 {
            let parts: Vec<Vec<u8>> = (0..64)
                .map(|_| {
                    seed += 1;
                    format!(r#"{{"seed": {seed}}}"#).into_bytes()
                })
                .collect();
            ids.push(d.submit("k", &parts, Priority::Normal, None).expect("submitted"));
        }
        for id in ids {
            d.await_proof(&id, None).await.expect("proved");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_stays_flat_over_thousands_of_partitions() {
    let dir = temp_dir("soak");
    let d = cpu_daemon(&dir, Registry::default(), |c| {
        c.partition_workers = 2;
        // The self-check's pairings would be most of the time; proofs are still proved in full.
        c.verify_proofs = false;
        // A small ring, so the warm-up fills it and the measured stretch runs at its bound.
        c.timeline_spans = 4096;
    });
    d.load_key("k", "synthetic", br#"{"log_rows": 2}"#).expect("key");
    // Warm-up: 3,840 partitions, about sixteen times what the ring holds, until the allocator's
    // heap has settled.
    prove(&d, 0, 60).await;
    let before = rss();
    let (proofs, partitions) = (80, 80 * 64);
    prove(&d, 1 << 20, proofs).await;
    let after = rss();
    let per_partition = after.saturating_sub(before) as f64 / partitions as f64;
    eprintln!("soak: {partitions} partitions, RSS {before} -> {after} bytes, {per_partition:.1} bytes per partition");
    assert!(per_partition < 100.0, "{per_partition:.1} bytes per partition (RSS {before} -> {after})");
    assert_eq!(d.jobs(), 0, "every proof was collected");
}
