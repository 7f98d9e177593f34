//! The GPU suite: every kernel against arkworks on fresh random data. Compiled only with the
//! `gpu-tests` feature (`cargo xtask gpu-test`); without a GPU every test fails, never passes.
#![cfg(feature = "gpu-tests")]

use ark_bls12_381::{Fq, Fq2, Fr};
use ark_ff::{BigInt, FftField, Field, PrimeField, UniformRand, Zero};
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use cuzk_cuda::{kernels, CudaBackend, GpuFq, GpuFq2, GpuFr};
use cuzk_field::{constants, DeviceFq, DeviceFq2, DeviceFr, DeviceRepr};
use cuzk_groth16::{witness_map, CpuBackend, NttKind, PolyBackend};
use cuzk_synth::{synthesize, SynthesisOptions};
use cuzk_testkit::{seeded_rng, Synthetic};
use rand::{rngs::StdRng, Rng};
use rayon::prelude::*;

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
        let expect =
            [x + y, x - y, x * y, x.square(), -x, x.inverse().unwrap_or_default(), from_canonical(&x)];
        for (k, e) in expect.iter().enumerate() {
            assert_eq!(unwrap(&o[k]), *e, "{name}: op {k} on element {i}");
        }
        assert_eq!(o[7], canonical_limbs(&x), "{name}: from_mont on element {i}");
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
        let expect = [x + y, x - y, x * y, x.square(), -x, x.inverse().unwrap_or_default()];
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

#[test]
fn devices_are_discovered_and_bad_ordinals_refused() {
    let devices = cuzk_cuda::Gpu::discover().unwrap();
    assert!(!devices.is_empty());
    assert!(devices[0].compute_capability.0 >= 7, "{:?}", devices[0]);
    assert!(cuzk_cuda::Gpu::new(devices.len()).is_err());
    assert_eq!(constants::fr().bits, 255);
}
