//! The listeners' connections: at most so many open at once, closed when they go quiet, and an
//! accept loop that neither spins nor fails when the process runs out of file descriptors.
//!
//! A connection is accepted only once it has a place under the limit; until then clients wait in the
//! kernel's backlog (their connect succeeds, their first call waits) rather than being refused. A
//! connection that sends nothing for the handshake timeout after it opens (a port scan, a stuck
//! client), or nothing for the idle timeout later, is closed. On the gRPC listener the server pings
//! every client at half the idle timeout, so a live client that waits for a long proof always
//! answers in time. An accept that fails (EMFILE: too many open files) waits a little before the
//! next, so the loop does not spin, and is logged at most every ten seconds.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// File descriptors kept for everything but connections (key files, the devices, the runtime).
pub const RESERVED_FDS: u64 = 64;

/// Pause after a failed accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What bounds one listener's connections.
#[derive(Debug)]
pub struct Limits {
    name: &'static str,
    max: usize,
    places: Arc<Semaphore>,
    handshake: Duration,
    idle: Duration,
    closed_quiet: prometheus_client::metrics::counter::Counter,
}

impl Limits {
    /// At most `max` connections on the listener called `name` (in logs and metrics), closed after
    /// `handshake` without a first byte or `idle` without another; `closed_quiet` counts those.
    pub(crate) fn new(
        name: &'static str,
        max: usize,
        handshake: Duration,
        idle: Duration,
        closed_quiet: prometheus_client::metrics::counter::Counter,
    ) -> Arc<Self> {
        Arc::new(Self { name, max, places: Arc::new(Semaphore::new(max)), handshake, idle, closed_quiet })
    }

    /// The listener's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// How long a connection may send nothing once it has sent something.
    pub fn idle(&self) -> Duration {
        self.idle
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.max - self.places.available_permits()
    }

    /// The most connections open at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Connections closed for sending nothing in time, since start.
    pub fn closed_quiet(&self) -> u64 {
        self.closed_quiet.get()
    }
}

/// The soft limit on this process's open files (`ulimit -n`), where the platform tells.
pub fn open_files_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// Raises the soft limit on open files to the hard limit (what a daemon may do for itself) and
/// returns the soft limit in force afterwards.
pub fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(error = %e, "could not raise the open files limit");
        }
    }
    open_files_limit()
}

/// The most gRPC and metrics connections, `grpc` and `metrics` as configured, lowered so that both
/// fit under an open files limit of `limit` with [`RESERVED_FDS`] to spare (metrics taking at most an
/// eighth of the room).
pub fn share_open_files(grpc: usize, metrics: usize, limit: Option<u64>) -> (usize, usize) {
    let Some(limit) = limit else { return (grpc, metrics) };
    let room = limit.saturating_sub(RESERVED_FDS).max(2);
    let metrics = (metrics as u64).min(room / 8).max(1);
    let grpc = (grpc as u64).min(room - metrics).max(1);
    (grpc as usize, metrics as usize)
}

/// [`share_open_files`] for this process's limit; logs a warning for a listener that gets fewer
/// than configured.
pub fn fit_to_open_files(grpc: usize, metrics: usize) -> (usize, usize) {
    let limit = open_files_limit();
    let fitted = share_open_files(grpc, metrics, limit);
    for (name, wanted, got) in [("grpc", grpc, fitted.0), ("metrics", metrics, fitted.1)] {
        if got < wanted {
            tracing::warn!(
                listener = name,
                configured = wanted,
                allowed = got,
                open_files_limit = limit,
                "fewer connections than configured: the open files limit (ulimit -n) leaves no room for more"
            );
        }
    }
    fitted
}

/// A listener whose accepted connections [`incoming`] can hand out.
pub trait Listener: Send + 'static {
    /// A connection.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// Accepts the next connection.
    fn accept_io(&self) -> impl Future<Output = io::Result<Self::Io>> + Send;
}

impl Listener for tokio::net::TcpListener {
    type Io = tokio::net::TcpStream;
    async fn accept_io(&self) -> io::Result<Self::Io> {
        let (s, _) = self.accept().await?;
        let _ = s.set_nodelay(true);
        Ok(s)
    }
}

impl Listener for tokio::net::UnixListener {
    type Io = tokio::net::UnixStream;
    async fn accept_io(&self) -> io::Result<Self::Io> {
        self.accept().await.map(|(s, _)| s)
    }
}

/// Accepts connections from `listener` under `limits` until the returned stream is dropped; each is
/// passed through `wrap` (which may put a protocol fix in front of it).
pub fn incoming<L: Listener, W: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    listener: L,
    limits: Arc<Limits>,
    wrap: impl Fn(L::Io) -> W + Send + 'static,
) -> tokio_stream::wrappers::ReceiverStream<io::Result<Conn<W>>> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        let mut last_warning: Option<Instant> = None;
        loop {
            let place = tokio::select! {
                _ = tx.closed() => return,
                p = Arc::clone(&limits.places).acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => return,
                },
            };
            let accepted = tokio::select! {
                _ = tx.closed() => return,
                a = listener.accept_io() => a,
            };
            match accepted {
                Ok(io) => {
                    let conn = Conn::new(wrap(io), place, Arc::clone(&limits));
                    if tx.send(Ok(conn)).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    drop(place);
                    if last_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                        tracing::warn!(listener = limits.name, error = %e, "accepting a connection failed");
                        last_warning = Some(Instant::now());
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// An accepted connection: holds its place under the limit, and fails its reads once the client has
/// been quiet too long (the server then closes it).
pub struct Conn<S> {
    io: S,
    quiet: Pin<Box<Sleep>>,
    heard: bool,
    limits: Arc<Limits>,
    _place: OwnedSemaphorePermit,
}

impl<S> Conn<S> {
    fn new(io: S, place: OwnedSemaphorePermit, limits: Arc<Limits>) -> Self {
        let quiet = Box::pin(tokio::time::sleep(limits.handshake));
        Self { io, quiet, heard: false, limits, _place: place }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Conn<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                this.heard = true;
                this.quiet.as_mut().reset(Instant::now() + this.limits.idle);
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match this.quiet.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.limits.closed_quiet.inc();
                    let what = if this.heard { "idle" } else { "sent nothing after connecting" };
                    Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, format!("connection {what}"))))
                }
                Poll::Pending => Poll::Pending,
            },
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Conn<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl<S: tonic::transport::server::Connected> tonic::transport::server::Connected for Conn<S> {
    type ConnectInfo = S::ConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}
