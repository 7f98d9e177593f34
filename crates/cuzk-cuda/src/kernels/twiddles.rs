//! Twiddle tables of the NTT passes (`kernels/ntt/ntt.cu`): their forms (Montgomery's or Shoup's
//! products), the tables of the passes that have their own, where a pass keeps its twiddles, and the
//! shared memory that takes.

use std::sync::Arc;

use ark_bls12_381::Fr;
use ark_ff::{Field, One};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, PushKernelArg};
use cuzk_field::{DeviceFr, DeviceRepr};

use super::ntt::{MAX_PASS_STAGES, TILE_BITS};
use super::{count, elementwise, MulUnits};
use crate::modules::PASS_KINDS;
use crate::profile::Probe;
use crate::{CudaError, DriverContext, Gpu, GpuFr};

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
    /// step then take their coset powers in Shoup's form too ([`super::PowerTable::shoup`]); its other
    /// products (`a·b`) stay Montgomery's on the integer units, whatever [`MulUnits`] says. Which
    /// stages' twiddles a pass reads from device memory rather than shared memory is the table's
    /// [`TwiddlePlacement`].
    Shoup,
}

/// Where a pass by Shoup's products ([`Twiddles::Shoup`]) keeps its twiddles: how many of its last
/// stages read theirs from device memory (through the L1 cache) where they use them, rather than
/// from shared memory. Stage `t` of a pass of `k` stages has `2^t` twiddles a column, each used by
/// `2^(k−1−t)` butterflies; every stage left in device memory frees shared memory, which bounds how
/// many blocks a multiprocessor holds. Passes by Montgomery's products keep every twiddle in shared
/// memory, and so does the witness map's turn ([`super::ntt_pass_turn`]), whatever the placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TwiddlePlacement {
    /// Stages of a pass from stage 0 (single columns, `c = 0`): its twiddles are shared by every block.
    pub first: u32,
    /// Stages of a pass over strided columns (`c > 0`).
    pub strided: u32,
}

impl Default for TwiddlePlacement {
    /// Every twiddle of a first pass in shared memory (copied from a table of its own), the last two
    /// stages of a strided pass's in device memory.
    fn default() -> Self {
        Self { first: 0, strided: 2 }
    }
}

impl TwiddlePlacement {
    /// The first stage (of `0 .. k`) whose twiddles a pass of `k` stages over `2^c` columns reads
    /// from device memory (`k` for none), with twiddles in `form`.
    pub(super) fn first_in_device_memory(self, form: Twiddles, k: u32, c: u32) -> u32 {
        match form {
            Twiddles::Montgomery => k,
            Twiddles::Shoup => k - k.min(if c == 0 { self.first } else { self.strided }),
        }
    }
}

/// A twiddle table on the device and the form it was built in ([`crate::ntt::NttTables`] makes them), so
/// that a pass cannot be handed a table in one form and told it is in the other.
#[derive(Debug)]
pub struct TwiddleTable {
    pub(crate) values: CudaSlice<GpuFr>,
    pub(crate) form: Twiddles,
    /// Tables of the passes that have their own ([`TwiddleTable::with_pass_tables`]).
    pub(crate) passes: Vec<PassTwiddles>,
    /// Where the passes keep the twiddles.
    pub(crate) placement: TwiddlePlacement,
}

/// The twiddles of one pass (stages `s0 .. s0 + k`) in the order its blocks hold them
/// (`ntt_pass_twiddles` in `kernels/ntt/ntt.cu`): a block's are one run of consecutive elements, where
/// in the transform's table a column's twiddles of one stage lie `2^(log2 n − 1 − s0 − t)` apart.
/// With `fold`, the twiddles of stage `s` carry the factor `fold^(2^(log2 n − 1 − s))` (but stages 0
/// and 1 of a first pass: [`stage_factors`]; [`TwiddleTable::with_folded_pass_tables`]).
#[derive(Debug)]
pub(crate) struct PassTwiddles {
    s0: u32,
    k: u32,
    fold: Option<Fr>,
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

    /// This table with tables of their own for the first and middle passes of a transform of
    /// `2^log_n` elements in `passes` (`(s0, k)`: all but one with `0 < s0` and `s0 + k = log_n`),
    /// built from it on `stream`. Their blocks share their twiddles (each group of columns serves
    /// `2^(log_n − s0 − k)` blocks; a first pass has one group), so the tables are small: a block's
    /// twiddles, one run per group (4.2 MB at 2^24 and 16.7 MB at 2^27 in Shoup's form for the
    /// middle passes, at most 511 twiddles for a first pass); the last pass's are each read by one
    /// block.
    pub fn with_pass_tables(
        self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        log_n: u32,
        passes: &[(u32, u32)],
    ) -> Result<Self, CudaError> {
        self.add_pass_tables(gpu, stream, log_n, passes, None)
    }

