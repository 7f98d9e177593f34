//! The kernels' field and curve arithmetic, compiled for the host (`kernels/host/check.cpp`, with the
//! PTX carry chains emulated by `kernels/field/ptx.cuh`), against arkworks on fresh random inputs and
//! edge values. Part of the CPU suite: it needs a C++17 compiler (`CXX`, else `c++`), not a GPU.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ark_bls12_381::{Fq, Fq2, Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::{AffineRepr, CurveGroup};
use ark_ff::{AdditiveGroup, BigInt, BigInteger, Field, One, PrimeField, UniformRand, Zero};
use cuzk_field::{DeviceFq, DeviceFr, DeviceG1Affine, DeviceG2Affine, DeviceRepr};
use cuzk_testkit::{is_shoup_quotient, seeded_rng};
use rand::{rngs::StdRng, Rng};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the host check once per test process.
fn binary() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let out = std::env::temp_dir().join(format!("cuzk-host-check-{}", std::process::id()));
        let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
        let status = Command::new(&cxx)
            .args(["-O1", "-std=c++17", "-I"])
            .arg(root().join("kernels"))
            .arg("-o")
            .arg(&out)
            .arg(root().join("kernels/host/check.cpp"))
            .status()
            .unwrap_or_else(|e| panic!("this test needs a C++17 compiler ({cxx}): {e}"));
        assert!(status.success(), "compiling kernels/host/check.cpp failed");
        out
    })
    .clone()
}

/// The bytes of u64 limbs: the kernels' little-endian u32 words.
fn limb_bytes(limbs: &[u64]) -> Vec<u8> {
    limbs.iter().flat_map(|l| l.to_le_bytes()).collect()
}

fn fr_bytes(x: &Fr) -> Vec<u8> {
    limb_bytes(&DeviceFr::from_ark(x).limbs)
}
fn fq_bytes(x: &Fq) -> Vec<u8> {
    limb_bytes(&DeviceFq::from_ark(x).limbs)
}
fn fq2_bytes(x: &Fq2) -> Vec<u8> {
    [fq_bytes(&x.c0), fq_bytes(&x.c1)].concat()
}
fn g1_bytes(p: &G1Affine) -> Vec<u8> {
    let d = DeviceG1Affine::from_ark(p);
    [limb_bytes(&d.x.limbs), limb_bytes(&d.y.limbs)].concat()
}
fn g2_bytes(p: &G2Affine) -> Vec<u8> {
    let d = DeviceG2Affine::from_ark(p);
    [fq2_bytes(&d.x.to_ark_unchecked()), fq2_bytes(&d.y.to_ark_unchecked())].concat()
}

struct Reader(Vec<u8>, usize);

impl Reader {
    fn limbs<const N: usize>(&mut self) -> [u64; N] {
        let mut out = [0u64; N];
        for l in &mut out {
            *l = u64::from_le_bytes(self.0[self.1..self.1 + 8].try_into().expect("8 bytes"));
            self.1 += 8;
        }
        out
    }
    fn fr(&mut self) -> Fr {
        DeviceFr { limbs: self.limbs() }.to_ark_checked(0).expect("Fr output not reduced")
    }
    fn fq(&mut self) -> Fq {
        DeviceFq { limbs: self.limbs() }.to_ark_checked(0).expect("Fq output not reduced")
    }
    fn fq2(&mut self) -> Fq2 {
        Fq2::new(self.fq(), self.fq())
    }
}

/// The limbs of a lazy operation's output `raw`, which must be below 2p (`modulus` p), reduced below p;
/// pair `i` names the input in a failure.
fn below_2p<const N: usize>(raw: [u64; N], modulus: BigInt<N>, i: usize) -> [u64; N] {
    let mut value = BigInt::<N>(raw);
    let mut twice = modulus;
    twice.add_with_carry(&modulus);
    assert!(value < twice, "pair {i}: a lazy operation's output {raw:x?} is not below 2p");
    if value >= modulus {
        value.sub_with_borrow(&modulus);
    }
    value.0
}

