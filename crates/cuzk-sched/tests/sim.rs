//! The scheduler on the simulated backend: ordering, overlap, budget, priorities, cancellation,
//! failures, deadlines, duplicate ids and the timeline formats.

use std::time::{Duration, Instant};

use cuzk_sched::{Config, JobError, JobId, Lane, Priority, Scheduler, Span, SpanKind, Stage, SubmitError};
use cuzk_testkit::sim::SimStages;

const MS: Duration = Duration::from_millis(1);

fn stages(synth_ms: u32, upload_ms: u32, kernel_ms: u32) -> SimStages {
    SimStages {
        synthesis: synth_ms * MS,
        upload: upload_ms * MS,
        kernels: vec![
            (Stage::WitnessMap, kernel_ms / 2 * MS),
            (Stage::Msms, (kernel_ms - kernel_ms / 2) * MS),
        ],
        finish: MS,
        host_bytes: 100,
        ..SimStages::default()
    }
}

fn config(workers: usize, gpu_workers: usize) -> Config {
    Config {
        partition_workers: workers,
        priority_workers: 0,
        devices: 1,
        gpu_workers_per_device: gpu_workers,
        slots_per_device: 2,
        host_budget_bytes: 1 << 20,
        merge_locks: false,
        timeline_spans: None,
    }
}

fn spans_of(spans: &[Span], kind: SpanKind) -> Vec<&Span> {
    spans.iter().filter(|s| s.kind == kind).collect()
}

#[test]
fn outputs_come_back_in_partition_order() {
    let s = Scheduler::new(stages(2, 1, 2), config(3, 2));
    let tags: Vec<u64> = (0..7).map(|i| 100 + i).collect();
    let out = s.submit(JobId(1), Priority::Normal, None, tags.clone()).unwrap().wait().unwrap();
    assert_eq!(out.iter().map(|(t, _)| *t).collect::<Vec<_>>(), tags);
    assert_eq!(s.live_jobs(), 0, "a finished job is forgotten");
    assert_eq!(s.budget().used(), 0);
}

