//! The GPU suite: every kernel against arkworks on fresh random data. Compiled only with the
//! `gpu-tests` feature (`cargo xtask gpu-test`); without a GPU every test fails, never passes.
#![cfg(feature = "gpu-tests")]

use ark_bls12_381::{Fq, Fq2, Fr, G1Projective, G2Projective};
use ark_ec::{CurveGroup, VariableBaseMSM};
use ark_ff::{BigInt, FftField, Field, One, PrimeField, UniformRand, Zero};
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use cuzk_circuits::PorepLike;
use cuzk_cuda::msm::{Curve, G1, G2};
use cuzk_cuda::msm::{FirstRound, Sort};
use cuzk_cuda::{kernels, CudaBackend, GpuFq, GpuFq2, GpuFr, MsmConfig, Residency, PARTIAL_TABLE_CHOICES};
use cuzk_field::{constants, DeviceFq, DeviceFq2, DeviceFr, DeviceRepr};
use cuzk_groth16::{prove, witness_map, CpuBackend, NttKind, PolyBackend, PreparedKey, ProveOptions};
use cuzk_synth::{synthesize, SynthesisOptions};
use cuzk_testkit::{keygen, seeded_rng, Synthetic};
use rand::{rngs::StdRng, Rng};
use rayon::prelude::*;

/// The README's example (`examples/alone.rs`), run here on the GPU.
#[path = "../examples/alone.rs"]
mod alone;

#[test]
fn the_readme_example_runs() {
    alone::main().unwrap_or_else(|e| panic!("the README's example failed: {e}"));
}

fn backend() -> CudaBackend {
    CudaBackend::new(0).unwrap_or_else(|e| panic!("the GPU suite needs a CUDA GPU: {e}"))
}

/// Random elements with edge values first: 0, 1, 2, -1, -2, 2^k (k < 64) and random ones.
fn inputs<F: PrimeField>(rng: &mut StdRng, n: usize) -> Vec<F> {
    let mut v = vec![F::zero(), F::one(), F::from(2u64), -F::one(), -F::from(2u64)];
    v.extend((0..64).map(|k| F::from(1u64 << k)));
    v.extend((0..64).map(|k| -F::from(1u64 << k)));
    while v.len() < n {
        v.push(F::rand(rng));
    }
    v.truncate(n);
    v
}

fn check_field<F, G>(
    name: &str,
    n: usize,
    wrap: impl Fn(&F) -> G + Sync,
    unwrap: impl Fn(&G) -> F + Sync,
    canonical_limbs: impl Fn(&F) -> G + Sync,
    from_canonical: impl Fn(&F) -> F + Sync,
    launch: impl Fn(
        &CudaBackend,
        &cudarc::driver::CudaSlice<G>,
        &cudarc::driver::CudaSlice<G>,
        &mut cudarc::driver::CudaSlice<G>,
    ),
) where
    F: Field + PrimeField,
    G: cudarc::driver::DeviceRepr
        + cudarc::driver::ValidAsZeroBits
        + Default
        + Clone
        + Copy
        + Send
        + Sync
        + PartialEq
        + std::fmt::Debug,
{
    let gpu = backend();
    let mut rng = seeded_rng(name);
    let a: Vec<F> = inputs(&mut rng, n);
    let mut b: Vec<F> = inputs(&mut rng, n);
    b.rotate_left(rng.gen_range(0..n));
    let stream = gpu.gpu().compute_stream();
    let da = gpu.gpu().upload(stream, &a.iter().map(&wrap).collect::<Vec<_>>()).unwrap();
    let db = gpu.gpu().upload(stream, &b.iter().map(&wrap).collect::<Vec<_>>()).unwrap();
    let mut out = gpu.gpu().zeros::<G>(stream, n * kernels::FIELD_OPS).unwrap();
    launch(&gpu, &da, &db, &mut out);
    let out = gpu.gpu().download(stream, &out).unwrap();
    (0..n).into_par_iter().for_each(|i| {
        let (x, y) = (a[i], b[i]);
        let o = &out[i * kernels::FIELD_OPS..(i + 1) * kernels::FIELD_OPS];
        let inv = x.inverse().unwrap_or_default();
        let expect = [x + y, x - y, x * y, x.square(), -x, inv, from_canonical(&x)];
        for (k, e) in expect.iter().enumerate() {
            assert_eq!(unwrap(&o[k]), *e, "{name}: op {k} on element {i}");
        }
        assert_eq!(o[7], canonical_limbs(&x), "{name}: from_mont on element {i}");
        assert_eq!(unwrap(&o[8]), inv, "{name}: inverse_vartime on element {i}");
        assert_eq!(unwrap(&o[9]), inv, "{name}: inverse_euclid on element {i}");
        assert_eq!(unwrap(&o[10]), x * y, "{name}: mul_fp64 on element {i}");
    });
}

#[test]
fn fr_operations_match_arkworks() {
    check_field::<Fr, GpuFr>(
        "fr_ops",
        1 << 21,
        |x| GpuFr(DeviceFr::from_ark(x)),
        |g| g.0.to_ark_checked(0).expect("reduced"),
        |x| GpuFr(DeviceFr { limbs: x.into_bigint().0 }),
        // to_mont reads the Montgomery limbs of x as a canonical integer.
        |x| Fr::from_bigint(BigInt(x.0 .0)).expect("limbs of a reduced element are below r"),
        |gpu, a, b, out| kernels::fr_ops(gpu.gpu(), gpu.gpu().compute_stream(), a, b, out).unwrap(),
    );
}

#[test]
fn fq_operations_match_arkworks() {
    check_field::<Fq, GpuFq>(
        "fq_ops",
        1 << 20,
        |x| GpuFq(DeviceFq::from_ark(x)),
        |g| g.0.to_ark_checked(0).expect("reduced"),
        |x| GpuFq(DeviceFq { limbs: x.into_bigint().0 }),
        |x| Fq::from_bigint(BigInt(x.0 .0)).expect("limbs of a reduced element are below p"),
        |gpu, a, b, out| kernels::fq_ops(gpu.gpu(), gpu.gpu().compute_stream(), a, b, out).unwrap(),
    );
}

#[test]
fn fq2_operations_match_arkworks() {
    let gpu = backend();
    let mut rng = seeded_rng("fq2_ops");
    let n = 1 << 18;
    let mut a: Vec<Fq2> = (0..n).map(|_| Fq2::rand(&mut rng)).collect();
    let b: Vec<Fq2> = (0..n).map(|_| Fq2::rand(&mut rng)).collect();
    a[0] = Fq2::zero();
    a[1] = Fq2::new(Fq::zero(), Fq::from(1u64));
    a[2] = Fq2::new(-Fq::from(1u64), Fq::zero());
    let s = gpu.gpu().compute_stream();
    let wrap = |v: &[Fq2]| v.iter().map(|x| GpuFq2(DeviceFq2::from_ark(x))).collect::<Vec<_>>();
    let (da, db) = (gpu.gpu().upload(s, &wrap(&a)).unwrap(), gpu.gpu().upload(s, &wrap(&b)).unwrap());
    let mut out = gpu.gpu().zeros::<GpuFq2>(s, n * kernels::FQ2_OPS).unwrap();
    kernels::fq2_ops(gpu.gpu(), s, &da, &db, &mut out).unwrap();
    let out = gpu.gpu().download(s, &out).unwrap();
    (0..n).into_par_iter().for_each(|i| {
        let (x, y) = (a[i], b[i]);
        let inv = x.inverse().unwrap_or_default();
        let expect = [x + y, x - y, x * y, x.square(), -x, inv, inv, inv];
        for (k, e) in expect.iter().enumerate() {
            assert_eq!(
                out[i * kernels::FQ2_OPS + k].0.to_ark_checked(i).unwrap(),
                *e,
                "fq2 op {k} on element {i}"
            );
        }
    });
}

fn ark_ntt(v: &mut Vec<Fr>, kind: NttKind) {
    let d = Radix2EvaluationDomain::<Fr>::new(v.len()).unwrap();
    match kind {
        NttKind::Forward => d.fft_in_place(v),
        NttKind::Inverse => d.ifft_in_place(v),
        NttKind::CosetForward => d.get_coset(Fr::GENERATOR).unwrap().fft_in_place(v),
        NttKind::CosetInverse => d.get_coset(Fr::GENERATOR).unwrap().ifft_in_place(v),
    }
}

fn random_frs(rng: &mut StdRng, n: usize) -> Vec<Fr> {
    let seeds: Vec<u64> = (0..n.div_ceil(1 << 14)).map(|_| rng.gen()).collect();
    seeds
        .par_iter()
        .flat_map_iter(|s| {
            let mut r = <StdRng as rand::SeedableRng>::seed_from_u64(*s);
            (0..1 << 14).map(move |_| Fr::rand(&mut r))
        })
        .take_any(n)
        .collect::<Vec<_>>()
        .into_iter()
        .take(n)
        .collect()
}

/// The first index where two vectors differ, for a short failure message.
fn first_difference(a: &[Fr], b: &[Fr]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y).or((a.len() != b.len()).then_some(a.len().min(b.len())))
}

fn check_ntt(gpu: &CudaBackend, rng: &mut StdRng, log_n: u32, kinds: &[NttKind]) {
    let n = 1usize << log_n;
    let input = random_frs(rng, n);
    for &kind in kinds {
        let mut poly = gpu.poly_from_host(&input, n).unwrap();
        gpu.ntt(&mut [&mut poly], kind).unwrap();
        let got = gpu.poly_to_host(&poly).unwrap();
        let mut want = input.clone();
        ark_ntt(&mut want, kind);
        let diff = first_difference(&got, &want);
        assert!(diff.is_none(), "NTT {kind:?} of size 2^{log_n} differs from ark-poly at index {diff:?}");
    }
}

const ALL: [NttKind; 4] = [NttKind::Forward, NttKind::Inverse, NttKind::CosetForward, NttKind::CosetInverse];

#[test]
fn ntt_every_size_up_to_2_pow_24_matches_ark_poly() {
    let gpu = backend();
    let mut rng = seeded_rng("ntt_sizes");
    for log_n in 0..=24 {
        check_ntt(&gpu, &mut rng, log_n, &ALL);
    }
}

#[test]
fn ntt_larger_sizes_match_ark_poly() {
    let gpu = backend();
    let mut rng = seeded_rng("ntt_large");
    for log_n in [25, 26] {
        check_ntt(&gpu, &mut rng, log_n, &[NttKind::CosetForward, NttKind::Inverse]);
    }
}

