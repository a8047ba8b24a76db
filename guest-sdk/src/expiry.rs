//! Expiry handlers: a batch of expired records in, follow-up writes and retries out.

use std::fmt::Display;

use ebb_proto::plugin::v1 as proto;

/// One expired record handed to an expiry handler (`ebb.plugin.v1.ExpiryEvent`).
///
/// Delivery is at-least-once: the same `id` can arrive again (after a crash or
/// when listed in [`ExpiryOutcome::failed`]), with a higher `attempt`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpiryEvent {
    /// Stable identity of the event across retries.
    pub id: Vec<u8>,
    /// Table of the expired record.
    pub table: String,
    /// Key of the expired record.
    pub key: String,
    /// The record's last value.
    pub value: Vec<u8>,
    /// Version of the record in its text form (`hlc_ms.counter@writer`),
    /// as [`Condition::Version`] takes it. Empty from hosts older than the
    /// field.
    pub version: String,
    /// Version of the record (milliseconds part).
    pub version_ms: u64,
    /// Version of the record (counter part).
    pub version_counter: u64,
    /// When the record expired, in Unix milliseconds.
    pub expires_at_ms: u64,
    /// When the host observed the expiry, in Unix milliseconds.
    pub observed_at_ms: u64,
    /// Delivery attempt, starting at 1.
    pub attempt: u32,
}

impl From<proto::ExpiryEvent> for ExpiryEvent {
    fn from(event: proto::ExpiryEvent) -> Self {
        ExpiryEvent {
            id: event.id.to_vec(),
            table: event.table,
            key: event.key,
            value: event.value.to_vec(),
            version: event.version,
            version_ms: event.version_ms,
            version_counter: event.version_counter,
            expires_at_ms: event.expires_at_ms,
            observed_at_ms: event.observed_at_ms,
            attempt: event.attempt,
        }
    }
}

impl From<ExpiryEvent> for proto::ExpiryEvent {
    fn from(event: ExpiryEvent) -> Self {
        proto::ExpiryEvent {
            id: event.id.into(),
            table: event.table,
            key: event.key,
            value: event.value.into(),
            version: event.version,
            version_ms: event.version_ms,
            version_counter: event.version_counter,
            expires_at_ms: event.expires_at_ms,
            observed_at_ms: event.observed_at_ms,
            attempt: event.attempt,
        }
    }
}

/// When an action applies, judged by the host together with the write.
/// An action whose condition does not hold is skipped (counted by the
/// host), not a failure of the handler.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Condition {
    /// Always (the default).
    #[default]
    Always,
    /// Only while the key's visible record has this version (text form,
    /// e.g. [`ExpiryEvent::version`]).
    Version(String),
    /// Only while the key has no visible record (absent, deleted or
    /// expired). Puts only.
    Absent,
}

impl Condition {
    /// The wire form: `(if_version, if_absent)`.
    fn into_fields(self) -> (String, bool) {
        match self {
            Condition::Always => (String::new(), false),
            Condition::Version(version) => (version, false),
            Condition::Absent => (String::new(), true),
        }
    }

    /// From the wire form (a version and `if_absent` together read as the
    /// version, which the host refuses).
    fn from_fields(if_version: String, if_absent: bool) -> Self {
        match (if_version.is_empty(), if_absent) {
            (false, _) => Condition::Version(if_version),
            (true, true) => Condition::Absent,
            (true, false) => Condition::Always,
        }
    }
}

/// A write the host applies on the handler's behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Writes `value` under `table`/`key`; `ttl_ms = 0` means no TTL.
    Put {
        /// Target table.
        table: String,
        /// Target key.
        key: String,
        /// Value to write.
        value: Vec<u8>,
        /// Time to live in milliseconds; 0 = none.
        ttl_ms: u64,
        /// When it applies.
        condition: Condition,
    },
    /// Deletes `table`/`key`.
    Delete {
        /// Target table.
        table: String,
        /// Target key.
        key: String,
        /// When it applies ([`Condition::Absent`] is refused by the host:
        /// there is nothing to delete).
        condition: Condition,
    },
}

impl Action {
    /// The wire form.
    pub(crate) fn into_proto(self) -> proto::Action {
        proto::Action {
            action: Some(match self {
                Action::Put {
                    table,
                    key,
                    value,
                    ttl_ms,
                    condition,
                } => {
                    let (if_version, if_absent) = condition.into_fields();
                    proto::action::Action::Put(proto::Put {
                        table,
                        key,
                        value: value.into(),
                        ttl_ms,
                        if_version,
                        if_absent,
                    })
                }
                Action::Delete {
                    table,
                    key,
                    condition,
                } => {
                    let (if_version, _) = condition.into_fields();
                    proto::action::Action::Delete(proto::Delete {
                        table,
                        key,
                        if_version,
                    })
                }
            }),
        }
    }