#[test]
fn oldest_job_first_within_a_priority() {
    let s = Scheduler::new(stages(5, 1, 1), config(1, 1));
    let a = s.submit(JobId(1), Priority::Normal, None, vec![0; 3]).unwrap();
    let b = s.submit(JobId(2), Priority::Normal, None, vec![0; 3]).unwrap();
    a.wait().unwrap();
    b.wait().unwrap();
    let order: Vec<(u64, usize)> =
        spans_of(&s.timeline().spans(), SpanKind::Synthesis).iter().map(|s| (s.job, s.partition)).collect();
    assert_eq!(order, vec![(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]);
}

#[test]
fn urgent_job_overtakes_at_the_next_partition_boundary() {
    let s = Scheduler::new(stages(20, 1, 1), config(1, 1));
    let bulk = s.submit(JobId(1), Priority::Low, None, vec![0; 40]).unwrap();
    while bulk.status().is_some_and(|st| st.queued == 40) {
        std::thread::sleep(MS);
    }
    // Bulk partitions started when the urgent job arrives: the worker may take one more before it.
    let started = bulk.status().map(|st| st.partitions - st.queued).unwrap();
    let urgent = s.submit(JobId(2), Priority::Urgent, None, vec![7]).unwrap();
    urgent.wait().unwrap();
    assert!(bulk.cancel(), "the bulk job is still running");
    let synth = spans_of(&s.timeline().spans(), SpanKind::Synthesis)
        .iter()
        .map(|s| (s.job, s.partition))
        .collect::<Vec<_>>();
    let urgent_pos = synth.iter().position(|p| *p == (2, 0)).unwrap();
    assert!(urgent_pos <= started + 1, "urgent synthesized at position {urgent_pos} of {synth:?}");
}

#[test]
fn a_priority_worker_starts_urgent_work_at_once_and_never_takes_bulk_work() {
    let cfg = Config { priority_workers: 1, ..config(1, 1) };
    let s = Scheduler::new(stages(100, 1, 1), cfg);
    let bulk = s.submit(JobId(1), Priority::Normal, None, vec![0; 3]).unwrap();
    // The bulk worker is busy with the first bulk partition (100 ms) when the urgent job arrives.
    while bulk.status().is_some_and(|st| st.synthesizing == 0) {
        std::thread::sleep(MS);
    }
    let urgent = s.submit(JobId(2), Priority::Urgent, None, vec![7]).unwrap();
    urgent.wait().unwrap();
    bulk.wait().unwrap();
    let spans = s.timeline().spans();
    let synthesis = spans_of(&spans, SpanKind::Synthesis);
    // At once: it started while a bulk partition was being synthesized on the other worker, not after
    // waiting for the bulk worker.
    let urgent = synthesis.iter().find(|s| s.job == 2).unwrap();
    assert!(
        synthesis.iter().any(|b| b.job == 1 && b.start_us <= urgent.start_us && urgent.start_us < b.end_us),
        "urgent started outside every bulk synthesis: {synthesis:?}"
    );
    let lanes = |job: u64| -> Vec<Lane> {
        spans_of(&spans, SpanKind::Synthesis).iter().filter(|s| s.job == job).map(|s| s.lane).collect()
    };
    assert_eq!(lanes(2), [Lane::PrioritySynth(0)], "the urgent partition runs on the priority worker");
    assert_eq!(lanes(1), [Lane::Synth(0); 3], "bulk partitions never run on the priority worker");
}

#[test]
fn an_urgent_partition_takes_the_next_room_in_a_full_budget() {
    // Room for one partition on the host; three bulk workers, one priority worker.
    let cfg = Config { partition_workers: 3, priority_workers: 1, host_budget_bytes: 100, ..config(3, 1) };
    // Synthesis long enough (150 ms) that the priority worker queues for the room before it frees.
    let s = Scheduler::new(stages(150, 1, 1), cfg);
    let bulk = s.submit(JobId(1), Priority::Normal, None, vec![0; 6]).unwrap();
    // One bulk partition synthesizes; the other two workers wait for the budget.
    while s.budget().waiters() < 2 {
        std::thread::sleep(MS);
    }
    let urgent = s.submit(JobId(2), Priority::Urgent, None, vec![7]).unwrap();
    urgent.wait().unwrap();
    bulk.wait().unwrap();
    let spans = s.timeline().spans();
    let mut synth: Vec<&Span> = spans_of(&spans, SpanKind::Synthesis);
    synth.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
    let order: Vec<(u64, usize)> = synth.iter().map(|s| (s.job, s.partition)).collect();
    assert_eq!(
        order[1],
        (2, 0),
        "the urgent partition synthesized second, ahead of the waiting bulk ones: {order:?}"
    );
}

#[test]
fn upload_of_the_next_partition_overlaps_the_kernels_of_the_previous() {
    let overlap = |merge: bool| {
        let mut cfg = config(4, 2);
        cfg.merge_locks = merge;
        let s = Scheduler::new(stages(1, 20, 40), cfg);
        s.submit(JobId(1), Priority::Normal, None, vec![0; 6]).unwrap().wait().unwrap();
        let spans = s.timeline().spans();
        let uploads = spans_of(&spans, SpanKind::Upload);
        let kernels = spans_of(&spans, SpanKind::KernelLock);
        uploads.iter().filter(|u| kernels.iter().any(|k| k.partition != u.partition && k.overlaps(u))).count()
    };
    assert!(overlap(false) >= 3, "with two locks uploads overlap kernels");
    assert_eq!(overlap(true), 0, "with one merged lock nothing overlaps");
}

#[test]
fn kernel_spans_are_where_the_device_ran_them_on_its_own_lane() {
    let st = stages(1, 1, 30);
    let device = st.device.clone();
    let s = Scheduler::new(st, config(2, 2));
    s.submit(JobId(9), Priority::Normal, None, vec![0; 3]).unwrap().wait().unwrap();
    let spans = s.timeline().spans();
    let kernels: Vec<_> = spans.iter().filter(|s| s.kind.is_kernel()).collect();
    assert_eq!(kernels.len(), 6);
    assert!(kernels.iter().all(|k| k.lane == Lane::Kernels { device: 0 }));
    // Against the device's own record: each partition's kernels span exactly what it ran.
    let truth = device.truth();
    assert_eq!(truth.len(), 3);
    for ran in truth {
        let ours: Vec<_> = kernels.iter().filter(|k| k.partition == ran.part.index).collect();
        let first = ours.iter().map(|k| k.start_us).fold(f64::INFINITY, f64::min);
        let last = ours.iter().map(|k| k.end_us).fold(0.0, f64::max);
        let (start, end) = (s.timeline().at(ran.start), s.timeline().at(ran.end));
        assert!((first - start).abs() < 1.0 && (last - end).abs() < 1.0, "{ran:?}: {first}..{last}");
    }
}

#[test]
fn a_copy_that_lands_late_leaves_the_device_idle_and_the_report_says_why() {
    use cuzk_sched::report::{GapCause, TimelineReport};
    // Four partitions, 20 ms of kernels each; partition 2's copy lands 150 ms after its upload step.
    // One synthesis worker, so partitions reach the device in order and partition 2 is never the
    // first (whose wait would fall before the window).
    let mut st = stages(1, 1, 20);
    st.copy_delays.insert((JobId(1), 2), 150 * MS);
    st.release_when_queued = true;
    let device = st.device.clone();
    let s = Scheduler::new(st, config(1, 2));
    s.submit(JobId(1), Priority::Normal, None, vec![0; 4]).unwrap().wait().unwrap();
    let spans = s.timeline().spans();
    let r = TimelineReport::from_spans(&spans);
    // Ground truth: the device's busy time over its first-to-last window.
    let truth = device.truth();
    let (w0, w1) = (truth.iter().map(|t| t.start).min().unwrap(), truth.iter().map(|t| t.end).max().unwrap());
    let busy: f64 = truth.iter().map(|t| (t.end - t.start).as_secs_f64()).sum();
    let true_use = busy / (w1 - w0).as_secs_f64();
    assert!((r.kernel_utilization - true_use).abs() < 0.01, "{} vs {true_use}", r.render());
    assert!(true_use < 0.8, "the late copy left the device idle: {true_use}");
    let upload = r.gaps.get(&GapCause::Upload).copied().unwrap_or(0.0);
    assert!(upload > 0.05, "the idle time waits on the copy: {}", r.render());
    assert!(spans.iter().any(|s| s.kind == SpanKind::Copy && s.lane == Lane::Copies { device: 0 }));
}

#[test]
fn releasing_the_kernel_lock_once_queued_keeps_the_device_busy_through_the_host_epilogue() {
    use cuzk_sched::report::TimelineReport;
    // 40 ms of kernels and 20 ms of host work collecting them, per partition, two GPU workers.
    let run = |release: bool| {
        let mut st = stages(1, 2, 40);
        st.collect = 20 * MS;
        st.release_when_queued = release;
        let s = Scheduler::new(st, config(4, 2));
        let out = s.submit(JobId(1), Priority::Normal, None, (0..12).collect()).unwrap().wait().unwrap();
        assert_eq!(out.iter().map(|(tag, _)| *tag).collect::<Vec<_>>(), (0..12).collect::<Vec<_>>());
        let spans = s.timeline().spans();
        // The device runs one partition's kernels at a time: its lane never overlaps itself.
        let mut lane: Vec<_> = spans.iter().filter(|s| s.kind.is_kernel()).collect();
        lane.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
        assert!(lane.windows(2).all(|w| w[1].start_us >= w[0].end_us - 1e-6), "kernel spans overlap");
        TimelineReport::from_spans(&spans)
    };
    let held = run(false);
    let released = run(true);
    // Holding the lock through the collection leaves the device idle for it: about 40 / 60.
    assert!(held.kernel_utilization < 0.8, "{}", held.render());
    assert!(released.kernel_utilization > 0.9, "{}", released.render());
    // With the lock released at queueing, the lock bracket no longer covers the kernels.
    assert!(released.lock_utilization < released.kernel_utilization, "{}", released.render());
}

#[test]
fn synthesis_waits_for_budget_instead_of_exceeding_it() {
    let mut cfg = config(6, 1);
    cfg.host_budget_bytes = 300;
    let s = Scheduler::new(stages(5, 10, 10), cfg);
    s.submit(JobId(1), Priority::Normal, None, vec![0; 10]).unwrap().wait().unwrap();
    assert!(s.budget().peak() <= 300, "peak {} over the budget", s.budget().peak());
    assert_eq!(s.budget().peak(), 300, "the budget was the limit");
    assert_eq!(s.budget().used(), 0, "everything was given back");
    assert!(spans_of(&s.timeline().spans(), SpanKind::BudgetWait).iter().any(|w| w.duration_us() > 1000.0));
}

/// The most partitions holding host memory at once: from the start of synthesis to the end of the
/// upload.
fn most_in_flight(spans: &[Span]) -> usize {
    let synth = spans_of(spans, SpanKind::Synthesis);
    let upload = spans_of(spans, SpanKind::Upload);
    let mut edges = Vec::new();
    for s in synth {
        let end = upload.iter().find(|u| (u.job, u.partition) == (s.job, s.partition)).map(|u| u.end_us);
        edges.push((s.start_us, 1i32));
        edges.push((end.unwrap_or(f64::INFINITY), -1));
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

#[test]
fn a_compact_partition_gives_back_what_synthesis_no_longer_holds() {
    // Six synthesis workers, a budget of three syntheses, a slow upload: partitions queue for the GPU.
    let mut cfg = config(6, 1);
    cfg.host_budget_bytes = 300;
    let run = |held: Option<u64>| {
        let s = Scheduler::new(SimStages { held_bytes: held, ..stages(5, 15, 5) }, cfg.clone());
        s.submit(JobId(1), Priority::Normal, None, vec![0; 12]).unwrap().wait().unwrap();
        assert!(s.budget().peak() <= 300, "peak {} over the budget", s.budget().peak());
        assert_eq!(s.budget().used(), 0, "everything was given back");
        most_in_flight(&s.timeline().spans())
    };
    let (full, compact) = (run(None), run(Some(10)));
    assert!(full <= 3, "{full} partitions of 100 bytes in a budget of 300");
    assert!(compact > full, "compact partitions: {compact} in flight, full ones {full}");
}

#[test]
fn a_partition_larger_than_the_budget_fails_its_job_clearly() {
    let mut cfg = config(2, 1);
    cfg.host_budget_bytes = 50;
    let s = Scheduler::new(stages(1, 1, 1), cfg);
    let err = s.submit(JobId(1), Priority::Normal, None, vec![0; 2]).unwrap().wait().unwrap_err();
    assert!(matches!(err, JobError::Budget { .. }), "{err}");
    assert!(err.to_string().contains("can never fit"), "{err}");
}

#[test]
fn cancel_drops_queued_work_returns_budget_and_spares_other_jobs() {
    let s = Scheduler::new(stages(10, 2, 5), config(1, 1));
    // Far more partitions than run before the cancel: queued ones cost nothing once dropped.
    let victim = s.submit(JobId(1), Priority::Normal, None, vec![0; 2000]).unwrap();
    let other = s.submit(JobId(2), Priority::Normal, None, vec![1; 2]).unwrap();
    std::thread::sleep(25 * MS);
    assert!(victim.cancel());
    assert!(!victim.cancel(), "a second cancel finds nothing");
    assert_eq!(victim.wait().unwrap_err(), JobError::Cancelled);
    assert_eq!(other.wait().unwrap().len(), 2);
    let synthesized =
        spans_of(&s.timeline().spans(), SpanKind::Synthesis).iter().filter(|s| s.job == 1).count();
    assert!(synthesized < 2000, "queued partitions were dropped ({synthesized} synthesized)");
    std::thread::sleep(30 * MS);
    assert_eq!(s.budget().used(), 0);
}

#[test]
fn a_failed_partition_fails_only_its_job() {
    let mut st = stages(2, 1, 2);
    st.failures.insert((JobId(1), 2, "kernels"));
    st.failures.insert((JobId(3), 0, "synthesis"));
    let s = Scheduler::new(st, config(3, 2));
    let bad = s.submit(JobId(1), Priority::Normal, None, vec![0; 4]).unwrap();
    let good = s.submit(JobId(2), Priority::Normal, None, vec![0; 4]).unwrap();
    let bad_synth = s.submit(JobId(3), Priority::Normal, None, vec![0; 2]).unwrap();
    match bad.wait().unwrap_err() {
        JobError::Partition { index, source } => {
            assert_eq!(index, 2);
            assert_eq!(source.stage, "kernels");
        }
        other => panic!("expected a partition failure, got {other}"),
    }
    assert!(matches!(bad_synth.wait(), Err(JobError::Partition { index: 0, .. })));
    assert_eq!(good.wait().unwrap().len(), 4);
    let later = s.submit(JobId(4), Priority::Normal, None, vec![0; 2]).unwrap();
    assert_eq!(later.wait().unwrap().len(), 2, "the workers recovered");
}

#[test]
fn duplicate_live_ids_and_empty_jobs_are_refused() {
    let s = Scheduler::new(stages(20, 1, 1), config(1, 1));
    let first = s.submit(JobId(5), Priority::Normal, None, vec![0; 2]).unwrap();
    assert_eq!(
        s.submit(JobId(5), Priority::High, None, vec![0]).unwrap_err(),
        SubmitError::DuplicateId(JobId(5))
    );
    assert_eq!(s.submit(JobId(6), Priority::High, None, vec![]).unwrap_err(), SubmitError::Empty(JobId(6)));
    first.wait().unwrap();
    assert!(s.submit(JobId(5), Priority::Normal, None, vec![0]).is_ok(), "a finished id may be reused");
}

#[test]
fn deadlines_and_wait_timeouts() {
    // 300 ms of synthesis: still running after the 5 ms wait below, however the thread is scheduled.
    let s = Scheduler::new(stages(100, 1, 1), config(1, 1));
    let slow = s.submit(JobId(1), Priority::Normal, None, vec![0; 3]).unwrap();
    let late = s.submit(JobId(2), Priority::Normal, Some(Instant::now() + 10 * MS), vec![0]).unwrap();
    assert_eq!(slow.wait_timeout(5 * MS).unwrap_err(), JobError::Timeout);
    assert!(slow.status().is_some(), "a timed-out wait leaves the job running");
    assert!(matches!(late.wait(), Err(JobError::DeadlineExceeded { index: 0 })));
    assert_eq!(slow.wait_timeout(Duration::from_secs(10)).unwrap().len(), 3);
}

#[test]
fn shutdown_fails_live_jobs() {
    let s = Scheduler::new(stages(50, 1, 1), config(1, 1));
    let h = s.submit(JobId(1), Priority::Normal, None, vec![0; 5]).unwrap();
    drop(s);
    assert_eq!(h.wait().unwrap_err(), JobError::ShutDown);
}

#[test]
fn timeline_writes_json_lines_and_a_chrome_trace() {
    let s = Scheduler::new(stages(1, 1, 2), config(2, 2));
    s.submit(JobId(3), Priority::Normal, None, vec![0; 2]).unwrap().wait().unwrap();
    let lines = s.timeline().to_json_lines();
    for line in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["end_us"].as_f64() >= v["start_us"].as_f64());
    }
    for kind in ["queued", "budget_wait", "synthesis", "memory_lock_wait", "upload", "kernel_lock", "finish"]
    {
        assert!(lines.contains(&format!("\"kind\":\"{kind}\"")), "missing {kind}");
    }
    let trace: serde_json::Value = serde_json::from_str(&s.timeline().to_chrome_trace()).unwrap();
    assert!(trace.as_array().is_some_and(|a| a.iter().any(|e| e["ph"] == "X")));
}

#[test]
fn report_separates_kernel_time_from_lock_time_and_names_gaps() {
    use cuzk_sched::report::{parse_json_lines, GapCause, TimelineReport};
    // Synthesis far slower than the GPU: the GPU starves, and the report must say so.
    let s = Scheduler::new(stages(40, 2, 10), config(1, 2));
    for j in 0..3 {
        s.submit(JobId(j), Priority::Normal, None, vec![0; 2]).unwrap().wait().unwrap();
    }
    let spans = parse_json_lines(&s.timeline().to_json_lines()).unwrap();
    let original = s.timeline().spans();
    assert_eq!(spans.len(), original.len());
    let same = spans.iter().zip(&original).all(|(a, b)| {
        (a.job, a.partition, &a.kind, &a.lane) == (b.job, b.partition, &b.kind, &b.lane)
            && (a.start_us - b.start_us).abs() < 1e-3
            && (a.end_us - b.end_us).abs() < 1e-3
    });
    assert!(same, "JSON lines round-trip");
    let r = TimelineReport::from_spans(&spans);
    assert!(r.kernel_utilization < 0.6, "{}", r.render());
    assert!(r.lock_utilization >= r.kernel_utilization);
    assert!(r.synthesis_bound(), "{}", r.render());
    assert!(r.gaps.contains_key(&GapCause::SynthesisStarvation));
    assert_eq!(r.jobs.len(), 3);
    assert!(r.steady_state_s_per_job.is_some_and(|x| x > 0.05));

    // Fast synthesis, two workers: kernels nearly always busy.
    let s = Scheduler::new(stages(1, 5, 60), config(4, 2));
    s.submit(JobId(1), Priority::Normal, None, vec![0; 8]).unwrap().wait().unwrap();
    let r = TimelineReport::from_spans(&s.timeline().spans());
    assert!(r.kernel_utilization > 0.8, "{}", r.render());
    assert!(!r.synthesis_bound(), "{}", r.render());
    assert!(parse_json_lines("{\"job\": 1}").is_err());
}

/// A minimal executor: polls `f`, parking the thread until its waker fires.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[test]
fn handles_can_be_awaited_and_cancelled_from_async_code() {
    let s = Scheduler::new(stages(3, 1, 2), config(2, 2));
    let a = s.submit(JobId(1), Priority::Normal, None, vec![10, 11, 12]).unwrap();
    let b = s.submit(JobId(2), Priority::Normal, None, vec![0; 3000]).unwrap();
    let out = block_on(async move {
        let status = a.status();
        assert!(status.is_none_or(|st| st.partitions == 3));
        a.await
    });
    assert_eq!(out.unwrap().iter().map(|(t, _)| *t).collect::<Vec<_>>(), vec![10, 11, 12]);
    assert!(b.cancel());
    assert_eq!(block_on(b), Err(JobError::Cancelled));
    let c = s.submit(JobId(3), Priority::Normal, None, vec![0; 40]).unwrap();
    drop(s);
    assert_eq!(block_on(c), Err(JobError::ShutDown), "shutdown wakes awaiting tasks");
}
