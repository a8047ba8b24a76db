//! Fragment commands: the one way a fragment's records change, decided by
//! the proposer and applied alike wherever they are applied.
//!
//! A change is made in two steps. The proposer (the single node today, a
//! fragment group's leader in a cluster) decides everything that depends on
//! it: the version of a write, the time a delete or an expiry is judged at,
//! which records are due, which tombstones are old enough, the outbox
//! sequence number of each event. It then applies the [`Command`] holding
//! those decisions. Applying reads only the command and the fragment's
//! state, so the same commands applied in the same order to equal states
//! leave equal records, revisions, write buffers and outbox events: the
//! property a replicated log needs, and what this module's tests check.
//! Applying never refuses (room in the write buffer is the proposer's
//! check) and skips an item whose record changed since it was chosen.

use std::sync::Arc;

use ebb_proto::Message;
use ebb_proto::fragment::v1 as pb;

use super::error::BacklogFull;
use super::partition::{ApplyOutcome, Partition};
use super::settle::SettleCommand;
use super::state::{FragmentState, Mutation, WriteOutcome};
use crate::names::{TableName, validate_key};
use crate::record::{Record, RecordKind, Version, own_writer};
use crate::store::PendingEvent;
use crate::write::{Condition, Origin};

/// Most tombstones a purge removes per hold of a partition's lock.
const PURGE_LOCK_RECORDS: usize = 64;

/// A change to a fragment, fully decided by its proposer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Command {
    /// Put a value or a delete's tombstone.
    Write(WriteCommand),
    /// Convert due records into expiry tombstones.
    Expire(ExpireCommand),
    /// Remove old tombstones.
    Purge(PurgeCommand),
    /// Settle delivered expiry events (`fragment/settle.rs`).
    Settle(SettleCommand),
}

/// Put `record` at `key` under last-writer-wins. A tombstone (a delete)
/// applies only if the key is visible at `at_ms`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WriteCommand {
    /// Table of the key.
    pub(crate) table: TableName,
    /// The key.
    pub(crate) key: Arc<str>,
    /// The record, versioned by the proposer.
    pub(crate) record: Record,
    /// When the proposer judged the write (a delete's visibility check,
    /// the condition's).
    pub(crate) at_ms: u64,
    /// What the key's visible record at `at_ms` must be for the write to
    /// apply; judged again where the command is applied.
    pub(crate) condition: Condition,
    /// Outbox sequence number of the write's change event, when the
    /// proposer decided it emits one; written with the record only if
    /// the write wins.
    pub(crate) change_seq: Option<u64>,
}

/// What a proposer decided for a client mutation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Proposal {
    /// Propose and apply this command.
    Write(WriteCommand),
    /// Nothing to propose: the mutation's outcome is already known.
    Done(WriteOutcome),
}

/// A record the proposer found due.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Due {
    /// Table of the key.
    pub(crate) table: TableName,
    /// The key.
    pub(crate) key: Arc<str>,
    /// The version found due; nothing happens if the key holds another.
    pub(crate) version: Version,
    /// Outbox sequence number of its event; `None` when the table has no
    /// expiry handler.
    pub(crate) outbox_seq: Option<u64>,
}

/// Convert each listed record whose deadline is at or before `at_ms`, if
/// its key still holds it. Items of one table are listed together.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ExpireCommand {
    /// When the proposer judged the records due.
    pub(crate) at_ms: u64,
    /// The records.
    pub(crate) due: Vec<Due>,
}

/// A tombstone the proposer found old enough to purge.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Purgeable {
    /// Table of the key.
    pub(crate) table: TableName,
    /// The key.
    pub(crate) key: Arc<str>,
    /// The tombstone's version; nothing happens if the key holds another.
    pub(crate) version: Version,
}

/// Remove each listed tombstone standing since `cutoff_ms` or earlier, if
/// its key still holds it. Items of one table are listed together.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct PurgeCommand {
    /// Tombstones standing since this time or earlier may go.
    pub(crate) cutoff_ms: u64,
    /// The tombstones.
    pub(crate) tombstones: Vec<Purgeable>,
}

