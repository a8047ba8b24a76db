//! The storage codec of handler events (expiries, and the changes of
//! tables with a change handler): their id, their keys in the
//! `expiry_outbox` and `dead_letters` families, and their stored encoding.
//! It sits in the store layer so that the fragments' write path (which
//! writes an event with its tombstone) and the expiry machinery (which
//! delivers and settles it) share it without depending on each other.
//!
//! Outbox key: `fragment (u16 BE) | sequence (u64 BE)`; the node-wide
//! sequence grows with every event, so a scan of one fragment's prefix is the
//! order in which its expiries were observed. Dead-letter key:
//! `table length (u8) | table | id (32 bytes)`, so one table's dead letters
//! are contiguous and page by id.

use ebb_proto::Message;
use ebb_proto::expiry::v1::StoredEvent;
use ebb_proto::plugin::v1 as abi;
use sha2::{Digest, Sha256};

use bytes::Bytes;

use super::{FragmentId, StoreError};
use crate::names::TableName;
use crate::record::{Record, RecordKind, Version};

/// Length of an event id (SHA-256).
pub(crate) const ID_LEN: usize = 32;

/// An event in the outbox, as the dispatcher holds it: an expiry event or
/// a change event (exactly one of `stored.event` and `stored.change`).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingEvent {
    /// Its outbox key.
    pub key: Vec<u8>,
    /// Its handler source: the table of an expired record, or the change
    /// stream ([`TableName::changes`]) of a changed one.
    pub table: TableName,
    /// The event, attempt count and last error.
    pub stored: StoredEvent,
}

/// The id of the expiry of `key` in `table` at `version`: the same wherever
/// and however often that expiry is observed. Fields are length-prefixed so
/// no two inputs share an encoding.
pub(crate) fn event_id(table: &TableName, key: &str, version: &Version) -> [u8; ID_LEN] {
    let mut hash = Sha256::new();
    hash.update((table.as_str().len() as u32).to_be_bytes());
    hash.update(table.as_str().as_bytes());
    hash.update((key.len() as u32).to_be_bytes());
    hash.update(key.as_bytes());
    hash.update(version.hlc_ms.to_be_bytes());
    hash.update(version.counter.to_be_bytes());
    hash.update((version.writer.len() as u32).to_be_bytes());
    hash.update(version.writer.as_bytes());
    hash.finalize().into()
}

