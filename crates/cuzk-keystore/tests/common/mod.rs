//! Helpers shared by the integration tests: scratch directories and small keys.
#![allow(dead_code)]

use ark_bls12_381::{Bls12_381, Fr};
use ark_groth16::ProvingKey;
use cuzk_keystore::{write_key, KeyStore};
use cuzk_testkit::{keygen, seeded_rng, OneConstraint, Synthetic};

pub use cuzk_testkit::TempDir;

/// The key of [`OneConstraint`]: 1.4 KB on disk, small enough to corrupt at every byte.
pub fn tiny_key(test: &str) -> ProvingKey<Bls12_381> {
    keygen(OneConstraint { x: Fr::from(3u64) }, &mut seeded_rng(test))
}

/// The key of a 200-constraint [`Synthetic`] circuit (about 100 KB on disk).
pub fn small_key(test: &str) -> ProvingKey<Bls12_381> {
    keygen(Synthetic::new(200, 1), &mut seeded_rng(test))
}

/// `pk` as key file bytes for `shape_id`.
pub fn key_bytes(shape_id: &str, pk: &ProvingKey<Bls12_381>) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    write_key(&mut out, shape_id, pk).expect("write key");
    out.into_inner()
}

/// A store in a fresh directory.
pub fn store(test: &str) -> (TempDir, KeyStore) {
    let dir = TempDir::new(test);
    let store = KeyStore::open(dir.path().join("keys")).expect("open store");
    (dir, store)
}
