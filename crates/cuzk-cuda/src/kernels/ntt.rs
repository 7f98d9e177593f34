//! The NTT module's kernels (`kernels/ntt/ntt.cu`): power tables, bit reversals, radix-2 passes in
//! shared memory, scaling, and the witness map's quotient step.

use std::sync::Arc;

use ark_bls12_381::Fr;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::twiddles::{check_twiddles, folds_pass, pass_columns, TwiddleTable, Twiddles};
use super::{count, elementwise, expect_len, MulUnits, BLOCK};
use crate::modules::PASS_TILE_BITS;
use crate::profile::Probe;
use crate::{CudaError, DriverContext, Gpu, GpuFr};

/// A power table on the device: two-level, `s^i = hi[i >> lo_bits] * lo[i & (2^lo_bits - 1)]`, or
/// full (`full`), `s^i = lo[fold.index(i)]` for every `i < 2^lo_bits` (`lo[i]` without a fold).
#[derive(Debug)]
pub struct PowerTable {
    /// `s^j` for `j < 2^lo_bits`.
    pub lo: CudaSlice<GpuFr>,
    /// `s^(j * 2^lo_bits)`; not read for a full table.
    pub hi: CudaSlice<GpuFr>,
    /// Bits of the index served by `lo`.
    pub lo_bits: u32,
    /// Shoup's form, for the kernels that multiply by Shoup's product (the witness map's with
    /// [`Twiddles::Shoup`]; the others take Montgomery values): in a two-level table each power a
    /// pair, its canonical value at `2j` and its Shoup quotient at `2j + 1` ([`super::shoup_pairs`]);
    /// in a full one the canonical values, then from `2^lo_bits` on their quotients, as a twiddle
    /// table holds them ([`super::shoup_twiddles`]).
    pub shoup: bool,
    /// A full table: one product an element where a two-level table takes two, for `2^lo_bits`
    /// elements on the device (twice that in Shoup's form) where a two-level one holds about
    /// `2^(lo_bits/2 + 1)`. Only the bit reversals ([`bit_reverse`], [`bit_reverse_minus`]) and the
    /// witness map's turn ([`ntt_pass_turn`]) read full tables.
    pub full: bool,
    /// The index bits a full table leaves out, their powers carried by the transform's first and
    /// middle passes ([`TwiddleTable::with_folded_pass_tables`]): `2^(lo_bits − fold.bits)`
    /// entries. None for two-level tables.
    pub fold: Fold,
}

/// Bits `low .. low + bits` of a power's index, which a full [`PowerTable`] leaves out: their powers
/// come from the twiddles of a coset transform's first and middle passes instead, and the table
/// holds only the powers of the indices without them, entry [`Fold::index`]`(i)` for index `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fold {
    /// The lowest bit left out.
    pub low: u32,
    /// How many bits are left out (0: none).
    pub bits: u32,
}

impl Fold {
    /// The bits that the middle passes of a transform of `2^log_n` elements in `passes` (`(s0, k)`
    /// from stage 0 up, as [`crate::ntt::passes`] gives them) cover: stage `s` multiplies by its
    /// twiddles the elements whose index has bit `log_n − 1 − s` set, so the stages from the end of
    /// the first pass to the start of the last cover bits `k_last .. log_n − k_first`. None with
    /// fewer than three passes. The witness map's turn, which runs an interpolation's first pass
    /// unfolded, scales by a table without these bits; the transforms of [`ntt_pass`] fold more
    /// ([`Fold::of_passes`]).
    pub fn of_middle_passes(log_n: u32, passes: &[(u32, u32)]) -> Self {
        match (passes.first(), passes.last()) {
            (Some(&(_, first)), Some(&(_, last))) if passes.len() >= 3 => {
                Self { low: last, bits: log_n - first - last }
            }
            _ => Self::default(),
        }
    }

    /// The bits that the folded pass tables of a transform of `2^log_n` elements in `passes` cover
    /// ([`TwiddleTable::with_folded_pass_tables`]): those of the stages of the first and middle
    /// passes but stages 0 and 1 of the first (its stage 0 multiplies by no twiddle and its stage 1
    /// skips the products by 1, so those cannot carry powers; every other stage of a first or
    /// middle pass multiplies at every position). Stage `s` covers bit `log_n − 1 − s`: with a first
    /// pass of at least two stages and a last of `k_last`, bits `k_last .. log_n − 2` (a single
    /// pass: bits `0 .. log_n − 2`).
    pub fn of_passes(log_n: u32, passes: &[(u32, u32)]) -> Self {
        // Folded stages from `from` (2, or 1 when it opens the second pass) up to the last pass.
        let (from, to) = match passes {
            [] => return Self::default(),
            [_] => (2, log_n),
            [(_, first), .., (_, last)] => ((*first).min(2), log_n - last),
        };
        match to.checked_sub(from) {
            Some(bits) if bits > 0 => Self { low: log_n - to, bits },
            _ => Self::default(),
        }
    }

