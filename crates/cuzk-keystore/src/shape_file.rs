//! Recorded R1CS shapes on disk (`cuzk_synth::R1csShape`): a fixed header, then the coefficient table
//! and the three matrices in compressed sparse rows. The README has the layout.

use std::io::{Read, Write};
use std::path::Path;

use ark_bls12_381::Fr;
use ark_ff::{BigInt, PrimeField};
use cuzk_synth::{Counts, R1csShape};

use crate::checksum::{payload_checksum, xxh64};
use crate::shape::{ShapeId, MAX_SHAPE_ID_LEN};
use crate::{Error, Result};

/// The first six bytes of every shape file.
pub const SHAPE_MAGIC: [u8; 6] = *b"CUZKRS";
/// The shape-file format version this build writes and reads.
pub const SHAPE_FORMAT_VERSION: u32 = 1;
/// Bytes in a shape file's header; the payload starts here.
pub const SHAPE_HEADER_LEN: usize = 160;
/// The extension of shape files in a [`crate::KeyStore`].
pub const SHAPE_FILE_EXTENSION: &str = "cuzkrs";

const HASHED_LEN: usize = SHAPE_HEADER_LEN - 8;

/// A shape file's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeHeader {
    /// The shape id.
    pub shape_id: ShapeId,
    /// Constraints, instance and witness variables.
    pub counts: Counts,
    /// Entries of the coefficient table.
    pub coefficients: u64,
    /// Non-zero entries of A, B and C.
    pub entries: [u64; 3],
    /// Bytes in the payload.
    pub payload_len: u64,
    /// The payload checksum ([`crate::checksum::payload_checksum`]).
    pub payload_checksum: u64,
}

impl ShapeHeader {
    fn implied_payload_len(&self) -> u128 {
        32 * u128::from(self.coefficients)
            + 12 * self.counts.constraints as u128
            + self.entries.iter().map(|&n| 8 * u128::from(n)).sum::<u128>()
    }

    /// The [`SHAPE_HEADER_LEN`] bytes of this header, its checksum included.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SHAPE_HEADER_LEN);
        out.extend_from_slice(&SHAPE_MAGIC);
        out.extend_from_slice(&SHAPE_FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        let id = self.shape_id.as_str().as_bytes();
        out.extend_from_slice(&(id.len() as u32).to_le_bytes());
        let mut field = [0u8; MAX_SHAPE_ID_LEN];
        field.iter_mut().zip(id).for_each(|(slot, &b)| *slot = b);
        out.extend_from_slice(&field);
        let c = &self.counts;
        for n in [c.constraints as u64, c.instance as u64, c.witness as u64, self.coefficients] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        for n in self.entries.iter().chain([&self.payload_len, &self.payload_checksum]) {
            out.extend_from_slice(&n.to_le_bytes());
        }
        let checksum = xxh64(&out, 0);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    /// Parses and validates a header from the start of `bytes`: magic, version, length, header
    /// checksum, reserved and shape id fields, and that the counts make exactly the stated payload.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let start = &bytes[..bytes.len().min(SHAPE_MAGIC.len())];
        if start != &SHAPE_MAGIC[..start.len()] {
            return Err(Error::ShapeFileBadMagic { found: start.escape_ascii().to_string() });
        }
        let u32_at =
            |at: usize| bytes.get(at..at + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        let u64_at = |at: usize| {
            bytes.get(at..at + 8).and_then(|b| b.first_chunk::<8>()).map_or(0, |b| u64::from_le_bytes(*b))
        };
        if bytes.len() >= 10 {
            let version = u32_at(6);
            if version != SHAPE_FORMAT_VERSION {
                return Err(Error::ShapeFileVersion { found: version, supported: SHAPE_FORMAT_VERSION });
            }
        }
        if bytes.len() < SHAPE_HEADER_LEN {
            return Err(Error::ShapeFileTruncated {
                expected: SHAPE_HEADER_LEN as u64,
                found: bytes.len() as u64,
            });
        }
        let (stored, computed) = (u64_at(HASHED_LEN), xxh64(&bytes[..HASHED_LEN], 0));
        if stored != computed {
            return Err(Error::ShapeFileHeaderChecksum { stored, computed });
        }
        let reserved = u32_at(10) & 0xffff;
        if reserved != 0 {
            return Err(Error::ShapeFileField { field: "reserved", value: reserved.into(), expected: "0" });
        }
        let id_len = u32_at(12) as usize;
        if !(1..=MAX_SHAPE_ID_LEN).contains(&id_len) {
            return Err(Error::ShapeFileField {
                field: "shape id length",
                value: id_len as u64,
                expected: "1 to 64",
            });
        }
        let id_field = &bytes[16..16 + MAX_SHAPE_ID_LEN];
        if id_field[id_len..].iter().any(|&b| b != 0) {
            return Err(Error::ShapeFileField {
                field: "shape id padding",
                value: id_field[id_len..].iter().filter(|&&b| b != 0).count() as u64,
                expected: "0 nonzero bytes",
            });
        }
        let shape_id = ShapeId::new(&String::from_utf8_lossy(&id_field[..id_len]))?;
        let count = |field: &'static str, at: usize| {
            usize::try_from(u64_at(at)).map_err(|_| Error::ShapeFileField {
                field,
                value: u64_at(at),
                expected: "a count that fits this machine's memory",
            })
        };
        let counts = Counts {
            constraints: count("constraints", 80)?,
            instance: count("instance variables", 88)?,
            witness: count("witness variables", 96)?,
        };
        let header = Self {
            shape_id,
            counts,
            coefficients: u64_at(104),
            entries: [u64_at(112), u64_at(120), u64_at(128)],
            payload_len: u64_at(136),
            payload_checksum: u64_at(144),
        };
        if header.implied_payload_len() != u128::from(header.payload_len) {
            return Err(Error::ShapeFileField {
                field: "payload length",
                value: header.payload_len,
                expected: "the length the counts make (32 per coefficient, 12 per constraint, 8 per entry)",
            });
        }
        Ok(header)
    }
}

