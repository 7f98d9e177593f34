//! A partition circuit shaped like Filecoin's stacked-DRG proof of replication, built from arkworks
//! gadgets only.
//!
//! Per challenge the circuit
//!
//! 1. takes the challenged node index as `depth` witness bits and binds it to a public input;
//! 2. labels the node from its parents' labels: `label = SHA-256(replica_id || node || parent labels)`
//!    (32 bytes of replica id, little-endian; 8 bytes of node index, little-endian; 32 bytes per
//!    parent), the digest's top two bits dropped so the label is an Fr element (as Filecoin truncates
//!    labels); small profiles label with Poseidon instead (see [`LabelHash`]);
//! 3. proves that the label is the leaf at the node's position in a binary Poseidon Merkle tree of
//!    depth `depth` whose root is public. The node's bits are the path's direction bits, so they are
//!    witnesses and the constraint structure does not depend on which node is challenged.
//!
//! Parents are chosen pseudo-randomly from the seed and the node: `base_parents` earlier nodes of the
//! same layer and `expander_parents` nodes of the previous layer. Their labels are pseudo-random
//! stand-ins derived from `(seed, layer, node)` (the circuit does not re-derive them, and does not open
//! them against column commitments as the real protocol does). The tree holds the challenged labels at
//! their positions and zeros elsewhere (a sparse tree), so its root is a function of the partition's
//! challenges: each partition has its own root.
//!
//! A tail of `filler` constraints `b·(1 - b) = 0` over witness bits tops the circuit up to an exact
//! size. Public inputs, in order: the replica id, the root, then each challenged node index.
//!
//! Everything is derived from `(seed, partition)`: any partition can be rebuilt from those two numbers
//! and the parameters, and every partition of the same parameters has the same constraint matrices.

use std::collections::HashMap;
use std::sync::OnceLock;

use ark_bls12_381::Fr;
use ark_crypto_primitives::crh::poseidon::constraints::{CRHParametersVar, TwoToOneCRHGadget};
use ark_crypto_primitives::crh::sha256::constraints::Sha256Gadget;
use ark_crypto_primitives::crh::TwoToOneCRHSchemeGadget;
use ark_crypto_primitives::sponge::poseidon::PoseidonConfig;
use ark_ff::{AdditiveGroup, BigInteger, Field, PrimeField, UniformRand, Zero};
use ark_r1cs_std::{
    alloc::AllocVar, boolean::Boolean, convert::ToBitsGadget, eq::EqGadget, fields::fp::FpVar,
    select::CondSelectGadget, uint8::UInt8,
};
use ark_relations::gr1cs::{
    ConstraintSynthesizer, ConstraintSystem, ConstraintSystemRef, OptimizationGoal, SynthesisError,
    SynthesisMode, Variable,
};
use ark_relations::lc;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::poseidon::{compress, poseidon_config};
use crate::CircuitError;

/// The deepest tree supported: node indices are 8 bytes in the label, and 48 levels keep the sparse
/// tree's arithmetic far from overflow.
pub const MAX_DEPTH: u32 = 48;
/// The smallest `k` [`PorepLike::for_log_constraints`] accepts.
pub const MIN_LOG_CONSTRAINTS: u32 = 10;
/// The largest `k` [`PorepLike::for_log_constraints`] accepts.
pub const MAX_LOG_CONSTRAINTS: u32 = 27;

/// How a node's label is computed from the replica id, the node index and the parent labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabelHash {
    /// SHA-256 of the bytes, truncated to 254 bits (as the real protocol labels).
    Sha256,
    /// A chain of two-to-one Poseidon compressions `H(..H(H(replica_id, node), parent_0).., parent_n)`,
    /// for circuits too small to hold one SHA-256 compression (about 2^15 constraints).
    Poseidon,
}

