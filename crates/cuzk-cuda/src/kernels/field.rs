//! The field module's test and throughput kernels (`kernels/field/field_test.cu`): every field
//! operation elementwise, for the GPU suite to check against arkworks, and chains of multiplications
//! for throughput. Only with the `bench-kernels` feature.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, PushKernelArg};

use super::{count, elementwise, expect_len, MulUnits};
use crate::{CudaError, DriverContext, Gpu, GpuFq, GpuFq2, GpuFr};

/// Outputs per element of `fr_ops` / `fq_ops`: add, sub, mul, sqr, neg, inverse (Fermat's), to_mont,
/// from_mont, the inverse again by each variable-time method (`inverse_vartime` and
/// `inverse_euclid`, the MSM's), and the product again by `mul_fp64` (`kernels/field/fp64.cuh`).
pub const FIELD_OPS: usize = 11;
/// Outputs per element of `fq2_ops`: add, sub, mul, sqr, neg, inverse, and the inverse again by
/// `inverse_vartime` and by `inverse_euclid`.
pub const FQ2_OPS: usize = 8;

macro_rules! field_ops {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $kernel:ident, $ops:expr) => {
        $(#[$doc])*
        pub fn $name(
            gpu: &Gpu,
            stream: &Arc<CudaStream>,
            a: &CudaSlice<$ty>,
            b: &CudaSlice<$ty>,
            out: &mut CudaSlice<$ty>,
        ) -> Result<(), CudaError> {
            expect_len(stringify!($name), a.len(), b.len())?;
            expect_len(stringify!($name), a.len() * $ops, out.len())?;
            let n = count(stringify!($name), a.len())?;
            let f = &gpu.field_kernels()?.$kernel;
            // SAFETY: matches `<kernel>(const F* a, const F* b, F* out, uint32_t n)`; out has n * ops.
            unsafe { stream.launch_builder(f).arg(a).arg(b).arg(out).arg(&n).launch(elementwise(n as usize)) }
                .during(stringify!($kernel))?;
            Ok(())
        }
    };
}

field_ops!(
    /// For each `i`: `out[11i..11i+11]` = add, sub, mul, sqr, neg, inverse of `a[i]`, `b[i]` in Fr,
    /// then `to_mont(a[i])` (reading `a[i]` as canonical limbs), `from_mont(a[i])`, the inverse of
    /// `a[i]` by the two variable-time methods, and `a[i] * b[i]` by `mul_fp64`.
    fr_ops, GpuFr, fr_ops, FIELD_OPS
);
field_ops!(
    /// As [`fr_ops`], in Fq.
    fq_ops, GpuFq, fq_ops, FIELD_OPS
);
field_ops!(
    /// For each `i`: `out[7i..7i+7]` = add, sub, mul, sqr, neg, inverse in Fq2, and the inverse by
    /// the variable-time method.
    fq2_ops, GpuFq2, fq2_ops, FQ2_OPS
);

