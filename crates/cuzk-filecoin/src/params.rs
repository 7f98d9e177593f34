//! Bellperson's parameter files (`.params`, `.vk`) read into, and written from, arkworks proving keys.
//!
//! A `.params` file is the verifying key (`α₁ β₁ β₂ γ₂ δ₁ δ₂`, a big-endian `u32` count and the `ic`
//! points), then five vectors, each a big-endian `u32` count and its points: `h`, `l`, `a`, `b_g1` (G1)
//! and `b_g2` (G2). Points are uncompressed in the zcash encoding, which is also arkworks' encoding of
//! BLS12-381 points. A `.vk` file is the verifying key alone.
//!
//! Bellperson leaves out of `a`, `b_g1` and `b_g2` the bases of the variables its densities mark absent
//! (those bases are the identity); an arkworks key has one base per variable. Reading puts the
//! identities back from the circuit's [`Densities`], writing leaves them out again, so a key goes
//! both ways unchanged. Points are decoded in parallel and checked to lie on the curve (a flipped byte
//! is caught there); like Filecoin's own loader, reading skips the subgroup check.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use ark_bls12_381::{Bls12_381, G1Affine, G2Affine};
use ark_ec::AffineRepr;
use ark_groth16::{ProvingKey, VerifyingKey};
use ark_serialize::{CanonicalDeserialize, CanonicalSerialize, Compress, Validate};
use rayon::prelude::*;

use crate::circuit::{Bits, CircuitCounts, Densities};

/// Points decoded per parallel batch while reading.
const BATCH: usize = 1 << 16;

/// What is wrong with a parameter file.
#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file ends inside a section.
    #[error("{path}: truncated in `{section}` (the file ends before its {expected} bytes)")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// The section being read.
        section: &'static str,
        /// The bytes the section needed from where it was cut.
        expected: usize,
    },
    /// A point does not decode, is not on the curve, or is the identity where bellperson forbids it.
    #[error("{path}: point {index} of `{section}` {reason}")]
    BadPoint {
        /// The file.
        path: PathBuf,
        /// The section.
        section: &'static str,
        /// The point's index in its section.
        index: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// A section holds another number of points than the circuit needs: the parameters of another
    /// circuit (another proof type or sector size).
    #[error("{path}: `{section}` holds {found} points but the circuit needs {expected}: these are the parameters of another circuit")]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// The section.
        section: &'static str,
        /// Points in the file.
        found: usize,
        /// Points the circuit needs.
        expected: usize,
    },
    /// Bytes follow the last section.
    #[error("{path}: {extra} bytes after the last section")]
    Trailing {
        /// The file.
        path: PathBuf,
        /// How many (at least).
        extra: usize,
    },
    /// The `.vk` file is not the verifying key the `.params` file starts with.
    #[error("{vk}: not the verifying key of {params}")]
    VkDiffers {
        /// The `.params` file.
        params: PathBuf,
        /// The `.vk` file.
        vk: PathBuf,
    },
    /// A key cannot be written in bellperson's layout: a base the densities leave out is not the
    /// identity, or one they keep is.
    #[error("the key does not fit bellperson's layout: `{section}` base {index} {reason}")]
    Layout {
        /// The query.
        section: &'static str,
        /// The variable.
        index: usize,
        /// What is wrong.
        reason: &'static str,
    },
}

/// A group of a parameter file's points.
trait Group {
    /// Its affine points.
    type P: AffineRepr + CanonicalDeserialize + CanonicalSerialize + Send + Sync;
    /// Bytes of one uncompressed point.
    const BYTES: usize;
    /// Whether the point satisfies the curve equation.
    fn on_curve(p: &Self::P) -> bool;
}

struct InG1;
struct InG2;

impl Group for InG1 {
    type P = G1Affine;
    const BYTES: usize = 96;
    fn on_curve(p: &G1Affine) -> bool {
        p.is_on_curve()
    }
}

impl Group for InG2 {
    type P = G2Affine;
    const BYTES: usize = 192;
    fn on_curve(p: &G2Affine) -> bool {
        p.is_on_curve()
    }
}

