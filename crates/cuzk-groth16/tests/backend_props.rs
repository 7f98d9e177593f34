//! Property tests of [`CpuBackend`] against independent oracles: a naive O(n²) DFT (and its inverse)
//! built from `cuzk_field::constants::root_of_unity`, ark-poly's `Radix2EvaluationDomain`, a plain loop
//! for the quotient step, and a naive `Σ s_i·P_i` for the MSMs.
//!
//! The helpers that drive the backend go through the [`Backend`] trait only, so they can be pointed at
//! another backend later. Every proptest takes its RNG seed from `cuzk_testkit::seeded_rng`, so one
//! `CUZK_TEST_SEED=<seed printed by the failing test>` replays a failure (failure persistence files are
//! off: the minimal failing input is printed instead).

use ark_bls12_381::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::{AffineRepr, CurveGroup};
use ark_ff::{FftField, Field, One, PrimeField, UniformRand, Zero};
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use cuzk_field::constants::root_of_unity;
use cuzk_groth16::{
    Backend, BackendError, Bases, CpuBackend, CpuPoly, MsmScalars, NttKind, PolyBackend, G1, G2,
};
use cuzk_testkit::seeded_rng;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::Config;

const ALL_KINDS: [NttKind; 4] =
    [NttKind::Forward, NttKind::Inverse, NttKind::CosetForward, NttKind::CosetInverse];

/// The largest NTT exercised: 2^10. The oracles are O(n²), so this keeps a case well under a second in
/// a dev build while still covering every radix-2 stage count from 0 to 10.
const MAX_LOG_N: u32 = 10;

fn config(test: &str, cases: u32) -> Config {
    cuzk_testkit::proptest_config(test, cases)
}

// ---------------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------------

/// A uniformly random field element (32 random bytes reduced mod r; the bias is irrelevant here).
/// Shrinks towards zero.
fn fr() -> impl Strategy<Value = Fr> {
    any::<[u8; 32]>().prop_map(|b| Fr::from_le_bytes_mod_order(&b))
}

/// `−k` for small `k`: scalars just below the modulus, whose top window is full. 1..=1024 spans more
/// than one MSM window's worth of low bits.
fn near_modulus() -> impl Strategy<Value = Fr> {
    (1u64..=1024).prop_map(|k| -Fr::from(k))
}

/// `2^k` for every bit position of Fr (`r > 2^254`): a single set bit in each window, including the
/// topmost one.
fn power_of_two() -> impl Strategy<Value = Fr> {
    (0u64..Fr::MODULUS_BIT_SIZE as u64).prop_map(|k| Fr::from(2u64).pow([k]))
}

/// An NTT size exponent: every size from 2^0 (the trivial domain) to 2^MAX_LOG_N.
fn log_n() -> impl Strategy<Value = u32> {
    0..=MAX_LOG_N
}

/// One to three random polynomials of one common length 2^0..2^MAX_LOG_N: three is what the witness
/// map batches (a, b, c).
fn poly_batch() -> impl Strategy<Value = Vec<Vec<Fr>>> {
    (log_n(), 1usize..=3).prop_flat_map(|(log_n, count)| vec(vec(fr(), 1 << log_n), count))
}

/// MSM sizes: empty, the awkward small sizes 1, 2, 5, one off each power of two up to 2^8 (bucket and
/// window boundaries, chunking by powers of two), and anything up to 300. 300 keeps the naive oracle
/// (one scalar multiplication per term, G2 included) to well under a second per case.
fn msm_size() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1usize),
        Just(2usize),
        Just(5usize),
        (1u32..=8).prop_map(|k| (1usize << k) - 1),
        (1u32..=8).prop_map(|k| (1usize << k) + 1),
        0usize..=300,
    ]
}

/// MSM scalar vectors of length `n`, by distribution: random; all zero; all one; 0/1/random mixed (a
/// typical Groth16 witness); near the modulus; every special kind mixed with random.
fn msm_scalars(n: usize) -> impl Strategy<Value = Vec<Fr>> {
    prop_oneof![
        vec(fr(), n),
        Just(vec![Fr::zero(); n]),
        Just(vec![Fr::one(); n]),
        vec(prop_oneof![Just(Fr::zero()), Just(Fr::one()), fr()], n),
        vec(near_modulus(), n),
        vec(prop_oneof![Just(Fr::zero()), Just(Fr::one()), near_modulus(), power_of_two(), fr()], n),
    ]
}

