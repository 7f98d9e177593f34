//! `cuzk serve` and `cuzk config`: the daemon (`cuzk-service`) run from the command line.

use std::io::Write;
use std::sync::Arc;

use cuzk_service::{Daemon, Listen, Registry, ServiceConfig, ShutdownPolicy, DEFAULT_TOML};

use crate::flags::{ConfigArgs, ServeArgs};
use crate::output::CmdError;

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
    pub(crate) fn config(&self) -> Result<ServiceConfig, CmdError> {
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
            msm_tables => msm_tables,
            mul_units => mul_units,
            host_budget_gib => host_budget_gib,
            max_jobs => max_jobs,
            max_keys => max_keys,
            max_partitions => max_partitions,
            max_request_bytes => max_request_bytes,
            result_ttl_secs => result_ttl_secs,
            shutdown_grace_secs => shutdown_grace_secs,
            generate_missing_keys => generate_missing_keys,
            verify_proofs => verify_proofs,
            log_level => log_level,
            log_format => log_format,
        );
        if let Some(v) = &self.shutdown {
            c.shutdown = match v.as_str() {
                "finish" => ShutdownPolicy::Finish,
                "cancel" => ShutdownPolicy::Cancel,
                other => return Err(format!("--shutdown {other:?}: expected finish or cancel").into()),
            };
        }
        Ok(c)
    }
}

/// Runs `cuzk config`.
pub(crate) fn config(a: &ConfigArgs) -> Result<(), CmdError> {
    if a.print_default {
        print!("{DEFAULT_TOML}");
    }
    if let Some(path) = &a.check {
        let c = ServiceConfig::load(path)?;
        c.check()?;
        print!("{}", toml::to_string(&c)?);
    }
    if !a.print_default && a.check.is_none() {
        return Err("say --print-default or --check FILE".into());
    }
    Ok(())
}

/// Runs `cuzk serve` until SIGINT or SIGTERM.
pub(crate) fn serve(a: &ServeArgs) -> Result<(), CmdError> {
    let config = a.config()?;
    config.check()?;
    cuzk_service::logging::init(&config)?;
    // Connections each take a file: take all the room the hard limit allows.
    let open_files = cuzk_service::conn::raise_open_files_limit();
    tracing::debug!(?open_files, "open files limit");
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
            let addr = l.local_addr()?;
            println!("cuzk serve: metrics on http://{addr}/metrics");
            let mut rx = stop_rx.clone();
            tokio::spawn(cuzk_service::server::serve_metrics(Arc::clone(&daemon), l, async move {
                let _ = rx.wait_for(|s| *s).await;
            }));
        }
        let backend = daemon.backend();
        let second = Arc::clone(&daemon);
        // Listening from here on, so that a second signal sent while the first is handled counts.
        let mut signals = cuzk_service::server::Signals::new()
            .map_err(|e| format!("cannot listen for SIGINT and SIGTERM: {e}"))?;
        let shutdown = async move {
            signals.recv().await;
            println!("cuzk serve: stopping");
            let _ = std::io::stdout().flush();
            // A second signal cancels whatever is still live and ends the drain instead of waiting.
            tokio::spawn(async move {
                signals.recv().await;
                println!("cuzk serve: cancelling the live proofs");
                let _ = std::io::stdout().flush();
                second.abort();
            });
        };
        cuzk_service::serve(daemon, listen, shutdown, |addr| {
            println!("cuzk serve: {backend} backend, listening on {addr}");
            let _ = std::io::stdout().flush();
        })
        .await?;
        let _ = stop_tx.send(true);
        println!("cuzk serve: stopped");
        Ok(())
    })
}
