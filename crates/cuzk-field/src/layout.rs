//! `#[repr(C)]` types in the layout the kernels use, and their conversion to and from arkworks.
//!
//! Every field element is stored as little-endian 64-bit limbs holding the Montgomery form
//! (`x * 2^(64*N) mod p`), exactly arkworks' internal representation, so conversion is a limb copy.

use ark_bls12_381::{Fq, Fq2, Fr, G1Affine, G2Affine};
use ark_ec::AffineRepr;
use ark_ff::{BigInt, PrimeField};

use crate::LayoutError;

/// A value with a fixed device layout and a matching arkworks type.
pub trait DeviceRepr: Copy + Send + Sync + Sized + 'static {
    /// The arkworks type this layout mirrors.
    type Ark: Copy + Send + Sync;
    /// Copies an arkworks value into device layout.
    fn from_ark(value: &Self::Ark) -> Self;
    /// Converts back, checking that limbs are reduced (and points lie on their curve).
    /// `index` is only used to name the element in an error.
    fn to_ark_checked(&self, index: usize) -> Result<Self::Ark, LayoutError>;
    /// Converts back without any check: the caller vouches that `self` came from [`DeviceRepr::from_ark`]
    /// or an equally trusted producer. Never unsound, but garbage in gives garbage out.
    fn to_ark_unchecked(&self) -> Self::Ark;
}

/// An element of the scalar field Fr (255 bits, 4 limbs) in Montgomery form.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceFr {
    /// Little-endian limbs of the Montgomery form.
    pub limbs: [u64; 4],
}

/// An element of the base field Fq (381 bits, 6 limbs) in Montgomery form.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceFq {
    /// Little-endian limbs of the Montgomery form.
    pub limbs: [u64; 6],
}

/// An element `c0 + c1 * u` of Fq2 = Fq\[u\]/(u^2 + 1).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceFq2 {
    /// The real part.
    pub c0: DeviceFq,
    /// The coefficient of `u`.
    pub c1: DeviceFq,
}

/// An affine G1 point. The identity is encoded as `x = y = 0`, which is not on the curve
/// `y^2 = x^3 + 4`, so the encoding is unambiguous.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceG1Affine {
    /// x coordinate.
    pub x: DeviceFq,
    /// y coordinate.
    pub y: DeviceFq,
}

/// An affine G2 point. The identity is encoded as `x = y = 0`, which is not on the curve
/// `y^2 = x^3 + 4(1 + u)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DeviceG2Affine {
    /// x coordinate.
    pub x: DeviceFq2,
    /// y coordinate.
    pub y: DeviceFq2,
}

const _: () = {
    assert!(core::mem::size_of::<DeviceFr>() == 32);
    assert!(core::mem::size_of::<DeviceFq>() == 48);
    assert!(core::mem::size_of::<DeviceFq2>() == 96);
    assert!(core::mem::size_of::<DeviceG1Affine>() == 96);
    assert!(core::mem::size_of::<DeviceG2Affine>() == 192);
    assert!(core::mem::align_of::<DeviceFr>() == 8);
    assert!(core::mem::align_of::<DeviceG2Affine>() == 8);
};

impl DeviceG1Affine {
    /// The identity (point at infinity) in device encoding.
    pub const IDENTITY: Self = Self { x: DeviceFq { limbs: [0; 6] }, y: DeviceFq { limbs: [0; 6] } };
    /// Whether this is the identity encoding.
    pub fn is_identity(&self) -> bool {
        *self == Self::IDENTITY
    }
}

impl DeviceG2Affine {
    /// The identity (point at infinity) in device encoding.
    pub const IDENTITY: Self = Self {
        x: DeviceFq2 { c0: DeviceFq { limbs: [0; 6] }, c1: DeviceFq { limbs: [0; 6] } },
        y: DeviceFq2 { c0: DeviceFq { limbs: [0; 6] }, c1: DeviceFq { limbs: [0; 6] } },
    };
    /// Whether this is the identity encoding.
    pub fn is_identity(&self) -> bool {
        *self == Self::IDENTITY
    }
}

