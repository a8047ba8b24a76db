//! An in-memory `KvStore` for unit tests, with switchable write failures.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Condvar, Mutex};

use super::layout::{decode_loaded, encode_record_key, fragment_prefix};
use super::{
    EntryVisitor, Family, FamilyEntry, FamilyWrite, FragmentId, KvStore, LoadedRecord, StoreBatch,
    StoreError, prefix_end,
};

/// What [`MemoryStore::dump`] returns: records, then the other families.
#[cfg(test)]
pub(crate) type StoreDump = (Vec<(Vec<u8>, Vec<u8>)>, Vec<(u8, Vec<u8>, Vec<u8>)>);

/// An entry of a non-record family: `(family, key)`.
type FamilyKey = (u8, Vec<u8>);

/// Keeps records and the other families in ordered maps (meta entries live
/// in the `Family::Meta` map). `set_failing(true)` makes every
/// write fail until it is turned off, to exercise retry paths;
/// `set_holding(true)` makes record writes wait until it is turned off, as
/// a slow disk would, to exercise group commit. It counts the record writes
/// and the fsyncs asked for.
#[derive(Default)]
pub struct MemoryStore {
    records: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    families: Mutex<BTreeMap<FamilyKey, Vec<u8>>>,
    failing: AtomicBool,
    writes: AtomicU64,
    fsyncs: AtomicU64,
    holding: Mutex<bool>,
    released: Condvar,
    held: AtomicUsize,
}

impl MemoryStore {
    /// Visit the entries of `family` from `from` up to `to` (exclusive;
    /// `None`: the family's end), in key order, outside the lock.
    fn scan_between(
        &self,
        family: Family,
        from: &[u8],
        to: Option<&[u8]>,
        visit: &mut EntryVisitor<'_>,
    ) -> Result<(), StoreError> {
        let entries: Vec<FamilyEntry> = self
            .families
            .lock()
            .range((family as u8, from.to_vec())..)
            .take_while(|((f, k), _)| *f == family as u8 && to.is_none_or(|to| k.as_slice() < to))
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        for (key, value) in entries {
            visit(&key, &value)?;
        }
        Ok(())
    }

    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Make writes fail (`true`) or succeed again (`false`).
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// Number of successful `write` calls: shows how many commits were grouped.
    pub fn write_calls(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// Number of fsyncs asked for: `sync`, `write_meta`, and `write` or
    /// `write_entries` with `sync`.
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::SeqCst)
    }

    /// Make `write` calls wait (`true`) until released (`false`).
    pub fn set_holding(&self, holding: bool) {
        *self.holding.lock() = holding;
        if !holding {
            self.released.notify_all();
        }
    }

    /// `write` calls waiting in a hold now.
    pub fn held_writes(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    fn wait_while_held(&self) {
        let mut holding = self.holding.lock();
        if *holding {
            self.held.fetch_add(1, Ordering::SeqCst);
            while *holding {
                self.released.wait(&mut holding);
            }
            self.held.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn count_fsync(&self, sync: bool) {
        if sync {
            self.fsyncs.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Every entry, in key order: records, then `(family, key, value)` of
    /// the other families.
    #[cfg(test)]
    pub(crate) fn dump(&self) -> StoreDump {
        let records = self
            .records
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let families = self
            .families
            .lock()
            .iter()
            .map(|((family, k), v)| (*family, k.clone(), v.clone()))
            .collect();
        (records, families)
    }

    /// Number of persisted records.
    pub fn record_count(&self) -> usize {
        self.records.lock().len()
    }
}

impl KvStore for MemoryStore {
    fn load_fragment(
        &self,
        fragment: FragmentId,
        visit: &mut dyn FnMut(LoadedRecord<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let prefix = fragment_prefix(fragment);
        let entries: Vec<_> = self
            .records
            .lock()
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut last_table = None;
        for (raw_key, raw_value) in entries {
            visit(decode_loaded(&raw_key, &raw_value, &mut last_table)?)?;
        }
        Ok(())
    }

    fn write(&self, batches: &[StoreBatch], sync: bool) -> Result<(), StoreError> {
        self.wait_while_held();
        if self.failing.load(Ordering::SeqCst) {
            return Err(StoreError::Engine("injected write failure".into()));
        }
        let mut records = self.records.lock();
        let mut families = self.families.lock();
        for batch in batches {
            for stored in &batch.records {
                records.insert(
                    encode_record_key(stored.fragment, &stored.table, &stored.key),
                    stored.record.encode(),
                );
            }
            for removed in &batch.removed {
                records.remove(&encode_record_key(
                    removed.fragment,
                    &removed.table,
                    &removed.key,
                ));
            }
            for (key, value) in &batch.outbox {
                families.insert((Family::ExpiryOutbox as u8, key.clone()), value.clone());
            }
            if let Some((key, value)) = &batch.position {
                families.insert((Family::RaftState as u8, key.clone()), value.clone());
            }
            for write in &batch.settled {
                apply_write(&mut families, write);
            }
        }
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.count_fsync(sync);
        Ok(())
    }

    fn read_meta(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .families
            .lock()
            .get(&(Family::Meta as u8, key.as_bytes().to_vec()))
            .cloned())
    }

    fn write_meta(&self, entries: &[(&str, Vec<u8>)]) -> Result<(), StoreError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(StoreError::Engine("injected write failure".into()));
        }
        let mut families = self.families.lock();
        for (key, value) in entries {
            families.insert((Family::Meta as u8, key.as_bytes().to_vec()), value.clone());
        }
        self.count_fsync(true);
        Ok(())
    }

    fn sync(&self) -> Result<(), StoreError> {
        self.count_fsync(true);
        Ok(())
    }

    fn write_entries(&self, writes: &[FamilyWrite], sync: bool) -> Result<(), StoreError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(StoreError::Engine("injected write failure".into()));
        }
        let mut families = self.families.lock();
        for write in writes {
            apply_write(&mut families, write);
        }
        self.count_fsync(sync);
        Ok(())
    }

    fn scan_family(
        &self,
        family: Family,
        prefix: &[u8],
        visit: &mut EntryVisitor<'_>,
    ) -> Result<(), StoreError> {
        self.scan_between(family, prefix, prefix_end(prefix).as_deref(), visit)
    }

    fn read_entry(&self, family: Family, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .families
            .lock()
            .get(&(family as u8, key.to_vec()))
            .cloned())
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
        self.scan_between(family, from, Some(to), visit)
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
        Ok(self
            .families
            .lock()
            .range((family as u8, from.to_vec())..(family as u8, to.to_vec()))
            .next_back()
            .map(|((_, k), v)| (k.clone(), v.clone())))
    }
}

/// Apply one write to the family entries.
fn apply_write(families: &mut BTreeMap<FamilyKey, Vec<u8>>, write: &FamilyWrite) {
    match write {
        FamilyWrite::Put(family, key, value) => {
            families.insert((*family as u8, key.clone()), value.clone());
        }
        FamilyWrite::Delete(family, key) => {
            families.remove(&(*family as u8, key.clone()));
        }
        FamilyWrite::DeleteRange(family, from, to) => {
            let doomed: Vec<FamilyKey> = families
                .range((*family as u8, from.clone())..(*family as u8, to.clone()))
                .map(|(key, _)| key.clone())
                .collect();
            for key in doomed {
                families.remove(&key);
            }
        }
    }
}
