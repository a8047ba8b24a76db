//! openraft's storage test suite against ebb's log store, over RocksDB and
//! over the in-memory store. The suite needs a state machine too; the one
//! here only records what it applied (the fragments' state machine has its
//! own tests), so the suite's verdict is on the log store.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::type_config::alias::{SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use openraft::{EntryPayload, StorageError};
use parking_lot::Mutex;

use super::log_store::{AppendDurability, LogStore};
use super::log_writer::LogWriter;
use super::types::{GroupId, LogId, Reply, TypeConfig};
use crate::store::{KvStore, MemoryStore, RocksStore};

/// What the test state machine holds: the last applied entry, the last
/// membership and the commands it applied.
#[derive(Debug, Clone, Default)]
struct Applied {
    last: Option<LogId>,
    membership: StoredMembershipOf<TypeConfig>,
    commands: Vec<Bytes>,
}

type Current = Arc<Mutex<Option<(SnapshotMetaOf<TypeConfig>, Applied)>>>;

#[derive(Default)]
struct RecordingMachine {
    state: Applied,
    current: Current,
}

struct Builder {
    state: Applied,
    current: Current,
}

impl RaftSnapshotBuilder<TypeConfig> for Builder {
    type SnapshotData = Applied;

    async fn build_snapshot(&mut self) -> io::Result<SnapshotOf<TypeConfig, Applied>> {
        let meta = SnapshotMetaOf::<TypeConfig> {
            last_log_id: self.state.last,
            last_membership: self.state.membership.clone(),
        };
        *self.current.lock() = Some((meta.clone(), self.state.clone()));
        Ok(SnapshotOf::<TypeConfig, Applied> {
            meta,
            snapshot: self.state.clone(),
        })
    }
}

impl RaftStateMachine<TypeConfig> for RecordingMachine {
    type SnapshotData = Applied;
    type SnapshotBuilder = Builder;

    async fn applied_state(
        &mut self,
    ) -> io::Result<(Option<LogId>, StoredMembershipOf<TypeConfig>)> {
        Ok((self.state.last, self.state.membership.clone()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> io::Result<()>
    where
        S: Stream<Item = io::Result<EntryResponder<TypeConfig>>> + Unpin + Send,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            self.state.last = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(command) => self.state.commands.push(command.bytes),
                EntryPayload::Membership(membership) => {
                    self.state.membership =
                        StoredMembershipOf::<TypeConfig>::new(Some(entry.log_id), membership);
                }
            }
            if let Some(responder) = responder {
                responder.send(Reply::default());
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Builder {
        Builder {
            state: self.state.clone(),
            current: self.current.clone(),
        }
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMetaOf<TypeConfig>,
        snapshot: Applied,
    ) -> io::Result<()> {
        self.state = snapshot.clone();
        *self.current.lock() = Some((meta.clone(), snapshot));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> io::Result<Option<SnapshotOf<TypeConfig, Applied>>> {
        Ok(self
            .current
            .lock()
            .clone()
            .map(|(meta, snapshot)| SnapshotOf::<TypeConfig, Applied> { meta, snapshot }))
    }
}

/// Hands out the log of a new group of one shared store per build, so the
/// suite also checks that groups sharing a store stay apart.
struct SharedStore {
    store: Arc<dyn KvStore>,
    writer: LogWriter,
    next_group: AtomicU32,
    durability: AppendDurability,
}

impl SharedStore {
    fn new(store: Arc<dyn KvStore>, durability: AppendDurability) -> Self {
        Self {
            writer: LogWriter::start(store.clone()).unwrap(),
            store,
            next_group: AtomicU32::new(0),
            durability,
        }
    }
}

impl StoreBuilder<TypeConfig, LogStore, RecordingMachine, ()> for SharedStore {
    async fn build(&self) -> Result<((), LogStore, RecordingMachine), StorageError<TypeConfig>> {
        let group = GroupId::fragment(self.next_group.fetch_add(1, Ordering::Relaxed));
        let log = LogStore::new(
            group,
            self.store.clone(),
            self.writer.clone(),
            self.durability,
        );
        Ok(((), log, RecordingMachine::default()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_store_passes_openraft_s_suite_over_rocksdb() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn KvStore> = RocksStore::open(dir.path()).unwrap();
    Suite::test_all(SharedStore::new(store, AppendDurability::Sync))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_store_passes_openraft_s_suite_over_the_memory_store() {
    let store: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
    Suite::test_all(SharedStore::new(store, AppendDurability::Wal))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopened_store_has_each_group_s_log_vote_and_purge_marker() {
    use openraft::impls::leader_id_adv::LeaderId;
    use openraft::storage::{IOFlushed, RaftLogReader, RaftLogStorage};

    use super::types::{Command, Entry, Vote};

    let dir = tempfile::tempdir().unwrap();
    let log_id = |term: u64, index: u64| LogId::new(LeaderId { term, node_id: 1 }, index);
    let entry = |term: u64, index: u64| Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(Command::new(Bytes::from(format!("command {index}")), false)),
    };
    let open = |store: &Arc<dyn KvStore>, writer: &LogWriter, group: u32| {
        LogStore::new(
            GroupId::fragment(group),
            store.clone(),
            writer.clone(),
            AppendDurability::Wal,
        )
    };
    {
        let store: Arc<dyn KvStore> = RocksStore::open(dir.path()).unwrap();
        let writer = LogWriter::start(store.clone()).unwrap();
        let mut first = open(&store, &writer, 0);
        let mut second = open(&store, &writer, 1);
        let mut meta = LogStore::new(
            GroupId::META,
            store.clone(),
            writer.clone(),
            AppendDurability::Sync,
        );
        first
            .append((1..=5).map(|i| entry(1, i)), IOFlushed::noop())
            .await
            .unwrap();
        second
            .append((1..=3).map(|i| entry(2, i)), IOFlushed::noop())
            .await
            .unwrap();
        meta.append([entry(1, 1)], IOFlushed::noop()).await.unwrap();
        first.save_vote(&Vote::new_committed(1, 1)).await.unwrap();
        first.purge(log_id(1, 2)).await.unwrap();
        second.truncate_after(Some(log_id(2, 1))).await.unwrap();
        writer.close();
        assert!(
            first.save_vote(&Vote::new(2, 1)).await.is_err(),
            "a closed writer takes no writes"
        );
    }
    let store: Arc<dyn KvStore> = RocksStore::open(dir.path()).unwrap();
    let writer = LogWriter::start(store.clone()).unwrap();
    let mut first = open(&store, &writer, 0);
    let mut second = open(&store, &writer, 1);
    let state = first.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 2)));
    assert_eq!(state.last_log_id, Some(log_id(1, 5)));
    let mut reader = first.get_log_reader().await;
    let indexes: Vec<u64> = reader
        .try_get_log_entries(0..)
        .await
        .unwrap()
        .iter()
        .map(|e| e.log_id.index)
        .collect();
    assert_eq!(indexes, [3, 4, 5]);
    assert_eq!(
        reader.read_vote().await.unwrap(),
        Some(Vote::new_committed(1, 1))
    );
    let state = second.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(log_id(2, 1)));
    assert_eq!(
        second.get_log_reader().await.read_vote().await.unwrap(),
        None
    );
    let mut meta = LogStore::new(
        GroupId::META,
        store.clone(),
        writer.clone(),
        AppendDurability::Sync,
    );
    assert_eq!(
        meta.get_log_state().await.unwrap().last_log_id,
        Some(log_id(1, 1))
    );
}
