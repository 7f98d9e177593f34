//! `cuzk serve` as a process: it reports its addresses, serves metrics over HTTP, and exits 0 on
//! SIGTERM; `cuzk config` prints a default that `--check` accepts.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use cuzk_testkit::TempDir;

fn cuzk() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
}

/// Kills the daemon when a test fails before stopping it, so no process outlives the test.
struct Serving(std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The address in `cuzk serve`'s "metrics on http://ADDR/metrics" line.
fn metrics_address(line: &str) -> String {
    line.strip_prefix("cuzk serve: metrics on http://")
        .and_then(|s| s.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("unexpected: {line}"))
        .to_owned()
}

fn http_get(addr: &str, path: &str) -> String {
    let mut http = std::net::TcpStream::connect(addr).unwrap();
    http.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).unwrap();
    let mut reply = String::new();
    http.read_to_string(&mut reply).unwrap();
    reply
}

#[test]
fn serve_reports_its_addresses_serves_metrics_and_stops_on_sigterm() {
    let dir = TempDir::new("serve-cli");
    let mut child = Serving(
        cuzk()
            .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--backend", "cpu"])
            .args(["--generate-missing-keys", "--host-budget-gib", "1.5", "--max-jobs", "16"])
            .args(["--result-ttl-secs", "60", "--priority-workers", "2", "--verify-proofs=true", "--key-dir"])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start cuzk serve"),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("a line").expect("utf-8");
    let metrics = metrics_address(&next());
    let listening = next();
    assert!(listening.contains("cpu backend, listening on 127.0.0.1:"), "{listening}");
    let addr = listening.rsplit(' ').next().unwrap().to_owned();

    // The load test against this running daemon: every proof checked.
    let out = cuzk()
        .args(["bench", "daemon", "--connect", &addr, "--circuit", "synthetic", "-k", "6", "-p", "2"])
        .args(["--proofs", "2", "--urgent", "1", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(runs[0]["proofs"], 2, "{runs}");
    assert_eq!(runs[0]["failed"], 0, "{runs}");
    assert_eq!(runs[0]["wrong"], 0, "{runs}");
    assert_eq!(runs[0]["backend"], "cpu", "{runs}");

    let reply = http_get(&metrics, "/metrics");
    assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
    // The urgent proof runs only when the large ones are still going 200 ms in.
    let succeeded = 2 + runs[0]["urgent"].as_u64().unwrap();
    assert!(reply.contains(&format!("\ncuzk_proofs_succeeded_total {succeeded}\n")), "{reply}");
    assert!(reply.contains("\ncuzk_keys_resident 0\n"), "the bench evicts its keys: {reply}");
    assert!(
        reply.contains(&format!("\ncuzk_host_budget_bytes {}\n", 3u64 << 29)),
        "the flag sets it: {reply}"
    );
    let reply = http_get(&metrics, "/secrets");
    assert!(reply.starts_with("HTTP/1.1 404"), "{reply}");

    let killed = Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status().unwrap();
    assert!(killed.success());
    assert_eq!(next(), "cuzk serve: stopping");
    assert_eq!(next(), "cuzk serve: stopped");
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn config_prints_a_default_that_checks_and_refuses_bad_files() {
    let out = cuzk().args(["config", "--print-default"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("listen = \"127.0.0.1:9820\""), "{text}");
    let dir = TempDir::new("config");
    let path = dir.join("cuzk.toml");
    std::fs::write(&path, &text).unwrap();
    let checked = cuzk().arg("config").arg("--check").arg(&path).output().unwrap();
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
    std::fs::write(&path, "listen = 3\n").unwrap();
    let bad = cuzk().arg("config").arg("--check").arg(&path).output().unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("listen"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn bench_daemon_sweeps_and_checks_every_proof() {
    let dir = TempDir::new("bench-daemon");
    let out = cuzk()
        .args(["bench", "daemon", "--circuit", "synthetic", "-k", "6", "-p", "2", "--proofs", "3"])
        .args(["--urgent", "2", "--urgent-log-constraints", "5", "--in-flight", "1,2"])
        .args(["--partition-workers", "1,2", "--backend", "cpu", "--json", "--key-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 4, "two partition-worker counts by two in-flight counts");
    for r in runs {
        assert_eq!(r["proofs"], 3, "{r}");
        assert_eq!(r["failed"], 0, "{r}");
        assert_eq!(r["wrong"], 0, "{r}");
        assert!(r["seconds_per_proof"].as_f64().unwrap() > 0.0);
        assert!(r["budget_bytes"].as_u64().unwrap() > 0);
    }
    assert_eq!(runs[3]["partition_workers"], 2);
    assert_eq!(runs[3]["in_flight"], 2);
    // A running daemon keeps its own worker counts: sweeping them there is refused.
    let refused = cuzk()
        .args(["bench", "daemon", "--connect", "127.0.0.1:1", "--partition-workers", "2"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
}

#[test]
fn a_second_sigterm_cancels_the_live_proofs_and_ends_the_drain_at_once() {
    use cuzk_service::proto as pb;
    let dir = TempDir::new("serve-twice");
    // The default policy: finish the live proofs, waiting up to shutdown_grace_secs (600).
    let mut child = Serving(
        cuzk()
            .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "", "--backend", "cpu"])
            .args(["--generate-missing-keys", "--partition-workers", "1", "--key-dir"])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start cuzk serve"),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("a line").expect("utf-8");
    let listening = next();
    let addr = listening.rsplit(' ').next().unwrap().to_owned();
    // Four proofs of 64 partitions, about a minute of work on one synthesis worker.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut c = cuzk_service::client::connect(&addr).await.unwrap();
        let load = pb::LoadKeyRequest {
            key_id: "k".into(),
            circuit_kind: "synthetic".into(),
            params: br#"{"log_rows": 13}"#.to_vec(),
        };
        c.load_key(load).await.unwrap();
        for proof in 0..4u64 {
            let partitions =
                (0..64).map(|s| format!(r#"{{"seed": {}}}"#, 64 * proof + s).into_bytes()).collect();
            let submit = pb::SubmitRequest { key_id: "k".into(), partitions, ..pb::SubmitRequest::default() };
            c.submit_proof(submit).await.unwrap();
        }
    });
    let term = || {
        let sent = Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status().unwrap();
        assert!(sent.success());
    };
    term();
    assert_eq!(next(), "cuzk serve: stopping");
    // At once: the daemon listens for the second signal from before the first.
    let second = std::time::Instant::now();
    term();
    assert_eq!(next(), "cuzk serve: cancelling the live proofs");
    assert_eq!(next(), "cuzk serve: stopped");
    let took = second.elapsed();
    assert!(took < std::time::Duration::from_secs(10), "the drain went on {took:?} after the second signal");
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// CPU time (user and system, in clock ticks) the process has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn idle_connections_under_a_low_open_files_limit_neither_spin_nor_lock_clients_out() {
    use cuzk_service::proto as pb;
    use std::time::{Duration, Instant};
    // This test holds 300 connections of its own.
    cuzk_service::conn::raise_open_files_limit();
    let dir = TempDir::new("serve-nofile");
    let config = dir.join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\nbackend = \"cpu\"\n\
             key_dir = {:?}\nhandshake_timeout_secs = 2\nidle_timeout_secs = 4\n",
            dir.join("keys")
        ),
    )
    .unwrap();
    let mut child = Serving(
        Command::new("bash")
            .args(["-c", "ulimit -n 256 && exec \"$0\" \"$@\""])
            .arg(env!("CARGO_BIN_EXE_cuzk"))
            .args(["serve", "--config"])
            .arg(&config)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start cuzk serve"),
    );
    let pid = child.0.id();
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("a line").expect("utf-8");
    let metrics = metrics_address(&next());
    let addr = next().rsplit(' ').next().unwrap().to_owned();

    // 300 connections that never send a byte: more than the 256 files the daemon may open.
    let idle: Vec<std::net::TcpStream> =
        (0..300).map(|_| std::net::TcpStream::connect(&addr).expect("connect")).collect();
    std::thread::sleep(Duration::from_millis(500));
    let (ticks, t) = (cpu_ticks(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let busy = (cpu_ticks(pid) - ticks) as f64 / 100.0 / t.elapsed().as_secs_f64();
    assert!(busy < 0.25, "the daemon used {:.0}% of a core while the connections sat idle", busy * 100.0);

    // A real client is served within a few seconds: the idle connections are closed as they time out.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let asked = Instant::now();
    runtime.block_on(async {
        let call = async {
            let mut c = cuzk_service::client::connect(&addr).await.expect("connect");
            c.get_status(pb::StatusRequest {}).await.expect("status")
        };
        tokio::time::timeout(Duration::from_secs(20), call).await.expect("served within 20 s");
    });
    eprintln!("a client was served {:?} after asking", asked.elapsed());
    // Every idle connection is closed by the daemon.
    let mut open = idle;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !open.is_empty() {
        assert!(Instant::now() < deadline, "{} idle connections still open", open.len());
        open.retain_mut(|s| {
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            let mut b = [0u8; 1];
            match s.read(&mut b) {
                Ok(0) => false,
                Err(e)
                    if e.kind() != std::io::ErrorKind::WouldBlock
                        && e.kind() != std::io::ErrorKind::TimedOut =>
                {
                    false
                }
                _ => true,
            }
        });
    }
    let reply = http_get(&metrics, "/metrics");
    // 256 files, 64 kept for the daemon, an eighth of the rest (16 at most) for metrics.
    assert!(reply.contains("\ncuzk_connections_max{listener=\"grpc\"} 176\n"), "{reply}");
    let closed: f64 = reply
        .lines()
        .find_map(|l| l.strip_prefix("cuzk_connections_closed_quiet_total{listener=\"grpc\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{reply}"));
    assert!(closed >= 300.0, "{closed} closed: {reply}");

    let killed = Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
    assert!(killed.success());
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
}