/// The outbox key of sequence `seq` in `fragment`.
pub(crate) fn outbox_key(fragment: FragmentId, seq: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(10);
    key.extend_from_slice(&outbox_prefix(fragment));
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The prefix of every outbox key of `fragment`.
pub(crate) fn outbox_prefix(fragment: FragmentId) -> [u8; 2] {
    (fragment as u16).to_be_bytes()
}

/// The sequence number of an outbox key.
pub(crate) fn outbox_seq(key: &[u8]) -> Option<u64> {
    let raw: [u8; 8] = key.get(2..10)?.try_into().ok()?;
    Some(u64::from_be_bytes(raw))
}

/// The prefix of every dead letter of `table`.
pub(crate) fn dead_letter_prefix(table: &TableName) -> Vec<u8> {
    let name = table.as_str().as_bytes();
    let mut key = Vec::with_capacity(1 + name.len() + ID_LEN);
    key.push(name.len() as u8);
    key.extend_from_slice(name);
    key
}

/// The dead-letter key of event `id` of `table`.
pub(crate) fn dead_letter_key(table: &TableName, id: &[u8]) -> Vec<u8> {
    let mut key = dead_letter_prefix(table);
    key.extend_from_slice(id);
    key
}

impl PendingEvent {
    /// The event for `record` (the live record being converted) of `key`,
    /// observed at `observed_at_ms`, stored under outbox sequence `seq`.
    pub(crate) fn new(
        fragment: FragmentId,
        seq: u64,
        table: &TableName,
        key: &str,
        record: &Record,
        observed_at_ms: u64,
    ) -> Self {
        let event = abi::ExpiryEvent {
            id: event_id(table, key, &record.version).to_vec().into(),
            table: table.as_str().to_string(),
            key: key.to_string(),
            value: record.value.clone(),
            version_ms: record.version.hlc_ms,
            version_counter: record.version.counter,
            expires_at_ms: record.expires_at_ms.unwrap_or(observed_at_ms),
            observed_at_ms,
            attempt: 0,
            version: record.version.to_string(),
        };
        PendingEvent {
            key: outbox_key(fragment, seq),
            table: table.clone(),
            stored: StoredEvent {
                event: Some(event),
                fragment,
                ..StoredEvent::default()
            },
        }
    }

    /// The event of the winning write `record` of `key` in `table`, whose
    /// visible record before it had version `old` (`None`: none), stored
    /// under outbox sequence `seq` of `fragment`. Its source is the
    /// table's change stream.
    pub(crate) fn change(
        fragment: FragmentId,
        seq: u64,
        table: &TableName,
        key: &str,
        old: Option<&Version>,
        record: &Record,
    ) -> Self {
        let source = table.changes();
        let deleted = record.kind == RecordKind::Tombstone;
        let change = abi::ChangeEvent {
            id: event_id(&source, key, &record.version).to_vec().into(),
            table: table.as_str().to_string(),
            key: key.to_string(),
            old_version: old.map(Version::to_string).unwrap_or_default(),
            new_version: record.version.to_string(),
            deleted,
            value: if deleted {
                Bytes::new()
            } else {
                record.value.clone()
            },
            expires_at_ms: record.expires_at_ms.unwrap_or(0),
            written_at_ms: record.version.hlc_ms,
            attempt: 0,
        };
        PendingEvent {
            key: outbox_key(fragment, seq),
            table: source,
            stored: StoredEvent {
                change: Some(change),
                fragment,
                ..StoredEvent::default()
            },
        }
    }

    /// The expiry event, if this is one.
    pub fn expiry_event(&self) -> Option<&abi::ExpiryEvent> {
        self.stored.event.as_ref()
    }

    /// The change event, if this is one.
    pub fn change_event(&self) -> Option<&abi::ChangeEvent> {
        self.stored.change.as_ref()
    }

    /// The event's id.
    pub fn id(&self) -> &[u8] {
        match (&self.stored.event, &self.stored.change) {
            (Some(event), _) => &event.id,
            (None, Some(change)) => &change.id,
            (None, None) => &[],
        }
    }

    /// The key the event is about.
    pub fn record_key(&self) -> &str {
        match (&self.stored.event, &self.stored.change) {
            (Some(event), _) => &event.key,
            (None, Some(change)) => &change.key,
            (None, None) => "",
        }
    }

    /// Deliveries made so far.
    pub fn attempt(&self) -> u32 {
        match (&self.stored.event, &self.stored.change) {
            (Some(event), _) => event.attempt,
            (None, Some(change)) => change.attempt,
            (None, None) => 0,
        }
    }

    /// Record the deliveries made so far.
    pub(crate) fn set_attempt(&mut self, attempt: u32) {
        if let Some(event) = &mut self.stored.event {
            event.attempt = attempt;
        }
        if let Some(change) = &mut self.stored.change {
            change.attempt = attempt;
        }
    }

    /// When the event became due (Unix ms): an expiry's deadline, a
    /// change's write. Lag is measured from it.
    pub fn due_ms(&self) -> u64 {
        match (&self.stored.event, &self.stored.change) {
            (Some(event), _) => event.expires_at_ms,
            (None, Some(change)) => change.written_at_ms,
            (None, None) => 0,
        }
    }

    /// Bytes held in memory for this event (for limits and accounting).
    pub(crate) fn weight(&self) -> usize {
        let value = match (&self.stored.event, &self.stored.change) {
            (Some(event), _) => event.value.len(),
            (None, Some(change)) => {
                change.value.len() + change.old_version.len() + change.new_version.len()
            }
            (None, None) => 0,
        };
        64 + self.key.len() + 2 * self.record_key().len() + value + self.stored.last_error.len()
    }

    /// The stored encoding.
    pub(crate) fn encode(&self) -> Vec<u8> {
        self.stored.encode_to_vec()
    }

    /// Decode an outbox or dead-letter entry stored under `key`.
    pub(crate) fn decode(key: &[u8], value: &[u8]) -> Result<Self, StoreError> {
        let corrupt = |reason: String| StoreError::Corrupt {
            key: String::from_utf8_lossy(key).into_owned(),
            reason,
        };
        let stored = StoredEvent::decode(value).map_err(|e| corrupt(e.to_string()))?;
        let table = match (&stored.event, &stored.change) {
            (Some(event), None) => {
                TableName::new(&event.table).map_err(|e| corrupt(e.to_string()))?
            }
            (None, Some(change)) => TableName::system(&change.table)
                .map_err(|e| corrupt(e.to_string()))?
                .changes(),
            _ => {
                return Err(corrupt(
                    "outbox entry without exactly one event (expiry or change)".into(),
                ));
            }
        };
        Ok(PendingEvent {
            key: key.to_vec(),
            table,
            stored,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn record(counter: u64) -> Record {
        Record::live(
            Version {
                hlc_ms: 1_000,
                counter,
                writer: Arc::from("node-a"),
            },
            Bytes::from_static(b"value"),
            Some(2_000),
        )
    }

    #[test]
    fn the_id_depends_on_table_key_and_version_only() {
        let table = TableName::new("sessions").unwrap();
        let a = PendingEvent::new(0, 1, &table, "k", &record(0), 2_005);
        let b = PendingEvent::new(3, 99, &table, "k", &record(0), 9_999);
        assert_eq!(a.id(), b.id(), "same expiry, same id");
        let c = PendingEvent::new(0, 1, &table, "k", &record(1), 2_005);
        assert_ne!(a.id(), c.id(), "another version");
        let change = PendingEvent::change(0, 1, &table, "k", None, &record(0));
        assert_ne!(a.id(), change.id(), "a change has an id of its own");
        let other = TableName::new("sessionsk").unwrap();
        assert_ne!(
            event_id(&table, "k", &record(0).version),
            event_id(&other, "", &record(0).version),
            "length prefixes keep table and key apart"
        );
    }

    #[test]
    fn entries_round_trip_and_keys_order_by_sequence() {
        let table = TableName::new("t").unwrap();
        let event = PendingEvent::new(2, 7, &table, "k", &record(0), 2_001);
        let decoded = PendingEvent::decode(&event.key, &event.encode()).unwrap();
        assert_eq!(decoded, event);
        assert_eq!(decoded.due_ms(), 2_000);
        assert_eq!(outbox_seq(&event.key), Some(7));
        assert!(outbox_key(2, 7) < outbox_key(2, 8));
        assert!(outbox_key(2, u64::MAX) < outbox_key(3, 0));
        assert!(PendingEvent::decode(b"x", b"\xff\xff").is_err());
        assert!(
            PendingEvent::decode(b"x", &StoredEvent::default().encode_to_vec()).is_err(),
            "an entry without an event"
        );
    }

    #[test]
    fn a_change_event_carries_both_versions_and_round_trips() {
        let table = TableName::new("orders").unwrap();
        let old = record(0).version;
        let put = PendingEvent::change(1, 9, &table, "k", Some(&old), &record(1));
        assert_eq!(put.table, table.changes());
        let change = put.change_event().unwrap();
        assert_eq!(
            (change.old_version.as_str(), change.new_version.as_str()),
            ("1000.0@node-a", "1000.1@node-a")
        );
        assert_eq!((change.deleted, &change.value[..]), (false, &b"value"[..]));
        assert_eq!((put.due_ms(), put.record_key()), (1_000, "k"));
        let decoded = PendingEvent::decode(&put.key, &put.encode()).unwrap();
        assert_eq!(decoded, put);
        let tombstone = Record::tombstone(record(2).version);
        let delete = PendingEvent::change(1, 10, &table, "k", Some(&old), &tombstone);
        let change = delete.change_event().unwrap();
        assert!(change.deleted && change.value.is_empty());
        let mut retried = delete.clone();
        retried.set_attempt(3);
        assert_eq!(retried.attempt(), 3);
    }
}
