//! Durable storage behind the fragment caches: the `KvStore` trait, its batch
//! and key layout, and the implementations (RocksDB, in-memory).

mod committer;
mod layout;
mod memory;
mod meta;
pub(crate) mod outbox;
mod rocks;

use std::path::Path;
use std::sync::Arc;

pub(crate) use committer::{CommitSource, Committer, Taken};
pub use memory::MemoryStore;
#[cfg(test)]
pub(crate) use memory::StoreDump;
pub(crate) use meta::DataDirMeta;
pub use meta::MetaError;
pub use outbox::PendingEvent;
pub use rocks::RocksStore;

use crate::names::TableName;
use crate::record::{Record, RecordView};

/// Index of a fragment: `0..fragment_count`.
pub type FragmentId = u32;

/// A storage operation failed. The caller keeps whatever it tried to write.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The storage engine reported an error.
    #[error("storage engine error: {0}")]
    Engine(String),
    /// Persisted bytes could not be decoded.
    #[error("corrupt record in storage (key {key:?}): {reason}")]
    Corrupt {
        /// The raw storage key, lossily shown.
        key: String,
        /// What was wrong with it.
        reason: String,
    },
    /// The store was closed or its writer thread stopped.
    #[error("store is closed")]
    Closed,
    /// This store cannot do the operation (e.g. a checkpoint of the
    /// in-memory test store).
    #[error("this store does not support {operation}")]
    Unsupported {
        /// The operation asked for.
        operation: &'static str,
    },
}

/// One persisted record with its location.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRecord {
    /// Fragment the key belongs to.
    pub fragment: FragmentId,
    /// Table of the record.
    pub table: TableName,
    /// The key.
    pub key: Arc<str>,
    /// The record (live, tombstone or expiry tombstone).
    pub record: Record,
}

/// One persisted record as a load reads it, borrowed from the store's
/// buffers for the length of one visit.
#[derive(Debug, Clone, Copy)]
pub struct LoadedRecord<'a> {
    /// Fragment the key belongs to.
    pub fragment: FragmentId,
    /// Table of the record.
    pub table: &'a TableName,
    /// The key.
    pub key: &'a str,
    /// The record's fields.
    pub record: RecordView<'a>,
}

/// Where a record is stored: the key of a removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordLocation {
    /// Fragment the key belongs to.
    pub fragment: FragmentId,
    /// Table of the record.
    pub table: TableName,
    /// The key.
    pub key: Arc<str>,
}

/// A set of writes committed atomically, in order.
#[derive(Debug, Default, Clone)]
pub struct StoreBatch {
    /// Records to put (a later put of the same key in the batch wins).
    pub records: Vec<StoredRecord>,
    /// Records to remove (purged tombstones). A key is either put or
    /// removed in one batch, never both.
    pub removed: Vec<RecordLocation>,
    /// Expiry outbox entries `(key, value)` written with the records, so an
    /// expiry tombstone and its event become durable together.
    pub outbox: Vec<(Vec<u8>, Vec<u8>)>,
    /// A replicated fragment's applied position, a `raft_state` entry
    /// `(key, value)` written with the records it covers, so a restart
    /// resumes applying its log after them.
    pub position: Option<(Vec<u8>, Vec<u8>)>,
    /// Settled expiry events (outbox deletes and rewrites, dead letters)
    /// of a replicated fragment, written after `outbox` in the same write,
    /// in order.
    pub settled: Vec<FamilyWrite>,
}

impl StoreBatch {
    /// No writes.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
            && self.removed.is_empty()
            && self.outbox.is_empty()
            && self.position.is_none()
            && self.settled.is_empty()
    }

    /// Number of writes.
    pub fn len(&self) -> usize {
        self.records.len()
            + self.removed.len()
            + self.outbox.len()
            + self.position.iter().len()
            + self.settled.len()
    }
}

/// Column families beside `records`, for the other parts of the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Plugin modules, manifests and compiled artifacts.
    Plugins,
    /// Expiry events waiting for their handler.
    ExpiryOutbox,
    /// Expiry events that exhausted their attempts.
    DeadLetters,
    /// Node settings and bindings (the family `read_meta` reads).
    Meta,
    /// Raft log entries of every group on the node.
    RaftLog,
    /// Each Raft group's vote and log markers.
    RaftState,
}

/// One write to a non-record family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FamilyWrite {
    /// Put `(key, value)` into the family.
    Put(Family, Vec<u8>, Vec<u8>),
    /// Delete `key` from the family.
    Delete(Family, Vec<u8>),
    /// Delete every key of the family in `[from, to)`.
    DeleteRange(Family, Vec<u8>, Vec<u8>),
}

/// The first key past every key that starts with `prefix`, or `None` when
/// no such key exists (an empty prefix, or one of `0xff` bytes only).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}

/// One `(key, value)` entry of a family.
pub type FamilyEntry = (Vec<u8>, Vec<u8>);

