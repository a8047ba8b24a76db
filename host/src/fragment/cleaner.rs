//! The cleaner: converts due expirations and purges tombstones past the
//! retention, waking at the fragment's earliest deadline, when its oldest
//! tombstone comes due, and at least every `clean_interval`. On a
//! replicated fragment only the leader's cleaner works, proposing each
//! page as a command; the others only watch for leadership.

use std::time::Duration;

use super::command::Command;
use super::periodic::Maintenance;
use super::runtime::{FragmentShared, Maintainer, Replicator};
use crate::clock::now_ms;

/// How often a replica that does not lead checks whether it now does.
const FOLLOWER_POLL: Duration = Duration::from_millis(100);

/// Expiry conversion and tombstone purge, run by a
/// [`super::periodic::Periodic`] actor.
pub(crate) struct Cleaner;

impl Maintenance for Cleaner {
    async fn due(shared: &FragmentShared) {
        let state = &shared.state;
        let interval = shared.config.clean_interval.as_millis().max(1) as u64;
        let retention = retention_ms(shared);
        if matches!(shared.maintainer().await, Maintainer::Idle) {
            tokio::time::sleep(FOLLOWER_POLL).await;
            return;
        }
        loop {
            // Listen before reading the deadlines, so an earlier deadline
            // offered in between still wakes us.
            let changed = state.expiry_wake().changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let now = now_ms();
            let purge_due = state
                .oldest_tombstone()
                .map(|since| since.saturating_add(retention));
            let next = [state.earliest_deadline(), purge_due]
                .into_iter()
                .flatten()
                .fold(now + interval, u64::min);
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
        match shared.maintainer().await {
            Maintainer::Local => {}
            Maintainer::Propose(group) => return propose(shared, group).await,
            Maintainer::Idle => return,
        }
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
        let cutoff = now.saturating_sub(retention_ms(shared));
        let mut purged = 0;
        loop {
            let page = fragment.purge_page(cutoff);
            purged += page.purged;
            if !page.more || page.purged == 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        if converted + purged > 0
            && let Err(error) = fragment.persistence().flush().await
        {
            // The conversions and removals stay buffered and are retried by the
            // snapshotter; readers already treat the records as gone.
            tracing::warn!(fragment = fragment.id(), %error, "flush after expiry and purge failed");
        }
    }
}

/// The leader's pass: each page of due records, then of old tombstones, is
/// proposed as a command and applied on every replica. Stops at the first
/// proposal that fails (leadership lost, no quorum); the next pass retries.
async fn propose(shared: &FragmentShared, group: &dyn Replicator) {
    let fragment = &shared.state;
    let now = now_ms();
    loop {
        let (command, more) = fragment.due_page(now);
        if command.due.is_empty() {
            break;
        }
        if let Err(error) = group.propose(Command::Expire(command)).await {
            tracing::debug!(fragment = fragment.id(), %error, "expiry proposal not committed");
            return;
        }
        if !more {
            break;
        }
    }
    let cutoff = now.saturating_sub(retention_ms(shared));
    loop {
        let (command, more) = fragment.purgeable_page(cutoff);
        if command.tombstones.is_empty() {
            break;
        }
        if let Err(error) = group.propose(Command::Purge(command)).await {
            tracing::debug!(fragment = fragment.id(), %error, "purge proposal not committed");
            return;
        }
        if !more {
            break;
        }
    }
}

fn retention_ms(shared: &FragmentShared) -> u64 {
    u64::try_from(shared.config.tombstone_retention.as_millis()).unwrap_or(u64::MAX)
}
