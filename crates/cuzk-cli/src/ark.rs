//! ark-groth16's prover as ark-groth16 runs it (`create_proof_with_reduction`), in two timed phases:
//! its synthesis (the constraint system built and its linear combinations inlined), then the rest
//! (its matrices, its witness map, its MSMs). The two together are exactly its one-call prover; the
//! split lets a benchmark put ark's proving beside cuzk's GPU time without synthesis on either side.

use std::time::Instant;

use ark_bls12_381::{Bls12_381, Fr};
use ark_groth16::r1cs_to_qap::{LibsnarkReduction, R1CSToQAP};
use ark_groth16::{Groth16, Proof, ProvingKey};
use ark_poly::GeneralEvaluationDomain;
use ark_relations::gr1cs::{
    ConstraintSynthesizer, ConstraintSystem, ConstraintSystemRef, OptimizationGoal, SynthesisError,
    SynthesisMode, R1CS_PREDICATE_LABEL,
};

/// One partition proved by ark-groth16: the proof and its two phases' wall seconds.
pub(crate) struct ArkProof {
    pub(crate) proof: Proof<Bls12_381>,
    pub(crate) synthesis_seconds: f64,
    pub(crate) prove_seconds: f64,
}

/// `circuit` synthesized as ark-groth16's prover does it.
pub(crate) fn synthesize<C: ConstraintSynthesizer<Fr>>(
    circuit: C,
) -> Result<ConstraintSystemRef<Fr>, SynthesisError> {
    let cs = ConstraintSystem::<Fr>::new_ref();
    cs.set_optimization_goal(OptimizationGoal::Constraints);
    cs.set_mode(SynthesisMode::Prove { construct_matrices: true, generate_lc_assignments: false });
    circuit.generate_constraints(cs.clone())?;
    cs.finalize();
    Ok(cs)
}

/// The full assignment (instance, then witness) of a synthesized constraint system.
pub(crate) fn assignment(cs: &ConstraintSystemRef<Fr>) -> Result<Vec<Fr>, SynthesisError> {
    let inner = cs.borrow().ok_or(SynthesisError::MissingCS)?;
    Ok([inner.instance_assignment()?, inner.witness_assignment()?].concat())
}

/// ark-groth16's own witness map of a synthesized constraint system: the coefficients of `h`.
pub(crate) fn witness_map(cs: &ConstraintSystemRef<Fr>) -> Result<Vec<Fr>, SynthesisError> {
    LibsnarkReduction::witness_map::<Fr, GeneralEvaluationDomain<Fr>>(cs.clone())
}

/// Proves `circuit` with ark-groth16, timing its synthesis and the rest apart.
pub(crate) fn prove<C: ConstraintSynthesizer<Fr>>(
    circuit: C,
    pk: &ProvingKey<Bls12_381>,
    r: Fr,
    s: Fr,
) -> Result<ArkProof, SynthesisError> {
    let t = Instant::now();
    let cs = synthesize(circuit)?;
    let synthesis_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let matrices = cs.to_matrices()?;
    let r1cs = matrices.get(R1CS_PREDICATE_LABEL).ok_or(SynthesisError::MissingCS)?;
    let full = assignment(&cs)?;
    let proof = Groth16::<Bls12_381, LibsnarkReduction>::create_proof_with_reduction_and_matrices(
        pk,
        r,
        s,
        r1cs,
        cs.num_instance_variables(),
        cs.num_constraints(),
        &full,
    )?;
    Ok(ArkProof { proof, synthesis_seconds, prove_seconds: t.elapsed().as_secs_f64() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_std::UniformRand;
    use cuzk_circuits::{PorepLike, Synthetic};

    #[test]
    fn the_two_phases_prove_what_ark_groth16s_one_call_proves() {
        let mut rng = cuzk_testkit::seeded_rng("ark_phases");
        let synthetic = Synthetic::with_log_rows(9, 4).with_bit_share(300);
        let pk = cuzk_testkit::keygen(synthetic, &mut rng);
        let (r, s) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
        let split = prove(synthetic, &pk, r, s).unwrap();
        let whole = Groth16::<Bls12_381>::create_proof_with_reduction(synthetic, &pk, r, s).unwrap();
        assert_eq!(split.proof, whole);
        assert!(split.synthesis_seconds > 0.0 && split.prove_seconds > 0.0);

        let porep = PorepLike::for_log_constraints(10, 2, 0).unwrap();
        let pk = cuzk_testkit::keygen(porep, &mut rng);
        let whole = Groth16::<Bls12_381>::create_proof_with_reduction(porep, &pk, r, s).unwrap();
        assert_eq!(prove(porep, &pk, r, s).unwrap().proof, whole);
    }
}