struct Reader {
    inner: BufReader<File>,
    path: PathBuf,
}

impl Reader {
    fn open(path: &Path) -> Result<Self, ParamsError> {
        let file = File::open(path).map_err(|source| ParamsError::Io { path: path.into(), source })?;
        Ok(Self { inner: BufReader::with_capacity(1 << 22, file), path: path.into() })
    }

    fn bytes(&mut self, section: &'static str, len: usize) -> Result<Vec<u8>, ParamsError> {
        let mut buf = vec![0u8; len];
        self.inner.read_exact(&mut buf).map_err(|source| match source.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                ParamsError::Truncated { path: self.path.clone(), section, expected: len }
            }
            _ => ParamsError::Io { path: self.path.clone(), source },
        })?;
        Ok(buf)
    }

    fn count(&mut self, section: &'static str) -> Result<usize, ParamsError> {
        let b = self.bytes(section, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    /// `n` points of one section, decoded in parallel batches.
    fn points<G: Group>(&mut self, section: &'static str, n: usize) -> Result<Vec<G::P>, ParamsError> {
        // A count read from a damaged file can be anything: grow with what is actually read.
        let mut out = Vec::with_capacity(n.min(BATCH));
        while out.len() < n {
            let batch = BATCH.min(n - out.len());
            let bytes = self.bytes(section, batch * G::BYTES)?;
            let base = out.len();
            let decoded: Result<Vec<G::P>, ParamsError> = bytes
                .par_chunks(G::BYTES)
                .enumerate()
                .map(|(i, b)| decode::<G>(b).map_err(|reason| self.bad(section, base + i, reason)))
                .collect();
            out.extend(decoded?);
        }
        Ok(out)
    }

    fn point<G: Group>(&mut self, section: &'static str) -> Result<G::P, ParamsError> {
        let b = self.bytes(section, G::BYTES)?;
        decode::<G>(&b).map_err(|reason| self.bad(section, 0, reason))
    }

    fn bad(&self, section: &'static str, index: usize, reason: &'static str) -> ParamsError {
        ParamsError::BadPoint { path: self.path.clone(), section, index, reason }
    }

    fn at_end(&mut self) -> Result<(), ParamsError> {
        let mut rest = [0u8; 64];
        let extra = self
            .inner
            .read(&mut rest)
            .map_err(|source| ParamsError::Io { path: self.path.clone(), source })?;
        if extra > 0 {
            return Err(ParamsError::Trailing { path: self.path.clone(), extra });
        }
        Ok(())
    }
}

fn decode<G: Group>(bytes: &[u8]) -> Result<G::P, &'static str> {
    let p = G::P::deserialize_with_mode(bytes, Compress::No, Validate::No).map_err(|_| "does not decode")?;
    if p.is_zero() {
        return Err("is the identity");
    }
    if !G::on_curve(&p) {
        return Err("is not on the curve");
    }
    Ok(p)
}

/// A verifying key as bellperson writes it, with the two G1 points arkworks keeps in the proving key.
struct FileVk {
    vk: VerifyingKey<Bls12_381>,
    beta_g1: G1Affine,
    delta_g1: G1Affine,
}

/// The verifying key at the start of `r`; `ic`, the count of `ic` points the circuit needs, is checked
/// before they are read.
fn read_vk(r: &mut Reader, ic: Option<(&CircuitCounts, &Densities)>) -> Result<FileVk, ParamsError> {
    let alpha_g1 = r.point::<InG1>("vk.alpha_g1")?;
    let beta_g1 = r.point::<InG1>("vk.beta_g1")?;
    let beta_g2 = r.point::<InG2>("vk.beta_g2")?;
    let gamma_g2 = r.point::<InG2>("vk.gamma_g2")?;
    let delta_g1 = r.point::<InG1>("vk.delta_g1")?;
    let delta_g2 = r.point::<InG2>("vk.delta_g2")?;
    let n = r.count("vk.ic")?;
    if let Some((counts, d)) = ic {
        let path = r.path.clone();
        check_len(&path, "vk.ic", n, counts, d)?;
    }
    let ic = r.points::<InG1>("vk.ic", n)?;
    let vk = VerifyingKey { alpha_g1, beta_g2, gamma_g2, delta_g2, gamma_abc_g1: ic };
    Ok(FileVk { vk, beta_g1, delta_g1 })
}

