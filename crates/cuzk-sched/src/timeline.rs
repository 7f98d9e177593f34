//! Spans on one monotonic clock, typed by what happened ([`SpanKind`]) and who did it ([`Lane`]),
//! written as JSON lines or as a Chrome trace (Perfetto).

use std::sync::Mutex;
use std::time::Instant;

use cuzk_groth16::Stage;
use serde_json::json;

/// What a span records: the steps of a partition, as the scheduler records them on its timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpanKind {
    /// Waiting in the synthesis queue.
    Queued,
    /// A synthesis worker waiting for room in the host budget.
    BudgetWait,
    /// Synthesizing.
    Synthesis,
    /// Synthesized, waiting for a GPU worker.
    GpuQueue,
    /// A GPU worker waiting for the memory lock and a free device slot.
    MemoryLockWait,
    /// The memory lock held (claiming a slot and uploading).
    MemoryLock,
    /// Moving the partition into device memory.
    Upload,
    /// Waiting for the kernel lock.
    KernelLockWait,
    /// The kernel lock held (queuing the kernels, or running them with merged locks).
    KernelLock,
    /// A stage's kernels on the device's kernel lane, where and as long as the device ran them.
    Kernel(Stage),
    /// A partition's copies to the device, on the device's copy lane, as the device ran them.
    Copy,
    /// Host work after the kernels (collecting results, the self-check).
    Finish,
}

impl SpanKind {
    /// Every kind but the kernel spans, in the order a partition meets them.
    pub const STEPS: [SpanKind; 11] = [
        SpanKind::Queued,
        SpanKind::BudgetWait,
        SpanKind::Synthesis,
        SpanKind::GpuQueue,
        SpanKind::MemoryLockWait,
        SpanKind::MemoryLock,
        SpanKind::Upload,
        SpanKind::Copy,
        SpanKind::KernelLockWait,
        SpanKind::KernelLock,
        SpanKind::Finish,
    ];

    /// The name of a kind that is not a kernel span (see [`std::fmt::Display`] for all).
    fn step_name(self) -> &'static str {
        match self {
            SpanKind::Queued => "queued",
            SpanKind::BudgetWait => "budget_wait",
            SpanKind::Synthesis => "synthesis",
            SpanKind::GpuQueue => "gpu_queue",
            SpanKind::MemoryLockWait => "memory_lock_wait",
            SpanKind::MemoryLock => "memory_lock",
            SpanKind::Upload => "upload",
            SpanKind::KernelLockWait => "kernel_lock_wait",
            SpanKind::KernelLock => "kernel_lock",
            SpanKind::Copy => "copy",
            SpanKind::Finish => "finish",
            SpanKind::Kernel(_) => "kernel",
        }
    }

    /// Whether this is a kernel span.
    pub fn is_kernel(self) -> bool {
        matches!(self, SpanKind::Kernel(_))
    }

    /// Whether this is a wait (for budget or a lock).
    pub fn is_wait(self) -> bool {
        matches!(self, SpanKind::BudgetWait | SpanKind::MemoryLockWait | SpanKind::KernelLockWait)
    }

    /// Whether this is a lock hold, which brackets the steps done under it.
    pub fn is_hold(self) -> bool {
        matches!(self, SpanKind::MemoryLock | SpanKind::KernelLock)
    }
}

/// Names as the JSON lines carry them: `queued`, `budget_wait`, `synthesis`, `gpu_queue`,
/// `memory_lock_wait`, `memory_lock`, `upload`, `copy`, `kernel_lock_wait`, `kernel_lock`,
/// `kernel:<stage>` (see [`Stage::name`]), `finish`.
impl std::fmt::Display for SpanKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpanKind::Kernel(stage) => write!(f, "kernel:{stage}"),
            other => f.write_str(other.step_name()),
        }
    }
}

