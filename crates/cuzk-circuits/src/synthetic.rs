//! A cheap circuit of exactly chosen size.

use ark_bls12_381::Fr;
use ark_ff::{UniformRand, Zero};
use ark_relations::gr1cs::{ConstraintSynthesizer, ConstraintSystemRef, SynthesisError};
use ark_relations::lc;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// `x[j+1] = x[j]·(x[j] + p[j mod m])` for `j < constraints`, with public inputs `p` (or `p = [1]`
/// as a constant when `m = 0`), where a share of the rows are bit rows instead.
///
/// With `bit_share_per_mille = s`, row `j` is a bit row when `⌊(j+1)·s/1000⌋ > ⌊j·s/1000⌋` (so
/// `⌊constraints·s/1000⌋` bit rows, spread evenly through the chain): it allocates a witness bit `b` and
/// enforces `b·(1 - b) = 0`, and the chain skips that row. Real circuits are mostly bits (SHA-256
/// gadgets nearly all), which MSMs treat specially; this makes that share tunable.
///
/// Counts: `constraints` R1CS constraints, `1 + public_inputs` instance variables and
/// `constraints + 1` witness variables, whatever the bit share. Values come from ChaCha20 streams
/// seeded by `seed`, so the same parameters always give the same circuit and witness; with no bit rows
/// the circuit is exactly the plain chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Synthetic {
    /// Number of constraints.
    pub constraints: usize,
    /// Number of public inputs (besides the constant 1).
    pub public_inputs: usize,
    /// Seed of the public inputs and the chain's start.
    pub seed: u64,
    /// Start the chain at 0 and make every bit 0, which makes every witness value 0.
    pub zero_witness: bool,
    /// Per mille of the rows that are bit rows `b·(1 - b) = 0` (0 to 1000; more counts as 1000).
    pub bit_share_per_mille: u16,
}

impl Synthetic {
    /// A circuit of `constraints` constraints and one public input.
    pub fn new(constraints: usize, seed: u64) -> Self {
        Self { constraints, public_inputs: 1, seed, zero_witness: false, bit_share_per_mille: 0 }
    }

    /// This circuit with `per_mille` of its rows bit rows.
    pub fn with_bit_share(self, per_mille: u16) -> Self {
        Self { bit_share_per_mille: per_mille, ..self }
    }

    /// Whether row `j` is a bit row.
    pub fn is_bit_row(&self, j: usize) -> bool {
        let s = usize::from(self.bit_share_per_mille.min(1000));
        (j + 1) * s / 1000 > j * s / 1000
    }

    /// The number of bit rows: `⌊constraints · bit_share_per_mille / 1000⌋`.
    pub fn bit_rows(&self) -> usize {
        self.constraints * usize::from(self.bit_share_per_mille.min(1000)) / 1000
    }

    /// A name for the shape, usable as a key-store shape id. The shape depends on the counts and on
    /// which rows are bit rows, not on the seed.
    pub fn shape_id(&self) -> String {
        format!(
            "synthetic-c{}-i{}-b{}",
            self.constraints,
            self.public_inputs,
            self.bit_share_per_mille.min(1000)
        )
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
        // The bits come from their own stream, so the chain's values do not depend on the share.
        let mut bits = ChaCha20Rng::seed_from_u64(self.seed ^ 0xb175_b175_b175_b175);
        for j in 0..self.constraints {
            if self.is_bit_row(j) {
                let b = Fr::from(!self.zero_witness && bits.gen::<bool>());
                let b_var = cs.new_witness_variable(|| Ok(b))?;
                cs.enforce_r1cs_constraint(
                    || lc!() + b_var,
                    || lc!() + ark_relations::gr1cs::Variable::One - b_var,
                    || lc!(),
                )?;
                continue;
            }
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
            let circuit = Synthetic {
                constraints: c,
                public_inputs: m,
                seed: 9,
                zero_witness: false,
                bit_share_per_mille: 0,
            };
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
        for share in [0, 300, 1000] {
            let circuit = Synthetic {
                constraints: 50,
                public_inputs: 2,
                seed: 3,
                zero_witness: true,
                bit_share_per_mille: share,
            };
            let s = synthesize(circuit, &SynthesisOptions::default()).unwrap();
            assert!(s.witness().iter().all(Zero::is_zero), "share {share}");
            assert_eq!(s.density.num_zero(), 51, "share {share}");
        }
    }

    #[test]
    fn bit_share_is_honoured_and_counts_stay_exact() {
        for (constraints, share) in
            [(1000, 0), (1000, 1), (1000, 250), (999, 500), (1000, 999), (1000, 1000), (7, 3000)]
        {
            let circuit = Synthetic::new(constraints, 11).with_bit_share(share);
            let s = synthesize(circuit, &SynthesisOptions::default()).unwrap();
            let counts = s.counts();
            assert_eq!((counts.constraints, counts.witness), (constraints, constraints + 1), "share {share}");
            let expected = constraints * usize::from(share.min(1000)) / 1000;
            assert_eq!(circuit.bit_rows(), expected, "share {share}");
            assert_eq!(
                (0..constraints).filter(|&j| circuit.is_bit_row(j)).count(),
                expected,
                "share {share}"
            );
            // Bit rows hold 0 or 1; the chain's values are random field elements (never 0 or 1 here),
            // and the leading 1 of z is the constant.
            let bits = s.density.num_zero() + s.density.num_one() - 1;
            assert_eq!(bits, expected, "share {share}: bits among {} witness values", counts.witness);
            // Spread evenly: every window of 100 rows has its share of bit rows, give or take one.
            if constraints >= 100 {
                let window = (0..100).filter(|&j| circuit.is_bit_row(j)).count();
                assert!(window.abs_diff(usize::from(share.min(1000)) / 10) <= 1, "share {share}: {window}");
            }
            // Both kinds of bit occur when there are enough of them.
            if expected >= 64 {
                assert!(s.density.num_zero() > 0 && s.density.num_one() > 1, "share {share}");
            }
        }
    }

    #[test]
    fn no_bit_rows_leaves_the_plain_chain() {
        let plain = synthesize(Synthetic::new(64, 5), &SynthesisOptions::default()).unwrap();
        let zero_share =
            synthesize(Synthetic::new(64, 5).with_bit_share(0), &SynthesisOptions::default()).unwrap();
        assert_eq!(plain.assignment, zero_share.assignment);
        // With a share, the chain keeps its start and public inputs.
        let mixed =
            synthesize(Synthetic::new(64, 5).with_bit_share(500), &SynthesisOptions::default()).unwrap();
        assert_eq!(plain.instance(), mixed.instance());
        assert_eq!(plain.witness()[0], mixed.witness()[0]);
    }
}
