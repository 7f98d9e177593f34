//! The power tables of the NTTs' coset scaling, built on the host or on the device: two-level ones
//! (`lo` and `hi` powers), full ones, and full ones that leave out the index bits a transform's
//! passes carry ([`Fold`]).

use std::sync::Arc;

use ark_bls12_381::Fr;
use ark_ff::{FftField, Field, One};
use cudarc::driver::{CudaSlice, CudaStream};
use cuzk_field::{DeviceFr, DeviceRepr};

use super::{passes, CosetPowers};
use crate::kernels::{self, Fold, PowerTable};
use crate::profile::Probe;
use crate::{CudaError, Gpu, GpuFr};

pub(super) fn gpu_fr(x: &Fr) -> GpuFr {
    GpuFr(DeviceFr::from_ark(x))
}

/// `(lo, hi, lo_bits)` with `lo[j] = s^j`, `hi[j] = s^(j·2^lo_bits)`, covering `count` powers.
pub(super) fn two_level(s: Fr, count: usize) -> (Vec<GpuFr>, Vec<GpuFr>, u32) {
    let bits = count.max(1).next_power_of_two().trailing_zeros();
    let lo_bits = bits.div_ceil(2);
    let powers = |base: Fr, len: usize| {
        let mut v = Vec::with_capacity(len);
        let mut x = Fr::one();
        for _ in 0..len {
            v.push(gpu_fr(&x));
            x *= base;
        }
        v
    };
    let lo = powers(s, 1 << lo_bits);
    let hi = powers(s.pow([1u64 << lo_bits]), count.max(1).div_ceil(1 << lo_bits));
    (lo, hi, lo_bits)
}

/// The power table of `c·s^i`: `c` folded into the `hi` powers, so a power still costs one product
/// (two Shoup products in Shoup's form, [`PowerTable::shoup`]).
pub(super) fn upload_scaled_table(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    s: Fr,
    count: usize,
    c: Fr,
    shoup: bool,
) -> Result<PowerTable, CudaError> {
    let (lo, mut hi, lo_bits) = two_level(s, count);
    for h in &mut hi {
        *h = gpu_fr(&(h.0.to_ark_unchecked() * c));
    }
    let upload = |values: Vec<GpuFr>| -> Result<CudaSlice<GpuFr>, CudaError> {
        if !shoup {
            return gpu.upload(stream, &values);
        }
        // Each value at an even place, its quotient (computed on the device) after it.
        let spread: Vec<GpuFr> = values.into_iter().flat_map(|v| [v, GpuFr::default()]).collect();
        let mut pairs = gpu.upload(stream, &spread)?;
        kernels::shoup_pairs(gpu, stream, &mut pairs, &mut Probe::default())?;
        Ok(pairs)
    };
    Ok(PowerTable { lo: upload(lo)?, hi: upload(hi)?, lo_bits, shoup, full: false, fold: Fold::default() })
}

/// `c·s^i` for `i < len`, filled on the device from a two-level table; in Shoup's form (`shoup`) the
/// canonical values of the first half's powers, then their quotients, as twiddle tables and full
/// power tables hold them.
pub(super) fn powers_on_device(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    s: Fr,
    c: Fr,
    len: usize,
    shoup: bool,
) -> Result<CudaSlice<GpuFr>, CudaError> {
    let mut out = gpu.zeros::<GpuFr>(stream, len)?;
    let mut quiet = Probe::default();
    // Powers over the whole buffer; in Shoup's form the second half is then overwritten by the
    // quotients of the first.
    kernels::fill_powers(
        gpu,
        stream,
        &mut out,
        &upload_scaled_table(gpu, stream, s, len, c, false)?,
        &mut quiet,
    )?;
    if shoup {
        kernels::shoup_twiddles(gpu, stream, &mut out, &mut quiet)?;
    }
    Ok(out)
}

/// The full power table of `c·s^i`, `i < 2^log_n`, in Shoup's form or Montgomery's.
pub(super) fn full_table(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    s: Fr,
    log_n: u32,
    c: Fr,
    shoup: bool,
) -> Result<PowerTable, CudaError> {
    let len = if shoup { 2 << log_n } else { 1 << log_n };
    let lo = powers_on_device(gpu, stream, s, c, len, shoup)?;
    Ok(PowerTable {
        lo,
        hi: gpu.zeros::<GpuFr>(stream, 1)?,
        lo_bits: log_n,
        shoup,
        full: true,
        fold: Fold::default(),
    })
}

/// `c·s^i` at entry `fold.index(i)` for the indices `i < 2^log_n` without `fold`'s bits, the
/// values of a full table that leaves them out ([`PowerTable::fold`]).
pub(super) fn folded_powers(s: Fr, c: Fr, log_n: u32, fold: Fold) -> Vec<Fr> {
    let (low, high) = (1usize << fold.low, 1usize << (log_n - fold.low - fold.bits));
    let step = s.pow([1u64 << (fold.low + fold.bits)]);
    let lows: Vec<Fr> = std::iter::successors(Some(Fr::one()), |x| Some(*x * s)).take(low).collect();
    let mut out = Vec::with_capacity(low * high);
    let mut top = c;
    for _ in 0..high {
        out.extend(lows.iter().map(|l| top * l));
        top *= step;
    }
    out
}

