//! How a matrix's rows fall on the 32 lanes of a warp when the device evaluates `M·z` (the sparse
//! products of the witness map: a thread a row, the rows of more than a bound first, a warp each).
//! A warp steps through its rows together, so a warp of rows of one entry and one of 256 takes 256
//! steps; the profile counts those steps, so a bound can be chosen for a circuit from its shape.

/// Lanes of a warp.
pub const WARP_LANES: usize = 32;

/// A matrix's rows as [`crate::Csr::row_profile`] counts them. A step is one entry (or none) for
/// every lane of a warp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RowProfile {
    /// Rows.
    pub rows: usize,
    /// Entries.
    pub entries: usize,
    /// Entries whose coefficient is not 1: a multiplication each.
    pub products: usize,
    /// The longest row's entries.
    pub longest: usize,
    /// The bound: rows of more entries are a warp's each (`None`: every row a thread's).
    pub long_above: Option<usize>,
    /// Rows of more than the bound.
    pub long_rows: usize,
    /// Their entries.
    pub long_entries: usize,
    /// Steps of the rows a thread each: for each warp of 32 consecutive rows, its longest (a long row
    /// counts one, its result read back).
    pub thread_steps: u64,
    /// Steps of the long rows, a warp each: `ceil(len / 32)` each, and one more for the sum across
    /// the warp.
    pub warp_steps: u64,
}

impl RowProfile {
    /// The profile of rows of `lengths` (in order) with `products` entries whose coefficient is not 1,
    /// rows of more than `long_above` entries a warp each.
    pub(crate) fn of(
        lengths: impl Iterator<Item = usize>,
        products: usize,
        long_above: Option<usize>,
    ) -> Self {
        let bound = long_above.unwrap_or(usize::MAX);
        let mut p = Self { products, long_above, ..Self::default() };
        let mut warp_longest = 0;
        for (row, len) in lengths.enumerate() {
            (p.rows, p.entries, p.longest) = (p.rows + 1, p.entries + len, p.longest.max(len));
            let lane = if len > bound {
                (p.long_rows, p.long_entries) = (p.long_rows + 1, p.long_entries + len);
                p.warp_steps += len.div_ceil(WARP_LANES) as u64 + 1;
                1
            } else {
                len
            };
            warp_longest = warp_longest.max(lane);
            if row % WARP_LANES == WARP_LANES - 1 {
                p.thread_steps += std::mem::take(&mut warp_longest) as u64;
            }
        }
        p.thread_steps += warp_longest as u64;
        p
    }

    /// All steps: the rows a thread each and the long rows.
    pub fn steps(&self) -> u64 {
        self.thread_steps + self.warp_steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warp_takes_as_long_as_its_longest_row_unless_the_long_rows_go_apart() {
        // Two warps of rows: the first 31 rows of one entry and one of 100, the second 32 rows of
        // two entries; then a last warp of one row of 3.
        let mut lengths = vec![1; 31];
        lengths.push(100);
        lengths.extend([2; 32]);
        lengths.push(3);
        let all = RowProfile::of(lengths.iter().copied(), 7, None);
        assert_eq!((all.rows, all.entries, all.products, all.longest), (65, 31 + 100 + 64 + 3, 7, 100));
        assert_eq!((all.long_rows, all.long_entries, all.warp_steps), (0, 0, 0));
        assert_eq!(all.thread_steps, 100 + 2 + 3);
        // Rows of more than 16 a warp each: the 100 takes 4 steps and one for the sum, and its lane
        // one step to read it back.
        let split = RowProfile::of(lengths.iter().copied(), 7, Some(16));
        assert_eq!((split.long_rows, split.long_entries), (1, 100));
        assert_eq!((split.thread_steps, split.warp_steps, split.steps()), (1 + 2 + 3, 5, 11));
        // A bound under every row sends every row to a warp.
        let warps = RowProfile::of(lengths.iter().copied(), 7, Some(0));
        assert_eq!(warps.long_rows, 65);
        assert_eq!(warps.thread_steps, 3);
        assert_eq!(warps.warp_steps, 31 * 2 + 5 + 32 * 2 + 2);
    }

    #[test]
    fn no_rows_take_no_steps() {
        let p = RowProfile::of(std::iter::empty(), 0, Some(16));
        assert_eq!((p.rows, p.steps(), p.longest), (0, 0, 0));
    }
}
