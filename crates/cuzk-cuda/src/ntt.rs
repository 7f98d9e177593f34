//! NTTs on the device in ark-poly's conventions, built from the kernels in `kernels.rs`.
//!
//! Forward: bit-reverse (scaling by `g^i` first for a coset), then the `log2 n` stages decimated in
//! time, in passes of at most 9 stages, each pass one launch working in shared memory. Inverse: the
//! stages decimated in frequency with inverse twiddles (natural in, bit-reversed out), then a bit
//! reversal that scales by `1/n` (times `g^-i` for a coset) on the way. A coset's powers come from a
//! two-level table with `1/n` folded in, two products an element (Shoup's with Shoup's twiddles), from
//! a full table, one product an element, or by default from a small full table of the index bits that
//! the first and middle passes' twiddles do not carry, one product an element ([`CosetPowers`]).
//!
//! [`witness_map`] chains the two decimations so that the bit-reversed intermediate results are
//! never permuted: of its six transforms only the last pays for a bit reversal.

use std::sync::Arc;

use ark_bls12_381::Fr;
use ark_ff::{Field, One};
use cudarc::driver::{CudaSlice, CudaStream};
use cuzk_field::DeviceRepr;
use cuzk_groth16::NttKind;

use crate::kernels::{
    self, Decimation, Factor, MulUnits, PowerTable, ScaleAt, TwiddlePlacement, TwiddleTable, Twiddles,
    MAX_PASS_STAGES,
};
use crate::profile::Probe;
use crate::{CudaError, DriverContext, Gpu, GpuFr};

mod powers;

#[cfg(test)]
use powers::folded_powers;
use powers::{coset_bases, coset_tables, gpu_fr, powers_on_device, witness_tables};

/// Largest supported NTT: 2^28 elements (8 GiB of Fr), within the 32-bit indexing of the kernels.
pub const MAX_LOG_N: u32 = 28;

/// The power tables by which the standalone coset transforms' bit reversals scale (`g^i` forward,
/// `g^-i / n` inverse). The witness map has tables of its own: two-level ones, or with the folded
/// forms folded ones too ([`witness_map`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CosetPowers {
    /// Two-level tables of about `2·sqrt(n)` powers, two products an element (Shoup's when the
    /// twiddles are).
    TwoLevel,
    /// Full tables of `n` powers in Montgomery form, one Montgomery product an element: `n` elements a
    /// direction on the device (512 MiB at 2^24), read once by each bit reversal.
    Full,
    /// Full tables in Shoup's form, one Shoup product an element: twice [`CosetPowers::Full`]'s
    /// memory and reads.
    FullShoup,
    /// The twiddles of the middle passes and of the first pass's stages from 2 up carry the powers
    /// of the index bits they cover ([`kernels::Fold::of_passes`]; own tables of those passes with
    /// the coset's powers in them, [`TwiddleTable::with_folded_pass_tables`]), and the bit reversal
    /// scales by the power of the other bits (the last pass's and the top two) from a full table of
    /// those alone, one product an element (Shoup's forward where the twiddles are in Shoup's form,
    /// Montgomery's inverse, the faster of each on the H100): `2^(k_last + 2)` elements a direction
    /// (32 KiB at 2^24, 64 KiB at 2^27; four with a single pass), and three more sets of first- and
    /// middle-pass tables (a forward one, two inverse: 4.2 MB each at 2^24 with Shoup's twiddles;
    /// the inverse's first-pass table folded with `g`, at most 511 twiddles, is never read). The
    /// witness map folds its interpolations the same way, but the turn between them runs the first
    /// pass unfolded: its table leaves out the middle passes' bits only (`2^(k_first + k_last)`
    /// elements). The default: on the H100, folding the middle passes took 3% off the coset NTT and
    /// 1.7% off the witness map at 2^24 and 2^27, and folding the first pass too took the scaled bit
    /// reversal from 0.438 to 0.418 ms at 2^24 (docs/benchmarks/cuda-field-ntt.md).
    #[default]
    Folded,
    /// [`CosetPowers::Folded`] with both its tables in Shoup's form, one Shoup product an element.
    FoldedShoup,
}

