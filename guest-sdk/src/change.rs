//! Change handlers: a batch of a table's winning writes and deletes in,
//! follow-up writes and retries out (the same outcome as an expiry handler).

use ebb_proto::plugin::v1 as proto;

use crate::expiry::ExpiryOutcome;

/// What a change handler returns: the same actions and retries as an
/// expiry handler's [`ExpiryOutcome`].
pub type ChangeOutcome = ExpiryOutcome;

/// One winning write or delete of a table bound to a change handler
/// (`ebb.plugin.v1.ChangeEvent`).
///
/// Delivery is at-least-once: the same event (same `id`) can arrive again
/// (after a crash or when listed in [`ExpiryOutcome::failed`]), with a
/// higher `attempt`, so a handler must tolerate seeing it twice. Events of
/// one key arrive in the order of their writes. Writes made by change
/// handlers themselves emit no change events, so a handler writing to its
/// own table does not call itself again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeEvent {
    /// Stable identity of the event across redeliveries.
    pub id: Vec<u8>,
    /// Table written.
    pub table: String,
    /// Key written.
    pub key: String,
    /// Version of the key's visible record before the write, in text form
    /// (`hlc_ms.counter@writer`); empty when the key had no visible record
    /// (absent, deleted or expired).
    pub old_version: String,
    /// Version of the write in text form, as [`crate::Condition::Version`]
    /// takes it (for example to act only while the write is still the
    /// key's visible record).
    pub new_version: String,
    /// The write is a delete: `value` is empty and there is no deadline.
    pub deleted: bool,
    /// The value written.
    pub value: Vec<u8>,
    /// The written record's deadline in Unix milliseconds; 0 = none.
    pub expires_at_ms: u64,
    /// When the write was made, in Unix milliseconds (the version's clock).
    pub written_at_ms: u64,
    /// Delivery attempt, starting at 1.
    pub attempt: u32,
}

impl From<proto::ChangeEvent> for ChangeEvent {
    fn from(event: proto::ChangeEvent) -> Self {
        ChangeEvent {
            id: event.id.to_vec(),
            table: event.table,
            key: event.key,
            old_version: event.old_version,
            new_version: event.new_version,
            deleted: event.deleted,
            value: event.value.to_vec(),
            expires_at_ms: event.expires_at_ms,
            written_at_ms: event.written_at_ms,
            attempt: event.attempt,
        }
    }
}

impl From<ChangeEvent> for proto::ChangeEvent {
    fn from(event: ChangeEvent) -> Self {
        proto::ChangeEvent {
            id: event.id.into(),
            table: event.table,
            key: event.key,
            old_version: event.old_version,
            new_version: event.new_version,
            deleted: event.deleted,
            value: event.value.into(),
            expires_at_ms: event.expires_at_ms,
            written_at_ms: event.written_at_ms,
            attempt: event.attempt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_survives_the_round_trip_through_the_wire_type() {
        let event = ChangeEvent {
            id: vec![7; 32],
            table: "t".into(),
            key: "k".into(),
            old_version: "1.0@a".into(),
            new_version: "2.0@a".into(),
            deleted: false,
            value: b"v".to_vec(),
            expires_at_ms: 3,
            written_at_ms: 2,
            attempt: 4,
        };
        let wire: proto::ChangeEvent = event.clone().into();
        assert_eq!(wire.new_version, "2.0@a");
        assert_eq!(ChangeEvent::from(wire), event);
    }
}
