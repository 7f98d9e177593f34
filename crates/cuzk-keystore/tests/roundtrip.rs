//! Real keys saved and loaded: the loaded key equals the original, and proves and verifies.

mod common;

use ark_bls12_381::{Bls12_381, Fr, G1Affine, G2Affine};
use ark_ec::AffineRepr;
use ark_groth16::{prepare_verifying_key, Groth16, ProvingKey};
use ark_relations::gr1cs::ConstraintSynthesizer;
use ark_std::UniformRand;
use common::{key_bytes, store, tiny_key};
use cuzk_keystore::{decode_key, read_header, read_key, Counts, FORMAT_VERSION, HEADER_LEN};
use cuzk_testkit::{keygen, seeded_rng, OneConstraint, Synthetic};

fn identities(pk: &ProvingKey<Bls12_381>) -> usize {
    let g1 = [&pk.a_query, &pk.b_g1_query, &pk.h_query, &pk.l_query, &pk.vk.gamma_abc_g1];
    g1.iter().flat_map(|v| v.iter()).filter(|p| p.is_zero()).count()
        + pk.b_g2_query.iter().filter(|p| p.is_zero()).count()
}

/// Saves and loads the key of `circuit` and proves with the loaded key; returns the number of identity
/// points the key holds.
fn round_trip<C: ConstraintSynthesizer<Fr> + Clone>(test: &str, circuit: C, inputs: &[Fr]) -> usize {
    let rng = &mut seeded_rng(test);
    let pk = keygen(circuit.clone(), rng);
    let (_dir, store) = store(test);

    assert!(!store.contains(test).unwrap());
    let saved = store.save(test, &pk).unwrap();
    assert!(store.contains(test).unwrap());
    assert_eq!(saved.path, store.path_for(test).unwrap());
    assert_eq!(std::fs::metadata(&saved.path).unwrap().len(), saved.bytes);
    let names: Vec<_> = std::fs::read_dir(store.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 1, "no temporary file is left behind: {names:?}");

    let header = read_header(&saved.path).unwrap();
    assert_eq!((header.version, header.shape_id.as_str()), (FORMAT_VERSION, test));
    assert_eq!(header.counts, Counts::of(&pk));
    assert_eq!(header.file_len(), saved.bytes);

    let (loaded, report) = store.load(test).unwrap();
    assert_eq!(report.bytes, saved.bytes);
    assert!(loaded == pk, "the loaded key equals the saved one");
    let (from_path, _) = read_key(&saved.path, test).unwrap();
    assert!(from_path == pk);
    assert!(decode_key(&key_bytes(test, &pk), test).unwrap() == pk);

    let (r, s) = (Fr::rand(rng), Fr::rand(rng));
    let proof = Groth16::<Bls12_381>::create_proof_with_reduction(circuit.clone(), &loaded, r, s).unwrap();
    let original = Groth16::<Bls12_381>::create_proof_with_reduction(circuit, &pk, r, s).unwrap();
    assert_eq!(proof, original, "same proof as with the original key");
    let pvk = prepare_verifying_key(&loaded.vk);
    assert!(Groth16::<Bls12_381>::verify_proof(&pvk, &proof, inputs).unwrap());
    identities(&pk)
}

#[test]
fn real_keys_round_trip_and_prove() {
    let x = Fr::from(3u64);
    let mut identities = round_trip("one-constraint", OneConstraint { x }, &[x * x]);
    let synthetic = Synthetic::new(200, 1);
    identities += round_trip("synthetic-200", synthetic, &synthetic.public_input_values());
    let five = Synthetic { public_inputs: 5, ..Synthetic::new(150, 2) };
    identities += round_trip("synthetic-5-inputs", five, &five.public_input_values());
    assert!(identities > 0, "the keys hold identity points, so they were round-tripped too");
}

#[test]
fn identity_points_everywhere_round_trip() {
    let mut pk = tiny_key("identities");
    pk.vk.alpha_g1 = G1Affine::identity();
    pk.vk.delta_g2 = G2Affine::identity();
    pk.a_query = vec![G1Affine::identity(); 3];
    pk.b_g2_query = vec![G2Affine::identity(), G2Affine::generator(), G2Affine::identity()];
    pk.h_query.clear();
    let back = decode_key(&key_bytes("identities", &pk), "identities").unwrap();
    assert!(back == pk);
    assert!(back.a_query.iter().all(|p| p.is_zero()) && back.b_g2_query[0].is_zero());
}

#[test]
fn saving_again_replaces_the_key() {
    let (_dir, store) = store("replace");
    let (first, second) = (tiny_key("replace-1"), common::small_key("replace-2"));
    store.save("shape", &first).unwrap();
    store.save("shape", &second).unwrap();
    store.save("other", &first).unwrap();
    assert!(store.load("shape").unwrap().0 == second);
    assert!(store.load("other").unwrap().0 == first);
    let shapes: Vec<String> = store.shapes().unwrap().iter().map(|s| s.to_string()).collect();
    assert_eq!(shapes, ["other", "shape"]);
}

#[test]
fn a_stray_temporary_file_is_not_a_key() {
    // What a crash in the middle of a save leaves: a temporary file, never a file under the final name.
    let (_dir, store) = store("stray");
    std::fs::write(store.dir().join(".shape.cuzkpk.tmp-1-0"), b"CUZKPK half a key").unwrap();
    assert!(!store.contains("shape").unwrap());
    assert!(store.shapes().unwrap().is_empty());
}

#[test]
fn write_key_starts_at_the_writer_position() {
    let pk = tiny_key("offset");
    let mut out = std::io::Cursor::new(b"prefix".to_vec());
    out.set_position(6);
    let header = cuzk_keystore::write_key(&mut out, "offset", &pk).unwrap();
    let bytes = out.into_inner();
    assert_eq!(bytes.len() as u64, 6 + header.file_len());
    assert_eq!(&bytes[..6], b"prefix");
    assert!(decode_key(&bytes[6..], "offset").unwrap() == pk);
    assert_eq!(header.file_len(), HEADER_LEN as u64 + header.payload_len);
}
