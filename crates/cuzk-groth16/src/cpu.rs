//! The CPU reference backend, on arkworks.

use ark_bls12_381::Fr;
use ark_ff::{FftField, Zero};
use ark_poly::{EvaluationDomain, Radix2EvaluationDomain};
use rayon::prelude::*;

use crate::cpu_msm;
use cuzk_field::{Affine, Curve, Projective};

use crate::{Backend, BackendError, Bases, DeviceBackend, MsmScalars, NttKind, PolyBackend};

/// The CPU backend: polynomials and bases in host memory, arithmetic by arkworks, parallel with rayon.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuBackend;

/// A polynomial of the CPU backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuPoly(pub Vec<Fr>);

/// The scalars of an MSM over `bases` points as a host slice: a polynomial's range checked against its
/// length, and the count against the bases'.
fn host_scalars<'a>(
    op: &'static str,
    bases: usize,
    scalars: MsmScalars<'a, CpuPoly>,
) -> Result<&'a [Fr], BackendError> {
    let s = match scalars {
        MsmScalars::Host(s) => s,
        MsmScalars::Poly { poly, offset, len } => {
            &poly.0[MsmScalars::<CpuPoly>::checked_range(op, offset, len, poly.0.len())?]
        }
    };
    BackendError::expect_len(op, bases, s.len())?;
    Ok(s)
}

impl<T: Send + Sync> Bases for Vec<T> {
    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn host_bytes(&self) -> u64 {
        std::mem::size_of_val(self.as_slice()) as u64
    }
}

fn domain(op: &'static str, size: usize) -> Result<Radix2EvaluationDomain<Fr>, BackendError> {
    if !size.is_power_of_two() {
        return Err(BackendError::UnsupportedSize { op, size, reason: "not a power of two" });
    }
    Radix2EvaluationDomain::new(size).ok_or(BackendError::UnsupportedSize {
        op,
        size,
        reason: "larger than Fr's two-adic subgroup",
    })
}

impl PolyBackend for CpuBackend {
    type Poly = CpuPoly;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn concurrent_ops(&self) -> bool {
        // Measured: running the five MSMs of a proof concurrently beats running them one after
        // another, each internally parallel (docs/BENCHMARKS.md).
        true
    }

    fn poly_from_host(&self, values: &[Fr], size: usize) -> Result<CpuPoly, BackendError> {
        domain("poly_from_host", size)?;
        if values.len() > size {
            return Err(BackendError::LengthMismatch {
                op: "poly_from_host",
                expected: size,
                got: values.len(),
            });
        }
        let mut v = Vec::with_capacity(size);
        v.extend_from_slice(values);
        v.resize(size, Fr::zero());
        Ok(CpuPoly(v))
    }

    fn poly_to_host(&self, poly: &CpuPoly) -> Result<Vec<Fr>, BackendError> {
        Ok(poly.0.clone())
    }

    fn poly_len(&self, poly: &CpuPoly) -> usize {
        poly.0.len()
    }

    fn ntt(&self, polys: &mut [&mut CpuPoly], kind: NttKind) -> Result<(), BackendError> {
        let Some(first) = polys.first() else { return Ok(()) };
        let n = first.0.len();
        for p in polys.iter() {
            BackendError::expect_len("ntt", n, p.0.len())?;
        }
        let mut d = domain("ntt", n)?;
        if matches!(kind, NttKind::CosetForward | NttKind::CosetInverse) {
            d = d.get_coset(Fr::GENERATOR).ok_or(BackendError::UnsupportedSize {
                op: "ntt",
                size: n,
                reason: "no coset of this domain",
            })?;
        }
        polys.par_iter_mut().for_each(|p| match kind {
            NttKind::Forward | NttKind::CosetForward => d.fft_in_place(&mut p.0),
            NttKind::Inverse | NttKind::CosetInverse => d.ifft_in_place(&mut p.0),
        });
        Ok(())
    }

    fn quotient(&self, a: &mut CpuPoly, b: &CpuPoly, c: &CpuPoly, z_inv: Fr) -> Result<(), BackendError> {
        BackendError::expect_len("quotient", a.0.len(), b.0.len())?;
        BackendError::expect_len("quotient", a.0.len(), c.0.len())?;
        a.0.par_iter_mut().zip(&b.0).zip(&c.0).with_min_len(1 << 12).for_each(|((a, b), c)| {
            *a *= b;
            *a -= c;
            *a *= z_inv;
        });
        Ok(())
    }
}

impl Backend for CpuBackend {
    type Bases<C: Curve> = Vec<Affine<C>>;

    fn load_bases<C: Curve>(&self, bases: Vec<Affine<C>>) -> Result<Vec<Affine<C>>, BackendError> {
        Ok(bases)
    }

    fn msm<C: Curve>(
        &self,
        bases: &Vec<Affine<C>>,
        scalars: MsmScalars<'_, CpuPoly>,
    ) -> Result<Projective<C>, BackendError> {
        Ok(cpu_msm::msm(bases, host_scalars(C::MSM, bases.len(), scalars)?))
    }
}

/// The CPU's calls finish before they return: every hook keeps its default.
impl DeviceBackend for CpuBackend {}
