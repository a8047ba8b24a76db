//! The record model: versions, last-writer-wins order, tombstones and TTLs.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use ebb_proto::Message;
use ebb_proto::record::v1 as pb;

/// Latest deadline a record may have: the last millisecond of year 9999.
pub const MAX_EXPIRES_AT_MS: u64 = 253_402_300_799_999;

/// A record's version: `(hlc_ms, counter, writer)` from the node's hybrid
/// logical clock. Versions from one clock are strictly increasing.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    /// Physical part of the hybrid logical clock, in Unix milliseconds.
    pub hlc_ms: u64,
    /// Logical part: orders versions issued within one millisecond.
    pub counter: u64,
    /// The node that issued the version; breaks ties between writers.
    pub writer: Arc<str>,
}

impl fmt::Display for Version {
    /// `hlc_ms.counter@writer`, the form used in headers and logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}@{}", self.hlc_ms, self.counter, self.writer)
    }
}

/// What a record stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordKind {
    /// A value, visible until its deadline (if any).
    Live,
    /// A delete.
    Tombstone,
    /// A value whose TTL passed and that the cleaner converted. It keeps the
    /// version of the value it replaced, so the conversion never outranks a
    /// newer write.
    ExpiryTombstone,
}

/// One version of one key. Values are reference-counted so that snapshots and
/// readers share them without copying.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The version that orders this record against others for the same key.
    pub version: Version,
    /// Live value, delete or converted expiry.
    pub kind: RecordKind,
    /// The value bytes; empty for tombstones.
    pub value: Bytes,
    /// Deadline in Unix milliseconds; `None` means no TTL.
    pub expires_at_ms: Option<u64>,
}

/// A persisted record could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The bytes are not a `Record` message.
    #[error("record envelope is not valid protobuf: {0}")]
    Protobuf(#[from] prost::DecodeError),
    /// The message decoded but its kind is unknown to this build.
    #[error("record envelope has unknown kind {0}")]
    UnknownKind(i32),
}

impl Record {
    /// A live value with an optional deadline.
    pub fn live(version: Version, value: Bytes, expires_at_ms: Option<u64>) -> Self {
        Self {
            version,
            kind: RecordKind::Live,
            value,
            expires_at_ms,
        }
    }

    /// A delete marker.
    pub fn tombstone(version: Version) -> Self {
        Self {
            version,
            kind: RecordKind::Tombstone,
            value: Bytes::new(),
            expires_at_ms: None,
        }
    }

    /// Whether this record is a tombstone of either kind.
    pub fn is_tombstone(&self) -> bool {
        self.kind != RecordKind::Live
    }

    /// A live record whose deadline is at or before `now_ms`.
    pub fn is_expired_at(&self, now_ms: u64) -> bool {
        self.kind == RecordKind::Live && self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }

    /// Visible to reads at `now_ms`: live and not past its deadline. An
    /// expired record is invisible at once, whatever the cleaner has done.
    pub fn is_visible_at(&self, now_ms: u64) -> bool {
        self.kind == RecordKind::Live && !self.is_expired_at(now_ms)
    }

    /// The deadline of a live record with a TTL, for the expiry index.
    pub fn deadline(&self) -> Option<u64> {
        match self.kind {
            RecordKind::Live => self.expires_at_ms,
            _ => None,
        }
    }

    /// The expiry tombstone that replaces this record once its TTL passed:
    /// same version and deadline, no value.
    pub fn to_expiry_tombstone(&self) -> Record {
        Record {
            version: self.version.clone(),
            kind: RecordKind::ExpiryTombstone,
            value: Bytes::new(),
            expires_at_ms: self.expires_at_ms,
        }
    }

    /// Last-writer-wins order on `(hlc_ms, counter, writer, is_tombstone)`:
    /// the greater record wins. At an equal version a tombstone wins, so a
    /// converted expiry is never undone by the value it replaced.
    pub fn lww_cmp(&self, other: &Record) -> Ordering {
        self.lww_cmp_parts(&other.version, other.is_tombstone())
    }

    /// [`Self::lww_cmp`] against a record given by its version and whether
    /// it is a tombstone.
    pub fn lww_cmp_parts(&self, version: &Version, is_tombstone: bool) -> Ordering {
        self.version
            .cmp(version)
            .then(self.is_tombstone().cmp(&is_tombstone))
    }

    /// Whether this record replaces `current` under last-writer-wins.
    pub fn wins_over(&self, current: &Record) -> bool {
        self.lww_cmp(current) == Ordering::Greater
    }

    /// [`Self::wins_over`] a record given by its version and whether it is a
    /// tombstone.
    pub fn wins_over_parts(&self, version: &Version, is_tombstone: bool) -> bool {
        self.lww_cmp_parts(version, is_tombstone) == Ordering::Greater
    }

