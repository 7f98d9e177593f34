//! One byte budget for host memory, with RAII reservations that wait instead of failing, and resident
//! reservations (keys) admitted only while every resident holder's partitions can still fit.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex};

use crate::Priority;

/// A waiter's place: higher priorities first, then the oldest.
type Ticket = (Reverse<Priority>, u64);

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
    /// A resident reservation would leave too little room for the partitions of the resident holders
    /// (its own included).
    #[error(
        "{available} bytes of the budget are left beside the resident reservations (and room for their \
         widest partition), too few for {requested} resident bytes plus a {partition}-byte partition"
    )]
    NoRoom {
        /// Bytes left for the new holder and one of its partitions.
        available: u64,
        /// Resident bytes requested.
        requested: u64,
        /// The new holder's partition size.
        partition: u64,
    },
}

#[derive(Debug, Default)]
struct State {
    used: u64,
    peak: u64,
    /// Bytes held by resident reservations.
    resident: u64,
    /// The partition sizes resident holders admit, with how many holders admit each.
    partitions: BTreeMap<u64, usize>,
    /// Waiters in the order they are served.
    queue: BTreeSet<Ticket>,
    next_ticket: u64,
}

impl State {
    fn ticket(&mut self, priority: Priority) -> Ticket {
        self.next_ticket += 1;
        let t = (Reverse(priority), self.next_ticket);
        self.queue.insert(t);
        t
    }

    /// `ticket` is first in line and `bytes` fit.
    fn served(&self, ticket: &Ticket, bytes: u64, capacity: u64) -> bool {
        self.queue.first() == Some(ticket) && self.used + bytes <= capacity
    }

    /// Bytes left for a new resident holder with partitions of `partition` bytes and one of them.
    fn available(&self, capacity: u64, partition: u64) -> u64 {
        let widest_other = self.partitions.keys().next_back().copied().unwrap_or(0);
        let extra = widest_other.saturating_sub(partition);
        capacity.saturating_sub(self.resident).saturating_sub(extra)
    }
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

    /// Reserves `bytes` at the normal priority ([`Budget::reserve_as`]).
    pub fn reserve(&self, bytes: u64) -> Result<Reservation, BudgetError> {
        self.reserve_as(bytes, Priority::Normal)
    }

