//! A cheap circuit of exactly chosen size.

use ark_bls12_381::Fr;
use ark_ff::{UniformRand, Zero};
use ark_relations::gr1cs::{ConstraintSynthesizer, ConstraintSystemRef, SynthesisError};
use ark_relations::lc;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// `x[j+1] = x[j]·(x[j] + p[j mod m])` for `j < constraints`, with public inputs `p` (or `p = [1]`
/// as a constant when `m = 0`).
///
/// Counts: `constraints` R1CS constraints, `1 + public_inputs` instance variables and
/// `constraints + 1` witness variables. Values come from a ChaCha20 stream seeded by `seed`, so the
/// same parameters always give the same circuit and witness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Synthetic {
    /// Number of constraints.
    pub constraints: usize,
    /// Number of public inputs (besides the constant 1).
    pub public_inputs: usize,
    /// Seed of the public inputs and the chain's start.
    pub seed: u64,
    /// Start the chain at 0, which makes every witness value 0.
    pub zero_witness: bool,
}

impl Synthetic {
    /// A circuit of `constraints` constraints and one public input.
    pub fn new(constraints: usize, seed: u64) -> Self {
        Self { constraints, public_inputs: 1, seed, zero_witness: false }
    }

    /// A circuit whose rows (constraints plus instance variables) fill a domain of exactly `2^log_rows`.
    /// `log_rows` must be at least 2.
    pub fn with_log_rows(log_rows: u32, seed: u64) -> Self {
        let rows = 1usize << log_rows.max(2);
        Self::new(rows - 2, seed)
    }

    /// The public inputs a verifier needs.
    pub fn public_input_values(&self) -> Vec<Fr> {
        let mut rng = ChaCha20Rng::seed_from_u64(self.seed);
        (0..self.public_inputs).map(|_| Fr::rand(&mut rng)).collect()
    }

    fn start(&self) -> Fr {
        let mut rng = ChaCha20Rng::seed_from_u64(self.seed);
        for _ in 0..self.public_inputs {
            Fr::rand(&mut rng);
        }
        if self.zero_witness {
            Fr::zero()
        } else {
            Fr::rand(&mut rng)
        }
    }
}

impl ConstraintSynthesizer<Fr> for Synthetic {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        let inputs = self.public_input_values();
        let input_vars =
            inputs.iter().map(|p| cs.new_input_variable(|| Ok(*p))).collect::<Result<Vec<_>, _>>()?;
        let mut x = self.start();
        let mut x_var = cs.new_witness_variable(|| Ok(x))?;
        for j in 0..self.constraints {
            let (p, p_lc) = match input_vars.len() {
                0 => (Fr::from(1u64), lc!() + ark_relations::gr1cs::Variable::One),
                m => (inputs[j % m], lc!() + input_vars[j % m]),
            };
            let next = x * (x + p);
            let next_var = cs.new_witness_variable(|| Ok(next))?;
            cs.enforce_r1cs_constraint(|| lc!() + x_var, || p_lc + x_var, || lc!() + next_var)?;
            x = next;
            x_var = next_var;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_synth::{synthesize, SynthesisOptions};

    #[test]
    fn counts_are_exact() {
        for (c, m) in [(1, 0), (5, 1), (14, 3), (100, 0)] {
            let circuit = Synthetic { constraints: c, public_inputs: m, seed: 9, zero_witness: false };
            let s = synthesize(circuit, &SynthesisOptions::default()).unwrap();
            assert_eq!(s.counts().constraints, c);
            assert_eq!(s.counts().instance, 1 + m);
            assert_eq!(s.counts().witness, c + 1);
            assert_eq!(s.public_inputs(), &circuit.public_input_values()[..]);
        }
        let s = synthesize(Synthetic::with_log_rows(10, 1), &SynthesisOptions::default()).unwrap();
        assert_eq!(s.counts().rows(), 1024);
    }

    #[test]
    fn zero_witness_is_all_zero() {
        let circuit = Synthetic { constraints: 50, public_inputs: 2, seed: 3, zero_witness: true };
        let s = synthesize(circuit, &SynthesisOptions::default()).unwrap();
        assert!(s.witness().iter().all(Zero::is_zero));
        assert_eq!(s.density.num_zero(), 51);
    }
}
