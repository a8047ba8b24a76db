//! What a fragment's actors share: state, admission, settings, restart
//! counts and the current dispatcher.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use ractor::ActorRef;

use super::pool::{Admission, PoolConfig};
use super::state::FragmentState;
use super::worker::Operation;

/// Settings of one fragment's runtime.
#[derive(Debug, Clone)]
pub(crate) struct FragmentConfig {
    /// The `high` pool: worker actors and admission capacity for writes.
    pub(crate) high_pool: PoolConfig,
    /// Capacity of the `background` pool (admission only: the query pages
    /// it admits run on the query threads).
    pub(crate) background_capacity: usize,
    /// The snapshotter flushes buffered writes this often.
    pub(crate) flush_interval: Duration,
    /// The cleaner sweeps at least this often, besides waking at deadlines.
    pub(crate) clean_interval: Duration,
    /// Tombstones are purged once they stood this long.
    pub(crate) tombstone_retention: Duration,
}

/// Shared by the supervisor, its children and the node's handle. Children
/// restarted in place get the same `FragmentShared`, so no data or counter is
/// lost with a dead actor.
pub(crate) struct FragmentShared {
    /// Partitions and write buffer.
    pub(crate) state: Arc<FragmentState>,
    /// Bounded admission to the pools.
    pub(crate) admission: Arc<Admission>,
    /// Settings.
    pub(crate) config: FragmentConfig,
    restarts: Mutex<BTreeMap<String, u64>>,
    dispatcher: RwLock<Option<ActorRef<Operation>>>,
}

impl FragmentShared {
    /// Shared state for a fragment about to start.
    pub(crate) fn new(state: Arc<FragmentState>, config: FragmentConfig) -> Arc<Self> {
        let capacities = [config.high_pool.capacity, config.background_capacity];
        Arc::new(Self {
            admission: Admission::new(state.id(), capacities),
            state,
            config,
            restarts: Mutex::new(BTreeMap::new()),
            dispatcher: RwLock::new(None),
        })
    }

    /// Count a restart of `child`.
    pub(crate) fn count_restart(&self, child: &str) {
        *self.restarts.lock().entry(child.to_string()).or_insert(0) += 1;
    }

    /// Restarts per child since the fragment started.
    pub(crate) fn restarts(&self) -> BTreeMap<String, u64> {
        self.restarts.lock().clone()
    }

    /// The running dispatcher, if any.
    pub(crate) fn dispatcher(&self) -> Option<ActorRef<Operation>> {
        self.dispatcher.read().clone()
    }

    /// Publish (or withdraw, with `None`) the dispatcher that takes operations.
    pub(crate) fn set_dispatcher(&self, dispatcher: Option<ActorRef<Operation>>) {
        *self.dispatcher.write() = dispatcher;
    }
}
