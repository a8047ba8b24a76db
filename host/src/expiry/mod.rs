//! Durable expiry handlers: bindings, the outbox written with expiry
//! tombstones, the dispatcher that calls the handlers, and dead letters.
//!
//! Delivery is at least once. An event enters the outbox in the same store
//! write as the expiry tombstone of its record; the dispatcher learns of it
//! once that write succeeded, calls the bound handler, applies the handler's
//! actions through the normal write path, and only then deletes the event.
//! A crash anywhere in between leaves the event in the outbox, and boot
//! delivers it again. See docs/expiry.md.

pub mod binding;
pub mod dispatcher;
pub mod entries;
pub mod event;
pub mod outbox;

use std::time::Duration;

pub use binding::{BindRequest, Binding};
pub use event::PendingEvent;
pub use outbox::{Outbox, TableStats};

use crate::store::StoreError;

/// How the dispatcher paces deliveries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpiryConfig {
    /// Delay before the first retry of a failed event; doubles with every
    /// attempt (with jitter) up to `backoff_max`. Default 100 ms.
    pub backoff_base: Duration,
    /// Longest delay between two attempts. Default 60 s.
    pub backoff_max: Duration,
    /// How long a partial batch waits for more events. Default 2 ms.
    pub linger: Duration,
    /// Handler calls in flight at once over the node. Default 4.
    pub concurrency: usize,
    /// Most actions a handler may return per event of its batch. Default 16.
    pub max_actions_per_event: usize,
}

impl Default for ExpiryConfig {
    fn default() -> Self {
        Self {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(60),
            linger: Duration::from_millis(2),
            concurrency: 4,
            max_actions_per_event: 16,
        }
    }
}

/// An expiry-handler operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExpiryError {
    /// The request is malformed or names a function that is not an expiry handler.
    #[error("{0}")]
    Invalid(String),
    /// The table, plugin, function or binding does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The operation conflicts with the current state (e.g. redrive with no binding).
    #[error("{0}")]
    Conflict(String),
    /// Storage failed; nothing was changed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The node is shutting down.
    #[error("the node is shutting down")]
    ShuttingDown,
}