    /// Reserves `bytes`, waiting until they fit. Waiters are served in priority order, the oldest
    /// first within a priority, and none takes room while one ahead of it still waits: bulk work
    /// cannot keep taking the room an urgent partition waits for. Fails at once if they can never fit.
    pub fn reserve_as(&self, bytes: u64, priority: Priority) -> Result<Reservation, BudgetError> {
        let capacity = self.inner.capacity;
        if bytes > capacity {
            return Err(BudgetError::TooLarge { requested: bytes, capacity });
        }
        let mut state = self.lock();
        let ticket = state.ticket(priority);
        // The loop re-checks after every wake-up, so a notification can never be missed or misread.
        while !state.served(&ticket, bytes, capacity) {
            state = self.inner.freed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.queue.remove(&ticket);
        state.used += bytes;
        state.peak = state.peak.max(state.used);
        drop(state);
        // The next in line may fit too.
        self.inner.freed.notify_all();
        Ok(Reservation { budget: self.clone(), bytes })
    }

    /// Reserves `bytes` only if they fit now and nobody is waiting.
    pub fn try_reserve(&self, bytes: u64) -> Option<Reservation> {
        let mut state = self.lock();
        if !state.queue.is_empty() || state.used + bytes > self.inner.capacity {
            return None;
        }
        state.used += bytes;
        state.peak = state.peak.max(state.used);
        Some(Reservation { budget: self.clone(), bytes })
    }

    /// Reserves `bytes` for as long as the returned reservation lives (a key's host-resident part),
    /// for a holder whose partitions each reserve `partition` bytes. Admitted only if, with it, every
    /// resident holder's widest partition still fits beside all resident bytes, so partitions never
    /// wait for ever; then waits, ahead of every partition, until `bytes` are free (partitions on the
    /// host release theirs soon).
    pub fn reserve_resident(&self, bytes: u64, partition: u64) -> Result<ResidentReservation, BudgetError> {
        let capacity = self.inner.capacity;
        let mut state = self.lock();
        let ticket = state.ticket(Priority::Urgent);
        // Tickets are taken in order, so no partition's ticket is ahead of this one at the same
        // priority; resident holders admitted meanwhile are checked again after every wait.
        loop {
            let available = state.available(capacity, partition);
            if bytes.saturating_add(partition) > available {
                state.queue.remove(&ticket);
                drop(state);
                self.inner.freed.notify_all();
                return Err(BudgetError::NoRoom { available, requested: bytes, partition });
            }
            if state.served(&ticket, bytes, capacity) {
                break;
            }
            state = self.inner.freed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.queue.remove(&ticket);
        state.used += bytes;
        state.peak = state.peak.max(state.used);
        state.resident += bytes;
        *state.partitions.entry(partition).or_default() += 1;
        drop(state);
        self.inner.freed.notify_all();
        Ok(ResidentReservation { budget: self.clone(), bytes, partition })
    }

    /// Reservations waiting for room.
    pub fn waiters(&self) -> usize {
        self.lock().queue.len()
    }

    /// Bytes held by resident reservations.
    pub fn resident(&self) -> u64 {
        self.lock().resident
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

/// Bytes held from a [`Budget`] by a resident holder ([`Budget::reserve_resident`]); released when
/// dropped.
#[derive(Debug)]
pub struct ResidentReservation {
    budget: Budget,
    bytes: u64,
    partition: u64,
}

impl ResidentReservation {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The holder's partition size.
    pub fn partition(&self) -> u64 {
        self.partition
    }
}

impl Drop for ResidentReservation {
    fn drop(&mut self) {
        let mut state = self.budget.lock();
        state.used = state.used.saturating_sub(self.bytes);
        state.resident = state.resident.saturating_sub(self.bytes);
        if let Some(n) = state.partitions.get_mut(&self.partition) {
            *n -= 1;
            if *n == 0 {
                state.partitions.remove(&self.partition);
            }
        }
        drop(state);
        self.budget.inner.freed.notify_all();
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

    #[test]
    fn waiters_are_served_by_priority_then_age() {
        let b = Budget::new(100);
        let full = b.reserve(90).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let wait = |name: &'static str, priority: Priority| {
            let (b2, order) = (b.clone(), order.clone());
            let queued = b.waiters();
            let t = std::thread::spawn(move || {
                // Each needs more than half the budget, so they take it one at a time.
                let r = b2.reserve_as(60, priority).unwrap();
                order.lock().unwrap().push(name);
                drop(r);
            });
            // Queue them in this order.
            while b.waiters() == queued {
                std::thread::sleep(Duration::from_millis(1));
            }
            t
        };
        let threads = [
            wait("low", Priority::Low),
            wait("normal-1", Priority::Normal),
            wait("normal-2", Priority::Normal),
            wait("urgent", Priority::Urgent),
        ];
        // Room for one waiter at a time, and nobody jumps the line, even a small request that would fit.
        assert!(b.try_reserve(5).is_none(), "a waiter is in line");
        drop(full);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["urgent", "normal-1", "normal-2", "low"]);
        assert_eq!((b.used(), b.waiters()), (0, 0));
    }

    #[test]
    fn resident_holders_keep_room_for_the_widest_partition() {
        let b = Budget::new(100);
        // A key of 30 bytes with 40-byte partitions: 70 of 100.
        let wide = b.reserve_resident(30, 40).unwrap();
        // A second key with 10-byte partitions must leave room for the first key's 40: 30 + 20 + 40 = 90.
        let narrow = b.reserve_resident(20, 10).unwrap();
        assert_eq!((b.used(), b.resident()), (50, 50));
        // A third of 15 bytes would leave 35, less than the widest partition.
        assert_eq!(
            b.reserve_resident(15, 10).unwrap_err(),
            BudgetError::NoRoom { available: 20, requested: 15, partition: 10 }
        );
        // Its own partition counts too.
        assert!(matches!(b.reserve_resident(5, 50), Err(BudgetError::NoRoom { .. })));
        // A partition in flight only makes a resident reservation wait.
        let partition = b.reserve(45).unwrap();
        let waiter = {
            let b = b.clone();
            std::thread::spawn(move || b.reserve_resident(10, 10).map(|r| r.bytes()))
        };
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(b.used(), 95, "the resident reservation waits for the partition to leave");
        drop(partition);
        assert_eq!(waiter.join().unwrap(), Ok(10));
        assert_eq!(b.resident(), 50, "the waiter's reservation was dropped with its thread's result");
        drop(wide);
        // With the wide key gone, its partition size no longer counts.
        assert!(b.reserve_resident(60, 20).is_ok());
        drop(narrow);
        assert_eq!((b.used(), b.resident()), (0, 0));
    }
}