/// What applying a command did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    /// The write won; `seq` is its place in the write buffer.
    Written {
        /// Buffer sequence number, to wait on for durability.
        seq: u64,
    },
    /// The write did not apply: a newer record holds the key, or a delete
    /// found nothing visible.
    Skipped,
    /// The write's condition did not hold where it was applied; nothing
    /// changed.
    ConditionFailed,
    /// Records converted and the value bytes that released.
    Expired {
        /// Records turned into expiry tombstones.
        converted: usize,
        /// Value bytes released.
        bytes: usize,
    },
    /// Tombstones removed.
    Purged {
        /// How many.
        purged: usize,
    },
    /// Settlement writes enqueued.
    Settled {
        /// How many.
        writes: usize,
    },
}

/// A command that does not decode: a corrupt or foreign log entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fragment command does not decode: {0}")]
pub struct CorruptCommand(String);

impl CorruptCommand {
    pub(super) fn new(reason: String) -> Self {
        Self(reason)
    }
}

impl FragmentState {
    /// Propose and apply a client mutation: judge its condition, version
    /// it from the node clock and apply it as a [`WriteCommand`]
    /// (last-writer-wins merge, enqueued for the store), all under the
    /// partition lock so versions, the index and the buffer agree on order
    /// and nothing changes the key between the check and the write. A full
    /// backlog refuses the write before anything changes.
    pub(crate) fn write(
        &self,
        table: &TableName,
        key: &Arc<str>,
        mutation: Mutation,
        condition: &Condition,
        origin: Origin,
        now_ms: u64,
    ) -> Result<WriteOutcome, BacklogFull> {
        let Some(partition) = self.partition_for(table, &mutation) else {
            return Ok(absent_outcome(&mutation, condition));
        };
        let mut partition = partition.write();
        let decided =
            self.decide_write(&partition, table, key, mutation, condition, origin, now_ms)?;
        let write = match decided {
            Proposal::Write(write) => write,
            Proposal::Done(outcome) => return Ok(outcome),
        };
        let version = write.record.version.clone();
        match self.apply_write_locked(&mut partition, &write) {
            Applied::Written { seq } => Ok(WriteOutcome::Applied { version, seq }),
            other => {
                unreachable!("a fresh clock version over a visible key always wins: {other:?}")
            }
        }
    }

    /// The proposer's half of a client mutation on a replicated fragment:
    /// the [`WriteCommand`] to propose (versioned from the node clock), or
    /// the outcome when there is nothing to propose (a delete or TTL change
    /// that finds nothing visible, a condition that does not hold). Nothing
    /// changes until the command is applied, which judges it again.
    pub(crate) fn propose_write(
        &self,
        table: &TableName,
        key: &Arc<str>,
        mutation: Mutation,
        condition: &Condition,
        origin: Origin,
        now_ms: u64,
    ) -> Result<Proposal, BacklogFull> {
        let Some(partition) = self.partition_for(table, &mutation) else {
            return Ok(Proposal::Done(absent_outcome(&mutation, condition)));
        };
        let partition = partition.read();
        self.decide_write(&partition, table, key, mutation, condition, origin, now_ms)
    }

    /// The partition a mutation of `table` works on: created for a put;
    /// `None` when a mutation that needs a record finds no partition.
    fn partition_for(
        &self,
        table: &TableName,
        mutation: &Mutation,
    ) -> Option<Arc<parking_lot::RwLock<Partition>>> {
        if mutation.needs_record() {
            self.partition(table)
        } else {
            Some(self.partition_or_create(table))
        }
    }

