//! The CUDA backend: polynomials in device memory, the NTT family and the quotient step on the GPU.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ark_bls12_381::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::AffineRepr;
use cudarc::driver::{CudaSlice, PinnedHostSlice};
use cuzk_field::{from_device_vec, to_device_vec, DeviceFr, DeviceRepr};
use cuzk_groth16::{Backend, BackendError, Bases, MsmScalars, NttKind, PolyBackend};
use rayon::prelude::*;

use crate::msm::{self, MsmBases, MsmConfig, MsmCurve, Points, G1, G2};
use crate::ntt::{self, NttTables, MAX_LOG_N};
use crate::{kernels, CudaError, DriverContext, Gpu, GpuFr};

/// A polynomial resident in device memory.
#[derive(Debug)]
pub struct GpuPoly {
    buf: CudaSlice<GpuFr>,
}

impl GpuPoly {
    /// The device buffer.
    pub fn buffer(&self) -> &CudaSlice<GpuFr> {
        &self.buf
    }

    /// Number of coefficients.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the polynomial has no coefficients (never, for polynomials made by the backend).
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Where [`CudaBackend::upload_bases_to`] keeps bases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residency {
    /// Device memory when they fit (with a reserve for the MSM's own buffers), else pinned host memory.
    Auto,
    /// Device memory; an error when they do not fit.
    Device,
    /// Pinned host memory, streamed to the device batch by batch.
    Host,
}

#[derive(Debug)]
enum Stored<A> {
    Device(CudaSlice<A>),
    Host(PinnedHostSlice<A>),
}

/// MSM bases as the device uses them: in device memory (or pinned host memory when they do not fit),
/// with the points at infinity dropped when they are many, and a selection saying which scalar each
/// kept point takes.
#[derive(Debug)]
pub struct GpuBases<C: MsmCurve> {
    points: Stored<C::Affine>,
    select: Option<CudaSlice<u32>>,
    /// Points kept (the buffers hold one placeholder when none are).
    kept: usize,
    /// Bases given, and scalars an MSM takes.
    len: usize,
}

impl<C: MsmCurve> GpuBases<C> {
    /// The bases as the MSM takes them.
    pub fn msm_bases(&self) -> MsmBases<'_, C> {
        let points = match &self.points {
            Stored::Device(p) => Points::Device(p),
            Stored::Host(p) => Points::Host(p),
        };
        if self.kept == 0 {
            return MsmBases::none(points, self.len);
        }
        match &self.select {
            Some(select) => MsmBases::selected(points, select, self.len),
            None => match &self.points {
                Stored::Device(p) => MsmBases::device(p),
                Stored::Host(p) => MsmBases::host(p),
            },
        }
    }

    /// Whether the points are in device memory (otherwise pinned host memory).
    pub fn is_resident(&self) -> bool {
        matches!(self.points, Stored::Device(_))
    }

    /// Points kept (the bases less the points at infinity, when those were dropped).
    pub fn kept(&self) -> usize {
        self.kept
    }
}

impl<C: MsmCurve> Bases for GpuBases<C> {
    fn len(&self) -> usize {
        self.len
    }
}

/// Device memory left free for an MSM's own buffers when deciding where bases go (bucket entries of a
/// 2^24-point batch alone take 1 GiB).
const MSM_RESERVE: usize = 6 << 30;

/// The CUDA backend on one GPU.
pub struct CudaBackend {
    gpu: Gpu,
    tables: Mutex<HashMap<u32, Arc<NttTables>>>,
    msm: MsmConfig,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend").field("gpu", &self.gpu).finish()
    }
}

fn device(op: &'static str) -> impl Fn(CudaError) -> BackendError {
    move |e| BackendError::Device { op, source: Box::new(e) }
}

