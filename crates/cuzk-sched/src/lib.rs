#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod budget;
mod config;
mod oneshot;
mod priority;
pub mod report;
mod scheduler;
pub mod svg;
pub mod timeline;

use std::sync::Arc;

pub use budget::{Budget, BudgetError, Reservation, ResidentReservation};
pub use config::Config;
pub use cuzk_groth16::Stage;
pub use priority::Priority;
pub use scheduler::{JobError, JobHandle, JobId, JobStatus, Scheduler, SubmitError};
pub use timeline::{Lane, Span, SpanKind, Timeline};

/// A failure inside one step of one partition, with the error that caused it (kept with its type, so
/// a caller can tell a device failure from bad input without reading the message).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{stage}: {source}")]
pub struct StageError {
    /// The step ("synthesis", "upload", "kernels", "finish").
    pub stage: &'static str,
    /// What went wrong.
    pub source: Arc<dyn std::error::Error + Send + Sync>,
}

impl StageError {
    /// A failure of `stage` caused by `source` (an error, or a message).
    pub fn new(stage: &'static str, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self { stage, source: Arc::from(source.into()) }
    }

    /// The cause, if it is an `E`.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.source.downcast_ref::<E>()
    }
}

/// Two stage errors are equal when they name the same step and say the same.
impl PartialEq for StageError {
    fn eq(&self, other: &Self) -> bool {
        self.stage == other.stage && self.source.to_string() == other.source.to_string()
    }
}

impl Eq for StageError {}

/// A step that panicked (a circuit's bug, say): the cause of its partition's [`StageError`]. The worker
/// goes on with the next partition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("panicked: {message}")]
pub struct Panicked {
    /// The panic's message.
    pub message: String,
}

/// Where a partition runs on a device: the device ordinal and the arena slot it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The device.
    pub device: usize,
    /// The arena slot on that device.
    pub slot: usize,
}

/// The steps of one partition, implemented by the engine (and, for tests without a GPU, by the
/// simulated stages of the dev-only `cuzk-testkit`).
///
/// `upload` runs under the device's memory lock, `kernels` under its kernel lock (until it says its
/// kernels are queued, or returns), `synthesize` and `finish` under no lock. Each step gets its partition's [`PartitionRef`] for logging.
pub trait Stages: Send + Sync + 'static {
    /// What a partition starts from (a circuit).
    type Input: Send + 'static;
    /// The result of synthesis, held in host memory until uploaded.
    type Synthesized: Send + 'static;
    /// What a device slot holds after the upload.
    type Staged: Send + 'static;
    /// The result of the kernels, before host-side finishing.
    type Computed: Send + 'static;
    /// The partition's final output (a proof).
    type Output: Send + 'static;

    /// Host bytes the partition holds from the start of synthesis until its upload is done (at most:
    /// what synthesis may hold at its peak).
    fn host_bytes(&self, input: &Self::Input) -> u64;
    /// Host bytes a synthesized partition holds while it waits for its upload, when less than what
    /// [`Stages::host_bytes`] reserved: the rest goes back to the budget as soon as synthesis ends.
    /// By default the whole reservation is kept.
    fn held_bytes(&self, data: &Self::Synthesized) -> u64 {
        let _ = data;
        u64::MAX
    }
    /// Synthesizes the partition on a CPU worker.
    fn synthesize(&self, part: PartitionRef, input: Self::Input) -> Result<Self::Synthesized, StageError>;
    /// Uploads into the given slot (the memory lock is held).
    fn upload(
        &self,
        part: PartitionRef,
        at: Placement,
        data: Self::Synthesized,
    ) -> Result<Self::Staged, StageError>;
    /// Runs the kernels (the kernel lock is held). Report when each stage's kernels ran to `kernels`
    /// (and, where the device measures them, when the partition's copies landed).
    /// A device that queues its work can call [`KernelLog::kernels_queued`] once every kernel is queued:
    /// the lock is released then, so the next partition queues its kernels behind these while this
    /// call waits for its results.
    fn kernels(
        &self,
        part: PartitionRef,
        at: Placement,
        staged: Self::Staged,
        kernels: &mut KernelLog<'_>,
    ) -> Result<Self::Computed, StageError>;
    /// Host-side completion (download, assembly, verification), after the slot is released.
    fn finish(&self, part: PartitionRef, computed: Self::Computed) -> Result<Self::Output, StageError>;
}

/// Identifies a partition in logs and stage calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartitionRef {
    /// The job.
    pub job: JobId,
    /// The partition's index within its job.
    pub index: usize,
}

/// When a partition's work ran, reported by [`Stages::kernels`] (on the device's clock for a GPU,
/// calibrated to the host's monotonic clock; on the host's for a backend that computes on the host),
/// and the kernel lock the step runs under.
#[derive(Default)]
pub struct KernelLog<'a> {
    /// `(stage, start, end)` of the stages' kernels, in launch order.
    pub kernels: Vec<(Stage, std::time::Instant, std::time::Instant)>,
    /// `(start, end)` of the partition's copies to the device, on the device's clock, where the backend
    /// measures them (the copy stream's view, which may end after the host's upload step did).
    pub copies: Vec<(std::time::Instant, std::time::Instant)>,
    /// Releases the kernel lock (the scheduler's; none in tests that call stages directly).
    release: Option<Box<dyn FnOnce() + 'a>>,
    /// When [`KernelLog::kernels_queued`] released the lock.
    released_at: Option<std::time::Instant>,
}

impl std::fmt::Debug for KernelLog<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelLog")
            .field("kernels", &self.kernels)
            .field("copies", &self.copies)
            .field("holds_lock", &self.release.is_some())
            .finish()
    }
}

impl<'a> KernelLog<'a> {
    /// A log for a step that holds a lock, which `release` releases.
    pub(crate) fn holding(release: impl FnOnce() + 'a) -> Self {
        Self { kernels: Vec::new(), copies: Vec::new(), release: Some(Box::new(release)), released_at: None }
    }

    /// Records when one stage's kernels ran.
    pub fn record(&mut self, stage: Stage, start: std::time::Instant, end: std::time::Instant) {
        self.kernels.push((stage, start, end));
    }

    /// Records when the partition's copies to the device ran, on the device's clock.
    pub fn record_copy(&mut self, start: std::time::Instant, end: std::time::Instant) {
        self.copies.push((start, end));
    }

    /// Every kernel of the partition is queued on the device: releases the kernel lock now (once;
    /// later calls do nothing), so the next partition can queue its kernels behind these while this
    /// step collects its results on the host.
    pub fn kernels_queued(&mut self) {
        if let Some(release) = self.release.take() {
            release();
            self.released_at = Some(std::time::Instant::now());
        }
    }

    /// When the lock was released by [`KernelLog::kernels_queued`], if it was.
    pub(crate) fn released_at(&self) -> Option<std::time::Instant> {
        self.released_at
    }
}
