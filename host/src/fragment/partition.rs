//! One table's records inside one fragment: the ordered key index, its expiry
//! deadlines and standing tombstones, revision and incarnation.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::ops::RangeBounds;

use equivalent::{Comparable, Equivalent};
use imbl::OrdSet;

use super::entry::Entry;
use super::key_order::compare_keys;
use crate::record::{Record, Version};

/// Result of offering a record to a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    /// The record won and replaced `previous` (if any).
    Applied {
        /// The entry it replaced.
        previous: Option<Entry>,
    },
    /// The partition already holds a record that wins over the offered one.
    Superseded,
}

/// The entries of a key range of a [`PartitionSnapshot`], in key order
/// (reversed from the back).
pub type EntryRange<'a> = imbl::ordset::RangedIter<'a, Entry, imbl::shared_ptr::DefaultSharedPtr>;

/// A key looked up in the index, compared with entries by [`compare_keys`].
/// The index's own order ([`Ord for Entry`](Entry)) is the same
/// function, so lookups and inserts agree.
#[repr(transparent)]
#[derive(Debug)]
struct KeyProbe(str);

impl KeyProbe {
    /// `key` as a probe (no copy).
    fn new(key: &str) -> &KeyProbe {
        // SAFETY: `KeyProbe` is `repr(transparent)` over `str`, so the
        // pointer casts between two layouts that are the same.
        unsafe { &*(key as *const str as *const KeyProbe) }
    }
}

impl Equivalent<Entry> for KeyProbe {
    #[inline]
    fn equivalent(&self, entry: &Entry) -> bool {
        self.0.as_bytes() == entry.key().as_bytes()
    }
}

impl Comparable<Entry> for KeyProbe {
    #[inline]
    fn compare(&self, entry: &Entry) -> Ordering {
        compare_keys(self.0.as_bytes(), entry.key().as_bytes())
    }
}

/// A consistent, immutable view of a partition. Taking one is O(1): the
/// ordered index is persistent and shares structure with the live partition.
#[derive(Clone, Debug)]
pub struct PartitionSnapshot {
    records: OrdSet<Entry>,
    /// Revision at the time of the snapshot.
    pub revision: u64,
    /// Incarnation of the partition the snapshot came from.
    pub incarnation: u64,
    /// Records visible at the time the snapshot was taken for.
    pub visible: usize,
}

impl PartitionSnapshot {
    /// Every entry (tombstones included) whose key is in `range`, in key
    /// order (reversed from the back).
    pub fn range<R: RangeBounds<str>>(&self, range: R) -> EntryRange<'_> {
        let bounds = (
            range.start_bound().map(KeyProbe::new),
            range.end_bound().map(KeyProbe::new),
        );
        self.records.range::<_, KeyProbe>(bounds)
    }

    /// All entries, tombstones included.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.records.len()
    }
}

/// Bytes a record's place in the ordered index costs at most on average:
/// an 8-byte pointer in a leaf of 16 (160 bytes with its count) at least
/// half full, plus the branches above it. An upper bound: a full leaf
/// lends to a sibling before it splits, so inserts leave leaves 82 % (at
/// random) to 94 % (in key order) full, about 11 to 13 bytes per record,
/// and a packed load 12 (vendor/README.md); deletes can leave leaves at
/// half or below.
const INDEX_SLOT_BYTES: usize = 25;
/// Bytes an entry's place in the deadline or tombstone index costs (a
/// `BTreeSet` of `(u64, Entry)`).
const SIDE_INDEX_SLOT_BYTES: usize = 24;

/// Bytes `entry` holds in a partition: its block (rounded up to 16 bytes,
/// as the allocator's size classes do for small blocks), its index slot and
/// its slot in the deadline or tombstone index if it has one.
fn footprint(entry: &Entry) -> usize {
    let side = if entry.deadline().is_some() || entry.is_tombstone() {
        SIDE_INDEX_SLOT_BYTES
    } else {
        0
    };
    entry.heap_bytes().next_multiple_of(16) + INDEX_SLOT_BYTES + side
}

