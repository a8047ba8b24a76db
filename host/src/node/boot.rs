//! Boot: load every fragment's records from the store, convert records that
//! expired while the node was down (with outbox events for tables that have
//! an expiry handler), and find the highest persisted version.

use std::collections::HashMap;
use std::sync::Arc;

use crate::expiry::outbox::Outbox;
use crate::fragment::entry::Entry;
use crate::fragment::partition::Partition;
use crate::names::TableName;
use crate::record::own_writer;
use crate::store::{
    FragmentId, KvStore, LoadedRecord, PendingEvent, StoreBatch, StoreError, StoredRecord,
};

/// What boot found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootStats {
    /// Records loaded from the store.
    pub records: usize,
    /// Records that expired while the node was down, converted before serving.
    pub converted: usize,
}

/// One fragment as loaded from the store.
pub struct LoadedFragment {
    /// Partitions by table.
    pub partitions: HashMap<TableName, Partition>,
    /// Highest `(hlc_ms, counter)` among the loaded records.
    pub high_water: (u64, u64),
    /// Records loaded.
    pub records: usize,
    /// Records that had expired and were converted before serving.
    pub converted: usize,
    /// Outbox events of those conversions (bound tables), now durable.
    pub events: Vec<PendingEvent>,
}

/// Load `fragment` and persist (with fsync) the expiry tombstones of records
/// whose deadline passed before `now_ms`, so the node never serves a value
/// that a crash could bring back. Tables bound in `outbox` get their events
/// in the same write. Blocking: run on a blocking thread.
pub(crate) fn load_fragment(
    store: &dyn KvStore,
    fragment: FragmentId,
    now_ms: u64,
    outbox: &Outbox,
) -> Result<LoadedFragment, StoreError> {
    let mut tables: HashMap<TableName, Vec<Entry>> = HashMap::new();
    let mut high_water = (0, 0);
    let mut records = 0;
    let mut converted = StoreBatch::default();
    let mut events = Vec::new();
    store.load_fragment(fragment, &mut |loaded| {
        let LoadedRecord {
            table, key, record, ..
        } = loaded;
        high_water = high_water.max((record.hlc_ms, record.counter));
        records += 1;
        let entries = match tables.get_mut(table) {
            Some(entries) => entries,
            None => tables.entry(table.clone()).or_default(),
        };
        if !record.is_expired_at(now_ms) {
            entries.push(Entry::from_view(key, &record));
            return Ok(());
        }
        // Expired while the node was down: rare, so owned copies are fine.
        let key: Arc<str> = Arc::from(key);
        let record = record.to_record(own_writer);
        let tombstone = record.to_expiry_tombstone();
        if outbox.is_bound(table) {
            let event = outbox.event(fragment, table, &key, &record, now_ms);
            converted.outbox.push((event.key.clone(), event.encode()));
            events.push(event);
        }
        entries.push(Entry::new(&key, &tombstone));
        converted.records.push(StoredRecord {
            fragment,
            table: table.clone(),
            key,
            record: tombstone,
        });
        Ok(())
    })?;
    let converted_count = converted.records.len();
    if !converted.is_empty() {
        store.write(&[converted], true)?;
    }
    let partitions = tables
        .into_iter()
        .map(|(table, entries)| (table, Partition::from_loaded(entries)))
        .collect();
    Ok(LoadedFragment {
        partitions,
        high_water,
        records,
        converted: converted_count,
        events,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::record::{Record, RecordKind, Version};
    use crate::store::MemoryStore;
    use bytes::Bytes;

    #[test]
    fn boot_converts_records_that_expired_while_down_and_persists_that() {
        let store = MemoryStore::new();
        let table = TableName::new("t").unwrap();
        let record = |at: u64, deadline| {
            Record::live(
                Version {
                    hlc_ms: at,
                    counter: 1,
                    writer: Arc::from("w"),
                },
                Bytes::from_static(b"v"),
                deadline,
            )
        };
        let stored = |key: &str, record| StoredRecord {
            fragment: 2,
            table: table.clone(),
            key: Arc::from(key),
            record,
        };
        store
            .write(
                &[StoreBatch {
                    outbox: Vec::new(),
                    removed: Vec::new(),
                    position: None,
                    settled: Vec::new(),
                    records: vec![
                        stored("gone", record(10, Some(50))),
                        stored("kept", record(20, Some(500))),
                    ],
                }],
                false,
            )
            .unwrap();
        let outbox = Outbox::new();
        let loaded = load_fragment(&store, 2, 100, &outbox).unwrap();
        assert_eq!((loaded.records, loaded.converted), (2, 1));
        assert_eq!(loaded.high_water, (20, 1));
        let partition = &loaded.partitions[&table];
        assert_eq!(
            partition.get("gone").unwrap().kind(),
            RecordKind::ExpiryTombstone
        );
        assert_eq!(partition.get("kept").unwrap().kind(), RecordKind::Live);
        let again = load_fragment(&store, 2, 100, &outbox).unwrap();
        assert_eq!(again.converted, 0, "the conversion was persisted");
        assert_eq!(
            load_fragment(&store, 3, 100, &outbox).unwrap().records,
            0,
            "fragments load their own range only"
        );
    }
}
