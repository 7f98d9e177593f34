//! Tables of precomputed multiples for a resident key's MSMs ([`GpuBases::precompute`]): which MSMs
//! get one, at which width, in the device memory a key leaves.

use cuzk_field::{Curve, G1, G2};
use cuzk_groth16::PreparedKey;

use crate::msm::{GpuBases, Table, MSM_RESERVE};
use crate::{CudaBackend, CudaError};

/// Tables [`CudaBackend::precompute_tables`] tries, best first: (window bits, multiples per point,
/// capped at the windows). On the H200, against 16-bit windows without a table: every window in one
/// set at 20 bits, G1 2^24 random 112 ms against 132 (G2 349 against 414), 2^22 random 33.7 against
/// 37.7, 2^22 bit-heavy 6.2 against 6.3. Partial tables did not pay: four windows per set at 20 bits
/// was 123 ms at 2^24 but slower than no table at 2^22 (38.6 ms, bit-heavy 11.4 ms), so a key whose
/// full table does not fit takes none (docs/benchmarks/cuda-msm.md).
pub const TABLE_CHOICES: &[(u32, u32)] = &[(20, 13)];

/// Fewest points per batch a table is built for: below, the 2^19 buckets of a 20-bit window outnumber
/// the entries.
pub const TABLE_MIN_POINTS: usize = 1 << 20;

/// An MSM given a table by [`CudaBackend::precompute_tables`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableReport {
    /// Which of the key's MSMs: `h`, `l`, `b_g2`, `a`, `b_g1`.
    pub msm: &'static str,
    /// The table's window width and multiples.
    pub table: Table,
    /// Device bytes its points take now (the table replaces them).
    pub device_bytes: u64,
    /// How long the build took.
    pub build: std::time::Duration,
}

impl std::fmt::Display for TableReport {
    /// One sentence: `MSM h: 13 multiples at 20-bit windows, 20.94 GB, built in 6.1 s`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MSM {}: {} multiples at {}-bit windows, {:.2} GB, built in {:.1} s",
            self.msm,
            self.table.multiples,
            self.table.window_bits,
            self.device_bytes as f64 / 1e9,
            self.build.as_secs_f64()
        )
    }
}

impl CudaBackend {
    /// Gives `key`'s MSMs tables of precomputed multiples ([`GpuBases::precompute`]) while device
    /// memory allows, keeping `keep_free` bytes free beyond the MSMs' reserve (for the partitions'
    /// buffers and a recorded shape). The MSMs are served in the order a table helps them most: H
    /// (random scalars in every proof), L, B in G2 (three times G1's cost per point), A, B in G1.
    /// Each takes the widest table that fits ([`TABLE_CHOICES`]) or none; MSMs whose batches have
    /// fewer than `min_points` points take none (the engine passes [`TABLE_MIN_POINTS`]). Call it
    /// before [`CudaBackend::reserve_msm_workspace`], as a table changes the MSMs' buffers. Returns
    /// one line per MSM given a table.
    pub fn precompute_tables(
        &self,
        key: &mut PreparedKey<CudaBackend>,
        keep_free: usize,
        min_points: usize,
    ) -> Result<Vec<TableReport>, CudaError> {
        let batch = self.msm_config().batch;
        let min = (batch, min_points);
        let (g1, g2) = key.bases_mut();
        let [a, b_g1, l, h] = g1;
        let mut reports = Vec::new();
        for (msm, bases) in [("h", h), ("l", l)] {
            reports.extend(self.precompute_one::<G1>(msm, bases, keep_free, min)?);
        }
        reports.extend(self.precompute_one::<G2>("b_g2", g2, keep_free, min)?);
        for (msm, bases) in [("a", a), ("b_g1", b_g1)] {
            reports.extend(self.precompute_one::<G1>(msm, bases, keep_free, min)?);
        }
        Ok(reports)
    }

    fn precompute_one<C: Curve>(
        &self,
        msm: &'static str,
        bases: &mut GpuBases<C>,
        keep_free: usize,
        (batch, min_points): (usize, usize),
    ) -> Result<Option<TableReport>, CudaError> {
        if !bases.is_resident() || bases.kept().min(batch) < min_points.max(1) {
            return Ok(None);
        }
        for &(window_bits, multiples) in TABLE_CHOICES {
            let multiples = multiples.min(256u32.div_ceil(window_bits));
            let bytes = bases.table_bytes(multiples);
            let (free, _) = self.gpu().memory()?;
            let spare = free.saturating_sub(MSM_RESERVE).saturating_sub(keep_free);
            // The old points stay until the table is built, then go: the table needs its own size.
            if bytes > spare {
                continue;
            }
            let start = std::time::Instant::now();
            bases.precompute(self.gpu(), window_bits, multiples)?;
            return Ok(Some(TableReport {
                msm,
                table: Table { window_bits, multiples },
                device_bytes: bases.device_bytes(),
                build: start.elapsed(),
            }));
        }
        Ok(None)
    }
}
