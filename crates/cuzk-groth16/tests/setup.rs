//! Key generation against ark-groth16's generator: the same seed gives the same key, byte for
//! byte, on awkward sizes and on circuits with several public inputs; a raised stop flag ends it.

use std::sync::atomic::{AtomicUsize, Ordering};

use ark_bls12_381::Bls12_381;
use ark_groth16::Groth16;
use ark_serialize::CanonicalSerialize;
use cuzk_groth16::{generate_key, SetupError};
use cuzk_testkit::{OneConstraint, Synthetic};
use rand::{rngs::StdRng, SeedableRng};

fn bytes(pk: &ark_groth16::ProvingKey<Bls12_381>) -> Vec<u8> {
    let mut b = Vec::new();
    pk.serialize_uncompressed(&mut b).unwrap();
    b
}

fn same_key_as_ark<C: ark_relations::gr1cs::ConstraintSynthesizer<ark_bls12_381::Fr> + Clone>(
    c: C,
    seed: u64,
) {
    let ours = generate_key(c.clone(), &mut StdRng::seed_from_u64(seed), &|| false).expect("generated");
    let ark =
        Groth16::<Bls12_381>::generate_random_parameters_with_reduction(c, &mut StdRng::seed_from_u64(seed))
            .unwrap();
    assert!(bytes(&ours) == bytes(&ark), "seed {seed}: the keys differ");
}

#[test]
fn the_same_seed_gives_ark_groth16s_key() {
    let fresh = rand::random::<u64>();
    for (log_rows, seed) in [(2, 1), (5, 7), (9, fresh), (11, fresh ^ 1)] {
        same_key_as_ark(Synthetic::with_log_rows(log_rows, seed), seed);
    }
    same_key_as_ark(Synthetic::with_log_rows(8, 2).with_bit_share(500), fresh);
    same_key_as_ark(OneConstraint { x: ark_bls12_381::Fr::from(3u64) }, fresh);
}

#[test]
fn a_raised_stop_flag_ends_generation() {
    let c = Synthetic::with_log_rows(12, 3);
    let err = generate_key(c, &mut StdRng::seed_from_u64(1), &|| true).unwrap_err();
    assert!(matches!(err, SetupError::Stopped), "{err}");
    // Raised part way, in the scalar multiplications: it still stops, without finishing the key.
    let looks = AtomicUsize::new(0);
    let stop = || looks.fetch_add(1, Ordering::Relaxed) >= 6;
    let err = generate_key(c, &mut StdRng::seed_from_u64(1), &stop).unwrap_err();
    assert!(matches!(err, SetupError::Stopped), "{err}");
    assert_eq!(looks.load(Ordering::Relaxed), 7, "stopped at the first look after the flag rose");
}
