//! The MSMs' working buffers: bucket counts and offsets, sorted entries, partial sums, window sums.
//!
//! Their sizes follow from an MSM's plan, so the MSMs of one key ask for the same buffers proof after
//! proof. Each device keeps them on shelves by element type and length: an MSM takes its buffers from
//! the shelf and puts them back when it has queued its kernels, and only a shelf that is short
//! allocates. [`crate::CudaBackend::reserve_msm_workspace`] fills the shelves for a key's five MSMs when
//! the key is loaded, so proofs allocate none of them.
//!
//! A buffer put back may still be in use by queued kernels. cudarc orders its next use after them
//! through the buffer's read and write events, on whichever stream that is. So that two MSMs queued
//! back to back do not wait on each other (the second one's sort on the side stream would otherwise wait
//! for the first one's sums on the compute stream to finish reading the same buffer), a shelf hands out
//! its buffers in turn (first back, first out) and grows to at least [`SPARE`] buffers before it
//! reuses one. Buffers only the compute stream touches (`Scratch::take_serial`: the bucket sums'
//! partials, the batched round's chains) gain nothing from a second one, as the MSMs on that stream
//! run one after another anyway: their shelves reuse a buffer as soon as it is back.
//!
//! A key's MSMs claim the buffers their reserve made (`Scratch::claim`, counted from their plans);
//! when the key goes (its bases dropped), its claims go with it and the free buffers of shelves no
//! other claim needs are freed, so a daemon that evicts keys does not keep their buffers.

use std::any::{Any, TypeId};
use std::collections::{HashMap, VecDeque};
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, LaunchArgs, PushKernelArg, ValidAsZeroBits};

use crate::{CudaError, DriverContext};

/// Buffers a shelf owns before it reuses one.
pub const SPARE: usize = 2;

/// Bytes of free buffers kept over all shelves at first; a buffer coming back beyond the limit is
/// freed. A key's reserve raises the limit to hold it whole ([`Scratch::keep_at_least`]).
const KEPT_BYTES: usize = 24 << 30;

/// A shelf's key: element type and length.
pub(crate) type Key = (TypeId, usize);

/// What a claim needs of one shelf: the bytes of one buffer and how many buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Need {
    pub(crate) bytes: usize,
    pub(crate) count: usize,
}

#[derive(Debug)]
struct Shelf<B> {
    free: VecDeque<B>,
    /// Buffers of this key in existence (on the shelf or lent).
    owned: usize,
}

impl<B> Default for Shelf<B> {
    fn default() -> Self {
        Self { free: VecDeque::new(), owned: 0 }
    }
}

/// The bookkeeping of the shelves, apart from what a buffer is (so it is tested without a device).
#[derive(Debug)]
pub(crate) struct Shelves<B> {
    shelves: HashMap<Key, Shelf<B>>,
    /// Bytes of the buffers on the shelves.
    free_bytes: usize,
    /// Bytes of the buffers in existence.
    owned_bytes: usize,
    /// Free bytes kept at most.
    kept_bytes: usize,
    /// Free bytes kept at most when nothing claims more ([`Shelves::new`]).
    base_kept: usize,
    /// Buffers allocated because the shelf was short.
    misses: u64,
    /// What each live claim needs, by shelf.
    claims: HashMap<u64, HashMap<Key, Need>>,
    next_claim: u64,
}

impl<B> Shelves<B> {
    pub(crate) fn new(kept_bytes: usize) -> Self {
        Self {
            shelves: HashMap::new(),
            free_bytes: 0,
            owned_bytes: 0,
            kept_bytes,
            base_kept: kept_bytes,
            misses: 0,
            claims: HashMap::new(),
            next_claim: 0,
        }
    }

    /// Records that someone needs `needs` (buffers per shelf) from now on; returns the claim's id.
    pub(crate) fn claim(&mut self, needs: HashMap<Key, Need>) -> u64 {
        let id = self.next_claim;
        self.next_claim += 1;
        self.claims.insert(id, needs);
        id
    }

