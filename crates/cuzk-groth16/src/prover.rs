//! The witness map and proof assembly, written once over [`Backend`].

use std::time::{Duration, Instant};

use ark_bls12_381::{Bls12_381, Fr, G1Projective, G2Projective};
use ark_ec::CurveGroup;
use ark_ff::{FftField, Field, Zero};
use ark_groth16::{Groth16, Proof};
use cuzk_synth::Synthesized;

use crate::{Backend, BackendError, Deferred, DeviceTimer, MsmScalars, PolyBackend, PreparedKey, ProveError};

/// How to prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProveOptions {
    /// Verify each proof against the key's verifying key before returning it (on by default).
    pub verify: bool,
}

impl Default for ProveOptions {
    fn default() -> Self {
        Self { verify: true }
    }
}

/// Wall-clock time of each prover stage. MSMs may overlap when the backend runs them concurrently, so
/// the stages can add up to more than `total`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageTimes {
    /// Moving `a`, `b`, `c` and (on backends that keep scalars) `z` into backend memory ([`stage`]).
    pub upload: Duration,
    /// The witness map: seven NTTs and the quotient step.
    pub witness_map: Duration,
    /// MSM of `a_query` (G1).
    pub msm_a: Duration,
    /// MSM of `b_g1_query` (G1; skipped when `r = 0`).
    pub msm_b_g1: Duration,
    /// MSM of `b_g2_query` (G2).
    pub msm_b_g2: Duration,
    /// MSM of `l_query` (G1).
    pub msm_l: Duration,
    /// MSM of `h_query` (G1).
    pub msm_h: Duration,
    /// Blinding and conversion to affine.
    pub assemble: Duration,
    /// The self-check.
    pub verify: Duration,
    /// Everything, end to end.
    pub total: Duration,
    /// The same stages on the device's clock, from backends that time their device work
    /// ([`PolyBackend::device_timer`]); `None` on the CPU. When several proofs share a device at once,
    /// a stage's span also covers the others' work queued in between.
    pub device: Option<DeviceStageTimes>,
}

/// Device time of each GPU stage of one proof, from events around the stage's work.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceStageTimes {
    /// The seven NTTs and the quotient step (from when `a`, `b` and `c` have landed on the device).
    pub witness_map: Duration,
    /// MSM of `a_query`.
    pub msm_a: Duration,
    /// MSM of `b_g1_query` (zero when skipped).
    pub msm_b_g1: Duration,
    /// MSM of `b_g2_query`.
    pub msm_b_g2: Duration,
    /// MSM of `l_query`.
    pub msm_l: Duration,
    /// MSM of `h_query`.
    pub msm_h: Duration,
    /// Uploading `a`, `b`, `c` and `z`, on the device's clock from when staging began until the last
    /// copy landed (so the host's conversion into staging buffers counts too; in a pipeline it
    /// overlaps the previous partition's kernels). Zero when the backend does not time uploads.
    pub upload: Duration,
    /// The kinds of work inside the stages above, as `(stage, step, device time)`: for example
    /// `("witness_map", "ntt passes", ..)` or `("msm_h", "bucket sums", ..)`.
    pub steps: Vec<(&'static str, &'static str, Duration)>,
}

impl DeviceStageTimes {
    /// The stages by name, in the order they run: `witness_map`, `msm_a`, `msm_b_g1`, `msm_b_g2`,
    /// `msm_l`, `msm_h`.
    pub fn named(&self) -> [(&'static str, Duration); 6] {
        [
            ("witness_map", self.witness_map),
            ("msm_a", self.msm_a),
            ("msm_b_g1", self.msm_b_g1),
            ("msm_b_g2", self.msm_b_g2),
            ("msm_l", self.msm_l),
            ("msm_h", self.msm_h),
        ]
    }
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed())
}

/// A stage's device timer, started before and stopped after `f`.
type Timer = Option<Box<dyn DeviceTimer>>;

fn device_timed<B: PolyBackend, T>(
    backend: &B,
    f: impl FnOnce() -> T,
) -> Result<(T, Duration, Timer), BackendError> {
    let mut timer = backend.device_timer()?;
    let (v, host) = timed(f);
    if let Some(t) = timer.as_mut() {
        t.stop()?;
    }
    Ok((v, host, timer))
}

