//! GPU MSM benchmarks, side by side with ark-ec on this host's cores.
//!
//! Usage: msm_bench [--json FILE] [--ark-max LOG] [--sizes LOG,LOG,...] [--windows C,C,...]
//!                  [--tables C:M,C:M,...] [--bases device|host|both] [--curves g1,g2]
//!                  [--scalars random,bits,half,porep] [--first-rounds xyzz,batch,batch:K,auto]
//!                  [--sorts direct,binned] [--batches LOG,LOG,...] [--units integer,fp64,mixed]
//!                  [--ones auto,apart,round] [--trace]
//!
//! `--first-rounds` times every variant with each way of doing the first summing round (`xyzz`
//! accumulators, `batch` affine additions, `batch:K` with K chains per thread, or `auto`: batched from
//! `batch_affine_from(curve)` points, the default). `--sorts` times each with each way of writing
//! the sorted entries (`binned`, the default, or `direct`). `--batches` times each with each most
//! points per batch (`2^LOG`; the default is `MsmConfig::default().batch`). `--units` times each
//! with G1's batched first round multiplying on each of the units (`MulUnits`; the integer units by
//! default). `--ones` times each with each way of adding the points whose scalar is 1 (`Ones`: `apart`
//! by a kernel of their own, `round` by the first summing round as one more bucket, `auto`, the
//! default, in the round when it is batched); every variant's result must equal the first's.
//!
//! `--tables` adds, after the plain variants, device-resident bases replaced by a table of `M`
//! multiples per point for windows of `C` bits (`M = all`: every window in one set of buckets),
//! each timed like the others on the same scalars, with the table's build time and size.
//!
//! `--trace` prints each probed call's kernel spans and host phases. `--windows` and `--bases` sweep the window width and where the bases live (device memory, or pinned
//! host memory streamed batch by batch): every combination is timed on the same bases and scalars (the
//! first one also with host scalars and against ark-ec).
//!
//! Bases are converted once per size. Per row: the wall-clock median of 5 calls after a warm-up with
//! the scalars already on the device (the call returns the point, so host waits and the host-side
//! window combination are included), the kernel-busy time of one extra call (the union of CUDA-event
//! spans around every launch, so kernels overlapping on two streams count once) and its share of the
//! wall time, the median of 3 calls that take
//! the scalars from host memory (conversion and pageable upload included), and ark-ec's
//! `VariableBaseMSM` on the same bases and scalars (sizes up to 2^ark-max only; it takes minutes above),
//! whose result must equal the GPU's.

use std::time::Instant;

use ark_bls12_381::{Fr, G1Projective, G2Projective};
use ark_ec::{CurveGroup, VariableBaseMSM};
use ark_ff::{One, UniformRand, Zero};
use cuzk_cuda::kernels::MulUnits;
use cuzk_cuda::msm::{self, Curve, FirstRound, Ones, Plan, Sort, G1, G2};
use cuzk_cuda::profile::Probe;
use cuzk_cuda::{CudaBackend, CudaError, GpuFr, MsmConfig, Residency};
use cuzk_field::{to_device_vec, DeviceFr};
use rand::{rngs::StdRng, Rng, SeedableRng};
use rayon::prelude::*;

/// The median by the rule every benchmark uses (`cuzk_groth16::Summary`: the mean of the middle two
/// for an even count); NaN for no values.
fn median(v: Vec<f64>) -> f64 {
    cuzk_groth16::Summary::of(&v).map_or(f64::NAN, |s| s.median)
}

/// Which scalars an MSM is timed on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Uniform in Fr.
    Random,
    /// A SHA-256-like witness: 45% zeros, 45% ones, 8% 16-bit values, 2% random.
    Bits,
    /// Uniform below 2^128: the halves a scalar splits into by G1's endomorphism (`k = k1 + k2·λ`,
    /// λ about 2^128), so an MSM of 2n such scalars has the entries and bucket sets of the
    /// endomorphism's MSM of n points.
    Half,
    /// A real PoRep partition's witness: 51% zeros, 47% ones, 2% whole field elements and nothing
    /// between (Filecoin's 2 KiB and 8 MiB PoRep, `cuzk filecoin shape --sector`).
    Porep,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Random => "random",
            Kind::Bits => "bit-heavy",
            Kind::Half => "128-bit",
            Kind::Porep => "porep-witness",
        }
    }
}