#[test]
fn ntt_round_trips_and_batches() {
    let gpu = backend();
    let mut rng = seeded_rng("ntt_batch");
    let n = 1 << 12;
    let inputs: Vec<Vec<Fr>> = (0..3).map(|_| random_frs(&mut rng, n)).collect();
    let mut polys: Vec<_> = inputs.iter().map(|v| gpu.poly_from_host(v, n).unwrap()).collect();
    let mut refs: Vec<&mut _> = polys.iter_mut().collect();
    gpu.ntt(&mut refs, NttKind::CosetForward).unwrap();
    gpu.ntt(&mut refs, NttKind::CosetInverse).unwrap();
    for (p, v) in polys.iter().zip(&inputs) {
        assert!(gpu.poly_to_host(p).unwrap() == *v, "coset round trip changed a polynomial");
    }
    let mut odd = gpu.poly_from_host(&inputs[0], n).unwrap();
    let mut short = gpu.poly_from_host(&inputs[0][..8], 8).unwrap();
    assert!(gpu.ntt(&mut [&mut odd, &mut short], NttKind::Forward).is_err(), "mixed lengths are refused");
    assert!(gpu.poly_from_host(&inputs[0], 12).is_err(), "non-power-of-two sizes are refused");
}

#[test]
fn witness_map_on_the_gpu_equals_the_cpu_reference() {
    let gpu = backend();
    let mut rng = seeded_rng("witness_map");
    for (k, zero) in [(10u32, false), (16, true), (20, false)] {
        let circuit = Synthetic {
            constraints: (1 << k) - 3,
            public_inputs: 2,
            seed: rng.gen(),
            zero_witness: zero,
            bit_share_per_mille: 0,
        };
        let syn = synthesize(circuit, &SynthesisOptions::default()).unwrap();
        let h_gpu = gpu.poly_to_host(&witness_map(&gpu, &syn).unwrap()).unwrap();
        let h_cpu = witness_map(&CpuBackend, &syn).unwrap().0;
        let diff = first_difference(&h_gpu, &h_cpu);
        assert!(diff.is_none(), "witness map differs at 2^{k}, first at index {diff:?}");
        assert!(h_gpu[h_gpu.len() - 1].is_zero());
    }
}

#[test]
fn witness_map_transforms_match_the_cpu_on_random_evaluations() {
    // Random a, b, c (no circuit behind them): the GPU's reordered chain of transforms must still
    // equal the CPU's inverse / coset forward / quotient / coset inverse, element for element.
    let gpu = backend();
    let mut rng = seeded_rng("witness_map_transforms");
    for log_n in (1u32..=13).chain([18, 22]) {
        let n = 1usize << log_n;
        let (a, b, c) = (random_frs(&mut rng, n), random_frs(&mut rng, n), random_frs(&mut rng, n));
        let z_inv = Fr::rand(&mut rng);
        let [mut ga, mut gb, mut gc] = [&a, &b, &c].map(|v| gpu.poly_from_host(v, n).unwrap());
        gpu.witness_map_polys(&mut ga, &mut gb, &mut gc, z_inv).unwrap();
        let [mut ca, mut cb, mut cc] = [&a, &b, &c].map(|v| CpuBackend.poly_from_host(v, n).unwrap());
        CpuBackend.witness_map_polys(&mut ca, &mut cb, &mut cc, z_inv).unwrap();
        let h_gpu = gpu.poly_to_host(&ga).unwrap();
        let diff = first_difference(&h_gpu, &ca.0);
        assert!(diff.is_none(), "witness map transforms differ at 2^{log_n}, first at index {diff:?}");
    }
}

/// Every NTT kind and the witness map with tables `t` (of `2^log_n`) on fresh random inputs give the
/// same bits as ark-poly's transforms and the CPU's witness map; `what` names the tables.
fn check_ntts_against_the_cpu(
    gpu: &CudaBackend,
    t: &cuzk_cuda::ntt::NttTables,
    what: &str,
    rng: &mut StdRng,
) {
    let (g, s) = (gpu.gpu(), gpu.gpu().compute_stream());
    let to_gpu = |v: &[Fr]| v.iter().map(|x| GpuFr(DeviceFr::from_ark(x))).collect::<Vec<_>>();
    let to_ark =
        |v: Vec<GpuFr>| v.iter().map(|x| x.0.to_ark_checked(0).expect("reduced")).collect::<Vec<Fr>>();
    let log_n = t.log_n();
    let n = 1usize << log_n;
    let input = random_frs(rng, n);
    for kind in ALL {
        let mut x = g.upload(s, &to_gpu(&input)).unwrap();
        cuzk_cuda::ntt::ntt(g, s, t, &mut x, kind).unwrap();
        let mut want = input.clone();
        ark_ntt(&mut want, kind);
        let diff = first_difference(&to_ark(g.download(s, &x).unwrap()), &want);
        assert!(diff.is_none(), "{what}: NTT {kind:?} of 2^{log_n} differs from ark-poly at {diff:?}");
        // Out of place (the forward ones' first pass gathering its input bit-reversed): the same
        // bits, the input untouched, whatever `out` held before.
        let x = g.upload(s, &to_gpu(&input)).unwrap();
        let mut out = g.upload(s, &to_gpu(&random_frs(rng, n))).unwrap();
        cuzk_cuda::ntt::ntt_into(g, s, t, &x, &mut out, kind).unwrap();
        let diff = first_difference(&to_ark(g.download(s, &out).unwrap()), &want);
        assert!(diff.is_none(), "{what}: NTT {kind:?} of 2^{log_n} into another buffer differs at {diff:?}");
        assert!(to_ark(g.download(s, &x).unwrap()) == input, "{what}: ntt_into changed its input");
    }
    let (a, b, c) = (random_frs(rng, n), random_frs(rng, n), random_frs(rng, n));
    let z_inv = Fr::rand(rng);
    let [mut ga, mut gb, mut gc] = [&a, &b, &c].map(|v| g.upload(s, &to_gpu(v)).unwrap());
    cuzk_cuda::ntt::witness_map(g, s, t, &mut ga, &mut gb, &mut gc, z_inv, &mut Default::default()).unwrap();
    let [mut ca, mut cb, mut cc] = [&a, &b, &c].map(|v| CpuBackend.poly_from_host(v, n).unwrap());
    CpuBackend.witness_map_polys(&mut ca, &mut cb, &mut cc, z_inv).unwrap();
    let diff = first_difference(&to_ark(g.download(s, &ga).unwrap()), &ca.0);
    assert!(diff.is_none(), "{what}: witness map of 2^{log_n} differs from the CPU's at {diff:?}");
}

#[test]
fn ntt_passes_on_the_fp64_units_and_by_shoup_match_ark_poly_and_the_cpu_witness_map() {
    // The passes with their multiplications on the FP64 units (every warp, or alternate warps), on
    // the integer units with Montgomery's or Shoup's products by their twiddles (the backend's
    // tables take Shoup's on the integer units), give the same bits as ark-poly's transforms and the
    // CPU's witness map.
    let gpu = backend();
    let (g, s) = (gpu.gpu(), gpu.gpu().compute_stream());
    let mut rng = seeded_rng("ntt_units");
    let (fp64, mixed, integer) =
        (kernels::MulUnits::Fp64, kernels::MulUnits::Mixed, kernels::MulUnits::Integer);
    let (montgomery, shoup) = (kernels::Twiddles::Montgomery, kernels::Twiddles::Shoup);
    for (units, form) in [(fp64, montgomery), (mixed, montgomery), (integer, montgomery), (integer, shoup)] {
        for log_n in (1u32..=12).chain([17, 21]) {
            let t = cuzk_cuda::ntt::NttTables::with_twiddles(g, s, log_n, form).unwrap().with_units(units);
            check_ntts_against_the_cpu(&gpu, &t, &format!("{units:?} {form:?}"), &mut rng);
        }
    }
}

#[test]
fn ntt_passes_with_their_twiddles_placed_otherwise_match_ark_poly_and_the_cpu_witness_map() {
    // Shoup's passes with other placements of their twiddles than the default's (a first pass's all
    // or its last three stages' read from device memory where they are used; a strided pass's last
    // stage, last two or every stage's) give the same bits.
    let gpu = backend();
    let (g, s) = (gpu.gpu(), gpu.gpu().compute_stream());
    let mut rng = seeded_rng("ntt_placement");
    let placements = [(9, 2), (0, 1), (9, 1), (3, 9)];
    for (first, strided) in placements {
        let placement = kernels::TwiddlePlacement { first, strided };
        for log_n in (1u32..=12).chain([17, 21]) {
            let t = cuzk_cuda::ntt::NttTables::with_twiddles(g, s, log_n, kernels::Twiddles::Shoup)
                .unwrap()
                .with_placement(placement);
            check_ntts_against_the_cpu(&gpu, &t, &format!("{placement:?}"), &mut rng);
        }
    }
}

/// Every transform and the witness map with tables whose coset powers take each of `forms`, under
/// either twiddle form, at each of `sizes` (log2), against ark-poly and the CPU backend.
fn check_coset_forms(gpu: &CudaBackend, forms: &[cuzk_cuda::ntt::CosetPowers], sizes: &[u32], seed: &str) {
    let (g, s) = (gpu.gpu(), gpu.gpu().compute_stream());
    let mut rng = seeded_rng(seed);
    for form in [kernels::Twiddles::Montgomery, kernels::Twiddles::Shoup] {
        for &coset in forms {
            for &log_n in sizes {
                let t = cuzk_cuda::ntt::NttTables::with_twiddles(g, s, log_n, form)
                    .unwrap()
                    .with_coset_powers(g, s, coset)
                    .unwrap();
                assert_eq!(t.coset_form(), coset);
                check_ntts_against_the_cpu(gpu, &t, &format!("{form:?} {coset:?}"), &mut rng);
            }
        }
    }
}

#[test]
fn coset_ntts_scaling_by_two_level_or_full_power_tables_match_ark_poly_and_the_cpu_witness_map() {
    // The standalone coset transforms with two-level power tables (two products an element) or full
    // ones (one, Montgomery's or Shoup's), under either twiddle form, give the same bits, and so does
    // the witness map (two-level tables with all three); the kernels that read two-level tables only
    // refuse a full one.
    let gpu = backend();
    let (g, s) = (gpu.gpu(), gpu.gpu().compute_stream());
    use cuzk_cuda::ntt::CosetPowers;
    let sizes: Vec<u32> = (1u32..=12).chain([17, 21]).collect();
    let forms = [CosetPowers::TwoLevel, CosetPowers::Full, CosetPowers::FullShoup];
    check_coset_forms(&gpu, &forms, &sizes, "ntt_full_coset");
    let t =
        cuzk_cuda::ntt::NttTables::new(g, s, 10).unwrap().with_coset_powers(g, s, CosetPowers::Full).unwrap();
    let mut x = g.zeros::<GpuFr>(s, 1 << 10).unwrap();
    let one = GpuFr(DeviceFr::from_ark(&Fr::from(1u64)));
    let err = kernels::scale(g, s, &mut x, one, Some(t.coset_powers(false)), false, &mut Default::default())
        .expect_err("scale reads two-level tables only");
    assert!(err.to_string().contains("two-level"), "{err}");
}