/// Collects a deferred MSM issued by [`device_timed`], adding the wait to its host time.
fn finish<T>(
    (issued, host, timer): (Result<Deferred<'_, T>, BackendError>, Duration, Timer),
) -> Result<(Result<T, BackendError>, Duration, Timer), BackendError> {
    let (value, wait) = timed(|| issued.and_then(Deferred::finish));
    Ok((value, host + wait, timer))
}

fn device_elapsed(timer: &Timer) -> Result<Duration, BackendError> {
    timer.as_ref().map_or(Ok(Duration::ZERO), |t| t.elapsed())
}

/// Runs `a` and `b`, concurrently when the backend allows it.
fn join<A: Send, B: Send>(
    parallel: bool,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    if parallel {
        rayon::join(a, b)
    } else {
        (a(), b())
    }
}

/// Computes the coefficients of `h = (a·b − c) / Z` on the backend, exactly as ark-groth16's
/// `LibsnarkReduction::witness_map_from_matrices` does in the field. The result has `domain_size`
/// coefficients, the last of which is zero.
pub fn witness_map<B: PolyBackend>(backend: &B, syn: &Synthesized) -> Result<B::Poly, BackendError> {
    witness_map_from_evaluations(backend, &syn.a, &syn.b, &syn.c, syn.counts().domain_size())
}

/// [`witness_map`] from the evaluation vectors themselves (each at most `n` long, zero-padded to `n`).
pub fn witness_map_from_evaluations<B: PolyBackend>(
    backend: &B,
    a: &[Fr],
    b: &[Fr],
    c: &[Fr],
    n: usize,
) -> Result<B::Poly, BackendError> {
    let [a, b, c] = polys_abc(backend, a, b, c, n)?;
    witness_map_polys(backend, a, b, c, n)
}

/// `a`, `b`, `c` in backend memory, each zero-padded to `n`.
fn polys_abc<B: PolyBackend>(
    backend: &B,
    a: &[Fr],
    b: &[Fr],
    c: &[Fr],
    n: usize,
) -> Result<[B::Poly; 3], BackendError> {
    let polys = backend.polys_from_host(&[a, b, c], n)?;
    let got = polys.len();
    <[B::Poly; 3]>::try_from(polys).map_err(|_| BackendError::LengthMismatch {
        op: "polys_from_host",
        expected: 3,
        got,
    })
}

/// The witness map on `a`, `b`, `c` already in backend memory (`n` elements each); `h` comes back in
/// `a`'s buffer.
fn witness_map_polys<B: PolyBackend>(
    backend: &B,
    mut a: B::Poly,
    mut b: B::Poly,
    mut c: B::Poly,
    n: usize,
) -> Result<B::Poly, BackendError> {
    // Z(x) = x^n − 1 is constant on the coset g·H: Z(g·ω^i) = g^n − 1.
    let z = Fr::GENERATOR.pow([n as u64]) - Fr::from(1u64);
    let z_inv = z.inverse().ok_or(BackendError::UnsupportedSize {
        op: "witness_map",
        size: n,
        reason: "the vanishing polynomial is zero on the coset",
    })?;
    backend.witness_map_polys(&mut a, &mut b, &mut c, z_inv)?;
    Ok(a)
}

/// A partition's data in backend memory, from [`stage`], for [`prove_staged`]: `a`, `b`, `c` padded to
/// the domain size and, on backends that keep MSM scalars, the assignment `z`.
pub struct Staged<B: PolyBackend> {
    abc: [B::Poly; 3],
    z: Option<B::Poly>,
    n: usize,
    upload: Duration,
    /// The uploads on the device's clock, when the backend times them.
    upload_timer: Timer,
}

impl<B: PolyBackend> std::fmt::Debug for Staged<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staged").field("n", &self.n).field("z", &self.z.is_some()).finish()
    }
}

/// Moves a synthesized partition's `a`, `b`, `c` (and `z` where the backend keeps scalars) into backend
/// memory: the upload half of [`prove`], which a pipeline runs while the previous partition's kernels
/// still run. Fails when the partition does not fit the key.
pub fn stage<B: Backend>(
    backend: &B,
    key: &PreparedKey<B>,
    syn: &Synthesized,
) -> Result<Staged<B>, ProveError> {
    key.check_fits(&syn.counts())?;
    let start = Instant::now();
    let n = syn.counts().domain_size();
    let mut upload_timer = backend.upload_timer()?;
    let abc = polys_abc(backend, &syn.a, &syn.b, &syn.c, n)?;
    // z once in backend memory when the backend wants it there (A, B and L all read it).
    let z = backend.scalars_from_host(&syn.assignment)?;
    if let Some(t) = upload_timer.as_mut() {
        t.stop()?;
    }
    Ok(Staged { abc, z, n, upload: start.elapsed(), upload_timer })
}

