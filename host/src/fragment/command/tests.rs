//! Commands applied to fresh states in the same order leave equal states;
//! the codec round-trips every command and refuses garbage.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use proptest::prelude::*;

use super::*;
use crate::clock::HybridClock;
use crate::fragment::flush::ExpiryOutbox;
use crate::store::{KvStore, MemoryStore, StoreDump};

/// An outbox that binds the table `bound` and numbers events from 1.
#[derive(Default)]
struct BindsOne(AtomicU64);

impl ExpiryOutbox for BindsOne {
    fn is_bound(&self, table: &TableName) -> bool {
        table.as_str() == "bound"
    }

    fn next_seq(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn deliver(&self, _: Vec<PendingEvent>) {}
}

struct Replica {
    state: FragmentState,
    store: Arc<MemoryStore>,
}

fn replica() -> Replica {
    let (state, store) = FragmentState::for_tests(3, Arc::new(BindsOne::default()), "replica");
    Replica { state, store }
}

/// One partition as observed: its table, entries, revision, live and
/// tombstone counts, and memory.
#[derive(Debug, PartialEq)]
struct ObservedPartition {
    table: String,
    entries: Vec<(String, Record)>,
    revision: u64,
    live: usize,
    tombstones: usize,
    memory_bytes: usize,
}

/// Everything a replica's state is made of: per table (in name order) its
/// entries, revision and counts; then what its write buffer put in the
/// store (records, outbox events, every other family).
#[derive(Debug, PartialEq)]
struct Observed {
    partitions: Vec<ObservedPartition>,
    clock: (u64, u64),
    store: StoreDump,
}

async fn observe(replica: &Replica) -> Observed {
    replica.state.persistence().flush().await.unwrap();
    let mut partitions: Vec<_> = replica
        .state
        .partitions()
        .into_iter()
        .map(|(table, partition)| {
            let partition = partition.read();
            let entries = partition
                .snapshot_at(0)
                .range::<std::ops::RangeFull>(..)
                .map(|e| (e.key().to_string(), e.record()))
                .collect();
            ObservedPartition {
                table: table.as_str().to_string(),
                entries,
                revision: partition.revision(),
                live: partition.live_count(),
                tombstones: partition.tombstone_count(),
                memory_bytes: partition.memory_bytes(),
            }
        })
        .collect();
    partitions.sort_by(|a, b| a.table.cmp(&b.table));
    Observed {
        partitions,
        clock: replica.state.clock().high_water(),
        store: replica.store.dump(),
    }
}

const TABLES: [&str; 2] = ["bound", "plain"];

#[derive(Debug, Clone)]
enum Op {
    /// A put at the proposer's next version, with an optional TTL.
    Put {
        table: usize,
        key: u8,
        value: Vec<u8>,
        ttl: Option<u16>,
    },
    /// A delete at the proposer's next version.
    Delete { table: usize, key: u8 },
    /// A write at an old version (from a deposed leader, say): it loses
    /// wherever a newer record holds the key.
    Stale { table: usize, key: u8, back: u16 },
    /// A put or delete at the proposer's next version, made only if the
    /// key holds nothing (`condition` 0), its current version (1) or a
    /// version it never held (2).
    Conditional {
        table: usize,
        key: u8,
        delete: bool,
        condition: u8,
    },
    /// Time passes.
    Advance(u16),
    /// The proposer converts what is due.
    Expire,
    /// The proposer chooses what is due, a put to `key` lands first, then
    /// the conversion applies: it must skip the rewritten key.
    ExpireRace { table: usize, key: u8 },
    /// The proposer purges tombstones older than `retention`.
    Purge { retention: u16 },
}

fn op() -> impl Strategy<Value = Op> {
    let table = 0..TABLES.len();
    let key = 0u8..12;
    prop_oneof![
        4 => (table.clone(), key.clone(), proptest::collection::vec(any::<u8>(), 0..24), proptest::option::of(1u16..400))
            .prop_map(|(table, key, value, ttl)| Op::Put { table, key, value, ttl }),
        2 => (table.clone(), key.clone()).prop_map(|(table, key)| Op::Delete { table, key }),
        1 => (table.clone(), key.clone(), 0u16..500).prop_map(|(table, key, back)| Op::Stale { table, key, back }),
        2 => (table.clone(), key.clone(), any::<bool>(), 0u8..3)
            .prop_map(|(table, key, delete, condition)| Op::Conditional { table, key, delete, condition }),
        2 => (1u16..300).prop_map(Op::Advance),
        1 => Just(Op::Expire),
        1 => (table, key).prop_map(|(table, key)| Op::ExpireRace { table, key }),
        1 => (0u16..300).prop_map(|retention| Op::Purge { retention }),
    ]
}

/// Drives a proposer and hands every command it applies to the replicas
/// too, through the codec as a log would.
struct Cluster {
    proposer: Replica,
    replicas: [Replica; 2],
    clock: HybridClock,
    now: u64,
}

impl Cluster {
    fn apply(&self, command: Command) {
        let bytes = command.encode();
        let decoded = Command::decode(&bytes).unwrap();
        assert_eq!(decoded, command, "the codec round-trips");
        let applied = self.proposer.state.apply_command(&command);
        for replica in &self.replicas {
            assert_eq!(replica.state.apply_command(&decoded), applied);
        }
    }

