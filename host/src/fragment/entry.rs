//! One record and its key in a single reference-counted allocation: the unit
//! a partition's index, deadline index and tombstone index hold.
//!
//! A record costs one heap block: a 48-byte header (reference count, the
//! version, deadline, kind and lengths) followed by the key and the value
//! bytes. The index holds 8-byte pointers to these blocks, and snapshots
//! share them by reference count. A [`Record`] is built from an entry only
//! when a caller needs one (a point read, a write's comparison); a value
//! read out of an entry is a [`Bytes`] that keeps the block alive, not a
//! copy.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::RwLock;
use triomphe::ThinArc;

use crate::names::MAX_KEY_BYTES;
use crate::record::{Record, RecordKind, Version};

/// `expires_at_ms` of a record without a deadline (above every valid one).
const NO_DEADLINE: u64 = u64::MAX;

/// The fixed part of an entry. 32 bytes; with the reference count and the
/// slice length the block's header is 48 bytes.
#[derive(Clone, Copy, Debug)]
struct Meta {
    hlc_ms: u64,
    counter: u64,
    expires_at_ms: u64,
    writer: u32,
    key_len: u16,
    kind: RecordKind,
}

const _: () = assert!(size_of::<Meta>() == 32);
const _: () = assert!(MAX_KEY_BYTES <= u16::MAX as usize);

/// A record with its key. Cloning shares the block.
///
/// Entries order, compare and borrow as their key alone (`Borrow<str>`): an
/// index holds at most one entry per key, and looks entries up by key.
#[derive(Clone)]
pub struct Entry(ThinArc<Meta, u8>);

/// An exact-size iterator over the key then the value bytes, so the block
/// is written in one pass without an intermediate buffer.
struct Concat<'a> {
    key: std::slice::Iter<'a, u8>,
    value: std::slice::Iter<'a, u8>,
}

impl Iterator for Concat<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        self.key.next().or_else(|| self.value.next()).copied()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let len = self.key.len() + self.value.len();
        (len, Some(len))
    }
}

impl ExactSizeIterator for Concat<'_> {}

impl Entry {
    /// The entry of `record` under `key`. Keys are at most
    /// [`MAX_KEY_BYTES`] long (checked at the API edge; a longer key here is
    /// a bug and panics).
    pub fn new(key: &str, record: &Record) -> Self {
        let key_len = u16::try_from(key.len()).expect("keys are at most MAX_KEY_BYTES long");
        let meta = Meta {
            hlc_ms: record.version.hlc_ms,
            counter: record.version.counter,
            expires_at_ms: record.expires_at_ms.unwrap_or(NO_DEADLINE),
            writer: writers().intern(&record.version.writer),
            key_len,
            kind: record.kind,
        };
        let bytes = Concat {
            key: key.as_bytes().iter(),
            value: record.value.iter(),
        };
        Self(ThinArc::from_header_and_iter(meta, bytes))
    }

    fn meta(&self) -> &Meta {
        &self.0.header.header
    }

    /// The key.
    pub fn key(&self) -> &str {
        let key = &self.0.slice[..usize::from(self.meta().key_len)];
        // SAFETY: `new` copied these bytes from a `&str` and they never change.
        unsafe { std::str::from_utf8_unchecked(key) }
    }

    /// The value bytes (empty for tombstones), borrowed from the block.
    pub fn value(&self) -> &[u8] {
        &self.0.slice[usize::from(self.meta().key_len)..]
    }

    /// The value as [`Bytes`] that share the block (no copy).
    pub fn value_bytes(&self) -> Bytes {
        if self.value().is_empty() {
            return Bytes::new();
        }
        Bytes::from_owner(ValueOf(self.clone()))
    }

    /// Live value, delete or converted expiry.
    pub fn kind(&self) -> RecordKind {
        self.meta().kind
    }

    /// Physical part of the version, in Unix milliseconds.
    pub fn hlc_ms(&self) -> u64 {
        self.meta().hlc_ms
    }

    /// The deadline, if the record has one.
    pub fn expires_at_ms(&self) -> Option<u64> {
        Some(self.meta().expires_at_ms).filter(|at| *at != NO_DEADLINE)
    }

    /// The full version (the writer's name is shared, not copied).
    pub fn version(&self) -> Version {
        let meta = self.meta();
        Version {
            hlc_ms: meta.hlc_ms,
            counter: meta.counter,
            writer: writers().name(meta.writer),
        }
    }

    /// Whether this is a tombstone of either kind.
    pub fn is_tombstone(&self) -> bool {
        self.kind() != RecordKind::Live
    }

    /// Visible to reads at `now_ms`: live and not past its deadline.
    pub fn is_visible_at(&self, now_ms: u64) -> bool {
        self.kind() == RecordKind::Live && self.meta().expires_at_ms > now_ms
    }

    /// The deadline of a live record with a TTL, for the expiry index.
    pub fn deadline(&self) -> Option<u64> {
        match self.kind() {
            RecordKind::Live => self.expires_at_ms(),
            _ => None,
        }
    }

    /// Since when a tombstone stands: the delete's version time, or for an
    /// expiry tombstone the later of its version time and its deadline.
    /// `None` for a live record.
    pub fn tombstone_since_ms(&self) -> Option<u64> {
        match self.kind() {
            RecordKind::Live => None,
            RecordKind::Tombstone => Some(self.hlc_ms()),
            RecordKind::ExpiryTombstone => {
                Some(self.hlc_ms().max(self.expires_at_ms().unwrap_or(0)))
            }
        }
    }