#[test]
fn coset_ntts_with_powers_folded_into_the_first_and_middle_passes_match_ark_poly_and_the_cpu_witness_map() {
    // The standalone coset transforms whose first and middle passes carry the powers of the index
    // bits they cover (the first pass from its stage 2, so from 2^3; middle passes from 2^19, three
    // passes), the bit reversal scaling by a small table of the others, in Montgomery's or Shoup's
    // form, under either twiddle form, and the witness map folded the same way (its turns by tables
    // without the middle passes' bits, its last step without the first and middle passes'). A pass
    // asked to carry a coset's powers it has no table for is refused.
    let gpu = backend();
    let (g, s) = (gpu.gpu(), gpu.gpu().compute_stream());
    use cuzk_cuda::ntt::CosetPowers;
    let (forms, sizes) =
        ([CosetPowers::Folded, CosetPowers::FoldedShoup], [1u32, 2, 3, 4, 5, 9, 10, 11, 18, 19, 20, 21, 24]);
    check_coset_forms(&gpu, &forms, &sizes, "ntt_folded_coset");
    let log_n = 19;
    let t = cuzk_cuda::ntt::NttTables::new(g, s, log_n).unwrap();
    let (s0, k) = cuzk_cuda::ntt::passes(log_n)[1];
    let mut x = g.zeros::<GpuFr>(s, 1 << log_n).unwrap();
    // Not 7: that is the coset generator g itself, whose folded tables the default tables hold.
    let err = kernels::ntt_pass(
        g,
        s,
        &mut x,
        t.twiddles(false),
        Some(Fr::from(5u64)),
        log_n,
        s0,
        k,
        kernels::Decimation::Time,
        kernels::MulUnits::Integer,
        &mut Default::default(),
    )
    .expect_err("no folded table for this pass");
    assert!(err.to_string().contains("coset powers"), "{err}");
    // A transform into a buffer of another length is refused, naming the operation.
    let mut short = g.zeros::<GpuFr>(s, (1 << log_n) - 1).unwrap();
    let err = cuzk_cuda::ntt::ntt_into(g, s, &t, &x, &mut short, NttKind::CosetForward)
        .expect_err("output of the wrong length");
    assert!(err.to_string().contains("ntt_into"), "{err}");
}

#[test]
fn shoup_twiddle_tables_hold_canonical_powers_and_their_quotients() {
    // Each table: w^i in canonical form for i < n/2, then floor(w^i 2^256 / r) (by the definition,
    // checked with integers on the host), and the Montgomery table's w^i are the same powers.
    let gpu = backend();
    let (g, s) = (gpu.gpu(), gpu.gpu().compute_stream());
    for log_n in [1u32, 2, 5, 11, 16] {
        let t = cuzk_cuda::ntt::NttTables::with_twiddles(g, s, log_n, kernels::Twiddles::Shoup).unwrap();
        let m = cuzk_cuda::ntt::NttTables::new(g, s, log_n).unwrap();
        let half = 1usize << (log_n - 1);
        for inverse in [false, true] {
            let table = t.twiddles(inverse);
            assert_eq!(table.form(), kernels::Twiddles::Shoup);
            assert_eq!(m.twiddles(inverse).form(), kernels::Twiddles::Montgomery);
            let got = g.download(s, table.values()).unwrap();
            assert_eq!(got.len(), 2 * half, "2^{log_n}: Shoup table length");
            let powers = g.download(s, m.twiddles(inverse).values()).unwrap();
            for i in 0..half {
                let w = powers[i].0.to_ark_checked(0).expect("reduced");
                assert_eq!(got[i].0.limbs, w.into_bigint().0, "2^{log_n} inverse {inverse}: canonical w^{i}");
                assert!(
                    cuzk_testkit::is_shoup_quotient(&got[i].0.limbs, &got[half + i].0.limbs, &Fr::MODULUS.0),
                    "2^{log_n} inverse {inverse}: quotient of w^{i}"
                );
            }
        }
    }
}

#[test]
fn devices_are_discovered_and_bad_ordinals_refused() {
    let devices = cuzk_cuda::Gpu::discover().unwrap();
    assert!(!devices.is_empty());
    assert!(devices[0].compute_capability.0 >= 7, "{:?}", devices[0]);
    assert!(cuzk_cuda::Gpu::new(devices.len()).is_err());
    assert_eq!(constants::fr().bits, 255);
}

// ---- MSM ----

/// Scalar distributions the MSM must get right.
#[derive(Debug, Clone, Copy)]
enum Scalars {
    Random,
    Zero,
    One,
    /// Mostly 0 and 1, some small values and a few random ones: a SHA-256-like witness.
    Bits,
    /// Values within 2^20 of the modulus (every window's digit negative after the carry).
    NearModulus,
    /// Small values only (2..300): a few buckets of window 0 hold everything.
    Small,
}

fn scalars(kind: Scalars, n: usize, rng: &mut StdRng) -> Vec<Fr> {
    (0..n)
        .map(|_| match kind {
            Scalars::Random => Fr::rand(rng),
            Scalars::Zero => Fr::zero(),
            Scalars::One => Fr::one(),
            Scalars::Bits => match rng.gen_range(0..100) {
                0..=44 => Fr::zero(),
                45..=89 => Fr::one(),
                90..=97 => Fr::from(rng.gen_range(2u64..1 << 16)),
                _ => Fr::rand(rng),
            },
            Scalars::NearModulus => -Fr::from(rng.gen_range(1u64..1 << 20)),
            Scalars::Small => Fr::from(rng.gen_range(2u64..300)),
        })
        .collect()
}

/// Random bases with the awkward ones mixed in: the identity, and repeats (also of the negation).
fn bases<G: CurveGroup>(n: usize, rng: &mut StdRng) -> Vec<G::Affine> {
    let mut v: Vec<G> = (0..n).map(|_| G::rand(rng)).collect();
    for i in 0..n {
        match rng.gen_range(0..20) {
            0 => v[i] = G::zero(),
            1 if i > 0 => v[i] = v[rng.gen_range(0..i)],
            2 if i > 0 => v[i] = -v[rng.gen_range(0..i)],
            _ => {}
        }
    }
    G::normalize_batch(&v)
}

fn check_msm<C: Curve>(
    gpu: &CudaBackend,
    bases: &[ark_ec::short_weierstrass::Affine<C::Config>],
    scalars: &[Fr],
    expected: ark_ec::short_weierstrass::Projective<C::Config>,
    what: &str,
) {
    let dev = gpu.upload_bases::<C>(bases).unwrap();
    let got = gpu.msm_host(&dev, scalars).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(got.into_affine(), expected.into_affine(), "{} MSM differs: {what}", C::NAME);
}

const KINDS: [Scalars; 6] =
    [Scalars::Random, Scalars::Zero, Scalars::One, Scalars::Bits, Scalars::NearModulus, Scalars::Small];

#[test]
fn msm_g1_matches_ark_ec_on_awkward_sizes_and_scalars() {
    let gpu = backend();
    let mut rng = seeded_rng("msm_g1");
    let mut sizes = vec![1usize, 2, 5];
    sizes.extend((3..=12).flat_map(|k| [(1 << k) - 1, (1 << k) + 1]));
    let all = bases::<G1Projective>(*sizes.iter().max().unwrap(), &mut rng);
    for &n in &sizes {
        for kind in KINDS {
            let s = scalars(kind, n, &mut rng);
            let expected = G1Projective::msm(&all[..n], &s).unwrap();
            check_msm::<G1>(&gpu, &all[..n], &s, expected, &format!("n = {n}, {kind:?}"));
        }
    }
}

#[test]
fn msm_g2_matches_ark_ec_on_awkward_sizes_and_scalars() {
    let gpu = backend();
    let mut rng = seeded_rng("msm_g2");
    let sizes = [1usize, 2, 5, 31, 33, 255, 257, 1023, 4097];
    let all = bases::<G2Projective>(4097, &mut rng);
    for &n in &sizes {
        for kind in KINDS {
            let s = scalars(kind, n, &mut rng);
            let expected = G2Projective::msm(&all[..n], &s).unwrap();
            check_msm::<G2>(&gpu, &all[..n], &s, expected, &format!("n = {n}, {kind:?}"));
        }
    }
}

#[test]
fn msm_every_window_width_and_small_batches_agree() {
    let mut rng = seeded_rng("msm_windows");
    let n = 3000;
    let b1 = bases::<G1Projective>(n, &mut rng);
    let b2 = bases::<G2Projective>(n, &mut rng);
    for kind in [Scalars::Random, Scalars::Bits] {
        let s = scalars(kind, n, &mut rng);
        let e1 = G1Projective::msm(&b1, &s).unwrap();
        let e2 = G2Projective::msm(&b2, &s).unwrap();
        for c in (2..=16).chain([17, 18, 20, 22, 24]) {
            let gpu = backend().with_msm_config(MsmConfig { window_bits: Some(c), ..MsmConfig::default() });
            check_msm::<G1>(&gpu, &b1, &s, e1, &format!("c = {c}, {kind:?}"));
        }
        for c in [3, 13, 18, 21] {
            let gpu = backend().with_msm_config(MsmConfig { window_bits: Some(c), ..MsmConfig::default() });
            check_msm::<G2>(&gpu, &b2, &s, e2, &format!("c = {c}, {kind:?}"));
        }
        for batch in [1usize, 7, 1000, 2999] {
            let gpu = backend().with_msm_config(MsmConfig { batch, ..MsmConfig::default() });
            check_msm::<G1>(&gpu, &b1, &s, e1, &format!("batch = {batch}, {kind:?}"));
            check_msm::<G2>(&gpu, &b2, &s, e2, &format!("batch = {batch}, {kind:?}"));
        }
    }
}

