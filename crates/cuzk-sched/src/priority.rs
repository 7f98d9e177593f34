//! How urgent a job is: the order of the queues and of the budget's waiters.

/// How urgent a job is. Higher priorities take every free worker first, at partition boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Priority {
    /// Background work.
    Low,
    /// The default.
    #[default]
    Normal,
    /// Ahead of normal work.
    High,
    /// Proofs that must never wait behind bulk work (e.g. WinningPoSt).
    Urgent,
}
