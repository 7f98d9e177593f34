//! Times each kernel of a GPU NTT separately (CUDA events, median of 7 after a warm-up), to see where
//! an NTT's time goes, then the whole transforms with the passes multiplying on each of the units
//! (`MulUnits`) and by Shoup's products (`Twiddles::Shoup`) side by side, their outputs compared.
//! Usage: ntt_profile [LOG_N...] (default 20 24).

use ark_bls12_381::Fr;
use ark_ff::UniformRand;
use cudarc::driver::CudaSlice;
use cuzk_cuda::kernels::{self, Decimation, Factor, MulUnits, ScaleAt, Twiddles};
use cuzk_cuda::profile::Probe;
use cuzk_cuda::{ntt, CudaBackend, CudaError, GpuFr};
use cuzk_field::{DeviceFr, DeviceRepr};
use cuzk_groth16::NttKind;
use rand::{rngs::StdRng, SeedableRng};

/// The median by the rule every benchmark uses (`cuzk_groth16::Summary`: the mean of the middle two
/// for an even count); NaN for no values.
fn median(v: Vec<f64>) -> f64 {
    cuzk_groth16::Summary::of(&v).map_or(f64::NAN, |s| s.median)
}

fn time(b: &CudaBackend, mut f: impl FnMut() -> Result<(), CudaError>) -> Result<f64, CudaError> {
    let s = b.gpu().compute_stream();
    f()?;
    let mut v = Vec::new();
    for _ in 0..7 {
        let t = b.gpu().timer()?;
        t.start(s)?;
        f()?;
        t.stop(s)?;
        v.push(t.elapsed_ms()? as f64);
    }
    Ok(median(v))
}

/// The median time of one pass of `t`'s transforms (forward twiddles, `t`'s units) on `x`.
fn time_pass(
    b: &CudaBackend,
    x: &mut CudaSlice<GpuFr>,
    t: &ntt::NttTables,
    s0: u32,
    k: u32,
    dec: Decimation,
) -> Result<f64, CudaError> {
    let (gpu, s) = (b.gpu(), b.gpu().compute_stream());
    time(b, || {
        kernels::ntt_pass(
            gpu,
            s,
            x,
            t.twiddles(false),
            None,
            t.log_n(),
            s0,
            k,
            dec,
            t.units(),
            &mut Probe::default(),
        )
    })
}

