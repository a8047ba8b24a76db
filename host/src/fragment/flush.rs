//! A fragment's write buffer: ordered, coalesced, retried batches on their way
//! to the store, and the sequence numbers writers wait on for durability.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::error::BacklogFull;
use crate::metrics::Histogram;
use crate::names::TableName;
use crate::raft::Position;
use crate::record::Record;
use crate::store::{
    CommitSource, Committer, FamilyWrite, FragmentId, PendingEvent, RecordLocation, StoreBatch,
    StoreError, StoredRecord, Taken,
};

type BufferKey = (TableName, Arc<str>);

/// Newest change per key.
type Changes = HashMap<BufferKey, Change>;

/// A written batch's map, emptied, is kept for the next batch when it has
/// room for at most this many changes: a fragment's batches are mostly
/// small (a group commit spreads a few writes over many fragments), and a
/// map grown anew for each cost an allocation or more per write; a larger
/// one (after a burst) is freed.
const SPARE_CHANGES: usize = 4096;

/// What the buffer holds for a key: the newest record to put, or `None` for
/// a removal (a purged tombstone).
type Change = Option<Record>;

/// Bytes a settled write is counted for in the backlog.
fn write_weight(write: &FamilyWrite) -> usize {
    match write {
        FamilyWrite::Put(_, key, value) => key.len() + value.len(),
        FamilyWrite::Delete(_, key) => key.len(),
        FamilyWrite::DeleteRange(_, from, to) => from.len() + to.len(),
    }
}

/// Bytes a change is counted for in the backlog.
fn change_weight(key: &str, change: &Change) -> usize {
    key.len() + change.as_ref().map_or(32, Record::weight)
}

/// The node's handler outbox as the write path sees it: which tables'
/// expiries and writes produce events, their sequence numbers, and where
/// events go once they are durable. The expiry machinery implements it
/// (the node wires it in), so fragments do not depend on expiry.
pub trait ExpiryOutbox: Send + Sync {
    /// Whether expiries in `table` produce events (the table is bound).
    fn is_bound(&self, table: &TableName) -> bool;

    /// Whether a write of `key` in `table` produces a change event (the
    /// table has a change handler covering the key). Asked by the
    /// proposer of every write, so it must be cheap when nothing is bound.
    fn emits_change(&self, _table: &TableName, _key: &str) -> bool {
        false
    }

    /// The next outbox sequence number, for an event about to be proposed.
    fn next_seq(&self) -> u64;

    /// An event with sequence number `seq` was applied (perhaps proposed
    /// by another replica's leader): later [`Self::next_seq`] calls must
    /// exceed it. A no-op where only this node proposes.
    fn observe_seq(&self, _seq: u64) {}

    /// `events` are now durable in the store: hand them to delivery.
    fn deliver(&self, events: Vec<PendingEvent>);
}

#[derive(Default)]
struct Buffer {
    /// Newest change per key, not yet handed to the store.
    pending: Changes,
    pending_bytes: usize,
    /// An empty map with room, to take `pending`'s place at the next batch.
    spare: Changes,
    /// Expiry events, written in the same store write as their tombstones.
    events: Vec<PendingEvent>,
    /// The batch being written; kept until the write succeeds so that a
    /// failed or abandoned write can be retried.
    in_flight: Option<Changes>,
    in_flight_events: Vec<PendingEvent>,
    in_flight_bytes: usize,
    /// The group's applied position, recorded after the changes it covers
    /// were enqueued; written with the next batch.
    position: Option<Position>,
    in_flight_position: Option<Position>,
    /// Settled expiry events (a replicated fragment's `Settle` commands),
    /// in apply order; written after the batch's events.
    settled: Vec<FamilyWrite>,
    in_flight_settled: Vec<FamilyWrite>,
    /// Sequence number of the latest enqueued record.
    enqueued_seq: u64,
    last_error: Option<String>,
}