/// An XYZZ point (x = X/ZZ, y = Y/ZZZ, identity when ZZ = 0) in arkworks, its coordinates consistent.
fn xyzz<F: Field>(x: F, y: F, zz: F, zzz: F) -> Option<(F, F)> {
    if zz.is_zero() {
        return None;
    }
    assert_eq!(zz * zz * zz, zzz * zzz, "XYZZ output with ZZ^3 != ZZZ^2");
    Some((x * zz.inverse().unwrap(), y * zzz.inverse().unwrap()))
}

fn edge_frs() -> Vec<Fr> {
    let mut v = vec![Fr::zero(), Fr::one(), Fr::from(2u64), -Fr::one(), -Fr::from(2u64)];
    v.extend((0..256).step_by(17).map(|k| Fr::from(2u64).pow([k as u64])));
    // Montgomery forms whose lowest 32-bit limb is 0 or 2^32 - 1: with them a multiplication's
    // reduction rows meet m = 0 and m = 1, the edges of the kernels' shortcut for Fr's low limbs.
    v.extend(
        [[0, 5, 7, 9], [0xabcd_ef01_0000_0000, 1, 2, 3], [0xffff_ffff, 0, 0, 1], [u64::MAX, 3, 0, 2]]
            .map(|limbs| Fr::new_unchecked(BigInt(limbs))),
    );
    // For mul_fp64's 51-bit digits: limbs with low digits all ones (the largest products) and with
    // low digits zero (reduction steps with m = 0).
    v.extend(
        [[u64::MAX, u64::MAX, u64::MAX, 0xfff], [0, 0, 0, 1], [1, 0, 0, 0], [0, 0, 1 << 39, 0]]
            .map(|limbs| Fr::new_unchecked(BigInt(limbs))),
    );
    // The largest Montgomery limbs, p - 1: the largest accumulators of a squaring's rows.
    v.push(Fr::new_unchecked(largest_limbs(Fr::MODULUS)));
    v
}

/// `m - 1`, the largest limbs an element's Montgomery form can hold.
fn largest_limbs<const N: usize>(mut m: BigInt<N>) -> BigInt<N> {
    m.sub_with_borrow(&BigInt::one());
    m
}

fn edge_fqs() -> Vec<Fq> {
    let mut v = vec![Fq::zero(), Fq::one(), Fq::from(2u64), -Fq::one(), -Fq::from(2u64)];
    v.extend((0..384).step_by(23).map(|k| Fq::from(2u64).pow([k as u64])));
    // Montgomery limbs with low 51-bit digits all ones, or zero (see edge_frs).
    v.extend(
        [[u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX, 0xffff], [0, 0, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0]]
            .map(|limbs| Fq::new_unchecked(BigInt(limbs))),
    );
    v.push(Fq::new_unchecked(largest_limbs(Fq::MODULUS)));
    v
}

/// Montgomery limbs whose two halves (the low and high N/2 32-bit limbs) sum past the half's width:
/// `mul_kara`'s sums then carry, and with two of them as a pair both do (the `cx & cy` term).
fn carrying_frs() -> [Fr; 3] {
    [
        [u64::MAX, u64::MAX, 1, 0],
        [u64::MAX, u64::MAX, u64::MAX, 0x1fff_ffff_ffff_ffff],
        [0, u64::MAX, u64::MAX, 0x7000 << 48],
    ]
    .map(|limbs| Fr::new_unchecked(BigInt(limbs)))
}

fn carrying_fqs() -> [Fq; 3] {
    [
        [u64::MAX, u64::MAX, u64::MAX, 1, 0, 0],
        [u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX, 0x19ff_ffff_ffff_ffff],
        [0, 0, u64::MAX, u64::MAX, u64::MAX, 0x1900 << 48],
    ]
    .map(|limbs| Fq::new_unchecked(BigInt(limbs)))
}

/// Pairs `CARRYING_AT..CARRYING_AT + 9` are every pair of the carrying values.
const CARRYING_AT: usize = 100;

fn carrying_pair<F: Copy>(i: usize, values: &[F; 3]) -> Option<(F, F)> {
    let k = i.checked_sub(CARRYING_AT).filter(|k| *k < 9)?;
    Some((values[k / 3], values[k % 3]))
}

