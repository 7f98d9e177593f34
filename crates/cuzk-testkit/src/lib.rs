#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod gadgets;
mod points;
mod scratch;
pub mod sim;

pub use cuzk_circuits::Synthetic;
pub use gadgets::{poseidon_config, MerklePath, PoseidonHash, Sha256Preimage};
pub use points::progression;
pub use scratch::TempDir;

use ark_bls12_381::{Bls12_381, Fr};
use ark_groth16::{Groth16, ProvingKey};
use ark_relations::gr1cs::{ConstraintSynthesizer, ConstraintSystemRef, SynthesisError};
use rand::{rngs::StdRng, RngCore, SeedableRng};

/// A seeded RNG: the seed is `CUZK_TEST_SEED` when set, fresh otherwise, and is printed (test output
/// shows it on failure) so any failing run can be replayed.
pub fn seeded_rng(test: &str) -> StdRng {
    let seed = std::env::var("CUZK_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rngs::OsRng.next_u64());
    println!("{test}: CUZK_TEST_SEED={seed}");
    StdRng::seed_from_u64(seed)
}

/// A proptest configuration for `cases` cases whose RNG is seeded (and the seed printed) by
/// [`seeded_rng`], with no regression files and a bounded shrink (cases can be expensive).
pub fn proptest_config(test: &str, cases: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases,
        rng_seed: proptest::test_runner::RngSeed::Fixed(seeded_rng(test).next_u64()),
        failure_persistence: None,
        max_shrink_iters: 512,
        ..proptest::test_runner::Config::default()
    }
}

/// Generates an ark-groth16 proving key for `circuit`.
pub fn keygen<C: ConstraintSynthesizer<Fr>>(circuit: C, rng: &mut StdRng) -> ProvingKey<Bls12_381> {
    Groth16::<Bls12_381>::generate_random_parameters_with_reduction(circuit, rng).expect("key generation")
}

/// The smallest porep-like parameters with SHA-256 labels (one challenge, a tree of depth 4, one
/// parent): SHA-256 compressions, whose additions give rows of many entries beside rows of one or
/// two, in a shape small enough for any test.
pub fn small_sha_porep() -> cuzk_circuits::PorepParams {
    cuzk_circuits::PorepParams {
        challenges: 1,
        depth: 4,
        base_parents: 1,
        expander_parents: 0,
        label_hash: cuzk_circuits::LabelHash::Sha256,
        filler: 3,
    }
}

/// A circuit with exactly one constraint: `x · x = y`, `y` public.
#[derive(Debug, Clone, Copy)]
pub struct OneConstraint {
    /// The witness `x`.
    pub x: Fr,
}

impl ConstraintSynthesizer<Fr> for OneConstraint {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        let y = cs.new_input_variable(|| Ok(self.x * self.x))?;
        let x = cs.new_witness_variable(|| Ok(self.x))?;
        cs.enforce_r1cs_constraint(|| x.into(), || x.into(), || y.into())
    }
}

/// A chain shaped like a plain [`Synthetic`]'s (its constraint and public-input counts and public
/// inputs, but no bit rows whatever its bit share, and a chain that starts at 3) in which witness value
/// `bad + 1` is off by one, so exactly constraint `bad` is unsatisfied.
#[derive(Debug, Clone, Copy)]
pub struct Unsatisfied {
    /// The honest circuit.
    pub inner: Synthetic,
    /// The first constraint to break.
    pub bad: usize,
}

impl ConstraintSynthesizer<Fr> for Unsatisfied {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        let (inputs, mut x) = (self.inner.public_input_values(), Fr::from(3u64));
        let input_vars =
            inputs.iter().map(|p| cs.new_input_variable(|| Ok(*p))).collect::<Result<Vec<_>, _>>()?;
        let mut x_var = cs.new_witness_variable(|| Ok(x))?;
        for j in 0..self.inner.constraints {
            let (p, p_var) = (inputs[j % inputs.len()], input_vars[j % inputs.len()]);
            let mut next = x * (x + p);
            if j == self.bad {
                next += Fr::from(1u64);
            }
            let next_var = cs.new_witness_variable(|| Ok(next))?;
            cs.enforce_r1cs_constraint(
                || x_var.into(),
                || ark_relations::lc!() + p_var + x_var,
                || next_var.into(),
            )?;
            (x, x_var) = (next, next_var);
        }
        Ok(())
    }
}

/// A chain of `rows` constraints whose rows carry coefficients 1, -1 and large ones, several terms
/// each: `(c_j·w_j − w_{j+1} + d_j) · (w_j + x) = o_j`, with `x` public. The coefficients `c_j`, `d_j`
/// are fixed (the same for every seed, so every circuit of `rows` has one shape); the witness `w`
/// comes from `seed`.
#[derive(Debug, Clone, Copy)]
pub struct WeightedRows {
    /// Constraints.
    pub rows: usize,
    /// Seed of the witness and the public input.
    pub seed: u64,
}

