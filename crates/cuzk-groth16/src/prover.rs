//! The witness map and proof assembly, written once over the backend traits.
//!
//! [`prove`] is [`stage`] (a partition's `a`, `b`, `c` and, where the backend keeps scalars, `z` into
//! backend memory, timed on the copy stream's clock when the backend can) then [`prove_staged`] (the
//! witness map, the five MSMs issued back to back and collected afterwards, blinding, assembly and the
//! self-check), so a pipeline can run the halves under different locks. Each device stage runs under a
//! device timer of its own, which the prover hands to the backend's timed operations.

use std::time::{Duration, Instant};

use ark_bls12_381::{Bls12_381, Fr, G1Projective, G2Projective};
use ark_ec::CurveGroup;
use ark_ff::{FftField, Field, Zero};
use ark_groth16::{Groth16, Proof};
use cuzk_field::{Curve, Projective, G1, G2};
use cuzk_synth::{Counts, Synthesized};

use crate::{
    BackendError, Deferred, DeviceBackend, DeviceTimer, Evaluation, MsmScalars, PerStage, PolyBackend,
    PreparedKey, ProveError, Stage, StageTimes, Timing,
};

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

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed())
}

/// `f`'s result and when it ran on the host.
fn spanned<T>(f: impl FnOnce() -> T) -> (T, Instant, Instant) {
    let t = Instant::now();
    let v = f();
    (v, t, Instant::now())
}

/// A stage's device timer, started before and stopped after `f`.
type Timer = Option<Box<dyn DeviceTimer>>;

fn device_timed<B: DeviceBackend, T>(
    backend: &B,
    f: impl FnOnce(Timing<'_>) -> T,
) -> Result<(T, Duration, Timer), BackendError> {
    let mut timer = backend.device_timer()?;
    let (v, host) = timed(|| f(timer.as_deref_mut()));
    if let Some(t) = timer.as_mut() {
        t.stop()?;
    }
    Ok((v, host, timer))
}

/// An MSM issued under its own device timer: the deferred result, the host time of issuing it, the
/// timer.
type Issued<'b, C> = (Result<Deferred<'b, Projective<C>>, BackendError>, Duration, Timer);

/// Issues `Σ scalars[i]·bases[i]` over `C` under a device timer of its own.
fn issue<'b, B: DeviceBackend, C: Curve>(
    backend: &'b B,
    bases: &B::Bases<C>,
    scalars: MsmScalars<'_, B::Poly>,
) -> Result<Issued<'b, C>, BackendError> {
    device_timed(backend, |timer| backend.msm_deferred::<C>(bases, scalars, timer))
}

/// Collects a deferred MSM issued by [`issue`], adding the wait to its host time.
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
    let [a, b, c] = [a, b, c].map(|v| backend.poly_from_host(v, n));
    let (mut a, mut b, mut c) = (a?, b?, c?);
    backend.witness_map_polys(&mut a, &mut b, &mut c, z_inv(n)?)?;
    Ok(a)
}

/// `a`, `b`, `c` in backend memory, each zero-padded to `n`, uploaded together.
fn polys_abc<B: DeviceBackend>(
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

/// `1 / Z` on the coset `g·H` of the domain of size `n`: `Z(x) = x^n − 1` is constant there,
/// `Z(g·ω^i) = g^n − 1`.
fn z_inv(n: usize) -> Result<Fr, BackendError> {
    let z = Fr::GENERATOR.pow([n as u64]) - Fr::from(1u64);
    z.inverse().ok_or(BackendError::UnsupportedSize {
        op: "witness_map",
        size: n,
        reason: "the vanishing polynomial is zero on the coset",
    })
}

/// A partition's data in backend memory, from [`stage`] (or [`stage_evaluated`]), for
/// [`prove_staged`]: `a`, `b`, `c` padded to the domain size (or the buffers the backend's evaluation
/// fills) and, on backends that keep MSM scalars, the assignment `z`.
pub struct Staged<B: DeviceBackend> {
    abc: [B::Poly; 3],
    z: Option<B::Poly>,
    n: usize,
    /// When staging began and ended on the host.
    upload: (Instant, Instant),
    /// The uploads on the device's clock, when the backend times them.
    upload_timer: Timer,
    /// The backend's own evaluation of `a`, `b`, `c` from `z`, queued before the witness map.
    evaluation: Option<Box<dyn Evaluation<B>>>,
}

impl<B: DeviceBackend> std::fmt::Debug for Staged<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staged").field("n", &self.n).field("z", &self.z.is_some()).finish()
    }
}

