//! What a timeline says: kernel utilisation measured from device time, beside the lock-bracket
//! figure; the gaps between kernels and what each was waiting on; queue and prove time per job.

use std::collections::BTreeMap;

use crate::{Lane, Span, SpanKind};

/// Why the GPU had no kernel running during a gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GapCause {
    /// A worker held the kernel lock but ran no kernel (host work inside the lock).
    HostWorkInLock,
    /// A partition was uploading and none was ready to compute.
    Upload,
    /// Partitions were ready but waiting for a lock or a slot.
    Lock,
    /// Nothing was ready: synthesis did not keep up.
    SynthesisStarvation,
}

impl GapCause {
    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::HostWorkInLock => "host work inside the kernel lock",
            Self::Upload => "upload",
            Self::Lock => "waiting for a lock or slot",
            Self::SynthesisStarvation => "synthesis starvation",
        }
    }
}

/// Queue and prove time of one job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobTimes {
    /// The job.
    pub job: u64,
    /// From submission to the first partition's synthesis start, seconds.
    pub queue_s: f64,
    /// From submission to the last partition's finish, seconds.
    pub prove_s: f64,
    /// When the job finished, seconds since the timeline began.
    pub end_s: f64,
}

/// The summary of a timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineReport {
    /// From the first kernel's start to the last kernel's end, seconds (all devices together).
    pub window_s: f64,
    /// Device-measured kernel time (union over each device's kernel lane) / (window × devices).
    pub kernel_utilization: f64,
    /// Time some worker held a kernel lock / (window × devices): what a bracket around the locked
    /// region would claim.
    pub lock_utilization: f64,
    /// Kernel utilisation in steady state: the same measure over the window from the start of the
    /// first kept kernel-lock hold to the end of the last, leaving out the first and last tenth of
    /// the holds (at least one each), when the GPU fills up and drains. `None` with fewer than five
    /// holds.
    pub steady_kernel_utilization: Option<f64>,
    /// Seconds without a running kernel, by cause.
    pub gaps: BTreeMap<GapCause, f64>,
    /// Per job, in order of completion.
    pub jobs: Vec<JobTimes>,
    /// Seconds between successive job completions after the first (steady state), if two or more jobs.
    pub steady_state_s_per_job: Option<f64>,
}

