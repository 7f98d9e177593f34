//! Proving keys for timing only.
//!
//! A real key for a 2^24-row circuit takes ark-groth16 the better part of an hour to generate: tens of
//! millions of fixed-base scalar multiplications. A timing key has exactly the shape of the real one
//! (the same query lengths, and points at infinity exactly where the real key has them, which is what
//! decides how much work an MSM skips), but its points are consecutive terms of a random arithmetic
//! progression, one addition each. Proving with it costs what proving with the real key costs, since no
//! step of a Groth16 prover depends on the values of the key's points.
//!
//! **Proofs made with a timing key do not verify.** They are still a deterministic function of the
//! key, the witness and the blinding scalars, so the engine's proofs must equal ark-groth16's for the
//! same key byte for byte. Because the points lie on lines, that proof also has a closed form that
//! costs a CPU witness map and a few scalar multiplications instead of five MSMs: over a line
//! `P_i = start + i·step`, `Σ k_i·P_i = (Σ k_i)·start + (Σ i·k_i)·step` (the sums over the points kept,
//! not at infinity). [`ClosedForm::expected_proof`] computes it, so benches check every proof they make
//! with a timing key, at sizes where running ark-groth16's prover takes minutes per partition.
//!
//! The closed form shares nothing with the engine's path: its witness is ark-groth16's own synthesis
//! of the circuit and its `h` ark-groth16's own witness map (see the `ark` module), so a bug in the
//! engine's synthesis, witness-only synthesis or witness map cannot hide in the check.

use ark_bls12_381::{g1, g2, Bls12_381, Fr, G1Projective, G2Projective};
use ark_ec::short_weierstrass::{Affine, Projective, SWCurveConfig};
use ark_ec::AffineRepr;
use ark_ec::CurveGroup;
use ark_ff::{Field, One};
use ark_groth16::{Proof, ProvingKey, VerifyingKey};
use ark_relations::gr1cs::ConstraintSynthesizer;
use ark_std::{rand::Rng, UniformRand, Zero};
use cuzk::synth::R1csShape;
use rayon::prelude::*;

/// Points computed per task (each task starts with one scalar multiplication and one inversion).
const CHUNK: usize = 1 << 14;

/// The line a query's points were drawn from, and which of them the query keeps (the others are the
/// identity).
#[derive(Clone, Debug)]
struct Line<P: SWCurveConfig> {
    start: Projective<P>,
    step: Projective<P>,
    present: Vec<bool>,
}

impl<P: SWCurveConfig<ScalarField = Fr>> Line<P> {
    /// `Σ k_i·P_i` over the query's points, in closed form.
    fn msm(&self, scalars: &[Fr]) -> Result<Projective<P>, String> {
        let present = &self.present;
        if present.len() != scalars.len() {
            return Err(format!("{} scalars for {} bases", scalars.len(), present.len()));
        }
        let (sum, weighted) = (0..present.len())
            .into_par_iter()
            .with_min_len(1 << 12)
            .filter(|&i| present[i])
            .map(|i| (scalars[i], scalars[i] * Fr::from(i as u64)))
            .reduce(|| (Fr::zero(), Fr::zero()), |(a, b), (c, d)| (a + c, b + d));
        Ok(self.start * sum + self.step * weighted)
    }
}

/// `len` points: the identity where `present(i)` is false, else `start + i·step`.
fn progression<P: SWCurveConfig>(
    len: usize,
    present: impl Fn(usize) -> bool + Sync + Send,
    rng: &mut impl Rng,
) -> (Vec<Affine<P>>, Line<P>) {
    let (start, step) = (Projective::<P>::rand(rng), Projective::<P>::rand(rng));
    let present: Vec<bool> = (0..len).into_par_iter().map(present).collect();
    let points = points_on(start, step, &present, CHUNK);
    (points, Line { start, step, present })
}

