//! What a fragment's actors share: state, admission, settings, restart
//! counts, the current dispatcher and, for a replicated fragment, the
//! group its maintenance proposes through.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;

use parking_lot::{Mutex, RwLock};
use ractor::ActorRef;

use super::command::{Applied, Command};
use super::pool::{Admission, PoolConfig};
use super::state::FragmentState;
use super::turn::Turn;
use super::worker::Operation;

/// Settings of one fragment's runtime.
#[derive(Debug, Clone)]
pub(crate) struct FragmentConfig {
    /// The `high` pool: worker actors and admission capacity for writes.
    pub(crate) high_pool: PoolConfig,
    /// Whether a write to an idle worker slot applies on the caller's task
    /// ([`Turn::inline`]).
    pub(crate) inline_writes: bool,
    /// Capacity of the `background` pool (admission only: the query pages
    /// it admits run on the query threads).
    pub(crate) background_capacity: usize,
    /// The snapshotter flushes buffered writes this often.
    pub(crate) flush_interval: Duration,
    /// The cleaner sweeps at least this often, besides waking at deadlines.
    pub(crate) clean_interval: Duration,
    /// Tombstones are purged once they stood this long.
    pub(crate) tombstone_retention: Duration,
    /// Whether the fragment is a replica of a Raft group: its maintenance
    /// (expiry, purge) then only proposes commands, through the
    /// [`Replicator`] set once the group runs, and only where it leads.
    pub(crate) replicated: bool,
}

/// The Raft group of a replicated fragment, as its maintenance sees it.
pub(crate) trait Replicator: Send + Sync + 'static {
    /// Whether this replica may propose maintenance now: it leads, and it
    /// applied every entry of earlier leaders (so its clock and outbox
    /// sequence are past everything they decided).
    fn ready(&self) -> BoxFuture<'_, bool>;

    /// Propose `command` and wait until it applied here; what it did, or
    /// why it was not committed (leadership lost, no quorum, stopped).
    fn propose(&self, command: Command) -> BoxFuture<'_, Result<Applied, String>>;
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
    /// The dispatcher's workers by slot, published by it so a write can go
    /// to its key's worker without passing through the dispatcher's
    /// mailbox (one task hand-off fewer per write).
    workers: RwLock<Option<Arc<[ActorRef<Operation>]>>>,
    /// One turn per worker slot (`high_pool.workers` of them, as many as
    /// the dispatcher starts): who applies the slot's writes right now.
    turns: Box<[Arc<Turn>]>,
    replicator: OnceLock<Arc<dyn Replicator>>,
}

/// How maintenance may change a fragment right now.
pub(crate) enum Maintainer<'a> {
    /// A single-node fragment: decide and apply in place.
    Local,
    /// A replica that may propose through its group.
    Propose(&'a dyn Replicator),
    /// A replica whose group does not run yet, or that does not lead:
    /// maintenance changes nothing.
    Idle,
}

impl FragmentShared {
    /// Shared state for a fragment about to start.
    pub(crate) fn new(state: Arc<FragmentState>, config: FragmentConfig) -> Arc<Self> {
        let capacities = [config.high_pool.capacity, config.background_capacity];
        Arc::new(Self {
            admission: Admission::new(state.id(), capacities),
            state,
            restarts: Mutex::new(BTreeMap::new()),
            dispatcher: RwLock::new(None),
            workers: RwLock::new(None),
            turns: (0..config.high_pool.workers.max(1))
                .map(|_| Arc::new(Turn::default()))
                .collect(),
            replicator: OnceLock::new(),
            config,
        })
    }

    /// Give a replicated fragment's maintenance its group (once; later
    /// calls are ignored).
    pub(crate) fn set_replicator(&self, replicator: Arc<dyn Replicator>) {
        let _ = self.replicator.set(replicator);
    }

    /// How maintenance may change the fragment now (asks the group whether
    /// this replica leads).
    pub(crate) async fn maintainer(&self) -> Maintainer<'_> {
        if !self.config.replicated {
            return Maintainer::Local;
        }
        match self.replicator.get() {
            Some(replicator) if replicator.ready().await => Maintainer::Propose(&**replicator),
            _ => Maintainer::Idle,
        }
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

    /// Publish (or withdraw, with `None`) the dispatcher that takes
    /// operations. Withdrawing it withdraws its workers too.
    pub(crate) fn set_dispatcher(&self, dispatcher: Option<ActorRef<Operation>>) {
        if dispatcher.is_none() {
            *self.workers.write() = None;
            // A write applying inline checked that the workers were
            // published (holding its turn); wait it out, so that once this
            // returns no write applies until a dispatcher publishes again
            // (quiesce flushes after this, and must find every write).
            for turn in self.turns.iter() {
                turn.wait_idle();
            }
        }
        *self.dispatcher.write() = dispatcher;
    }

    /// Publish the dispatcher's workers, by slot (the dispatcher does, when
    /// it starts them and when it refills a slot).
    pub(crate) fn set_workers(&self, workers: &[ActorRef<Operation>]) {
        *self.workers.write() = Some(workers.into());
    }

    /// The worker that takes the operations routed by `route`, the slot
    /// the dispatcher would pick ([`worker_slot`]); `None` while no
    /// dispatcher publishes its workers.
    pub(crate) fn worker(&self, route: u64) -> Option<ActorRef<Operation>> {
        let workers = self.workers.read();
        let workers = workers.as_ref()?;
        Some(workers[worker_slot(route, workers.len())].clone())
    }

    /// Whether writes are taken: a dispatcher has published its workers
    /// (not withdrawn for quiesce, nor dead and being replaced).
    pub(crate) fn takes_writes(&self) -> bool {
        self.workers.read().is_some()
    }

    /// The turn of the worker slot of the operations routed by `route`
    /// (the slot [`worker_slot`] picks; the dispatcher starts one worker
    /// per turn).
    pub(crate) fn turn(&self, route: u64) -> &Arc<Turn> {
        &self.turns[worker_slot(route, self.turns.len())]
    }
}

/// The slot of the worker that runs the operations with routing hash
/// `route` among `workers` (at least one): one key's operations always go
/// to the same worker, so they run in order.
pub(crate) fn worker_slot(route: u64, workers: usize) -> usize {
    (route % workers as u64) as usize
}
