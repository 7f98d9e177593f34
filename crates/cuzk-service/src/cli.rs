//! `cuzk serve` and `cuzk config`: the daemon's command line.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::config::{ServiceConfig, ShutdownPolicy, DEFAULT_TOML};
use crate::{Daemon, Listen, Registry};

/// Flags of `cuzk serve`; each overrides the configuration file.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The configuration file (TOML; `cuzk config --print-default` shows every field).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// `HOST:PORT` or `unix:///path/to/socket`.
    #[arg(long)]
    pub listen: Option<String>,
    /// `HOST:PORT` for `GET /metrics`; "" for none.
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// The key directory.
    #[arg(long)]
    pub key_dir: Option<PathBuf>,
    /// `auto`, `cpu` or `cuda`.
    #[arg(long)]
    pub backend: Option<String>,
    /// CUDA devices, e.g. `0,1`.
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<usize>>,
    /// CPU workers synthesizing partitions per key.
    #[arg(long)]
    pub partition_workers: Option<usize>,
    /// Synthesis workers per key for high and urgent proofs only.
    #[arg(long)]
    pub priority_workers: Option<usize>,
    /// GPU workers per device.
    #[arg(long)]
    pub gpu_workers: Option<usize>,
    /// Host memory budget of all keys, GiB (0: three quarters of the available memory).
    #[arg(long)]
    pub host_budget_gib: Option<f64>,
    /// Generate (and save) keys the key directory lacks on LoadKey instead of refusing
    /// (`--generate-missing-keys=false` undoes a configuration file's `true`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub generate_missing_keys: Option<bool>,
    /// Most proofs live or uncollected at once.
    #[arg(long)]
    pub max_jobs: Option<usize>,
    /// Most keys resident at once.
    #[arg(long)]
    pub max_keys: Option<usize>,
    /// Most partitions in one proof.
    #[arg(long)]
    pub max_partitions: Option<usize>,
    /// Largest request, bytes.
    #[arg(long)]
    pub max_request_bytes: Option<usize>,
    /// Seconds a finished proof waits to be collected (0: until collected).
    #[arg(long)]
    pub result_ttl_secs: Option<u64>,
    /// Check every proof against its key before returning it (`--verify-proofs=false` skips it).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub verify_proofs: Option<bool>,
    /// On SIGINT or SIGTERM: `finish` live proofs or `cancel` them.
    #[arg(long)]
    pub shutdown: Option<String>,
    /// How long `--shutdown finish` waits before cancelling, seconds.
    #[arg(long)]
    pub shutdown_grace_secs: Option<u64>,
}

/// `target = value` for each flag given.
macro_rules! apply {
    ($c:ident, $a:ident: $($flag:ident => $field:ident),* $(,)?) => {
        $(if let Some(v) = &$a.$flag {
            $c.$field = v.clone();
        })*
    };
}

impl ServeArgs {
    /// The configuration: the file's (or the defaults), then the flags.
    pub fn config(&self) -> Result<ServiceConfig, String> {
        let mut c = match &self.config {
            Some(path) => ServiceConfig::load(path)?,
            None => ServiceConfig::default(),
        };
        let a = self;
        apply!(c, a:
            listen => listen,
            metrics_listen => metrics_listen,
            key_dir => key_dir,
            backend => backend,
            devices => devices,
            partition_workers => partition_workers,
            priority_workers => priority_workers,
            gpu_workers => gpu_workers_per_device,
            host_budget_gib => host_budget_gib,
            max_jobs => max_jobs,
            max_keys => max_keys,
            max_partitions => max_partitions,
            max_request_bytes => max_request_bytes,
            result_ttl_secs => result_ttl_secs,
            shutdown_grace_secs => shutdown_grace_secs,
            generate_missing_keys => generate_missing_keys,
            verify_proofs => verify_proofs,
        );
        if let Some(v) = &self.shutdown {
            c.shutdown = match v.as_str() {
                "finish" => ShutdownPolicy::Finish,
                "cancel" => ShutdownPolicy::Cancel,
                other => return Err(format!("--shutdown {other:?}: expected finish or cancel")),
            };
        }
        Ok(c)
    }
}

/// Flags of `cuzk config`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Print the default configuration, every field documented.
    #[arg(long)]
    pub print_default: bool,
    /// Check a configuration file and print it as the daemon reads it.
    #[arg(long)]
    pub check: Option<PathBuf>,
}

/// Runs `cuzk config`.
pub fn config(a: &ConfigArgs) -> Result<(), String> {
    if a.print_default {
        print!("{DEFAULT_TOML}");
    }
    if let Some(path) = &a.check {
        let c = ServiceConfig::load(path)?;
        c.engine()?;
        c.listen.parse::<Listen>()?;
        print!("{}", toml::to_string(&c).map_err(|e| e.to_string())?);
    }
    if !a.print_default && a.check.is_none() {
        return Err("say --print-default or --check FILE".into());
    }
    Ok(())
}

/// Runs `cuzk serve` until SIGINT or SIGTERM.
pub fn serve(a: &ServeArgs) -> Result<(), String> {
    let config = a.config()?;
    let listen: Listen = config.listen.parse()?;
    let metrics = config.metrics_listen.clone();
    let daemon = Arc::new(Daemon::new(config, Registry::default())?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the async runtime: {e}"))?;
    runtime.block_on(async move {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        if !metrics.is_empty() {
            let l = tokio::net::TcpListener::bind(&metrics)
                .await
                .map_err(|e| format!("cannot listen for metrics on {metrics}: {e}"))?;
            let addr = l.local_addr().map_err(|e| e.to_string())?;
            println!("cuzk serve: metrics on http://{addr}/metrics");
            let mut rx = stop_rx.clone();
            tokio::spawn(crate::server::serve_metrics(Arc::clone(&daemon), l, async move {
                let _ = rx.wait_for(|s| *s).await;
            }));
        }
        let backend = daemon.backend();
        let second = Arc::clone(&daemon);
        let shutdown = async move {
            crate::server::signal().await;
            println!("cuzk serve: stopping");
            let _ = std::io::stdout().flush();
            // A second signal cancels whatever is still live instead of waiting for it.
            tokio::spawn(async move {
                crate::server::signal().await;
                println!("cuzk serve: cancelling the live proofs");
                second.cancel_all();
            });
        };
        crate::serve(daemon, listen, shutdown, |addr| {
            println!("cuzk serve: {backend} backend, listening on {addr}");
            let _ = std::io::stdout().flush();
        })
        .await?;
        let _ = stop_tx.send(true);
        println!("cuzk serve: stopped");
        Ok(())
    })
}
