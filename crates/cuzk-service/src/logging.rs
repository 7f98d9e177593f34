//! Structured logs through `tracing`: the daemon logs keys loaded, proofs submitted and how they
//! ended (with the job id in a span), the shutdown; the scheduler below it logs each partition (a span
//! with its job and partition) at debug level. [`init`] installs a subscriber writing to standard
//! error, as text or JSON, filtered by `RUST_LOG` or else the configured level.

use crate::config::{directives_filter, log_filter, ConfigError, LogFormat, ServiceConfig};

/// Installs the process's log subscriber as `config` says (`log_level`, overridden by `RUST_LOG`;
/// `log_format`). Fails on a filter that does not parse; a second call leaves the first subscriber
/// in place.
pub fn init(config: &ServiceConfig) -> Result<(), ConfigError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => directives_filter("RUST_LOG", &directives)?,
        _ => log_filter(&config.log_level)?,
    };
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // Only the first subscriber of a process takes; later calls (tests starting several daemons) keep it.
    let _ = match config.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    Ok(())
}