/// The union of intervals, sorted and merged.
fn union(mut v: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn total(v: &[(f64, f64)]) -> f64 {
    v.iter().map(|(s, e)| e - s).sum()
}

/// `parts` minus the union of `cut`, returning (what remains, how much was cut).
fn subtract(parts: &[(f64, f64)], cut: &[(f64, f64)]) -> (Vec<(f64, f64)>, f64) {
    let mut remaining = Vec::new();
    let mut removed = 0.0;
    for &(s, e) in parts {
        let mut pieces = vec![(s, e)];
        for &(a, b) in cut {
            let mut next = Vec::new();
            for (x, y) in pieces {
                let (lo, hi) = (x.max(a), y.min(b));
                if lo < hi {
                    removed += hi - lo;
                    if x < lo {
                        next.push((x, lo));
                    }
                    if hi < y {
                        next.push((hi, y));
                    }
                } else {
                    next.push((x, y));
                }
            }
            pieces = next;
        }
        remaining.extend(pieces);
    }
    (remaining, removed)
}

/// See [`TimelineReport::steady_kernel_utilization`].
fn steady_utilization(kernels: &[&Span], locks: &[&Span], devices: f64) -> Option<f64> {
    if locks.len() < 5 {
        return None;
    }
    let mut holds: Vec<(f64, f64)> = locks.iter().map(|s| (s.start_us, s.end_us)).collect();
    holds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let cut = holds.len().div_ceil(10).max(1);
    let kept = &holds[cut..holds.len() - cut];
    let (w0, w1) = (kept.first()?.0, kept.iter().map(|h| h.1).fold(f64::NEG_INFINITY, f64::max));
    if w1 <= w0 {
        return None;
    }
    let lanes: Vec<Lane> = {
        let mut l: Vec<Lane> = kernels.iter().map(|s| s.lane).collect();
        l.sort_unstable();
        l.dedup();
        l
    };
    let busy: f64 = lanes
        .iter()
        .map(|lane| {
            total(&union(
                kernels
                    .iter()
                    .filter(|s| s.lane == *lane)
                    .map(|s| (s.start_us.max(w0), s.end_us.min(w1)))
                    .filter(|(a, b)| b > a)
                    .collect(),
            ))
        })
        .sum();
    Some(busy / ((w1 - w0) * devices))
}

impl TimelineReport {
    /// Analyses spans (as recorded by the scheduler, or read back from JSON lines).
    pub fn from_spans(spans: &[Span]) -> Self {
        let kernel_lanes: Vec<Lane> = {
            let mut l: Vec<Lane> = spans.iter().filter(|s| s.kind.is_kernel()).map(|s| s.lane).collect();
            l.sort_unstable();
            l.dedup();
            l
        };
        let devices = kernel_lanes.len().max(1) as f64;
        let kernels: Vec<&Span> = spans.iter().filter(|s| s.kind.is_kernel()).collect();
        let first = kernels.iter().map(|s| s.start_us).fold(f64::INFINITY, f64::min);
        let last = kernels.iter().map(|s| s.end_us).fold(f64::NEG_INFINITY, f64::max);
        let window_us = if kernels.is_empty() { 0.0 } else { last - first };
        let mut busy_us = 0.0;
        let mut gaps = BTreeMap::new();
        let by_kind = |k: SpanKind| spans.iter().filter(|s| s.kind == k).collect::<Vec<_>>();
        let (locks, uploads, queued) =
            (by_kind(SpanKind::KernelLock), by_kind(SpanKind::Upload), by_kind(SpanKind::GpuQueue));
        for lane in &kernel_lanes {
            let device = lane.device();
            let on = |v: &Vec<&Span>| -> Vec<(f64, f64)> {
                v.iter().filter(|s| s.lane.device() == device).map(|s| (s.start_us, s.end_us)).collect()
            };
            let busy =
                union(kernels.iter().filter(|s| s.lane == *lane).map(|s| (s.start_us, s.end_us)).collect());
            busy_us += total(&busy);
            let (lane_locks, lane_uploads) = (on(&locks), on(&uploads));
            let waiting: Vec<(f64, f64)> = queued.iter().map(|s| (s.start_us, s.end_us)).collect();
            for w in busy.windows(2) {
                let (s, e) = (w[0].1, w[1].0);
                if e <= s {
                    continue;
                }
                // Split the gap by cause, in this order: lock held, upload, work waiting, nothing ready.
                let mut rest = vec![(s, e)];
                for (cause, intervals) in [
                    (GapCause::HostWorkInLock, &lane_locks),
                    (GapCause::Upload, &lane_uploads),
                    (GapCause::Lock, &waiting),
                ] {
                    let (left, removed) = subtract(&rest, intervals);
                    if removed > 0.0 {
                        *gaps.entry(cause).or_insert(0.0) += removed / 1e6;
                    }
                    rest = left;
                }
                let starved: f64 = rest.iter().map(|(a, b)| b - a).sum();
                if starved > 0.0 {
                    *gaps.entry(GapCause::SynthesisStarvation).or_insert(0.0) += starved / 1e6;
                }
            }
        }
        let lock_us = total(&union(
            locks
                .iter()
                .map(|s| (s.start_us.max(first), s.end_us.min(last)))
                .filter(|(s, e)| e > s)
                .collect(),
        ));
        let mut jobs: BTreeMap<u64, (f64, f64, f64)> = BTreeMap::new();
        for s in spans {
            let entry = jobs.entry(s.job).or_insert((f64::INFINITY, f64::INFINITY, f64::NEG_INFINITY));
            if s.kind == SpanKind::Queued {
                entry.0 = entry.0.min(s.start_us);
            }
            if s.kind == SpanKind::Synthesis {
                entry.1 = entry.1.min(s.start_us);
            }
            if s.kind == SpanKind::Finish {
                entry.2 = entry.2.max(s.end_us);
            }
        }
        let mut jobs: Vec<JobTimes> = jobs
            .into_iter()
            .filter(|(_, (q, _, f))| q.is_finite() && f.is_finite())
            .map(|(job, (q, st, f))| JobTimes {
                job,
                queue_s: if st.is_finite() { (st - q) / 1e6 } else { 0.0 },
                prove_s: (f - q) / 1e6,
                end_s: f / 1e6,
            })
            .collect();
        jobs.sort_by(|a, b| a.end_s.total_cmp(&b.end_s));
        let steady_state_s_per_job = (jobs.len() >= 2).then(|| {
            let (a, b) = (jobs[0].end_s, jobs[jobs.len() - 1].end_s);
            (b - a) / (jobs.len() - 1) as f64
        });
        let denom = (window_us * devices).max(f64::MIN_POSITIVE);
        let steady_kernel_utilization = steady_utilization(&kernels, &locks, devices);
        Self {
            steady_kernel_utilization,
            window_s: window_us / 1e6,
            kernel_utilization: if window_us > 0.0 { busy_us / denom } else { 0.0 },
            lock_utilization: if window_us > 0.0 { lock_us / denom } else { 0.0 },
            gaps,
            jobs,
            steady_state_s_per_job,
        }
    }

    /// Whether synthesis failed to keep the GPU fed for a noticeable share (over 5%) of the window.
    pub fn synthesis_bound(&self) -> bool {
        self.gaps.get(&GapCause::SynthesisStarvation).copied().unwrap_or(0.0) > 0.05 * self.window_s
    }

    /// A human-readable summary.
    pub fn render(&self) -> String {
        let mut s = String::new();
        s += &format!("kernel window            {:.3} s\n", self.window_s);
        s += &format!(
            "kernel utilisation       {:.1}% (device-measured kernel time)\n",
            100.0 * self.kernel_utilization
        );
        s += &format!(
            "lock-bracket utilisation {:.1}% (time a kernel lock was held)\n",
            100.0 * self.lock_utilization
        );
        if let Some(u) = self.steady_kernel_utilization {
            s += &format!(
                "steady-state kernel use  {:.1}% (first and last tenth of the partitions left out)\n",
                100.0 * u
            );
        }
        for (cause, secs) in &self.gaps {
            s += &format!("gap: {:<32} {:.3} s\n", cause.name(), secs);
        }
        if self.synthesis_bound() {
            s += "synthesis cannot keep up: the GPU starved for over 5% of the window\n";
        }
        if let Some(x) = self.steady_state_s_per_job {
            s += &format!("steady state             {x:.3} s per proof\n");
        }
        for j in &self.jobs {
            s += &format!("job {:>6}: queued {:.3} s, proved in {:.3} s\n", j.job, j.queue_s, j.prove_s);
        }
        s
    }
}

/// Parses spans from the JSON lines [`crate::Timeline::to_json_lines`] writes.
pub fn parse_json_lines(text: &str) -> Result<Vec<Span>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let v: serde_json::Value =
                serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
            let num = |k: &str| {
                v[k].as_f64().ok_or_else(|| format!("line {}: `{k}` is missing or not a number", i + 1))
            };
            let text = |k: &str| {
                v[k].as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("line {}: `{k}` is missing or not a string", i + 1))
            };
            let kind = text("kind")?.parse().map_err(|e| format!("line {}: {e}", i + 1))?;
            let lane = text("lane")?.parse().map_err(|e| format!("line {}: {e}", i + 1))?;
            Ok(Span {
                job: num("job")? as u64,
                partition: num("partition")? as usize,
                kind,
                lane,
                start_us: num("start_us")?,
                end_us: num("end_us")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(partition: usize, kind: &str, lane: &str, start_ms: f64, end_ms: f64) -> Span {
        Span {
            job: 0,
            partition,
            kind: kind.parse().unwrap(),
            lane: lane.parse().unwrap(),
            start_us: start_ms * 1e3,
            end_us: end_ms * 1e3,
        }
    }

    #[test]
    fn steady_state_utilisation_leaves_out_filling_up_and_draining() {
        // Twenty partitions: each holds the kernel lock for 10 ms and runs 9 ms of kernels, back to
        // back, except that the first and the last wait 100 ms inside the lock (filling and draining).
        let mut spans = Vec::new();
        let mut t = 0.0;
        for p in 0..20 {
            let hold = if p == 0 || p == 19 { 109.0 } else { 10.0 };
            spans.push(span(p, "kernel_lock", "gpu0-w0", t, t + hold));
            spans.push(span(p, "kernel:msms", "gpu0-kernels", t + hold - 9.0, t + hold));
            t += hold;
        }
        let r = TimelineReport::from_spans(&spans);
        let steady = r.steady_kernel_utilization.unwrap();
        assert!((steady - 0.9).abs() < 1e-9, "{steady}");
        assert!(r.kernel_utilization < 0.75, "{}", r.kernel_utilization);
        assert!(r.render().contains("steady-state kernel use  90.0%"), "{}", r.render());
        // Too few holds to tell a steady state apart.
        assert_eq!(TimelineReport::from_spans(&spans[..8]).steady_kernel_utilization, None);
    }
}