    /// The entry of index `i` in a table with these bits left out: `i`'s bits below `low`, and
    /// those from `low + bits` up moved down next to them (`full_index` in `kernels/ntt/ntt.cu`).
    pub fn index(self, i: usize) -> usize {
        ((i >> (self.low + self.bits)) << self.low) | (i & ((1usize << self.low) - 1))
    }
}

impl PowerTable {
    /// How many powers the table can produce.
    pub fn capacity(&self) -> usize {
        let per = if self.shoup { 2 } else { 1 };
        if self.full {
            // The quotients of a full table in Shoup's form start after its 2^(lo_bits - fold.bits)
            // values.
            let entries = 1usize << self.lo_bits.saturating_sub(self.fold.bits);
            return if self.lo.len() >= per * entries { 1 << self.lo_bits } else { 0 };
        }
        (self.hi.len() / per) << self.lo_bits
    }
}

/// `(lo, hi, lo_bits, use, fold)`: a power table's kernel arguments.
type TableArgs<'a> = (&'a CudaSlice<GpuFr>, &'a CudaSlice<GpuFr>, u32, u32, Fold);

/// The kernel arguments for an optional power table covering `n` powers, in Shoup's form or not as
/// `shoup` says, full only where the kernel takes full tables (`full_ok`): `(lo, hi, lo_bits, use)`,
/// `fold`, with a dummy buffer (never read, `use = 0`) when there is no table, and `use` 1 for a
/// two-level table, 2 for a full one (the kernels' BY_TWO_LEVEL_TABLE and BY_FULL_TABLE).
fn table_args<'a>(
    gpu: &'a Gpu,
    op: &'static str,
    table: Option<&'a PowerTable>,
    n: usize,
    shoup: bool,
    full_ok: bool,
) -> Result<TableArgs<'a>, CudaError> {
    match table {
        Some(t) if t.shoup != shoup => Err(CudaError::Size {
            op,
            size: n,
            reason: "the power table is not in the form (Shoup's or Montgomery's) this kernel reads",
        }),
        Some(t) if t.full && !full_ok => {
            Err(CudaError::Size { op, size: n, reason: "this kernel reads two-level power tables only" })
        }
        Some(t) if t.capacity() < n => Err(CudaError::Length { op, expected: n, got: t.capacity() }),
        Some(t) if !t.full && t.fold != Fold::default() => Err(CudaError::Size {
            op,
            size: n,
            reason: "a two-level power table cannot leave index bits out",
        }),
        Some(t) if t.fold.low + t.fold.bits > t.lo_bits => {
            Err(CudaError::Size { op, size: n, reason: "the power table leaves out bits beyond its indices" })
        }
        Some(t) => Ok((&t.lo, &t.hi, t.lo_bits, if t.full { 2 } else { 1 }, t.fold)),
        None => Ok((&gpu.dummy, &gpu.dummy, 0, 0, Fold::default())),
    }
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
    table_args(gpu, "fill_powers", Some(table), out.len(), false, false)?;
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
    /// The power `s^i` of a table, `i` the element's index, any constant folded into the table's
    /// powers: two products an element from a two-level table, one from a full one, Shoup's for a
    /// table in Shoup's form.
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
    let (lo, hi, lo_bits, powers, fold) = table_args(gpu, "bit_reverse", table, n, shoup, true)?;
    let (function, cfg) = if shoup {
        bit_reversal_launch(log_n, &gpu.ntt.bit_reverse_tiled_shoup, &gpu.ntt.bit_reverse_shoup)
    } else {
        bit_reversal_launch(log_n, &gpu.ntt.bit_reverse_tiled, &gpu.ntt.bit_reverse)
    };
    probe.before(gpu, stream)?;
    // SAFETY: the four kernels (plain and tiled, each in Montgomery's form and Shoup's) have the
    // signature `(Fr* x, uint32_t log_n, Fr c, const Fr* lo, const Fr* hi, uint32_t lo_bits, uint32_t
    // powers, uint32_t scale, uint32_t fold_low, uint32_t fold_bits)`; x has 2^log_n elements (the
    // tiled ones need log_n >= 8 and one block per middle index); the tables are read only when
    // powers is 1 (two-level) or 2 (full: lo only, at entries below 2^(lo_bits - fold_bits) with
    // fold_low + fold_bits <= lo_bits, and their quotients after them in Shoup's form), and then
    // cover n in the form the kernel reads (checked by table_args and PowerTable::capacity).
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
            .arg(&fold.low)
            .arg(&fold.bits)
            .launch(cfg)
    }
    .during("ntt_bit_reverse")?;
    probe.after(gpu, stream, "bit reversal")?;
    Ok(())
}

