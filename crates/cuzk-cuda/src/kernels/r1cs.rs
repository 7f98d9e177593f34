//! The R1CS module's kernels (`kernels/r1cs/r1cs.cu`): expanding a compact assignment and the sparse
//! products of a recorded shape with it.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, PushKernelArg};

use super::{count, elementwise, expect_at_least, expect_len, grid};
use cuzk_synth::Counts;

use crate::profile::Probe;
use crate::{CudaError, DriverContext, Gpu, GpuFr};

/// One R1CS matrix on the device, in compressed sparse rows: `starts` has one entry per row and one
/// more; `columns` and `coefficients` (indices into the shape's table) one per entry; `long` the rows
/// of more entries than the shape's [`ShapeArgs::long_row`], in order (none: no buffer).
pub(crate) struct DeviceCsr {
    pub(crate) starts: CudaSlice<u32>,
    pub(crate) columns: CudaSlice<u32>,
    pub(crate) coefficients: CudaSlice<u32>,
    pub(crate) long: Option<CudaSlice<u32>>,
}

/// A recorded shape's device buffers, as the products read them.
pub(crate) struct ShapeArgs<'a> {
    /// The shape's counts.
    pub(crate) counts: Counts,
    /// The coefficient table (entry 0 is 1).
    pub(crate) table: &'a CudaSlice<GpuFr>,
    /// A, B and C.
    pub(crate) matrices: &'a [DeviceCsr; 3],
    /// Rows of more entries than this are the matrices' `long` rows ([`long_rows`] computes them);
    /// `u32::MAX`: none are.
    pub(crate) long_row: u32,
}

/// Threads a block of [`long_rows`]: eight warps, one row each.
const LONG_ROWS_BLOCK: u32 = 256;

/// The products of `matrix`'s long rows with `z`, one warp a row, each into its row of `out` (the
/// matrix's output, a domain long), where [`evaluate`] reads them. Nothing to do without long rows.
#[allow(clippy::too_many_arguments)]
pub fn long_rows(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    out: &mut CudaSlice<GpuFr>,
    matrix: &DeviceCsr,
    z: &CudaSlice<GpuFr>,
    shape: &ShapeArgs<'_>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let Some(rows) = &matrix.long else { return Ok(()) };
    let counts = shape.counts;
    expect_len("r1cs_long_rows", counts.domain_size(), out.len())?;
    expect_len("r1cs_long_rows", counts.variables(), z.len())?;
    expect_len("r1cs_long_rows", counts.constraints + 1, matrix.starts.len())?;
    let n = count("r1cs_long_rows", rows.len())?;
    let config = grid("r1cs_long_rows", rows.len() * 32, LONG_ROWS_BLOCK)?;
    let kernels = gpu.r1cs_kernels()?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `r1cs_long_rows(Fr* out, const uint32_t* rows, uint32_t count, const uint32_t*
    // starts, columns, coefficients, const Fr* table, const Fr* z)`, in blocks of whole warps and a
    // warp for each of the n rows. `crate::GpuShape::upload_with` listed rows below the constraint
    // count (below out's length, the domain size, and with starts[row + 1] in `starts`, checked
    // above) and kept entries under 2^32 - 32, so the lanes' strided index never wraps; the recorded
    // shape (`cuzk_synth::R1csShape`) has every column below z's length and every coefficient index
    // below the table's.
    unsafe {
        stream
            .launch_builder(&kernels.long_rows)
            .arg(out)
            .arg(rows)
            .arg(&n)
            .arg(&matrix.starts)
            .arg(&matrix.columns)
            .arg(&matrix.coefficients)
            .arg(shape.table)
            .arg(z)
            .launch(config)
    }
    .during("r1cs_long_rows")?;
    probe.after(gpu, stream, "long rows")?;
    Ok(())
}