    /// This table with tables of their own for the first and middle passes of a transform of
    /// `2^log_n` elements in `passes` (those with `s0 = 0` or `s0 + k < log_n`) whose twiddles carry
    /// powers of `fold`: those of stage `s` multiplied by `fold^(2^(log_n − 1 − s))`, except stages
    /// 0 and 1 of a first pass, which do not multiply at every position (their factor is 1). Stage
    /// `s` multiplies by its twiddles exactly the elements whose index has bit `log_n − 1 − s` set
    /// (the input's index in decimation in time, the output's in frequency), so these passes scale
    /// element `i` by the power of `fold` that the bits of `i` in the range of
    /// [`super::Fold::of_passes`] give, and a coset transform's bit reversal need only scale by the
    /// power of the other bits (one product from a small table: [`super::PowerTable::fold`]). Tables
    /// of the same sizes as the passes' plain ones.
    pub fn with_folded_pass_tables(
        self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        log_n: u32,
        passes: &[(u32, u32)],
        fold: Fr,
    ) -> Result<Self, CudaError> {
        self.add_pass_tables(gpu, stream, log_n, passes, Some(fold))
    }

    /// Adds the first and middle passes' own tables ([`folds_pass`]) that it lacks, folded with
    /// `fold`.
    fn add_pass_tables(
        mut self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        log_n: u32,
        passes: &[(u32, u32)],
        fold: Option<Fr>,
    ) -> Result<Self, CudaError> {
        for &(s0, k) in passes {
            if !folds_pass(log_n, s0, k) || k > MAX_PASS_STAGES || self.pass_table(s0, k, fold).is_some() {
                continue;
            }
            let values = self.pass_table_on_device(gpu, stream, log_n, s0, k, fold)?;
            self.passes.push(PassTwiddles { s0, k, fold, values });
        }
        Ok(self)
    }

    /// The own table of the pass over stages `s0 .. s0 + k` built on `stream` from this table, its
    /// twiddles multiplied by stage factors of `fold` when given.
    fn pass_table_on_device(
        &self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        log_n: u32,
        s0: u32,
        k: u32,
        fold: Option<Fr>,
    ) -> Result<CudaSlice<GpuFr>, CudaError> {
        let n = 1usize << log_n;
        check_twiddles("ntt_pass_twiddles", self, n)?;
        let c = pass_columns(s0, k);
        let total = pass_table_entries(s0, k, c);
        let len = if self.form == Twiddles::Shoup { 2 * total } else { total };
        let mut values = gpu.zeros::<GpuFr>(stream, len)?;
        let factors = match fold {
            Some(base) => Some(gpu.upload(stream, &stage_factors(base, log_n, s0, k))?),
            None => None,
        };
        let (factors_arg, folded) = (factors.as_ref().unwrap_or(&gpu.dummy), u32::from(factors.is_some()));
        let (total, shoup) = (count("ntt_pass_twiddles", total)?, u32::from(self.form == Twiddles::Shoup));
        // SAFETY: matches `ntt_pass_twiddles(Fr* out, const Fr* tw, uint32_t log_n, uint32_t s0, uint32_t k,
        // uint32_t c, uint32_t shoup, const Fr* factors, uint32_t folded)`: entry e < total reads tw
        // below n/2 (its quotient below n with `shoup`, the table's length in that form, checked
        // above) and writes out[e] (and out[total + e] with `shoup`), within `len`; with `folded` it
        // reads factors[t] for stages t < k, the k factors uploaded (otherwise not at all).
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
                .arg(factors_arg)
                .arg(&folded)
                .launch(elementwise(total as usize))
        }
        .during("ntt_pass_twiddles")?;
        Ok(values)
    }

    /// This table with its passes keeping their twiddles as `placement` says.
    pub fn with_placement(self, placement: TwiddlePlacement) -> Self {
        Self { placement, ..self }
    }

    /// Where the passes keep the twiddles.
    pub fn placement(&self) -> TwiddlePlacement {
        self.placement
    }

    /// The table of the pass over stages `s0 .. s0 + k` with powers of `fold` in its twiddles (none
    /// for `None`), if it has one.
    pub(super) fn pass_table(&self, s0: u32, k: u32, fold: Option<Fr>) -> Option<&CudaSlice<GpuFr>> {
        self.passes.iter().find(|p| p.s0 == s0 && p.k == k && p.fold == fold).map(|p| &p.values)
    }
}

/// Whether the pass over stages `s0 .. s0 + k` of a transform of `2^log_n` elements has a table of
/// its own (plain or folded): a first pass (`s0 = 0`) or a middle one (`s0 + k < log_n`), whose
/// blocks share their twiddles. A last pass's blocks each read twiddles no other block reads.
pub(crate) fn folds_pass(log_n: u32, s0: u32, k: u32) -> bool {
    s0 == 0 || s0 + k < log_n
}

