//! Connecting to a daemon by the same address syntax it listens on.

use tonic::transport::{Channel, Endpoint, Uri};

use crate::config::{AddressError, Listen};
use crate::proto::prover_client::ProverClient;

/// Why a client could not connect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The address is not `HOST:PORT` or `unix:///path`.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// The transport could not connect.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address.
        addr: String,
        /// The reason.
        #[source]
        source: tonic::transport::Error,
    },
}

/// A client for the daemon at `addr` (`HOST:PORT` or `unix:///path`), with no limit on reply size.
pub async fn connect(addr: &str) -> Result<ProverClient<Channel>, ConnectError> {
    Ok(ProverClient::new(channel(addr).await?).max_decoding_message_size(usize::MAX))
}

/// A channel to the daemon at `addr`, for any of its services (the API, health, reflection).
pub async fn channel(addr: &str) -> Result<Channel, ConnectError> {
    let failed = |source| ConnectError::Connect { addr: addr.to_owned(), source };
    let channel = match addr.parse::<Listen>()? {
        Listen::Tcp(hostport) => Endpoint::from_shared(format!("http://{hostport}"))
            .map_err(failed)?
            .connect()
            .await
            .map_err(failed)?,
        Listen::Unix(path) => {
            // The URI is not used: every connection goes to the socket.
            Endpoint::from_static("http://localhost")
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        let stream = tokio::net::UnixStream::connect(path).await?;
                        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                    }
                }))
                .await
                .map_err(failed)?
        }
    };
    Ok(channel)
}
