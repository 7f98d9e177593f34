//! What a save or a load took.

use std::path::PathBuf;

/// Bytes per second in GB/s (10^9 bytes per second); 0 when no time was measured.
fn gb_per_s(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / seconds / 1e9
    } else {
        0.0
    }
}

/// What [`crate::KeyStore::save`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct SaveReport {
    /// The key file written.
    pub path: PathBuf,
    /// Bytes in the file.
    pub bytes: u64,
    /// Wall-clock seconds of the whole save: encode, checksum, write, sync, rename.
    pub seconds: f64,
    /// Of these, seconds spent waiting for the data to reach the disk (`fsync`).
    pub sync_seconds: f64,
}

impl SaveReport {
    /// Throughput of the whole save, in GB/s.
    pub fn gb_per_s(&self) -> f64 {
        gb_per_s(self.bytes, self.seconds)
    }

    /// Throughput without the final `fsync`, in GB/s: encoding and writing into the page cache.
    pub fn gb_per_s_before_sync(&self) -> f64 {
        gb_per_s(self.bytes, self.seconds - self.sync_seconds)
    }
}

/// What [`crate::read_key`] or [`crate::KeyStore::load`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadReport {
    /// The key file read.
    pub path: PathBuf,
    /// Bytes in the file.
    pub bytes: u64,
    /// Wall-clock seconds of the whole load.
    pub seconds: f64,
    /// Of these, seconds spent reading the file.
    pub read_seconds: f64,
    /// Of these, seconds spent computing the payload checksum.
    pub checksum_seconds: f64,
    /// Of these, seconds spent decoding points.
    pub decode_seconds: f64,
}

impl LoadReport {
    /// Throughput of the whole load, in GB/s.
    pub fn gb_per_s(&self) -> f64 {
        gb_per_s(self.bytes, self.seconds)
    }
}
