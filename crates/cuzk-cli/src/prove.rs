//! `cuzk prove` and `cuzk bench`: a key for a built-in circuit (a real setup, or a timing key), the
//! workload's partitions proved one by one or through the pipeline, repeated for `bench`, side by
//! side with ark-groth16 on the same partitions and randomness.

use std::sync::Arc;
use std::time::Instant;

use ark_bls12_381::{Bls12_381, Fr};
use ark_ff::UniformRand;
use ark_groth16::Groth16;
use cuzk::{Config, Engine, Proof, Summary};
use rand::{rngs::StdRng, SeedableRng};
use rayon::prelude::*;

use crate::flags::{BenchArgs, Workload};
use crate::output::{print, CmdError};
use crate::progress::Progress;
use crate::report::{print_table, ArkFigures, Output, PipelineFigures, RunShape, Stages, Variant};
use crate::timing_key::{ClosedForm, TimingKey};
use crate::workload::Partition;

/// Partitions of up to 2^22 rows checked against a timing key's closed form at once.
const CHECKED_AT_ONCE: usize = 4;

/// One partition's input to the pipeline: its circuit and blinding scalars.
type Input = (Partition, Fr, Fr);

/// Wall seconds, the proofs in order, and the timeline of a pipelined run.
type Pipelined = (f64, Vec<Proof<Bls12_381>>, Arc<cuzk::sched::Timeline>);

/// Runs `cuzk prove`.
pub(crate) fn prove(w: &Workload) -> Result<(), CmdError> {
    finish(w, run(w, None, false)?)
}

/// Runs `cuzk bench` (without a subcommand).
pub(crate) fn bench(a: &BenchArgs) -> Result<(), CmdError> {
    finish(&a.workload, run(&a.workload, Some(a.repeat as usize), !a.no_baseline)?)
}

/// Prints the report, then fails if any check failed.
fn finish(w: &Workload, out: Output) -> Result<(), CmdError> {
    print(w.json, &out, print_table)?;
    if out.variants.iter().any(|v| !v.same_proofs) {
        return Err("a side-by-side configuration proved different proofs".into());
    }
    if out.equal_to_closed_form == Some(false) {
        return Err("proofs differ from the timing key's closed form".into());
    }
    if out.identical_to_arkworks == Some(false) {
        return Err("proofs differ from ark-groth16's".into());
    }
    Ok(())
}

/// Proves `inputs` as jobs of `per_proof` partitions through the scheduler.
fn pipelined(
    engine: &Engine,
    key: &cuzk::Key,
    inputs: &[Input],
    per_proof: usize,
    sched: cuzk::sched::Config,
) -> Result<Pipelined, cuzk::Error> {
    let jobs = inputs.chunks(per_proof.max(1)).map(<[_]>::to_vec).collect();
    let t = Instant::now();
    let run = engine.prove_pipelined_jobs(key, jobs, sched)?;
    let wall = t.elapsed().as_secs_f64();
    Ok((wall, run.proofs.into_iter().flatten().collect(), run.timeline))
}

/// The key of a run: a real setup or a timing key (with its closed form and the shape it was made
/// from), and how long it took.
struct RunKey {
    pk: cuzk::ProvingKey<Bls12_381>,
    closed_form: Option<ClosedForm>,
    /// The shape a timing key was made from, until the engine takes it.
    shape: Option<cuzk::R1csShape>,
    seconds: f64,
    /// Of `seconds`, the time a timing key spent recording the circuit's shape.
    shape_seconds: Option<f64>,
}

fn make_key(w: &Workload, shape: Partition, rng: &mut StdRng) -> Result<RunKey, CmdError> {
    let t = Instant::now();
    // A timing key keeps only its closed form for the check: its points and its shape go to the
    // engine, so a key of tens of GiB is held once.
    let (pk, closed_form, shape, shape_seconds) = if w.timing_key {
        let _progress = Progress::spinner("making a timing key", w.json);
        let recorded = shape.shape()?;
        let shape_seconds = t.elapsed().as_secs_f64();
        let tk = TimingKey::new(&recorded, rng);
        (tk.pk, Some(tk.closed_form), Some(recorded), Some(shape_seconds))
    } else {
        let _progress = Progress::spinner("generating the key", w.json);
        (Groth16::<Bls12_381>::generate_random_parameters_with_reduction(shape, rng)?, None, None, None)
    };
    Ok(RunKey { pk, closed_form, shape, seconds: t.elapsed().as_secs_f64(), shape_seconds })
}

