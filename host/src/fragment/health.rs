//! A fragment's health report: workers, restarts, queues, sheds, flushes.

use std::collections::BTreeMap;

use ractor::{ActorCell, ActorStatus};

use super::flush::FlushStats;
use super::pool::Priority;
use super::runtime::FragmentShared;

/// One pool's numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolHealth {
    /// `high` or `background`.
    pub pool: &'static str,
    /// Configured worker actors: those of `high`; 0 for `background`, whose
    /// admitted query pages run on the query threads.
    pub workers: usize,
    /// Operations admitted and not finished.
    pub queued: usize,
    /// Configured capacity.
    pub capacity: usize,
    /// Operations shed since start.
    pub shed: u64,
}

/// A point-in-time health report of one fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FragmentHealth {
    /// The fragment.
    pub fragment: u32,
    /// Worker actors observed running (the `high` pool's).
    pub running_workers: usize,
    /// Restarts per child (`dispatcher`, `cleaner`, `snapshotter`,
    /// `worker-<pool>-<slot>`).
    pub restarts: BTreeMap<String, u64>,
    /// Per-pool queue numbers.
    pub pools: Vec<PoolHealth>,
    /// Write-buffer numbers; `last_error` is set while the store is failing.
    pub flush: FlushStats,
}

impl FragmentHealth {
    /// Collect a report; `dispatcher` is the running dispatcher's cell.
    pub(crate) fn collect(shared: &FragmentShared, dispatcher: &ActorCell) -> Self {
        let running_workers = dispatcher
            .get_children()
            .iter()
            .filter(|worker| worker.get_status() == ActorStatus::Running)
            .count();
        let pools = Priority::ALL
            .iter()
            .map(|&priority| PoolHealth {
                pool: priority.name(),
                workers: match priority {
                    Priority::High => shared.config.high_pool.workers.max(1),
                    Priority::Background => 0,
                },
                queued: shared.admission.queued(priority),
                capacity: shared.admission.capacity(priority),
                shed: shared.admission.shed(priority),
            })
            .collect();
        Self {
            fragment: shared.state.id(),
            running_workers,
            restarts: shared.restarts(),
            pools,
            flush: shared.state.persistence().stats(),
        }
    }

    /// Healthy: every worker runs and the store accepts writes.
    pub fn is_healthy(&self) -> bool {
        let expected: usize = self.pools.iter().map(|p| p.workers).sum();
        self.running_workers == expected && self.flush.last_error.is_none()
    }
}