impl ConstraintSynthesizer<Fr> for WeightedRows {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        use ark_ff::UniformRand;
        use ark_relations::gr1cs::Variable;
        let mut coefficients = StdRng::seed_from_u64(0x5eed);
        let mut values = StdRng::seed_from_u64(self.seed);
        let x = Fr::rand(&mut values);
        let x_var = cs.new_input_variable(|| Ok(x))?;
        let mut w: Vec<Fr> = (0..=self.rows).map(|_| Fr::rand(&mut values)).collect();
        // Some witness entries are bits, as in real circuits.
        for (j, v) in w.iter_mut().enumerate() {
            if j % 3 == 1 {
                *v = Fr::from((j % 2) as u64);
            }
        }
        let vars = w.iter().map(|v| cs.new_witness_variable(|| Ok(*v))).collect::<Result<Vec<_>, _>>()?;
        for j in 0..self.rows {
            let (c, d) = (Fr::rand(&mut coefficients), Fr::rand(&mut coefficients));
            let out = (c * w[j] - w[j + 1] + d) * (w[j] + x);
            let out_var = cs.new_witness_variable(|| Ok(out))?;
            cs.enforce_r1cs_constraint(
                || ark_relations::lc!() + (c, vars[j]) + (-Fr::from(1u64), vars[j + 1]) + (d, Variable::One),
                || ark_relations::lc!() + vars[j] + x_var,
                || out_var.into(),
            )?;
        }
        Ok(())
    }
}

/// A circuit whose synthesis fails with [`SynthesisError::AssignmentMissing`] after allocating a few
/// variables.
#[derive(Debug, Clone, Copy)]
pub struct FailingCircuit;

impl ConstraintSynthesizer<Fr> for FailingCircuit {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        let _ = cs.new_input_variable(|| Ok(Fr::from(1u64)))?;
        let _ = cs.new_witness_variable(|| Err(SynthesisError::AssignmentMissing))?;
        Ok(())
    }
}

/// Filecoin's parameter directory for tests, set up once per process: `FIL_PROOFS_PARAMETER_CACHE`
/// when set, else a cache outside the checkout (`$HOME/.cache/cuzk/filecoin-proof-parameters`), so
/// parameters generated once (2 KiB PoRep: about 13 minutes on 2 cores) serve every later run; the
/// variable is then set for this process (and the processes it starts). Filecoin's graph parent cache
/// goes beside it unless `FIL_PROOFS_PARENT_CACHE` is set.
pub fn filecoin_parameter_dir() -> std::path::PathBuf {
    use std::path::PathBuf;
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::var_os("FIL_PROOFS_PARAMETER_CACHE").map(PathBuf::from).unwrap_or_else(|| {
            let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
            home.join(".cache/cuzk/filecoin-proof-parameters")
        });
        std::fs::create_dir_all(&dir).expect("create the Filecoin parameter directory");
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &dir);
        if std::env::var_os("FIL_PROOFS_PARENT_CACHE").is_none() {
            std::env::set_var("FIL_PROOFS_PARENT_CACHE", dir.join("parents"));
        }
        println!("Filecoin parameters in {}", dir.display());
        dir
    })
    .clone()
}

/// x y as 2N little-endian u64 limbs.
fn wide_product(x: &[u64], y: &[u64]) -> Vec<u64> {
    let mut out = vec![0u64; x.len() + y.len()];
    for (i, &xi) in x.iter().enumerate() {
        let mut carry = 0u128;
        for (j, &yj) in y.iter().enumerate() {
            let t = xi as u128 * yj as u128 + out[i + j] as u128 + carry;
            out[i + j] = t as u64;
            carry = t >> 64;
        }
        out[i + y.len()] = carry as u64;
    }
    out
}

/// Whether `wq = floor(w·2^(64N) / p)` for little-endian u64 limbs (N of each): `wq·p <= w·2^(64N) <
/// wq·p + p`. The quotient a Shoup product by `w` needs (`Fr::mul_shoup` in the CUDA kernels).
pub fn is_shoup_quotient(w: &[u64], wq: &[u64], p: &[u64]) -> bool {
    let n = w.len();
    let low = wide_product(wq, p);
    let shifted: Vec<u64> = std::iter::repeat_n(0, n).chain(w.iter().copied()).collect();
    let mut high = low.clone();
    let mut carry = 0u128;
    for (k, limb) in high.iter_mut().enumerate() {
        let t = *limb as u128 + p.get(k).copied().unwrap_or(0) as u128 + carry;
        *limb = t as u64;
        carry = t >> 64;
    }
    let le = |x: &[u64], y: &[u64]| x.iter().rev().cmp(y.iter().rev()) != std::cmp::Ordering::Greater;
    le(&low, &shifted) && (carry != 0 || !le(&high, &shifted))
}
