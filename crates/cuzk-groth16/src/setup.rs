//! Key generation (the Groth16 setup) that can be stopped part way.
//!
//! A key for a large circuit takes minutes to hours to generate, nearly all of it in fixed-base
//! scalar multiplications. [`generate_key`] does what ark-groth16's generator does, with its public
//! parts (the libsnark R1CS-to-QAP reduction and ark-ec's fixed-base tables), but looks at a stop
//! flag between its steps and between chunks of each multiplication, so a caller that no longer
//! wants the key gets [`SetupError::Stopped`] within one chunk's time. It draws from the RNG in the
//! generator's order, so a seed gives the key ark-groth16 would give (a test checks it byte for
//! byte).

use ark_bls12_381::{Bls12_381, Fr, G1Projective, G2Projective};
use ark_ec::scalar_mul::{BatchMulPreprocessing, ScalarMul};
use ark_ec::CurveGroup;
use ark_ff::{Field, UniformRand, Zero};
use ark_groth16::r1cs_to_qap::{LibsnarkReduction, R1CSToQAP};
use ark_groth16::{ProvingKey, VerifyingKey};
use ark_poly::{EvaluationDomain, GeneralEvaluationDomain};
use ark_relations::gr1cs::{
    ConstraintSynthesizer, ConstraintSystem, OptimizationGoal, SynthesisError, SynthesisMode,
};
use ark_std::rand::Rng;
use rayon::prelude::*;

/// Scalars multiplied between two looks at the stop flag: a fraction of a second of work.
const CHUNK: usize = 1 << 15;

/// Host bytes that generating a key for a circuit of `rows` rows (constraints plus public inputs)
/// may take at its peak: 1.5 KiB a row above 256 MiB. Measured peaks of `cuzk keygen` (which also
/// records the shape) on the dev machine, 2^16 to 2^18 rows: 1.03 KiB a row for the synthetic chain,
/// 0.64 KiB a row above about 190 MB for the porep-like circuit; the margin is for circuits with
/// denser rows.
pub fn setup_host_bytes(rows: u64) -> u64 {
    rows.saturating_mul(1536).saturating_add(256 << 20)
}

/// Why no key was generated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The stop flag was raised.
    #[error("key generation was stopped")]
    Stopped,
    /// The circuit could not be synthesized, or its domain is too large.
    #[error("the circuit: {0}")]
    Synthesis(#[from] SynthesisError),
    /// The toxic waste drew a zero (with negligible probability).
    #[error("a random element drawn for the key is zero")]
    ZeroElement,
}

/// Generates a proving key for `circuit` from `rng`, as ark-groth16's
/// `generate_random_parameters_with_reduction` does, returning [`SetupError::Stopped`] soon after
/// `stop` starts returning true.
pub fn generate_key<C: ConstraintSynthesizer<Fr>>(
    circuit: C,
    rng: &mut impl Rng,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<ProvingKey<Bls12_381>, SetupError> {
    let check = || if stop() { Err(SetupError::Stopped) } else { Ok(()) };
    // The toxic waste and the generators, in the order ark-groth16 draws them.
    let alpha = Fr::rand(rng);
    let beta = Fr::rand(rng);
    let gamma = Fr::rand(rng);
    let delta = Fr::rand(rng);
    let g1 = G1Projective::rand(rng);
    let g2 = G2Projective::rand(rng);

    check()?;
    let cs = ConstraintSystem::new_ref();
    cs.set_optimization_goal(OptimizationGoal::Constraints);
    cs.set_mode(SynthesisMode::Setup);
    circuit.generate_constraints(cs.clone())?;
    check()?;
    cs.finalize();
    check()?;

    let instance = cs.num_instance_variables();
    let domain = GeneralEvaluationDomain::<Fr>::new(cs.num_constraints() + instance)
        .ok_or(SynthesisError::PolynomialDegreeTooLarge)?;
    let t = domain.sample_element_outside_domain(rng);
    let (a, b, c, zt, variables, m_raw) =
        LibsnarkReduction::instance_map_with_evaluation::<Fr, GeneralEvaluationDomain<Fr>>(cs, &t)?;
    check()?;

    let nonzero = |v: &[Fr]| v.par_iter().filter(|x| !x.is_zero()).count();
    let (nonzero_a, nonzero_b) = (nonzero(&a[..variables]), nonzero(&b[..variables]));
    let gamma_inv = gamma.inverse().ok_or(SetupError::ZeroElement)?;
    let delta_inv = delta.inverse().ok_or(SetupError::ZeroElement)?;
    // (β·a + α·b + c) / γ for the instance variables, / δ for the witness.
    let combine = |range: std::ops::Range<usize>, inv: Fr| -> Vec<Fr> {
        range.into_par_iter().map(|i| (beta * a[i] + alpha * b[i] + c[i]) * inv).collect()
    };
    let gamma_abc = combine(0..instance, gamma_inv);
    let l = combine(instance..a.len(), delta_inv);
    drop(c);

    let b_g2 = {
        let table = BatchMulPreprocessing::new(g2, nonzero_b);
        multiply(&table, &b, &check)?
    };
    let table = BatchMulPreprocessing::new(g1, nonzero_a + nonzero_b + variables + m_raw + 1);
    let a_query = multiply(&table, &a, &check)?;
    drop(a);
    let b_g1 = multiply(&table, &b, &check)?;
    drop(b);
    let h_scalars =
        LibsnarkReduction::h_query_scalars::<Fr, GeneralEvaluationDomain<Fr>>(m_raw - 1, t, zt, delta_inv)?;
    let h_query = multiply(&table, &h_scalars, &check)?;
    drop(h_scalars);
    let l_query = multiply(&table, &l, &check)?;
    drop(l);
    let gamma_abc_g1 = multiply(&table, &gamma_abc, &check)?;

    let vk = VerifyingKey::<Bls12_381> {
        alpha_g1: (g1 * alpha).into_affine(),
        beta_g2: (g2 * beta).into_affine(),
        gamma_g2: (g2 * gamma).into_affine(),
        delta_g2: (g2 * delta).into_affine(),
        gamma_abc_g1,
    };
    Ok(ProvingKey {
        vk,
        beta_g1: (g1 * beta).into_affine(),
        delta_g1: (g1 * delta).into_affine(),
        a_query,
        b_g1_query: b_g1,
        b_g2_query: b_g2,
        h_query,
        l_query,
    })
}

/// `scalars[i]·base` for every `i` from a fixed-base table, a chunk at a time, looking at the stop
/// flag before each chunk.
fn multiply<G: ScalarMul<ScalarField = Fr>>(
    table: &BatchMulPreprocessing<G>,
    scalars: &[Fr],
    check: &impl Fn() -> Result<(), SetupError>,
) -> Result<Vec<G::MulBase>, SetupError> {
    let mut out = Vec::with_capacity(scalars.len());
    for chunk in scalars.chunks(CHUNK) {
        check()?;
        out.extend(table.batch_mul(chunk));
    }
    Ok(out)
}