/// Proves one synthesized partition with blinding scalars `r` and `s`: [`stage`], then
/// [`prove_staged`].
///
/// The result equals `ark_groth16::Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s)`
/// byte for byte. With `options.verify` the proof is checked against the key's verifying key first.
pub fn prove<B: Backend>(
    backend: &B,
    key: &PreparedKey<B>,
    syn: &Synthesized,
    r: Fr,
    s: Fr,
    options: &ProveOptions,
) -> Result<(Proof<Bls12_381>, StageTimes), ProveError> {
    let start = Instant::now();
    let staged = stage(backend, key, syn)?;
    let (proof, mut times) = prove_staged(backend, key, syn, staged, r, s, options)?;
    times.total = start.elapsed();
    Ok((proof, times))
}

/// The kernel half of [`prove`]: the witness map, the MSMs, assembly and the self-check of a partition
/// that [`stage`] moved into backend memory. `syn` must be the partition `staged` was made from.
pub fn prove_staged<B: Backend>(
    backend: &B,
    key: &PreparedKey<B>,
    syn: &Synthesized,
    staged: Staged<B>,
    r: Fr,
    s: Fr,
    options: &ProveOptions,
) -> Result<(Proof<Bls12_381>, StageTimes), ProveError> {
    prove_staged_queued(backend, key, syn, staged, r, s, options, || {})
}

/// [`prove_staged`], calling `queued` as soon as the witness map and all five MSMs are issued to the
/// backend, before it waits for any of their results: on a backend that queues its work (a GPU),
/// everything after that is host work (collecting the MSMs, assembly, reading the device timers, the
/// self-check), so a pipeline can let the next partition queue its kernels then. Not called when the
/// proof fails before that point.
#[allow(clippy::too_many_arguments)]
pub fn prove_staged_queued<B: Backend>(
    backend: &B,
    key: &PreparedKey<B>,
    syn: &Synthesized,
    staged: Staged<B>,
    r: Fr,
    s: Fr,
    options: &ProveOptions,
    queued: impl FnOnce(),
) -> Result<(Proof<Bls12_381>, StageTimes), ProveError> {
    let start = Instant::now();
    let mut times = StageTimes { upload: staged.upload, ..StageTimes::default() };
    key.check_fits(&syn.counts())?;
    if staged.n != syn.counts().domain_size() {
        return Err(ProveError::Backend(BackendError::LengthMismatch {
            op: "prove_staged",
            expected: syn.counts().domain_size(),
            got: staged.n,
        }));
    }

    let Staged { abc: [a, b, c], z: z_copy, n, upload_timer, .. } = staged;
    let landed: Vec<&B::Poly> = [&a, &b, &c].into_iter().chain(z_copy.as_ref()).collect();
    backend.await_uploads(&landed)?;
    drop(landed);
    let (h, t, wm_timer) = device_timed(backend, || witness_map_polys(backend, a, b, c, n))?;
    let h = h?;
    times.witness_map = t;

    let par = backend.concurrent_ops();
    let z = &syn.assignment[..];
    let witness = syn.witness();
    let h_len = key.domain_size() - 1;
    let (z_scalars, w_scalars) = match &z_copy {
        Some(poly) => (
            MsmScalars::Poly { poly, offset: 0, len: z.len() },
            MsmScalars::Poly { poly, offset: z.len() - witness.len(), len: witness.len() },
        ),
        None => (MsmScalars::Host(z), MsmScalars::Host(witness)),
    };
    // Each MSM is issued (timed on the device) and finished afterwards, so a device backend queues
    // the next MSMs' kernels before the host combines the previous ones' window sums.
    let msm = |bases, scalars| device_timed(backend, || backend.msm_g1_deferred(bases, scalars));
    let ((h_acc, l_acc), (a_acc, (b1_acc, b2_acc))) = join(
        par,
        || {
            join(
                par,
                || msm(&key.h, MsmScalars::Poly { poly: &h, offset: 0, len: h_len }),
                || msm(&key.l, w_scalars),
            )
        },
        || {
            join(
                par,
                || msm(&key.a, z_scalars),
                || {
                    join(
                        par,
                        || {
                            // B in G1 only enters C through r·B1.
                            if r.is_zero() {
                                Ok((Ok(Deferred::Ready(G1Projective::zero())), Duration::ZERO, None))
                            } else {
                                msm(&key.b_g1, z_scalars)
                            }
                        },
                        || device_timed(backend, || backend.msm_g2_deferred(&key.b_g2, z_scalars)),
                    )
                },
            )
        },
    );
    let (h_acc, l_acc, a_acc, b1_acc, b2_acc) = (h_acc?, l_acc?, a_acc?, b1_acc?, b2_acc?);
    queued();
    let (h_acc, l_acc, a_acc, b1_acc, b2_acc) =
        (finish(h_acc)?, finish(l_acc)?, finish(a_acc)?, finish(b1_acc)?, finish(b2_acc)?);
    drop(h);
    drop(z_copy);
    (times.msm_h, times.msm_l, times.msm_a, times.msm_b_g1, times.msm_b_g2) =
        (h_acc.1, l_acc.1, a_acc.1, b1_acc.1, b2_acc.1);
    if wm_timer.is_some() {
        let stages = [
            ("witness_map", &wm_timer),
            ("msm_a", &a_acc.2),
            ("msm_b_g1", &b1_acc.2),
            ("msm_b_g2", &b2_acc.2),
            ("msm_l", &l_acc.2),
            ("msm_h", &h_acc.2),
        ];
        let mut steps = Vec::new();
        for (stage, timer) in stages {
            if let Some(t) = timer {
                steps.extend(t.steps()?.into_iter().map(|(step, d)| (stage, step, d)));
            }
        }
        times.device = Some(DeviceStageTimes {
            witness_map: device_elapsed(&wm_timer)?,
            msm_h: device_elapsed(&h_acc.2)?,
            msm_l: device_elapsed(&l_acc.2)?,
            msm_a: device_elapsed(&a_acc.2)?,
            msm_b_g1: device_elapsed(&b1_acc.2)?,
            msm_b_g2: device_elapsed(&b2_acc.2)?,
            upload: device_elapsed(&upload_timer)?,
            steps,
        });
    }
    let (h_acc, l_acc, a_acc, b1_acc, b2_acc) = (h_acc.0?, l_acc.0?, a_acc.0?, b1_acc.0?, b2_acc.0?);

    let acc = Accumulators { a: a_acc, b_g1: b1_acc, b_g2: b2_acc, l: l_acc, h: h_acc };
    let (proof, t) = timed(|| assemble(key, r, s, acc));
    times.assemble = t;

    if options.verify {
        let (ok, t) = timed(|| verify(key, &proof, syn.public_inputs()));
        times.verify = t;
        ok?;
    }
    times.total = start.elapsed() + times.upload;
    Ok((proof, times))
}