    /// Decide `mutation` of `key` against `partition` (locked by the
    /// caller): the condition, the record a delete or TTL change needs,
    /// room in the buffer, a fresh version. A TTL change's command carries
    /// the version it rewrites as its condition, so that applying it never
    /// puts the value back over a newer write. A write of a table with a
    /// change handler covering the key, unless made by a change handler
    /// (`origin`), gets the outbox sequence number of its change event.
    #[allow(clippy::too_many_arguments)]
    fn decide_write(
        &self,
        partition: &Partition,
        table: &TableName,
        key: &Arc<str>,
        mutation: Mutation,
        condition: &Condition,
        origin: Origin,
        now_ms: u64,
    ) -> Result<Proposal, BacklogFull> {
        // An unconditional put decides nothing from the key's current
        // record, so it skips that descent of the index (the merge on apply
        // descends once anyway).
        let current = if *condition == Condition::Always && matches!(mutation, Mutation::Put { .. })
        {
            None
        } else {
            partition.get(key).filter(|e| e.is_visible_at(now_ms))
        };
        let current_version = current.map(|entry| entry.version());
        if !holds(condition, current_version.as_ref()) {
            return Ok(Proposal::Done(WriteOutcome::ConditionFailed {
                current: current_version,
            }));
        }
        if mutation.needs_record() && current.is_none() {
            return Ok(Proposal::Done(WriteOutcome::NotFound));
        }
        let weight = match &mutation {
            Mutation::Put { value, .. } => value.len() + key.len() + 64,
            Mutation::Delete => key.len() + 64,
            Mutation::Retime { .. } => current.map_or(0, |e| e.value().len()) + key.len() + 64,
        };
        self.persistence().check_room(weight)?;
        let (version, change_seq) = self.version_for(table, key, origin);
        let (record, condition) = match mutation {
            Mutation::Put {
                value,
                expires_at_ms,
            } => (
                Record::live(version, value, expires_at_ms),
                condition.clone(),
            ),
            Mutation::Delete => (Record::tombstone(version), condition.clone()),
            Mutation::Retime { expires_at_ms } => {
                let current = current.expect("checked above").record();
                (
                    Record::live(version, current.value, expires_at_ms),
                    Condition::Version(current.version),
                )
            }
        };
        Ok(Proposal::Write(WriteCommand {
            table: table.clone(),
            key: key.clone(),
            record,
            at_ms: now_ms,
            condition,
            change_seq,
        }))
    }

    /// Apply `command`. Deterministic: reads only the command and this
    /// fragment's records (see the module docs); never refuses.
    pub(crate) fn apply_command(&self, command: &Command) -> Applied {
        match command {
            Command::Write(write) => self.apply_write(write),
            Command::Expire(expire) => self.apply_expire(expire),
            Command::Purge(purge) => self.apply_purge(purge),
            Command::Settle(settle) => Applied::Settled {
                writes: self.apply_settle(settle),
            },
        }
    }

    fn apply_write(&self, write: &WriteCommand) -> Applied {
        let partition = if write.record.kind == RecordKind::Live {
            self.partition_or_create(&write.table)
        } else {
            match self.partition(&write.table) {
                Some(partition) => partition,
                // Nothing visible: a condition on a version fails.
                None if matches!(write.condition, Condition::Version(_)) => {
                    return Applied::ConditionFailed;
                }
                None => return Applied::Skipped,
            }
        };
        let mut partition = partition.write();
        if write.condition != Condition::Always {
            let current = partition
                .get(&write.key)
                .filter(|e| e.is_visible_at(write.at_ms))
                .map(|e| e.version());
            if !holds(&write.condition, current.as_ref()) {
                return Applied::ConditionFailed;
            }
        }
        if deletes_nothing(&partition, &write.key, &write.record, write.at_ms) {
            return Applied::Skipped;
        }
        // A version from the proposer: later local ticks must exceed it.
        self.clock()
            .observe(write.record.version.hlc_ms, write.record.version.counter);
        self.apply_write_locked(&mut partition, write)
    }

    /// Merge `write` into `partition` (the locked partition of its table)
    /// and enqueue it for the store if it wins, with its change event when
    /// it has a change sequence number: the state change of a
    /// [`WriteCommand`] once its delete check passed, shared with the
    /// proposer's path, which holds the lock from the check and versioning
    /// to here.
    fn apply_write_locked(&self, partition: &mut Partition, write: &WriteCommand) -> Applied {
        let (table, key, record) = (&write.table, &write.key, &write.record);
        let old = write.change_seq.and_then(|_| {
            partition
                .get(key)
                .filter(|e| e.is_visible_at(write.at_ms))
                .map(|e| e.version())
        });
        // Under the lock, so the buffer sees winners in the index's order.
        if partition.apply(key, record) == ApplyOutcome::Superseded {
            return Applied::Skipped;
        }
        let (seq, full) = match write.change_seq {
            Some(change_seq) => {
                let outbox = self.persistence().outbox();
                outbox.observe_seq(change_seq);
                let event =
                    PendingEvent::change(self.id(), change_seq, table, key, old.as_ref(), record);
                self.persistence()
                    .enqueue_with_event(table, key, record, event)
            }
            None => self.persistence().enqueue(table, key, record),
        };
        if let Some(deadline) = record.deadline() {
            self.expiry_wake().offer(deadline);
        }
        if full {
            self.persistence().flush_in_background();
        }
        Applied::Written { seq }
    }

