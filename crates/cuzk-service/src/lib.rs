#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod authority;
pub mod client;
pub mod codec;
pub mod config;
pub mod conn;
pub mod daemon;
mod error;
mod filecoin;
mod kind;
pub mod logging;
mod metrics;
pub mod registry;
pub mod server;

/// The generated gRPC messages, server and client.
#[allow(missing_docs, clippy::all)]
pub mod proto {
    tonic::include_proto!("cuzk.v1");
}

pub use config::{AddressError, ConfigError, Listen, LogFormat, ServiceConfig, ShutdownPolicy, DEFAULT_TOML};
pub use daemon::Daemon;
pub use error::ServiceError;
pub use registry::{BoxedCircuit, CircuitKind, KindError, KindKey, Registry};
pub use server::{serve, spawn, Background, ServeError, Service};
