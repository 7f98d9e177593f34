//! One byte budget for host memory, with RAII reservations that wait instead of failing.

use std::sync::{Arc, Condvar, Mutex};

/// Why a reservation cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// The request exceeds the whole budget, so waiting would never help.
    #[error("a reservation of {requested} bytes can never fit a budget of {capacity} bytes")]
    TooLarge {
        /// Bytes requested.
        requested: u64,
        /// The budget.
        capacity: u64,
    },
}

#[derive(Debug, Default)]
struct State {
    used: u64,
    peak: u64,
}

#[derive(Debug)]
struct Inner {
    capacity: u64,
    state: Mutex<State>,
    freed: Condvar,
}

/// A host memory budget shared by keys, synthesis working sets and pinned buffers.
#[derive(Debug, Clone)]
pub struct Budget {
    inner: Arc<Inner>,
}

impl Budget {
    /// A budget of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        Self {
            inner: Arc::new(Inner { capacity, state: Mutex::new(State::default()), freed: Condvar::new() }),
        }
    }

    /// The budget's size in bytes.
    pub fn capacity(&self) -> u64 {
        self.inner.capacity
    }

    /// Bytes reserved now.
    pub fn used(&self) -> u64 {
        self.lock().used
    }

    /// The most bytes ever reserved at once.
    pub fn peak(&self) -> u64 {
        self.lock().peak
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves `bytes`, waiting until they fit. Fails at once if they can never fit.
    pub fn reserve(&self, bytes: u64) -> Result<Reservation, BudgetError> {
        if bytes > self.inner.capacity {
            return Err(BudgetError::TooLarge { requested: bytes, capacity: self.inner.capacity });
        }
        let mut state = self.lock();
        // The loop re-checks after every wake-up, so a notification can never be missed or misread.
        while state.used + bytes > self.inner.capacity {
            state = self.inner.freed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.used += bytes;
        state.peak = state.peak.max(state.used);
        Ok(Reservation { budget: self.clone(), bytes })
    }

    /// Reserves `bytes` only if they fit now.
    pub fn try_reserve(&self, bytes: u64) -> Option<Reservation> {
        let mut state = self.lock();
        if state.used + bytes > self.inner.capacity {
            return None;
        }
        state.used += bytes;
        state.peak = state.peak.max(state.used);
        Some(Reservation { budget: self.clone(), bytes })
    }

    fn release(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut state = self.lock();
        state.used = state.used.saturating_sub(bytes);
        drop(state);
        self.inner.freed.notify_all();
    }
}

/// Bytes held from a [`Budget`]; released when dropped, or earlier in parts.
#[derive(Debug)]
pub struct Reservation {
    budget: Budget,
    bytes: u64,
}

impl Reservation {
    /// Bytes still held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Gives back `bytes` of this reservation now (all of it if it holds less).
    pub fn release(&mut self, bytes: u64) {
        let b = bytes.min(self.bytes);
        self.bytes -= b;
        self.budget.release(b);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reservations_wait_and_release_in_stages() {
        let b = Budget::new(100);
        let mut r1 = b.reserve(60).unwrap();
        assert!(b.try_reserve(50).is_none());
        let waiter = {
            let b = b.clone();
            std::thread::spawn(move || b.reserve(50).map(|r| r.bytes()))
        };
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(b.used(), 60, "the waiter must not have reserved yet");
        r1.release(20);
        assert_eq!(waiter.join().unwrap(), Ok(50));
        drop(r1);
        assert_eq!(b.used(), 0);
        assert_eq!(b.peak(), 90);
        assert_eq!(b.reserve(101).unwrap_err(), BudgetError::TooLarge { requested: 101, capacity: 100 });
    }
}
