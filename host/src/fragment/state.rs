//! A fragment's shared state: its table partitions, write buffer and expiry
//! wake-up, shared by the dispatcher, workers, cleaner and snapshotter.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::RwLock;
use tokio::sync::Notify;

use super::flush::Persistence;
use super::partition::{Partition, PartitionSnapshot};
use crate::clock::HybridClock;
use crate::names::TableName;
use crate::record::{Record, Version};
use crate::store::FragmentId;

/// A mutation of one key, before it has a version.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Mutation {
    /// Store a value with an optional deadline (Unix ms).
    Put {
        /// The value bytes.
        value: Bytes,
        /// Deadline, if the record has a TTL.
        expires_at_ms: Option<u64>,
    },
    /// Delete the key if it is visible.
    Delete,
    /// Give the visible record a new deadline (`None`: no TTL), keeping
    /// its value: a new version of the same value.
    Retime {
        /// The new deadline.
        expires_at_ms: Option<u64>,
    },
}

impl Mutation {
    /// Whether the mutation needs a visible record to act on.
    pub(crate) fn needs_record(&self) -> bool {
        !matches!(self, Mutation::Put { .. })
    }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WriteOutcome {
    /// The write was applied with `version`; `seq` is its place in the
    /// fragment's write buffer, to wait on for durability.
    Applied {
        /// The version given to the new record.
        version: Version,
        /// Buffer sequence number.
        seq: u64,
    },
    /// A delete or a TTL change found no visible record; nothing was written.
    NotFound,
    /// The write's condition did not hold; nothing was written. `current`
    /// is the version of the key's visible record, if any.
    ConditionFailed {
        /// The visible record's version when the condition was judged.
        current: Option<Version>,
    },
}

/// Wakes the cleaner when a deadline earlier than its planned wake-up appears.
#[derive(Debug)]
pub(crate) struct ExpiryWake {
    planned_ms: AtomicU64,
    notify: Notify,
}

impl ExpiryWake {
    fn new() -> Self {
        Self {
            planned_ms: AtomicU64::new(u64::MAX),
            notify: Notify::new(),
        }
    }

    /// Record when the cleaner plans to wake next.
    pub(crate) fn plan(&self, at_ms: u64) {
        self.planned_ms.store(at_ms, Ordering::Release);
    }

    /// Called for every new deadline: wakes the cleaner if it sleeps past it.
    pub(crate) fn offer(&self, deadline_ms: u64) {
        if deadline_ms < self.planned_ms.load(Ordering::Acquire) {
            self.planned_ms.store(deadline_ms, Ordering::Release);
            self.notify.notify_waiters();
        }
    }

    /// When the cleaner plans to wake, as last planned or offered.
    #[cfg(test)]
    pub(crate) fn planned(&self) -> u64 {
        self.planned_ms.load(Ordering::Acquire)
    }

    /// A future that resolves when an earlier deadline is offered. Create it
    /// (and `enable` it) before reading the deadlines it guards, so an offer
    /// in between is not missed.
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

/// Per-table numbers for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionInfo {
    /// The table.
    pub(crate) table: TableName,
    /// Live records in this fragment's partition.
    pub(crate) live: usize,
    /// All records, tombstones included.
    pub(crate) records: usize,
    /// Tombstones (deletes and converted expiries).
    pub(crate) tombstones: usize,
    /// Bytes the partition's records and index hold.
    pub(crate) memory_bytes: usize,
    /// Current revision.
    pub(crate) revision: u64,
}

/// A fragment's partitions by table.
type Partitions = HashMap<TableName, Arc<RwLock<Partition>>, foldhash::fast::RandomState>;

/// Shared state of one fragment. Partition locks are held only for in-memory
/// work (never across I/O or `.await`), so readers and writers never wait on
/// the store.
pub(crate) struct FragmentState {
    id: FragmentId,
    /// By table. Every read, write and snapshot looks its table up here,
    /// so the map hashes with foldhash rather than SipHash: table names
    /// come from authenticated callers and are bounded in length.
    partitions: RwLock<Partitions>,
    persistence: Arc<Persistence>,
    clock: Arc<HybridClock>,
    expiry_wake: ExpiryWake,
    /// Held while a write that emits a change event takes its version and
    /// its outbox sequence number, so that a key's events are numbered in
    /// the order of their versions (the order they win in) even when
    /// proposals run concurrently.
    change_order: parking_lot::Mutex<()>,
    /// A replicated fragment's store, for its snapshots to carry its
    /// pending expiry events (held weakly: the node owns the store).
    outbox_store: std::sync::OnceLock<std::sync::Weak<dyn crate::store::KvStore>>,
}

impl FragmentState {
    /// State for fragment `id` with loaded `partitions`.
    pub(crate) fn new(
        id: FragmentId,
        partitions: HashMap<TableName, Partition>,
        persistence: Arc<Persistence>,
        clock: Arc<HybridClock>,
    ) -> Self {
        Self {
            id,
            partitions: RwLock::new(
                partitions
                    .into_iter()
                    .map(|(table, partition)| (table, Arc::new(RwLock::new(partition))))
                    .collect(),
            ),
            persistence,
            clock,
            expiry_wake: ExpiryWake::new(),
            change_order: parking_lot::Mutex::new(()),
            outbox_store: std::sync::OnceLock::new(),
        }
    }

