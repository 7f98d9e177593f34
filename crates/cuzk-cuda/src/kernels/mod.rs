//! One safe wrapper per kernel: each checks the lengths and sizes it can, launches on the given
//! stream with a `// SAFETY:` line naming the kernel signature it matches, and times its launch into
//! the [`Probe`](crate::profile::Probe) it is given. Every `unsafe` launch of the crate is here.
//!
//! Launches are asynchronous; errors in a kernel surface at the next synchronising call.

use cudarc::driver::LaunchConfig;

use crate::CudaError;

mod binned;
#[cfg(feature = "bench-kernels")]
mod field;
pub(crate) mod msm;
mod ntt;
pub(crate) mod r1cs;
mod twiddles;

#[cfg(feature = "bench-kernels")]
pub use field::{
    fq2_mul_bench, fq2_ops, fq_inv_bench, fq_mul_bench, fq_mul_fp64_bench, fq_mul_kara_bench, fq_ops,
    fq_sqr_bench, fr_mul_bench, fr_mul_fp64_bench, fr_mul_kara_bench, fr_mul_shoup_bench, fr_ops, FqInverse,
    FIELD_OPS, FQ2_OPS,
};
pub use ntt::{
    bit_reverse, bit_reverse_minus, fill_powers, ntt_pass, ntt_pass_gather, ntt_pass_times, ntt_pass_turn,
    pointwise_mul, quotient, scale, Decimation, Factor, Fold, PowerTable, ScaleAt, MAX_PASS_STAGES,
};
#[cfg(test)]
pub(crate) use twiddles::{folds_pass, stage_factors};
pub use twiddles::{shoup_pairs, shoup_twiddles, TwiddlePlacement, TwiddleTable, Twiddles};

/// Which units a kernel's field multiplications use: the NTT passes' (`kernels/ntt/ntt.cu`), G1's
/// batched first MSM round's (`kernels/msm/msm.cu`), the throughput probes'. Every choice gives the
/// same bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MulUnits {
    /// The 32-bit integer multiply-adds (Fr's `operator*`; a backend's NTT passes on these units
    /// multiply by their twiddles with Shoup's product, [`Twiddles::Shoup`]).
    #[default]
    Integer = 0,
    /// The FP64 units (`mul_fp64`, `kernels/field/fp64.cuh`).
    Fp64 = 1,
    /// Both, alternating warp by warp on each scheduler (`mixed_takes_fp64` in
    /// `kernels/field/fp64.cuh`): half of the warps where each scheduler holds an even number, as in
    /// the NTT passes (8 warps a multiprocessor); G1's batched MSM round (12) gives each scheduler two
    /// FP64 warps and one integer.
    Mixed = 2,
}

impl MulUnits {
    /// Every choice, in the order of the kernels that take one.
    pub const ALL: [Self; 3] = [Self::Integer, Self::Fp64, Self::Mixed];

    /// The name a configuration or a command line gives: `integer`, `fp64` or `mixed`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Integer => "integer",
            Self::Fp64 => "fp64",
            Self::Mixed => "mixed",
        }
    }
}

impl std::fmt::Display for MulUnits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is none of [`MulUnits`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown multiplication units {0:?}: expected \"integer\", \"fp64\" or \"mixed\"")]
pub struct UnknownMulUnits(pub String);

impl std::str::FromStr for MulUnits {
    type Err = UnknownMulUnits;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|u| u.name() == s).ok_or_else(|| UnknownMulUnits(s.to_owned()))
    }
}

/// Threads per block of the elementwise kernels.
const BLOCK: u32 = 256;
/// The most elements one elementwise launch takes (the kernels index with 32-bit integers).
pub const MAX_ELEMENTS: usize = u32::MAX as usize;

fn elementwise(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n as u32).div_ceil(BLOCK).max(1), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// `threads` threads in blocks of `block`, one dimension.
fn grid(op: &'static str, threads: usize, block: u32) -> Result<LaunchConfig, CudaError> {
    let blocks = u32::try_from(threads.div_ceil(block as usize).max(1)).map_err(|_| CudaError::Size {
        op,
        size: threads,
        reason: "too many threads for one launch",
    })?;
    Ok(LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 })
}

fn count(op: &'static str, n: usize) -> Result<u32, CudaError> {
    u32::try_from(n).map_err(|_| CudaError::Size { op, size: n, reason: "more than 2^32 - 1 elements" })
}

fn expect_len(op: &'static str, expected: usize, got: usize) -> Result<(), CudaError> {
    if expected == got {
        Ok(())
    } else {
        Err(CudaError::Length { op, expected, got })
    }
}

/// `Ok` when a buffer of `got` elements holds at least `need`.
fn expect_at_least(op: &'static str, need: usize, got: usize) -> Result<(), CudaError> {
    if got >= need {
        Ok(())
    } else {
        Err(CudaError::Length { op, expected: need, got })
    }
}
