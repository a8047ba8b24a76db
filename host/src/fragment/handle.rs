//! The node's handle on a running fragment: starts its supervisor, admits
//! and routes operations, asks for health, quiesce and stop.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{Actor, ActorRef};
use tokio::sync::oneshot;

use super::error::{BacklogFull, FragmentShutdownError, SubmitError};
use super::health::FragmentHealth;
use super::pool::{Admission, Permit, Priority};
use super::runtime::{FragmentConfig, FragmentShared, Replicator};
use super::state::{FragmentState, Mutation, WriteOutcome};
use super::supervisor::{Child, FragmentSupervisor, SupervisorMsg};
use super::turn::Queued;
use super::worker::{Operation, Write};
use crate::clock::now_ms;
use crate::names::TableName;
use crate::write::{Condition, Origin};

/// How long [`Fragment::submit_write`] waits for a restarting dispatcher.
const DISPATCHER_RESTART_WAIT: Duration = Duration::from_secs(2);

/// The node's handle on a running fragment.
pub(crate) struct Fragment {
    shared: Arc<FragmentShared>,
    supervisor: ActorRef<SupervisorMsg>,
}

impl Fragment {
    /// Start the supervisor (and through it every child) for `state`.
    pub(crate) async fn start(
        state: Arc<FragmentState>,
        config: FragmentConfig,
    ) -> Result<Self, ractor::SpawnErr> {
        let shared = FragmentShared::new(state, config);
        let (supervisor, _) = Actor::spawn(None, FragmentSupervisor, shared.clone()).await?;
        Ok(Self { shared, supervisor })
    }

    /// The fragment's shared state (reads go straight to it).
    pub(crate) fn state(&self) -> &Arc<FragmentState> {
        &self.shared.state
    }

    /// Admission to the `high` pool, for a write that a replicated
    /// fragment proposes without a worker.
    pub(crate) fn admit_write(&self) -> Result<Permit, SubmitError> {
        Ok(self.shared.admission.admit(Priority::High)?)
    }

    /// Give a replicated fragment's maintenance its Raft group.
    pub(crate) fn set_replicator(&self, replicator: Arc<dyn Replicator>) {
        self.shared.set_replicator(replicator);
    }

    /// Admit a write to the `High` pool and apply it: on the caller's task
    /// when inline writes are on, the fragment takes writes and nothing of
    /// the key's worker slot is queued or applying
    /// ([`Turn::inline`](super::turn::Turn::inline)); else through the
    /// key's worker. The receiver yields the outcome, or is closed if the
    /// worker died (or the inline apply panicked) before answering (the
    /// write may or may not have been applied).
    pub(crate) async fn submit_write(
        &self,
        table: TableName,
        key: Arc<str>,
        mutation: Mutation,
        condition: Condition,
        origin: Origin,
        route: u64,
    ) -> Result<oneshot::Receiver<Result<WriteOutcome, BacklogFull>>, SubmitError> {
        let permit = self.shared.admission.admit(Priority::High)?;
        let (reply, outcome) = oneshot::channel();
        let turn = self.shared.turn(route);
        if self.shared.config.inline_writes
            && let Some(applying) = turn.inline()
            && self.shared.takes_writes()
        {
            let applied = catch_unwind(AssertUnwindSafe(|| {
                self.shared
                    .state
                    .write(&table, &key, mutation, &condition, origin, now_ms())
            }));
            drop(applying);
            match applied {
                Ok(result) => {
                    let _ = reply.send(result);
                }
                // As a worker's death would: the caller hears "interrupted".
                Err(_) => tracing::error!(
                    fragment = self.shared.state.id(),
                    table = %table,
                    "a write panicked while it applied"
                ),
            }
            drop(permit);
            return Ok(outcome);
        }
        let operation = Operation {
            write: Write {
                table,
                key,
                mutation,
                condition,
                origin,
                reply,
            },
            route,
            permit,
            queued: Queued::new(turn.clone()),
        };
        self.send(operation).await?;
        Ok(outcome)
    }

    /// A slot in the `background` pool for a query page, which runs on a
    /// query thread, not on this fragment's workers; the slot is held until
    /// the permit drops. Fails with [`SubmitError::Shed`] (counted) when the
    /// pool's capacity is reached.
    pub(crate) fn admit_background(&self) -> Result<Permit, SubmitError> {
        Ok(self.shared.admission.admit(Priority::Background)?)
    }

    /// [`Self::admit_background`] for a read that ends on the caller's
    /// stack, the permit borrowing this fragment's admission.
    pub(crate) fn admit_background_borrowed(&self) -> Result<Permit<&Admission>, SubmitError> {
        Ok(self.shared.admission.admit_borrowed(Priority::Background)?)
    }

    /// Send `operation` to its key's worker; through the dispatcher when
    /// that worker is gone (the dispatcher is replacing it) or no worker is
    /// published, waiting up to [`DISPATCHER_RESTART_WAIT`] for a
    /// restarting dispatcher.
    async fn send(&self, mut operation: Operation) -> Result<(), SubmitError> {
        if let Some(worker) = self.shared.worker(operation.route) {
            match worker.send_message(operation) {
                Ok(()) => return Ok(()),
                Err(ractor::MessagingErr::SendErr(returned)) => operation = returned,
                Err(_) => return Err(SubmitError::Stopped(self.shared.state.id())),
            }
        }
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
    pub(crate) async fn health(&self) -> Option<FragmentHealth> {
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
    pub(crate) async fn quiesce(&self) -> Result<(), FragmentShutdownError> {
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
    pub(crate) async fn stop(&self) {
        let _ = self.supervisor.stop_and_wait(None, None).await;
    }

    /// Kill one child abruptly, as a crash would; the supervisor restarts it
    /// with the same shared state. For tests and failure drills.
    pub(crate) async fn kill_child(&self, child: Child) {
        let _ = self
            .supervisor
            .call(|reply| SupervisorMsg::Kill(child, reply), None)
            .await;
    }
}
