#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod checksum;
mod codec;
mod format;
mod report;
mod shape;
mod shape_file;
mod store;

use std::io;
use std::path::PathBuf;

pub use codec::PointProblem;
pub use format::{
    decode_key, read_header, read_key, write_key, Counts, Header, FILE_EXTENSION, FORMAT_VERSION, HEADER_LEN,
    MAGIC,
};
pub use report::{LoadReport, SaveReport};
pub use shape::{ShapeId, MAX_SHAPE_ID_LEN};
pub use shape_file::{
    decode_shape, read_shape, write_shape, ShapeHeader, SHAPE_FILE_EXTENSION, SHAPE_FORMAT_VERSION,
    SHAPE_HEADER_LEN, SHAPE_MAGIC,
};
pub use store::KeyStore;

/// Opens the regular file at `path` for reading and gives its length. Anything else at the path is
/// refused before it is opened: opening a FIFO would wait for a writer.
pub(crate) fn open_regular(path: &std::path::Path) -> Result<(std::fs::File, u64)> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => Error::NotFound { path: path.to_owned() },
        _ => Error::Io { op: "stat", path: path.to_owned(), source },
    })?;
    let t = meta.file_type();
    if !t.is_file() {
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_block_device() || t.is_char_device() {
            "a device"
        } else {
            "something else"
        };
        return Err(Error::NotAFile { path: path.to_owned(), what });
    }
    let file = std::fs::File::open(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => Error::NotFound { path: path.to_owned() },
        _ => Error::Io { op: "open", path: path.to_owned(), source },
    })?;
    let len =
        file.metadata().map_err(|source| Error::Io { op: "stat", path: path.to_owned(), source })?.len();
    Ok((file, len))
}