impl CosetPowers {
    /// Whether the first and middle passes carry part of the coset's powers.
    pub fn folds(self) -> bool {
        matches!(self, Self::Folded | Self::FoldedShoup)
    }
}

/// Twiddles and coset powers for one size, resident on the device.
#[derive(Debug)]
pub struct NttTables {
    log_n: u32,
    device: DeviceTables,
    coset_form: CosetPowers,
    n_inv: GpuFr,
    /// The units the passes multiply on.
    units: MulUnits,
}

/// The tables an [`NttTables`] holds on the device, those of its form of coset powers
/// ([`CosetPowers`]) included.
#[derive(Debug)]
struct DeviceTables {
    /// The twiddles of the forward and inverse transforms, in one form, with the first and middle
    /// passes' folded tables for the folded forms.
    forward: TwiddleTable,
    inverse: TwiddleTable,
    /// `g^i` and `g^-i / n`, the standalone coset transforms' scaling as they bit-reverse: as
    /// `coset_form` says (two-level tables, and the folded forward one, in Shoup's form when the
    /// twiddles are).
    coset: PowerTable,
    coset_inverse: PowerTable,
    /// `g^i / n`: the witness map's scaling between its interpolations and coset evaluations, and
    /// `g^-i` for its last step, both in Shoup's form when the twiddles are (folded with the folded
    /// forms).
    coset_over_n: PowerTable,
    minus_powers: PowerTable,
}

impl DeviceTables {
    /// The tables of coset powers in `form` for `2^log_n`, built on `stream` (power tables in Shoup's
    /// form where the twiddles are, as each form says), with the twiddle tables `forward` and
    /// `inverse` (the folded forms add the first and middle passes' folded tables to them).
    fn build(
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        log_n: u32,
        form: CosetPowers,
        mut forward: TwiddleTable,
        mut inverse: TwiddleTable,
    ) -> Result<Self, CudaError> {
        let shoup = forward.form() == Twiddles::Shoup;
        let [coset, coset_inverse] = coset_tables(gpu, stream, log_n, form, shoup)?;
        let [coset_over_n, minus_powers] = witness_tables(gpu, stream, log_n, form.folds(), shoup)?;
        if form.folds() {
            let all = passes(log_n);
            let [g, g_inv] = coset_bases();
            forward = forward.with_folded_pass_tables(gpu, stream, log_n, &all, g)?;
            // The witness map's interpolations before its turn carry g's powers, that of a·b and the
            // standalone coset interpolation g^-1's.
            inverse = inverse.with_folded_pass_tables(gpu, stream, log_n, &all, g)?;
            inverse = inverse.with_folded_pass_tables(gpu, stream, log_n, &all, g_inv)?;
        }
        Ok(Self { forward, inverse, coset, coset_inverse, coset_over_n, minus_powers })
    }
}

impl NttTables {
    /// Builds the tables for `2^log_n` on `stream`, Montgomery twiddles.
    pub fn new(gpu: &Gpu, stream: &Arc<CudaStream>, log_n: u32) -> Result<Self, CudaError> {
        Self::with_twiddles(gpu, stream, log_n, Twiddles::Montgomery)
    }

    /// Builds the tables for `2^log_n` on `stream`, twiddles in `form`.
    pub fn with_twiddles(
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        log_n: u32,
        form: Twiddles,
    ) -> Result<Self, CudaError> {
        if log_n > MAX_LOG_N {
            return Err(CudaError::Size { op: "ntt", size: 1 << log_n.min(62), reason: "larger than 2^28" });
        }
        let n = 1usize << log_n;
        let half = (n / 2).max(1);
        let omega = cuzk_field::constants::root_of_unity(log_n).ok_or(CudaError::Size {
            op: "ntt",
            size: n,
            reason: "no root of unity of this order",
        })?;
        let omega_inv = omega.inverse().unwrap_or_default();
        let shoup = form == Twiddles::Shoup;
        let n_inv = Fr::from(n as u64).inverse().unwrap_or_default();
        let twiddles = |root: Fr| -> Result<TwiddleTable, CudaError> {
            let len = form.table_len(n);
            debug_assert!(len >= half);
            let table = powers_on_device(gpu, stream, root, Fr::one(), len, shoup)?;
            TwiddleTable { values: table, form, passes: Vec::new(), placement: Default::default() }
                .with_pass_tables(gpu, stream, log_n, &passes(log_n))
        };
        let coset_form = CosetPowers::default();
        let (forward, inverse) = (twiddles(omega)?, twiddles(omega_inv)?);
        let device = DeviceTables::build(gpu, stream, log_n, coset_form, forward, inverse)?;
        Ok(Self { log_n, device, coset_form, n_inv: gpu_fr(&n_inv), units: MulUnits::Integer })
    }

