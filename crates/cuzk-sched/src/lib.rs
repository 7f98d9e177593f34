#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod budget;
mod oneshot;
pub mod report;
mod scheduler;
pub mod sim;
pub mod timeline;

pub use budget::{Budget, BudgetError, Reservation};
pub use scheduler::{Config, JobError, JobHandle, JobId, JobStatus, Priority, Scheduler, SubmitError};
pub use timeline::{Span, Timeline};

/// A failure inside one stage of one partition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{stage}: {message}")]
pub struct StageError {
    /// The stage ("synthesis", "upload", "kernels", "finish").
    pub stage: &'static str,
    /// What went wrong.
    pub message: String,
}

impl StageError {
    /// A failure of `stage`.
    pub fn new(stage: &'static str, message: impl Into<String>) -> Self {
        Self { stage, message: message.into() }
    }
}

/// Where a partition runs on a device: the device ordinal and the arena slot it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The device.
    pub device: usize,
    /// The arena slot on that device.
    pub slot: usize,
}

/// The steps of one partition, implemented by the engine (and by [`sim::SimStages`] in tests).
///
/// `upload` runs under the device's memory lock, `kernels` under its kernel lock, `synthesize` and
/// `finish` under no lock. Each step gets its partition's [`PartitionRef`] for logging.
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

    /// Host bytes the partition holds from the start of synthesis until its upload is done.
    fn host_bytes(&self, input: &Self::Input) -> u64;
    /// Synthesizes the partition on a CPU worker.
    fn synthesize(&self, part: PartitionRef, input: Self::Input) -> Result<Self::Synthesized, StageError>;
    /// Uploads into the given slot (the memory lock is held).
    fn upload(
        &self,
        part: PartitionRef,
        at: Placement,
        data: Self::Synthesized,
    ) -> Result<Self::Staged, StageError>;
    /// Runs the kernels (the kernel lock is held). Report each kernel's device-measured time to `kernels`.
    fn kernels(
        &self,
        part: PartitionRef,
        at: Placement,
        staged: Self::Staged,
        kernels: &mut KernelLog,
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

/// Kernel durations measured on the device, reported by [`Stages::kernels`].
#[derive(Debug, Default, Clone, PartialEq)]
pub struct KernelLog {
    /// `(kernel name, device-measured seconds)` in launch order.
    pub kernels: Vec<(String, f64)>,
}

impl KernelLog {
    /// Records one kernel's device-measured duration.
    pub fn record(&mut self, name: impl Into<String>, seconds: f64) {
        self.kernels.push((name.into(), seconds));
    }
}