    /// The record this entry holds, its value sharing the block.
    pub fn record(&self) -> Record {
        Record {
            version: self.version(),
            kind: self.kind(),
            value: self.value_bytes(),
            expires_at_ms: self.expires_at_ms(),
        }
    }

    /// Heap bytes the block takes: its header, key and value (before the
    /// allocator rounds it up to its size class).
    pub fn heap_bytes(&self) -> usize {
        Self::HEADER_BYTES + self.0.slice.len()
    }

    /// Where the block starts in memory, for prefetch hints.
    pub fn address(&self) -> *const u8 {
        self.0.ptr().cast()
    }

    /// Bytes of an entry's block before its key and value.
    pub const HEADER_BYTES: usize = 16 + size_of::<Meta>();
}

/// Owner of a value's [`Bytes`]: keeps the entry's block alive.
struct ValueOf(Entry);

impl AsRef<[u8]> for ValueOf {
    fn as_ref(&self) -> &[u8] {
        self.0.value()
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("key", &self.key())
            .field("kind", &self.kind())
            .field("version", &self.version())
            .field("value_len", &self.value().len())
            .field("expires_at_ms", &self.expires_at_ms())
            .finish()
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(other.key())
    }
}

impl Borrow<str> for Entry {
    fn borrow(&self) -> &str {
        self.key()
    }
}

/// Writer names by number. Versions name their writer (a node id); there is
/// one per node that ever wrote, so entries store a 4-byte number instead of
/// a pointer to the name. Process-wide and append-only.
struct Writers {
    names: RwLock<Vec<Arc<str>>>,
}

fn writers() -> &'static Writers {
    static WRITERS: OnceLock<Writers> = OnceLock::new();
    WRITERS.get_or_init(|| Writers {
        names: RwLock::new(Vec::new()),
    })
}

impl Writers {
    fn find(names: &[Arc<str>], name: &Arc<str>) -> Option<u32> {
        names
            .iter()
            .position(|known| Arc::ptr_eq(known, name) || known == name)
            .map(|index| index as u32)
    }

    fn intern(&self, name: &Arc<str>) -> u32 {
        if let Some(index) = Self::find(&self.names.read(), name) {
            return index;
        }
        let mut names = self.names.write();
        if let Some(index) = Self::find(&names, name) {
            return index;
        }
        names.push(name.clone());
        u32::try_from(names.len() - 1).expect("fewer than 2^32 writers")
    }

    fn name(&self, index: u32) -> Arc<str> {
        self.names.read()[index as usize].clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(hlc_ms: u64, counter: u64, writer: &str) -> Version {
        Version {
            hlc_ms,
            counter,
            writer: Arc::from(writer),
        }
    }

    #[test]
    fn an_entry_gives_back_the_record_it_was_made_from() {
        let records = [
            Record::live(
                version(5, 7, "node-a"),
                Bytes::from_static(b"\x00\xffvalue"),
                Some(99),
            ),
            Record::live(version(6, 0, "node-b"), Bytes::new(), None),
            Record::tombstone(version(8, 1, "node-a")),
            Record::live(version(9, 2, "node-a"), Bytes::from("v"), Some(20)).to_expiry_tombstone(),
        ];
        for record in records {
            let entry = Entry::new("ключ", &record);
            assert_eq!(entry.key(), "ключ");
            assert_eq!(entry.record(), record);
            assert_eq!(entry.value(), &record.value[..]);
            assert_eq!(entry.deadline(), record.deadline());
            assert_eq!(entry.is_tombstone(), record.is_tombstone());
            for now in [0, 19, 20, 98, 99, 100] {
                assert_eq!(entry.is_visible_at(now), record.is_visible_at(now));
            }
        }
    }

    #[test]
    fn values_outlive_the_entry_they_came_from() {
        let value = {
            let entry = Entry::new(
                "k",
                &Record::live(version(1, 0, "w"), Bytes::from("abc"), None),
            );
            entry.value_bytes()
        };
        assert_eq!(value, Bytes::from("abc"));
    }

    #[test]
    fn entries_order_by_key_alone() {
        let a = Entry::new("a", &Record::live(version(9, 0, "w"), Bytes::new(), None));
        let b = Entry::new("b", &Record::live(version(1, 0, "w"), Bytes::new(), None));
        let a_again = Entry::new("a", &Record::tombstone(version(10, 0, "w")));
        assert!(a < b);
        assert_eq!(a, a_again);
        let borrowed: &str = a.borrow();
        assert_eq!(borrowed, "a");
    }

    #[test]
    fn tombstones_stand_from_their_delete_or_their_deadline() {
        let delete = Entry::new("k", &Record::tombstone(version(50, 0, "w")));
        assert_eq!(delete.tombstone_since_ms(), Some(50));
        let expired = Record::live(version(10, 0, "w"), Bytes::from("v"), Some(70));
        let converted = Entry::new("k", &expired.to_expiry_tombstone());
        assert_eq!(converted.tombstone_since_ms(), Some(70));
        assert_eq!(Entry::new("k", &expired).tombstone_since_ms(), None);
    }

    #[test]
    fn a_block_is_its_header_key_and_value() {
        let entry = Entry::new(
            "key:999999",
            &Record::live(version(1, 0, "w"), Bytes::from(vec![7u8; 100]), None),
        );
        assert_eq!(Entry::HEADER_BYTES, 48);
        assert_eq!(entry.heap_bytes(), 48 + 10 + 100);
        assert_eq!(size_of::<Entry>(), 8);
    }
}
