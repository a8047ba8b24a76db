//! Worker actors: run admitted operations against the fragment state.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;

use super::flush::BacklogFull;
use super::pool::Permit;
use super::state::{FragmentState, Mutation, WriteOutcome};
use crate::clock::now_ms;
use crate::names::TableName;

/// What an operation does.
pub enum Task {
    /// Apply a mutation to one key.
    Write {
        /// Table of the key.
        table: TableName,
        /// The key.
        key: Arc<str>,
        /// The mutation.
        mutation: Mutation,
        /// Receives the outcome. Dropped unanswered only if the worker dies.
        reply: oneshot::Sender<Result<WriteOutcome, BacklogFull>>,
    },
    /// Run background work (a query page) against the fragment state. The
    /// closure answers its caller itself; dropping it unanswered tells the
    /// caller the work was interrupted.
    Run(Box<dyn FnOnce(&FragmentState) + Send>),
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Task::Write { table, key, .. } => write!(f, "Write({table}, {key:?})"),
            Task::Run(_) => f.write_str("Run"),
        }
    }
}

/// An admitted operation: its task, its routing hash and its admission slot
/// (released when the operation is done or dropped).
#[derive(Debug)]
pub struct Operation {
    /// The work.
    pub task: Task,
    /// Hash of the key; picks the worker, so one key's operations stay in order.
    pub route: u64,
    /// Admission slot in the pool the operation was admitted to.
    pub permit: Permit,
}

/// A worker. Stateless apart from the shared fragment state, so a restarted
/// worker continues where the dead one stopped.
pub struct Worker;

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
        match operation.task {
            Task::Write {
                table,
                key,
                mutation,
                reply,
            } => {
                let outcome = state.apply(&table, &key, mutation, now_ms());
                let _ = reply.send(outcome);
            }
            Task::Run(work) => work(state),
        }
        drop(operation.permit);
        Ok(())
    }
}