fn profile(b: &CudaBackend, log_n: u32) -> Result<(), CudaError> {
    let n = 1usize << log_n;
    let mut rng = StdRng::seed_from_u64(7);
    let host: Vec<GpuFr> = (0..n).map(|_| GpuFr(DeviceFr::from_ark(&Fr::rand(&mut rng)))).collect();
    let gpu = b.gpu();
    let s = gpu.compute_stream();
    let mut x = gpu.upload(s, &host)?;
    let t = b.tables(log_n)?;
    for kind in [NttKind::Forward, NttKind::CosetForward, NttKind::Inverse, NttKind::CosetInverse] {
        let ms = time(b, || ntt::ntt(gpu, s, &t, &mut x, kind))?;
        println!("2^{log_n}: whole {kind:?} NTT {ms:.3} ms");
    }
    // Out of place: the forward transforms' first pass gathers its input in bit-reversed order (no
    // bit reversal of their own), side by side with the in-place ones above.
    let mut out = gpu.upload(s, &host)?;
    for kind in [NttKind::Forward, NttKind::CosetForward] {
        let inplace = time(b, || ntt::ntt(gpu, s, &t, &mut out, kind))?;
        let ms = time(b, || ntt::ntt_into(gpu, s, &t, &x, &mut out, kind))?;
        println!("2^{log_n}: whole {kind:?} NTT out of place {ms:.3} ms (in place {inplace:.3} ms)");
    }
    let k0 = ntt::passes(log_n)[0].1;
    let gather = time(b, || {
        let tw = t.twiddles(false);
        kernels::ntt_pass_gather(
            gpu,
            s,
            &x,
            &mut out,
            tw,
            None,
            log_n,
            k0,
            None,
            t.units(),
            &mut Probe::default(),
        )
    })?;
    let first = time_pass(b, &mut out, &t, 0, k0, Decimation::Time)?;
    println!("  first pass k={k0}: gathering its input {gather:.3} ms, in place {first:.3} ms");
    let mut y = gpu.upload(s, &host)?;
    let mut z = gpu.upload(s, &host)?;
    let zinv = Fr::from(5u64);
    let wm = time(b, || ntt::witness_map(gpu, s, &t, &mut x, &mut y, &mut z, zinv, &mut Probe::default()))?;
    println!("2^{log_n}: witness map transforms {wm:.3} ms");
    let br = time(b, || kernels::bit_reverse(gpu, s, &mut x, log_n, None, &mut Probe::default()))?;
    let one = GpuFr(DeviceFr::from_ark(&Fr::from(3u64)));
    let brs = time(b, || {
        kernels::bit_reverse(
            gpu,
            s,
            &mut x,
            log_n,
            Some(ScaleAt::Destination(Factor::Powers(t.coset_powers(true)))),
            &mut Probe::default(),
        )
    })?;
    println!("  bit reverse {br:.3} ms, with coset scaling {brs:.3} ms");
    for dec in [Decimation::Time, Decimation::Frequency] {
        for (s0, k) in ntt::passes(log_n) {
            let ms = time_pass(b, &mut x, &t, s0, k, dec)?;
            println!(
                "  {dec:?} pass s0={s0:2} k={k:2}: {ms:.3} ms ({:.1} ps per butterfly-stage)",
                ms * 1e9 / (k as f64 * (n / 2) as f64)
            );
        }
    }
    for k in [1u32, 4, 6, 8, 9] {
        if k <= log_n {
            let first = time_pass(b, &mut x, &t, 0, k, Decimation::Time)?;
            let last = time_pass(b, &mut x, &t, log_n - k, k, Decimation::Time)?;
            let per = |ms: f64| ms * 1e9 / (k as f64 * (n / 2) as f64);
            println!(
                "  k={k:2}: first stages {first:.3} ms, last stages {last:.3} ms ({:.1} / {:.1} ps per butterfly-stage)",
                per(first),
                per(last)
            );
        }
    }
    let sc = time(b, || kernels::scale(gpu, s, &mut x, one, None, false, &mut Probe::default()))?;
    // The elementwise scaling reads two-level Montgomery tables (the default tables are folded).
    let tm = ntt::NttTables::new(gpu, s, log_n)?.with_coset_powers(gpu, s, ntt::CosetPowers::TwoLevel)?;
    let scp = time(b, || {
        kernels::scale(gpu, s, &mut x, one, Some(tm.coset_powers(true)), false, &mut Probe::default())
    })?;
    let scr = time(b, || {
        kernels::scale(gpu, s, &mut x, one, Some(tm.coset_powers(true)), true, &mut Probe::default())
    })?;
    drop(tm);
    println!("  scale {sc:.3} ms, with powers {scp:.3} ms, bit-reversed powers {scr:.3} ms");
    coset_powers_side_by_side(b, log_n, &host)?;
    units_side_by_side(b, log_n, &host)?;
    placements_side_by_side(b, log_n, &host)
}

