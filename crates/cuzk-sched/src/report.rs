//! What a timeline says: how busy each device's kernels kept it (from kernel spans placed where the
//! device ran them), beside what a bracket around the kernel lock would claim; the gaps between
//! kernels and what each was waiting on; queue and prove time per job.

use std::collections::{BTreeMap, BTreeSet};

use crate::{Lane, Span, SpanKind};

/// Why a device had no kernel running during a gap, in the order a gap is split: the first cause
/// whose spans cover a part of the gap takes that part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GapCause {
    /// A partition's data was on its way to the device: the host's upload step, or the device's own
    /// copies landing.
    Upload,
    /// A worker held the kernel lock but the device ran nothing: host work while issuing kernels.
    HostWorkInLock,
    /// A worker of the device waited for its kernel lock.
    KernelLockWait,
    /// A worker of the device waited for its memory lock or a free device slot.
    SlotWait,
    /// A synthesized partition waited for a free GPU worker.
    GpuWorkerWait,
    /// The device's workers were finishing earlier partitions (collecting results, the self-check).
    Finish,
    /// Synthesis workers waited for room in the host budget.
    Budget,
    /// Nothing was ready: synthesis did not keep up.
    SynthesisStarvation,
}

impl GapCause {
    /// Every cause, in the order a gap is split.
    pub const ALL: [GapCause; 8] = [
        GapCause::Upload,
        GapCause::HostWorkInLock,
        GapCause::KernelLockWait,
        GapCause::SlotWait,
        GapCause::GpuWorkerWait,
        GapCause::Finish,
        GapCause::Budget,
        GapCause::SynthesisStarvation,
    ];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Upload => "upload",
            Self::HostWorkInLock => "host work inside the kernel lock",
            Self::KernelLockWait => "waiting for the kernel lock",
            Self::SlotWait => "waiting for a device slot",
            Self::GpuWorkerWait => "waiting for a GPU worker",
            Self::Finish => "finishing earlier partitions",
            Self::Budget => "waiting for host budget",
            Self::SynthesisStarvation => "synthesis starvation",
        }
    }

    /// The spans that stand for this cause on `device`'s gaps (none for starvation, the rest).
    fn covers(self, s: &Span, device: usize) -> bool {
        let on_device = s.lane.device() == Some(device);
        match self {
            Self::Upload => on_device && matches!(s.kind, SpanKind::Upload | SpanKind::Copy),
            Self::HostWorkInLock => on_device && s.kind == SpanKind::KernelLock,
            Self::KernelLockWait => on_device && s.kind == SpanKind::KernelLockWait,
            Self::SlotWait => on_device && s.kind == SpanKind::MemoryLockWait,
            Self::GpuWorkerWait => s.kind == SpanKind::GpuQueue,
            Self::Finish => on_device && s.kind == SpanKind::Finish,
            Self::Budget => s.kind == SpanKind::BudgetWait,
            Self::SynthesisStarvation => false,
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

/// One device's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceReport {
    /// The device.
    pub device: usize,
    /// Partitions whose kernels it ran.
    pub partitions: usize,
    /// Seconds during which a kernel of it ran (overlapping kernels count once).
    pub kernel_s: f64,
    /// `kernel_s` over the timeline's kernel window.
    pub kernel_utilization: f64,
    /// Time one of its workers held its kernel lock, over the kernel window.
    pub lock_utilization: f64,
}

/// The summary of a timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineReport {
    /// Whether the kernel spans are the device's own, placed by its clock: a backend that places its
    /// device work also records its copies, so a timeline with copy spans has them. Otherwise (the
    /// CPU backend) the "kernel" spans are the prover's host phases.
    pub placed_on_device: bool,
    /// From the first kernel's start to the last kernel's end, seconds (all devices together).
    pub window_s: f64,
    /// Devices the timeline names (on a worker, copy or kernel lane), whether or not they ran kernels.
    pub devices: usize,
    /// Kernel time over (window × devices): the share of the devices' time their kernels ran.
    pub kernel_utilization: f64,
    /// Time a kernel lock was held, per device, averaged over the devices: what a bracket around the
    /// locked region would claim.
    pub lock_utilization: f64,
    /// Per device.
    pub per_device: Vec<DeviceReport>,
    /// Kernel utilisation in steady state: over the window from the first kernel of the first kept
    /// partition to the last kernel of the kept partitions, partitions ordered by their first kernel and
    /// the first and last tenth of them (at least one each) left out, when the devices fill up and
    /// drain. `None` with fewer than five partitions.
    pub steady_kernel_utilization: Option<f64>,
    /// Seconds without a running kernel, by cause, over all devices.
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

/// The parts of `v`'s intervals inside `[w0, w1]`.
fn clip(v: &[(f64, f64)], w0: f64, w1: f64) -> Vec<(f64, f64)> {
    v.iter().map(|&(s, e)| (s.max(w0), e.min(w1))).filter(|(s, e)| e > s).collect()
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

/// Busy kernel time per device, merged per device, inside `[w0, w1]`.
fn busy_in(kernels: &BTreeMap<usize, Vec<(f64, f64)>>, w0: f64, w1: f64) -> f64 {
    kernels.values().map(|k| total(&clip(k, w0, w1))).sum()
}

/// See [`TimelineReport::steady_kernel_utilization`].
fn steady_utilization(
    spans: &[&Span],
    kernels: &BTreeMap<usize, Vec<(f64, f64)>>,
    devices: f64,
) -> Option<f64> {
    let mut partitions: BTreeMap<(u64, usize), (f64, f64)> = BTreeMap::new();
    for s in spans {
        let e = partitions.entry((s.job, s.partition)).or_insert((f64::INFINITY, f64::NEG_INFINITY));
        e.0 = e.0.min(s.start_us);
        e.1 = e.1.max(s.end_us);
    }
    if partitions.len() < 5 {
        return None;
    }
    let mut order: Vec<(f64, f64)> = partitions.into_values().collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    let cut = order.len().div_ceil(10).max(1);
    let kept = &order[cut..order.len() - cut];
    let w0 = kept.first()?.0;
    let w1 = kept.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    (w1 > w0).then(|| busy_in(kernels, w0, w1) / ((w1 - w0) * devices))
}

impl TimelineReport {
    /// Analyses spans (as recorded by the scheduler, or read back from JSON lines).
    pub fn from_spans(spans: &[Span]) -> Self {
        let kernel_spans: Vec<&Span> = spans.iter().filter(|s| s.kind.is_kernel()).collect();
        // Every device the timeline names, kernels or not: a device that ran nothing still counts.
        let devices: BTreeSet<usize> = spans.iter().filter_map(|s| s.lane.device()).collect();
        let device_count = devices.len().max(1) as f64;
        let mut kernels: BTreeMap<usize, Vec<(f64, f64)>> =
            devices.iter().map(|&d| (d, Vec::new())).collect();
        for s in &kernel_spans {
            if let Lane::Kernels { device } = s.lane {
                kernels.entry(device).or_default().push((s.start_us, s.end_us));
            }
        }
        for k in kernels.values_mut() {
            *k = union(std::mem::take(k));
        }
        let first = kernel_spans.iter().map(|s| s.start_us).fold(f64::INFINITY, f64::min);
        let last = kernel_spans.iter().map(|s| s.end_us).fold(f64::NEG_INFINITY, f64::max);
        let window_us = if kernel_spans.is_empty() { 0.0 } else { last - first };
        let fraction = |us: f64| if window_us > 0.0 { us / window_us } else { 0.0 };

        let mut gaps = BTreeMap::new();
        let mut per_device = Vec::new();
        for (&device, busy) in &kernels {
            // Gaps between this device's kernels, and from the window's start to its first kernel: a
            // device idle while the others ran is idle too.
            let mut idle = Vec::new();
            let mut at = first;
            for &(s, e) in busy {
                if s > at {
                    idle.push((at, s));
                }
                at = at.max(e);
            }
            if window_us > 0.0 && at < last {
                idle.push((at, last));
            }
            let mut rest = idle;
            for cause in GapCause::ALL {
                if cause == GapCause::SynthesisStarvation {
                    let starved = total(&rest);
                    if starved > 0.0 {
                        *gaps.entry(cause).or_insert(0.0) += starved / 1e6;
                    }
                    break;
                }
                let cut: Vec<(f64, f64)> = spans
                    .iter()
                    .filter(|s| cause.covers(s, device))
                    .map(|s| (s.start_us, s.end_us))
                    .collect();
                let (left, removed) = subtract(&rest, &union(cut));
                if removed > 0.0 {
                    *gaps.entry(cause).or_insert(0.0) += removed / 1e6;
                }
                rest = left;
            }
            let holds: Vec<(f64, f64)> = spans
                .iter()
                .filter(|s| s.kind == SpanKind::KernelLock && s.lane.device() == Some(device))
                .map(|s| (s.start_us, s.end_us))
                .collect();
            let partitions: BTreeSet<(u64, usize)> = kernel_spans
                .iter()
                .filter(|s| s.lane == Lane::Kernels { device })
                .map(|s| (s.job, s.partition))
                .collect();
            per_device.push(DeviceReport {
                device,
                partitions: partitions.len(),
                kernel_s: total(busy) / 1e6,
                kernel_utilization: fraction(total(busy)),
                lock_utilization: fraction(total(&clip(&union(holds), first, last))),
            });
        }
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
        let n = per_device.len().max(1) as f64;
        Self {
            placed_on_device: spans.iter().any(|s| s.kind == SpanKind::Copy),
            window_s: window_us / 1e6,
            devices: devices.len(),
            kernel_utilization: per_device.iter().map(|d| d.kernel_utilization).sum::<f64>() / device_count,
            lock_utilization: per_device.iter().map(|d| d.lock_utilization).sum::<f64>() / n,
            steady_kernel_utilization: steady_utilization(&kernel_spans, &kernels, device_count),
            per_device,
            gaps,
            jobs,
            steady_state_s_per_job,
        }
    }

    /// Whether synthesis failed to keep the GPU fed for a noticeable share (over 5%) of the window.
    pub fn synthesis_bound(&self) -> bool {
        self.gaps.get(&GapCause::SynthesisStarvation).copied().unwrap_or(0.0)
            > 0.05 * self.window_s * self.devices.max(1) as f64
    }

    /// Where the kernel spans come from, in words.
    pub fn placement(&self) -> &'static str {
        if self.placed_on_device {
            "kernel spans placed by the device clock"
        } else {
            "host spans: the backend does not time a device"
        }
    }

    /// A human-readable summary.
    pub fn render(&self) -> String {
        let mut s = String::new();
        s += &format!("kernel window            {:.3} s, {} device(s)\n", self.window_s, self.devices);
        s += &format!(
            "kernel utilisation       {:.1}% ({})\n",
            100.0 * self.kernel_utilization,
            self.placement()
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
        if self.per_device.len() > 1 {
            for d in &self.per_device {
                s += &format!(
                    "device {}: {} partitions, kernels {:.3} s ({:.1}%), lock held {:.1}%\n",
                    d.device,
                    d.partitions,
                    d.kernel_s,
                    100.0 * d.kernel_utilization,
                    100.0 * d.lock_utilization
                );
            }
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

    fn span(job: u64, partition: usize, kind: &str, lane: &str, start_ms: f64, end_ms: f64) -> Span {
        Span {
            job,
            partition,
            kind: kind.parse().unwrap(),
            lane: lane.parse().unwrap(),
            start_us: start_ms * 1e3,
            end_us: end_ms * 1e3,
        }
    }

    /// Two kernels on device 0 with a 10 ms gap between them, from 10 to 20 ms.
    fn gapped() -> Vec<Span> {
        vec![
            span(1, 0, "kernel:msm_h", "gpu0-kernels", 0.0, 10.0),
            span(1, 1, "kernel:msm_h", "gpu0-kernels", 20.0, 30.0),
        ]
    }

    #[test]
    fn each_cause_takes_the_part_of_a_gap_its_spans_cover() {
        let cases = [
            ("upload", "gpu0-w0", GapCause::Upload),
            ("copy", "gpu0-copies", GapCause::Upload),
            ("kernel_lock", "gpu0-w1", GapCause::HostWorkInLock),
            ("kernel_lock_wait", "gpu0-w1", GapCause::KernelLockWait),
            ("memory_lock_wait", "gpu0-w0", GapCause::SlotWait),
            ("gpu_queue", "queue", GapCause::GpuWorkerWait),
            ("finish", "gpu0-w0", GapCause::Finish),
            ("budget_wait", "synth-0", GapCause::Budget),
        ];
        for (kind, lane, cause) in cases {
            let mut spans = gapped();
            // 4 ms of the gap are the cause's; the other 6 are starvation.
            spans.push(span(1, 1, kind, lane, 12.0, 16.0));
            let r = TimelineReport::from_spans(&spans);
            let got = r.gaps.get(&cause).copied().unwrap_or(0.0);
            assert!((got - 0.004).abs() < 1e-9, "{kind} on {lane}: {:?}", r.gaps);
            let starved = r.gaps.get(&GapCause::SynthesisStarvation).copied().unwrap_or(0.0);
            assert!((starved - 0.006).abs() < 1e-9, "{kind}: {:?}", r.gaps);
        }
        // Earlier causes take precedence: an upload and a lock hold over the same time count as upload.
        let mut spans = gapped();
        spans.push(span(1, 1, "upload", "gpu0-w0", 10.0, 20.0));
        spans.push(span(1, 1, "kernel_lock", "gpu0-w1", 10.0, 20.0));
        let r = TimelineReport::from_spans(&spans);
        assert_eq!(r.gaps.keys().copied().collect::<Vec<_>>(), [GapCause::Upload]);
    }

    #[test]
    fn lanes_match_their_device_exactly_and_idle_devices_count() {
        // A worker of device 10 holding its lock does not explain device 1's gap.
        let mut spans = vec![
            span(1, 0, "kernel:msm_h", "gpu1-kernels", 0.0, 10.0),
            span(1, 1, "kernel:msm_h", "gpu1-kernels", 20.0, 30.0),
        ];
        spans.push(span(1, 1, "kernel_lock", "gpu10-w0", 10.0, 20.0));
        let r = TimelineReport::from_spans(&spans);
        assert_eq!(r.devices, 2, "device 10 is named by a worker lane");
        // Device 10's lock covers 10 ms of device 10's own idle time, never device 1's gap: device 1's
        // 10 ms and device 10's other 20 ms have nothing to explain them but starvation.
        let gap = |c| r.gaps.get(&c).copied().unwrap_or(0.0);
        assert!((gap(GapCause::HostWorkInLock) - 0.010).abs() < 1e-9, "{:?}", r.gaps);
        assert!((gap(GapCause::SynthesisStarvation) - 0.030).abs() < 1e-9, "{:?}", r.gaps);
        // Device 10 ran nothing in the 30 ms window: the devices' time was 20 of 60 ms busy.
        assert!((r.kernel_utilization - 20.0 / 60.0).abs() < 1e-9, "{}", r.kernel_utilization);
        let d10 = r.per_device.iter().find(|d| d.device == 10).unwrap();
        assert_eq!((d10.partitions, d10.kernel_s), (0, 0.0));
        assert!((d10.lock_utilization - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn lock_utilisation_is_per_device_not_merged() {
        // Device 0's lock is held 0..10 ms, device 1's 0..10 ms too: merged they would read 10 of 20
        // over two devices; per device each is 10 of 20, so 50%, not 25%.
        let spans = vec![
            span(1, 0, "kernel:msm_h", "gpu0-kernels", 0.0, 20.0),
            span(1, 1, "kernel:msm_h", "gpu1-kernels", 0.0, 20.0),
            span(1, 0, "kernel_lock", "gpu0-w0", 0.0, 10.0),
            span(1, 1, "kernel_lock", "gpu1-w0", 0.0, 10.0),
        ];
        let r = TimelineReport::from_spans(&spans);
        assert!((r.lock_utilization - 0.5).abs() < 1e-9, "{}", r.lock_utilization);
        assert!(r.per_device.iter().all(|d| (d.lock_utilization - 0.5).abs() < 1e-9));
        assert!((r.kernel_utilization - 1.0).abs() < 1e-9);
    }

    #[test]
    fn steady_state_is_measured_on_device_time_and_leaves_out_filling_up_and_draining() {
        // Twenty partitions of 9 ms of kernels, 1 ms apart, except that the device idles 100 ms before
        // the second and before the last (filling up and draining).
        let mut spans = Vec::new();
        let mut t = 0.0;
        for p in 0..20 {
            if p == 1 || p == 19 {
                t += 100.0;
            }
            spans.push(span(1, p, "kernel:msm_h", "gpu0-kernels", t, t + 9.0));
            // The lock is held only while queuing: it says nothing about the device.
            spans.push(span(1, p, "kernel_lock", "gpu0-w0", t, t + 0.5));
            t += 10.0;
        }
        let r = TimelineReport::from_spans(&spans);
        let steady = r.steady_kernel_utilization.unwrap();
        // Kept: partitions 2..18, from 2's first kernel to 17's last: 16 kernels of 9 ms over 159 ms.
        assert!((steady - 16.0 * 9.0 / 159.0).abs() < 1e-9, "{steady}");
        assert!(r.kernel_utilization < 0.5, "{}", r.kernel_utilization);
        assert!(r.render().contains("steady-state kernel use"), "{}", r.render());
        assert!(r.lock_utilization < 0.1, "{}", r.lock_utilization);
        // Too few partitions to tell a steady state apart.
        assert_eq!(TimelineReport::from_spans(&spans[..8]).steady_kernel_utilization, None);
    }

    #[test]
    fn the_report_says_whether_its_kernel_spans_are_the_devices_own() {
        let mut spans = gapped();
        let host = TimelineReport::from_spans(&spans);
        assert!(!host.placed_on_device);
        assert!(host.render().contains("host spans"), "{}", host.render());
        spans.push(span(1, 0, "copy", "gpu0-copies", 0.0, 5.0));
        let device = TimelineReport::from_spans(&spans);
        assert!(device.placed_on_device);
        assert!(device.render().contains("placed by the device clock"), "{}", device.render());
    }
}