impl Buffer {
    fn restore_in_flight(&mut self) {
        if let Some(batch) = self.in_flight.take() {
            for (key, change) in batch {
                // Anything already pending for the key was applied later and
                // so is newer: keep it.
                if let Entry::Vacant(slot) = self.pending.entry(key) {
                    self.pending_bytes += change_weight(&slot.key().1, &change);
                    slot.insert(change);
                }
            }
            // Events keep their order: the older ones go first.
            let newer = std::mem::take(&mut self.events);
            self.pending_bytes += self
                .in_flight_events
                .iter()
                .map(PendingEvent::weight)
                .sum::<usize>();
            self.events = std::mem::take(&mut self.in_flight_events);
            self.events.extend(newer);
            self.in_flight_bytes = 0;
        }
        // A position recorded since is newer and covers this one.
        if self.position.is_none() {
            self.position = self.in_flight_position.take();
        }
        self.in_flight_position = None;
        // Settled writes keep their order: the older ones go first.
        self.pending_bytes += self
            .in_flight_settled
            .iter()
            .map(write_weight)
            .sum::<usize>();
        let newer = std::mem::take(&mut self.settled);
        self.settled = std::mem::take(&mut self.in_flight_settled);
        self.settled.extend(newer);
    }
}

/// Flush statistics for health and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlushStats {
    /// Records waiting in the buffer (pending and in flight).
    pub backlog_records: usize,
    /// Bytes waiting in the buffer.
    pub backlog_bytes: usize,
    /// Successful store writes.
    pub flushes: u64,
    /// Failed store writes (each retried later).
    pub failures: u64,
    /// The last store error, cleared by the next successful flush.
    pub last_error: Option<String>,
    /// Duration of the last successful flush in microseconds.
    pub last_flush_micros: u64,
}

/// What writers waiting for durability asked of the committer.
#[derive(Default)]
struct FlushRequest {
    /// A request is queued with the committer and its batch not yet
    /// taken: later writers need not ask again.
    queued: bool,
    /// One of the writers needs the write fsynced.
    sync: bool,
}

/// The write path from a fragment's partitions to the store.
///
/// Winning mutations are enqueued in apply order under the partition lock,
/// each getting a sequence number. A flush is a request to the node's
/// group-commit thread, which takes everything pending as one batch when it
/// starts its next store write (so one flush at a time per fragment, in
/// order). A writer that asked for `wal` or `sync` waits until a flush
/// covering its sequence number succeeded.
///
/// Failure: a failed flush puts its batch back (older than anything enqueued
/// since), counts the failure, and the next flush retries it. Nothing
/// enqueued is dropped; when the backlog reaches `limit_bytes`, new writes are
/// refused with [`BacklogFull`] before they are applied.
pub(crate) struct Persistence {
    fragment: FragmentId,
    committer: Arc<Committer>,
    outbox: Arc<dyn ExpiryOutbox>,
    buffer: parking_lot::Mutex<Buffer>,
    /// The flush asked of the committer and not yet taken.
    request: parking_lot::Mutex<FlushRequest>,
    /// Wakes the writers waiting on this buffer after each of the
    /// committer's flushes of it.
    rounds: tokio::sync::Notify,
    /// The last flush's failure: the sequence number through which its
    /// batch held everything enqueued, and the error; `None` after a
    /// flush that succeeded.
    last_failure: parking_lot::Mutex<Option<(u64, StoreError)>>,
    durable_seq: AtomicU64,
    synced_seq: AtomicU64,
    flushes: AtomicU64,
    failures: AtomicU64,
    last_flush_micros: AtomicU64,
    flush_latency: Histogram,
    limit_bytes: usize,
    flush_records: usize,
}