/// Everything that can go wrong when storing or loading a key. Every way a key file can be wrong
/// has its own variant; none of them ever yields a key.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A shape id (given by the caller or found in a header) breaks the naming rule.
    #[error("invalid shape id \"{shape_id}\": {problem}")]
    InvalidShapeId {
        /// The offending id, with unprintable characters escaped.
        shape_id: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// There is no file (key or shape) where one was asked for.
    #[error("no such file: {}", path.display())]
    NotFound {
        /// The path looked at.
        path: PathBuf,
    },
    /// What is at the path is not a regular file (a directory, a FIFO, a device...): it is never
    /// opened, so a FIFO cannot block the reader.
    #[error("{} is {what}, not a regular file", path.display())]
    NotAFile {
        /// The path looked at.
        path: PathBuf,
        /// What it is instead ("a directory", "a FIFO", ...).
        what: &'static str,
    },
    /// A file system operation failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What was being done ("open", "read", "write", "rename", ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Writing to or seeking in a caller's writer failed.
    #[error("cannot {op} the key stream: {source}")]
    Stream {
        /// What was being done ("write", "seek").
        op: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The data does not start with the magic bytes: it is not a cuzk key file.
    #[error("not a cuzk proving key: it starts with \"{found}\" instead of \"CUZKPK\"")]
    BadMagic {
        /// The first bytes found (up to six), escaped.
        found: String,
    },
    /// The file is a cuzk key of a format version this build cannot read.
    #[error("key format version {found} is not supported; this build reads version {supported}")]
    UnsupportedVersion {
        /// The version in the file.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// The header's own checksum does not match its bytes: the header is corrupt.
    #[error("key header is corrupt: its checksum is {stored:#018x} but its bytes hash to {computed:#018x}")]
    HeaderChecksum {
        /// The checksum stored in the header.
        stored: u64,
        /// The checksum of the header bytes read.
        computed: u64,
    },
    /// A header field holds a value the format does not allow.
    #[error("key header field `{field}` is {value}, expected {expected}")]
    HeaderField {
        /// The field.
        field: &'static str,
        /// The value found.
        value: u64,
        /// What the format allows.
        expected: &'static str,
    },
    /// The key was made for another circuit shape.
    #[error("the key is for circuit shape \"{found}\", not \"{expected}\"")]
    ShapeMismatch {
        /// The shape asked for.
        expected: ShapeId,
        /// The shape recorded in the key file.
        found: ShapeId,
    },
    /// The header's point counts do not add up to its payload length.
    #[error("key header counts ({counts}) make a payload of {implied} bytes, but the header says {stated}")]
    CountsMismatch {
        /// The counts in the header.
        counts: Counts,
        /// The payload length the counts imply.
        implied: u128,
        /// The payload length the header states.
        stated: u64,
    },
    /// The data ends before the key does.
    #[error("key file is truncated: {expected} bytes expected, {found} present")]
    Truncated {
        /// Bytes the header (or the fixed header size) calls for.
        expected: u64,
        /// Bytes present.
        found: u64,
    },
    /// The data goes on after the key ends.
    #[error("key file has {} bytes of trailing garbage: {expected} bytes expected, {found} present", .found.saturating_sub(*.expected))]
    TrailingBytes {
        /// Bytes the header calls for.
        expected: u64,
        /// Bytes present.
        found: u64,
    },
    /// The payload's checksum does not match the header: the points are corrupt.
    #[error("key payload is corrupt: the header's checksum is {stored:#018x} but the payload hashes to {computed:#018x}")]
    ChecksumMismatch {
        /// The checksum stored in the header.
        stored: u64,
        /// The checksum of the payload read.
        computed: u64,
    },
    /// A point record is malformed although the checksum matches (a file written by a faulty tool).
    #[error("key point {section}[{index}] is malformed: {problem}")]
    BadPoint {
        /// The key field, like `a_query` or `vk.alpha_g1`.
        section: &'static str,
        /// The point's index in that field.
        index: usize,
        /// What is wrong.
        problem: PointProblem,
    },
    /// The data does not start with the shape-file magic bytes.
    #[error("not a cuzk R1CS shape file: it starts with \"{found}\" instead of \"CUZKRS\"")]
    ShapeFileBadMagic {
        /// The first bytes found (up to six), escaped.
        found: String,
    },
    /// The file is a shape file of a format version this build cannot read.
    #[error("shape file format version {found} is not supported; this build reads version {supported}")]
    ShapeFileVersion {
        /// The version in the file.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// The shape file's header checksum does not match its bytes.
    #[error(
        "shape file header is corrupt: its checksum is {stored:#018x} but its bytes hash to {computed:#018x}"
    )]
    ShapeFileHeaderChecksum {
        /// The checksum stored in the header.
        stored: u64,
        /// The checksum of the header bytes read.
        computed: u64,
    },
    /// A shape-file header field holds a value the format does not allow.
    #[error("shape file header field `{field}` is {value}, expected {expected}")]
    ShapeFileField {
        /// The field.
        field: &'static str,
        /// The value found.
        value: u64,
        /// What the format allows.
        expected: &'static str,
    },
    /// The shape file records another shape.
    #[error("the shape file is for circuit shape \"{found}\", not \"{expected}\"")]
    ShapeFileMismatch {
        /// The shape asked for.
        expected: ShapeId,
        /// The shape recorded in the file.
        found: ShapeId,
    },
    /// The shape file ends early.
    #[error("shape file is truncated: {expected} bytes expected, {found} present")]
    ShapeFileTruncated {
        /// Bytes the header (or the fixed header size) calls for.
        expected: u64,
        /// Bytes present.
        found: u64,
    },
    /// The shape file goes on after the shape ends.
    #[error("shape file has trailing bytes: {expected} bytes expected, {found} present")]
    ShapeFileTrailingBytes {
        /// Bytes the header calls for.
        expected: u64,
        /// Bytes present.
        found: u64,
    },
    /// The shape file's payload checksum does not match the header.
    #[error("shape file payload is corrupt: the header's checksum is {stored:#018x} but the payload hashes to {computed:#018x}")]
    ShapeFileChecksum {
        /// The checksum stored in the header.
        stored: u64,
        /// The checksum of the payload read.
        computed: u64,
    },
    /// A coefficient is not a reduced field element although the checksum matches.
    #[error("shape file coefficient {index} is not below the scalar field modulus")]
    ShapeFileCoefficient {
        /// Its index in the coefficient table.
        index: usize,
    },
    /// The matrices are inconsistent although the checksum matches (a file written by a faulty tool).
    #[error("shape file is malformed: {0}")]
    ShapeFileMalformed(cuzk_synth::ShapeProblem),
    /// Memory for a key field could not be allocated.
    #[error("cannot allocate {count} points for {section}")]
    OutOfMemory {
        /// The key field.
        section: &'static str,
        /// The points it holds.
        count: u64,
    },
}

impl Error {
    /// Names `path` in an error of a caller's writer, which was that file.
    pub(crate) fn at(self, path: &std::path::Path) -> Self {
        match self {
            Self::Stream { op, source } => Self::Io { op, path: path.to_owned(), source },
            other => other,
        }
    }
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
