//! The window combination, on the host: a batch's window sums come back as XYZZ points, are checked
//! and turned into arkworks points without an inversion, and combined as `Σ_w 2^(c·w)·W_w` plus the
//! ones' sum.

use ark_ec::AdditiveGroup;
use ark_ff::{Field, Zero};
use cudarc::driver::PinnedHostSlice;
use cuzk_field::{Curve, DeviceRepr, LayoutError, Projective};

use super::plan::Plan;
use crate::{CudaError, DriverContext, Xyzz};

/// XYZZ `(X, Y, ZZ, ZZZ)` to Jacobian without an inversion: with `Z = ZZ·ZZZ`, `X·ZZ·ZZZ²` over `Z²`
/// is `X/ZZ` and `Y·ZZ³·ZZZ²` over `Z³` is `Y/ZZZ`. The point is checked on the curve in Jacobian form,
/// `Y² = X³ + b·Z⁶` (both curves have a = 0).
pub(crate) fn to_ark<C: Curve>(p: &Xyzz<C>) -> Result<Projective<C>, LayoutError> {
    use ark_ec::short_weierstrass::SWCurveConfig;
    let zz = p.zz.to_ark_checked(0)?;
    if zz.is_zero() {
        return Ok(Projective::<C>::zero());
    }
    let (x, y, zzz) = (p.x.to_ark_checked(0)?, p.y.to_ark_checked(0)?, p.zzz.to_ark_checked(0)?);
    let zzz2 = zzz.square();
    let z = zz * zzz;
    let jx = x * zz * zzz2;
    let jy = y * zz.square() * zz * zzz2;
    let z2 = z.square();
    let on_curve = C::Config::COEFF_A.is_zero()
        && jy.square() == jx.square() * jx + C::Config::COEFF_B * z2.square() * z2;
    if z.is_zero() || !on_curve {
        return Err(LayoutError::NotOnCurve { index: 0, curve: C::NAME });
    }
    Ok(Projective::<C>::new_unchecked(jx, jy, z))
}

/// Σ_s 2^(c·m·s)·S_s (`m` the windows per bucket set) plus the ones bucket, from a batch's set sums
/// (waits for their copy).
pub(crate) fn combine<C: Curve>(host: &PinnedHostSlice<u8>, plan: &Plan) -> Result<Projective<C>, CudaError> {
    let bytes = host.as_slice().during("reading window sums")?;
    let windows = plan.sets as usize;
    let shift = plan.c * plan.multiples;
    let size = std::mem::size_of::<Xyzz<C>>();
    if bytes.len() != (windows + 1) * size {
        return Err(CudaError::Length {
            op: "msm window sums",
            expected: (windows + 1) * size,
            got: bytes.len(),
        });
    }
    let point = |w: usize| -> Xyzz<C> {
        // SAFETY: the buffer holds windows + 1 XYZZ points copied from the device; Xyzz<C> (C sealed: G1
        // and G2 only) is plain u64 limbs, valid for any bits; read_unaligned needs no alignment.
        unsafe { std::ptr::read_unaligned(bytes.as_ptr().add(w * size).cast::<Xyzz<C>>()) }
    };
    let mut acc = Projective::<C>::zero();
    for w in (0..windows).rev() {
        for _ in 0..shift {
            acc.double_in_place();
        }
        acc += to_ark::<C>(&point(w))?;
    }
    Ok(acc + to_ark::<C>(&point(windows))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_ec::short_weierstrass::Affine;
    use ark_ec::CurveGroup;
    use cuzk_field::{DeviceFq, DeviceFq2, G1, G2};

    /// The XYZZ form of an affine point, scaled by a random λ (`ZZ = λ²`, `ZZZ = λ³`).
    fn scaled<C: Curve>(a: &Affine<C::Config>, rng: &mut impl rand::Rng) -> Xyzz<C> {
        let l = <<C::Config as ark_ec::CurveConfig>::BaseField as ark_std::UniformRand>::rand(rng);
        let (l2, l3) = (l.square(), l.square() * l);
        let d = |v| C::DeviceBase::from_ark(&v);
        Xyzz { x: d(a.x * l2), y: d(a.y * l3), zz: d(l2), zzz: d(l3) }
    }

    #[test]
    fn xyzz_points_come_back_as_the_same_point_and_off_curve_ones_are_refused() {
        use ark_std::UniformRand;
        let mut rng = cuzk_testkit::seeded_rng("xyzz_to_ark");
        for _ in 0..8 {
            let p1 = ark_bls12_381::G1Projective::rand(&mut rng).into_affine();
            assert_eq!(to_ark::<G1>(&scaled::<G1>(&p1, &mut rng)).unwrap(), p1);
            let p2 = ark_bls12_381::G2Projective::rand(&mut rng).into_affine();
            assert_eq!(to_ark::<G2>(&scaled::<G2>(&p2, &mut rng)).unwrap(), p2);
            let mut bad = scaled::<G1>(&p1, &mut rng);
            bad.x = DeviceFq::from_ark(&(bad.x.to_ark_unchecked() + ark_bls12_381::Fq::ONE));
            assert!(matches!(to_ark::<G1>(&bad), Err(LayoutError::NotOnCurve { .. })));
            let mut no_zzz = scaled::<G2>(&p2, &mut rng);
            no_zzz.zzz = DeviceFq2::default();
            assert!(matches!(to_ark::<G2>(&no_zzz), Err(LayoutError::NotOnCurve { .. })));
        }
        assert!(to_ark::<G1>(&Xyzz::default()).unwrap().is_zero());
        assert!(to_ark::<G2>(&Xyzz::default()).unwrap().is_zero());
    }
}