impl Persistence {
    /// A buffer for `fragment` that flushes through `committer`, starts a
    /// background flush once `flush_records` records are pending, refuses
    /// writes past `limit_bytes` of backlog, and hands expiry events to
    /// `outbox` once they are durable.
    pub fn new(
        fragment: FragmentId,
        committer: Arc<Committer>,
        flush_records: usize,
        limit_bytes: usize,
        outbox: Arc<dyn ExpiryOutbox>,
    ) -> Self {
        Self {
            fragment,
            committer,
            outbox,
            buffer: parking_lot::Mutex::new(Buffer::default()),
            request: parking_lot::Mutex::new(FlushRequest::default()),
            rounds: tokio::sync::Notify::new(),
            last_failure: parking_lot::Mutex::new(None),
            durable_seq: AtomicU64::new(0),
            synced_seq: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            last_flush_micros: AtomicU64::new(0),
            flush_latency: Histogram::default(),
            limit_bytes,
            flush_records,
        }
    }

    /// Refuse a write of `weight` bytes when the backlog is full. Call under
    /// the partition lock before applying, then [`Self::enqueue`].
    pub fn check_room(&self, weight: usize) -> Result<(), BacklogFull> {
        let buffer = self.buffer.lock();
        let used = buffer.pending_bytes + buffer.in_flight_bytes;
        if used + weight > self.limit_bytes && used > 0 {
            return Err(BacklogFull {
                fragment: self.fragment,
                pending_bytes: used,
                limit_bytes: self.limit_bytes,
            });
        }
        Ok(())
    }

    /// Enqueue a winning record; returns its sequence number and whether the
    /// buffer is large enough that a background flush should start. Call
    /// under the partition lock so the buffer sees mutations in apply order.
    pub fn enqueue(&self, table: &TableName, key: &Arc<str>, record: &Record) -> (u64, bool) {
        self.enqueue_change(table, key, Some(record.clone()))
    }

    /// Enqueue the removal of `key` from the store (its tombstone was
    /// purged). It replaces whatever is buffered for the key, so the store
    /// never sees the tombstone after the removal. Call under the
    /// partition lock.
    pub fn enqueue_removal(&self, table: &TableName, key: &Arc<str>) -> (u64, bool) {
        self.enqueue_change(table, key, None)
    }

    fn enqueue_change(&self, table: &TableName, key: &Arc<str>, change: Change) -> (u64, bool) {
        let mut buffer = self.buffer.lock();
        let weight = change_weight(key, &change);
        match buffer.pending.entry((table.clone(), key.clone())) {
            Entry::Occupied(mut slot) => {
                let old = change_weight(key, slot.get());
                slot.insert(change);
                buffer.pending_bytes = buffer.pending_bytes + weight - old;
            }
            Entry::Vacant(slot) => {
                slot.insert(change);
                buffer.pending_bytes += weight;
            }
        }
        buffer.enqueued_seq += 1;
        (
            buffer.enqueued_seq,
            buffer.pending.len() >= self.flush_records,
        )
    }

    /// Enqueue the writes that settle delivered expiry events (deletes and
    /// rewrites of outbox entries, dead letters): written with the next
    /// batch, after every event enqueued before them. Call in apply order.
    pub fn enqueue_settled(&self, writes: Vec<FamilyWrite>) -> (u64, bool) {
        let mut buffer = self.buffer.lock();
        buffer.pending_bytes += writes.iter().map(write_weight).sum::<usize>();
        buffer.settled.extend(writes);
        buffer.enqueued_seq += 1;
        (
            buffer.enqueued_seq,
            buffer.pending.len() >= self.flush_records,
        )
    }

    /// Record the group's applied position, to be written with the next
    /// batch: every change it covers was enqueued before, so it reaches the
    /// store in the same write or an earlier one. A newer position replaces
    /// an unwritten older one. It takes a sequence number like a record,
    /// so [`Self::flush`] waits for it too.
    pub fn set_position(&self, position: Position) {
        let mut buffer = self.buffer.lock();
        buffer.position = Some(position);
        buffer.enqueued_seq += 1;
    }

    /// The node's expiry outbox.
    pub fn outbox(&self) -> &Arc<dyn ExpiryOutbox> {
        &self.outbox
    }

