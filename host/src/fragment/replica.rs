//! A fragment as a Raft group replicates it: its commands, answers and
//! snapshots in `ebb.fragment.v1`, for the group's state machine.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use ebb_proto::Message;
use ebb_proto::fragment::v1 as pb;
use futures::future::BoxFuture;

use super::command::{Applied, Command, CorruptCommand};
use super::entry::Entry;
use super::partition::{Partition, PartitionSnapshot};
use super::state::FragmentState;
use crate::names::{TableName, validate_key};
use crate::raft::{GroupMachine, Position};
use crate::record::{Record, own_writer};
use crate::store::outbox::{outbox_prefix, outbox_seq};
use crate::store::{
    Family, FamilyEntry, FamilyWrite, FragmentId, KvStore, PendingEvent, StoreError, prefix_end,
};

impl Applied {
    /// The answer a group gives the proposer of the command.
    pub(crate) fn encode(&self) -> Bytes {
        let (kind, count, bytes) = match *self {
            Applied::Written { .. } => (pb::outcome::Kind::Written, 0, 0),
            Applied::Skipped => (pb::outcome::Kind::Skipped, 0, 0),
            Applied::ConditionFailed => (pb::outcome::Kind::ConditionFailed, 0, 0),
            Applied::Expired { converted, bytes } => {
                (pb::outcome::Kind::Expired, converted as u64, bytes as u64)
            }
            Applied::Purged { purged } => (pb::outcome::Kind::Purged, purged as u64, 0),
            Applied::Settled { writes } => (pb::outcome::Kind::Settled, writes as u64, 0),
        };
        pb::Outcome {
            kind: kind as i32,
            count,
            bytes,
        }
        .encode_to_vec()
        .into()
    }

    /// Decode [`Self::encode`]'s answer. A `Written` answer carries no
    /// buffer position (`seq` 0): it is the applying replica's own.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, CorruptCommand> {
        let outcome = pb::Outcome::decode(bytes).map_err(|e| CorruptCommand::new(e.to_string()))?;
        let kind = pb::outcome::Kind::try_from(outcome.kind)
            .map_err(|_| CorruptCommand::new(format!("unknown outcome kind {}", outcome.kind)))?;
        Ok(match kind {
            pb::outcome::Kind::Written => Applied::Written { seq: 0 },
            pb::outcome::Kind::Skipped => Applied::Skipped,
            pb::outcome::Kind::ConditionFailed => Applied::ConditionFailed,
            pb::outcome::Kind::Expired => Applied::Expired {
                converted: outcome.count as usize,
                bytes: outcome.bytes as usize,
            },
            pb::outcome::Kind::Purged => Applied::Purged {
                purged: outcome.count as usize,
            },
            pb::outcome::Kind::Settled => Applied::Settled {
                writes: outcome.count as usize,
            },
            other => {
                return Err(CorruptCommand::new(format!(
                    "outcome kind {other:?} has no meaning"
                )));
            }
        })
    }
}

/// A fragment's state as a snapshot captures it.
///
/// The records are the partitions' views between two applies; the outbox
/// is read from the store when the snapshot is encoded, later (the group
/// flushed the write buffer before capturing, so the store holds every
/// event the view covers, unless settled since). That is sound because
/// every outbox change is keyed by its event's sequence number and
/// idempotent: a replica restoring the snapshot then applies every entry
/// after its position, and re-adding an event already there, or deleting
/// one already gone, changes nothing, while events converted after the
/// view are re-added by their conversions.
pub struct FragmentView {
    partitions: Vec<(TableName, PartitionSnapshot)>,
    /// The fragment and its store (`None` inside: closed), for a
    /// replicated fragment.
    outbox: Option<(FragmentId, Option<Arc<dyn KvStore>>)>,
}

/// The entries of `family` (the outbox or dead letters) whose event belongs
/// to `fragment`, in key order. The outbox is read by the fragment's key
/// prefix; dead letters, keyed by table and event id, by decoding each.
fn expiry_entries(
    store: &dyn KvStore,
    family: Family,
    fragment: FragmentId,
) -> Result<Vec<FamilyEntry>, StoreError> {
    let mut entries = Vec::new();
    let fragment_prefix = outbox_prefix(fragment);
    let prefix: &[u8] = if family == Family::ExpiryOutbox {
        &fragment_prefix
    } else {
        &[]
    };
    store.scan_family(family, prefix, &mut |key, value| {
        if family == Family::ExpiryOutbox
            || PendingEvent::decode(key, value)?.stored.fragment == fragment
        {
            entries.push((key.to_vec(), value.to_vec()));
        }
        Ok(())
    })?;
    Ok(entries)
}