    /// These tables with the passes multiplying on `units` (the integer units unless set). Passes
    /// with [`Twiddles::Shoup`] run on the integer units whatever `units` says.
    pub fn with_units(self, units: MulUnits) -> Self {
        Self { units, ..self }
    }

    /// These tables with the passes keeping their twiddles as `placement` says (see
    /// [`TwiddlePlacement`]; its default unless set).
    pub fn with_placement(self, placement: TwiddlePlacement) -> Self {
        Self {
            device: DeviceTables {
                forward: self.device.forward.with_placement(placement),
                inverse: self.device.inverse.with_placement(placement),
                ..self.device
            },
            ..self
        }
    }

    /// These tables with the coset powers rebuilt as `form` says ([`CosetPowers::Folded`] unless
    /// set), on `stream`: the standalone coset transforms', and the witness map's (folded with the
    /// folded forms, two-level otherwise).
    pub fn with_coset_powers(
        self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        form: CosetPowers,
    ) -> Result<Self, CudaError> {
        if form == self.coset_form {
            return Ok(self);
        }
        let DeviceTables { forward, inverse, .. } = self.device;
        let device = DeviceTables::build(gpu, stream, self.log_n, form, forward, inverse)?;
        Ok(Self { device, coset_form: form, ..self })
    }

    /// The form of the standalone coset transforms' power tables.
    pub fn coset_form(&self) -> CosetPowers {
        self.coset_form
    }

    /// The units the passes multiply on.
    pub fn units(&self) -> MulUnits {
        self.units
    }

    /// `log2` of the size these tables serve.
    pub fn log_n(&self) -> u32 {
        self.log_n
    }

    /// The twiddles `w^i` (or `w^-i`), `i < n/2`, with their table's form.
    pub fn twiddles(&self, inverse: bool) -> &TwiddleTable {
        if inverse {
            &self.device.inverse
        } else {
            &self.device.forward
        }
    }

    /// The coset powers `g^i` (or `g^-i / n`) of the standalone coset transforms, as
    /// [`NttTables::coset_form`] says.
    pub fn coset_powers(&self, inverse: bool) -> &PowerTable {
        if inverse {
            &self.device.coset_inverse
        } else {
            &self.device.coset
        }
    }
}

/// Splits `log_n` stages into passes of at most 9, as even as possible: `(first stage, stages)`.
pub fn passes(log_n: u32) -> Vec<(u32, u32)> {
    let count = log_n.div_ceil(MAX_PASS_STAGES).max(1);
    let mut out = Vec::new();
    let mut s0 = 0;
    for p in 0..count {
        let k = log_n / count + u32::from(p < log_n % count);
        if k > 0 {
            out.push((s0, k));
        }
        s0 += k;
    }
    out
}

fn check_len(op: &'static str, tables: &NttTables, x: &CudaSlice<GpuFr>) -> Result<(), CudaError> {
    if x.len() == 1 << tables.log_n {
        Ok(())
    } else {
        Err(CudaError::Length { op, expected: 1 << tables.log_n, got: x.len() })
    }
}

/// All stages of a transform of `x` with twiddles `tw` (one of `tables`'), in the given decimation;
/// with `fold`, the first and middle passes carry powers of it ([`kernels::ntt_pass`]).
#[allow(clippy::too_many_arguments)]
fn stages(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    tables: &NttTables,
    x: &mut CudaSlice<GpuFr>,
    tw: &TwiddleTable,
    fold: Option<Fr>,
    decimation: Decimation,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    let log_n = tables.log_n;
    let mut p = passes(log_n);
    if decimation == Decimation::Frequency {
        p.reverse();
    }
    for (s0, k) in p {
        kernels::ntt_pass(gpu, stream, x, tw, fold, log_n, s0, k, decimation, tables.units, probe)?;
    }
    Ok(())
}

