//! The `Settle` command: the outcome of a delivered batch of expiry events
//! (outbox entries deleted or rewritten, dead letters put), decided by the
//! leader's dispatcher, or a redrive or discard (dead letters moved back
//! into the outbox, pending events deleted) decided by the leader; written
//! alike on every replica, through the write buffer, after the events it
//! settles.

use ebb_proto::fragment::v1 as pb;

use super::state::FragmentState;
use crate::store::outbox::outbox_seq;
use crate::store::{Family, FamilyWrite};

/// Writes that settle delivered events of one fragment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SettleCommand {
    /// Outbox deletes and puts, dead letter puts and deletes, in order.
    pub(crate) writes: Vec<FamilyWrite>,
}

impl SettleCommand {
    /// The protobuf form.
    pub(super) fn to_pb(&self) -> pb::Settle {
        pb::Settle {
            writes: self
                .writes
                .iter()
                .filter_map(|write| {
                    let (family, key, value) = match write {
                        FamilyWrite::Put(family, key, value) => (family, key, Some(value)),
                        FamilyWrite::Delete(family, key) => (family, key, None),
                        // Never built by the dispatcher (see `new`).
                        FamilyWrite::DeleteRange(..) => return None,
                    };
                    Some(pb::SettledWrite {
                        family: family_of(*family)? as i32,
                        key: key.clone().into(),
                        value: value.map(|v| v.clone().into()),
                    })
                })
                .collect(),
        }
    }

