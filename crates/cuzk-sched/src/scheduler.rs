//! Jobs, queues and the worker threads.
//!
//! Threads, not async: `partition_workers` synthesis threads, `priority_workers` synthesis threads that
//! take only high and urgent partitions, and `gpu_workers_per_device` threads per device share one
//! mutex-guarded pair of priority queues (synthesis, GPU), ordered by (priority, job sequence,
//! partition index). A synthesis worker reserves the partition's host bytes from the [`Budget`]
//! (waiting, never exceeding it; waiters are served by priority, then age), synthesizes, and queues the
//! result with its reservation.
//!
//! A GPU worker takes its device's memory lock (the slot table) to claim a slot and upload, releases
//! the reservation as soon as the upload is done, then takes the kernel lock only for the kernels: a
//! stage that queues its work calls [`KernelLog::kernels_queued`] once every kernel is queued, which
//! releases the lock, so its host epilogue overlaps the next partition's kernels. `merge_locks`
//! collapses both into one lock held to the end of the step, for comparison.
//!
//! Every step is a [`crate::Span`] on one clock. Kernel spans are placed where the stage says its
//! kernels ran (for a GPU, the device's event clock calibrated against the host's), on the device's
//! kernel lane, and the device's copies on its copy lane: time the device spent idle between
//! partitions is a gap on the lane, whatever the locks did. A [`JobHandle`] can be waited on from a
//! thread or `.await`ed in any runtime.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::oneshot::{self, Receiver, Recv, Sender};
use crate::{
    Budget, BudgetError, Config, KernelLog, Lane, PartitionRef, Placement, Priority, Reservation, SpanKind,
    StageError, Stages, Timeline,
};

/// A job's identity, chosen by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u64);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "job {}", self.0)
    }
}

/// Why a job was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// A live job already has this id.
    #[error("{0} is already queued or running")]
    DuplicateId(JobId),
    /// The job has no partitions.
    #[error("{0} has no partitions")]
    Empty(JobId),
    /// The scheduler is shutting down.
    #[error("the scheduler is shutting down")]
    ShutDown,
}

/// Why a job produced no outputs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// A partition failed in one of its stages.
    #[error("partition {index} failed in {source}")]
    Partition {
        /// The partition.
        index: usize,
        /// The stage's error.
        source: StageError,
    },
    /// A partition needs more host memory than the whole budget.
    #[error("partition {index}: {source}")]
    Budget {
        /// The partition.
        index: usize,
        /// The budget's refusal.
        source: BudgetError,
    },
    /// The job was cancelled.
    #[error("the job was cancelled")]
    Cancelled,
    /// The job's deadline passed before partition `index` started.
    #[error("the deadline passed before partition {index} started")]
    DeadlineExceeded {
        /// The partition that could not start in time.
        index: usize,
    },
    /// The scheduler shut down before the job finished.
    #[error("the scheduler shut down before the job finished")]
    ShutDown,
    /// `wait_timeout` gave up; the job goes on.
    #[error("timed out waiting for the job")]
    Timeout,
}

/// Where each partition of a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobStatus {
    /// Partitions in the job.
    pub partitions: usize,
    /// Waiting for a synthesis worker.
    pub queued: usize,
    /// Being synthesized (or waiting for budget).
    pub synthesizing: usize,
    /// Synthesized, waiting for a GPU worker.
    pub waiting_gpu: usize,
    /// On a GPU worker (upload, kernels or finish).
    pub on_gpu: usize,
    /// Finished.
    pub done: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PartState {
    Queued,
    Synthesizing,
    WaitingGpu,
    OnGpu,
    Done,
}

/// A queued partition, ordered by (priority, job sequence, partition index).
struct Work<T> {
    priority: Priority,
    seq: u64,
    job: JobId,
    index: usize,
    payload: T,
    since: Instant,
}

impl<T> Work<T> {
    fn key(&self) -> (Priority, Reverse<u64>, Reverse<usize>) {
        (self.priority, Reverse(self.seq), Reverse(self.index))
    }
}

impl<T> PartialEq for Work<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<T> Eq for Work<T> {}
impl<T> PartialOrd for Work<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Work<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

type Outcome<O> = Result<Vec<O>, JobError>;

struct JobEntry<O> {
    seq: u64,
    priority: Priority,
    deadline: Option<Instant>,
    outputs: Vec<Option<O>>,
    states: Vec<PartState>,
    remaining: usize,
    tx: Sender<Outcome<O>>,
}

