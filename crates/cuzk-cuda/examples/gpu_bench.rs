//! GPU benchmarks of the CUDA backend's field arithmetic, NTTs, witness map and a porep-like
//! shape's sparse products, side by side with ark-poly on this machine's CPU cores where it has
//! them. Times on the GPU come from CUDA events: the median of several
//! runs after a warm-up. Prints a markdown table and, with `--json FILE`, writes the rows as JSON.

use std::time::Instant;

use ark_bls12_381::Fr;
use ark_ff::{FftField, UniformRand};
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use cudarc::driver::CudaSlice;
use cuzk_cuda::{kernels, CudaBackend, CudaError, GpuFq, GpuFq2, GpuFr};
use cuzk_field::{DeviceFq, DeviceFq2, DeviceFr, DeviceRepr};
use cuzk_groth16::{witness_map_from_evaluations, CpuBackend, NttKind, PolyBackend};
use rand::{rngs::StdRng, SeedableRng};
use rayon::prelude::*;

/// The H200's measured 32-bit integer multiply-add ceiling (64 per SM per clock at 1.98 GHz).
const IMAD_CEILING: f64 = 1.67e13;

struct Row {
    what: String,
    size: String,
    gpu_ms: f64,
    cpu_ms: Option<f64>,
    note: String,
}

/// The median by the rule every benchmark uses (`cuzk_groth16::Summary`: the mean of the middle two
/// for an even count); NaN for no values.
fn median(v: Vec<f64>) -> f64 {
    cuzk_groth16::Summary::of(&v).map_or(f64::NAN, |s| s.median)
}

/// Median device time of `f` over `runs` runs after one warm-up, measured with events on the compute
/// stream.
fn time_gpu(
    b: &CudaBackend,
    runs: usize,
    mut f: impl FnMut() -> Result<(), CudaError>,
) -> Result<f64, CudaError> {
    let stream = b.gpu().compute_stream();
    f()?;
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = b.gpu().timer()?;
        t.start(stream)?;
        f()?;
        t.stop(stream)?;
        times.push(t.elapsed_ms()? as f64);
    }
    Ok(median(times))
}

fn time_cpu(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    median(times)
}

fn random_frs(n: usize, seed: u64) -> Vec<Fr> {
    (0..n.div_ceil(1 << 16))
        .into_par_iter()
        .flat_map_iter(|c| {
            let mut r = StdRng::seed_from_u64(seed ^ (c as u64) << 20);
            (0..(1usize << 16).min(n - c * (1 << 16))).map(move |_| Fr::rand(&mut r))
        })
        .collect()
}

