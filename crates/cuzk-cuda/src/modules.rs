//! The kernel modules: PTX built by `cargo xtask ptx` from `kernels/` and embedded at build time, and
//! the handles of the functions each module holds, loaded (JIT-compiled by the driver) per context.
//!
//! The field module's test and throughput kernels exist only with the `bench-kernels` feature, so a
//! build without it (the daemon's) neither embeds nor loads them.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::{CudaError, DriverContext};

/// The embedded PTX.
mod ptx {
    pub(super) const NTT: &str = include_str!("../ptx/ntt.ptx");
    pub(super) const MSM: &str = include_str!("../ptx/msm.ptx");
    pub(super) const R1CS: &str = include_str!("../ptx/r1cs.ptx");
    #[cfg(feature = "bench-kernels")]
    pub(super) const FIELD_TEST: &str = include_str!("../ptx/field_test.ptx");
}

/// `log2` of the most elements one NTT pass block holds.
pub(crate) const PASS_TILE_BITS: u32 = 10;
/// Dynamic shared memory an NTT pass block may use: `2^PASS_TILE_BITS` elements and as many twiddles
/// (the passes by Shoup's products take no more: `Twiddles::shared_bytes` in `kernels/twiddles.rs`).
pub(crate) const PASS_SHARED_BYTES: i32 = 2 * (1 << PASS_TILE_BITS) * 32;
/// Pass kernels: one per [`MulUnits`](crate::kernels::MulUnits), in its order, then the one that
/// multiplies by its twiddles with Shoup's product ([`Twiddles::Shoup`](crate::kernels::Twiddles)).
pub(crate) const PASS_KINDS: usize = 4;

/// Bins a block of `msm_scatter_bins` counts in shared memory at most (`STAGE_BINS` in msm.cu).
pub(crate) const MAX_BINS: u32 = 1024;
/// Pairs a block of `msm_scatter_bins` stages at most (`STAGE_PAIRS`).
pub(crate) const STAGE_PAIRS: u32 = 8192;
/// Pairs per block of `msm_place` (`PLACE_PAIRS`), and the most buckets it stages them by (`PLACE_KEYS`).
pub(crate) const PLACE_PAIRS: u32 = 8192;
pub(crate) const PLACE_KEYS: u32 = 4096;
/// Dynamic shared memory of `msm_scatter_bins`: the staged pairs and two words per bin.
pub(crate) const SCATTER_BINS_SHARED_BYTES: u32 = STAGE_PAIRS * 8 + MAX_BINS * 2 * 4;
/// Dynamic shared memory of `msm_place`: a word and a half-word per staged pair, two words per bucket.
pub(crate) const PLACE_SHARED_BYTES: u32 = PLACE_PAIRS * (4 + 2) + PLACE_KEYS * 2 * 4;
// Both fit two blocks a multiprocessor on the H200 (228 KiB of shared memory each).
const _: () = assert!(SCATTER_BINS_SHARED_BYTES <= 110 << 10 && PLACE_SHARED_BYTES <= 110 << 10);

fn load(ctx: &Arc<CudaContext>, src: &str, op: &'static str) -> Result<Arc<CudaModule>, CudaError> {
    ctx.load_module(Ptx::from_src(src)).during(op)
}

fn function(module: &Arc<CudaModule>, name: &'static str) -> Result<CudaFunction, CudaError> {
    module.load_function(name).during(name)
}

/// The NTT module's kernels.
pub(crate) struct NttKernels {
    pub(crate) fill_powers: CudaFunction,
    /// The bit reversal, optionally scaling (by element, and by tiles from 2^8 up), with a power table
    /// in Montgomery's form and in Shoup's.
    pub(crate) bit_reverse: CudaFunction,
    pub(crate) bit_reverse_tiled: CudaFunction,
    pub(crate) bit_reverse_shoup: CudaFunction,
    pub(crate) bit_reverse_tiled_shoup: CudaFunction,
    /// The witness map's last step, a bit reversal that subtracts c's coefficients (by element, and
    /// by tiles from 2^8 up).
    pub(crate) bit_reverse_minus: CudaFunction,
    pub(crate) bit_reverse_minus_tiled: CudaFunction,
    /// The same with the power table in Shoup's form.
    pub(crate) bit_reverse_minus_shoup: CudaFunction,
    pub(crate) bit_reverse_minus_tiled_shoup: CudaFunction,
    /// `ntt_pass` of each kind ([`PASS_KINDS`]): any pass.
    pub(crate) pass: [CudaFunction; PASS_KINDS],
    /// `ntt_pass_first`: a pass from stage 0, stage 1's products by 1 skipped.
    pub(crate) pass_first: [CudaFunction; PASS_KINDS],
    /// `ntt_pass_times`: a pass on `x ∘ y`.
    pub(crate) pass_times: [CudaFunction; PASS_KINDS],
    /// `ntt_pass_gather`: a first pass out of place, the bit reversal before it in its loads.
    pub(crate) pass_gather: [CudaFunction; PASS_KINDS],
    /// The witness map's fused last inverse pass, coset scaling and first forward pass.
    pub(crate) pass_turn: [CudaFunction; PASS_KINDS],
    /// Shoup's twiddle tables, and power tables' halves in Shoup's form, from Montgomery values.
    pub(crate) shoup_twiddles: CudaFunction,
    /// A first or middle pass's own twiddle table, plain or folded.
    pub(crate) pass_twiddles: CudaFunction,
    pub(crate) shoup_pairs: CudaFunction,
    pub(crate) scale: CudaFunction,
    pub(crate) quotient: CudaFunction,
    /// The witness map's product on the coset, `a[i] *= b[i]`.
    pub(crate) mul: CudaFunction,
}

