//! What `cuzk prove` and `cuzk bench` report: per-stage times (the stages named once, by
//! `cuzk::Stage`), the pipeline's timeline figures, side-by-side variants, and the comparison with
//! ark-groth16; as JSON or as a table.

use std::collections::BTreeMap;

use cuzk::sched::{Span, SpanKind};
use cuzk::{PerStage, ProofReport, Stage, Summary};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// Seconds of some stages, written as a JSON object keyed by [`Stage::name`] in stage order.
#[derive(Clone)]
pub(crate) struct Seconds {
    values: PerStage<f64>,
    stages: &'static [Stage],
    /// Stages the source did not measure: written as null, left out of tables.
    unmeasured: Vec<Stage>,
}

/// The stages a GPU backend times on the device, and the upload.
const DEVICE_AND_UPLOAD: [Stage; 7] =
    [Stage::Upload, Stage::WitnessMap, Stage::MsmA, Stage::MsmBG1, Stage::MsmBG2, Stage::MsmL, Stage::MsmH];

impl Default for Seconds {
    fn default() -> Self {
        Self { values: PerStage::default(), stages: &Stage::ALL, unmeasured: Vec::new() }
    }
}

impl Seconds {
    fn get(&self, s: Stage) -> f64 {
        self.values[s]
    }
}

impl Serialize for Seconds {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.stages.len()))?;
        for &stage in self.stages {
            let value = (!self.unmeasured.contains(&stage)).then_some(self.values[stage]);
            map.serialize_entry(stage.name(), &value)?;
        }
        map.end()
    }
}

/// Stage times of partition 0.
#[derive(serde::Serialize, Default, Clone)]
pub(crate) struct Stages {
    pub(crate) synthesis: f64,
    /// Host wall time per stage (`msms`: the MSM phase, whose MSMs may run concurrently).
    #[serde(flatten)]
    pub(crate) host: Seconds,
    pub(crate) total: f64,
    /// The GPU stages on the device's clock (CUDA events), when the backend times them.
    pub(crate) device: Option<DeviceStages>,
}

/// Device time of the GPU stages of partition 0, in seconds.
#[derive(serde::Serialize, Default, Clone)]
pub(crate) struct DeviceStages {
    /// The witness map and each MSM; `upload`: a, b, c and z on the copy stream's clock from the start
    /// of staging to the last copy (host conversion included; not in `total`).
    #[serde(flatten)]
    pub(crate) stages: Seconds,
    /// The partition's GPU time: the witness map and the MSMs.
    pub(crate) total: f64,
    /// Per stage, the kinds of work inside it: (stage, step, seconds).
    pub(crate) steps: Vec<(&'static str, &'static str, f64)>,
}

fn secs(d: std::time::Duration) -> f64 {
    d.as_secs_f64()
}

impl Stages {
    /// Partition 0's stages as its report gives them.
    pub(crate) fn of(r: &ProofReport) -> Self {
        let s = &r.stages;
        Self {
            synthesis: secs(r.synthesis),
            host: Seconds {
                values: s.host.iter().map(|(st, d)| (st, secs(d))).collect(),
                stages: &Stage::ALL,
                unmeasured: Vec::new(),
            },
            total: secs(r.total),
            device: s.device.map(|d| DeviceStages {
                stages: Seconds {
                    values: DEVICE_AND_UPLOAD.iter().map(|&st| (st, secs(d[st]))).collect(),
                    stages: &DEVICE_AND_UPLOAD,
                    unmeasured: Vec::new(),
                },
                total: s.device_total().map_or(0.0, secs),
                steps: s.steps.iter().map(|(st, step, t)| (st.name(), *step, secs(*t))).collect(),
            }),
        }
    }

