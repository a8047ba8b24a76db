//! A Raft group's log and vote in the node's store: entries in the
//! `raft_log` family keyed `group (u32 BE) · index (u64 BE)`, the vote and
//! the log markers in `raft_state` keyed `group · tag`. Many groups share
//! one store, each confined to its own key prefix.
//!
//! Invariants openraft relies on: writes take effect in call order (one
//! writer thread, [`LogWriter`]); an appended entry is readable when
//! `append` returns and reported flushed only once durable; a saved vote is
//! fsynced before `save_vote` returns; a purge records its marker in the
//! same atomic write that deletes the entries. Reads run on blocking
//! threads, never on a tokio worker.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

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
    LogReader { group, store }
        .read_state(TAG_APPLIED, decode_position)
        .await
}

/// Reads a group's log; cheap to clone, one per replication stream.
#[derive(Clone)]
pub struct LogReader {
    group: GroupId,
    store: Arc<dyn KvStore>,
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
        let from = entry_key(self.group, start);
        let to = match range.end_bound() {
            Bound::Included(&i) => match i.checked_add(1) {
                Some(end) => entry_key(self.group, end),
                None => entries_end(self.group),
            },
            Bound::Excluded(&i) => entry_key(self.group, i),
            Bound::Unbounded => entries_end(self.group),
        };
        if from >= to {
            return Ok(Vec::new());
        }
        self.blocking(move |store| {
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
        .await
    }

    async fn read_vote(&mut self) -> io::Result<Option<Vote>> {
        self.read_state(TAG_VOTE, decode_vote).await
    }
}

/// One group's log storage.
pub struct LogStore {
    reader: LogReader,
    writer: LogWriter,
    durability: AppendDurability,
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
            reader: LogReader { group, store },
            writer,
            durability,
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
        let last_log_id = self
            .reader
            .last_entry()
            .await?
            .map(|entry| entry.log_id)
            .or(last_purged_log_id);
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

    async fn save_committed(&mut self, committed: Option<LogId>) -> io::Result<()> {
        let write = FamilyWrite::Put(
            Family::RaftState,
            state_key(self.group(), TAG_COMMITTED),
            encode_marker(committed.as_ref()),
        );
        self.writer
            .write(vec![write], false, None)
            .await
            .map_err(io_error)
    }

    async fn read_committed(&mut self) -> io::Result<Option<LogId>> {
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
        let writes: Vec<FamilyWrite> = entries
            .into_iter()
            .map(|entry| {
                if let openraft::EntryPayload::Normal(command) = &entry.payload {
                    sync |= command.sync;
                }
                FamilyWrite::Put(
                    Family::RaftLog,
                    entry_key(group, entry.log_id.index),
                    encode_entry(&entry),
                )
            })
            .collect();
        self.writer
            .write(writes, sync, Some(callback))
            .await
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
        self.writer
            .write(writes, false, None)
            .await
            .map_err(io_error)
    }
}