    /// The most buffers of `key` any live claim needs.
    fn needed(&self, key: &Key) -> usize {
        self.claims.values().filter_map(|c| c.get(key)).map(|n| n.count).max().unwrap_or(0)
    }

    /// Drops claim `id`: the free buffers of its shelves beyond what the other claims need are
    /// handed back to be freed, and the free bytes kept come down to what the claims left need (or
    /// the limit the shelves started with). Buffers in use stay counted, and go back to their shelf
    /// or are freed when they come back, as [`Shelves::give`] decides.
    pub(crate) fn release(&mut self, id: u64) -> Vec<B> {
        let Some(gone) = self.claims.remove(&id) else {
            return Vec::new();
        };
        let mut freed = Vec::new();
        for (key, need) in gone {
            let keep = self.needed(&key);
            let Some(shelf) = self.shelves.get_mut(&key) else { continue };
            while shelf.owned > keep {
                let Some(b) = shelf.free.pop_back() else { break };
                shelf.owned -= 1;
                self.free_bytes -= need.bytes;
                self.owned_bytes -= need.bytes;
                freed.push(b);
            }
        }
        let shelves: HashMap<Key, usize> =
            self.claims.values().flatten().map(|(&key, n)| (key, n.bytes)).collect();
        let claimed = shelves.iter().map(|(key, bytes)| bytes * self.needed(key)).sum::<usize>();
        self.kept_bytes = self.base_kept.max(claimed);
        freed
    }

    /// A buffer for `key` from its shelf once the shelf owns at least `spare` of them, or `None` when
    /// the caller must allocate one (counted as owned from now on; [`Shelves::failed`] takes that
    /// back if the allocation fails).
    pub(crate) fn take(&mut self, key: Key, bytes: usize, spare: usize) -> Option<B> {
        let shelf = self.shelves.entry(key).or_default();
        if shelf.owned >= spare {
            if let Some(b) = shelf.free.pop_front() {
                self.free_bytes -= bytes;
                return Some(b);
            }
        }
        shelf.owned += 1;
        self.owned_bytes += bytes;
        self.misses += 1;
        None
    }

    /// The allocation [`Shelves::take`] asked for failed.
    pub(crate) fn failed(&mut self, key: Key, bytes: usize) {
        if let Some(shelf) = self.shelves.get_mut(&key) {
            shelf.owned = shelf.owned.saturating_sub(1);
            self.owned_bytes = self.owned_bytes.saturating_sub(bytes);
        }
    }

    /// Keeps at least `bytes` of free buffers from now on.
    pub(crate) fn keep_at_least(&mut self, bytes: usize) {
        self.kept_bytes = self.kept_bytes.max(bytes);
    }

    /// Puts a buffer back on its shelf; hands it back to be freed when the shelves hold enough.
    pub(crate) fn give(&mut self, key: Key, bytes: usize, b: B) -> Option<B> {
        let shelf = self.shelves.entry(key).or_default();
        if self.free_bytes + bytes <= self.kept_bytes {
            shelf.free.push_back(b);
            self.free_bytes += bytes;
            None
        } else {
            shelf.owned = shelf.owned.saturating_sub(1);
            self.owned_bytes = self.owned_bytes.saturating_sub(bytes);
            Some(b)
        }
    }
}

/// One device's shelves of MSM buffers.
pub struct Scratch {
    shelves: Mutex<Shelves<Box<dyn Any + Send>>>,
}

impl Default for Scratch {
    fn default() -> Self {
        Self { shelves: Mutex::new(Shelves::new(KEPT_BYTES)) }
    }
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch")
            .field("owned_bytes", &self.owned_bytes())
            .field("misses", &self.misses())
            .finish()
    }
}