/// Reads a verifying key file (`.vk`, or the start of a `.params` file).
pub fn read_verifying_key(path: &Path) -> Result<VerifyingKey<Bls12_381>, ParamsError> {
    let mut r = Reader::open(path)?;
    let vk = read_vk(&mut r, None)?.vk;
    r.at_end()?;
    Ok(vk)
}

/// The number of bases of each section a circuit of these counts and densities needs.
fn expected_len(section: &'static str, counts: &CircuitCounts, d: &Densities) -> usize {
    let rows = counts.constraints + counts.inputs;
    match section {
        "vk.ic" => counts.inputs,
        "h" => rows.next_power_of_two() - 1,
        "l" => counts.aux,
        "a" => counts.inputs + d.a_aux.count_ones(),
        _ => d.b_input.count_ones() + d.b_aux.count_ones(),
    }
}

fn check_len(
    path: &Path,
    section: &'static str,
    found: usize,
    counts: &CircuitCounts,
    d: &Densities,
) -> Result<(), ParamsError> {
    let expected = expected_len(section, counts, d);
    if found != expected {
        return Err(ParamsError::Mismatch { path: path.into(), section, found, expected });
    }
    Ok(())
}

/// The dense query from bellperson's sparse one: `kept[k]` goes to the `k`-th variable whose bit is
/// set, the identity to the others. `bits` covers the inputs then the auxiliary variables.
fn expand<P: AffineRepr>(kept: Vec<P>, bits: impl Iterator<Item = bool>) -> Vec<P> {
    let mut kept = kept.into_iter();
    bits.map(|b| if b { kept.next().unwrap_or_else(P::zero) } else { P::zero() }).collect()
}

/// `inputs` set bits, then the bits of `aux`.
fn all_then(inputs: usize, aux: &Bits) -> impl Iterator<Item = bool> + '_ {
    (0..inputs).map(|_| true).chain((0..aux.len()).map(|j| aux.get(j)))
}

fn both<'a>(input: &'a Bits, aux: &'a Bits) -> impl Iterator<Item = bool> + 'a {
    (0..input.len()).map(|i| input.get(i)).chain((0..aux.len()).map(|j| aux.get(j)))
}

/// Reads a `.params` file for a circuit of `counts` and `densities` into an arkworks proving key,
/// checking every count against the circuit (a file for another circuit is refused, naming the first
/// section that differs) and, when `vk` is given, that the `.vk` file is the key's own.
pub fn read_params(
    path: &Path,
    vk: Option<&Path>,
    counts: &CircuitCounts,
    densities: &Densities,
) -> Result<ProvingKey<Bls12_381>, ParamsError> {
    let mut r = Reader::open(path)?;
    let file_vk = read_vk(&mut r, Some((counts, densities)))?;
    let section = |r: &mut Reader, name: &'static str| -> Result<Vec<G1Affine>, ParamsError> {
        let n = r.count(name)?;
        check_len(path, name, n, counts, densities)?;
        r.points::<InG1>(name, n)
    };
    let h = section(&mut r, "h")?;
    let l = section(&mut r, "l")?;
    let a = section(&mut r, "a")?;
    let b_g1 = section(&mut r, "b_g1")?;
    let n = r.count("b_g2")?;
    check_len(path, "b_g2", n, counts, densities)?;
    let b_g2 = r.points::<InG2>("b_g2", n)?;
    r.at_end()?;
    if let Some(vk_path) = vk {
        if read_verifying_key(vk_path)? != file_vk.vk {
            return Err(ParamsError::VkDiffers { params: path.into(), vk: vk_path.into() });
        }
    }
    let d = densities;
    Ok(ProvingKey {
        vk: file_vk.vk,
        beta_g1: file_vk.beta_g1,
        delta_g1: file_vk.delta_g1,
        a_query: expand(a, all_then(counts.inputs, &d.a_aux)),
        b_g1_query: expand(b_g1, both(&d.b_input, &d.b_aux)),
        b_g2_query: expand(b_g2, both(&d.b_input, &d.b_aux)),
        h_query: h,
        l_query: l,
    })
}

