//! The compact assignment against the full one: what a device expands must be `z` bit for bit, on
//! every workload circuit, on random assignments of awkward lengths, and on refusals.

use ark_bls12_381::Fr;
use ark_ff::{One, UniformRand, Zero};
use ark_relations::gr1cs::ConstraintSynthesizer;
use cuzk_circuits::PorepLike;
use cuzk_synth::{
    synthesize, synthesize_compact, CompactWitness, Counts, Density, R1csShape, SynthError, SynthesisOptions,
};
use cuzk_testkit::{seeded_rng, Sha256Preimage, Synthetic, WeightedRows};
use proptest::prelude::*;
use rand::{Rng, RngCore};

/// Synthesizes `circuit` in full and compactly against `shape_of`'s shape; the compact form must
/// expand to the full assignment, with the same density and public inputs.
fn assert_compact_matches<C: ConstraintSynthesizer<Fr> + Clone>(name: &str, shape_of: C, circuit: C) {
    let shape = R1csShape::record(shape_of).unwrap_or_else(|e| panic!("{name}: record: {e}"));
    let full = synthesize(circuit.clone(), &SynthesisOptions::default()).unwrap();
    let compact =
        synthesize_compact(circuit, shape.counts()).unwrap_or_else(|e| panic!("{name}: compact: {e}"));
    assert_eq!(compact.counts(), full.counts(), "{name}: counts");
    assert_eq!(compact.expand(), full.assignment, "{name}: expanded z");
    assert_eq!(compact.density(), &full.density, "{name}: density");
    assert_eq!(compact.public_inputs(), full.public_inputs(), "{name}: public inputs");
    assert_eq!(compact.others().len(), full.density.num_other(), "{name}: packed values");
    let bound = CompactWitness::peak_bytes(full.counts());
    assert!(compact.host_bytes() <= bound, "{name}: {} over the peak {bound}", compact.host_bytes());
}

#[test]
fn porep_like_partitions_expand_to_their_assignment() {
    let mut rng = seeded_rng("porep_like_partitions_expand_to_their_assignment");
    let small_sha = cuzk_testkit::small_sha_porep();
    for params in [PorepLike::params_for_log_constraints(12).unwrap(), small_sha] {
        let seed = rng.next_u64();
        let first = PorepLike::new(params, seed, 0).unwrap();
        for p in [0, 5] {
            let circuit = PorepLike::new(params, seed ^ 9, p).unwrap();
            assert_compact_matches(&format!("{params:?} partition {p}"), first, circuit);
        }
    }
    // A SHA-256 circuit is mostly bits: the compact form is a small fraction of z.
    let message =
        |rng: &mut rand::rngs::StdRng| Sha256Preimage { message: (0..55).map(|_| rng.gen()).collect() };
    let circuit = message(&mut rng);
    let shape = R1csShape::record(message(&mut rng)).unwrap();
    let compact = synthesize_compact(circuit, shape.counts()).unwrap();
    let full_bytes = 32 * compact.counts().variables() as u64;
    assert!(compact.host_bytes() * 4 < full_bytes, "{} of {full_bytes}", compact.host_bytes());
}

#[test]
fn rows_with_large_and_negative_coefficients_expand_to_their_assignment() {
    let mut rng = seeded_rng("rows_with_large_and_negative_coefficients_expand_to_their_assignment");
    for rows in [1, 63, 64, 65, 1000] {
        let (a, b) =
            (WeightedRows { rows, seed: rng.next_u64() }, WeightedRows { rows, seed: rng.next_u64() });
        assert_compact_matches(&format!("weighted rows {rows}"), a, b);
    }
}

#[test]
fn a_circuit_of_other_counts_is_refused() {
    let small = Synthetic {
        constraints: 10,
        public_inputs: 1,
        seed: 1,
        zero_witness: false,
        bit_share_per_mille: 500,
    };
    let shape = R1csShape::record(small).unwrap();
    let err = synthesize_compact(Synthetic { constraints: 11, ..small }, shape.counts()).unwrap_err();
    assert!(matches!(err, SynthError::ShapeMismatch { what: "witness variables", .. }), "{err}");
    let err = synthesize_compact(Synthetic { public_inputs: 2, ..small }, shape.counts()).unwrap_err();
    assert!(matches!(err, SynthError::ShapeMismatch { what: "instance variables", .. }), "{err}");
    let counts = Counts { constraints: 3, instance: 2, witness: 4 };
    let err = CompactWitness::encode(counts, &[Fr::one(); 5]).unwrap_err();
    assert!(matches!(err, SynthError::ShapeMismatch { shape: 4, circuit: 3, .. }), "{err}");
    let err = CompactWitness::encode(counts, &[Fr::one(); 1]).unwrap_err();
    assert!(matches!(err, SynthError::ShapeMismatch { .. }), "{err}");
}

/// A random assignment of `len` entries, each 0, 1 or random with the given odds (per mille).
fn random_z(rng: &mut impl Rng, len: usize, zeros: u32, ones: u32) -> Vec<Fr> {
    (0..len)
        .map(|_| match rng.gen_range(0..1000) {
            x if x < zeros => Fr::zero(),
            x if x < zeros + ones => Fr::one(),
            _ => Fr::rand(rng),
        })
        .collect()
}

#[test]
fn awkward_lengths_round_trip() {
    let mut rng = seeded_rng("awkward_lengths_round_trip");
    // Around the 64-entry words and the 1024-word blocks that pack in parallel.
    let lengths = [1usize, 2, 63, 64, 65, 127, 128, 129, 65_535, 65_536, 65_537, 3 * 65_536 + 7];
    for len in lengths {
        for (zeros, ones) in [(0, 0), (1000, 0), (0, 1000), (450, 450), (300, 300), (5, 5)] {
            let z = random_z(&mut rng, len, zeros, ones);
            let instance = rng.gen_range(1..=len.min(4));
            let counts = Counts { constraints: 0, instance, witness: len - instance };
            let c = CompactWitness::encode(counts, &z).unwrap();
            let what = format!("len {len}, zeros {zeros}, ones {ones}");
            assert_eq!(c.expand(), z, "{what}");
            let owned = CompactWitness::encode_owned(counts, z[..instance].to_vec(), z[instance..].to_vec());
            assert_eq!(&owned.unwrap(), &c, "{what}: packed in place");
            assert_eq!(c.density(), &Density::of(&z), "{what}");
            assert_eq!(c.instance(), &z[..instance], "{what}");
            assert_eq!(c.ranks().len(), len.div_ceil(64), "{what}");
            for (w, &rank) in c.ranks().iter().enumerate() {
                let before = (0..w * 64).filter(|&i| !z[i].is_zero() && !z[i].is_one()).count();
                assert_eq!(rank as usize, before, "{what}: rank of word {w}");
            }
        }
    }
}

proptest! {
    #![proptest_config(cuzk_testkit::proptest_config("random_assignments_round_trip", 64))]
    #[test]
    fn random_assignments_round_trip(len in 1usize..700, seed in any::<u64>(), zeros in 0u32..=1000, ones in 0u32..=1000) {
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
        let ones = ones.min(1000 - zeros);
        let z = random_z(&mut rng, len, zeros, ones);
        let counts = Counts { constraints: 1, instance: 1, witness: len - 1 };
        let c = CompactWitness::encode(counts, &z).unwrap();
        prop_assert_eq!(c.expand(), z.clone());
        let owned = CompactWitness::encode_owned(counts, z[..1].to_vec(), z[1..].to_vec());
        prop_assert_eq!(&owned.unwrap(), &c);
        prop_assert_eq!(c.others().len(), Density::of(&z).num_other());
    }
}
