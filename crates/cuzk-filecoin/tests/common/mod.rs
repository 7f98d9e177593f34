//! Helpers shared by the bridge's tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A scratch directory under the target directory, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(test: &str) -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("cuzk-filecoin-{test}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create scratch directory");
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Filecoin's parameter directory for the tests (see `cuzk_testkit::filecoin_parameter_dir`).
pub fn filecoin_env() -> PathBuf {
    cuzk_testkit::filecoin_parameter_dir()
}
