//! Connecting to a daemon by the same address syntax it listens on.

use tonic::transport::{Channel, Endpoint, Uri};

use crate::proto::prover_client::ProverClient;
use crate::Listen;

/// A client for the daemon at `addr` (`HOST:PORT` or `unix:///path`), with no limit on reply size.
pub async fn connect(addr: &str) -> Result<ProverClient<Channel>, String> {
    let channel = match addr.parse::<Listen>()? {
        Listen::Tcp(hostport) => Endpoint::from_shared(format!("http://{hostport}"))
            .map_err(|e| format!("{addr}: {e}"))?
            .connect()
            .await
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?,
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
                .map_err(|e| format!("cannot connect to {addr}: {e}"))?
        }
    };
    Ok(ProverClient::new(channel).max_decoding_message_size(usize::MAX))
}