    /// Enqueue a record together with its outbox event (an expiry
    /// tombstone and its expiry event, or a write and its change event):
    /// both reach the store in the same write. Call under the partition
    /// lock.
    pub fn enqueue_with_event(
        &self,
        table: &TableName,
        key: &Arc<str>,
        record: &Record,
        event: PendingEvent,
    ) -> (u64, bool) {
        {
            let mut buffer = self.buffer.lock();
            buffer.pending_bytes += event.weight();
            buffer.events.push(event);
        }
        self.enqueue(table, key, record)
    }

    /// Wait until every record enqueued up to `seq` is in the store's log
    /// (and fsynced with `sync`), or until a flush of it that ended after
    /// this call began failed (an earlier failure is retried). Writers
    /// that wait together share flushes: the first asks the committer, which
    /// takes everything enqueued when its next write starts, and one
    /// wake-up answers them all. A caller that gives up leaves nothing half
    /// done: the committer owns the flush.
    pub async fn flush_through(self: &Arc<Self>, seq: u64, sync: bool) -> Result<(), StoreError> {
        // A failure recorded before this call is not this writer's to
        // answer: its flush is asked again first.
        let mut waited = false;
        loop {
            // Listening before the checks: a flush that ends after them
            // wakes this writer, even if it ends before the await.
            let round = self.rounds.notified();
            let mut round = std::pin::pin!(round);
            round.as_mut().enable();
            if self.is_covered(seq, sync) {
                return Ok(());
            }
            if waited {
                let failed = self.last_failure.lock().clone();
                if let Some((through, error)) = failed
                    && through >= seq
                {
                    return Err(error);
                }
            }
            self.request_flush(sync)?;
            round.await;
            waited = true;
        }
    }

    /// Ask the committer for a flush that takes its batch from now on,
    /// unless one is queued and not yet taken. Fails once the committer is
    /// closed (the node is stopping).
    fn request_flush(self: &Arc<Self>, sync: bool) -> Result<(), StoreError> {
        let mut request = self.request.lock();
        request.sync |= sync;
        if request.queued {
            return Ok(());
        }
        self.committer.request(self.clone())?;
        request.queued = true;
        Ok(())
    }

    /// Flush everything enqueued so far, and the last position recorded.
    pub async fn flush(self: &Arc<Self>) -> Result<(), StoreError> {
        let seq = self.buffer.lock().enqueued_seq;
        self.flush_through(seq, false).await
    }

    /// Start a flush in the background (after a large burst of `memory`
    /// writes); nothing waits for it, and a failure is counted and retried
    /// by the next flush.
    pub fn flush_in_background(self: &Arc<Self>) {
        let _ = self.request_flush(false);
    }

    fn is_covered(&self, seq: u64, sync: bool) -> bool {
        let done = if sync {
            &self.synced_seq
        } else {
            &self.durable_seq
        };
        done.load(Ordering::Acquire) >= seq
    }

    /// Whether anything waits to be flushed.
    pub fn has_backlog(&self) -> bool {
        let buffer = self.buffer.lock();
        !buffer.pending.is_empty()
            || !buffer.events.is_empty()
            || buffer.in_flight.is_some()
            || buffer.position.is_some()
            || !buffer.settled.is_empty()
    }

    /// Durations of successful flushes (store write included).
    pub fn flush_latency(&self) -> &Histogram {
        &self.flush_latency
    }

    /// Current flush statistics.
    pub fn stats(&self) -> FlushStats {
        let buffer = self.buffer.lock();
        FlushStats {
            backlog_records: buffer.pending.len()
                + buffer.in_flight.as_ref().map_or(0, |b| b.len()),
            backlog_bytes: buffer.pending_bytes + buffer.in_flight_bytes,
            flushes: self.flushes.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            last_error: buffer.last_error.clone(),
            last_flush_micros: self.last_flush_micros.load(Ordering::Relaxed),
        }
    }
}

