//! Scalars between blstrs (bellpepper's field) and arkworks (cuzk's field).
//!
//! Both libraries keep an element of BLS12-381's scalar field in Montgomery form with `R = 2^256`, as four
//! little-endian 64-bit limbs, so a conversion is a copy of the limbs: no reduction, no multiplication.
//! The tests check this against the canonical byte encodings on both sides.

use ark_bls12_381::Fr;
use ark_ff::BigInt;

/// The arkworks element equal to `s`.
#[inline]
pub fn to_ark(s: &blstrs::Scalar) -> Fr {
    let raw: blst::blst_fr = (*s).into();
    Fr::new_unchecked(BigInt(raw.l))
}

/// The blstrs element equal to `f`.
#[inline]
pub fn from_ark(f: &Fr) -> blstrs::Scalar {
    blst::blst_fr { l: f.0 .0 }.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_ff::{PrimeField, UniformRand};
    use ark_serialize::CanonicalSerialize;
    use ff::{Field, PrimeField as _};

    fn ark_bytes(f: &Fr) -> Vec<u8> {
        let mut out = Vec::new();
        f.serialize_compressed(&mut out).expect("serialize");
        out
    }

    #[test]
    fn conversion_preserves_the_value() {
        let mut rng = rand::thread_rng();
        let mut cases = vec![blstrs::Scalar::ZERO, blstrs::Scalar::ONE, -blstrs::Scalar::ONE];
        cases.extend((0..200).map(|_| blstrs::Scalar::random(&mut rng)));
        for s in cases {
            let f = to_ark(&s);
            assert_eq!(ark_bytes(&f), s.to_bytes_le().to_vec());
            assert_eq!(from_ark(&f), s);
        }
        for _ in 0..200 {
            let f = Fr::rand(&mut rng);
            let s = from_ark(&f);
            assert_eq!(s.to_bytes_le().to_vec(), ark_bytes(&f));
            assert_eq!(to_ark(&s), f);
        }
    }

    #[test]
    fn the_two_fields_agree_on_their_roots_of_unity() {
        use ark_ff::FftField;
        let modulus: String =
            ark_ff::BigInteger::to_bytes_be(&Fr::MODULUS).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(format!("0x{modulus}"), blstrs::Scalar::MODULUS);
        assert_eq!(to_ark(&blstrs::Scalar::ROOT_OF_UNITY), Fr::TWO_ADIC_ROOT_OF_UNITY);
        assert_eq!(to_ark(&blstrs::Scalar::MULTIPLICATIVE_GENERATOR), Fr::GENERATOR);
        assert_eq!(blstrs::Scalar::S, Fr::TWO_ADICITY);
    }
}