fn field_throughput(b: &CudaBackend, rows: &mut Vec<Row>) -> Result<(), CudaError> {
    let gpu = b.gpu();
    let s = gpu.compute_stream();
    let threads = 1usize << 20;
    let iters = 128u32;
    let muls = (threads as f64) * 2.0 * iters as f64;
    let mut rng = StdRng::seed_from_u64(1);
    let fr: Vec<GpuFr> = (0..threads).map(|_| GpuFr(DeviceFr::from_ark(&Fr::rand(&mut rng)))).collect();
    let fq: Vec<GpuFq> =
        (0..threads).map(|_| GpuFq(DeviceFq::from_ark(&ark_bls12_381::Fq::rand(&mut rng)))).collect();
    let (dfr, dfq) = (gpu.upload(s, &fr)?, gpu.upload(s, &fq)?);
    let mut ofr: CudaSlice<GpuFr> = gpu.zeros(s, threads)?;
    let mut ofq: CudaSlice<GpuFq> = gpu.zeros(s, threads)?;
    let ms = time_gpu(b, 5, || kernels::fr_mul_bench(gpu, s, &dfr, &mut ofr, iters))?;
    let rate = muls / (ms / 1e3);
    rows.push(Row {
        what: "Fr mul throughput".into(),
        size: format!("{muls:.2e} muls"),
        gpu_ms: ms,
        cpu_ms: None,
        note: format!(
            "{rate:.3e} mul/s; {:.0}% of the {:.2e} mul/s of an ideal 8-limb CIOS (about 264 IMAD)",
            rate * 264.0 / IMAD_CEILING * 100.0,
            IMAD_CEILING / 264.0
        ),
    });
    let ms = time_gpu(b, 5, || kernels::fq_mul_bench(gpu, s, &dfq, &mut ofq, iters))?;
    let rate = muls / (ms / 1e3);
    let fq_rate = rate;
    rows.push(Row {
        what: "Fq mul throughput".into(),
        size: format!("{muls:.2e} muls"),
        gpu_ms: ms,
        cpu_ms: None,
        note: format!(
            "{rate:.3e} mul/s; {:.0}% of the {:.2e} mul/s of an ideal 12-limb CIOS (about 588 IMAD)",
            rate * 588.0 / IMAD_CEILING * 100.0,
            IMAD_CEILING / 588.0
        ),
    });
    // The products on the FP64 units (mul_fp64), alone and in alternate warps, beside the integer
    // rows above; each run's outputs must equal the integer kernels'.
    let (int_fr, int_fq) = (gpu.download(s, &ofr)?, gpu.download(s, &ofq)?);
    let fr_rate = muls / (rows[rows.len() - 2].gpu_ms / 1e3);
    for mix in [kernels::MulUnits::Fp64, kernels::MulUnits::Mixed] {
        let ms = time_gpu(b, 5, || kernels::fr_mul_fp64_bench(gpu, s, &dfr, &mut ofr, iters, mix))?;
        assert!(gpu.download(s, &ofr)? == int_fr, "Fr mul_fp64 ({mix:?}) differs from operator*");
        let rate = muls / (ms / 1e3);
        rows.push(Row {
            what: format!("Fr mul throughput, mul_fp64 ({mix:?})"),
            size: format!("{muls:.2e} muls"),
            gpu_ms: ms,
            cpu_ms: None,
            note: format!("{rate:.3e} mul/s; {:.2}x the integer row; same outputs", rate / fr_rate),
        });
        let ms = time_gpu(b, 5, || kernels::fq_mul_fp64_bench(gpu, s, &dfq, &mut ofq, iters, mix))?;
        assert!(gpu.download(s, &ofq)? == int_fq, "Fq mul_fp64 ({mix:?}) differs from operator*");
        let rate = muls / (ms / 1e3);
        rows.push(Row {
            what: format!("Fq mul throughput, mul_fp64 ({mix:?})"),
            size: format!("{muls:.2e} muls"),
            gpu_ms: ms,
            cpu_ms: None,
            note: format!("{rate:.3e} mul/s; {:.2}x the integer row; same outputs", rate / fq_rate),
        });
    }
    // Karatsuba's product with a separate reduction (mul_kara), beside the integer rows; same outputs.
    let ms = time_gpu(b, 5, || kernels::fr_mul_kara_bench(gpu, s, &dfr, &mut ofr, iters))?;
    assert!(gpu.download(s, &ofr)? == int_fr, "Fr mul_kara differs from operator*");
    let rate = muls / (ms / 1e3);
    rows.push(Row {
        what: "Fr mul throughput, mul_kara".into(),
        size: format!("{muls:.2e} muls"),
        gpu_ms: ms,
        cpu_ms: None,
        note: format!("{rate:.3e} mul/s; {:.2}x the integer row; same outputs", rate / fr_rate),
    });
    // Shoup's product by factors known ahead (the NTT passes' twiddles), their quotients built first.
    let mut wt = gpu.upload(s, &[fr.as_slice(), fr.as_slice()].concat())?;
    kernels::shoup_twiddles(gpu, s, &mut wt, &mut Default::default())?;
    let ms = time_gpu(b, 5, || kernels::fr_mul_shoup_bench(gpu, s, &dfr, &wt, &mut ofr, iters))?;
    assert!(gpu.download(s, &ofr)? == int_fr, "Fr mul_shoup differs from operator*");
    let rate = muls / (ms / 1e3);
    rows.push(Row {
        what: "Fr mul throughput, mul_shoup (fixed factors)".into(),
        size: format!("{muls:.2e} muls"),
        gpu_ms: ms,
        cpu_ms: None,
        note: format!("{rate:.3e} mul/s; {:.2}x the integer row; same outputs", rate / fr_rate),
    });
    let ms = time_gpu(b, 5, || kernels::fq_mul_kara_bench(gpu, s, &dfq, &mut ofq, iters))?;
    assert!(gpu.download(s, &ofq)? == int_fq, "Fq mul_kara differs from operator*");
    let rate = muls / (ms / 1e3);
    rows.push(Row {
        what: "Fq mul throughput, mul_kara".into(),
        size: format!("{muls:.2e} muls"),
        gpu_ms: ms,
        cpu_ms: None,
        note: format!("{rate:.3e} mul/s; {:.2}x the integer row; same outputs", rate / fq_rate),
    });
    // Squarings by sqr_int's rows beside the product of a value with itself; same outputs.
    let labels = ["Fq sqr throughput, a * a", "Fq sqr throughput, sqr_int (rows of N - i products)"];
    let base = Some((fq_rate, "the Fq mul row"));
    side_by_side(b, rows, (muls, "sqr", "squarings"), labels, base, &mut ofq, |by_rows, out| {
        kernels::fq_sqr_bench(gpu, s, &dfq, out, iters, by_rows)
    })?;
    // Fq2 products with each coefficient reduced once beside three reduced Fq products; same outputs.
    let fq2: Vec<GpuFq2> =
        (0..threads).map(|_| GpuFq2(DeviceFq2::from_ark(&ark_bls12_381::Fq2::rand(&mut rng)))).collect();
    let dfq2 = gpu.upload(s, &fq2)?;
    let mut ofq2: CudaSlice<GpuFq2> = gpu.zeros(s, threads)?;
    let labels = [
        "Fq2 mul throughput, three reduced Fq products",
        "Fq2 mul throughput, fq2_mul (each coefficient reduced once)",
    ];
    side_by_side(b, rows, (muls, "mul", "muls"), labels, None, &mut ofq2, |wide, out| {
        kernels::fq2_mul_bench(gpu, s, &dfq2, out, iters, wide)
    })?;
    // Inversions side by side: 2^18 threads of 8 dependent ones each, in multiplications' worth.
    let (inv_threads, inv_iters) = (1usize << 18, 8u32);
    let inversions = (inv_threads as f64) * inv_iters as f64;
    let dinv = gpu.upload(s, &fq[..inv_threads])?;
    let mut oinv: CudaSlice<GpuFq> = gpu.zeros(s, inv_threads)?;
    for method in [kernels::FqInverse::Vartime, kernels::FqInverse::Euclid, kernels::FqInverse::Fermat] {
        let ms = time_gpu(b, 5, || kernels::fq_inv_bench(gpu, s, &dinv, &mut oinv, inv_iters, method))?;
        let per = ms / 1e3 / inversions;
        rows.push(Row {
            what: format!("Fq inverse throughput ({method:?})"),
            size: format!("{inversions:.2e} inversions"),
            gpu_ms: ms,
            cpu_ms: None,
            note: format!("{:.3e} inv/s; one costs {:.0} Fq multiplications", 1.0 / per, per * fq_rate),
        });
    }
    Ok(())
}

