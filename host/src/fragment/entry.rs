//! One record and its key in a single reference-counted allocation: the unit
//! a partition's index, deadline index and tombstone index hold.
//!
//! A record costs one heap block: a 4-byte reference count, a packed header
//! (key length, kind, version, value length and deadline: 12 bytes for a
//! typical record) and the key and value bytes. A record of a 10-byte key
//! and a 100-byte value fits a 128-byte allocation. The index holds 8-byte
//! pointers to these blocks, and snapshots share them by reference count.
//! A [`Record`] is built from an entry only when a caller needs one (a point
//! read, a conversion); a value read out of an entry is copied when short
//! and otherwise a [`Bytes`] that keeps the block alive.
//!
//! Block layout (all integers little-endian):
//!
//! | bytes | field |
//! | --- | --- |
//! | 4 | reference count |
//! | 2 | key length |
//! | key | the key bytes (first, so comparing keys reads two bytes) |
//! | 1 | flags: kind (bits 0-1), has a deadline (bit 2), wide times (bit 3) |
//! | 6 or 8 | `hlc_ms` (8 with wide times) |
//! | varint | value length |
//! | varint | version counter |
//! | varint | writer number |
//! | 0, 6 or 8 | deadline (when it has one; 8 with wide times) |
//! | value | the value bytes |

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{self, AtomicU32};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::names::MAX_KEY_BYTES;
use crate::record::{Record, RecordKind, RecordView, Version};

const _: () = assert!(MAX_KEY_BYTES <= u16::MAX as usize);

/// Times up to this fit 6 bytes (year 10889); later ones take 8.
const NARROW_TIME_LIMIT: u64 = 1 << 48;
const KIND_MASK: u8 = 0b11;
const HAS_DEADLINE: u8 = 0b100;
const WIDE_TIMES: u8 = 0b1000;
/// A reference count past this aborts (as `std::sync::Arc` does): a count
/// that large means references leak.
const MAX_REFS: u32 = u32::MAX / 2;

/// A record with its key. Cloning shares the block.
///
/// Entries order, compare and borrow as their key alone (`Borrow<str>`): an
/// index holds at most one entry per key, and looks entries up by key.
pub struct Entry {
    block: NonNull<u8>,
}

// SAFETY: a block is immutable after `new` except for its atomic reference
// count, so sharing and sending entries between threads is sound.
unsafe impl Send for Entry {}
unsafe impl Sync for Entry {}

/// The header of a block, decoded.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    kind: RecordKind,
    hlc_ms: u64,
    counter: u64,
    writer: u32,
    expires_at_ms: Option<u64>,
    key_start: usize,
    key_len: usize,
    value_start: usize,
    value_len: usize,
}

impl Header {
    fn block_len(&self) -> usize {
        self.value_start + self.value_len
    }

    /// Physical part of the version, in Unix milliseconds.
    pub fn hlc_ms(&self) -> u64 {
        self.hlc_ms
    }

    /// The deadline, if the record has one.
    pub fn expires_at_ms(&self) -> Option<u64> {
        self.expires_at_ms
    }

    /// Length of the value in bytes.
    pub fn value_len(&self) -> usize {
        self.value_len
    }

    /// Visible to reads at `now_ms`: live and not past its deadline.
    pub fn is_visible_at(&self, now_ms: u64) -> bool {
        self.kind == RecordKind::Live && self.expires_at_ms.is_none_or(|at| at > now_ms)
    }
}

fn kind_bits(kind: RecordKind) -> u8 {
    match kind {
        RecordKind::Live => 0,
        RecordKind::Tombstone => 1,
        RecordKind::ExpiryTombstone => 2,
    }
}

/// A header being written, on the stack: at most 4 + 1 + 8 + 4 * 10 + 8
/// bytes.
struct HeaderBuf {
    bytes: [u8; 64],
    len: usize,
}