impl Scratch {
    fn lock(&self) -> std::sync::MutexGuard<'_, Shelves<Box<dyn Any + Send>>> {
        self.shelves.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A buffer of `n` elements whose contents are whatever its last user left (a new one allocated on
    /// `stream` when the shelf is short): for buffers a kernel or a copy fills before anything reads
    /// them.
    pub(crate) fn take<T: DeviceRepr + ValidAsZeroBits + Send + 'static>(
        self: &Arc<Self>,
        stream: &Arc<CudaStream>,
        n: usize,
    ) -> Result<ScratchBuf<T>, CudaError> {
        self.take_spare(stream, n, SPARE)
    }

    /// As [`Scratch::take`], for a buffer only the compute stream uses: its shelf keeps one unless
    /// more are in use at once.
    pub(crate) fn take_serial<T: DeviceRepr + ValidAsZeroBits + Send + 'static>(
        self: &Arc<Self>,
        stream: &Arc<CudaStream>,
        n: usize,
    ) -> Result<ScratchBuf<T>, CudaError> {
        self.take_spare(stream, n, 1)
    }

    fn take_spare<T: DeviceRepr + ValidAsZeroBits + Send + 'static>(
        self: &Arc<Self>,
        stream: &Arc<CudaStream>,
        n: usize,
        spare: usize,
    ) -> Result<ScratchBuf<T>, CudaError> {
        let n = n.max(1);
        let (key, bytes) = ((TypeId::of::<T>(), n), n * std::mem::size_of::<T>());
        let reused = self.lock().take(key, bytes, spare);
        let buf = match reused.map(|b| b.downcast::<CudaSlice<T>>()) {
            Some(Ok(b)) => *b,
            // Shelves are keyed by type: a buffer of another type is never there.
            Some(Err(_)) | None => {
                // SAFETY: the element types are plain data for which every bit pattern is a value (the
                // `ValidAsZeroBits` bound stands for that here); callers only read what they wrote.
                match unsafe { stream.alloc::<T>(n) }.during("allocating MSM scratch memory") {
                    Ok(b) => b,
                    Err(e) => {
                        self.lock().failed(key, bytes);
                        return Err(e);
                    }
                }
            }
        };
        Ok(ScratchBuf { buf: ManuallyDrop::new(buf), home: self.clone() })
    }

    /// As [`Scratch::take`], zeroed on `stream`.
    pub(crate) fn take_zeroed<T: DeviceRepr + ValidAsZeroBits + Send + 'static>(
        self: &Arc<Self>,
        stream: &Arc<CudaStream>,
        n: usize,
    ) -> Result<ScratchBuf<T>, CudaError> {
        let mut buf = self.take::<T>(stream, n)?;
        stream.memset_zeros(&mut *buf).during("zeroing MSM scratch memory")?;
        Ok(buf)
    }

    /// Buffers allocated because a shelf was short, since the device was opened: after
    /// [`crate::CudaBackend::reserve_msm_workspace`], proving with that key leaves it unchanged.
    pub fn misses(&self) -> u64 {
        self.lock().misses
    }

    /// Device bytes of the MSM buffers in existence, on the shelves or in use.
    pub fn owned_bytes(&self) -> usize {
        self.lock().owned_bytes
    }

    /// Keeps at least `bytes` of free buffers on the shelves from now on (at first
    /// [`KEPT_BYTES`]): a key whose reserve holds more keeps it all between proofs.
    pub(crate) fn keep_at_least(&self, bytes: usize) {
        self.lock().keep_at_least(bytes);
    }

    /// Claims `needs` (buffers per shelf) until the returned [`Claim`] is dropped.
    pub(crate) fn claim(self: &Arc<Self>, needs: HashMap<Key, Need>) -> Claim {
        let id = self.lock().claim(needs);
        Claim { id, home: self.clone() }
    }
}

