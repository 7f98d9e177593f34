//! Constants the kernels need, derived from arkworks so that host and device always agree.
//!
//! Nothing here is typed by hand: every value is read from the arkworks field and curve
//! configurations, and the tests check the defining identities (`R * R^-1 = 1`, `p * inv = -1`, ...).

use ark_bls12_381::{g1, g2, Fq, Fr};
use ark_ec::{short_weierstrass::SWCurveConfig, AffineRepr};
use ark_ff::{BigInt, FftField, Field, PrimeField};

use crate::{DeviceFq, DeviceFq2, DeviceG1Affine, DeviceG2Affine, DeviceRepr};

/// The Fr modulus `r` (canonical, little-endian limbs).
pub const FR_MODULUS: BigInt<4> = <Fr as PrimeField>::MODULUS;
/// The Fq modulus `p` (canonical, little-endian limbs).
pub const FQ_MODULUS: BigInt<6> = <Fq as PrimeField>::MODULUS;

/// Montgomery arithmetic constants of one prime field with `N` 64-bit limbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Montgomery<const N: usize> {
    /// The modulus.
    pub modulus: [u64; N],
    /// `R = 2^(64N) mod p`: the Montgomery form of 1.
    pub one: [u64; N],
    /// `R^2 mod p`: multiply by it (Montgomery) to enter Montgomery form.
    pub r2: [u64; N],
    /// `-p^-1 mod 2^64`. Its low 32 bits are `-p^-1 mod 2^32` for 32-bit limb kernels.
    pub inv: u64,
    /// Bits in the modulus.
    pub bits: u32,
}

impl<const N: usize> Montgomery<N> {
    /// `-p^-1 mod 2^32`, for kernels working on 32-bit limbs.
    pub fn inv32(&self) -> u32 {
        self.inv as u32
    }
}

/// Splits 64-bit limbs into twice as many little-endian 32-bit limbs.
pub fn limbs_u32<const N: usize>(limbs: &[u64; N]) -> Vec<u32> {
    limbs_u32_slice(limbs)
}

/// [`limbs_u32`] for a slice of any length.
pub fn limbs_u32_slice(limbs: &[u64]) -> Vec<u32> {
    limbs.iter().flat_map(|l| [*l as u32, (*l >> 32) as u32]).collect()
}

/// Montgomery constants of the scalar field Fr.
pub fn fr() -> Montgomery<4> {
    Montgomery { modulus: FR_MODULUS.0, one: Fr::R.0, r2: Fr::R2.0, inv: Fr::INV, bits: Fr::MODULUS_BIT_SIZE }
}

/// Montgomery constants of the base field Fq.
pub fn fq() -> Montgomery<6> {
    Montgomery { modulus: FQ_MODULUS.0, one: Fq::R.0, r2: Fq::R2.0, inv: Fq::INV, bits: Fq::MODULUS_BIT_SIZE }
}

/// The constants the NTT needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NttConstants {
    /// `g = Fr::GENERATOR` (7), the coset shift of ark-poly's coset domains, Montgomery form.
    pub coset_generator: [u64; 4],
    /// `log2` of the largest power-of-two subgroup of Fr* (32 for BLS12-381).
    pub two_adicity: u32,
    /// A primitive `2^two_adicity`-th root of unity, Montgomery form.
    pub two_adic_root_of_unity: [u64; 4],
}

/// NTT constants of Fr.
pub fn ntt() -> NttConstants {
    NttConstants {
        coset_generator: Fr::GENERATOR.0 .0,
        two_adicity: Fr::TWO_ADICITY,
        two_adic_root_of_unity: Fr::TWO_ADIC_ROOT_OF_UNITY.0 .0,
    }
}

/// The primitive `2^log_n`-th root of unity ark-poly uses for a domain of size `2^log_n`
/// (the two-adic root raised to `2^(two_adicity - log_n)`), or `None` when `log_n` exceeds the two-adicity.
pub fn root_of_unity(log_n: u32) -> Option<Fr> {
    if log_n > Fr::TWO_ADICITY {
        return None;
    }
    let mut w = Fr::TWO_ADIC_ROOT_OF_UNITY;
    for _ in log_n..Fr::TWO_ADICITY {
        w.square_in_place();
    }
    Some(w)
}

/// Curve coefficients and generators in device layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CurveConstants {
    /// `b` of G1 (`y^2 = x^3 + b`).
    pub g1_b: DeviceFq,
    /// `b` of G2 over Fq2.
    pub g2_b: DeviceFq2,
    /// The G1 generator.
    pub g1_generator: DeviceG1Affine,
    /// The G2 generator.
    pub g2_generator: DeviceG2Affine,
}

/// BLS12-381 curve constants.
pub fn curve() -> CurveConstants {
    CurveConstants {
        g1_b: DeviceFq::from_ark(&g1::Config::COEFF_B),
        g2_b: DeviceFq2::from_ark(&g2::Config::COEFF_B),
        g1_generator: DeviceG1Affine::from_ark(&ark_bls12_381::G1Affine::generator()),
        g2_generator: DeviceG2Affine::from_ark(&ark_bls12_381::G2Affine::generator()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_ff::One;

    fn mont_identities<F: PrimeField, const N: usize>(c: Montgomery<N>) {
        // inv * p = -1 mod 2^64
        assert_eq!(c.inv.wrapping_mul(c.modulus[0]), u64::MAX);
        assert_eq!(c.inv32().wrapping_mul(c.modulus[0] as u32), u32::MAX);
        // R and R^2 agree with 2^(64N) computed in the field.
        let two64 = F::from(1u64 << 63) * F::from(2u64);
        let r = (0..N).fold(F::one(), |acc, _| acc * two64);
        assert_eq!(r.into_bigint().as_ref(), &c.one[..]);
        assert_eq!((r * r).into_bigint().as_ref(), &c.r2[..]);
        assert_eq!(c.bits, F::MODULUS_BIT_SIZE);
    }

    #[test]
    fn montgomery_constants_satisfy_their_definitions() {
        mont_identities::<Fr, 4>(fr());
        mont_identities::<Fq, 6>(fq());
        assert_eq!(limbs_u32(&fq().modulus).len(), 12);
    }

    #[test]
    fn roots_of_unity_have_exact_order() {
        for log_n in [0u32, 1, 5, 16, 27, 32] {
            let w = root_of_unity(log_n).unwrap();
            let n = 1u64 << log_n;
            assert!(w.pow([n]).is_one());
            if log_n > 0 {
                assert!(!w.pow([n / 2]).is_one(), "root for 2^{log_n} is not primitive");
            }
        }
        assert!(root_of_unity(33).is_none());
        let c = ntt();
        assert_eq!(Fr::new_unchecked(BigInt(c.coset_generator)), Fr::from(7u64));
        assert_eq!(c.two_adicity, 32);
    }

    #[test]
    fn curve_constants_round_trip() {
        let c = curve();
        assert_eq!(c.g1_b.to_ark_checked(0).unwrap(), Fq::from(4u64));
        assert!(!c.g1_generator.is_identity());
        assert!(!c.g2_generator.to_ark_checked(0).unwrap().is_zero());
    }
}