#[test]
fn msm_with_streamed_bases_and_selected_bases_agrees() {
    // Bases in pinned host memory, uploaded batch by batch on the copy stream; and bases of which half
    // are points at infinity, kept compacted with a selection of their scalars (in device memory and
    // streamed).
    let mut rng = seeded_rng("msm_streamed_selected");
    let n = 5000;
    let dense = (bases::<G1Projective>(n, &mut rng), bases::<G2Projective>(n, &mut rng));
    let mut sparse_bases = dense.clone();
    for i in (0..n).filter(|i| i % 2 == 1 || i % 7 == 0) {
        sparse_bases.0[i] = Default::default();
        sparse_bases.1[i] = Default::default();
    }
    for kind in [Scalars::Random, Scalars::Bits, Scalars::One] {
        for sparse in [false, true] {
            let (b1, b2) = if sparse { &sparse_bases } else { &dense };
            let s = scalars(kind, n, &mut rng);
            let e1 = G1Projective::msm(b1, &s).unwrap();
            let e2 = G2Projective::msm(b2, &s).unwrap();
            for residency in [Residency::Device, Residency::Host] {
                for batch in [1usize, 999, 2048, n] {
                    let what = format!("{kind:?}, sparse {sparse}, {residency:?}, batch {batch}");
                    let gpu = backend().with_msm_config(MsmConfig { batch, ..MsmConfig::default() });
                    let d1 = gpu.upload_bases_to::<G1>(b1, residency).unwrap();
                    let d2 = gpu.upload_bases_to::<G2>(b2, residency).unwrap();
                    assert_eq!(d1.is_resident(), residency == Residency::Device, "{what}");
                    if sparse {
                        assert!(d1.kept() < n * 5 / 8 && d2.kept() < n * 5 / 8, "{what}: kept {}", d1.kept());
                    } else {
                        // bases() makes about one in twenty an identity: too few to drop.
                        assert_eq!((d1.kept(), d2.kept()), (n, n), "{what}");
                    }
                    let g1 = gpu.msm_host(&d1, &s).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(g1.into_affine(), e1.into_affine(), "G1 MSM differs: {what}");
                    if batch != 1 {
                        let g2 = gpu.msm_host(&d2, &s).unwrap_or_else(|e| panic!("{what}: {e}"));
                        assert_eq!(g2.into_affine(), e2.into_affine(), "G2 MSM differs: {what}");
                    }
                }
            }
            // The selection is checked against the scalars: one too few is an error, not a fault.
            let d1 = backend().upload_bases::<G1>(b1).unwrap();
            assert!(backend().msm_host(&d1, &s[..n - 1]).is_err());
        }
    }
}

/// Window widths and multiples per point a table is tried with: full tables (every window in one
/// set), partial ones (sets of a few windows, the last one short), and two multiples.
const TABLES_G1: [(u32, u32); 9] =
    [(2, 2), (3, 86), (5, 52), (9, 3), (13, 7), (16, 16), (16, 5), (22, 12), (24, 11)];
const TABLES_G2: [(u32, u32); 4] = [(4, 64), (13, 20), (16, 4), (21, 13)];

#[test]
fn msm_with_a_table_of_multiples_matches_ark_ec() {
    // Bases replaced by 2^(c j) P for j < m, so m windows share one set of buckets: every scalar kind
    // on awkward sizes, batches, bases with identities and repeats, compacted sparse bases, and tables
    // rebuilt over older ones.
    let mut rng = seeded_rng("msm_tables");
    let n = 3000;
    let b1 = bases::<G1Projective>(n, &mut rng);
    let b2 = bases::<G2Projective>(n, &mut rng);
    let gpu = backend();
    for &size in &[1usize, 2, 5, 257, n] {
        for kind in KINDS {
            let s = scalars(kind, size, &mut rng);
            let e1 = G1Projective::msm(&b1[..size], &s).unwrap().into_affine();
            let e2 = G2Projective::msm(&b2[..size], &s).unwrap().into_affine();
            let mut d1 = gpu.upload_bases_to::<G1>(&b1[..size], Residency::Device).unwrap();
            for (c, m) in TABLES_G1 {
                d1.precompute(gpu.gpu(), c, m).unwrap_or_else(|e| panic!("G1 table c = {c}, m = {m}: {e}"));
                assert_eq!(d1.table().map(|t| (t.window_bits, t.multiples)), Some((c, m)));
                let got = gpu.msm_host(&d1, &s).unwrap();
                assert_eq!(got.into_affine(), e1, "G1 n = {size}, {kind:?}, c = {c}, m = {m}");
            }
            let mut d2 = gpu.upload_bases_to::<G2>(&b2[..size], Residency::Device).unwrap();
            for (c, m) in TABLES_G2 {
                d2.precompute(gpu.gpu(), c, m).unwrap_or_else(|e| panic!("G2 table c = {c}, m = {m}: {e}"));
                let got = gpu.msm_host(&d2, &s).unwrap();
                assert_eq!(got.into_affine(), e2, "G2 n = {size}, {kind:?}, c = {c}, m = {m}");
            }
            // Back to the points alone.
            d1.precompute(gpu.gpu(), 16, 1).unwrap();
            assert_eq!(d1.table(), None);
            assert_eq!(gpu.msm_host(&d1, &s).unwrap().into_affine(), e1, "G1 n = {size}, {kind:?}, no table");
        }
    }
    // Batches cut the table by point; sparse bases keep only their points' multiples.
    let mut sparse = b1.clone();
    for i in (0..n).filter(|i| i % 2 == 1 || i % 7 == 0) {
        sparse[i] = Default::default();
    }
    for kind in [Scalars::Random, Scalars::Bits, Scalars::One] {
        let s = scalars(kind, n, &mut rng);
        for (what, b) in [("dense", &b1), ("sparse", &sparse)] {
            let e = G1Projective::msm(b, &s).unwrap().into_affine();
            for batch in [1usize, 999, 2048, n] {
                let gpu = backend().with_msm_config(MsmConfig { batch, ..MsmConfig::default() });
                let mut d = gpu.upload_bases_to::<G1>(b, Residency::Device).unwrap();
                if what == "sparse" {
                    assert!(d.kept() < n * 5 / 8, "kept {}", d.kept());
                }
                for (c, m) in [(16, 16), (11, 4)] {
                    d.precompute(gpu.gpu(), c, m).unwrap();
                    let got = gpu.msm_host(&d, &s).unwrap_or_else(|e| panic!("{what}, batch {batch}: {e}"));
                    assert_eq!(got.into_affine(), e, "{what} {kind:?}, batch {batch}, c = {c}, m = {m}");
                }
            }
        }
    }
    // What cannot have a table says so, and leaves the bases as they were.
    let mut host = gpu.upload_bases_to::<G1>(&b1, Residency::Host).unwrap();
    assert!(host.precompute(gpu.gpu(), 16, 4).is_err());
    let mut d = gpu.upload_bases_to::<G1>(&b1, Residency::Device).unwrap();
    for (c, m) in [(16, 0), (16, 17), (1, 2), (25, 2)] {
        assert!(d.precompute(gpu.gpu(), c, m).is_err(), "c = {c}, m = {m} accepted");
    }
    assert_eq!(d.table(), None);
    let s = scalars(Scalars::Random, n, &mut rng);
    assert_eq!(
        gpu.msm_host(&d, &s).unwrap().into_affine(),
        G1Projective::msm(&b1, &s).unwrap().into_affine()
    );
}

#[test]
fn msm_sorts_binned_and_direct_agree_with_ark_ec() {
    // The binned sort (the default, which every other MSM test runs) and the direct one, on awkward
    // sizes and every scalar kind (the ones and the small values pile into few buckets), with a
    // selection of sparse bases, with tables, with windows whose bins are wider than 1024 buckets,
    // and past 2^20 points with several batches.
    let mut rng = seeded_rng("msm_sorts");
    let n = 5000;
    let b1 = bases::<G1Projective>(n, &mut rng);
    let b2 = bases::<G2Projective>(n, &mut rng);
    let mut sparse = b1.clone();
    for i in (0..n).filter(|i| i % 3 != 0) {
        sparse[i] = Default::default();
    }
    for sort in [Sort::Direct, Sort::Binned] {
        let config = MsmConfig { sort, ..MsmConfig::default() };
        let gpu = backend().with_msm_config(config);
        for &size in &[1usize, 2, 5, 257, 1025, 4097, n] {
            for kind in KINDS {
                let s = scalars(kind, size, &mut rng);
                let e1 = G1Projective::msm(&b1[..size], &s).unwrap();
                check_msm::<G1>(&gpu, &b1[..size], &s, e1, &format!("{sort:?}, n = {size}, {kind:?}"));
                if size % 2 == 1 {
                    let e2 = G2Projective::msm(&b2[..size], &s).unwrap();
                    check_msm::<G2>(&gpu, &b2[..size], &s, e2, &format!("{sort:?}, G2 n = {size}, {kind:?}"));
                }
            }
        }
        for kind in [Scalars::Random, Scalars::Bits, Scalars::One] {
            let s = scalars(kind, n, &mut rng);
            let e = G1Projective::msm(&sparse, &s).unwrap();
            let d = gpu.upload_bases_to::<G1>(&sparse, Residency::Device).unwrap();
            assert!(d.kept() < n / 2, "{sort:?}: kept {}", d.kept());
            let what = format!("{sort:?}, sparse, {kind:?}");
            assert_eq!(gpu.msm_host(&d, &s).unwrap().into_affine(), e.into_affine(), "{what}");
            let mut t = gpu.upload_bases_to::<G1>(&b1, Residency::Device).unwrap();
            t.precompute(gpu.gpu(), 11, 4).unwrap();
            let e = G1Projective::msm(&b1, &s).unwrap();
            assert_eq!(gpu.msm_host(&t, &s).unwrap().into_affine(), e.into_affine(), "{what}, table");
            for c in [21, 24] {
                let wide = backend().with_msm_config(MsmConfig { window_bits: Some(c), ..config });
                check_msm::<G1>(&wide, &b1, &s, e, &format!("{sort:?}, c = {c}, {kind:?}"));
            }
        }
        let (b, r, step) = progression::<G1Projective>((1 << 21) + 3, &mut rng);
        for (kind, batch) in [(Scalars::Random, 1 << 24), (Scalars::Bits, 1 << 20)] {
            let k = scalars(kind, b.len(), &mut rng);
            let gpu = backend().with_msm_config(MsmConfig { batch, ..config });
            let what = format!("{sort:?}, n = 2^21 + 3, {kind:?}, batch {batch}");
            check_msm::<G1>(&gpu, &b, &k, closed_form(&k, r, step), &what);
        }
    }
}

/// As many bases as `b`, from a few of them: `b[0]`, `-b[0]`, the identity and `b[i % 7]` in turn (a
/// batched round's chains meet doublings and cancellations).
fn repeated(b: &[ark_bls12_381::G1Affine]) -> Vec<ark_bls12_381::G1Affine> {
    (0..b.len())
        .map(|i| match i % 5 {
            0 => b[0],
            1 => -b[0],
            2 => Default::default(),
            _ => b[i % 7],
        })
        .collect()
}

