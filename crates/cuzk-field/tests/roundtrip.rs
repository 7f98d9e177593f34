//! Property tests: device layout round trips and the checks on the way back.

use ark_bls12_381::{Fq, Fq2, Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::{AffineRepr, CurveGroup, PrimeGroup};
use ark_ff::{UniformRand, Zero};
use cuzk_field::*;
use proptest::prelude::*;
use rand::{rngs::StdRng, SeedableRng};

// Lengths from 0 (empty) across the rayon chunk size (2^14) so chunk edges are crossed.
fn lens() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..70, (1usize << 14) - 2..(1 << 14) + 3]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn fr_and_fq_round_trip(seed in any::<u64>(), len in lens()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let frs: Vec<Fr> = (0..len).map(|_| Fr::rand(&mut rng)).collect();
        let dev: Vec<DeviceFr> = to_device_vec(&frs);
        prop_assert_eq!(&from_device_vec(&dev).unwrap(), &frs);
        let mut back = vec![Fr::zero(); len];
        from_device_unchecked(&dev, &mut back).unwrap();
        prop_assert_eq!(&back, &frs);

        let fqs: Vec<Fq2> = (0..len.min(100)).map(|_| Fq2::rand(&mut rng)).collect();
        let dev: Vec<DeviceFq2> = to_device_vec(&fqs);
        prop_assert_eq!(from_device_vec(&dev).unwrap(), fqs);
    }

    #[test]
    fn points_round_trip_with_identities(seed in any::<u64>(), len in 0usize..40) {
        let mut rng = StdRng::seed_from_u64(seed);
        let g1: Vec<G1Affine> = (0..len)
            .map(|i| if i % 3 == 0 { G1Affine::zero() } else { G1Projective::rand(&mut rng).into_affine() })
            .collect();
        let mut dev = vec![DeviceG1Affine::default(); len];
        to_device(&g1, &mut dev).unwrap();
        for (d, p) in dev.iter().zip(&g1) {
            prop_assert_eq!(d.is_identity(), p.is_zero());
        }
        prop_assert_eq!(from_device_vec(&dev).unwrap(), g1);

        let g2: Vec<G2Affine> = (0..len)
            .map(|i| if i % 4 == 1 { G2Affine::zero() } else { G2Projective::rand(&mut rng).into_affine() })
            .collect();
        let dev: Vec<DeviceG2Affine> = to_device_vec(&g2);
        prop_assert_eq!(from_device_vec(&dev).unwrap(), g2);
    }
}

#[test]
fn montgomery_limbs_are_copied_not_canonical() {
    let one = DeviceFr::from_ark(&Fr::from(1u64));
    assert_eq!(one.limbs, constants::fr().one);
    assert_ne!(one.limbs, [1, 0, 0, 0]);
}

#[test]
fn unreduced_limbs_are_refused() {
    let mut v = vec![DeviceFr::from_ark(&Fr::from(5u64)); 3];
    v[2].limbs = constants::fr().modulus;
    assert_eq!(from_device_vec(&v), Err(LayoutError::NotReduced { index: 2, field: "Fr" }));
    let q = DeviceFq { limbs: [u64::MAX; 6] };
    assert!(matches!(from_device_vec(&[q]), Err(LayoutError::NotReduced { index: 0, field: "Fq" })));
}

#[test]
fn points_off_the_curve_are_refused() {
    let g = G1Projective::generator().into_affine();
    let mut d = DeviceG1Affine::from_ark(&g);
    d.y = DeviceFq::from_ark(&(g.y + Fq::from(1u64)));
    let err = from_device_vec(&[DeviceG1Affine::IDENTITY, d]).unwrap_err();
    assert_eq!(err, LayoutError::NotOnCurve { index: 1, curve: "G1" });
    let mut e = DeviceG2Affine::from_ark(&G2Affine::generator());
    e.x.c1 = DeviceFq::default();
    assert!(matches!(from_device_vec(&[e]), Err(LayoutError::NotOnCurve { curve: "G2", .. })));
}

#[test]
fn length_mismatch_is_an_error() {
    let mut dst = vec![DeviceFr::default(); 2];
    let err = to_device(&[Fr::from(1u64)], &mut dst).unwrap_err();
    assert_eq!(err, LayoutError::LengthMismatch { source_len: 1, dest_len: 2 });
}