    /// Partition 0's stages as the pipeline's timeline recorded them.
    pub(crate) fn from_timeline(spans: &[Span]) -> Self {
        // Partition 0 of the first job (every job has a partition 0).
        let job = spans.iter().map(|s| s.job).min().unwrap_or(0);
        let ours = || spans.iter().filter(move |s| s.job == job && s.partition == 0);
        // (`+ 0.0`: an empty sum of floats is -0.0.)
        let of = |kind: SpanKind| {
            ours().filter(|s| s.kind == kind).map(|s| s.duration_us() / 1e6).sum::<f64>() + 0.0
        };
        let seen = |kind: SpanKind| ours().any(|s| s.kind == kind);
        let first = ours().map(|s| s.start_us).fold(f64::INFINITY, f64::min);
        let last = ours().map(|s| s.end_us).fold(0.0, f64::max);
        let mut host = PerStage::default();
        host[Stage::Upload] = of(SpanKind::Upload);
        // Per-MSM spans come from backends that time the device (the CPU logs one MSM phase).
        for stage in [Stage::WitnessMap, Stage::Assembly].into_iter().chain(Stage::MSMS) {
            host[stage] = of(SpanKind::Kernel(stage));
        }
        host[Stage::Msms] = of(SpanKind::Kernel(Stage::Msms))
            + Stage::MSMS.iter().map(|&m| of(SpanKind::Kernel(m))).sum::<f64>();
        // The pipeline checks a proof in its finish step, after the device slot is free.
        host[Stage::SelfCheck] = of(SpanKind::Finish);
        // A device's timeline has its stages on the device only: assembly is host work it does not
        // span; the CPU's has one MSM phase. What has no span was not measured, not zero.
        let mut unmeasured: Vec<Stage> = [Stage::WitnessMap, Stage::Assembly]
            .into_iter()
            .chain(Stage::MSMS)
            .filter(|&st| !seen(SpanKind::Kernel(st)))
            .collect();
        if !seen(SpanKind::Upload) {
            unmeasured.push(Stage::Upload);
        }
        if !seen(SpanKind::Kernel(Stage::Msms)) && Stage::MSMS.iter().all(|&m| !seen(SpanKind::Kernel(m))) {
            unmeasured.push(Stage::Msms);
        }
        Self {
            synthesis: of(SpanKind::Synthesis),
            host: Seconds { values: host, stages: &Stage::ALL, unmeasured },
            total: if first.is_finite() { (last - first) / 1e6 } else { 0.0 },
            device: None,
        }
    }

    /// Table rows; the per-MSM rows only when they were measured (a pipelined run on the CPU logs
    /// one MSM phase).
    fn rows(&self) -> Vec<(&'static str, f64)> {
        let measured = |s: &Stage| !self.host.unmeasured.contains(s);
        let row = |s: Stage| (s.label(), self.host.get(s));
        let per_msm: Vec<_> = Stage::MSMS.into_iter().filter(measured).map(row).collect();
        let mut rows = vec![("synthesis", self.synthesis)];
        rows.extend([Stage::Upload, Stage::WitnessMap].into_iter().filter(measured).map(row));
        if per_msm.iter().any(|(_, s)| *s > 0.0) {
            rows.extend(per_msm);
        }
        rows.extend([Stage::Msms, Stage::Assembly, Stage::SelfCheck].into_iter().filter(measured).map(row));
        rows.push(("total", self.total));
        rows
    }
}

/// Repeated measurements in seconds: how many, and their minimum, median and maximum (one rule
/// everywhere: [`cuzk::Summary`]).
#[derive(serde::Serialize, Clone, Copy)]
pub(crate) struct Times {
    pub(crate) count: usize,
    pub(crate) min: f64,
    pub(crate) median: f64,
    pub(crate) max: f64,
}

impl From<Summary> for Times {
    fn from(s: Summary) -> Self {
        Self { count: s.count, min: s.min, median: s.median, max: s.max }
    }
}

impl std::fmt::Display for Times {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.count == 1 {
            write!(f, "{:>10.3} s  (1 run)", self.median)
        } else {
            write!(
                f,
                "{:>10.3} s  (median of {}: {:.3} to {:.3})",
                self.median, self.count, self.min, self.max
            )
        }
    }
}

/// ark-groth16's side of a `bench`: its wall time, and its two phases (all partitions, per run).
#[derive(serde::Serialize)]
pub(crate) struct ArkFigures {
    pub(crate) wall: Times,
    /// Its synthesis (constraint system, inlined linear combinations).
    pub(crate) synthesis: Option<Times>,
    /// The rest of its prover: matrices, witness map, MSMs.
    pub(crate) prove: Option<Times>,
}

