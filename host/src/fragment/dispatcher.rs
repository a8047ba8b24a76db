//! The dispatcher: owns the `high` pool's worker actors, publishes them for
//! the fragment's handle to route writes to (sticky by key), and routes the
//! writes sent to it while a worker is being replaced.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, ActorStatus, SupervisionEvent};

use super::runtime::{FragmentShared, worker_slot};
use super::worker::{Operation, Worker};

/// The dispatcher actor. Workers are linked to it: a dead worker is
/// restarted in its slot (counted as `worker-high-<slot>`); when the
/// dispatcher stops, it drains its workers first so admitted operations finish.
///
/// Only writes reach it: the `background` pool admits query pages, which run
/// on the query threads, so it has no workers here.
pub(crate) struct Dispatcher;

/// The `high` pool's worker refs, by slot.
pub(crate) struct DispatcherState {
    shared: Arc<FragmentShared>,
    workers: Vec<ActorRef<Operation>>,
}

impl Dispatcher {
    async fn spawn_worker(
        myself: &ActorRef<Operation>,
        shared: &Arc<FragmentShared>,
    ) -> Result<ActorRef<Operation>, ActorProcessingErr> {
        let (worker, _) =
            Actor::spawn_linked(None, Worker, shared.state.clone(), myself.get_cell()).await?;
        Ok(worker)
    }
}

impl Actor for Dispatcher {
    type Msg = Operation;
    type State = DispatcherState;
    type Arguments = Arc<FragmentShared>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        shared: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let count = shared.config.high_pool.workers.max(1);
        let mut workers = Vec::with_capacity(count);
        for _ in 0..count {
            match Self::spawn_worker(&myself, &shared).await {
                Ok(worker) => workers.push(worker),
                Err(error) => {
                    // Roll back the workers already started.
                    for worker in &workers {
                        worker.stop(None);
                    }
                    return Err(error);
                }
            }
        }
        shared.set_workers(&workers);
        Ok(DispatcherState { shared, workers })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        for worker in &state.workers {
            let _ = worker.get_cell().drain();
        }
        for worker in &state.workers {
            let _ = worker.get_cell().wait(None).await;
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        operation: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let workers = &state.workers;
        let worker = &workers[worker_slot(operation.route, workers.len())];
        // A dead worker's slot is refilled on its supervision event; an
        // operation sent meanwhile is dropped with its reply, which its
        // caller sees as an interrupted operation, never as success.
        let _ = worker.send_message(operation);
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let dead = match &event {
            SupervisionEvent::ActorFailed(cell, _)
            | SupervisionEvent::ActorTerminated(cell, _, _) => cell.clone(),
            _ => return Ok(()),
        };
        if myself.get_status() != ActorStatus::Running {
            return Ok(());
        }
        let slot = state
            .workers
            .iter()
            .position(|worker| worker.get_id() == dead.get_id());
        if let Some(slot) = slot {
            if let SupervisionEvent::ActorFailed(_, error) = &event {
                tracing::warn!(fragment = state.shared.state.id(), pool = "high", slot, %error, "worker failed; restarting");
            }
            let worker = Self::spawn_worker(&myself, &state.shared).await?;
            state.workers[slot] = worker;
            state.shared.set_workers(&state.workers);
            state.shared.count_restart(&format!("worker-high-{slot}"));
        }
        Ok(())
    }
}