    /// Make this fragment's snapshots carry its pending expiry events, read
    /// from `store` (a replicated fragment; set once).
    pub(crate) fn snapshot_outbox_from(&self, store: &Arc<dyn crate::store::KvStore>) {
        let _ = self.outbox_store.set(Arc::downgrade(store));
    }

    /// The store whose outbox snapshots carry, if set and still open.
    pub(crate) fn outbox_store(&self) -> Option<Option<Arc<dyn crate::store::KvStore>>> {
        self.outbox_store.get().map(std::sync::Weak::upgrade)
    }

    /// An empty fragment `id` over its own in-memory store (returned), with
    /// `outbox`, a large write buffer and a clock of writer `node`: the
    /// state unit tests start from.
    #[cfg(test)]
    pub(crate) fn for_tests(
        id: FragmentId,
        outbox: Arc<dyn super::flush::ExpiryOutbox>,
        node: &str,
    ) -> (Self, Arc<crate::store::MemoryStore>) {
        let store = Arc::new(crate::store::MemoryStore::new());
        (Self::for_tests_on(id, outbox, node, store.clone()), store)
    }

    /// Like [`Self::for_tests`], writing to `store`; memory starts empty
    /// whatever the store holds.
    #[cfg(test)]
    pub(crate) fn for_tests_on(
        id: FragmentId,
        outbox: Arc<dyn super::flush::ExpiryOutbox>,
        node: &str,
        store: Arc<crate::store::MemoryStore>,
    ) -> Self {
        let committer = Arc::new(crate::store::Committer::start(store.clone()).unwrap());
        let persistence = Persistence::new(id, committer, 1_000_000, 1 << 30, outbox);
        let clock = HybridClock::new(Arc::from(node), 0, 0);
        Self::new(id, HashMap::new(), Arc::new(persistence), Arc::new(clock))
    }

    /// This fragment's id.
    pub(crate) fn id(&self) -> FragmentId {
        self.id
    }

    /// The write buffer.
    pub(crate) fn persistence(&self) -> &Arc<Persistence> {
        &self.persistence
    }

    /// The clock that versions this fragment's writes.
    pub(super) fn clock(&self) -> &HybridClock {
        &self.clock
    }

    /// A fresh version for a write of `key` in `table`, and the outbox
    /// sequence number of its change event when it emits one: when the
    /// table has a change handler covering the key and the write is not a
    /// change handler's own (`origin`).
    pub(super) fn version_for(
        &self,
        table: &TableName,
        key: &str,
        origin: crate::write::Origin,
    ) -> (crate::record::Version, Option<u64>) {
        let outbox = self.persistence.outbox();
        if origin == crate::write::Origin::ChangeHandler || !outbox.emits_change(table, key) {
            return (self.clock.tick(), None);
        }
        let _order = self.change_order.lock();
        (self.clock.tick(), Some(outbox.next_seq()))
    }

    /// The cleaner's wake-up.
    pub(crate) fn expiry_wake(&self) -> &ExpiryWake {
        &self.expiry_wake
    }