impl std::str::FromStr for SpanKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(stage) = s.strip_prefix("kernel:") {
            return stage.parse().map(SpanKind::Kernel).map_err(|e| format!("span kind `{s}`: {e}"));
        }
        SpanKind::STEPS
            .into_iter()
            .find(|k| k.step_name() == s)
            .ok_or_else(|| format!("unknown span kind `{s}`"))
    }
}

/// Who did the work of a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lane {
    /// The queues (a partition waiting, which overlaps other partitions' waits).
    Queue,
    /// Synthesis worker `n`.
    Synth(usize),
    /// Priority synthesis worker `n` (high and urgent partitions only).
    PrioritySynth(usize),
    /// GPU worker `worker` of device `device`.
    GpuWorker {
        /// The device.
        device: usize,
        /// The worker.
        worker: usize,
    },
    /// The kernels of device `device`.
    Kernels {
        /// The device.
        device: usize,
    },
    /// The copies to device `device`.
    Copies {
        /// The device.
        device: usize,
    },
}

impl Lane {
    /// The device of a GPU worker's or a kernel lane, `None` for the others.
    pub fn device(self) -> Option<usize> {
        match self {
            Lane::GpuWorker { device, .. } | Lane::Kernels { device } | Lane::Copies { device } => {
                Some(device)
            }
            _ => None,
        }
    }
}

/// Names as the JSON lines carry them: `queue`, `synth-3`, `synth-p0`, `gpu0-w1`, `gpu0-kernels`,
/// `gpu0-copies`.
impl std::fmt::Display for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lane::Queue => f.write_str("queue"),
            Lane::Synth(n) => write!(f, "synth-{n}"),
            Lane::PrioritySynth(n) => write!(f, "synth-p{n}"),
            Lane::GpuWorker { device, worker } => write!(f, "gpu{device}-w{worker}"),
            Lane::Kernels { device } => write!(f, "gpu{device}-kernels"),
            Lane::Copies { device } => write!(f, "gpu{device}-copies"),
        }
    }
}

impl std::str::FromStr for Lane {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("unknown lane `{s}`");
        let number = |t: &str| t.parse::<usize>().map_err(|_| bad());
        if s == "queue" {
            return Ok(Lane::Queue);
        }
        if let Some(rest) = s.strip_prefix("synth-") {
            return match rest.strip_prefix('p') {
                Some(n) => number(n).map(Lane::PrioritySynth),
                None => number(rest).map(Lane::Synth),
            };
        }
        let (device, what) = s.strip_prefix("gpu").and_then(|r| r.split_once('-')).ok_or_else(bad)?;
        let device = number(device)?;
        match what {
            "kernels" => Ok(Lane::Kernels { device }),
            "copies" => Ok(Lane::Copies { device }),
            w => w
                .strip_prefix('w')
                .ok_or_else(bad)
                .and_then(number)
                .map(|worker| Lane::GpuWorker { device, worker }),
        }
    }
}

/// One interval of the pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The job (0 for spans that belong to no job).
    pub job: u64,
    /// The partition within the job.
    pub partition: usize,
    /// What happened.
    pub kind: SpanKind,
    /// Who did it.
    pub lane: Lane,
    /// Start, microseconds since the timeline began.
    pub start_us: f64,
    /// End, microseconds since the timeline began.
    pub end_us: f64,
}

impl Span {
    /// Duration in microseconds.
    pub fn duration_us(&self) -> f64 {
        self.end_us - self.start_us
    }

    /// Whether two spans overlap in time.
    pub fn overlaps(&self, other: &Span) -> bool {
        self.start_us < other.end_us && other.start_us < self.end_us
    }
}

/// The pipeline's timeline.
#[derive(Debug)]
pub struct Timeline {
    origin: Instant,
    spans: Mutex<Kept>,
}

/// The spans a timeline keeps: all of them, or the newest `limit` (a ring), and how many it dropped.
#[derive(Debug, Default)]
struct Kept {
    spans: std::collections::VecDeque<Span>,
    limit: Option<usize>,
    dropped: u64,
}

impl Default for Timeline {
    fn default() -> Self {
        Self::new()
    }
}