/// How one MSM base is made.
#[derive(Debug, Clone, Copy)]
enum BaseSpec {
    /// The point at infinity.
    Identity,
    /// A copy of an earlier base (index taken modulo the bases made so far; identity if none).
    Repeat(usize),
    /// `k·G` for the group generator `G` (so `k = 0` is the identity too).
    Fresh(Fr),
}

/// Bases: mostly fresh random points, with identities and repeats mixed in at a rate high enough that
/// most vectors of a few elements contain one.
fn base_spec() -> impl Strategy<Value = BaseSpec> {
    prop_oneof![
        1 => Just(BaseSpec::Identity),
        2 => any::<usize>().prop_map(BaseSpec::Repeat),
        5 => fr().prop_map(BaseSpec::Fresh),
    ]
}

/// An MSM instance: scalars and base specs of one common length.
fn msm_case() -> impl Strategy<Value = (Vec<Fr>, Vec<BaseSpec>)> {
    msm_size().prop_flat_map(|n| (msm_scalars(n), vec(base_spec(), n)))
}

fn make_bases<C: CurveGroup<ScalarField = Fr>>(specs: &[BaseSpec]) -> Vec<C::Affine> {
    let mut out: Vec<C> = Vec::with_capacity(specs.len());
    for spec in specs {
        let p = match *spec {
            BaseSpec::Identity => C::zero(),
            BaseSpec::Repeat(_) if out.is_empty() => C::zero(),
            BaseSpec::Repeat(i) => out[i % out.len()],
            BaseSpec::Fresh(k) => C::generator() * k,
        };
        out.push(p);
    }
    C::normalize_batch(&out)
}

// ---------------------------------------------------------------------------------------------------
// Oracles
// ---------------------------------------------------------------------------------------------------

/// ω for a domain of `n` elements, from cuzk-field's constants (independent of ark-poly).
fn omega(n: usize) -> Fr {
    assert!(n.is_power_of_two());
    root_of_unity(n.trailing_zeros()).expect("domain within Fr's two-adicity")
}

fn horner(coeffs: &[Fr], x: Fr) -> Fr {
    coeffs.iter().rev().fold(Fr::zero(), |acc, c| acc * x + c)
}

/// `p(shift·ω^i)` for `i < n`, each by Horner's rule: O(n²).
fn naive_evaluate(coeffs: &[Fr], shift: Fr) -> Vec<Fr> {
    let w = omega(coeffs.len());
    let mut x = shift;
    (0..coeffs.len())
        .map(|_| {
            let y = horner(coeffs, x);
            x *= w;
            y
        })
        .collect()
}

/// The inverse of [`naive_evaluate`]: `c_j = shift^{-j} · (1/n) · Σ_i e_i·ω^{-ij}`, where the sum is
/// the polynomial with coefficients `e` evaluated at `ω^{-j}`. O(n²).
fn naive_interpolate(evals: &[Fr], shift: Fr) -> Vec<Fr> {
    let n = evals.len();
    let (w_inv, n_inv, shift_inv) =
        (omega(n).inverse().unwrap(), Fr::from(n as u64).inverse().unwrap(), shift.inverse().unwrap());
    let (mut x, mut s) = (Fr::one(), Fr::one());
    (0..n)
        .map(|_| {
            let c = horner(evals, x) * n_inv * s;
            x *= w_inv;
            s *= shift_inv;
            c
        })
        .collect()
}

/// The naive oracle for one NTT kind.
fn naive_ntt(v: &[Fr], kind: NttKind) -> Vec<Fr> {
    let g = Fr::GENERATOR;
    match kind {
        NttKind::Forward => naive_evaluate(v, Fr::one()),
        NttKind::CosetForward => naive_evaluate(v, g),
        NttKind::Inverse => naive_interpolate(v, Fr::one()),
        NttKind::CosetInverse => naive_interpolate(v, g),
    }
}

