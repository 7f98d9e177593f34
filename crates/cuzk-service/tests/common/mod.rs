//! Shared by the daemon's integration tests: a key directory of their own, removed afterwards.

/// A fresh directory, removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh directory named after `name`, this process and the time.
pub fn temp_dir(name: &str) -> TempDir {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let dir = std::env::temp_dir().join(format!("cuzk-service-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

/// A daemon with the CPU backend over `dir`, generating the keys it lacks, with `registry`'s kinds.
pub fn cpu_daemon(
    dir: &TempDir,
    registry: cuzk_service::Registry,
    tune: impl FnOnce(&mut cuzk_service::ServiceConfig),
) -> std::sync::Arc<cuzk_service::Daemon> {
    let mut config = cuzk_service::ServiceConfig {
        key_dir: dir.0.clone(),
        generate_missing_keys: true,
        backend: "cpu".into(),
        ..cuzk_service::ServiceConfig::default()
    };
    tune(&mut config);
    std::sync::Arc::new(cuzk_service::Daemon::new(config, registry).expect("daemon"))
}

/// A metric's value from `GetMetrics` (the first sample whose name and labels are `name`).
#[allow(dead_code)] // not every test file reads metrics
pub async fn metric(
    c: &mut cuzk_service::proto::prover_client::ProverClient<tonic::transport::Channel>,
    name: &str,
) -> f64 {
    let text = c.get_metrics(cuzk_service::proto::MetricsRequest {}).await.unwrap().into_inner().text;
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}
