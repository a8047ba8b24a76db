//! Messages to the dispatcher task, and what it answers about a table's
//! queues. A leaf the outbox (which sends) and the scheduler (which
//! receives) share.

use tokio::sync::oneshot;

use super::queue::Slot;
use crate::names::TableName;
use crate::store::{FragmentId, PendingEvent};

/// Messages to the dispatcher.
pub(crate) enum Command {
    /// Events now durable in the outbox.
    Events(Vec<PendingEvent>),
    /// A batch finished; its events to try again.
    Finished(Finished),
    /// Report on one table's queues.
    Status(TableName, oneshot::Sender<QueueStatus>),
    /// Drop the table's queued events that are not in flight; answers with
    /// them so the caller deletes them from the store. Events of a batch in
    /// flight that are not handled are deleted when it finishes.
    Purge(TableName, oneshot::Sender<Vec<PendingEvent>>),
    /// Stop forming batches; answer once none is in flight.
    Stop(oneshot::Sender<()>),
    /// In a cluster: this node now leads the fragment. Its events are
    /// accepted from now on but not delivered before [`Command::Takeover`].
    Lead(FragmentId),
    /// In a cluster: the fragment's events in the outbox, loaded after
    /// [`Command::Lead`] (and after this leader applied every earlier
    /// entry); delivery of the fragment starts.
    Takeover(FragmentId, Vec<PendingEvent>),
    /// In a cluster: this node no longer leads the fragment; its queued
    /// events are dropped (they stay in the outbox for the next leader).
    Forget(FragmentId),
}

/// A finished batch.
pub(crate) struct Finished {
    /// Its table partition.
    pub table: TableName,
    /// Its fragment.
    pub fragment: FragmentId,
    /// Its events to deliver again (after their `not_before`).
    pub retry: Vec<Slot>,
    /// Events the batch held.
    pub events: usize,
}

/// One table's queued events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStatus {
    /// Events in the outbox not yet handled (in flight included).
    pub pending: usize,
    /// Events being delivered now.
    pub in_flight: usize,
    /// Events waiting out a retry delay.
    pub backing_off: usize,
    /// Deadline of the oldest pending event (Unix ms).
    pub oldest_deadline_ms: Option<u64>,
}
