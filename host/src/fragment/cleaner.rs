//! The cleaner: converts due expirations, waking at the fragment's earliest
//! deadline and at least every `clean_interval`.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, ActorStatus, RpcReplyPort};
use tokio::task::JoinHandle;

use super::runtime::FragmentShared;
use crate::node::clock::now_ms;

/// Messages of the cleaner.
pub enum CleanerMsg {
    /// Convert everything due now, page by page, then flush. Replies with
    /// the number of converted records.
    Sweep(RpcReplyPort<usize>),
}

/// The cleaner actor. Its timer task asks it to sweep; a restarted cleaner
/// starts a new timer and continues from the shared deadline index.
pub struct Cleaner;

/// The cleaner's state: shared fragment and its timer task.
pub struct CleanerState {
    shared: Arc<FragmentShared>,
    timer: Option<JoinHandle<()>>,
}

async fn timer(cleaner: ActorRef<CleanerMsg>, shared: Arc<FragmentShared>) {
    let state = &shared.state;
    let interval = shared.config.clean_interval.as_millis().max(1) as u64;
    loop {
        if cleaner.get_status() >= ActorStatus::Stopping {
            return; // Killed: its successor runs its own timer.
        }
        let changed = state.expiry_wake().changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let now = now_ms();
        let next = state
            .earliest_deadline()
            .map_or(now + interval, |deadline| deadline.min(now + interval));
        state.expiry_wake().plan(next);
        if next > now {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(next - now)) => {}
                _ = changed => continue,
            }
        }
        if !matches!(
            cleaner.call(CleanerMsg::Sweep, None).await,
            Ok(ractor::rpc::CallResult::Success(_))
        ) {
            return; // The cleaner stopped; its successor runs its own timer.
        }
    }
}

impl Actor for Cleaner {
    type Msg = CleanerMsg;
    type State = CleanerState;
    type Arguments = Arc<FragmentShared>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        shared: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(CleanerState {
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
            CleanerMsg::Sweep(reply) => {
                let fragment = &state.shared.state;
                let now = now_ms();
                let mut converted = 0;
                loop {
                    let page = fragment.expire_page(now);
                    converted += page.converted;
                    if !page.more || page.converted == 0 {
                        break;
                    }
                    // Let writers and readers at the partitions between pages.
                    tokio::task::yield_now().await;
                }
                if converted > 0
                    && let Err(error) = fragment.persistence().flush().await
                {
                    // The conversions stay buffered and are retried by the
                    // snapshotter; readers already treat the records as gone.
                    tracing::warn!(fragment = fragment.id(), %error, "flush after expiry failed");
                }
                let _ = reply.send(converted);
            }
        }
        Ok(())
    }
}
