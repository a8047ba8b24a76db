//! The storage codec of expiry events: their id, their keys in the
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

use super::{FragmentId, StoreError};
use crate::names::TableName;
use crate::record::{Record, Version};

/// Length of an event id (SHA-256).
pub(crate) const ID_LEN: usize = 32;

/// An event in the outbox, as the dispatcher holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingEvent {
    /// Its outbox key.
    pub key: Vec<u8>,
    /// Table of the expired record.
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

    /// The event (always present: decoding refuses entries without one).
    pub fn event(&self) -> &abi::ExpiryEvent {
        self.stored
            .event
            .as_ref()
            .expect("a pending event always carries its event")
    }

    /// Mutable access to the event.
    pub(crate) fn event_mut(&mut self) -> &mut abi::ExpiryEvent {
        self.stored
            .event
            .as_mut()
            .expect("a pending event always carries its event")
    }

    /// Bytes held in memory for this event (for limits and accounting).
    pub(crate) fn weight(&self) -> usize {
        let event = self.event();
        64 + self.key.len() + event.key.len() + event.value.len() + self.stored.last_error.len()
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
        let event = stored
            .event
            .as_ref()
            .ok_or_else(|| corrupt("expiry entry without an event".into()))?;
        let table = TableName::new(&event.table).map_err(|e| corrupt(e.to_string()))?;
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

    use bytes::Bytes;

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
        assert_eq!(a.event().id, b.event().id, "same expiry, same id");
        let c = PendingEvent::new(0, 1, &table, "k", &record(1), 2_005);
        assert_ne!(a.event().id, c.event().id, "another version");
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
        assert_eq!(decoded.event().expires_at_ms, 2_000);
        assert_eq!(outbox_seq(&event.key), Some(7));
        assert!(outbox_key(2, 7) < outbox_key(2, 8));
        assert!(outbox_key(2, u64::MAX) < outbox_key(3, 0));
        assert!(PendingEvent::decode(b"x", b"\xff\xff").is_err());
    }
}