/// One timed run of ark-groth16 over the workload.
struct ArkRun {
    wall: f64,
    /// Its synthesis of every partition, and the rest of its prover (matrices, witness map, MSMs).
    synthesis: f64,
    prove: f64,
    proofs: Vec<Proof<Bls12_381>>,
}

/// ark-groth16 as a user would run it: one partition after another, each with all cores (its own
/// parallelism), its two phases timed apart (see the `ark` module).
fn arkworks(
    pk: &cuzk::ProvingKey<Bls12_381>,
    inputs: &[Input],
    progress: &Progress,
) -> Result<ArkRun, CmdError> {
    let t = Instant::now();
    let (mut synthesis, mut prove, mut proofs) = (0.0, 0.0, Vec::new());
    for (c, r, s) in inputs {
        let p = crate::ark::prove(*c, pk, *r, *s)?;
        synthesis += p.synthesis_seconds;
        prove += p.prove_seconds;
        proofs.push(p.proof);
        progress.tick();
    }
    Ok(ArkRun { wall: t.elapsed().as_secs_f64(), synthesis, prove, proofs })
}

/// One timed run of cuzk over the workload.
struct CuzkRun {
    wall: f64,
    proofs: Vec<Proof<Bls12_381>>,
    /// Partition 0's stages.
    stages: Stages,
    /// Device time of every partition's witness map and MSMs, summed; `None` without a device.
    gpu_seconds: Option<f64>,
    timeline: Option<Arc<cuzk::sched::Timeline>>,
}

/// The parts of a run that stay the same from one repetition to the next.
struct Setup<'a> {
    engine: &'a Engine,
    key: &'a cuzk::Key,
    w: &'a Workload,
    inputs: &'a [Input],
    sched: cuzk::sched::Config,
}

impl Setup<'_> {
    fn cuzk(&self, progress: &Progress) -> Result<CuzkRun, CmdError> {
        let (engine, key, inputs) = (self.engine, self.key, self.inputs);
        if self.w.pipeline {
            let (wall, proofs, timeline) =
                pipelined(engine, key, inputs, self.w.partitions as usize, self.sched.clone())?;
            let spans = timeline.spans();
            // Only a backend that places its device work gives device time.
            let placed = spans.iter().any(|s| s.kind == cuzk::sched::SpanKind::Copy);
            let kernels = spans.iter().filter(|s| s.kind.is_kernel()).map(|s| s.duration_us() / 1e6).sum();
            for _ in inputs {
                progress.tick();
            }
            Ok(CuzkRun {
                wall,
                proofs,
                stages: Stages::from_timeline(&spans),
                gpu_seconds: placed.then_some(kernels),
                timeline: Some(timeline),
            })
        } else {
            let t = Instant::now();
            let (circuits, randomness) = inputs.iter().map(|(c, r, s)| (*c, (*r, *s))).unzip();
            let reports =
                engine.prove_partitions_observed(key, circuits, randomness, &|_, _| progress.tick())?;
            let wall = t.elapsed().as_secs_f64();
            let gpu: Option<Vec<f64>> =
                reports.iter().map(|r| r.stages.device_total().map(|d| d.as_secs_f64())).collect();
            Ok(CuzkRun {
                wall,
                stages: Stages::of(&reports[0]),
                proofs: reports.into_iter().map(|r| r.proof).collect(),
                gpu_seconds: gpu.map(|g| g.iter().sum()),
                timeline: None,
            })
        }
    }
}

/// The partitions a check of `sample` of `len` looks at: all when `sample` is `None` or at least
/// `len`, else `sample` indices spread evenly, the first and the last included.
pub(crate) fn sample_indices(len: usize, sample: Option<usize>) -> Vec<usize> {
    match sample {
        Some(0) => Vec::new(),
        Some(k) if k < len && k > 1 => (0..k).map(|j| j * (len - 1) / (k - 1)).collect(),
        Some(1) if len > 1 => vec![0],
        _ => (0..len).collect(),
    }
}