/// The witness map's last step: the in-place bit reversal of `x` (length `2^log_n`) that subtracts
/// `sub`, held in the same bit-reversed order, on the way: `x[k] = (x[rev k]·s^k − sub[rev k])·c` for
/// every `k`, `s` given by `table` (which must cover `2^log_n` powers; two-level or full, the latter
/// possibly leaving out the bits its [`Fold`] names; in Shoup's form, its products by `s^k` are
/// Shoup's). `sub` is not changed.
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
    let (lo, hi, lo_bits, powers, fold) =
        table_args(gpu, "bit_reverse_minus", Some(table), n, table.shoup, true)?;
    let (function, cfg) = if table.shoup {
        bit_reversal_launch(log_n, &gpu.ntt.bit_reverse_minus_tiled_shoup, &gpu.ntt.bit_reverse_minus_shoup)
    } else {
        bit_reversal_launch(log_n, &gpu.ntt.bit_reverse_minus_tiled, &gpu.ntt.bit_reverse_minus)
    };
    probe.before(gpu, stream)?;
    // SAFETY: the four kernels have the signature `(Fr* x, const Fr* sub, uint32_t log_n, Fr c, const
    // Fr* lo, const Fr* hi, uint32_t lo_bits, uint32_t powers, uint32_t fold_low, uint32_t fold_bits)`;
    // x and sub have 2^log_n elements (the tiled ones need log_n >= 8 and one block per middle index),
    // and the table (two-level, powers 1, or full, powers 2, as `bit_reverse` reads it) covers n
    // powers in the form the kernel reads.
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
            .arg(&powers)
            .arg(&fold.low)
            .arg(&fold.bits)
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
///
/// With `fold`, a first or middle pass (`s0 = 0` or `s0 + k < log_n`) multiplies by its own
/// table's twiddles with powers of `fold` in them ([`TwiddleTable::with_folded_pass_tables`]; an
/// error if `tw` has none): the share of a coset's powers that the bits of [`Fold::of_passes`]
/// give. A last pass (unless it is also the first) carries none, whatever `fold` says.
#[allow(clippy::too_many_arguments)]
pub fn ntt_pass(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    x: &mut CudaSlice<GpuFr>,
    tw: &TwiddleTable,
    fold: Option<Fr>,
    log_n: u32,
    s0: u32,
    k: u32,
    decimation: Decimation,
    units: MulUnits,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    ntt_pass_times(gpu, stream, x, None, tw, fold, log_n, s0, k, decimation, units, probe)
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
    fold: Option<Fr>,
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
    let (cfg, from) = pass_launch("ntt_pass", tw, n, k, c, c)?;
    let dif = u32::from(decimation == Decimation::Frequency);
    let fold = fold.filter(|_| folds_pass(log_n, s0, k));
    let (table, own) = pass_twiddles("ntt_pass", tw, n, s0, k, fold)?;
    let kind = form.kernel(units);
    let (function, y) = match y {
        Some(y) => (&gpu.ntt.pass_times[kind], y),
        None if s0 == 0 => (&gpu.ntt.pass_first[kind], &gpu.dummy),
        None => (&gpu.ntt.pass[kind], &gpu.dummy),
    };
    probe.before(gpu, stream)?;
    // SAFETY: matches `ntt_pass*(Fr* x, const Fr* y, const Fr* tw, uint32_t log_n, uint32_t s0,
    // uint32_t k, uint32_t c, uint32_t dif, uint32_t own, uint32_t from)`; with c <= s0 each block touches indices
    // below n, in x and (read only by ntt_pass_times, which is given y of n elements: checked above)
    // y; twiddle indices are below n/2, and with Shoup's form their quotients' below n (the table's
    // length, checked above), or with `own` below the pass table's entries for (s0, k, c) (and their
    // quotients'), the length it was built with; the shared memory is 2^(k+c) elements plus room
    // for 2^(from+c) twiddles (and as many quotients with Shoup's form), 32 bytes each, checked
    // above to be within the 64 KiB the function is configured for (`PASS_SHARED_BYTES`).
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
            .arg(&from)
            .launch(cfg)
    }
    .during("ntt_pass")?;
    probe.after(gpu, stream, "ntt_pass")?;
    Ok(())
}

