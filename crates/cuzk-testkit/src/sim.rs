//! A simulated backend for `cuzk-sched`: stages that sleep for configured durations and fail where
//! told to, so the scheduler's ordering, overlap, budget and failure handling can be tested without a
//! GPU.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuzk_sched::{JobId, KernelLog, PartitionRef, Placement, Stage, StageError, Stages};

/// Durations and failures of the simulated stages.
#[derive(Debug, Clone, Default)]
pub struct SimStages {
    /// Synthesis time per partition.
    pub synthesis: Duration,
    /// Upload time per partition.
    pub upload: Duration,
    /// The kernels of one partition, `(stage, duration)`, run back to back under the kernel lock.
    pub kernels: Vec<(Stage, Duration)>,
    /// Host work after the kernels, collecting their results (still in the kernel step).
    pub collect: Duration,
    /// Model a device that runs queued work in order: the step queues its kernels, releases the
    /// kernel lock ([`KernelLog::kernels_queued`]), then waits for them and collects. Otherwise the
    /// kernels and the collection run under the lock.
    pub release_when_queued: bool,
    /// Per device, when the simulated device finishes the work queued so far.
    pub device_clock: Arc<Mutex<HashMap<usize, Instant>>>,
    /// Host-side finishing time per partition.
    pub finish: Duration,
    /// Host bytes per partition (held from synthesis until the upload is done).
    pub host_bytes: u64,
    /// `(job, partition, stage)` triples that fail.
    pub failures: HashSet<(JobId, usize, &'static str)>,
}

/// A simulated partition's input: its tag, echoed back as its output.
pub type SimInput = u64;

impl SimStages {
    fn fail(&self, part: PartitionRef, stage: &'static str) -> Result<(), StageError> {
        if self.failures.contains(&(part.job, part.index, stage)) {
            Err(StageError::new(stage, format!("injected failure in {} partition {}", part.job, part.index)))
        } else {
            Ok(())
        }
    }
}

impl Stages for SimStages {
    type Input = SimInput;
    type Synthesized = SimInput;
    type Staged = (SimInput, Placement);
    type Computed = SimInput;
    type Output = (SimInput, Placement);

    fn host_bytes(&self, _input: &SimInput) -> u64 {
        self.host_bytes
    }

    fn synthesize(&self, part: PartitionRef, input: SimInput) -> Result<SimInput, StageError> {
        std::thread::sleep(self.synthesis);
        self.fail(part, "synthesis")?;
        Ok(input)
    }

    fn upload(
        &self,
        part: PartitionRef,
        at: Placement,
        data: SimInput,
    ) -> Result<(SimInput, Placement), StageError> {
        std::thread::sleep(self.upload);
        self.fail(part, "upload")?;
        Ok((data, at))
    }

    fn kernels(
        &self,
        part: PartitionRef,
        at: Placement,
        staged: (SimInput, Placement),
        log: &mut KernelLog<'_>,
    ) -> Result<SimInput, StageError> {
        if self.release_when_queued {
            // Queued behind the device's earlier work; the host then waits for the results.
            let total: Duration = self.kernels.iter().map(|(_, d)| *d).sum();
            let done = {
                let mut clock = self.device_clock.lock().unwrap_or_else(|p| p.into_inner());
                let now = Instant::now();
                let start = clock.get(&at.device).copied().filter(|t| *t > now).unwrap_or(now);
                let done = start + total;
                clock.insert(at.device, done);
                done
            };
            log.kernels_queued();
            std::thread::sleep(done.saturating_duration_since(Instant::now()));
        } else {
            for (_, d) in &self.kernels {
                std::thread::sleep(*d);
            }
        }
        for (stage, d) in &self.kernels {
            log.record(*stage, d.as_secs_f64());
        }
        std::thread::sleep(self.collect);
        self.fail(part, "kernels")?;
        Ok(staged.0)
    }

    fn finish(&self, part: PartitionRef, computed: SimInput) -> Result<(SimInput, Placement), StageError> {
        std::thread::sleep(self.finish);
        self.fail(part, "finish")?;
        Ok((computed, Placement { device: 0, slot: 0 }))
    }
}
