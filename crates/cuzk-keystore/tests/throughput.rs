//! Save and load throughput of a real key, side by side with arkworks' fastest (uncompressed, unchecked)
//! serialization. `cargo test --release -p cuzk-keystore --test throughput -- --nocapture` prints it for
//! a 2^16-row key; dev builds use 2^10 rows to stay quick. `CUZK_KEYSTORE_LOG_ROWS` overrides the size.

mod common;

use std::time::Instant;

use ark_bls12_381::Bls12_381;
use ark_groth16::ProvingKey;
use ark_serialize::{CanonicalDeserialize, CanonicalSerialize};
use common::{key_bytes, store};
use cuzk_keystore::decode_key;
use cuzk_testkit::{keygen, seeded_rng, Synthetic};

fn gbps(bytes: usize, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e9
}

#[test]
fn save_and_load_throughput() {
    let default_log_rows = if cfg!(debug_assertions) { 10 } else { 16 };
    let log_rows =
        std::env::var("CUZK_KEYSTORE_LOG_ROWS").ok().and_then(|s| s.parse().ok()).unwrap_or(default_log_rows);
    let started = Instant::now();
    let pk = keygen(Synthetic::with_log_rows(log_rows, 7), &mut seeded_rng("throughput"));
    println!(
        "2^{log_rows} rows: keygen {:.2} s, {} rayon threads",
        started.elapsed().as_secs_f64(),
        rayon::current_num_threads()
    );

    let (_dir, store) = store("throughput");
    let shape = format!("synthetic-2-{log_rows}");
    let saved = store.save(&shape, &pk).unwrap();
    println!(
        "save: {} bytes in {:.3} s = {:.2} GB/s ({:.2} GB/s before the {:.3} s fsync)",
        saved.bytes,
        saved.seconds,
        saved.gb_per_s(),
        saved.gb_per_s_before_sync(),
        saved.sync_seconds
    );
    for run in 1..=3 {
        let (loaded, r) = store.load(&shape).unwrap();
        assert!(loaded == pk);
        println!(
            "load {run}: {:.3} s = {:.2} GB/s (read {:.3} s, checksum {:.3} s, decode {:.3} s)",
            r.seconds,
            r.gb_per_s(),
            r.read_seconds,
            r.checksum_seconds,
            r.decode_seconds
        );
    }

    let bytes = key_bytes(&shape, &pk);
    let started = Instant::now();
    let decoded = decode_key(&bytes, &shape).unwrap();
    let seconds = started.elapsed().as_secs_f64();
    assert!(decoded == pk);
    println!("decode_key from memory: {:.3} s = {:.2} GB/s", seconds, gbps(bytes.len(), seconds));

    // Baseline: arkworks, uncompressed and without curve or subgroup checks, from memory.
    let mut ark = Vec::new();
    let started = Instant::now();
    pk.serialize_uncompressed(&mut ark).unwrap();
    let ser = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let back = ProvingKey::<Bls12_381>::deserialize_uncompressed_unchecked(&ark[..]).unwrap();
    let de = started.elapsed().as_secs_f64();
    assert!(back == pk);
    println!(
        "arkworks uncompressed unchecked, from memory: serialize {:.3} s = {:.2} GB/s, deserialize {:.3} s = {:.2} GB/s",
        ser,
        gbps(ark.len(), ser),
        de,
        gbps(ark.len(), de)
    );
}