impl CudaBackend {
    /// A backend on device `ordinal`.
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        Ok(Self { gpu: Gpu::new(ordinal)?, tables: Mutex::new(HashMap::new()), msm: MsmConfig::default() })
    }

    /// The same backend with other MSM tuning (window width, batch size).
    pub fn with_msm_config(mut self, config: MsmConfig) -> Self {
        self.msm = config;
        self
    }

    /// The MSM tuning in use.
    pub fn msm_config(&self) -> MsmConfig {
        self.msm
    }

    /// Converts MSM bases and keeps them where they fit ([`Residency::Auto`]).
    pub fn upload_bases<C: MsmCurve>(
        &self,
        bases: &[ark_ec::short_weierstrass::Affine<C::Config>],
    ) -> Result<GpuBases<C>, CudaError> {
        self.upload_bases_to(bases, Residency::Auto)
    }

    /// Converts MSM bases and keeps them as `residency` says. When at least an eighth of them are
    /// points at infinity (the parts of a Groth16 key for variables a query does not use), only the
    /// others are kept, with a selection of their scalars: the MSM neither stores nor sorts the rest.
    pub fn upload_bases_to<C: MsmCurve>(
        &self,
        bases: &[ark_ec::short_weierstrass::Affine<C::Config>],
        residency: Residency,
    ) -> Result<GpuBases<C>, CudaError> {
        let len = bases.len();
        if u32::try_from(len).is_err() {
            return Err(CudaError::Size {
                op: "upload_bases",
                size: len,
                reason: "more than 2^32 - 1 bases",
            });
        }
        let identities = bases.par_iter().filter(|p| p.is_zero()).count();
        let (host, select): (Vec<C::Affine>, Option<Vec<u32>>) = if identities > 0 && identities >= len / 8 {
            let kept: Vec<u32> = (0..len as u32).filter(|&i| !bases[i as usize].is_zero()).collect();
            (kept.par_iter().map(|&i| C::from_ark(&bases[i as usize])).collect(), Some(kept))
        } else {
            (bases.par_iter().map(C::from_ark).collect(), None)
        };
        let stream = self.gpu.compute_stream();
        let kept = host.len();
        if kept == 0 {
            let points = Stored::Device(self.gpu.zeros(stream, 1)?);
            return Ok(GpuBases { points, select: None, kept, len });
        }
        let select = select.map(|s| self.gpu.upload(stream, &s)).transpose()?;
        let bytes = std::mem::size_of_val(host.as_slice());
        let on_device = match residency {
            Residency::Device => true,
            Residency::Host => false,
            Residency::Auto => {
                let (free, _) = self.gpu.memory()?;
                bytes.saturating_add(MSM_RESERVE) <= free
            }
        };
        let points = if on_device {
            Stored::Device(self.gpu.upload(stream, &host)?)
        } else {
            let mut pinned = self.gpu.pinned::<C::Affine>(host.len(), false)?;
            pinned.as_mut_slice().during("filling pinned bases")?.copy_from_slice(&host);
            Stored::Host(pinned)
        };
        Ok(GpuBases { points, select, kept, len })
    }

    /// `Σ scalars[i]·bases[i]` with scalars from the host.
    pub fn msm_host<C: MsmCurve>(
        &self,
        bases: &GpuBases<C>,
        scalars: &[Fr],
    ) -> Result<ark_ec::short_weierstrass::Projective<C::Config>, CudaError> {
        if scalars.len() != bases.len {
            return Err(CudaError::Length { op: "msm", expected: bases.len, got: scalars.len() });
        }
        let host: Vec<GpuFr> = to_device_vec::<DeviceFr>(scalars).into_iter().map(GpuFr).collect();
        let dev = self.gpu.upload(self.gpu.compute_stream(), &host)?;
        msm::msm::<C>(&self.gpu, &bases.msm_bases(), &dev.slice(..), &self.msm)
    }

    /// The GPU.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The NTT tables for `2^log_n`, built on first use and kept.
    pub fn tables(&self, log_n: u32) -> Result<Arc<NttTables>, CudaError> {
        let mut map = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = map.get(&log_n) {
            return Ok(t.clone());
        }
        let t = Arc::new(NttTables::new(&self.gpu, self.gpu.compute_stream(), log_n)?);
        map.insert(log_n, t.clone());
        Ok(t)
    }

    /// Uploads `values` into a new device polynomial of `size` elements (zero-padded).
    pub fn upload_poly(&self, values: &[Fr], size: usize) -> Result<GpuPoly, CudaError> {
        if values.len() > size {
            return Err(CudaError::Length { op: "upload_poly", expected: size, got: values.len() });
        }
        let stream = self.gpu.compute_stream();
        let mut buf = self.gpu.zeros::<GpuFr>(stream, size)?;
        let host: Vec<GpuFr> = to_device_vec::<DeviceFr>(values).into_iter().map(GpuFr).collect();
        self.gpu.upload_into(stream, &host, &mut buf)?;
        Ok(GpuPoly { buf })
    }

    /// Copies a device polynomial back, checking every element is reduced.
    pub fn download_poly(&self, poly: &GpuPoly) -> Result<Vec<Fr>, CudaError> {
        let host = self.gpu.download(self.gpu.compute_stream(), &poly.buf)?;
        let host: Vec<DeviceFr> = host.into_iter().map(|g| g.0).collect();
        Ok(from_device_vec(&host)?)
    }

    /// Transforms a device polynomial in place.
    pub fn ntt_in_place(&self, poly: &mut GpuPoly, kind: NttKind) -> Result<(), CudaError> {
        let n = poly.len();
        if !n.is_power_of_two() || n > 1 << MAX_LOG_N {
            return Err(CudaError::Size { op: "ntt", size: n, reason: "not a power of two up to 2^28" });
        }
        let tables = self.tables(n.trailing_zeros())?;
        ntt::ntt(&self.gpu, self.gpu.compute_stream(), &tables, &mut poly.buf, kind)
    }
}