/// The first pass of a transform decimated in time, out of place, with the bit reversal before it
/// folded into its loads: `out` receives what [`bit_reverse`] of `x` (scaled at the source index by
/// `scale`'s powers when given) followed by [`ntt_pass`] over stages `0 .. k` would leave in `x`, and
/// `x` is only read. A block gathers `2^tb` tiles of `2^k` (`tb = min(TILE_BITS − k, log_n − k)`), so
/// that its loads read runs of `2^tb` consecutive elements and its stores runs of `2^k`. An in-place
/// form cannot exist: the tiles a block writes are read by blocks other than those whose tiles it
/// reads. `fold` as for [`ntt_pass`]; `scale` is a power table (two-level or full, in either form),
/// read as [`bit_reverse`] reads it.
#[allow(clippy::too_many_arguments)]
pub fn ntt_pass_gather(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    x: &CudaSlice<GpuFr>,
    out: &mut CudaSlice<GpuFr>,
    tw: &TwiddleTable,
    fold: Option<Fr>,
    log_n: u32,
    k: u32,
    scale: Option<&PowerTable>,
    units: MulUnits,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let n = 1usize << log_n;
    expect_len("ntt_pass_gather", n, x.len())?;
    expect_len("ntt_pass_gather", n, out.len())?;
    check_twiddles("ntt_pass_gather", tw, n)?;
    let form = tw.form;
    if k == 0 || k > MAX_PASS_STAGES || k > log_n {
        return Err(CudaError::Size {
            op: "ntt_pass_gather",
            size: k as usize,
            reason: "stages out of range",
        });
    }
    let shoup = scale.is_some_and(|t| t.shoup);
    let (lo, hi, lo_bits, powers, table_fold) = table_args(gpu, "ntt_pass_gather", scale, n, shoup, true)?;
    let tb = TILE_BITS.saturating_sub(k).min(log_n - k);
    let (cfg, from) = pass_launch("ntt_pass_gather", tw, n, k, tb, 0)?;
    let (table, own) = pass_twiddles("ntt_pass_gather", tw, n, 0, k, fold)?;
    // The kernel's `scale`: 0 none, 1 a table in Montgomery's form, 2 in Shoup's.
    let scaled = match scale {
        None => 0u32,
        Some(_) if shoup => 2,
        Some(_) => 1,
    };
    probe.before(gpu, stream)?;
    // SAFETY: matches `ntt_pass_gather*(Fr* out, const Fr* x, const Fr* tw, uint32_t log_n, uint32_t
    // k, uint32_t tb, uint32_t own, uint32_t from, uint32_t scale, const Fr* lo, const Fr* hi, uint32_t
    // lo_bits, uint32_t powers, uint32_t fold_low, uint32_t fold_bits)`; x and out hold n elements
    // (checked above) and are distinct buffers (one borrowed shared, the other exclusively); block b
    // (b < n / 2^(k+tb)) reads and writes indices below n; twiddle indices are those of ntt_pass
    // from stage 0 (below n/2, their quotients below n, or within the pass's own table); the power
    // table is read only with scale 1 (Montgomery's form) or 2 (Shoup's), as the table is, and then
    // covers n (table_args);
    // the shared memory is 2^(k+tb) elements and room for 2^from twiddles (and quotients), checked
    // above against what the function is configured for.
    unsafe {
        stream
            .launch_builder(&gpu.ntt.pass_gather[form.kernel(units)])
            .arg(out)
            .arg(x)
            .arg(table)
            .arg(&log_n)
            .arg(&k)
            .arg(&tb)
            .arg(&own)
            .arg(&from)
            .arg(&scaled)
            .arg(lo)
            .arg(hi)
            .arg(&lo_bits)
            .arg(&powers)
            .arg(&table_fold.low)
            .arg(&table_fold.bits)
            .launch(cfg)
    }
    .during("ntt_pass_gather")?;
    probe.after(gpu, stream, "ntt_pass")?;
    Ok(())
}

