//! Group commit: one writer thread that takes the batches of every write
//! buffer that asked to be written and merges them into single store writes.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::{KvStore, StoreBatch, StoreError};

/// Most sources merged into one store write.
const MAX_GROUP_SOURCES: usize = 256;

/// A batch a [`CommitSource`] hands to the writer thread.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    /// Everything the source held when asked.
    pub(crate) batch: StoreBatch,
    /// The source's sequence number through which the batch holds
    /// everything; reported back with the outcome.
    pub(crate) through: u64,
    /// Whether a waiter asked for the write to be fsynced.
    pub(crate) sync: bool,
}

/// A write buffer the writer thread writes for (a fragment's). The thread
/// is the only caller of both methods and calls them one group at a time,
/// so a source's batches reach the store in the order they were taken.
pub(crate) trait CommitSource: Send + Sync {
    /// Take everything waiting to be written, as one batch (perhaps empty:
    /// a waiter may only want an fsync, or nothing is left to write; a
    /// group of empty batches without `sync` writes nothing, and each
    /// source is still finished). The source keeps it until
    /// [`Self::finish`], to put it back if the write fails.
    fn take(&self) -> Taken;

    /// The outcome of the store write that carried the batch taken through
    /// `through`; `synced` when that write was fsynced, `elapsed` its
    /// duration. With [`NOT_TAKEN`] as `through`, taking the batch failed
    /// and the source should fail every waiter.
    fn finish(
        &self,
        through: u64,
        outcome: &Result<(), StoreError>,
        synced: bool,
        elapsed: Duration,
    );
}

/// The `through` of [`CommitSource::finish`] when the source's `take`
/// panicked: no batch was taken, and every waiter should see the failure.
pub(crate) const NOT_TAKEN: u64 = u64::MAX;

/// The node's writer thread. Every durable write goes through it: a write
/// buffer with writers waiting asks it for a write ([`Self::request`]); the
/// thread takes the batches of every buffer that asked while it was
/// writing and writes them as one store write, so the waiting `wal`
/// writers of all fragments share one RocksDB write and one `sync`
/// writer's fsync covers everyone in its group. Taking the batches on this
/// thread, rather than on a task per buffer that hands them over, spares
/// each group a task wake-up and a reply per fragment.
///
/// The thread owns no data: a failed group is reported to each source,
/// which keeps its batch for the next request. Once writes stop for
/// [`IDLE_FLUSH_AFTER`], it starts a background flush of the store's large
/// memtables ([`KvStore::flush_idle`]).
pub(crate) struct Committer {
    requests: parking_lot::RwLock<Option<mpsc::Sender<Arc<dyn CommitSource>>>>,
    thread: parking_lot::Mutex<Option<thread::JoinHandle<()>>>,
}

impl Committer {
    /// Start the writer thread over `store`.
    pub(crate) fn start(store: Arc<dyn KvStore>) -> Result<Self, StoreError> {
        let (requests, queue) = mpsc::channel::<Arc<dyn CommitSource>>();
        let thread = thread::Builder::new()
            .name("ebb-committer".into())
            .spawn(move || run(&*store, queue))
            .map_err(|e| StoreError::Engine(format!("cannot start committer thread: {e}")))?;
        Ok(Self {
            requests: parking_lot::RwLock::new(Some(requests)),
            thread: parking_lot::Mutex::new(Some(thread)),
        })
    }

    /// Ask for a write of what `source` holds: the thread takes its batch
    /// after this call, in the next group. A source should ask once until
    /// its batch is taken. Fails with [`StoreError::Closed`] once the
    /// committer is closed.
    pub(crate) fn request(&self, source: Arc<dyn CommitSource>) -> Result<(), StoreError> {
        let requests = self.requests.read();
        let sender = requests.as_ref().ok_or(StoreError::Closed)?;
        sender.send(source).map_err(|_| StoreError::Closed)
    }

