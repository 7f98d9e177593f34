//! The two groups of BLS12-381 that a Groth16 prover's MSMs run over, as types: one generic MSM
//! serves `A` and `B` in G1 and `B` in G2, as arkworks' `VariableBaseMSM` does.
//!
//! [`Curve`] is sealed: only [`G1`] and [`G2`] implement it, so a backend that keeps its own data per
//! curve (device layouts, kernels) can rely on there being exactly these two.

use ark_bls12_381::{g1, g2, Fr};
use ark_ec::short_weierstrass::SWCurveConfig;
use ark_ec::CurveConfig;

use crate::{DeviceFq, DeviceFq2, DeviceG1Affine, DeviceG2Affine, DeviceRepr};

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::G1 {}
    impl Sealed for super::G2 {}
}

/// Which group a [`Curve`] is, for code that must pick per group (a kernel, a table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CurveId {
    /// G1, over Fq.
    G1,
    /// G2, over Fq2.
    G2,
}

/// A group of BLS12-381: its arkworks curve and its device layouts. Implemented by [`G1`] and [`G2`]
/// only.
pub trait Curve: sealed::Sealed + Send + Sync + Sized + 'static {
    /// The arkworks curve (`ark_bls12_381::g1::Config` or `g2::Config`).
    type Config: SWCurveConfig<ScalarField = Fr>;
    /// A coordinate in device layout.
    type DeviceBase: DeviceRepr<Ark = <Self::Config as CurveConfig>::BaseField> + Default + PartialEq;
    /// An affine point in device layout.
    type DeviceAffine: DeviceRepr<Ark = ark_ec::short_weierstrass::Affine<Self::Config>> + Default;
    /// Which group this is.
    const ID: CurveId;
    /// "G1" or "G2".
    const NAME: &'static str;
    /// The name of an MSM over this group in errors and timings ("msm_g1", "msm_g2").
    const MSM: &'static str;
}

/// BLS12-381 G1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum G1 {}

/// BLS12-381 G2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum G2 {}

impl Curve for G1 {
    type Config = g1::Config;
    type DeviceBase = DeviceFq;
    type DeviceAffine = DeviceG1Affine;
    const ID: CurveId = CurveId::G1;
    const NAME: &'static str = "G1";
    const MSM: &'static str = "msm_g1";
}

impl Curve for G2 {
    type Config = g2::Config;
    type DeviceBase = DeviceFq2;
    type DeviceAffine = DeviceG2Affine;
    const ID: CurveId = CurveId::G2;
    const NAME: &'static str = "G2";
    const MSM: &'static str = "msm_g2";
}

/// An affine point of `C`.
pub type Affine<C> = ark_ec::short_weierstrass::Affine<<C as Curve>::Config>;
/// A projective point of `C`.
pub type Projective<C> = ark_ec::short_weierstrass::Projective<<C as Curve>::Config>;
