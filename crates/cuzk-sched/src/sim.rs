//! A simulated backend: stages that sleep for configured durations and fail where told to, so the
//! scheduler's ordering, overlap, budget and failure handling can be tested without a GPU.

use std::collections::HashSet;
use std::time::Duration;

use crate::{JobId, KernelLog, PartitionRef, Placement, StageError, Stages};

/// Durations and failures of the simulated stages.
#[derive(Debug, Clone, Default)]
pub struct SimStages {
    /// Synthesis time per partition.
    pub synthesis: Duration,
    /// Upload time per partition.
    pub upload: Duration,
    /// The kernels of one partition, `(name, duration)`, run back to back under the kernel lock.
    pub kernels: Vec<(&'static str, Duration)>,
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
        _at: Placement,
        staged: (SimInput, Placement),
        log: &mut KernelLog,
    ) -> Result<SimInput, StageError> {
        for (name, d) in &self.kernels {
            std::thread::sleep(*d);
            log.record(*name, d.as_secs_f64());
        }
        self.fail(part, "kernels")?;
        Ok(staged.0)
    }

    fn finish(&self, part: PartitionRef, computed: SimInput) -> Result<(SimInput, Placement), StageError> {
        std::thread::sleep(self.finish);
        self.fail(part, "finish")?;
        Ok((computed, Placement { device: 0, slot: 0 }))
    }
}
