//! The recorded shape of a porep-like circuit, built by tiling instead of running arkworks over the
//! whole circuit.
//!
//! Recording a shape runs the circuit through arkworks' constraint system in setup mode: every
//! linear combination is built, inlined and turned into matrices. At 2^27 rows that takes minutes
//! and tens of GiB, longer than a bench on a GPU host may run. A porep-like circuit is a prefix (the
//! public inputs, the replica id's bits), then `challenges` blocks alike but for their variables,
//! then `filler` rows alike but for their bit. So [`porep_shape`] records the circuit with two
//! challenges and two filler rows, and lays the second challenge's rows out once per challenge and
//! the first filler row once per filler bit, each moved to its own variables. The coefficient table
//! is interned again in the order [`R1csShape::record`] meets the coefficients, so the result equals
//! the recording of the whole circuit entry for entry: the tests compare the two, and every
//! partition proved against the shape is checked row by row on the device.

use cuzk::synth::{Counts, R1csShape};
use cuzk_circuits::{PorepLike, PorepParams};

/// Instance variables before the challenges' inputs: the constant 1, the replica id, the root.
const FIXED_INPUTS: usize = 3;

/// The shape of porep-like circuits of `params`, tiled from a recording with two challenges (see the
/// module documentation); recorded in full when there are at most two challenges.
pub(crate) fn porep_shape(params: PorepParams) -> Result<R1csShape, String> {
    let record = |p: PorepParams| {
        let circuit = PorepLike::new(p, 0, 0).map_err(|e| e.to_string())?;
        R1csShape::record(circuit).map_err(|e| e.to_string())
    };
    if params.challenges <= 2 {
        return record(params);
    }
    let one = record(PorepParams { challenges: 1, filler: 0, ..params })?.counts();
    let two = record(PorepParams { challenges: 2, filler: 2, ..params })?;
    let layout = Layout::of(one, two.counts(), params)?;
    let mut table = Table::new(two.coefficients());
    let mut parts: [(Vec<usize>, Vec<u32>, Vec<u32>); 3] = Default::default();
    for (part, csr) in parts.iter_mut().zip([two.a(), two.b(), two.c()]) {
        let rows: Vec<std::ops::Range<usize>> = {
            let mut at = 0;
            csr.row_lengths()
                .map(|l| {
                    at += l;
                    at - l..at
                })
                .collect()
        };
        // Reserved at their final sizes: at 2^27 rows a matrix holds GiBs of entries.
        let entries = |r: std::ops::Range<usize>| rows[r].iter().map(|x| x.len()).sum::<usize>();
        let (pre, block) = (layout.prefix_rows, layout.block_rows);
        let filler_row = entries(pre + 2 * block..pre + 2 * block + 1);
        let total = entries(0..pre)
            + params.challenges * entries(pre + block..pre + 2 * block)
            + params.filler * filler_row;
        part.0.reserve_exact(layout.counts.constraints);
        part.1.reserve_exact(total);
        part.2.reserve_exact(total);
        let mut put = |row: usize, block: Block| -> Result<(), String> {
            let range = rows[row].clone();
            part.0.push(range.len());
            for e in range {
                part.1.push(layout.column(csr.columns()[e] as usize, block)?);
                part.2.push(table.index(csr.coefficient_indices()[e] as usize)?);
            }
            Ok(())
        };
        for row in 0..layout.prefix_rows {
            put(row, Block::Prefix)?;
        }
        for challenge in 0..params.challenges {
            for row in 0..layout.block_rows {
                put(layout.prefix_rows + layout.block_rows + row, Block::Challenge(challenge))?;
            }
        }
        for bit in 0..params.filler {
            put(layout.prefix_rows + 2 * layout.block_rows, Block::Filler(bit))?;
        }
    }
    R1csShape::from_parts(layout.counts, table.into_table(), parts).map_err(|e| e.to_string())
}

/// Which rows of the target a template row is laid out for.
#[derive(Clone, Copy)]
enum Block {
    Prefix,
    Challenge(usize),
    Filler(usize),
}

/// Where the parts of a porep-like circuit's variables and rows lie, in the two-challenge recording
/// and in the target.
struct Layout {
    /// The target's counts.
    counts: Counts,
    challenges: usize,
    /// Witness variables and rows before the first challenge, and per challenge.
    prefix_witness: usize,
    block_witness: usize,
    prefix_rows: usize,
    block_rows: usize,
}