/// ark-poly's result for one NTT kind.
fn ark_ntt(v: &[Fr], kind: NttKind) -> Vec<Fr> {
    let mut d = Radix2EvaluationDomain::<Fr>::new(v.len()).unwrap();
    assert_eq!(d.size(), v.len());
    if matches!(kind, NttKind::CosetForward | NttKind::CosetInverse) {
        d = d.get_coset(Fr::GENERATOR).unwrap();
    }
    match kind {
        NttKind::Forward | NttKind::CosetForward => d.fft(v),
        NttKind::Inverse | NttKind::CosetInverse => d.ifft(v),
    }
}

/// `Σ s_i·P_i`, one scalar multiplication at a time.
fn naive_msm<C: CurveGroup>(bases: &[C::Affine], scalars: &[C::ScalarField]) -> C {
    assert_eq!(bases.len(), scalars.len());
    bases.iter().zip(scalars).map(|(p, s)| C::from(*p) * s).sum()
}

// ---------------------------------------------------------------------------------------------------
// Driving a backend through the trait
// ---------------------------------------------------------------------------------------------------

/// Uploads each vector as a polynomial of its own length, transforms them all in one call, downloads.
fn backend_ntt<B: Backend>(backend: &B, inputs: &[Vec<Fr>], kind: NttKind) -> Vec<Vec<Fr>> {
    let mut polys: Vec<B::Poly> =
        inputs.iter().map(|v| backend.poly_from_host(v, v.len()).unwrap()).collect();
    let mut refs: Vec<&mut B::Poly> = polys.iter_mut().collect();
    backend.ntt(&mut refs, kind).unwrap();
    polys.iter().map(|p| backend.poly_to_host(p).unwrap()).collect()
}

fn inverse_of(kind: NttKind) -> NttKind {
    match kind {
        NttKind::Forward => NttKind::Inverse,
        NttKind::Inverse => NttKind::Forward,
        NttKind::CosetForward => NttKind::CosetInverse,
        NttKind::CosetInverse => NttKind::CosetForward,
    }
}

// ---------------------------------------------------------------------------------------------------
// NTT
// ---------------------------------------------------------------------------------------------------

/// The oracle's ω is what ark-poly (and so the backend's contract) means by ω: a primitive n-th root.
#[test]
fn oracle_roots_are_primitive_and_match_ark_poly() {
    for log_n in 0..=MAX_LOG_N {
        let n = 1usize << log_n;
        let w = omega(n);
        assert_eq!(w.pow([n as u64]), Fr::one(), "ω^n for n = {n}");
        if n > 1 {
            assert_eq!(w.pow([n as u64 / 2]), -Fr::one(), "ω^(n/2) for n = {n}");
        }
        assert_eq!(w, Radix2EvaluationDomain::<Fr>::new(n).unwrap().group_gen(), "n = {n}");
    }
    assert_eq!(Fr::GENERATOR, Fr::from(7u64));
}

/// Every size 2^0..2^10, every kind, against the naive oracle and ark-poly (deterministic sweep; the
/// proptests below sample the same space with more variety).
#[test]
fn every_size_and_kind_matches_naive_and_ark_poly() {
    let mut rng = seeded_rng("every_size_and_kind_matches_naive_and_ark_poly");
    for log_n in 0..=MAX_LOG_N {
        let n = 1usize << log_n;
        let v: Vec<Fr> = (0..n).map(|_| Fr::rand(&mut rng)).collect();
        for kind in ALL_KINDS {
            let got = backend_ntt(&CpuBackend, std::slice::from_ref(&v), kind).remove(0);
            assert_eq!(got, naive_ntt(&v, kind), "{kind:?}, n = {n}: differs from the naive DFT");
            assert_eq!(got, ark_ntt(&v, kind), "{kind:?}, n = {n}: differs from ark-poly");
        }
    }
}

proptest! {
    #![proptest_config(config("ntt_forward_kinds_match_naive_evaluation", 48))]
    /// `Forward` evaluates at ω^i and `CosetForward` at g·ω^i, for every polynomial of a batch.
    #[test]
    fn ntt_forward_kinds_match_naive_evaluation(polys in poly_batch()) {
        for kind in [NttKind::Forward, NttKind::CosetForward] {
            let got = backend_ntt(&CpuBackend, &polys, kind);
            for (i, (got, input)) in got.iter().zip(&polys).enumerate() {
                prop_assert_eq!(got, &naive_ntt(input, kind), "{:?}, poly {} of {}, n = {}", kind, i,
                    polys.len(), input.len());
            }
        }
    }
}