/// The parameters that fix a circuit's shape: every circuit with the same parameters has the same
/// constraint matrices, whatever its seed and partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PorepParams {
    /// Challenged nodes per partition (at least 1).
    pub challenges: usize,
    /// Depth of the Merkle tree: `2^depth` nodes per layer (1 to [`MAX_DEPTH`]).
    pub depth: u32,
    /// Parents from the same layer.
    pub base_parents: usize,
    /// Parents from the previous layer.
    pub expander_parents: usize,
    /// The labelling hash.
    pub label_hash: LabelHash,
    /// Extra `b·(1 - b) = 0` constraints that top the circuit up to a chosen size.
    pub filler: usize,
}

impl PorepParams {
    /// Filecoin's parent counts (6 base, 8 expander) with SHA-256 labelling and a tree of 2^30 nodes.
    pub fn filecoin_like(challenges: usize) -> Self {
        Self {
            challenges,
            depth: 30,
            base_parents: 6,
            expander_parents: 8,
            label_hash: LabelHash::Sha256,
            filler: 0,
        }
    }

    /// Parents per node.
    pub fn parents(&self) -> usize {
        self.base_parents + self.expander_parents
    }

    /// Public inputs: replica id, root, one node index per challenge.
    pub fn public_inputs(&self) -> usize {
        2 + self.challenges
    }

    /// A name for the shape, usable as a key-store shape id (at most 64 characters of `[a-z0-9-]`).
    pub fn shape_id(&self) -> String {
        let hash = match self.label_hash {
            LabelHash::Sha256 => "sha",
            LabelHash::Poseidon => "pos",
        };
        format!(
            "porep-{hash}-c{}-d{}-p{}x{}-f{}",
            self.challenges, self.depth, self.base_parents, self.expander_parents, self.filler
        )
    }

    /// The exact counts of a circuit with these parameters, computed by synthesizing one and two
    /// challenges in setup mode (no witness) and extrapolating: challenges are independent and alike,
    /// so every count is affine in the number of challenges.
    pub fn counts(&self) -> Result<ShapeCounts, CircuitError> {
        self.validate()?;
        let unit = |challenges| Self { challenges, filler: 0, ..*self };
        let one = setup_counts(unit(1))?;
        let two = setup_counts(unit(2))?;
        let n = self.challenges;
        let extrapolate = |a: usize, b: usize| a + (n - 1) * (b - a);
        Ok(ShapeCounts {
            constraints: extrapolate(one.constraints, two.constraints) + self.filler,
            instance: extrapolate(one.instance, two.instance),
            witness: extrapolate(one.witness, two.witness) + self.filler,
        })
    }

    fn validate(&self) -> Result<(), CircuitError> {
        if self.challenges == 0 {
            return Err(CircuitError::BadParameter { name: "challenges", value: 0, expected: "at least 1" });
        }
        if !(1..=MAX_DEPTH).contains(&self.depth) {
            return Err(CircuitError::BadParameter {
                name: "depth",
                value: u64::from(self.depth),
                expected: "1 to 48",
            });
        }
        Ok(())
    }
}

/// Counts of a circuit: constraints, instance variables (the constant 1 included) and witness variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapeCounts {
    /// R1CS constraints.
    pub constraints: usize,
    /// Instance variables, including the constant 1.
    pub instance: usize,
    /// Witness variables.
    pub witness: usize,
}

impl ShapeCounts {
    /// Constraints plus instance variables: the rows of the proving system's domain.
    pub fn rows(&self) -> usize {
        self.constraints + self.instance
    }
}

fn setup_counts(params: PorepParams) -> Result<ShapeCounts, CircuitError> {
    let cs = ConstraintSystem::<Fr>::new_ref();
    cs.set_optimization_goal(OptimizationGoal::Constraints);
    cs.set_mode(SynthesisMode::Setup);
    PorepLike { params, seed: 0, partition: 0 }.generate_constraints(cs.clone())?;
    Ok(ShapeCounts {
        constraints: cs.num_constraints(),
        instance: cs.num_instance_variables(),
        witness: cs.num_witness_variables(),
    })
}

