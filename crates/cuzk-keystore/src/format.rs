//! The key file format: a fixed header, then every point of the key as raw Montgomery limbs.
//!
//! The README has the field-by-field layout. Writing and reading go through the payload in order,
//! section by section, in pieces of about [`PIECE_LEN`] bytes; each piece is hashed and encoded or
//! decoded in parallel, so memory beyond the key itself stays at one piece.

use std::fmt;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use ark_bls12_381::{Bls12_381, G1Affine, G2Affine};
use ark_groth16::{ProvingKey, VerifyingKey};

use crate::checksum::{xxh64, ChunkedHasher};
use crate::codec::{decode_append, encode_slice, Codec};
use crate::report::LoadReport;
use crate::shape::{ShapeId, MAX_SHAPE_ID_LEN};
use crate::{Error, Result};

/// The first six bytes of every key file.
pub const MAGIC: [u8; 6] = *b"CUZKPK";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes in the header; the payload starts here.
pub const HEADER_LEN: usize = 152;
/// The extension of key files in a [`crate::KeyStore`].
pub const FILE_EXTENSION: &str = "cuzkpk";

/// Bytes of the header covered by the header checksum (all but the checksum itself).
const HEADER_HASHED_LEN: usize = HEADER_LEN - 8;
/// Bytes of the payload hashed and converted per step.
const PIECE_LEN: usize = 8 << 20;
/// Bytes of the six single points (three G1, three G2) that open every payload.
const FIXED_POINTS_LEN: u128 = 3 * G1_LEN + 3 * G2_LEN;
const G1_LEN: u128 = <G1Affine as Codec>::SIZE as u128;
const G2_LEN: u128 = <G2Affine as Codec>::SIZE as u128;

/// The lengths of a key's point vectors, as recorded in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// `a_query` (G1).
    pub a_query: u64,
    /// `b_g1_query` (G1).
    pub b_g1_query: u64,
    /// `b_g2_query` (G2).
    pub b_g2_query: u64,
    /// `h_query` (G1).
    pub h_query: u64,
    /// `l_query` (G1).
    pub l_query: u64,
    /// `vk.gamma_abc_g1` (G1).
    pub gamma_abc_g1: u64,
}

impl Counts {
    /// The counts of `pk`.
    pub fn of(pk: &ProvingKey<Bls12_381>) -> Self {
        let len = |n: usize| n as u64;
        Self {
            a_query: len(pk.a_query.len()),
            b_g1_query: len(pk.b_g1_query.len()),
            b_g2_query: len(pk.b_g2_query.len()),
            h_query: len(pk.h_query.len()),
            l_query: len(pk.l_query.len()),
            gamma_abc_g1: len(pk.vk.gamma_abc_g1.len()),
        }
    }

    /// The payload length these counts make, in bytes (computed without overflow).
    pub fn payload_len(&self) -> u128 {
        let g1 = [self.a_query, self.b_g1_query, self.h_query, self.l_query, self.gamma_abc_g1];
        FIXED_POINTS_LEN
            + g1.iter().map(|&n| u128::from(n) * G1_LEN).sum::<u128>()
            + u128::from(self.b_g2_query) * G2_LEN
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a_query {}, b_g1_query {}, b_g2_query {}, h_query {}, l_query {}, gamma_abc_g1 {}",
            self.a_query, self.b_g1_query, self.b_g2_query, self.h_query, self.l_query, self.gamma_abc_g1
        )
    }
}

/// A key file's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The format version ([`FORMAT_VERSION`] for every header this build writes or accepts).
    pub version: u32,
    /// The circuit shape the key was made for.
    pub shape_id: ShapeId,
    /// The lengths of the key's point vectors.
    pub counts: Counts,
    /// Bytes in the payload.
    pub payload_len: u64,
    /// The payload checksum ([`crate::checksum::payload_checksum`]).
    pub payload_checksum: u64,
}

