//! Scratch directories for tests.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh, empty directory for one test, `cuzk-<name>-<process>-<n>` under the system's temporary
/// directory (or a base given), removed with all it holds when dropped. Its name is new for each
/// one a process makes, and leftovers of an earlier process with the same id are cleared first.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory under [`std::env::temp_dir`].
    ///
    /// # Panics
    /// When the directory cannot be made (a test cannot go on without it).
    pub fn new(name: &str) -> Self {
        Self::under(&std::env::temp_dir(), name)
    }

    /// A fresh directory under `base` (made when missing).
    ///
    /// # Panics
    /// When the directory cannot be made.
    pub fn under(base: &Path, name: &str) -> Self {
        static MADE: AtomicU64 = AtomicU64::new(0);
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("cuzk-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            panic!("cannot make the scratch directory {}: {e}", dir.display());
        }
        Self(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A path inside the directory.
    pub fn join(&self, part: impl AsRef<Path>) -> PathBuf {
        self.0.join(part)
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::TempDir;

    #[test]
    fn each_scratch_directory_is_new_and_goes_with_its_contents() {
        let a = TempDir::new("testkit-scratch");
        let b = TempDir::new("testkit-scratch");
        assert_ne!(a.path(), b.path());
        assert!(a.path().is_dir() && std::fs::read_dir(a.path()).unwrap().next().is_none());
        std::fs::create_dir_all(a.join("inner")).unwrap();
        std::fs::write(a.join("inner/file"), b"x").unwrap();
        let kept = a.path().to_path_buf();
        drop(a);
        assert!(!kept.exists());
        let c = TempDir::under(b.path(), "nested");
        assert!(c.path().starts_with(b.path()) && c.path().is_dir());
    }
}