/// The profiles [`PorepLike::for_log_constraints`] chooses from, most Filecoin-like first: the largest
/// whose single challenge fits the target is used, with as many challenges as fit.
const PROFILES: [(LabelHash, u32, usize, usize); 5] = [
    // Filecoin's 6 + 8 parents: 8 SHA-256 blocks per label.
    (LabelHash::Sha256, 30, 6, 8),
    // 1 + 1 parents: 2 SHA-256 blocks per label.
    (LabelHash::Sha256, 20, 1, 1),
    // Poseidon labelling for circuits smaller than a SHA-256 compression.
    (LabelHash::Poseidon, 12, 2, 2),
    (LabelHash::Poseidon, 4, 1, 1),
    (LabelHash::Poseidon, 1, 0, 1),
];

/// The largest share of filler rows [`PorepLike::for_log_constraints`] accepts before it tries a
/// smaller profile.
const MAX_FILLER_PERCENT: usize = 40;

/// One profile's counts at one and two challenges, computed once per process.
fn profile_counts(i: usize) -> Result<(ShapeCounts, ShapeCounts), CircuitError> {
    static CACHE: [OnceLock<(ShapeCounts, ShapeCounts)>; PROFILES.len()] =
        [const { OnceLock::new() }; PROFILES.len()];
    if let Some(c) = CACHE[i].get() {
        return Ok(*c);
    }
    let (label_hash, depth, base_parents, expander_parents) = PROFILES[i];
    let p =
        |challenges| PorepParams { challenges, depth, base_parents, expander_parents, label_hash, filler: 0 };
    let counts = (setup_counts(p(1))?, setup_counts(p(2))?);
    Ok(*CACHE[i].get_or_init(|| counts))
}

/// A PoRep-shaped partition circuit; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PorepLike {
    /// The shape.
    pub params: PorepParams,
    /// Seed of the replica id, the parents and the labels (shared by every partition of a proof).
    pub seed: u64,
    /// The partition: with the seed, it picks the challenges.
    pub partition: u64,
}

/// Everything the circuit needs besides its shape, computed outside the circuit.
struct Witness {
    replica_id: Fr,
    root: Fr,
    challenges: Vec<ChallengeWitness>,
    filler_bits: Vec<bool>,
}

struct ChallengeWitness {
    node: u64,
    parent_labels: Vec<[u8; 32]>,
    /// Sibling per level, from the leaf up.
    siblings: Vec<Fr>,
}

impl PorepLike {
    /// The circuit for `partition` of a proof with `params` and `seed`.
    pub fn new(params: PorepParams, seed: u64, partition: u64) -> Result<Self, CircuitError> {
        params.validate()?;
        Ok(Self { params, seed, partition })
    }

    /// Parameters for a circuit of exactly `2^k` rows (constraints plus instance variables), so that its
    /// proving domain is exactly `2^k`, for `k` from [`MIN_LOG_CONSTRAINTS`] to [`MAX_LOG_CONSTRAINTS`].
    ///
    /// It picks the most Filecoin-like profile (labelling hash, tree depth, parents; from SHA-256 with
    /// 6 + 8 parents down to Poseidon labels) that fits as many challenges as possible with at most
    /// 40% of the rows left for `filler` bit constraints (or, when none does, the profile with the
    /// least filler), so the size is exact and the filler is less than one challenge. The crate README
    /// lists the choice for every `k`. Counting synthesizes each profile once per process in setup mode
    /// (a few seconds in all).
    pub fn for_log_constraints(k: u32, seed: u64, partition: u64) -> Result<Self, CircuitError> {
        Ok(Self { params: Self::params_for_log_constraints(k)?, seed, partition })
    }