/// Writes `shape` under `shape_id` to `writer`; returns the header written.
pub fn write_shape(writer: &mut impl Write, shape_id: &str, shape: &R1csShape) -> Result<ShapeHeader> {
    let shape_id = ShapeId::new(shape_id)?;
    let matrices = [shape.a(), shape.b(), shape.c()];
    let mut payload = Vec::new();
    for c in shape.coefficients() {
        for limb in c.0 .0 {
            payload.extend_from_slice(&limb.to_le_bytes());
        }
    }
    for m in matrices {
        for len in m.row_lengths() {
            let len = u32::try_from(len).map_err(|_| Error::ShapeFileField {
                field: "row length",
                value: len as u64,
                expected: "under 2^32",
            })?;
            payload.extend_from_slice(&len.to_le_bytes());
        }
        m.columns().iter().for_each(|c| payload.extend_from_slice(&c.to_le_bytes()));
        m.coefficient_indices().iter().for_each(|c| payload.extend_from_slice(&c.to_le_bytes()));
    }
    let header = ShapeHeader {
        shape_id,
        counts: shape.counts(),
        coefficients: shape.coefficients().len() as u64,
        entries: matrices.map(|m| m.entries() as u64),
        payload_len: payload.len() as u64,
        payload_checksum: payload_checksum(&payload),
    };
    let stream = |source| Error::Stream { op: "write", source };
    writer.write_all(&header.to_bytes()).map_err(stream)?;
    writer.write_all(&payload).map_err(stream)?;
    Ok(header)
}

/// Decodes a whole shape file held in memory, refusing anything but exactly a shape `expected`.
pub fn decode_shape(bytes: &[u8], expected_shape_id: &str) -> Result<R1csShape> {
    let expected = ShapeId::new(expected_shape_id)?;
    let header = ShapeHeader::parse(bytes)?;
    check_length(&header, &expected, bytes.len() as u64)?;
    decode_payload(&header, &bytes[SHAPE_HEADER_LEN..])
}

/// Reads the shape file at `path`, refusing anything but exactly a shape `expected_shape_id`.
pub fn read_shape(path: impl AsRef<Path>, expected_shape_id: &str) -> Result<R1csShape> {
    let path = path.as_ref();
    let expected = ShapeId::new(expected_shape_id)?;
    let io = |op: &'static str| move |source| Error::Io { op, path: path.to_owned(), source };
    let (mut file, len) = crate::open_regular(path)?;
    let mut head = vec![0; len.min(SHAPE_HEADER_LEN as u64) as usize];
    file.read_exact(&mut head).map_err(io("read"))?;
    let header = ShapeHeader::parse(&head)?;
    check_length(&header, &expected, len)?;
    // The length matches the header's, so this allocation is what the file holds.
    let mut payload = vec![0; header.payload_len as usize];
    file.read_exact(&mut payload).map_err(io("read"))?;
    decode_payload(&header, &payload)
}

fn check_length(header: &ShapeHeader, expected: &ShapeId, found: u64) -> Result<()> {
    if header.shape_id != *expected {
        return Err(Error::ShapeFileMismatch { expected: expected.clone(), found: header.shape_id.clone() });
    }
    let expected = (SHAPE_HEADER_LEN as u64).saturating_add(header.payload_len);
    match found.cmp(&expected) {
        std::cmp::Ordering::Less => Err(Error::ShapeFileTruncated { expected, found }),
        std::cmp::Ordering::Greater => Err(Error::ShapeFileTrailingBytes { expected, found }),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes.as_chunks::<4>().0.iter().map(|b| u32::from_le_bytes(*b)).collect()
}

fn decode_payload(header: &ShapeHeader, payload: &[u8]) -> Result<R1csShape> {
    let computed = payload_checksum(payload);
    if computed != header.payload_checksum {
        return Err(Error::ShapeFileChecksum { stored: header.payload_checksum, computed });
    }
    let (table_bytes, mut rest) = payload.split_at(32 * header.coefficients as usize);
    let mut table = Vec::with_capacity(header.coefficients as usize);
    for (index, record) in table_bytes.as_chunks::<32>().0.iter().enumerate() {
        let limbs = record.as_chunks::<8>().0.iter().map(|b| u64::from_le_bytes(*b));
        let mut words = [0u64; 4];
        words.iter_mut().zip(limbs).for_each(|(w, l)| *w = l);
        let value = BigInt(words);
        if value >= Fr::MODULUS {
            return Err(Error::ShapeFileCoefficient { index });
        }
        table.push(Fr::new_unchecked(value));
    }
    let constraints = header.counts.constraints;
    let mut parts: [(Vec<usize>, Vec<u32>, Vec<u32>); 3] = Default::default();
    for (part, &entries) in parts.iter_mut().zip(&header.entries) {
        let entries = entries as usize;
        let (lengths, after) = rest.split_at(4 * constraints);
        let (columns, after) = after.split_at(4 * entries);
        let (coefficients, after) = after.split_at(4 * entries);
        *part = (u32s(lengths).into_iter().map(|l| l as usize).collect(), u32s(columns), u32s(coefficients));
        rest = after;
    }
    R1csShape::from_parts(header.counts, table, parts).map_err(Error::ShapeFileMalformed)
}