    fn write(&self, table: usize, key: u8, record: Record) {
        self.write_if(table, key, record, Condition::Always);
    }

    /// Writes of the `bound` table carry a change event's sequence number
    /// (as if it had a change handler), so the change events each replica
    /// writes with them are compared too.
    fn write_if(&self, table: usize, key: u8, record: Record, condition: Condition) {
        let change_seq =
            (table == 0).then(|| self.proposer.state.persistence().outbox().next_seq());
        self.apply(Command::Write(WriteCommand {
            table: TableName::new(TABLES[table]).unwrap(),
            key: Arc::from(format!("k{key:02}")),
            record,
            at_ms: self.now,
            condition,
            change_seq,
        }));
    }

    fn run(&mut self, op: Op) {
        match op {
            Op::Put {
                table,
                key,
                value,
                ttl,
            } => {
                let version = self.clock.tick_at(self.now);
                let deadline = ttl.map(|ttl| self.now + u64::from(ttl));
                self.write(
                    table,
                    key,
                    Record::live(version, Bytes::from(value), deadline),
                );
            }
            Op::Delete { table, key } => {
                let version = self.clock.tick_at(self.now);
                self.write(table, key, Record::tombstone(version));
            }
            Op::Stale { table, key, back } => {
                let version = Version {
                    hlc_ms: self.now.saturating_sub(u64::from(back)),
                    counter: 0,
                    writer: Arc::from("deposed"),
                };
                self.write(
                    table,
                    key,
                    Record::live(version, Bytes::from_static(b"old"), None),
                );
            }
            Op::Conditional {
                table,
                key,
                delete,
                condition,
            } => {
                let name = TableName::new(TABLES[table]).unwrap();
                let current = self
                    .proposer
                    .state
                    .get(&name, &format!("k{key:02}"), self.now)
                    .map(|record| record.version);
                let condition = match condition {
                    0 => Condition::Absent,
                    1 => current.map_or(Condition::Absent, Condition::Version),
                    _ => Condition::Version(Version {
                        hlc_ms: 1,
                        counter: 0,
                        writer: Arc::from("deposed"),
                    }),
                };
                let version = self.clock.tick_at(self.now);
                let record = if delete {
                    Record::tombstone(version)
                } else {
                    Record::live(version, Bytes::from_static(b"if"), None)
                };
                self.write_if(table, key, record, condition);
            }
            Op::Advance(ms) => self.now += u64::from(ms),
            Op::Expire => loop {
                let (command, more) = self.proposer.state.due_page(self.now);
                self.apply(Command::Expire(command));
                if !more {
                    break;
                }
            },
            Op::ExpireRace { table, key } => {
                let (command, _) = self.proposer.state.due_page(self.now);
                let version = self.clock.tick_at(self.now);
                self.write(
                    table,
                    key,
                    Record::live(version, Bytes::from_static(b"new"), None),
                );
                self.apply(Command::Expire(command));
            }
            Op::Purge { retention } => loop {
                let cutoff = self.now.saturating_sub(u64::from(retention));
                let (command, more) = self.proposer.state.purgeable_page(cutoff);
                self.apply(Command::Purge(command));
                if !more {
                    break;
                }
            },
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The same commands in the same order leave the same records,
    /// revisions, counts, clock, store contents and outbox on every
    /// replica, whatever the mix of writes, stale writes, conversions,
    /// raced conversions and purges.
    #[test]
    fn the_same_commands_leave_the_same_state(ops in proptest::collection::vec(op(), 1..120)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let mut cluster = Cluster {
                proposer: replica(),
                replicas: [replica(), replica()],
                clock: HybridClock::new(Arc::from("leader"), 0, 0),
                now: 1_000,
            };
            for op in ops {
                cluster.run(op);
            }
            let proposer = observe(&cluster.proposer).await;
            for replica in &cluster.replicas {
                let observed = observe(replica).await;
                prop_assert_eq!(&observed, &proposer);
            }
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn a_conversion_skips_a_rewritten_key_and_a_purge_a_revived_one() {
    let replica = replica();
    let state = &replica.state;
    let table = TableName::new("bound").unwrap();
    let key: Arc<str> = Arc::from("k");
    let at = |hlc_ms| Version {
        hlc_ms,
        counter: 0,
        writer: Arc::from("w"),
    };
    let write = |record: Record, at_ms| {
        state.apply_command(&Command::Write(WriteCommand {
            table: table.clone(),
            key: key.clone(),
            record,
            at_ms,
            condition: Condition::Always,
            change_seq: None,
        }))
    };
    assert!(matches!(
        write(Record::live(at(1), Bytes::from_static(b"a"), Some(10)), 1),
        Applied::Written { .. }
    ));
    let (due, more) = state.due_page(20);
    assert!(!more);
    assert_eq!(due.due.len(), 1);
    assert_eq!(
        due.due[0].outbox_seq,
        Some(1),
        "a bound table's event is numbered"
    );
    // A newer write lands between choosing and applying.
    write(Record::live(at(2), Bytes::from_static(b"b"), Some(10)), 2);
    assert_eq!(
        state.apply_command(&Command::Expire(due)),
        Applied::Expired {
            converted: 0,
            bytes: 0
        }
    );
    // A delete of an invisible key and a losing write are skipped.
    assert_eq!(write(Record::tombstone(at(3)), 50), Applied::Skipped);
    assert_eq!(
        write(Record::live(at(1), Bytes::new(), None), 2),
        Applied::Skipped
    );
    assert!(matches!(
        write(Record::tombstone(at(3)), 5),
        Applied::Written { .. }
    ));
    let (purge, _) = state.purgeable_page(100);
    assert_eq!(purge.tombstones.len(), 1);
    write(Record::live(at(4), Bytes::from_static(b"c"), None), 6);
    assert_eq!(
        state.apply_command(&Command::Purge(purge)),
        Applied::Purged { purged: 0 },
        "the key was written again: its value stays"
    );
    assert_eq!(
        state.get(&table, "k", 7).unwrap().value,
        Bytes::from_static(b"c")
    );
    assert_eq!(
        state.clock().high_water(),
        (4, 0),
        "applied versions raise the clock"
    );
}

#[test]
fn garbage_and_incomplete_commands_are_corrupt() {
    assert!(Command::decode(b"\xff\xff").is_err());
    assert!(Command::decode(&[]).is_err(), "an empty command");
    let no_version = pb::Command {
        command: Some(pb::command::Command::Purge(pb::Purge {
            cutoff_ms: 1,
            tombstones: vec![pb::Purgeable {
                table: "t".into(),
                key: "k".into(),
                version: None,
            }],
        })),
    }
    .encode_to_vec();
    assert!(Command::decode(&no_version).is_err());
    let bad_table = pb::Command {
        command: Some(pb::command::Command::Write(pb::Write {
            table: "no spaces allowed".into(),
            key: "k".into(),
            record: Record::tombstone(Version {
                hlc_ms: 1,
                counter: 0,
                writer: Arc::from("w"),
            })
            .encode()
            .into(),
            at_ms: 0,
            condition: None,
            change_seq: None,
        })),
    }
    .encode_to_vec();
    assert!(Command::decode(&bad_table).is_err());
}

#[tokio::test]
async fn conditions_and_ttl_changes_are_judged_on_the_visible_record() {
    let replica = replica();
    let state = &replica.state;
    let table = TableName::new("plain").unwrap();
    let key: Arc<str> = Arc::from("k");
    let put = |value: &'static [u8], expires_at_ms| Mutation::Put {
        value: Bytes::from_static(value),
        expires_at_ms,
    };
    let written = |outcome: WriteOutcome| match outcome {
        WriteOutcome::Applied { version, .. } => version,
        other => panic!("not written: {other:?}"),
    };
    let write = |mutation, condition: &Condition, now_ms| {
        state
            .write(&table, &key, mutation, condition, Origin::Client, now_ms)
            .unwrap()
    };

    // Create only: the first put wins, the second fails naming it.
    let first = written(write(put(b"a", Some(1_000)), &Condition::Absent, 100));
    assert_eq!(
        write(put(b"b", None), &Condition::Absent, 100),
        WriteOutcome::ConditionFailed {
            current: Some(first.clone())
        }
    );
    // A version the key does not hold fails.
    let never = Version {
        hlc_ms: 1,
        counter: 0,
        writer: Arc::from("w"),
    };
    assert_eq!(
        write(Mutation::Delete, &Condition::Version(never), 100),
        WriteOutcome::ConditionFailed {
            current: Some(first.clone())
        }
    );

    // A TTL change keeps the value under a new version.
    let retimed = written(write(
        Mutation::Retime {
            expires_at_ms: None,
        },
        &Condition::Version(first.clone()),
        100,
    ));
    assert!(retimed > first);
    let record = state.get(&table, "k", 5_000).unwrap();
    assert_eq!(
        (record.value, record.expires_at_ms, record.version),
        (Bytes::from_static(b"a"), None, retimed)
    );

    // A TTL change decided before a newer write does not bring the old
    // value back when it is applied after it.
    let Proposal::Write(late) = state
        .propose_write(
            &table,
            &key,
            Mutation::Retime {
                expires_at_ms: Some(9_000),
            },
            &Condition::Always,
            Origin::Client,
            200,
        )
        .unwrap()
    else {
        panic!("a visible record can be retimed");
    };
    written(write(put(b"c", None), &Condition::Always, 300));
    assert_eq!(
        state.apply_command(&Command::Write(late)),
        Applied::ConditionFailed
    );
    assert_eq!(
        state.get(&table, "k", 400).unwrap().value,
        Bytes::from_static(b"c")
    );

    // Expired is expired: past its deadline a record cannot be retimed,
    // a condition on its version fails and a create-only put succeeds.
    let short = written(write(put(b"d", Some(500)), &Condition::Always, 400));
    assert_eq!(
        write(
            Mutation::Retime {
                expires_at_ms: Some(10_000)
            },
            &Condition::Always,
            600
        ),
        WriteOutcome::NotFound
    );
    assert_eq!(
        write(Mutation::Delete, &Condition::Version(short), 600),
        WriteOutcome::ConditionFailed { current: None }
    );
    written(write(put(b"e", None), &Condition::Absent, 600));

    // A table never written to holds nothing.
    let empty = TableName::new("bound").unwrap();
    let on_empty = |condition: &Condition| {
        state
            .write(&empty, &key, Mutation::Delete, condition, Origin::Client, 0)
            .unwrap()
    };
    assert_eq!(
        on_empty(&Condition::Version(first)),
        WriteOutcome::ConditionFailed { current: None }
    );
    assert_eq!(on_empty(&Condition::Absent), WriteOutcome::NotFound);
}

/// An outbox whose table `orders` has a change handler for keys starting
/// with `o/`, numbering events from 1.
#[derive(Default)]
struct ChangesOfOrders(AtomicU64);

impl ExpiryOutbox for ChangesOfOrders {
    fn is_bound(&self, _: &TableName) -> bool {
        false
    }

    fn emits_change(&self, table: &TableName, key: &str) -> bool {
        table.as_str() == "orders" && key.starts_with("o/")
    }

    fn next_seq(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn deliver(&self, _: Vec<PendingEvent>) {}
}

#[tokio::test]
async fn winning_writes_of_covered_keys_write_change_events_with_both_versions() {
    let (state, store) = FragmentState::for_tests(2, Arc::new(ChangesOfOrders::default()), "n");
    let orders = TableName::new("orders").unwrap();
    let put = |key: &str, value: &'static [u8], origin| match state
        .write(
            &orders,
            &Arc::from(key),
            Mutation::Put {
                value: Bytes::from_static(value),
                expires_at_ms: None,
            },
            &Condition::Always,
            origin,
            100,
        )
        .unwrap()
    {
        WriteOutcome::Applied { version, .. } => version,
        other => panic!("not written: {other:?}"),
    };
    let first = put("o/1", b"a", Origin::Client);
    let second = put("o/1", b"b", Origin::Client);
    put("x/1", b"not covered", Origin::Client);
    put("o/2", b"a change handler's own", Origin::ChangeHandler);
    let deleted = state
        .write(
            &orders,
            &Arc::from("o/1"),
            Mutation::Delete,
            &Condition::Always,
            Origin::Client,
            100,
        )
        .unwrap();
    // A delete of nothing visible writes nothing, and so no event.
    let nothing = state
        .write(
            &orders,
            &Arc::from("o/9"),
            Mutation::Delete,
            &Condition::Always,
            Origin::Client,
            100,
        )
        .unwrap();
    assert_eq!(nothing, WriteOutcome::NotFound);
    state.persistence().flush().await.unwrap();
    let mut events = Vec::new();
    store
        .scan_family(
            crate::store::Family::ExpiryOutbox,
            &[],
            &mut |key, value| {
                events.push(PendingEvent::decode(key, value)?);
                Ok(())
            },
        )
        .unwrap();
    let seen: Vec<(String, String, String, bool)> = events
        .iter()
        .map(|event| {
            assert_eq!(event.table, orders.changes());
            let change = event.change_event().unwrap();
            (
                change.key.clone(),
                change.old_version.clone(),
                change.new_version.clone(),
                change.deleted,
            )
        })
        .collect();
    let WriteOutcome::Applied {
        version: deleted, ..
    } = deleted
    else {
        panic!("the delete applies");
    };
    assert_eq!(
        seen,
        vec![
            ("o/1".into(), String::new(), first.to_string(), false),
            ("o/1".into(), first.to_string(), second.to_string(), false),
            ("o/1".into(), second.to_string(), deleted.to_string(), true),
        ],
        "in order, one per winning write of a covered key, none for a change handler's write"
    );
}