#[test]
fn kernel_arithmetic_on_the_host_matches_arkworks() {
    let mut rng = seeded_rng("host_kernels");
    let n = 600usize;
    let pick = |i: usize, edges: usize| i < edges;
    let frs: Vec<(Fr, Fr)> = (0..n)
        .map(|i| {
            if let Some(pair) = carrying_pair(i, &carrying_frs()) {
                return pair;
            }
            let e = edge_frs();
            let a = if pick(i, e.len()) { e[i] } else { Fr::rand(&mut rng) };
            let b = if i % 7 == 0 { e[rng.gen_range(0..e.len())] } else { Fr::rand(&mut rng) };
            (a, b)
        })
        .collect();
    let fqs: Vec<(Fq, Fq)> = (0..n)
        .map(|i| {
            if let Some(pair) = carrying_pair(i, &carrying_fqs()) {
                return pair;
            }
            let e = edge_fqs();
            let a = if pick(i, e.len()) { e[i] } else { Fq::rand(&mut rng) };
            let b = if i % 7 == 0 { e[rng.gen_range(0..e.len())] } else { Fq::rand(&mut rng) };
            (a, b)
        })
        .collect();
    let fq2s: Vec<(Fq2, Fq2)> = (0..n)
        .map(|i| {
            let e = edge_fqs();
            let a = if i < e.len() { Fq2::new(e[i], e[(i * 5) % e.len()]) } else { Fq2::rand(&mut rng) };
            (a, Fq2::rand(&mut rng))
        })
        .collect();
    // Points: random pairs, plus q = p, q = -p and identities on either side.
    fn pairs<A: AffineRepr>(rng: &mut StdRng, n: usize) -> Vec<(A, A, u32)> {
        (0..n)
            .map(|i| {
                let p: A = A::Group::rand(rng).into_affine();
                let q = match i % 10 {
                    0 => p,
                    1 => (-p.into_group()).into_affine(),
                    2 => A::zero(),
                    _ => A::Group::rand(rng).into_affine(),
                };
                let p = if i % 10 == 3 { A::zero() } else { p };
                (p, q, rng.gen_range(0..1u32 << 20))
            })
            .collect()
    }
    let g1s: Vec<(G1Affine, G1Affine, u32)> = pairs(&mut rng, n);
    let g2s: Vec<(G2Affine, G2Affine, u32)> = pairs(&mut rng, n);

    let mut input = (n as u32).to_le_bytes().to_vec();
    for (a, b) in &frs {
        input.extend(fr_bytes(a).into_iter().chain(fr_bytes(b)));
    }
    for (a, b) in &fqs {
        input.extend(fq_bytes(a).into_iter().chain(fq_bytes(b)));
    }
    for (a, b) in &fq2s {
        input.extend(fq2_bytes(a).into_iter().chain(fq2_bytes(b)));
    }
    for (p, q, k) in &g1s {
        input.extend(g1_bytes(p).into_iter().chain(g1_bytes(q)).chain(k.to_le_bytes()));
    }
    for (p, q, k) in &g2s {
        input.extend(g2_bytes(p).into_iter().chain(g2_bytes(q)).chain(k.to_le_bytes()));
    }
    let cases = batch_cases(&mut rng);
    input.extend((cases.len() as u32).to_le_bytes());
    for case in &cases {
        input.extend(case.input());
    }
    let inverses = inversion_inputs(&mut rng);
    input.extend((inverses.len() as u32).to_le_bytes());
    for a in &inverses {
        input.extend(fq_bytes(a));
    }
    let mut child = Command::new(binary())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("running the host check");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("host check output");
    writer.join().expect("writer thread").expect("writing inputs");
    assert!(out.status.success(), "host check exited with {}", out.status);
    let mut r = Reader(out.stdout, 0);

    for (i, (a, b)) in frs.iter().enumerate() {
        let got = [r.fr(), r.fr(), r.fr(), r.fr(), r.fr(), r.fr(), r.fr(), r.fr()];
        let inv = a.inverse().unwrap_or_default();
        assert_eq!(
            got,
            [*a + b, *a - b, *a * b, a.square(), inv, *a * b, *a * b, *a * b],
            "Fr pair {i}: add, sub, mul, sqr, inverse, mul_fp64, mul_kara, mul_shoup"
        );
        let wq = r.limbs::<4>();
        assert!(is_shoup_quotient(&b.into_bigint().0, &wq, &Fr::MODULUS.0), "Fr pair {i}: Shoup quotient");
        let lazy = [(); 4].map(|_| {
            let limbs = below_2p(r.limbs(), Fr::MODULUS, i);
            DeviceFr { limbs }.to_ark_checked(0).expect("reduced")
        });
        assert_eq!(
            lazy,
            [*a + b, *a - b, *a - b, *a * b],
            "Fr pair {i}: add_lazy, sub_lazy (twice), mul_shoup_lazy"
        );
    }
    for (i, (a, b)) in fqs.iter().enumerate() {
        let got = [r.fq(), r.fq(), r.fq(), r.fq(), r.fq(), r.fq(), r.fq(), r.fq()];
        let inv = a.inverse().unwrap_or_default();
        assert_eq!(
            got,
            [*a + b, *a - b, *a * b, a.square(), inv, *a * b, *a * b, *a * b],
            "Fq pair {i}: add, sub, mul, sqr, inverse, mul_fp64, mul_kara, mul_shoup"
        );
        let wq = r.limbs::<6>();
        assert!(is_shoup_quotient(&b.into_bigint().0, &wq, &Fq::MODULUS.0), "Fq pair {i}: Shoup quotient");
        let lazy = [(); 4].map(|_| {
            let limbs = below_2p(r.limbs(), Fq::MODULUS, i);
            DeviceFq { limbs }.to_ark_checked(0).expect("reduced")
        });
        assert_eq!(
            lazy,
            [*a + b, *a - b, *a - b, *a * b],
            "Fq pair {i}: add_lazy, sub_lazy (twice), mul_shoup_lazy"
        );
    }
    for (i, (a, b)) in fq2s.iter().enumerate() {
        let got = [r.fq2(), r.fq2(), r.fq2(), r.fq2(), r.fq2()];
        let inv = a.inverse().unwrap_or_default();
        assert_eq!(
            got,
            [*a + b, *a - b, *a * b, a.square(), inv],
            "Fq2 pair {i}: add, sub, mul, sqr, inverse"
        );
    }
    for (i, (p, q, k)) in g1s.iter().enumerate() {
        let (p, q) = (p.into_group(), q.into_group());
        let expected: [G1Projective; 5] =
            [p + q, p.double() + q, p.double() + q.double(), p.double().double(), p * Fr::from(*k)];
        for (j, e) in expected.iter().enumerate() {
            let got = xyzz(r.fq(), r.fq(), r.fq(), r.fq());
            let e = e.into_affine();
            assert_eq!(got, e.xy(), "G1 pair {i}, output {j}");
        }
    }
    for (i, (p, q, k)) in g2s.iter().enumerate() {
        let (p, q) = (p.into_group(), q.into_group());
        let expected: [G2Projective; 5] =
            [p + q, p.double() + q, p.double() + q.double(), p.double().double(), p * Fr::from(*k)];
        for (j, e) in expected.iter().enumerate() {
            let got = xyzz(r.fq2(), r.fq2(), r.fq2(), r.fq2());
            let e = e.into_affine();
            assert_eq!(got, e.xy(), "G2 pair {i}, output {j}");
        }
    }
    for (i, case) in cases.iter().enumerate() {
        let expected = case.expected();
        // The round over Fq, then over Fq64 (products as on the FP64 units).
        for field in ["Fq", "Fq64"] {
            for (b, e) in expected.iter().enumerate() {
                let got = xyzz(r.fq(), r.fq(), r.fq(), r.fq());
                assert_eq!(
                    got,
                    e.into_affine().xy(),
                    "batched affine round over {field}, case {i}, bucket {b}: {:?}",
                    case.buckets[b]
                );
            }
        }
    }
    for (i, a) in inverses.iter().enumerate() {
        let inv = a.inverse().unwrap_or_default();
        assert_eq!(r.fq(), inv, "inverse_vartime of input {i}: {a}");
        assert_eq!(r.fq(), inv, "inverse_euclid of input {i}: {a}");
    }
    assert_eq!(r.1, r.0.len(), "host check wrote more than expected");
}

