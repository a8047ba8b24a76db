//! One table's records inside one fragment: the ordered key index, its expiry
//! deadlines, revision and incarnation.

use std::collections::BTreeSet;
use std::sync::Arc;

use imbl::OrdMap;

use crate::record::Record;

/// Result of offering a record to a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// The record won and replaced `previous` (if any).
    Applied {
        /// The record it replaced.
        previous: Option<Record>,
    },
    /// The partition already holds a record that wins over the offered one.
    Superseded,
}

/// A consistent, immutable view of a partition. Taking one is O(1): the
/// ordered map is persistent and shares structure with the live partition.
#[derive(Clone, Debug)]
pub struct PartitionSnapshot {
    /// Every record (tombstones included) in key order.
    pub records: OrdMap<Arc<str>, Record>,
    /// Revision at the time of the snapshot.
    pub revision: u64,
    /// Incarnation of the partition the snapshot came from.
    pub incarnation: u64,
    /// Records visible at the time the snapshot was taken for.
    pub visible: usize,
}

/// A table partition. Callers serialize access (the fragment wraps each
/// partition in a lock); every method is O(log n) and never blocks.
///
/// Invariants: `deadlines` holds exactly one `(deadline, key)` per live record
/// with a TTL; `live` counts records of kind `Live` (expired ones included
/// until the cleaner converts them); `revision` advances on every winning
/// mutation.
#[derive(Debug)]
pub struct Partition {
    records: OrdMap<Arc<str>, Record>,
    deadlines: BTreeSet<(u64, Arc<str>)>,
    live: usize,
    bytes: usize,
    revision: u64,
    incarnation: u64,
}

/// Estimated bytes one record costs in a partition beyond its key and
/// value: the record's fields and its slot in the ordered index.
const RECORD_OVERHEAD: usize = 128;

fn footprint(key: &str, record: &Record) -> usize {
    RECORD_OVERHEAD + key.len() + record.value.len()
}

impl Partition {
    /// An empty partition with a fresh incarnation.
    pub fn new() -> Self {
        Self {
            records: OrdMap::new(),
            deadlines: BTreeSet::new(),
            live: 0,
            bytes: 0,
            revision: 0,
            incarnation: rand::random(),
        }
    }

    /// The current record of `key`, tombstones and expired values included.
    pub fn get(&self, key: &str) -> Option<&Record> {
        self.records.get(key)
    }

    /// Offer `record` for `key` under last-writer-wins.
    pub fn apply(&mut self, key: Arc<str>, record: Record) -> ApplyOutcome {
        if let Some(current) = self.records.get(&key)
            && !record.wins_over(current)
        {
            return ApplyOutcome::Superseded;
        }
        let deadline = record.deadline();
        let is_live = record.kind == crate::record::RecordKind::Live;
        self.bytes += footprint(&key, &record);
        let previous = self.records.insert(key.clone(), record);
        if let Some(previous) = &previous {
            self.bytes -= footprint(&key, previous);
            if let Some(old) = previous.deadline() {
                self.deadlines.remove(&(old, key.clone()));
            }
            if previous.kind == crate::record::RecordKind::Live {
                self.live -= 1;
            }
        }
        if let Some(deadline) = deadline {
            self.deadlines.insert((deadline, key));
        }
        if is_live {
            self.live += 1;
        }
        self.revision += 1;
        ApplyOutcome::Applied { previous }
    }

    /// The earliest deadline of a live record, if any.
    pub fn earliest_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|(deadline, _)| *deadline)
    }

    /// Up to `limit` keys whose deadline is at or before `now_ms`, earliest first.
    pub fn due(&self, now_ms: u64, limit: usize) -> Vec<(u64, Arc<str>)> {
        self.deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline <= now_ms)
            .take(limit)
            .cloned()
            .collect()
    }

    /// Live records (expired ones not yet converted included).
    pub fn live_count(&self) -> usize {
        self.live
    }

    /// All records, tombstones included.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Tombstones (deletes and converted expiries) held.
    pub fn tombstone_count(&self) -> usize {
        self.records.len() - self.live
    }

    /// Bytes the partition's records and index hold.
    pub fn memory_bytes(&self) -> usize {
        self.bytes
    }

    /// Advances on every winning mutation.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Identifies this instance of the partition; new after every restart.
    #[cfg(test)]
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// A consistent view for readers at `now_ms`: O(1) plus the number of
    /// records already due but not yet converted (normally none or few).
    pub fn snapshot_at(&self, now_ms: u64) -> PartitionSnapshot {
        let due = self
            .deadlines
            .range(..(now_ms.saturating_add(1), Arc::from("")))
            .count();
        PartitionSnapshot {
            records: self.records.clone(),
            revision: self.revision,
            incarnation: self.incarnation,
            visible: self.live - due,
        }
    }
}

