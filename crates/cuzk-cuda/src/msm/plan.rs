//! The shape of an MSM: its tuning ([`MsmConfig`]) and, per batch, the window width and the sizes
//! of the bucket machinery ([`Plan`]).

use crate::kernels::msm::SUM_THREADS as BLOCK;
use crate::CudaError;

/// Tuning of the MSM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsmConfig {
    /// Window width in bits (2..=24); `None` picks it from the batch size.
    pub window_bits: Option<u32>,
    /// Most points per batch.
    pub batch: usize,
}

impl Default for MsmConfig {
    fn default() -> Self {
        Self { window_bits: None, batch: 1 << 24 }
    }
}

/// Widest window the kernels take.
pub const MAX_WINDOW_BITS: u32 = 24;

/// The shape of one batch's bucket machinery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Window width `c`.
    pub c: u32,
    /// Windows, `ceil(256 / c)` (signed digits of a 255-bit scalar never carry out of the top one).
    pub windows: u32,
    /// Buckets per window, `2^(c-1)`.
    pub half: u32,
    /// Segments per window in the window reduction (a power of two dividing `half`).
    pub segments: u32,
    /// Threads of the first summing round: the windows' entries are cut into this many equal pieces
    /// (fewer when there are fewer entries than pieces).
    pub pieces: u32,
    /// Threads of the batch addition of the ones (a power of two, a multiple of the block size).
    pub ones_threads: u32,
}

impl Plan {
    /// The default window width for a batch of `n` points: `log2(n) - 6`, at most 16 (at 2^22 and
    /// 2^24 points, 16 beats both 15 and everything from 17 to 22 on the H200).
    pub fn default_window(n: usize) -> u32 {
        let log_n = usize::BITS - n.max(1).leading_zeros();
        log_n.saturating_sub(7).clamp(4, 16)
    }

    /// The plan for a batch of `n` points.
    pub fn new(n: usize, window_bits: Option<u32>) -> Result<Self, CudaError> {
        let c = window_bits.unwrap_or_else(|| Self::default_window(n));
        if !(2..=MAX_WINDOW_BITS).contains(&c) {
            return Err(CudaError::Size {
                op: "msm",
                size: c as usize,
                reason: "window width must be 2..=24",
            });
        }
        let windows = 256u32.div_ceil(c);
        let half = 1u32 << (c - 1);
        // Buckets per segment. A thread adds two points per bucket of its segment, one after the other,
        // then multiplies by the segment's offset. Below 2^15 buckets in all, the few threads are bound
        // by that chain's latency: segments of 2 buckets (2^16 points: 0.33 ms against 0.80 ms with
        // 16). From 2^15 up the GPU is busy anyway and the offset multiplications cost: at least 16
        // buckets per segment, at most 64, about 2^16 threads (2^20 points: 0.99 ms with 16, 1.20 ms
        // with 4).
        let buckets = windows as u64 * half as u64;
        let per = if buckets < 1 << 15 { 2 } else { (buckets >> 16).clamp(16, 64).next_power_of_two() };
        let per = per.min(half as u64) as u32;
        let segments = half / per;
        let entries = windows as u64 * n as u64;
        // Pieces of 8 to 512 entries when every digit is nonzero, about 2^17 of them from 2^20 points up.
        let pieces = u32::try_from(entries.div_ceil((entries >> 17).clamp(8, 512).next_power_of_two()))
            .map_err(|_| CudaError::Size { op: "msm", size: n, reason: "batch too large for one launch" })?;
        // Up to 16 ones per thread when all n scalars are 1, with at most 2^16 threads.
        let ones_threads = (n as u64 / 16).next_power_of_two().clamp(BLOCK as u64, 1 << 16) as u32;
        Ok(Self { c, windows, half, segments, pieces, ones_threads })
    }

    /// The windows' buckets, `windows * 2^(c-1)`; the list of ones follows them as one more bucket.
    pub fn window_buckets(&self) -> u32 {
        self.windows * self.half
    }

    /// Buckets sorted into, the windows' and the ones.
    pub fn buckets(&self) -> u32 {
        self.window_buckets() + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_fit_the_kernels() {
        for log_n in 0..=26u32 {
            for c in [None, Some(2), Some(9), Some(16), Some(20), Some(24)] {
                let n = 1usize << log_n;
                let p = Plan::new(n, c).unwrap();
                assert_eq!(p.half, 1 << (p.c - 1));
                // The top window never carries: it holds at most c - 1 of the scalar's 255 bits.
                assert!(255 - (p.windows - 1) * p.c < p.c, "{p:?}");
                assert!(p.segments.is_power_of_two() && p.half.is_multiple_of(p.segments), "{p:?}");
                assert!((1..=64).contains(&(p.half / p.segments)), "{p:?}");
                assert!(p.half / p.segments >= 2 || p.half < 2, "{p:?}");
                let entries = p.windows as u64 * n as u64;
                assert!((1..=entries.div_ceil(8)).contains(&(p.pieces as u64)), "{p:?}");
                assert!(p.pieces as u64 >= entries / 512, "{p:?}");
                assert!(p.ones_threads.is_power_of_two() && p.ones_threads.is_multiple_of(BLOCK), "{p:?}");
                assert!(p.ones_threads as u64 * 16 >= n as u64 || p.ones_threads == 1 << 16, "{p:?}");
                assert!((p.buckets() as u64) < 1 << 32);
            }
        }
        assert_eq!(Plan::new(1 << 24, None).unwrap().c, 16);
        assert_eq!(Plan::new(1 << 20, None).unwrap().c, 14);
        assert!(Plan::new(10, Some(1)).is_err());
        assert!(Plan::new(10, Some(25)).is_err());
    }
}