struct Queues<S: Stages> {
    synth: BinaryHeap<Work<S::Input>>,
    gpu: BinaryHeap<Work<(S::Synthesized, Reservation)>>,
    jobs: HashMap<JobId, JobEntry<S::Output>>,
    next_seq: u64,
    shutdown: bool,
}

struct Device {
    /// The memory lock: guards the slot table; held while claiming a slot and uploading.
    slots: Mutex<Vec<bool>>,
    slot_freed: Condvar,
    /// The kernel lock: held while a partition's kernels are queued (and run, unless the stage
    /// releases it once they are queued).
    kernel: Mutex<()>,
}

struct Inner<S: Stages> {
    stages: S,
    config: Config,
    budget: Budget,
    timeline: Arc<Timeline>,
    queues: Mutex<Queues<S>>,
    synth_ready: Condvar,
    gpu_ready: Condvar,
    devices: Vec<Device>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs a stage, turning a panic in it (a circuit's, say) into that partition's error, so the worker
/// goes on, the job gets its outcome and nothing waits for it forever.
fn guarded<T>(stage: &'static str, f: impl FnOnce() -> Result<T, StageError>) -> Result<T, StageError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        Err(StageError::new(stage, crate::Panicked { message }))
    })
}

impl<S: Stages> Inner<S> {
    /// See [`Scheduler::cancel`].
    fn cancel(&self, id: JobId) -> bool {
        let job = self.queues().jobs.remove(&id);
        match job {
            Some(job) => {
                job.tx.send(Err(JobError::Cancelled));
                true
            }
            None => false,
        }
    }

    /// See [`Scheduler::status`].
    fn status(&self, id: JobId) -> Option<JobStatus> {
        let q = self.queues();
        let job = q.jobs.get(&id)?;
        let mut s = JobStatus { partitions: job.states.len(), ..JobStatus::default() };
        for state in &job.states {
            match state {
                PartState::Queued => s.queued += 1,
                PartState::Synthesizing => s.synthesizing += 1,
                PartState::WaitingGpu => s.waiting_gpu += 1,
                PartState::OnGpu => s.on_gpu += 1,
                PartState::Done => s.done += 1,
            }
        }
        Some(s)
    }

