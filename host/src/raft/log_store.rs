//! A Raft group's log and vote in the node's store: entries in the
//! `raft_log` family keyed `group (u32 BE) · index (u64 BE)`, the vote and
//! the log markers in `raft_state` keyed `group · tag`. Many groups share
//! one store, each confined to its own key prefix.
//!
//! Invariants openraft relies on: writes take effect in call order (one
//! writer thread, [`LogWriter`]); an appended entry is readable when
//! `append` returns (from memory: `append` queues the write and returns,
//! so the group goes on while the writer fsyncs) and reported flushed only
//! once durable; a saved vote is
//! fsynced before `save_vote` returns; a purge records its marker in the
//! same atomic write that deletes the entries. Reads run on blocking
//! threads, never on a tokio worker, except those the group's recent
//! entries in memory ([`RecentEntries`]) answer: a leader replicating what
//! it just appended reads them there, without a store iterator.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};

use super::codec::{
    decode_entry, decode_marker, decode_position, decode_vote, encode_entry, encode_marker,
    encode_vote,
};
use super::log_writer::LogWriter;
use super::types::{Entry, GroupId, LogId, StoredMembership, TypeConfig, Vote};
use crate::store::{Family, FamilyWrite, KvStore, StoreError};

/// Tags of a group's entries in `raft_state`.
const TAG_VOTE: u8 = 1;
const TAG_PURGED: u8 = 2;
const TAG_COMMITTED: u8 = 3;
/// The state machine's applied position, written by the machine with the
/// state it covers (not by the log store).
const TAG_APPLIED: u8 = 4;

/// When appended entries count as flushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendDurability {
    /// Once in RocksDB's write-ahead log: survives the process being
    /// killed, not the machine losing power.
    Wal,
    /// Once the write-ahead log is fsynced.
    Sync,
}

fn io_error(error: StoreError) -> io::Error {
    io::Error::other(error)
}

/// The key of entry `index` of `group`.
fn entry_key(group: GroupId, index: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(12);
    key.extend_from_slice(&group.prefix());
    key.extend_from_slice(&index.to_be_bytes());
    key
}

/// A key past every entry key of `group`.
fn entries_end(group: GroupId) -> Vec<u8> {
    let mut key = group.prefix().to_vec();
    key.extend_from_slice(&[0xff; 9]);
    key
}

fn state_key(group: GroupId, tag: u8) -> Vec<u8> {
    let mut key = group.prefix().to_vec();
    key.push(tag);
    key
}

/// Where `group`'s applied position lives in `raft_state`.
pub(super) fn position_key(group: GroupId) -> Vec<u8> {
    state_key(group, TAG_APPLIED)
}

/// The applied position of `group` in `store` (the last entry its state
/// machine applied and made durable, with the last membership among
/// them), read on a blocking thread; `None` if it never applied anything.
pub(super) async fn read_position(
    group: GroupId,
    store: Arc<dyn KvStore>,
) -> io::Result<Option<(LogId, StoredMembership)>> {
    LogReader {
        group,
        store,
        recent: Arc::default(),
    }
    .read_state(TAG_APPLIED, decode_position)
    .await
}

/// Most entries a group keeps in memory.
const RECENT_ENTRIES: usize = 512;
/// Most command bytes a group keeps in memory (the entries' payloads,
/// copied, so no network buffer outlives its message).
const RECENT_BYTES: usize = 512 * 1024;

/// The tail of a group's log in memory: the entries appended since the
/// node started (or since the last gap), up to [`RECENT_ENTRIES`] and
/// [`RECENT_BYTES`], oldest dropped first, except that an entry whose
/// append is not yet in the store is never dropped (its only copy is
/// here until the writer thread has written it).
///
/// Invariants: the entries are contiguous and, when there are any, the last
/// is the log's last (every append, truncation and purge goes through
/// [`LogStore`], which updates them as it queues the store write), so a
/// range within them reads what the store holds or is about to; every
/// entry before the first held is in the store (or purged).
#[derive(Default)]
struct RecentEntries {
    entries: VecDeque<Entry>,
    /// The append (its sequence number) that brought each entry, in step
    /// with `entries`.
    appends: VecDeque<u64>,
    bytes: usize,
    /// Every append numbered up to this is in the store.
    stored_through: u64,
    /// The log's last entry as appends and truncations left it, once one
    /// of them ran (the store's may still lag behind it).
    last: Option<Option<LogId>>,
}