impl PolyBackend for CudaBackend {
    type Poly = GpuPoly;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn poly_from_host(&self, values: &[Fr], size: usize) -> Result<GpuPoly, BackendError> {
        if !size.is_power_of_two() || size > 1 << MAX_LOG_N {
            return Err(BackendError::UnsupportedSize {
                op: "poly_from_host",
                size,
                reason: "not a power of two up to 2^28",
            });
        }
        if values.len() > size {
            return Err(BackendError::LengthMismatch {
                op: "poly_from_host",
                expected: size,
                got: values.len(),
            });
        }
        self.upload_poly(values, size).map_err(device("poly_from_host"))
    }

    fn poly_to_host(&self, poly: &GpuPoly) -> Result<Vec<Fr>, BackendError> {
        self.download_poly(poly).map_err(device("poly_to_host"))
    }

    fn poly_len(&self, poly: &GpuPoly) -> usize {
        poly.len()
    }

    fn ntt(&self, polys: &mut [&mut GpuPoly], kind: NttKind) -> Result<(), BackendError> {
        let Some(first) = polys.first() else { return Ok(()) };
        let n = first.len();
        for p in polys.iter() {
            BackendError::expect_len("ntt", n, p.len())?;
        }
        if !n.is_power_of_two() || n > 1 << MAX_LOG_N {
            return Err(BackendError::UnsupportedSize {
                op: "ntt",
                size: n,
                reason: "not a power of two up to 2^28",
            });
        }
        for p in polys.iter_mut() {
            self.ntt_in_place(p, kind).map_err(device("ntt"))?;
        }
        Ok(())
    }

    fn quotient(&self, a: &mut GpuPoly, b: &GpuPoly, c: &GpuPoly, z_inv: Fr) -> Result<(), BackendError> {
        BackendError::expect_len("quotient", a.len(), b.len())?;
        BackendError::expect_len("quotient", a.len(), c.len())?;
        let stream = self.gpu.compute_stream();
        kernels::quotient(&self.gpu, stream, &mut a.buf, &b.buf, &c.buf, GpuFr(DeviceFr::from_ark(&z_inv)))
            .map_err(device("quotient"))
    }

    fn witness_map_polys(
        &self,
        a: &mut GpuPoly,
        b: &mut GpuPoly,
        c: &mut GpuPoly,
        z_inv: Fr,
    ) -> Result<(), BackendError> {
        let n = a.len();
        BackendError::expect_len("witness_map", n, b.len())?;
        BackendError::expect_len("witness_map", n, c.len())?;
        if !n.is_power_of_two() || n > 1 << MAX_LOG_N {
            return Err(BackendError::UnsupportedSize {
                op: "witness_map",
                size: n,
                reason: "not a power of two up to 2^28",
            });
        }
        let tables = self.tables(n.trailing_zeros()).map_err(device("witness_map"))?;
        let z_inv = GpuFr(DeviceFr::from_ark(&z_inv));
        let stream = self.gpu.compute_stream();
        ntt::witness_map(&self.gpu, stream, &tables, &mut a.buf, &mut b.buf, &mut c.buf, z_inv)
            .map_err(device("witness_map"))
    }
}

impl Backend for CudaBackend {
    type G1Bases = GpuBases<G1>;
    type G2Bases = GpuBases<G2>;

    fn load_g1_bases(&self, bases: Vec<G1Affine>) -> Result<GpuBases<G1>, BackendError> {
        self.upload_bases::<G1>(&bases).map_err(device("load_g1_bases"))
    }

    fn load_g2_bases(&self, bases: Vec<G2Affine>) -> Result<GpuBases<G2>, BackendError> {
        self.upload_bases::<G2>(&bases).map_err(device("load_g2_bases"))
    }

    fn msm_g1(
        &self,
        bases: &GpuBases<G1>,
        scalars: MsmScalars<'_, GpuPoly>,
    ) -> Result<G1Projective, BackendError> {
        match scalars {
            MsmScalars::Host(s) => {
                BackendError::expect_len("msm_g1", bases.len(), s.len())?;
                self.msm_host(bases, s).map_err(device("msm_g1"))
            }
            MsmScalars::Poly { poly, len } => {
                BackendError::expect_len("msm_g1", bases.len(), len)?;
                if len > poly.len() {
                    return Err(BackendError::LengthMismatch {
                        op: "msm_g1",
                        expected: len,
                        got: poly.len(),
                    });
                }
                msm::msm::<G1>(&self.gpu, &bases.msm_bases(), &poly.buf.slice(..len), &self.msm)
                    .map_err(device("msm_g1"))
            }
        }
    }

    fn msm_g2(&self, bases: &GpuBases<G2>, scalars: &[Fr]) -> Result<G2Projective, BackendError> {
        BackendError::expect_len("msm_g2", bases.len(), scalars.len())?;
        self.msm_host(bases, scalars).map_err(device("msm_g2"))
    }
}