    fn queues(&self) -> MutexGuard<'_, Queues<S>> {
        lock(&self.queues)
    }

    fn set_state(&self, part: PartitionRef, state: PartState) {
        if let Some(job) = self.queues().jobs.get_mut(&part.job) {
            if let Some(s) = job.states.get_mut(part.index) {
                *s = state;
            }
        }
    }

    /// Hands a partition's result to its job; the job's outcome is sent once, then the job is forgotten.
    fn deliver(&self, part: PartitionRef, result: Result<S::Output, JobError>) {
        match &result {
            Ok(_) => tracing::debug!(job = part.job.0, partition = part.index, "partition done"),
            Err(e) => {
                tracing::warn!(job = part.job.0, partition = part.index, error = %e, "partition failed")
            }
        }
        let mut q = self.queues();
        let Some(job) = q.jobs.get_mut(&part.job) else { return };
        match result {
            Ok(out) => {
                if let (Some(slot), Some(state)) =
                    (job.outputs.get_mut(part.index), job.states.get_mut(part.index))
                {
                    if slot.is_none() {
                        *slot = Some(out);
                        *state = PartState::Done;
                        job.remaining -= 1;
                    }
                }
                if job.remaining == 0 {
                    if let Some(job) = q.jobs.remove(&part.job) {
                        job.tx.send(Ok(job.outputs.into_iter().flatten().collect()));
                    }
                }
            }
            Err(e) => {
                if let Some(job) = q.jobs.remove(&part.job) {
                    job.tx.send(Err(e));
                }
            }
        }
    }

    /// Pops the next live work item of at least priority `min` from `heap`, failing jobs whose
    /// deadline has passed.
    fn pop_live<T>(
        jobs: &mut HashMap<JobId, JobEntry<S::Output>>,
        heap: &mut BinaryHeap<Work<T>>,
        min: Priority,
    ) -> Option<Work<T>> {
        let now = Instant::now();
        // The heap's top is its highest priority: below `min`, nothing here is for this worker.
        while heap.peek().is_some_and(|w| w.priority >= min) {
            let w = heap.pop()?;
            let Some(job) = jobs.get(&w.job) else { continue };
            if job.deadline.is_some_and(|d| now > d) {
                if let Some(job) = jobs.remove(&w.job) {
                    job.tx.send(Err(JobError::DeadlineExceeded { index: w.index }));
                }
                continue;
            }
            return Some(w);
        }
        None
    }

    /// Waits on `ready` for the next live item of at least priority `min` of the queue `pick` selects;
    /// `None` on shutdown.
    fn next_work<T>(
        &self,
        ready: &Condvar,
        min: Priority,
        pick: impl Fn(&mut Queues<S>) -> (&mut HashMap<JobId, JobEntry<S::Output>>, &mut BinaryHeap<Work<T>>),
    ) -> Option<Work<T>> {
        let mut q = self.queues();
        loop {
            if q.shutdown {
                return None;
            }
            let (jobs, heap) = pick(&mut q);
            if let Some(w) = Self::pop_live(jobs, heap, min) {
                return Some(w);
            }
            q = ready.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A synthesis worker; one with `min` above `Low` takes only partitions of that priority or higher.
    fn synth_worker(self: &Arc<Self>, lane: Lane, min: Priority) {
        loop {
            let Some(work) = self.next_work(&self.synth_ready, min, |q| (&mut q.jobs, &mut q.synth)) else {
                return;
            };
            let part = PartitionRef { job: work.job, index: work.index };
            let _span =
                tracing::debug_span!("partition", job = work.job.0, partition = work.index, %lane).entered();
            self.timeline.span(work.job.0, work.index, SpanKind::Queued, Lane::Queue, work.since);
            self.set_state(part, PartState::Synthesizing);
            let t = Instant::now();
            let reservation =
                match self.budget.reserve_as(self.stages.host_bytes(&work.payload), work.priority) {
                    Ok(r) => r,
                    Err(source) => {
                        self.deliver(part, Err(JobError::Budget { index: work.index, source }));
                        continue;
                    }
                };
            self.timeline.span(work.job.0, work.index, SpanKind::BudgetWait, lane, t);
            let t = Instant::now();
            let result = guarded("synthesis", || self.stages.synthesize(part, work.payload));
            self.timeline.span(work.job.0, work.index, SpanKind::Synthesis, lane, t);
            match result {
                Ok(data) => {
                    // What the partition holds now may be less than synthesis's peak.
                    let mut reservation = reservation;
                    let held = self.stages.held_bytes(&data);
                    reservation.release(reservation.bytes().saturating_sub(held));
                    let mut q = self.queues();
                    if let Some(job) = q.jobs.get_mut(&part.job) {
                        if let Some(s) = job.states.get_mut(part.index) {
                            *s = PartState::WaitingGpu;
                        }
                        let item = Work {
                            priority: work.priority,
                            seq: work.seq,
                            job: work.job,
                            index: work.index,
                            payload: (data, reservation),
                            since: Instant::now(),
                        };
                        q.gpu.push(item);
                        drop(q);
                        self.gpu_ready.notify_one();
                    }
                }
                Err(source) => self.deliver(part, Err(JobError::Partition { index: work.index, source })),
            }
        }
    }

    /// Puts a partition's kernel spans on its device's kernel lane and its copies on the copy lane,
    /// where the stage said they ran.
    fn place(&self, device: usize, part: PartitionRef, log: &KernelLog<'_>) {
        let span = |kind, lane, start, end| crate::Span {
            job: part.job.0,
            partition: part.index,
            kind,
            lane,
            start_us: self.timeline.at(start),
            end_us: self.timeline.at(end),
        };
        for &(stage, start, end) in &log.kernels {
            self.timeline.push(span(SpanKind::Kernel(stage), Lane::Kernels { device }, start, end));
        }
        for &(start, end) in &log.copies {
            self.timeline.push(span(SpanKind::Copy, Lane::Copies { device }, start, end));
        }
    }

    fn gpu_worker(self: &Arc<Self>, device: usize, id: usize) {
        let lane = Lane::GpuWorker { device, worker: id };
        let Some(dev) = self.devices.get(device) else { return };
        loop {
            let Some(work) = self.next_work(&self.gpu_ready, Priority::Low, |q| (&mut q.jobs, &mut q.gpu))
            else {
                return;
            };
            let (job, index) = (work.job, work.index);
            let part = PartitionRef { job, index };
            let _span = tracing::debug_span!("partition", job = job.0, partition = index, %lane).entered();
            self.timeline.span(job.0, index, SpanKind::GpuQueue, Lane::Queue, work.since);
            self.set_state(part, PartState::OnGpu);
            let (data, mut reservation) = work.payload;

            // Memory lock: claim a slot and upload. With merged locks the kernel lock is taken first
            // and held through the kernels, so nothing overlaps.
            let t = Instant::now();
            let merged = self.config.merge_locks.then(|| lock(&dev.kernel));
            let mut slots = lock(&dev.slots);
            let slot = loop {
                if let Some(s) = slots.iter().position(|free| *free) {
                    break s;
                }
                slots = dev.slot_freed.wait(slots).unwrap_or_else(|p| p.into_inner());
            };
            if let Some(s) = slots.get_mut(slot) {
                *s = false;
            }
            self.timeline.span(job.0, index, SpanKind::MemoryLockWait, lane, t);
            let at = Placement { device, slot };
            let held = Instant::now();
            let t = Instant::now();
            let staged = guarded("upload", || self.stages.upload(part, at, data));
            self.timeline.span(job.0, index, SpanKind::Upload, lane, t);
            // The partition's host data is on the device (or failed): give its budget back now.
            reservation.release(u64::MAX);
            drop(slots);
            self.timeline.span(job.0, index, SpanKind::MemoryLock, lane, held);

            let computed = staged.and_then(|staged| {
                let t = Instant::now();
                let kernel_guard = if merged.is_some() { None } else { Some(lock(&dev.kernel)) };
                self.timeline.span(job.0, index, SpanKind::KernelLockWait, lane, t);
                let held = Instant::now();
                // The stage may release the kernel lock once its kernels are queued (not with merged
                // locks, where one lock covers the upload too); otherwise it is released on return.
                let mut log = match kernel_guard {
                    Some(guard) => KernelLog::holding(move || drop(guard)),
                    None => KernelLog::default(),
                };
                let result = guarded("kernels", || self.stages.kernels(part, at, staged, &mut log));
                let released = log.released_at().unwrap_or_else(Instant::now);
                self.place(device, part, &log);
                drop(log);
                self.timeline.push(crate::Span {
                    job: job.0,
                    partition: index,
                    kind: SpanKind::KernelLock,
                    lane,
                    start_us: self.timeline.at(held),
                    end_us: self.timeline.at(released),
                });
                result
            });
            drop(merged);
            {
                let mut slots = lock(&dev.slots);
                if let Some(s) = slots.get_mut(slot) {
                    *s = true;
                }
            }
            dev.slot_freed.notify_one();

            let t = Instant::now();
            let output = computed.and_then(|c| guarded("finish", || self.stages.finish(part, c)));
            self.timeline.span(job.0, index, SpanKind::Finish, lane, t);
            self.deliver(part, output.map_err(|source| JobError::Partition { index, source }));
        }
    }
}

/// The scheduler: worker threads over a set of [`Stages`].
pub struct Scheduler<S: Stages> {
    inner: Arc<Inner<S>>,
    threads: Vec<JoinHandle<()>>,
}

/// A submitted job: wait for its outputs, cancel it, or ask where it is.
pub struct JobHandle<S: Stages> {
    id: JobId,
    rx: Receiver<Outcome<S::Output>>,
    inner: Arc<Inner<S>>,
}

impl<S: Stages> std::fmt::Debug for JobHandle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHandle").field("id", &self.id).finish()
    }
}

