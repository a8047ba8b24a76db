//! Bounded tombstone purges: removing tombstones that stood longer than the
//! retention from the partitions and the store, a page at a time.

use std::sync::Arc;

use super::command::{Applied, Command, PurgeCommand, Purgeable};
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
    /// Choose up to one page of tombstones standing since `cutoff_ms` or
    /// earlier as a [`PurgeCommand`]; `true` when more remain (the page hit
    /// its budget, or the write buffer has no room for more). The
    /// proposer's half of a purge: nothing changes until it is applied.
    /// Room is checked when choosing, as for [`Self::due_page`].
    pub(crate) fn purgeable_page(&self, cutoff_ms: u64) -> (PurgeCommand, bool) {
        let mut command = PurgeCommand {
            cutoff_ms,
            tombstones: Vec::new(),
        };
        let mut weight = 0;
        for (table, partition) in self.partitions() {
            let partition = partition.read();
            let room = PURGE_PAGE_RECORDS - command.tombstones.len();
            let found = partition.purgeable(cutoff_ms, room + 1);
            for entry in found {
                if command.tombstones.len() == PURGE_PAGE_RECORDS {
                    return (command, true);
                }
                weight += entry.key().len() + 64;
                if self.persistence().check_room(weight).is_err() {
                    return (command, true);
                }
                command.tombstones.push(Purgeable {
                    table: table.clone(),
                    key: Arc::from(entry.key()),
                    version: entry.version(),
                });
            }
        }
        (command, false)
    }

    /// Remove up to one page of tombstones standing since `cutoff_ms` or
    /// earlier, from the partitions and (through the write buffer) from the
    /// store: choose them ([`Self::purgeable_page`]) and apply the command.
    /// The cutoff is an argument, not the clock, so the operation is the
    /// same wherever it is replayed.
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
        let (command, more) = self.purgeable_page(cutoff_ms);
        if command.tombstones.is_empty() {
            return PurgePage { purged: 0, more };
        }
        match self.apply_command(&Command::Purge(command)) {
            Applied::Purged { purged } => PurgePage { purged, more },
            other => unreachable!("a purge command reports removals: {other:?}"),
        }
    }

    /// Since when the oldest tombstone of this fragment stands.
    pub(crate) fn oldest_tombstone(&self) -> Option<u64> {
        self.partitions()
            .iter()
            .filter_map(|(_, partition)| partition.read().oldest_tombstone())
            .min()
    }
}