macro_rules! mul_bench {
    ($(#[$doc:meta])* $name:ident, $ty:ty) => {
        $(#[$doc])*
        pub fn $name(
            gpu: &Gpu,
            stream: &Arc<CudaStream>,
            a: &CudaSlice<$ty>,
            out: &mut CudaSlice<$ty>,
            iters: u32,
        ) -> Result<(), CudaError> {
            expect_len(stringify!($name), a.len(), out.len())?;
            let n = count(stringify!($name), a.len())?;
            let f = &gpu.field_kernels()?.$name;
            // SAFETY: matches `<kernel>(const F* a, F* out, uint32_t n, uint32_t iters)`; both have n.
            unsafe { stream.launch_builder(f).arg(a).arg(out).arg(&n).arg(&iters).launch(elementwise(n as usize)) }
                .during(stringify!($name))?;
            Ok(())
        }
    };
}

mul_bench!(
    /// Throughput probe: `2 * iters` Fr multiplications per element (two dependent chains).
    fr_mul_bench, GpuFr
);
mul_bench!(
    /// Throughput probe: `2 * iters` Fq multiplications per element (two dependent chains).
    fq_mul_bench, GpuFq
);
mul_bench!(
    /// Throughput probe: as [`fr_mul_bench`], by Karatsuba's product and a separate reduction
    /// (`mul_kara` in `kernels/field/mont.cuh`).
    fr_mul_kara_bench, GpuFr
);
mul_bench!(
    /// Throughput probe: as [`fq_mul_bench`], by `mul_kara`.
    fq_mul_kara_bench, GpuFq
);

/// Throughput probe: as [`fr_mul_bench`], by Shoup's product (`mul_shoup` in
/// `kernels/field/mont.cuh`) with factors given as a [`super::Twiddles::Shoup`] table `wt` of `a`'s
/// elements (canonical values, then quotients: [`super::shoup_twiddles`] of `a` twice over).
pub fn fr_mul_shoup_bench(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    a: &CudaSlice<GpuFr>,
    wt: &CudaSlice<GpuFr>,
    out: &mut CudaSlice<GpuFr>,
    iters: u32,
) -> Result<(), CudaError> {
    expect_len("fr_mul_shoup_bench", a.len(), out.len())?;
    expect_len("fr_mul_shoup_bench", 2 * a.len(), wt.len())?;
    let n = count("fr_mul_shoup_bench", a.len())?;
    let f = &gpu.field_kernels()?.fr_mul_shoup_bench;
    // SAFETY: matches `fr_mul_shoup_bench(const Fr* a, const Fr* wt, Fr* out, uint32_t n, uint32_t
    // iters)`; a and out have n elements, wt 2n.
    unsafe {
        stream.launch_builder(f).arg(a).arg(wt).arg(out).arg(&n).arg(&iters).launch(elementwise(n as usize))
    }
    .during("fr_mul_shoup_bench")?;
    Ok(())
}

/// Launches a throughput kernel `(const F* a, F* out, uint32_t n, uint32_t iters, uint32_t choice)`
/// over `a`'s elements.
fn launch_chains<T: cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    f: &cudarc::driver::CudaFunction,
    name: &'static str,
    a: &CudaSlice<T>,
    out: &mut CudaSlice<T>,
    iters: u32,
    choice: u32,
) -> Result<(), CudaError> {
    expect_len(name, a.len(), out.len())?;
    let n = count(name, a.len())?;
    // SAFETY: every caller passes a kernel of the signature above; a and out both have n elements.
    unsafe {
        stream
            .launch_builder(f)
            .arg(a)
            .arg(out)
            .arg(&n)
            .arg(&iters)
            .arg(&choice)
            .launch(elementwise(n as usize))
    }
    .during(name)?;
    Ok(())
}

/// Throughput probe: `2 * iters` Fq squarings per element (two dependent chains), by `sqr_int`'s
/// rows (`rows`, Fq's `sqr()`) or by `operator*` (the value times itself); the same outputs.
pub fn fq_sqr_bench(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    a: &CudaSlice<GpuFq>,
    out: &mut CudaSlice<GpuFq>,
    iters: u32,
    rows: bool,
) -> Result<(), CudaError> {
    launch_chains(stream, &gpu.field_kernels()?.fq_sqr_bench, "fq_sqr_bench", a, out, iters, rows as u32)
}

/// Throughput probe: `2 * iters` Fq2 products per element (two dependent chains), by `fq2_mul`
/// (`wide`: each coefficient reduced once) or by Karatsuba over three reduced Fq products; the same
/// outputs.
pub fn fq2_mul_bench(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    a: &CudaSlice<GpuFq2>,
    out: &mut CudaSlice<GpuFq2>,
    iters: u32,
    wide: bool,
) -> Result<(), CudaError> {
    launch_chains(stream, &gpu.field_kernels()?.fq2_mul_bench, "fq2_mul_bench", a, out, iters, wide as u32)
}

macro_rules! mul_fp64_bench {
    ($(#[$doc:meta])* $name:ident, $ty:ty) => {
        $(#[$doc])*
        pub fn $name(
            gpu: &Gpu,
            stream: &Arc<CudaStream>,
            a: &CudaSlice<$ty>,
            out: &mut CudaSlice<$ty>,
            iters: u32,
            units: MulUnits,
        ) -> Result<(), CudaError> {
            launch_chains(stream, &gpu.field_kernels()?.$name, stringify!($name), a, out, iters, units as u32)
        }
    };
}

mul_fp64_bench!(
    /// Throughput probe: as [`fr_mul_bench`], the multiplications on `units`.
    fr_mul_fp64_bench, GpuFr
);
mul_fp64_bench!(
    /// Throughput probe: as [`fq_mul_bench`], the multiplications on `units`.
    fq_mul_fp64_bench, GpuFq
);

/// How `fq_inv_bench` inverts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FqInverse {
    /// `inverse_vartime`: the binary GCD on 62-bit approximations (faster alone, slower in the MSM).
    Vartime = 0,
    /// `inverse_euclid`: the binary extended Euclid on full numbers, the MSM's.
    Euclid = 1,
    /// Fermat's `x^(p-2)`.
    Fermat = 2,
}

/// Throughput probe: `iters` dependent Fq inversions per element by `method`.
pub fn fq_inv_bench(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    a: &CudaSlice<GpuFq>,
    out: &mut CudaSlice<GpuFq>,
    iters: u32,
    method: FqInverse,
) -> Result<(), CudaError> {
    launch_chains(stream, &gpu.field_kernels()?.fq_inv_bench, "fq_inv_bench", a, out, iters, method as u32)
}
