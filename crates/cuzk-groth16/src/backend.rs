//! The backend trait: the heavy operations of a prover, on buffers the backend owns.

use ark_bls12_381::Fr;
use cuzk_field::{Affine, Curve, Projective};

/// A buffer of MSM bases owned by a backend.
pub trait Bases: Send + Sync {
    /// Number of bases.
    fn len(&self) -> usize;
    /// Whether there are no bases.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bytes of host memory the bases hold (pageable or pinned); 0 for bases in device memory.
    fn host_bytes(&self) -> u64 {
        0
    }
}

/// Which transform an NTT call performs. All use ark-poly's conventions: natural order in and out,
/// `ω` the primitive root of unity of the domain size, cosets shifted by `g = Fr::GENERATOR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NttKind {
    /// Coefficients to evaluations on the subgroup `H`.
    Forward,
    /// Evaluations on `H` to coefficients (scaled by `1/n`).
    Inverse,
    /// Coefficients to evaluations on the coset `g·H`.
    CosetForward,
    /// Evaluations on `g·H` to coefficients.
    CosetInverse,
}

/// The scalars of an MSM: in host memory, or a range of a backend-owned polynomial (so `h` need not
/// leave the device).
#[derive(Debug)]
pub enum MsmScalars<'a, P> {
    /// Scalars in host memory.
    Host(&'a [Fr]),
    /// Coefficients `offset .. offset + len` of a backend polynomial.
    Poly {
        /// The polynomial.
        poly: &'a P,
        /// The first coefficient that takes part.
        offset: usize,
        /// How many coefficients take part.
        len: usize,
    },
}

impl<P> Clone for MsmScalars<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for MsmScalars<'_, P> {}

