//! The PoRep-shaped circuit: satisfiable, one shape for every partition, exact sizes, and refusals.

use ark_bls12_381::Fr;
use ark_relations::gr1cs::{
    ConstraintSynthesizer, ConstraintSystem, Matrix, OptimizationGoal, SynthesisMode, R1CS_PREDICATE_LABEL,
};
use cuzk_circuits::porep::{MAX_LOG_CONSTRAINTS, MIN_LOG_CONSTRAINTS};
use cuzk_circuits::{CircuitError, LabelHash, PorepLike, PorepParams};
use cuzk_synth::{synthesize, SynthesisOptions};

/// The R1CS matrices and the full assignment, as ark-groth16's prover builds them.
fn matrices_and_assignment(c: PorepLike) -> (Vec<Matrix<Fr>>, Vec<Fr>) {
    let cs = ConstraintSystem::<Fr>::new_ref();
    cs.set_optimization_goal(OptimizationGoal::Constraints);
    cs.set_mode(SynthesisMode::Prove { construct_matrices: true, generate_lc_assignments: false });
    c.generate_constraints(cs.clone()).unwrap();
    cs.finalize();
    assert!(cs.is_satisfied().unwrap(), "{c:?} is satisfied");
    let mut z = cs.instance_assignment().unwrap();
    z.extend(cs.witness_assignment().unwrap());
    (cs.to_matrices().unwrap().remove(R1CS_PREDICATE_LABEL).unwrap(), z)
}

/// A SHA-256-labelled circuit small enough for a test: two challenges, two parents, a tree of 2^5.
fn small_sha() -> PorepParams {
    PorepParams {
        challenges: 2,
        depth: 5,
        base_parents: 1,
        expander_parents: 1,
        label_hash: LabelHash::Sha256,
        filler: 7,
    }
}

#[test]
fn partitions_share_the_matrices_and_differ_in_the_witness() {
    let poseidon = PorepLike::params_for_log_constraints(11).unwrap();
    for params in [poseidon, small_sha()] {
        let p0 = PorepLike::new(params, 42, 0).unwrap();
        let (m0, z0) = matrices_and_assignment(p0);
        let (m1, z1) = matrices_and_assignment(p0.with_partition(1));
        assert!(m0 == m1, "{params:?}: partitions 0 and 1 have the same A, B, C");
        assert_eq!(z0.len(), z1.len(), "{params:?}");
        assert_ne!(z0, z1, "{params:?}: the witnesses differ");
        // Partitions draw their challenges independently (two may coincide in a small tree; eight
        // partitions all coinciding with partition 0 in a tree of 16 or 32 leaves would be a bug).
        let others = (1..=8).map(|p| p0.with_partition(p).challenges());
        assert!(others.into_iter().any(|c| c != p0.challenges()), "{params:?}");
        // Another seed: another replica, the same shape.
        let (m2, z2) = matrices_and_assignment(PorepLike::new(params, 43, 0).unwrap());
        assert!(m0 == m2, "{params:?}: the seed does not change the shape");
        assert_ne!(z0[1], z2[1], "{params:?}: the replica id depends on the seed");
    }
}

#[test]
fn a_partition_is_rebuilt_from_seed_and_partition() {
    let params = small_sha();
    let a = synthesize(PorepLike::new(params, 5, 3).unwrap(), &SynthesisOptions::default()).unwrap();
    let b = synthesize(PorepLike::new(params, 5, 3).unwrap(), &SynthesisOptions::default()).unwrap();
    assert_eq!(a.assignment, b.assignment);
    let c = PorepLike::new(params, 5, 3).unwrap();
    assert_eq!(a.public_inputs(), &c.public_input_values()[..]);
    let nodes: Vec<Fr> = c.challenges().into_iter().map(Fr::from).collect();
    assert_eq!(&a.public_inputs()[2..], &nodes[..], "challenged nodes are public inputs");
    assert_eq!(a.counts().instance, 1 + params.public_inputs());
}

#[test]
fn counts_match_synthesis_and_sha_circuits_are_mostly_bits() {
    for params in [small_sha(), PorepParams { challenges: 3, filler: 0, ..small_sha() }] {
        let s = synthesize(PorepLike::new(params, 1, 0).unwrap(), &SynthesisOptions::default()).unwrap();
        let counts = params.counts().unwrap();
        assert_eq!(
            (counts.constraints, counts.instance, counts.witness),
            (s.counts().constraints, s.counts().instance, s.counts().witness),
            "{params:?}"
        );
        assert!(s.density.num_other() * 2 < s.density.len(), "{params:?}: {:?}", s.density);
    }
}

#[test]
fn size_helper_hits_exactly_two_to_the_k_rows() {
    // The filler makes the rows (constraints + instance variables) exactly 2^k, so the proving domain
    // is exactly 2^k and nothing of it is wasted.
    for k in MIN_LOG_CONSTRAINTS..=14 {
        let c = PorepLike::for_log_constraints(k, 9, 0).unwrap();
        let s = synthesize(c, &SynthesisOptions::default()).unwrap();
        assert_eq!(s.counts().rows(), 1 << k, "k = {k}: {:?}", c.params);
        assert_eq!(c.params.counts().unwrap().rows(), 1 << k, "k = {k}");
        assert!(c.params.challenges >= 1);
        // The filler is less than one challenge's worth of rows.
        let one_more = PorepParams { challenges: c.params.challenges + 1, filler: 0, ..c.params };
        assert!(one_more.counts().unwrap().rows() > 1 << k, "k = {k}: another challenge would not fit");
    }
}

#[test]
fn size_helper_picks_sha256_labels_once_they_fit() {
    let big = PorepLike::params_for_log_constraints(MAX_LOG_CONSTRAINTS).unwrap();
    assert_eq!(
        (big.label_hash, big.base_parents, big.expander_parents, big.depth),
        (LabelHash::Sha256, 6, 8, 30)
    );
    assert!(big.challenges > 100, "{big:?}");
    let counts = big.counts().unwrap();
    assert_eq!(counts.rows(), 1 << MAX_LOG_CONSTRAINTS);
    assert!(big.filler * 3 < counts.constraints, "{big:?}: filler under a third");
}

#[test]
fn bad_parameters_are_refused() {
    for k in [0, MIN_LOG_CONSTRAINTS - 1, MAX_LOG_CONSTRAINTS + 1, 64] {
        let err = PorepLike::for_log_constraints(k, 1, 0).unwrap_err();
        assert!(matches!(err, CircuitError::LogConstraintsOutOfRange { k: got, .. } if got == k), "{err}");
    }
    let err = PorepLike::new(PorepParams { challenges: 0, ..small_sha() }, 1, 0).unwrap_err();
    assert!(err.to_string().contains("challenges"), "{err}");
    for depth in [0, 49] {
        let err = PorepLike::new(PorepParams { depth, ..small_sha() }, 1, 0).unwrap_err();
        assert!(err.to_string().contains("depth"), "{err}");
    }
}

#[test]
fn shape_ids_name_the_shape() {
    let a = small_sha();
    assert_eq!(a.shape_id(), "porep-sha-c2-d5-p1x1-f7");
    assert_ne!(a.shape_id(), PorepParams { filler: 8, ..a }.shape_id());
    let big = PorepParams::filecoin_like(600);
    assert!(big.shape_id().len() <= 64);
}