/// Transforms `x` (length `2^tables.log_n()`) in place on `stream`, natural order in and out.
pub fn ntt(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    tables: &NttTables,
    x: &mut CudaSlice<GpuFr>,
    kind: NttKind,
) -> Result<(), CudaError> {
    ntt_probed(gpu, stream, tables, x, kind, &mut Probe::default())
}

/// [`ntt`], timing each kernel into `probe` when it is enabled.
pub fn ntt_probed(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    tables: &NttTables,
    x: &mut CudaSlice<GpuFr>,
    kind: NttKind,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    check_len("ntt", tables, x)?;
    let log_n = tables.log_n;
    if log_n == 0 {
        // A single element: every transform in ark-poly's conventions is the identity.
        return Ok(());
    }
    // The first and middle passes of a coset transform carry part of its powers when its tables
    // say so.
    let [g, g_inv] = coset_bases();
    let coset = matches!(kind, NttKind::CosetForward | NttKind::CosetInverse);
    let fold = |base: Fr| (tables.coset_form.folds() && coset).then_some(base);
    match kind {
        NttKind::Forward | NttKind::CosetForward => {
            let pre = (kind == NttKind::CosetForward)
                .then_some(ScaleAt::Source(Factor::Powers(&tables.device.coset)));
            kernels::bit_reverse(gpu, stream, x, log_n, pre, probe)?;
            stages(gpu, stream, tables, x, tables.twiddles(false), fold(g), Decimation::Time, probe)
        }
        NttKind::Inverse | NttKind::CosetInverse => {
            let tw = tables.twiddles(true);
            stages(gpu, stream, tables, x, tw, fold(g_inv), Decimation::Frequency, probe)?;
            let factor = match kind {
                NttKind::CosetInverse => Factor::Powers(&tables.device.coset_inverse),
                _ => Factor::Constant(tables.n_inv),
            };
            let scale = Some(ScaleAt::Destination(factor));
            kernels::bit_reverse(gpu, stream, x, log_n, scale, probe)
        }
    }
}

/// Transforms `x` into `out` (both of length `2^tables.log_n()`) on `stream`, natural order in and
/// out, leaving `x` as it was: the same bits as [`ntt`] on a copy of `x`. The forward transforms
/// have no bit reversal of their own: their first pass gathers its input from `x` in bit-reversed
/// order and writes `out` ([`kernels::ntt_pass_gather`], a coset forward's powers of the bits its
/// passes do not carry taken on the way in), one trip through device memory less than [`ntt`]. The
/// inverse ones copy `x` into `out` and transform it there as [`ntt`] does.
pub fn ntt_into(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    tables: &NttTables,
    x: &CudaSlice<GpuFr>,
    out: &mut CudaSlice<GpuFr>,
    kind: NttKind,
) -> Result<(), CudaError> {
    ntt_into_probed(gpu, stream, tables, x, out, kind, &mut Probe::default())
}

/// [`ntt_into`], timing each kernel into `probe` when it is enabled.
pub fn ntt_into_probed(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    tables: &NttTables,
    x: &CudaSlice<GpuFr>,
    out: &mut CudaSlice<GpuFr>,
    kind: NttKind,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    check_len("ntt_into", tables, x)?;
    check_len("ntt_into", tables, out)?;
    let log_n = tables.log_n;
    let forward = matches!(kind, NttKind::Forward | NttKind::CosetForward);
    if !forward || log_n == 0 {
        stream.memcpy_dtod(x, out).during("copying an NTT's input")?;
        return ntt_probed(gpu, stream, tables, out, kind, probe);
    }
    let coset = kind == NttKind::CosetForward;
    let fold = (tables.coset_form.folds() && coset).then_some(coset_bases()[0]);
    let scale = coset.then_some(&tables.device.coset);
    let tw = tables.twiddles(false);
    let all = passes(log_n);
    let (_, k0) = all[0];
    kernels::ntt_pass_gather(gpu, stream, x, out, tw, fold, log_n, k0, scale, tables.units, probe)?;
    for &(s0, k) in &all[1..] {
        kernels::ntt_pass(gpu, stream, out, tw, fold, log_n, s0, k, Decimation::Time, tables.units, probe)?;
    }
    Ok(())
}

