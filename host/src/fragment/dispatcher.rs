//! The dispatcher: owns the worker pools and routes each operation to a
//! worker of its priority, sticky by key.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, ActorStatus, SupervisionEvent};

use super::pool::Priority;
use super::runtime::FragmentShared;
use super::worker::{Operation, Worker};

/// The dispatcher actor. Workers are linked to it: a dead worker is
/// restarted in its slot (counted as `worker-<pool>-<slot>`); when the
/// dispatcher stops, it drains its workers first so admitted operations finish.
pub(crate) struct Dispatcher;

/// Worker refs by pool, in [`Priority::ALL`] order.
pub(crate) struct DispatcherState {
    shared: Arc<FragmentShared>,
    pools: [Vec<ActorRef<Operation>>; 3],
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
        let mut pools: [Vec<ActorRef<Operation>>; 3] = Default::default();
        for priority in Priority::ALL {
            let workers = shared.config.pool(priority).workers.max(1);
            for _ in 0..workers {
                match Self::spawn_worker(&myself, &shared).await {
                    Ok(worker) => pools[priority as usize].push(worker),
                    Err(error) => {
                        // Roll back the workers already started.
                        for worker in pools.iter().flatten() {
                            worker.stop(None);
                        }
                        return Err(error);
                    }
                }
            }
        }
        Ok(DispatcherState { shared, pools })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        for worker in state.pools.iter().flatten() {
            let _ = worker.get_cell().drain();
        }
        for worker in state.pools.iter().flatten() {
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
        let pool = &state.pools[operation.permit.priority() as usize];
        let worker = &pool[(operation.route % pool.len() as u64) as usize];
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
        for priority in Priority::ALL {
            let slot = state.pools[priority as usize]
                .iter()
                .position(|worker| worker.get_id() == dead.get_id());
            if let Some(slot) = slot {
                if let SupervisionEvent::ActorFailed(_, error) = &event {
                    tracing::warn!(fragment = state.shared.state.id(), pool = priority.name(), slot, %error, "worker failed; restarting");
                }
                let worker = Self::spawn_worker(&myself, &state.shared).await?;
                state.pools[priority as usize][slot] = worker;
                state
                    .shared
                    .count_restart(&format!("worker-{}-{slot}", priority.name()));
            }
        }
        Ok(())
    }
}