/// Two forms of one throughput kernel side by side: `run(false, out)` then `run(true, out)`, each
/// timed (`ops` operations, a `unit` each, `noun` in the size column) and its output downloaded; the outputs must be equal.
/// A row each, labelled `labels[form]`, its rate against `base` (a rate and its row's name) or, when
/// `None`, against the first form's.
fn side_by_side<T: cudarc::driver::DeviceRepr + Default + Clone + PartialEq>(
    b: &CudaBackend,
    rows: &mut Vec<Row>,
    (ops, unit, noun): (f64, &str, &str),
    labels: [&str; 2],
    base: Option<(f64, &str)>,
    out: &mut CudaSlice<T>,
    mut run: impl FnMut(bool, &mut CudaSlice<T>) -> Result<(), CudaError>,
) -> Result<(), CudaError> {
    let (gpu, s) = (b.gpu(), b.gpu().compute_stream());
    let mut runs = Vec::new();
    for form in [false, true] {
        let ms = time_gpu(b, 5, || run(form, out))?;
        runs.push((ms, gpu.download(s, out)?));
    }
    assert!(runs[0].1 == runs[1].1, "{} differs from {}", labels[1], labels[0]);
    let (base_rate, base_name) = base.unwrap_or((ops / (runs[0].0 / 1e3), "the first row"));
    for (label, (ms, _)) in labels.into_iter().zip(&runs) {
        let rate = ops / (ms / 1e3);
        rows.push(Row {
            what: label.into(),
            size: format!("{ops:.2e} {noun}"),
            gpu_ms: *ms,
            cpu_ms: None,
            note: format!("{rate:.3e} {unit}/s; {:.2}x {base_name}; same outputs", rate / base_rate),
        });
    }
    Ok(())
}

