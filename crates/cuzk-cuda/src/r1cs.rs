//! A key's recorded R1CS shape resident on the device, and partitions evaluated against it there.
//!
//! [`GpuShape`] holds the three matrices in compressed sparse rows (32-bit row starts, columns and
//! coefficient indices), the coefficient table, and per matrix the list of its long rows
//! ([`RowSplit`]), whose products a warp each computes before a thread a row does the others. A
//! partition then crosses the bus as its compact assignment ([`CompactWitness`]: the zero and one
//! bitmaps with their ranks, and the values that are neither): [`CudaBackend::stage_compact`] converts
//! it into pinned staging buffers and copies it on the copy stream into the partition's own `b` and `c`
//! buffers (the evaluation overwrites them later), so no device memory is allocated for it. At kernel
//! time the evaluation ([`cuzk_groth16::Evaluation`]) expands `z` into its buffer and computes `a`,
//! `b`, `c` with every row checked; the first unsatisfied row comes back with the proof's other
//! results, so a bad witness is refused without a host pass over the constraints.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, HostSlice, PinnedHostSlice, SyncOnDrop};
use cuzk_field::{DeviceFr, DeviceRepr};
use cuzk_groth16::{BackendError, Deferred, Evaluation, Timing};
use cuzk_synth::{CompactWitness, Counts, R1csShape};
use rayon::prelude::*;

use crate::backend::{device, probe_of, stage_in_parallel};
use crate::kernels::r1cs::{DeviceCsr, ShapeArgs};
use crate::profile::Probe;
use crate::{kernels, CudaBackend, CudaError, DriverContext, Gpu, GpuFr, GpuPoly};

/// How the sparse products share a row among the device's threads.
///
/// A thread a row leaves the other lanes of its warp idle while one lane works through a long row,
/// and the porep-like shape mixes rows of one or two entries with SHA-256's additions of 64 to 256.
/// Counted on the 2^20 porep-like shape, a thread a row takes 1.07M warp steps (a step: each lane one
/// entry or none) for 5.57M entries; with the rows of more than 16 entries a warp each, 0.23M (0.15M
/// for the short rows, 0.08M for the long ones with their warp-wide sums); the counts are in
/// docs/benchmarks/gpu-groth16.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowSplit {
    /// Every row by one thread.
    Threads,
    /// Rows of more than this many entries by a warp each, the others by a thread each.
    WarpsAbove(u32),
}

impl RowSplit {
    /// The split resident shapes use: rows of more than 16 entries by a warp each. On the 2^20
    /// porep-like shape any bound from 4 to 32 gives within 1% of the same warp steps (above); 16
    /// the fewest, as on Filecoin's own PoRep and PoSt circuits (`cuzk filecoin shape`,
    /// `cuzk_synth::Csr::row_profile`; docs/benchmarks/gpu-groth16.md).
    pub const DEFAULT: Self = Self::WarpsAbove(16);

    /// The longest row a thread takes (`u32::MAX` for every row).
    fn long_row(self) -> u32 {
        match self {
            Self::Threads => u32::MAX,
            Self::WarpsAbove(n) => n,
        }
    }

    /// Whether a row of `len` entries is a long one, summed by a warp (as `Csr::row` in r1cs.cu
    /// decides on the device).
    fn is_long(self, len: usize) -> bool {
        len > self.long_row() as usize
    }

    /// The rows of more entries than a thread takes, for rows of `lengths`.
    fn long_rows(self, lengths: impl Iterator<Item = usize>) -> Vec<u32> {
        lengths.enumerate().filter(|&(_, len)| self.is_long(len)).map(|(row, _)| row as u32).collect()
    }
}

