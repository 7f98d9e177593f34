//! The daemon's state, apart from the wire: resident keys, jobs, metrics, shutdown.
//!
//! Each resident key has its own long-lived pipeline (`cuzk::Pipeline`); all of them reserve host
//! memory from one budget, so together they never hold more than it. A submitted proof becomes a
//! job whose outcome a background task collects as soon as it is ready, so metrics count it whether or
//! not anyone waits, and a client that gives up waiting loses nothing: the outcome (proofs, or why
//! there are none, such as a cancellation) stays until it is collected once (`AwaitProof`), its time
//! to live runs out (`result_ttl_secs`), or the daemon stops. Job ids carry 64 random bits, so they
//! cannot be guessed; GetStatus lists them, though, to any client (there is no authentication).
//! Values that may hold the last reference to a key's pipeline are dropped on a thread of their own:
//! dropping a pipeline joins its workers, which must not stall a lock or an async thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ark_bls12_381::{Bls12_381, Fr};
use ark_serialize::CanonicalSerialize;
use cuzk::sched::{JobId, JobStatus, Priority};
use rand::{RngCore, SeedableRng};
use tokio::sync::watch;
use tracing::Instrument;

use crate::config::ServiceConfig;
use crate::conn::Limits;
use crate::error::ServiceError;
use crate::metrics::{gauge_value, DegradationLabel, KeyLabel, ListenerLabel, Metrics};
use crate::registry::{BoxedCircuit, KindKey, Registry};

mod keys;

/// A resident key and its pipeline.
pub struct Resident {
    id: String,
    kind: String,
    spec: Box<dyn KindKey>,
    shape_id: String,
    constraints: usize,
    domain_size: usize,
    devices: usize,
    msm_tables: Vec<String>,
    pipeline: cuzk::Pipeline<BoxedCircuit>,
}

impl Resident {
    /// The key's circuit kind's view of it.
    pub fn spec(&self) -> &dyn KindKey {
        self.spec.as_ref()
    }
}

/// What `LoadKey` did.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The key's shape id in the key directory.
    pub shape_id: String,
    /// The circuit's constraints.
    pub constraints: usize,
    /// Generated (and saved) rather than read.
    pub generated: bool,
    /// Wall time of the whole call.
    pub seconds: f64,
    /// The verifying key, compressed.
    pub verifying_key: Vec<u8>,
}

/// A finished proof.
#[derive(Debug, Clone)]
pub struct Finished {
    /// One compressed proof per partition.
    pub proofs: Vec<Vec<u8>>,
    /// From submission to the last partition's proof.
    pub seconds: f64,
}

type Outcome = Result<Finished, ServiceError>;

struct Job {
    key: Arc<Resident>,
    sched_id: JobId,
    priority: Priority,
    partitions: usize,
    /// The outcome and when it came.
    outcome: watch::Receiver<Option<(Outcome, Instant)>>,
}

impl Job {
    /// How it ended, once it has.
    fn ended(&self) -> Option<&'static str> {
        self.outcome.borrow().as_ref().map(|(o, _)| match o {
            Ok(_) => "succeeded",
            Err(ServiceError::Cancelled(_)) => "cancelled",
            Err(_) => "failed",
        })
    }

    /// Finished, and not collected for longer than `ttl`.
    fn expired(&self, ttl: Option<Duration>, now: Instant) -> bool {
        let ended = self.outcome.borrow().as_ref().map(|(_, at)| *at);
        matches!((ttl, ended), (Some(ttl), Some(at)) if now.duration_since(at) > ttl)
    }
}

/// Where a job is, for `GetStatus`.
#[derive(Debug, Clone)]
pub struct JobView {
    /// The job's id.
    pub id: String,
    /// Its key.
    pub key_id: String,
    /// Its priority.
    pub priority: Priority,
    /// Partitions in the job.
    pub partitions: usize,
    /// Per-partition states while it runs; `None` once finished (waiting to be collected).
    pub status: Option<JobStatus>,
    /// Once finished: "succeeded", "failed" or "cancelled".
    pub outcome: Option<&'static str>,
}

