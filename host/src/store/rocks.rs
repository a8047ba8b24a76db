//! The RocksDB `KvStore`: one data directory, one column family per concern.

use std::path::Path;
use std::sync::Arc;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DB, Direction, FlushOptions, IteratorMode,
    Options, ReadOptions, WriteBatch, WriteOptions,
};

use super::layout::{decode_loaded, encode_record_key_into, fragment_prefix};
use super::{
    EntryVisitor, Family, FamilyEntry, FamilyWrite, FragmentId, KvStore, LoadedRecord, StoreBatch,
    StoreError, StoreStats, prefix_end,
};

/// Records: `(fragment, table, key) -> Record envelope`.
const CF_RECORDS: &str = "records";
/// Plugin modules, manifests and compiled artifacts.
const CF_PLUGINS: &str = "plugins";
/// Expiry events waiting for their handler.
const CF_EXPIRY_OUTBOX: &str = "expiry_outbox";
/// Expiry events that exhausted their attempts.
const CF_DEAD_LETTERS: &str = "dead_letters";
/// Format version, fragment count, node id, clock high-water mark, cursor key.
const CF_META: &str = "meta";
/// Raft log entries, keyed `group (u32 BE) · index (u64 BE)`.
const CF_RAFT_LOG: &str = "raft_log";
/// Raft votes and log markers, keyed `group (u32 BE) · tag`.
const CF_RAFT_STATE: &str = "raft_state";

/// Block cache shared by every family. Records are read from the store only
/// at boot (with the cache bypassed), so the cache serves the small families
/// and SST index blocks.
const BLOCK_CACHE_BYTES: usize = 8 << 20;
/// Memtable size of the `records` family. The family is a log to the node
/// (reads are served from memory), so a memtable only needs to absorb write
/// bursts; RocksDB's default (64 MiB, up to two) would add 64 bytes per record
/// to the resident size of a node of a million records.
const RECORDS_MEMTABLE_BYTES: usize = 8 << 20;
/// Memtable size of the other, small families.
const SMALL_MEMTABLE_BYTES: usize = 4 << 20;
/// An SST of `records` with this many deletes (purged tombstones) among
/// `DELETE_WINDOW` consecutive entries, or this share of deletes overall,
/// is compacted soon, so purged space comes back without waiting for
/// ordinary compactions to reach it.
const DELETE_TRIGGER: usize = 2_000;
const DELETE_WINDOW: usize = 10_000;
const DELETE_RATIO: f64 = 0.3;

const FAMILIES: [&str; 7] = [
    CF_RECORDS,
    CF_PLUGINS,
    CF_EXPIRY_OUTBOX,
    CF_DEAD_LETTERS,
    CF_META,
    CF_RAFT_LOG,
    CF_RAFT_STATE,
];

/// A RocksDB database in one directory. Dropping it closes the database.
pub struct RocksStore {
    db: DB,
}

impl RocksStore {
    /// Open (creating if missing) the database in `dir`. Fails when another
    /// process holds the directory or the files are not a RocksDB database.
    pub fn open(dir: &Path) -> Result<Arc<Self>, StoreError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        options.set_max_background_jobs(2);
        options.set_bytes_per_sync(1 << 20);
        let cache = Cache::new_lru_cache(BLOCK_CACHE_BYTES);
        let families = FAMILIES.iter().map(|name| {
            let mut cf = Options::default();
            let mut table = BlockBasedOptions::default();
            table.set_block_cache(&cache);
            cf.set_block_based_table_factory(&table);
            if *name == CF_RECORDS {
                // A flush writes level 0 uncompressed; compactions write the
                // levels below with LZ4. Every record is flushed once, and
                // compressing it there cost about 1 000 instructions per
                // record, 3 % of a PUT's (BENCHMARKS.md); level 0 is a few
                // recent files, so the disk it takes stays small, and the
                // first compaction reads it without decompressing.
                cf.set_compression_per_level(&[
                    rocksdb::DBCompressionType::None,
                    rocksdb::DBCompressionType::Lz4,
                ]);
                cf.set_write_buffer_size(RECORDS_MEMTABLE_BYTES);
                cf.add_compact_on_deletion_collector_factory(
                    DELETE_WINDOW,
                    DELETE_TRIGGER,
                    DELETE_RATIO,
                );
            } else {
                cf.set_write_buffer_size(SMALL_MEMTABLE_BYTES);
            }
            ColumnFamilyDescriptor::new(*name, cf)
        });
        let db = DB::open_cf_descriptors(&options, dir, families).map_err(|e| {
            let hint = if e.to_string().contains("lock") {
                " (another ebb process is using this data dir; stop it or use another --data-dir)"
            } else {
                ""
            };
            StoreError::Engine(format!("cannot open data dir {}: {e}{hint}", dir.display()))
        })?;
        Ok(Arc::new(Self { db }))
    }

    /// Visit the entries of `family` from `from` up to `to` (exclusive;
    /// `None`: the family's end), in key order.
    fn scan_between(
        &self,
        family: Family,
        from: &[u8],
        to: Option<Vec<u8>>,
        visit: &mut EntryVisitor<'_>,
    ) -> Result<(), StoreError> {
        let cf = self.family(family_name(family))?;
        let mut read = ReadOptions::default();
        if let Some(to) = to {
            read.set_iterate_upper_bound(to);
        }
        for entry in self
            .db
            .iterator_cf_opt(cf, read, IteratorMode::From(from, Direction::Forward))
        {
            let (key, value) = entry.map_err(engine)?;
            visit(&key, &value)?;
        }
        Ok(())
    }

    /// Add one write to a non-record family to `batch`.
    fn add_write(&self, batch: &mut WriteBatch, write: &FamilyWrite) -> Result<(), StoreError> {
        match write {
            FamilyWrite::Put(family, key, value) => {
                batch.put_cf(self.family(family_name(*family))?, key, value)
            }
            FamilyWrite::Delete(family, key) => {
                batch.delete_cf(self.family(family_name(*family))?, key)
            }
            FamilyWrite::DeleteRange(family, from, to) => {
                batch.delete_range_cf(self.family(family_name(*family))?, from, to)
            }
        }
        Ok(())
    }

    fn family(&self, name: &str) -> Result<&rocksdb::ColumnFamily, StoreError> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| StoreError::Engine(format!("column family {name} is missing")))
    }
}

