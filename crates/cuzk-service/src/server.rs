//! The gRPC service over a [`Daemon`] (with the standard health and reflection services beside it),
//! the listeners (TCP or a Unix socket), the HTTP metrics endpoint and graceful shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tonic::{Request, Response, Status};
use tonic_health::ServingStatus;

use crate::config::{AddressError, Listen, ShutdownPolicy};
use crate::daemon::Daemon;
use crate::error::ServiceError;
use crate::proto::prover_server::{Prover, ProverServer};
use crate::proto::{self as pb};

/// Why the daemon could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// An address that cannot be listened on.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// Binding the listener failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The reason.
        #[source]
        source: std::io::Error,
    },
    /// Something that is not a socket already exists at the Unix socket's path (it is never
    /// removed).
    #[error("{} already exists and is not a socket: remove it or listen elsewhere", .0.display())]
    SocketExists(std::path::PathBuf),
    /// A daemon already answers on the Unix socket's path.
    #[error("a daemon already listens on {}", .0.display())]
    SocketInUse(std::path::PathBuf),
    /// The gRPC transport failed.
    #[error("the gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The reflection service could not be built from the API's descriptors.
    #[error("the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The background server task failed.
    #[error("the server task: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// The server stopped before it listened.
    #[error("the server stopped before it listened")]
    Stopped,
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

/// Raises a flag when dropped: a call's future is dropped when its client goes away.
struct GiveUp(Arc<std::sync::atomic::AtomicBool>);

impl Drop for GiveUp {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
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
                    degradations: k.degradations.iter().map(ToString::to_string).collect(),
                    msm_tables: k.msm_tables,
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
            backend_note: d.backend_note().unwrap_or_default().into(),
            mul_units: d.mul_units().map(|u| u.name().into()).unwrap_or_default(),
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
        // A client that goes away (or whose deadline passes) drops this call: the load is given up,
        // and a key being generated for it stops.
        let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let _given_up = GiveUp(Arc::clone(&cancel));
        // Reading or generating a key is long CPU and disk work: off the async threads.
        let loaded = tokio::task::spawn_blocking(move || {
            daemon.load_key_unless(&r.key_id, &r.circuit_kind, &r.params, &cancel)
        })
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

/// The encoded descriptors of `proto/cuzk.proto`, for server reflection.
const DESCRIPTORS: &[u8] = tonic::include_file_descriptor_set!("cuzk_descriptor");

/// Marks the daemon's services (and the server as a whole, service "") serving or not in the health
/// service.
async fn set_health(reporter: &tonic_health::server::HealthReporter, status: ServingStatus) {
    for service in ["", <ProverServer<Service> as tonic::server::NamedService>::NAME] {
        reporter.set_service_status(service, status).await;
    }
}

/// Serves `daemon` until `shutdown` resolves; then stops accepting, finishes or cancels the live
/// proofs by the configured policy, lets calls in flight end, and returns. `ready` gets the address
/// actually bound (useful with port 0). Beside the API it serves the standard gRPC health service
/// (`grpc.health.v1.Health`: SERVING while it serves, NOT_SERVING from the shutdown signal on) and
/// server reflection (`grpc.reflection.v1`), so stock tools and probes work against it.
pub async fn serve(
    daemon: Arc<Daemon>,
    listen: Listen,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(String),
) -> Result<(), ServeError> {
    let max = daemon.config().max_request_bytes;
    let svc = ProverServer::new(Service::new(Arc::clone(&daemon)))
        .max_decoding_message_size(max)
        .max_encoding_message_size(usize::MAX);
    let (health, health_svc) = tonic_health::server::health_reporter();
    set_health(&health, ServingStatus::Serving).await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(DESCRIPTORS)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let drain_daemon = Arc::clone(&daemon);
    // After the signal: refuse new work and drain by policy while the server still answers (so
    // finished proofs can be collected); then the server lets the calls in flight end.
    let on_signal = async move {
        shutdown.await;
        set_health(&health, ServingStatus::NotServing).await;
        drain_daemon.stop_accepting();
        drain(&drain_daemon).await;
    };
    let c = daemon.config();
    let (max, _) = crate::conn::fit_to_open_files(c.max_connections, c.metrics_max_connections);
    let limits = daemon.connection_limits("grpc", max);
    // Pings at half the idle timeout keep a live client's connection from going quiet.
    let ping = limits.idle() / 2;
    let router = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(ping))
        .http2_keepalive_timeout(Some(ping.min(Duration::from_secs(20))))
        .add_service(health_svc)
        .add_service(reflection)
        .add_service(svc);
    match listen {
        Listen::Tcp(addr) => {
            let l = tokio::net::TcpListener::bind(&addr)
                .await
                .map_err(|source| ServeError::Bind { addr: addr.clone(), source })?;
            let bound = l.local_addr().map_err(|source| ServeError::Bind { addr, source })?;
            tracing::info!(address = %bound, max_connections = max, "serving gRPC");
            ready(bound.to_string());
            let incoming = crate::conn::incoming(l, limits, |s| s);
            router.serve_with_incoming_shutdown(incoming, on_signal).await?;
        }
        Listen::Unix(path) => {
            let bind_error = |source| ServeError::Bind { addr: format!("unix://{}", path.display()), source };
            clear_stale_socket(&path)?;
            let l = tokio::net::UnixListener::bind(&path).map_err(bind_error)?;
            // Only this user may connect: the socket's mode, not the umask's.
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .map_err(bind_error)?;
            tracing::info!(address = %format!("unix://{}", path.display()), max_connections = max, "serving gRPC");
            ready(format!("unix://{}", path.display()));
            // Stock clients send the socket's path as the authority: see `authority`.
            let incoming = crate::conn::incoming(l, limits, crate::authority::Rewrite::new);
            let served = router.serve_with_incoming_shutdown(incoming, on_signal).await;
            let _ = std::fs::remove_file(&path);
            served?;
        }
    }
    tracing::info!("stopped serving");
    Ok(())
}