fn payload_len(entry: &Entry) -> usize {
    match &entry.payload {
        openraft::EntryPayload::Normal(command) => command.bytes.len(),
        _ => 0,
    }
}

impl RecentEntries {
    /// Add entries (contiguous, ascending) whose store write is append
    /// number `append`, queued; a gap after the ones held drops those
    /// first (a snapshot was installed past them: no read asks for them).
    fn append(&mut self, appended: Vec<Entry>, append: u64) {
        let Some(first) = appended.first() else {
            return;
        };
        if self
            .entries
            .back()
            .is_some_and(|last| last.log_id.index + 1 != first.log_id.index)
        {
            self.entries.clear();
            self.appends.clear();
            self.bytes = 0;
        }
        for entry in appended {
            self.bytes += payload_len(&entry);
            self.last = Some(Some(entry.log_id));
            self.entries.push_back(entry);
            self.appends.push_back(append);
        }
        self.trim();
    }

    /// Appends up to number `append` are in the store.
    fn stored(&mut self, append: u64) {
        self.stored_through = self.stored_through.max(append);
        self.trim();
    }

    /// Drop the oldest entries beyond the bounds, stopping at the first
    /// not yet in the store.
    fn trim(&mut self) {
        while self.entries.len() > RECENT_ENTRIES || self.bytes > RECENT_BYTES {
            if self
                .appends
                .front()
                .is_none_or(|append| *append > self.stored_through)
            {
                break;
            }
            self.appends.pop_front();
            if let Some(dropped) = self.entries.pop_front() {
                self.bytes -= payload_len(&dropped);
            }
        }
    }

    /// Drop entries after `index` (`None`: all).
    fn truncate_after(&mut self, index: Option<u64>) {
        while let Some(last) = self.entries.back() {
            if index.is_some_and(|index| last.log_id.index <= index) {
                break;
            }
            self.bytes -= payload_len(last);
            self.entries.pop_back();
            self.appends.pop_back();
        }
    }

    /// Drop entries up to and including `index`.
    fn purge(&mut self, index: u64) {
        while let Some(first) = self.entries.front() {
            if first.log_id.index > index {
                break;
            }
            self.bytes -= payload_len(first);
            self.entries.pop_front();
            self.appends.pop_front();
        }
    }

    /// For a read of `start..end` that begins before the entries held and
    /// reaches into them: the first index held and the held entries up to
    /// `end` (or the last). Everything before that index is in the store.
    fn tail(&self, start: u64, end: Option<u64>) -> Option<(u64, Vec<Entry>)> {
        let first = self.entries.front()?.log_id.index;
        let after_last = self.entries.back()?.log_id.index + 1;
        if start >= first || end.is_some_and(|end| end <= first) {
            return None;
        }
        let end = end.map_or(after_last, |end| end.min(after_last));
        let held = self.entries.range(..(end - first) as usize).cloned();
        Some((first, held.collect()))
    }

    /// Entries `start..end` (`end` `None`: to the last) if every one of
    /// them is held here; `None` sends the read to the store.
    fn range(&self, start: u64, end: Option<u64>) -> Option<Vec<Entry>> {
        let first = self.entries.front()?.log_id.index;
        let after_last = self.entries.back()?.log_id.index + 1;
        let end = end.unwrap_or(after_last);
        if start < first || start > after_last || end > after_last {
            return None;
        }
        let from = (start - first) as usize;
        let to = (end.max(start) - first) as usize;
        Some(self.entries.range(from..to).cloned().collect())
    }
}

/// Reads a group's log; cheap to clone, one per replication stream.
#[derive(Clone)]
pub struct LogReader {
    group: GroupId,
    store: Arc<dyn KvStore>,
    recent: Arc<Mutex<RecentEntries>>,
}

