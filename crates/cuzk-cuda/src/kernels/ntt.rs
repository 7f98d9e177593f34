//! The NTT module's kernels (`kernels/ntt/ntt.cu`): power tables, bit reversals, radix-2 passes in
//! shared memory, scaling, and the witness map's quotient step.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::{count, elementwise, expect_len, MulUnits, BLOCK};
use crate::modules::{PASS_KINDS, PASS_TILE_BITS};
use crate::profile::Probe;
use crate::{CudaError, DriverContext, Gpu, GpuFr};

/// A power table `s^i = hi[i >> lo_bits] * lo[i & (2^lo_bits - 1)]` on the device.
#[derive(Debug)]
pub struct PowerTable {
    /// `s^j` for `j < 2^lo_bits`.
    pub lo: CudaSlice<GpuFr>,
    /// `s^(j * 2^lo_bits)`.
    pub hi: CudaSlice<GpuFr>,
    /// Bits of the index served by `lo`.
    pub lo_bits: u32,
    /// Shoup's form: each power a pair, its canonical value at `2j` and its Shoup quotient at
    /// `2j + 1` ([`shoup_pairs`]), for the kernels that multiply by Shoup's product (the witness
    /// map's with [`Twiddles::Shoup`]); the others take Montgomery values.
    pub shoup: bool,
}

impl PowerTable {
    /// How many powers the table can produce.
    pub fn capacity(&self) -> usize {
        (self.hi.len() / if self.shoup { 2 } else { 1 }) << self.lo_bits
    }
}

/// `(lo, hi, lo_bits, use)`: a power table's kernel arguments.
type TableArgs<'a> = (&'a CudaSlice<GpuFr>, &'a CudaSlice<GpuFr>, u32, u32);

/// The kernel arguments for an optional power table covering `n` powers, in Shoup's form or not as
/// `shoup` says: `(lo, hi, lo_bits, use)`, with a dummy buffer (never read, `use = 0`) when there is
/// no table.
fn table_args<'a>(
    gpu: &'a Gpu,
    op: &'static str,
    table: Option<&'a PowerTable>,
    n: usize,
    shoup: bool,
) -> Result<TableArgs<'a>, CudaError> {
    match table {
        Some(t) if t.shoup != shoup => Err(CudaError::Size {
            op,
            size: n,
            reason: "the power table is not in the form (Shoup's or Montgomery's) this kernel reads",
        }),
        Some(t) if t.capacity() < n => Err(CudaError::Length { op, expected: n, got: t.capacity() }),
        Some(t) => Ok((&t.lo, &t.hi, t.lo_bits, 1)),
        None => Ok((&gpu.dummy, &gpu.dummy, 0, 0)),
    }
}

/// How the NTT passes multiply by their twiddles, which decides what a twiddle table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Twiddles {
    /// Montgomery products on the passes' [`MulUnits`]: the table holds `w^i`, `i < n/2`, in
    /// Montgomery form.
    #[default]
    Montgomery,
    /// Shoup's products on the integer units (`Fr::mul_shoup` in `kernels/field/mont.cuh`): the
    /// table holds the canonical values of `w^i`, `i < n/2`, then their quotients
    /// `floor(w^i·2^256 / r)` ([`shoup_twiddles`]), twice the memory. The witness map's turn and last
    /// step then take their coset powers in Shoup's form too ([`PowerTable::shoup`]); its other
    /// products (`a·b`) stay Montgomery's on the integer units, whatever [`MulUnits`] says. A pass
    /// over strided columns keeps its last stage's twiddles (half of them,
    /// each used once) in device memory, so that the others and their quotients fit the shared
    /// memory of the Montgomery pass.
    Shoup,
}

/// A twiddle table on the device and the form it was built in ([`crate::NttTables`] makes them), so
/// that a pass cannot be handed a table in one form and told it is in the other.
#[derive(Debug)]
pub struct TwiddleTable {
    pub(crate) values: CudaSlice<GpuFr>,
    pub(crate) form: Twiddles,
    /// Tables of the passes that have their own ([`TwiddleTable::with_pass_tables`]).
    pub(crate) passes: Vec<PassTwiddles>,
}