#[test]
fn msm_g1_batched_round_on_the_fp64_units_matches_ark_ec() {
    // G1's batched first round with its products on the FP64 units, in every warp and in alternate warps:
    // every scalar kind on awkward sizes, repeated bases and identities, small batches, a table, and
    // 2^20 + 1 points against the closed form.
    let mut rng = seeded_rng("msm_units");
    let n = 5000;
    let b1 = bases::<G1Projective>(n, &mut rng);
    let repeats = repeated(&b1);
    let (big, r, step) = progression::<G1Projective>((1 << 20) + 1, &mut rng);
    for units in [kernels::MulUnits::Fp64, kernels::MulUnits::Mixed] {
        let config = MsmConfig { first_round: FirstRound::BatchAffine, units, ..MsmConfig::default() };
        let gpu = backend().with_msm_config(config);
        for &size in &[1usize, 2, 5, 31, 257, 4097, n] {
            for kind in KINDS {
                let s = scalars(kind, size, &mut rng);
                let e = G1Projective::msm(&b1[..size], &s).unwrap();
                check_msm::<G1>(&gpu, &b1[..size], &s, e, &format!("{units:?}, n = {size}, {kind:?}"));
            }
        }
        for kind in [Scalars::Random, Scalars::Bits, Scalars::One] {
            let s = scalars(kind, n, &mut rng);
            let e = G1Projective::msm(&repeats, &s).unwrap();
            let small = backend().with_msm_config(MsmConfig { batch: 999, ..config });
            check_msm::<G1>(&small, &repeats, &s, e, &format!("{units:?}, repeats, {kind:?}, batch 999"));
            let mut d = gpu.upload_bases_to::<G1>(&repeats, Residency::Device).unwrap();
            d.precompute(gpu.gpu(), 16, 16).unwrap();
            let got = gpu.msm_host(&d, &s).unwrap();
            assert_eq!(got.into_affine(), e.into_affine(), "{units:?}, repeats, {kind:?}, table");
        }
        let k = scalars(Scalars::Random, big.len(), &mut rng);
        check_msm::<G1>(&gpu, &big, &k, closed_form(&k, r, step), &format!("{units:?}, 2^20 + 1"));
    }
}

#[test]
fn msm_with_batched_affine_sums_matches_ark_ec() {
    // The first summing round by batched affine additions: every scalar kind on awkward sizes (chains
    // of one entry, chains past the last entry), both curves, bases with identities and repeats, sparse
    // bases, small batches, tables; then 2^20 + 1 and 2^24 points against the closed form.
    let batched = MsmConfig { first_round: FirstRound::BatchAffine, ..MsmConfig::default() };
    let mut rng = seeded_rng("msm_batch_affine");
    let n = 5000;
    let b1 = bases::<G1Projective>(n, &mut rng);
    let b2 = bases::<G2Projective>(n, &mut rng);
    let gpu = backend().with_msm_config(batched);
    for &size in &[1usize, 2, 5, 31, 257, 4097, n] {
        for kind in KINDS {
            let s = scalars(kind, size, &mut rng);
            let e1 = G1Projective::msm(&b1[..size], &s).unwrap();
            let e2 = G2Projective::msm(&b2[..size], &s).unwrap();
            check_msm::<G1>(&gpu, &b1[..size], &s, e1, &format!("batched, n = {size}, {kind:?}"));
            check_msm::<G2>(&gpu, &b2[..size], &s, e2, &format!("batched, n = {size}, {kind:?}"));
        }
    }
    // Repeated bases (doublings and cancellations inside a chain), identities, and a sparse set.
    let repeats = repeated(&b1);
    for kind in [Scalars::Random, Scalars::Bits, Scalars::One, Scalars::Small] {
        let s = scalars(kind, n, &mut rng);
        let e = G1Projective::msm(&repeats, &s).unwrap();
        for batch in [999usize, n] {
            let gpu = backend().with_msm_config(MsmConfig { batch, ..batched });
            check_msm::<G1>(&gpu, &repeats, &s, e, &format!("batched, repeats, {kind:?}, batch {batch}"));
            let mut d = gpu.upload_bases_to::<G1>(&repeats, Residency::Device).unwrap();
            for (c, m) in [(16, 16), (11, 4)] {
                d.precompute(gpu.gpu(), c, m).unwrap();
                let got = gpu.msm_host(&d, &s).unwrap();
                assert_eq!(
                    got.into_affine(),
                    e.into_affine(),
                    "batched, repeats, {kind:?}, table c = {c}, m = {m}"
                );
            }
        }
    }
    let (b, r, s) = progression::<G1Projective>(1 << 24, &mut rng);
    for (n, kind) in
        [((1 << 20) + 1, Scalars::Random), ((1 << 22) - 1, Scalars::Bits), (1 << 24, Scalars::Random)]
    {
        let k = scalars(kind, n, &mut rng);
        check_msm::<G1>(&gpu, &b[..n], &k, closed_form(&k, r, s), &format!("batched, n = {n}, {kind:?}"));
    }
    let k = scalars(Scalars::Random, 1 << 24, &mut rng);
    let mut d = gpu.upload_bases_to::<G1>(&b, Residency::Device).unwrap();
    d.precompute(gpu.gpu(), 20, 13).unwrap();
    let got = gpu.msm_host(&d, &k).unwrap();
    assert_eq!(got.into_affine(), closed_form(&k, r, s).into_affine(), "batched, 2^24, table c = 20, m = 13");
    drop(d);
    let (b2, r2, s2) = progression::<G2Projective>((1 << 20) + 1, &mut rng);
    let k = scalars(Scalars::Random, (1 << 20) + 1, &mut rng);
    check_msm::<G2>(&gpu, &b2, &k, closed_form(&k, r2, s2), "batched, G2 n = 2^20 + 1, random");
}

#[test]
fn msm_ones_apart_and_in_the_first_round_match_ark_ec() {
    // The ones' sum both ways with both first rounds (the defaults pair the batched round with the
    // ones in it, the XYZZ round with the ones apart; the batched test above covers the first): every
    // scalar kind on awkward sizes and both curves, repeated bases and identities, small batches and
    // tables, and 2^22 - 1 witness-like scalars against the closed form.
    use cuzk_cuda::msm::Ones;
    let mut rng = seeded_rng("msm_ones");
    let n = 5000;
    let b1 = bases::<G1Projective>(n, &mut rng);
    let b2 = bases::<G2Projective>(n, &mut rng);
    let repeats = repeated(&b1);
    let (big, r, step) = progression::<G1Projective>((1 << 22) - 1, &mut rng);
    for (first_round, ones) in [
        (FirstRound::BatchAffine, Ones::Apart),
        (FirstRound::Xyzz, Ones::InRound),
        (FirstRound::Xyzz, Ones::Apart),
    ] {
        let config = MsmConfig { first_round, ones, ..MsmConfig::default() };
        let name = format!("{first_round:?}, ones {ones:?}");
        let gpu = backend().with_msm_config(config);
        for &size in &[1usize, 2, 31, 4097, n] {
            for kind in KINDS {
                let s = scalars(kind, size, &mut rng);
                let e1 = G1Projective::msm(&b1[..size], &s).unwrap();
                let e2 = G2Projective::msm(&b2[..size], &s).unwrap();
                check_msm::<G1>(&gpu, &b1[..size], &s, e1, &format!("{name}, n = {size}, {kind:?}"));
                check_msm::<G2>(&gpu, &b2[..size], &s, e2, &format!("{name}, n = {size}, {kind:?}"));
            }
        }
        for kind in [Scalars::Bits, Scalars::One] {
            let s = scalars(kind, n, &mut rng);
            let e = G1Projective::msm(&repeats, &s).unwrap();
            let small = backend().with_msm_config(MsmConfig { batch: 999, ..config });
            check_msm::<G1>(&small, &repeats, &s, e, &format!("{name}, repeats, {kind:?}, batch 999"));
            let mut d = gpu.upload_bases_to::<G1>(&repeats, Residency::Device).unwrap();
            d.precompute(gpu.gpu(), 11, 4).unwrap();
            let got = gpu.msm_host(&d, &s).unwrap();
            assert_eq!(got.into_affine(), e.into_affine(), "{name}, repeats, {kind:?}, table");
        }
        let k = scalars(Scalars::Bits, big.len(), &mut rng);
        check_msm::<G1>(&gpu, &big, &k, closed_form(&k, r, step), &format!("{name}, 2^22 - 1 bits"));
    }
}

/// Bases `R + i·S` for random `R`, `S`, with [`closed_form`] as the oracle.
fn progression<G: CurveGroup<ScalarField = Fr>>(n: usize, rng: &mut StdRng) -> (Vec<G::Affine>, G, G) {
    let (r, s) = (G::rand(rng), G::rand(rng));
    (cuzk_testkit::progression(n, r, s), r, s)
}

fn closed_form<G: CurveGroup<ScalarField = Fr>>(k: &[Fr], r: G, s: G) -> G {
    let sum: Fr = k.par_iter().copied().sum();
    let weighted: Fr = k.par_iter().enumerate().map(|(i, k)| Fr::from(i as u64) * k).sum();
    r * sum + s * weighted
}