proptest! {
    #![proptest_config(config("ntt_inverse_kinds_match_naive_interpolation", 48))]
    /// `Inverse` and `CosetInverse` interpolate from ω^i and g·ω^i, for every polynomial of a batch.
    #[test]
    fn ntt_inverse_kinds_match_naive_interpolation(polys in poly_batch()) {
        for kind in [NttKind::Inverse, NttKind::CosetInverse] {
            let got = backend_ntt(&CpuBackend, &polys, kind);
            for (i, (got, input)) in got.iter().zip(&polys).enumerate() {
                prop_assert_eq!(got, &naive_ntt(input, kind), "{:?}, poly {} of {}, n = {}", kind, i,
                    polys.len(), input.len());
            }
        }
    }
}

proptest! {
    #![proptest_config(config("ntt_round_trips_and_matches_ark_poly", 64))]
    /// Each kind followed by its inverse is the identity (both orders), and each kind equals ark-poly's.
    #[test]
    fn ntt_round_trips_and_matches_ark_poly(polys in poly_batch()) {
        for kind in ALL_KINDS {
            let once = backend_ntt(&CpuBackend, &polys, kind);
            for (got, input) in once.iter().zip(&polys) {
                prop_assert_eq!(got, &ark_ntt(input, kind), "{:?}, n = {}: differs from ark-poly", kind,
                    input.len());
            }
            let back = backend_ntt(&CpuBackend, &once, inverse_of(kind));
            prop_assert_eq!(&back, &polys, "{:?} then {:?} is not the identity", kind, inverse_of(kind));
        }
    }
}

proptest! {
    #![proptest_config(config("ntt_rejects_mismatched_lengths", 64))]
    /// A batch whose lengths differ is a `LengthMismatch` error, whichever poly is the odd one out.
    #[test]
    fn ntt_rejects_mismatched_lengths(
        (log_n, log_m) in (log_n(), log_n()).prop_filter("lengths differ", |(a, b)| a != b),
        count in 2usize..=4,
        odd in 0usize..4,
        kind in prop::sample::select(ALL_KINDS.to_vec()),
    ) {
        let (n, m) = (1usize << log_n, 1usize << log_m);
        let odd = odd % count;
        let mut polys: Vec<CpuPoly> =
            (0..count).map(|i| CpuPoly(vec![Fr::one(); if i == odd { m } else { n }])).collect();
        let mut refs: Vec<&mut CpuPoly> = polys.iter_mut().collect();
        let err = CpuBackend.ntt(&mut refs, kind).unwrap_err();
        let first = if odd == 0 { m } else { n };
        prop_assert!(
            matches!(err, BackendError::LengthMismatch { op: "ntt", expected, got }
                if expected == first && got != first),
            "{:?}", err
        );
    }
}

proptest! {
    #![proptest_config(config("ntt_rejects_non_power_of_two_lengths", 64))]
    /// A length that is not a power of two (0 included) is an `UnsupportedSize` error, not a panic.
    #[test]
    fn ntt_rejects_non_power_of_two_lengths(
        n in (0usize..=2100).prop_filter("not a power of two", |n| !n.is_power_of_two()),
        count in 1usize..=3,
        kind in prop::sample::select(ALL_KINDS.to_vec()),
    ) {
        let mut polys: Vec<CpuPoly> = (0..count).map(|_| CpuPoly(vec![Fr::one(); n])).collect();
        let mut refs: Vec<&mut CpuPoly> = polys.iter_mut().collect();
        let err = CpuBackend.ntt(&mut refs, kind).unwrap_err();
        prop_assert!(matches!(err, BackendError::UnsupportedSize { op: "ntt", size, .. } if size == n), "{:?}", err);
    }
}

