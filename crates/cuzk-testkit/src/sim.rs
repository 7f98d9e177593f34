//! A simulated backend for `cuzk-sched`: stages that sleep for configured durations and fail where
//! told to, so the scheduler's ordering, overlap, budget and failure handling can be tested without a
//! GPU.
//!
//! The simulated device runs queued work in order, as a GPU does: a partition's kernels start when the
//! device is free and the partition's copy has landed, whichever is later, so a copy that lands late
//! leaves the device idle. The device keeps its own record of when it ran what ([`SimDevice::truth`]),
//! the ground truth the timeline's placement is tested against.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuzk_sched::{JobId, KernelLog, PartitionRef, Placement, Stage, StageError, Stages};

/// One kernel run of the simulated device: which partition, on which device, from when to when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ran {
    /// The device.
    pub device: usize,
    /// The partition.
    pub part: PartitionRef,
    /// When its kernels started.
    pub start: Instant,
    /// When they ended.
    pub end: Instant,
}

/// The simulated devices: when each is free again, and what each ran.
#[derive(Debug, Default)]
pub struct SimDevice {
    free_at: Mutex<HashMap<usize, Instant>>,
    ran: Mutex<Vec<Ran>>,
}

impl SimDevice {
    /// Every kernel run so far, in the order the device started them.
    pub fn truth(&self) -> Vec<Ran> {
        let mut ran = self.ran.lock().unwrap_or_else(|p| p.into_inner()).clone();
        ran.sort_by_key(|r| r.start);
        ran
    }

    /// Queues `total` of kernel time on `device`, to start no earlier than `ready`: when it starts and
    /// ends.
    fn queue(
        &self,
        device: usize,
        part: PartitionRef,
        ready: Instant,
        total: Duration,
    ) -> (Instant, Instant) {
        let mut free = self.free_at.lock().unwrap_or_else(|p| p.into_inner());
        let start = free.get(&device).copied().unwrap_or(ready).max(ready);
        let end = start + total;
        free.insert(device, end);
        self.ran.lock().unwrap_or_else(|p| p.into_inner()).push(Ran { device, part, start, end });
        (start, end)
    }
}

/// Durations and failures of the simulated stages.
#[derive(Debug, Clone, Default)]
pub struct SimStages {
    /// Synthesis time per partition.
    pub synthesis: Duration,
    /// The host's upload step per partition (the copies are issued and begin to land).
    pub upload: Duration,
    /// Per partition, how long after its upload step its copy lands on the device (none by default).
    pub copy_delays: HashMap<(JobId, usize), Duration>,
    /// The kernels of one partition, `(stage, duration)`, run back to back by the device.
    pub kernels: Vec<(Stage, Duration)>,
    /// Host work after the kernels, collecting their results (still in the kernel step).
    pub collect: Duration,
    /// Model a stage that queues its kernels and releases the kernel lock at once
    /// ([`KernelLog::kernels_queued`]), then waits for them and collects. Otherwise the lock is held
    /// until the kernels are done and collected.
    pub release_when_queued: bool,
    /// The simulated devices (shared by clones).
    pub device: Arc<SimDevice>,
    /// Host-side finishing time per partition.
    pub finish: Duration,
    /// Host bytes per partition (held from synthesis until the upload is done).
    pub host_bytes: u64,
    /// Host bytes a synthesized partition keeps while it waits for its upload (`None`: all of
    /// `host_bytes`), as a compact partition keeps less than synthesis needed.
    pub held_bytes: Option<u64>,
    /// `(job, partition, stage)` triples that fail.
    pub failures: HashSet<(JobId, usize, &'static str)>,
}

/// A simulated partition's input: its tag, echoed back as its output.
pub type SimInput = u64;

/// A partition in a device slot: its tag, where it is, and when its copy started and lands.
pub type SimStaged = (SimInput, Placement, Instant, Instant);

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
    type Staged = SimStaged;
    type Computed = SimInput;
    type Output = (SimInput, Placement);

    fn host_bytes(&self, _input: &SimInput) -> u64 {
        self.host_bytes
    }

    fn held_bytes(&self, _data: &SimInput) -> u64 {
        self.held_bytes.unwrap_or(u64::MAX)
    }

    fn synthesize(&self, part: PartitionRef, input: SimInput) -> Result<SimInput, StageError> {
        std::thread::sleep(self.synthesis);
        self.fail(part, "synthesis")?;
        Ok(input)
    }

    fn upload(&self, part: PartitionRef, at: Placement, data: SimInput) -> Result<SimStaged, StageError> {
        let start = Instant::now();
        std::thread::sleep(self.upload);
        self.fail(part, "upload")?;
        let lands =
            Instant::now() + self.copy_delays.get(&(part.job, part.index)).copied().unwrap_or_default();
        Ok((data, at, start, lands))
    }

    fn kernels(
        &self,
        part: PartitionRef,
        at: Placement,
        (data, _, copy_start, lands): SimStaged,
        log: &mut KernelLog<'_>,
    ) -> Result<SimInput, StageError> {
        let total: Duration = self.kernels.iter().map(|(_, d)| *d).sum();
        let (start, end) = self.device.queue(at.device, part, Instant::now().max(lands), total);
        if self.release_when_queued {
            log.kernels_queued();
        }
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
        let mut t = start;
        for (stage, d) in &self.kernels {
            log.record(*stage, t, t + *d);
            t += *d;
        }
        log.record_copy(copy_start, lands.max(copy_start));
        std::thread::sleep(self.collect);
        self.fail(part, "kernels")?;
        Ok(data)
    }

    fn finish(&self, part: PartitionRef, computed: SimInput) -> Result<(SimInput, Placement), StageError> {
        std::thread::sleep(self.finish);
        self.fail(part, "finish")?;
        Ok((computed, Placement { device: 0, slot: 0 }))
    }
}