/// Whether every run's proof of the sampled partitions (and every variant's) equals the timing
/// key's proof in closed form, and how many partitions were checked.
fn check_closed_form(
    w: &Workload,
    closed_form: &ClosedForm,
    inputs: &[Input],
    runs: &[&[Proof<Bls12_381>]],
) -> Result<(bool, usize), CmdError> {
    let sampled = sample_indices(inputs.len(), w.check_sample.map(|k| k as usize));
    if let (Some(note), false) = (check_cost_note(w.log_constraints, sampled.len()), w.json) {
        eprintln!("note: {note}");
    }
    let progress = Progress::bar("checking", sampled.len(), w.json);
    // A few partitions at a time: synthesis is largely sequential per partition, and each one's
    // working set must fit in memory beside the others'.
    let at_once = if w.log_constraints <= 22 { CHECKED_AT_ONCE } else { 1 };
    let check = |i: usize| -> Result<bool, String> {
        let (c, r, s) = &inputs[i];
        let expected = closed_form.expected_proof(*c, *r, *s)?;
        progress.tick();
        Ok(runs.iter().all(|p| p.get(i) == Some(&expected)))
    };
    let mut all = true;
    for batch in sampled.chunks(at_once) {
        let oks = batch.par_iter().map(|&i| check(i)).collect::<Result<Vec<bool>, String>>()?;
        all &= oks.into_iter().all(|ok| ok);
    }
    Ok((all, sampled.len()))
}

/// Fewest rows (log2) from which a check against the closed form is worth a warning first.
const COSTLY_CHECK_LOG: u32 = 25;

/// A warning before `checked` partitions of `2^log` rows are checked against the closed form, when
/// that costs minutes: each check is arkworks' synthesis and witness map of the partition on the CPU.
fn check_cost_note(log: u32, checked: usize) -> Option<String> {
    (log >= COSTLY_CHECK_LOG && checked > 0).then(|| {
        format!(
            "checking {checked} partition(s) of 2^{log} rows against the timing key's closed form: each is \
             a CPU synthesis and witness map of the partition (minutes and tens of GiB at this size); \
             --check-sample 0 skips the check, --check-sample N checks N"
        )
    })
}

/// Bytes partition `c`'s upload copies: its compact assignment when the engine evaluates on the GPU,
/// else a, b, c and z in full; `None` on the CPU, or when the key has no shape to count from.
fn upload_bytes(engine: &Engine, key: &cuzk::Key, c: Partition) -> Result<Option<u64>, CmdError> {
    let Some(counts) = key.shape_counts().filter(|_| engine.backend_name() != "cpu") else { return Ok(None) };
    if engine.synthesis_mode(key) == cuzk::SynthesisMode::Compact {
        let w = cuzk::synth::synthesize_compact(c, counts).map_err(|e| e.to_string())?;
        return Ok(Some(w.upload_bytes()));
    }
    Ok(Some(32 * (3 * counts.domain_size() + counts.variables()) as u64))
}

