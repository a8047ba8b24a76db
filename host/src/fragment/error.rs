//! Why the fragment runtime refused or could not finish something. A leaf:
//! the pools, the write buffer, the supervisor and the node's handle report
//! these, and the node's error type wraps them.

use crate::store::FragmentId;

/// An operation could not be admitted: the pool's queue is full.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fragment {fragment} {pool} pool is full ({capacity} operations queued); retry shortly")]
pub struct Shed {
    /// Fragment whose pool is full.
    pub fragment: FragmentId,
    /// Pool name.
    pub pool: &'static str,
    /// The pool's capacity.
    pub capacity: usize,
}

/// The write buffer is over its byte limit; the write was not applied.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "fragment {fragment} has {pending_bytes} bytes waiting for storage (limit {limit_bytes}); the store is slow or failing, retry later"
)]
pub struct BacklogFull {
    /// The fragment whose buffer is full.
    pub fragment: FragmentId,
    /// Bytes waiting to be flushed.
    pub pending_bytes: usize,
    /// The configured limit (`max_backlog_bytes`).
    pub limit_bytes: usize,
}

/// An operation could not be handed to the fragment.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SubmitError {
    /// The pool is full; the operation was shed (and counted).
    #[error(transparent)]
    Shed(#[from] Shed),
    /// The fragment is quiescing or stopped.
    #[error("fragment {0} is shutting down")]
    Stopped(FragmentId),
}

/// A fragment could not reach its final durability fence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FragmentShutdownError {
    /// A child actor could not be drained.
    #[error("fragment {fragment}: draining {child} failed: {reason}")]
    Actor {
        /// The fragment.
        fragment: FragmentId,
        /// The child that did not drain.
        child: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The final flush failed; the batch is retained and quiesce can be retried.
    #[error(
        "fragment {fragment}: final flush failed (batch retained, retry the shutdown): {reason}"
    )]
    Storage {
        /// The fragment.
        fragment: FragmentId,
        /// The store error.
        reason: String,
    },
}