impl LogReader {
    /// Run a store read on a blocking thread.
    async fn blocking<T: Send + 'static>(
        &self,
        read: impl FnOnce(&dyn KvStore) -> Result<T, StoreError> + Send + 'static,
    ) -> io::Result<T> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || read(store.as_ref()))
            .await
            .map_err(io::Error::other)?
            .map_err(io_error)
    }

    async fn read_state<T: Send + 'static>(
        &self,
        tag: u8,
        decode: fn(&[u8]) -> Result<T, super::codec::CorruptRaftState>,
    ) -> io::Result<Option<T>> {
        let key = state_key(self.group, tag);
        let raw = self
            .blocking(move |store| store.read_entry(Family::RaftState, &key))
            .await?;
        raw.map(|raw| decode(&raw).map_err(io::Error::other))
            .transpose()
    }

    async fn last_entry(&self) -> io::Result<Option<Entry>> {
        let (from, to) = (entry_key(self.group, 0), entries_end(self.group));
        let last = self
            .blocking(move |store| store.last_in_range(Family::RaftLog, &from, &to))
            .await?;
        last.map(|(_, raw)| decode_entry(&raw).map_err(io::Error::other))
            .transpose()
    }
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> io::Result<Vec<Entry>> {
        let start = match range.start_bound() {
            Bound::Included(&i) => Some(i),
            Bound::Excluded(&i) => i.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let Some(start) = start else {
            return Ok(Vec::new());
        };
        let end = match range.end_bound() {
            Bound::Included(&i) => i.checked_add(1),
            Bound::Excluded(&i) => Some(i),
            Bound::Unbounded => None,
        };
        // What memory holds of the range, taken before the store is read:
        // entries from the first held on may not be in the store yet, and
        // every one before it is.
        let held = {
            let recent = self.recent.lock();
            if let Some(entries) = recent.range(start, end) {
                return Ok(entries);
            }
            recent.tail(start, end)
        };
        let from = entry_key(self.group, start);
        let to = match (&held, range.end_bound()) {
            (Some((first, _)), _) => entry_key(self.group, *first),
            (None, Bound::Included(&i)) => match i.checked_add(1) {
                Some(end) => entry_key(self.group, end),
                None => entries_end(self.group),
            },
            (None, Bound::Excluded(&i)) => entry_key(self.group, i),
            (None, Bound::Unbounded) => entries_end(self.group),
        };
        if from >= to {
            return Ok(held.map(|(_, held)| held).unwrap_or_default());
        }
        let mut entries = self
            .blocking(move |store| {
                let mut entries = Vec::new();
                store.scan_range(Family::RaftLog, &from, &to, &mut |key, raw| {
                    let entry = decode_entry(raw).map_err(|e| StoreError::Corrupt {
                        key: format!("{key:?}"),
                        reason: e.to_string(),
                    })?;
                    entries.push(entry);
                    Ok(())
                })?;
                Ok(entries)
            })
            .await?;
        if let Some((first, held)) = held {
            // The store's part ends right before the held part (or is empty:
            // the log starts there); were it to end sooner, the read stops
            // where the store's does rather than skip entries.
            if entries
                .last()
                .is_none_or(|last| last.log_id.index + 1 == first)
            {
                entries.extend(held);
            }
        }
        Ok(entries)
    }

    async fn read_vote(&mut self) -> io::Result<Option<Vote>> {
        self.read_state(TAG_VOTE, decode_vote).await
    }
}

/// One group's log storage.
pub struct LogStore {
    reader: LogReader,
    writer: LogWriter,
    /// The number of the last append queued (see [`RecentEntries`]).
    appends: u64,
    durability: AppendDurability,
    /// The committed marker last saved, which may still be queued for the
    /// store; `None` until one is saved.
    committed: Option<Option<LogId>>,
}

impl LogStore {
    /// The log of `group` in `store`, written through `writer` (shared by
    /// every group of the store), with appends flushed at `durability`.
    pub fn new(
        group: GroupId,
        store: Arc<dyn KvStore>,
        writer: LogWriter,
        durability: AppendDurability,
    ) -> Self {
        Self {
            reader: LogReader {
                group,
                store,
                recent: Arc::default(),
            },
            writer,
            appends: 0,
            durability,
            committed: None,
        }
    }