fn run(w: &Workload, repeat: Option<usize>, baseline: bool) -> Result<Output, CmdError> {
    let config = Config {
        cuda_devices: w.devices.clone(),
        evaluate_on_device: !w.host_evaluation,
        msm_tables: !w.no_msm_tables,
        mul_units: w.mul_units.into(),
        ..Config::default().with_backend(w.backend)
    };
    let engine = Engine::new(Config { verify_proofs: config.verify_proofs && !w.timing_key, ..config })?;
    if let (Some(note), false) = (engine.backend_note(), w.json) {
        eprintln!("note: {note}");
    }
    let mut rng = StdRng::seed_from_u64(w.seed);
    let partitions = w.partitions()?;
    let shape = partitions[0];
    let RunKey { pk, closed_form, shape: recorded, seconds: keygen_seconds, shape_seconds } =
        make_key(w, shape, &mut rng)?;
    // The ark-groth16 baseline proves with the key after the engine has loaded it: only then a copy.
    let (engine_pk, pk) = if baseline { (pk.clone(), Some(pk)) } else { (pk, None) };
    let key = {
        let _progress = Progress::spinner("loading the key", w.json);
        match (recorded, w.witness_only) {
            (Some(recorded), true) => engine.load_key_with_shape(engine_pk, Arc::new(recorded))?,
            (None, true) => engine.load_key_recording_shape(engine_pk, shape)?,
            (_, false) => engine.load_key(engine_pk)?,
        }
    };
    let key_on_device = key_on_device(&key);
    if !w.json {
        for line in &key_on_device {
            eprintln!("note: {line}");
        }
    }
    let randomness: Vec<(Fr, Fr)> =
        (0..partitions.len()).map(|_| (Fr::rand(&mut rng), Fr::rand(&mut rng))).collect();
    let per_proof = w.partitions as usize;

    let defaults = cuzk::sched::Config::default();
    let sched = cuzk::sched::Config {
        partition_workers: w.partition_workers.unwrap_or(defaults.partition_workers),
        gpu_workers_per_device: w.gpu_workers.map_or(defaults.gpu_workers_per_device, |g| g as usize),
        merge_locks: w.merge_locks,
        ..defaults
    };
    let inputs: Vec<Input> = partitions.iter().zip(&randomness).map(|(c, (r, s))| (*c, *r, *s)).collect();
    let setup = Setup { engine: &engine, key: &key, w, inputs: &inputs, sched: sched.clone() };
    if repeat.is_some() {
        // Both sides prove one partition untimed first: kernels loaded, buffers allocated, caches
        // warm, threads started.
        let _progress = Progress::spinner("warming up", w.json);
        let (c, r, s) = inputs[0];
        engine.prove_partitions_report(&key, vec![c], vec![(r, s)])?;
        if let Some(pk) = &pk {
            crate::ark::prove(c, pk, r, s)?;
        }
    }
    // The two sides take turns, so a machine that slows down (heat, other load) slows both.
    let runs = repeat.unwrap_or(1).max(1);
    let sides = 1 + usize::from(pk.is_some());
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let progress = Progress::bar(
        if pk.is_some() { "both sides" } else { engine.backend_name() },
        runs * sides * inputs.len(),
        w.json,
    );
    for _ in 0..runs {
        ours.push(setup.cuzk(&progress)?);
        if let Some(pk) = &pk {
            theirs.push(arkworks(pk, &inputs, &progress)?);
        }
    }
    drop(progress);
    let walls: Vec<f64> = ours.iter().map(|r| r.wall).collect();
    let wall = Summary::of(&walls).ok_or("no run finished")?;
    // The details (stages, timeline) shown are the run nearest the median.
    let shown = &ours[wall.nearest_median(&walls).unwrap_or(0)];
    let proofs = &shown.proofs;
    let gpu: Option<Vec<f64>> = ours.iter().map(|r| r.gpu_seconds).collect();
    let gpu = gpu.as_deref().and_then(Summary::of);
    let identical = theirs.first().map(|first| {
        ours.iter().all(|r| r.proofs == first.proofs) && theirs.iter().all(|t| t.proofs == first.proofs)
    });
    let ark = Summary::of(&theirs.iter().map(|t| t.wall).collect::<Vec<_>>()).map(|ark_wall| {
        let of = |f: fn(&ArkRun) -> f64| Summary::of(&theirs.iter().map(f).collect::<Vec<_>>());
        ArkFigures {
            wall: ark_wall.into(),
            synthesis: of(|t| t.synthesis).map(Into::into),
            prove: of(|t| t.prove).map(Into::into),
        }
    });
    let end_to_end = ark.as_ref().map(|a| a.wall.median / wall.median);
    let gpu_ratio = match (&ark, &gpu) {
        (Some(ArkFigures { prove: Some(p), .. }), Some(g)) if g.median > 0.0 => Some(p.median / g.median),
        _ => None,
    };
    let partitions = proofs.len();
    let proof_count = partitions.div_ceil(per_proof.max(1));
    let shape_of_run = RunShape { partitions, per_proof, proofs: proof_count, devices: key.devices() };
    let pipeline = shown.timeline.as_ref().map(|t| PipelineFigures::of(t, &shape_of_run, shown.wall));
    let last_timeline = shown.timeline.clone();
    let (mut variants, mut variant_proofs) = (Vec::new(), Vec::new());
    if w.compare {
        let others = [
            cuzk::sched::Config { gpu_workers_per_device: 1, merge_locks: false, ..sched.clone() },
            cuzk::sched::Config { merge_locks: !sched.merge_locks, ..sched.clone() },
        ];
        for other in others {
            let (wall, theirs, timeline) = pipelined(&engine, &key, &inputs, per_proof, other.clone())?;
            let same_proofs = &theirs == proofs;
            variant_proofs.push(theirs);
            variants.push(Variant {
                gpu_workers: other.gpu_workers_per_device,
                merge_locks: other.merge_locks,
                seconds: wall,
                seconds_per_proof: wall / proof_count.max(1) as f64,
                figures: PipelineFigures::of(&timeline, &shape_of_run, wall),
                same_proofs,
            });
        }
    }
    if let (Some(path), Some(t)) = (&w.timeline, &last_timeline) {
        std::fs::write(path, t.to_json_lines())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    // A timing key's proofs, checked against the closed form (every run proved the same partitions
    // with the same randomness, so each is compared with one expected proof per partition).
    let closed_form = match &closed_form {
        None => None,
        Some(closed_form) => {
            let every: Vec<&[Proof<Bls12_381>]> = ours
                .iter()
                .map(|r| r.proofs.as_slice())
                .chain(variant_proofs.iter().map(Vec::as_slice))
                .collect();
            Some(check_closed_form(w, closed_form, &inputs, &every)?)
        }
    };
    Ok(Output {
        command: if repeat.is_some() { "bench" } else { "prove" },
        backend: engine.backend_name(),
        devices: engine.cuda_devices(),
        backend_note: engine.backend_note().map(str::to_owned),
        circuit: w.choice().name(),
        log_constraints: w.log_constraints,
        constraints: shape.constraints()?,
        gpu_workers: w.pipeline.then(|| {
            w.gpu_workers.map_or(cuzk::sched::Config::default().gpu_workers_per_device, |g| g as usize)
        }),
        merge_locks: w.pipeline.then_some(w.merge_locks),
        partitions,
        proofs: proof_count,
        synthesis_mode: engine.synthesis_mode(&key).name(),
        mul_units: engine.mul_units().map(cuzk::MulUnits::name),
        upload_bytes_per_partition: upload_bytes(&engine, &key, shape)?,
        key: if w.timing_key { "timing" } else { "setup" },
        keygen_seconds,
        shape_seconds,
        seconds: wall.median,
        wall: wall.into(),
        seconds_per_partition: wall.median / partitions as f64,
        seconds_per_proof: wall.median / proof_count.max(1) as f64,
        gpu_seconds: gpu.map(Into::into),
        proofs_verified: if engine.config().verify_proofs { partitions } else { 0 },
        stages: shown.stages.clone(),
        pipeline,
        variants,
        arkworks: ark,
        end_to_end_vs_arkworks: end_to_end,
        gpu_time_vs_arkworks: gpu_ratio,
        identical_to_arkworks: identical,
        // Nothing checked is no claim either way.
        equal_to_closed_form: closed_form.and_then(|(ok, checked)| (checked > 0).then_some(ok)),
        closed_form_checked: closed_form.map(|(_, n)| n),
        key_on_device,
    })
}

/// How the key sits on each GPU, one sentence a line: its MSMs' tables, their batches where wider
/// than the backend's, and its memory (none on the CPU).
fn key_on_device(key: &cuzk::Key) -> Vec<String> {
    let tables = key.msm_tables().into_iter().map(|(device, t)| format!("GPU {device}: {t}"));
    let batches = key.msm_batches().into_iter().map(|(device, b)| format!("GPU {device}: {b}"));
    let memory = key.device_memory().into_iter().map(|m| m.to_string());
    tables.chain(batches).chain(memory).collect()
}

#[cfg(test)]
mod tests {
    use super::{check_cost_note, sample_indices};

    #[test]
    fn a_costly_check_against_the_closed_form_is_announced_with_the_way_out() {
        assert_eq!(check_cost_note(24, 10), None);
        assert_eq!(check_cost_note(27, 0), None);
        let note = check_cost_note(27, 1).expect("a 2^27 check is announced");
        assert!(note.contains("1 partition(s) of 2^27 rows") && note.contains("--check-sample 0"), "{note}");
    }

    #[test]
    fn a_sample_spreads_over_the_run_with_the_ends_and_no_repeats() {
        assert_eq!(sample_indices(10, Some(3)), [0, 4, 9]);
        assert_eq!(sample_indices(10, Some(2)), [0, 9]);
        assert_eq!(sample_indices(10, Some(1)), [0]);
        assert_eq!(sample_indices(4, None), [0, 1, 2, 3]);
        assert_eq!(sample_indices(4, Some(9)), [0, 1, 2, 3], "a sample larger than the run checks all");
        assert_eq!(sample_indices(1, Some(1)), [0]);
        assert!(sample_indices(0, Some(3)).is_empty());
        assert!(sample_indices(5, Some(0)).is_empty(), "0 checks none");
        for len in 2..40 {
            for k in 2..len {
                let s = sample_indices(len, Some(k));
                assert_eq!(s.len(), k);
                assert!(s.windows(2).all(|w| w[0] < w[1]), "{len} {k}: {s:?}");
                assert_eq!((s[0], s[k - 1]), (0, len - 1));
            }
        }
    }
}