/// Visits one `(key, value)` entry of a family; an error stops the scan.
pub type EntryVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<(), StoreError> + 'a;

/// What the store holds in memory and on disk, summed over its column
/// families. Each family has its own block cache, so the cache usages add.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Bytes in memtables (active and immutable, not yet flushed).
    pub memtable_bytes: u64,
    /// Bytes in block caches.
    pub block_cache_bytes: u64,
    /// Bytes of SST files in the current version.
    pub live_sst_bytes: u64,
}

/// The durable layer. Implementations are synchronous and may block: callers
/// run them on the committer thread or a blocking pool, never on a tokio
/// worker.
pub trait KvStore: Send + Sync + 'static {
    /// Visit every record of `fragment` in key order, borrowed (a visitor
    /// copies what it keeps). Errors stop the load.
    fn load_fragment(
        &self,
        fragment: FragmentId,
        visit: &mut dyn FnMut(LoadedRecord<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// Commit `batches` as one atomic write, in order. With `sync` the call
    /// returns after the write is on stable storage; otherwise after it is in
    /// the write-ahead log.
    fn write(&self, batches: &[StoreBatch], sync: bool) -> Result<(), StoreError>;

    /// Read one entry of the `meta` family.
    fn read_meta(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Write entries of the `meta` family atomically and durably (fsync).
    fn write_meta(&self, entries: &[(&str, Vec<u8>)]) -> Result<(), StoreError>;

    /// Make everything written so far durable (fsync the log).
    fn sync(&self) -> Result<(), StoreError>;

    /// Move what the write-ahead log holds into table files, so the next
    /// open reads them instead of replaying the log (a clean shutdown calls
    /// it). A store without a log does nothing.
    fn flush_log(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Start flushing, in the background, the memtables of each family
    /// that hold at least `min_bytes`: the writer thread calls it once
    /// writes have stopped for a while. Records are served from memory, so
    /// a memtable only repeats recent writes in resident memory. A store
    /// without memtables does nothing.
    fn flush_idle(&self, min_bytes: u64) -> Result<(), StoreError> {
        let _ = min_bytes;
        Ok(())
    }

    /// Apply `writes` (to any families but `records`) as one atomic write,
    /// in order. With `sync` the call returns after an fsync.
    fn write_entries(&self, writes: &[FamilyWrite], sync: bool) -> Result<(), StoreError>;

    /// Put and delete entries of `family` atomically and durably (fsync):
    /// deletes first, then puts.
    fn write_family(
        &self,
        family: Family,
        puts: &[(Vec<u8>, Vec<u8>)],
        deletes: &[Vec<u8>],
    ) -> Result<(), StoreError> {
        let writes: Vec<FamilyWrite> = deletes
            .iter()
            .map(|key| FamilyWrite::Delete(family, key.clone()))
            .chain(
                puts.iter()
                    .map(|(key, value)| FamilyWrite::Put(family, key.clone(), value.clone())),
            )
            .collect();
        self.write_entries(&writes, true)
    }

    /// Memory and disk use; a store without such a notion (the in-memory
    /// test store) reports zeros. Cheap, but it may take the engine's
    /// locks: call it off tokio workers.
    fn stats(&self) -> Result<StoreStats, StoreError> {
        Ok(StoreStats::default())
    }

    /// Visit the entries of `family` whose key starts with `prefix`, in key order.
    fn scan_family(
        &self,
        family: Family,
        prefix: &[u8],
        visit: &mut EntryVisitor<'_>,
    ) -> Result<(), StoreError>;

    /// Read one entry of `family`. Stores without random access to the
    /// families (test doubles) answer [`StoreError::Unsupported`], as they
    /// do for the two range reads below; the Raft log store needs all three.
    fn read_entry(&self, family: Family, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let _ = (family, key);
        Err(StoreError::Unsupported {
            operation: "reading one entry",
        })
    }

    /// Visit the entries of `family` with keys in `[from, to)`, in key order.
    fn scan_range(
        &self,
        family: Family,
        from: &[u8],
        to: &[u8],
        visit: &mut EntryVisitor<'_>,
    ) -> Result<(), StoreError> {
        let _ = (family, from, to, visit);
        Err(StoreError::Unsupported {
            operation: "range scans",
        })
    }

    /// The entry of `family` with the greatest key in `[from, to)`.
    fn last_in_range(
        &self,
        family: Family,
        from: &[u8],
        to: &[u8],
    ) -> Result<Option<FamilyEntry>, StoreError> {
        let _ = (family, from, to);
        Err(StoreError::Unsupported {
            operation: "range scans",
        })
    }

    /// Write a consistent copy of everything written so far (every family)
    /// into `dir`, which must not exist (it is created; its parent must).
    /// The copy opens as a data directory of its own. Writes may continue
    /// meanwhile; the copy holds each atomic write entirely or not at all.
    /// On failure `dir` may hold a partial copy: the caller removes it.
    /// Stores that cannot copy themselves answer
    /// [`StoreError::Unsupported`] (the default).
    fn checkpoint(&self, dir: &Path) -> Result<(), StoreError> {
        let _ = dir;
        Err(StoreError::Unsupported {
            operation: "checkpoints",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_at_its_successor_and_all_ff_prefixes_never_end() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    /// Records reach the store in any order, several parts to a write;
    /// RocksDB's writer puts each part's records in key order, so both
    /// stores must still keep every key and, of two puts of one key in a
    /// part, the later.
    #[test]
    fn both_stores_keep_every_key_and_a_parts_later_put_whatever_the_order() {
        use crate::record::Version;
        let dir = tempfile::tempdir().unwrap();
        let rocks: Arc<dyn KvStore> = RocksStore::open(dir.path()).unwrap();
        let memory: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
        let (a, b) = (TableName::new("a").unwrap(), TableName::new("bb").unwrap());
        let put = |fragment, table: &TableName, key: &str, counter: u64| StoredRecord {
            fragment,
            table: table.clone(),
            key: Arc::from(key),
            record: Record::live(
                Version {
                    hlc_ms: 1,
                    counter,
                    writer: Arc::from("w"),
                },
                bytes::Bytes::from(format!("{key}@{counter}")),
                None,
            ),
        };
        // Part one: keys out of order, `k2` put twice (the second wins)
        // around others; part two: another fragment.
        let first = StoreBatch {
            records: vec![
                put(0, &b, "k9", 1),
                put(0, &a, "k2", 2),
                put(0, &b, "k1", 3),
                put(0, &a, "k10", 4),
                put(0, &a, "k2", 5),
                put(0, &a, "k1", 6),
            ],
            ..StoreBatch::default()
        };
        let second = StoreBatch {
            records: vec![put(1, &a, "z", 7), put(1, &a, "m", 8)],
            ..StoreBatch::default()
        };
        let expected: [(&str, &str, u64); 5] = [
            ("a", "k1", 6),
            ("a", "k10", 4),
            ("a", "k2", 5),
            ("bb", "k1", 3),
            ("bb", "k9", 1),
        ];
        for store in [&rocks, &memory] {
            store
                .write(&[first.clone(), second.clone()], false)
                .unwrap();
            let mut seen = Vec::new();
            for fragment in [0, 1] {
                store
                    .load_fragment(fragment, &mut |loaded| {
                        let value = String::from_utf8(loaded.record.value.to_vec()).unwrap();
                        seen.push((loaded.fragment, loaded.table.to_string(), value));
                        Ok(())
                    })
                    .unwrap();
            }
            seen.sort();
            let mut want: Vec<(FragmentId, String, String)> = expected
                .iter()
                .map(|(table, key, counter)| (0, table.to_string(), format!("{key}@{counter}")))
                .collect();
            want.push((1, "a".into(), "m@8".into()));
            want.push((1, "a".into(), "z@7".into()));
            want.sort();
            assert_eq!(seen, want);
        }
    }

    #[test]
    fn both_stores_scan_a_prefix_and_a_range_alike() {
        let dir = tempfile::tempdir().unwrap();
        let rocks: Arc<dyn KvStore> = RocksStore::open(dir.path()).unwrap();
        let memory: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
        let keys: [&[u8]; 6] = [b"a", b"b\x00", b"b\xff", b"b\xff\xff", b"c", b"\xff\xff"];
        for store in [&rocks, &memory] {
            let writes: Vec<FamilyWrite> = keys
                .iter()
                .map(|k| FamilyWrite::Put(Family::RaftLog, k.to_vec(), k.to_vec()))
                .collect();
            store.write_entries(&writes, false).unwrap();
            let seen = |scan: &dyn Fn(&mut EntryVisitor<'_>) -> Result<(), StoreError>| {
                let mut keys = Vec::new();
                scan(&mut |key, _| {
                    keys.push(key.to_vec());
                    Ok(())
                })
                .unwrap();
                keys
            };
            let prefixed = seen(&|v| store.scan_family(Family::RaftLog, b"b", v));
            assert_eq!(prefixed, [&b"b\x00"[..], b"b\xff", b"b\xff\xff"]);
            let ff = seen(&|v| store.scan_family(Family::RaftLog, b"\xff", v));
            assert_eq!(ff, [&b"\xff\xff"[..]]);
            let ranged = seen(&|v| store.scan_range(Family::RaftLog, b"a\x00", b"c", v));
            assert_eq!(ranged, [&b"b\x00"[..], b"b\xff", b"b\xff\xff"]);
            assert_eq!(
                store.last_in_range(Family::RaftLog, b"a", b"c").unwrap(),
                Some((b"b\xff\xff".to_vec(), b"b\xff\xff".to_vec()))
            );
            assert!(seen(&|v| store.scan_range(Family::RaftLog, b"c", b"a", v)).is_empty());
        }
    }
}