/// Moves a synthesized partition's `a`, `b`, `c` (and `z` where the backend keeps scalars) into backend
/// memory: the upload half of [`prove`], which a pipeline runs while the previous partition's kernels
/// still run. Fails when the partition does not fit the key.
pub fn stage<B: DeviceBackend>(
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
    Ok(Staged { abc, z, n, upload: (start, Instant::now()), upload_timer, evaluation: None })
}

/// What a backend's staging of a partition it evaluates itself gives: the three domain-size buffers
/// its evaluation fills, `z`'s buffer, and the evaluation.
pub type EvaluatedUpload<B> =
    ([<B as PolyBackend>::Poly; 3], <B as PolyBackend>::Poly, Box<dyn Evaluation<B>>);

/// Stages a partition whose `a`, `b`, `c` the backend computes from `z` itself ([`Evaluation`]):
/// `upload` moves what the evaluation starts from (a compact `z`, say) into backend memory. Timed like
/// [`stage`]; fails when a partition of `counts` does not fit the key or the buffers have other sizes.
pub fn stage_evaluated<B: DeviceBackend>(
    backend: &B,
    key: &PreparedKey<B>,
    counts: &Counts,
    upload: impl FnOnce() -> Result<EvaluatedUpload<B>, BackendError>,
) -> Result<Staged<B>, ProveError> {
    key.check_fits(counts)?;
    let start = Instant::now();
    let n = counts.domain_size();
    let mut upload_timer = backend.upload_timer()?;
    let (abc, z, evaluation) = upload()?;
    for p in &abc {
        BackendError::expect_len("stage_evaluated", n, backend.poly_len(p))?;
    }
    BackendError::expect_len("stage_evaluated", counts.variables(), backend.poly_len(&z))?;
    if let Some(t) = upload_timer.as_mut() {
        t.stop()?;
    }
    let upload = (start, Instant::now());
    Ok(Staged { abc, z: Some(z), n, upload, upload_timer, evaluation: Some(evaluation) })
}

/// Proves one synthesized partition with blinding scalars `r` and `s`: [`stage`], then
/// [`prove_staged`].
///
/// The result equals `ark_groth16::Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s)`
/// byte for byte. With `options.verify` the proof is checked against the key's verifying key first.
pub fn prove<B: DeviceBackend>(
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
    finish_times(&mut times, start.elapsed());
    Ok((proof, times))
}

/// The kernel half of [`prove`]: the witness map, the MSMs, assembly and the self-check of a partition
/// that [`stage`] moved into backend memory. `syn` must be the partition `staged` was made from.
pub fn prove_staged<B: DeviceBackend>(
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
pub fn prove_staged_queued<B: DeviceBackend>(
    backend: &B,
    key: &PreparedKey<B>,
    syn: &Synthesized,
    staged: Staged<B>,
    r: Fr,
    s: Fr,
    options: &ProveOptions,
    queued: impl FnOnce(),
) -> Result<(Proof<Bls12_381>, StageTimes), ProveError> {
    let part =
        Assignment { counts: syn.counts(), z: Some(&syn.assignment), public_inputs: syn.public_inputs() };
    prove_assignment(backend, key, part, staged, r, s, options, queued)
}

/// [`prove_staged_queued`] for a partition staged with its `z` in backend memory
/// ([`stage_evaluated`]), known on the host only by its counts and public inputs.
#[allow(clippy::too_many_arguments)]
pub fn prove_witness_queued<B: DeviceBackend>(
    backend: &B,
    key: &PreparedKey<B>,
    counts: Counts,
    public_inputs: &[Fr],
    staged: Staged<B>,
    r: Fr,
    s: Fr,
    options: &ProveOptions,
    queued: impl FnOnce(),
) -> Result<(Proof<Bls12_381>, StageTimes), ProveError> {
    if public_inputs.len() + 1 != counts.instance {
        return Err(ProveError::KeyMismatch {
            what: "public inputs (instance variables less the constant 1)",
            key: counts.instance.saturating_sub(1),
            circuit: public_inputs.len(),
        });
    }
    prove_assignment(
        backend,
        key,
        Assignment { counts, z: None, public_inputs },
        staged,
        r,
        s,
        options,
        queued,
    )
}

/// What the kernel half knows of a partition on the host.
struct Assignment<'a> {
    counts: Counts,
    /// `z`, when the host has it (the MSMs read it when the backend keeps no copy).
    z: Option<&'a [Fr]>,
    public_inputs: &'a [Fr],
}

