//! Worker actors of the `high` pool: apply admitted writes to the fragment state.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;

use super::error::BacklogFull;
use super::pool::Permit;
use super::state::{FragmentState, Mutation, WriteOutcome};
use super::turn::Queued;
use crate::clock::now_ms;
use crate::names::TableName;
use crate::write::{Condition, Origin};

/// A mutation of one key, with where to send its outcome.
pub(crate) struct Write {
    /// Table of the key.
    pub(crate) table: TableName,
    /// The key.
    pub(crate) key: Arc<str>,
    /// The mutation.
    pub(crate) mutation: Mutation,
    /// What the key's record must be for the mutation to apply.
    pub(crate) condition: Condition,
    /// Who makes it (a change handler's writes emit no change events).
    pub(crate) origin: Origin,
    /// Receives the outcome. Dropped unanswered only if the worker dies.
    pub(crate) reply: oneshot::Sender<Result<WriteOutcome, BacklogFull>>,
}

impl std::fmt::Debug for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Write({}, {:?})", self.table, self.key)
    }
}

/// An admitted operation: its write, its routing hash, its admission slot
/// and its place in its worker slot's queue (both released when the
/// operation is done or dropped).
#[derive(Debug)]
pub(crate) struct Operation {
    /// The work.
    pub(crate) write: Write,
    /// Hash of the key; picks the worker, so one key's operations stay in order.
    pub(crate) route: u64,
    /// Admission slot in the `high` pool.
    pub(crate) permit: Permit,
    /// Place in the queue of its worker slot's [`Turn`](super::turn::Turn).
    pub(crate) queued: Queued,
}

/// A worker. Stateless apart from the shared fragment state, so a restarted
/// worker continues where the dead one stopped.
pub(crate) struct Worker;

impl Actor for Worker {
    type Msg = Operation;
    type State = Arc<FragmentState>;
    type Arguments = Arc<FragmentState>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        operation: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let Operation {
            write,
            permit,
            queued,
            ..
        } = operation;
        let Write {
            table,
            key,
            mutation,
            condition,
            origin,
            reply,
        } = write;
        let outcome =
            queued.apply(|| state.write(&table, &key, mutation, &condition, origin, now_ms()));
        // Out of the queue before the caller hears: its next write of the
        // slot may then apply inline.
        drop(queued);
        let _ = reply.send(outcome);
        drop(permit);
        Ok(())
    }
}