impl HeaderBuf {
    fn extend(&mut self, bytes: &[u8]) {
        self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.extend(&[(value as u8) | 0x80]);
            value >>= 7;
        }
        self.extend(&[value as u8]);
    }

    fn time(&mut self, value: u64, wide: bool) {
        let bytes = value.to_le_bytes();
        self.extend(if wide { &bytes[..] } else { &bytes[..6] });
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Reads a block's header fields in order.
struct Reader {
    at: *const u8,
    offset: usize,
}

impl Reader {
    /// # Safety
    /// The reader must stay within a header written by [`Entry::new`].
    unsafe fn byte(&mut self) -> u8 {
        // SAFETY: the caller keeps the reader inside the header.
        let byte = unsafe { *self.at.add(self.offset) };
        self.offset += 1;
        byte
    }

    /// # Safety
    /// As [`Self::byte`].
    unsafe fn varint(&mut self) -> u64 {
        let mut value = 0u64;
        let mut shift = 0;
        loop {
            // SAFETY: `new` wrote a terminated varint here.
            let byte = unsafe { self.byte() };
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return value;
            }
            shift += 7;
        }
    }

    /// # Safety
    /// As [`Self::byte`].
    unsafe fn time(&mut self, wide: bool) -> u64 {
        let mut bytes = [0u8; 8];
        let at = unsafe { self.at.add(self.offset) };
        // SAFETY: `new` wrote 8 (wide) or 6 bytes here. Fixed-size copies
        // compile to moves, not a call.
        unsafe {
            if wide {
                std::ptr::copy_nonoverlapping(at, bytes.as_mut_ptr(), 8);
                self.offset += 8;
            } else {
                std::ptr::copy_nonoverlapping(at, bytes.as_mut_ptr(), 6);
                self.offset += 6;
            }
        }
        u64::from_le_bytes(bytes)
    }

    /// # Safety
    /// As [`Self::byte`], for `len` bytes.
    unsafe fn skip(&mut self, len: usize) {
        self.offset += len;
    }
}

impl Entry {
    /// The entry of `record` under `key`.
    pub fn new(key: &str, record: &Record) -> Self {
        Self::from_view(key, &record.view())
    }

    /// The entry of a borrowed record under `key`: the key and value are
    /// copied once, into the block.
    pub fn from_view(key: &str, record: &RecordView<'_>) -> Self {
        let expires = record.expires_at_ms;
        let wide =
            record.hlc_ms >= NARROW_TIME_LIMIT || expires.is_some_and(|at| at >= NARROW_TIME_LIMIT);
        let mut flags = kind_bits(record.kind);
        if expires.is_some() {
            flags |= HAS_DEADLINE;
        }
        if wide {
            flags |= WIDE_TIMES;
        }
        let mut front = HeaderBuf {
            bytes: [0; 64],
            len: 0,
        };
        let key_len = u16::try_from(key.len()).expect("keys are at most MAX_KEY_BYTES long");
        front.extend(&[0, 0, 0, 0]);
        front.extend(&key_len.to_le_bytes());
        let mut header = HeaderBuf {
            bytes: [0; 64],
            len: 0,
        };
        header.extend(&[flags]);
        header.time(record.hlc_ms, wide);
        header.varint(record.value.len() as u64);
        header.varint(record.counter);
        header.varint(u64::from(writers().intern(record.writer)));
        if let Some(at) = expires {
            header.time(at, wide);
        }
        let (front, header) = (front.as_slice(), header.as_slice());
        let len = front.len() + key.len() + header.len() + record.value.len();
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (the count alone is 4
        // bytes).
        let block = unsafe { alloc(layout) };
        let Some(block) = NonNull::new(block) else {
            handle_alloc_error(layout)
        };
        // SAFETY: `block` has room for `len` bytes; the four ranges written
        // are consecutive and within it; the count is then initialized in
        // place over the front's first 4 bytes.
        unsafe {
            let mut at = block.as_ptr();
            for part in [front, key.as_bytes(), header, record.value] {
                std::ptr::copy_nonoverlapping(part.as_ptr(), at, part.len());
                at = at.add(part.len());
            }
            block.as_ptr().cast::<AtomicU32>().write(AtomicU32::new(1));
        }
        Self { block }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, align_of::<AtomicU32>()).expect("a block fits a layout")
    }