#[test]
fn msm_large_sizes_match_the_closed_form() {
    let gpu = backend();
    let mut rng = seeded_rng("msm_large");
    let cases: [(usize, Scalars); 6] = [
        ((1 << 16) + 1, Scalars::Random),
        ((1 << 20) - 1, Scalars::Bits),
        ((1 << 20) + 1, Scalars::Small),
        ((1 << 22) + 1, Scalars::Random),
        (1 << 24, Scalars::Random),
        ((1 << 24) - 1, Scalars::Bits),
    ];
    let (b, r, s) = progression::<G1Projective>(1 << 24, &mut rng);
    for (n, kind) in cases {
        let k = scalars(kind, n, &mut rng);
        check_msm::<G1>(&gpu, &b[..n], &k, closed_form(&k, r, s), &format!("n = {n}, {kind:?}"));
    }
    // Wide windows at full size, with each first round (the default batches G1 from 2^22 points).
    let k = scalars(Scalars::Random, 1 << 24, &mut rng);
    for (c, first_round) in [(18, FirstRound::Xyzz), (20, FirstRound::Auto), (22, FirstRound::Xyzz)] {
        let gpu = backend().with_msm_config(MsmConfig {
            window_bits: Some(c),
            first_round,
            ..MsmConfig::default()
        });
        check_msm::<G1>(&gpu, &b, &k, closed_form(&k, r, s), &format!("2^24, c = {c}, {first_round:?}"));
    }
    // Tables of multiples at full size: every window in one set, and sets of four windows.
    let mut d = gpu.upload_bases_to::<G1>(&b, Residency::Device).unwrap();
    for (c, m) in [(22, 12), (20, 13), (16, 4)] {
        d.precompute(gpu.gpu(), c, m).unwrap();
        let got = gpu.msm_host(&d, &k).unwrap();
        assert_eq!(got.into_affine(), closed_form(&k, r, s).into_affine(), "2^24, table c = {c}, m = {m}");
    }
    drop(d);
    // Batches of the bases' own size: 2^25 + 3 points in one batch (G1's default window is 20 bits
    // from 2^25 points), in two, and in batches of 2^20 over the backend's 2^24.
    drop(b);
    let n = (1 << 25) + 3;
    let (b, r, s) = progression::<G1Projective>(n, &mut rng);
    let k = scalars(Scalars::Random, n, &mut rng);
    let expected = closed_form(&k, r, s).into_affine();
    let mut d = gpu.upload_bases_to::<G1>(&b, Residency::Device).unwrap();
    assert!(d.set_batch(Some(0)).is_err());
    for batch in [Some(n), Some(n.div_ceil(2)), Some(1 << 20), None] {
        d.set_batch(batch).unwrap();
        let got = gpu.msm_host(&d, &k).unwrap();
        assert_eq!(got.into_affine(), expected, "2^25 + 3, batches of {batch:?}");
    }
    // The bases' own chains a thread in the batched round (as `widen_batches` grants H's), in one batch.
    assert!(d.set_chains(Some(0)).is_err() && d.set_chains(Some(1025)).is_err());
    d.set_batch(Some(n)).unwrap();
    for chains in [Some(cuzk_cuda::msm::ROOMY_BATCH_CHAINS), Some(3), None] {
        d.set_chains(chains).unwrap();
        let got = gpu.msm_host(&d, &k).unwrap();
        assert_eq!(got.into_affine(), expected, "2^25 + 3, one batch, {chains:?} chains a thread");
    }
    drop((d, b));
    let (b2, r2, s2) = progression::<G2Projective>((1 << 22) + 1, &mut rng);
    for (n, kind) in [((1 << 20) - 1, Scalars::Random), ((1 << 22) + 1, Scalars::Bits)] {
        let k = scalars(kind, n, &mut rng);
        check_msm::<G2>(&gpu, &b2[..n], &k, closed_form(&k, r2, s2), &format!("n = {n}, {kind:?}"));
    }
}

// ---- Groth16 ----

#[test]
fn a_dropped_keys_msm_buffers_are_freed_and_a_remaining_keys_stay() {
    // Two keys of one shape share the shelves' buffers: dropping one frees nothing the other needs
    // (its proofs allocate none), dropping both frees them all.
    let gpu = backend();
    let mut rng = seeded_rng("scratch_claims");
    let circuit = Synthetic::with_log_rows(12, rng.gen()).with_bit_share(400);
    let pk = keygen(circuit, &mut rng);
    let cpu_key = PreparedKey::new(&CpuBackend, pk.clone()).unwrap();
    let scratch = gpu.gpu().scratch().clone();
    let before = scratch.owned_bytes();
    let first = PreparedKey::new(&gpu, pk.clone()).unwrap();
    let second = PreparedKey::new(&gpu, pk).unwrap();
    let held = gpu.reserve_msm_workspace(&first).unwrap();
    assert!(held > before, "the reserve made buffers");
    assert_eq!(gpu.reserve_msm_workspace(&second).unwrap(), held, "one shape, one set of buffers");
    drop(first);
    assert_eq!(scratch.owned_bytes(), held, "the second key needs every buffer the first had");
    let misses = scratch.misses();
    let syn = synthesize(circuit, &SynthesisOptions::default()).unwrap();
    let options = ProveOptions::default();
    let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
    let (on_gpu, _) = prove(&gpu, &second, &syn, r, s, &options).unwrap();
    let (on_cpu, _) = prove(&CpuBackend, &cpu_key, &syn, r, s, &options).unwrap();
    assert_eq!(on_gpu, on_cpu);
    assert_eq!(scratch.misses(), misses, "a proof allocated MSM buffers after the other key went");
    drop(second);
    assert_eq!(
        scratch.owned_bytes(),
        before,
        "buffers left on the shelves after the last key went (a shelf its MSMs took but their count missed)"
    );
}

#[test]
fn widened_batches_fit_the_memory_given_and_proofs_stay_equal() {
    let mut rng = seeded_rng("groth16_batches");
    // Batches of 256 points, so that a small key's MSMs have many and can be given fewer.
    let gpu = backend().with_msm_config(MsmConfig { batch: 256, ..MsmConfig::default() });
    let circuit = Synthetic::with_log_rows(12, rng.gen()).with_bit_share(400);
    let pk = keygen(circuit, &mut rng);
    let cpu_key = PreparedKey::new(&CpuBackend, pk.clone()).unwrap();
    let mut key = PreparedKey::new(&gpu, pk).unwrap();
    let syn = synthesize(circuit, &SynthesisOptions::default()).unwrap();
    let options = ProveOptions::default();
    let prove_both = |key: &PreparedKey<CudaBackend>, rng: &mut StdRng, what: &str| {
        let (r, s) = (Fr::rand(rng), Fr::rand(rng));
        let (on_gpu, _) = prove(&gpu, key, &syn, r, s, &options).unwrap();
        let (on_cpu, _) = prove(&CpuBackend, &cpu_key, &syn, r, s, &options).unwrap();
        assert_eq!(on_gpu, on_cpu, "{what}");
    };
    // Many batches per MSM: the buffers they keep come within the count from their plans, and no
    // proof allocates more.
    let (before, narrow) = (gpu.gpu().scratch().owned_bytes(), gpu.msm_workspace_estimate(&key).unwrap());
    let added = gpu.reserve_msm_workspace(&key).unwrap() - before;
    eprintln!("batches of 256: {added} bytes of MSM buffers, counted {narrow}");
    assert!(added <= narrow && narrow <= added / 2 * 3 + (16 << 20), "{added} bytes, counted {narrow}");
    let misses = gpu.gpu().scratch().misses();
    prove_both(&key, &mut rng, "batches of 256");
    assert_eq!(
        gpu.gpu().scratch().misses(),
        misses,
        "a proof allocated MSM buffers the reserve did not make"
    );
    // No room left: nothing changes.
    let (free, _) = gpu.gpu().memory().unwrap();
    assert!(gpu.widen_batches(&mut key, free).unwrap().is_empty());
    // Room: every MSM of more than 256 points takes one batch, and says so.
    let reports = gpu.widen_batches(&mut key, 0).unwrap();
    let names = ["a", "b_g1", "l", "h"];
    let mut kept: Vec<(&str, usize)> =
        names.into_iter().zip(key.g1_bases().iter().map(|b| b.kept())).collect();
    kept.push(("b_g2", key.g2_bases().kept()));
    for (msm, points) in kept {
        match reports.iter().find(|r| r.msm == msm) {
            Some(r) => assert_eq!((r.batch, r.batches), (points, 1), "{r}"),
            None => assert!(points <= 256, "{msm}: {points} points left in batches of 256"),
        }
    }
    assert!(!reports.is_empty());
    eprintln!("{}", reports.iter().map(|r| r.to_string()).collect::<Vec<_>>().join("; "));
    // Chains beyond the default only for batches that would take the longest: none this small.
    assert!(gpu.grant_chains(&mut key, 0).unwrap().is_empty());
    // The MSMs over the witness sort without the temporary of pairs (the proofs below run with it);
    // H keeps the config's sort.
    let [a, b_g1, l, h] = key.g1_bases();
    for (msm, bases) in [("a", a), ("b_g1", b_g1), ("l", l)] {
        assert_eq!(bases.batching().sort, Some(cuzk_cuda::WITNESS_SORT), "{msm}");
    }
    assert_eq!(key.g2_bases().batching().sort, Some(cuzk_cuda::WITNESS_SORT), "b_g2");
    assert_eq!(h.batching().sort, None, "h");
    // The reserve again: the MSMs' claims of their batches of 256 give way to those of one batch,
    // so the shelves hold no more than the count of one batch each.
    let wide = gpu.msm_workspace_estimate(&key).unwrap();
    let held = gpu.reserve_msm_workspace(&key).unwrap();
    assert!(held <= wide, "one batch each: {held} bytes of MSM buffers held, counted {wide}");
    let misses = gpu.gpu().scratch().misses();
    for round in 0..2 {
        prove_both(&key, &mut rng, &format!("one batch per MSM, round {round}"));
    }
    assert_eq!(
        gpu.gpu().scratch().misses(),
        misses,
        "a proof allocated MSM buffers the reserve did not make"
    );
}

