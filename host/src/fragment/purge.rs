//! Bounded tombstone purges: removing tombstones that stood longer than the
//! retention from the partitions and the store, a page at a time.

use std::sync::Arc;

use super::state::FragmentState;

/// Most tombstones a page removes.
pub(crate) const PURGE_PAGE_RECORDS: usize = 1024;

/// What one purge page did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PurgePage {
    /// Tombstones removed.
    pub(crate) purged: usize,
    /// Tombstones older than the cutoff remain (the page hit its budget or
    /// the write buffer was full).
    pub(crate) more: bool,
}

impl FragmentState {
    /// Remove up to one page of tombstones standing since `cutoff_ms` or
    /// earlier, from the partitions and (through the write buffer) from the
    /// store. The cutoff is an argument, not the clock, so the operation is
    /// the same wherever it is replayed.
    ///
    /// Safe at any cutoff: versions of this node only grow, so no write a
    /// removed tombstone would have ordered can arrive later; the removal
    /// replaces whatever the buffer holds for the key and deletes the key in
    /// the store, older values included, so nothing older comes back after a
    /// restart; readers see no change, so the revision stays and guarded
    /// cursors go on. Expiry outbox events and dead letters live elsewhere
    /// and are untouched. Stops early, leaving the rest for the next page,
    /// when the write buffer is full.
    pub(crate) fn purge_page(&self, cutoff_ms: u64) -> PurgePage {
        let mut page = PurgePage::default();
        for (table, partition) in self.partitions() {
            let mut partition = partition.write();
            while partition
                .oldest_tombstone()
                .is_some_and(|since| since <= cutoff_ms)
            {
                if page.purged == PURGE_PAGE_RECORDS {
                    page.more = true;
                    return page;
                }
                if self.persistence().check_room(64).is_err() {
                    page.more = true;
                    return page;
                }
                let limit = (PURGE_PAGE_RECORDS - page.purged).min(64);
                for entry in partition.purge(cutoff_ms, limit) {
                    let key: Arc<str> = Arc::from(entry.key());
                    self.persistence().enqueue_removal(&table, &key);
                    page.purged += 1;
                }
            }
        }
        page
    }

    /// Since when the oldest tombstone of this fragment stands.
    pub(crate) fn oldest_tombstone(&self) -> Option<u64> {
        self.partitions()
            .iter()
            .filter_map(|(_, partition)| partition.read().oldest_tombstone())
            .min()
    }
}