/// What a pipelined run's timeline says.
#[derive(serde::Serialize, Clone)]
pub(crate) struct PipelineFigures {
    /// Where the kernel spans come from: "device clock" (placed where the device ran them) or "host"
    /// (the CPU backend's prover phases).
    pub(crate) kernel_spans: &'static str,
    /// Kernel time over the kernel window, from the kernel spans.
    pub(crate) kernel_utilization: f64,
    /// Time a kernel lock was held over the window: what a bracket around the locked region claims.
    pub(crate) lock_utilization: f64,
    /// Kernel utilisation with the first and last tenth of the partitions left out.
    pub(crate) steady_kernel_utilization: Option<f64>,
    /// Kernel time per partition (sum of the kernel spans / partitions).
    pub(crate) kernel_seconds_per_partition: f64,
    /// Seconds per proof over kernel time per proof (divided among the devices): 1.0 when no GPU ever
    /// waits.
    pub(crate) per_proof_over_kernel_time: f64,
    /// Mean gap between consecutive proofs' completions, after the first.
    pub(crate) steady_state_seconds_per_proof: Option<f64>,
    /// Whether synthesis failed to keep the GPU fed for more than 5% of the window.
    pub(crate) synthesis_bound: bool,
    /// Gaps between kernels by cause, in seconds.
    pub(crate) gaps: BTreeMap<&'static str, f64>,
    /// Per proof: seconds queued before its first partition started, and from then to its end.
    pub(crate) proof_queue_seconds: Vec<f64>,
    pub(crate) proof_prove_seconds: Vec<f64>,
}

/// The shape of a run, for [`PipelineFigures::of`].
pub(crate) struct RunShape {
    /// Partitions of all proofs.
    pub(crate) partitions: usize,
    /// Partitions per proof.
    pub(crate) per_proof: usize,
    /// Proofs.
    pub(crate) proofs: usize,
    /// Devices the key is resident on.
    pub(crate) devices: usize,
}

impl PipelineFigures {
    pub(crate) fn of(timeline: &cuzk::sched::Timeline, run: &RunShape, wall: f64) -> Self {
        let spans = timeline.spans();
        let report = cuzk::sched::report::TimelineReport::from_spans(&spans);
        let kernel_s: f64 = spans.iter().filter(|s| s.kind.is_kernel()).map(|s| s.duration_us() / 1e6).sum();
        let per_partition = kernel_s / run.partitions.max(1) as f64;
        Self {
            kernel_spans: if report.placed_on_device { "device clock" } else { "host" },
            kernel_utilization: report.kernel_utilization,
            lock_utilization: report.lock_utilization,
            steady_kernel_utilization: report.steady_kernel_utilization,
            kernel_seconds_per_partition: per_partition,
            per_proof_over_kernel_time: (wall / run.proofs.max(1) as f64)
                / (per_partition * run.per_proof as f64 / run.devices.max(1) as f64).max(1e-12),
            steady_state_seconds_per_proof: report.steady_state_s_per_job,
            synthesis_bound: report.synthesis_bound(),
            gaps: report.gaps.iter().map(|(c, s)| (c.name(), *s)).collect(),
            proof_queue_seconds: report.jobs.iter().map(|j| j.queue_s).collect(),
            proof_prove_seconds: report.jobs.iter().map(|j| j.prove_s).collect(),
        }
    }
}

/// One side-by-side configuration of `bench --compare`.
#[derive(serde::Serialize)]
pub(crate) struct Variant {
    pub(crate) gpu_workers: usize,
    pub(crate) merge_locks: bool,
    pub(crate) seconds: f64,
    pub(crate) seconds_per_proof: f64,
    #[serde(flatten)]
    pub(crate) figures: PipelineFigures,
    /// Whether its proofs equal the main run's, partition for partition.
    pub(crate) same_proofs: bool,
}