#[test]
fn groth16_proofs_on_the_gpu_equal_the_cpu_backends() {
    // The CPU backend's proofs equal ark-groth16's (CPU suite); the GPU's must equal them byte for byte,
    // and pass the self-check against the verifying key.
    let gpu = backend();
    let mut rng = seeded_rng("groth16_gpu");
    for (k, bits) in [(10u32, 0u16), (12, 500), (16, 900)] {
        let circuit = Synthetic::with_log_rows(k, rng.gen()).with_bit_share(bits);
        let pk = keygen(circuit, &mut rng);
        let syn = synthesize(circuit, &SynthesisOptions::default()).unwrap();
        let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
        let gpu_key = PreparedKey::new(&gpu, pk.clone()).unwrap();
        let cpu_key = PreparedKey::new(&CpuBackend, pk).unwrap();
        let (on_gpu, _) = prove(&gpu, &gpu_key, &syn, r, s, &ProveOptions::default())
            .unwrap_or_else(|e| panic!("2^{k} on the GPU: {e}"));
        let (on_cpu, _) = prove(&CpuBackend, &cpu_key, &syn, r, s, &ProveOptions::default()).unwrap();
        assert_eq!(on_gpu, on_cpu, "proofs differ at 2^{k}");
        // Every MSM with a table of multiples (small keys take one only when asked to).
        let pk = keygen(circuit, &mut rng);
        let mut tabled = PreparedKey::new(&gpu, pk.clone()).unwrap();
        let cpu_key = PreparedKey::new(&CpuBackend, pk).unwrap();
        let built = gpu.precompute_tables(&mut tabled, 0, 1).unwrap();
        let mut msms: Vec<&str> = built.iter().map(|t| t.msm).collect();
        msms.sort_unstable();
        assert_eq!(msms, ["a", "b_g1", "b_g2", "h", "l"], "2^{k}: tables built {built:?}");
        // The tabled MSMs' buffers come within the count from their plans (shelves shared with the
        // earlier keys' may already hold some of them).
        let (before, estimate) =
            (gpu.gpu().scratch().owned_bytes(), gpu.msm_workspace_estimate(&tabled).unwrap());
        let added = gpu.reserve_msm_workspace(&tabled).unwrap() - before;
        assert!(
            added <= estimate,
            "2^{k} with tables: {added} bytes of MSM buffers added, counted {estimate}"
        );
        let (on_gpu, _) = prove(&gpu, &tabled, &syn, r, s, &ProveOptions::default())
            .unwrap_or_else(|e| panic!("2^{k} on the GPU with tables: {e}"));
        let (on_cpu, _) = prove(&CpuBackend, &cpu_key, &syn, r, s, &ProveOptions::default()).unwrap();
        assert_eq!(on_gpu, on_cpu, "proofs differ at 2^{k} with tables");
        assert!(gpu.precompute_tables(&mut tabled, 0, usize::MAX).unwrap().is_empty());
        // H alone with a partial table (the MSMs over the witness take none), as the engine gives
        // one after widening the batches.
        let pk = keygen(circuit, &mut rng);
        let mut partial = PreparedKey::new(&gpu, pk.clone()).unwrap();
        let cpu_key = PreparedKey::new(&CpuBackend, pk).unwrap();
        let built = gpu.precompute_partial_tables(&mut partial, 0, 1).unwrap();
        let got: Vec<_> = built.iter().map(|t| (t.msm, t.table.multiples)).collect();
        let most = PARTIAL_TABLE_CHOICES[0].1;
        assert_eq!(got, [("h", most)], "2^{k}: partial tables built {built:?}");
        let (on_gpu, _) = prove(&gpu, &partial, &syn, r, s, &ProveOptions::default())
            .unwrap_or_else(|e| panic!("2^{k} on the GPU with a partial table: {e}"));
        let (on_cpu, _) = prove(&CpuBackend, &cpu_key, &syn, r, s, &ProveOptions::default()).unwrap();
        assert_eq!(on_gpu, on_cpu, "proofs differ at 2^{k} with a partial table for H");
        assert!(gpu.precompute_partial_tables(&mut partial, 0, 1).unwrap().is_empty(), "2^{k}: twice");
    }
}

#[test]
fn porep_like_partitions_on_the_gpu_equal_ark_groth16() {
    // Byte-identical to ark-groth16's own prover for the same r and s, and verified by it.
    let gpu = backend();
    let mut rng = seeded_rng("groth16_porep_gpu");
    let first = PorepLike::for_log_constraints(12, 7, 0).unwrap();
    let pk = keygen(first, &mut rng);
    let key = PreparedKey::new(&gpu, pk.clone()).unwrap();
    let pvk = ark_groth16::prepare_verifying_key(&pk.vk);
    for partition in 0..3 {
        let circuit = PorepLike::for_log_constraints(12, 7, partition).unwrap();
        let syn = synthesize(circuit, &SynthesisOptions::default()).unwrap();
        let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
        let (proof, _) = prove(&gpu, &key, &syn, r, s, &ProveOptions::default()).unwrap();
        let expected =
            ark_groth16::Groth16::<ark_bls12_381::Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s)
                .unwrap();
        assert_eq!(proof, expected, "partition {partition}");
        assert!(ark_groth16::Groth16::<ark_bls12_381::Bls12_381>::verify_proof(
            &pvk,
            &proof,
            syn.public_inputs()
        )
        .unwrap());
    }
}

#[test]
fn an_injected_cuda_failure_fails_that_proof_and_the_next_one_is_right() {
    let gpu = backend();
    let mut rng = seeded_rng("groth16_fault");
    let circuit = Synthetic::with_log_rows(10, rng.gen()).with_bit_share(300);
    let pk = keygen(circuit, &mut rng);
    let syn = synthesize(circuit, &SynthesisOptions::default()).unwrap();
    let gpu_key = PreparedKey::new(&gpu, pk.clone()).unwrap();
    let cpu_key = PreparedKey::new(&CpuBackend, pk).unwrap();
    // A proof makes eight device calls (a, b, c and z uploads, witness map, four G1 MSMs, one G2 MSM):
    // fail each.
    for after in 0..8 {
        gpu.inject_fault_after(Some(after));
        let err = prove(&gpu, &gpu_key, &syn, Fr::from(3u64), Fr::from(5u64), &ProveOptions::default())
            .expect_err("an injected failure must fail the proof");
        // The prover names the operation; the injected cause is further down the source chain.
        let mut chain = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(e) = source {
            chain.push_str(&format!(": {e}"));
            source = e.source();
        }
        assert!(chain.contains("injected CUDA failure"), "after {after}: {chain}");
        let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
        let (next, _) = prove(&gpu, &gpu_key, &syn, r, s, &ProveOptions::default())
            .unwrap_or_else(|e| panic!("the proof after a failure (after {after}): {e}"));
        let (on_cpu, _) = prove(&CpuBackend, &cpu_key, &syn, r, s, &ProveOptions::default()).unwrap();
        assert_eq!(next, on_cpu, "the proof after a failure (after {after}) differs");
    }
    gpu.inject_fault_after(None);
}

#[test]
fn reserved_slots_and_msm_workspace_serve_every_proof_and_oversized_partitions_are_refused() {
    use cuzk_groth16::{prove_staged, stage};
    let gpu = backend();
    let mut rng = seeded_rng("groth16_arena");
    let circuit = Synthetic::with_log_rows(12, rng.gen()).with_bit_share(400);
    let pk = keygen(circuit, &mut rng);
    let gpu_key = PreparedKey::new(&gpu, pk.clone()).unwrap();
    let cpu_key = PreparedKey::new(&CpuBackend, pk).unwrap();
    let estimate = gpu.msm_workspace_estimate(&gpu_key).unwrap();
    let workspace = gpu.reserve_msm_workspace(&gpu_key).unwrap();
    assert!(workspace > 0, "the MSMs' buffers are on their shelves");
    // The count from the plans bounds the shelves from above, and not by much.
    eprintln!("MSM workspace: {workspace} bytes on the shelves, {estimate} counted from the plans");
    assert!(
        workspace <= estimate && estimate <= workspace / 2 * 3 + (16 << 20),
        "MSM workspace {workspace} bytes, counted {estimate}"
    );
    let scratch_misses = gpu.gpu().scratch().misses();
    let slots = gpu.reserve_partition_slots(gpu_key.domain_size(), gpu_key.variables(), 2).unwrap();
    assert_eq!(slots, 2);
    // Reserving again for the same sizes allocates nothing more.
    let owned = gpu.arena().owned();
    assert_eq!(gpu.reserve_partition_slots(gpu_key.domain_size(), gpu_key.variables(), 2).unwrap(), 2);
    assert_eq!(gpu.reserve_partition_slots_for(&gpu_key, 2).unwrap(), 2);
    assert_eq!(gpu.arena().owned(), owned);
    let misses = gpu.arena().misses();
    let syns: Vec<_> = (0..2)
        .map(|_| {
            synthesize(
                Synthetic::with_log_rows(12, rng.gen()).with_bit_share(400),
                &SynthesisOptions::default(),
            )
            .unwrap()
        })
        .collect();
    let options = ProveOptions::default();
    for round in 0..3 {
        // Two partitions staged at once (both slots), then proved, as a pipeline with two workers does.
        let staged: Vec<_> = syns.iter().map(|syn| stage(&gpu, &gpu_key, syn).unwrap()).collect();
        for (syn, st) in syns.iter().zip(staged) {
            let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
            let (on_gpu, _) = prove_staged(&gpu, &gpu_key, syn, st, r, s, &options).unwrap();
            let (on_cpu, _) = prove(&CpuBackend, &cpu_key, syn, r, s, &options).unwrap();
            assert_eq!(on_gpu, on_cpu, "round {round}");
        }
    }
    assert_eq!(
        gpu.arena().misses(),
        misses,
        "a proof allocated partition buffers outside the reserved slots"
    );
    assert_eq!(
        gpu.gpu().scratch().misses(),
        scratch_misses,
        "a proof allocated MSM buffers the workspace reservation did not make"
    );
    assert_eq!(gpu.gpu().scratch().owned_bytes(), workspace, "the MSMs' buffers stayed the same");
    // A partition larger than the device: a clear error, nothing allocated.
    let err = gpu.reserve_partition_slots(1 << 40, 1 << 40, 1).expect_err("2^40 rows cannot fit");
    assert!(err.to_string().contains("needs") && err.to_string().contains("device memory"), "{err}");
    assert_eq!(gpu.arena().owned(), owned);
}

#[test]
fn stage_spans_are_placed_by_the_device_clock_inside_the_proofs_wall_time_and_a_late_start_is_a_gap() {
    use cuzk_groth16::{prove_staged, stage, Stage};
    use std::time::{Duration, Instant};
    let gpu = backend();
    let mut rng = seeded_rng("placed_spans");
    let circuit = Synthetic::with_log_rows(16, rng.gen()).with_bit_share(400);
    let pk = keygen(circuit, &mut rng);
    let key = PreparedKey::new(&gpu, pk).unwrap();
    let syn =
        synthesize(Synthetic::with_log_rows(16, rng.gen()).with_bit_share(400), &SynthesisOptions::default())
            .unwrap();
    let options = ProveOptions::default();
    // Warm up (module loads, first allocations), then one partition whose kernels start 100 ms after
    // its upload: the device is idle in between and the spans must say so.
    let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
    prove(&gpu, &key, &syn, r, s, &options).unwrap();
    let delay = Duration::from_millis(100);
    let before = Instant::now();
    let staged = stage(&gpu, &key, &syn).unwrap();
    std::thread::sleep(delay);
    let (_, times) = prove_staged(&gpu, &key, &syn, staged, r, s, &options).unwrap();
    let after = Instant::now();
    assert!(times.spans_on_device, "the CUDA backend places its stages by the device clock");
    let device = times.device.as_ref().expect("device times");
    // Event timestamps have about half a microsecond of resolution; the anchor's error is bounded by
    // half its calibration interval. Allow a millisecond either way.
    let slack = Duration::from_millis(1);
    for &(stage, from, to) in &times.spans {
        assert!(from <= to, "{stage}: starts after it ends");
        assert!(from + slack >= before && to <= after + slack, "{stage}: outside the proof's wall time");
        let placed = (to - from).as_secs_f64();
        let measured = device[stage].as_secs_f64();
        assert!((placed - measured).abs() < 1e-3, "{stage}: placed {placed} s, measured {measured} s");
    }
    let span = |stage| times.spans.iter().find(|s| s.0 == stage).unwrap_or_else(|| panic!("no {stage} span"));
    let (upload, map) = (span(Stage::Upload), span(Stage::WitnessMap));
    let idle = map.1.saturating_duration_since(upload.2);
    assert!(
        idle >= delay - slack,
        "the device idled {delay:?} between the upload and the witness map, placed {idle:?}"
    );
    // The MSM over H needs the witness map's output, on the same stream.
    assert!(span(Stage::MsmH).1 + slack >= map.2, "msm_h placed before the witness map it needs ended");
}