#[allow(clippy::too_many_arguments)]
fn prove_assignment<B: DeviceBackend>(
    backend: &B,
    key: &PreparedKey<B>,
    part: Assignment<'_>,
    staged: Staged<B>,
    r: Fr,
    s: Fr,
    options: &ProveOptions,
    queued: impl FnOnce(),
) -> Result<(Proof<Bls12_381>, StageTimes), ProveError> {
    let start = Instant::now();
    let mut times = StageTimes::default();
    let (upload_start, upload_end) = staged.upload;
    times.host[Stage::Upload] = upload_end - upload_start;
    let mut host_spans = vec![(Stage::Upload, upload_start, upload_end)];
    let counts = part.counts;
    key.check_fits(&counts)?;
    if staged.n != counts.domain_size() {
        return Err(ProveError::Backend(BackendError::LengthMismatch {
            op: "prove_staged",
            expected: counts.domain_size(),
            got: staged.n,
        }));
    }

    let Staged { abc, z: mut z_copy, n, upload_timer, evaluation, .. } = staged;
    let landed: Vec<&B::Poly> = abc.iter().chain(z_copy.as_ref()).collect();
    backend.await_uploads(&landed)?;
    drop(landed);
    let z_inv = z_inv(n)?;
    let wm_start = Instant::now();
    let mut abc = abc;
    let (mapped, t, wm_timer) = device_timed(backend, |mut timer| {
        // The backend's own evaluation of a, b, c first, under the witness map's timer.
        let check = match (evaluation, z_copy.as_mut()) {
            (Some(e), Some(z)) => Some(e.queue(backend, z, &mut abc, timer.as_deref_mut())?),
            (Some(_), None) => {
                return Err(BackendError::LengthMismatch {
                    op: "evaluation",
                    expected: counts.variables(),
                    got: 0,
                })
            }
            (None, _) => None,
        };
        let [a, b, c] = &mut abc;
        backend.witness_map_timed(a, b, c, z_inv, timer)?;
        Ok(check)
    })?;
    let check = mapped?;
    let [a, b, c] = abc;
    let msm_start = Instant::now();
    host_spans.push((Stage::WitnessMap, wm_start, msm_start));
    drop((b, c));
    let h = a;
    times.host[Stage::WitnessMap] = t;

    let par = backend.concurrent_ops();
    let (z_len, w_len) = (counts.variables(), counts.witness);
    let h_len = key.domain_size() - 1;
    let (z_scalars, w_scalars) = match (&z_copy, part.z) {
        (Some(poly), _) => (
            MsmScalars::Poly { poly, offset: 0, len: z_len },
            MsmScalars::Poly { poly, offset: z_len - w_len, len: w_len },
        ),
        (None, Some(z)) => {
            BackendError::expect_len("msm scalars", z_len, z.len())?;
            (MsmScalars::Host(z), MsmScalars::Host(&z[z_len - w_len..]))
        }
        (None, None) => {
            return Err(ProveError::Backend(BackendError::LengthMismatch {
                op: "msm scalars",
                expected: z_len,
                got: 0,
            }))
        }
    };
    // Each MSM is issued (timed on the device) and finished afterwards, so a device backend queues
    // the next MSMs' kernels before the host combines the previous ones' window sums. Those over the
    // witness go first (A, B, L; in this order when issued one after the other): their scalars are
    // ready before the witness map has run, so a device backend can sort them while the witness map
    // runs, and sort H's (the quotient's coefficients, known only after it) while it sums theirs.
    let ((a_acc, (b1_acc, b2_acc)), (l_acc, h_acc)) = join(
        par,
        || {
            join(
                par,
                || issue::<B, G1>(backend, &key.a, z_scalars),
                || {
                    join(
                        par,
                        || {
                            // B in G1 only enters C through r·B1.
                            if r.is_zero() {
                                Ok((Ok(Deferred::Ready(G1Projective::zero())), Duration::ZERO, None))
                            } else {
                                issue::<B, G1>(backend, &key.b_g1, z_scalars)
                            }
                        },
                        || issue::<B, G2>(backend, &key.b_g2, z_scalars),
                    )
                },
            )
        },
        || {
            join(
                par,
                || issue::<B, G1>(backend, &key.l, w_scalars),
                || issue::<B, G1>(backend, &key.h, MsmScalars::Poly { poly: &h, offset: 0, len: h_len }),
            )
        },
    );
    let (h_acc, l_acc, a_acc, b1_acc, b2_acc) = (h_acc?, l_acc?, a_acc?, b1_acc?, b2_acc?);
    queued();
    // Collected in the order issued: the host combines each MSM's window sums while later ones run.
    let (a_acc, b1_acc, b2_acc, l_acc, h_acc) =
        (finish(a_acc)?, finish(b1_acc)?, finish(b2_acc)?, finish(l_acc)?, finish(h_acc)?);
    host_spans.push((Stage::Msms, msm_start, Instant::now()));
    drop(h);
    drop(z_copy);
    let timers = [
        (Stage::WitnessMap, &wm_timer),
        (Stage::MsmA, &a_acc.2),
        (Stage::MsmBG1, &b1_acc.2),
        (Stage::MsmBG2, &b2_acc.2),
        (Stage::MsmL, &l_acc.2),
        (Stage::MsmH, &h_acc.2),
        (Stage::Upload, &upload_timer),
    ];
    for (stage, host) in [
        (Stage::MsmA, a_acc.1),
        (Stage::MsmBG1, b1_acc.1),
        (Stage::MsmBG2, b2_acc.1),
        (Stage::MsmL, l_acc.1),
        (Stage::MsmH, h_acc.1),
    ] {
        times.host[stage] = host;
    }
    let (mut placed, mut unplaced) = (Vec::new(), false);
    if wm_timer.is_some() {
        let mut device = PerStage::default();
        for (stage, timer) in timers {
            device[stage] = device_elapsed(timer)?;
            if let Some(t) = timer {
                if stage != Stage::Upload {
                    times.steps.extend(t.steps()?.into_iter().map(|(step, d)| (stage, step, d)));
                }
                match t.placed()? {
                    Some((from, to)) => placed.push((stage, from, to)),
                    None => unplaced = true,
                }
            }
        }
        times.device = Some(device);
    }
    let (h_acc, l_acc, a_acc, b1_acc, b2_acc) = (h_acc.0?, l_acc.0?, a_acc.0?, b1_acc.0?, b2_acc.0?);
    // A witness the backend's evaluation refused gives no proof.
    if let Some(index) = check.map(Deferred::finish).transpose()?.flatten() {
        return Err(ProveError::Unsatisfied { index, num_constraints: counts.constraints });
    }

    let acc = Accumulators { a: a_acc, b_g1: b1_acc, b_g2: b2_acc, l: l_acc, h: h_acc };
    let (proof, from, to) = spanned(|| assemble(key, r, s, acc));
    times.host[Stage::Assembly] = to - from;
    host_spans.push((Stage::Assembly, from, to));

    if options.verify {
        let (ok, from, to) = spanned(|| verify(key, &proof, part.public_inputs));
        times.host[Stage::SelfCheck] = to - from;
        host_spans.push((Stage::SelfCheck, from, to));
        ok?;
    }
    // The device's own placement when the backend gives it for every timed stage, else the host's.
    placed.sort_by_key(|&(_, from, _)| from);
    times.spans_on_device = !placed.is_empty() && !unplaced;
    times.spans = if times.spans_on_device { placed } else { host_spans };
    let total = start.elapsed() + times.host[Stage::Upload];
    finish_times(&mut times, total);
    Ok((proof, times))
}

/// Sets the whole's time, and the MSM phase from it.
fn finish_times(times: &mut StageTimes, total: Duration) {
    times.total = total;
    times.host[Stage::Msms] = times.msm_phase();
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
fn assemble<B: DeviceBackend>(key: &PreparedKey<B>, r: Fr, s: Fr, acc: Accumulators) -> Proof<Bls12_381> {
    let delta_g1 = G1Projective::from(key.delta_g1);
    let g_a = acc.a + key.vk.alpha_g1 + delta_g1 * r;
    let g2_b = acc.b_g2 + key.vk.beta_g2 + G2Projective::from(key.vk.delta_g2) * s;
    let g1_b = if r.is_zero() { G1Projective::zero() } else { acc.b_g1 + key.beta_g1 + delta_g1 * s };
    let g_c = g_a * s + g1_b * r - delta_g1 * (r * s) + acc.l + acc.h;
    Proof { a: g_a.into_affine(), b: g2_b.into_affine(), c: g_c.into_affine() }
}

/// Verifies a proof against the key's prepared verifying key.
pub fn verify<B: crate::Backend>(
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