impl<P> MsmScalars<'_, P> {
    /// How many scalars there are.
    pub fn len(&self) -> usize {
        match self {
            Self::Host(s) => s.len(),
            Self::Poly { len, .. } => *len,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The range `offset .. offset + len` of a polynomial of `poly_len` coefficients, checked.
    pub fn checked_range(
        op: &'static str,
        offset: usize,
        len: usize,
        poly_len: usize,
    ) -> Result<std::ops::Range<usize>, BackendError> {
        match offset.checked_add(len) {
            Some(end) if end <= poly_len => Ok(offset..end),
            _ => {
                Err(BackendError::LengthMismatch { op, expected: poly_len, got: offset.saturating_add(len) })
            }
        }
    }
}

/// A failed backend operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// Buffers of different lengths were combined.
    #[error("{op}: expected {expected} elements, got {got}")]
    LengthMismatch {
        /// The operation.
        op: &'static str,
        /// The length required.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A size the backend cannot handle.
    #[error("{op}: unsupported size {size}: {reason}")]
    UnsupportedSize {
        /// The operation.
        op: &'static str,
        /// The size asked for.
        size: usize,
        /// Why it is unsupported.
        reason: &'static str,
    },
    /// The device reported an error.
    #[error("{op} failed on the device")]
    Device {
        /// The operation.
        op: &'static str,
        /// The device error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Device-side timing of a stretch of a backend's work (events on the device's own clock), for
/// backends whose calls return before the device has finished them. The prover passes the running
/// timer back to the backend's timed operations ([`DeviceBackend::msm_deferred`],
/// [`DeviceBackend::witness_map_timed`]), so a backend that times the kernels inside a stretch finds
/// its own timer there (as `dyn Any`) rather than in hidden state.
pub trait DeviceTimer: Send + std::any::Any {
    /// Marks the end of the stretch (does not wait for the device).
    fn stop(&mut self) -> Result<(), BackendError>;
    /// The stretch's device time (waits until the device has reached the end mark).
    fn elapsed(&self) -> Result<std::time::Duration, BackendError>;
    /// Device time of the kinds of work inside the stretch (NTT passes, sorting, bucket sums, ...),
    /// summed per kind, for backends that time them (waits like [`DeviceTimer::elapsed`]). Work on
    /// different streams may overlap, so the sum can exceed the stretch.
    fn steps(&self) -> Result<Vec<(&'static str, std::time::Duration)>, BackendError> {
        Ok(Vec::new())
    }

    /// When the stretch began and ended on the device, as instants of the host's monotonic clock (the
    /// device's event clock calibrated against it), for backends that can place their work in time
    /// (waits like [`DeviceTimer::elapsed`]). `None`: only the duration is known.
    fn placed(&self) -> Result<Option<(std::time::Instant, std::time::Instant)>, BackendError> {
        Ok(None)
    }
}

/// The device timer a timed operation runs under, if any.
pub type Timing<'a> = Option<&'a mut dyn DeviceTimer>;

/// The polynomial half of a prover backend: the witness map's NTT family and quotient step on
/// polynomials the backend owns.
pub trait PolyBackend: Send + Sync {
    /// A vector of Fr owned by the backend.
    type Poly: Send + Sync;

    /// A short name for logs and reports ("cpu", "cuda").
    fn name(&self) -> &'static str;

    /// Whether independent operations (the MSMs of one proof, the NTTs of several polynomials) may be
    /// issued from several threads at once to good effect.
    fn concurrent_ops(&self) -> bool {
        false
    }

    /// A polynomial of `size` elements (a power of two): `values` followed by zeros.
    fn poly_from_host(&self, values: &[Fr], size: usize) -> Result<Self::Poly, BackendError>;
    /// Copies a polynomial back to the host.
    fn poly_to_host(&self, poly: &Self::Poly) -> Result<Vec<Fr>, BackendError>;
    /// Number of elements in a polynomial.
    fn poly_len(&self, poly: &Self::Poly) -> usize;

    /// Transforms each polynomial in place. All must have the same power-of-two length.
    fn ntt(&self, polys: &mut [&mut Self::Poly], kind: NttKind) -> Result<(), BackendError>;

    /// The elementwise quotient step of the witness map: `a[i] = (a[i]·b[i] − c[i])·z_inv`.
    fn quotient(
        &self,
        a: &mut Self::Poly,
        b: &Self::Poly,
        c: &Self::Poly,
        z_inv: Fr,
    ) -> Result<(), BackendError>;

    /// The witness map's transforms: `a`, `b`, `c` hold the evaluations of A·z, B·z and C·z on the
    /// domain; on return `a` holds the coefficients of `h = (A·B − C) / Z` and `b`, `c` may have been
    /// overwritten. `z_inv` is `1 / Z` on the coset.
    ///
    /// The default runs [`ntt`](Self::ntt) and [`quotient`](Self::quotient) in ark-groth16's order
    /// (inverse, coset forward, quotient, coset inverse); a backend may fuse or reorder the steps as
    /// long as the result is the same.
    fn witness_map_polys(
        &self,
        a: &mut Self::Poly,
        b: &mut Self::Poly,
        c: &mut Self::Poly,
        z_inv: Fr,
    ) -> Result<(), BackendError> {
        self.ntt(&mut [&mut *a, &mut *b, &mut *c], NttKind::Inverse)?;
        self.ntt(&mut [&mut *a, &mut *b, &mut *c], NttKind::CosetForward)?;
        self.quotient(a, b, c, z_inv)?;
        self.ntt(&mut [a], NttKind::CosetInverse)
    }
}

/// A complete prover backend: [`PolyBackend`] plus MSMs over key bases the backend owns, one MSM for
/// both groups ([`G1`](crate::G1) for A, B, L and H, [`G2`](crate::G2) for B), as arkworks'
/// `VariableBaseMSM` serves both.
///
/// Polynomials and bases are backend-owned: a GPU backend keeps them in device memory, and only the
/// MSM results (single points) come back to the host.
pub trait Backend: PolyBackend {
    /// Bases of group `C` owned by the backend.
    type Bases<C: Curve>: Bases;

    /// Takes ownership of bases of group `C` (uploading them, for a device backend).
    fn load_bases<C: Curve>(&self, bases: Vec<Affine<C>>) -> Result<Self::Bases<C>, BackendError>;

    /// `Σ scalars[i]·bases[i]` over `C`. The scalar count must equal the number of bases.
    fn msm<C: Curve>(
        &self,
        bases: &Self::Bases<C>,
        scalars: MsmScalars<'_, Self::Poly>,
    ) -> Result<Projective<C>, BackendError>;
}

/// What a backend whose work is queued on a device can do better than run each primitive to the end:
/// time its work on the device's clock, stage uploads on a copy stream, keep MSM scalars in its own
/// memory and issue an MSM before the host waits for it. Every method has a default that suits a
/// backend whose calls finish before they return (the CPU): such a backend writes an empty `impl`.
pub trait DeviceBackend: Backend {
    /// Starts timing the device's work from now on, for backends that can (`None`: the backend's calls
    /// finish before they return, so the host's clock measures them).
    fn device_timer(&self) -> Result<Option<Box<dyn DeviceTimer>>, BackendError> {
        Ok(None)
    }

    /// Starts timing the uploads issued from now on, on the device's clock, for backends that can
    /// (see [`DeviceBackend::device_timer`]).
    fn upload_timer(&self) -> Result<Option<Box<dyn DeviceTimer>>, BackendError> {
        Ok(None)
    }

    /// Makes the backend's later work wait until these polynomials' uploads have landed, without
    /// blocking the host, so a device timer started next measures the kernels and not the copies (in
    /// a pipeline the copies overlap the previous partition's kernels).
    fn await_uploads(&self, polys: &[&Self::Poly]) -> Result<(), BackendError> {
        let _ = polys;
        Ok(())
    }

    /// A copy of MSM scalars in backend memory, for backends where several MSMs taking the same host
    /// scalars would each copy them (`None`: the MSMs read host memory directly).
    fn scalars_from_host(&self, scalars: &[Fr]) -> Result<Option<Self::Poly>, BackendError> {
        let _ = scalars;
        Ok(None)
    }

    /// Several polynomials of `size` elements at once (the witness map's `a`, `b`, `c`), in order.
    /// Backends that stage uploads override it so the uploads overlap.
    fn polys_from_host(&self, values: &[&[Fr]], size: usize) -> Result<Vec<Self::Poly>, BackendError> {
        values.iter().map(|v| self.poly_from_host(v, size)).collect()
    }

    /// [`PolyBackend::witness_map_polys`] under `timer`, which a backend that times the kernels inside
    /// a stretch records them into.
    fn witness_map_timed(
        &self,
        a: &mut Self::Poly,
        b: &mut Self::Poly,
        c: &mut Self::Poly,
        z_inv: Fr,
        timer: Timing<'_>,
    ) -> Result<(), BackendError> {
        let _ = timer;
        self.witness_map_polys(a, b, c, z_inv)
    }

    /// [`Backend::msm`] in two halves, under `timer`: the work is issued now and its result collected
    /// by [`Deferred::finish`], so a device backend queues the next MSMs' kernels before the host
    /// waits for this one. The scalars and bases need not outlive the call. By default it computes the
    /// result at once.
    fn msm_deferred<C: Curve>(
        &self,
        bases: &Self::Bases<C>,
        scalars: MsmScalars<'_, Self::Poly>,
        timer: Timing<'_>,
    ) -> Result<Deferred<'_, Projective<C>>, BackendError> {
        let _ = timer;
        self.msm::<C>(bases, scalars).map(Deferred::Ready)
    }
}

/// Device work that fills a staged partition's `a`, `b`, `c` from its assignment `z` in backend memory
/// (a backend's sparse products over the key's R1CS matrices, which it keeps resident), for partitions
/// staged by [`crate::stage_evaluated`]: the host then never computes or holds `a`, `b`, `c`.
pub trait Evaluation<B: DeviceBackend>: Send {
    /// Queues the work (under the witness map's device `timer`): `z` first, from whatever the staging
    /// left, then `abc`. The deferred result is the first constraint the witness does not satisfy
    /// (`a·b != c`), `None` when all are; the prover collects it before assembling the proof.
    fn queue<'b>(
        self: Box<Self>,
        backend: &'b B,
        z: &mut B::Poly,
        abc: &mut [B::Poly; 3],
        timer: Timing<'_>,
    ) -> Result<Deferred<'b, Option<usize>>, BackendError>;
}

/// A result that is ready, or that [`Deferred::finish`] waits for (an MSM whose device work was
/// issued).
pub enum Deferred<'a, T> {
    /// Computed.
    Ready(T),
    /// Still to be collected.
    Pending(Box<dyn FnOnce() -> Result<T, BackendError> + Send + 'a>),
}

impl<T> Deferred<'_, T> {
    /// The result, waiting for it if needed.
    pub fn finish(self) -> Result<T, BackendError> {
        match self {
            Deferred::Ready(v) => Ok(v),
            Deferred::Pending(f) => f(),
        }
    }
}

impl<T> std::fmt::Debug for Deferred<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Deferred::Ready(_) => "Deferred::Ready",
            Deferred::Pending(_) => "Deferred::Pending",
        })
    }
}

impl BackendError {
    /// `Ok` when `got == expected`, else [`BackendError::LengthMismatch`].
    pub fn expect_len(op: &'static str, expected: usize, got: usize) -> Result<(), Self> {
        if expected == got {
            Ok(())
        } else {
            Err(Self::LengthMismatch { op, expected, got })
        }
    }
}
