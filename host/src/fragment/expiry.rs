//! Bounded expiry passes: converting due records into expiry tombstones, a
//! page at a time, releasing partition locks between pages.

use std::sync::Arc;

use super::command::{Applied, Command, Due, ExpireCommand};
use super::state::FragmentState;

/// Most records a page converts.
pub(crate) const PAGE_RECORDS: usize = 256;
/// Most value bytes a page converts (the page ends after the record that
/// crosses it).
pub(crate) const PAGE_BYTES: usize = 1024 * 1024;

/// What one page did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ExpiryPage {
    /// Records turned into expiry tombstones.
    pub(crate) converted: usize,
    /// Value bytes released by the conversions.
    pub(crate) bytes: usize,
    /// Due records remain (the page hit its budget or the buffer was full).
    pub(crate) more: bool,
}

impl FragmentState {
    /// Choose up to one page of records due at `now_ms` as an
    /// [`ExpireCommand`], giving each of a bound table its outbox sequence
    /// number; `true` when due records remain (the page hit its budget, or
    /// the write buffer has no room for more). The proposer's half of a
    /// conversion: nothing changes until the command is applied. Room is
    /// checked when choosing; writes between choosing and applying may take
    /// some of it, so the buffer can pass its bound by at most one page.
    pub(crate) fn due_page(&self, now_ms: u64) -> (ExpireCommand, bool) {
        let mut command = ExpireCommand {
            at_ms: now_ms,
            due: Vec::new(),
        };
        let (mut bytes, mut weight) = (0, 0);
        let outbox = self.persistence().outbox().clone();
        for (table, partition) in self.partitions() {
            let bound = outbox.is_bound(&table);
            let partition = partition.read();
            let due = partition.due(now_ms, PAGE_RECORDS - command.due.len() + 1);
            for (deadline, current) in due {
                if command.due.len() == PAGE_RECORDS || bytes >= PAGE_BYTES {
                    return (command, true);
                }
                debug_assert_eq!(current.deadline(), Some(deadline));
                let header = current.header();
                let released = header.value_len();
                let key = current.key_of(&header);
                weight += key.len() + 64 + if bound { 128 + released } else { 0 };
                if self.persistence().check_room(weight).is_err() {
                    return (command, true);
                }
                command.due.push(Due {
                    table: table.clone(),
                    key: Arc::from(key),
                    version: current.version(),
                    outbox_seq: bound.then(|| outbox.next_seq()),
                });
                bytes += released;
            }
        }
        (command, false)
    }

    /// Convert up to one page of records due at `now_ms`: choose them
    /// ([`Self::due_page`]) and apply the command. Each conversion keeps the
    /// record's version, advances the partition revision and is enqueued
    /// for the store like any write; in a table with an expiry handler,
    /// together with its outbox event. Stops early, leaving the rest due,
    /// when the write buffer is full: expired records stay invisible to
    /// readers meanwhile, so nothing is lost by waiting.
    pub(crate) fn expire_page(&self, now_ms: u64) -> ExpiryPage {
        let (command, more) = self.due_page(now_ms);
        if command.due.is_empty() {
            return ExpiryPage {
                more,
                ..ExpiryPage::default()
            };
        }
        match self.apply_command(&Command::Expire(command)) {
            Applied::Expired { converted, bytes } => ExpiryPage {
                converted,
                bytes,
                more,
            },
            other => unreachable!("an expire command reports conversions: {other:?}"),
        }
    }

    /// Convert everything due at `now_ms`, page by page. Returns how many
    /// records were converted and whether some remain (buffer full).
    pub(crate) fn expire_all(&self, now_ms: u64) -> (usize, bool) {
        let mut converted = 0;
        loop {
            let page = self.expire_page(now_ms);
            converted += page.converted;
            if !page.more || page.converted == 0 {
                return (converted, page.more);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::clock::HybridClock;
    use crate::fragment::flush::Persistence;
    use crate::fragment::state::{Mutation, WriteOutcome};
    use crate::names::TableName;
    use crate::record::RecordKind;
    use crate::store::{Committer, MemoryStore};

    fn state() -> FragmentState {
        let store = Arc::new(MemoryStore::new());
        let committer = Arc::new(Committer::start(store).unwrap());
        FragmentState::new(
            0,
            HashMap::new(),
            Arc::new(Persistence::new(
                0,
                committer,
                100_000,
                1 << 30,
                Arc::new(crate::expiry::outbox::Outbox::new()),
            )),
            Arc::new(HybridClock::new(Arc::from("n"), 0, 0)),
        )
    }

    fn put(state: &FragmentState, table: &TableName, key: &str, deadline: Option<u64>) {
        let outcome = state
            .write(
                table,
                &Arc::from(key),
                Mutation::Put {
                    value: Bytes::from_static(b"value"),
                    expires_at_ms: deadline,
                },
                &crate::write::Condition::Always,
                crate::write::Origin::Client,
                0,
            )
            .unwrap();
        assert!(matches!(outcome, WriteOutcome::Applied { .. }));
    }

    #[tokio::test]
    async fn pages_are_bounded_and_conversion_keeps_the_version() {
        let state = state();
        let table = TableName::new("t").unwrap();
        for i in 0..600 {
            put(&state, &table, &format!("k{i:04}"), Some(1_000 + i));
        }
        put(&state, &table, "forever", None);
        let before = state
            .partition(&table)
            .unwrap()
            .read()
            .get("k0000")
            .unwrap()
            .clone();
        let revision = state.partition(&table).unwrap().read().revision();

        let first = state.expire_page(5_000);
        assert_eq!(first.converted, PAGE_RECORDS);
        assert!(first.more);
        let (rest, more) = state.expire_all(5_000);
        assert_eq!((rest, more), (600 - PAGE_RECORDS, false));

        let partition = state.partition(&table).unwrap();
        let partition = partition.read();
        let after = partition.get("k0000").unwrap();
        assert_eq!(after.kind(), RecordKind::ExpiryTombstone);
        assert_eq!(
            after.version(),
            before.version(),
            "conversion keeps the original version"
        );
        assert_eq!(
            partition.revision(),
            revision + 600,
            "each conversion advances the revision"
        );
        assert_eq!(partition.live_count(), 1);
        assert_eq!(partition.earliest_deadline(), None);
    }

    #[tokio::test]
    async fn only_due_records_are_converted() {
        let state = state();
        let table = TableName::new("t").unwrap();
        put(&state, &table, "soon", Some(100));
        put(&state, &table, "later", Some(10_000));
        assert_eq!(state.earliest_deadline(), Some(100));
        assert_eq!(state.expire_all(500), (1, false));
        assert_eq!(state.earliest_deadline(), Some(10_000));
        assert!(state.get(&table, "later", 500).is_some());
        assert!(
            state.get(&table, "later", 10_000).is_none(),
            "invisible at its deadline before conversion"
        );
    }
}