impl Default for RowSplit {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Most entries of a resident matrix: 32-bit row starts, and a warp's lanes stepping 32 entries at a
/// time past the last without their 32-bit index wrapping.
const MAX_ENTRIES: u32 = u32::MAX - 32;

/// A recorded R1CS shape resident on one device.
pub struct GpuShape {
    counts: Counts,
    table: CudaSlice<GpuFr>,
    matrices: [DeviceCsr; 3],
    split: RowSplit,
    bytes: usize,
}

impl std::fmt::Debug for GpuShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuShape")
            .field("counts", &self.counts)
            .field("split", &self.split)
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// Copies `host` to the device (one element at least, so an empty matrix still has a buffer).
fn upload_u32(gpu: &Gpu, stream: &Arc<CudaStream>, host: &[u32]) -> Result<CudaSlice<u32>, CudaError> {
    if host.is_empty() {
        return gpu.upload(stream, &[0u32]);
    }
    gpu.upload(stream, host)
}

impl GpuShape {
    /// Device bytes [`GpuShape::upload`] takes for `shape`.
    pub fn device_bytes_of(shape: &R1csShape) -> usize {
        Self::device_bytes_with(shape, RowSplit::DEFAULT)
    }

    /// Device bytes [`GpuShape::upload_with`] takes for `shape` and `split`.
    pub fn device_bytes_with(shape: &R1csShape, split: RowSplit) -> usize {
        let rows = shape.counts().constraints + 1;
        let entries = shape.a().entries() + shape.b().entries() + shape.c().entries();
        let long: usize = [shape.a(), shape.b(), shape.c()]
            .iter()
            .map(|m| m.row_lengths().filter(|&len| split.is_long(len)).count())
            .sum();
        3 * rows * 4 + entries * 8 + long * 4 + shape.coefficients().len() * std::mem::size_of::<GpuFr>()
    }

    /// Copies `shape` to `gpu`, its long rows split off by [`RowSplit::DEFAULT`]. Fails when a matrix
    /// has more than 2^32 - 33 entries (32-bit row starts, and a warp's strided index), or when device
    /// memory is short.
    pub fn upload(gpu: &Gpu, shape: &R1csShape) -> Result<Self, CudaError> {
        Self::upload_with(gpu, shape, RowSplit::DEFAULT)
    }

    /// Copies `shape` to `gpu` with its rows shared as `split` says (the products are the same every
    /// way; [`RowSplit::Threads`] is the way before the split, for comparison).
    pub fn upload_with(gpu: &Gpu, shape: &R1csShape, split: RowSplit) -> Result<Self, CudaError> {
        if u32::try_from(shape.counts().constraints).is_err() {
            return Err(CudaError::Size {
                op: "GpuShape::upload",
                size: shape.counts().constraints,
                reason: "a shape of more than 2^32 - 1 constraints",
            });
        }
        let bytes = Self::device_bytes_with(shape, split);
        let (free, _) = gpu.memory()?;
        if bytes > free {
            return Err(CudaError::OutOfMemory { what: "the key's R1CS matrices", need: bytes, free });
        }
        let stream = gpu.compute_stream();
        let mut matrices = Vec::with_capacity(3);
        for m in [shape.a(), shape.b(), shape.c()] {
            let mut starts = Vec::with_capacity(m.rows() + 1);
            let mut at = 0u64;
            starts.push(0u32);
            for len in m.row_lengths() {
                at += len as u64;
                let start = u32::try_from(at).ok().filter(|&s| s <= MAX_ENTRIES).ok_or(CudaError::Size {
                    op: "GpuShape::upload",
                    size: m.entries(),
                    reason: "a matrix with more than 2^32 - 33 entries",
                })?;
                starts.push(start);
            }
            let long = split.long_rows(m.row_lengths());
            matrices.push(DeviceCsr {
                starts: upload_u32(gpu, stream, &starts)?,
                columns: upload_u32(gpu, stream, m.columns())?,
                coefficients: upload_u32(gpu, stream, m.coefficient_indices())?,
                long: if long.is_empty() { None } else { Some(gpu.upload(stream, &long)?) },
            });
        }
        let table: Vec<GpuFr> = shape.coefficients().iter().map(|c| GpuFr(DeviceFr::from_ark(c))).collect();
        let table = gpu.upload(stream, &table)?;
        stream.synchronize().during("uploading an R1CS shape")?;
        let [a, b, c] = <[DeviceCsr; 3]>::try_from(matrices).map_err(|_| CudaError::Size {
            op: "GpuShape::upload",
            size: 0,
            reason: "three matrices",
        })?;
        Ok(Self { counts: shape.counts(), table, matrices: [a, b, c], split, bytes })
    }