/// A resident key, for `GetStatus`.
#[derive(Debug, Clone)]
pub struct KeyView {
    /// The key's id.
    pub id: String,
    /// Its circuit kind.
    pub kind: String,
    /// Its shape id.
    pub shape_id: String,
    /// Constraints of one partition.
    pub constraints: usize,
    /// The proving domain.
    pub domain_size: usize,
    /// Devices it is resident on (0 on the CPU backend).
    pub devices: usize,
    /// Jobs queued or running on it.
    pub live_jobs: usize,
    /// Host bytes the key holds in the budget.
    pub host_bytes: u64,
    /// What the key's pipeline does less well than configured.
    pub degradations: Vec<cuzk::Degradation>,
    /// The MSMs given tables of precomputed multiples, then those given larger batches, one
    /// sentence each.
    pub msm_tables: Vec<String>,
}

/// The daemon.
pub struct Daemon {
    engine: cuzk::Engine,
    config: ServiceConfig,
    registry: Registry,
    store: cuzk::keystore::KeyStore,
    /// The host memory budget every key's pipeline reserves from.
    budget: cuzk::sched::Budget,
    keys: Mutex<BTreeMap<String, Arc<Resident>>>,
    /// Key ids being loaded, so two loads of one id do not both do the work.
    loading: Mutex<std::collections::BTreeSet<String>>,
    /// One gate per shape being generated, so loads of one missing key generate it once.
    generating: Mutex<BTreeMap<String, Arc<Mutex<()>>>>,
    jobs: Mutex<BTreeMap<String, Job>>,
    next_job: AtomicU64,
    accepting: AtomicBool,
    /// Set by [`Daemon::abort`]: a drain in progress gives up waiting.
    aborted: AtomicBool,
    started: Instant,
    metrics: Metrics,
    /// The listeners' connection limits, for the metrics.
    listeners: Mutex<Vec<Arc<Limits>>>,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon").field("backend", &self.engine.backend_name()).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A name from a request as it goes into a message: escaped, and cut to 64 characters.
fn shown(s: &str) -> String {
    let cut: String = s.chars().take(64).collect();
    let more = if cut.len() < s.len() { "..." } else { "" };
    format!("\"{}{more}\"", cut.escape_debug())
}

/// Drops `v` on a thread of its own (see the module documentation).
fn release<T: Send + 'static>(v: T) {
    std::thread::spawn(move || drop(v));
}

/// A key or job id: 1 to 128 ASCII letters, digits, `.`, `_` or `-`. (Ids never name files; the limit keeps
/// them readable in status, metrics labels and logs.)
fn check_id(what: &str, id: &str) -> Result<(), ServiceError> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    if id.is_empty() || id.len() > 128 || !id.bytes().all(allowed) {
        return Err(ServiceError::InvalidArgument(format!(
            "{what} {} is not 1 to 128 ASCII letters, digits, '.', '_' or '-'",
            shown(id)
        )));
    }
    Ok(())
}