#[test]
fn ntt_of_no_polys_is_a_no_op() {
    for kind in ALL_KINDS {
        CpuBackend.ntt(&mut [], kind).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------------
// poly_from_host
// ---------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config("poly_from_host_pads_with_zeros", 64))]
    /// `values` followed by zeros up to `size`; `poly_len` agrees.
    #[test]
    fn poly_from_host_pads_with_zeros(
        (size, values) in log_n().prop_flat_map(|l| (Just(1usize << l), vec(fr(), 0..=(1usize << l)))),
    ) {
        let p = CpuBackend.poly_from_host(&values, size).unwrap();
        prop_assert_eq!(CpuBackend.poly_len(&p), size);
        let host = CpuBackend.poly_to_host(&p).unwrap();
        prop_assert_eq!(host.len(), size);
        prop_assert_eq!(&host[..values.len()], &values[..]);
        prop_assert!(host[values.len()..].iter().all(Zero::is_zero));
    }
}

proptest! {
    #![proptest_config(config("poly_from_host_rejects_too_many_values", 64))]
    /// More values than `size` is a `LengthMismatch` error.
    #[test]
    fn poly_from_host_rejects_too_many_values(log_size in log_n(), extra in 1usize..=5) {
        let size = 1usize << log_size;
        let values = vec![Fr::one(); size + extra];
        let err = CpuBackend.poly_from_host(&values, size).unwrap_err();
        prop_assert!(
            matches!(err, BackendError::LengthMismatch { op: "poly_from_host", expected, got }
                if expected == size && got == size + extra),
            "{:?}", err
        );
    }
}

#[test]
fn poly_from_host_rejects_non_power_of_two_sizes() {
    for size in [0usize, 3, 5, 6, 7, 12, 1000, 1025] {
        let err = CpuBackend.poly_from_host(&[], size).unwrap_err();
        assert!(matches!(err, BackendError::UnsupportedSize { size: s, .. } if s == size), "{size}: {err:?}");
    }
}

// ---------------------------------------------------------------------------------------------------
// quotient
// ---------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config("quotient_matches_plain_loop", 48))]
    /// `a[i] = (a[i]·b[i] − c[i])·z_inv`; `b` and `c` are left as they were.
    #[test]
    fn quotient_matches_plain_loop(
        (a, b, c) in log_n().prop_flat_map(|l| {
            let n = 1usize << l;
            (vec(fr(), n), vec(fr(), n), vec(fr(), n))
        }),
        z_inv in prop_oneof![fr(), Just(Fr::one()), Just(Fr::zero())],
    ) {
        let n = a.len();
        let expected: Vec<Fr> = (0..n).map(|i| (a[i] * b[i] - c[i]) * z_inv).collect();
        let mut pa = CpuBackend.poly_from_host(&a, n).unwrap();
        let pb = CpuBackend.poly_from_host(&b, n).unwrap();
        let pc = CpuBackend.poly_from_host(&c, n).unwrap();
        CpuBackend.quotient(&mut pa, &pb, &pc, z_inv).unwrap();
        prop_assert_eq!(CpuBackend.poly_to_host(&pa).unwrap(), expected);
        prop_assert_eq!(CpuBackend.poly_to_host(&pb).unwrap(), b);
        prop_assert_eq!(CpuBackend.poly_to_host(&pc).unwrap(), c);
    }
}