/// `z` from its compact form: `words` holds the zero bitmap, the one bitmap and the ranks, each
/// `words_len` 64-bit words (read from the front of a buffer of field elements, four words each);
/// `packed` the values that are neither 0 nor 1, at least as many as the ranks say.
pub fn expand(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    z: &mut CudaSlice<GpuFr>,
    words: &CudaSlice<GpuFr>,
    words_len: usize,
    packed: &CudaSlice<GpuFr>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n = count("r1cs_expand", z.len())?;
    expect_len("r1cs_expand", z.len().div_ceil(64), words_len)?;
    expect_at_least("r1cs_expand", (3 * words_len).div_ceil(4), words.len())?;
    let words_len = count("r1cs_expand", words_len)?;
    let kernels = gpu.r1cs_kernels()?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `r1cs_expand(Fr* z, const uint64_t* words, uint32_t words_len, const Fr* packed,
    // uint32_t n)`: `words` holds at least 3 * words_len 64-bit words (checked above; a field element
    // is four), and every rank plus the set bits before it indexes `packed`, as the host's encoding
    // laid them out (`cuzk_synth::CompactWitness`; the caller uploads its ranks and packed values
    // together).
    unsafe {
        stream
            .launch_builder(&kernels.expand)
            .arg(z)
            .arg(words)
            .arg(&words_len)
            .arg(packed)
            .arg(&n)
            .launch(elementwise(n as usize))
    }
    .during("r1cs_expand")?;
    probe.after(gpu, stream, "expand z")?;
    Ok(())
}

/// `a`, `b`, `c` (each the domain's length) from `z` and `shape`, the long rows' products read from
/// where [`long_rows`] put them; `bad` (zeroed before) ends as the constraint count minus the lowest
/// unsatisfied constraint, 0 when every constraint holds.
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    abc: [&mut CudaSlice<GpuFr>; 3],
    z: &CudaSlice<GpuFr>,
    shape: &ShapeArgs<'_>,
    bad: &mut CudaSlice<u32>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let counts = shape.counts;
    let [a, b, c] = abc;
    let n = a.len();
    expect_len("r1cs_evaluate", counts.domain_size(), n)?;
    expect_len("r1cs_evaluate", n, b.len())?;
    expect_len("r1cs_evaluate", n, c.len())?;
    expect_len("r1cs_evaluate", counts.variables(), z.len())?;
    expect_at_least("r1cs_evaluate", 1, bad.len())?;
    let (constraints, instance) =
        (count("r1cs_evaluate", counts.constraints)?, count("r1cs_evaluate", counts.instance)?);
    let n = count("r1cs_evaluate", n)?;
    let [ma, mb, mc] = shape.matrices;
    let kernels = gpu.r1cs_kernels()?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `r1cs_evaluate(Fr* a, Fr* b, Fr* c, const Fr* z, const Fr* table, then per matrix
    // const uint32_t* starts, columns, coefficients, uint32_t long_row, uint32_t constraints, uint32_t
    // instance, uint32_t n, uint32_t* bad)`. a, b, c have n elements; `crate::GpuShape::upload` checked
    // that every column is below z's length, every coefficient index below the table's, and that each
    // matrix's row starts (constraints + 1 of them) bound its entries. A row longer than long_row is
    // only read from a, b or c, at its own index (written there by `long_rows` before; had the caller
    // skipped it, a stale value, never an access out of bounds).
    unsafe {
        stream
            .launch_builder(&kernels.evaluate)
            .arg(a)
            .arg(b)
            .arg(c)
            .arg(z)
            .arg(shape.table)
            .arg(&ma.starts)
            .arg(&ma.columns)
            .arg(&ma.coefficients)
            .arg(&mb.starts)
            .arg(&mb.columns)
            .arg(&mb.coefficients)
            .arg(&mc.starts)
            .arg(&mc.columns)
            .arg(&mc.coefficients)
            .arg(&shape.long_row)
            .arg(&constraints)
            .arg(&instance)
            .arg(&n)
            .arg(bad)
            .launch(elementwise(n as usize))
    }
    .during("r1cs_evaluate")?;
    probe.after(gpu, stream, "sparse products")?;
    Ok(())
}