    /// From the wire form; `None` for an empty action.
    pub fn from_proto(action: proto::Action) -> Option<Self> {
        Some(match action.action? {
            proto::action::Action::Put(put) => Action::Put {
                table: put.table,
                key: put.key,
                value: put.value.to_vec(),
                ttl_ms: put.ttl_ms,
                condition: Condition::from_fields(put.if_version, put.if_absent),
            },
            proto::action::Action::Delete(delete) => Action::Delete {
                table: delete.table,
                key: delete.key,
                condition: Condition::from_fields(delete.if_version, false),
            },
        })
    }
}

/// What a handler did with a batch. Actions are applied even when some events
/// are listed in `failed`; those events are delivered again later.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpiryOutcome {
    /// Writes to apply.
    pub actions: Vec<Action>,
    /// Indexes (into the batch) of events to retry.
    pub failed: Vec<u32>,
}

impl ExpiryOutcome {
    /// Adds a put; `ttl_ms = 0` means no TTL.
    pub fn put(&mut self, table: &str, key: &str, value: Vec<u8>, ttl_ms: u64) {
        self.put_when(table, key, value, ttl_ms, Condition::Always);
    }

    /// Adds a put that applies only while the key has no visible record
    /// (nobody wrote it since it expired or was deleted).
    pub fn put_if_absent(&mut self, table: &str, key: &str, value: Vec<u8>, ttl_ms: u64) {
        self.put_when(table, key, value, ttl_ms, Condition::Absent);
    }

    /// Adds a put that applies only while the key's visible record has
    /// `version` (text form).
    pub fn put_if_version(
        &mut self,
        table: &str,
        key: &str,
        value: Vec<u8>,
        ttl_ms: u64,
        version: &str,
    ) {
        let condition = Condition::Version(version.to_owned());
        self.put_when(table, key, value, ttl_ms, condition);
    }

    /// Adds a put under `condition`.
    pub fn put_when(
        &mut self,
        table: &str,
        key: &str,
        value: Vec<u8>,
        ttl_ms: u64,
        condition: Condition,
    ) {
        self.actions.push(Action::Put {
            table: table.to_owned(),
            key: key.to_owned(),
            value,
            ttl_ms,
            condition,
        });
    }

    /// Adds a delete.
    pub fn delete(&mut self, table: &str, key: &str) {
        self.delete_when(table, key, Condition::Always);
    }

    /// Adds a delete that applies only while the key's visible record has
    /// `version` (text form).
    pub fn delete_if_version(&mut self, table: &str, key: &str, version: &str) {
        self.delete_when(table, key, Condition::Version(version.to_owned()));
    }

    fn delete_when(&mut self, table: &str, key: &str, condition: Condition) {
        self.actions.push(Action::Delete {
            table: table.to_owned(),
            key: key.to_owned(),
            condition,
        });
    }

    /// Marks event `index` of the batch for retry.
    pub fn retry(&mut self, index: usize) {
        self.failed.push(u32::try_from(index).unwrap_or(u32::MAX));
    }

    /// Converts to the wire type, checking that every `failed` index names
    /// an event of a batch of `batch_len` events.
    pub(crate) fn into_proto(self, batch_len: usize) -> Result<proto::ExpiryResult, String> {
        if let Some(bad) = self.failed.iter().find(|&&i| i as usize >= batch_len) {
            return Err(format!(
                "failed index {bad} is out of range for a batch of {batch_len} events"
            ));
        }
        let actions = self.actions.into_iter().map(Action::into_proto).collect();
        Ok(proto::ExpiryResult {
            actions,
            failed: self.failed,
        })
    }
}

/// What an expiry handler may return: an [`ExpiryOutcome`], or a `Result` of
/// one whose `Err` fails the whole batch (every event is retried).
pub trait ExpiryOutput {
    /// The outcome, or the error message of the call.
    fn into_outcome(self) -> Result<ExpiryOutcome, String>;
}

impl ExpiryOutput for ExpiryOutcome {
    fn into_outcome(self) -> Result<ExpiryOutcome, String> {
        Ok(self)
    }
}

impl<E: Display> ExpiryOutput for Result<ExpiryOutcome, E> {
    fn into_outcome(self) -> Result<ExpiryOutcome, String> {
        self.map_err(|e| e.to_string())
    }
}