fn ntt_rows(b: &CudaBackend, rows: &mut Vec<Row>, log_n: u32, cpu_runs: usize) -> Result<(), CudaError> {
    let n = 1usize << log_n;
    let input = random_frs(n, log_n as u64);
    let gpu = b.gpu();
    let s = gpu.compute_stream();
    let mut poly = b.upload_poly(&input, n)?;
    b.tables(log_n)?;
    let resident = time_gpu(b, 7, || b.ntt_in_place(&mut poly, NttKind::CosetForward))?;
    // With transfers: upload from pinned memory, transform, download into pinned (read-back) memory.
    let host: Vec<GpuFr> = input.iter().map(|x| GpuFr(DeviceFr::from_ark(x))).collect();
    let mut pinned_in = gpu.pinned::<GpuFr>(n, false)?;
    pinned_in
        .as_mut_slice()
        .map_err(|e| CudaError::Driver { op: "pinned", source: e })?
        .copy_from_slice(&host);
    let mut pinned_out = gpu.pinned::<GpuFr>(n, true)?;
    let mut dev: CudaSlice<GpuFr> = gpu.zeros(s, n)?;
    let tables = b.tables(log_n)?;
    let transfers = time_gpu(b, 5, || {
        s.memcpy_htod(&pinned_in, &mut dev).map_err(|e| CudaError::Driver { op: "upload", source: e })?;
        cuzk_cuda::ntt::ntt(gpu, s, &tables, &mut dev, NttKind::CosetForward)?;
        s.memcpy_dtoh(&dev, &mut pinned_out).map_err(|e| CudaError::Driver { op: "download", source: e })
    })?;
    let d = Radix2EvaluationDomain::<Fr>::new(n).and_then(|d| d.get_coset(Fr::GENERATOR));
    let cpu = d.map(|d| {
        time_cpu(cpu_runs, || {
            let mut v = input.clone();
            d.fft_in_place(&mut v);
        })
    });
    rows.push(Row {
        what: "NTT coset forward, device-resident".into(),
        size: format!("2^{log_n}"),
        gpu_ms: resident,
        cpu_ms: cpu,
        note: String::new(),
    });
    rows.push(Row {
        what: "NTT coset forward, with pinned H2D + D2H".into(),
        size: format!("2^{log_n}"),
        gpu_ms: transfers,
        cpu_ms: cpu,
        note: format!(
            "{:.1} GB/s each way if transfers dominate",
            2.0 * (n * 32) as f64 / ((transfers - resident).max(1e-3) / 1e3) / 1e9 / 2.0
        ),
    });
    Ok(())
}