    /// The parameters [`PorepLike::for_log_constraints`] picks for `k`.
    pub fn params_for_log_constraints(k: u32) -> Result<PorepParams, CircuitError> {
        if !(MIN_LOG_CONSTRAINTS..=MAX_LOG_CONSTRAINTS).contains(&k) {
            return Err(CircuitError::LogConstraintsOutOfRange {
                k,
                min: MIN_LOG_CONSTRAINTS,
                max: MAX_LOG_CONSTRAINTS,
            });
        }
        let target = 1usize << k;
        let mut best: Option<PorepParams> = None;
        for (i, &(label_hash, depth, base_parents, expander_parents)) in PROFILES.iter().enumerate() {
            let (one, two) = profile_counts(i)?;
            let rows = |n: usize| one.rows() + (n - 1) * (two.rows() - one.rows());
            if rows(1) > target {
                continue;
            }
            let challenges = 1 + (target - one.rows()) / (two.rows() - one.rows());
            let filler = target - rows(challenges);
            let params =
                PorepParams { challenges, depth, base_parents, expander_parents, label_hash, filler };
            if filler * 100 <= target * MAX_FILLER_PERCENT {
                return Ok(params);
            }
            if best.is_none_or(|b| b.filler > filler) {
                best = Some(params);
            }
        }
        best.ok_or(CircuitError::LogConstraintsOutOfRange {
            k,
            min: MIN_LOG_CONSTRAINTS,
            max: MAX_LOG_CONSTRAINTS,
        })
    }

    /// Another partition of the same proof: same shape and seed.
    pub fn with_partition(&self, partition: u64) -> Self {
        Self { partition, ..*self }
    }

    /// The public inputs a verifier needs: replica id, root, then the challenged node indices.
    pub fn public_input_values(&self) -> Vec<Fr> {
        let w = self.witness();
        let mut out = vec![w.replica_id, w.root];
        out.extend(w.challenges.iter().map(|c| Fr::from(c.node)));
        out
    }

    /// The challenged node indices of this partition.
    pub fn challenges(&self) -> Vec<u64> {
        self.challenge_nodes()
    }

    fn replica_id(&self) -> Fr {
        Fr::rand(&mut rng(&[b"replica", &self.seed.to_le_bytes()]))
    }

    fn challenge_nodes(&self) -> Vec<u64> {
        let mut r = rng(&[b"challenges", &self.seed.to_le_bytes(), &self.partition.to_le_bytes()]);
        let nodes = 1u64 << self.params.depth;
        (0..self.params.challenges).map(|_| r.gen_range(0..nodes)).collect()
    }

    /// The parents of `node`: `base_parents` earlier nodes of the layer (node 0's are itself), then
    /// `expander_parents` nodes of the previous layer, as `(layer, index)`.
    fn parents(&self, node: u64) -> Vec<(u8, u64)> {
        let mut r = rng(&[b"parents", &self.seed.to_le_bytes(), &node.to_le_bytes()]);
        let nodes = 1u64 << self.params.depth;
        let mut parents = Vec::with_capacity(self.params.parents());
        for _ in 0..self.params.base_parents {
            parents.push((1, if node == 0 { 0 } else { r.gen_range(0..node) }));
        }
        for _ in 0..self.params.expander_parents {
            parents.push((0, r.gen_range(0..nodes)));
        }
        parents
    }

    /// The stand-in label of `(layer, node)`: 32 pseudo-random bytes, top two bits clear.
    fn stored_label(&self, layer: u8, node: u64) -> [u8; 32] {
        let mut label = [0u8; 32];
        rng(&[b"label", &self.seed.to_le_bytes(), &[layer], &node.to_le_bytes()]).fill_bytes(&mut label);
        label[31] &= 0x3f;
        label
    }

    fn label(&self, params: &PoseidonConfig<Fr>, replica_id: Fr, node: u64, parents: &[[u8; 32]]) -> Fr {
        match self.params.label_hash {
            LabelHash::Sha256 => {
                use ark_crypto_primitives::crh::{sha256::Sha256, CRHScheme};
                let mut message = replica_id.into_bigint().to_bytes_le();
                message.extend_from_slice(&node.to_le_bytes());
                parents.iter().for_each(|p| message.extend_from_slice(p));
                let digest = <Sha256 as CRHScheme>::evaluate(&(), message).unwrap_or_default();
                truncated_label(&digest)
            }
            LabelHash::Poseidon => {
                parents.iter().fold(compress(params, replica_id, Fr::from(node)), |acc, p| {
                    compress(params, acc, Fr::from_le_bytes_mod_order(p))
                })
            }
        }
    }

