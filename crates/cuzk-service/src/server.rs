//! The gRPC service over a [`Daemon`], the listeners (TCP or a Unix socket), the HTTP metrics
//! endpoint and graceful shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::{Request, Response, Status};

use crate::config::ShutdownPolicy;
use crate::daemon::{Daemon, ServiceError};
use crate::proto::prover_server::{Prover, ProverServer};
use crate::proto::{self as pb};

impl From<ServiceError> for Status {
    fn from(e: ServiceError) -> Self {
        let m = e.to_string();
        match e {
            ServiceError::InvalidArgument(_) => Status::invalid_argument(m),
            ServiceError::NotFound(_) => Status::not_found(m),
            ServiceError::AlreadyExists(_) => Status::already_exists(m),
            ServiceError::ResourceExhausted(_) => Status::resource_exhausted(m),
            ServiceError::WaitTimedOut(_) | ServiceError::DeadlineExceeded(_) => Status::deadline_exceeded(m),
            ServiceError::Cancelled(_) => Status::cancelled(m),
            ServiceError::Unavailable(_) => Status::unavailable(m),
            ServiceError::Failed(_) => Status::internal(m),
        }
    }
}

fn priority(p: i32) -> Result<cuzk::sched::Priority, Status> {
    use cuzk::sched::Priority as P;
    match pb::Priority::try_from(p) {
        Ok(pb::Priority::Normal) => Ok(P::Normal),
        Ok(pb::Priority::Low) => Ok(P::Low),
        Ok(pb::Priority::High) => Ok(P::High),
        Ok(pb::Priority::Urgent) => Ok(P::Urgent),
        Err(_) => Err(Status::invalid_argument(format!("unknown priority {p}"))),
    }
}

fn to_pb_priority(p: cuzk::sched::Priority) -> pb::Priority {
    use cuzk::sched::Priority as P;
    match p {
        P::Low => pb::Priority::Low,
        P::Normal => pb::Priority::Normal,
        P::High => pb::Priority::High,
        P::Urgent => pb::Priority::Urgent,
    }
}

fn millis(ms: u64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// Cancels and forgets a `Prove` call's job when the call ends before its proof does (the client went
/// away, or its timeout ran out).
struct Abandon<'a> {
    daemon: &'a Daemon,
    id: Option<String>,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.daemon.abandon(&id);
        }
    }
}

/// The gRPC service.
#[derive(Debug, Clone)]
pub struct Service {
    daemon: Arc<Daemon>,
}

impl Service {
    /// The service over `daemon`.
    pub fn new(daemon: Arc<Daemon>) -> Self {
        Self { daemon }
    }

    fn submit(&self, r: &pb::SubmitRequest) -> Result<String, Status> {
        let priority = priority(r.priority).inspect_err(|_| self.daemon.count_rejected())?;
        Ok(self.daemon.submit(&r.key_id, &r.partitions, priority, millis(r.deadline_ms))?)
    }
}

fn proof_reply(job_id: String, f: crate::daemon::Finished) -> Response<pb::ProofReply> {
    Response::new(pb::ProofReply { job_id, proofs: f.proofs, seconds: f.seconds })
}

#[tonic::async_trait]
impl Prover for Service {
    async fn submit_proof(
        &self,
        req: Request<pb::SubmitRequest>,
    ) -> Result<Response<pb::SubmitReply>, Status> {
        let job_id = self.submit(req.get_ref())?;
        Ok(Response::new(pb::SubmitReply { job_id }))
    }

    async fn await_proof(&self, req: Request<pb::AwaitRequest>) -> Result<Response<pb::ProofReply>, Status> {
        let r = req.into_inner();
        let f = self.daemon.await_proof(&r.job_id, millis(r.timeout_ms)).await?;
        Ok(proof_reply(r.job_id, f))
    }

    async fn prove(&self, req: Request<pb::SubmitRequest>) -> Result<Response<pb::ProofReply>, Status> {
        let r = req.get_ref();
        let job_id = self.submit(r)?;
        let mut guard = Abandon { daemon: &self.daemon, id: Some(job_id.clone()) };
        let result = self.daemon.await_proof(&job_id, millis(r.timeout_ms)).await;
        if !matches!(result, Err(ServiceError::WaitTimedOut(_))) {
            // Collected (or failed): nothing left to cancel.
            guard.id = None;
        }
        Ok(proof_reply(job_id, result?))
    }