/// Makes way for a Unix socket at `path`: nothing there is fine; a socket no daemon answers on (left
/// by a daemon that was killed) is removed; a socket a daemon answers on, or anything that is not a
/// socket, is refused and left as it is.
fn clear_stale_socket(path: &std::path::Path) -> Result<(), ServeError> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(ServeError::Bind { addr: format!("unix://{}", path.display()), source }),
    };
    if !meta.file_type().is_socket() {
        return Err(ServeError::SocketExists(path.to_owned()));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(ServeError::SocketInUse(path.to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            tracing::warn!(path = %path.display(), "removing a stale socket no daemon answers on");
            std::fs::remove_file(path)
                .map_err(|source| ServeError::Bind { addr: format!("unix://{}", path.display()), source })
        }
        Err(source) => Err(ServeError::Bind { addr: format!("unix://{}", path.display()), source }),
    }
}

/// A daemon served in the background of the current tokio runtime ([`spawn`]).
#[derive(Debug)]
pub struct Background {
    /// The address it listens on (`HOST:PORT` or `unix:///path`).
    pub addr: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<Result<(), ServeError>>,
}

impl Background {
    /// Shuts it down as a signal would (policy, drain, calls in flight end) and waits until it has.
    pub async fn stop(mut self) -> Result<(), ServeError> {
        drop(self.stop.take());
        self.served.await?
    }
}

/// Serves `daemon` on `listen` in the background; returns once it is listening.
pub async fn spawn(daemon: Arc<Daemon>, listen: Listen) -> Result<Background, ServeError> {
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
        Err(_) => Err(served.await?.err().unwrap_or(ServeError::Stopped)),
    }
}

/// The metrics listener's connection limits.
fn metrics_limits(daemon: &Daemon) -> Arc<crate::conn::Limits> {
    let c = daemon.config();
    let (_, max) = crate::conn::fit_to_open_files(c.max_connections, c.metrics_max_connections);
    daemon.connection_limits("metrics", max)
}

/// Finishes or cancels the proofs by policy. "finish" waits, for at most the grace time, until every
/// proof is done and collected, or until [`Daemon::abort`]; then (or at once with "cancel") what is
/// still live is cancelled.
async fn drain(daemon: &Daemon) {
    let c = daemon.config();
    if c.shutdown == ShutdownPolicy::Finish {
        let start = tokio::time::Instant::now();
        // The grace time is range-checked at start; a saturating wait needs no further care.
        let grace = Duration::from_secs(c.shutdown_grace_secs);
        while daemon.jobs() > 0 && !daemon.aborted() && start.elapsed() < grace {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    daemon.cancel_all();
}

/// SIGINT and SIGTERM, listened for from the moment this is made: a signal that arrives while
/// nobody is waiting in [`Signals::recv`] is kept for the next call, not lost.
pub struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    /// Starts listening; needs a tokio runtime with its signal driver.
    pub fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self { interrupt: signal(SignalKind::interrupt())?, terminate: signal(SignalKind::terminate())? })
    }

    /// Resolves on the next SIGINT or SIGTERM.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

/// Serves the metrics over HTTP at `/metrics` (GET and HEAD; other methods 405, other paths 404)
/// until `stop` resolves. Each request head must arrive within 5 s, and connections are bounded and
/// closed when quiet as on the gRPC listener (`metrics_max_connections`, the same timeouts).
pub async fn serve_metrics(
    daemon: Arc<Daemon>,
    listener: tokio::net::TcpListener,
    stop: impl Future<Output = ()>,
) {
    use axum::http::header::CONTENT_TYPE;
    let limits = metrics_limits(&daemon);
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let daemon = Arc::clone(&daemon);
            async move {
                let text = daemon.metrics();
                ([(CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text)
            }
        }),
    );
    let mut incoming = crate::conn::incoming(listener, limits, |s| s);
    tokio::pin!(stop);
    loop {
        let conn = tokio::select! {
            _ = &mut stop => return,
            c = tokio_stream::StreamExt::next(&mut incoming) => c,
        };
        let Some(Ok(stream)) = conn else { return };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(Duration::from_secs(5));
            let _ = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service).await;
        });
    }
}