/// Buffers someone needs on a device's shelves (a key's MSM): while it lives, the shelves keep them;
/// dropped, the shelves free the free buffers no other claim needs.
pub(crate) struct Claim {
    id: u64,
    home: Arc<Scratch>,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim").field("id", &self.id).finish()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Freed outside the lock (in stream order, after their last users).
        let freed = self.home.lock().release(self.id);
        drop(freed);
    }
}

/// A device buffer from a [`Scratch`], back on its shelf when dropped.
pub(crate) struct ScratchBuf<T: 'static> {
    buf: ManuallyDrop<CudaSlice<T>>,
    home: Arc<Scratch>,
}

impl<T> std::ops::Deref for ScratchBuf<T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        &self.buf
    }
}

impl<T> std::ops::DerefMut for ScratchBuf<T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.buf
    }
}

// SAFETY: pushes exactly what the `&CudaSlice<T>` impl pushes (the buffer's device pointer and its events),
// by delegating to it.
unsafe impl<'a, 'b: 'a, T> PushKernelArg<&'b ScratchBuf<T>> for LaunchArgs<'a> {
    fn arg(&mut self, arg: &'b ScratchBuf<T>) -> &mut Self {
        self.arg(&*arg.buf)
    }
}

// SAFETY: as above, for the `&mut CudaSlice<T>` impl.
unsafe impl<'a, 'b: 'a, T> PushKernelArg<&'b mut ScratchBuf<T>> for LaunchArgs<'a> {
    fn arg(&mut self, arg: &'b mut ScratchBuf<T>) -> &mut Self {
        self.arg(&mut *arg.buf)
    }
}

