//! One test per way a key file can be wrong: each is refused with the error that names it.

mod common;

use common::{key_bytes, store, tiny_key};
use cuzk_keystore::checksum::{payload_checksum, xxh64};
use cuzk_keystore::{
    decode_key, read_key, Error, Header, KeyStore, PointProblem, FORMAT_VERSION, HEADER_LEN,
};

const SHAPE: &str = "shape-a";

fn tiny_file(test: &str) -> Vec<u8> {
    key_bytes(SHAPE, &tiny_key(test))
}

/// Rewrites the header checksum after a deliberate header edit.
fn reseal_header(bytes: &mut [u8]) {
    let sum = xxh64(&bytes[..HEADER_LEN - 8], 0);
    bytes[HEADER_LEN - 8..HEADER_LEN].copy_from_slice(&sum.to_le_bytes());
}

#[test]
fn a_foreign_file_has_bad_magic() {
    let (_dir, store) = store("magic");
    let path = store.path_for(SHAPE).unwrap();
    std::fs::write(&path, b"PK\x03\x04 a zip file, not a key").unwrap();
    let err = store.load(SHAPE).unwrap_err();
    assert!(matches!(&err, Error::BadMagic { found } if found == "PK\\x03\\x04 a"), "{err}");
    assert!(err.to_string().contains("not a cuzk proving key"), "{err}");

    let mut bytes = tiny_file("magic");
    bytes[5] = b'Q';
    assert!(matches!(decode_key(&bytes, SHAPE), Err(Error::BadMagic { .. })));
    assert!(matches!(decode_key(b"CUZ", SHAPE), Err(Error::Truncated { .. })), "a prefix of the magic");
    assert!(matches!(decode_key(b"XYZ", SHAPE), Err(Error::BadMagic { .. })));
}

#[test]
fn another_version_is_unsupported() {
    let mut bytes = tiny_file("version");
    bytes[6..10].copy_from_slice(&2u32.to_le_bytes());
    // Not resealed: the version is checked first, since another version may lay its header out otherwise.
    let err = decode_key(&bytes, SHAPE).unwrap_err();
    assert!(matches!(err, Error::UnsupportedVersion { found: 2, supported: FORMAT_VERSION }), "{err}");
    // Even when the rest of a newer header is shorter than ours.
    assert!(matches!(decode_key(&bytes[..20], SHAPE), Err(Error::UnsupportedVersion { found: 2, .. })));
}

#[test]
fn a_key_for_another_shape_is_refused() {
    let (_dir, store) = store("shape");
    store.save(SHAPE, &tiny_key("shape")).unwrap();
    let path = store.path_for(SHAPE).unwrap();
    let err = read_key(&path, "shape-b").unwrap_err();
    assert!(
        matches!(&err, Error::ShapeMismatch { expected, found } if expected.as_str() == "shape-b" && found.as_str() == SHAPE),
        "{err}"
    );
    // A key file copied under another shape's name is refused too.
    std::fs::copy(&path, store.path_for("shape-b").unwrap()).unwrap();
    assert!(matches!(store.load("shape-b"), Err(Error::ShapeMismatch { .. })));
}

#[test]
fn every_truncation_is_refused() {
    let bytes = tiny_file("truncate");
    for len in 0..bytes.len() {
        match decode_key(&bytes[..len], SHAPE) {
            Err(Error::Truncated { found, .. }) => assert_eq!(found, len as u64),
            other => panic!("truncated to {len} bytes: {:?}", other.map(|_| "a key")),
        }
    }
    let (dir, store) = store("truncate-file");
    for len in [0, 3, 100, HEADER_LEN, HEADER_LEN + 1, bytes.len() - 1] {
        let path = store.path_for(SHAPE).unwrap();
        std::fs::write(&path, &bytes[..len]).unwrap();
        let err = store.load(SHAPE).unwrap_err();
        assert!(matches!(err, Error::Truncated { found, .. } if found == len as u64), "{len}: {err}");
    }
    drop(dir);
}

#[test]
fn trailing_garbage_is_refused() {
    let mut bytes = tiny_file("trailing");
    let len = bytes.len() as u64;
    bytes.push(0);
    let err = decode_key(&bytes, SHAPE).unwrap_err();
    assert!(
        matches!(err, Error::TrailingBytes { expected, found } if expected == len && found == len + 1),
        "{err}"
    );
    bytes.extend_from_slice(&[0xab; 4096]);
    let (_dir, store) = store("trailing");
    std::fs::write(store.path_for(SHAPE).unwrap(), &bytes).unwrap();
    let err = store.load(SHAPE).unwrap_err();
    assert!(err.to_string().contains("4097 bytes of trailing garbage"), "{err}");
}

