//! Spans on one monotonic clock, written as JSON lines or as a Chrome trace (Perfetto).

use std::sync::Mutex;
use std::time::Instant;

use serde_json::json;

/// One interval of the pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The job (0 for spans that belong to no job).
    pub job: u64,
    /// The partition within the job.
    pub partition: usize,
    /// What happened: "queued", "budget_wait", "synthesis", "gpu_pickup", "memory_lock_wait",
    /// "memory_lock", "upload", "kernel_lock_wait", "kernel_lock", "kernel:<name>", "finish".
    pub kind: String,
    /// Who did it: "synth-3", "gpu0-w1", "gpu0-kernels".
    pub lane: String,
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
    spans: Mutex<Vec<Span>>,
}

impl Default for Timeline {
    fn default() -> Self {
        Self::new()
    }
}

impl Timeline {
    /// A timeline starting now.
    pub fn new() -> Self {
        Self { origin: Instant::now(), spans: Mutex::new(Vec::new()) }
    }

    /// Microseconds since the timeline began at `t`.
    pub fn at(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.origin).as_secs_f64() * 1e6
    }

    /// Records a span from `start` to now.
    pub fn span(&self, job: u64, partition: usize, kind: &str, lane: &str, start: Instant) {
        let end = Instant::now();
        self.push(Span {
            job,
            partition,
            kind: kind.to_string(),
            lane: lane.to_string(),
            start_us: self.at(start),
            end_us: self.at(end),
        });
    }

    /// Records a span with explicit times.
    pub fn push(&self, span: Span) {
        self.spans.lock().unwrap_or_else(|p| p.into_inner()).push(span);
    }

    /// All spans so far, ordered by start.
    pub fn spans(&self) -> Vec<Span> {
        let mut v = self.spans.lock().unwrap_or_else(|p| p.into_inner()).clone();
        v.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
        v
    }

    /// One JSON object per line: `{"job", "partition", "kind", "lane", "start_us", "end_us"}`.
    pub fn to_json_lines(&self) -> String {
        self.spans()
            .iter()
            .map(|s| {
                json!({"job": s.job, "partition": s.partition, "kind": s.kind, "lane": s.lane,
                       "start_us": s.start_us, "end_us": s.end_us})
                .to_string()
                    + "\n"
            })
            .collect()
    }

    /// A Chrome trace (JSON array of complete events), one thread per lane; opens in Perfetto.
    pub fn to_chrome_trace(&self) -> String {
        let spans = self.spans();
        let mut lanes: Vec<&str> = spans.iter().map(|s| s.lane.as_str()).collect();
        lanes.sort_unstable();
        lanes.dedup();
        let tid = |lane: &str| lanes.iter().position(|l| *l == lane).unwrap_or(0);
        let mut events: Vec<serde_json::Value> = lanes
            .iter()
            .enumerate()
            .map(|(i, l)| json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": i, "args": {"name": l}}))
            .collect();
        events.extend(spans.iter().map(|s| {
            json!({"ph": "X", "name": s.kind, "cat": "cuzk", "pid": 1, "tid": tid(&s.lane),
                   "ts": s.start_us, "dur": s.duration_us(),
                   "args": {"job": s.job, "partition": s.partition}})
        }));
        serde_json::Value::Array(events).to_string()
    }
}