/// The twiddles of one pass (stages `s0 .. s0 + k`) in the order its blocks hold them
/// (`ntt_pass_twiddles` in `kernels/ntt/ntt.cu`): a block's are one run of consecutive elements, where
/// in the transform's table a column's twiddles of one stage lie `2^(log2 n − 1 − s0 − t)` apart.
#[derive(Debug)]
pub(crate) struct PassTwiddles {
    s0: u32,
    k: u32,
    values: CudaSlice<GpuFr>,
}

impl TwiddleTable {
    /// The table's form.
    pub fn form(&self) -> Twiddles {
        self.form
    }

    /// The table on the device: `w^i`, `i < n/2` (in Shoup's form canonical, then their quotients).
    pub fn values(&self) -> &CudaSlice<GpuFr> {
        &self.values
    }

    /// This table with tables of their own for the middle passes of a transform of `2^log_n`
    /// elements in `passes` (`(s0, k)`: those with `0 < s0` and `s0 + k < log_n`), built from it on
    /// `stream`. Their blocks share their twiddles (each group of columns serves `2^(log_n − s0 − k)`
    /// blocks), so the tables are small: a block's twiddles, one run per group (4.2 MB at 2^24 and
    /// 16.7 MB at 2^27 in Shoup's form); the first pass's twiddles are shared by every block already,
    /// and the last pass's are each read by one block.
    pub fn with_pass_tables(
        mut self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        log_n: u32,
        passes: &[(u32, u32)],
    ) -> Result<Self, CudaError> {
        let n = 1usize << log_n;
        check_twiddles("ntt_pass_twiddles", &self, n)?;
        for &(s0, k) in passes {
            if s0 == 0 || s0 + k >= log_n || k > MAX_PASS_STAGES {
                continue;
            }
            let c = pass_columns(s0, k);
            let total = pass_table_entries(s0, k, c);
            let len = if self.form == Twiddles::Shoup { 2 * total } else { total };
            let mut values = gpu.zeros::<GpuFr>(stream, len)?;
            let (total, shoup) =
                (count("ntt_pass_twiddles", total)?, u32::from(self.form == Twiddles::Shoup));
            // SAFETY: matches `ntt_pass_twiddles(Fr* out, const Fr* tw, uint32_t log_n, uint32_t s0,
            // uint32_t k, uint32_t c, uint32_t shoup)`: entry e < total reads tw below n/2 (its
            // quotient below n with `shoup`, the table's length in that form, checked above) and
            // writes out[e] (and out[total + e] with `shoup`), within `len`.
            unsafe {
                stream
                    .launch_builder(&gpu.ntt.pass_twiddles)
                    .arg(&mut values)
                    .arg(&self.values)
                    .arg(&log_n)
                    .arg(&s0)
                    .arg(&k)
                    .arg(&c)
                    .arg(&shoup)
                    .launch(elementwise(total as usize))
            }
            .during("ntt_pass_twiddles")?;
            self.passes.push(PassTwiddles { s0, k, values });
        }
        Ok(self)
    }

    /// The table of the pass over stages `s0 .. s0 + k`, if it has one.
    fn pass_table(&self, s0: u32, k: u32) -> Option<&CudaSlice<GpuFr>> {
        self.passes.iter().find(|p| p.s0 == s0 && p.k == k).map(|p| &p.values)
    }
}

/// Columns `2^c` a block of the pass over stages `s0 .. s0 + k` takes: as many as fit a tile of
/// `2^TILE_BITS` elements, and no more than the pass has (`c <= s0`).
fn pass_columns(s0: u32, k: u32) -> u32 {
    s0.min(TILE_BITS.saturating_sub(k))
}

/// Entries (values) of a pass's own table: `2^(k + c) − 2^c` twiddles for each of its `2^(s0 − c)`
/// groups of columns.
fn pass_table_entries(s0: u32, k: u32, c: u32) -> usize {
    ((1usize << (k + c)) - (1usize << c)) << (s0 - c)
}