/// `start + i·step` for each `i` where `present[i]`, the identity elsewhere, computed `chunk` points
/// per task.
///
/// Each task starts from its first point `B = start + lo·step` and adds the offsets `j·step`
/// (computed once, affine) in affine coordinates, with one inversion for the whole chunk (Montgomery's
/// trick): about six multiplications a point, where stepping along the line in projective
/// coordinates and normalising after costs about twenty. A sum that is not a plain addition (a
/// doubling, the identity, or `B` itself the identity: only when `start` is a small multiple of
/// `step`, never for random points) is computed the general way.
fn points_on<P: SWCurveConfig>(
    start: Projective<P>,
    step: Projective<P>,
    present: &[bool],
    chunk: usize,
) -> Vec<Affine<P>> {
    let offsets: Vec<Affine<P>> = {
        let mut p = Projective::zero();
        let multiples: Vec<Projective<P>> = (0..chunk.min(present.len()))
            .map(|_| {
                let q = p;
                p += step;
                q
            })
            .collect();
        Projective::normalize_batch(&multiples)
    };
    // Written in place, chunk by chunk: a query of tens of GiB is never held twice. Its memory is
    // first touched by every thread, not one.
    let mut points = Vec::with_capacity(present.len());
    points.par_extend(rayon::iter::repeat_n(Affine::<P>::zero(), present.len()));
    points.par_chunks_mut(chunk).enumerate().for_each(|(k, out)| {
        let lo = k * chunk;
        let base = start + step * P::ScalarField::from(lo as u64);
        let b = base.into_affine();
        let present = &present[lo..lo + out.len()];
        // The slope's denominators x_j - x_B; zero where the sum is not a plain addition (skipped
        // by the batch inversion).
        let mut inverses: Vec<P::BaseField> = offsets[..out.len()]
            .iter()
            .zip(present)
            .map(
                |(t, &keep)| {
                    if keep && !t.is_zero() && !b.is_zero() {
                        t.x - b.x
                    } else {
                        P::BaseField::zero()
                    }
                },
            )
            .collect();
        ark_ff::fields::serial_batch_inversion_and_mul(&mut inverses, &P::BaseField::one());
        for (((p, t), &keep), inv) in out.iter_mut().zip(&offsets).zip(present).zip(&inverses) {
            *p = if !keep {
                Affine::zero()
            } else if t.is_zero() {
                b
            } else if inv.is_zero() {
                (base + t).into_affine()
            } else {
                let slope = (t.y - b.y) * inv;
                let x = slope.square() - b.x - t.x;
                let y = slope * (b.x - x) - b.y;
                Affine::new_unchecked(x, y)
            };
        }
    });
    points
}

/// A timing key (see the module documentation) and its proofs' closed form.
#[derive(Clone)]
pub(crate) struct TimingKey {
    /// The key: do not use it to make proofs anyone verifies.
    pub(crate) pk: ProvingKey<Bls12_381>,
    /// What its proofs are, without the key's points (so the key itself can be handed on).
    pub(crate) closed_form: ClosedForm,
}

/// The proofs of a timing key in closed form: the lines its queries' points lie on, which points are
/// at infinity, and the key's other parts.
#[derive(Clone)]
pub(crate) struct ClosedForm {
    vk: VerifyingKey<Bls12_381>,
    beta_g1: ark_bls12_381::G1Affine,
    delta_g1: ark_bls12_381::G1Affine,
    a: Line<g1::Config>,
    b_g1: Line<g1::Config>,
    b_g2: Line<g2::Config>,
    h: Line<g1::Config>,
    l: Line<g1::Config>,
}

impl TimingKey {
    /// A timing key for circuits of `shape`.
    pub(crate) fn new(shape: &R1csShape, rng: &mut impl Rng) -> Self {
        make(shape, rng)
    }

    /// See [`ClosedForm::expected_proof`].
    #[cfg(test)]
    fn expected_proof<C: ConstraintSynthesizer<Fr>>(
        &self,
        circuit: C,
        r: Fr,
        s: Fr,
    ) -> Result<Proof<Bls12_381>, String> {
        self.closed_form.expected_proof(circuit, r, s)
    }
}

