//! `cuzk bench daemon`: a bounded load test against a daemon, in-process (one per sweep point) or
//! already running (`--connect`). Clients keep `in_flight` large proofs going while an urgent client
//! sends small proofs at the urgent priority; every proof is checked with ark-groth16 against the
//! verifying key `LoadKey` returned.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_bls12_381::Bls12_381;
use ark_groth16::{Groth16, PreparedVerifyingKey, Proof, VerifyingKey};
use ark_serialize::CanonicalDeserialize;
use cuzk_service::proto::prover_client::ProverClient;
use cuzk_service::proto::{self as pb};
use cuzk_service::{Daemon, KindKey, Listen, Registry, ServiceConfig};
use serde::Serialize;
use tonic::transport::Channel;

use crate::flags::DaemonArgs;
use crate::output::{print, CmdError};

/// One sweep point's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LoadRun {
    /// Partition workers (None: the daemon's own setting).
    pub(crate) partition_workers: Option<usize>,
    /// Priority-only synthesis workers (None: the daemon's own setting).
    pub(crate) priority_workers: Option<usize>,
    /// GPU workers per device (None: the daemon's own setting).
    pub(crate) gpu_workers: Option<usize>,
    /// Large proofs in flight.
    pub(crate) in_flight: usize,
    /// The daemon's backend.
    pub(crate) backend: String,
    /// Large proofs that came back and verified.
    pub(crate) proofs: usize,
    /// Proofs whose call failed.
    pub(crate) failed: usize,
    /// Proofs that came back but did not verify.
    pub(crate) wrong: usize,
    /// Wall time from the first submission to the last large proof.
    pub(crate) seconds: f64,
    /// Seconds per large proof over the run.
    pub(crate) seconds_per_proof: f64,
    /// Urgent proofs made while large ones were still running.
    pub(crate) urgent: usize,
    /// Urgent proofs' latencies (submission to proof), seconds: median, 95th percentile, maximum.
    pub(crate) urgent_seconds: [f64; 3],
    /// A large proof's latency, median.
    pub(crate) large_median_seconds: f64,
    /// The daemon's host budget, bytes (from GetStatus).
    pub(crate) budget_bytes: u64,
    /// Peak bytes reserved from that budget (keys and partitions).
    pub(crate) budget_peak_bytes: u64,
    /// Peak resident memory of this process (the in-process daemon and the clients), bytes.
    pub(crate) peak_rss_bytes: Option<u64>,
    /// The MSM tables of the large proofs' key (from GetStatus), one sentence each.
    pub(crate) msm_tables: Vec<String>,
}

/// The `q` quantile of `v` by the one rule every benchmark uses ([`cuzk::quantile`]: linear between
/// ranks, so the median of an even count is the mean of the middle two); NaN when `v` is empty.
fn quantile(v: Vec<f64>, q: f64) -> f64 {
    cuzk::quantile(&v, q).unwrap_or(f64::NAN)
}

/// `VmHWM` of `/proc/self/status`.
fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb * 1024)
}

struct Checker {
    pvk: PreparedVerifyingKey<Bls12_381>,
    spec: Box<dyn KindKey>,
}

impl Checker {
    /// Whether every proof verifies against the partition inputs it was made for.
    fn check(&self, inputs: &[Vec<u8>], proofs: &[Vec<u8>]) -> bool {
        inputs.len() == proofs.len()
            && inputs.iter().zip(proofs).all(|(input, bytes)| {
                let (Ok(proof), Ok(public)) =
                    (Proof::<Bls12_381>::deserialize_compressed(&bytes[..]), self.spec.public_inputs(input))
                else {
                    return false;
                };
                Groth16::<Bls12_381>::verify_proof(&self.pvk, &proof, &public).unwrap_or(false)
            })
    }
}