fn witness_map_rows(b: &CudaBackend, rows: &mut Vec<Row>, log_n: u32) -> Result<(), CudaError> {
    let n = 1usize << log_n;
    let (va, vb, vc) = (random_frs(n, 10), random_frs(n, 11), random_frs(n, 12));
    let device = |e: cuzk_groth16::BackendError| CudaError::Size {
        op: "witness map",
        size: n,
        reason: leak(e.to_string()),
    };
    // Device-resident: the three vectors already on the GPU, then the witness map's transforms.
    let mut polys = [b.upload_poly(&va, n)?, b.upload_poly(&vb, n)?, b.upload_poly(&vc, n)?];
    let z_inv = Fr::from(5u64);
    let resident = time_gpu(b, 5, || {
        let [x, y, z] = &mut polys;
        b.witness_map_polys(x, y, z, z_inv).map_err(device)
    })?;
    let with_transfers = time_gpu(b, 3, || {
        let h = witness_map_from_evaluations(b, &va, &vb, &vc, n).map_err(device)?;
        b.poly_to_host(&h).map_err(device).map(drop)
    })?;
    let cpu = time_cpu(if log_n > 22 { 1 } else { 3 }, || {
        let _ = witness_map_from_evaluations(&CpuBackend, &va, &vb, &vc, n);
    });
    rows.push(Row {
        what: "witness map (6 NTTs), device-resident".into(),
        size: format!("2^{log_n}"),
        gpu_ms: resident,
        cpu_ms: Some(cpu),
        note: String::new(),
    });
    rows.push(Row {
        what: "witness map with pageable uploads and h download".into(),
        size: format!("2^{log_n}"),
        gpu_ms: with_transfers,
        cpu_ms: Some(cpu),
        note: "host conversion and pageable copies included".into(),
    });
    Ok(())
}