    fn group(&self) -> GroupId {
        self.reader.group
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> io::Result<LogState<TypeConfig>> {
        let last_purged_log_id = self
            .reader
            .read_state(TAG_PURGED, decode_marker)
            .await?
            .flatten();
        // Appends may still be queued for the store: the last entry as they
        // and truncations left it, once there is one.
        let tracked = self.reader.recent.lock().last;
        let last_entry = match tracked {
            Some(last) => last,
            None => self.reader.last_entry().await?.map(|entry| entry.log_id),
        };
        let last_log_id = last_entry.max(last_purged_log_id);
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        self.reader.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> io::Result<()> {
        let write = FamilyWrite::Put(
            Family::RaftState,
            state_key(self.group(), TAG_VOTE),
            encode_vote(vote),
        );
        self.writer
            .write(vec![write], true, None)
            .await
            .map_err(io_error)
    }

    /// Queued behind the appends before it without waiting: openraft
    /// waits for this before applying, and a marker lost in a crash only
    /// means the restarted replica applies up to an earlier one (its state
    /// machine keeps its own durable position) until it hears from the
    /// leader. Committed entries are never truncated, so the marker never
    /// points past the log.
    async fn save_committed(&mut self, committed: Option<LogId>) -> io::Result<()> {
        let write = FamilyWrite::Put(
            Family::RaftState,
            state_key(self.group(), TAG_COMMITTED),
            encode_marker(committed.as_ref()),
        );
        self.writer.submit(vec![write]);
        self.committed = Some(committed);
        Ok(())
    }

    async fn read_committed(&mut self) -> io::Result<Option<LogId>> {
        if let Some(committed) = self.committed {
            return Ok(committed);
        }
        Ok(self
            .reader
            .read_state(TAG_COMMITTED, decode_marker)
            .await?
            .flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<TypeConfig>) -> io::Result<()>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let group = self.group();
        let mut sync = self.durability == AppendDurability::Sync;
        let mut recent = Vec::new();
        let writes: Vec<FamilyWrite> = entries
            .into_iter()
            .map(|mut entry| {
                let write = FamilyWrite::Put(
                    Family::RaftLog,
                    entry_key(group, entry.log_id.index),
                    encode_entry(&entry),
                );
                if let openraft::EntryPayload::Normal(command) = &mut entry.payload {
                    sync |= command.sync;
                    command.bytes = Bytes::copy_from_slice(&command.bytes);
                }
                recent.push(entry);
                write
            })
            .collect();
        self.appends += 1;
        let append = self.appends;
        // Readable from memory from now on; held there until written.
        self.reader.recent.lock().append(recent, append);
        let held = self.reader.recent.clone();
        self.writer
            .append(writes, sync, callback, move || held.lock().stored(append))
            .map_err(io_error)
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> io::Result<()> {
        let group = self.group();
        let from = match last_log_id {
            Some(id) => match id.index.checked_add(1) {
                Some(next) => entry_key(group, next),
                None => return Ok(()),
            },
            None => entry_key(group, 0),
        };
        let write = FamilyWrite::DeleteRange(Family::RaftLog, from, entries_end(group));
        {
            let mut recent = self.reader.recent.lock();
            recent.truncate_after(last_log_id.map(|id| id.index));
            // Entries after `last_log_id` go; a shorter log keeps its last.
            if let Some(last) = recent.last {
                let index = |id: Option<LogId>| id.map(|id| id.index);
                if index(last) > index(last_log_id) {
                    recent.last = Some(last_log_id);
                }
            }
        }
        self.writer
            .write(vec![write], false, None)
            .await
            .map_err(io_error)
    }

    async fn purge(&mut self, log_id: LogId) -> io::Result<()> {
        let group = self.group();
        let to = match log_id.index.checked_add(1) {
            Some(end) => entry_key(group, end),
            None => entries_end(group),
        };
        let writes = vec![
            FamilyWrite::Put(
                Family::RaftState,
                state_key(group, TAG_PURGED),
                encode_marker(Some(&log_id)),
            ),
            FamilyWrite::DeleteRange(Family::RaftLog, entry_key(group, 0), to),
        ];
        self.reader.recent.lock().purge(log_id.index);
        self.writer
            .write(writes, false, None)
            .await
            .map_err(io_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::types::{Command, Payload};
    use openraft::impls::leader_id_adv::LeaderId;

    fn entry(index: u64, bytes: usize) -> Entry {
        Entry {
            log_id: LogId::new(
                LeaderId {
                    term: 1,
                    node_id: 1,
                },
                index,
            ),
            payload: Payload::Normal(Command::new(vec![7u8; bytes], false)),
        }
    }

    fn indexes(entries: Option<Vec<Entry>>) -> Option<Vec<u64>> {
        entries.map(|entries| entries.iter().map(|e| e.log_id.index).collect())
    }

    #[test]
    fn recent_entries_hold_a_bounded_contiguous_tail() {
        let mut recent = RecentEntries::default();
        assert_eq!(indexes(recent.range(1, None)), None, "nothing held");
        recent.append((1..=600).map(|i| entry(i, 10)).collect(), 1);
        // Not in the store yet: every entry is held, past the bounds.
        assert_eq!(recent.entries.len(), 600);
        assert_eq!(indexes(recent.range(1, Some(3))), Some(vec![1, 2]));
        recent.stored(1);
        // The oldest beyond the count bound went; reads reaching them go
        // to the store.
        assert_eq!(recent.entries.len(), RECENT_ENTRIES);
        assert_eq!(recent.range(88, Some(100)), None);
        assert_eq!(indexes(recent.range(89, Some(92))), Some(vec![89, 90, 91]));
        assert_eq!(indexes(recent.range(599, None)), Some(vec![599, 600]));
        assert_eq!(indexes(recent.range(600, Some(600))), Some(vec![]));
        // Past the last held: the store (which may hold it by now).
        assert_eq!(recent.range(600, Some(602)), None);
        assert_eq!(recent.range(605, None), None);
        assert_eq!(indexes(recent.range(601, None)), Some(vec![]));
        assert_eq!(indexes(recent.range(500, Some(400))), Some(vec![]));

        recent.truncate_after(Some(595));
        assert_eq!(indexes(recent.range(594, None)), Some(vec![594, 595]));
        recent.purge(590);
        assert_eq!(recent.range(590, None), None);
        assert_eq!(indexes(recent.range(591, Some(593))), Some(vec![591, 592]));
        // A gap (a snapshot installed past them) starts over.
        recent.append(vec![entry(900, 10)], 2);
        assert_eq!(indexes(recent.range(900, None)), Some(vec![900]));
        assert_eq!(recent.range(595, None), None);
        recent.truncate_after(None);
        assert!(recent.entries.is_empty());
        assert_eq!(recent.bytes, 0);

        // The byte bound: 100 KiB entries, five of them at most once
        // written; appends written out of step free only their own.
        recent.append((1..=4).map(|i| entry(i, 100 * 1024)).collect(), 3);
        recent.append((5..=8).map(|i| entry(i, 100 * 1024)).collect(), 4);
        assert_eq!(recent.entries.len(), 8);
        recent.stored(3);
        assert_eq!(recent.entries.len(), 5, "append 4 is not written yet");
        assert_eq!(indexes(recent.range(4, None)), Some(vec![4, 5, 6, 7, 8]));
        recent.append(vec![entry(9, 100 * 1024)], 5);
        assert_eq!(indexes(recent.range(5, None)), Some(vec![5, 6, 7, 8, 9]));
        recent.stored(5);
        assert_eq!(recent.entries.len(), 5);
        assert_eq!(recent.bytes, 5 * 100 * 1024);
        assert_eq!(recent.appends.len(), 5);
        assert_eq!(recent.last.flatten().map(|id| id.index), Some(9));
    }

    /// Entries whose write is still queued are read from memory, a read
    /// starting below what memory holds joins the store's part to them,
    /// and the log state counts them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_joins_the_store_to_entries_not_yet_written() {
        let store: Arc<dyn KvStore> = Arc::new(crate::store::MemoryStore::new());
        let writer = LogWriter::start(store.clone()).unwrap();
        let mut log = LogStore::new(
            GroupId::fragment(0),
            store,
            writer.clone(),
            AppendDurability::Wal,
        );
        use openraft::type_config::TypeConfigExt;
        let (flushed, written) = TypeConfig::oneshot();
        log.append((1..=100).map(|i| entry(i, 10)), IOFlushed::signal(flushed))
            .await
            .unwrap();
        written.await.unwrap().unwrap();
        // As if 101..=700 were appended and their write still queued.
        log.reader
            .recent
            .lock()
            .append((101..=700).map(|i| entry(i, 10)).collect(), u64::MAX);
        let mut reader = log.get_log_reader().await;
        let read = reader.try_get_log_entries(50..=700).await.unwrap();
        let read: Vec<u64> = read.iter().map(|e| e.log_id.index).collect();
        assert_eq!(read, (50..=700).collect::<Vec<_>>());
        // Past the last entry: what exists, the unwritten tail included.
        let read = reader.try_get_log_entries(90..800).await.unwrap();
        let read: Vec<u64> = read.iter().map(|e| e.log_id.index).collect();
        assert_eq!(read, (90..=700).collect::<Vec<_>>());
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id.map(|id| id.index), Some(700));
        writer.close();
    }
}
