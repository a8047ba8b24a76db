//! Per-fragment supervisor: child ownership, restart in place, startup
//! rollback, health and the quiesce sequence.

use std::sync::Arc;

use ractor::{
    Actor, ActorCell, ActorProcessingErr, ActorRef, ActorStatus, RpcReplyPort, SupervisionEvent,
};

use super::cleaner::Cleaner;
use super::dispatcher::Dispatcher;
use super::error::FragmentShutdownError;
use super::health::FragmentHealth;
use super::periodic::{Periodic, RunNow};
use super::runtime::FragmentShared;
use super::snapshotter::Snapshotter;
use super::worker::Operation;
use crate::clock::now_ms;

/// The supervised children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child {
    /// Routes operations to the worker pools.
    Dispatcher,
    /// Converts due expirations.
    Cleaner,
    /// Flushes buffered writes on an interval.
    Snapshotter,
}

impl Child {
    /// Name used in restart counts.
    pub fn name(self) -> &'static str {
        match self {
            Child::Dispatcher => "dispatcher",
            Child::Cleaner => "cleaner",
            Child::Snapshotter => "snapshotter",
        }
    }
}

/// Messages of the supervisor.
pub(crate) enum SupervisorMsg {
    /// Report health.
    Health(RpcReplyPort<FragmentHealth>),
    /// Stop periodic work, drain admitted operations, convert due
    /// expirations and flush. Retryable after a storage failure.
    Quiesce(RpcReplyPort<Result<(), FragmentShutdownError>>),
    /// Kill a child abruptly (fault injection for tests and drills); the
    /// supervisor restarts it like any crashed child.
    Kill(Child, RpcReplyPort<()>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Lifecycle {
    Running,
    Drained,
    Flushed,
}

/// The supervisor actor.
pub(crate) struct FragmentSupervisor;

/// The supervisor's state: the shared fragment and its children.
pub(crate) struct SupervisorState {
    shared: Arc<FragmentShared>,
    dispatcher: ActorRef<Operation>,
    cleaner: ActorRef<RunNow>,
    snapshotter: ActorRef<RunNow>,
    lifecycle: Lifecycle,
}

async fn spawn_child(
    child: Child,
    shared: &Arc<FragmentShared>,
    supervisor: ActorCell,
) -> Result<ActorCell, ActorProcessingErr> {
    let cell = match child {
        Child::Dispatcher => {
            let (dispatcher, _) =
                Actor::spawn_linked(None, Dispatcher, shared.clone(), supervisor).await?;
            shared.set_dispatcher(Some(dispatcher.clone()));
            dispatcher.get_cell()
        }
        Child::Cleaner => {
            let handler = Periodic::<Cleaner>::new();
            Actor::spawn_linked(None, handler, shared.clone(), supervisor)
                .await?
                .0
                .get_cell()
        }
        Child::Snapshotter => {
            let handler = Periodic::<Snapshotter>::new();
            Actor::spawn_linked(None, handler, shared.clone(), supervisor)
                .await?
                .0
                .get_cell()
        }
    };
    Ok(cell)
}

impl SupervisorState {
    fn cell(&self, child: Child) -> ActorCell {
        match child {
            Child::Dispatcher => self.dispatcher.get_cell(),
            Child::Cleaner => self.cleaner.get_cell(),
            Child::Snapshotter => self.snapshotter.get_cell(),
        }
    }

    fn replace(&mut self, child: Child, cell: ActorCell) {
        match child {
            Child::Dispatcher => self.dispatcher = ActorRef::from(cell),
            Child::Cleaner => self.cleaner = ActorRef::from(cell),
            Child::Snapshotter => self.snapshotter = ActorRef::from(cell),
        }
    }

    async fn drain(&self, child: Child) -> Result<(), FragmentShutdownError> {
        let cell = self.cell(child);
        if cell.get_status() < ActorStatus::Draining {
            let _ = cell.drain();
        }
        cell.wait(None)
            .await
            .map_err(|e| FragmentShutdownError::Actor {
                fragment: self.shared.state.id(),
                child: child.name(),
                reason: e.to_string(),
            })
    }

    async fn quiesce(&mut self) -> Result<(), FragmentShutdownError> {
        let fragment = self.shared.state.id();
        if self.lifecycle < Lifecycle::Drained {
            // Stop the periodic producers, then close admission to the pools
            // and let the dispatcher drain what it already accepted.
            self.lifecycle = Lifecycle::Drained;
            self.drain(Child::Cleaner).await?;
            self.drain(Child::Snapshotter).await?;
            self.shared.set_dispatcher(None);
            self.drain(Child::Dispatcher).await?;
        }
        if self.lifecycle < Lifecycle::Flushed {
            // Catch deadlines that passed after the cleaner's last sweep,
            // then write everything buffered (including batches retained by
            // earlier failures).
            // A replica converts only through its group's log.
            if !self.shared.config.replicated {
                self.shared.state.expire_all(now_ms());
            }
            self.shared.state.persistence().flush().await.map_err(|e| {
                FragmentShutdownError::Storage {
                    fragment,
                    reason: e.to_string(),
                }
            })?;
            self.lifecycle = Lifecycle::Flushed;
        }
        Ok(())
    }
}

impl Actor for FragmentSupervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = Arc<FragmentShared>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        shared: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut started: Vec<ActorCell> = Vec::new();
        for child in [Child::Dispatcher, Child::Cleaner, Child::Snapshotter] {
            match spawn_child(child, &shared, myself.get_cell()).await {
                Ok(cell) => started.push(cell),
                Err(error) => {
                    // Startup rollback: stop the children already running.
                    shared.set_dispatcher(None);
                    for cell in &started {
                        let _ = cell.drain();
                    }
                    for cell in started {
                        let _ = cell.wait(None).await;
                    }
                    return Err(error);
                }
            }
        }
        Ok(SupervisorState {
            dispatcher: ActorRef::from(started[0].clone()),
            cleaner: ActorRef::from(started[1].clone()),
            snapshotter: ActorRef::from(started[2].clone()),
            shared,
            lifecycle: Lifecycle::Running,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Normal shutdown quiesces explicitly first; this covers other stops.
        state
            .quiesce()
            .await
            .map_err(|e| ActorProcessingErr::from(e.to_string()))
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::Health(reply) => {
                let _ = reply.send(FragmentHealth::collect(
                    &state.shared,
                    &state.dispatcher.get_cell(),
                ));
            }
            SupervisorMsg::Quiesce(reply) => {
                let _ = reply.send(state.quiesce().await);
            }
            SupervisorMsg::Kill(child, reply) => {
                if let Child::Dispatcher = child {
                    // Operations sent before the restart fail as interrupted.
                    state.shared.set_dispatcher(None);
                }
                let _ = state.cell(child).kill_and_wait(None).await;
                let _ = reply.send(());
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Planned drains end children normally: never restart them then.
        if state.lifecycle != Lifecycle::Running || myself.get_status() != ActorStatus::Running {
            return Ok(());
        }
        let dead = match &event {
            SupervisionEvent::ActorFailed(cell, _)
            | SupervisionEvent::ActorTerminated(cell, _, _) => cell.get_id(),
            _ => return Ok(()),
        };
        for child in [Child::Dispatcher, Child::Cleaner, Child::Snapshotter] {
            if state.cell(child).get_id() == dead {
                if let SupervisionEvent::ActorFailed(_, error) = &event {
                    tracing::warn!(fragment = state.shared.state.id(), child = child.name(), %error, "child failed; restarting");
                }
                let cell = spawn_child(child, &state.shared, myself.get_cell()).await?;
                state.replace(child, cell);
                state.shared.count_restart(child.name());
            }
        }
        Ok(())
    }
}
