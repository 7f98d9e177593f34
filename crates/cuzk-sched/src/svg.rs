//! The timeline as a Gantt chart in SVG (`cuzk timeline FILE --svg OUT`): one row per lane
//! (synthesis workers, each GPU worker, each device's kernels), time across, one colour per kind of
//! step, waits pale, lock holds as thin bars under a worker's row. Every bar has a tooltip (job,
//! partition, step, duration).

use cuzk_groth16::Stage;

use crate::{Lane, Span, SpanKind};

/// Colours by step; waits are pale so the eye goes to work.
fn colour(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Synthesis => "#4e79a7",
        SpanKind::Upload | SpanKind::Copy => "#f28e2b",
        SpanKind::Finish => "#b07aa1",
        k if k.is_wait() => "#d9d9d9",
        SpanKind::MemoryLock => "#f6c28b",
        SpanKind::KernelLock => "#8cd17d",
        SpanKind::Kernel(s) if s == Stage::Msms || Stage::MSMS.contains(&s) => "#59a14f",
        SpanKind::Kernel(_) => "#2f7d32",
        _ => "#9c9c9c",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Lanes in reading order: synthesis workers by number (priority workers after the others), then
/// each device's workers and its kernels. The queue lane (per-partition waiting, which overlaps itself)
/// is left out.
fn lanes(spans: &[Span]) -> Vec<Lane> {
    let mut lanes: Vec<Lane> = spans.iter().map(|s| s.lane).filter(|l| *l != Lane::Queue).collect();
    let key = |l: &Lane| match *l {
        Lane::Synth(n) => (0, 0, n, 0),
        Lane::PrioritySynth(n) => (0, 1, n, 0),
        Lane::GpuWorker { device, worker } => (1, device, 0, worker),
        Lane::Copies { device } => (1, device, 1, 0),
        Lane::Kernels { device } => (1, device, 2, 0),
        Lane::Queue => (2, 0, 0, 0),
    };
    lanes.sort_by_key(key);
    lanes.dedup();
    lanes
}

/// Renders `spans` with `title` above. Fails when there is nothing to draw.
pub fn gantt(spans: &[Span], title: &str) -> Result<String, String> {
    let lanes = lanes(spans);
    let drawn: Vec<&Span> = spans.iter().filter(|s| s.lane != Lane::Queue).collect();
    let (Some(t0), Some(t1)) = (
        drawn.iter().map(|s| s.start_us).min_by(f64::total_cmp),
        drawn.iter().map(|s| s.end_us).max_by(f64::total_cmp),
    ) else {
        return Err("the timeline has no spans to draw".into());
    };
    let (label_w, plot_w, row_h, top) = (110.0, 1400.0, 22.0, 56.0);
    let span_us = (t1 - t0).max(1.0);
    let x = |us: f64| label_w + (us - t0) / span_us * plot_w;
    let height = top + row_h * lanes.len() as f64 + 60.0;
    let width = label_w + plot_w + 20.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{label_w}\" y=\"20\" font-size=\"14\">{}</text>\n",
        escape(title)
    );
    // Time axis: about ten ticks at a round step.
    let secs = span_us / 1e6;
    let magnitude = 10f64.powf((secs / 10.0).log10().floor());
    let step =
        [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * magnitude).find(|s| secs / s <= 12.0).unwrap_or(0.0);
    let bottom = top + row_h * lanes.len() as f64;
    let mut tick = (t0 / 1e6 / step).ceil() * step;
    while step > 0.0 && step.is_finite() && tick * 1e6 <= t1 {
        let tx = x(tick * 1e6);
        out += &format!(
            "<line x1=\"{tx:.1}\" y1=\"{:.1}\" x2=\"{tx:.1}\" y2=\"{bottom:.1}\" stroke=\"#eeeeee\"/>\n<text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}s</text>\n",
            top - 4.0,
            bottom + 14.0,
            (tick * 1000.0).round() / 1000.0
        );
        tick += step;
    }
    for (i, lane) in lanes.iter().enumerate() {
        let y = top + row_h * i as f64;
        out += &format!("<text x=\"4\" y=\"{:.1}\">{}</text>\n", y + row_h * 0.65, lane);
        let mut row: Vec<&&Span> = drawn.iter().filter(|s| s.lane == *lane).collect();
        // Holds first, so the steps they bracket are drawn over them.
        row.sort_by_key(|s| !s.kind.is_hold());
        for s in row {
            let (x0, x1) = (x(s.start_us), x(s.end_us));
            let (ry, rh) = if s.kind.is_hold() { (y + row_h - 5.0, 4.0) } else { (y + 2.0, row_h - 8.0) };
            out += &format!(
                "<rect x=\"{x0:.2}\" y=\"{ry:.1}\" width=\"{:.2}\" height=\"{rh:.1}\" fill=\"{}\"><title>job {} partition {}: {} {:.3} ms</title></rect>\n",
                (x1 - x0).max(0.5),
                colour(s.kind),
                s.job,
                s.partition,
                s.kind,
                s.duration_us() / 1e3
            );
        }
    }
    let legend = [
        (SpanKind::Synthesis, "synthesis"),
        (SpanKind::Upload, "upload"),
        (SpanKind::Kernel(Stage::MsmH), "MSM kernels"),
        (SpanKind::Kernel(Stage::WitnessMap), "other kernels"),
        (SpanKind::Finish, "finish"),
        (SpanKind::KernelLockWait, "waits"),
        (SpanKind::MemoryLock, "memory lock held"),
        (SpanKind::KernelLock, "kernel lock held"),
    ];
    for (i, (kind, label)) in legend.iter().enumerate() {
        let lx = label_w + 170.0 * i as f64;
        let ly = bottom + 30.0;
        out += &format!(
            "<rect x=\"{lx}\" y=\"{ly}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{label}</text>\n",
            colour(*kind),
            lx + 16.0,
            ly + 10.0
        );
    }
    out += "</svg>\n";
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(kind: &str, lane: &str, start_us: f64, end_us: f64) -> Span {
        Span {
            job: 1,
            partition: 2,
            kind: kind.parse().unwrap(),
            lane: lane.parse().unwrap(),
            start_us,
            end_us,
        }
    }

    #[test]
    fn lanes_read_top_down_and_every_step_is_a_bar_with_a_tooltip() {
        let spans = [
            span("queued", "queue", 0.0, 10.0),
            span("synthesis", "synth-10", 0.0, 5e5),
            span("synthesis", "synth-2", 0.0, 4e5),
            span("kernel:msm_a", "gpu0-kernels", 6e5, 7e5),
            span("memory_lock", "gpu0-w1", 5e5, 6e5),
            span("upload", "gpu0-w1", 5e5, 5.9e5),
            span("kernel:witness_map", "gpu1-kernels", 6e5, 6.5e5),
            span("finish", "gpu0-w0", 7e5, 8e5),
        ];
        let svg = gantt(&spans, "a <test> & more").unwrap();
        let order: Vec<usize> = ["synth-2", "synth-10", "gpu0-w0", "gpu0-w1", "gpu0-kernels", "gpu1-kernels"]
            .iter()
            .map(|l| svg.find(&format!(">{l}</text>")).unwrap_or_else(|| panic!("lane {l}")))
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "lanes out of order: {order:?}");
        assert!(!svg.contains(">queue</text>"));
        assert_eq!(svg.matches("<title>").count(), 7, "one bar per step, the queue left out");
        assert!(svg.contains("a &lt;test&gt; &amp; more"));
        assert!(svg.contains("job 1 partition 2: kernel:msm_a 100.000 ms"));
        // The hold is drawn before (under) the upload it brackets.
        assert!(svg.find("memory_lock 100.000").unwrap() < svg.find("upload 90.000").unwrap());
        assert!(svg.contains(">0.5s</text>"), "ticks at round seconds");
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(gantt(&[span("queued", "queue", 0.0, 1.0)], "").is_err());
    }
}