    fn refs(&self) -> &AtomicU32 {
        // SAFETY: the block starts with the count, aligned for it, alive
        // while `self` is.
        unsafe { &*self.block.as_ptr().cast::<AtomicU32>() }
    }

    /// The decoded header, for callers that read several fields of one
    /// entry (a scan): each accessor of `Entry` decodes it again.
    pub fn header(&self) -> Header {
        let mut reader = Reader {
            at: self.block.as_ptr(),
            offset: 4,
        };
        // SAFETY: `new` wrote every field read here, in this order.
        unsafe {
            let key_len = usize::from(u16::from_le_bytes([reader.byte(), reader.byte()]));
            let key_start = reader.offset;
            reader.skip(key_len);
            let flags = reader.byte();
            let wide = flags & WIDE_TIMES != 0;
            let hlc_ms = reader.time(wide);
            let value_len = reader.varint() as usize;
            let counter = reader.varint();
            let writer = reader.varint() as u32;
            let expires_at_ms = if flags & HAS_DEADLINE != 0 {
                Some(reader.time(wide))
            } else {
                None
            };
            let kind = match flags & KIND_MASK {
                0 => RecordKind::Live,
                1 => RecordKind::Tombstone,
                _ => RecordKind::ExpiryTombstone,
            };
            Header {
                kind,
                hlc_ms,
                counter,
                writer,
                expires_at_ms,
                key_start,
                key_len,
                value_start: reader.offset,
                value_len,
            }
        }
    }

    fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        // SAFETY: `offset..offset + len` lies in the block, which lives as
        // long as `self` and never changes after `new`.
        unsafe { std::slice::from_raw_parts(self.block.as_ptr().add(offset), len) }
    }

    /// The key (reads only its length before it).
    pub fn key(&self) -> &str {
        // SAFETY: `new` wrote the key's length as 2 bytes after the count.
        let len = unsafe { self.block.as_ptr().add(4).cast::<[u8; 2]>().read() };
        self.str_at(6, usize::from(u16::from_le_bytes(len)))
    }

    /// The key, given this entry's decoded header.
    pub fn key_of(&self, header: &Header) -> &str {
        self.str_at(header.key_start, header.key_len)
    }

    fn str_at(&self, offset: usize, len: usize) -> &str {
        // SAFETY: `new` copied the key's bytes from a `&str`.
        unsafe { std::str::from_utf8_unchecked(self.bytes(offset, len)) }
    }

    /// The value bytes (empty for tombstones), borrowed from the block.
    pub fn value(&self) -> &[u8] {
        let header = self.header();
        self.bytes(header.value_start, header.value_len)
    }

    /// The value as [`Bytes`] that share the block (no copy).
    #[cfg(test)]
    pub fn value_bytes(&self) -> Bytes {
        self.value_bytes_of(&self.header())
    }

    /// The value as [`Bytes`] that share the block, given this entry's
    /// decoded header. Sharing never reads the value: a copy would, and a
    /// point read of a record not in the cache then pays for the value's
    /// cache lines whether or not the caller looks at them
    /// (BENCHMARKS.md, "Scans and point reads").
    pub fn value_bytes_of(&self, header: &Header) -> Bytes {
        Bytes::from_owner(ValueOf {
            entry: self.clone(),
            start: header.value_start,
            len: header.value_len,
        })
    }

    /// Live value, delete or converted expiry.
    pub fn kind(&self) -> RecordKind {
        self.header().kind
    }

    /// The deadline, if the record has one.
    pub fn expires_at_ms(&self) -> Option<u64> {
        self.header().expires_at_ms
    }

    /// The full version (the writer's name is shared, not copied).
    pub fn version(&self) -> Version {
        let header = self.header();
        Version {
            hlc_ms: header.hlc_ms,
            counter: header.counter,
            writer: writers().name(header.writer),
        }
    }

    /// Whether this is a tombstone of either kind.
    pub fn is_tombstone(&self) -> bool {
        self.kind() != RecordKind::Live
    }

    /// Visible to reads at `now_ms`: live and not past its deadline.
    pub fn is_visible_at(&self, now_ms: u64) -> bool {
        let header = self.header();
        header.kind == RecordKind::Live && header.expires_at_ms.is_none_or(|at| at > now_ms)
    }

    /// The deadline of a live record with a TTL, for the expiry index.
    pub fn deadline(&self) -> Option<u64> {
        let header = self.header();
        match header.kind {
            RecordKind::Live => header.expires_at_ms,
            _ => None,
        }
    }

    /// Since when a tombstone stands: the delete's version time, or for an
    /// expiry tombstone the later of its version time and its deadline.
    /// `None` for a live record.
    pub fn tombstone_since_ms(&self) -> Option<u64> {
        let header = self.header();
        match header.kind {
            RecordKind::Live => None,
            RecordKind::Tombstone => Some(header.hlc_ms),
            RecordKind::ExpiryTombstone => {
                Some(header.hlc_ms.max(header.expires_at_ms.unwrap_or(0)))
            }
        }
    }

    /// The record this entry holds (a long value shares the block).
    pub fn record(&self) -> Record {
        self.record_of(&self.header())
    }

    /// The record, given this entry's decoded header.
    pub fn record_of(&self, header: &Header) -> Record {
        Record {
            version: Version {
                hlc_ms: header.hlc_ms,
                counter: header.counter,
                writer: writers().name(header.writer),
            },
            kind: header.kind,
            value: self.value_bytes_of(header),
            expires_at_ms: header.expires_at_ms,
        }
    }

    /// Heap bytes the block takes (before the allocator rounds it up to
    /// its size class).
    pub fn heap_bytes(&self) -> usize {
        self.header().block_len()
    }

    /// Bytes of the block besides the key and value: the count and the
    /// header.
    #[cfg(test)]
    pub fn header_bytes(&self) -> usize {
        let header = self.header();
        header.block_len() - header.key_len - header.value_len
    }

    /// Where the block starts in memory, for prefetch hints.
    pub fn address(&self) -> *const u8 {
        self.block.as_ptr()
    }
}

impl Clone for Entry {
    fn clone(&self) -> Self {
        if self.refs().fetch_add(1, atomic::Ordering::Relaxed) > MAX_REFS {
            std::process::abort();
        }
        Self { block: self.block }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        if self.refs().fetch_sub(1, atomic::Ordering::Release) != 1 {
            return;
        }
        // Every other owner's use of the block happens before the free.
        atomic::fence(atomic::Ordering::Acquire);
        let layout = Self::layout(self.header().block_len());
        // SAFETY: this was the last reference to a block `new` allocated
        // with this layout.
        unsafe { dealloc(self.block.as_ptr(), layout) };
    }
}

/// Owner of a value's [`Bytes`]: keeps the entry's block alive.
struct ValueOf {
    entry: Entry,
    start: usize,
    len: usize,
}

impl AsRef<[u8]> for ValueOf {
    fn as_ref(&self) -> &[u8] {
        self.entry.bytes(self.start, self.len)
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
    /// By key, in `str`'s order ([`super::key_order::compare_keys`]).
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        super::key_order::compare_keys(self.key().as_bytes(), other.key().as_bytes())
    }
}

impl Borrow<str> for Entry {
    fn borrow(&self) -> &str {
        self.key()
    }
}

/// Writer names by number. Versions name their writer (a node id); there is
/// one per node that ever wrote, so entries store a small number instead of
/// a pointer to the name. Process-wide and append-only, at most
/// [`MAX_WRITERS`]; reading a name takes no lock.
struct Writers {
    /// `CHUNK` names per chunk, allocated as needed.
    chunks: [OnceLock<Box<Chunk>>; CHUNK],
    /// Names in number order, for interning.
    names: Mutex<Vec<Arc<str>>>,
}