/// The factors by which a pass over stages `s0 .. s0 + k` of a transform of `2^log_n` elements
/// multiplies its twiddles to carry powers of `fold` ([`TwiddleTable::with_folded_pass_tables`]):
/// `fold^(2^(log_n − 1 − s))` for stage `s = s0 + t`, at `t`, in Montgomery form; 1 for stages 0
/// and 1 of a first pass (`s0 = 0`), whose products by a twiddle of 1 the pass skips (all of stage
/// 0's, position 0's of stage 1: `run_stages` in `kernels/ntt/ntt.cu`), so that a factor on their
/// twiddles would miss those elements.
pub(crate) fn stage_factors(fold: Fr, log_n: u32, s0: u32, k: u32) -> Vec<GpuFr> {
    let factor = |s: u32| if s0 == 0 && s < 2 { Fr::one() } else { fold.pow([1u64 << (log_n - 1 - s)]) };
    (s0..s0 + k).map(|s| GpuFr(DeviceFr::from_ark(&factor(s)))).collect()
}

/// Columns `2^c` a block of the pass over stages `s0 .. s0 + k` takes: as many as fit a tile of
/// `2^TILE_BITS` elements, and no more than the pass has (`c <= s0`).
pub(super) fn pass_columns(s0: u32, k: u32) -> u32 {
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
    pub(super) fn kernel(self, units: MulUnits) -> usize {
        match self {
            Self::Montgomery => units as usize,
            Self::Shoup => PASS_KINDS - 1,
        }
    }

    /// Dynamic shared memory of a pass block of `tile` elements in `2^c` columns whose stages below
    /// `from` keep their twiddles in shared memory ([`TwiddlePlacement`]): the elements, and room for
    /// `2^(from + c)` twiddles (with Shoup's, as many quotients): with every stage's there (`from` =
    /// `k`), as many twiddles as elements. At most twice a tile of 2^TILE_BITS elements with
    /// Montgomery's twiddles or with Shoup's from `k − 1`; three times one of at most
    /// 2^MAX_PASS_STAGES elements (a first pass) with Shoup's from `k` (48 KiB).
    pub(super) fn shared_bytes(self, tile: u32, c: u32, from: u32) -> u32 {
        const _: () = assert!(3 * (1 << MAX_PASS_STAGES) * 32 <= crate::modules::PASS_SHARED_BYTES as u32);
        let element = std::mem::size_of::<GpuFr>() as u32;
        let twiddles = if from == 0 { 0 } else { 1u32 << (from + c) };
        let per_twiddle = match self {
            Self::Shoup => 2,
            Self::Montgomery => 1,
        };
        (tile + per_twiddle * twiddles) * element
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
/// ([`super::PowerTable::shoup`]) in place: each becomes its canonical value, and the odd place after it
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

/// Checks that a twiddle table serves a transform of `n` elements.
pub(super) fn check_twiddles(op: &'static str, table: &TwiddleTable, n: usize) -> Result<(), CudaError> {
    let need = table.form.table_len(n);
    if table.values.len() < need {
        return Err(CudaError::Length { op, expected: need, got: table.values.len() });
    }
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
        // Montgomery's passes keep every twiddle in shared memory: as many as elements, at most the
        // configured 64 KiB. Shoup's with the default placement: a strided pass (c > 0) leaves its last
        // two stages' in device memory (room for a quarter as many twiddles, with their quotients:
        // 48 KiB for a tile of 2^10); a first pass (c = 0, at most 2^MAX_PASS_STAGES elements) keeps
        // them all, with their quotients: 48 KiB at most, within the limit too.
        let limit = crate::modules::PASS_SHARED_BYTES as u32;
        let placed = TwiddlePlacement::default();
        let bytes = |form: Twiddles, placement: TwiddlePlacement, k: u32, c: u32| {
            form.shared_bytes(1 << (k + c), c, placement.first_in_device_memory(form, k, c))
        };
        assert_eq!(bytes(Twiddles::Montgomery, placed, 8, 2), limit);
        assert_eq!(bytes(Twiddles::Shoup, placed, 8, 2), (32 + 16) << 10);
        assert_eq!(bytes(Twiddles::Montgomery, placed, MAX_PASS_STAGES, 0), 32 << 10);
        assert_eq!(bytes(Twiddles::Shoup, placed, MAX_PASS_STAGES, 0), 48 << 10);
        assert_eq!(bytes(Twiddles::Shoup, TwiddlePlacement { first: 0, strided: 1 }, 8, 2), limit);
        // Each stage left in device memory halves the room for twiddles; a first pass with none in
        // shared memory holds only its elements; Montgomery's passes keep every twiddle whatever the
        // placement says.
        let more = TwiddlePlacement { first: 8, strided: 2 };
        assert_eq!(bytes(Twiddles::Shoup, more, 8, 2), (32 + 16) << 10);
        assert_eq!(bytes(Twiddles::Shoup, more, 8, 0), 8 << 10);
        assert_eq!(bytes(Twiddles::Shoup, TwiddlePlacement { first: 20, strided: 20 }, 8, 0), 8 << 10);
        assert_eq!(bytes(Twiddles::Montgomery, more, 8, 2), limit);
        // Every twiddle of a strided pass in shared memory with their quotients would not fit.
        assert!(bytes(Twiddles::Shoup, TwiddlePlacement { first: 0, strided: 0 }, 8, 2) > limit);
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