impl Header {
    /// The [`HEADER_LEN`] bytes of this header, its checksum included.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        let shape = self.shape_id.as_str().as_bytes();
        out.extend_from_slice(&(shape.len() as u32).to_le_bytes());
        let mut shape_field = [0u8; MAX_SHAPE_ID_LEN];
        for (slot, &b) in shape_field.iter_mut().zip(shape) {
            *slot = b;
        }
        out.extend_from_slice(&shape_field);
        let c = &self.counts;
        for n in [c.a_query, c.b_g1_query, c.b_g2_query, c.h_query, c.l_query, c.gamma_abc_g1] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        out.extend_from_slice(&self.payload_len.to_le_bytes());
        out.extend_from_slice(&self.payload_checksum.to_le_bytes());
        let checksum = xxh64(&out, 0);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    /// Parses and validates a header from the start of `bytes` (which may hold more). Checks, in this
    /// order: magic, version, length, header checksum, reserved and shape id fields, and that the counts
    /// make exactly the stated payload length.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let magic_len = bytes.len().min(MAGIC.len());
        let (start, magic_rest) = (bytes.get(..magic_len).unwrap_or_default(), MAGIC.get(..magic_len));
        if Some(start) != magic_rest {
            return Err(Error::BadMagic { found: start.escape_ascii().to_string() });
        }
        let mut fields = Fields(bytes.get(MAGIC.len()..).unwrap_or_default());
        // The version comes before the length check: another version may have another header length.
        if bytes.len() >= MAGIC.len() + 4 {
            let version = fields.u32();
            if version != FORMAT_VERSION {
                return Err(Error::UnsupportedVersion { found: version, supported: FORMAT_VERSION });
            }
        }
        if bytes.len() < HEADER_LEN {
            return Err(Error::Truncated { expected: HEADER_LEN as u64, found: bytes.len() as u64 });
        }
        let hashed = bytes.get(..HEADER_HASHED_LEN).unwrap_or_default();
        let stored = Fields(bytes.get(HEADER_HASHED_LEN..).unwrap_or_default()).u64();
        let computed = xxh64(hashed, 0);
        if stored != computed {
            return Err(Error::HeaderChecksum { stored, computed });
        }

        let reserved = fields.u16();
        if reserved != 0 {
            return Err(Error::HeaderField { field: "reserved", value: reserved.into(), expected: "0" });
        }
        let shape_len = fields.u32();
        let shape_field = fields.take::<MAX_SHAPE_ID_LEN>();
        let shape_len =
            usize::try_from(shape_len).ok().filter(|n| (1..=MAX_SHAPE_ID_LEN).contains(n)).ok_or(
                Error::HeaderField { field: "shape id length", value: shape_len.into(), expected: "1 to 64" },
            )?;
        let (shape, padding) = shape_field.split_at(shape_len);
        if padding.iter().any(|&b| b != 0) {
            return Err(Error::HeaderField {
                field: "shape id padding",
                value: padding.iter().filter(|&&b| b != 0).count() as u64,
                expected: "0 nonzero bytes",
            });
        }
        let shape_id = ShapeId::new(&String::from_utf8_lossy(shape))?;
        let counts = Counts {
            a_query: fields.u64(),
            b_g1_query: fields.u64(),
            b_g2_query: fields.u64(),
            h_query: fields.u64(),
            l_query: fields.u64(),
            gamma_abc_g1: fields.u64(),
        };
        let payload_len = fields.u64();
        let payload_checksum = fields.u64();
        let implied = counts.payload_len();
        if implied != u128::from(payload_len) {
            return Err(Error::CountsMismatch { counts, implied, stated: payload_len });
        }
        Ok(Self { version: FORMAT_VERSION, shape_id, counts, payload_len, payload_checksum })
    }

    /// Bytes in the whole file: header and payload.
    pub fn file_len(&self) -> u64 {
        (HEADER_LEN as u64).saturating_add(self.payload_len)
    }

    /// Checks that this is a key for `expected` and that `found` bytes hold exactly header and payload.
    fn check(&self, expected: &ShapeId, found: u64) -> Result<()> {
        if self.shape_id != *expected {
            return Err(Error::ShapeMismatch { expected: expected.clone(), found: self.shape_id.clone() });
        }
        let expected = self.file_len();
        match found.cmp(&expected) {
            std::cmp::Ordering::Less => Err(Error::Truncated { expected, found }),
            std::cmp::Ordering::Greater => Err(Error::TrailingBytes { expected, found }),
            std::cmp::Ordering::Equal => Ok(()),
        }
    }
}

