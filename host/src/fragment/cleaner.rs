//! The cleaner: converts due expirations, waking at the fragment's earliest
//! deadline and at least every `clean_interval`.

use std::time::Duration;

use super::periodic::Maintenance;
use super::runtime::FragmentShared;
use crate::clock::now_ms;

/// Expiry conversion, run by a [`super::periodic::Periodic`] actor.
pub(crate) struct Cleaner;

impl Maintenance for Cleaner {
    async fn due(shared: &FragmentShared) {
        let state = &shared.state;
        let interval = shared.config.clean_interval.as_millis().max(1) as u64;
        loop {
            // Listen before reading the deadlines, so an earlier deadline
            // offered in between still wakes us.
            let changed = state.expiry_wake().changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let now = now_ms();
            let next = state
                .earliest_deadline()
                .map_or(now + interval, |deadline| deadline.min(now + interval));
            state.expiry_wake().plan(next);
            if next <= now {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(next - now)) => return,
                _ = changed => {}
            }
        }
    }

    async fn run(shared: &FragmentShared) {
        let fragment = &shared.state;
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
    }
}