/// The sparse products of a porep-like shape of 2^log_n rows (recorded here, and one partition's
/// witness staged and expanded against it, a thread a row): each split's products into fresh
/// outputs, checked and compared with that evaluation's, then timed on the same buffers.
fn sparse_product_rows(b: &CudaBackend, rows: &mut Vec<Row>, log_n: u32) -> Result<(), CudaError> {
    use cuzk_circuits::PorepLike;
    use cuzk_cuda::{GpuShape, RowSplit};
    let fail = |e: &dyn std::fmt::Display| CudaError::Size {
        op: "sparse products",
        size: 1 << log_n,
        reason: leak(e.to_string()),
    };
    let device = |e: cuzk_groth16::BackendError| fail(&e);
    let circuit = PorepLike::for_log_constraints(log_n, 1, 0).map_err(|e| fail(&e))?;
    let shape = cuzk_synth::R1csShape::record(circuit).map_err(|e| fail(&e))?;
    let w = cuzk_synth::synthesize_compact(circuit, shape.counts()).map_err(|e| fail(&e))?;
    let splits = [RowSplit::Threads, RowSplit::DEFAULT];
    let resident: Vec<std::sync::Arc<GpuShape>> = splits
        .iter()
        .map(|&s| GpuShape::upload_with(b.gpu(), &shape, s).map(std::sync::Arc::new))
        .collect::<Result<_, _>>()?;
    let (mut abc, mut z, evaluation) = b.stage_compact(&resident[0], &w)?;
    let landed: Vec<&cuzk_cuda::GpuPoly> = abc.iter().chain([&z]).collect();
    b.await_uploads(&landed).map_err(device)?;
    use cuzk_groth16::DeviceBackend;
    let bad = evaluation.queue(b, &mut z, &mut abc, None).map_err(device)?.finish().map_err(device)?;
    if let Some(row) = bad {
        return Err(CudaError::Size { op: "sparse products", size: row, reason: "an unsatisfied row" });
    }
    let download = |abc: &[cuzk_cuda::GpuPoly; 3]| -> Result<Vec<Vec<Fr>>, CudaError> {
        abc.iter().map(|p| b.download_poly(p)).collect()
    };
    // The evaluation above ran a thread a row (the first split): its a, b, c are the reference.
    let reference = download(&abc)?;
    let n = 1usize << log_n;
    let poison = vec![Fr::from(0xdead_beefu64); n];
    let unsatisfied =
        |row| CudaError::Size { op: "sparse products", size: row, reason: "an unsatisfied row" };
    let mut first = None;
    for (split, shape) in splits.iter().zip(&resident) {
        // Fresh outputs holding none of the reference's values, so a row the split fails to write
        // shows: one untimed run, checked and compared, then the timed ones.
        let mut out = [b.upload_poly(&poison, n)?, b.upload_poly(&poison, n)?, b.upload_poly(&poison, n)?];
        if let Some(row) = b.shape_products(shape, &z, &mut out).map_err(device)? {
            return Err(unsatisfied(row));
        }
        let equal = download(&out)? == reference;
        let ms = time_gpu(b, 5, || match b.shape_products(shape, &z, &mut out).map_err(device)? {
            Some(row) => Err(unsatisfied(row)),
            None => Ok(()),
        })?;
        let base = *first.get_or_insert(ms);
        rows.push(Row {
            what: format!("sparse products A·z, B·z, C·z of a porep-like shape, {split:?}"),
            size: format!("2^{log_n}"),
            gpu_ms: ms,
            cpu_ms: None,
            note: format!(
                "{:.2}x the first; a, b, c {}",
                base / ms,
                if equal { "equal to a thread-a-row evaluation's" } else { "DIFFER from the evaluation's" }
            ),
        });
        if !equal {
            return Err(CudaError::Size { op: "sparse products", size: n, reason: "outputs differ" });
        }
    }
    Ok(())
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn main() {
    let json = std::env::args().skip_while(|a| a != "--json").nth(1);
    let b = match CudaBackend::new(0) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let info = b.gpu().info().clone();
    println!(
        "device: {} (sm_{}{}, {} SMs, {:.0} GiB); CPU threads: {}",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.multiprocessors,
        info.total_memory as f64 / (1u64 << 30) as f64,
        rayon::current_num_threads()
    );
    let mut rows = Vec::new();
    let run = || -> Result<Vec<Row>, CudaError> {
        let mut rows = Vec::new();
        field_throughput(&b, &mut rows)?;
        for (log_n, cpu_runs) in [(16, 5), (20, 3), (24, 3), (27, 1)] {
            ntt_rows(&b, &mut rows, log_n, cpu_runs)?;
        }
        for log_n in [20, 24] {
            witness_map_rows(&b, &mut rows, log_n)?;
        }
        sparse_product_rows(&b, &mut rows, 24)?;
        Ok(rows)
    };
    match run() {
        Ok(r) => rows.extend(r),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
    println!("| what | size | GPU ms | CPU (ark) ms | ratio | note |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        let (cpu, ratio) = match r.cpu_ms {
            Some(c) => (format!("{c:.2}"), format!("{:.1}x", c / r.gpu_ms)),
            None => ("-".into(), "-".into()),
        };
        println!("| {} | {} | {:.3} | {} | {} | {} |", r.what, r.size, r.gpu_ms, cpu, ratio, r.note);
    }
    if let Some(path) = json {
        let body: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"what\":{:?},\"size\":{:?},\"gpu_ms\":{},\"cpu_ms\":{},\"note\":{:?}}}",
                    r.what,
                    r.size,
                    r.gpu_ms,
                    r.cpu_ms.map_or("null".into(), |c| c.to_string()),
                    r.note
                )
            })
            .collect();
        if let Err(e) = std::fs::write(&path, format!("[{}]\n", body.join(",\n"))) {
            eprintln!("error: cannot write {path}: {e}");
        }
    }
}