    fn apply_expire(&self, expire: &ExpireCommand) -> Applied {
        let (mut converted, mut bytes) = (0, 0);
        for run in expire.due.chunk_by(|a, b| a.table == b.table) {
            let table = &run[0].table;
            let Some(partition) = self.partition(table) else {
                continue;
            };
            let mut partition = partition.write();
            for due in run {
                let Some(current) = partition.get(&due.key) else {
                    continue;
                };
                if current.kind() != RecordKind::Live
                    || current.version() != due.version
                    || current.deadline().is_none_or(|at| at > expire.at_ms)
                {
                    continue;
                }
                let record = current.record();
                let tombstone = record.to_expiry_tombstone();
                match due.outbox_seq {
                    Some(seq) => {
                        self.persistence().outbox().observe_seq(seq);
                        let event = PendingEvent::new(
                            self.id(),
                            seq,
                            table,
                            &due.key,
                            &record,
                            expire.at_ms,
                        );
                        self.persistence()
                            .enqueue_with_event(table, &due.key, &tombstone, event);
                    }
                    None => {
                        self.persistence().enqueue(table, &due.key, &tombstone);
                    }
                }
                partition.apply(&due.key, &tombstone);
                converted += 1;
                bytes += record.value.len();
            }
        }
        Applied::Expired { converted, bytes }
    }

    fn apply_purge(&self, purge: &PurgeCommand) -> Applied {
        let mut purged = 0;
        // At most PURGE_LOCK_RECORDS removals per hold of a partition lock,
        // so readers and writers of a table with many old tombstones wait
        // little.
        for run in purge
            .tombstones
            .chunk_by(|a, b| a.table == b.table)
            .flat_map(|run| run.chunks(PURGE_LOCK_RECORDS))
        {
            let table = &run[0].table;
            let Some(partition) = self.partition(table) else {
                continue;
            };
            let mut partition = partition.write();
            for item in run {
                if partition
                    .remove_tombstone(&item.key, &item.version, purge.cutoff_ms)
                    .is_some()
                {
                    self.persistence().enqueue_removal(table, &item.key);
                    purged += 1;
                }
            }
        }
        Applied::Purged { purged }
    }
}

/// What a mutation that needs a record gets from a table with no
/// partition: nothing is visible, so a condition on a version fails and
/// anything else finds nothing.
fn absent_outcome(mutation: &Mutation, condition: &Condition) -> WriteOutcome {
    debug_assert!(mutation.needs_record());
    match condition {
        Condition::Version(_) => WriteOutcome::ConditionFailed { current: None },
        Condition::Always | Condition::Absent => WriteOutcome::NotFound,
    }
}

/// Whether `condition` holds for a key whose visible record has version
/// `current` (`None`: nothing visible).
fn holds(condition: &Condition, current: Option<&Version>) -> bool {
    match condition {
        Condition::Always => true,
        Condition::Version(version) => current == Some(version),
        Condition::Absent => current.is_none(),
    }
}

/// Whether `key` holds a record visible at `at_ms`.
fn is_visible(partition: &Partition, key: &str, at_ms: u64) -> bool {
    partition.get(key).is_some_and(|e| e.is_visible_at(at_ms))
}

/// Whether `record` is a delete that finds nothing visible at `at_ms`: the
/// one case in which a write is not offered to the merge.
fn deletes_nothing(partition: &Partition, key: &str, record: &Record, at_ms: u64) -> bool {
    record.kind == RecordKind::Tombstone && !is_visible(partition, key, at_ms)
}

