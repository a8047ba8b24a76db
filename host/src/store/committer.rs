//! Group commit: one writer thread that merges concurrent commit requests
//! into single store writes.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;

use tokio::sync::oneshot;

use super::{KvStore, StoreBatch, StoreError};

/// Most requests merged into one store write.
const MAX_GROUP_REQUESTS: usize = 256;
/// Most records merged into one store write (a group stops growing past it).
const MAX_GROUP_RECORDS: usize = 64 * 1024;

struct CommitRequest {
    batch: StoreBatch,
    sync: bool,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

/// The node's writer thread. Every durable write goes through it: requests
/// that arrive while a write is in progress are merged into the next one, so
/// many concurrent `wal` writers share one RocksDB write and one `sync`
/// writer's fsync covers everyone in its group.
///
/// The thread owns no data: a failed group is reported to each requester,
/// which keeps its batch and retries.
pub(crate) struct Committer {
    requests: parking_lot::RwLock<Option<mpsc::Sender<CommitRequest>>>,
    thread: parking_lot::Mutex<Option<thread::JoinHandle<()>>>,
}

impl Committer {
    /// Start the writer thread over `store`.
    pub(crate) fn start(store: Arc<dyn KvStore>) -> Result<Self, StoreError> {
        let (requests, queue) = mpsc::channel::<CommitRequest>();
        let thread = thread::Builder::new()
            .name("ebb-committer".into())
            .spawn(move || run(&*store, queue))
            .map_err(|e| StoreError::Engine(format!("cannot start committer thread: {e}")))?;
        Ok(Self {
            requests: parking_lot::RwLock::new(Some(requests)),
            thread: parking_lot::Mutex::new(Some(thread)),
        })
    }

    /// Commit `batch` (atomically, possibly together with other requests) and
    /// wait for the outcome. `sync` asks for an fsync before the reply.
    pub(crate) async fn commit(&self, batch: StoreBatch, sync: bool) -> Result<(), StoreError> {
        let (reply, outcome) = oneshot::channel();
        {
            let requests = self.requests.read();
            let sender = requests.as_ref().ok_or(StoreError::Closed)?;
            sender
                .send(CommitRequest { batch, sync, reply })
                .map_err(|_| StoreError::Closed)?;
        }
        outcome.await.map_err(|_| StoreError::Closed)?
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

fn run(store: &dyn KvStore, queue: mpsc::Receiver<CommitRequest>) {
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        let mut records = group[0].batch.len();
        while group.len() < MAX_GROUP_REQUESTS && records < MAX_GROUP_RECORDS {
            match queue.try_recv() {
                Ok(next) => {
                    records += next.batch.len();
                    group.push(next);
                }
                Err(_) => break,
            }
        }
        let sync = group.iter().any(|r| r.sync);
        let (batches, replies): (Vec<_>, Vec<_>) =
            group.into_iter().map(|r| (r.batch, r.reply)).unzip();
        let outcome = store.write(&batches, sync);
        if let Err(error) = &outcome {
            tracing::warn!(%error, requests = replies.len(), "group commit failed; requesters keep their batches");
        }
        for reply in replies {
            let _ = reply.send(outcome.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::TableName;
    use crate::record::{Record, Version};
    use crate::store::{MemoryStore, StoredRecord};

    fn batch(key: &str) -> StoreBatch {
        StoreBatch {
            records: vec![StoredRecord {
                fragment: 0,
                table: TableName::new("t").unwrap(),
                key: Arc::from(key),
                record: Record::tombstone(Version {
                    hlc_ms: 1,
                    counter: 0,
                    writer: Arc::from("w"),
                }),
            }],
            ..StoreBatch::default()
        }
    }

    /// Waits (on the condition, bounded) until the store holds one write.
    async fn until_one_write_is_held(store: &MemoryStore) {
        let started = std::time::Instant::now();
        while store.held_writes() != 1 {
            assert!(started.elapsed() < std::time::Duration::from_secs(10));
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commits_that_wait_for_a_write_share_the_next_ones_and_all_land() {
        let store = Arc::new(MemoryStore::new());
        let committer = Arc::new(Committer::start(store.clone()).unwrap());
        // The first commit's write is held (a slow disk) ...
        store.set_holding(true);
        let first = tokio::spawn({
            let committer = committer.clone();
            async move { committer.commit(batch("k0"), false).await }
        });
        until_one_write_is_held(&store).await;
        // ... while 499 more commits queue behind it: each sends its request
        // on the first poll.
        let rest: Vec<_> = (1..500)
            .map(|i| committer.commit(batch(&format!("k{i}")), false))
            .collect();
        let mut rest = std::pin::pin!(futures::future::join_all(rest));
        assert!(futures::poll!(rest.as_mut()).is_pending());
        store.set_holding(false);
        first.await.unwrap().unwrap();
        for outcome in rest.await {
            outcome.unwrap();
        }
        assert_eq!(store.record_count(), 500);
        // The queued 499 share as few writes as the group cap allows.
        assert!(store.write_calls() < 100, "{} writes", store.write_calls());
        let shared = 499_usize.div_ceil(MAX_GROUP_REQUESTS) as u64;
        assert_eq!(store.write_calls(), 1 + shared);
        assert_eq!(store.fsyncs(), 0, "no commit asked for sync");
        committer.close();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_sync_request_fsyncs_its_whole_group_and_only_it() {
        let store = Arc::new(MemoryStore::new());
        let committer = Arc::new(Committer::start(store.clone()).unwrap());
        store.set_holding(true);
        let first = tokio::spawn({
            let committer = committer.clone();
            async move { committer.commit(batch("k0"), false).await }
        });
        until_one_write_is_held(&store).await;
        let group = vec![
            committer.commit(batch("a"), false),
            committer.commit(batch("b"), true),
            committer.commit(batch("c"), false),
        ];
        let mut group = std::pin::pin!(futures::future::join_all(group));
        assert!(futures::poll!(group.as_mut()).is_pending());
        store.set_holding(false);
        first.await.unwrap().unwrap();
        for outcome in group.await {
            outcome.unwrap();
        }
        assert_eq!(
            store.write_calls(),
            2,
            "the three queued commits share one write"
        );
        assert_eq!(
            store.fsyncs(),
            1,
            "that write is fsynced for the one that asked; the first write is not"
        );
        committer.close();
    }

    #[tokio::test]
    async fn a_failed_write_is_reported_to_the_requester() {
        let store = Arc::new(MemoryStore::new());
        let committer = Committer::start(store.clone()).unwrap();
        store.set_failing(true);
        assert!(matches!(
            committer.commit(batch("k"), true).await,
            Err(StoreError::Engine(_))
        ));
        store.set_failing(false);
        committer.commit(batch("k"), true).await.unwrap();
        assert_eq!(store.record_count(), 1);
    }
}