impl ClosedForm {
    /// The proof ark-groth16 makes with the timing key for `circuit` and blinding scalars `r`, `s`:
    /// ark-groth16's synthesis and witness map, then the closed form of its MSMs. Fails when the
    /// circuit does not fit the key.
    pub(crate) fn expected_proof<C: ConstraintSynthesizer<Fr>>(
        &self,
        circuit: C,
        r: Fr,
        s: Fr,
    ) -> Result<Proof<Bls12_381>, String> {
        let pk = self;
        let cs = crate::ark::synthesize(circuit).map_err(|e| format!("ark-groth16's synthesis: {e}"))?;
        let z = &crate::ark::assignment(&cs).map_err(|e| e.to_string())?;
        if z.len() != pk.a.present.len() {
            return Err(format!("a circuit of {} variables for a key of {}", z.len(), pk.a.present.len()));
        }
        let h = crate::ark::witness_map(&cs).map_err(|e| format!("ark-groth16's witness map: {e}"))?;
        drop(cs);
        let n = pk.h.present.len() + 1;
        if h.len() != n {
            return Err(format!("a circuit of domain {} for a key of domain {n}", h.len()));
        }
        let h = &h[..n - 1];
        let witness = z.get(pk.vk.gamma_abc_g1.len()..).ok_or("fewer variables than instance variables")?;
        let delta = G1Projective::from(pk.delta_g1);
        // ark-groth16's assembly (create_proof_with_assignment), with each MSM in closed form.
        let g_a = self.a.msm(z)? + pk.vk.alpha_g1 + delta * r;
        let g2_b = self.b_g2.msm(z)? + pk.vk.beta_g2 + G2Projective::from(pk.vk.delta_g2) * s;
        let g1_b =
            if r.is_zero() { G1Projective::zero() } else { self.b_g1.msm(z)? + pk.beta_g1 + delta * s };
        let g_c = g_a * s + g1_b * r - delta * (r * s) + self.l.msm(witness)? + self.h.msm(h)?;
        Ok(Proof { a: g_a.into_affine(), b: g2_b.into_affine(), c: g_c.into_affine() })
    }
}

/// A timing key for circuits of `shape` (see the module documentation): do not use it to make proofs
/// anyone verifies.
#[cfg(test)]
fn timing_key(shape: &R1csShape, rng: &mut impl Rng) -> ProvingKey<Bls12_381> {
    make(shape, rng).pk
}