    /// The command of its protobuf form: only outbox and dead letter
    /// writes are settlements; anything else is corrupt (the reason).
    pub(super) fn from_pb(settle: pb::Settle) -> Result<Self, String> {
        let writes = settle
            .writes
            .into_iter()
            .map(|write| {
                let family = match pb::settled_write::Family::try_from(write.family) {
                    Ok(pb::settled_write::Family::ExpiryOutbox) => Family::ExpiryOutbox,
                    Ok(pb::settled_write::Family::DeadLetters) => Family::DeadLetters,
                    _ => return Err(format!("a settled write to family {}", write.family)),
                };
                let key = write.key.to_vec();
                Ok(match write.value {
                    Some(value) => FamilyWrite::Put(family, key, value.to_vec()),
                    None => FamilyWrite::Delete(family, key),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { writes })
    }

    /// Whether every write is one a settlement may make (outbox or dead
    /// letters, no range deletes).
    pub(crate) fn is_settlement(writes: &[FamilyWrite]) -> bool {
        writes.iter().all(|write| match write {
            FamilyWrite::Put(family, ..) | FamilyWrite::Delete(family, _) => {
                family_of(*family).is_some()
            }
            FamilyWrite::DeleteRange(..) => false,
        })
    }
}

fn family_of(family: Family) -> Option<pb::settled_write::Family> {
    match family {
        Family::ExpiryOutbox => Some(pb::settled_write::Family::ExpiryOutbox),
        Family::DeadLetters => Some(pb::settled_write::Family::DeadLetters),
        _ => None,
    }
}

impl FragmentState {
    /// Enqueue the settlement's writes behind everything applied before:
    /// the events they settle reach the store first, or in the same write.
    /// Returns how many writes were made.
    pub(super) fn apply_settle(&self, settle: &SettleCommand) -> usize {
        // A redrive puts events under new sequence numbers: a later leader
        // must number its events past them.
        for write in &settle.writes {
            if let FamilyWrite::Put(Family::ExpiryOutbox, key, _) = write
                && let Some(seq) = outbox_seq(key)
            {
                self.persistence().outbox().observe_seq(seq);
            }
        }
        let (_, full) = self.persistence().enqueue_settled(settle.writes.clone());
        if full {
            self.persistence().flush_in_background();
        }
        settle.writes.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use bytes::Bytes;

    use super::*;
    use crate::clock::HybridClock;
    use crate::fragment::command::{Command, WriteCommand};
    use crate::fragment::flush::ExpiryOutbox;
    use crate::names::TableName;
    use crate::raft::{GroupMachine, encoded};
    use crate::record::Record;
    use crate::store::outbox::outbox_key;
    use crate::store::{KvStore, MemoryStore, PendingEvent};

    /// An outbox that binds every table and numbers events from 1.
    #[derive(Default)]
    struct BindsAll(AtomicU64);

    impl ExpiryOutbox for BindsAll {
        fn is_bound(&self, _: &TableName) -> bool {
            true
        }
        fn next_seq(&self) -> u64 {
            self.0.fetch_add(1, Ordering::SeqCst) + 1
        }
        fn observe_seq(&self, seq: u64) {
            self.0.fetch_max(seq, Ordering::SeqCst);
        }
        fn deliver(&self, _: Vec<PendingEvent>) {}
    }

    fn outbox_keys(store: &MemoryStore) -> Vec<Vec<u8>> {
        keys_of(store, Family::ExpiryOutbox)
    }

    fn keys_of(store: &MemoryStore, family: Family) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        store
            .scan_family(family, &[], &mut |key, _| {
                keys.push(key.to_vec());
                Ok(())
            })
            .unwrap();
        keys
    }

    /// A dead letter of fragment `fragment` for `key`: its store key and
    /// entry.
    fn dead_letter(fragment: u32, key: &str) -> FamilyWrite {
        let table = TableName::new("t").unwrap();
        let clock = HybridClock::new(Arc::from("w"), 0, 0);
        let record = Record::live(clock.tick_at(5), Bytes::from("v"), Some(6));
        let event = PendingEvent::new(fragment, 1, &table, key, &record, 7);
        let id = event.id().to_vec();
        FamilyWrite::Put(
            Family::DeadLetters,
            crate::store::outbox::dead_letter_key(&table, &id),
            event.encode(),
        )
    }

    /// Three records due at 1 000, converted with events 1 to 3.
    fn converted(state: &FragmentState) {
        let clock = HybridClock::new(Arc::from("leader"), 0, 0);
        for key in ["a", "b", "c"] {
            let write = Command::Write(WriteCommand {
                table: TableName::new("t").unwrap(),
                key: Arc::from(key),
                record: Record::live(clock.tick_at(10), Bytes::from("v"), Some(1_000)),
                at_ms: 10,
                condition: crate::write::Condition::Always,
                change_seq: None,
            });
            state.apply(&write.encode()).unwrap();
        }
        let (due, _) = state.due_page(1_000);
        assert_eq!(due.due.len(), 3);
        state.apply(&Command::Expire(due).encode()).unwrap();
    }

    #[tokio::test]
    async fn a_settlement_reaches_the_store_after_the_events_it_settles() {
        let (state, store) = FragmentState::for_tests(0, Arc::new(BindsAll::default()), "n");
        converted(&state);
        // Settled before any flush: the events and their deletes are in
        // the same write, the deletes last.
        let settle = Command::Settle(SettleCommand {
            writes: vec![
                FamilyWrite::Delete(Family::ExpiryOutbox, outbox_key(0, 1)),
                FamilyWrite::Delete(Family::ExpiryOutbox, outbox_key(0, 3)),
            ],
        });
        let decoded = Command::decode(&settle.encode()).unwrap();
        assert_eq!(decoded, settle, "the command round-trips");
        state.apply(&settle.encode()).unwrap();
        state.persistence().flush().await.unwrap();
        assert_eq!(outbox_keys(&store), [outbox_key(0, 2)]);
    }

    #[test]
    fn a_settlement_putting_outbox_events_raises_the_sequence_past_them() {
        let outbox = Arc::new(BindsAll::default());
        let (state, _store) = FragmentState::for_tests(0, outbox.clone(), "n");
        let revived = PendingEvent::new(
            0,
            41,
            &TableName::new("t").unwrap(),
            "k",
            &Record::live(
                HybridClock::new(Arc::from("w"), 0, 0).tick_at(5),
                Bytes::from("v"),
                None,
            ),
            7,
        );
        let settle = Command::Settle(SettleCommand {
            writes: vec![FamilyWrite::Put(
                Family::ExpiryOutbox,
                outbox_key(0, 41),
                revived.encode(),
            )],
        });
        state.apply(&settle.encode()).unwrap();
        assert_eq!(outbox.next_seq(), 42, "the next event is numbered past 41");
    }

    #[test]
    fn only_outbox_and_dead_letter_writes_are_settlements() {
        let outbox = FamilyWrite::Delete(Family::ExpiryOutbox, vec![1]);
        let dead = FamilyWrite::Put(Family::DeadLetters, vec![1], vec![2]);
        assert!(SettleCommand::is_settlement(&[outbox, dead]));
        assert!(!SettleCommand::is_settlement(&[FamilyWrite::Put(
            Family::Meta,
            vec![1],
            vec![]
        )]));
        assert!(!SettleCommand::is_settlement(&[FamilyWrite::DeleteRange(
            Family::ExpiryOutbox,
            vec![0],
            vec![1]
        )]));
        let foreign = pb::Settle {
            writes: vec![pb::SettledWrite {
                family: 7,
                key: vec![1].into(),
                value: None,
            }],
        };
        assert!(SettleCommand::from_pb(foreign).is_err());
    }

    #[tokio::test]
    async fn a_snapshot_carries_the_fragment_s_outbox_and_dead_letters_and_a_restore_replaces_the_target_s()
     {
        let (source, source_store) =
            FragmentState::for_tests(0, Arc::new(BindsAll::default()), "n");
        let shared: Arc<dyn KvStore> = source_store.clone();
        source.snapshot_outbox_from(&shared);
        converted(&source);
        source_store
            .write_entries(&[dead_letter(0, "kept-dead")], false)
            .unwrap();
        source.persistence().flush().await.unwrap();
        let (target, target_store) =
            FragmentState::for_tests(0, Arc::new(BindsAll::default()), "n");
        let target_shared: Arc<dyn KvStore> = target_store.clone();
        target.snapshot_outbox_from(&target_shared);
        // The target holds an event and a dead letter of its own the
        // source does not, and a dead letter of another fragment.
        target_store
            .write_entries(
                &[
                    dead_letter(0, "stale-dead"),
                    dead_letter(1, "other-fragment"),
                ],
                false,
            )
            .unwrap();
        target
            .apply(
                &Command::Settle(SettleCommand {
                    writes: vec![FamilyWrite::Put(
                        Family::ExpiryOutbox,
                        outbox_key(0, 9),
                        vec![1],
                    )],
                })
                .encode(),
            )
            .unwrap();
        target.restore(&encoded(&source).unwrap()).unwrap();
        target.persistence().flush().await.unwrap();
        assert_eq!(outbox_keys(&target_store), outbox_keys(&source_store));
        assert_eq!(outbox_keys(&target_store).len(), 3);
        let (dead_here, dead_other) = match (
            dead_letter(0, "kept-dead"),
            dead_letter(1, "other-fragment"),
        ) {
            (FamilyWrite::Put(_, here, _), FamilyWrite::Put(_, other, _)) => (here, other),
            _ => unreachable!("dead letters are puts"),
        };
        let mut expected = vec![dead_here, dead_other];
        expected.sort();
        assert_eq!(
            keys_of(&target_store, Family::DeadLetters),
            expected,
            "the fragment's dead letters are the source's; another fragment's stay"
        );
        assert_eq!(
            encoded(&target).unwrap(),
            encoded(&source).unwrap(),
            "records and outbox alike"
        );
    }
}