#[test]
fn any_flipped_payload_byte_fails_the_checksum() {
    let bytes = tiny_file("flip");
    for pos in HEADER_LEN..bytes.len() {
        let mut bad = bytes.clone();
        bad[pos] ^= 0x10;
        match decode_key(&bad, SHAPE) {
            Err(Error::ChecksumMismatch { stored, computed }) => assert_ne!(stored, computed),
            other => panic!("byte {pos} flipped: {:?}", other.map(|_| "a key")),
        }
    }
}

#[test]
fn any_flipped_header_byte_is_refused() {
    let bytes = tiny_file("flip-header");
    for pos in 0..HEADER_LEN {
        let mut bad = bytes.clone();
        bad[pos] ^= 0x01;
        match decode_key(&bad, SHAPE) {
            Err(Error::BadMagic { .. }) => assert!(pos < 6),
            Err(Error::UnsupportedVersion { .. }) => assert!((6..10).contains(&pos)),
            Err(Error::HeaderChecksum { .. }) => assert!(pos >= 10),
            other => panic!("header byte {pos} flipped: {:?}", other.map(|_| "a key")),
        }
    }
}

#[test]
fn counts_that_do_not_match_the_payload_length_are_refused() {
    let bytes = tiny_file("counts");
    let header = Header::parse(&bytes).unwrap();
    let mut wrong = header.clone();
    wrong.counts.a_query += 1;
    let mut bad = wrong.to_bytes();
    bad.extend_from_slice(&bytes[HEADER_LEN..]);
    let err = decode_key(&bad, SHAPE).unwrap_err();
    assert!(
        matches!(&err, Error::CountsMismatch { implied, stated, .. } if *implied == u128::from(header.payload_len) + 96 && *stated == header.payload_len),
        "{err}"
    );
    let named = format!("a_query {}", header.counts.a_query + 1);
    assert!(err.to_string().contains(&named), "{err}");

    // Counts far too large for any file: refused before anything is allocated.
    wrong.counts.h_query = u64::MAX;
    let mut bad = wrong.to_bytes();
    bad.extend_from_slice(&bytes[HEADER_LEN..]);
    assert!(matches!(decode_key(&bad, SHAPE), Err(Error::CountsMismatch { .. })));

    // Consistent counts that promise more than the file holds: truncated.
    let mut longer = header.clone();
    longer.counts.l_query += 1000;
    longer.payload_len += 96 * 1000;
    let mut bad = longer.to_bytes();
    bad.extend_from_slice(&bytes[HEADER_LEN..]);
    assert!(matches!(decode_key(&bad, SHAPE), Err(Error::Truncated { .. })));
}

#[test]
fn unreduced_limbs_under_a_valid_checksum_name_the_point() {
    let mut bytes = tiny_file("limbs");
    // a_query[1]'s x coordinate becomes all ones; checksums are recomputed, as a faulty writer would.
    let start = HEADER_LEN + 3 * 96 + 3 * 192 + 96;
    bytes[start..start + 48].fill(0xff);
    let mut header = Header::parse(&bytes).unwrap();
    header.payload_checksum = payload_checksum(&bytes[HEADER_LEN..]);
    bytes[..HEADER_LEN].copy_from_slice(&header.to_bytes());
    let err = decode_key(&bytes, SHAPE).unwrap_err();
    assert!(
        matches!(
            err,
            Error::BadPoint {
                section: "a_query",
                index: 1,
                problem: PointProblem::NotReduced { coordinate: 0 }
            }
        ),
        "{err}"
    );
}