/// The standalone coset NTT and its inverse with each form of their power tables (`CosetPowers`),
/// Shoup's twiddles, alternating twice in one process (the forward also out of place, its powers
/// taken as its first pass gathers its input), and the witness map with each (its own tables
/// folded with the folded forms); every form's outputs must equal the two-level tables'.
fn coset_powers_side_by_side(b: &CudaBackend, log_n: u32, host: &[GpuFr]) -> Result<(), CudaError> {
    let gpu = b.gpu();
    let s = gpu.compute_stream();
    let forms = [
        ntt::CosetPowers::TwoLevel,
        ntt::CosetPowers::Full,
        ntt::CosetPowers::FullShoup,
        ntt::CosetPowers::Folded,
        ntt::CosetPowers::FoldedShoup,
    ];
    let mut reference: Option<[Vec<GpuFr>; 3]> = None;
    for round in 1..=2 {
        for form in forms {
            let t = ntt::NttTables::with_twiddles(gpu, s, log_n, Twiddles::Shoup)?
                .with_coset_powers(gpu, s, form)?;
            let mut line = format!("2^{log_n} round {round} coset powers {form:?}:");
            let mut outputs = Vec::new();
            for kind in [NttKind::CosetForward, NttKind::CosetInverse] {
                let mut x = gpu.upload(s, host)?;
                ntt::ntt(gpu, s, &t, &mut x, kind)?;
                outputs.push(gpu.download(s, &x)?);
                let ms = time(b, || ntt::ntt(gpu, s, &t, &mut x, kind))?;
                line += &format!(" {kind:?} {ms:.3} ms");
            }
            let mut x = gpu.upload(s, host)?;
            let scaled = time(b, || {
                let scale = Some(ScaleAt::Source(Factor::Powers(t.coset_powers(false))));
                kernels::bit_reverse(gpu, s, &mut x, log_n, scale, &mut Probe::default())
            })?;
            line += &format!(", its bit reversal {scaled:.3} ms");
            // Out of place: the forward's leftover powers taken in its gathering first pass.
            let input = gpu.upload(s, host)?;
            let into = time(b, || ntt::ntt_into(gpu, s, &t, &input, &mut x, NttKind::CosetForward))?;
            line += &format!(", CosetForward out of place {into:.3} ms");
            let out_of_place = gpu.download(s, &x)?;
            assert!(
                out_of_place == outputs[0],
                "2^{log_n}: {form:?}'s coset forward out of place differs from in place"
            );
            // The witness map (its tables folded with the folded forms, two-level otherwise).
            let zinv = Fr::from(5u64);
            let (mut a, mut bb, mut c) = (gpu.upload(s, host)?, gpu.upload(s, host)?, gpu.upload(s, host)?);
            ntt::witness_map(gpu, s, &t, &mut a, &mut bb, &mut c, zinv, &mut Probe::default())?;
            outputs.push(gpu.download(s, &a)?);
            let wm = time(b, || {
                ntt::witness_map(gpu, s, &t, &mut a, &mut bb, &mut c, zinv, &mut Probe::default())
            })?;
            line += &format!(", witness map {wm:.3} ms");
            let [forward, inverse, witness]: [Vec<GpuFr>; 3] = outputs.try_into().expect("three outputs");
            match &reference {
                None => reference = Some([forward, inverse, witness]),
                Some([f, i, w]) => {
                    assert!(
                        *f == forward && *i == inverse && *w == witness,
                        "2^{log_n}: coset transforms or the witness map with {form:?} differ from the two-level tables'"
                    );
                    line += "; outputs equal the two-level tables'";
                }
            }
            println!("{line}");
        }
    }
    Ok(())
}

/// Outputs of a coset NTT and the witness map's transforms, the reference that other tables' must equal.
type Outputs = (Vec<GpuFr>, Vec<GpuFr>);

/// The coset NTT and the witness map's transforms of `host` with tables `t`: their outputs checked
/// against `reference` (which becomes them when unset; `what` names the tables, `against` the
/// reference), then their median times, and a buffer to time passes on.
fn coset_and_witness_map(
    b: &CudaBackend,
    t: &ntt::NttTables,
    host: &[GpuFr],
    reference: &mut Option<Outputs>,
    what: &str,
    against: &str,
) -> Result<(f64, f64, CudaSlice<GpuFr>), CudaError> {
    let gpu = b.gpu();
    let s = gpu.compute_stream();
    let (log_n, zinv) = (t.log_n(), Fr::from(5u64));
    let mut x = gpu.upload(s, host)?;
    ntt::ntt(gpu, s, t, &mut x, NttKind::CosetForward)?;
    let coset = gpu.download(s, &x)?;
    let (mut a, mut bb, mut c) = (gpu.upload(s, host)?, gpu.upload(s, host)?, gpu.upload(s, host)?);
    ntt::witness_map(gpu, s, t, &mut a, &mut bb, &mut c, zinv, &mut Probe::default())?;
    let wm = gpu.download(s, &a)?;
    match reference {
        None => *reference = Some((coset, wm)),
        Some((rc, rw)) => {
            assert!(*rc == coset, "2^{log_n}: the coset NTT {what} differs from {against}");
            assert!(*rw == wm, "2^{log_n}: the witness map {what} differs from {against}");
        }
    }
    let coset_ms = time(b, || ntt::ntt(gpu, s, t, &mut x, NttKind::CosetForward))?;
    let wm_ms =
        time(b, || ntt::witness_map(gpu, s, t, &mut a, &mut bb, &mut c, zinv, &mut Probe::default()))?;
    Ok((coset_ms, wm_ms, x))
}

