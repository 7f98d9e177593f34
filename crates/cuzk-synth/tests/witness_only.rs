//! Witness-only synthesis against full synthesis: every field bit for bit, on every workload circuit,
//! and every refusal.

use ark_bls12_381::Fr;
use ark_ff::{One, UniformRand, Zero};
use ark_relations::gr1cs::{ConstraintSynthesizer, SynthesisError};
use cuzk_circuits::{LabelHash, PorepLike, PorepParams};
use cuzk_synth::{
    synthesize, synthesize_into, synthesize_witness_only, Evaluations, R1csShape, ShapeCache, ShapeProblem,
    SynthError, SynthesisOptions,
};
use cuzk_testkit::{
    poseidon_config, seeded_rng, FailingCircuit, MerklePath, OneConstraint, PoseidonHash, Sha256Preimage,
    Synthetic, Unsatisfied,
};
use proptest::prelude::*;
use rand::{Rng, RngCore};

/// Records the shape of `shape_of`, synthesizes `circuit` both ways and asserts equality of every field.
fn assert_same<C: ConstraintSynthesizer<Fr> + Clone>(name: &str, shape_of: C, circuit: C) {
    let shape = R1csShape::record(shape_of).unwrap_or_else(|e| panic!("{name}: record: {e}"));
    let options = SynthesisOptions::default();
    let full = synthesize(circuit.clone(), &options).unwrap_or_else(|e| panic!("{name}: full: {e}"));
    let (fast, peak) =
        synthesize_witness_only(circuit.clone(), &shape, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(shape.counts(), full.counts(), "{name}: counts");
    assert_eq!(fast.counts(), full.counts(), "{name}: counts");
    assert_eq!(fast.assignment, full.assignment, "{name}: assignment");
    assert_eq!(fast.a, full.a, "{name}: a");
    assert_eq!(fast.b, full.b, "{name}: b");
    assert_eq!(fast.c, full.c, "{name}: c");
    assert_eq!(fast.density, full.density, "{name}: density");
    let rows = full.counts().rows() as u64;
    assert!(
        peak >= 32 * (3 * rows + full.assignment.len() as u64),
        "{name}: peak {peak} counts a, b, c and z"
    );

    // Into the caller's buffers, which hold garbage beforehand.
    let junk = Fr::from(7u64);
    let (mut a, mut b, mut c) =
        (vec![junk; rows as usize], vec![junk; rows as usize], vec![junk; rows as usize]);
    let w =
        synthesize_into(circuit, &shape, Evaluations { a: &mut a, b: &mut b, c: &mut c }, &options).unwrap();
    assert_eq!((a, b, c), (full.a, full.b, full.c), "{name}: synthesize_into");
    assert_eq!(w.assignment, full.assignment, "{name}: synthesize_into assignment");
    assert_eq!(w.density, full.density, "{name}: synthesize_into density");
    assert!(w.peak_bytes >= 32 * full.assignment.len() as u64 && w.peak_bytes < peak, "{name}");
}

#[test]
fn porep_like_partitions_match_full_synthesis() {
    let mut rng = seeded_rng("porep_like_partitions_match_full_synthesis");
    let small_sha = cuzk_testkit::small_sha_porep();
    // Filecoin's parent counts (an eight-block SHA-256 message per label), two challenges.
    let filecoin_parents = PorepParams {
        challenges: 2,
        depth: 3,
        base_parents: 6,
        expander_parents: 8,
        label_hash: LabelHash::Sha256,
        filler: 0,
    };
    let shapes = [
        PorepLike::params_for_log_constraints(10).unwrap(),
        PorepLike::params_for_log_constraints(12).unwrap(),
        small_sha,
        filecoin_parents,
    ];
    for params in shapes {
        let seed = rng.next_u64();
        // The shape is recorded from partition 0; other partitions and seeds use it.
        let first = PorepLike::new(params, seed, 0).unwrap();
        for (s, p) in [(seed, 0), (seed, 1), (seed, 7), (seed ^ 1, 3)] {
            assert_same(
                &format!("{params:?} seed {s} partition {p}"),
                first,
                PorepLike::new(params, s, p).unwrap(),
            );
        }
    }
}

#[test]
fn gadget_circuits_match_full_synthesis() {
    let mut rng = seeded_rng("gadget_circuits_match_full_synthesis");
    for x in [Fr::zero(), Fr::one(), Fr::rand(&mut rng)] {
        assert_same("one constraint", OneConstraint { x: Fr::from(5u64) }, OneConstraint { x });
    }
    let poseidon = |rng: &mut rand::rngs::StdRng| PoseidonHash {
        params: poseidon_config(),
        preimage: (Fr::rand(rng), Fr::rand(rng)),
    };
    assert_same("poseidon", poseidon(&mut rng), poseidon(&mut rng));
    let len = rng.gen_range(0..40);
    let message =
        |rng: &mut rand::rngs::StdRng| Sha256Preimage { message: (0..len).map(|_| rng.gen()).collect() };
    assert_same("sha256", message(&mut rng), message(&mut rng));
    let merkle = |rng: &mut rand::rngs::StdRng| MerklePath {
        params: poseidon_config(),
        leaf: Fr::rand(rng),
        path: (0..4).map(|_| (Fr::rand(rng), rng.gen())).collect(),
    };
    assert_same("merkle path", merkle(&mut rng), merkle(&mut rng));
}

/// Synthetic circuits of small shapes with any bit share; the shape comes from another seed.
fn synthetic() -> impl Strategy<Value = (Synthetic, u64)> {
    let share = prop_oneof![Just(0u16), Just(1000u16), 0u16..=1000];
    (0usize..=300, 0usize..=6, any::<u64>(), any::<u64>(), prop::bool::weighted(0.1), share).prop_map(
        |(constraints, public_inputs, seed, shape_seed, zero_witness, bit_share_per_mille)| {
            (Synthetic { constraints, public_inputs, seed, zero_witness, bit_share_per_mille }, shape_seed)
        },
    )
}

proptest! {
    #![proptest_config(cuzk_testkit::proptest_config("synthetic_matches_full_synthesis", 64))]
    #[test]
    fn synthetic_matches_full_synthesis((c, shape_seed) in synthetic()) {
        assert_same(&format!("{c:?}"), Synthetic { seed: shape_seed, ..c }, c);
    }
}

#[test]
fn variable_use_marks_what_a_and_b_touch() {
    // OneConstraint: x·x = y. A and B use x; A also holds every instance variable (1 and y).
    let shape = R1csShape::record(OneConstraint { x: Fr::one() }).unwrap();
    let u = shape.variable_use();
    assert_eq!(u.len(), 3);
    assert!(u.in_a(0) && u.in_a(1) && u.in_a(2));
    assert!(!u.in_b(0) && !u.in_b(1) && u.in_b(2));
    assert_eq!((u.count_a(), u.count_b()), (3, 1));
    assert!(!u.in_a(3), "past the end");
    assert_eq!(shape.coefficients()[0], Fr::one());
    assert_eq!((shape.a().entries(), shape.b().entries(), shape.c().entries()), (1, 1, 1));
}

#[test]
fn a_circuit_of_another_shape_is_refused() {
    let shape = R1csShape::record(Synthetic::new(50, 1)).unwrap();
    let options = SynthesisOptions::default();
    let err = synthesize_witness_only(Synthetic::new(51, 1), &shape, &options).unwrap_err();
    assert_eq!(err, SynthError::ShapeMismatch { what: "witness variables", shape: 51, circuit: 52 });
    let two_inputs = Synthetic { public_inputs: 2, ..Synthetic::new(50, 1) };
    let err = synthesize_witness_only(two_inputs, &shape, &options).unwrap_err();
    assert_eq!(err, SynthError::ShapeMismatch { what: "instance variables", shape: 2, circuit: 3 });
    assert!(err.to_string().contains("instance variables"), "{err}");
}

#[test]
fn wrong_buffer_lengths_are_refused() {
    let c = Synthetic::new(20, 1);
    let shape = R1csShape::record(c).unwrap();
    let rows = shape.counts().rows();
    for (which, lens) in
        [("a", [rows - 1, rows, rows]), ("b", [rows, rows + 1, rows]), ("c", [rows, rows, 0])]
    {
        let (mut a, mut b, mut cc) =
            (vec![Fr::zero(); lens[0]], vec![Fr::zero(); lens[1]], vec![Fr::zero(); lens[2]]);
        let out = Evaluations { a: &mut a, b: &mut b, c: &mut cc };
        let err = synthesize_into(c, &shape, out, &SynthesisOptions::default()).unwrap_err();
        assert!(
            matches!(err, SynthError::BufferLength { buffer, expected, .. } if buffer == which && expected == rows),
            "{err}"
        );
    }
}

#[test]
fn unsatisfied_and_failing_circuits_are_reported() {
    let inner = Synthetic::new(40, 3);
    let shape = R1csShape::record(Unsatisfied { inner, bad: usize::MAX }).unwrap();
    let err = synthesize_witness_only(Unsatisfied { inner, bad: 17 }, &shape, &SynthesisOptions::default())
        .unwrap_err();
    assert_eq!(err, SynthError::Unsatisfied { index: 17, num_constraints: 40 });
    let unchecked = SynthesisOptions { check_satisfied: false };
    let (syn, _) = synthesize_witness_only(Unsatisfied { inner, bad: 17 }, &shape, &unchecked).unwrap();
    let bad: Vec<usize> = (0..40).filter(|&i| syn.a[i] * syn.b[i] != syn.c[i]).collect();
    assert_eq!(bad, vec![17]);

    let shape = R1csShape::record(OneConstraint { x: Fr::one() }).unwrap();
    let err = synthesize_witness_only(FailingCircuit, &shape, &SynthesisOptions::default()).unwrap_err();
    assert_eq!(err, SynthError::Circuit(SynthesisError::AssignmentMissing));
}

#[test]
fn the_cache_records_each_shape_once() {
    let cache = ShapeCache::new();
    assert!(cache.is_empty() && cache.get("s").is_none());
    let first = cache.get_or_record("s", Synthetic::new(30, 1)).unwrap();
    // A second request does not record again: the circuit is not even run.
    let again = cache.get_or_record("s", FailingCircuit).unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &again));
    assert_eq!(cache.len(), 1);
    let other = cache.get_or_record("t", OneConstraint { x: Fr::one() }).unwrap();
    assert_eq!((cache.len(), other.counts().constraints), (2, 1));
    let replaced = cache.insert("s", R1csShape::record(Synthetic::new(31, 1)).unwrap());
    assert_eq!(cache.get("s").unwrap().counts().constraints, 31);
    assert_eq!(replaced.counts().constraints, 31);
}