/// The MSM results of one proof.
struct Accumulators {
    a: G1Projective,
    b_g1: G1Projective,
    b_g2: G2Projective,
    l: G1Projective,
    h: G1Projective,
}

/// Blinding and assembly (see ark-groth16's `create_proof_with_assignment`):
/// `A = α + Σz·a + r·δ`, `B = β + Σz·b + s·δ` (in G1 and G2), `C = s·A + r·B1 − r·s·δ + Σw·l + Σh·h`.
fn assemble<B: Backend>(key: &PreparedKey<B>, r: Fr, s: Fr, acc: Accumulators) -> Proof<Bls12_381> {
    let delta_g1 = G1Projective::from(key.delta_g1);
    let g_a = acc.a + key.vk.alpha_g1 + delta_g1 * r;
    let g2_b = acc.b_g2 + key.vk.beta_g2 + G2Projective::from(key.vk.delta_g2) * s;
    let g1_b = if r.is_zero() { G1Projective::zero() } else { acc.b_g1 + key.beta_g1 + delta_g1 * s };
    let g_c = g_a * s + g1_b * r - delta_g1 * (r * s) + acc.l + acc.h;
    Proof { a: g_a.into_affine(), b: g2_b.into_affine(), c: g_c.into_affine() }
}

/// Verifies a proof against the key's prepared verifying key.
pub fn verify<B: Backend>(
    key: &PreparedKey<B>,
    proof: &Proof<Bls12_381>,
    public_inputs: &[Fr],
) -> Result<(), ProveError> {
    match Groth16::<Bls12_381>::verify_proof(&key.pvk, proof, public_inputs) {
        Ok(true) => Ok(()),
        Ok(false) => Err(ProveError::SelfCheckFailed),
        Err(e) => Err(ProveError::Verification(e)),
    }
}