/// Little-endian fields read one after the other; reading past the end gives zeros (callers check the
/// length first).
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        match self.0.split_first_chunk::<N>() {
            Some((head, rest)) => {
                self.0 = rest;
                *head
            }
            None => {
                self.0 = &[];
                [0; N]
            }
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

/// Writes `pk` as a key file for `shape_id` to `writer`, from its current position, and returns the
/// header written. The header is written last (the writer seeks back to it), once the payload checksum
/// is known.
pub fn write_key<W: Write + Seek>(
    mut writer: W,
    shape_id: &str,
    pk: &ProvingKey<Bls12_381>,
) -> Result<Header> {
    let shape_id = ShapeId::new(shape_id)?;
    let counts = Counts::of(pk);
    let payload_len = u64::try_from(counts.payload_len())
        .map_err(|_| Error::OutOfMemory { section: "payload", count: u64::MAX })?;
    let stream = |op| move |source| Error::Stream { op, source };
    let start = writer.stream_position().map_err(stream("seek"))?;
    writer.write_all(&[0; HEADER_LEN]).map_err(stream("write"))?;

    let mut out = PayloadWriter { writer: &mut writer, hasher: ChunkedHasher::new(), buf: Vec::new() };
    let vk = &pk.vk;
    out.section(&[vk.alpha_g1, pk.beta_g1, pk.delta_g1])?;
    out.section(&[vk.beta_g2, vk.gamma_g2, vk.delta_g2])?;
    out.section(&pk.a_query)?;
    out.section(&pk.b_g1_query)?;
    out.section(&pk.b_g2_query)?;
    out.section(&pk.h_query)?;
    out.section(&pk.l_query)?;
    out.section(&vk.gamma_abc_g1)?;
    let payload_checksum = out.hasher.finish();

    let header = Header { version: FORMAT_VERSION, shape_id, counts, payload_len, payload_checksum };
    writer.seek(SeekFrom::Start(start)).map_err(stream("seek"))?;
    writer.write_all(&header.to_bytes()).map_err(stream("write"))?;
    writer.seek(SeekFrom::Start(start.saturating_add(header.file_len()))).map_err(stream("seek"))?;
    writer.flush().map_err(stream("flush"))?;
    Ok(header)
}

struct PayloadWriter<'w, W> {
    writer: &'w mut W,
    hasher: ChunkedHasher,
    buf: Vec<u8>,
}

impl<W: Write> PayloadWriter<'_, W> {
    fn section<P: Codec>(&mut self, points: &[P]) -> Result<()> {
        for piece in points.chunks(points_per_piece::<P>()) {
            self.buf.resize(piece.len() * P::SIZE, 0);
            encode_slice(piece, &mut self.buf);
            self.hasher.update(&self.buf);
            self.writer.write_all(&self.buf).map_err(|source| Error::Stream { op: "write", source })?;
        }
        Ok(())
    }
}

fn points_per_piece<P: Codec>() -> usize {
    (PIECE_LEN / P::SIZE).max(1)
}

/// Decodes a whole key file held in memory, checking that it is a key for `expected_shape_id`.
pub fn decode_key(bytes: &[u8], expected_shape_id: &str) -> Result<ProvingKey<Bls12_381>> {
    let expected = ShapeId::new(expected_shape_id)?;
    let header = Header::parse(bytes)?;
    header.check(&expected, bytes.len() as u64)?;
    let mut source = SliceSource(bytes.get(HEADER_LEN..).unwrap_or_default());
    let (pk, _) = decode_payload(&header, &mut source)?;
    Ok(pk)
}

/// Reads just the header of the key file at `path` (validated as [`Header::parse`] does).
pub fn read_header(path: impl AsRef<Path>) -> Result<Header> {
    let path = path.as_ref();
    let (mut file, file_len) = crate::open_regular(path)?;
    let head = read_head(&mut file, file_len, path)?;
    Header::parse(&head)
}

/// Reads the key file at `path`, checking that it is a key for `expected_shape_id`.
pub fn read_key(
    path: impl AsRef<Path>,
    expected_shape_id: &str,
) -> Result<(ProvingKey<Bls12_381>, LoadReport)> {
    let started = Instant::now();
    let path = path.as_ref();
    let expected = ShapeId::new(expected_shape_id)?;
    let (mut file, file_len) = crate::open_regular(path)?;
    let head = read_head(&mut file, file_len, path)?;
    let header = Header::parse(&head)?;
    header.check(&expected, file_len)?;
    let mut source = FileSource { file, path: path.to_owned(), buf: Vec::new(), seconds: 0.0 };
    let (pk, times) = decode_payload(&header, &mut source)?;
    let report = LoadReport {
        path: path.to_owned(),
        bytes: file_len,
        seconds: started.elapsed().as_secs_f64(),
        read_seconds: source.seconds,
        checksum_seconds: times.checksum,
        decode_seconds: times.decode,
    };
    Ok((pk, report))
}

fn read_head(file: &mut File, file_len: u64, path: &Path) -> Result<Vec<u8>> {
    let mut head = vec![0; file_len.min(HEADER_LEN as u64) as usize];
    file.read_exact(&mut head).map_err(|source| Error::Io { op: "read", path: path.to_owned(), source })?;
    Ok(head)
}

