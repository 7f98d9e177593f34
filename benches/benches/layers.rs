//! Criterion benches across the layers, each beside its arkworks baseline where one exists.
//!
//! Run with `cargo xtask bench` (or `cargo xtask bench <filter>`).

// criterion_group!/criterion_main! generate undocumented public items.
#![allow(missing_docs)]

use ark_bls12_381::{Bls12_381, Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::{CurveGroup, VariableBaseMSM};
use ark_ff::{FftField, PrimeField, UniformRand};
use ark_groth16::Groth16;
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use cuzk_circuits::Synthetic;
use cuzk_field::{from_device_vec, to_device_vec, DeviceFr, DeviceG1Affine};
use cuzk_groth16::{
    prove, Backend, CpuBackend, CpuPoly, MsmScalars, NttKind, PolyBackend, PreparedKey, ProveOptions, G1, G2,
};
use cuzk_synth::{synthesize, SynthesisOptions};
use rand::{rngs::StdRng, SeedableRng};

fn rng() -> StdRng {
    StdRng::seed_from_u64(0xc0ffee)
}

fn random_frs(n: usize) -> Vec<Fr> {
    let mut r = rng();
    (0..n).map(|_| Fr::rand(&mut r)).collect()
}

fn random_points<G: CurveGroup + UniformRand>(n: usize) -> Vec<G::Affine> {
    let mut r = rng();
    // A few random points repeated with random multiples keeps generation cheap at large n.
    let seeds: Vec<G> = (0..64).map(|_| G::rand(&mut r)).collect();
    let pts: Vec<G> = (0..n).map(|i| seeds[i % 64] * G::ScalarField::from(i as u64 + 1)).collect();
    G::normalize_batch(&pts)
}

fn field(c: &mut Criterion) {
    let mut g = c.benchmark_group("field");
    g.sample_size(10);
    let n = 1 << 18;
    let frs = random_frs(n);
    let pts = random_points::<G1Projective>(1 << 16);
    g.bench_function("fr_to_device/2^18", |b| b.iter(|| to_device_vec::<DeviceFr>(&frs)));
    let dev: Vec<DeviceFr> = to_device_vec(&frs);
    g.bench_function("fr_from_device_checked/2^18", |b| b.iter(|| from_device_vec(&dev)));
    g.bench_function("g1_to_device/2^16", |b| b.iter(|| to_device_vec::<DeviceG1Affine>(&pts)));
    let dev: Vec<DeviceG1Affine> = to_device_vec(&pts);
    g.bench_function("g1_from_device_checked/2^16", |b| b.iter(|| from_device_vec(&dev)));
    g.finish();
}

fn synth(c: &mut Criterion) {
    let mut g = c.benchmark_group("synth");
    g.sample_size(10);
    for k in [12u32, 16] {
        g.bench_with_input(BenchmarkId::new("synthetic", format!("2^{k}")), &k, |b, &k| {
            b.iter(|| synthesize(Synthetic::with_log_rows(k, 1), &SynthesisOptions::default()))
        });
    }
    g.finish();
}

fn ntt(c: &mut Criterion) {
    let mut g = c.benchmark_group("ntt");
    g.sample_size(10);
    for k in [14u32, 18] {
        let v = random_frs(1 << k);
        g.bench_with_input(BenchmarkId::new("cuzk_cpu_coset_forward", format!("2^{k}")), &v, |b, v| {
            b.iter_batched(
                || CpuPoly(v.clone()),
                |mut p| CpuBackend.ntt(&mut [&mut p], NttKind::CosetForward),
                BatchSize::LargeInput,
            )
        });
        g.bench_with_input(BenchmarkId::new("ark_poly_coset_fft", format!("2^{k}")), &v, |b, v| {
            let d = Radix2EvaluationDomain::<Fr>::new(v.len()).and_then(|d| d.get_coset(Fr::GENERATOR));
            let d = d.expect("domain");
            b.iter_batched(|| v.clone(), |mut p| d.fft_in_place(&mut p), BatchSize::LargeInput)
        });
    }
    g.finish();
}

fn msm(c: &mut Criterion) {
    let mut g = c.benchmark_group("msm");
    g.sample_size(10);
    for k in [12u32, 16] {
        let n = 1 << k;
        let scalars = random_frs(n);
        let bigints: Vec<_> = scalars.iter().map(|s| s.into_bigint()).collect();
        let g1: Vec<G1Affine> = random_points::<G1Projective>(n);
        let g2: Vec<G2Affine> = random_points::<G2Projective>(n);
        let id = format!("2^{k}");
        g.bench_function(BenchmarkId::new("g1_cuzk_cpu", &id), |b| {
            b.iter(|| CpuBackend.msm::<G1>(&g1, MsmScalars::Host(&scalars)))
        });
        g.bench_function(BenchmarkId::new("g1_ark_ec", &id), |b| {
            b.iter(|| G1Projective::msm_bigint(&g1, &bigints))
        });
        g.bench_function(BenchmarkId::new("g2_cuzk_cpu", &id), |b| {
            b.iter(|| CpuBackend.msm::<G2>(&g2, MsmScalars::Host(&scalars)))
        });
        g.bench_function(BenchmarkId::new("g2_ark_ec", &id), |b| {
            b.iter(|| G2Projective::msm_bigint(&g2, &bigints))
        });
    }
    g.finish();
}

fn groth16(c: &mut Criterion) {
    let mut g = c.benchmark_group("prove");
    g.sample_size(10);
    let k = 12;
    let circuit = Synthetic::with_log_rows(k, 3);
    let pk =
        Groth16::<Bls12_381>::generate_random_parameters_with_reduction(circuit, &mut rng()).expect("keygen");
    let key = PreparedKey::new(&CpuBackend, pk.clone()).expect("key");
    let (r, s) = (Fr::from(11u64), Fr::from(13u64));
    let options = ProveOptions { verify: false };
    g.bench_function(BenchmarkId::new("cuzk_cpu", format!("2^{k}")), |b| {
        b.iter(|| {
            let syn = synthesize(circuit, &SynthesisOptions { check_satisfied: false }).expect("synthesis");
            prove(&CpuBackend, &key, &syn, r, s, &options).expect("proof")
        })
    });
    g.bench_function(BenchmarkId::new("ark_groth16", format!("2^{k}")), |b| {
        b.iter(|| Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s).expect("proof"))
    });
    g.finish();
}

criterion_group!(benches, field, synth, ntt, msm, groth16);
criterion_main!(benches);