impl<S: Stages> JobHandle<S> {
    /// The job's id.
    pub fn id(&self) -> JobId {
        self.id
    }

    /// Waits for the job's outputs, in partition order. (In async code, `.await` the handle instead.)
    pub fn wait(self) -> Result<Vec<S::Output>, JobError> {
        match self.rx.recv(None) {
            Recv::Value(outcome) => outcome,
            Recv::Closed | Recv::TimedOut => Err(JobError::ShutDown),
        }
    }

    /// Waits at most `timeout`; on [`JobError::Timeout`] the job goes on and can be waited for again.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<Vec<S::Output>, JobError> {
        match self.rx.recv(Some(timeout)) {
            Recv::Value(outcome) => outcome,
            Recv::TimedOut => Err(JobError::Timeout),
            Recv::Closed => Err(JobError::ShutDown),
        }
    }

    /// Cancels the job: queued partitions are dropped, running ones finish and are discarded, and
    /// their budget is returned. Returns whether the job was still live.
    pub fn cancel(&self) -> bool {
        self.inner.cancel(self.id)
    }

    /// Where the job's partitions are, or `None` once it has finished, failed or been cancelled.
    pub fn status(&self) -> Option<JobStatus> {
        self.inner.status(self.id)
    }
}

/// Awaiting a handle yields the job's outcome, in any async runtime (tokio included).
impl<S: Stages> std::future::Future for JobHandle<S> {
    type Output = Result<Vec<S::Output>, JobError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.rx.poll(cx).map(|v| v.unwrap_or(Err(JobError::ShutDown)))
    }
}