    /// The shape's counts.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Device bytes the shape holds.
    pub fn device_bytes(&self) -> usize {
        self.bytes
    }

    /// How the shape's rows are shared among threads.
    pub fn split(&self) -> RowSplit {
        self.split
    }

    fn args(&self) -> ShapeArgs<'_> {
        ShapeArgs {
            counts: self.counts,
            table: &self.table,
            matrices: &self.matrices,
            long_row: self.split.long_row(),
        }
    }
}

/// The first `len` elements of a pinned buffer, as a source of a copy (ordered by the buffer's event
/// like the whole buffer).
struct Prefix<'a, T> {
    buf: &'a mut PinnedHostSlice<T>,
    len: usize,
}

impl<T> HostSlice<T> for Prefix<'_, T> {
    fn len(&self) -> usize {
        self.len
    }

    unsafe fn stream_synced_slice<'b>(&'b self, stream: &'b CudaStream) -> (&'b [T], SyncOnDrop<'b>) {
        // SAFETY: the caller's promise (the slice is used with `stream` only) is passed on.
        let (all, sync) = unsafe { self.buf.stream_synced_slice(stream) };
        (&all[..self.len.min(all.len())], sync)
    }

    unsafe fn stream_synced_mut_slice<'b>(
        &'b mut self,
        stream: &'b CudaStream,
    ) -> (&'b mut [T], SyncOnDrop<'b>) {
        let len = self.len;
        // SAFETY: as above.
        let (all, sync) = unsafe { self.buf.stream_synced_mut_slice(stream) };
        let end = len.min(all.len());
        (&mut all[..end], sync)
    }
}

/// Field elements that hold `words` 64-bit words, four each.
fn words_elements(words: usize) -> usize {
    words.div_ceil(4)
}

/// A staged partition's evaluation against a resident shape (see the [module docs](self)).
struct ShapeEvaluation {
    shape: Arc<GpuShape>,
    words_len: usize,
}

impl Evaluation<CudaBackend> for ShapeEvaluation {
    fn queue<'b>(
        self: Box<Self>,
        backend: &'b CudaBackend,
        z: &mut GpuPoly,
        abc: &mut [GpuPoly; 3],
        timer: Timing<'_>,
    ) -> Result<Deferred<'b, Option<usize>>, BackendError> {
        let mut own = Probe::default();
        let probe = match probe_of(timer) {
            Some(p) => p,
            None => &mut own,
        };
        backend.evaluate(&self.shape, self.words_len, z, abc, probe).map_err(device("evaluate"))
    }
}