    /// The partition of `table`, if the table has records here.
    pub(crate) fn partition(&self, table: &TableName) -> Option<Arc<RwLock<Partition>>> {
        self.partitions.read().get(table).cloned()
    }

    /// The partition of `table`, created empty if the table has none here.
    pub(super) fn partition_or_create(&self, table: &TableName) -> Arc<RwLock<Partition>> {
        if let Some(partition) = self.partition(table) {
            return partition;
        }
        self.partitions
            .write()
            .entry(table.clone())
            .or_default()
            .clone()
    }

    /// Every partition with its table, in no particular order.
    pub(crate) fn partitions(&self) -> Vec<(TableName, Arc<RwLock<Partition>>)> {
        self.partitions
            .read()
            .iter()
            .map(|(table, partition)| (table.clone(), partition.clone()))
            .collect()
    }

    /// Replace every partition with `loaded` (tables missing from it become
    /// empty), enqueueing for the store the removal of every key that is
    /// gone and the put of every record loaded, so memory and store both
    /// hold exactly `loaded`. Each replaced partition is a new incarnation,
    /// so guarded cursors over the old one stop with a conflict.
    pub(crate) fn replace_all(&self, mut loaded: HashMap<TableName, Partition>) {
        let mut partitions = self.partitions.write();
        for (table, partition) in partitions.iter() {
            let mut partition = partition.write();
            let new = loaded.remove(table).unwrap_or_default();
            for entry in partition.snapshot_at(0).range::<std::ops::RangeFull>(..) {
                if new.get(entry.key()).is_none() {
                    self.persistence
                        .enqueue_removal(table, &Arc::from(entry.key()));
                }
            }
            *partition = new;
            enqueue_all(&self.persistence, table, &partition);
        }
        for (table, partition) in loaded {
            enqueue_all(&self.persistence, &table, &partition);
            partitions.insert(table, Arc::new(RwLock::new(partition)));
        }
        drop(partitions);
        // The cleaner plans its wake-up by the deadlines it saw; the new
        // records may have earlier ones.
        if let Some(deadline) = self.earliest_deadline() {
            self.expiry_wake.offer(deadline);
        }
    }

    /// The record of `key` if it is visible at `now_ms`.
    pub(crate) fn get(&self, table: &TableName, key: &str, now_ms: u64) -> Option<Record> {
        let partition = self.partition(table)?;
        let partition = partition.read();
        partition.get(key).and_then(|entry| {
            let header = entry.header();
            header
                .is_visible_at(now_ms)
                .then(|| entry.record_of(&header))
        })
    }

    /// A consistent view of `table`'s partition at `now_ms`, if it exists.
    pub(crate) fn snapshot(&self, table: &TableName, now_ms: u64) -> Option<PartitionSnapshot> {
        // The map's lock, then the partition's: the order `replace_all`
        // takes them in.
        let partitions = self.partitions.read();
        let snapshot = partitions.get(table)?.read().snapshot_at(now_ms);
        Some(snapshot)
    }

    /// The earliest deadline over all partitions of this fragment.
    pub(crate) fn earliest_deadline(&self) -> Option<u64> {
        self.partitions()
            .iter()
            .filter_map(|(_, partition)| partition.read().earliest_deadline())
            .min()
    }

    /// Per-table numbers of this fragment.
    pub(crate) fn partition_infos(&self) -> Vec<PartitionInfo> {
        self.partitions()
            .into_iter()
            .map(|(table, partition)| {
                let partition = partition.read();
                PartitionInfo {
                    table,
                    live: partition.live_count(),
                    records: partition.len(),
                    tombstones: partition.tombstone_count(),
                    memory_bytes: partition.memory_bytes(),
                    revision: partition.revision(),
                }
            })
            .collect()
    }
}

/// Enqueue the put of every record of `partition` (of `table`).
fn enqueue_all(persistence: &Persistence, table: &TableName, partition: &Partition) {
    for entry in partition.snapshot_at(0).range::<std::ops::RangeFull>(..) {
        persistence.enqueue(table, &Arc::from(entry.key()), &entry.record());
    }
}
