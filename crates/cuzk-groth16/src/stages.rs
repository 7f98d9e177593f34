//! The stages of a proof, named once: [`Stage`] is the list the prover times, a pipeline puts on its
//! timeline and reports print; [`StageTimes`] holds one proof's times per stage, on the host's clock
//! and, from backends that time their device work, on the device's.

use std::time::{Duration, Instant};

/// A stage of one partition's proof, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Moving `a`, `b`, `c` and (on backends that keep scalars) `z` into backend memory.
    Upload,
    /// The witness map: the NTTs and the quotient step (seven NTTs on the CPU, six on a GPU).
    WitnessMap,
    /// MSM of `a_query` (G1).
    MsmA,
    /// MSM of `b_g1_query` (G1; skipped when `r = 0`).
    MsmBG1,
    /// MSM of `b_g2_query` (G2).
    MsmBG2,
    /// MSM of `l_query` (G1).
    MsmL,
    /// MSM of `h_query` (G1).
    MsmH,
    /// The five MSMs as one phase: their wall time, since a backend may run them concurrently.
    Msms,
    /// Blinding and conversion to affine.
    Assembly,
    /// The self-check against the verifying key.
    SelfCheck,
}

impl Stage {
    /// How many stages there are.
    pub const COUNT: usize = 10;

    /// Every stage, in order.
    pub const ALL: [Stage; Stage::COUNT] = [
        Stage::Upload,
        Stage::WitnessMap,
        Stage::MsmA,
        Stage::MsmBG1,
        Stage::MsmBG2,
        Stage::MsmL,
        Stage::MsmH,
        Stage::Msms,
        Stage::Assembly,
        Stage::SelfCheck,
    ];

    /// The five MSMs, in the order the prover issues their results.
    pub const MSMS: [Stage; 5] = [Stage::MsmA, Stage::MsmBG1, Stage::MsmBG2, Stage::MsmL, Stage::MsmH];

    /// The stages a GPU backend runs on the device, each timed on its clock: the witness map and the
    /// five MSMs. Their sum is a partition's GPU time.
    pub const DEVICE: [Stage; 6] =
        [Stage::WitnessMap, Stage::MsmA, Stage::MsmBG1, Stage::MsmBG2, Stage::MsmL, Stage::MsmH];

    /// The stage's name in timelines and JSON: `upload`, `witness_map`, `msm_a`, `msm_b_g1`,
    /// `msm_b_g2`, `msm_l`, `msm_h`, `msms`, `assembly`, `self_check`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Upload => "upload",
            Stage::WitnessMap => "witness_map",
            Stage::MsmA => "msm_a",
            Stage::MsmBG1 => "msm_b_g1",
            Stage::MsmBG2 => "msm_b_g2",
            Stage::MsmL => "msm_l",
            Stage::MsmH => "msm_h",
            Stage::Msms => "msms",
            Stage::Assembly => "assembly",
            Stage::SelfCheck => "self_check",
        }
    }

    /// The stage as a report's tables name it.
    pub fn label(self) -> &'static str {
        match self {
            Stage::Upload => "upload (a, b, c, z)",
            Stage::WitnessMap => "witness map (NTTs)",
            Stage::MsmA => "MSM A (G1)",
            Stage::MsmBG1 => "MSM B (G1)",
            Stage::MsmBG2 => "MSM B (G2)",
            Stage::MsmL => "MSM L (G1)",
            Stage::MsmH => "MSM H (G1)",
            Stage::Msms => "all MSMs (wall)",
            Stage::Assembly => "assembly",
            Stage::SelfCheck => "self-check",
        }
    }

    /// The stage called `name` (see [`Stage::name`]).
    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.name() == name)
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown stage name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown stage `{0}`")]
pub struct UnknownStage(pub String);

impl std::str::FromStr for Stage {
    type Err = UnknownStage;
    fn from_str(s: &str) -> Result<Self, UnknownStage> {
        Stage::from_name(s).ok_or_else(|| UnknownStage(s.to_owned()))
    }
}

/// One value per [`Stage`], indexed by stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerStage<T>([T; Stage::COUNT]);

impl<T> std::ops::Index<Stage> for PerStage<T> {
    type Output = T;
    fn index(&self, stage: Stage) -> &T {
        &self.0[stage.index()]
    }
}

impl<T> std::ops::IndexMut<Stage> for PerStage<T> {
    fn index_mut(&mut self, stage: Stage) -> &mut T {
        &mut self.0[stage.index()]
    }
}

impl<T: Copy> PerStage<T> {
    /// Every stage with its value, in order.
    pub fn iter(&self) -> impl Iterator<Item = (Stage, T)> + '_ {
        Stage::ALL.into_iter().map(|s| (s, self[s]))
    }
}

impl<T: Copy> FromIterator<(Stage, T)> for PerStage<T>
where
    T: Default,
{
    fn from_iter<I: IntoIterator<Item = (Stage, T)>>(iter: I) -> Self {
        let mut v = PerStage::default();
        for (s, t) in iter {
            v[s] = t;
        }
        v
    }
}

/// What each stage of one proof took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageTimes {
    /// Wall-clock time of each stage on the host. MSMs may overlap when the backend runs them
    /// concurrently, so the MSM stages can add up to more than [`Stage::Msms`], their phase.
    pub host: PerStage<Duration>,
    /// The stages on the device's clock, from backends that time their device work
    /// ([`crate::DeviceBackend::device_timer`]); `None` on the CPU. [`Stage::DEVICE`] are timed by events
    /// around each stage's work (the witness map from when `a`, `b` and `c` have landed); the upload
    /// from when staging began until the last copy landed (so the host's conversion into staging
    /// buffers counts too; in a pipeline it overlaps the previous partition's kernels). When several
    /// proofs share a device at once, a stage's span also covers the others' work queued in between.
    pub device: Option<PerStage<Duration>>,
    /// The kinds of work inside the device stages, as `(stage, step, device time)`: for example
    /// `(WitnessMap, "ntt passes", ..)` or `(MsmH, "bucket sums", ..)`.
    pub steps: Vec<(Stage, &'static str, Duration)>,
    /// When the stages ran, as `(stage, start, end)` on the host's monotonic clock. From a backend that
    /// places its device work in time ([`crate::DeviceTimer::placed`]): the upload (on the copy stream)
    /// and each [`Stage::DEVICE`] stage as the device ran it, so idle device time between stages or
    /// partitions is a gap. Otherwise the host's own spans: the upload, the witness map, the MSM phase,
    /// the assembly and (when it runs) the self-check.
    pub spans: Vec<(Stage, Instant, Instant)>,
    /// Whether [`StageTimes::spans`] are the device's own (placed by its clock) rather than the host's.
    pub spans_on_device: bool,
    /// Everything, end to end.
    pub total: Duration,
}

impl StageTimes {
    /// The MSM phase's wall time: what the whole took beyond the upload, the witness map, the
    /// assembly and the self-check.
    pub fn msm_phase(&self) -> Duration {
        let h = &self.host;
        self.total.saturating_sub(
            h[Stage::Upload] + h[Stage::WitnessMap] + h[Stage::Assembly] + h[Stage::SelfCheck],
        )
    }

    /// The partition's GPU time: the sum of the [`Stage::DEVICE`] stages on the device's clock.
    pub fn device_total(&self) -> Option<Duration> {
        self.device.map(|d| Stage::DEVICE.iter().map(|s| d[*s]).sum())
    }
}
