//! Property tests: corrupted key files are refused with the right error, never a key, never a panic.
//!
//! Every test takes its proptest seed from `cuzk_testkit::seeded_rng`, so
//! `CUZK_TEST_SEED=<seed printed by the failing test>` replays a failure.

mod common;

use common::{key_bytes, small_key, store};
use cuzk_keystore::checksum::payload_checksum;
use cuzk_keystore::{decode_key, Counts, Error, Header, ShapeId, FORMAT_VERSION, HEADER_LEN};
use cuzk_testkit::seeded_rng;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use rand::RngCore;

const SHAPE: &str = "synthetic-200";

/// `cases` cases, seeded (and the seed printed) by `seeded_rng(test)`, no regression files.
fn config(test: &str, cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(seeded_rng(test).next_u64()),
        failure_persistence: None,
        ..Config::default()
    }
}

fn outcome(result: Result<impl Sized, Error>) -> String {
    match result {
        Ok(_) => "Ok(a key)".into(),
        Err(e) => format!("Err({e})"),
    }
}

/// The error a flipped byte at `pos` must give.
fn flip_error_matches(pos: usize, err: &Error) -> bool {
    match err {
        Error::BadMagic { .. } => pos < 6,
        Error::UnsupportedVersion { .. } => (6..10).contains(&pos),
        Error::HeaderChecksum { .. } => (10..HEADER_LEN).contains(&pos),
        Error::ChecksumMismatch { .. } => pos >= HEADER_LEN,
        _ => false,
    }
}

#[test]
fn a_flipped_byte_anywhere_is_refused() {
    let bytes = key_bytes(SHAPE, &small_key("flip"));
    // Any position (the header is ~0.2% of the file, so a third of the cases aim at it) and any
    // nonzero XOR mask, so every kind of single-byte damage is reachable.
    let position = prop_oneof![0..HEADER_LEN, 0..bytes.len()];
    TestRunner::new(config("a_flipped_byte_anywhere_is_refused", 512))
        .run(&(position, 1u8..=255), |(pos, mask)| {
            let mut bad = bytes.clone();
            bad[pos] ^= mask;
            let result = decode_key(&bad, SHAPE);
            let ok = matches!(&result, Err(e) if flip_error_matches(pos, e));
            prop_assert!(ok, "byte {} ^= {:#04x}: {}", pos, mask, outcome(result));
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_truncated_file_is_refused() {
    let bytes = key_bytes(SHAPE, &small_key("truncate"));
    let len = prop_oneof![0..HEADER_LEN + 1, 0..bytes.len()];
    TestRunner::new(config("a_truncated_file_is_refused", 512))
        .run(&len, |len| {
            let result = decode_key(&bytes[..len], SHAPE);
            let ok = matches!(&result, Err(Error::Truncated { found, .. }) if *found == len as u64);
            prop_assert!(ok, "truncated to {}: {}", len, outcome(result));
            Ok(())
        })
        .unwrap();
}

#[test]
fn damaged_files_on_disk_are_refused() {
    let bytes = key_bytes(SHAPE, &small_key("disk"));
    let (_dir, store) = store("disk");
    let path = store.path_for(SHAPE).unwrap();
    // Fewer cases: each writes and reads a file. `flip = false` truncates at `pos` instead.
    TestRunner::new(config("damaged_files_on_disk_are_refused", 32))
        .run(&(0..bytes.len(), 1u8..=255, any::<bool>()), |(pos, mask, flip)| {
            let mut bad = bytes.clone();
            if flip {
                bad[pos] ^= mask;
            } else {
                bad.truncate(pos);
            }
            std::fs::write(&path, &bad).unwrap();
            let result = store.load(SHAPE);
            let ok = match &result {
                Err(e) if flip => flip_error_matches(pos, e),
                Err(Error::Truncated { found, .. }) => *found == pos as u64,
                _ => false,
            };
            prop_assert!(ok, "flip {} at {}: {}", flip, pos, outcome(result));
            Ok(())
        })
        .unwrap();
}

#[test]
fn arbitrary_bytes_never_panic() {
    TestRunner::new(config("arbitrary_bytes_never_panic", 256))
        .run(&vec(any::<u8>(), 0..2 * HEADER_LEN), |mut bytes| {
            // Half the cases start with the magic and version, to get past the first checks.
            if bytes.len() >= 10 && bytes[0] % 2 == 0 {
                bytes[..6].copy_from_slice(b"CUZKPK");
                bytes[6..10].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
            }
            prop_assert!(decode_key(&bytes, SHAPE).is_err());
            Ok(())
        })
        .unwrap();
}

#[test]
fn random_points_under_valid_checksums_decode_or_are_named() {
    // A well-formed header with correct checksums over random point records: the limbs are the only
    // thing left to check. Random 384-bit limbs are above the 381-bit modulus with probability ~7/8,
    // so both outcomes occur; either way there is no panic. Up to 8 points per vector keeps cases fast.
    let counts = (0u64..8, 0u64..8, 0u64..8, 0u64..8, 0u64..8, 0u64..8);
    TestRunner::new(config("random_points_under_valid_checksums_decode_or_are_named", 128))
        .run(&(counts, any::<u64>()), |((a, b1, b2, h, l, abc), seed)| {
            let counts = Counts {
                a_query: a,
                b_g1_query: b1,
                b_g2_query: b2,
                h_query: h,
                l_query: l,
                gamma_abc_g1: abc,
            };
            let mut payload = vec![0u8; counts.payload_len() as usize];
            let mut state = seed;
            for b in payload.iter_mut() {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                *b = (state >> 56) as u8;
            }
            let header = Header {
                version: FORMAT_VERSION,
                shape_id: ShapeId::new(SHAPE).unwrap(),
                counts,
                payload_len: payload.len() as u64,
                payload_checksum: payload_checksum(&payload),
            };
            let mut bytes = header.to_bytes();
            bytes.extend_from_slice(&payload);
            let result = decode_key(&bytes, SHAPE);
            prop_assert!(matches!(&result, Ok(_) | Err(Error::BadPoint { .. })), "{}", outcome(result));
            Ok(())
        })
        .unwrap();
}