    fn witness(&self) -> Witness {
        let params = poseidon_config();
        let replica_id = self.replica_id();
        let nodes = self.challenge_nodes();
        let mut challenges = Vec::with_capacity(nodes.len());
        let mut leaves = HashMap::new();
        for &node in &nodes {
            let parent_labels: Vec<[u8; 32]> =
                self.parents(node).into_iter().map(|(layer, p)| self.stored_label(layer, p)).collect();
            leaves.insert(node, self.label(&params, replica_id, node, &parent_labels));
            challenges.push(ChallengeWitness { node, parent_labels, siblings: Vec::new() });
        }
        let tree = SparseTree::new(&params, self.params.depth, leaves);
        for c in &mut challenges {
            c.siblings = tree.siblings(c.node);
        }
        let mut r = rng(&[b"filler", &self.seed.to_le_bytes(), &self.partition.to_le_bytes()]);
        let filler_bits = (0..self.params.filler).map(|_| r.gen()).collect();
        Witness { replica_id, root: tree.root(), challenges, filler_bits }
    }
}

/// The low 254 bits of a digest (little-endian) as a field element.
fn truncated_label(digest: &[u8]) -> Fr {
    let mut bytes = [0u8; 32];
    for (b, d) in bytes.iter_mut().zip(digest) {
        *b = *d;
    }
    bytes[31] &= 0x3f;
    Fr::from_le_bytes_mod_order(&bytes)
}

/// A ChaCha20 stream keyed by SHA-256 of the parts, each prefixed by its length.
fn rng(parts: &[&[u8]]) -> ChaCha20Rng {
    use ark_crypto_primitives::crh::{sha256::Sha256, CRHScheme};
    let mut message = Vec::new();
    for part in parts {
        message.extend_from_slice(&(part.len() as u64).to_le_bytes());
        message.extend_from_slice(part);
    }
    let mut seed = [0u8; 32];
    let digest = <Sha256 as CRHScheme>::evaluate(&(), message).unwrap_or_default();
    for (s, d) in seed.iter_mut().zip(digest) {
        *s = d;
    }
    ChaCha20Rng::from_seed(seed)
}

/// A binary Poseidon Merkle tree with a few known leaves and zeros elsewhere.
struct SparseTree {
    /// Known nodes per level, leaves first; the last level holds the root.
    levels: Vec<HashMap<u64, Fr>>,
    /// The value of an all-zero subtree per level.
    empty: Vec<Fr>,
}

impl SparseTree {
    fn new(params: &PoseidonConfig<Fr>, depth: u32, leaves: HashMap<u64, Fr>) -> Self {
        let mut empty = vec![Fr::zero()];
        for l in 0..depth as usize {
            empty.push(compress(params, empty[l], empty[l]));
        }
        let mut levels = vec![leaves];
        for l in 0..depth as usize {
            let below = &levels[l];
            let mut above = HashMap::with_capacity(below.len());
            for &i in below.keys() {
                let parent = i / 2;
                above.entry(parent).or_insert_with(|| {
                    let get = |j: u64| below.get(&j).copied().unwrap_or(empty[l]);
                    compress(params, get(2 * parent), get(2 * parent + 1))
                });
            }
            levels.push(above);
        }
        Self { levels, empty }
    }

    fn siblings(&self, node: u64) -> Vec<Fr> {
        let depth = self.levels.len() - 1;
        (0..depth).map(|l| self.levels[l].get(&((node >> l) ^ 1)).copied().unwrap_or(self.empty[l])).collect()
    }

    fn root(&self) -> Fr {
        self.levels.last().and_then(|top| top.get(&0).copied()).unwrap_or(self.empty[self.empty.len() - 1])
    }
}

fn value<T: Copy>(w: &Option<Witness>, f: impl FnOnce(&Witness) -> T) -> Result<T, SynthesisError> {
    w.as_ref().map(f).ok_or(SynthesisError::AssignmentMissing)
}