impl CommitSource for Persistence {
    /// Everything pending (records, removals, expiry events, the position,
    /// settled writes) as one batch, held in flight until [`Self::finish`].
    fn take(&self) -> Taken {
        let sync = {
            let mut request = self.request.lock();
            request.queued = false;
            std::mem::take(&mut request.sync)
        };
        let mut buffer = self.buffer.lock();
        // Only after a panic between take and finish is a batch still in
        // flight: it is older than what is pending and goes first.
        buffer.restore_in_flight();
        if buffer.pending.is_empty()
            && buffer.events.is_empty()
            && buffer.position.is_none()
            && buffer.settled.is_empty()
        {
            // Everything enqueued is durable already (the committer is the
            // only flusher and finished every earlier batch): a writer
            // that asked after the last batch was taken. Only a missing
            // fsync is left to do.
            let through = buffer.enqueued_seq;
            return Taken {
                batch: StoreBatch::default(),
                through,
                sync: sync && self.synced_seq.load(Ordering::Acquire) < through,
            };
        }
        let spare = std::mem::take(&mut buffer.spare);
        let pending = std::mem::replace(&mut buffer.pending, spare);
        buffer.in_flight_bytes = std::mem::take(&mut buffer.pending_bytes);
        let events = std::mem::take(&mut buffer.events);
        let position = buffer.position.take();
        let settled = std::mem::take(&mut buffer.settled);
        let mut batch = StoreBatch {
            outbox: events.iter().map(|e| (e.key.clone(), e.encode())).collect(),
            position: position.as_ref().map(|p| (p.key.clone(), p.value.clone())),
            settled: settled.clone(),
            ..StoreBatch::default()
        };
        for ((table, key), change) in &pending {
            match change {
                Some(record) => batch.records.push(StoredRecord {
                    fragment: self.fragment,
                    table: table.clone(),
                    key: key.clone(),
                    record: record.clone(),
                }),
                None => batch.removed.push(RecordLocation {
                    fragment: self.fragment,
                    table: table.clone(),
                    key: key.clone(),
                }),
            }
        }
        buffer.in_flight = Some(pending);
        buffer.in_flight_events = events;
        buffer.in_flight_position = position;
        buffer.in_flight_settled = settled;
        Taken {
            batch,
            through: buffer.enqueued_seq,
            sync,
        }
    }