impl Command {
    /// The `ebb.fragment.v1.Command` bytes of this command.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let command = match self {
            Command::Write(write) => pb::command::Command::Write(pb::Write {
                table: write.table.as_str().to_string(),
                key: write.key.to_string(),
                record: write.record.encode().into(),
                at_ms: write.at_ms,
                condition: condition_message(&write.condition),
                change_seq: write.change_seq,
            }),
            Command::Expire(expire) => pb::command::Command::Expire(pb::Expire {
                at_ms: expire.at_ms,
                due: expire
                    .due
                    .iter()
                    .map(|due| pb::Due {
                        table: due.table.as_str().to_string(),
                        key: due.key.to_string(),
                        version: Some(version_message(&due.version)),
                        outbox_seq: due.outbox_seq,
                    })
                    .collect(),
            }),
            Command::Purge(purge) => pb::command::Command::Purge(pb::Purge {
                cutoff_ms: purge.cutoff_ms,
                tombstones: purge
                    .tombstones
                    .iter()
                    .map(|item| pb::Purgeable {
                        table: item.table.as_str().to_string(),
                        key: item.key.to_string(),
                        version: Some(version_message(&item.version)),
                    })
                    .collect(),
            }),
            Command::Settle(settle) => pb::command::Command::Settle(settle.to_pb()),
        };
        pb::Command {
            command: Some(command),
        }
        .encode_to_vec()
    }

    /// Decode [`Self::encode`]'s bytes. Anything else (garbage, a missing
    /// part, a table name or key that is not valid) is a [`CorruptCommand`].
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, CorruptCommand> {
        let message = pb::Command::decode(bytes).map_err(|e| CorruptCommand(e.to_string()))?;
        match message.command {
            Some(pb::command::Command::Write(write)) => Ok(Command::Write(WriteCommand {
                table: table(&write.table)?,
                key: key(write.key)?,
                record: Record::decode(&write.record, own_writer)
                    .map_err(|e| CorruptCommand(e.to_string()))?,
                at_ms: write.at_ms,
                condition: condition_of(write.condition),
                change_seq: write.change_seq,
            })),
            Some(pb::command::Command::Expire(expire)) => Ok(Command::Expire(ExpireCommand {
                at_ms: expire.at_ms,
                due: expire
                    .due
                    .into_iter()
                    .map(|due| {
                        Ok(Due {
                            table: table(&due.table)?,
                            key: key(due.key)?,
                            version: version(due.version)?,
                            outbox_seq: due.outbox_seq,
                        })
                    })
                    .collect::<Result<_, CorruptCommand>>()?,
            })),
            Some(pb::command::Command::Purge(purge)) => Ok(Command::Purge(PurgeCommand {
                cutoff_ms: purge.cutoff_ms,
                tombstones: purge
                    .tombstones
                    .into_iter()
                    .map(|item| {
                        Ok(Purgeable {
                            table: table(&item.table)?,
                            key: key(item.key)?,
                            version: version(item.version)?,
                        })
                    })
                    .collect::<Result<_, CorruptCommand>>()?,
            })),
            Some(pb::command::Command::Settle(settle)) => Ok(Command::Settle(
                SettleCommand::from_pb(settle).map_err(CorruptCommand)?,
            )),
            None => Err(CorruptCommand("the command is empty".into())),
        }
    }
}

/// The `ebb.fragment.v1.Version` of `version` (commands and forwarded
/// answers share it).
pub(crate) fn version_message(version: &Version) -> pb::Version {
    pb::Version {
        hlc_ms: version.hlc_ms,
        counter: version.counter,
        writer: version.writer.to_string(),
    }
}

/// The `ebb.fragment.v1.Condition` of `condition` (`None` for `Always`;
/// commands and forwarded writes share it).
pub(crate) fn condition_message(condition: &Condition) -> Option<pb::Condition> {
    let condition = match condition {
        Condition::Always => return None,
        Condition::Version(version) => pb::condition::Condition::Version(version_message(version)),
        Condition::Absent => pb::condition::Condition::Absent(true),
    };
    Some(pb::Condition {
        condition: Some(condition),
    })
}

/// The condition an `ebb.fragment.v1.Condition` holds (absent: `Always`).
pub(crate) fn condition_of(message: Option<pb::Condition>) -> Condition {
    match message.and_then(|m| m.condition) {
        None | Some(pb::condition::Condition::Absent(false)) => Condition::Always,
        Some(pb::condition::Condition::Version(version)) => Condition::Version(version_of(version)),
        Some(pb::condition::Condition::Absent(true)) => Condition::Absent,
    }
}

fn version(message: Option<pb::Version>) -> Result<Version, CorruptCommand> {
    let message = message.ok_or_else(|| CorruptCommand("an item has no version".into()))?;
    Ok(version_of(message))
}

/// The version an `ebb.fragment.v1.Version` holds.
pub(crate) fn version_of(message: pb::Version) -> Version {
    Version {
        hlc_ms: message.hlc_ms,
        counter: message.counter,
        writer: Arc::from(message.writer),
    }
}

fn key(key: String) -> Result<Arc<str>, CorruptCommand> {
    validate_key(&key).map_err(|e| CorruptCommand(e.to_string()))?;
    Ok(Arc::from(key))
}

fn table(name: &str) -> Result<TableName, CorruptCommand> {
    TableName::system(name).map_err(|e| CorruptCommand(e.to_string()))
}

#[cfg(test)]
mod tests;