/// Inputs for the variable-time inversion beyond the field pairs': small values and p minus small
/// values, powers of two and their neighbours, each as an element and as raw Montgomery limbs (so the
/// algorithm itself meets them), then random elements.
fn inversion_inputs(rng: &mut StdRng) -> Vec<Fq> {
    let mut special: Vec<BigInt<6>> = Vec::new();
    for k in 1..=300u64 {
        special.push(BigInt::from(k));
        let mut near_p = Fq::MODULUS;
        near_p.0[0] -= k;
        special.push(near_p);
    }
    for k in 0..381u32 {
        let mut x = BigInt::<6>::zero();
        x.0[(k / 64) as usize] = 1 << (k % 64);
        special.push(x);
        let mut below = x;
        below.sub_with_borrow(&BigInt::one());
        special.push(below);
    }
    let mut v: Vec<Fq> =
        special.iter().filter(|x| !x.is_zero()).flat_map(|x| [Fq::from(*x), Fq::new_unchecked(*x)]).collect();
    v.extend((0..8000).map(|_| Fq::rand(rng)));
    v
}

/// A sorted batch for the MSM's batched affine round: `threads` threads, bucket sizes and, per bucket,
/// its entries (point index | sign << 31).
#[derive(Debug)]
struct BatchCase {
    threads: u32,
    points: Vec<G1Affine>,
    buckets: Vec<Vec<u32>>,
}