    async fn cancel_proof(
        &self,
        req: Request<pb::CancelRequest>,
    ) -> Result<Response<pb::CancelReply>, Status> {
        Ok(Response::new(pb::CancelReply { cancelled: self.daemon.cancel(&req.get_ref().job_id) }))
    }

    async fn get_status(
        &self,
        _req: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusReply>, Status> {
        let d = &self.daemon;
        let (keys, jobs) = d.status();
        let budget = d.budget();
        let n = |v: usize| v as u64;
        let c = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Ok(Response::new(pb::StatusReply {
            backend: d.backend().into(),
            devices: d.devices().into_iter().map(c).collect(),
            keys: keys
                .into_iter()
                .map(|k| pb::KeyStatus {
                    key_id: k.id,
                    circuit_kind: k.kind,
                    shape_id: k.shape_id,
                    constraints: n(k.constraints),
                    domain_size: n(k.domain_size),
                    devices: c(k.devices),
                    live_jobs: n(k.live_jobs),
                    host_bytes: k.host_bytes,
                })
                .collect(),
            jobs: jobs
                .into_iter()
                .map(|j| {
                    let s = j.status.unwrap_or_default();
                    pb::JobStatus {
                        job_id: j.id,
                        key_id: j.key_id,
                        priority: to_pb_priority(j.priority).into(),
                        partitions: c(j.partitions),
                        queued: c(s.queued),
                        synthesizing: c(s.synthesizing),
                        waiting_gpu: c(s.waiting_gpu),
                        on_gpu: c(s.on_gpu),
                        done: c(if j.outcome == Some("succeeded") { j.partitions } else { s.done }),
                        finished: j.outcome.is_some(),
                        outcome: j.outcome.unwrap_or_default().into(),
                    }
                })
                .collect(),
            circuit_kinds: d.circuit_kinds(),
            uptime_ms: d.uptime().as_millis() as u64,
            budget_bytes: budget.0,
            budget_used_bytes: budget.1,
            budget_peak_bytes: budget.2,
        }))
    }

    async fn get_metrics(
        &self,
        _req: Request<pb::MetricsRequest>,
    ) -> Result<Response<pb::MetricsReply>, Status> {
        Ok(Response::new(pb::MetricsReply { text: self.daemon.metrics() }))
    }

    async fn load_key(&self, req: Request<pb::LoadKeyRequest>) -> Result<Response<pb::LoadKeyReply>, Status> {
        let r = req.into_inner();
        let daemon = Arc::clone(&self.daemon);
        // Reading or generating a key is long CPU and disk work: off the async threads.
        let loaded =
            tokio::task::spawn_blocking(move || daemon.load_key(&r.key_id, &r.circuit_kind, &r.params))
                .await
                .map_err(|e| Status::internal(format!("loading the key: {e}")))??;
        Ok(Response::new(pb::LoadKeyReply {
            shape_id: loaded.shape_id,
            constraints: loaded.constraints as u64,
            generated: loaded.generated,
            seconds: loaded.seconds,
            verifying_key: loaded.verifying_key,
        }))
    }

    async fn evict_key(
        &self,
        req: Request<pb::EvictKeyRequest>,
    ) -> Result<Response<pb::EvictKeyReply>, Status> {
        Ok(Response::new(pb::EvictKeyReply { evicted: self.daemon.evict_key(&req.get_ref().key_id) }))
    }
}

/// Where the API listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address (`HOST:PORT`; port 0 picks a free one).
    Tcp(String),
    /// A Unix socket path (`unix:///path`).
    Unix(std::path::PathBuf),
}

impl std::str::FromStr for Listen {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.strip_prefix("unix://") {
            Some("") => Err(format!("{s:?}: the Unix socket path is empty")),
            Some(path) => Ok(Listen::Unix(path.into())),
            None if s.contains(':') => Ok(Listen::Tcp(s.to_owned())),
            None => Err(format!("{s:?} is neither HOST:PORT nor unix:///path")),
        }
    }
}