fn make(shape: &R1csShape, rng: &mut impl Rng) -> TimingKey {
    let counts = shape.counts();
    let (instance, variables) = (counts.instance, counts.instance + counts.witness);
    let usage = shape.variable_use();
    let mut in_c = vec![false; variables];
    shape.c().columns().iter().for_each(|&col| in_c[col as usize] = true);
    let mut g1 = || G1Projective::rand(rng).into_affine();
    let (alpha_g1, beta_g1, delta_g1) = (g1(), g1(), g1());
    let mut g2 = || G2Projective::rand(rng).into_affine();
    let (beta_g2, gamma_g2, delta_g2) = (g2(), g2(), g2());
    // ark-groth16 puts every instance variable in A (its input-consistency rows), and a variable's
    // L base is zero only when no matrix uses it.
    let (a_query, a) = progression(variables, |i| usage.in_a(i), rng);
    let (b_g1_query, b_g1) = progression(variables, |i| usage.in_b(i), rng);
    let (b_g2_query, b_g2) = progression(variables, |i| usage.in_b(i), rng);
    let (h_query, h) = progression(counts.domain_size() - 1, |_| true, rng);
    let (l_query, l) = progression(
        counts.witness,
        |i| {
            let v = instance + i;
            usage.in_a(v) || usage.in_b(v) || in_c[v]
        },
        rng,
    );
    let (gamma_abc_g1, _) = progression(instance, |_| true, rng);
    let pk = ProvingKey {
        vk: VerifyingKey { alpha_g1, beta_g2, gamma_g2, delta_g2, gamma_abc_g1 },
        beta_g1,
        delta_g1,
        a_query,
        b_g1_query,
        b_g2_query,
        h_query,
        l_query,
    };
    let closed_form =
        ClosedForm { vk: pk.vk.clone(), beta_g1: pk.beta_g1, delta_g1: pk.delta_g1, a, b_g1, b_g2, h, l };
    TimingKey { pk, closed_form }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_relations::gr1cs::ConstraintSynthesizer;
    use cuzk_circuits::Synthetic;

    #[test]
    fn a_timing_key_has_the_shape_and_the_points_at_infinity_of_the_real_key() {
        let mut rng = cuzk_testkit::seeded_rng("timing_key_shape");
        let circuit = Synthetic::with_log_rows(8, 3);
        let real = cuzk_testkit::keygen(circuit, &mut rng);
        let shape = R1csShape::record(circuit).unwrap();
        let timing = timing_key(&shape, &mut rng);
        fn zeros<P: SWCurveConfig>(v: &[Affine<P>]) -> Vec<bool> {
            v.iter().map(ark_ec::AffineRepr::is_zero).collect()
        }
        assert_eq!(zeros(&timing.a_query), zeros(&real.a_query));
        assert_eq!(zeros(&timing.b_g1_query), zeros(&real.b_g1_query));
        assert_eq!(zeros(&timing.b_g2_query), zeros(&real.b_g2_query));
        assert_eq!(zeros(&timing.l_query), zeros(&real.l_query));
        assert_eq!(timing.h_query.len(), real.h_query.len());
        assert_eq!(timing.vk.gamma_abc_g1.len(), real.vk.gamma_abc_g1.len());
        assert!(timing.h_query.iter().chain(&timing.l_query).all(|p| p.is_on_curve()));
        assert!(timing
            .b_g2_query
            .iter()
            .all(|p| p.is_on_curve() && p.is_in_correct_subgroup_assuming_on_curve()));
        // Some bases really are at infinity in this circuit, so the comparison above means something.
        assert!(real.b_g1_query.iter().any(ark_ec::AffineRepr::is_zero));
    }

    /// The chunked affine additions give `start + i·step` exactly, over awkward lengths and chunk
    /// sizes, and where a sum is a doubling, the identity, or starts from the identity.
    #[test]
    fn points_on_a_line_equal_the_line_whatever_the_start() {
        fn check<P: SWCurveConfig<ScalarField = Fr>>(rng: &mut impl Rng) {
            let step = Projective::<P>::rand(rng);
            let times =
                |k: i64| step * Fr::from(k.unsigned_abs()) * if k < 0 { -Fr::one() } else { Fr::one() };
            // With chunks of 5: a start of 3·step makes offset 3 of the first chunk a doubling, -7·step
            // makes offset 2 of the second chunk the identity, -5·step starts the second at the identity.
            let starts = [Projective::<P>::rand(rng), times(3), times(-7), times(-5)];
            for (start, (len, chunk)) in starts.into_iter().zip([(23, 5), (11, 5), (12, 5), (14, 5)]) {
                let present: Vec<bool> = (0..len).map(|i| i % 4 != 1).collect();
                let points = points_on(start, step, &present, chunk);
                assert_eq!(points.len(), len);
                for (i, (p, keep)) in points.iter().zip(&present).enumerate() {
                    let expected = if *keep { start + times(i as i64) } else { Projective::zero() };
                    assert_eq!(*p, expected.into_affine(), "point {i} of {len}, chunks of {chunk}");
                }
            }
            assert!(points_on(step, step, &[], 5).is_empty());
        }
        let mut rng = cuzk_testkit::seeded_rng("timing_key_points_on");
        check::<g1::Config>(&mut rng);
        check::<g2::Config>(&mut rng);
    }

    /// The closed form of `circuit`'s proof equals ark-groth16's proof with the timing key, for two
    /// blinding pairs (one with `r = 0`); `other`, another witness of the same shape, gets another
    /// proof, equal to ark-groth16's too.
    fn closed_form_matches<C: ConstraintSynthesizer<Fr> + Copy>(circuit: C, other: C, rng: &mut impl Rng) {
        use ark_groth16::Groth16;
        let key = TimingKey::new(&R1csShape::record(circuit).unwrap(), rng);
        for (r, s) in [(Fr::rand(rng), Fr::rand(rng)), (Fr::zero(), Fr::rand(rng))] {
            let ark = Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &key.pk, r, s).unwrap();
            assert_eq!(key.expected_proof(circuit, r, s).unwrap(), ark);
        }
        let (r, s) = (Fr::rand(rng), Fr::rand(rng));
        let theirs = key.expected_proof(other, r, s).unwrap();
        assert_ne!(theirs, key.expected_proof(circuit, r, s).unwrap(), "another witness, another proof");
        assert_eq!(theirs, Groth16::<Bls12_381>::create_proof_with_reduction(other, &key.pk, r, s).unwrap());
    }

    #[test]
    fn the_closed_form_proof_of_a_timing_key_equals_ark_groth16s() {
        let mut rng = cuzk_testkit::seeded_rng("timing_key_closed_form");
        let synthetic = |seed| Synthetic::with_log_rows(8, seed).with_bit_share(500);
        closed_form_matches(synthetic(5), synthetic(6), &mut rng);
        let porep = |p| cuzk_circuits::PorepLike::for_log_constraints(10, 3, p).unwrap();
        closed_form_matches(porep(1), porep(2), &mut rng);
    }

    #[test]
    fn the_closed_form_equals_ark_groth16_at_2_pow_16_rows() {
        // The largest size whose ark-groth16 proof the CPU suite affords (seconds on two cores).
        use ark_groth16::Groth16;
        let mut rng = cuzk_testkit::seeded_rng("timing_key_closed_form_2_16");
        for circuit in [
            crate::workload::Partition::Synthetic(Synthetic::with_log_rows(16, 9).with_bit_share(250)),
            crate::workload::Partition::Porep(
                cuzk_circuits::PorepLike::for_log_constraints(16, 4, 0).unwrap(),
            ),
        ] {
            let key = TimingKey::new(&R1csShape::record(circuit).unwrap(), &mut rng);
            let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
            let ark = Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &key.pk, r, s).unwrap();
            assert_eq!(key.expected_proof(circuit, r, s).unwrap(), ark);
        }
    }

    #[test]
    fn proofs_with_a_timing_key_equal_ark_groth16s_and_fail_the_self_check() {
        use ark_groth16::Groth16;
        use cuzk::{Config, Engine, Error};
        let mut rng = cuzk_testkit::seeded_rng("timing_key_proofs");
        let circuit = Synthetic::with_log_rows(7, 11);
        let pk = timing_key(&R1csShape::record(circuit).unwrap(), &mut rng);
        let (r, s) = (ark_bls12_381::Fr::rand(&mut rng), ark_bls12_381::Fr::rand(&mut rng));
        let unchecked = Engine::new(Config { verify_proofs: false, ..Config::cpu() }).unwrap();
        let key = unchecked.load_key(pk.clone()).unwrap();
        let ours = unchecked.prove_with_randomness(&key, circuit, r, s).unwrap();
        let ark = Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s).unwrap();
        assert_eq!(ours, ark);
        assert!(!unchecked.verify(&key, &ours, &circuit.public_input_values()).unwrap());
        // An engine that checks its proofs (the default) refuses to return them.
        let checked = Engine::new(Config::cpu()).unwrap();
        let key = checked.load_key(pk).unwrap();
        let refused = checked.prove_with_randomness(&key, circuit, r, s);
        assert!(matches!(refused, Err(Error::Prove(_))), "{refused:?}");
    }
}