fn key_params(circuit: &str, log: u32) -> Result<Vec<u8>, CmdError> {
    match circuit {
        "porep-like" => Ok(format!(r#"{{"log_constraints": {log}}}"#).into_bytes()),
        "synthetic" => Ok(format!(r#"{{"log_rows": {log}}}"#).into_bytes()),
        other => Err(format!("bench daemon knows the built-in kinds only, not {other:?}").into()),
    }
}

fn partition_input(circuit: &str, seed: u64, partition: u64) -> Vec<u8> {
    match circuit {
        "porep-like" => format!(r#"{{"seed": {seed}, "partition": {partition}}}"#).into_bytes(),
        _ => format!(r#"{{"seed": {}}}"#, seed * 1000 + partition).into_bytes(),
    }
}

async fn load_key(
    c: &mut ProverClient<Channel>,
    key_id: &str,
    circuit: &str,
    log: u32,
) -> Result<Checker, CmdError> {
    let params = key_params(circuit, log)?;
    let reply = c
        .load_key(pb::LoadKeyRequest {
            key_id: key_id.into(),
            circuit_kind: circuit.into(),
            params: params.clone(),
        })
        .await;
    let vk_bytes = match reply {
        Ok(r) => r.into_inner().verifying_key,
        Err(s) if s.code() == tonic::Code::AlreadyExists => {
            return Err(format!("key id {key_id} is already resident on the daemon: evict it first").into())
        }
        Err(s) => return Err(format!("LoadKey {key_id}: {}", s.message()).into()),
    };
    let vk = VerifyingKey::<Bls12_381>::deserialize_compressed(&vk_bytes[..])?;
    let spec = Registry::default().get(circuit).ok_or("unknown kind")?.key(&params, 64)?;
    Ok(Checker { pvk: ark_groth16::prepare_verifying_key(&vk), spec })
}

/// Failed and wrong proofs over a run.
#[derive(Default)]
struct Tally {
    failed: AtomicU64,
    wrong: AtomicU64,
}

/// Proves one proof of `inputs` on `key_id` and checks it: its latency, or `None` (counted in
/// `tally`) when the call failed or a proof did not verify.
async fn prove_checked(
    c: &mut ProverClient<Channel>,
    key_id: &str,
    inputs: Vec<Vec<u8>>,
    priority: pb::Priority,
    checker: &Checker,
    tally: &Tally,
) -> Option<f64> {
    let req = pb::SubmitRequest {
        key_id: key_id.into(),
        partitions: inputs.clone(),
        priority: priority.into(),
        ..pb::SubmitRequest::default()
    };
    let s = Instant::now();
    match c.prove(req).await {
        Ok(r) if checker.check(&inputs, &r.get_ref().proofs) => Some(s.elapsed().as_secs_f64()),
        Ok(_) => {
            tally.wrong.fetch_add(1, Ordering::SeqCst);
            None
        }
        Err(_) => {
            tally.failed.fetch_add(1, Ordering::SeqCst);
            None
        }
    }
}

/// Runs one sweep point against the daemon at `addr`.
async fn run_point(a: &DaemonArgs, addr: &str, in_flight: usize) -> Result<LoadRun, CmdError> {
    let mut c = cuzk_service::client::connect(addr).await?;
    let large = Arc::new(load_key(&mut c, "bench-large", &a.circuit, a.log_constraints).await?);
    let (urgent_key, small) = match a.urgent_log_constraints {
        Some(k) => ("bench-urgent", Arc::new(load_key(&mut c, "bench-urgent", &a.circuit, k).await?)),
        None => ("bench-large", Arc::clone(&large)),
    };
    let next = Arc::new(AtomicU64::new(0));
    let tally = Arc::new(Tally::default());
    let t = Instant::now();
    let workers: Vec<_> = (0..in_flight.max(1))
        .map(|_| {
            let (mut c, large, next, tally, a) =
                (c.clone(), Arc::clone(&large), Arc::clone(&next), Arc::clone(&tally), a.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= a.proofs as u64 {
                        return latencies;
                    }
                    let inputs: Vec<Vec<u8>> =
                        (0..a.partitions as u64).map(|p| partition_input(&a.circuit, n + 1, p)).collect();
                    let checked =
                        prove_checked(&mut c, "bench-large", inputs, pb::Priority::Normal, &large, &tally)
                            .await;
                    latencies.extend(checked);
                }
            })
        })
        .collect();
    // The urgent client starts once the large proofs have the daemon busy, and sends its proofs one
    // after another, spread over the expected run.
    let urgent = {
        let (mut c, small, tally, a) = (c.clone(), Arc::clone(&small), Arc::clone(&tally), a.clone());
        let next = Arc::clone(&next);
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            for i in 0..a.urgent as u64 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if next.load(Ordering::SeqCst) >= a.proofs as u64 + in_flight as u64 {
                    // The large proofs are all done: what follows would not measure overtaking.
                    break;
                }
                let inputs = vec![partition_input(&a.circuit, 1_000_000 + i, 0)];
                let checked =
                    prove_checked(&mut c, urgent_key, inputs, pb::Priority::Urgent, &small, &tally).await;
                latencies.extend(checked);
            }
            latencies
        })
    };
    let mut large_latencies = Vec::new();
    for w in workers {
        large_latencies.extend(w.await?);
    }
    let seconds = t.elapsed().as_secs_f64();
    let urgent_latencies = urgent.await?;
    let status = c.get_status(pb::StatusRequest {}).await?.into_inner();
    let msm_tables = status
        .keys
        .iter()
        .find(|k| k.key_id == "bench-large")
        .map(|k| k.msm_tables.clone())
        .unwrap_or_default();
    for id in ["bench-large", "bench-urgent"] {
        let _ = c.evict_key(pb::EvictKeyRequest { key_id: id.into() }).await;
    }
    Ok(LoadRun {
        partition_workers: None,
        priority_workers: None,
        gpu_workers: None,
        in_flight,
        backend: status.backend,
        proofs: large_latencies.len(),
        failed: tally.failed.load(Ordering::SeqCst) as usize,
        wrong: tally.wrong.load(Ordering::SeqCst) as usize,
        seconds,
        seconds_per_proof: seconds / a.proofs.max(1) as f64,
        urgent: urgent_latencies.len(),
        urgent_seconds: [
            quantile(urgent_latencies.clone(), 0.5),
            quantile(urgent_latencies.clone(), 0.95),
            quantile(urgent_latencies, 1.0),
        ],
        large_median_seconds: quantile(large_latencies, 0.5),
        budget_bytes: status.budget_bytes,
        budget_peak_bytes: status.budget_peak_bytes,
        peak_rss_bytes: None,
        msm_tables,
    })
}

/// Runs `cuzk bench daemon`.
pub(crate) fn run(a: &DaemonArgs) -> Result<(), CmdError> {
    let runs = sweep(a)?;
    print(a.json, &runs, |runs| {
        let urgent = a.urgent_log_constraints.map_or("same key".to_owned(), |k| format!("own key, 2^{k}"));
        println!(
            "cuzk bench daemon: {} 2^{} x {} partitions, {} proofs; urgent: {} one-partition proofs ({urgent})",
            a.circuit, a.log_constraints, a.partitions, a.proofs, a.urgent
        );
        print!("{}", table(runs));
    })
}

/// Runs every sweep point.
fn sweep(a: &DaemonArgs) -> Result<Vec<LoadRun>, CmdError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async runtime: {e}"))?;
    runtime.block_on(async {
        let mut runs: Vec<LoadRun> = Vec::new();
        if let Some(addr) = &a.connect {
            if !a.partition_workers.is_empty()
                || !a.priority_workers.is_empty()
                || !a.gpu_workers.is_empty()
                || a.msm_tables
            {
                return Err(
                    "--partition-workers, --priority-workers, --gpu-workers and --msm-tables set up an \
                     in-process daemon; a running one keeps its own"
                        .into(),
                );
            }
            for &f in &a.in_flight {
                runs.push(run_point(a, addr, f).await?);
            }
            return Ok(runs);
        }
        let opt = |v: &[usize]| if v.is_empty() { vec![None] } else { v.iter().copied().map(Some).collect() };
        let mut points = Vec::new();
        for pw in opt(&a.partition_workers) {
            for qw in opt(&a.priority_workers) {
                for gw in opt(&a.gpu_workers) {
                    points.extend(a.in_flight.iter().map(|&f| (pw, qw, gw, f)));
                }
            }
        }
        for (pw, qw, gw, f) in points {
            let mut config = ServiceConfig {
                listen: "127.0.0.1:0".into(),
                metrics_listen: String::new(),
                key_dir: a.key_dir.clone(),
                // The bench's keys are its own: made once, kept in the key directory.
                generate_missing_keys: true,
                backend: a.backend.clone(),
                msm_tables: a.msm_tables,
                ..ServiceConfig::default()
            };
            if let Some(pw) = pw {
                config.partition_workers = pw;
            }
            if let Some(qw) = qw {
                config.priority_workers = qw;
            }
            if let Some(gw) = gw {
                config.gpu_workers_per_device = gw;
            }
            let daemon = Arc::new(Daemon::new(config, Registry::default())?);
            let served = cuzk_service::spawn(daemon, Listen::Tcp("127.0.0.1:0".into())).await?;
            let mut run = run_point(a, &served.addr, f).await;
            served.stop().await?;
            if let Ok(r) = &mut run {
                r.partition_workers = pw;
                r.priority_workers = qw;
                r.gpu_workers = gw;
                r.peak_rss_bytes = peak_rss();
            }
            runs.push(run?);
        }
        Ok(runs)
    })
}