impl BatchCase {
    fn input(&self) -> Vec<u8> {
        let mut v = Vec::new();
        for w in [self.threads, self.points.len() as u32, self.buckets.len() as u32] {
            v.extend(w.to_le_bytes());
        }
        for p in &self.points {
            v.extend(g1_bytes(p));
        }
        for b in &self.buckets {
            v.extend((b.len() as u32).to_le_bytes());
        }
        for e in self.buckets.iter().flatten() {
            v.extend(e.to_le_bytes());
        }
        v
    }

    fn expected(&self) -> Vec<G1Projective> {
        let point = |e: u32| {
            let p = self.points[(e & 0x7fff_ffff) as usize].into_group();
            if e >> 31 == 1 {
                -p
            } else {
                p
            }
        };
        self.buckets.iter().map(|b| b.iter().map(|&e| point(e)).sum()).collect()
    }
}

/// Cases that meet every path of a chain: buckets empty, short and long (across pieces and chains);
/// the identity among the points; a point added to itself (doubling) or to its negation (the identity,
/// then a fresh start); a sum that returns to a point already added.
fn batch_cases(rng: &mut StdRng) -> Vec<BatchCase> {
    let mut cases = Vec::new();
    for (threads, buckets, most) in [(1u32, 1usize, 3usize), (1, 5, 9), (2, 17, 30), (3, 40, 70), (5, 8, 400)]
    {
        let mut points: Vec<G1Affine> = (0..24).map(|_| G1Projective::rand(rng).into_affine()).collect();
        points.push(G1Affine::zero());
        let n = points.len() as u32;
        let buckets = (0..buckets)
            .map(|_| {
                let len = if rng.gen_range(0..4) == 0 { 0 } else { rng.gen_range(1..=most) };
                let mut b: Vec<u32> = Vec::with_capacity(len);
                while b.len() < len {
                    let e = rng.gen_range(0..n) | (rng.gen_range(0..2u32) << 31);
                    b.push(e);
                    match rng.gen_range(0..8) {
                        0 => b.push(e),             // the same point again
                        1 => b.push(e ^ (1 << 31)), // its negation
                        _ => {}
                    }
                }
                b
            })
            .collect();
        cases.push(BatchCase { threads, points, buckets });
    }
    // As the MSM's round sees the ones' bucket when it adds the ones too: a few short buckets, then one
    // listing most points once each, unsigned (the identity among them), across most pieces.
    let mut points: Vec<G1Affine> = (0..300).map(|_| G1Projective::rand(rng).into_affine()).collect();
    points.push(G1Affine::zero());
    let n = points.len() as u32;
    let mut buckets: Vec<Vec<u32>> = (0..6)
        .map(|_| {
            (0..rng.gen_range(0..5)).map(|_| rng.gen_range(0..n) | (rng.gen_range(0..2u32) << 31)).collect()
        })
        .collect();
    buckets.push((0..n).filter(|&i| i == n - 1 || rng.gen_range(0..10) != 0).collect());
    cases.push(BatchCase { threads: 3, points, buckets });
    cases
}