impl NttKernels {
    pub(crate) fn load(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        let m = load(ctx, ptx::NTT, "loading the NTT kernels")?;
        let kinds = |name: &'static str| -> Result<[CudaFunction; PASS_KINDS], CudaError> {
            let f = |suffix: &str| -> Result<CudaFunction, CudaError> {
                let full = format!("{name}{suffix}");
                m.load_function(&full).during(name)
            };
            let kinds = [f("")?, f("_fp64")?, f("_mixed")?, f("_shoup")?];
            for k in &kinds {
                k.set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    PASS_SHARED_BYTES,
                )
                .during("configuring an NTT pass's shared memory")?;
            }
            Ok(kinds)
        };
        let pass = kinds("ntt_pass")?;
        let pass_first = kinds("ntt_pass_first")?;
        let pass_times = kinds("ntt_pass_times")?;
        let pass_gather = kinds("ntt_pass_gather")?;
        let pass_turn = kinds("ntt_pass_turn")?;
        Ok(Self {
            fill_powers: function(&m, "ntt_fill_powers")?,
            bit_reverse: function(&m, "ntt_bit_reverse")?,
            bit_reverse_tiled: function(&m, "ntt_bit_reverse_tiled")?,
            bit_reverse_shoup: function(&m, "ntt_bit_reverse_shoup")?,
            bit_reverse_tiled_shoup: function(&m, "ntt_bit_reverse_tiled_shoup")?,
            bit_reverse_minus: function(&m, "ntt_bit_reverse_minus")?,
            bit_reverse_minus_tiled: function(&m, "ntt_bit_reverse_minus_tiled")?,
            bit_reverse_minus_shoup: function(&m, "ntt_bit_reverse_minus_shoup")?,
            bit_reverse_minus_tiled_shoup: function(&m, "ntt_bit_reverse_minus_tiled_shoup")?,
            pass,
            pass_first,
            pass_times,
            pass_gather,
            pass_turn,
            shoup_twiddles: function(&m, "ntt_shoup_twiddles")?,
            pass_twiddles: function(&m, "ntt_pass_twiddles")?,
            shoup_pairs: function(&m, "ntt_shoup_pairs")?,
            scale: function(&m, "ntt_scale")?,
            quotient: function(&m, "quotient")?,
            mul: function(&m, "ntt_mul")?,
        })
    }
}

/// The R1CS module's kernels: a compact assignment's expansion, the long rows' products and the
/// sparse products of the other rows.
pub(crate) struct R1csKernels {
    pub(crate) expand: CudaFunction,
    pub(crate) long_rows: CudaFunction,
    pub(crate) evaluate: CudaFunction,
}

impl R1csKernels {
    pub(crate) fn load(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        let m = load(ctx, ptx::R1CS, "loading the R1CS kernels")?;
        Ok(Self {
            expand: function(&m, "r1cs_expand")?,
            long_rows: function(&m, "r1cs_long_rows")?,
            evaluate: function(&m, "r1cs_evaluate")?,
        })
    }
}

/// The MSM module's kernels.
pub(crate) struct MsmKernels {
    pub(crate) count: CudaFunction,
    pub(crate) scatter: CudaFunction,
    pub(crate) bin_cursors: CudaFunction,
    pub(crate) scatter_bins: CudaFunction,
    pub(crate) place: CudaFunction,
    pub(crate) chunk_counts: CudaFunction,
    pub(crate) flat_counts: CudaFunction,
    pub(crate) scan_blocks: CudaFunction,
    pub(crate) scan_add: CudaFunction,
    pub(crate) g1: CurveKernels,
    pub(crate) g2: CurveKernels,
}

/// One curve's bucket and window kernels.
pub(crate) struct CurveKernels {
    pub(crate) sum_ones: CudaFunction,
    pub(crate) bucket_sum: CudaFunction,
    pub(crate) sum_affine: CudaFunction,
    pub(crate) sum_batch: CudaFunction,
    /// G1's `sum_batch` with its products on the FP64 units in every warp and in alternate warps (G2: none).
    pub(crate) sum_batch_fp64: Option<[CudaFunction; 2]>,
    pub(crate) sum_xyzz: CudaFunction,
    pub(crate) sum_partials: CudaFunction,
    pub(crate) window_segments: CudaFunction,
    pub(crate) reduce: CudaFunction,
    pub(crate) table: CudaFunction,
}