    /// On success: the batch is durable through `through` (and synced with
    /// `synced`), its expiry events go to delivery. On failure the batch
    /// goes back into the buffer for the next flush. Either way the waiters
    /// wake.
    fn finish(
        &self,
        through: u64,
        outcome: &Result<(), StoreError>,
        synced: bool,
        elapsed: Duration,
    ) {
        let mut buffer = self.buffer.lock();
        match outcome {
            Ok(()) => {
                if let Some(mut written) = buffer.in_flight.take() {
                    written.clear();
                    if written.capacity() <= SPARE_CHANGES {
                        buffer.spare = written;
                    }
                    self.flushes.fetch_add(1, Ordering::Relaxed);
                    self.flush_latency.observe(elapsed);
                    self.last_flush_micros
                        .store(elapsed.as_micros() as u64, Ordering::Relaxed);
                }
                buffer.in_flight_position = None;
                buffer.in_flight_settled.clear();
                self.outbox
                    .deliver(std::mem::take(&mut buffer.in_flight_events));
                buffer.in_flight_bytes = 0;
                buffer.last_error = None;
                self.durable_seq.fetch_max(through, Ordering::AcqRel);
                if synced {
                    self.synced_seq.fetch_max(through, Ordering::AcqRel);
                }
            }
            Err(error) => {
                buffer.restore_in_flight();
                buffer.last_error = Some(error.to_string());
                self.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(fragment = self.fragment, %error, backlog = buffer.pending.len(), "flush failed; batch retained for retry");
            }
        }
        drop(buffer);
        *self.last_failure.lock() = outcome.as_ref().err().map(|error| (through, error.clone()));
        self.rounds.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Version;
    use crate::store::{KvStore, MemoryStore};
    use bytes::Bytes;

    /// An outbox that binds nothing and records what is delivered.
    #[derive(Default)]
    struct Recorded(parking_lot::Mutex<Vec<PendingEvent>>);

    impl ExpiryOutbox for Recorded {
        fn is_bound(&self, _: &TableName) -> bool {
            false
        }

        fn next_seq(&self) -> u64 {
            1
        }

        fn deliver(&self, events: Vec<PendingEvent>) {
            self.0.lock().extend(events);
        }
    }

    fn record(at: u64, value: &str) -> Record {
        Record::live(
            Version {
                hlc_ms: at,
                counter: 0,
                writer: Arc::from("w"),
            },
            Bytes::from(value.to_string()),
            None,
        )
    }

    fn setup(limit: usize) -> (Arc<MemoryStore>, Arc<Persistence>) {
        let store = Arc::new(MemoryStore::new());
        let committer = Arc::new(Committer::start(store.clone()).unwrap());
        (
            store,
            Arc::new(Persistence::new(
                0,
                committer,
                1000,
                limit,
                Arc::new(Recorded::default()),
            )),
        )
    }

    fn loaded(store: &MemoryStore) -> HashMap<String, Record> {
        let mut out = HashMap::new();
        store
            .load_fragment(0, &mut |r| {
                out.insert(
                    r.key.to_string(),
                    r.record.to_record(crate::record::own_writer),
                );
                Ok(())
            })
            .unwrap();
        out
    }

    #[tokio::test]
    async fn a_failed_flush_keeps_its_batch_and_the_retry_writes_the_newest() {
        let (store, persistence) = setup(1 << 20);
        let table = TableName::new("t").unwrap();
        let key: Arc<str> = Arc::from("k");
        let (seq1, _) = persistence.enqueue(&table, &key, &record(1, "one"));
        store.set_failing(true);
        assert!(persistence.flush_through(seq1, false).await.is_err());
        let stats = persistence.stats();
        assert_eq!((stats.backlog_records, stats.failures), (1, 1));
        assert!(stats.last_error.is_some());
        // A newer write for the same key arrives while the old batch is retained.
        let (seq2, _) = persistence.enqueue(&table, &key, &record(2, "two"));
        let other: Arc<str> = Arc::from("other");
        persistence.enqueue(&table, &other, &record(2, "x"));
        store.set_failing(false);
        persistence.flush_through(seq2, true).await.unwrap();
        let persisted = loaded(&store);
        assert_eq!(persisted["k"].value, Bytes::from("two"));
        assert_eq!(persisted["other"].value, Bytes::from("x"));
        assert_eq!(persistence.stats().backlog_records, 0);
        assert_eq!(persistence.stats().last_error, None);
    }

    #[tokio::test]
    async fn a_writer_that_asks_after_a_failed_flush_gets_the_retrys_outcome() {
        let (store, persistence) = setup(1 << 20);
        let table = TableName::new("t").unwrap();
        let (seq, _) = persistence.enqueue(&table, &Arc::from("k"), &record(1, "one"));
        store.set_failing(true);
        assert!(persistence.flush_through(seq, false).await.is_err());
        store.set_failing(false);
        // The failure stays recorded until the next flush; a writer that
        // asks now has its flush retried, not the old failure answered.
        persistence.flush_through(seq, false).await.unwrap();
        assert_eq!(loaded(&store)["k"].value, Bytes::from("one"));
        assert_eq!(persistence.stats().last_error, None);
    }

    #[tokio::test]
    async fn the_backlog_limit_refuses_before_anything_is_lost() {
        let (store, persistence) = setup(300);
        let table = TableName::new("t").unwrap();
        store.set_failing(true);
        let key: Arc<str> = Arc::from("a");
        persistence.check_room(100).unwrap();
        persistence.enqueue(&table, &key, &record(1, &"x".repeat(200)));
        assert!(persistence.flush().await.is_err());
        let full = persistence.check_room(200).unwrap_err();
        assert_eq!(full.fragment, 0);
        assert!(full.to_string().contains("retry later"));
        store.set_failing(false);
        persistence.flush().await.unwrap();
        persistence.check_room(200).unwrap();
        assert_eq!(loaded(&store).len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writers_that_wait_for_a_flush_share_the_next_one() {
        let (store, persistence) = setup(1 << 30);
        let table = TableName::new("t").unwrap();
        // The first writer's flush is held in the store (a slow disk) ...
        store.set_holding(true);
        let (seq, _) = persistence.enqueue(&table, &Arc::from("k0"), &record(0, "v"));
        let first = tokio::spawn({
            let persistence = persistence.clone();
            async move { persistence.flush_through(seq, false).await }
        });
        let started = std::time::Instant::now();
        while store.held_writes() != 1 {
            assert!(started.elapsed() < std::time::Duration::from_secs(10));
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        // ... while 199 more writers apply theirs and wait for durability.
        let mut tasks = Vec::new();
        for i in 1..200u64 {
            let key: Arc<str> = Arc::from(format!("k{i}"));
            let (seq, _) = persistence.enqueue(&table, &key, &record(i, "v"));
            let persistence = persistence.clone();
            tasks.push(tokio::spawn(async move {
                persistence.flush_through(seq, false).await
            }));
        }
        store.set_holding(false);
        first.await.unwrap().unwrap();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert_eq!(loaded(&store).len(), 200);
        assert_eq!(
            persistence.stats().flushes,
            2,
            "the 199 waiting writers share one flush"
        );
    }

    #[tokio::test]
    async fn a_flush_with_nothing_left_writes_only_a_missing_fsync() {
        let (store, persistence) = setup(1 << 20);
        let table = TableName::new("t").unwrap();
        // A writer that asks after its record's batch was taken finds
        // nothing to write: no store write.
        let round = persistence.rounds.notified();
        let mut round = std::pin::pin!(round);
        round.as_mut().enable();
        persistence.request_flush(false).unwrap();
        round.await;
        assert_eq!((store.write_calls(), persistence.stats().flushes), (0, 0));

        let (seq, _) = persistence.enqueue(&table, &Arc::from("k"), &record(1, "v"));
        persistence.flush_through(seq, false).await.unwrap();
        assert_eq!((store.write_calls(), store.fsyncs()), (1, 0));
        // Durable but not synced: a `sync` waiter gets an fsync, of nothing.
        persistence.flush_through(seq, true).await.unwrap();
        assert_eq!((store.write_calls(), store.fsyncs()), (2, 1));
        persistence.flush_through(seq, true).await.unwrap();
        assert_eq!(store.write_calls(), 2, "synced already");
        assert_eq!(persistence.stats().flushes, 1, "one batch held records");
    }

    #[tokio::test]
    async fn an_expiry_tombstone_and_its_event_are_written_together_then_delivered() {
        let store = Arc::new(MemoryStore::new());
        let committer = Arc::new(Committer::start(store.clone()).unwrap());
        let outbox = Arc::new(Recorded::default());
        let persistence = Arc::new(Persistence::new(
            0,
            committer,
            1000,
            1 << 20,
            outbox.clone(),
        ));
        let table = TableName::new("t").unwrap();
        let key: Arc<str> = Arc::from("k");
        let live = Record::live(record(1, "v").version, Bytes::from("v"), Some(5));
        let event = PendingEvent::new(0, 1, &table, &key, &live, 6);
        persistence.enqueue_with_event(&table, &key, &live.to_expiry_tombstone(), event);
        let outbox_entries = |store: &MemoryStore| {
            let mut n = 0;
            store
                .scan_family(crate::store::Family::ExpiryOutbox, &[], &mut |_, _| {
                    n += 1;
                    Ok(())
                })
                .unwrap();
            n
        };
        store.set_failing(true);
        assert!(persistence.flush().await.is_err());
        assert_eq!((store.record_count(), outbox_entries(&store)), (0, 0));
        assert!(outbox.0.lock().is_empty(), "not delivered before durable");
        store.set_failing(false);
        persistence.flush().await.unwrap();
        assert_eq!((store.record_count(), outbox_entries(&store)), (1, 1));
        assert_eq!(
            outbox.0.lock().len(),
            1,
            "the durable event goes to the dispatcher"
        );
        assert!(!persistence.has_backlog());
    }
}