/// `limbs < modulus`, comparing from the most significant limb.
fn is_reduced<const N: usize>(limbs: &[u64; N], modulus: &[u64; N]) -> bool {
    for i in (0..N).rev() {
        if limbs[i] != modulus[i] {
            return limbs[i] < modulus[i];
        }
    }
    false
}

impl DeviceRepr for DeviceFr {
    type Ark = Fr;
    fn from_ark(value: &Fr) -> Self {
        Self { limbs: value.0 .0 }
    }
    fn to_ark_checked(&self, index: usize) -> Result<Fr, LayoutError> {
        if is_reduced(&self.limbs, &<Fr as PrimeField>::MODULUS.0) {
            Ok(self.to_ark_unchecked())
        } else {
            Err(LayoutError::NotReduced { index, field: "Fr" })
        }
    }
    fn to_ark_unchecked(&self) -> Fr {
        Fr::new_unchecked(BigInt(self.limbs))
    }
}

impl DeviceRepr for DeviceFq {
    type Ark = Fq;
    fn from_ark(value: &Fq) -> Self {
        Self { limbs: value.0 .0 }
    }
    fn to_ark_checked(&self, index: usize) -> Result<Fq, LayoutError> {
        if is_reduced(&self.limbs, &<Fq as PrimeField>::MODULUS.0) {
            Ok(self.to_ark_unchecked())
        } else {
            Err(LayoutError::NotReduced { index, field: "Fq" })
        }
    }
    fn to_ark_unchecked(&self) -> Fq {
        Fq::new_unchecked(BigInt(self.limbs))
    }
}

impl DeviceRepr for DeviceFq2 {
    type Ark = Fq2;
    fn from_ark(value: &Fq2) -> Self {
        Self { c0: DeviceFq::from_ark(&value.c0), c1: DeviceFq::from_ark(&value.c1) }
    }
    fn to_ark_checked(&self, index: usize) -> Result<Fq2, LayoutError> {
        Ok(Fq2::new(self.c0.to_ark_checked(index)?, self.c1.to_ark_checked(index)?))
    }
    fn to_ark_unchecked(&self) -> Fq2 {
        Fq2::new(self.c0.to_ark_unchecked(), self.c1.to_ark_unchecked())
    }
}

impl DeviceRepr for DeviceG1Affine {
    type Ark = G1Affine;
    fn from_ark(p: &G1Affine) -> Self {
        match p.xy() {
            Some((x, y)) => Self { x: DeviceFq::from_ark(&x), y: DeviceFq::from_ark(&y) },
            None => Self::IDENTITY,
        }
    }
    fn to_ark_checked(&self, index: usize) -> Result<G1Affine, LayoutError> {
        if self.is_identity() {
            return Ok(G1Affine::zero());
        }
        let p = G1Affine::new_unchecked(self.x.to_ark_checked(index)?, self.y.to_ark_checked(index)?);
        if p.is_on_curve() {
            Ok(p)
        } else {
            Err(LayoutError::NotOnCurve { index, curve: "G1" })
        }
    }
    fn to_ark_unchecked(&self) -> G1Affine {
        if self.is_identity() {
            G1Affine::zero()
        } else {
            G1Affine::new_unchecked(self.x.to_ark_unchecked(), self.y.to_ark_unchecked())
        }
    }
}

impl DeviceRepr for DeviceG2Affine {
    type Ark = G2Affine;
    fn from_ark(p: &G2Affine) -> Self {
        match p.xy() {
            Some((x, y)) => Self { x: DeviceFq2::from_ark(&x), y: DeviceFq2::from_ark(&y) },
            None => Self::IDENTITY,
        }
    }
    fn to_ark_checked(&self, index: usize) -> Result<G2Affine, LayoutError> {
        if self.is_identity() {
            return Ok(G2Affine::zero());
        }
        let p = G2Affine::new_unchecked(self.x.to_ark_checked(index)?, self.y.to_ark_checked(index)?);
        if p.is_on_curve() {
            Ok(p)
        } else {
            Err(LayoutError::NotOnCurve { index, curve: "G2" })
        }
    }
    fn to_ark_unchecked(&self) -> G2Affine {
        if self.is_identity() {
            G2Affine::zero()
        } else {
            G2Affine::new_unchecked(self.x.to_ark_unchecked(), self.y.to_ark_unchecked())
        }
    }
}