impl<S: Stages> Scheduler<S> {
    /// Starts the workers, with a budget of `config.host_budget_bytes`.
    pub fn new(stages: S, config: Config) -> Self {
        let budget = Budget::new(config.host_budget_bytes);
        Self::with_budget(stages, config, budget)
    }

    /// Starts the workers, reserving partitions' host memory from `budget` (which other schedulers, or
    /// the caller, may share); `config.host_budget_bytes` is not used.
    pub fn with_budget(stages: S, config: Config, budget: Budget) -> Self {
        let devices = (0..config.devices.max(1))
            .map(|_| Device {
                slots: Mutex::new(vec![true; config.slots_per_device.max(1)]),
                slot_freed: Condvar::new(),
                kernel: Mutex::new(()),
            })
            .collect();
        let inner = Arc::new(Inner {
            stages,
            budget,
            timeline: Arc::new(config.timeline_spans.map_or_else(Timeline::new, Timeline::bounded)),
            queues: Mutex::new(Queues {
                synth: BinaryHeap::new(),
                gpu: BinaryHeap::new(),
                jobs: HashMap::new(),
                next_seq: 0,
                shutdown: false,
            }),
            synth_ready: Condvar::new(),
            gpu_ready: Condvar::new(),
            devices,
            config,
        });
        let mut threads = Vec::new();
        for i in 0..inner.config.partition_workers.max(1) {
            let inner = inner.clone();
            threads.push(std::thread::spawn(move || inner.synth_worker(Lane::Synth(i), Priority::Low)));
        }
        for i in 0..inner.config.priority_workers {
            let inner = inner.clone();
            threads
                .push(std::thread::spawn(move || inner.synth_worker(Lane::PrioritySynth(i), Priority::High)));
        }
        for d in 0..inner.config.devices.max(1) {
            for w in 0..inner.config.gpu_workers_per_device.max(1) {
                let inner = inner.clone();
                threads.push(std::thread::spawn(move || inner.gpu_worker(d, w)));
            }
        }
        Self { inner, threads }
    }

    /// Submits a job of `inputs.len()` partitions.
    pub fn submit(
        &self,
        id: JobId,
        priority: Priority,
        deadline: Option<Instant>,
        inputs: Vec<S::Input>,
    ) -> Result<JobHandle<S>, SubmitError> {
        if inputs.is_empty() {
            return Err(SubmitError::Empty(id));
        }
        let (tx, rx) = oneshot::channel();
        let mut q = self.inner.queues();
        if q.shutdown {
            return Err(SubmitError::ShutDown);
        }
        if q.jobs.contains_key(&id) {
            return Err(SubmitError::DuplicateId(id));
        }
        let seq = q.next_seq;
        q.next_seq += 1;
        let n = inputs.len();
        q.jobs.insert(
            id,
            JobEntry {
                seq,
                priority,
                deadline,
                outputs: (0..n).map(|_| None).collect(),
                states: vec![PartState::Queued; n],
                remaining: n,
                tx,
            },
        );
        let now = Instant::now();
        for (index, payload) in inputs.into_iter().enumerate() {
            q.synth.push(Work { priority, seq, job: id, index, payload, since: now });
        }
        drop(q);
        self.inner.synth_ready.notify_all();
        Ok(JobHandle { id, rx, inner: self.inner.clone() })
    }

    /// The host memory budget.
    pub fn budget(&self) -> &Budget {
        &self.inner.budget
    }

    /// The timeline.
    pub fn timeline(&self) -> &Arc<Timeline> {
        &self.inner.timeline
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Cancels job `id` as [`JobHandle::cancel`] does; false when it is not live.
    pub fn cancel(&self, id: JobId) -> bool {
        self.inner.cancel(id)
    }

    /// Where job `id`'s partitions are, or `None` when it is not live.
    pub fn status(&self, id: JobId) -> Option<JobStatus> {
        self.inner.status(id)
    }

    /// Jobs queued or running.
    pub fn live_jobs(&self) -> usize {
        self.inner.queues().jobs.len()
    }

    /// The sequence number and priority of a live job (for diagnostics).
    pub fn job_order(&self, id: JobId) -> Option<(Priority, u64)> {
        self.inner.queues().jobs.get(&id).map(|j| (j.priority, j.seq))
    }
}

impl<S: Stages> Drop for Scheduler<S> {
    fn drop(&mut self) {
        {
            let mut q = self.inner.queues();
            q.shutdown = true;
            for (_, job) in q.jobs.drain() {
                job.tx.send(Err(JobError::ShutDown));
            }
            q.synth.clear();
            q.gpu.clear();
        }
        self.inner.synth_ready.notify_all();
        self.inner.gpu_ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
