//! Periodic fragment maintenance as a supervised actor: a timer task waits
//! until the work is due and asks the actor to run it, so the work itself
//! runs inside the actor (restarted by the supervisor, drained on quiesce).

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, ActorStatus, RpcReplyPort};
use tokio::task::JoinHandle;

use super::runtime::FragmentShared;

/// A kind of periodic maintenance.
pub(crate) trait Maintenance: Send + Sync + 'static {
    /// Resolves when the work is next due.
    fn due(shared: &FragmentShared) -> impl Future<Output = ()> + Send;
    /// Do the work once. Failures are the work's to count and log: the next
    /// run retries.
    fn run(shared: &FragmentShared) -> impl Future<Output = ()> + Send;
}

/// Ask the actor to run its work now; answered when done.
pub(crate) struct RunNow(pub RpcReplyPort<()>);

/// The actor running maintenance `M`.
pub(crate) struct Periodic<M>(PhantomData<fn() -> M>);

impl<M> Periodic<M> {
    /// A handler for `Actor::spawn_linked`.
    pub(crate) fn new() -> Self {
        Periodic(PhantomData)
    }
}

impl<M> Default for Periodic<M> {
    fn default() -> Self {
        Self::new()
    }
}

/// The actor's state: the shared fragment and its timer task.
pub(crate) struct PeriodicState {
    shared: Arc<FragmentShared>,
    timer: Option<JoinHandle<()>>,
}

async fn timer<M: Maintenance>(actor: ActorRef<RunNow>, shared: Arc<FragmentShared>) {
    loop {
        // A killed actor skips post_stop: its timer notices and ends here.
        if actor.get_status() >= ActorStatus::Stopping {
            return;
        }
        M::due(&shared).await;
        if !matches!(
            actor.call(RunNow, None).await,
            Ok(ractor::rpc::CallResult::Success(()))
        ) {
            return; // The actor stopped; its successor runs its own timer.
        }
    }
}

impl<M: Maintenance> Actor for Periodic<M> {
    type Msg = RunNow;
    type State = PeriodicState;
    type Arguments = Arc<FragmentShared>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        shared: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(PeriodicState {
            shared,
            timer: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.timer = Some(tokio::spawn(timer::<M>(myself, state.shared.clone())));
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        RunNow(reply): Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        M::run(&state.shared).await;
        let _ = reply.send(());
        Ok(())
    }
}