impl GroupMachine for FragmentState {
    fn apply(&self, command: &[u8]) -> Result<Bytes, String> {
        let command = Command::decode(command).map_err(|e| e.to_string())?;
        Ok(self.apply_command(&command).encode())
    }

    /// Every partition's O(1) snapshot (records shared, not copied), and
    /// where the fragment's pending expiry events are read from when it is
    /// encoded.
    type Captured = FragmentView;

    fn capture(&self) -> Self::Captured {
        FragmentView {
            partitions: self
                .partitions()
                .into_iter()
                .map(|(table, partition)| {
                    let snapshot = partition.read().snapshot_at(0);
                    (table, snapshot)
                })
                .collect(),
            outbox: self.outbox_store().map(|store| (self.id(), store)),
        }
    }

    /// Tables in name order, records in key order, empty tables left out,
    /// then the fragment's outbox entries in key order: equal states give
    /// equal bytes. The outbox is read when encoding, later than the
    /// records were captured; see [`FragmentView`] for why that is sound. Fails
    /// only when the store is closed or cannot be read.
    fn encode(captured: Self::Captured) -> Result<Bytes, String> {
        let (outbox, dead_letters) = match captured.outbox {
            None => (Vec::new(), Vec::new()),
            Some((_, None)) => return Err("the store is closed".into()),
            Some((fragment, Some(store))) => {
                let event = |(key, value): (Vec<u8>, Vec<u8>)| pb::SnapshotEvent {
                    key: key.into(),
                    value: value.into(),
                };
                let outbox = expiry_entries(&*store, Family::ExpiryOutbox, fragment)
                    .map_err(|e| e.to_string())?;
                let dead = expiry_entries(&*store, Family::DeadLetters, fragment)
                    .map_err(|e| e.to_string())?;
                (
                    outbox.into_iter().map(event).collect(),
                    dead.into_iter().map(event).collect(),
                )
            }
        };
        let mut tables: Vec<pb::SnapshotTable> = captured
            .partitions
            .into_iter()
            .map(|(table, snapshot)| pb::SnapshotTable {
                table: table.as_str().to_string(),
                records: snapshot
                    .range::<std::ops::RangeFull>(..)
                    .map(|entry| pb::SnapshotRecord {
                        key: entry.key().to_string(),
                        record: entry.record().encode().into(),
                    })
                    .collect(),
            })
            .filter(|table| !table.records.is_empty())
            .collect();
        tables.sort_by(|a, b| a.table.cmp(&b.table));
        Ok(pb::Snapshot {
            tables,
            outbox,
            dead_letters,
        }
        .encode_to_vec()
        .into())
    }

    fn restore(&self, snapshot: &[u8]) -> Result<(), String> {
        let snapshot = pb::Snapshot::decode(snapshot).map_err(|e| e.to_string())?;
        let mut loaded = HashMap::new();
        for table in snapshot.tables {
            let name = TableName::system(&table.table).map_err(|e| e.to_string())?;
            let mut entries = Vec::with_capacity(table.records.len());
            for record in table.records {
                validate_key(&record.key).map_err(|e| e.to_string())?;
                let decoded =
                    Record::decode(&record.record, own_writer).map_err(|e| e.to_string())?;
                entries.push(Entry::new(&record.key, &decoded));
            }
            loaded.insert(name, Partition::from_loaded(entries));
        }
        let mut outbox = Vec::with_capacity(snapshot.outbox.len() + 1);
        let prefix = outbox_prefix(self.id());
        outbox.push(FamilyWrite::DeleteRange(
            Family::ExpiryOutbox,
            prefix.to_vec(),
            prefix_end(&prefix).ok_or("a fragment's outbox prefix has an end")?,
        ));
        for event in snapshot.outbox {
            if !event.key.starts_with(&prefix) {
                return Err(format!(
                    "an outbox entry of another fragment: {:?}",
                    event.key
                ));
            }
            let seq = outbox_seq(&event.key).ok_or("an outbox key without a sequence")?;
            self.persistence().outbox().observe_seq(seq);
            outbox.push(FamilyWrite::Put(
                Family::ExpiryOutbox,
                event.key.to_vec(),
                event.value.to_vec(),
            ));
        }
        // The dead letters: the fragment's own in the store go, the
        // snapshot's come.
        if let Some(Some(store)) = self.outbox_store() {
            let stale = expiry_entries(&*store, Family::DeadLetters, self.id())
                .map_err(|e| e.to_string())?;
            outbox.extend(
                stale
                    .into_iter()
                    .map(|(key, _)| FamilyWrite::Delete(Family::DeadLetters, key)),
            );
        }
        for dead in snapshot.dead_letters {
            outbox.push(FamilyWrite::Put(
                Family::DeadLetters,
                dead.key.to_vec(),
                dead.value.to_vec(),
            ));
        }
        self.replace_all(loaded);
        // After the records' writes, in the buffer's order: the outbox and
        // dead letters are exactly the snapshot's (the events buffered
        // before it included).
        if self.outbox_store().is_some() {
            self.persistence().enqueue_settled(outbox);
        }
        Ok(())
    }

