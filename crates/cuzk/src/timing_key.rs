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
//! same key byte for byte: benches use that as their correctness check.

use ark_bls12_381::{Bls12_381, G1Projective, G2Projective};
use ark_ec::short_weierstrass::{Affine, Projective, SWCurveConfig};
use ark_ec::CurveGroup;
use ark_groth16::{ProvingKey, VerifyingKey};
use ark_std::{rand::Rng, UniformRand, Zero};
use cuzk_synth::R1csShape;
use rayon::prelude::*;

/// Points computed per task (each task starts with one scalar multiplication).
const CHUNK: usize = 1 << 14;

/// `len` points: the identity where `present(i)` is false, else `start + i·step`.
fn progression<P: SWCurveConfig>(
    len: usize,
    present: impl Fn(usize) -> bool + Sync,
    rng: &mut impl Rng,
) -> Vec<Affine<P>> {
    let (start, step) = (Projective::<P>::rand(rng), Projective::<P>::rand(rng));
    (0..len.div_ceil(CHUNK))
        .into_par_iter()
        .flat_map_iter(|k| {
            let (lo, hi) = (k * CHUNK, ((k + 1) * CHUNK).min(len));
            let mut p = start + step * P::ScalarField::from(lo as u64);
            let chunk: Vec<Projective<P>> = (lo..hi)
                .map(|i| {
                    let q = if present(i) { p } else { Projective::zero() };
                    p += step;
                    q
                })
                .collect();
            Projective::normalize_batch(&chunk)
        })
        .collect()
}

/// A timing key for circuits of `shape` (see the module documentation): do not use it to make proofs
/// anyone verifies.
pub fn timing_key(shape: &R1csShape, rng: &mut impl Rng) -> ProvingKey<Bls12_381> {
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
    let a_query = progression(variables, |i| usage.in_a(i), rng);
    let b_g1_query = progression(variables, |i| usage.in_b(i), rng);
    let b_g2_query = progression(variables, |i| usage.in_b(i), rng);
    let h_query = progression(counts.domain_size() - 1, |_| true, rng);
    let l_query = progression(
        counts.witness,
        |i| {
            let v = instance + i;
            usage.in_a(v) || usage.in_b(v) || in_c[v]
        },
        rng,
    );
    let gamma_abc_g1 = progression(instance, |_| true, rng);
    ProvingKey {
        vk: VerifyingKey { alpha_g1, beta_g2, gamma_g2, delta_g2, gamma_abc_g1 },
        beta_g1,
        delta_g1,
        a_query,
        b_g1_query,
        b_g2_query,
        h_query,
        l_query,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn proofs_with_a_timing_key_equal_ark_groth16s_and_fail_the_self_check() {
        use crate::{Config, Engine, Error};
        use ark_groth16::Groth16;
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
