//! The snapshotter: flushes buffered writes every `flush_interval`, which is
//! also how a failed flush gets retried.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::task::JoinHandle;

use super::runtime::FragmentShared;

/// Messages of the snapshotter.
pub enum SnapshotterMsg {
    /// Flush the fragment's buffer now; replies whether it succeeded.
    Flush(RpcReplyPort<bool>),
}

/// The snapshotter actor and its interval timer.
pub struct Snapshotter;

/// The snapshotter's state: shared fragment and its timer task.
pub struct SnapshotterState {
    shared: Arc<FragmentShared>,
    timer: Option<JoinHandle<()>>,
}

async fn timer(snapshotter: ActorRef<SnapshotterMsg>, shared: Arc<FragmentShared>) {
    let mut ticks = tokio::time::interval(shared.config.flush_interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if !shared.state.persistence().has_backlog() {
            continue;
        }
        if !matches!(
            snapshotter.call(SnapshotterMsg::Flush, None).await,
            Ok(ractor::rpc::CallResult::Success(_))
        ) {
            return;
        }
    }
}

impl Actor for Snapshotter {
    type Msg = SnapshotterMsg;
    type State = SnapshotterState;
    type Arguments = Arc<FragmentShared>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        shared: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SnapshotterState {
            shared,
            timer: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.timer = Some(tokio::spawn(timer(myself, state.shared.clone())));
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
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SnapshotterMsg::Flush(reply) => {
                // Failures are counted and logged by the buffer, which keeps
                // the batch for the next tick.
                let ok = state.shared.state.persistence().flush().await.is_ok();
                let _ = reply.send(ok);
            }
        }
        Ok(())
    }
}
