//! A proving key taken apart for a backend: bases in backend memory, the rest on the host.

use ark_bls12_381::{Bls12_381, G1Affine};
use ark_groth16::{PreparedVerifyingKey, ProvingKey, VerifyingKey};
use cuzk_synth::Counts;

use cuzk_field::{G1, G2};

use crate::{Backend, Bases, ProveError};

/// A proving key whose query bases live in a backend (on the device, for a GPU backend).
///
/// Built once per key and reused by every proof. The verifying key is prepared for the self-check.
pub struct PreparedKey<B: Backend> {
    pub(crate) vk: VerifyingKey<Bls12_381>,
    pub(crate) pvk: PreparedVerifyingKey<Bls12_381>,
    pub(crate) beta_g1: G1Affine,
    pub(crate) delta_g1: G1Affine,
    pub(crate) a: B::Bases<G1>,
    pub(crate) b_g1: B::Bases<G1>,
    pub(crate) b_g2: B::Bases<G2>,
    pub(crate) l: B::Bases<G1>,
    pub(crate) h: B::Bases<G1>,
}

fn consistent(what: &str, len: usize, expected: usize) -> Result<(), ProveError> {
    if len == expected {
        Ok(())
    } else {
        Err(ProveError::MalformedKey(format!("{what} has {len} bases, expected {expected}")))
    }
}

impl<B: Backend> PreparedKey<B> {
    /// Checks the key's internal consistency, then hands its bases to the backend.
    pub fn new(backend: &B, pk: ProvingKey<Bls12_381>) -> Result<Self, ProveError> {
        let variables = pk.a_query.len();
        consistent("b_g1_query", pk.b_g1_query.len(), variables)?;
        consistent("b_g2_query", pk.b_g2_query.len(), variables)?;
        let instance = pk.vk.gamma_abc_g1.len();
        if instance == 0 || instance > variables {
            return Err(ProveError::MalformedKey(format!(
                "gamma_abc_g1 has {instance} elements for {variables} variables"
            )));
        }
        consistent("l_query", pk.l_query.len(), variables - instance)?;
        let h_len = pk.h_query.len();
        if !(h_len + 1).is_power_of_two() {
            return Err(ProveError::MalformedKey(format!(
                "h_query has {h_len} bases, not a power of two minus one"
            )));
        }
        let pvk = ark_groth16::prepare_verifying_key(&pk.vk);
        Ok(Self {
            vk: pk.vk,
            pvk,
            beta_g1: pk.beta_g1,
            delta_g1: pk.delta_g1,
            a: backend.load_bases::<G1>(pk.a_query)?,
            b_g1: backend.load_bases::<G1>(pk.b_g1_query)?,
            b_g2: backend.load_bases::<G2>(pk.b_g2_query)?,
            l: backend.load_bases::<G1>(pk.l_query)?,
            h: backend.load_bases::<G1>(pk.h_query)?,
        })
    }

    /// The verifying key.
    pub fn vk(&self) -> &VerifyingKey<Bls12_381> {
        &self.vk
    }

    /// The verifying key, prepared for pairing checks.
    pub fn prepared_vk(&self) -> &PreparedVerifyingKey<Bls12_381> {
        &self.pvk
    }

    /// Bytes of host memory the key's bases hold (all of them for the CPU backend; for a device backend
    /// only bases kept on the host because they did not fit).
    pub fn host_bytes(&self) -> u64 {
        [
            self.a.host_bytes(),
            self.b_g1.host_bytes(),
            self.b_g2.host_bytes(),
            self.l.host_bytes(),
            self.h.host_bytes(),
        ]
        .iter()
        .sum()
    }

    /// The G1 query bases: A, B, L and H.
    pub fn g1_bases(&self) -> [&B::Bases<G1>; 4] {
        [&self.a, &self.b_g1, &self.l, &self.h]
    }

    /// The G2 query bases: B.
    pub fn g2_bases(&self) -> &B::Bases<G2> {
        &self.b_g2
    }

    /// The query bases, to be rearranged by their backend (a device's precomputed tables): the G1
    /// queries A, B, L and H, then G2's B.
    pub fn bases_mut(&mut self) -> ([&mut B::Bases<G1>; 4], &mut B::Bases<G2>) {
        ([&mut self.a, &mut self.b_g1, &mut self.l, &mut self.h], &mut self.b_g2)
    }

    /// Variables (instance and witness) of the circuits the key was made for: the length of `z`.
    pub fn variables(&self) -> usize {
        self.a.len()
    }

    /// The NTT domain size the key was made for.
    pub fn domain_size(&self) -> usize {
        self.h.len() + 1
    }

    /// Checks that this key was made for a circuit of these counts, naming the first count that differs.
    pub fn check_fits(&self, counts: &Counts) -> Result<(), ProveError> {
        let checks = [
            ("instance variables", self.vk.gamma_abc_g1.len(), counts.instance),
            ("witness variables", self.l.len(), counts.witness),
            ("variables", self.a.len(), counts.variables()),
            (
                "NTT domain size (constraints + instance variables, rounded up)",
                self.domain_size(),
                counts.domain_size(),
            ),
        ];
        for (what, key, circuit) in checks {
            if key != circuit {
                return Err(ProveError::KeyMismatch { what, key, circuit });
            }
        }
        Ok(())
    }
}