/// The full power table of `c·s^i`, `i < 2^log_n`, without the bits of `fold` (see
/// [`folded_powers`]), computed here and uploaded; in Shoup's form the canonical values, then their
/// quotients (computed on the device).
pub(super) fn folded_table(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    s: Fr,
    log_n: u32,
    c: Fr,
    fold: Fold,
    shoup: bool,
) -> Result<PowerTable, CudaError> {
    let mut values: Vec<GpuFr> = folded_powers(s, c, log_n, fold).iter().map(gpu_fr).collect();
    let entries = values.len();
    if shoup {
        values.resize(2 * entries, GpuFr::default());
    }
    let mut lo = gpu.upload(stream, &values)?;
    if shoup {
        kernels::shoup_twiddles(gpu, stream, &mut lo, &mut Probe::default())?;
    }
    Ok(PowerTable { lo, hi: gpu.zeros::<GpuFr>(stream, 1)?, lo_bits: log_n, shoup, full: true, fold })
}

/// The coset's generator `g` (ark-poly's `Fr::GENERATOR`) and its inverse.
pub(super) fn coset_bases() -> [Fr; 2] {
    let g = Fr::GENERATOR;
    [g, g.inverse().unwrap_or_default()]
}

/// The power table of `c·s^i`, `i < 2^log_n`, in `form` (a two-level one in Shoup's form with
/// `shoup`, the twiddles' form; the full and folded ones as their form says, the folded ones without
/// the bits of `fold`).
#[allow(clippy::too_many_arguments)]
pub(super) fn power_table(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    log_n: u32,
    form: CosetPowers,
    shoup: bool,
    fold: Fold,
    s: Fr,
    c: Fr,
) -> Result<PowerTable, CudaError> {
    match form {
        CosetPowers::TwoLevel => upload_scaled_table(gpu, stream, s, 1 << log_n, c, shoup),
        CosetPowers::Full => full_table(gpu, stream, s, log_n, c, false),
        CosetPowers::FullShoup => full_table(gpu, stream, s, log_n, c, true),
        CosetPowers::Folded => folded_table(gpu, stream, s, log_n, c, fold, false),
        CosetPowers::FoldedShoup => folded_table(gpu, stream, s, log_n, c, fold, true),
    }
}

/// The standalone coset transforms' power tables, `g^i` and `g^-i / n` for `i < 2^log_n`, in `form`
/// (two-level ones in Shoup's form with `shoup`, the twiddles' form, and so the forward table of
/// [`CosetPowers::Folded`]: on the H100 Shoup's product there took 0.08 ms off the out-of-place
/// coset forward at 2^24 and 0.02 off the in-place one, where the inverse's bit reversal ran 0.03 ms
/// slower with it).
pub(super) fn coset_tables(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    log_n: u32,
    form: CosetPowers,
    shoup: bool,
) -> Result<[PowerTable; 2], CudaError> {
    let [g, g_inv] = coset_bases();
    let n_inv = Fr::from(1u64 << log_n).inverse().unwrap_or_default();
    let fold = Fold::of_passes(log_n, &passes(log_n));
    let table = |form, s: Fr, c: Fr| power_table(gpu, stream, log_n, form, shoup, fold, s, c);
    let forward = match form {
        CosetPowers::Folded if shoup => CosetPowers::FoldedShoup,
        _ => form,
    };
    Ok([table(forward, g, Fr::one())?, table(form, g_inv, n_inv)?])
}

/// The witness map's power tables, `g^i / n` for its turns and `g^-i` for its last step, in Shoup's
/// form with `shoup` (the twiddles' form): two-level, or with `folded` full tables of the index bits
/// that the passes of the interpolations before them do not carry ([`CosetPowers::folds`]): their
/// middle passes before a turn (which runs their first pass unfolded), their first and middle
/// passes before the last step.
pub(super) fn witness_tables(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    log_n: u32,
    folded: bool,
    shoup: bool,
) -> Result<[PowerTable; 2], CudaError> {
    let form = match (folded, shoup) {
        (false, _) => CosetPowers::TwoLevel,
        (true, false) => CosetPowers::Folded,
        (true, true) => CosetPowers::FoldedShoup,
    };
    let [g, g_inv] = coset_bases();
    let n_inv = Fr::from(1u64 << log_n).inverse().unwrap_or_default();
    let all = passes(log_n);
    let table = |fold, s: Fr, c: Fr| power_table(gpu, stream, log_n, form, shoup, fold, s, c);
    Ok([
        table(Fold::of_middle_passes(log_n, &all), g, n_inv)?,
        table(Fold::of_passes(log_n, &all), g_inv, Fr::one())?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_level_tables_reproduce_powers() {
        let s = Fr::from(5u64);
        for count in [1usize, 2, 7, 64, 1000] {
            let (lo, hi, lo_bits) = two_level(s, count);
            assert!(hi.len() << lo_bits >= count);
            for i in [0, count / 2, count - 1] {
                let v =
                    hi[i >> lo_bits].0.to_ark_unchecked() * lo[i & ((1 << lo_bits) - 1)].0.to_ark_unchecked();
                assert_eq!(v, s.pow([i as u64]));
            }
        }
    }
}
