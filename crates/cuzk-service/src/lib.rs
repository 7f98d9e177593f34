//! The cuzk proving daemon: a gRPC API (`proto/cuzk.proto`) over the engine, with resident keys, a
//! long-lived pipeline per key, status and Prometheus metrics, a TOML configuration and graceful
//! shutdown; and the registry of circuit kinds that requests name.

#![forbid(unsafe_code)]

pub mod cli;
pub mod client;
pub mod config;
pub mod daemon;
pub mod load;
pub mod registry;
pub mod server;

/// The generated gRPC messages, server and client.
#[allow(missing_docs, clippy::all)]
pub mod proto {
    tonic::include_proto!("cuzk.v1");
}

pub use config::{ServiceConfig, ShutdownPolicy, DEFAULT_TOML};
pub use daemon::{Daemon, ServiceError};
pub use registry::{BoxedCircuit, CircuitKind, KindKey, Registry};
pub use server::{serve, spawn, Background, Listen, Service};