impl CudaBackend {
    /// Stages a partition compactly for evaluation against `shape` on this device: `a`, `b`, `c` and
    /// `z` buffers from the arena, the compact assignment copied into `b` (bitmaps and ranks) and `c`
    /// (the other values) on the copy stream. For [`cuzk_groth16::stage_evaluated`].
    pub fn stage_compact(
        &self,
        shape: &Arc<GpuShape>,
        w: &CompactWitness,
    ) -> Result<cuzk_groth16::EvaluatedUpload<CudaBackend>, CudaError> {
        let counts = shape.counts();
        if w.counts() != counts {
            return Err(CudaError::Length {
                op: "stage_compact",
                expected: counts.variables(),
                got: w.counts().variables(),
            });
        }
        let n = counts.domain_size();
        let (zero, one, ranks) = (w.density().zero_bits(), w.density().one_bits(), w.ranks());
        let words_len = ranks.len();
        let word_elements = words_elements(3 * words_len);
        let packed = w.others();
        for (what, len) in [("the bitmaps and ranks", word_elements), ("the packed values", packed.len())] {
            if len > n {
                return Err(CudaError::OutOfMemory {
                    what,
                    need: len * std::mem::size_of::<GpuFr>(),
                    free: n * std::mem::size_of::<GpuFr>(),
                });
            }
        }
        let copy = self.gpu().copy_stream();
        let arena = self.arena_handle();
        let take = |len| arena.take(self.gpu(), copy, len).map(|buf| GpuPoly { buf });
        let (a, mut b, mut c, z) = (take(n)?, take(n)?, take(n)?, take(counts.variables())?);
        let mut staged = self.take_staging(n, 2)?;
        let result = (|| {
            let [words_buf, packed_buf] = staged.as_mut_slice() else {
                return Err(CudaError::Size { op: "stage_compact", size: 2, reason: "two staging buffers" });
            };
            {
                let words_host = words_buf.as_mut_slice().during("writing a staging buffer")?;
                let packed_host = packed_buf.as_mut_slice().during("writing a staging buffer")?;
                let word = |i: usize| {
                    let part = [zero, one, ranks][i / words_len];
                    part[i % words_len]
                };
                stage_in_parallel(|| {
                    words_host[..word_elements].par_iter_mut().enumerate().for_each(|(e, out)| {
                        let mut limbs = [0u64; 4];
                        for (k, l) in limbs.iter_mut().enumerate() {
                            let i = 4 * e + k;
                            if i < 3 * words_len {
                                *l = word(i);
                            }
                        }
                        *out = GpuFr(DeviceFr { limbs });
                    });
                    packed_host[..packed.len()]
                        .par_chunks_mut(1 << 14)
                        .zip(packed.par_chunks(1 << 14))
                        .for_each(|(dst, src)| {
                            for (d, s) in dst.iter_mut().zip(src) {
                                *d = GpuFr(DeviceFr::from_ark(s));
                            }
                        });
                });
            }
            let mut dst = b.buf.slice_mut(..word_elements.max(1));
            copy.memcpy_htod(&Prefix { buf: words_buf, len: word_elements.max(1) }, &mut dst)
                .during("uploading a compact assignment")?;
            if !packed.is_empty() {
                let mut dst = c.buf.slice_mut(..packed.len());
                copy.memcpy_htod(&Prefix { buf: packed_buf, len: packed.len() }, &mut dst)
                    .during("uploading a compact assignment")?;
            }
            Ok(())
        })();
        self.return_staging(staged);
        result?;
        let evaluation = Box::new(ShapeEvaluation { shape: shape.clone(), words_len });
        Ok(([a, b, c], z, evaluation))
    }