#[test]
fn invalid_shape_ids_are_refused_everywhere() {
    let (_dir, store) = store("shape-ids");
    let pk = tiny_key("shape-ids");
    for bad in ["", "../escape", "a/b", "/abs", "sp ace", "nul\0", &"x".repeat(65)] {
        let is_invalid = |r: Result<(), Error>| matches!(r, Err(Error::InvalidShapeId { .. }));
        assert!(is_invalid(store.save(bad, &pk).map(drop)), "{bad:?}");
        assert!(is_invalid(store.load(bad).map(drop)), "{bad:?}");
        assert!(is_invalid(store.contains(bad).map(drop)), "{bad:?}");
        assert!(is_invalid(store.path_for(bad).map(drop)), "{bad:?}");
        assert!(is_invalid(decode_key(&tiny_file("shape-ids"), bad).map(drop)), "{bad:?}");
        let mut sink = std::io::Cursor::new(Vec::new());
        assert!(is_invalid(cuzk_keystore::write_key(&mut sink, bad, &pk).map(drop)), "{bad:?}");
    }
    assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 0, "nothing was written");
    // `..` is a valid id, and still names a file inside the store.
    assert_eq!(store.path_for("..").unwrap(), store.dir().join("...cuzkpk"));

    // A header whose shape id breaks the rule (resealed, as a faulty writer would).
    let mut bytes = tiny_file("shape-ids");
    bytes[16 + 2] = b'/';
    reseal_header(&mut bytes);
    let err = decode_key(&bytes, SHAPE).unwrap_err();
    assert!(matches!(&err, Error::InvalidShapeId { shape_id, .. } if shape_id == "sh/pe-a"), "{err}");
}

#[test]
fn a_missing_key_is_not_found() {
    let (dir, store) = store("missing");
    let err = store.load("absent").unwrap_err();
    assert!(matches!(&err, Error::NotFound { path } if *path == store.path_for("absent").unwrap()), "{err}");
    assert!(matches!(read_key(dir.path().join("nope.cuzkpk"), "nope"), Err(Error::NotFound { .. })));
}

#[test]
fn a_failed_save_leaves_nothing_behind() {
    let dir = common::TempDir::new("failed-save");
    let store = KeyStore::open(dir.path().join("gone")).unwrap();
    std::fs::remove_dir(store.dir()).unwrap();
    let err = store.save(SHAPE, &tiny_key("failed-save")).unwrap_err();
    assert!(matches!(err, Error::Io { op: "create", .. }), "{err}");
    assert!(!store.dir().exists());
}

#[test]
fn a_fifo_or_a_directory_is_refused_without_being_opened() {
    let (_dir, store) = store("fifo");
    let key = store.path_for(SHAPE).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&key).status().expect("mkfifo runs");
    assert!(made.success());
    let shape = store.shape_path_for(SHAPE).unwrap();
    std::fs::create_dir(&shape).unwrap();
    // Opening a FIFO for reading waits for a writer: the loads run on a thread, so a regression shows
    // as a timeout rather than a hung test.
    let (tx, rx) = std::sync::mpsc::channel();
    let s = store.clone();
    std::thread::spawn(move || {
        let _ = tx.send((s.load(SHAPE).err(), s.load_shape(SHAPE).err()));
    });
    let (key_err, shape_err) =
        rx.recv_timeout(std::time::Duration::from_secs(10)).expect("the loads return instead of blocking");
    let key_err = key_err.expect("a FIFO is no key");
    assert!(matches!(&key_err, Error::NotAFile { what: "a FIFO", path } if *path == key), "{key_err}");
    assert!(key_err.to_string().contains("is a FIFO, not a regular file"), "{key_err}");
    let shape_err = shape_err.expect("a directory is no shape");
    assert!(matches!(&shape_err, Error::NotAFile { what: "a directory", .. }), "{shape_err}");
}

#[test]
fn temporary_files_of_a_killed_save_are_removed_and_live_ones_kept() {
    let (_dir, store) = store("temps");
    let dir = store.dir();
    // No process has this id (ids are at most 2^22 on Linux).
    let dead = dir.join(format!(".{SHAPE}.cuzkpk.tmp-{}-0", u32::MAX - 1));
    let dead_shape = dir.join(format!(".{SHAPE}.cuzkrs.tmp-{}-3", u32::MAX - 1));
    let ours = dir.join(format!(".{SHAPE}.cuzkpk.tmp-{}-7", std::process::id()));
    let foreign = dir.join(format!(".notes.txt.tmp-{}-0", u32::MAX - 1));
    for p in [&dead, &dead_shape, &ours, &foreign] {
        std::fs::write(p, b"partial").unwrap();
    }
    let mut removed = store.remove_stale_temps().unwrap();
    removed.sort();
    let mut expected = vec![dead.clone(), dead_shape.clone()];
    expected.sort();
    assert_eq!(removed, expected);
    assert!(!dead.exists() && !dead_shape.exists());
    assert!(ours.exists(), "a temporary file of a live process stays");
    assert!(foreign.exists(), "a file the store did not name stays");
    assert!(store.remove_stale_temps().unwrap().is_empty());
}