#[test]
fn quotient_rejects_mismatched_lengths() {
    let p = |n: usize| CpuBackend.poly_from_host(&[], n).unwrap();
    for (na, nb, nc) in [(4, 8, 4), (4, 4, 8), (8, 4, 4), (1, 2, 2), (2, 1, 1)] {
        let err = CpuBackend.quotient(&mut p(na), &p(nb), &p(nc), Fr::one()).unwrap_err();
        assert!(
            matches!(err, BackendError::LengthMismatch { op: "quotient", .. }),
            "({na}, {nb}, {nc}): {err:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------------
// MSM
// ---------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config("msm_g1_matches_naive", 64))]
    /// `msm_g1` with host scalars, and with the same scalars as the prefix of a backend polynomial whose
    /// tail holds unrelated values, both equal the naive sum.
    #[test]
    fn msm_g1_matches_naive(
        (scalars, specs) in msm_case(),
        tail in vec(fr().prop_filter("nonzero", |s| !s.is_zero()), 1..=3),
    ) {
        let bases = make_bases::<G1Projective>(&specs);
        let expected = naive_msm::<G1Projective>(&bases, &scalars);
        let loaded = CpuBackend.load_bases::<G1>(bases).unwrap();
        prop_assert_eq!(Bases::len(&loaded), scalars.len());

        let host = CpuBackend.msm::<G1>(&loaded, MsmScalars::Host(&scalars)).unwrap();
        prop_assert_eq!(host, expected, "host scalars, n = {}", scalars.len());

        // The prefix of a longer polynomial: values past `len` must not take part.
        let mut values = scalars.clone();
        values.extend_from_slice(&tail);
        let size = values.len().next_power_of_two();
        while values.len() < size {
            values.push(tail[values.len() % tail.len()]);
        }
        let poly = CpuBackend.poly_from_host(&values, size).unwrap();
        let from_poly = CpuBackend.msm::<G1>(&loaded, MsmScalars::Poly { poly: &poly, offset: 0, len: scalars.len() }).unwrap();
        prop_assert_eq!(from_poly, expected, "poly scalars, n = {}, poly size {}", scalars.len(), size);

        // A range inside a polynomial (how the prover reads the witness out of the assignment):
        // values before `offset` and past `offset + len` must not take part.
        let mut shifted = tail.clone();
        shifted.extend_from_slice(&scalars);
        shifted.extend_from_slice(&tail);
        let size = shifted.len().next_power_of_two();
        let poly = CpuBackend.poly_from_host(&shifted, size).unwrap();
        let range = MsmScalars::Poly { poly: &poly, offset: tail.len(), len: scalars.len() };
        prop_assert_eq!(CpuBackend.msm::<G1>(&loaded, range).unwrap(), expected, "range, n = {}", scalars.len());
        // A range past the polynomial's end is refused.
        let past = MsmScalars::Poly { poly: &poly, offset: size - scalars.len() + 1, len: scalars.len() };
        let err = CpuBackend.msm::<G1>(&loaded, past).unwrap_err();
        prop_assert!(matches!(err, BackendError::LengthMismatch { op: "msm_g1", .. }), "{:?}", err);
    }
}

proptest! {
    #![proptest_config(config("msm_g2_matches_naive", 32))]
    /// `msm_g2` equals the naive sum.
    #[test]
    fn msm_g2_matches_naive((scalars, specs) in msm_case()) {
        let bases = make_bases::<G2Projective>(&specs);
        let expected = naive_msm::<G2Projective>(&bases, &scalars);
        let loaded = CpuBackend.load_bases::<G2>(bases).unwrap();
        prop_assert_eq!(Bases::len(&loaded), scalars.len());
        prop_assert_eq!(CpuBackend.msm::<G2>(&loaded, MsmScalars::Host(&scalars)).unwrap(), expected, "n = {}", scalars.len());
        // The same scalars as a range of a polynomial, with other values around them.
        let mut shifted = vec![Fr::one(); 3];
        shifted.extend_from_slice(&scalars);
        shifted.push(Fr::one());
        let size = shifted.len().next_power_of_two();
        let poly = CpuBackend.poly_from_host(&shifted, size).unwrap();
        let range = MsmScalars::Poly { poly: &poly, offset: 3, len: scalars.len() };
        prop_assert_eq!(CpuBackend.msm::<G2>(&loaded, range).unwrap(), expected, "range, n = {}", scalars.len());
    }
}

/// Fixed edge cases that a random draw reaches only rarely: only identities, one base repeated with
/// scalars summing to the modulus (so the result is the identity), and `Σ (−1)·P = −Σ P`.
#[test]
fn msm_structured_edge_cases() {
    let mut rng = seeded_rng("msm_structured_edge_cases");
    for n in [1usize, 2, 5, 31, 33, 255, 257] {
        let scalars: Vec<Fr> = (0..n).map(|_| Fr::rand(&mut rng)).collect();

        let g1 = CpuBackend.load_bases::<G1>(vec![G1Affine::zero(); n]).unwrap();
        let g2 = CpuBackend.load_bases::<G2>(vec![G2Affine::zero(); n]).unwrap();
        assert!(
            CpuBackend.msm::<G1>(&g1, MsmScalars::Host(&scalars)).unwrap().is_zero(),
            "identities, n = {n}"
        );
        assert!(
            CpuBackend.msm::<G2>(&g2, MsmScalars::Host(&scalars)).unwrap().is_zero(),
            "identities, n = {n}"
        );

        // One random base n times; scalars chosen to sum to 0 mod r.
        let p1 = G1Projective::rand(&mut rng).into_affine();
        let p2 = G2Projective::rand(&mut rng).into_affine();
        let mut cancelling = scalars.clone();
        let sum: Fr = cancelling[..n - 1].iter().sum();
        cancelling[n - 1] = -sum;
        let g1 = CpuBackend.load_bases::<G1>(vec![p1; n]).unwrap();
        let g2 = CpuBackend.load_bases::<G2>(vec![p2; n]).unwrap();
        assert!(
            CpuBackend.msm::<G1>(&g1, MsmScalars::Host(&cancelling)).unwrap().is_zero(),
            "cancelling, n = {n}"
        );
        assert!(
            CpuBackend.msm::<G2>(&g2, MsmScalars::Host(&cancelling)).unwrap().is_zero(),
            "cancelling, n = {n}"
        );

        // Random bases with all scalars −1: the negated sum of the bases.
        let b1: Vec<G1Affine> = (0..n).map(|_| G1Projective::rand(&mut rng).into_affine()).collect();
        let b2: Vec<G2Affine> = (0..n).map(|_| G2Projective::rand(&mut rng).into_affine()).collect();
        let minus_one = vec![-Fr::one(); n];
        let s1: G1Projective = b1.iter().sum();
        let s2: G2Projective = b2.iter().sum();
        let g1 = CpuBackend.load_bases::<G1>(b1).unwrap();
        let g2 = CpuBackend.load_bases::<G2>(b2).unwrap();
        assert_eq!(CpuBackend.msm::<G1>(&g1, MsmScalars::Host(&minus_one)).unwrap(), -s1, "all −1, n = {n}");
        assert_eq!(CpuBackend.msm::<G2>(&g2, MsmScalars::Host(&minus_one)).unwrap(), -s2, "all −1, n = {n}");
    }
}

proptest! {
    #![proptest_config(config("msm_rejects_length_mismatch", 64))]
    /// Scalar counts other than the base count are `LengthMismatch` errors, for host scalars, polynomial
    /// prefixes (including a `len` past the polynomial's end) and G2.
    #[test]
    fn msm_rejects_length_mismatch(
        n in 0usize..=40,
        m in 0usize..=40,
        log_size in 0u32..=6,
    ) {
        prop_assume!(n != m);
        let g1 = CpuBackend.load_bases::<G1>(vec![G1Affine::generator(); n]).unwrap();
        let g2 = CpuBackend.load_bases::<G2>(vec![G2Affine::generator(); n]).unwrap();
        let scalars = vec![Fr::one(); m];

        let err = CpuBackend.msm::<G1>(&g1, MsmScalars::Host(&scalars)).unwrap_err();
        prop_assert!(matches!(err, BackendError::LengthMismatch { op: "msm_g1", expected, got }
            if expected == n && got == m), "{:?}", err);

        let err = CpuBackend.msm::<G2>(&g2, MsmScalars::Host(&scalars)).unwrap_err();
        prop_assert!(matches!(err, BackendError::LengthMismatch { op: "msm_g2", expected, got }
            if expected == n && got == m), "{:?}", err);

        let size = 1usize << log_size;
        let poly = CpuBackend.poly_from_host(&[], size).unwrap();
        let err = CpuBackend.msm::<G1>(&g1, MsmScalars::Poly { poly: &poly, offset: 0, len: m }).unwrap_err();
        prop_assert!(matches!(err, BackendError::LengthMismatch { op: "msm_g1", .. }), "{:?}", err);
    }
}

/// The bases a backend takes back report their length through [`Bases`].
#[test]
fn loaded_bases_report_their_length() {
    for n in [0usize, 1, 7] {
        let g1 = CpuBackend.load_bases::<G1>(vec![G1Affine::generator(); n]).unwrap();
        let g2 = CpuBackend.load_bases::<G2>(vec![G2Affine::generator(); n]).unwrap();
        assert_eq!((Bases::len(&g1), Bases::is_empty(&g1)), (n, n == 0));
        assert_eq!((Bases::len(&g2), Bases::is_empty(&g2)), (n, n == 0));
    }
}