    /// Written with the next batch of the write buffer, after every change
    /// enqueued by the commands it covers.
    fn record_position(&self, position: Position) {
        self.persistence().set_position(position);
    }

    fn persist(&self) -> BoxFuture<'static, Result<(), String>> {
        let persistence = self.persistence().clone();
        Box::pin(async move { persistence.flush().await.map_err(|e| e.to_string()) })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::HybridClock;
    use crate::fragment::command::WriteCommand;
    use crate::fragment::flush::ExpiryOutbox;
    use crate::raft::encoded;
    use crate::record::Version;
    use crate::store::{MemoryStore, PendingEvent};

    struct Unbound;

    impl ExpiryOutbox for Unbound {
        fn is_bound(&self, _: &TableName) -> bool {
            false
        }
        fn next_seq(&self) -> u64 {
            1
        }
        fn deliver(&self, _: Vec<PendingEvent>) {}
    }

    fn state() -> (FragmentState, Arc<MemoryStore>) {
        FragmentState::for_tests(0, Arc::new(Unbound), "n")
    }

    fn write(table: &str, key: &str, record: Record) -> Vec<u8> {
        Command::Write(WriteCommand {
            table: TableName::new(table).unwrap(),
            key: Arc::from(key),
            record,
            at_ms: 10,
            condition: crate::write::Condition::Always,
            change_seq: None,
        })
        .encode()
    }

    fn version(hlc_ms: u64) -> Version {
        Version {
            hlc_ms,
            counter: 0,
            writer: Arc::from("w"),
        }
    }

    #[tokio::test]
    async fn a_restored_snapshot_holds_exactly_the_source_s_records_in_memory_and_store() {
        let (source, _) = state();
        let (target, target_store) = state();
        for (state, keys) in [(&source, ["a", "b", "c"]), (&target, ["b", "x", "y"])] {
            for (i, key) in keys.iter().enumerate() {
                let live = Record::live(version(i as u64 + 1), Bytes::from(*key), None);
                let reply = state.apply(&write("t", key, live)).unwrap();
                let outcome = pb::Outcome::decode(&reply[..]).unwrap();
                assert_eq!(outcome.kind(), pb::outcome::Kind::Written);
            }
        }
        source
            .apply(&write("t", "c", Record::tombstone(version(9))))
            .unwrap();
        target
            .apply(&write(
                "gone",
                "k",
                Record::live(version(1), Bytes::new(), None),
            ))
            .unwrap();

        source
            .apply(&write(
                "t",
                "ttl",
                Record::live(version(5), Bytes::new(), Some(500)),
            ))
            .unwrap();
        target.expiry_wake().plan(u64::MAX);
        target.restore(&encoded(&source).unwrap()).unwrap();
        assert_eq!(
            target.expiry_wake().planned(),
            500,
            "the cleaner wakes for restored deadlines"
        );
        assert_eq!(encoded(&target), encoded(&source), "memory is the source's");
        let t = TableName::new("t").unwrap();
        assert_eq!(target.get(&t, "a", 20).unwrap().value, Bytes::from("a"));
        assert!(target.get(&t, "x", 20).is_none());
        assert!(target.get(&t, "c", 20).is_none(), "the tombstone came too");
        assert!(
            target
                .get(&TableName::new("gone").unwrap(), "k", 20)
                .is_none()
        );

        // The store holds the same: a, b, c's tombstone and ttl, nothing
        // else.
        target.persistence().flush().await.unwrap();
        let (records, _) = target_store.dump();
        assert_eq!(
            records.len(),
            4,
            "x, y and gone/k were removed from the store"
        );
    }

