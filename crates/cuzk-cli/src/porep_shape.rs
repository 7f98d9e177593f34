//! The recorded shape of a porep-like circuit, built by tiling instead of running arkworks over the
//! whole circuit.
//!
//! Recording a shape runs the circuit through arkworks' constraint system in setup mode: every
//! linear combination is built, inlined and turned into matrices. At 2^27 rows that takes minutes
//! and tens of GiB, longer than a bench on a GPU host may run. A porep-like circuit is a prefix (the
//! public inputs, the replica id's bits), then `challenges` blocks alike but for their variables,
//! then `filler` rows alike but for their bit. So [`porep_shape`] records the circuit with two
//! challenges and two filler rows, and lays the second challenge's rows out once per challenge and
//! the first filler row once per filler bit, each moved to its own variables, in parallel. The
//! coefficient table is interned again in the order [`R1csShape::record`] meets the coefficients,
//! so the result equals the recording of the whole circuit entry for entry: the tests compare the
//! two, and every partition proved against the shape is checked row by row on the device.

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
    let matrices = [two.a(), two.b(), two.c()].map(|csr| Template::of(csr, &layout));
    // Recording interns a coefficient where it first meets it, matrix by matrix and row by row. Every
    // challenge repeats the template block (the recording's second) and every filler bit the
    // template filler row, so the first meetings all lie in the prefix, the template block and (with
    // filler) the template filler row.
    let mut table = Table::new(two.coefficients());
    for m in &matrices {
        let filler = if params.filler > 0 { m.filler.clone() } else { 0..0 };
        for e in m.prefix.clone().chain(m.block.clone()).chain(filler) {
            table.index(m.csr.coefficient_indices()[e] as usize)?;
        }
    }
    let [a, b, c] = matrices.map(|m| m.tile(&layout, &table, params));
    R1csShape::from_parts(layout.counts, table.into_table(), [a?, b?, c?]).map_err(|e| e.to_string())
}

/// A matrix as [`R1csShape::from_parts`] takes it: row lengths, variable and coefficient index per entry.
type MatrixParts = (Vec<usize>, Vec<u32>, Vec<u32>);

/// One matrix of the two-challenge recording, as the template of the target's rows: where its
/// prefix, its second challenge's block and its first filler row lie among its entries.
struct Template<'a> {
    csr: &'a cuzk::synth::Csr,
    /// Row lengths of the prefix, of one block and of one filler row.
    lengths: [Vec<usize>; 3],
    prefix: std::ops::Range<usize>,
    block: std::ops::Range<usize>,
    filler: std::ops::Range<usize>,
}

impl<'a> Template<'a> {
    fn of(csr: &'a cuzk::synth::Csr, layout: &Layout) -> Self {
        let lengths: Vec<usize> = csr.row_lengths().collect();
        let (pre, block) = (layout.prefix_rows, layout.block_rows);
        let rows = [0..pre, pre + block..pre + 2 * block, pre + 2 * block..pre + 2 * block + 1];
        let entries = |r: &std::ops::Range<usize>| {
            let start: usize = lengths[..r.start].iter().sum();
            start..start + lengths[r.clone()].iter().sum::<usize>()
        };
        let [prefix, block_entries, filler] = rows.clone().map(|r| entries(&r));
        Self { csr, lengths: rows.map(|r| lengths[r].to_vec()), prefix, block: block_entries, filler }
    }

    /// The target's matrix: the prefix as it is, the block once per challenge and the filler row
    /// once per filler bit, each moved to its own variables; the blocks and filler rows are laid out
    /// in parallel, each straight into its place.
    fn tile(&self, layout: &Layout, table: &Table<'_>, params: PorepParams) -> Result<MatrixParts, String> {
        use rayon::prelude::*;
        let (prefix_n, block_n, filler_n) = (self.prefix.len(), self.block.len(), self.filler.len());
        let total = prefix_n + params.challenges * block_n + params.filler * filler_n;
        let mut lengths = Vec::with_capacity(layout.counts.constraints);
        lengths.extend_from_slice(&self.lengths[0]);
        for _ in 0..params.challenges {
            lengths.extend_from_slice(&self.lengths[1]);
        }
        for _ in 0..params.filler {
            lengths.extend_from_slice(&self.lengths[2]);
        }
        // Zeroed lazily by the allocator, the blocks and filler rows first written by the thread
        // that fills them: at 2^27 rows a matrix holds GiBs of entries.
        let (mut columns, mut coefficients) = (vec![0u32; total], vec![0u32; total]);
        let coefficients_of = |r: &std::ops::Range<usize>| -> Result<Vec<u32>, String> {
            self.csr.coefficient_indices()[r.clone()].iter().map(|&k| table.lookup(k as usize)).collect()
        };
        let fill = |range: &std::ops::Range<usize>,
                    block: Block,
                    columns: &mut [u32],
                    coefficients: &mut [u32],
                    template: &[u32]|
         -> Result<(), String> {
            for (to, &from) in columns.iter_mut().zip(&self.csr.columns()[range.clone()]) {
                *to = layout.column(from as usize, block)?;
            }
            coefficients.copy_from_slice(template);
            Ok(())
        };
        let (pre_columns, rest_columns) = columns.split_at_mut(prefix_n);
        let (pre_coefficients, rest_coefficients) = coefficients.split_at_mut(prefix_n);
        fill(&self.prefix, Block::Prefix, pre_columns, pre_coefficients, &coefficients_of(&self.prefix)?)?;
        let (block_columns, filler_columns) = rest_columns.split_at_mut(params.challenges * block_n);
        let (block_coefficients, filler_coefficients) =
            rest_coefficients.split_at_mut(params.challenges * block_n);
        for (range, n, columns, coefficients, block) in [
            (&self.block, block_n, block_columns, block_coefficients, Block::Challenge as fn(usize) -> Block),
            (&self.filler, filler_n, filler_columns, filler_coefficients, Block::Filler),
        ] {
            // No challenges or filler bits, or rows without entries.
            if columns.is_empty() {
                continue;
            }
            let template = coefficients_of(range)?;
            // About 2^16 entries to a task: many filler rows (a few entries each) or small blocks.
            let per_task = (1usize << 16).div_ceil(n);
            columns
                .par_chunks_mut(n * per_task)
                .zip(coefficients.par_chunks_mut(n * per_task))
                .enumerate()
                .try_for_each(|(task, (columns, coefficients))| {
                let rows = columns.chunks_mut(n).zip(coefficients.chunks_mut(n));
                for (i, (columns, coefficients)) in rows.enumerate() {
                    fill(range, block(task * per_task + i), columns, coefficients, &template)?;
                }
                Ok::<(), String>(())
            })?;
        }
        Ok((lengths, columns, coefficients))
    }
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

    /// The target index of template coefficient `k`, which [`Table::index`] must have met.
    fn lookup(&self, k: usize) -> Result<u32, String> {
        self.index
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| format!("coefficient {k} is not where the two-challenge recording first meets it"))
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