fn engine(error: rocksdb::Error) -> StoreError {
    StoreError::Engine(error.to_string())
}

impl KvStore for RocksStore {
    fn load_fragment(
        &self,
        fragment: FragmentId,
        visit: &mut dyn FnMut(LoadedRecord<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let records = self.family(CF_RECORDS)?;
        let prefix = fragment_prefix(fragment);
        let mut last_table = None;
        // One pass over every record: reading ahead helps, caching blocks
        // that will not be read again does not.
        let mut read = ReadOptions::default();
        read.fill_cache(false);
        read.set_readahead_size(2 << 20);
        for entry in self.db.iterator_cf_opt(
            records,
            read,
            IteratorMode::From(&prefix, Direction::Forward),
        ) {
            let (raw_key, raw_value) = entry.map_err(engine)?;
            if !raw_key.starts_with(&prefix) {
                break;
            }
            visit(decode_loaded(&raw_key, &raw_value, &mut last_table)?)?;
        }
        Ok(())
    }

    fn write(&self, batches: &[StoreBatch], sync: bool) -> Result<(), StoreError> {
        if batches.iter().all(StoreBatch::is_empty) {
            // Nothing new: a sync request still needs the log fsynced.
            return if sync { self.sync() } else { Ok(()) };
        }
        let records = self.family(CF_RECORDS)?;
        let outbox = self.family(CF_EXPIRY_OUTBOX)?;
        let raft_state = self.family(CF_RAFT_STATE)?;
        let mut batch = WriteBatch::default();
        // The batch copies what it is given: one buffer holds a part's
        // encoded keys and one value buffer serves every record.
        let (mut keys, mut order, mut key, mut value) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for part in batches {
            // A part's records go in key order: the memtable's skiplist
            // starts each insert from where the previous one went, so
            // neighbouring keys descend a level or two instead of the whole
            // list (a part, one fragment's buffer, comes in hash order).
            // The sort is stable: a later put of the same key stays later
            // and wins, as the batch's contract says.
            keys.clear();
            order.clear();
            for (index, stored) in part.records.iter().enumerate() {
                let start = keys.len();
                encode_record_key_into(&mut keys, stored.fragment, &stored.table, &stored.key);
                order.push((start, keys.len(), index));
            }
            order.sort_by(|a, b| keys[a.0..a.1].cmp(&keys[b.0..b.1]));
            for &(start, end, index) in &order {
                value.clear();
                part.records[index].record.encode_into(&mut value);
                batch.put_cf(records, &keys[start..end], &value);
            }
            for removed in &part.removed {
                key.clear();
                encode_record_key_into(&mut key, removed.fragment, &removed.table, &removed.key);
                batch.delete_cf(records, &key);
            }
            for (key, value) in &part.outbox {
                batch.put_cf(outbox, key, value);
            }
            if let Some((key, value)) = &part.position {
                batch.put_cf(raft_state, key, value);
            }
            for write in &part.settled {
                self.add_write(&mut batch, write)?;
            }
        }
        let mut options = WriteOptions::default();
        options.set_sync(sync);
        self.db.write_opt(batch, &options).map_err(engine)
    }

    fn read_meta(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.db.get_cf(self.family(CF_META)?, key).map_err(engine)
    }

    fn write_meta(&self, entries: &[(&str, Vec<u8>)]) -> Result<(), StoreError> {
        let meta = self.family(CF_META)?;
        let mut batch = WriteBatch::default();
        for (key, value) in entries {
            batch.put_cf(meta, key, value);
        }
        let mut options = WriteOptions::default();
        options.set_sync(true);
        self.db.write_opt(batch, &options).map_err(engine)
    }

    fn sync(&self) -> Result<(), StoreError> {
        self.db.flush_wal(true).map_err(engine)
    }

    fn flush_log(&self) -> Result<(), StoreError> {
        for name in FAMILIES {
            self.db.flush_cf(self.family(name)?).map_err(engine)?;
        }
        Ok(())
    }

    fn flush_idle(&self, min_bytes: u64) -> Result<(), StoreError> {
        let mut options = FlushOptions::default();
        options.set_wait(false);
        for name in FAMILIES {
            let family = self.family(name)?;
            let bytes = self
                .db
                .property_int_value_cf(family, "rocksdb.cur-size-active-mem-table")
                .map_err(engine)?
                .unwrap_or(0);
            if bytes >= min_bytes {
                self.db.flush_cf_opt(family, &options).map_err(engine)?;
            }
        }
        Ok(())
    }

    fn write_entries(&self, writes: &[FamilyWrite], sync: bool) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        for write in writes {
            self.add_write(&mut batch, write)?;
        }
        let mut options = WriteOptions::default();
        options.set_sync(sync);
        self.db.write_opt(batch, &options).map_err(engine)
    }

