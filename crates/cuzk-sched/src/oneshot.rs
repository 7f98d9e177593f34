//! A one-value channel that can be waited on from a thread (blocking, with or without a timeout) or
//! awaited from any async runtime, so job handles work for both without tying the crate to one runtime.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

struct State<T> {
    value: Option<T>,
    /// The sender is gone: either the value was sent or it never will be.
    closed: bool,
    waker: Option<Waker>,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn close(&self, value: Option<T>) {
        let waker = {
            let mut s = self.lock();
            if s.closed {
                return;
            }
            s.value = value;
            s.closed = true;
            s.waker.take()
        };
        self.ready.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The sending half; dropping it unsent tells the receiver no value will come.
pub(crate) struct Sender<T>(Arc<Shared<T>>);
/// The receiving half.
pub(crate) struct Receiver<T>(Arc<Shared<T>>);

pub(crate) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State { value: None, closed: false, waker: None }),
        ready: Condvar::new(),
    });
    (Sender(shared.clone()), Receiver(shared))
}

impl<T> Sender<T> {
    pub(crate) fn send(self, value: T) {
        self.0.close(Some(value));
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.0.close(None);
    }
}

/// What a wait with a timeout can end in.
pub(crate) enum Recv<T> {
    Value(T),
    /// The sender went away without sending (or the value was taken already).
    Closed,
    TimedOut,
}

impl<T> Receiver<T> {
    /// Blocks until the value arrives (or never will), waiting at most `timeout` when one is given.
    pub(crate) fn recv(&self, timeout: Option<Duration>) -> Recv<T> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = self.0.lock();
        loop {
            if let Some(v) = s.value.take() {
                return Recv::Value(v);
            }
            if s.closed {
                return Recv::Closed;
            }
            s = match deadline {
                None => self.0.ready.wait(s).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Recv::TimedOut;
                    }
                    self.0.ready.wait_timeout(s, left).unwrap_or_else(|p| p.into_inner()).0
                }
            };
        }
    }

    /// Polls for the value from an async context.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = self.0.lock();
        if let Some(v) = s.value.take() {
            return Poll::Ready(Some(v));
        }
        if s.closed {
            return Poll::Ready(None);
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