/// The whole report of `cuzk prove` / `cuzk bench`.
#[derive(serde::Serialize)]
pub(crate) struct Output {
    pub(crate) command: &'static str,
    pub(crate) backend: &'static str,
    /// The GPUs proved on, by ordinal (empty on the CPU).
    pub(crate) devices: Vec<usize>,
    pub(crate) backend_note: Option<String>,
    /// "synthetic" or "porep-like".
    pub(crate) circuit: &'static str,
    pub(crate) log_constraints: u32,
    pub(crate) constraints: usize,
    /// Partitions of all proofs together.
    pub(crate) partitions: usize,
    /// Proofs (jobs), each of `partitions / proofs` partitions.
    pub(crate) proofs: usize,
    /// With --pipeline: GPU workers per device, and whether upload and kernels shared one lock.
    pub(crate) gpu_workers: Option<usize>,
    pub(crate) merge_locks: Option<bool>,
    /// "full", "witness-only" or "compact" (witness-only, a, b, c evaluated on the GPU).
    pub(crate) synthesis_mode: &'static str,
    /// On a GPU: the units the NTT passes and G1's batched MSM round multiplied on ("integer",
    /// "fp64" or "mixed"; --mul-units).
    pub(crate) mul_units: Option<&'static str>,
    /// Bytes one partition's upload copies to the device (partition 0's: its compact assignment, or
    /// a, b, c and z in full); none on the CPU.
    pub(crate) upload_bytes_per_partition: Option<u64>,
    /// "setup" (ark-groth16's key generation) or "timing" (see the timing-key module).
    pub(crate) key: &'static str,
    pub(crate) keygen_seconds: f64,
    /// Of `keygen_seconds`, the time a timing key spent recording the circuit's shape (none for a
    /// setup).
    pub(crate) shape_seconds: Option<f64>,
    /// Wall time of proving all partitions (the median over repetitions for `bench`).
    pub(crate) seconds: f64,
    /// The same over every repetition.
    pub(crate) wall: Times,
    pub(crate) seconds_per_partition: f64,
    pub(crate) seconds_per_proof: f64,
    /// Device time of every partition's witness map and MSMs, summed, per repetition (not on the CPU).
    pub(crate) gpu_seconds: Option<Times>,
    pub(crate) proofs_verified: usize,
    /// Stage times of partition 0 (of the run nearest the median, for `bench`).
    pub(crate) stages: Stages,
    /// With --pipeline: the timeline figures of the run nearest the median.
    #[serde(flatten)]
    pub(crate) pipeline: Option<PipelineFigures>,
    /// With --compare: the same partitions with other GPU-worker and lock settings.
    pub(crate) variants: Vec<Variant>,
    /// ark-groth16 on the same partitions, taking turns with cuzk's runs.
    pub(crate) arkworks: Option<ArkFigures>,
    /// ark-groth16's median wall time over cuzk's: end to end, synthesis included on both sides.
    pub(crate) end_to_end_vs_arkworks: Option<f64>,
    /// ark-groth16's median proving time after its synthesis (matrices, witness map, MSMs) over cuzk's
    /// median device time of the witness map and MSMs: the GPU's work against the CPU's.
    pub(crate) gpu_time_vs_arkworks: Option<f64>,
    pub(crate) identical_to_arkworks: Option<bool>,
    /// With a timing key: whether every checked proof equals the key's closed-form proof.
    pub(crate) equal_to_closed_form: Option<bool>,
    /// With a timing key: how many partitions were checked (all, or the `--check-sample`).
    pub(crate) closed_form_checked: Option<usize>,
    /// How the key sat on each GPU: its MSM tables, widened batches and memory, one sentence each
    /// (printed as notes without --json).
    pub(crate) key_on_device: Vec<String>,
}

