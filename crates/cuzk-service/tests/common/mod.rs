//! Shared by the daemon's integration tests: a key directory of their own, removed afterwards.

pub use cuzk_testkit::TempDir;

/// A fresh directory for the daemon test `name`.
pub fn temp_dir(name: &str) -> TempDir {
    TempDir::new(&format!("service-{name}"))
}

/// A daemon with the CPU backend over `dir`, generating the keys it lacks, with `registry`'s kinds.
pub fn cpu_daemon(
    dir: &TempDir,
    registry: cuzk_service::Registry,
    tune: impl FnOnce(&mut cuzk_service::ServiceConfig),
) -> std::sync::Arc<cuzk_service::Daemon> {
    let mut config = cuzk_service::ServiceConfig {
        key_dir: dir.path().to_path_buf(),
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