impl MsmKernels {
    pub(crate) fn load(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        let m = load(ctx, ptx::MSM, "loading the MSM kernels")?;
        let curve = |g: &str| -> Result<CurveKernels, CudaError> {
            let f = |name: &'static str| function(&m, name);
            let g1 = g == "g1";
            Ok(CurveKernels {
                sum_ones: f(if g1 { "g1_sum_ones" } else { "g2_sum_ones" })?,
                bucket_sum: f(if g1 { "g1_bucket_sum" } else { "g2_bucket_sum" })?,
                sum_affine: f(if g1 { "g1_sum_affine" } else { "g2_sum_affine" })?,
                sum_batch: f(if g1 { "g1_sum_batch" } else { "g2_sum_batch" })?,
                sum_batch_fp64: if g1 {
                    Some([f("g1_sum_batch_fp64")?, f("g1_sum_batch_mixed")?])
                } else {
                    None
                },
                sum_xyzz: f(if g1 { "g1_sum_xyzz" } else { "g2_sum_xyzz" })?,
                sum_partials: f(if g1 { "g1_sum_partials" } else { "g2_sum_partials" })?,
                window_segments: f(if g1 { "g1_window_segments" } else { "g2_window_segments" })?,
                reduce: f(if g1 { "g1_reduce" } else { "g2_reduce" })?,
                table: f(if g1 { "g1_table" } else { "g2_table" })?,
            })
        };
        let scatter_bins = function(&m, "msm_scatter_bins")?;
        let place = function(&m, "msm_place")?;
        for (f, bytes, what) in [
            (&scatter_bins, SCATTER_BINS_SHARED_BYTES, "configuring msm_scatter_bins's shared memory"),
            (&place, PLACE_SHARED_BYTES, "configuring msm_place's shared memory"),
        ] {
            f.set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
            .during(what)?;
        }
        Ok(Self {
            count: function(&m, "msm_count")?,
            scatter: function(&m, "msm_scatter")?,
            bin_cursors: function(&m, "msm_bin_cursors")?,
            scatter_bins,
            place,
            chunk_counts: function(&m, "msm_chunk_counts")?,
            flat_counts: function(&m, "msm_flat_counts")?,
            scan_blocks: function(&m, "scan_blocks")?,
            scan_add: function(&m, "scan_add")?,
            g1: curve("g1")?,
            g2: curve("g2")?,
        })
    }

    /// The bucket and window kernels of curve `C`.
    pub(crate) fn curve<C: cuzk_field::Curve>(&self) -> &CurveKernels {
        match C::ID {
            cuzk_field::CurveId::G1 => &self.g1,
            cuzk_field::CurveId::G2 => &self.g2,
        }
    }
}

/// The field module's test and throughput kernels (loaded on first use).
#[cfg(feature = "bench-kernels")]
pub(crate) struct FieldKernels {
    pub(crate) fr_ops: CudaFunction,
    pub(crate) fq_ops: CudaFunction,
    pub(crate) fq2_ops: CudaFunction,
    pub(crate) fr_mul_bench: CudaFunction,
    pub(crate) fq_mul_bench: CudaFunction,
    pub(crate) fr_mul_kara_bench: CudaFunction,
    pub(crate) fq_mul_kara_bench: CudaFunction,
    pub(crate) fr_mul_shoup_bench: CudaFunction,
    pub(crate) fq_sqr_bench: CudaFunction,
    pub(crate) fq2_mul_bench: CudaFunction,
    pub(crate) fr_mul_fp64_bench: CudaFunction,
    pub(crate) fq_mul_fp64_bench: CudaFunction,
    pub(crate) fq_inv_bench: CudaFunction,
}

#[cfg(feature = "bench-kernels")]
impl FieldKernels {
    pub(crate) fn load(ctx: &Arc<CudaContext>) -> Result<Self, CudaError> {
        let m = load(ctx, ptx::FIELD_TEST, "loading the field test kernels")?;
        Ok(Self {
            fr_ops: function(&m, "fr_ops")?,
            fq_ops: function(&m, "fq_ops")?,
            fq2_ops: function(&m, "fq2_ops")?,
            fr_mul_bench: function(&m, "fr_mul_bench")?,
            fq_mul_bench: function(&m, "fq_mul_bench")?,
            fr_mul_kara_bench: function(&m, "fr_mul_kara_bench")?,
            fq_mul_kara_bench: function(&m, "fq_mul_kara_bench")?,
            fr_mul_shoup_bench: function(&m, "fr_mul_shoup_bench")?,
            fq_sqr_bench: function(&m, "fq_sqr_bench")?,
            fq2_mul_bench: function(&m, "fq2_mul_bench")?,
            fr_mul_fp64_bench: function(&m, "fr_mul_fp64_bench")?,
            fq_mul_fp64_bench: function(&m, "fq_mul_fp64_bench")?,
            fq_inv_bench: function(&m, "fq_inv_bench")?,
        })
    }
}