/// The witness map's transforms on the GPU: `a`, `b`, `c` hold the evaluations of A·z, B·z, C·z on the
/// domain (natural order); on return `a` holds the coefficients of `h = (A·B − C)·z_inv` in natural
/// order (`z_inv` the inverse of the vanishing polynomial on the coset), and `b`, `c` are clobbered.
///
/// Six transforms, not the textbook seven: interpolation on the coset is linear and undoes evaluation
/// there, so the coset interpolation of `Â·B̂ − Ĉ` is that of `Â·B̂` minus C's coefficients, and `c`
/// is only interpolated, never evaluated on the coset. That holds for any `a`, `b`, `c`, satisfied
/// constraints or not, and the result is the same field elements as the textbook order's.
///
/// `a` and `b`: interpolate with decimation in frequency (coefficients come out bit-reversed and `n`
/// times too large), scale coefficient `k` by `g^k / n` where it lies, evaluate on the coset with
/// decimation in time (natural order again); the last inverse pass, the scaling and the first forward
/// pass work on the same blocks of consecutive elements and run as one kernel
/// ([`kernels::ntt_pass_turn`]). `c`: interpolate with decimation in frequency (`T_k = n·C_k`,
/// bit-reversed). Then `a·b` on the coset, formed as the first pass of its interpolation loads `a`
/// and `b` ([`kernels::ntt_pass_times`]), that interpolation with decimation in frequency (`S_k`,
/// bit-reversed, `n·g^k` times its coefficients), and a last bit reversal that writes
/// `h_k = (S_k·g^-k − T_k)·z_inv / n` ([`kernels::bit_reverse_minus`]). With folded coset powers
/// ([`CosetPowers::folds`]) the middle passes of the interpolations of `a` and `b` carry the powers
/// `g^k` of their coefficients' middle index bits, and the first and middle passes of `Â·B̂`'s the
/// powers `g^-k` of the bits they cover ([`kernels::Fold::of_passes`]), so that the turn and the
/// last step multiply once an element by a small full table where a two-level one takes two
/// products. Each kernel is timed into `probe` when it is enabled.
#[allow(clippy::too_many_arguments)]
pub fn witness_map(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    tables: &NttTables,
    a: &mut CudaSlice<GpuFr>,
    b: &mut CudaSlice<GpuFr>,
    c: &mut CudaSlice<GpuFr>,
    z_inv: Fr,
    probe: &mut Probe,
) -> Result<(), CudaError> {
    for x in [&*a, &*b, &*c] {
        check_len("witness_map", tables, x)?;
    }
    let log_n = tables.log_n;
    let all = passes(log_n);
    // With folded coset powers the middle passes of the interpolations of a and b carry g's powers
    // of their coefficients' middle index bits (their first passes run in the turn, unfolded), and
    // the first and middle passes of a·b's g^-1's (the tables then leave those bits out).
    let [g, g_inv] = coset_bases();
    let fold = |base: Fr| tables.coset_form.folds().then_some(base);
    for x in [&mut *a, &mut *b] {
        // With one element (no passes) both transforms are the identity and g^0 / n = 1.
        if let Some((&(_, k0), rest)) = all.split_first() {
            for &(s0, k) in rest.iter().rev() {
                kernels::ntt_pass(
                    gpu,
                    stream,
                    x,
                    tables.twiddles(true),
                    fold(g),
                    log_n,
                    s0,
                    k,
                    Decimation::Frequency,
                    tables.units,
                    probe,
                )?;
            }
            kernels::ntt_pass_turn(
                gpu,
                stream,
                x,
                &tables.device.inverse,
                &tables.device.forward,
                log_n,
                k0,
                &tables.device.coset_over_n,
                tables.units,
                probe,
            )?;
            for &(s0, k) in rest {
                kernels::ntt_pass(
                    gpu,
                    stream,
                    x,
                    tables.twiddles(false),
                    None,
                    log_n,
                    s0,
                    k,
                    Decimation::Time,
                    tables.units,
                    probe,
                )?;
            }
        }
    }
    stages(gpu, stream, tables, c, tables.twiddles(true), None, Decimation::Frequency, probe)?;
    // a·b on the coset, formed as the first pass of its interpolation loads a and b.
    let mut times = Some(&*b);
    for &(s0, k) in all.iter().rev() {
        let (tw, units, dif) = (tables.twiddles(true), tables.units, Decimation::Frequency);
        let fold = fold(g_inv);
        kernels::ntt_pass_times(gpu, stream, a, times.take(), tw, fold, log_n, s0, k, dif, units, probe)?;
    }
    if let Some(b) = times {
        kernels::pointwise_mul(gpu, stream, a, b, probe)?;
    }
    let last = gpu_fr(&(tables.n_inv.0.to_ark_unchecked() * z_inv));
    kernels::bit_reverse_minus(gpu, stream, a, c, log_n, last, &tables.device.minus_powers, probe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Fold;

    #[test]
    fn passes_cover_every_stage_once() {
        for log_n in 1..=28 {
            let p = passes(log_n);
            assert_eq!(p.iter().map(|(_, k)| k).sum::<u32>(), log_n);
            assert!(p.iter().all(|(_, k)| (1..=MAX_PASS_STAGES).contains(k)));
            assert!(p.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
        }
    }

    #[test]
    fn a_gather_pass_loads_into_each_tile_position_the_bit_reversal_of_where_it_stores_it() {
        // A model of `ntt_pass_gather`'s index arithmetic (kernels/ntt/ntt.cu) for the first pass of
        // every size: the natural index a block loads into tile position (a, rev_k(r)) is the bit
        // reversal of the index it stores that position to, every index is loaded once and stored
        // once, and `GatherTile`'s slots are a permutation that gives each aligned eight of a load
        // loop's stores (a quarter-warp's) eight bank groups where the tiles' three bits that tell them
        // apart lie above bit 3 (from 2^7 elements a block up).
        let rev = |i: u32, bits: u32| if bits == 0 { 0 } else { i.reverse_bits() >> (32 - bits) };
        for log_n in 1..=28u32 {
            let k = passes(log_n)[0].1;
            let tb = crate::modules::PASS_TILE_BITS.saturating_sub(k).min(log_n - k);
            let (bits, m) = (k + tb, log_n - k);
            let end = k + tb.min(3);
            let (shift, top) = if end >= 7 { (end - 3, 7) } else { (0, 0) };
            let slot = |i: u32| i ^ (0u32.wrapping_sub((i >> 3) & 1) & 7) ^ ((i >> shift) & top);
            let mut seen = vec![false; 1 << bits];
            for i in 0..1u32 << bits {
                assert!(!std::mem::replace(&mut seen[slot(i) as usize], true), "2^{log_n}: slot of {i}");
            }
            let load = |b: u32, i: u32| {
                let (a, r) = (i & ((1 << tb) - 1), i >> tb);
                ((r << m) | (b << tb) | a, (a << k) | rev(r, k))
            };
            if end >= 7 {
                for group in 0..1u32 << (bits - 3) {
                    let banks: std::collections::BTreeSet<u32> =
                        (0..8).map(|t| slot(load(0, 8 * group + t).1) & 7).collect();
                    assert_eq!(banks.len(), 8, "2^{log_n}: loads {} .. of block 0 conflict", 8 * group);
                }
            }
            if log_n > 16 {
                continue;
            }
            let n = 1usize << log_n;
            let (mut loaded, mut stored) = (vec![false; n], vec![false; n]);
            for b in 0..1u32 << (m - tb) {
                let mut held = vec![u32::MAX; 1 << bits];
                for i in 0..1u32 << bits {
                    let (src, at) = load(b, i);
                    assert!(!std::mem::replace(&mut loaded[src as usize], true));
                    held[at as usize] = src;
                }
                let row = rev(b, m - tb) << k;
                for (i, &src) in held.iter().enumerate() {
                    let (a, j) = (i as u32 >> k, i as u32 & ((1 << k) - 1));
                    let dst = (rev(a, tb) << (log_n - tb)) | row | j;
                    assert!(!std::mem::replace(&mut stored[dst as usize], true));
                    assert_eq!(src, rev(dst, log_n), "2^{log_n}: block {b}, tile position {i}");
                }
            }
            assert!(loaded.iter().all(|&l| l) && stored.iter().all(|&s| s), "2^{log_n}");
        }
    }

    #[test]
    fn the_six_transform_witness_map_equals_the_seven_transform_one_on_any_evaluations() {
        // The identity `witness_map` relies on, checked with the CPU backend's transforms: the coset
        // interpolation of Â·B̂, minus C's coefficients, times z_inv, is the textbook witness map's
        // h, element for element, for random a, b, c (not divisible by the vanishing polynomial).
        use ark_std::UniformRand;
        use cuzk_groth16::{CpuBackend, PolyBackend};
        let mut rng = ark_std::test_rng();
        for log_n in [0u32, 1, 2, 3, 7, 8, 11] {
            let n = 1usize << log_n;
            let v = |rng: &mut _| (0..n).map(|_| Fr::rand(rng)).collect::<Vec<_>>();
            let (a, b, c) = (v(&mut rng), v(&mut rng), v(&mut rng));
            let z_inv = Fr::rand(&mut rng);
            let poly = |x: &[Fr]| CpuBackend.poly_from_host(x, n).unwrap();
            let (mut ta, mut tb, mut tc) = (poly(&a), poly(&b), poly(&c));
            CpuBackend.witness_map_polys(&mut ta, &mut tb, &mut tc, z_inv).unwrap();

            let (mut ab, mut bb, mut cc) = (poly(&a), poly(&b), poly(&c));
            CpuBackend.ntt(&mut [&mut ab, &mut bb, &mut cc], NttKind::Inverse).unwrap();
            CpuBackend.ntt(&mut [&mut ab, &mut bb], NttKind::CosetForward).unwrap();
            ab.0.iter_mut().zip(&bb.0).for_each(|(x, y)| *x *= y);
            CpuBackend.ntt(&mut [&mut ab], NttKind::CosetInverse).unwrap();
            let h: Vec<Fr> = ab.0.iter().zip(&cc.0).map(|(p, c)| (*p - c) * z_inv).collect();
            assert_eq!(h, ta.0, "2^{log_n}");
        }
    }

    /// A radix-2 model of the device's stages on the host: decimation in time (`dif` false: `u ± v·w`)
    /// or in frequency (`u + v`, `(u − v)·w`), stage `s`'s twiddles `w^p` times `factor(s)`.
    fn model_stages(y: &mut [Fr], log_n: u32, w: Fr, dif: bool, factor: &dyn Fn(u32) -> Fr) {
        let order: Vec<u32> = if dif { (0..log_n).rev().collect() } else { (0..log_n).collect() };
        for s in order {
            let half = 1usize << s;
            let step = w.pow([1u64 << (log_n - 1 - s)]);
            for g in (0..y.len()).step_by(2 * half) {
                let mut tw = factor(s);
                for p in 0..half {
                    let (u, v) = (y[g + p], y[g + p + half]);
                    if dif {
                        (y[g + p], y[g + p + half]) = (u + v, (u - v) * tw);
                    } else {
                        (y[g + p], y[g + p + half]) = (u + v * tw, u - v * tw);
                    }
                    tw *= step;
                }
            }
        }
    }

    #[test]
    fn coset_powers_folded_into_the_first_and_middle_passes_give_the_coset_transforms() {
        // The device's folded coset transforms, modelled on the host for splits into passes of any
        // shape: the first and middle passes' twiddles times `stage_factors` (1 for the first pass's
        // stages 0 and 1, which skip products by 1), the bit reversal's scaling by `folded_powers`
        // at `Fold::index`; against the CPU backend's (ark-poly's) coset transforms.
        use crate::kernels::{folds_pass, stage_factors};
        use ark_std::UniformRand;
        use cuzk_groth16::{CpuBackend, PolyBackend};
        let rev = |i: usize, bits: u32| if bits == 0 { 0 } else { i.reverse_bits() >> (usize::BITS - bits) };
        let mut rng = ark_std::test_rng();
        let splits: [&[(u32, u32)]; 9] = [
            &[(0, 3), (3, 4), (7, 3)],
            &[(0, 2), (2, 2), (4, 2), (6, 3)],
            &[(0, 1), (1, 1), (2, 1)],
            &[(0, 1), (1, 2), (3, 1)],
            &[(0, 4), (4, 5)],
            &[(0, 2), (2, 3)],
            &[(0, 5)],
            &[(0, 3)],
            &[(0, 2)],
        ];
        for split in splits {
            let log_n = split.iter().map(|p| p.1).sum::<u32>();
            let n = 1usize << log_n;
            let fold = Fold::of_passes(log_n, split);
            // One bit for each stage whose twiddles carry a factor (see `stage_factors`).
            let carried = split
                .iter()
                .filter(|&&(s0, k)| folds_pass(log_n, s0, k))
                .map(|&(s0, k)| (s0..s0 + k).filter(|&s| s0 > 0 || s >= 2).count() as u32)
                .sum::<u32>();
            assert_eq!(fold.bits, carried, "passes {split:?}");
            let omega = cuzk_field::constants::root_of_unity(log_n).unwrap();
            let [g, g_inv] = coset_bases();
            let n_inv = Fr::from(n as u64).inverse().unwrap();
            // Stage s's factor: its first or middle pass's, 1 in the last pass.
            let factor = |base: Fr| {
                move |s: u32| {
                    split
                        .iter()
                        .filter(|&&(s0, k)| folds_pass(log_n, s0, k) && (s0..s0 + k).contains(&s))
                        .map(|&(s0, k)| {
                            stage_factors(base, log_n, s0, k)[(s - s0) as usize].0.to_ark_unchecked()
                        })
                        .next()
                        .unwrap_or(Fr::one())
                }
            };
            let x: Vec<Fr> = (0..n).map(|_| Fr::rand(&mut rng)).collect();
            let oracle = |kind| {
                let mut p = CpuBackend.poly_from_host(&x, n).unwrap();
                CpuBackend.ntt(&mut [&mut p], kind).unwrap();
                p.0
            };

            let table = folded_powers(g, Fr::one(), log_n, fold);
            assert_eq!(table.len(), n >> fold.bits);
            let mut y: Vec<Fr> =
                (0..n).map(|j| x[rev(j, log_n)] * table[fold.index(rev(j, log_n))]).collect();
            model_stages(&mut y, log_n, omega, false, &factor(g));
            assert_eq!(y, oracle(NttKind::CosetForward), "forward, passes {split:?}");

            let table = folded_powers(g_inv, n_inv, log_n, fold);
            let mut y = x.clone();
            model_stages(&mut y, log_n, omega.inverse().unwrap(), true, &factor(g_inv));
            let y: Vec<Fr> = (0..n).map(|i| y[rev(i, log_n)] * table[fold.index(i)]).collect();
            assert_eq!(y, oracle(NttKind::CosetInverse), "inverse, passes {split:?}");
        }
        // The device's splits: 2^24 folds bits 8..22, 2^27 bits 9..25, 2^28 (four passes) 7..26; the
        // witness map's turns, which run the first pass unfolded, leave out only the middle passes'
        // bits: 8..16 at 2^24, 9..18 at 2^27, 7..21 at 2^28, none with two passes.
        assert_eq!(Fold::of_passes(24, &passes(24)), Fold { low: 8, bits: 14 });
        assert_eq!(Fold::of_passes(27, &passes(27)), Fold { low: 9, bits: 16 });
        assert_eq!(Fold::of_passes(28, &passes(28)), Fold { low: 7, bits: 19 });
        assert_eq!(Fold::of_middle_passes(24, &passes(24)), Fold { low: 8, bits: 8 });
        assert_eq!(Fold::of_middle_passes(27, &passes(27)), Fold { low: 9, bits: 9 });
        assert_eq!(Fold::of_middle_passes(28, &passes(28)), Fold { low: 7, bits: 14 });
        assert_eq!(Fold::of_middle_passes(18, &passes(18)), Fold::default());
    }
}