    /// Refuse new requests, let the thread finish the queued ones and join
    /// it. Blocks: call it from a blocking context.
    pub(crate) fn close(&self) {
        drop(self.requests.write().take());
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

/// How long the writer thread goes without a request, after a write,
/// before it flushes the memtables that are worth it.
const IDLE_FLUSH_AFTER: Duration = Duration::from_secs(1);
/// Least bytes a family's memtable holds for an idle flush: under
/// sporadic writes, smaller ones would make many small table files.
const IDLE_FLUSH_MIN_BYTES: u64 = 1 << 20;

fn run(store: &dyn KvStore, queue: mpsc::Receiver<Arc<dyn CommitSource>>) {
    // Whether a group was written since the last idle flush.
    let mut written = false;
    let mut group = Group::default();
    loop {
        let first = if written {
            match queue.recv_timeout(IDLE_FLUSH_AFTER) {
                Ok(first) => first,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    written = false;
                    if let Err(error) = store.flush_idle(IDLE_FLUSH_MIN_BYTES) {
                        tracing::warn!(%error, "cannot flush idle memtables; they flush when full");
                    }
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        } else {
            match queue.recv() {
                Ok(first) => first,
                Err(_) => return,
            }
        };
        written = true;
        group.sources.push(first);
        while group.sources.len() < MAX_GROUP_SOURCES {
            match queue.try_recv() {
                Ok(next) => group.sources.push(next),
                Err(_) => break,
            }
        }
        write_group(store, &mut group);
    }
}

/// The lists a group is handled in, kept from one group to the next (a
/// group commit every few writes would otherwise allocate them anew);
/// empty between groups.
#[derive(Default)]
struct Group {
    sources: Vec<Arc<dyn CommitSource>>,
    taken: Vec<(Arc<dyn CommitSource>, u64)>,
    batches: Vec<StoreBatch>,
}

/// Take every source's batch, write them as one store write and report
/// the outcome to each. A source whose `take` panics is failed alone; a
/// panic in `finish` is contained, so the thread goes on.
fn write_group(store: &dyn KvStore, group: &mut Group) {
    let Group {
        sources,
        taken,
        batches,
    } = group;
    let mut sync = false;
    for source in sources.drain(..) {
        match catch_unwind(AssertUnwindSafe(|| source.take())) {
            Ok(take) => {
                sync |= take.sync;
                batches.push(take.batch);
                taken.push((source, take.through));
            }
            Err(_) => {
                let failed = Err(StoreError::Engine("taking a write batch panicked".into()));
                finish(&*source, NOT_TAKEN, &failed, false, Duration::ZERO);
            }
        }
    }
    if taken.is_empty() {
        return;
    }
    let started = Instant::now();
    // Sources whose writers asked after their last batch was taken have
    // nothing to write; a group of only those needs no store write.
    let outcome = if sync || batches.iter().any(|batch| !batch.is_empty()) {
        store.write(batches, sync)
    } else {
        Ok(())
    };
    let elapsed = started.elapsed();
    batches.clear();
    if let Err(error) = &outcome {
        tracing::warn!(%error, sources = taken.len(), "group commit failed; the write buffers keep their batches");
    }
    for (source, through) in taken.drain(..) {
        finish(&*source, through, &outcome, sync, elapsed);
    }
}

fn finish(
    source: &dyn CommitSource,
    through: u64,
    outcome: &Result<(), StoreError>,
    synced: bool,
    elapsed: Duration,
) {
    let finished = catch_unwind(AssertUnwindSafe(|| {
        source.finish(through, outcome, synced, elapsed)
    }));
    if finished.is_err() {
        tracing::error!("a write buffer panicked on the outcome of its group commit");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::TableName;
    use crate::record::{Record, Version};
    use crate::store::{MemoryStore, StoredRecord};

    /// A source holding one record's batch that records its outcomes.
    struct Source {
        key: String,
        sync: bool,
        panics: bool,
        outcomes: parking_lot::Mutex<Vec<(u64, bool, bool)>>,
    }

    impl Source {
        fn new(key: &str, sync: bool) -> Arc<Self> {
            Arc::new(Self {
                key: key.to_string(),
                sync,
                panics: false,
                outcomes: parking_lot::Mutex::new(Vec::new()),
            })
        }

        /// (through, succeeded, synced) per finished request.
        fn outcomes(&self) -> Vec<(u64, bool, bool)> {
            self.outcomes.lock().clone()
        }
    }

    impl CommitSource for Source {
        fn take(&self) -> Taken {
            assert!(!self.panics, "a bug while taking the batch");
            Taken {
                batch: StoreBatch {
                    records: vec![StoredRecord {
                        fragment: 0,
                        table: TableName::new("t").unwrap(),
                        key: Arc::from(self.key.as_str()),
                        record: Record::tombstone(Version {
                            hlc_ms: 1,
                            counter: 0,
                            writer: Arc::from("w"),
                        }),
                    }],
                    ..StoreBatch::default()
                },
                through: 7,
                sync: self.sync,
            }
        }

        fn finish(
            &self,
            through: u64,
            outcome: &Result<(), StoreError>,
            synced: bool,
            _: Duration,
        ) {
            self.outcomes
                .lock()
                .push((through, outcome.is_ok(), synced));
        }
    }

    /// Waits (bounded) until `done` holds.
    fn until(done: impl Fn() -> bool) {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(10));
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Holds the store's writes, requests `first`, waits until its write
    /// is held, then requests `rest`: they queue behind it.
    fn queue_behind_a_held_write(
        store: &MemoryStore,
        committer: &Committer,
        first: &Arc<Source>,
        rest: &[Arc<Source>],
    ) {
        store.set_holding(true);
        committer.request(first.clone()).unwrap();
        until(|| store.held_writes() == 1);
        for source in rest {
            committer.request(source.clone()).unwrap();
        }
        store.set_holding(false);
        until(|| rest.iter().chain([first]).all(|s| !s.outcomes().is_empty()));
    }

    #[test]
    fn requests_that_wait_for_a_write_share_the_next_ones_and_all_land() {
        let store = Arc::new(MemoryStore::new());
        let committer = Committer::start(store.clone()).unwrap();
        let first = Source::new("k0", false);
        let rest: Vec<_> = (1..500)
            .map(|i| Source::new(&format!("k{i}"), false))
            .collect();
        queue_behind_a_held_write(&store, &committer, &first, &rest);
        assert_eq!(store.record_count(), 500);
        for source in rest.iter().chain([&first]) {
            assert_eq!(source.outcomes(), vec![(7, true, false)]);
        }
        // The queued 499 share as few writes as the group cap allows.
        let shared = 499_usize.div_ceil(MAX_GROUP_SOURCES) as u64;
        assert_eq!(store.write_calls(), 1 + shared);
        assert_eq!(store.fsyncs(), 0, "no source asked for sync");
        committer.close();
    }

    #[test]
    fn one_sync_request_fsyncs_its_whole_group_and_only_it() {
        let store = Arc::new(MemoryStore::new());
        let committer = Committer::start(store.clone()).unwrap();
        let first = Source::new("k0", false);
        let group = [
            Source::new("a", false),
            Source::new("b", true),
            Source::new("c", false),
        ];
        queue_behind_a_held_write(&store, &committer, &first, &group);
        assert_eq!(
            store.write_calls(),
            2,
            "the three queued requests share one write"
        );
        assert_eq!(
            store.fsyncs(),
            1,
            "that write is fsynced for the one that asked; the first write is not"
        );
        assert_eq!(first.outcomes(), vec![(7, true, false)]);
        for source in &group {
            assert_eq!(
                source.outcomes(),
                vec![(7, true, true)],
                "all of the group is synced"
            );
        }
        committer.close();
    }

    #[test]
    fn a_failed_write_is_reported_to_each_source_and_a_panic_to_its_own() {
        let store = Arc::new(MemoryStore::new());
        let committer = Committer::start(store.clone()).unwrap();
        let failing = Source::new("k", false);
        store.set_failing(true);
        committer.request(failing.clone()).unwrap();
        until(|| !failing.outcomes().is_empty());
        assert_eq!(failing.outcomes(), vec![(7, false, false)]);
        store.set_failing(false);

        let mut broken = Source::new("broken", false);
        Arc::get_mut(&mut broken).unwrap().panics = true;
        let fine = Source::new("fine", false);
        committer.request(broken.clone()).unwrap();
        committer.request(fine.clone()).unwrap();
        committer.request(failing.clone()).unwrap();
        until(|| {
            broken.outcomes().len() == 1
                && fine.outcomes().len() == 1
                && failing.outcomes().len() == 2
        });
        assert_eq!(broken.outcomes(), vec![(NOT_TAKEN, false, false)]);
        assert_eq!(
            fine.outcomes(),
            vec![(7, true, false)],
            "the thread goes on"
        );
        assert_eq!(failing.outcomes()[1], (7, true, false));
        assert_eq!(store.record_count(), 2);
        committer.close();
        assert!(matches!(committer.request(fine), Err(StoreError::Closed)));
    }

    /// A source whose one batch holds `records` records of 1 KiB values.
    struct Bulk {
        records: usize,
        taken: std::sync::atomic::AtomicBool,
        finished: std::sync::atomic::AtomicBool,
    }

    impl CommitSource for Bulk {
        fn take(&self) -> Taken {
            use std::sync::atomic::Ordering;
            let mut batch = StoreBatch::default();
            if !self.taken.swap(true, Ordering::SeqCst) {
                let table = TableName::new("t").unwrap();
                batch.records = (0..self.records)
                    .map(|i| StoredRecord {
                        fragment: 0,
                        table: table.clone(),
                        key: Arc::from(format!("k{i}")),
                        record: Record::live(
                            Version {
                                hlc_ms: 1,
                                counter: i as u64,
                                writer: Arc::from("w"),
                            },
                            bytes::Bytes::from(vec![b'v'; 1024]),
                            None,
                        ),
                    })
                    .collect();
            }
            Taken {
                batch,
                through: 1,
                sync: false,
            }
        }

        fn finish(&self, _: u64, outcome: &Result<(), StoreError>, _: bool, _: Duration) {
            assert!(outcome.is_ok(), "{outcome:?}");
            self.finished
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn memtables_are_flushed_once_writes_stop() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::RocksStore::open(dir.path()).unwrap();
        let committer = Committer::start(store.clone()).unwrap();
        let memtables = || store.stats().unwrap().memtable_bytes;
        // 1.5 MiB of records: past the idle flush's floor, far below a
        // memtable's size, so only the idle flush empties it.
        let bulk = Arc::new(Bulk {
            records: 1536,
            taken: Default::default(),
            finished: Default::default(),
        });
        let started = Instant::now();
        committer.request(bulk.clone()).unwrap();
        until(|| bulk.finished.load(std::sync::atomic::Ordering::SeqCst));
        let written = memtables();
        assert!(
            written >= IDLE_FLUSH_MIN_BYTES,
            "{written} bytes in memtables"
        );
        until(|| memtables() < IDLE_FLUSH_MIN_BYTES / 4);
        assert!(
            started.elapsed() >= IDLE_FLUSH_AFTER,
            "flushed only once idle, after {:?}",
            started.elapsed()
        );
        committer.close();
    }
}