/// The sweep as a table.
fn table(runs: &[LoadRun]) -> String {
    let mut out = String::from(
        "| partition workers | priority workers | GPU workers | in flight | s/proof | large p50 s | urgent proofs | urgent p50 / p95 / max s | proofs | failed | wrong | budget peak / budget | peak RSS |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let size = |b: u64| {
        if b >= 1 << 30 {
            format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
        } else {
            format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
        }
    };
    let or_default = |v: Option<usize>| v.map_or("default".to_owned(), |v| v.to_string());
    for r in runs {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.3} | {:.3} | {} | {:.3} / {:.3} / {:.3} | {} | {} | {} | {} / {} | {} |\n",
            or_default(r.partition_workers),
            or_default(r.priority_workers),
            or_default(r.gpu_workers),
            r.in_flight,
            r.seconds_per_proof,
            r.large_median_seconds,
            r.urgent,
            r.urgent_seconds[0],
            r.urgent_seconds[1],
            r.urgent_seconds[2],
            r.proofs,
            r.failed,
            r.wrong,
            size(r.budget_peak_bytes),
            size(r.budget_bytes),
            r.peak_rss_bytes.map_or("-".to_owned(), size),
        ));
    }
    if let Some(r) = runs.iter().find(|r| !r.msm_tables.is_empty()) {
        out.push_str("\nMSM tables of the large proofs' key:\n");
        for t in &r.msm_tables {
            out.push_str(&format!("- {t}\n"));
        }
    }
    out
}