const CHUNK: usize = 256;
/// One chunk of writer names.
type Chunk = [OnceLock<Arc<str>>; CHUNK];
/// Most writers one process can know: far more nodes than a data set will
/// ever have been written by.
const MAX_WRITERS: usize = CHUNK * CHUNK;

fn writers() -> &'static Writers {
    static WRITERS: Writers = Writers {
        chunks: [const { OnceLock::new() }; CHUNK],
        names: Mutex::new(Vec::new()),
    };
    &WRITERS
}

impl Writers {
    /// The number of `name`, given one if it has none yet. A thread
    /// remembers the last name it interned (a node's writes all carry the
    /// same one), so the common case takes no lock.
    fn intern(&self, name: &str) -> u32 {
        thread_local! {
            static LAST: std::cell::RefCell<Option<(Arc<str>, u32)>> = const { std::cell::RefCell::new(None) };
        }
        if let Some(index) = LAST.with(|last| {
            last.borrow()
                .as_ref()
                .filter(|(known, _)| **known == *name)
                .map(|(_, index)| *index)
        }) {
            return index;
        }
        let (index, shared) = {
            let mut names = self.names.lock();
            match names.iter().position(|known| **known == *name) {
                Some(index) => (index, names[index].clone()),
                None => {
                    let index = names.len();
                    assert!(index < MAX_WRITERS, "more than {MAX_WRITERS} writers");
                    let chunk = self.chunks[index / CHUNK]
                        .get_or_init(|| Box::new([const { OnceLock::new() }; CHUNK]));
                    let shared: Arc<str> = Arc::from(name);
                    let _ = chunk[index % CHUNK].set(shared.clone());
                    names.push(shared.clone());
                    (index, shared)
                }
            }
        };
        let index = index as u32;
        LAST.with(|last| *last.borrow_mut() = Some((shared, index)));
        index
    }

    /// The name of writer `index` (one `intern` gave out).
    fn name(&self, index: u32) -> Arc<str> {
        let index = index as usize;
        self.chunks[index / CHUNK]
            .get()
            .and_then(|chunk| chunk[index % CHUNK].get())
            .expect("writer numbers come from intern")
            .clone()
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
    fn a_typical_record_fits_128_bytes() {
        let now = 1_764_547_200_000; // 2025-12-01
        let entry = Entry::new(
            "key:999999",
            &Record::live(version(now, 3, "w"), Bytes::from(vec![7u8; 100]), None),
        );
        // count 4, key length 2, flags 1, hlc_ms 6, three one-byte varints.
        assert_eq!(entry.header_bytes(), 16);
        assert_eq!(entry.heap_bytes(), 16 + 10 + 100);
        assert_eq!(size_of::<Entry>(), 8);
        assert_eq!(size_of::<Option<Entry>>(), 8);
    }

    #[test]
    fn wide_times_long_fields_and_shared_blocks_round_trip() {
        let long_key = "k".repeat(4096);
        let records = [
            Record::live(
                version(u64::MAX, u64::MAX, "far-future"),
                Bytes::from(vec![1u8; 70_000]),
                Some(u64::MAX - 1),
            ),
            Record::live(
                version(5, 300, "w"),
                Bytes::from(vec![2u8; 200]),
                Some(1 << 47),
            ),
        ];
        for record in records {
            let entry = Entry::new(&long_key, &record);
            let copies: Vec<Entry> = (0..100).map(|_| entry.clone()).collect();
            drop(entry);
            for copy in &copies {
                assert_eq!(copy.key(), long_key);
                assert_eq!(copy.record(), record);
            }
            let value = copies[0].value_bytes();
            drop(copies);
            assert_eq!(value, record.value, "a value outlives every entry");
        }
    }
}