impl Default for Partition {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{RecordKind, Version};
    use bytes::Bytes;

    fn version(hlc_ms: u64) -> Version {
        Version {
            hlc_ms,
            counter: 0,
            writer: Arc::from("w"),
        }
    }

    fn put(p: &mut Partition, key: &str, at: u64, ttl_deadline: Option<u64>) -> ApplyOutcome {
        p.apply(
            Arc::from(key),
            Record::live(
                version(at),
                Bytes::from(format!("{key}@{at}")),
                ttl_deadline,
            ),
        )
    }

    #[test]
    fn last_writer_wins_and_only_winners_advance_the_revision() {
        let mut p = Partition::new();
        assert!(matches!(
            put(&mut p, "a", 10, None),
            ApplyOutcome::Applied { previous: None }
        ));
        assert_eq!(p.revision(), 1);
        assert_eq!(put(&mut p, "a", 5, None), ApplyOutcome::Superseded);
        assert_eq!(p.revision(), 1, "a losing write changes nothing");
        assert_eq!(p.get("a").unwrap().value, Bytes::from("a@10"));
        assert!(matches!(
            put(&mut p, "a", 11, None),
            ApplyOutcome::Applied { previous: Some(_) }
        ));
        assert_eq!(p.revision(), 2);
        assert_eq!(p.live_count(), 1);
    }

    #[test]
    fn tombstones_hide_values_and_keep_counts_exact() {
        let mut p = Partition::new();
        put(&mut p, "a", 1, Some(100));
        put(&mut p, "b", 1, None);
        assert_eq!(p.live_count(), 2);
        assert_eq!(p.earliest_deadline(), Some(100));
        p.apply(Arc::from("a"), Record::tombstone(version(2)));
        assert_eq!(p.live_count(), 1);
        assert_eq!(p.earliest_deadline(), None, "a delete removes the deadline");
        assert_eq!(p.get("a").unwrap().kind, RecordKind::Tombstone);
        assert_eq!(p.len(), 2, "the tombstone stays to order later writes");
    }

    #[test]
    fn deadlines_track_the_current_winner_only() {
        let mut p = Partition::new();
        put(&mut p, "a", 1, Some(100));
        put(&mut p, "a", 2, Some(300));
        put(&mut p, "b", 1, Some(200));
        assert_eq!(p.due(250, 10), vec![(200, Arc::from("b"))]);
        assert_eq!(p.due(1000, 1).len(), 1, "the limit bounds a page");
        put(&mut p, "a", 3, None);
        assert_eq!(p.due(1000, 10), vec![(200, Arc::from("b"))]);
    }

    #[test]
    fn snapshots_are_isolated_from_later_writes() {
        let mut p = Partition::new();
        put(&mut p, "a", 1, None);
        let snapshot = p.snapshot_at(0);
        put(&mut p, "b", 2, None);
        put(&mut p, "a", 3, None);
        assert_eq!(snapshot.records.len(), 1);
        assert_eq!(snapshot.records.get("a").unwrap().value, Bytes::from("a@1"));
        assert_eq!(snapshot.revision, 1);
        assert_eq!(snapshot.incarnation, p.incarnation());
        assert_eq!(p.snapshot_at(0).revision, 3);
        put(&mut p, "c", 4, Some(50));
        assert_eq!(p.snapshot_at(49).visible, 3);
        assert_eq!(p.snapshot_at(50).visible, 2, "due records are not visible");
    }
}