impl Daemon {
    /// Opens the engine and the key directory. On the `auto` backend without a usable GPU the engine
    /// proves on the CPU: that is logged as a warning with the reason, and `GetStatus` reports the
    /// backend in use.
    pub fn new(config: ServiceConfig, registry: Registry) -> Result<Self, ServiceError> {
        config.check().map_err(|e| ServiceError::InvalidArgument(format!("the configuration: {e}")))?;
        let engine_config =
            config.engine().map_err(|e| ServiceError::InvalidArgument(format!("the configuration: {e}")))?;
        let engine = cuzk::Engine::new(engine_config)
            .map_err(|e| ServiceError::from_engine("opening the engine", &e))?;
        if let Some(note) = engine.backend_note() {
            tracing::warn!(backend = engine.backend_name(), "{note}");
        }
        let store = cuzk::keystore::KeyStore::open(&config.key_dir).map_err(|e| {
            ServiceError::from_engine(&format!("key directory {}", config.key_dir.display()), &e.into())
        })?;
        // Saves cut short by a kill leave their temporary files: they are nobody's now.
        match store.remove_stale_temps() {
            Ok(removed) => {
                for path in removed {
                    tracing::warn!(path = %path.display(), "removed a temporary file of an interrupted save");
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not look for stale temporary files"),
        }
        let budget = cuzk::sched::Budget::new(config.scheduler().host_budget_bytes);
        Ok(Self {
            engine,
            config,
            registry,
            store,
            budget,
            keys: Mutex::new(BTreeMap::new()),
            loading: Mutex::new(std::collections::BTreeSet::new()),
            generating: Mutex::new(BTreeMap::new()),
            jobs: Mutex::new(BTreeMap::new()),
            next_job: AtomicU64::new(1),
            accepting: AtomicBool::new(true),
            aborted: AtomicBool::new(false),
            started: Instant::now(),
            metrics: Metrics::default(),
            listeners: Mutex::new(Vec::new()),
        })
    }

    /// The settings.
    pub fn config(&self) -> &ServiceConfig {
        &self.config
    }

    /// The engine's backend name.
    pub fn backend(&self) -> &'static str {
        self.engine.backend_name()
    }

    /// Why the backend in use is not the one configured, if it is not.
    pub fn backend_note(&self) -> Option<&str> {
        self.engine.backend_note()
    }

    /// On a GPU, the units its kernels multiply on; `None` on the CPU.
    pub fn mul_units(&self) -> Option<cuzk::MulUnits> {
        self.engine.mul_units()
    }

    /// The CUDA devices proved on (empty on the CPU).
    pub fn devices(&self) -> Vec<usize> {
        self.engine.cuda_devices()
    }

    /// The circuit kinds requests may name.
    pub fn circuit_kinds(&self) -> Vec<String> {
        self.registry.names()
    }

    /// Time since start.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// The host memory budget shared by every key: capacity, in use, peak (bytes).
    pub fn budget(&self) -> (u64, u64, u64) {
        (self.budget.capacity(), self.budget.used(), self.budget.peak())
    }

    /// The connection limits of a listener called `name` that takes at most `max` connections, with
    /// the configured timeouts; its connections show in the metrics.
    pub fn connection_limits(&self, name: &'static str, max: usize) -> Arc<Limits> {
        let c = &self.config;
        let label = ListenerLabel { listener: name.into() };
        let limits = Limits::new(
            name,
            max,
            Duration::from_secs(c.handshake_timeout_secs),
            Duration::from_secs(c.idle_timeout_secs),
            self.metrics.connections_closed_quiet.get_or_create(&label).clone(),
        );
        lock(&self.listeners).push(Arc::clone(&limits));
        limits
    }

    /// Counts a request refused before it reached the daemon (a bad priority, say).
    pub fn count_rejected(&self) {
        self.metrics.rejected.inc();
    }

    fn ttl(&self) -> Option<Duration> {
        (self.config.result_ttl_secs > 0).then(|| Duration::from_secs(self.config.result_ttl_secs))
    }

    /// Forgets outcomes nobody collected within their time to live.
    fn expire(&self, jobs: &mut BTreeMap<String, Job>) {
        let (ttl, now) = (self.ttl(), Instant::now());
        let gone: Vec<String> =
            jobs.iter().filter(|(_, j)| j.expired(ttl, now)).map(|(id, _)| id.clone()).collect();
        if gone.is_empty() {
            return;
        }
        self.metrics.expired.inc_by(gone.len() as u64);
        let dropped: Vec<Job> = gone.iter().filter_map(|id| jobs.remove(id)).collect();
        release(dropped);
    }

    /// Takes a key out of service: no new proofs; the ones already submitted finish.
    pub fn evict_key(&self, key_id: &str) -> bool {
        let removed = lock(&self.keys).remove(key_id);
        let evicted = removed.is_some();
        release(removed);
        evicted
    }

    /// Queues a proof and returns its job id. Call it from within a tokio runtime: a task of that
    /// runtime collects the outcome.
    pub fn submit(
        self: &Arc<Self>,
        key_id: &str,
        partitions: &[Vec<u8>],
        priority: Priority,
        deadline: Option<Duration>,
    ) -> Result<String, ServiceError> {
        let reject = |e: ServiceError| {
            self.metrics.rejected.inc();
            e
        };
        if !self.accepting.load(Ordering::SeqCst) {
            return Err(reject(ServiceError::Unavailable("the daemon is shutting down".into())));
        }
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| ServiceError::Failed("Daemon::submit was called outside a tokio runtime".into()))?;
        let key = lock(&self.keys)
            .get(key_id)
            .cloned()
            .ok_or_else(|| reject(ServiceError::NotFound(format!("no resident key {}", shown(key_id)))))?;
        if partitions.is_empty() || partitions.len() > self.config.max_partitions {
            return Err(reject(ServiceError::InvalidArgument(format!(
                "{} partitions: a proof has 1 to {}",
                partitions.len(),
                self.config.max_partitions
            ))));
        }
        let mut rng = rand::rngs::StdRng::from_entropy();
        // The sequence number orders jobs in the scheduler; the random part keeps ids unguessable.
        let n = self.next_job.fetch_add(1, Ordering::Relaxed);
        let id = format!("job-{n}-{:016x}", rng.next_u64());
        let sched_id = JobId(n);
        let circuits = key
            .spec
            .circuits(partitions)
            .map_err(|e| reject(ServiceError::InvalidArgument(e.to_string())))?;
        if circuits.is_empty() || circuits.len() > self.config.max_partitions {
            return Err(reject(ServiceError::InvalidArgument(format!(
                "the request has {} partitions: a proof has 1 to {}",
                circuits.len(),
                self.config.max_partitions
            ))));
        }
        let circuits: Vec<_> = circuits
            .into_iter()
            .map(|c| {
                use ark_ff::UniformRand;
                (c, Fr::rand(&mut rng), Fr::rand(&mut rng))
            })
            .collect();
        let partition_count = circuits.len();
        let mut jobs = lock(&self.jobs);
        self.expire(&mut jobs);
        // Checked again under the lock, so no job slips in after a shutdown's cancel_all.
        if !self.accepting.load(Ordering::SeqCst) {
            return Err(reject(ServiceError::Unavailable("the daemon is shutting down".into())));
        }
        if jobs.len() >= self.config.max_jobs {
            return Err(reject(ServiceError::ResourceExhausted(format!(
                "{} proofs are live or waiting to be collected (max_jobs)",
                jobs.len()
            ))));
        }
        let submitted = Instant::now();
        let handle = key
            .pipeline
            .submit(sched_id, priority, deadline.map(|d| submitted + d), circuits)
            .map_err(|e| reject(ServiceError::from_engine("", &e)))?;
        let (tx, rx) = watch::channel(None);
        let span = tracing::info_span!("job", job_id = %id, key = %key.id);
        span.in_scope(|| {
            tracing::info!(partitions = partitions.len(), ?priority, sched_job = n, "proof submitted")
        });
        let checked = Arc::clone(&key);
        jobs.insert(id.clone(), Job { key, sched_id, priority, partitions: partition_count, outcome: rx });
        drop(jobs);
        self.metrics.submitted.inc();
        let daemon = Arc::clone(self);
        let inputs = partitions.to_vec();
        runtime.spawn(
            async move {
                let outcome = daemon.collect(handle.await, submitted, &checked, &inputs);
                let _ = tx.send(Some((outcome, Instant::now())));
            }
            .instrument(span),
        );
        Ok(id)
    }