/// The coset NTT, the witness map's transforms and every pass with Shoup's passes keeping more or
/// fewer of their twiddles in shared memory (`TwiddlePlacement`), alternating twice in one process;
/// every placement's outputs must equal the default's.
fn placements_side_by_side(b: &CudaBackend, log_n: u32, host: &[GpuFr]) -> Result<(), CudaError> {
    let gpu = b.gpu();
    let s = gpu.compute_stream();
    let placements =
        [(0, 2), (9, 2), (0, 1)].map(|(first, strided)| kernels::TwiddlePlacement { first, strided });
    let mut reference = None;
    for round in 1..=2 {
        for placement in placements {
            let t = ntt::NttTables::with_twiddles(gpu, s, log_n, Twiddles::Shoup)?.with_placement(placement);
            let what = format!("with {placement:?}");
            let (coset_ms, wm_ms, mut x) =
                coset_and_witness_map(b, &t, host, &mut reference, &what, "the first placement's")?;
            let mut passes = String::new();
            for dec in [Decimation::Time, Decimation::Frequency] {
                for (s0, k) in ntt::passes(log_n) {
                    passes += &format!(" {:.3}", time_pass(b, &mut x, &t, s0, k, dec)?);
                }
            }
            println!(
                "2^{log_n} round {round} first {} strided {}: coset NTT {coset_ms:.3} ms, witness map {wm_ms:.3} ms, passes (time, then frequency){passes} ms",
                placement.first, placement.strided
            );
        }
    }
    Ok(())
}

/// The coset NTT, the witness map's transforms and the first and a strided pass with each choice of
/// units and of twiddle products, in one process; every choice's outputs must equal the integer
/// units' with Montgomery twiddles.
fn units_side_by_side(b: &CudaBackend, log_n: u32, host: &[GpuFr]) -> Result<(), CudaError> {
    let gpu = b.gpu();
    let s = gpu.compute_stream();
    let mut reference = None;
    let mut base = [0.0f64; 2];
    let choices = [
        (MulUnits::Integer, Twiddles::Montgomery),
        (MulUnits::Fp64, Twiddles::Montgomery),
        (MulUnits::Mixed, Twiddles::Montgomery),
        (MulUnits::Integer, Twiddles::Shoup),
    ];
    for (units, form) in choices {
        let t = ntt::NttTables::with_twiddles(gpu, s, log_n, form)?.with_units(units);
        let what = format!("on {units:?} {form:?}");
        let (coset_ms, wm_ms, mut x) =
            coset_and_witness_map(b, &t, host, &mut reference, &what, "the integer units'")?;
        if (units, form) == choices[0] {
            base = [coset_ms, wm_ms];
        }
        let all = ntt::passes(log_n);
        let mut pass_ms = Vec::new();
        for &(s0, k) in [all.first(), all.last()].into_iter().flatten() {
            pass_ms.push(time_pass(b, &mut x, &t, s0, k, Decimation::Time)?);
        }
        println!(
            "2^{log_n} {units:?} {form:?}: coset NTT {coset_ms:.3} ms ({:.3}x), witness map {wm_ms:.3} ms ({:.3}x), first / last pass {:.3} / {:.3} ms; outputs equal the integer units'",
            base[0] / coset_ms,
            base[1] / wm_ms,
            pass_ms.first().copied().unwrap_or(f64::NAN),
            pass_ms.last().copied().unwrap_or(f64::NAN),
        );
    }
    Ok(())
}

fn main() {
    let logs: Vec<u32> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let logs = if logs.is_empty() { vec![20, 24] } else { logs };
    let b = match CudaBackend::new(0) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    for log_n in logs {
        if let Err(e) = profile(&b, log_n) {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