/// Where payload bytes come from: exactly `len` more bytes at a time.
trait Source {
    fn take(&mut self, len: usize) -> Result<&[u8]>;
}

struct SliceSource<'a>(&'a [u8]);

impl Source for SliceSource<'_> {
    fn take(&mut self, len: usize) -> Result<&[u8]> {
        let (head, rest) = self
            .0
            .split_at_checked(len)
            .ok_or(Error::Truncated { expected: len as u64, found: self.0.len() as u64 })?;
        self.0 = rest;
        Ok(head)
    }
}

struct FileSource {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    seconds: f64,
}

impl Source for FileSource {
    fn take(&mut self, len: usize) -> Result<&[u8]> {
        let started = Instant::now();
        self.buf.resize(len, 0);
        self.file.read_exact(&mut self.buf).map_err(|source| Error::Io {
            op: "read",
            path: self.path.clone(),
            source,
        })?;
        self.seconds += started.elapsed().as_secs_f64();
        Ok(&self.buf)
    }
}

#[derive(Default)]
struct Times {
    checksum: f64,
    decode: f64,
}

/// Reads the payload of `header` from `source`: every piece is hashed, and decoded until a record
/// fails to decode. A checksum mismatch is reported before a malformed record (it explains it).
fn decode_payload(header: &Header, source: &mut impl Source) -> Result<(ProvingKey<Bls12_381>, Times)> {
    let mut r = PayloadReader { source, hasher: ChunkedHasher::new(), bad: None, times: Times::default() };
    let c = &header.counts;
    let alpha_g1 = r.one::<G1Affine>("vk.alpha_g1")?;
    let beta_g1 = r.one::<G1Affine>("beta_g1")?;
    let delta_g1 = r.one::<G1Affine>("delta_g1")?;
    let beta_g2 = r.one::<G2Affine>("vk.beta_g2")?;
    let gamma_g2 = r.one::<G2Affine>("vk.gamma_g2")?;
    let delta_g2 = r.one::<G2Affine>("vk.delta_g2")?;
    let a_query = r.section::<G1Affine>("a_query", c.a_query)?;
    let b_g1_query = r.section::<G1Affine>("b_g1_query", c.b_g1_query)?;
    let b_g2_query = r.section::<G2Affine>("b_g2_query", c.b_g2_query)?;
    let h_query = r.section::<G1Affine>("h_query", c.h_query)?;
    let l_query = r.section::<G1Affine>("l_query", c.l_query)?;
    let gamma_abc_g1 = r.section::<G1Affine>("vk.gamma_abc_g1", c.gamma_abc_g1)?;
    let started = Instant::now();
    let computed = r.hasher.finish();
    r.times.checksum += started.elapsed().as_secs_f64();
    if computed != header.payload_checksum {
        return Err(Error::ChecksumMismatch { stored: header.payload_checksum, computed });
    }
    if let Some(bad) = r.bad {
        return Err(bad);
    }
    let vk = VerifyingKey { alpha_g1, beta_g2, gamma_g2, delta_g2, gamma_abc_g1 };
    let pk = ProvingKey { vk, beta_g1, delta_g1, a_query, b_g1_query, b_g2_query, h_query, l_query };
    Ok((pk, r.times))
}

struct PayloadReader<'s, S> {
    source: &'s mut S,
    hasher: ChunkedHasher,
    /// The first malformed record, if any; decoding stops there, hashing goes on.
    bad: Option<Error>,
    times: Times,
}

impl<S: Source> PayloadReader<'_, S> {
    fn one<P: Codec>(&mut self, section: &'static str) -> Result<P> {
        Ok(self.section::<P>(section, 1)?.pop().unwrap_or_else(P::zero))
    }

    fn section<P: Codec>(&mut self, section: &'static str, count: u64) -> Result<Vec<P>> {
        let oom = || Error::OutOfMemory { section, count };
        let count = usize::try_from(count).map_err(|_| oom())?;
        let mut out = Vec::new();
        out.try_reserve_exact(count).map_err(|_| oom())?;
        let mut done = 0;
        while done < count {
            let n = points_per_piece::<P>().min(count - done);
            let bytes = self.source.take(n * P::SIZE)?;
            let started = Instant::now();
            self.hasher.update(bytes);
            let hashed = Instant::now();
            self.times.checksum += (hashed - started).as_secs_f64();
            if self.bad.is_none() {
                if let Err((i, problem)) = decode_append(bytes, &mut out) {
                    self.bad = Some(Error::BadPoint { section, index: done + i, problem });
                }
                self.times.decode += hashed.elapsed().as_secs_f64();
            }
            done += n;
        }
        Ok(out)
    }
}