/// The bases bellperson keeps of a dense query: those whose bit is set, each checked not to be the
/// identity, and every other one checked to be the identity.
fn sparse<P: AffineRepr>(
    section: &'static str,
    dense: &[P],
    bits: impl Iterator<Item = bool>,
) -> Result<Vec<P>, ParamsError> {
    let mut out = Vec::new();
    for (index, (p, keep)) in dense.iter().zip(bits).enumerate() {
        match (keep, p.is_zero()) {
            (true, false) => out.push(*p),
            (false, true) => {}
            (true, true) => return Err(ParamsError::Layout { section, index, reason: "is the identity" }),
            (false, false) => {
                return Err(ParamsError::Layout { section, index, reason: "is not the identity but unused" })
            }
        }
    }
    Ok(out)
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> ParamsError + '_ {
    move |source| ParamsError::Io { path: path.into(), source }
}

fn write_points<P: AffineRepr + CanonicalSerialize, W: Write>(
    w: &mut W,
    points: &[P],
    path: &Path,
) -> Result<(), ParamsError> {
    let bytes: Vec<Vec<u8>> = points
        .par_chunks(BATCH)
        .map(|chunk| {
            let mut out =
                Vec::with_capacity(chunk.len() * chunk.first().map_or(0, |p| p.uncompressed_size()));
            for p in chunk {
                p.serialize_uncompressed(&mut out).map_err(|e| std::io::Error::other(e.to_string()))?;
            }
            Ok(out)
        })
        .collect::<Result<_, std::io::Error>>()
        .map_err(io(path))?;
    bytes.iter().try_for_each(|b| w.write_all(b)).map_err(io(path))
}

fn write_section<P: AffineRepr + CanonicalSerialize, W: Write>(
    w: &mut W,
    points: &[P],
    path: &Path,
) -> Result<(), ParamsError> {
    w.write_all(&(points.len() as u32).to_be_bytes()).map_err(io(path))?;
    write_points(w, points, path)
}

/// Writes `pk` as a bellperson `.params` file (and its `.vk` when `vk` is given), leaving out the bases
/// the circuit's densities mark absent.
pub fn write_params(
    pk: &ProvingKey<Bls12_381>,
    densities: &Densities,
    path: &Path,
    vk: Option<&Path>,
) -> Result<(), ParamsError> {
    let d = densities;
    let inputs = pk.vk.gamma_abc_g1.len();
    let a = sparse("a", &pk.a_query, all_then(inputs, &d.a_aux))?;
    let b_g1 = sparse("b_g1", &pk.b_g1_query, both(&d.b_input, &d.b_aux))?;
    let b_g2 = sparse("b_g2", &pk.b_g2_query, both(&d.b_input, &d.b_aux))?;
    let write_vk = |w: &mut BufWriter<File>, path: &Path| -> Result<(), ParamsError> {
        write_points(w, &[pk.vk.alpha_g1, pk.beta_g1], path)?;
        write_points(w, &[pk.vk.beta_g2, pk.vk.gamma_g2], path)?;
        write_points(w, &[pk.delta_g1], path)?;
        write_points(w, &[pk.vk.delta_g2], path)?;
        write_section(w, &pk.vk.gamma_abc_g1, path)
    };
    let create =
        |path: &Path| File::create(path).map(|f| BufWriter::with_capacity(1 << 22, f)).map_err(io(path));
    let mut w = create(path)?;
    write_vk(&mut w, path)?;
    write_section(&mut w, &pk.h_query, path)?;
    write_section(&mut w, &pk.l_query, path)?;
    write_section(&mut w, &a, path)?;
    write_section(&mut w, &b_g1, path)?;
    write_section(&mut w, &b_g2, path)?;
    w.flush().map_err(io(path))?;
    if let Some(vk_path) = vk {
        let mut w = create(vk_path)?;
        write_vk(&mut w, vk_path)?;
        w.flush().map_err(io(vk_path))?;
    }
    Ok(())
}