    fn stats(&self) -> Result<StoreStats, StoreError> {
        let mut stats = StoreStats::default();
        for name in FAMILIES {
            let family = self.family(name)?;
            let property = |key: &str| -> Result<u64, StoreError> {
                Ok(self
                    .db
                    .property_int_value_cf(family, key)
                    .map_err(engine)?
                    .unwrap_or(0))
            };
            stats.memtable_bytes += property("rocksdb.cur-size-all-mem-tables")?;
            // Every family reports the one shared cache.
            stats.block_cache_bytes = property("rocksdb.block-cache-usage")?;
            stats.live_sst_bytes += property("rocksdb.live-sst-files-size")?;
        }
        Ok(stats)
    }

    fn scan_family(
        &self,
        family: Family,
        prefix: &[u8],
        visit: &mut EntryVisitor<'_>,
    ) -> Result<(), StoreError> {
        self.scan_between(family, prefix, prefix_end(prefix), visit)
    }

    fn read_entry(&self, family: Family, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.db
            .get_cf(self.family(family_name(family))?, key)
            .map_err(engine)
    }

    fn scan_range(
        &self,
        family: Family,
        from: &[u8],
        to: &[u8],
        visit: &mut EntryVisitor<'_>,
    ) -> Result<(), StoreError> {
        if from >= to {
            return Ok(());
        }
        self.scan_between(family, from, Some(to.to_vec()), visit)
    }

    fn last_in_range(
        &self,
        family: Family,
        from: &[u8],
        to: &[u8],
    ) -> Result<Option<FamilyEntry>, StoreError> {
        if from >= to {
            return Ok(None);
        }
        let cf = self.family(family_name(family))?;
        let mut read = ReadOptions::default();
        read.set_iterate_lower_bound(from.to_vec());
        read.set_iterate_upper_bound(to.to_vec());
        let mut iter = self.db.raw_iterator_cf_opt(cf, read);
        iter.seek_to_last();
        match (iter.key(), iter.value()) {
            (Some(key), Some(value)) => Ok(Some((key.to_vec(), value.to_vec()))),
            _ => iter.status().map(|()| None).map_err(engine),
        }
    }

    /// A RocksDB checkpoint: memtables are flushed, table files hard-linked
    /// (copied across filesystems) and the manifest written anew, so the
    /// copy is a point in time of every column family.
    fn checkpoint(&self, dir: &Path) -> Result<(), StoreError> {
        let checkpoint = rocksdb::checkpoint::Checkpoint::new(&self.db).map_err(engine)?;
        checkpoint.create_checkpoint(dir).map_err(|e| {
            StoreError::Engine(format!(
                "cannot write a checkpoint into {}: {e}",
                dir.display()
            ))
        })
    }
}

fn family_name(family: Family) -> &'static str {
    match family {
        Family::Plugins => CF_PLUGINS,
        Family::ExpiryOutbox => CF_EXPIRY_OUTBOX,
        Family::DeadLetters => CF_DEAD_LETTERS,
        Family::Meta => CF_META,
        Family::RaftLog => CF_RAFT_LOG,
        Family::RaftState => CF_RAFT_STATE,
    }
}