impl Layout {
    /// From the counts of one challenge without filler and two challenges with two filler rows.
    fn of(one: Counts, two: Counts, params: PorepParams) -> Result<Self, String> {
        let block_witness = two.witness.checked_sub(2 + one.witness).ok_or("witness counts do not tile")?;
        let block_rows = two.constraints.checked_sub(2 + one.constraints).ok_or("row counts do not tile")?;
        let prefix_witness = one.witness.checked_sub(block_witness).ok_or("witness counts do not tile")?;
        let prefix_rows = one.constraints.checked_sub(block_rows).ok_or("row counts do not tile")?;
        let n = params.challenges;
        if one.instance != FIXED_INPUTS + 1 || two.instance != FIXED_INPUTS + 2 {
            return Err(format!("instance counts {} and {} do not tile", one.instance, two.instance));
        }
        let counts = Counts {
            constraints: prefix_rows + n * block_rows + params.filler,
            instance: FIXED_INPUTS + n,
            witness: prefix_witness + n * block_witness + params.filler,
        };
        let expected = params.counts().map_err(|e| e.to_string())?;
        if (counts.constraints, counts.instance, counts.witness)
            != (expected.constraints, expected.instance, expected.witness)
        {
            return Err(format!("tiled counts {counts:?} differ from the circuit's {expected:?}"));
        }
        Ok(Self { counts, challenges: n, prefix_witness, block_witness, prefix_rows, block_rows })
    }

    /// The target column of column `c` of the two-challenge recording, in a row laid out for `block`:
    /// the fixed inputs and the prefix's witnesses stay themselves; the second challenge's input and
    /// block, and the first filler bit, become the block's own. Any other column would tie the block
    /// to another one, which the circuit never does: an error, not a guess.
    fn column(&self, c: usize, block: Block) -> Result<u32, String> {
        let (inputs, witness) = (FIXED_INPUTS + 2, self.counts.instance);
        let second_block = inputs + self.prefix_witness + self.block_witness;
        let filler = inputs + self.prefix_witness + 2 * self.block_witness;
        let target = match (c, block) {
            (c, _) if c < FIXED_INPUTS => Some(c),
            (c, Block::Challenge(i)) if c == FIXED_INPUTS + 1 => Some(FIXED_INPUTS + i),
            (c, _) if (inputs..inputs + self.prefix_witness).contains(&c) => Some(witness + c - inputs),
            (c, Block::Challenge(i)) if (second_block..filler).contains(&c) => {
                Some(witness + self.prefix_witness + i * self.block_witness + c - second_block)
            }
            (c, Block::Filler(bit)) if c == filler => {
                Some(witness + self.prefix_witness + self.challenges * self.block_witness + bit)
            }
            _ => None,
        };
        target
            .and_then(|t| u32::try_from(t).ok())
            .ok_or_else(|| format!("column {c} of the two-challenge recording does not tile"))
    }
}

/// The coefficient table of the target, interned in the order the entries come (as recording does).
struct Table<'a> {
    template: &'a [ark_bls12_381::Fr],
    /// Target index of each template coefficient, once met.
    index: Vec<Option<u32>>,
    table: Vec<ark_bls12_381::Fr>,
}

impl<'a> Table<'a> {
    fn new(template: &'a [ark_bls12_381::Fr]) -> Self {
        // Recording starts its table with 1, which is the template's first coefficient too.
        let mut index = vec![None; template.len()];
        index[0] = Some(0);
        Self { template, index, table: vec![template[0]] }
    }

    fn index(&mut self, k: usize) -> Result<u32, String> {
        let slot = self.index.get_mut(k).ok_or_else(|| format!("coefficient {k} is not in the table"))?;
        Ok(*slot.get_or_insert_with(|| {
            self.table.push(self.template[k]);
            (self.table.len() - 1) as u32
        }))
    }

    fn into_table(self) -> Vec<ark_bls12_381::Fr> {
        self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_circuits::LabelHash;

    fn recorded(params: PorepParams) -> R1csShape {
        R1csShape::record(PorepLike::new(params, 7, 3).unwrap()).unwrap()
    }

    #[test]
    fn a_tiled_shape_equals_the_recorded_one() {
        let sha = PorepParams {
            challenges: 3,
            depth: 3,
            base_parents: 1,
            expander_parents: 1,
            label_hash: LabelHash::Sha256,
            filler: 0,
        };
        let poseidon = PorepParams { label_hash: LabelHash::Poseidon, depth: 5, ..sha };
        let sizes = [16, 14].map(|k| PorepLike::params_for_log_constraints(k).unwrap());
        assert!(sizes.iter().all(|p| p.challenges > 2), "{sizes:?}: sizes that tile");
        for params in [
            sha,
            PorepParams { challenges: 5, filler: 7, ..sha },
            PorepParams { challenges: 4, filler: 1, base_parents: 6, expander_parents: 8, ..sha },
            poseidon,
            PorepParams { challenges: 6, filler: 3, ..poseidon },
            sizes[0],
            sizes[1],
        ] {
            let tiled = porep_shape(params).unwrap();
            let whole = recorded(params);
            assert_eq!(tiled.counts(), whole.counts(), "{params:?}");
            assert_eq!(tiled.coefficients(), whole.coefficients(), "{params:?}: table");
            for (t, w) in [(tiled.a(), whole.a()), (tiled.b(), whole.b()), (tiled.c(), whole.c())] {
                assert_eq!(t, w, "{params:?}");
            }
        }
    }

    #[test]
    fn few_challenges_are_recorded_whole() {
        let params = PorepLike::params_for_log_constraints(10).unwrap();
        let tiled = porep_shape(PorepParams { challenges: 2, ..params }).unwrap();
        assert_eq!(tiled.a(), recorded(PorepParams { challenges: 2, ..params }).a());
    }
}
