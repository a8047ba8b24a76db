//! The snapshotter: flushes buffered writes every `flush_interval`, which is
//! also how a failed flush gets retried.

use super::periodic::Maintenance;
use super::runtime::FragmentShared;

/// Interval flushing, run by a [`super::periodic::Periodic`] actor.
pub(crate) struct Snapshotter;

impl Maintenance for Snapshotter {
    async fn due(shared: &FragmentShared) {
        loop {
            tokio::time::sleep(shared.config.flush_interval).await;
            if shared.state.persistence().has_backlog() {
                return;
            }
        }
    }

    async fn run(shared: &FragmentShared) {
        // Failures are counted and logged by the buffer, which keeps the
        // batch for the next run.
        let _ = shared.state.persistence().flush().await;
    }
}
