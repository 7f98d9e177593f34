//! The per-device arena: partition-sized device buffers allocated once and reused by every proof.
//!
//! A partition's `a`, `b`, `c` (domain size) and `z` (one scalar per variable) live in device memory
//! from the upload to the end of its MSMs. The arena hands those buffers out and takes them back when
//! the polynomials holding them are dropped, so after [`Arena::reserve`] no proof allocates or frees
//! them. The buffers are fixed per slot: a slot is one partition's set, and the number of slots comes
//! from the device's free memory ([`slots_that_fit`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream};

use crate::{CudaError, Gpu, GpuFr};

/// Device bytes of one partition's slot: `a`, `b`, `c` of `domain` elements and `z` of `variables`.
pub fn slot_bytes(domain: usize, variables: usize) -> usize {
    domain.saturating_mul(3).saturating_add(variables).saturating_mul(std::mem::size_of::<GpuFr>())
}

/// Slots of [`slot_bytes`] that fit in `free` bytes of device memory once `reserve` bytes are kept for
/// the MSMs' own buffers.
pub fn slots_that_fit(free: usize, reserve: usize, domain: usize, variables: usize) -> usize {
    free.saturating_sub(reserve) / slot_bytes(domain, variables).max(1)
}

#[derive(Default)]
struct Lengths {
    /// Buffers of this length not in use.
    free: Vec<CudaSlice<GpuFr>>,
    /// Buffers of this length the arena owns (free or lent).
    owned: usize,
    /// Buffers of this length it keeps when they come back (the reserved count).
    keep: usize,
}

/// Reusable device buffers of field elements, by length.
#[derive(Default)]
pub struct Arena {
    lengths: Mutex<HashMap<usize, Lengths>>,
    /// Buffers allocated because none of the length was free (after a reservation, this stays put).
    misses: std::sync::atomic::AtomicU64,
}

/// Buffers of a length kept without a reservation: one partition's set when `z` has the domain's
/// length.
const KEEP_UNRESERVED: usize = 4;

impl Arena {
    fn lengths(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Lengths>> {
        self.lengths.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes sure the arena owns at least `count` buffers of `len` elements, allocating the missing ones
    /// now (on `stream`), and keeps that many from now on.
    pub fn reserve(
        &self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        len: usize,
        count: usize,
    ) -> Result<(), CudaError> {
        let missing = {
            let mut map = self.lengths();
            let entry = map.entry(len).or_default();
            entry.keep = entry.keep.max(count);
            count.saturating_sub(entry.owned)
        };
        for _ in 0..missing {
            let buf = gpu.uninit::<GpuFr>(stream, len)?;
            let mut map = self.lengths();
            let entry = map.entry(len).or_default();
            entry.owned += 1;
            entry.free.push(buf);
        }
        Ok(())
    }

    /// A buffer of `len` elements (contents unspecified): a free one, else a new one allocated on
    /// `stream`, which the arena keeps when it comes back if it is under its count for that length.
    pub fn take(
        self: &Arc<Self>,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        len: usize,
    ) -> Result<ArenaBuffer, CudaError> {
        let reused = {
            let mut map = self.lengths();
            let entry = map.entry(len).or_default();
            let buf = entry.free.pop();
            if buf.is_none() {
                entry.owned += 1;
            }
            buf
        };
        let buf = match reused {
            Some(b) => b,
            None => {
                self.misses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                match gpu.uninit::<GpuFr>(stream, len) {
                    Ok(b) => b,
                    Err(e) => {
                        if let Some(entry) = self.lengths().get_mut(&len) {
                            entry.owned = entry.owned.saturating_sub(1);
                        }
                        return Err(e);
                    }
                }
            }
        };
        Ok(ArenaBuffer { buf: std::mem::ManuallyDrop::new(buf), home: Some(self.clone()) })
    }

    fn give_back(&self, buf: CudaSlice<GpuFr>) {
        let mut map = self.lengths();
        let entry = map.entry(buf.len()).or_default();
        if entry.free.len() < entry.keep.max(KEEP_UNRESERVED) {
            entry.free.push(buf);
        } else {
            entry.owned = entry.owned.saturating_sub(1);
            drop(map);
            drop(buf);
        }
    }

    /// Buffers allocated on demand since the arena was made: after a reservation that covers every
    /// partition in flight, proving leaves this unchanged.
    pub fn misses(&self) -> u64 {
        self.misses.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whole slots (three buffers of `domain` elements and one of `variables`) among the buffers the
    /// arena owns.
    pub fn slots_held(&self, domain: usize, variables: usize) -> usize {
        let map = self.lengths();
        let owned = |len| map.get(&len).map_or(0, |l: &Lengths| l.owned);
        if domain == variables {
            owned(domain) / 4
        } else {
            (owned(domain) / 3).min(owned(variables))
        }
    }

    /// Buffers the arena owns, free or lent, over all lengths.
    pub fn owned(&self) -> usize {
        self.lengths().values().map(|l| l.owned).sum()
    }
}

/// A device buffer that goes back to its arena when dropped (or is freed, when it has none).
pub struct ArenaBuffer {
    buf: std::mem::ManuallyDrop<CudaSlice<GpuFr>>,
    home: Option<Arc<Arena>>,
}

impl ArenaBuffer {
    /// A buffer that belongs to no arena: freed when dropped.
    pub fn loose(buf: CudaSlice<GpuFr>) -> Self {
        Self { buf: std::mem::ManuallyDrop::new(buf), home: None }
    }
}

impl std::ops::Deref for ArenaBuffer {
    type Target = CudaSlice<GpuFr>;
    fn deref(&self) -> &CudaSlice<GpuFr> {
        &self.buf
    }
}

impl std::ops::DerefMut for ArenaBuffer {
    fn deref_mut(&mut self) -> &mut CudaSlice<GpuFr> {
        &mut self.buf
    }
}

impl std::fmt::Debug for ArenaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArenaBuffer")
            .field("len", &self.buf.len())
            .field("pooled", &self.home.is_some())
            .finish()
    }
}

impl Drop for ArenaBuffer {
    fn drop(&mut self) {
        // SAFETY: `buf` is taken exactly once, here, and never used afterwards.
        let buf = unsafe { std::mem::ManuallyDrop::take(&mut self.buf) };
        match &self.home {
            Some(arena) => arena.give_back(buf),
            None => drop(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_from_the_free_memory_left_after_the_msm_reserve() {
        // 2^24 rows, 2^24 variables: four 512 MiB buffers per slot.
        let (n, m) = (1 << 24, 1 << 24);
        assert_eq!(slot_bytes(n, m), 2 << 30);
        assert_eq!(slots_that_fit(16 << 30, 6 << 30, n, m), 5);
        assert_eq!(slots_that_fit(7 << 30, 6 << 30, n, m), 0);
        assert_eq!(slots_that_fit(1 << 30, 6 << 30, n, m), 0, "less free than the reserve");
        assert_eq!(slots_that_fit(usize::MAX, 0, usize::MAX, usize::MAX), 1, "sizes saturate");
    }
}
