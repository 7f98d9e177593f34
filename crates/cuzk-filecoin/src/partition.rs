//! A PoRep partition's circuit held as its parts, so that its challenges can be synthesized on several
//! threads for a witness (see [`crate::witness`]).

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use filecoin_hashers::Hasher;
use filecoin_proofs::constants::DefaultPieceHasher;
use filecoin_proofs::DefaultPieceDomain;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{self, StackedCircuit};

use crate::witness::{join_parts, Witness, Witnesses};

/// A PoRep partition's circuit as its parts: the public values and commitments, and the vanilla
/// proof of each challenge. Synthesized whole, it is the circuit `StackedCompound::circuit` builds
/// (`StackedCircuit` over the same values); for a witness, its challenges are synthesized in parts
/// on rayon's threads ([`Witness`]), each part with the circuit's shared prefix.
pub struct SealPartition<Tree: MerkleTreeTrait> {
    pub(crate) commitments: Commitments<Tree>,
    pub(crate) challenges: Vec<stacked::Proof<Tree, DefaultPieceHasher>>,
}

/// A seal partition's public values and commitments, which every part of its synthesis shares.
pub(crate) struct Commitments<Tree: MerkleTreeTrait> {
    pub(crate) replica_id: <Tree::Hasher as Hasher>::Domain,
    pub(crate) comm_d: DefaultPieceDomain,
    pub(crate) comm_r: <Tree::Hasher as Hasher>::Domain,
    pub(crate) comm_r_last: <Tree::Hasher as Hasher>::Domain,
    pub(crate) comm_c: <Tree::Hasher as Hasher>::Domain,
}

/// Filecoin's seal circuit over `commitments` and `challenges`: its prefix (the public inputs,
/// `comm_r = H(comm_c, comm_r_last)`), then each challenge in order.
fn synthesize_seal<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Scalar>>(
    cs: CS,
    commitments: &Commitments<Tree>,
    challenges: Vec<stacked::Proof<Tree, DefaultPieceHasher>>,
) -> Result<(), SynthesisError> {
    let Commitments { replica_id, comm_d, comm_r, comm_r_last, comm_c } = *commitments;
    StackedCircuit::<Tree, DefaultPieceHasher>::synthesize(
        cs,
        Some(replica_id),
        Some(comm_d),
        Some(comm_r),
        Some(comm_r_last),
        Some(comm_c),
        challenges.into_iter().map(Into::into).collect(),
    )
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Scalar> for SealPartition<Tree> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        synthesize_seal::<Tree, _>(cs, &self.commitments, self.challenges)
    }
}

impl<Tree: 'static + MerkleTreeTrait> Witness for SealPartition<Tree> {
    /// The challenges in as many runs as rayon has threads (at least two, at most one a challenge),
    /// each run with the shared prefix, joined in order.
    fn witness(self, w: &mut Witnesses) -> Result<(), SynthesisError> {
        let n = self.challenges.len();
        let parts = n.min(rayon::current_num_threads().max(2));
        let commitments = &self.commitments;
        if parts < 2 {
            return synthesize_seal::<Tree, _>(w, commitments, self.challenges);
        }
        let mut prefix = Witnesses::root();
        synthesize_seal::<Tree, _>(&mut prefix, commitments, Vec::new())?;
        let mut rest = self.challenges.into_iter();
        let runs: Vec<Vec<_>> = (0..parts)
            .map(|k| rest.by_ref().take(n / parts + usize::from(k < n % parts)).collect())
            .collect();
        join_parts(w, &prefix, runs, |sub, run| synthesize_seal::<Tree, _>(sub, commitments, run))
    }
}