    /// Propose `command` to `raft` and return what applying it answered.
    async fn propose(
        raft: &crate::raft::testing::TestRaft<FragmentState>,
        command: Command,
    ) -> pb::Outcome {
        let reply = raft
            .client_write(crate::raft::Command::new(command.encode(), false))
            .await
            .unwrap()
            .data;
        pb::Outcome::decode(&reply.0[..]).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fragment_replicas_end_equal_and_one_that_was_away_catches_up_from_a_snapshot() {
        use crate::raft::testing::{
            Router, cluster, eventually, last_log_index, leader_other_than, purge_past,
        };

        let router = Router::default();
        let replicas = cluster(&router, 3, || state().0).await;
        let leader = leader_other_than(&replicas, None).await;
        let raft = &replicas[&leader].raft;
        let proposer = &replicas[&leader].machine;
        let clock = HybridClock::new(Arc::from("leader"), 0, 0);
        let put = |key: usize, ttl: Option<u64>, now: u64| {
            Command::Write(WriteCommand {
                table: TableName::new("t").unwrap(),
                key: Arc::from(format!("k{key:03}")),
                record: Record::live(clock.tick_at(now), Bytes::from(format!("v{key}")), ttl),
                at_ms: now,
                condition: crate::write::Condition::Always,
                change_seq: None,
            })
        };
        for key in 0..30 {
            let deadline = (key % 3 == 0).then_some(1_000 + key as u64);
            let outcome = propose(raft, put(key, deadline, 1_000)).await;
            assert_eq!(outcome.kind(), pb::outcome::Kind::Written);
        }
        // The leader chooses what is due and what to purge; every replica
        // applies the same choice.
        let (due, _) = proposer.due_page(1_020);
        assert_eq!(due.due.len(), 7, "keys 0, 3, .., 18 are due by 1 020");
        let outcome = propose(raft, Command::Expire(due)).await;
        assert_eq!(
            (outcome.kind(), outcome.count),
            (pb::outcome::Kind::Expired, 7)
        );
        let (purge, _) = proposer.purgeable_page(1_020);
        let outcome = propose(raft, Command::Purge(purge)).await;
        assert_eq!(
            (outcome.kind(), outcome.count),
            (pb::outcome::Kind::Purged, 7)
        );
        let equal = || {
            let snapshots: Vec<Bytes> = replicas
                .values()
                .map(|r| encoded(&*r.machine).unwrap())
                .collect();
            snapshots.windows(2).all(|w| w[0] == w[1])
        };
        eventually("the replicas to hold the same records", equal).await;

        // A follower away while the leader writes, snapshots and purges
        // comes back from the snapshot.
        let away = *replicas.keys().find(|id| **id != leader).unwrap();
        router.cut.lock().insert(away);
        for key in 30..60 {
            propose(raft, put(key, None, 2_000)).await;
        }
        purge_past(raft, last_log_index(&replicas[&away].raft)).await;
        router.cut.lock().clear();
        eventually("the replica that was away to catch up", equal).await;
        let t = TableName::new("t").unwrap();
        let back = &replicas[&away].machine;
        assert_eq!(
            back.get(&t, "k059", 2_000).unwrap().value,
            Bytes::from("v59")
        );
        assert!(back.get(&t, "k003", 2_000).is_none(), "expired and purged");
        for replica in replicas.values() {
            replica.raft.shutdown().await.unwrap();
        }
    }

    /// Write keys `k000`.. of table `t` through `raft`, one entry each;
    /// the log index of each.
    async fn write_keys(
        raft: &crate::raft::testing::TestRaft<FragmentState>,
        count: usize,
    ) -> Vec<u64> {
        let clock = HybridClock::new(Arc::from("leader"), 0, 0);
        let mut index_of = Vec::new();
        for key in 0..count {
            let command = write(
                "t",
                &format!("k{key:03}"),
                Record::live(clock.tick_at(1_000), Bytes::from("v"), None),
            );
            let written = raft
                .client_write(crate::raft::Command::new(command, false))
                .await
                .unwrap();
            index_of.push(written.log_id.index);
        }
        index_of
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restarted_replica_resumes_after_its_durable_position_with_its_log_purged() {
        use crate::raft::GroupId;
        use crate::raft::testing::{
            Router, applied_index, config, eventually, form_alone, purged_index, start_durable,
        };
        use crate::store::KvStore;

        let router = Router::default();
        let (state, store) = state();
        let shared: Arc<dyn KvStore> = store.clone();
        let replica = start_durable(&router, 1, &config(), Arc::new(state), shared.clone()).await;
        form_alone(&replica).await;
        let index_of = write_keys(&replica.raft, 40).await;
        // A snapshot every 10 entries, nothing kept behind it: the log is
        // purged past most of the writes.
        eventually("the log purged behind a snapshot", || {
            purged_index(&replica.raft) >= 30
        })
        .await;
        let purged_at = purged_index(&replica.raft);
        replica.raft.shutdown().await.unwrap();
        let replay_from = crate::raft::applied_index_at_rest(GroupId::fragment(0), shared.clone())
            .await
            .expect("a durable position");
        assert!(
            replay_from >= purged_at,
            "position {replay_from} < purged {purged_at}"
        );
        let (records, _) = store.dump();
        assert!(
            records.len() >= 30,
            "the writes a snapshot covers are on disk"
        );

        // A new replica over the same store, its memory empty: it resumes
        // after the durable position and re-applies only what follows.
        let fresh = Arc::new(FragmentState::for_tests_on(
            0,
            Arc::new(Unbound),
            "n",
            store.clone(),
        ));
        let again = start_durable(&router, 1, &config(), fresh.clone(), shared).await;
        let last = *index_of.last().unwrap();
        eventually("the restarted replica to apply every write", || {
            applied_index(&again.raft) >= last
        })
        .await;
        let replayed = index_of
            .iter()
            .filter(|index| **index > replay_from)
            .count();
        let t = TableName::new("t").unwrap();
        let in_memory = fresh.partition(&t).map_or(0, |p| p.read().len());
        assert_eq!(
            in_memory, replayed,
            "only entries after {replay_from} applied again"
        );
        again.raft.shutdown().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restarted_replica_purges_its_log_behind_the_snapshot_it_starts_from() {
        use crate::raft::testing::{
            Router, applied_index, eventually, form_alone, purged_index, start_durable,
        };
        use crate::store::KvStore;

        // A node's proportions: a snapshot every 50 entries, 5 kept behind
        // it, purges in runs of 50, so the log runs well past the last
        // purge between two snapshots.
        let config = Arc::new(
            openraft::Config {
                heartbeat_interval: 100,
                election_timeout_min: 1000,
                election_timeout_max: 2000,
                snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(50),
                max_in_snapshot_log_to_keep: 5,
                purge_batch_size: 50,
                ..Default::default()
            }
            .validate()
            .unwrap(),
        );
        let router = Router::default();
        let (state, store) = state();
        let shared: Arc<dyn KvStore> = store.clone();
        let replica = start_durable(&router, 1, &config, Arc::new(state), shared.clone()).await;
        form_alone(&replica).await;
        let last = *write_keys(&replica.raft, 145).await.last().unwrap();
        eventually("a purge behind a snapshot", || {
            purged_index(&replica.raft) > 0
        })
        .await;
        let purged_before = purged_index(&replica.raft);
        assert!(
            last >= purged_before + 20,
            "the log reaches well past its last purge (purged {purged_before}, last {last}), or this test proves nothing"
        );
        // Stopped with what it applied since its last snapshot not yet in
        // the store (as a node killed between two flushes of its buffer):
        // on start it applies the committed entries after its durable
        // position again, and starts from the snapshot of that state.
        replica.raft.shutdown().await.unwrap();

        // Restarted, and nothing written since: the log behind that
        // snapshot goes at once, but for the 5 kept.
        let fresh = Arc::new(FragmentState::for_tests_on(
            0,
            Arc::new(Unbound),
            "n",
            store.clone(),
        ));
        let again = start_durable(&router, 1, &config, fresh, shared).await;
        eventually("the restarted replica to purge behind its snapshot", || {
            applied_index(&again.raft) >= last && purged_index(&again.raft) >= last - 5
        })
        .await;
        again.raft.shutdown().await.unwrap();
    }

    #[test]
    fn corrupt_commands_and_snapshots_are_refused() {
        let (state, _) = state();
        assert!(state.apply(b"\xff\xff").is_err());
        let bad_key = pb::Snapshot {
            tables: vec![pb::SnapshotTable {
                table: "t".into(),
                records: vec![pb::SnapshotRecord {
                    key: String::new(),
                    record: Record::tombstone(version(1)).encode().into(),
                }],
            }],
            outbox: Vec::new(),
            dead_letters: Vec::new(),
        }
        .encode_to_vec();
        assert!(state.restore(&bad_key).is_err());
        assert!(state.restore(b"\xff\xff").is_err());
    }
}
