//! A directory of key files, one per circuit shape, written atomically.

use std::fs::{self, File, OpenOptions};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use ark_bls12_381::Bls12_381;
use ark_groth16::ProvingKey;
use cuzk_synth::R1csShape;

use crate::format::{read_key, write_key, FILE_EXTENSION};
use crate::report::{LoadReport, SaveReport};
use crate::shape::ShapeId;
use crate::shape_file::{read_shape, write_shape, SHAPE_FILE_EXTENSION, SHAPE_HEADER_LEN};
use crate::{Error, Result};

/// Buffer in front of the file when saving: the payload arrives in multi-megabyte pieces anyway, so
/// this only gathers the small header writes.
const WRITE_BUFFER: usize = 1 << 16;

/// Distinguishes temporary files of concurrent saves within one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A directory of proving keys, one file per circuit shape id: `<dir>/<shape id>.cuzkpk`, and of
/// recorded R1CS shapes (for witness-only synthesis): `<dir>/<shape id>.cuzkrs`.
///
/// Saves write a temporary file in the same directory, flush it to disk and rename it over the final
/// name, so a crash leaves either the old key, the new key, or no key under that name, never a partial
/// one. Loads check everything (see [`crate::read_key`]).
#[derive(Debug, Clone)]
pub struct KeyStore {
    dir: PathBuf,
}

impl KeyStore {
    /// Opens the store at `dir`, creating the directory (and its parents) when missing.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_owned();
        fs::create_dir_all(&dir).map_err(|source| Error::Io {
            op: "create directory",
            path: dir.clone(),
            source,
        })?;
        Ok(Self { dir })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds (or would hold) the key for `shape_id`.
    pub fn path_for(&self, shape_id: &str) -> Result<PathBuf> {
        Ok(self.file_for(&ShapeId::new(shape_id)?))
    }

    fn file_for(&self, shape_id: &ShapeId) -> PathBuf {
        self.dir.join(format!("{shape_id}.{FILE_EXTENSION}"))
    }

    /// Whether a key file for `shape_id` exists (its contents are checked only by [`KeyStore::load`]).
    pub fn contains(&self, shape_id: &str) -> Result<bool> {
        let path = self.path_for(shape_id)?;
        path.try_exists().map_err(|source| Error::Io { op: "look for", path, source })
    }

