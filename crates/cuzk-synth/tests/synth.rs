//! `cuzk_synth::synthesize` against arkworks directly: the constraint system is built the way
//! ark-groth16's prover builds it, its R1CS matrices are evaluated here by a plain loop, and every field
//! of the [`Synthesized`] result is compared with that reference.

use ark_bls12_381::Fr;
use ark_ff::{One, PrimeField, UniformRand, Zero};
use ark_relations::gr1cs::{
    ConstraintSynthesizer, ConstraintSystem, Matrix, OptimizationGoal, SynthesisError, SynthesisMode,
    R1CS_PREDICATE_LABEL,
};
use cuzk_synth::{
    synthesize, synthesize_all, Density, ScalarClass, SynthError, SynthesisOptions, Synthesized,
};
use cuzk_testkit::{
    poseidon_config, seeded_rng, FailingCircuit, MerklePath, OneConstraint, PoseidonHash, Sha256Preimage,
    Synthetic, Unsatisfied,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::Config;
use rand::Rng;

/// What arkworks itself says about a circuit.
struct Reference {
    /// The R1CS matrices A, B, C.
    matrices: Vec<Matrix<Fr>>,
    /// Labels of predicates other than R1CS that hold constraints (should be none).
    other_predicates: Vec<String>,
    instance: Vec<Fr>,
    witness: Vec<Fr>,
    num_constraints: usize,
    num_instance: usize,
    num_witness: usize,
    satisfied: bool,
}

/// Synthesizes `circuit` exactly as `ark_groth16::Groth16::create_proof_with_reduction` does.
fn reference<C: ConstraintSynthesizer<Fr>>(circuit: C) -> Reference {
    let cs = ConstraintSystem::<Fr>::new_ref();
    cs.set_optimization_goal(OptimizationGoal::Constraints);
    cs.set_mode(SynthesisMode::Prove { construct_matrices: true, generate_lc_assignments: false });
    circuit.generate_constraints(cs.clone()).expect("reference synthesis");
    cs.finalize();
    let mut all = cs.to_matrices().unwrap();
    let other_predicates = all
        .iter()
        .filter(|(label, m)| **label != R1CS_PREDICATE_LABEL && m.first().is_some_and(|m| !m.is_empty()))
        .map(|(label, _)| label.to_string())
        .collect();
    Reference {
        matrices: all.remove(R1CS_PREDICATE_LABEL).expect("an R1CS predicate"),
        other_predicates,
        instance: cs.instance_assignment().unwrap(),
        witness: cs.witness_assignment().unwrap(),
        num_constraints: cs.num_constraints(),
        num_instance: cs.num_instance_variables(),
        num_witness: cs.num_witness_variables(),
        satisfied: cs.is_satisfied().unwrap(),
    }
}

/// `Σ coeff·z[index]` over one sparse row, with no shortcuts.
fn dot(row: &[(Fr, usize)], z: &[Fr]) -> Fr {
    row.iter().map(|(coeff, index)| *coeff * z[*index]).sum()
}

/// Asserts that `density` classifies `values` exactly, bitmaps and counts included.
fn assert_density(name: &str, density: &Density, values: &[Fr]) {
    assert_eq!(density.len(), values.len(), "{name}: density length");
    assert_eq!(density.is_empty(), values.is_empty(), "{name}: density emptiness");
    let (mut zeros, mut ones) = (0, 0);
    for (i, v) in values.iter().enumerate() {
        let expected = if v.is_zero() {
            zeros += 1;
            ScalarClass::Zero
        } else if v.is_one() {
            ones += 1;
            ScalarClass::One
        } else {
            ScalarClass::Other
        };
        assert_eq!(density.class(i), expected, "{name}: class of z[{i}] = {v}");
        let (w, b) = (i / 64, i % 64);
        assert_eq!(
            density.zero_bits()[w] >> b & 1 == 1,
            expected == ScalarClass::Zero,
            "{name}: zero bit {i}"
        );
        assert_eq!(density.one_bits()[w] >> b & 1 == 1, expected == ScalarClass::One, "{name}: one bit {i}");
    }
    assert_eq!(density.num_zero(), zeros, "{name}: zero count");
    assert_eq!(density.num_one(), ones, "{name}: one count");
    assert_eq!(density.num_other(), values.len() - zeros - ones, "{name}: other count");
    let words = values.len().div_ceil(64);
    assert_eq!(density.zero_bits().len(), words, "{name}: zero bitmap words");
    assert_eq!(density.one_bits().len(), words, "{name}: one bitmap words");
    // Bits past the end are clear.
    if !values.len().is_multiple_of(64) {
        let tail = !0u64 << (values.len() % 64);
        assert_eq!(density.zero_bits()[words - 1] & tail, 0, "{name}: zero bits past the end");
        assert_eq!(density.one_bits()[words - 1] & tail, 0, "{name}: one bits past the end");
    }
}

/// Asserts that `syn` agrees with `r` in every field. `satisfied` says whether the witness is expected
/// to satisfy every constraint.
fn assert_matches_reference(name: &str, syn: &Synthesized, r: &Reference, satisfied: bool) {
    assert!(r.other_predicates.is_empty(), "{name}: non-R1CS predicates {:?}", r.other_predicates);
    assert_eq!(r.satisfied, satisfied, "{name}: arkworks' satisfaction check");
    assert_eq!(r.matrices.len(), 3, "{name}: R1CS has three matrices");

    // Counts.
    let counts = syn.counts();
    let n_c = r.num_constraints;
    assert_eq!(counts.constraints, n_c, "{name}: constraints");
    assert_eq!(counts.instance, r.num_instance, "{name}: instance variables");
    assert_eq!(counts.witness, r.num_witness, "{name}: witness variables");
    assert_eq!(r.instance.len(), r.num_instance, "{name}: arkworks' instance assignment");
    assert_eq!(r.witness.len(), r.num_witness, "{name}: arkworks' witness assignment");
    for m in &r.matrices {
        assert_eq!(m.len(), n_c, "{name}: matrix rows");
    }
    assert_eq!(counts.rows(), n_c + r.num_instance, "{name}: rows");
    assert_eq!(counts.variables(), r.num_instance + r.num_witness, "{name}: variables");
    assert_eq!(counts.domain_size(), counts.rows().next_power_of_two(), "{name}: domain size");
    assert!(counts.domain_size().is_power_of_two() && counts.domain_size() >= counts.rows());

    // Assignment and its views.
    let z: Vec<Fr> = r.instance.iter().chain(&r.witness).copied().collect();
    assert_eq!(z[0], Fr::one(), "{name}: z[0] is the constant 1");
    assert_eq!(syn.assignment, z, "{name}: assignment");
    assert_eq!(syn.instance(), &r.instance[..], "{name}: instance()");
    assert_eq!(syn.public_inputs(), &r.instance[1..], "{name}: public_inputs()");
    assert_eq!(syn.witness(), &r.witness[..], "{name}: witness()");

    // Evaluations: one row per constraint, then the input-consistency rows.
    let rows = counts.rows();
    for (label, got, m) in
        [("a", &syn.a, &r.matrices[0]), ("b", &syn.b, &r.matrices[1]), ("c", &syn.c, &r.matrices[2])]
    {
        assert_eq!(got.len(), rows, "{name}: {label} length");
        for i in 0..n_c {
            assert_eq!(got[i], dot(&m[i], &z), "{name}: {label}[{i}] (constraint {i})");
        }
    }
    for (j, z_j) in r.instance.iter().enumerate() {
        assert_eq!(syn.a[n_c + j], *z_j, "{name}: a[N_c + {j}] (input consistency)");
        assert!(syn.b[n_c + j].is_zero(), "{name}: b[N_c + {j}] (input consistency)");
        assert!(syn.c[n_c + j].is_zero(), "{name}: c[N_c + {j}] (input consistency)");
    }
    let unsatisfied = (0..n_c).filter(|&i| syn.a[i] * syn.b[i] != syn.c[i]).count();
    assert_eq!(unsatisfied == 0, satisfied, "{name}: {unsatisfied} rows with a·b != c");

    assert_density(name, &syn.density, &syn.assignment);
}

/// Synthesizes `circuit` with cuzk (checks on) and with arkworks, and compares.
fn check<C: ConstraintSynthesizer<Fr> + Clone>(name: &str, circuit: C) -> Synthesized {
    let syn =
        synthesize(circuit.clone(), &SynthesisOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_matches_reference(name, &syn, &reference(circuit), true);
    syn
}

// ---------------------------------------------------------------------------------------------------
// Circuits against arkworks
// ---------------------------------------------------------------------------------------------------

#[test]
fn one_constraint_matches_arkworks() {
    let mut rng = seeded_rng("one_constraint_matches_arkworks");
    for x in [Fr::zero(), Fr::one(), -Fr::one(), Fr::rand(&mut rng)] {
        let syn = check(&format!("one_constraint(x = {x})"), OneConstraint { x });
        assert_eq!(syn.public_inputs(), &[x * x]);
        assert_eq!(syn.witness(), &[x]);
        assert_eq!((syn.counts().constraints, syn.counts().instance, syn.counts().witness), (1, 2, 1));
        assert_eq!(syn.counts().domain_size(), 4);
    }
}

#[test]
fn synthetic_matches_arkworks() {
    // Zero constraints, no public inputs (the chain uses the constant 1), many public inputs, an
    // all-zero witness, and rows on either side of a power of two.
    let cases = [
        Synthetic { constraints: 0, public_inputs: 0, seed: 1, zero_witness: false, bit_share_per_mille: 0 },
        Synthetic { constraints: 0, public_inputs: 3, seed: 2, zero_witness: false, bit_share_per_mille: 0 },
        Synthetic { constraints: 1, public_inputs: 0, seed: 3, zero_witness: false, bit_share_per_mille: 0 },
        Synthetic { constraints: 17, public_inputs: 0, seed: 4, zero_witness: false, bit_share_per_mille: 0 },
        Synthetic {
            constraints: 40,
            public_inputs: 30,
            seed: 5,
            zero_witness: false,
            bit_share_per_mille: 0,
        },
        Synthetic { constraints: 64, public_inputs: 2, seed: 6, zero_witness: true, bit_share_per_mille: 0 },
        Synthetic::new(126, 7),
        Synthetic::new(127, 8),
        Synthetic::with_log_rows(8, 9),
    ];
    for c in cases {
        let syn = check(&format!("{c:?}"), c);
        assert_eq!(syn.public_inputs(), &c.public_input_values()[..], "{c:?}");
        assert_eq!(syn.counts().witness, c.constraints + 1, "{c:?}");
        if c.zero_witness {
            assert_eq!(syn.density.num_zero(), c.constraints + 1, "{c:?}");
        }
    }
}

#[test]
fn poseidon_matches_arkworks() {
    let mut rng = seeded_rng("poseidon_matches_arkworks");
    let c = PoseidonHash { params: poseidon_config(), preimage: (Fr::rand(&mut rng), Fr::rand(&mut rng)) };
    let syn = check("poseidon", c.clone());
    assert_eq!(syn.public_inputs(), &[c.digest()]);
    assert!(syn.counts().constraints > 100, "a Poseidon permutation has hundreds of constraints");
}

#[test]
fn sha256_matches_arkworks() {
    let mut rng = seeded_rng("sha256_matches_arkworks");
    let len = rng.gen_range(0..12);
    let message: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
    let c = Sha256Preimage { message };
    let syn = check(&format!("sha256({} bytes)", c.message.len()), c.clone());
    // `UInt8::new_input_vec` packs the 32 digest bytes into field elements, 31 bytes (little-endian)
    // per element, so the public inputs are two elements, not 256 bits.
    use ark_crypto_primitives::crh::{sha256::Sha256, CRHScheme};
    let digest = <Sha256 as CRHScheme>::evaluate(&(), c.message.clone()).unwrap();
    let packed: Vec<Fr> = digest.chunks(31).map(Fr::from_le_bytes_mod_order).collect();
    assert_eq!(c.public_inputs(), packed, "testkit helper packs like the circuit");
    assert_eq!(syn.public_inputs(), &packed[..], "digest packed 31 bytes per element");
    assert_eq!(syn.counts().instance, 3, "two packed digest elements and the constant 1");
    // A bit-decomposed circuit: nearly every variable is 0 or 1.
    assert!(syn.density.num_other() * 10 < syn.density.len(), "{:?}", syn.density.num_other());
}

#[test]
fn merkle_path_matches_arkworks() {
    let mut rng = seeded_rng("merkle_path_matches_arkworks");
    let path = (0..3).map(|_| (Fr::rand(&mut rng), rng.gen())).collect();
    let c = MerklePath { params: poseidon_config(), leaf: Fr::rand(&mut rng), path };
    let syn = check("merkle_path", c.clone());
    assert_eq!(syn.public_inputs(), &[c.root()]);
}

fn config(test: &str, cases: u32) -> Config {
    cuzk_testkit::proptest_config(test, cases)
}

/// Synthetic circuits of every small shape: up to 300 constraints (rows cross 2^6..2^8 boundaries) and
/// up to 8 public inputs (0 exercises the constant-1 branch of the circuit), and a share of bit rows
/// from none to all (1000 per mille), with the ends weighted up.
fn synthetic() -> impl Strategy<Value = Synthetic> {
    let share = prop_oneof![Just(0u16), Just(1000u16), 0u16..=1000];
    (0usize..=300, 0usize..=8, any::<u64>(), prop::bool::weighted(0.2), share).prop_map(
        |(constraints, public_inputs, seed, zero_witness, bit_share_per_mille)| Synthetic {
            constraints,
            public_inputs,
            seed,
            zero_witness,
            bit_share_per_mille,
        },
    )
}

proptest! {
    #![proptest_config(config("synthetic_shapes_match_arkworks", 96))]
    #[test]
    fn synthetic_shapes_match_arkworks(c in synthetic()) {
        let syn = check(&format!("{c:?}"), c);
        prop_assert_eq!(syn.public_inputs(), &c.public_input_values()[..]);
    }
}

/// Values from {0, 1, other}, in vectors whose lengths straddle the 64-bit words of the bitmaps.
fn density_values() -> impl Strategy<Value = Vec<Fr>> {
    let value =
        prop_oneof![Just(Fr::zero()), Just(Fr::one()), Just(-Fr::one()), any::<u64>().prop_map(Fr::from)];
    vec(value, 0..=200)
}

proptest! {
    #![proptest_config(config("density_classifies_every_value", 128))]
    #[test]
    fn density_classifies_every_value(values in density_values()) {
        assert_density("Density::of", &Density::of(&values), &values);
    }
}

// ---------------------------------------------------------------------------------------------------
// synthesize_all
// ---------------------------------------------------------------------------------------------------

#[test]
fn synthesize_all_keeps_order() {
    // Distinct shapes, so a permutation would show in the counts.
    let circuits: Vec<Synthetic> = (0..12)
        .map(|i| Synthetic {
            constraints: 10 * i + (i % 3),
            public_inputs: i % 4,
            seed: i as u64,
            zero_witness: i == 5,
            bit_share_per_mille: 0,
        })
        .collect();
    let results = synthesize_all(circuits.clone(), &SynthesisOptions::default());
    assert_eq!(results.len(), circuits.len());
    for (i, (c, result)) in circuits.iter().zip(results).enumerate() {
        let syn = result.unwrap_or_else(|e| panic!("circuit {i}: {e}"));
        assert_eq!(syn.counts().constraints, c.constraints, "circuit {i}");
        assert_eq!(syn.counts().instance, c.public_inputs + 1, "circuit {i}");
        assert_matches_reference(&format!("synthesize_all[{i}]"), &syn, &reference(*c), true);
    }
}

#[test]
fn synthesize_all_reports_errors_in_place() {
    // `bad` past the last constraint leaves the circuit honest.
    let circuits: Vec<Unsatisfied> = [(20, usize::MAX), (30, 7), (5, 0), (40, usize::MAX), (25, 24), (1, 5)]
        .into_iter()
        .map(|(constraints, bad)| Unsatisfied { inner: Synthetic::new(constraints, bad as u64), bad })
        .collect();
    let results = synthesize_all(circuits.clone(), &SynthesisOptions::default());
    assert_eq!(results.len(), circuits.len());
    for (i, (c, result)) in circuits.iter().zip(&results).enumerate() {
        if c.bad < c.inner.constraints {
            assert_eq!(
                result.as_ref().unwrap_err(),
                &SynthError::Unsatisfied { index: c.bad, num_constraints: c.inner.constraints },
                "circuit {i}"
            );
        } else {
            let syn = result.as_ref().unwrap_or_else(|e| panic!("circuit {i}: {e}"));
            assert_eq!(syn.counts().constraints, c.inner.constraints, "circuit {i}");
        }
    }
    assert!(synthesize_all(Vec::<Synthetic>::new(), &SynthesisOptions::default()).is_empty());
}

// ---------------------------------------------------------------------------------------------------
// Bad inputs
// ---------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config("unsatisfied_constraint_is_named", 32))]
    /// With the check on, the corrupted constraint is named; with it off, synthesis succeeds and the
    /// evaluations still equal arkworks', with exactly that row unsatisfied.
    #[test]
    fn unsatisfied_constraint_is_named(
        (constraints, bad) in (1usize..=200).prop_flat_map(|n| (Just(n), 0..n)),
        public_inputs in 1usize..=4,
        seed in any::<u64>(),
    ) {
        let c = Unsatisfied { inner: Synthetic { constraints, public_inputs, seed, zero_witness: false, bit_share_per_mille: 0 }, bad };
        let err = synthesize(c, &SynthesisOptions::default()).unwrap_err();
        prop_assert_eq!(err, SynthError::Unsatisfied { index: bad, num_constraints: constraints });

        let syn = synthesize(c, &SynthesisOptions { check_satisfied: false }).unwrap();
        assert_matches_reference(&format!("{c:?}"), &syn, &reference(c), false);
        let bad_rows: Vec<usize> = (0..constraints).filter(|&i| syn.a[i] * syn.b[i] != syn.c[i]).collect();
        prop_assert_eq!(bad_rows, vec![bad]);
    }
}

#[test]
fn honest_unsatisfied_wrapper_matches_synthetic() {
    // `Unsatisfied` with nothing corrupted is satisfied and has its `inner`'s shape and public inputs.
    let inner = Synthetic {
        constraints: 50,
        public_inputs: 3,
        seed: 77,
        zero_witness: false,
        bit_share_per_mille: 0,
    };
    let honest = check("honest Unsatisfied", Unsatisfied { inner, bad: usize::MAX });
    let plain = check("Synthetic", inner);
    assert_eq!(honest.counts(), plain.counts());
    assert_eq!(honest.public_inputs(), plain.public_inputs());
    // Not compared: the witness. `Unsatisfied` starts its chain at 3 rather than at `Synthetic`'s
    // seeded start, so the two witnesses differ although the shapes agree.
}

#[test]
fn failing_circuit_reports_the_circuit_error() {
    for options in [SynthesisOptions::default(), SynthesisOptions { check_satisfied: false }] {
        let err = synthesize(FailingCircuit, &options).unwrap_err();
        assert_eq!(err, SynthError::Circuit(SynthesisError::AssignmentMissing), "{options:?}");
        let all = synthesize_all(vec![FailingCircuit; 3], &options);
        assert_eq!(all.len(), 3);
        for r in all {
            assert_eq!(r.unwrap_err(), SynthError::Circuit(SynthesisError::AssignmentMissing), "{options:?}");
        }
    }
}