/// The report as a table.
pub(crate) fn print_table(o: &Output) {
    let on = match o.devices.as_slice() {
        [] => String::new(),
        [d] => format!(" (GPU {d})"),
        many => format!(" (GPUs {})", many.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(",")),
    };
    println!(
        "cuzk {}: backend {}{on}, {} circuit, 2^{} rows ({} constraints) x {} partitions",
        o.command, o.backend, o.circuit, o.log_constraints, o.constraints, o.partitions
    );
    if let (Some(g), Some(merged)) = (o.gpu_workers, o.merge_locks) {
        println!(
            "  pipeline: {g} GPU worker(s) per device, {}",
            if merged { "one lock" } else { "memory and kernel locks" }
        );
    }
    match o.shape_seconds {
        Some(shape) => println!(
            "  key generation            {:>10.3} s  ({} key; the circuit's shape recorded in {shape:.3} s)",
            o.keygen_seconds, o.key
        ),
        None => println!("  key generation            {:>10.3} s  ({} key)", o.keygen_seconds, o.key),
    }
    println!("  synthesis mode            {:>10}", o.synthesis_mode);
    if let Some(units) = o.mul_units {
        println!("  multiplication units      {units:>10}");
    }
    if let Some(bytes) = o.upload_bytes_per_partition {
        println!("  upload per partition      {:>10.1} MiB", bytes as f64 / (1u64 << 20) as f64);
    }
    println!("  stages of partition 0:");
    for (name, secs) in o.stages.rows() {
        println!("    {name:<22}  {:>10.3} s", secs);
    }
    if let Some(d) = &o.stages.device {
        println!("  on the device (CUDA events), partition 0:");
        for stage in Stage::DEVICE {
            println!("    {:<22}  {:>10.3} s", stage.label(), d.stages.get(stage));
        }
        println!("    {:<22}  {:>10.3} s", "GPU time", d.total);
        println!("    {:<22}  {:>10.3} s", "upload (staging, copies)", d.stages.get(Stage::Upload));
        if !d.steps.is_empty() {
            println!("  inside the stages (device time per kind of work):");
            for (stage, step, secs) in &d.steps {
                println!("    {:<32}  {:>10.4} s", format!("{stage}: {step}"), secs);
            }
        }
    }
    println!("  all partitions (wall)     {}", o.wall);
    println!("    per partition           {:>10.3} s", o.seconds_per_partition);
    if let Some(g) = &o.gpu_seconds {
        println!("  GPU time (all partitions) {g}");
    }
    if o.proofs > 1 {
        println!("  per proof ({} proofs)      {:>10.3} s", o.proofs, o.seconds_per_proof);
    }
    println!("  proofs verified           {:>10} / {}", o.proofs_verified, o.partitions);
    if let Some(p) = &o.pipeline {
        println!(
            "  kernel utilisation        {:>9.1}% (kernel spans on the {} clock; lock bracket {:.1}%)",
            100.0 * p.kernel_utilization,
            if p.kernel_spans == "host" { "host's" } else { "device's" },
            100.0 * p.lock_utilization
        );
        if let Some(u) = p.steady_kernel_utilization {
            println!(
                "  in steady state           {:>9.1}% (first and last tenth of the partitions left out)",
                100.0 * u
            );
        }
        println!(
            "  kernel time per partition {:>10.3} s  (s/proof = {:.3} x partitions x kernel time)",
            p.kernel_seconds_per_partition, p.per_proof_over_kernel_time
        );
        if p.synthesis_bound {
            println!("  synthesis did not keep up: the GPU waited for it over 5% of the window");
        }
    }
    if !o.variants.is_empty() {
        print_variants(o);
    }
    if let Some(a) = &o.arkworks {
        println!("  ark-groth16 (wall)        {}", a.wall);
        if let (Some(syn), Some(prove)) = (&a.synthesis, &a.prove) {
            println!("    its synthesis           {:>10.3} s  (median)", syn.median);
            println!(
                "    its proving             {:>10.3} s  (median; matrices, witness map, MSMs)",
                prove.median
            );
        }
    }
    if let Some(x) = o.end_to_end_vs_arkworks {
        println!(
            "  vs ark-groth16, end to end{x:>10.2}x  (median wall over median wall, synthesis on both sides)"
        );
    }
    if let Some(x) = o.gpu_time_vs_arkworks {
        println!(
            "  vs ark-groth16, GPU time  {x:>10.2}x  (its proving after synthesis over cuzk's device time)"
        );
    }
    match (o.equal_to_closed_form, o.closed_form_checked) {
        (Some(ok), Some(n)) => println!(
            "  proofs equal to the timing key's closed form: {} ({n} of {} partitions checked)",
            if ok { "yes" } else { "NO" },
            o.partitions
        ),
        (None, Some(0)) => println!(
            "  proofs NOT checked against the timing key's closed form (0 of {} partitions)",
            o.partitions
        ),
        _ => {}
    }
    if let Some(same) = o.identical_to_arkworks {
        println!("  proofs identical to ark-groth16: {}", if same { "yes" } else { "NO" });
    }
}

fn print_variants(o: &Output) {
    println!("  side by side (same partitions):");
    println!(
        "    {:<28} {:>10} {:>9} {:>9} {:>11} {:>6}",
        "configuration", "s/proof", "kernel", "lock", "synth-bound", "same"
    );
    let main = o
        .pipeline
        .as_ref()
        .map(|p| (o.gpu_workers.unwrap_or(0), o.merge_locks.unwrap_or(false), o.seconds_per_proof, p, true));
    let rows = main.into_iter().chain(
        o.variants
            .iter()
            .map(|v| (v.gpu_workers, v.merge_locks, v.seconds_per_proof, &v.figures, v.same_proofs)),
    );
    for (g, merged, spp, f, same) in rows {
        let name = format!("{g} GPU worker(s), {}", if merged { "one lock" } else { "two locks" });
        println!(
            "    {name:<28} {spp:>10.3} {:>8.1}% {:>8.1}% {:>11} {:>6}",
            100.0 * f.kernel_utilization,
            100.0 * f.lock_utilization,
            if f.synthesis_bound { "yes" } else { "no" },
            if same { "yes" } else { "NO" }
        );
    }
}
