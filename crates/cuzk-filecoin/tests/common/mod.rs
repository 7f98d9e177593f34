//! Helpers shared by the bridge's tests.
#![allow(dead_code)]

use std::path::PathBuf;

pub use cuzk_testkit::TempDir;

/// Filecoin's parameter directory for the tests (see `cuzk_testkit::filecoin_parameter_dir`).
pub fn filecoin_env() -> PathBuf {
    cuzk_testkit::filecoin_parameter_dir()
}
