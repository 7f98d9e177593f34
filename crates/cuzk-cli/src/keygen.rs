//! `cuzk keygen`: a proving key for a built-in circuit, saved with its recorded R1CS shape to a key
//! store.

use std::path::PathBuf;
use std::time::Instant;

use ark_bls12_381::Bls12_381;
use ark_groth16::Groth16;
use rand::{rngs::StdRng, SeedableRng};
use serde::Serialize;

use crate::flags::KeygenArgs;
use crate::output::{print, CmdError};
use crate::progress::Progress;

#[derive(Serialize)]
struct KeygenOutput {
    circuit: &'static str,
    shape_id: String,
    log_constraints: u32,
    constraints: usize,
    keygen_seconds: f64,
    key_path: PathBuf,
    key_bytes: u64,
    save_seconds: f64,
    shape_path: PathBuf,
    shape_seconds: f64,
}

/// Runs `cuzk keygen`.
pub(crate) fn run(a: &KeygenArgs) -> Result<(), CmdError> {
    let out = keygen(a)?;
    print(a.json, &out, |o| {
        println!(
            "cuzk keygen: {} 2^{} rows ({} constraints), shape {}",
            o.circuit, o.log_constraints, o.constraints, o.shape_id
        );
        println!("  key generation  {:>10.3} s", o.keygen_seconds);
        println!(
            "  saved key       {:>10.3} s  {} ({} bytes)",
            o.save_seconds,
            o.key_path.display(),
            o.key_bytes
        );
        println!("  recorded shape  {:>10.3} s  {}", o.shape_seconds, o.shape_path.display());
    })
}

fn keygen(a: &KeygenArgs) -> Result<KeygenOutput, CmdError> {
    let shape_id = a.circuit.shape_id()?;
    let circuit = a.circuit.partition(0)?;
    let store = cuzk::keystore::KeyStore::open(&a.key_dir)?;
    let mut rng = StdRng::seed_from_u64(a.circuit.seed);
    let t = Instant::now();
    let pk = {
        let _progress = Progress::spinner("generating the key", a.json);
        Groth16::<Bls12_381>::generate_random_parameters_with_reduction(circuit, &mut rng)?
    };
    let keygen_seconds = t.elapsed().as_secs_f64();
    let saved = {
        let _progress = Progress::spinner("saving the key", a.json);
        store.save(&shape_id, &pk)?
    };
    let t = Instant::now();
    let shape = {
        let _progress = Progress::spinner("recording the shape", a.json);
        cuzk::R1csShape::record(circuit)?
    };
    let shape_saved = store.save_shape(&shape_id, &shape)?;
    Ok(KeygenOutput {
        circuit: a.circuit.name(),
        shape_id,
        log_constraints: a.circuit.log_constraints,
        constraints: shape.counts().constraints,
        keygen_seconds,
        key_path: saved.path,
        key_bytes: saved.bytes,
        save_seconds: saved.seconds,
        shape_path: shape_saved.path,
        shape_seconds: t.elapsed().as_secs_f64(),
    })
}