    /// Turns a job's result into its outcome, counts and logs it.
    fn collect(
        &self,
        result: Result<Vec<ark_groth16::Proof<Bls12_381>>, cuzk::Error>,
        since: Instant,
        key: &Resident,
        inputs: &[Vec<u8>],
    ) -> Outcome {
        let m = &self.metrics;
        let outcome = match result {
            Ok(proofs) => proofs
                .iter()
                .map(|p| {
                    let mut b = Vec::new();
                    p.serialize_compressed(&mut b).map(|()| b)
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| ServiceError::Failed(format!("serializing a proof: {e}")))
                .and_then(|proofs| {
                    // The kind's own verifier (Filecoin's) has the last word.
                    key.spec
                        .check(inputs, &proofs)
                        .map_err(|e| ServiceError::Failed(format!("the proof was refused: {e}")))?;
                    Ok(Finished { proofs, seconds: since.elapsed().as_secs_f64() })
                }),
            Err(cuzk::Error::Pipeline(cuzk::sched::JobError::Cancelled)) => {
                Err(ServiceError::Cancelled("the proof was cancelled".into()))
            }
            Err(cuzk::Error::Pipeline(cuzk::sched::JobError::ShutDown)) => {
                Err(ServiceError::Unavailable("the daemon stopped the proof".into()))
            }
            Err(e) => Err(ServiceError::from_engine("", &e)),
        };
        match &outcome {
            Ok(f) => {
                m.succeeded.inc();
                m.partitions.inc_by(f.proofs.len() as u64);
                m.proof_seconds.observe(f.seconds);
                tracing::info!(seconds = f.seconds, partitions = f.proofs.len(), "proof done");
            }
            Err(ServiceError::Cancelled(_)) => {
                m.cancelled.inc();
                tracing::info!("proof cancelled");
            }
            Err(e) => {
                m.failed.inc();
                tracing::warn!(code = ?e.code(), error = %e, "proof failed");
            }
        }
        outcome
    }

    /// Waits for job `id` (at most `timeout`), then hands its outcome over once and forgets it. On a
    /// timeout the job goes on and can be waited for again.
    pub async fn await_proof(&self, id: &str, timeout: Option<Duration>) -> Result<Finished, ServiceError> {
        check_id("job id", id)?;
        let mut rx = lock(&self.jobs).get(id).map(|j| j.outcome.clone()).ok_or_else(|| {
            ServiceError::NotFound(format!("no job {id:?} (unknown, or already collected)"))
        })?;
        let ready = async {
            // The sender lives until it has sent: an error means the daemon dropped the job.
            let _ = rx.wait_for(Option::is_some).await;
        };
        match timeout {
            Some(t) => tokio::time::timeout(t, ready).await.map_err(|_| {
                ServiceError::WaitTimedOut(format!("job {id} is not done after {} ms", t.as_millis()))
            })?,
            None => ready.await,
        }
        // Delivered once: whoever removes the job gets its outcome.
        let job = lock(&self.jobs).remove(id).ok_or_else(|| {
            ServiceError::NotFound(format!("job {id:?} was collected by another call, or expired"))
        })?;
        let outcome = job.outcome.borrow().as_ref().map(|(o, _)| o.clone());
        release(job);
        outcome.unwrap_or_else(|| Err(ServiceError::Unavailable("the daemon dropped the job".into())))
    }

    /// Cancels job `id`: queued partitions are dropped, running ones are discarded. False when it is
    /// unknown or already finished.
    pub fn cancel(&self, id: &str) -> bool {
        let jobs = lock(&self.jobs);
        match jobs.get(id) {
            Some(job) => job.key.pipeline.cancel(job.sched_id),
            None => false,
        }
    }

    /// Cancels job `id` and forgets it (its caller is gone).
    pub fn abandon(&self, id: &str) {
        self.cancel(id);
        let removed = lock(&self.jobs).remove(id);
        release(removed);
    }

    /// Every job and resident key.
    pub fn status(&self) -> (Vec<KeyView>, Vec<JobView>) {
        let keys = lock(&self.keys)
            .values()
            .map(|k| KeyView {
                id: k.id.clone(),
                kind: k.kind.clone(),
                shape_id: k.shape_id.clone(),
                constraints: k.constraints,
                domain_size: k.domain_size,
                devices: k.devices,
                live_jobs: k.pipeline.live_jobs(),
                host_bytes: k.pipeline.key_host_bytes(),
                degradations: k.pipeline.degradations().to_vec(),
                msm_tables: k.msm_tables.clone(),
            })
            .collect();
        let mut jobs = lock(&self.jobs);
        self.expire(&mut jobs);
        let jobs = jobs
            .iter()
            .map(|(id, j)| {
                let outcome = j.ended();
                JobView {
                    id: id.clone(),
                    key_id: j.key.id.clone(),
                    priority: j.priority,
                    partitions: j.partitions,
                    status: if outcome.is_some() { None } else { j.key.pipeline.status(j.sched_id) },
                    outcome,
                }
            })
            .collect();
        (keys, jobs)
    }

    /// The metrics in the OpenMetrics text format (which Prometheus reads).
    pub fn metrics(&self) -> String {
        let m = &self.metrics;
        let (keys, jobs) = self.status();
        let live = jobs.iter().filter(|j| j.status.is_some()).count();
        m.uptime.set(self.uptime().as_secs_f64());
        m.jobs_live.set(live as i64);
        m.jobs_uncollected.set((jobs.len() - live) as i64);
        m.keys_resident.set(keys.len() as i64);
        let (capacity, used, peak) = self.budget();
        m.budget.set(gauge_value(capacity));
        m.budget_used.set(gauge_value(used));
        m.budget_peak.set(gauge_value(peak));
        // Only the keys resident now.
        m.key_host_bytes.clear();
        m.backend_fallback.set(i64::from(self.engine.backend_note().is_some()));
        for l in lock(&self.listeners).iter() {
            let label = ListenerLabel { listener: l.name().into() };
            m.connections_open.get_or_create(&label).set(l.open() as i64);
            m.connections_max.get_or_create(&label).set(l.max() as i64);
        }
        m.key_degradations.clear();
        for k in &keys {
            m.key_host_bytes.get_or_create(&KeyLabel { key: k.id.clone() }).set(gauge_value(k.host_bytes));
            for d in &k.degradations {
                let label =
                    DegradationLabel { key: k.id.clone(), kind: d.kind().into(), device: d.device() as u64 };
                m.key_degradations.get_or_create(&label).inc();
            }
        }
        m.encode()
    }

    /// Stops accepting, cancels every live job and ends a drain in progress at once (what a second
    /// SIGINT or SIGTERM does): the server then stops as soon as the calls in flight have ended.
    pub fn abort(&self) {
        self.stop_accepting();
        self.aborted.store(true, Ordering::SeqCst);
        let cancelled = self.cancel_all();
        tracing::warn!(cancelled, "aborting: live proofs cancelled");
    }

    /// Whether [`Daemon::abort`] was called.
    pub fn aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    /// Stops accepting proofs and keys.
    pub fn stop_accepting(&self) {
        if self.accepting.swap(false, Ordering::SeqCst) {
            tracing::info!(live = self.live_jobs(), "no longer accepting proofs");
        }
    }

    /// Cancels every live job.
    pub fn cancel_all(&self) -> usize {
        let jobs = lock(&self.jobs);
        jobs.values().filter(|j| j.key.pipeline.cancel(j.sched_id)).count()
    }

    /// Jobs queued, running, or finished and not yet collected (nor expired).
    pub fn jobs(&self) -> usize {
        let mut jobs = lock(&self.jobs);
        self.expire(&mut jobs);
        jobs.len()
    }

    /// Jobs queued or running.
    pub fn live_jobs(&self) -> usize {
        lock(&self.jobs).values().filter(|j| j.outcome.borrow().is_none()).count()
    }
}
