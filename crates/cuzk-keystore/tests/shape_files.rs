//! Recorded R1CS shapes on disk: round trips, and a typed refusal for every way a file can be wrong.

use cuzk_keystore::checksum::{payload_checksum, xxh64};
use cuzk_keystore::{
    decode_shape, read_shape, write_shape, Error, KeyStore, SHAPE_FORMAT_VERSION, SHAPE_HEADER_LEN,
};
use cuzk_synth::{R1csShape, ShapeProblem};
use cuzk_testkit::{MerklePath, Synthetic, TempDir};

fn shape() -> R1csShape {
    R1csShape::record(Synthetic::new(40, 3).with_bit_share(300)).unwrap()
}

fn bytes_of(id: &str, s: &R1csShape) -> Vec<u8> {
    let mut out = Vec::new();
    write_shape(&mut out, id, s).unwrap();
    out
}

/// Recomputes both checksums after an edit, so only the edited field is wrong.
fn reseal(bytes: &mut [u8]) {
    let payload = payload_checksum(&bytes[SHAPE_HEADER_LEN..]);
    bytes[144..152].copy_from_slice(&payload.to_le_bytes());
    let header = xxh64(&bytes[..152], 0);
    bytes[152..160].copy_from_slice(&header.to_le_bytes());
}

/// A store in a fresh directory, removed when the first is dropped.
fn temp_store(test: &str) -> (TempDir, KeyStore) {
    let dir = TempDir::new(&format!("shape-files-{test}"));
    let store = KeyStore::open(dir.join("keys")).unwrap();
    (dir, store)
}

#[test]
fn shapes_round_trip_through_the_store() {
    let (_dir, store) = temp_store("round_trip");
    let merkle = MerklePath {
        params: cuzk_testkit::poseidon_config(),
        leaf: 1u64.into(),
        path: vec![(2u64.into(), true), (3u64.into(), false)],
    };
    for (id, s) in [("synthetic", shape()), ("merkle", R1csShape::record(merkle).unwrap())] {
        assert!(!store.contains_shape(id).unwrap());
        let report = store.save_shape(id, &s).unwrap();
        assert_eq!(report.bytes, std::fs::metadata(&report.path).unwrap().len());
        assert!(store.contains_shape(id).unwrap());
        assert_eq!(store.load_shape(id).unwrap(), s, "{id}");
        assert_eq!(decode_shape(&bytes_of(id, &s), id).unwrap(), s, "{id}");
    }
    // Only the temporary-free final files remain, and shape files are not listed as keys.
    let names: Vec<_> = std::fs::read_dir(store.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(store.shapes().unwrap().is_empty());
}

#[test]
fn missing_foreign_and_misnamed_shapes_are_refused() {
    let (_dir, store) = temp_store("missing");
    assert!(matches!(store.load_shape("nothing"), Err(Error::NotFound { .. })));
    assert!(matches!(store.load_shape("a/b"), Err(Error::InvalidShapeId { .. })));
    store.save_shape("one", &shape()).unwrap();
    std::fs::copy(store.shape_path_for("one").unwrap(), store.shape_path_for("two").unwrap()).unwrap();
    let err = store.load_shape("two").unwrap_err();
    assert!(
        matches!(&err, Error::ShapeFileMismatch { expected, found } if expected.as_str() == "two" && found.as_str() == "one"),
        "{err}"
    );
    // A proving key file is not a shape file.
    let err = read_shape(store.shape_path_for("one").unwrap().with_extension("cuzkpk"), "one").unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

#[test]
fn every_corruption_is_named() {
    let good = bytes_of("s", &shape());
    let decode = |b: &[u8]| decode_shape(b, "s").unwrap_err();

    let mut b = good.clone();
    b[..6].copy_from_slice(b"CUZKPK");
    let err = decode(&b);
    assert!(matches!(&err, Error::ShapeFileBadMagic { found } if found == "CUZKPK"), "{err}");
    assert!(matches!(decode(b"CU"), Error::ShapeFileTruncated { .. }), "a prefix of the magic is only short");
    assert!(matches!(decode(b""), Error::ShapeFileTruncated { expected: 160, found: 0 }));

    let mut b = good.clone();
    b[6..10].copy_from_slice(&(SHAPE_FORMAT_VERSION + 1).to_le_bytes());
    assert!(matches!(decode(&b), Error::ShapeFileVersion { found, .. } if found == SHAPE_FORMAT_VERSION + 1));

    let mut b = good.clone();
    b[85] ^= 1;
    assert!(matches!(decode(&b), Error::ShapeFileHeaderChecksum { .. }));

    for cut in [10, SHAPE_HEADER_LEN - 1, SHAPE_HEADER_LEN, good.len() - 1] {
        assert!(matches!(decode(&good[..cut]), Error::ShapeFileTruncated { .. }), "cut at {cut}");
    }
    let mut b = good.clone();
    b.push(0);
    assert!(matches!(decode(&b), Error::ShapeFileTrailingBytes { .. }));

    let mut b = good.clone();
    let last = b.len() - 1;
    b[last] ^= 1;
    assert!(matches!(decode(&b), Error::ShapeFileChecksum { .. }));

    // Header fields with valid checksums.
    let mut b = good.clone();
    b[136] ^= 8;
    reseal(&mut b);
    assert!(matches!(decode(&b), Error::ShapeFileField { field: "payload length", .. }));
    let mut b = good.clone();
    b[10] = 1;
    reseal(&mut b);
    assert!(matches!(decode(&b), Error::ShapeFileField { field: "reserved", .. }));
    let mut b = good.clone();
    b[12..16].copy_from_slice(&65u32.to_le_bytes());
    reseal(&mut b);
    assert!(matches!(decode(&b), Error::ShapeFileField { field: "shape id length", .. }));

    // Payload contents with valid checksums: an unreduced coefficient, a column out of range.
    let mut b = good.clone();
    b[SHAPE_HEADER_LEN..SHAPE_HEADER_LEN + 32].fill(0xff);
    reseal(&mut b);
    assert!(matches!(decode(&b), Error::ShapeFileCoefficient { index: 0 }));
    let s = shape();
    let coefficients = s.coefficients().len();
    let columns_of_a = SHAPE_HEADER_LEN + 32 * coefficients + 4 * s.counts().constraints;
    let mut b = good.clone();
    b[columns_of_a..columns_of_a + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    reseal(&mut b);
    let err = decode(&b);
    assert!(
        matches!(&err, Error::ShapeFileMalformed(ShapeProblem::Column { matrix: "A", entry: 0, .. })),
        "{err}"
    );
    assert!(err.to_string().contains("malformed"), "{err}");
}

#[test]
fn a_bad_file_on_disk_is_refused_and_a_failed_save_leaves_nothing() {
    let (_dir, store) = temp_store("on_disk");
    store.save_shape("s", &shape()).unwrap();
    let path = store.shape_path_for("s").unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(store.load_shape("s"), Err(Error::ShapeFileTruncated { .. })));
    assert!(matches!(store.save_shape("bad id", &shape()), Err(Error::InvalidShapeId { .. })));
    assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 1, "no temporary file left");
}