/// Evaluates `circuit` against `shape` both ways: on the host (witness-only, a, b, c and z in full)
/// and on the device (the compact assignment staged, z expanded and a, b, c computed against the
/// resident shape), once for each of `on_device` (the same shape with its rows split differently).
/// Every element must be equal, and the device's check must name the host's first unsatisfied row (or
/// none).
fn assert_device_evaluation_matches<C: ark_relations::gr1cs::ConstraintSynthesizer<Fr> + Clone>(
    name: &str,
    gpu: &CudaBackend,
    shape: &cuzk_synth::R1csShape,
    on_device: &[std::sync::Arc<cuzk_cuda::GpuShape>],
    circuit: C,
) {
    use cuzk_groth16::DeviceBackend;
    let unchecked = SynthesisOptions { check_satisfied: false };
    let (host, _) = cuzk_synth::synthesize_witness_only(circuit.clone(), shape, &unchecked).unwrap();
    let first_bad = (0..host.counts().constraints).find(|&i| host.a[i] * host.b[i] != host.c[i]);
    let w = cuzk_synth::synthesize_compact(circuit, shape.counts()).unwrap();
    let n = host.counts().domain_size();
    // Each split's buffers stay held until the end, so the next split takes others: none of them
    // already holds a row's right value from the split before.
    let mut held = Vec::new();
    for resident in on_device {
        let name = format!("{name}, {:?}", resident.split());
        let (mut abc, mut z, evaluation) = gpu.stage_compact(resident, &w).unwrap();
        let landed: Vec<&cuzk_cuda::GpuPoly> = abc.iter().chain([&z]).collect();
        gpu.await_uploads(&landed).unwrap();
        let bad = evaluation.queue(gpu, &mut z, &mut abc, None).unwrap().finish().unwrap();
        assert_eq!(bad, first_bad, "{name}: first unsatisfied row");
        assert_eq!(gpu.download_poly(&z).unwrap(), host.assignment, "{name}: z");
        for (poly, (what, expected)) in abc.iter().zip([("a", &host.a), ("b", &host.b), ("c", &host.c)]) {
            let mut padded = expected.clone();
            padded.resize(n, Fr::zero());
            assert_eq!(gpu.download_poly(poly).unwrap(), padded, "{name}: {what}");
        }
        held.push((abc, z));
    }
}

/// `shape` resident on `gpu` once per row split: the default, a thread every row, a warp every row
/// of one entry or more and a warp every row of two or more. Each takes the bytes its
/// estimate said.
fn resident_splits(
    gpu: &CudaBackend,
    shape: &cuzk_synth::R1csShape,
) -> Vec<std::sync::Arc<cuzk_cuda::GpuShape>> {
    use cuzk_cuda::{GpuShape, RowSplit};
    [RowSplit::DEFAULT, RowSplit::Threads, RowSplit::WarpsAbove(0), RowSplit::WarpsAbove(1)]
        .into_iter()
        .map(|split| {
            let resident = GpuShape::upload_with(gpu.gpu(), shape, split).unwrap();
            assert_eq!(resident.device_bytes(), GpuShape::device_bytes_with(shape, split), "{split:?}");
            assert_eq!(resident.split(), split);
            std::sync::Arc::new(resident)
        })
        .collect()
}

/// Records `shape_of`'s shape, makes it resident in every row split, and checks every circuit of
/// `circuits` against it.
fn check_shape<C: ark_relations::gr1cs::ConstraintSynthesizer<Fr> + Clone>(
    name: &str,
    gpu: &CudaBackend,
    shape_of: C,
    circuits: impl IntoIterator<Item = C>,
) {
    let shape = cuzk_synth::R1csShape::record(shape_of).unwrap();
    assert_eq!(
        cuzk_cuda::GpuShape::device_bytes_of(&shape),
        cuzk_cuda::GpuShape::device_bytes_with(&shape, cuzk_cuda::RowSplit::DEFAULT)
    );
    let on_device = resident_splits(gpu, &shape);
    for (i, c) in circuits.into_iter().enumerate() {
        assert_device_evaluation_matches(&format!("{name} #{i}"), gpu, &shape, &on_device, c);
    }
}

#[test]
fn device_evaluation_of_every_workload_circuit_equals_the_host_path() {
    use cuzk_testkit::{Sha256Preimage, WeightedRows};
    let gpu = backend();
    let mut rng = seeded_rng("device_evaluation_of_every_workload_circuit_equals_the_host_path");
    // Synthetic circuits of every bit share, the domain exactly full, one short and one over.
    for log in [10u32, 13] {
        for extra in [-1i64, 0, 1] {
            let base = Synthetic::with_log_rows(log, 1);
            let constraints = (base.constraints as i64 + extra) as usize;
            for share in [0u16, 300, 1000] {
                let c = |seed| Synthetic { constraints, seed, ..base }.with_bit_share(share);
                let name = format!("synthetic 2^{log}{extra:+} rows, bits {share}");
                check_shape(&name, &gpu, c(rng.gen()), [c(rng.gen()), c(rng.gen())]);
            }
        }
    }
    // All-zero witnesses: every entry of z is 0 or 1.
    let zero = Synthetic { zero_witness: true, ..Synthetic::with_log_rows(11, 3) };
    check_shape("zero witness", &gpu, zero, [zero]);
    // PoRep-shaped partitions (Poseidon and SHA-256 labels).
    let small_sha = cuzk_testkit::small_sha_porep();
    for params in [PorepLike::params_for_log_constraints(12).unwrap(), small_sha] {
        let seed = rng.gen();
        let first = PorepLike::new(params, seed, 0).unwrap();
        let others =
            [PorepLike::new(params, seed, 3).unwrap(), PorepLike::new(params, rng.gen(), 1).unwrap()];
        check_shape(&format!("{params:?}"), &gpu, first, others);
    }
    // Coefficients 1, -1 and large ones, rows of several terms, around 2^k rows.
    for rows in [1, 1023, 1024, 1025, 4095] {
        let c = |seed| WeightedRows { rows, seed };
        check_shape(&format!("weighted rows {rows}"), &gpu, c(rng.gen()), [c(rng.gen()), c(rng.gen())]);
    }
    let message = |rng: &mut StdRng| Sha256Preimage { message: (0..50).map(|_| rng.gen()).collect() };
    check_shape("sha256", &gpu, message(&mut rng), [message(&mut rng)]);
}

#[test]
fn the_device_check_names_the_first_unsatisfied_row_and_no_proof_is_made() {
    use cuzk_groth16::{prove_witness_queued, stage_evaluated, ProveError};
    use cuzk_testkit::Unsatisfied;
    let gpu = backend();
    let mut rng = seeded_rng("the_device_check_names_the_first_unsatisfied_row");
    let inner = Synthetic::with_log_rows(12, rng.gen());
    // The honest circuit (no row broken) has the shape.
    let honest = Unsatisfied { inner, bad: usize::MAX };
    let shape = cuzk_synth::R1csShape::record(honest).unwrap();
    let splits = resident_splits(&gpu, &shape);
    let on_device = splits[0].clone();
    for bad in [0, 1, 777, inner.constraints - 1] {
        let circuit = Unsatisfied { inner: Synthetic { seed: rng.gen(), ..inner }, bad };
        assert_device_evaluation_matches(&format!("bad row {bad}"), &gpu, &shape, &splits, circuit);
    }
    // Through the prover: the proof is refused with the row, not made.
    let pk = keygen(honest, &mut rng);
    let key = PreparedKey::new(&gpu, pk).unwrap();
    let circuit = Unsatisfied { inner: Synthetic { seed: rng.gen(), ..inner }, bad: 123 };
    let w = cuzk_synth::synthesize_compact(circuit, shape.counts()).unwrap();
    let staged = stage_evaluated(&gpu, &key, &w.counts(), || {
        gpu.stage_compact(&on_device, &w)
            .map_err(|e| cuzk_groth16::BackendError::Device { op: "stage_compact", source: Box::new(e) })
    })
    .unwrap();
    let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
    let err = prove_witness_queued(
        &gpu,
        &key,
        w.counts(),
        w.public_inputs(),
        staged,
        r,
        s,
        &ProveOptions::default(),
        || {},
    )
    .unwrap_err();
    assert!(matches!(err, ProveError::Unsatisfied { index: 123, .. }), "{err}");
}

#[test]
fn proofs_of_partitions_evaluated_on_the_device_equal_ark_groth16() {
    use ark_groth16::Groth16;
    use cuzk_groth16::{prove_witness_queued, stage_evaluated};
    let gpu = backend();
    let mut rng = seeded_rng("proofs_of_partitions_evaluated_on_the_device_equal_ark_groth16");
    let params = PorepLike::params_for_log_constraints(13).unwrap();
    let seed = rng.gen();
    let first = PorepLike::new(params, seed, 0).unwrap();
    let pk = keygen(first, &mut rng);
    let shape = cuzk_synth::R1csShape::record(first).unwrap();
    let on_device = std::sync::Arc::new(cuzk_cuda::GpuShape::upload(gpu.gpu(), &shape).unwrap());
    let key = PreparedKey::new(&gpu, pk.clone()).unwrap();
    for p in [0, 4] {
        let circuit = PorepLike::new(params, seed, p).unwrap();
        let w = cuzk_synth::synthesize_compact(circuit, shape.counts()).unwrap();
        let upload = || {
            gpu.stage_compact(&on_device, &w)
                .map_err(|e| cuzk_groth16::BackendError::Device { op: "stage_compact", source: Box::new(e) })
        };
        let staged = stage_evaluated(&gpu, &key, &w.counts(), upload).unwrap();
        let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
        let options = ProveOptions::default();
        let (proof, times) =
            prove_witness_queued(&gpu, &key, w.counts(), w.public_inputs(), staged, r, s, &options, || {})
                .unwrap();
        let ark =
            Groth16::<ark_bls12_381::Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s).unwrap();
        assert_eq!(proof, ark, "partition {p}");
        let steps: Vec<&str> = times.steps.iter().map(|(_, step, _)| *step).collect();
        assert!(steps.contains(&"sparse products") && steps.contains(&"expand z"), "steps {steps:?}");
    }
}
