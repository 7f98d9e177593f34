//! Values as the kernels see them: field elements and points in device layout (`cuzk_field`'s
//! `#[repr(C)]` types), wrapped so cudarc may copy them to and from the device.

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use cuzk_field::{Curve, DeviceFq, DeviceFq2, DeviceFr};

/// An Fr element as the kernels see it (Montgomery limbs; see `cuzk_field::DeviceFr`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuFr(pub DeviceFr);
/// An Fq element as the kernels see it.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuFq(pub DeviceFq);
/// An Fq2 element as the kernels see it.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuFq2(pub DeviceFq2);

// SAFETY: each is a transparent wrapper of a #[repr(C)] struct of u64 limbs (sizes asserted in
// cuzk-field): no padding, no pointers, every bit pattern is a valid value, and the kernels declare the
// same layout (N little-endian u32 words per field element).
unsafe impl DeviceRepr for GpuFr {}
// SAFETY: as above.
unsafe impl DeviceRepr for GpuFq {}
// SAFETY: as above.
unsafe impl DeviceRepr for GpuFq2 {}
// SAFETY: all-zero limbs are a valid value (the field element 0).
unsafe impl ValidAsZeroBits for GpuFr {}
// SAFETY: as above.
unsafe impl ValidAsZeroBits for GpuFq {}
// SAFETY: as above.
unsafe impl ValidAsZeroBits for GpuFq2 {}

/// An affine point of `C` as the kernels see it (identity = all-zero coordinates).
#[repr(transparent)]
pub struct GpuAffine<C: Curve>(pub C::DeviceAffine);

/// A G1 affine point as the kernels see it.
pub type GpuG1Affine = GpuAffine<cuzk_field::G1>;
/// A G2 affine point as the kernels see it.
pub type GpuG2Affine = GpuAffine<cuzk_field::G2>;

impl<C: Curve> Clone for GpuAffine<C> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<C: Curve> Copy for GpuAffine<C> {}
impl<C: Curve> Default for GpuAffine<C> {
    fn default() -> Self {
        Self(C::DeviceAffine::default())
    }
}
impl<C: Curve> std::fmt::Debug for GpuAffine<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuAffine<{}>", C::NAME)
    }
}

impl<C: Curve> GpuAffine<C> {
    /// An arkworks point in device layout.
    pub fn from_ark(p: &cuzk_field::Affine<C>) -> Self {
        Self(cuzk_field::DeviceRepr::from_ark(p))
    }
}

/// A point of `C` in XYZZ coordinates, `x = X/ZZ`, `y = Y/ZZZ`, identity when `ZZ = 0`.
#[repr(C)]
pub struct Xyzz<C: Curve> {
    pub(crate) x: C::DeviceBase,
    pub(crate) y: C::DeviceBase,
    pub(crate) zz: C::DeviceBase,
    pub(crate) zzz: C::DeviceBase,
}

impl<C: Curve> Clone for Xyzz<C> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<C: Curve> Copy for Xyzz<C> {}
impl<C: Curve> Default for Xyzz<C> {
    fn default() -> Self {
        let z = C::DeviceBase::default();
        Self { x: z, y: z, zz: z, zzz: z }
    }
}
impl<C: Curve> std::fmt::Debug for Xyzz<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Xyzz<{}>", C::NAME)
    }
}

// SAFETY: `Curve` is sealed: `C::DeviceAffine` is `DeviceG1Affine` or `DeviceG2Affine`, #[repr(C)]
// structs of u64 limbs (no padding, no pointers, every bit pattern a valid value), and the kernels
// declare the same layout (`Affine<F>`: x then y).
unsafe impl<C: Curve> DeviceRepr for GpuAffine<C> {}
// SAFETY: all-zero coordinates are the identity.
unsafe impl<C: Curve> ValidAsZeroBits for GpuAffine<C> {}
// SAFETY: #[repr(C)] of four coordinates, each `DeviceFq` or `DeviceFq2` (`Curve` is sealed): u64
// limbs, as the kernels' `Xyzz<F>` (X, Y, ZZ, ZZZ).
unsafe impl<C: Curve> DeviceRepr for Xyzz<C> {}
// SAFETY: all-zero XYZZ coordinates are the identity (ZZ = 0).
unsafe impl<C: Curve> ValidAsZeroBits for Xyzz<C> {}