    /// Approximate heap bytes, for budgets and flush sizing.
    pub fn weight(&self) -> usize {
        64 + self.value.len() + self.version.writer.len()
    }

    /// Encode as the persisted envelope.
    pub fn encode(&self) -> Vec<u8> {
        let kind = match self.kind {
            RecordKind::Live => pb::RecordKind::Live,
            RecordKind::Tombstone => pb::RecordKind::Tombstone,
            RecordKind::ExpiryTombstone => pb::RecordKind::ExpiryTombstone,
        };
        pb::Record {
            hlc_ms: self.version.hlc_ms,
            counter: self.version.counter,
            writer: self.version.writer.to_string(),
            kind: kind as i32,
            value: self.value.clone(),
            expires_at_ms: self.expires_at_ms,
        }
        .encode_to_vec()
    }

    /// Decode a persisted envelope. Writers are interned through `intern` so
    /// that a million records from one node share one string.
    pub fn decode(
        bytes: &[u8],
        intern: impl FnOnce(String) -> Arc<str>,
    ) -> Result<Self, DecodeError> {
        let message = pb::Record::decode(bytes)?;
        let kind = match pb::RecordKind::try_from(message.kind) {
            Ok(pb::RecordKind::Live) => RecordKind::Live,
            Ok(pb::RecordKind::Tombstone) => RecordKind::Tombstone,
            Ok(pb::RecordKind::ExpiryTombstone) => RecordKind::ExpiryTombstone,
            _ => return Err(DecodeError::UnknownKind(message.kind)),
        };
        Ok(Record {
            version: Version {
                hlc_ms: message.hlc_ms,
                counter: message.counter,
                writer: intern(message.writer),
            },
            kind,
            value: message.value,
            expires_at_ms: message.expires_at_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(hlc_ms: u64, counter: u64, writer: &str) -> Version {
        Version {
            hlc_ms,
            counter,
            writer: Arc::from(writer),
        }
    }

    fn live(hlc_ms: u64, counter: u64, writer: &str) -> Record {
        Record::live(
            version(hlc_ms, counter, writer),
            Bytes::from_static(b"v"),
            None,
        )
    }

    #[test]
    fn lww_orders_by_time_then_counter_then_writer_then_tombstone() {
        assert!(live(2, 0, "a").wins_over(&live(1, 9, "z")));
        assert!(live(1, 2, "a").wins_over(&live(1, 1, "z")));
        assert!(live(1, 1, "b").wins_over(&live(1, 1, "a")));
        assert!(
            !live(1, 1, "a").wins_over(&live(1, 1, "a")),
            "equal records do not replace each other"
        );
        let tombstone = Record::tombstone(version(1, 1, "a"));
        assert!(tombstone.wins_over(&live(1, 1, "a")));
        assert!(!live(1, 1, "a").wins_over(&tombstone));
        assert!(
            live(1, 2, "a").wins_over(&tombstone),
            "a newer put revives a deleted key"
        );
    }

    #[test]
    fn ttl_visibility_is_exact_at_the_deadline() {
        let record = Record::live(version(1, 0, "a"), Bytes::from_static(b"v"), Some(100));
        assert!(record.is_visible_at(99));
        assert!(
            !record.is_visible_at(100),
            "a record is invisible at its deadline"
        );
        assert!(record.is_expired_at(100));
        assert!(!Record::tombstone(version(1, 0, "a")).is_visible_at(0));
    }

    #[test]
    fn expiry_tombstone_keeps_the_original_version_and_outranks_the_value() {
        let record = Record::live(version(7, 3, "n1"), Bytes::from_static(b"v"), Some(100));
        let converted = record.to_expiry_tombstone();
        assert_eq!(converted.version, record.version);
        assert_eq!(converted.kind, RecordKind::ExpiryTombstone);
        assert_eq!(converted.expires_at_ms, Some(100));
        assert!(converted.value.is_empty());
        assert!(
            converted.wins_over(&record),
            "replaying the old value cannot undo the expiry"
        );
        assert!(
            live(7, 4, "n1").wins_over(&converted),
            "a newer write replaces the expiry"
        );
    }

    #[test]
    fn envelope_round_trips_every_kind() {
        let records = [
            Record::live(
                version(1, 2, "w"),
                Bytes::from_static(b"\x00\xffbytes"),
                Some(5),
            ),
            Record::live(version(1, 2, "w"), Bytes::new(), None),
            Record::tombstone(version(3, 0, "w")),
            Record::live(version(9, 9, "w"), Bytes::from_static(b"x"), Some(10))
                .to_expiry_tombstone(),
        ];
        for record in records {
            let decoded = Record::decode(&record.encode(), Arc::from).unwrap();
            assert_eq!(decoded, record);
        }
        assert!(Record::decode(b"\xff\xff\xff", Arc::from).is_err());
    }
}
