//! The per-fragment runtime: shared state, worker pools, supervisor, cleaner
//! and snapshotter, and the handle the node uses to reach them.

pub mod cleaner;
pub mod dispatcher;
pub mod expiry;
pub mod flush;
pub mod health;
pub mod partition;
pub mod periodic;
pub mod pool;
pub mod runtime;
pub mod snapshotter;
pub mod state;
pub mod supervisor;
pub mod worker;

use std::sync::Arc;
use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{Actor, ActorRef};
use tokio::sync::oneshot;

pub use health::FragmentHealth;
use pool::{Priority, Shed};
use runtime::FragmentShared;
use state::{FragmentState, Mutation, WriteOutcome};
pub use supervisor::{Child, FragmentShutdownError};
use supervisor::{FragmentSupervisor, SupervisorMsg};
use worker::{Operation, Task};

use crate::names::TableName;

/// How long [`Fragment::submit_write`] waits for a restarting dispatcher.
const DISPATCHER_RESTART_WAIT: Duration = Duration::from_secs(2);

/// An operation could not be handed to the fragment.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SubmitError {
    /// The pool is full; the operation was shed (and counted).
    #[error(transparent)]
    Shed(#[from] Shed),
    /// The fragment is quiescing or stopped.
    #[error("fragment {0} is shutting down")]
    Stopped(u32),
}

/// The node's handle on a running fragment.
pub struct Fragment {
    shared: Arc<FragmentShared>,
    supervisor: ActorRef<SupervisorMsg>,
}

impl Fragment {
    /// Start the supervisor (and through it every child) for `state`.
    pub async fn start(
        state: Arc<FragmentState>,
        config: runtime::FragmentConfig,
    ) -> Result<Self, ractor::SpawnErr> {
        let shared = FragmentShared::new(state, config);
        let (supervisor, _) = Actor::spawn(None, FragmentSupervisor, shared.clone()).await?;
        Ok(Self { shared, supervisor })
    }

    /// The fragment's shared state (reads go straight to it).
    pub fn state(&self) -> &Arc<FragmentState> {
        &self.shared.state
    }

    /// Admit a write to the `High` pool and route it. The receiver yields
    /// the outcome, or is closed if the worker died before answering (the
    /// write may or may not have been applied).
    pub async fn submit_write(
        &self,
        table: TableName,
        key: Arc<str>,
        mutation: Mutation,
        route: u64,
    ) -> Result<oneshot::Receiver<Result<WriteOutcome, flush::BacklogFull>>, SubmitError> {
        let permit = self.shared.admission.admit(Priority::High)?;
        let (reply, outcome) = oneshot::channel();
        let operation = Operation {
            task: Task::Write {
                table,
                key,
                mutation,
                reply,
            },
            route,
            permit,
        };
        self.send(operation).await?;
        Ok(outcome)
    }

    /// Admit `work` to the `Background` pool and run it on a background
    /// worker. The work answers its caller itself (e.g. through a oneshot).
    pub async fn submit_background(
        &self,
        work: Box<dyn FnOnce(&FragmentState) + Send>,
    ) -> Result<(), SubmitError> {
        let permit = self.shared.admission.admit(Priority::Background)?;
        let operation = Operation {
            task: Task::Run(work),
            route: 0,
            permit,
        };
        self.send(operation).await
    }

    /// A slot in the `Background` pool for work that runs elsewhere (plugin
    /// pages on the blocking pool); the slot is held until the permit drops.
    pub fn admit_background(&self) -> Result<pool::Permit, SubmitError> {
        Ok(self.shared.admission.admit(Priority::Background)?)
    }

    async fn send(&self, mut operation: Operation) -> Result<(), SubmitError> {
        let deadline = tokio::time::Instant::now() + DISPATCHER_RESTART_WAIT;
        loop {
            if let Some(dispatcher) = self.shared.dispatcher() {
                match dispatcher.send_message(operation) {
                    Ok(()) => return Ok(()),
                    Err(ractor::MessagingErr::SendErr(returned)) => operation = returned,
                    Err(_) => return Err(SubmitError::Stopped(self.shared.state.id())),
                }
            }
            // No dispatcher: restarting after a crash, or stopped for good.
            if self.supervisor.get_status() != ractor::ActorStatus::Running
                || tokio::time::Instant::now() >= deadline
            {
                return Err(SubmitError::Stopped(self.shared.state.id()));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Health of the fragment, or `None` if the supervisor does not answer.
    pub async fn health(&self) -> Option<FragmentHealth> {
        match self
            .supervisor
            .call(SupervisorMsg::Health, Some(Duration::from_secs(5)))
            .await
        {
            Ok(CallResult::Success(health)) => Some(health),
            _ => None,
        }
    }

    /// Drain, expire and flush. Retryable after a storage failure.
    pub async fn quiesce(&self) -> Result<(), FragmentShutdownError> {
        let fragment = self.shared.state.id();
        match self.supervisor.call(SupervisorMsg::Quiesce, None).await {
            Ok(CallResult::Success(result)) => result,
            _ => Err(FragmentShutdownError::Actor {
                fragment,
                child: "supervisor",
                reason: "supervisor is not running".into(),
            }),
        }
    }

    /// Stop the supervisor and wait for its tree to end. Call after a
    /// successful [`Self::quiesce`].
    pub async fn stop(&self) {
        let _ = self.supervisor.stop_and_wait(None, None).await;
    }

    /// Kill one child abruptly, as a crash would; the supervisor restarts it
    /// with the same shared state. For tests and failure drills.
    pub async fn kill_child(&self, child: Child) {
        let _ = self
            .supervisor
            .call(|reply| SupervisorMsg::Kill(child, reply), None)
            .await;
    }
}