/// Serves `daemon` until `shutdown` resolves; then stops accepting, finishes or cancels the live
/// proofs by the configured policy, lets calls in flight end, and returns. `ready` gets the address
/// actually bound (useful with port 0).
pub async fn serve(
    daemon: Arc<Daemon>,
    listen: Listen,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(String),
) -> Result<(), String> {
    let max = daemon.config().max_request_bytes;
    let svc = ProverServer::new(Service::new(Arc::clone(&daemon)))
        .max_decoding_message_size(max)
        .max_encoding_message_size(usize::MAX);
    let drain_daemon = Arc::clone(&daemon);
    // After the signal: refuse new work and drain by policy while the server still answers (so
    // finished proofs can be collected); then the server lets the calls in flight end.
    let on_signal = async move {
        shutdown.await;
        drain_daemon.stop_accepting();
        drain(&drain_daemon).await;
    };
    let router = tonic::transport::Server::builder().add_service(svc);
    match listen {
        Listen::Tcp(addr) => {
            let l = tokio::net::TcpListener::bind(&addr)
                .await
                .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
            ready(l.local_addr().map_err(|e| e.to_string())?.to_string());
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(l);
            router.serve_with_incoming_shutdown(incoming, on_signal).await.map_err(|e| e.to_string())?;
        }
        Listen::Unix(path) => {
            if path.exists() {
                return Err(format!("{} already exists: remove it if no daemon uses it", path.display()));
            }
            let l = tokio::net::UnixListener::bind(&path)
                .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
            ready(format!("unix://{}", path.display()));
            let incoming = tokio_stream::wrappers::UnixListenerStream::new(l);
            let served = router.serve_with_incoming_shutdown(incoming, on_signal).await;
            let _ = std::fs::remove_file(&path);
            served.map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// A daemon served in the background of the current tokio runtime ([`spawn`]).
#[derive(Debug)]
pub struct Background {
    /// The address it listens on (`HOST:PORT` or `unix:///path`).
    pub addr: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<Result<(), String>>,
}

impl Background {
    /// Shuts it down as a signal would (policy, drain, calls in flight end) and waits until it has.
    pub async fn stop(mut self) -> Result<(), String> {
        drop(self.stop.take());
        self.served.await.map_err(|e| format!("the server task: {e}"))?
    }
}

/// Serves `daemon` on `listen` in the background; returns once it is listening.
pub async fn spawn(daemon: Arc<Daemon>, listen: Listen) -> Result<Background, String> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let shutdown = async move {
        let _ = stopped.await;
    };
    let served = tokio::spawn(serve(daemon, listen, shutdown, move |a| {
        let _ = addr_tx.send(a);
    }));
    match addr_rx.await {
        Ok(addr) => Ok(Background { addr, stop: Some(stop), served }),
        // It stopped before listening: its error says why.
        Err(_) => {
            Err(served.await.map_err(|e| e.to_string())?.err().unwrap_or_else(|| "the server stopped".into()))
        }
    }
}

/// Finishes or cancels the proofs by policy. "finish" waits, for at most the grace time, until every
/// proof is done and collected; then (or at once with "cancel") what is still live is cancelled.
async fn drain(daemon: &Daemon) {
    let c = daemon.config();
    if c.shutdown == ShutdownPolicy::Finish {
        let until = tokio::time::Instant::now() + Duration::from_secs(c.shutdown_grace_secs);
        while daemon.jobs() > 0 && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    daemon.cancel_all();
}

/// Resolves on SIGINT or SIGTERM.
pub async fn signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Serves `GET /metrics` over plain HTTP/1.1 (one request per connection) until `stop` resolves.
pub async fn serve_metrics(
    daemon: Arc<Daemon>,
    listener: tokio::net::TcpListener,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    loop {
        let conn = tokio::select! {
            _ = &mut stop => return,
            c = listener.accept() => c,
        };
        let Ok((mut stream, _)) = conn else { continue };
        let daemon = Arc::clone(&daemon);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let mut len = 0;
            // Read the request head: at most 4 KiB within 5 s in all, so a slow client cannot hold the
            // connection open; the body, if any, is ignored.
            let head = async {
                while len < buf.len() {
                    match stream.read(&mut buf[len..]).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => len += n,
                    }
                    if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
            };
            if tokio::time::timeout(Duration::from_secs(5), head).await.is_err() {
                return;
            }
            let head = String::from_utf8_lossy(&buf[..len]);
            let line = head.lines().next().unwrap_or_default();
            let (status, body) = if line.starts_with("GET /metrics ") {
                ("200 OK", daemon.metrics())
            } else {
                ("404 Not Found", "only GET /metrics is served\n".to_owned())
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}