impl<T: 'static> Drop for ScratchBuf<T> {
    fn drop(&mut self) {
        // SAFETY: `buf` is taken exactly once, here, and never used afterwards.
        let buf = unsafe { ManuallyDrop::take(&mut self.buf) };
        let (key, bytes) = ((TypeId::of::<T>(), buf.len()), buf.len() * std::mem::size_of::<T>());
        let boxed: Box<dyn Any + Send> = Box::new(buf);
        // Freed outside the lock when the shelves are full (in stream order, after its users).
        let spill = self.home.lock().give(key, bytes, boxed);
        drop(spill);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(len: usize) -> Key {
        (TypeId::of::<u32>(), len)
    }

    #[test]
    fn a_shelf_grows_to_two_buffers_then_lends_them_in_turn() {
        let mut s: Shelves<&'static str> = Shelves::new(1 << 20);
        // First MSM of a size: allocates.
        assert_eq!(s.take(key(8), 32, SPARE), None);
        assert_eq!(s.give(key(8), 32, "x"), None);
        // Second: allocates too, although x is back, so two MSMs queued back to back do not share.
        assert_eq!(s.take(key(8), 32, SPARE), None);
        assert_eq!(s.give(key(8), 32, "y"), None);
        // From now on, x and y in turn, and nothing more is allocated.
        let order: Vec<_> = (0..4)
            .map(|_| {
                let b = s.take(key(8), 32, SPARE).expect("a buffer on the shelf");
                assert_eq!(s.give(key(8), 32, b), None);
                b
            })
            .collect();
        assert_eq!(order, ["x", "y", "x", "y"]);
        assert_eq!(s.misses, 2);
        assert_eq!((s.owned_bytes, s.free_bytes), (64, 64));
        // Another length is another shelf.
        assert_eq!(s.take(key(9), 36, SPARE), None);
        assert_eq!(s.misses, 3);
    }

    #[test]
    fn a_serial_shelf_reuses_its_buffer_at_once_and_grows_only_for_buffers_in_use() {
        let mut s: Shelves<&'static str> = Shelves::new(1 << 20);
        assert_eq!(s.take(key(8), 32, 1), None);
        assert_eq!(s.give(key(8), 32, "x"), None);
        assert_eq!(s.take(key(8), 32, 1), Some("x"));
        // Two in use at once: a second one.
        assert_eq!(s.take(key(8), 32, 1), None);
        assert_eq!(s.give(key(8), 32, "y"), None);
        assert_eq!(s.give(key(8), 32, "x"), None);
        assert_eq!((s.take(key(8), 32, 1), s.take(key(8), 32, 1)), (Some("y"), Some("x")));
        assert_eq!((s.misses, s.owned_bytes), (2, 64));
    }

    #[test]
    fn a_released_claim_frees_the_free_buffers_no_other_claim_needs() {
        let mut s: Shelves<&'static str> = Shelves::new(10);
        let need = |count| Need { bytes: 32, count };
        // Two keys' MSMs: both need two buffers of length 8; only the first needs length 9.
        let first = s.claim(HashMap::from([(key(8), need(2)), (key(9), need(1))]));
        let second = s.claim(HashMap::from([(key(8), need(2))]));
        s.keep_at_least(96);
        for (k, b) in [(8, "x"), (8, "y"), (9, "z")] {
            assert_eq!(s.take(key(k), 32, SPARE), None);
            assert_eq!(s.give(key(k), 32, b), None);
        }
        assert_eq!((s.owned_bytes, s.free_bytes), (96, 96));
        // The first goes: its shelf of 9 empties, the shared shelf keeps both buffers.
        assert_eq!(s.release(first), ["z"]);
        assert_eq!((s.owned_bytes, s.free_bytes, s.kept_bytes), (64, 64, 64));
        // The second goes: nothing is claimed, every free buffer is freed, the limit is the first.
        let mut freed = s.release(second);
        freed.sort();
        assert_eq!(freed, ["x", "y"]);
        assert_eq!((s.owned_bytes, s.free_bytes, s.kept_bytes), (0, 0, 10));
        // A claim released twice, or never made, frees nothing.
        assert!(s.release(second).is_empty() && s.release(77).is_empty());
        // A buffer in use when its claim goes stays counted; coming back beyond the limit, it is freed.
        let third = s.claim(HashMap::from([(key(8), need(1))]));
        assert_eq!(s.take(key(8), 32, SPARE), None);
        assert!(s.release(third).is_empty());
        assert_eq!(s.owned_bytes, 32);
        assert_eq!(s.give(key(8), 32, "w"), Some("w"));
        assert_eq!(s.owned_bytes, 0);
    }

    #[test]
    fn buffers_in_use_at_once_are_all_kept_and_a_full_store_frees() {
        let mut s: Shelves<u32> = Shelves::new(100);
        // Three in use at once: three allocations, then all three come back and are kept.
        for _ in 0..3 {
            assert_eq!(s.take(key(1), 30, SPARE), None);
        }
        for b in 0..3 {
            assert_eq!(s.give(key(1), 30, b), None);
        }
        assert_eq!((s.owned_bytes, s.free_bytes), (90, 90));
        // A fourth buffer beyond the 100 bytes kept is handed back to be freed.
        assert_eq!(s.take(key(2), 40, SPARE), None);
        assert_eq!(s.give(key(2), 40, 7), Some(7));
        assert_eq!(s.owned_bytes, 90);
        // A failed allocation is not counted as owned.
        assert_eq!(s.take(key(3), 5, SPARE), None);
        s.failed(key(3), 5);
        assert_eq!(s.owned_bytes, 90);
        // Kept to at least 130 bytes (a larger key's reserve), the fourth buffer stays; the limit
        // never shrinks.
        s.keep_at_least(130);
        s.keep_at_least(10);
        assert_eq!(s.take(key(2), 40, SPARE), None);
        assert_eq!(s.give(key(2), 40, 8), None);
        assert_eq!((s.owned_bytes, s.free_bytes), (130, 130));
        assert_eq!(s.take(key(4), 1, SPARE), None);
        assert_eq!(s.give(key(4), 1, 9), Some(9));
    }
}