    /// Queues `z`'s expansion and the products on the compute stream; the deferred result is the
    /// first unsatisfied constraint.
    fn evaluate<'b>(
        &'b self,
        shape: &GpuShape,
        words_len: usize,
        z: &mut GpuPoly,
        abc: &mut [GpuPoly; 3],
        probe: &mut Probe,
    ) -> Result<Deferred<'b, Option<usize>>, CudaError> {
        let gpu = self.gpu();
        let [_, b, c] = &*abc;
        kernels::r1cs::expand(gpu, gpu.compute_stream(), &mut z.buf, &b.buf, words_len, &c.buf, probe)?;
        self.products(shape, z, abc, probe)
    }

    /// Queues `shape`'s products with an expanded `z` into `abc` on the compute stream: the long
    /// rows, then the others with every row checked; the deferred result is the first unsatisfied
    /// constraint.
    fn products<'b>(
        &'b self,
        shape: &GpuShape,
        z: &GpuPoly,
        abc: &mut [GpuPoly; 3],
        probe: &mut Probe,
    ) -> Result<Deferred<'b, Option<usize>>, CudaError> {
        let gpu = self.gpu();
        let stream = gpu.compute_stream();
        let [a, b, c] = abc;
        let args = shape.args();
        for (out, matrix) in [&mut *a, &mut *b, &mut *c].into_iter().zip(args.matrices) {
            kernels::r1cs::long_rows(gpu, stream, &mut out.buf, matrix, &z.buf, &args, probe)?;
        }
        let mut bad = gpu.zeros::<u32>(stream, 1)?;
        kernels::r1cs::evaluate(
            gpu,
            stream,
            [&mut a.buf, &mut b.buf, &mut c.buf],
            &z.buf,
            &args,
            &mut bad,
            probe,
        )?;
        let mut host = gpu.result_buffer(4)?;
        {
            // SAFETY: `bad` holds one u32, four plain bytes.
            let raw = unsafe { bad.transmute::<u8>(4) }.ok_or(CudaError::Size {
                op: "evaluate",
                size: 4,
                reason: "the check's buffer",
            })?;
            stream.memcpy_dtoh(&raw, host.get_mut()).during("copying the constraint check")?;
        }
        let constraints = shape.counts().constraints;
        Ok(Deferred::Pending(Box::new(move || {
            let _keep = bad;
            let bytes = host.get().as_slice().map_err(|e| {
                device("evaluate")(CudaError::Driver { op: "reading the constraint check", source: e })
            })?;
            let v = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
            Ok((v != 0).then(|| constraints - v))
        })))
    }

    /// For benchmarks: `shape`'s products with `z`, already expanded (by an evaluation of a staged
    /// partition against a shape of the same counts), into `abc`, waited for; the first unsatisfied
    /// constraint. Products only, so it can be repeated on the same buffers.
    #[cfg(feature = "bench-kernels")]
    pub fn shape_products(
        &self,
        shape: &GpuShape,
        z: &GpuPoly,
        abc: &mut [GpuPoly; 3],
    ) -> Result<Option<usize>, BackendError> {
        self.products(shape, z, abc, &mut Probe::default()).map_err(device("shape_products"))?.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::RowSplit;

    #[test]
    fn a_split_lists_the_rows_longer_than_its_bound_in_order() {
        let lengths = [0usize, 1, 16, 17, 256, 2, 0, 40];
        let list = |split: RowSplit| split.long_rows(lengths.iter().copied());
        assert_eq!(list(RowSplit::DEFAULT), [3, 4, 7]);
        assert_eq!(list(RowSplit::Threads), Vec::<u32>::new());
        assert_eq!(list(RowSplit::WarpsAbove(0)), [1, 2, 3, 4, 5, 7]);
        assert_eq!(list(RowSplit::WarpsAbove(1)), [2, 3, 4, 5, 7]);
        assert_eq!(list(RowSplit::WarpsAbove(u32::MAX)), Vec::<u32>::new());
        assert_eq!(RowSplit::default(), RowSplit::DEFAULT);
    }

    /// The SHA-256 porep-like shape the GPU suite evaluates has long rows in the default split (so
    /// the suite's default runs the warps' kernel), and their lists take four bytes a row.
    #[test]
    fn the_sha_shape_has_long_rows_and_their_lists_are_counted() {
        let params = cuzk_testkit::small_sha_porep();
        let circuit = cuzk_circuits::PorepLike::new(params, 7, 0).unwrap();
        let shape = cuzk_synth::R1csShape::record(circuit).unwrap();
        let long = |split: RowSplit| -> usize {
            [shape.a(), shape.b(), shape.c()].iter().map(|m| split.long_rows(m.row_lengths()).len()).sum()
        };
        assert!(long(RowSplit::DEFAULT) > 0);
        let bytes = super::GpuShape::device_bytes_with;
        for split in [RowSplit::DEFAULT, RowSplit::WarpsAbove(0), RowSplit::WarpsAbove(1)] {
            assert_eq!(bytes(&shape, split), bytes(&shape, RowSplit::Threads) + 4 * long(split), "{split:?}");
        }
        assert_eq!(super::GpuShape::device_bytes_of(&shape), bytes(&shape, RowSplit::DEFAULT));
    }
}
