//! A bounded soak: thousands of partitions through one resident key, the process's resident memory
//! and its live heap (every allocation less every release, counted by this test's allocator)
//! sampled after a warm-up and at the end. A daemon that proves for weeks must not grow with the
//! partitions it has proved. The live heap is the exact leak check: resident memory also moves with
//! the allocator's own bookkeeping (a slow settling of some 10-50 bytes a partition here while the
//! live heap keeps level, within ~100 kB up or down).

use std::sync::Arc;

use cuzk::sched::Priority;
use cuzk_service::{Daemon, Registry};

/// Counts what is allocated and released, so the test sees the live heap exactly.
#[global_allocator]
static HEAP: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;

/// Bytes allocated and not yet released.
fn live_heap() -> i64 {
    let s = HEAP.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

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
    // The measured stretch: 80 proofs, the live heap sampled after every four (256 partitions).
    let before = rss();
    let mut heap = Vec::new();
    for group in 0..20u64 {
        prove(&d, (1 << 20) + group * 256, 4).await;
        heap.push(live_heap() as f64);
    }
    let after = rss();
    let partitions = 20 * 256;
    let per_partition = after.saturating_sub(before) as f64 / partitions as f64;
    // The live heap's trend, bytes a partition: the least-squares slope over the samples. Between
    // samples it moves by up to ~100 kB either way (what is in flight when it is read), which puts
    // the slope's noise near 10 bytes a partition; a leak of 50 bytes a partition is 13 kB a sample.
    let n = heap.len() as f64;
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = heap.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (x, y) in heap.iter().enumerate() {
        let dx = x as f64 - mean_x;
        sxy += dx * (y - mean_y);
        sxx += dx * dx;
    }
    let heap_per_partition = sxy / sxx / 256.0;
    eprintln!(
        "soak: {partitions} partitions, RSS {before} -> {after} bytes ({per_partition:.1} a partition), \
         live heap trend {heap_per_partition:.1} bytes a partition"
    );
    assert!(
        heap_per_partition < 50.0,
        "the live heap grows {heap_per_partition:.1} bytes a partition: {heap:?}"
    );
    // Resident memory settles more slowly than the heap (10-50 bytes a partition in this stretch);
    // the bound catches the allocator's own growth, not small leaks.
    assert!(per_partition < 200.0, "{per_partition:.1} bytes per partition (RSS {before} -> {after})");
    assert_eq!(d.jobs(), 0, "every proof was collected");
}