/// The witness map's turn from interpolation to coset evaluation: on each block of `2^k` consecutive
/// elements of `x` (length `2^log_n`), stages `k − 1 .. 0` of an inverse transform decimated in
/// frequency (twiddles `itw`), the coefficient at (bit-reversed) index `i` scaled by `s^rev(i)` from
/// `coset` (a two-level table, whose `hi` powers carry any constant factor, or a full one, which may
/// leave out the bits of its [`Fold`] when the inverse's middle passes carried their powers), and
/// stages `0 .. k` of a forward transform
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
    let (lo, hi, lo_bits, powers, fold) =
        table_args(gpu, "ntt_pass_turn", Some(coset), n, form == Twiddles::Shoup, true)?;
    let tile = 1u32 << k;
    let cfg = LaunchConfig {
        grid_dim: ((n >> k) as u32, 1, 1),
        block_dim: (pass_threads(tile), 1, 1),
        shared_mem_bytes: form.shared_bytes(tile, 0, k),
    };
    probe.before(gpu, stream)?;
    // SAFETY: matches `ntt_pass_turn*(Fr* x, const Fr* itw, const Fr* tw, uint32_t log_n, uint32_t k,
    // const Fr* lo, const Fr* hi, uint32_t lo_bits, uint32_t powers, uint32_t fold_low, uint32_t
    // fold_bits)`; block b touches elements b 2^k .. (b + 1) 2^k, below n; twiddle indices are below
    // n/2 (with Shoup's form, quotients' below n), within the tables (checked above), and the power
    // table (two-level, powers 1, or full, powers 2) covers n in the form the kernel reads; the shared
    // memory is 2^k elements plus fewer twiddles (and quotients), within what the function is
    // configured for.
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
            .arg(&powers)
            .arg(&fold.low)
            .arg(&fold.bits)
            .launch(cfg)
    }
    .during("ntt_pass_turn")?;
    probe.after(gpu, stream, "ntt_pass")?;
    Ok(())
}

/// The launch of a pass of `k` stages over blocks of `2^(k + extra)` elements whose twiddles sit in
/// shared memory for `2^c` columns (`c = extra` for [`ntt_pass`], 0 for [`ntt_pass_gather`], whose
/// tiles share theirs), and the first stage that reads its twiddles from device memory; an error
/// naming `op` if the placement leaves more in shared memory than a block may hold.
fn pass_launch(
    op: &'static str,
    tw: &TwiddleTable,
    n: usize,
    k: u32,
    extra: u32,
    c: u32,
) -> Result<(LaunchConfig, u32), CudaError> {
    let tile = 1u32 << (k + extra);
    let from = tw.placement.first_in_device_memory(tw.form, k, c);
    let cfg = LaunchConfig {
        grid_dim: ((n >> (k + extra)) as u32, 1, 1),
        block_dim: (pass_threads(tile), 1, 1),
        shared_mem_bytes: tw.form.shared_bytes(tile, c, from),
    };
    if cfg.shared_mem_bytes > crate::modules::PASS_SHARED_BYTES as u32 {
        return Err(CudaError::Size {
            op,
            size: tile as usize,
            reason: "the twiddle placement leaves more twiddles in shared memory than a block may hold",
        });
    }
    Ok((cfg, from))
}

/// The twiddles a pass over stages `s0 .. s0 + k` reads and whether they are its own table: its own
/// (folded with `fold` when given), or the transform's without a fold; an error naming `op` when a
/// fold is asked for that no table of the pass carries.
fn pass_twiddles<'a>(
    op: &'static str,
    tw: &'a TwiddleTable,
    n: usize,
    s0: u32,
    k: u32,
    fold: Option<Fr>,
) -> Result<(&'a CudaSlice<GpuFr>, u32), CudaError> {
    match (tw.pass_table(s0, k, fold), fold) {
        (Some(own), _) => Ok((own, 1)),
        (None, None) => Ok((&tw.values, 0)),
        (None, Some(_)) => Err(CudaError::Size {
            op,
            size: n,
            reason: "no table of this pass carries the coset powers asked for",
        }),
    }
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
pub(super) const TILE_BITS: u32 = PASS_TILE_BITS;

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
    let (lo, hi, lo_bits, flag, _) = table_args(gpu, "scale", powers, x.len(), false, false)?;
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
