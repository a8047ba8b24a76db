//! Durable expiry handlers: bindings, the outbox written with expiry
//! tombstones, the dispatcher that calls the handlers, and dead letters.
//!
//! Delivery is at least once. An event enters the outbox in the same store
//! write as the expiry tombstone of its record; the dispatcher learns of it
//! once that write succeeded, calls the bound handler, applies the handler's
//! actions through the normal write path, and only then deletes the event.
//! A crash anywhere in between leaves the event in the outbox, and boot
//! delivers it again. See docs/expiry.md.
//!
//! Expiry depends on the store, the plugin sandbox and the leaves (names,
//! record, clock, metrics), never on the node or the fragments: fragments
//! see the outbox through [`crate::fragment::flush::ExpiryOutbox`], and the
//! dispatcher writes actions through [`actions::ActionWriter`]; the node
//! implements both. The events' storage codec is
//! [`crate::store::PendingEvent`].
//!
//! | file | what |
//! | --- | --- |
//! | `binding.rs` | bindings, their limits and storage |
//! | `outbox.rs` | shared state: bindings, outbox sequence, statistics, the dispatcher's channel |
//! | `entries.rs` | outbox and dead letters in the store: boot load, paging, redrive |
//! | `event.rs` | event ids as hex |
//! | `command.rs` | messages to the dispatcher, queue status |
//! | `queue.rs` | one partition's queue: fresh events, retries, taking a batch |
//! | `scheduler.rs` | the dispatcher task: commands, which batches start |
//! | `deliver.rs` | one batch: call the handler on the plugin threads, apply, settle |
//! | `actions.rs` | validating a handler's answer, writing its actions |
//! | `settle.rs` | deleting, retrying or dead-lettering delivered events; backoff |
//! | `error.rs` | the API's errors, and which delivery failures cost an attempt |

pub(crate) mod actions;
pub(crate) mod binding;
pub(crate) mod command;
pub(crate) mod deliver;
pub(crate) mod entries;
mod error;
pub(crate) mod event;
pub(crate) mod outbox;
mod queue;
pub(crate) mod scheduler;
pub(crate) mod settle;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use crate::store::PendingEvent;
pub use binding::{BindRequest, Binding};
pub use command::QueueStatus;
pub use entries::DeadLetterPage;
pub use error::ExpiryError;
pub use outbox::TableStats;

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
    /// Handler calls in flight at once over the node. Default 4. They run
    /// on the plugin threads, at most all but one of them at once.
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