impl Twiddles {
    /// Elements a table of this form holds for a transform of `n` elements.
    pub fn table_len(self, n: usize) -> usize {
        let half = (n / 2).max(1);
        match self {
            Self::Montgomery => half,
            Self::Shoup => 2 * half,
        }
    }

    /// Which of the pass kernels ([`PASS_KINDS`]) runs a pass with these twiddles on `units`.
    fn kernel(self, units: MulUnits) -> usize {
        match self {
            Self::Montgomery => units as usize,
            Self::Shoup => PASS_KINDS - 1,
        }
    }

    /// Dynamic shared memory of a pass block of `tile` elements in `2^c` columns: the elements and
    /// the twiddles; with Shoup's, their quotients too, where a pass over strided columns (`c > 0`)
    /// keeps only those of the stages before its last (which it reads from the table where it uses
    /// them): as many bytes as Montgomery's then, half as many more for a first pass (at most 2^9
    /// elements a block, 48 KiB).
    fn shared_bytes(self, tile: u32, c: u32) -> u32 {
        // A first pass (c = 0) holds at most 2^MAX_PASS_STAGES elements: 48 KiB with Shoup's twiddles,
        // within PASS_SHARED_BYTES.
        const _: () =
            assert!(6 * (1 << MAX_PASS_STAGES) * 32 / 2 <= crate::modules::PASS_SHARED_BYTES as u32);
        let halves = match self {
            Self::Shoup if c == 0 => 6,
            _ => 4,
        };
        halves * tile * std::mem::size_of::<GpuFr>() as u32 / 2
    }
}

/// Turns a Montgomery twiddle table (its first `table.len() / 2` elements: `w^i` in Montgomery
/// form) into a [`Twiddles::Shoup`] one in place: the first half becomes the canonical values, the
/// second their Shoup quotients (by long division on the device, once per table).
pub fn shoup_twiddles(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    table: &mut CudaSlice<GpuFr>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    shoup_convert(gpu, stream, &gpu.ntt.shoup_twiddles, "ntt_shoup_twiddles", table, probe)
}

/// Turns Montgomery values at the even places of `pairs` into a power table's half in Shoup's form
/// ([`PowerTable::shoup`]) in place: each becomes its canonical value, and the odd place after it
/// that value's Shoup quotient.
pub fn shoup_pairs(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    pairs: &mut CudaSlice<GpuFr>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    shoup_convert(gpu, stream, &gpu.ntt.shoup_pairs, "ntt_shoup_pairs", pairs, probe)
}

/// Runs one of the kernels that put Montgomery values of `table` into Shoup's form, `(Fr* table,
/// uint32_t count)` with `count = table.len() / 2` values and as many quotients: `ntt_shoup_twiddles`
/// (values in the first half, quotients in the second) or `ntt_shoup_pairs` (value and quotient side
/// by side).
fn shoup_convert(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    function: &CudaFunction,
    op: &'static str,
    table: &mut CudaSlice<GpuFr>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    if !table.len().is_multiple_of(2) {
        return Err(CudaError::Length { op, expected: table.len() + 1, got: table.len() });
    }
    let count = count(op, table.len() / 2)?;
    probe.before(gpu, stream)?;
    // SAFETY: both kernels have the signature `(Fr* table, uint32_t count)` and touch, for j < count,
    // the two places of value j and its quotient (j and count + j, or 2j and 2j + 1): within the
    // table's 2 count elements.
    unsafe { stream.launch_builder(function).arg(table).arg(&count).launch(elementwise(count as usize)) }
        .during(op)?;
    probe.after(gpu, stream, "shoup tables")?;
    Ok(())
}

/// `out[i] = s^i` for `i < out.len()`.
pub fn fill_powers(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    out: &mut CudaSlice<GpuFr>,
    table: &PowerTable,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n = count("fill_powers", out.len())?;
    table_args(gpu, "fill_powers", Some(table), out.len(), false)?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `ntt_fill_powers(Fr* out, const Fr* lo, const Fr* hi, uint32_t lo_bits, uint32_t n)`;
    // the kernel reads lo[< 2^lo_bits] and hi[< n >> lo_bits], both in range by the capacity check.
    unsafe {
        stream
            .launch_builder(&gpu.ntt.fill_powers)
            .arg(out)
            .arg(&table.lo)
            .arg(&table.hi)
            .arg(&table.lo_bits)
            .arg(&n)
            .launch(elementwise(n as usize))
    }
    .during("ntt_fill_powers")?;
    probe.after(gpu, stream, "fill_powers")?;
    Ok(())
}