#[test]
fn malformed_parts_are_refused() {
    let shape = R1csShape::record(Synthetic::new(4, 1)).unwrap();
    let counts = shape.counts();
    let parts = |s: &R1csShape| {
        [s.a(), s.b(), s.c()].map(|m| {
            (m.row_lengths().collect::<Vec<_>>(), m.columns().to_vec(), m.coefficient_indices().to_vec())
        })
    };
    let table = shape.coefficients().to_vec();
    assert_eq!(R1csShape::from_parts(counts, table.clone(), parts(&shape)).unwrap(), shape, "round trip");

    let mut p = parts(&shape);
    p[1].0.pop();
    let err = R1csShape::from_parts(counts, table.clone(), p).unwrap_err();
    assert_eq!(err, ShapeProblem::Rows { matrix: "B", expected: 4, found: 3 });

    let mut p = parts(&shape);
    p[0].0[0] += 1;
    assert!(matches!(
        R1csShape::from_parts(counts, table.clone(), p),
        Err(ShapeProblem::Entries { matrix: "A", .. })
    ));

    let mut p = parts(&shape);
    p[2].1[0] = counts.variables() as u32;
    assert!(matches!(
        R1csShape::from_parts(counts, table.clone(), p),
        Err(ShapeProblem::Column { matrix: "C", entry: 0, .. })
    ));

    let mut p = parts(&shape);
    p[0].2[1] = table.len() as u32;
    assert!(matches!(
        R1csShape::from_parts(counts, table.clone(), p),
        Err(ShapeProblem::Coefficient { matrix: "A", entry: 1, .. })
    ));

    let err = R1csShape::from_parts(counts, vec![Fr::from(2u64)], parts(&shape)).unwrap_err();
    assert_eq!(err, ShapeProblem::FirstCoefficient);
    let no_instance = cuzk_synth::Counts { instance: 0, ..counts };
    assert_eq!(
        R1csShape::from_parts(no_instance, table, parts(&shape)).unwrap_err(),
        ShapeProblem::NoInstance
    );
}