/// A table partition. Callers serialize access (the fragment wraps each
/// partition in a lock); every method is O(log n) per record it touches and
/// never blocks.
///
/// Invariants: `deadlines` holds exactly one `(deadline, entry)` per live
/// record with a TTL and `tombstones` one `(standing since, entry)` per
/// tombstone; `live` counts records of kind `Live` (expired ones included
/// until the cleaner converts them); `bytes` is the sum of the entries'
/// footprints; `revision` advances on every mutation readers can see (a
/// purge of tombstones is not one).
#[derive(Debug)]
pub struct Partition {
    records: OrdSet<Entry>,
    deadlines: BTreeSet<(u64, Entry)>,
    tombstones: BTreeSet<(u64, Entry)>,
    live: usize,
    bytes: usize,
    revision: u64,
    incarnation: u64,
}

impl Partition {
    /// An empty partition with a fresh incarnation.
    pub fn new() -> Self {
        Self {
            records: OrdSet::new(),
            deadlines: BTreeSet::new(),
            tombstones: BTreeSet::new(),
            live: 0,
            bytes: 0,
            revision: 0,
            incarnation: rand::random(),
        }
    }

    /// The current entry of `key`, tombstones and expired values included.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.records.get(KeyProbe::new(key))
    }

    /// Offer `record` for `key` under last-writer-wins.
    ///
    /// One descent of the index: the record goes in first, and in the rare
    /// case that what it replaced wins, that goes back and nothing else
    /// (counts, side indexes, revision) changes.
    pub fn apply(&mut self, key: &str, record: &Record) -> ApplyOutcome {
        let entry = Entry::new(key, record);
        let Some(previous) = self.records.insert(entry.clone()) else {
            self.index(&entry);
            self.revision += 1;
            return ApplyOutcome::Applied { previous: None };
        };
        if !record.wins_over_parts(&previous.version(), previous.is_tombstone()) {
            self.records.insert(previous);
            return ApplyOutcome::Superseded;
        }
        self.index(&entry);
        self.unindex(&previous);
        self.revision += 1;
        ApplyOutcome::Applied {
            previous: Some(previous),
        }
    }

    /// A partition of the records read from the store at boot (or from a
    /// Raft snapshot): no merging, a key given twice keeps the later entry.
    /// Its index is built packed, every leaf as full as the tree allows
    /// (about 12 bytes of index per record, against 17 to 22 when the same
    /// records are inserted one by one; `vendor/README.md`), in O(n) when
    /// the entries come in key order, as the store's scan gives them, and
    /// after an O(n log n) sort otherwise.
    pub fn from_loaded(mut entries: Vec<Entry>) -> Self {
        let ordered = entries
            .windows(2)
            .all(|pair| compare_keys(pair[0].key().as_bytes(), pair[1].key().as_bytes()).is_lt());
        if !ordered {
            // A stable sort keeps each key's entries in the order given;
            // reversed, the first of each run is the one given last.
            entries.sort_by(|a, b| compare_keys(a.key().as_bytes(), b.key().as_bytes()));
            entries.reverse();
            entries.dedup_by(|later, kept| later.key() == kept.key());
            entries.reverse();
        }
        let mut partition = Partition::new();
        for entry in &entries {
            partition.index(entry);
        }
        partition.revision = entries.len() as u64;
        partition.records = OrdSet::from_sorted_packed(entries.len(), entries);
        partition
    }

    /// Count `entry` and add it to the side indexes.
    fn index(&mut self, entry: &Entry) {
        self.bytes += footprint(entry);
        if let Some(deadline) = entry.deadline() {
            self.deadlines.insert((deadline, entry.clone()));
        }
        match entry.tombstone_since_ms() {
            Some(since) => {
                self.tombstones.insert((since, entry.clone()));
            }
            None => self.live += 1,
        }
    }

    /// Undo [`Self::index`] for an entry that left the ordered index.
    fn unindex(&mut self, entry: &Entry) {
        self.bytes -= footprint(entry);
        if let Some(deadline) = entry.deadline() {
            self.deadlines.remove(&(deadline, entry.clone()));
        }
        match entry.tombstone_since_ms() {
            Some(since) => {
                self.tombstones.remove(&(since, entry.clone()));
            }
            None => self.live -= 1,
        }
    }

    /// The earliest deadline of a live record, if any.
    pub fn earliest_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|(deadline, _)| *deadline)
    }

    /// Up to `limit` entries whose deadline is at or before `now_ms`,
    /// earliest first.
    pub fn due(&self, now_ms: u64, limit: usize) -> Vec<(u64, Entry)> {
        self.deadlines
            .iter()
            .take_while(|(deadline, _)| *deadline <= now_ms)
            .take(limit)
            .cloned()
            .collect()
    }

    /// Since when the oldest tombstone stands, if there is one.
    pub fn oldest_tombstone(&self) -> Option<u64> {
        self.tombstones.first().map(|(since, _)| *since)
    }

    /// Up to `limit` tombstones standing since `cutoff_ms` or earlier,
    /// oldest first.
    pub fn purgeable(&self, cutoff_ms: u64, limit: usize) -> Vec<Entry> {
        self.tombstones
            .iter()
            .take_while(|(since, _)| *since <= cutoff_ms)
            .take(limit)
            .map(|(_, entry)| entry.clone())
            .collect()
    }

    /// Remove the tombstone of `key` if it is the one of `version` and
    /// stands since `cutoff_ms` or earlier; return it. Readers see no change
    /// (only an invisible record goes), so the revision stays: a guarded
    /// cursor's next page is what it would have been. The caller removes
    /// the key from the store.
    pub fn remove_tombstone(
        &mut self,
        key: &str,
        version: &Version,
        cutoff_ms: u64,
    ) -> Option<Entry> {
        let entry = self.records.get(KeyProbe::new(key))?;
        let since = entry.tombstone_since_ms()?;
        if since > cutoff_ms || entry.version() != *version {
            return None;
        }
        let entry = self
            .records
            .remove(KeyProbe::new(key))
            .expect("found above");
        let removed = self.tombstones.remove(&(since, entry.clone()));
        debug_assert!(removed, "a standing tombstone is in the tombstone index");
        self.bytes -= footprint(&entry);
        Some(entry)
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
        self.tombstones.len()
    }

    /// Bytes the partition's records and indexes hold (estimated from
    /// their sizes; the allocator's rounding is not counted).
    pub fn memory_bytes(&self) -> usize {
        self.bytes
    }

    /// Advances on every mutation readers can see.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Leaves of the ordered index (each holds up to 16 entries).
    #[cfg(test)]
    pub fn index_leaves(&self) -> usize {
        self.records.leaf_count()
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
            .iter()
            .take_while(|(deadline, _)| *deadline <= now_ms)
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
    use std::sync::Arc;

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
            key,
            &Record::live(
                version(at),
                Bytes::from(format!("{key}@{at}")),
                ttl_deadline,
            ),
        )
    }

    fn delete(p: &mut Partition, key: &str, at: u64) {
        p.apply(key, &Record::tombstone(version(at)));
    }

    fn keys(snapshot: &PartitionSnapshot) -> Vec<String> {
        snapshot
            .range::<std::ops::RangeFull>(..)
            .map(|e| e.key().to_string())
            .collect()
    }

    fn live(key: &str, at: u64, deadline: Option<u64>) -> Entry {
        Entry::new(
            key,
            &Record::live(version(at), Bytes::from(format!("{key}@{at}")), deadline),
        )
    }

    #[test]
    fn a_loaded_partition_is_packed_and_takes_writes_like_any_other() {
        // In key order, as the store's scan gives them: `key:N` sorted as
        // text, every tenth with a deadline, every seventh a tombstone.
        let mut names: Vec<String> = (0..20_000).map(|n| format!("key:{n}")).collect();
        names.sort();
        let entries: Vec<Entry> = names
            .iter()
            .enumerate()
            .map(|(i, key)| match i {
                i if i % 7 == 0 => Entry::new(key, &Record::tombstone(version(i as u64 + 1))),
                i if i % 10 == 0 => live(key, i as u64 + 1, Some(1_000_000 + i as u64)),
                i => live(key, i as u64 + 1, None),
            })
            .collect();
        let mut p = Partition::from_loaded(entries);
        assert_eq!(p.index_leaves(), 20_000usize.div_ceil(16));
        assert_eq!(keys(&p.snapshot_at(0)), names);
        let tombstones = names.len().div_ceil(7);
        assert_eq!(p.tombstone_count(), tombstones);
        assert_eq!(p.live_count(), 20_000 - tombstones);
        assert_eq!(p.earliest_deadline(), Some(1_000_010));
        assert!(p.revision() > 0);

        // The same records inserted one by one by number (each landing
        // between keys written earlier) leave no fewer leaves, and, as a
        // full leaf lends to a sibling before it splits, not many more
        // (before it did, such keys left leaves 55 % full: imbl's
        // `inserted_leaves_stay_full`, vendor/README.md).
        let mut inserted = Partition::new();
        for n in 0..20_000 {
            put(&mut inserted, &format!("key:{n}"), n + 1, None);
        }
        assert!(inserted.index_leaves() >= p.index_leaves());
        assert!(inserted.index_leaves() * 10 <= p.index_leaves() * 12);

        // Writes after the load: new keys between loaded ones, overwrites,
        // deletes.
        let before = p.revision();
        for n in 0..3_000u64 {
            put(&mut p, &format!("key:{n}x"), 50_000 + n, None);
            put(&mut p, &format!("key:{n}"), 50_000 + n, None);
            delete(&mut p, &format!("key:{}", n + 10_000), 50_000 + n);
        }
        assert!(p.revision() > before);
        let mut expected = names.clone();
        expected.extend((0..3_000).map(|n| format!("key:{n}x")));
        expected.sort();
        assert_eq!(keys(&p.snapshot_at(0)), expected);
        assert_eq!(p.get("key:1").unwrap().version(), version(50_001));
        assert!(p.get("key:10001").unwrap().is_tombstone());
    }

    #[test]
    fn a_partition_loaded_out_of_order_keeps_the_later_entry_of_a_key() {
        let entries = vec![
            live("b", 1, None),
            live("a", 2, Some(500)),
            live("c", 3, None),
            Entry::new("a", &Record::tombstone(version(4))),
            live("b", 5, None),
        ];
        let p = Partition::from_loaded(entries);
        assert_eq!(keys(&p.snapshot_at(0)), ["a", "b", "c"]);
        assert!(p.get("a").unwrap().is_tombstone());
        assert_eq!(p.get("b").unwrap().version(), version(5));
        assert_eq!((p.live_count(), p.tombstone_count()), (2, 1));
        assert_eq!(
            p.earliest_deadline(),
            None,
            "the record with the deadline was replaced"
        );
        assert_eq!(p.len(), 3);
    }

    #[test]
    fn last_writer_wins_and_only_winners_advance_the_revision() {
        let mut p = Partition::new();
        assert!(matches!(
            put(&mut p, "a", 10, None),
            ApplyOutcome::Applied { previous: None }
        ));
        assert_eq!(p.revision(), 1);
        let bytes = p.memory_bytes();
        assert_eq!(put(&mut p, "a", 5, Some(50)), ApplyOutcome::Superseded);
        assert_eq!(p.revision(), 1, "a losing write changes nothing");
        assert_eq!(p.get("a").unwrap().value(), b"a@10");
        assert_eq!((p.memory_bytes(), p.live_count()), (bytes, 1));
        assert_eq!(p.earliest_deadline(), None, "nor the deadlines");
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
        delete(&mut p, "a", 2);
        assert_eq!(p.live_count(), 1);
        assert_eq!(p.tombstone_count(), 1);
        assert_eq!(p.earliest_deadline(), None, "a delete removes the deadline");
        assert_eq!(p.get("a").unwrap().kind(), RecordKind::Tombstone);
        assert_eq!(p.len(), 2, "the tombstone stays to order later writes");
    }

    #[test]
    fn deadlines_track_the_current_winner_only() {
        let mut p = Partition::new();
        put(&mut p, "a", 1, Some(100));
        put(&mut p, "a", 2, Some(300));
        put(&mut p, "b", 1, Some(200));
        let due = |p: &Partition, now, limit| -> Vec<(u64, String)> {
            p.due(now, limit)
                .into_iter()
                .map(|(at, e)| (at, e.key().to_string()))
                .collect()
        };
        assert_eq!(due(&p, 250, 10), vec![(200, "b".to_string())]);
        assert_eq!(p.due(1000, 1).len(), 1, "the limit bounds a page");
        put(&mut p, "a", 3, None);
        assert_eq!(due(&p, 1000, 10), vec![(200, "b".to_string())]);
    }

    #[test]
    fn snapshots_are_isolated_from_later_writes() {
        let mut p = Partition::new();
        put(&mut p, "a", 1, None);
        let snapshot = p.snapshot_at(0);
        put(&mut p, "b", 2, None);
        put(&mut p, "a", 3, None);
        assert_eq!(snapshot.len(), 1);
        assert_eq!(
            snapshot
                .range::<std::ops::RangeFull>(..)
                .next()
                .unwrap()
                .value(),
            b"a@1"
        );
        assert_eq!(snapshot.revision, 1);
        assert_eq!(snapshot.incarnation, p.incarnation());
        assert_eq!(p.snapshot_at(0).revision, 3);
        put(&mut p, "c", 4, Some(50));
        assert_eq!(p.snapshot_at(49).visible, 3);
        assert_eq!(p.snapshot_at(50).visible, 2, "due records are not visible");
    }

    /// Keys written in ascending and descending order (whose leaves split at
    /// their ends, vendor/README.md) and in scattered order, with some
    /// deleted and purged, read back in order from both ends and over a
    /// range, as they were when each snapshot was taken.
    #[test]
    fn ordered_writes_scan_in_order_from_both_ends() {
        use std::collections::BTreeSet;
        let mut p = Partition::new();
        let mut model = BTreeSet::new();
        let mut snapshots = Vec::new();
        let orders: [Box<dyn Fn(u64) -> u64>; 3] = [
            Box::new(|i| i),
            Box::new(|i| 1_000_000 - i),
            Box::new(|i| (i * 7_919) % 4_001),
        ];
        for (round, order) in (0u64..).zip(&orders) {
            for i in 0..4_000 {
                let key = format!("k{:07}", order(i));
                put(&mut p, &key, round * 10_000 + i + 1, None);
                model.insert(key);
                if i % 1_000 == 999 {
                    snapshots.push((p.snapshot_at(0), model.clone()));
                }
            }
            for i in (0..4_000).step_by(3) {
                let key = format!("k{:07}", order(i));
                delete(&mut p, &key, round * 10_000 + 5_000 + i);
                model.remove(&key);
            }
            purge(&mut p, u64::MAX, usize::MAX);
        }
        snapshots.push((p.snapshot_at(0), model.clone()));
        for (snapshot, expected) in &snapshots {
            assert_eq!(keys(snapshot), expected.iter().cloned().collect::<Vec<_>>());
            let backwards: Vec<_> = snapshot
                .range::<std::ops::RangeFull>(..)
                .rev()
                .map(|e| e.key().to_string())
                .collect();
            assert!(backwards.iter().eq(expected.iter().rev()));
            let within: Vec<_> = snapshot
                .range::<(std::ops::Bound<&str>, std::ops::Bound<&str>)>((
                    std::ops::Bound::Excluded("k0001000"),
                    std::ops::Bound::Included("k0999500"),
                ))
                .map(|e| e.key().to_string())
                .collect();
            let expected_within: Vec<_> = expected
                .iter()
                .filter(|k| k.as_str() > "k0001000" && k.as_str() <= "k0999500")
                .cloned()
                .collect();
            assert_eq!(within, expected_within);
        }
        assert_eq!((p.len(), p.live_count()), (model.len(), model.len()));
    }

    /// Purge as a proposer and an applier do together: choose, then remove.
    fn purge(p: &mut Partition, cutoff_ms: u64, limit: usize) -> Vec<Entry> {
        p.purgeable(cutoff_ms, limit)
            .into_iter()
            .filter_map(|entry| p.remove_tombstone(entry.key(), &entry.version(), cutoff_ms))
            .collect()
    }

    #[test]
    fn a_tombstone_is_removed_only_at_its_version_and_once_old_enough() {
        let mut p = Partition::new();
        put(&mut p, "a", 1, None);
        delete(&mut p, "a", 10);
        assert!(
            p.remove_tombstone("a", &version(9), 100).is_none(),
            "another version"
        );
        assert!(
            p.remove_tombstone("a", &version(10), 9).is_none(),
            "too young"
        );
        assert!(
            p.remove_tombstone("b", &version(10), 100).is_none(),
            "no such key"
        );
        put(&mut p, "live", 5, None);
        assert!(
            p.remove_tombstone("live", &version(5), 100).is_none(),
            "not a tombstone"
        );
        assert!(p.remove_tombstone("a", &version(10), 10).is_some());
        assert!(
            p.remove_tombstone("a", &version(10), 10).is_none(),
            "only once"
        );
        assert_eq!((p.len(), p.tombstone_count(), p.live_count()), (1, 0, 1));
    }

    #[test]
    fn purge_removes_old_tombstones_in_pages_and_leaves_readers_unchanged() {
        let mut p = Partition::new();
        for i in 0..10 {
            put(&mut p, &format!("k{i}"), 1, None);
        }
        let empty_bytes = Partition::new().memory_bytes();
        let full_bytes = p.memory_bytes();
        for i in 0..6 {
            delete(&mut p, &format!("k{i}"), 10 + i);
        }
        let before = p.snapshot_at(100);
        let revision = p.revision();
        assert_eq!(p.oldest_tombstone(), Some(10));
        // Only tombstones standing since the cutoff or earlier go, oldest
        // first, at most `limit` per call.
        let page = purge(&mut p, 13, 2);
        assert_eq!(
            page.iter().map(|e| e.key()).collect::<Vec<_>>(),
            ["k0", "k1"]
        );
        let page = purge(&mut p, 13, 10);
        assert_eq!(
            page.iter().map(|e| e.key()).collect::<Vec<_>>(),
            ["k2", "k3"]
        );
        assert!(purge(&mut p, 13, 10).is_empty());
        assert_eq!(p.oldest_tombstone(), Some(14));
        assert_eq!(p.revision(), revision, "readers see no change");
        assert_eq!((p.len(), p.tombstone_count(), p.live_count()), (6, 2, 4));
        assert_eq!(keys(&before).len(), 10, "a snapshot keeps what it had");
        assert!(p.get("k0").is_none());
        // A new write to a purged key starts afresh.
        put(&mut p, "k0", 20, None);
        assert_eq!(p.get("k0").unwrap().value(), b"k0@20");
        purge(&mut p, u64::MAX, usize::MAX);
        for i in [0, 6, 7, 8, 9] {
            p.apply(&format!("k{i}"), &Record::tombstone(version(30)));
        }
        assert_eq!(purge(&mut p, u64::MAX, usize::MAX).len(), 5);
        assert_eq!((p.len(), p.tombstone_count(), p.live_count()), (0, 0, 0));
        assert_eq!(p.memory_bytes(), empty_bytes);
        assert!(full_bytes > 10 * (15 + 2 + 5));
    }

    #[test]
    fn expiry_tombstones_stand_from_their_deadline() {
        let mut p = Partition::new();
        put(&mut p, "a", 1, Some(500));
        let expired = p.get("a").unwrap().record().to_expiry_tombstone();
        p.apply("a", &expired);
        assert_eq!(p.oldest_tombstone(), Some(500));
        assert!(purge(&mut p, 499, 10).is_empty());
        assert_eq!(purge(&mut p, 500, 10).len(), 1);
    }
}