/// What a bit reversal multiplies each element by.
#[derive(Debug, Clone, Copy)]
pub enum Factor<'a> {
    /// One constant for every element (a Montgomery product).
    Constant(GpuFr),
    /// The power `s^i` of a table, `i` the element's index, any constant folded into the table's `hi`
    /// powers: two products an element, Shoup's for a table in Shoup's form.
    Powers(&'a PowerTable),
}

/// How a bit reversal scales: by a [`Factor`] taken at the index an element moves from or to.
#[derive(Debug, Clone, Copy)]
pub enum ScaleAt<'a> {
    /// Scale by the index an element moves from.
    Source(Factor<'a>),
    /// Scale by the index an element moves to.
    Destination(Factor<'a>),
}

/// The kernel and launch of a bit reversal of `2^log_n` elements: from 2^8 up the `tiled` one, a block
/// swapping two 16 x 16 tiles and one block per middle index (see `ntt_bit_reverse_tiled`); below,
/// `plain`, one thread per element.
fn bit_reversal_launch<'a>(
    log_n: u32,
    tiled: &'a CudaFunction,
    plain: &'a CudaFunction,
) -> (&'a CudaFunction, LaunchConfig) {
    if log_n >= 8 {
        let cfg = LaunchConfig {
            grid_dim: (1 << (log_n - 8), 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        (tiled, cfg)
    } else {
        (plain, elementwise(1 << log_n))
    }
}

/// In-place bit-reversal permutation of `x` (length `2^log_n`), optionally scaling as it goes.
pub fn bit_reverse(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    x: &mut CudaSlice<GpuFr>,
    log_n: u32,
    scale: Option<ScaleAt<'_>>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n = 1usize << log_n;
    expect_len("bit_reverse", n, x.len())?;
    count("bit_reverse", n)?;
    let (factor, mode) = match scale {
        None => (Factor::Constant(GpuFr::default()), 0u32),
        Some(ScaleAt::Source(f)) => (f, 1),
        Some(ScaleAt::Destination(f)) => (f, 2),
    };
    let (c, table) = match factor {
        Factor::Constant(c) => (c, None),
        Factor::Powers(t) => (GpuFr::default(), Some(t)),
    };
    let shoup = table.is_some_and(|t| t.shoup);
    let (lo, hi, lo_bits, powers) = table_args(gpu, "bit_reverse", table, n, shoup)?;
    let (function, cfg) = if shoup {
        bit_reversal_launch(log_n, &gpu.ntt.bit_reverse_tiled_shoup, &gpu.ntt.bit_reverse_shoup)
    } else {
        bit_reversal_launch(log_n, &gpu.ntt.bit_reverse_tiled, &gpu.ntt.bit_reverse)
    };
    probe.before(gpu, stream)?;
    // SAFETY: the four kernels (plain and tiled, each in Montgomery's form and Shoup's) have the
    // signature `(Fr* x, uint32_t log_n, Fr c, const Fr* lo, const Fr* hi, uint32_t lo_bits, uint32_t
    // powers, uint32_t scale)`; x has 2^log_n elements (the tiled ones need log_n >= 8 and one block
    // per middle index); the tables are read only when powers = 1, and then cover n in the form the
    // kernel reads (checked by table_args).
    unsafe {
        stream
            .launch_builder(function)
            .arg(x)
            .arg(&log_n)
            .arg(&c)
            .arg(lo)
            .arg(hi)
            .arg(&lo_bits)
            .arg(&powers)
            .arg(&mode)
            .launch(cfg)
    }
    .during("ntt_bit_reverse")?;
    probe.after(gpu, stream, "bit reversal")?;
    Ok(())
}

/// The witness map's last step: the in-place bit reversal of `x` (length `2^log_n`) that subtracts
/// `sub`, held in the same bit-reversed order, on the way: `x[k] = (x[rev k]·s^k − sub[rev k])·c` for
/// every `k`, `s` given by `table` (which must cover `2^log_n` powers; in Shoup's form, its products
/// by `s^k` are Shoup's). `sub` is not changed.
#[allow(clippy::too_many_arguments)]
pub fn bit_reverse_minus(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    x: &mut CudaSlice<GpuFr>,
    sub: &CudaSlice<GpuFr>,
    log_n: u32,
    c: GpuFr,
    table: &PowerTable,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n = 1usize << log_n;
    expect_len("bit_reverse_minus", n, x.len())?;
    expect_len("bit_reverse_minus", n, sub.len())?;
    count("bit_reverse_minus", n)?;
    let (lo, hi, lo_bits, _) = table_args(gpu, "bit_reverse_minus", Some(table), n, table.shoup)?;
    let (function, cfg) = if table.shoup {
        bit_reversal_launch(log_n, &gpu.ntt.bit_reverse_minus_tiled_shoup, &gpu.ntt.bit_reverse_minus_shoup)
    } else {
        bit_reversal_launch(log_n, &gpu.ntt.bit_reverse_minus_tiled, &gpu.ntt.bit_reverse_minus)
    };
    probe.before(gpu, stream)?;
    // SAFETY: both kernels have the signature `(Fr* x, const Fr* sub, uint32_t log_n, Fr c, const Fr*
    // lo, const Fr* hi, uint32_t lo_bits)`; x and sub have 2^log_n elements (the tiled one needs log_n
    // >= 8 and one block per middle index), and the table covers n powers.
    unsafe {
        stream
            .launch_builder(function)
            .arg(x)
            .arg(sub)
            .arg(&log_n)
            .arg(&c)
            .arg(lo)
            .arg(hi)
            .arg(&lo_bits)
            .launch(cfg)
    }
    .during("ntt_bit_reverse_minus")?;
    probe.after(gpu, stream, "bit reversal")?;
    Ok(())
}

/// The direction of an NTT pass's stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decimation {
    /// Decimation in time: bit-reversed input, natural output, stages upwards.
    Time,
    /// Decimation in frequency: natural input, bit-reversed output, stages downwards.
    Frequency,
}

/// Stages `s0 .. s0 + k` of a radix-2 NTT of `x` (length `2^log_n`) with twiddles `tw[i] = w^i`,
/// `i < n/2`. `k` is at most [`MAX_PASS_STAGES`].
///
/// A block takes `2^c` adjacent columns of `2^k` elements, `c = min(s0, TILE_BITS − k)`, so that
/// passes over strided columns still read and write runs of consecutive elements; its shared
/// memory holds the `2^(k+c)` elements and as many twiddles (64 KiB at most). A pass from stage 0
/// runs as `ntt_pass_first`, whose stage 1 skips the products by a twiddle of 1 (a quarter of them).
#[allow(clippy::too_many_arguments)]
pub fn ntt_pass(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    x: &mut CudaSlice<GpuFr>,
    tw: &TwiddleTable,
    log_n: u32,
    s0: u32,
    k: u32,
    decimation: Decimation,
    units: MulUnits,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    ntt_pass_times(gpu, stream, x, None, tw, log_n, s0, k, decimation, units, probe)
}

/// Checks that a twiddle table serves a transform of `n` elements.
fn check_twiddles(op: &'static str, table: &TwiddleTable, n: usize) -> Result<(), CudaError> {
    let need = table.form.table_len(n);
    if table.values.len() < need {
        return Err(CudaError::Length { op, expected: need, got: table.values.len() });
    }
    Ok(())
}

/// [`ntt_pass`] on `x ∘ y` when `y` is given: each element of `x` is multiplied by `y`'s at the same
/// index as the pass loads it (one multiplication an element, with no trip of its own through device
/// memory), and the stages run on the products. `y` is left as it was.
#[allow(clippy::too_many_arguments)]
pub fn ntt_pass_times(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    x: &mut CudaSlice<GpuFr>,
    y: Option<&CudaSlice<GpuFr>>,
    tw: &TwiddleTable,
    log_n: u32,
    s0: u32,
    k: u32,
    decimation: Decimation,
    units: MulUnits,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    if let Some(y) = y {
        expect_len("ntt_pass_times", x.len(), y.len())?;
    }
    let n = 1usize << log_n;
    expect_len("ntt_pass", n, x.len())?;
    check_twiddles("ntt_pass", tw, n)?;
    let form = tw.form;
    if k == 0 || k > MAX_PASS_STAGES || s0 + k > log_n {
        return Err(CudaError::Size { op: "ntt_pass", size: k as usize, reason: "stages out of range" });
    }
    let c = pass_columns(s0, k);
    let tile = 1u32 << (k + c);
    let cfg = LaunchConfig {
        grid_dim: ((n >> (k + c)) as u32, 1, 1),
        block_dim: (pass_threads(tile), 1, 1),
        shared_mem_bytes: form.shared_bytes(tile, c),
    };
    let dif = u32::from(decimation == Decimation::Frequency);
    let (table, own) = match tw.pass_table(s0, k) {
        Some(own) => (own, 1u32),
        None => (&tw.values, 0),
    };
    let kind = form.kernel(units);
    let (function, y) = match y {
        Some(y) => (&gpu.ntt.pass_times[kind], y),
        None if s0 == 0 => (&gpu.ntt.pass_first[kind], &gpu.dummy),
        None => (&gpu.ntt.pass[kind], &gpu.dummy),
    };
    probe.before(gpu, stream)?;
    // SAFETY: matches `ntt_pass*(Fr* x, const Fr* y, const Fr* tw, uint32_t log_n, uint32_t s0,
    // uint32_t k, uint32_t c, uint32_t dif, uint32_t own)`; with c <= s0 each block touches indices
    // below n, in x and (read only by ntt_pass_times, which is given y of n elements: checked above)
    // y; twiddle indices are below n/2, and with Shoup's form their quotients' below n (the table's
    // length, checked above), or with `own` below the pass table's entries for (s0, k, c) (and their
    // quotients'), the length it was built with; the shared memory is 2^(k+c) elements plus fewer
    // twiddles (with Shoup's form and quotients: as many for c > 0, half as many more for c = 0, where
    // 2^(k+c) <= 2^9), 32 bytes each, within the 64 KiB the function is configured for
    // (`PASS_SHARED_BYTES`).
    unsafe {
        stream
            .launch_builder(function)
            .arg(x)
            .arg(y)
            .arg(table)
            .arg(&log_n)
            .arg(&s0)
            .arg(&k)
            .arg(&c)
            .arg(&dif)
            .arg(&own)
            .launch(cfg)
    }
    .during("ntt_pass")?;
    probe.after(gpu, stream, "ntt_pass")?;
    Ok(())
}

/// The witness map's turn from interpolation to coset evaluation: on each block of `2^k` consecutive
/// elements of `x` (length `2^log_n`), stages `k − 1 .. 0` of an inverse transform decimated in
/// frequency (twiddles `itw`), the coefficient at (bit-reversed) index `i` scaled by `s^rev(i)` from
/// `coset` (whose `hi` powers carry any constant factor), and stages `0 .. k` of a forward transform
/// decimated in time (twiddles `tw`): the same as [`ntt_pass`] (frequency), [`scale`] (bit-reversed)
/// and [`ntt_pass`] (time) from stage 0, in one trip through device memory.
#[allow(clippy::too_many_arguments)]
pub fn ntt_pass_turn(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    x: &mut CudaSlice<GpuFr>,
    itw: &TwiddleTable,
    tw: &TwiddleTable,
    log_n: u32,
    k: u32,
    coset: &PowerTable,
    units: MulUnits,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n = 1usize << log_n;
    expect_len("ntt_pass_turn", n, x.len())?;
    for t in [itw, tw] {
        check_twiddles("ntt_pass_turn", t, n)?;
    }
    let form = tw.form;
    if itw.form != form {
        return Err(CudaError::Size {
            op: "ntt_pass_turn",
            size: n,
            reason: "the inverse and forward twiddles are in different forms",
        });
    }
    if k == 0 || k > MAX_PASS_STAGES || k > log_n {
        return Err(CudaError::Size { op: "ntt_pass_turn", size: k as usize, reason: "stages out of range" });
    }
    let (lo, hi, lo_bits, _) = table_args(gpu, "ntt_pass_turn", Some(coset), n, form == Twiddles::Shoup)?;
    let tile = 1u32 << k;
    let cfg = LaunchConfig {
        grid_dim: ((n >> k) as u32, 1, 1),
        block_dim: (pass_threads(tile), 1, 1),
        shared_mem_bytes: form.shared_bytes(tile, 0),
    };
    probe.before(gpu, stream)?;
    // SAFETY: matches `ntt_pass_turn(Fr* x, const Fr* itw, const Fr* tw, uint32_t log_n, uint32_t k,
    // const Fr* lo, const Fr* hi, uint32_t lo_bits)`; block b touches elements b 2^k .. (b + 1) 2^k,
    // below n; twiddle indices are below n/2 (with Shoup's form, quotients' below n), within the
    // tables (checked above), and the power table covers n; the shared memory is 2^k elements plus
    // fewer twiddles (and quotients), within what the function is configured for.
    unsafe {
        stream
            .launch_builder(&gpu.ntt.pass_turn[form.kernel(units)])
            .arg(x)
            .arg(&itw.values)
            .arg(&tw.values)
            .arg(&log_n)
            .arg(&k)
            .arg(lo)
            .arg(hi)
            .arg(&lo_bits)
            .launch(cfg)
    }
    .during("ntt_pass_turn")?;
    probe.after(gpu, stream, "ntt_pass")?;
    Ok(())
}

/// Threads of an [`ntt_pass`] or [`ntt_pass_turn`] block of `tile` elements: two butterflies a stage
/// each (`tile / 4`, 32 to 256). On the H200 (docs/benchmarks/cuda-field-ntt.md) one butterfly a
/// thread is slower (a 2^24 strided pass with 512 threads: 1.85 ms against 1.64; the first pass of a
/// 2^27 transform, tiles of 512, 13.2 ms against 12.3 with 128 threads), and so is four (1.71 ms).
fn pass_threads(tile: u32) -> u32 {
    (tile / 4).clamp(32, 256)
}

/// Most stages one [`ntt_pass`] runs.
pub const MAX_PASS_STAGES: u32 = 9;
/// `log2` of the most elements one [`ntt_pass`] block holds.
const TILE_BITS: u32 = PASS_TILE_BITS;

/// `x[i] *= c`, and by `s^i` too when a table is given. With `bit_reversed` the table's power is
/// `s^rev(i)` instead, `rev` reversing `log2 len` bits: the scaling of values held in bit-reversed
/// order.
pub fn scale(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    x: &mut CudaSlice<GpuFr>,
    c: GpuFr,
    powers: Option<&PowerTable>,
    bit_reversed: bool,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n = count("scale", x.len())?;
    if bit_reversed && !x.len().is_power_of_two() {
        return Err(CudaError::Size {
            op: "scale",
            size: x.len(),
            reason: "bit-reversed order needs a power of two",
        });
    }
    let rev_bits = if bit_reversed { x.len().trailing_zeros() } else { 0 };
    let (lo, hi, lo_bits, flag) = table_args(gpu, "scale", powers, x.len(), false)?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `ntt_scale(Fr* x, uint32_t n, Fr c, const Fr* lo, const Fr* hi, uint32_t lo_bits,
    // uint32_t powers, uint32_t rev_bits)`; tables read only when powers = 1 and cover n (bit reversal
    // permutes indices below n).
    unsafe {
        stream
            .launch_builder(&gpu.ntt.scale)
            .arg(x)
            .arg(&n)
            .arg(&c)
            .arg(lo)
            .arg(hi)
            .arg(&lo_bits)
            .arg(&flag)
            .arg(&rev_bits)
            .launch(elementwise(n as usize))
    }
    .during("ntt_scale")?;
    probe.after(gpu, stream, "scale")?;
    Ok(())
}

/// The witness map's quotient step: `a[i] = (a[i]·b[i] − c[i])·z_inv` (no multiplication by a `z_inv`
/// of 1).
pub fn quotient(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    a: &mut CudaSlice<GpuFr>,
    b: &CudaSlice<GpuFr>,
    c: &CudaSlice<GpuFr>,
    z_inv: GpuFr,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    expect_len("quotient", a.len(), b.len())?;
    expect_len("quotient", a.len(), c.len())?;
    let n = count("quotient", a.len())?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `quotient(Fr* a, const Fr* b, const Fr* c, Fr z_inv, uint32_t n)`; all three have n.
    unsafe {
        stream
            .launch_builder(&gpu.ntt.quotient)
            .arg(a)
            .arg(b)
            .arg(c)
            .arg(&z_inv)
            .arg(&n)
            .launch(elementwise(n as usize))
    }
    .during("quotient")?;
    probe.after(gpu, stream, "quotient")?;
    Ok(())
}

/// `a[i] *= b[i]`: the witness map's product on the coset.
pub fn pointwise_mul(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    a: &mut CudaSlice<GpuFr>,
    b: &CudaSlice<GpuFr>,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    expect_len("pointwise_mul", a.len(), b.len())?;
    let n = count("pointwise_mul", a.len())?;
    probe.before(gpu, stream)?;
    // SAFETY: matches `ntt_mul(Fr* a, const Fr* b, uint32_t n)`; both have n elements.
    unsafe { stream.launch_builder(&gpu.ntt.mul).arg(a).arg(b).arg(&n).launch(elementwise(n as usize)) }
        .during("ntt_mul")?;
    probe.after(gpu, stream, "quotient")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twiddle_tables_and_pass_blocks_take_what_their_kernels_read() {
        // Montgomery's table: w^i for i < n/2 (one element for n = 1); Shoup's: as many values, then
        // as many quotients, the quotient of w^i at n/2 + i.
        for (n, half) in [(1usize, 1usize), (2, 1), (8, 4), (1 << 24, 1 << 23)] {
            assert_eq!(Twiddles::Montgomery.table_len(n), half);
            assert_eq!(Twiddles::Shoup.table_len(n), 2 * half);
        }
        // Strided passes (c > 0) take the same shared memory either way, at most the configured 64
        // KiB; a first pass (c = 0, at most 2^MAX_PASS_STAGES elements) half as much again with
        // Shoup's twiddles, within it too.
        let limit = crate::modules::PASS_SHARED_BYTES as u32;
        let tile = 1u32 << TILE_BITS;
        assert_eq!(Twiddles::Montgomery.shared_bytes(tile, 2), limit);
        assert_eq!(Twiddles::Shoup.shared_bytes(tile, 2), limit);
        let first = 1u32 << MAX_PASS_STAGES;
        assert_eq!(Twiddles::Montgomery.shared_bytes(first, 0), 32 << 10);
        assert_eq!(Twiddles::Shoup.shared_bytes(first, 0), 48 << 10);
        // Shoup's passes have their own kernels, after one per unit.
        assert_eq!(Twiddles::Shoup.kernel(MulUnits::Fp64), PASS_KINDS - 1);
        for units in MulUnits::ALL {
            assert_eq!(Twiddles::Montgomery.kernel(units), units as usize);
        }
    }

    #[test]
    fn middle_passes_own_tables_hold_each_group_of_columns_twiddles_once() {
        // 2^24 in passes (0, 8), (8, 8), (16, 8): the middle pass takes 4 columns a block, 64 groups
        // of them, each with 255 twiddles a column: 65280 values (4.2 MB with Shoup's quotients).
        assert_eq!(pass_columns(8, 8), 2);
        assert_eq!(pass_table_entries(8, 8, 2), 64 * 4 * 255);
        // 2^27 in passes of 9: 2 columns a block, 256 groups, 511 twiddles a column (16.7 MB).
        assert_eq!(pass_columns(9, 9), 1);
        assert_eq!(pass_table_entries(9, 9, 1), 256 * 2 * 511);
        // Small transforms: a block takes every column the pass has.
        assert_eq!(pass_columns(2, 3), 2);
        assert_eq!(pass_table_entries(2, 3, 2), 4 * 7);
    }
}