impl Timeline {
    /// A timeline starting now that keeps every span.
    pub fn new() -> Self {
        Self { origin: Instant::now(), spans: Mutex::new(Kept::default()) }
    }

    /// A timeline starting now that keeps only the newest `limit` spans (at least one), so a
    /// long-lived scheduler's memory stays bounded; [`Timeline::dropped`] counts the others.
    pub fn bounded(limit: usize) -> Self {
        let kept = Kept { limit: Some(limit.max(1)), ..Kept::default() };
        Self { origin: Instant::now(), spans: Mutex::new(kept) }
    }

    /// How many of the oldest spans a bounded timeline has let go.
    pub fn dropped(&self) -> u64 {
        self.spans.lock().unwrap_or_else(|p| p.into_inner()).dropped
    }

    /// Microseconds since the timeline began at `t`.
    pub fn at(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.origin).as_secs_f64() * 1e6
    }

    /// Records a span from `start` to now.
    pub fn span(&self, job: u64, partition: usize, kind: SpanKind, lane: Lane, start: Instant) {
        let end = Instant::now();
        self.push(Span { job, partition, kind, lane, start_us: self.at(start), end_us: self.at(end) });
    }

    /// Records a span with explicit times.
    pub fn push(&self, span: Span) {
        let mut kept = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        if kept.limit.is_some_and(|limit| kept.spans.len() >= limit) {
            kept.spans.pop_front();
            kept.dropped += 1;
        }
        kept.spans.push_back(span);
    }

    /// All spans kept, ordered by start.
    pub fn spans(&self) -> Vec<Span> {
        let mut v: Vec<Span> =
            self.spans.lock().unwrap_or_else(|p| p.into_inner()).spans.iter().cloned().collect();
        v.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
        v
    }

    /// One JSON object per line: `{"job", "partition", "kind", "lane", "start_us", "end_us"}`.
    pub fn to_json_lines(&self) -> String {
        self.spans()
            .iter()
            .map(|s| {
                json!({"job": s.job, "partition": s.partition, "kind": s.kind.to_string(),
                       "lane": s.lane.to_string(), "start_us": s.start_us, "end_us": s.end_us})
                .to_string()
                    + "\n"
            })
            .collect()
    }

    /// A Chrome trace (JSON array of complete events), one thread per lane; opens in Perfetto.
    pub fn to_chrome_trace(&self) -> String {
        let spans = self.spans();
        let mut lanes: Vec<Lane> = spans.iter().map(|s| s.lane).collect();
        lanes.sort_unstable();
        lanes.dedup();
        let tid = |lane: Lane| lanes.iter().position(|l| *l == lane).unwrap_or(0);
        let mut events: Vec<serde_json::Value> = lanes
            .iter()
            .enumerate()
            .map(|(i, l)| {
                json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": i, "args": {"name": l.to_string()}})
            })
            .collect();
        events.extend(spans.iter().map(|s| {
            json!({"ph": "X", "name": s.kind.to_string(), "cat": "cuzk", "pid": 1, "tid": tid(s.lane),
                   "ts": s.start_us, "dur": s.duration_us(),
                   "args": {"job": s.job, "partition": s.partition}})
        }));
        serde_json::Value::Array(events).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(job: u64) -> Span {
        Span {
            job,
            partition: 0,
            kind: SpanKind::Synthesis,
            lane: Lane::Synth(0),
            start_us: job as f64,
            end_us: job as f64 + 1.0,
        }
    }

    #[test]
    fn a_bounded_timeline_keeps_the_newest_spans_and_counts_the_rest() {
        let t = Timeline::bounded(3);
        for job in 0..10 {
            t.push(span(job));
        }
        let kept: Vec<u64> = t.spans().iter().map(|s| s.job).collect();
        assert_eq!(kept, [7, 8, 9]);
        assert_eq!(t.dropped(), 7);
        let all = Timeline::new();
        for job in 0..10 {
            all.push(span(job));
        }
        assert_eq!((all.spans().len(), all.dropped()), (10, 0));
    }
}
