#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod constants;
mod convert;
mod curve;
mod layout;

pub use convert::{from_device, from_device_unchecked, from_device_vec, to_device, to_device_vec};
pub use curve::{Affine, Curve, CurveId, Projective, G1, G2};
pub use layout::{DeviceFq, DeviceFq2, DeviceFr, DeviceG1Affine, DeviceG2Affine, DeviceRepr};

/// What can go wrong when device-layout data is turned back into arkworks values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// Source and destination slices differ in length.
    #[error("length mismatch: source has {source_len} elements, destination {dest_len}")]
    LengthMismatch {
        /// Elements in the source slice.
        source_len: usize,
        /// Elements in the destination slice.
        dest_len: usize,
    },
    /// A field element's limbs are not below the modulus.
    #[error("element {index}: {field} limbs are not reduced below the modulus")]
    NotReduced {
        /// Position of the element in the slice.
        index: usize,
        /// Which field ("Fr", "Fq").
        field: &'static str,
    },
    /// A point's coordinates do not satisfy the curve equation.
    #[error("element {index}: point is not on the {curve} curve")]
    NotOnCurve {
        /// Position of the element in the slice.
        index: usize,
        /// Which curve ("G1", "G2").
        curve: &'static str,
    },
}