impl ConstraintSynthesizer<Fr> for PorepLike {
    fn generate_constraints(self, cs: ConstraintSystemRef<Fr>) -> Result<(), SynthesisError> {
        self.params.validate().map_err(|_| SynthesisError::Unsatisfiable)?;
        // No witness in setup mode (key generation, counting): only the structure is built.
        let w = (!cs.is_in_setup_mode()).then(|| self.witness());
        let p = self.params;
        let witness_only = crate::sha256::witness_only(&cs);

        let replica_id = FpVar::new_input(cs.clone(), || value(&w, |w| w.replica_id))?;
        let root = FpVar::new_input(cs.clone(), || value(&w, |w| w.root))?;
        let challenge_inputs = (0..p.challenges)
            .map(|i| FpVar::new_input(cs.clone(), || value(&w, |w| Fr::from(w.challenges[i].node))))
            .collect::<Result<Vec<_>, _>>()?;

        let poseidon = CRHParametersVar::new_constant(cs.clone(), poseidon_config())?;
        // The replica id's canonical bits, shared by every challenge's SHA-256 input.
        let replica_bytes = match p.label_hash {
            LabelHash::Sha256 => {
                let mut bits = replica_id.to_bits_le()?;
                bits.resize(256, Boolean::FALSE);
                bits.chunks(8).map(UInt8::from_bits_le).collect()
            }
            LabelHash::Poseidon => Vec::new(),
        };

        for (i, challenge_input) in challenge_inputs.iter().enumerate() {
            let node_bits = (0..p.depth as usize)
                .map(|b| {
                    Boolean::new_witness(cs.clone(), || value(&w, |w| w.challenges[i].node >> b & 1 == 1))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Boolean::le_bits_to_fp(&node_bits)?.enforce_equal(challenge_input)?;

            let leaf = match p.label_hash {
                LabelHash::Sha256 => {
                    let mut message = replica_bytes.clone();
                    let mut index_bits = node_bits.clone();
                    index_bits.resize(64, Boolean::FALSE);
                    message.extend(index_bits.chunks(8).map(UInt8::from_bits_le));
                    for j in 0..p.parents() {
                        let label = value(&w, |w| w.challenges[i].parent_labels[j]);
                        message.extend(UInt8::new_witness_vec(cs.clone(), &label.unwrap_or([0; 32]))?);
                    }
                    if witness_only {
                        // The gadget's variables, computed on machine words (see `sha256`).
                        crate::sha256::digest_witness(&cs, &message, 254)?
                    } else {
                        let digest = Sha256Gadget::digest(&message)?;
                        let bits =
                            digest.0.iter().map(|byte| byte.to_bits_le()).collect::<Result<Vec<_>, _>>()?;
                        let bits: Vec<Boolean<Fr>> = bits.into_iter().flatten().take(254).collect();
                        Boolean::le_bits_to_fp(&bits)?
                    }
                }
                LabelHash::Poseidon => {
                    let node = Boolean::le_bits_to_fp(&node_bits)?;
                    let mut acc = TwoToOneCRHGadget::<Fr>::compress(&poseidon, &replica_id, &node)?;
                    for j in 0..p.parents() {
                        let label = FpVar::new_witness(cs.clone(), || {
                            value(&w, |w| Fr::from_le_bytes_mod_order(&w.challenges[i].parent_labels[j]))
                        })?;
                        acc = TwoToOneCRHGadget::<Fr>::compress(&poseidon, &acc, &label)?;
                    }
                    acc
                }
            };

            let mut node = leaf;
            for (level, is_right) in node_bits.iter().enumerate() {
                let sibling =
                    FpVar::new_witness(cs.clone(), || value(&w, |w| w.challenges[i].siblings[level]))?;
                let left = FpVar::conditionally_select(is_right, &sibling, &node)?;
                let right = FpVar::conditionally_select(is_right, &node, &sibling)?;
                node = TwoToOneCRHGadget::<Fr>::compress(&poseidon, &left, &right)?;
            }
            node.enforce_equal(&root)?;
        }

        for j in 0..p.filler {
            let bit = value(&w, |w| w.filler_bits[j]);
            let b = cs.new_witness_variable(|| bit.map(|b| if b { Fr::ONE } else { Fr::ZERO }))?;
            cs.enforce_r1cs_constraint(|| lc!() + b, || lc!() + Variable::One - b, || lc!())?;
        }
        Ok(())
    }
}