    /// Removes the temporary files of saves whose process is gone (a daemon killed while it saved a
    /// key) and returns their paths. A temporary file names its process; one of a process still
    /// running, this one included, is left alone. Where processes cannot be looked up (no `/proc`),
    /// nothing is removed.
    pub fn remove_stale_temps(&self) -> Result<Vec<PathBuf>> {
        let io = |source| Error::Io { op: "list", path: self.dir.clone(), source };
        let proc = Path::new("/proc");
        if !proc.join("self").exists() {
            return Ok(Vec::new());
        }
        let mut removed = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let Some(pid) = entry.file_name().to_str().and_then(temp_owner) else { continue };
            if pid == std::process::id() || proc.join(pid.to_string()).exists() {
                continue;
            }
            let path = entry.path();
            match fs::remove_file(&path) {
                Ok(()) => removed.push(path),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(Error::Io { op: "remove", path, source }),
            }
        }
        Ok(removed)
    }

    /// The shape ids of the key files in the store, sorted.
    pub fn shapes(&self) -> Result<Vec<ShapeId>> {
        let io = |source| Error::Io { op: "list", path: self.dir.clone(), source };
        let mut shapes = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io)? {
            let name = entry.map_err(io)?.file_name();
            let stem = name.to_str().and_then(|n| n.strip_suffix(FILE_EXTENSION)?.strip_suffix('.'));
            if let Some(shape) = stem.and_then(|s| ShapeId::new(s).ok()) {
                shapes.push(shape);
            }
        }
        shapes.sort();
        Ok(shapes)
    }

    /// Saves `pk` as the key for `shape_id`, replacing any key saved before, atomically.
    pub fn save(&self, shape_id: &str, pk: &ProvingKey<Bls12_381>) -> Result<SaveReport> {
        let shape = ShapeId::new(shape_id)?;
        let path = self.file_for(&shape);
        self.save_atomically(&shape, FILE_EXTENSION, path, |w| {
            Ok(write_key(w, shape.as_str(), pk)?.file_len())
        })
    }

    /// Writes a file through `write` (which returns the bytes written) to a temporary file, syncs it
    /// and renames it to `path`.
    fn save_atomically(
        &self,
        shape: &ShapeId,
        extension: &str,
        path: PathBuf,
        write: impl FnOnce(&mut BufWriter<File>) -> Result<u64>,
    ) -> Result<SaveReport> {
        let started = Instant::now();
        let name = format!(
            ".{shape}.{extension}.tmp-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let mut temp = TempFile { path: self.dir.join(name), keep: false };
        let at = |op: &'static str| {
            let path = temp.path.clone();
            move |source| Error::Io { op, path, source }
        };
        let file = OpenOptions::new().write(true).create_new(true).open(&temp.path).map_err(at("create"))?;
        let mut writer = BufWriter::with_capacity(WRITE_BUFFER, file);
        let bytes = write(&mut writer).map_err(|e| e.at(&temp.path))?;
        let file = writer.into_inner().map_err(|e| at("write")(e.into_error()))?;
        let synced = Instant::now();
        file.sync_all().map_err(at("sync"))?;
        let sync_seconds = synced.elapsed().as_secs_f64();
        drop(file);
        fs::rename(&temp.path, &path).map_err(at("rename"))?;
        temp.keep = true;
        // Make the rename itself durable. Best effort: not every platform can sync a directory, and the
        // file under its final name is complete either way.
        let _ = File::open(&self.dir).and_then(|d| d.sync_all());
        Ok(SaveReport { path, bytes, seconds: started.elapsed().as_secs_f64(), sync_seconds })
    }

    /// The file that holds (or would hold) the recorded R1CS shape for `shape_id`.
    pub fn shape_path_for(&self, shape_id: &str) -> Result<PathBuf> {
        let shape = ShapeId::new(shape_id)?;
        Ok(self.dir.join(format!("{shape}.{SHAPE_FILE_EXTENSION}")))
    }

    /// Whether a shape file for `shape_id` exists (its contents are checked only by
    /// [`KeyStore::load_shape`]).
    pub fn contains_shape(&self, shape_id: &str) -> Result<bool> {
        let path = self.shape_path_for(shape_id)?;
        path.try_exists().map_err(|source| Error::Io { op: "look for", path, source })
    }

    /// Saves a recorded R1CS shape for `shape_id`, replacing any saved before, atomically (as
    /// [`KeyStore::save`]).
    pub fn save_shape(&self, shape_id: &str, r1cs: &R1csShape) -> Result<SaveReport> {
        let shape = ShapeId::new(shape_id)?;
        let path = self.shape_path_for(shape_id)?;
        self.save_atomically(&shape, SHAPE_FILE_EXTENSION, path, |w| {
            let header = write_shape(w, shape.as_str(), r1cs)?;
            Ok(SHAPE_HEADER_LEN as u64 + header.payload_len)
        })
    }

    /// Loads the recorded R1CS shape for `shape_id` (see [`crate::read_shape`]).
    pub fn load_shape(&self, shape_id: &str) -> Result<R1csShape> {
        read_shape(self.shape_path_for(shape_id)?, shape_id)
    }

    /// Loads the key for `shape_id`.
    pub fn load(&self, shape_id: &str) -> Result<(ProvingKey<Bls12_381>, LoadReport)> {
        read_key(self.path_for(shape_id)?, shape_id)
    }
}

/// The process that wrote the temporary file named `name` (`.<shape>.<extension>.tmp-<pid>-<n>`, as
/// [`KeyStore::save_atomically`] names them); `None` for any other name.
fn temp_owner(name: &str) -> Option<u32> {
    let (head, tail) = name.strip_prefix('.')?.rsplit_once(".tmp-")?;
    let (pid, n) = tail.split_once('-')?;
    let known =
        head.ends_with(&format!(".{FILE_EXTENSION}")) || head.ends_with(&format!(".{SHAPE_FILE_EXTENSION}"));
    (known && n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty()).then_some(())?;
    pid.parse().ok()
}

/// A temporary file, removed on drop unless kept.
struct TempFile {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}