fn scalars(n: usize, kind: Kind, seed: u64) -> Vec<Fr> {
    (0..n.div_ceil(1 << 16))
        .into_par_iter()
        .flat_map_iter(|c| {
            let mut rng = StdRng::seed_from_u64(seed ^ (c as u64) << 20);
            (0..(1usize << 16).min(n - c * (1 << 16)))
                .map(|_| match kind {
                    Kind::Random => Fr::rand(&mut rng),
                    Kind::Half => Fr::from(rng.gen::<u128>()),
                    Kind::Bits => match rng.gen_range(0..100) {
                        0..=44 => Fr::zero(),
                        45..=89 => Fr::one(),
                        90..=97 => Fr::from(rng.gen_range(2u64..1 << 16)),
                        _ => Fr::rand(&mut rng),
                    },
                    Kind::Porep => match rng.gen_range(0..100) {
                        0..=50 => Fr::zero(),
                        51..=97 => Fr::one(),
                        _ => Fr::rand(&mut rng),
                    },
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Bases R + i·S: cheap to make at 2^26, and an MSM costs the same on any bases.
fn bases<G: CurveGroup<ScalarField = Fr>>(n: usize) -> Vec<G::Affine> {
    let mut rng = StdRng::seed_from_u64(1);
    let (r, s) = (G::rand(&mut rng), G::rand(&mut rng));
    cuzk_testkit::progression(n, r, s)
}

/// ` table m=M (built in T ms, G GB)` for a row with a table, else nothing.
fn table_label(r: &Row) -> String {
    match r.table {
        Some((ms, bytes)) => {
            format!(" table m={} (built in {ms:.0} ms, {:.2} GB)", r.multiples, bytes as f64 / 1e9)
        }
        None => String::new(),
    }
}

/// ` batched affine` (with its chains per thread when set) for a row whose first summing round was
/// batched, and ` binned sort` for one whose sort was, else nothing.
fn round_label(r: &Row) -> String {
    let round = match (r.first_round, r.batch_chains) {
        (FirstRound::BatchAffine, Some(k)) => format!(" batched affine x{k}"),
        (FirstRound::BatchAffine, None) => " batched affine".into(),
        (FirstRound::Auto, _) => " auto".into(),
        (FirstRound::Xyzz, _) => String::new(),
    };
    round + sort_label(r.sort) + &batch_label(r.batch) + units_label(r.units) + ones_label(r.ones)
}

/// ` ones apart` / ` ones in the round` when chosen so, nothing for the default.
fn ones_label(ones: Ones) -> &'static str {
    match ones {
        Ones::Auto => "",
        Ones::Apart => " ones apart",
        Ones::InRound => " ones in the round",
    }
}

/// ` fp64` / ` mixed units` for G1's batched round on those units, nothing for the integer units.
fn units_label(units: MulUnits) -> &'static str {
    match units {
        MulUnits::Integer => "",
        MulUnits::Fp64 => " fp64",
        MulUnits::Mixed => " mixed units",
    }
}

/// ` batches of 2^B` for a batch size other than the default, else nothing.
fn batch_label(batch: usize) -> String {
    if batch == MsmConfig::default().batch {
        return String::new();
    }
    format!(" batches of 2^{}", batch.trailing_zeros())
}

/// ` direct sort` for [`Sort::Direct`], nothing for the default.
fn sort_label(sort: Sort) -> &'static str {
    match sort {
        Sort::Direct => " direct sort",
        Sort::Binned => "",
    }
}

struct Row {
    curve: &'static str,
    log_n: u32,
    kind: Kind,
    window: u32,
    /// Multiples per point of the bases' table (1: no table), and its build time and bytes.
    multiples: u32,
    first_round: FirstRound,
    batch_chains: Option<u32>,
    sort: Sort,
    /// Most points per batch.
    batch: usize,
    units: MulUnits,
    ones: Ones,
    table: Option<(f64, u64)>,
    host_bases: bool,
    wall_ms: f64,
    with_upload_ms: Option<f64>,
    kernel_ms: f64,
    ark_ms: Option<f64>,
    breakdown: Vec<(&'static str, f64)>,
    /// [`STREAM`] MSMs issued back to back, each finished once the next is queued: wall per MSM
    /// and kernel-busy share of the whole stream.
    stream_ms: f64,
    stream_share: f64,
}

/// MSMs in the back-to-back measurement (as a proof's five MSMs run).
const STREAM: usize = 4;

/// One timed variant: the window width, which of the plain uploads (none: the table's bases) and the
/// table's (width, multiples).
type Variant = (Option<u32>, Option<usize>, Option<(u32, u32)>);

/// What to sweep.
struct Sweep {
    windows: Vec<Option<u32>>,
    /// (window width, multiples per point; 0 for every window).
    tables: Vec<(u32, u32)>,
    host_bases: Vec<bool>,
    kinds: Vec<Kind>,
    /// First rounds, with the chains per thread of a batched one (`None`: the default).
    first_rounds: Vec<(FirstRound, Option<u32>)>,
    /// Ways of writing the sorted entries.
    sorts: Vec<Sort>,
    /// Most points per batch.
    batches: Vec<usize>,
    /// Units of G1's batched first round.
    units: Vec<MulUnits>,
    ones: Vec<Ones>,
}

#[allow(clippy::too_many_arguments)]
fn run<C: Curve>(
    b: &CudaBackend,
    log_n: u32,
    ark_max: u32,
    trace: bool,
    sweep: &Sweep,
    rows: &mut Vec<Row>,
    msm_ark: impl Fn(
        &[ark_ec::short_weierstrass::Affine<C::Config>],
        &[Fr],
    ) -> ark_ec::short_weierstrass::Projective<C::Config>,
    base: impl Fn(usize) -> Vec<ark_ec::short_weierstrass::Affine<C::Config>>,
) -> Result<(), CudaError> {
    let n = 1usize << log_n;
    let host_bases = base(n);
    let stored: Vec<(bool, cuzk_cuda::GpuBases<C>)> = sweep
        .host_bases
        .iter()
        .map(|&h| {
            Ok((h, b.upload_bases_to::<C>(&host_bases, if h { Residency::Host } else { Residency::Device })?))
        })
        .collect::<Result<_, CudaError>>()?;
    for &kind in &sweep.kinds {
        let k = scalars(n, kind, log_n as u64 + kind as u64 * 100);
        let gpu = b.gpu();
        let host: Vec<GpuFr> = to_device_vec::<DeviceFr>(&k).into_iter().map(GpuFr).collect();
        let dk = gpu.upload(gpu.compute_stream(), &host)?;
        let mut first = true;
        let mut reference = None;
        let plain = sweep.windows.iter().flat_map(|&w| (0..stored.len()).map(move |i| (w, Some(i), None)));
        let tables = sweep.tables.iter().map(|&(c, m)| (Some(c), None, Some((c, m))));
        let variants: Vec<Variant> = plain.chain(tables).collect();
        let mut tabled: Option<cuzk_cuda::GpuBases<C>> = None;
        for (window_bits, plain_index, table_spec) in variants {
            let mut table = None;
            if let Some((c, m)) = table_spec {
                let m = if m == 0 { 256u32.div_ceil(c) } else { m };
                let bases_for_table = match tabled.take() {
                    Some(t) => t,
                    None => b.upload_bases_to::<C>(&host_bases, Residency::Device)?,
                };
                let mut t = bases_for_table;
                let start = Instant::now();
                t.precompute(gpu, c, m)?;
                table = Some((start.elapsed().as_secs_f64() * 1e3, t.device_bytes()));
                tabled = Some(t);
            }
            let rounds = sweep.first_rounds.iter().flat_map(|&r| sweep.sorts.iter().map(move |&s| (r, s)));
            let rounds = rounds.flat_map(|rs| sweep.batches.iter().map(move |&batch| (rs, batch)));
            let rounds = rounds.flat_map(|rb| sweep.units.iter().map(move |&units| (rb, units)));
            let rounds = rounds.flat_map(|ru| sweep.ones.iter().map(move |&ones| (ru, ones)));
            for (((((first_round, batch_chains), sort), batch), units), ones) in rounds {
                let (on_host, dev) = match plain_index {
                    Some(i) => (&stored[i].0, &stored[i].1),
                    None => (&false, tabled.as_ref().expect("a table was just built")),
                };
                let config = MsmConfig { window_bits, first_round, batch_chains, sort, batch, units, ones };
                let call = |probe: &mut Probe| {
                    msm::msm_probed::<C>(gpu, &dev.msm_bases(), &dk.slice(..), &config, probe)
                };
                let got = call(&mut Probe::default())?;
                match reference {
                    None => reference = Some(got),
                    Some(r) => assert_eq!(
                        r,
                        got,
                        "{} 2^{log_n}: window {window_bits:?}, {first_round:?}, {sort:?}, {units:?}, {ones:?} differs",
                        C::NAME
                    ),
                }
                let with_upload_ms = first.then(|| -> Result<f64, CudaError> {
                    let mut uploads = Vec::new();
                    for _ in 0..3 {
                        let t = Instant::now();
                        let again = b.msm_host(dev, &k)?;
                        assert_eq!(again, got, "{} 2^{log_n}: repeated MSMs differ", C::NAME);
                        uploads.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                    Ok(median(uploads))
                });
                let with_upload_ms = with_upload_ms.transpose()?;
                let mut walls = Vec::new();
                for _ in 0..5 {
                    let t = Instant::now();
                    let _ = std::hint::black_box(call(&mut Probe::default())?);
                    walls.push(t.elapsed().as_secs_f64() * 1e3);
                }
                let mut probe = Probe::enabled();
                let _ = std::hint::black_box(call(&mut probe)?);
                if trace {
                    let spans = probe.kernel_spans()?;
                    let list: Vec<String> =
                        spans.iter().map(|(k, a, b)| format!("{k} {a:.3}-{b:.3}")).collect();
                    println!(
                        "  trace {} 2^{log_n} {}: kernels (ms from the first launch): {}",
                        C::NAME,
                        kind.label(),
                        list.join(", ")
                    );
                    let host: Vec<String> =
                        probe.host_phases().iter().map(|(k, t)| format!("{k} {t:.3}")).collect();
                    println!("  trace host (ms from the call): {}", host.join(", "));
                }
                let times = probe.kernel_times()?;
                let kernel_ms = probe.busy_ms()? as f64;
                // The same MSM several times in a row, as the prover issues its MSMs: each is
                // finished (its last window sums combined on the host) once the next one's kernels are
                // queued, so the host's combine overlaps device work.
                let stream = |probe: &mut Probe| -> Result<f64, CudaError> {
                    let t = Instant::now();
                    let mut previous: Option<msm::PendingMsm<'_, C>> = None;
                    for _ in 0..STREAM {
                        let next = msm::msm_start::<C>(gpu, &dev.msm_bases(), &dk.slice(..), &config, probe)?;
                        if let Some(p) = previous.replace(next) {
                            assert_eq!(p.finish()?, got, "{} 2^{log_n}: streamed MSM differs", C::NAME);
                        }
                    }
                    if let Some(p) = previous {
                        assert_eq!(p.finish()?, got, "{} 2^{log_n}: streamed MSM differs", C::NAME);
                    }
                    Ok(t.elapsed().as_secs_f64() * 1e3)
                };
                let _ = stream(&mut Probe::default())?;
                let stream_walls =
                    (0..3).map(|_| stream(&mut Probe::default())).collect::<Result<Vec<_>, _>>()?;
                let stream_wall = median(stream_walls);
                let mut stream_probe = Probe::enabled();
                stream(&mut stream_probe)?;
                let stream_share = stream_probe.busy_ms()? as f64 / stream_wall;
                let mut breakdown: Vec<(&'static str, f64)> = Vec::new();
                for (name, t) in times {
                    match breakdown.iter_mut().find(|(n, _)| *n == name) {
                        Some(e) => e.1 += t as f64,
                        None => breakdown.push((name, t as f64)),
                    }
                }
                let ark_ms = (first && log_n <= ark_max).then(|| {
                    let t = Instant::now();
                    let expected = msm_ark(&host_bases, &k);
                    let ms = t.elapsed().as_secs_f64() * 1e3;
                    assert_eq!(
                        expected.into_affine(),
                        got.into_affine(),
                        "{} 2^{log_n}: GPU and ark-ec differ",
                        C::NAME
                    );
                    ms
                });
                first = false;
                let plan = match dev.table() {
                    Some(t) => Plan::with_multiples(n.min(config.batch), t.window_bits, t.multiples)?,
                    None => Plan::for_curve(C::ID, n.min(config.batch), config.window_bits)?,
                };
                rows.push(Row {
                    curve: C::NAME,
                    log_n,
                    kind,
                    window: plan.c,
                    multiples: plan.multiples,
                    first_round,
                    batch_chains,
                    sort,
                    batch,
                    units,
                    ones,
                    table,
                    host_bases: *on_host,
                    wall_ms: median(walls),
                    with_upload_ms,
                    kernel_ms,
                    ark_ms,
                    breakdown,
                    stream_ms: stream_wall / STREAM as f64,
                    stream_share,
                });
                let r = rows.last().expect("just pushed");
                println!(
                    "{} 2^{} {} c={}{}{}{}: {:.2} ms wall, {:.2} ms kernel-busy ({:.0}%), {STREAM} in a row {:.2} ms each ({:.0}% busy), ark {}",
                    r.curve,
                    r.log_n,
                    kind.label(),
                    r.window,
                    if *on_host { " host bases" } else { "" },
                    table_label(r),
                    round_label(r),
                    r.wall_ms,
                    r.kernel_ms,
                    100.0 * r.kernel_ms / r.wall_ms,
                    r.stream_ms,
                    100.0 * r.stream_share,
                    r.ark_ms.map_or("-".into(), |a| format!("{a:.1} ms"))
                );
            }
        }
    }
    Ok(())
}

/// The command line: every flag known, every value parsed, or an error naming what was wrong.
struct Options {
    json: Option<String>,
    ark_max: u32,
    trace: bool,
    sizes: Vec<u32>,
    curves: Vec<String>,
    sweep: Sweep,
}

/// Each comma-separated item of `value` parsed by `item`, or an error naming the flag and the item.
fn items<T>(flag: &str, value: &str, item: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    value.split(',').map(|x| item(x).ok_or_else(|| format!("{flag}: cannot read `{x}`"))).collect()
}

fn parse(args: &[String]) -> Result<Options, String> {
    let defaults = MsmConfig::default();
    let mut o = Options {
        json: None,
        ark_max: 22,
        trace: false,
        sizes: vec![16, 20, 22, 24, 26],
        curves: vec!["g1".into(), "g2".into()],
        sweep: Sweep {
            windows: vec![None],
            tables: Vec::new(),
            host_bases: vec![false],
            kinds: vec![Kind::Random, Kind::Bits],
            first_rounds: vec![(defaults.first_round, None)],
            sorts: vec![defaults.sort],
            batches: vec![defaults.batch],
            units: vec![defaults.units],
            ones: vec![defaults.ones],
        },
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--trace" {
            o.trace = true;
            continue;
        }
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--json" => o.json = Some(v.clone()),
            "--ark-max" => o.ark_max = v.parse().map_err(|_| format!("--ark-max: cannot read `{v}`"))?,
            "--sizes" => {
                o.sizes = items(flag, v, |x| x.parse().ok().filter(|l| (1..=28).contains(l)))?;
            }
            "--curves" => {
                o.curves = items(flag, v, |x| matches!(x, "g1" | "g2").then(|| x.to_string()))?;
            }
            "--windows" => o.sweep.windows = items(flag, v, |x| x.parse().ok().map(Some))?,
            "--tables" => {
                o.sweep.tables = items(flag, v, |x| {
                    let (c, m) = x.split_once(':')?;
                    Some((c.parse().ok()?, if m == "all" { 0 } else { m.parse().ok().filter(|&m| m > 0)? }))
                })?;
            }
            "--bases" => {
                o.sweep.host_bases = match v.as_str() {
                    "device" => vec![false],
                    "host" => vec![true],
                    "both" => vec![false, true],
                    _ => return Err(format!("--bases: `{v}` is not device, host or both")),
                };
            }
            "--scalars" => {
                o.sweep.kinds = items(flag, v, |x| match x {
                    "random" => Some(Kind::Random),
                    "bits" => Some(Kind::Bits),
                    "half" => Some(Kind::Half),
                    "porep" => Some(Kind::Porep),
                    _ => None,
                })?;
            }
            "--first-rounds" => {
                o.sweep.first_rounds = items(flag, v, |x| match x.split_once(':') {
                    Some(("batch", k)) => {
                        Some((FirstRound::BatchAffine, Some(k.parse().ok().filter(|&k| k > 0)?)))
                    }
                    Some(_) => None,
                    None => match x {
                        "batch" => Some((FirstRound::BatchAffine, None)),
                        "auto" => Some((FirstRound::Auto, None)),
                        "xyzz" => Some((FirstRound::Xyzz, None)),
                        _ => None,
                    },
                })?;
            }
            "--sorts" => {
                o.sweep.sorts = items(flag, v, |x| match x {
                    "direct" => Some(Sort::Direct),
                    "binned" => Some(Sort::Binned),
                    _ => None,
                })?;
            }
            "--batches" => {
                o.sweep.batches =
                    items(flag, v, |x| x.parse().ok().filter(|l| (1..=30).contains(l)).map(|l: u32| 1 << l))?;
            }
            "--units" => {
                o.sweep.units = items(flag, v, |x| x.parse::<MulUnits>().ok())?;
            }
            "--ones" => {
                o.sweep.ones = items(flag, v, |x| match x {
                    "auto" => Some(Ones::Auto),
                    "apart" => Some(Ones::Apart),
                    "round" => Some(Ones::InRound),
                    _ => None,
                })?;
            }
            _ => return Err(format!("unknown flag `{flag}`")),
        }
    }
    Ok(o)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Options { json, ark_max, trace, sizes, curves, sweep } = match parse(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e} (see the usage at the top of msm_bench.rs)");
            std::process::exit(2);
        }
    };
    let b = match CudaBackend::new(0) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let mut rows = Vec::new();
    let result = (|| -> Result<(), CudaError> {
        for &log_n in sizes.iter().filter(|_| curves.iter().any(|c| c == "g1")) {
            run::<G1>(
                &b,
                log_n,
                ark_max,
                trace,
                &sweep,
                &mut rows,
                |p, s| G1Projective::msm(p, s).expect("lengths"),
                bases::<G1Projective>,
            )?;
        }
        for &log_n in sizes.iter().filter(|&&l| l <= 24 && curves.iter().any(|c| c == "g2")) {
            run::<G2>(
                &b,
                log_n,
                ark_max.min(22),
                trace,
                &sweep,
                &mut rows,
                |p, s| G2Projective::msm(p, s).expect("lengths"),
                bases::<G2Projective>,
            )?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    println!(
        "| curve | size | scalars | window | bases | first round | table: multiples, build ms, GB | GPU wall ms | kernel-busy ms | kernel share | {STREAM} in a row: ms each | kernel share | with host scalars ms | ark-ec ms | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | 2^{} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.0}% | {:.2} | {:.0}% | {} | {} | {} |",
            r.curve,
            r.log_n,
            r.kind.label(),
            r.window,
            if r.host_bases { "host" } else { "device" },
            match r.first_round {
                FirstRound::BatchAffine =>
                    format!("batched affine{}", r.batch_chains.map_or(String::new(), |k| format!(" x{k}"))),
                FirstRound::Xyzz => "xyzz".into(),
                FirstRound::Auto => "auto".into(),
            } + sort_label(r.sort)
                + &batch_label(r.batch)
                + ones_label(r.ones),
            r.table.map_or("-".into(), |(ms, bytes)| format!(
                "{}, {ms:.0}, {:.2}",
                r.multiples,
                bytes as f64 / 1e9
            )),
            r.wall_ms,
            r.kernel_ms,
            100.0 * r.kernel_ms / r.wall_ms,
            r.stream_ms,
            100.0 * r.stream_share,
            r.with_upload_ms.map_or("-".into(), |u| format!("{u:.1}")),
            r.ark_ms.map_or("-".into(), |a| format!("{a:.0}")),
            r.ark_ms.map_or("-".into(), |a| format!("{:.0}x", a / r.wall_ms)),
        );
    }
    for r in rows.iter().filter(|r| r.log_n >= 20) {
        let parts: Vec<String> = r.breakdown.iter().map(|(n, t)| format!("{n} {t:.2}")).collect();
        println!(
            "{} 2^{} {} c={}{}{}{} kernels (ms): {}",
            r.curve,
            r.log_n,
            r.kind.label(),
            r.window,
            if r.host_bases { " host bases" } else { "" },
            table_label(r),
            round_label(r),
            parts.join(", ")
        );
    }
    if let Some(path) = json {
        let body: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"curve\":{:?},\"log_n\":{},\"scalars\":{:?},\"window\":{},\"multiples\":{},\"batched_affine\":{},\"binned_sort\":{},\"batch\":{},\"ones\":\"{:?}\",\"host_bases\":{},\"wall_ms\":{},\"kernel_ms\":{},\"stream_ms\":{},\"stream_share\":{},\"ark_ms\":{}}}",
                    r.curve,
                    r.log_n,
                    r.kind.label(),
                    r.window,
                    r.multiples,
                    r.first_round == FirstRound::BatchAffine,
                    r.sort == Sort::Binned,
                    r.batch,
                    r.ones,
                    r.host_bases,
                    r.wall_ms,
                    r.kernel_ms,
                    r.stream_ms,
                    r.stream_share,
                    r.ark_ms.map_or("null".into(), |a| a.to_string())
                )
            })
            .collect();
        if let Err(e) = std::fs::write(&path, format!("[{}]\n", body.join(",\n"))) {
            eprintln!("error: cannot write {path}: {e}");
        }
    }
}
