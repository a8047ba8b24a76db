//! The record model: versions, last-writer-wins order, tombstones and TTLs.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
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

impl Version {
    /// `hlc_ms.counter@writer`, the form used in headers and logs (what
    /// `Display` writes), built in one allocation of its length without
    /// the formatting machinery: every write's answer carries it.
    pub fn text(&self) -> String {
        let mut text = String::with_capacity(42 + self.writer.len());
        self.text_parts(|part| text.push_str(part));
        text
    }

    /// Append [`Self::text`] to `out`, with no allocation of its own.
    pub fn push_text(&self, out: &mut Vec<u8>) {
        self.text_parts(|part| out.extend_from_slice(part.as_bytes()));
    }

    /// [`Self::text`], piece by piece.
    fn text_parts(&self, mut part: impl FnMut(&str)) {
        let (mut ms, mut counter) = (itoa::Buffer::new(), itoa::Buffer::new());
        part(ms.format(self.hlc_ms));
        part(".");
        part(counter.format(self.counter));
        part("@");
        part(&self.writer);
    }
}

impl fmt::Display for Version {
    /// [`Version::text`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

/// Text that is not a version's `hlc_ms.counter@writer` form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a version; versions read as hlc_ms.counter@writer, e.g. 1767225600000.0@n1, as the ebb-version header gives them"
)]
pub struct InvalidVersion(pub String);

impl std::str::FromStr for Version {
    type Err = InvalidVersion;

    /// Parse [`Version`]'s `Display` form. The writer is everything after
    /// the first `@` and may not be empty.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidVersion(text.to_string());
        let (clock, writer) = text.split_once('@').ok_or_else(invalid)?;
        let (hlc_ms, counter) = clock.split_once('.').ok_or_else(invalid)?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(hlc_ms) || !digits(counter) || writer.is_empty() {
            return Err(invalid());
        }
        Ok(Version {
            hlc_ms: hlc_ms.parse().map_err(|_| invalid())?,
            counter: counter.parse().map_err(|_| invalid())?,
            writer: Arc::from(writer),
        })
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
    /// The bytes break the envelope's wire format.
    #[error("record envelope is not valid protobuf: {0}")]
    Malformed(&'static str),
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
        let mut out = Vec::with_capacity(32 + self.version.writer.len() + self.value.len());
        self.encode_into(&mut out);
        out
    }

    /// Append the persisted envelope to `out`: the bytes prost writes for
    /// the `ebb.record.v1.Record` message (fields in number order, proto3
    /// defaults left out), without building the message, whose owned
    /// writer would cost an allocation per record.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        use ebb_proto::wire::{WIRE_VARINT, put_delimited, put_key, put_varint};
        let kind = match self.kind {
            RecordKind::Live => pb::RecordKind::Live,
            RecordKind::Tombstone => pb::RecordKind::Tombstone,
            RecordKind::ExpiryTombstone => pb::RecordKind::ExpiryTombstone,
        } as i32;
        if self.version.hlc_ms != 0 {
            put_key(out, 1, WIRE_VARINT);
            put_varint(out, self.version.hlc_ms);
        }
        if self.version.counter != 0 {
            put_key(out, 2, WIRE_VARINT);
            put_varint(out, self.version.counter);
        }
        if !self.version.writer.is_empty() {
            put_delimited(out, 3, self.version.writer.as_bytes());
        }
        if kind != 0 {
            put_key(out, 4, WIRE_VARINT);
            put_varint(out, kind as u64);
        }
        if !self.value.is_empty() {
            put_delimited(out, 5, &self.value);
        }
        if let Some(at) = self.expires_at_ms {
            put_key(out, 6, WIRE_VARINT);
            put_varint(out, at);
        }
    }

    /// Decode a persisted envelope. Writers are interned through `intern` so
    /// that a million records from one node share one string.
    pub fn decode(
        bytes: &[u8],
        intern: impl FnOnce(&str) -> Arc<str>,
    ) -> Result<Self, DecodeError> {
        Ok(RecordView::decode(bytes)?.to_record(intern))
    }

    /// This record's fields, borrowed.
    pub fn view(&self) -> RecordView<'_> {
        RecordView {
            hlc_ms: self.version.hlc_ms,
            counter: self.version.counter,
            writer: &self.version.writer,
            kind: self.kind,
            value: &self.value,
            expires_at_ms: self.expires_at_ms,
        }
    }
}

/// A writer name as its own allocation: the `intern` of [`Record::decode`]
/// and [`RecordView::to_record`] when nothing is shared.
pub fn own_writer(writer: &str) -> Arc<str> {
    Arc::from(writer)
}

/// A record's fields borrowed from its persisted envelope: what boot reads,
/// so that loading a record copies its bytes once, into its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Physical part of the version.
    pub hlc_ms: u64,
    /// Logical part of the version.
    pub counter: u64,
    /// The node that issued the version.
    pub writer: &'a str,
    /// Live value, delete or converted expiry.
    pub kind: RecordKind,
    /// The value bytes.
    pub value: &'a [u8],
    /// Deadline in Unix milliseconds, if any.
    pub expires_at_ms: Option<u64>,
}

/// Protobuf wire types the envelope uses.
const WIRE_VARINT: u64 = 0;
const WIRE_FIXED64: u64 = 1;
const WIRE_LEN: u64 = 2;
const WIRE_FIXED32: u64 = 5;

impl<'a> RecordView<'a> {
    /// Decode the `ebb.record.v1.Record` envelope without copying: the
    /// writer and value borrow from `bytes`. Follows protobuf's rules as
    /// prost does (absent fields take their defaults, the last occurrence of
    /// a field wins, unknown fields are skipped); a known field with the
    /// wrong wire type, a truncated field, a writer that is not UTF-8 and
    /// the deprecated group wire types are errors.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut view = RecordView {
            hlc_ms: 0,
            counter: 0,
            writer: "",
            kind: RecordKind::Live,
            value: &[],
            expires_at_ms: None,
        };
        let mut kind = 0;
        let mut rest = bytes;
        while !rest.is_empty() {
            let tag = varint(&mut rest)?;
            if tag > u64::from(u32::MAX) {
                return Err(DecodeError::Malformed("a field key is out of range"));
            }
            let (field, wire) = (tag >> 3, tag & 7);
            match (field, wire) {
                (0, _) => return Err(DecodeError::Malformed("field number 0")),
                (1, WIRE_VARINT) => view.hlc_ms = varint(&mut rest)?,
                (2, WIRE_VARINT) => view.counter = varint(&mut rest)?,
                (3, WIRE_LEN) => {
                    view.writer = std::str::from_utf8(length_delimited(&mut rest)?)
                        .map_err(|_| DecodeError::Malformed("writer is not UTF-8"))?;
                }
                // An enum is an int32 on the wire: prost truncates likewise.
                (4, WIRE_VARINT) => kind = varint(&mut rest)? as i32,
                (5, WIRE_LEN) => view.value = length_delimited(&mut rest)?,
                (6, WIRE_VARINT) => view.expires_at_ms = Some(varint(&mut rest)?),
                (1..=6, _) => {
                    return Err(DecodeError::Malformed("a field has the wrong wire type"));
                }
                (_, WIRE_VARINT) => {
                    varint(&mut rest)?;
                }
                (_, WIRE_FIXED64) => skip(&mut rest, 8)?,
                (_, WIRE_LEN) => {
                    length_delimited(&mut rest)?;
                }
                (_, WIRE_FIXED32) => skip(&mut rest, 4)?,
                _ => return Err(DecodeError::Malformed("unsupported wire type")),
            }
        }
        view.kind = match pb::RecordKind::try_from(kind) {
            Ok(pb::RecordKind::Live) => RecordKind::Live,
            Ok(pb::RecordKind::Tombstone) => RecordKind::Tombstone,
            Ok(pb::RecordKind::ExpiryTombstone) => RecordKind::ExpiryTombstone,
            _ => return Err(DecodeError::UnknownKind(kind)),
        };
        Ok(view)
    }

    /// The version, with the writer interned through `intern`.
    pub fn version(&self, intern: impl FnOnce(&str) -> Arc<str>) -> Version {
        Version {
            hlc_ms: self.hlc_ms,
            counter: self.counter,
            writer: intern(self.writer),
        }
    }

    /// An owned record (the value copied), the writer interned through
    /// `intern`.
    pub fn to_record(&self, intern: impl FnOnce(&str) -> Arc<str>) -> Record {
        Record {
            version: self.version(intern),
            kind: self.kind,
            value: Bytes::copy_from_slice(self.value),
            expires_at_ms: self.expires_at_ms,
        }
    }

    /// A live record whose deadline is at or before `now_ms`.
    pub fn is_expired_at(&self, now_ms: u64) -> bool {
        self.kind == RecordKind::Live && self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }
}

fn varint(rest: &mut &[u8]) -> Result<u64, DecodeError> {
    prost::encoding::decode_varint(rest).map_err(DecodeError::Protobuf)
}

fn skip(rest: &mut &[u8], len: usize) -> Result<(), DecodeError> {
    if rest.len() < len {
        return Err(DecodeError::Malformed("a field is truncated"));
    }
    *rest = &rest[len..];
    Ok(())
}

fn length_delimited<'a>(rest: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let len = varint(rest)?;
    let len = usize::try_from(len)
        .ok()
        .filter(|len| *len <= rest.len())
        .ok_or(DecodeError::Malformed("a field is truncated"))?;
    let (field, tail) = rest.split_at(len);
    *rest = tail;
    Ok(field)
}

#[cfg(test)]
mod tests {
    use ebb_proto::Message;

    use super::*;

    fn version(hlc_ms: u64, counter: u64, writer: &str) -> Version {
        Version {
            hlc_ms,
            counter,
            writer: Arc::from(writer),
        }
    }

    #[test]
    fn a_version_reads_back_from_its_text() {
        assert_eq!(
            version(1_767_225_600_000, 0, "n1").text(),
            "1767225600000.0@n1"
        );
        assert_eq!(
            version(u64::MAX, 10, "é\"x").to_string(),
            "18446744073709551615.10@é\"x"
        );
        for v in [version(1_767_225_600_000, 0, "n1"), version(7, 42, "a@b.c")] {
            let mut appended = b"x".to_vec();
            v.push_text(&mut appended);
            assert_eq!(appended, [b"x", v.text().as_bytes()].concat());
            assert_eq!(v.to_string().parse::<Version>(), Ok(v));
        }
        for bad in [
            "", "1.2", "1@n", "1.@n", ".2@n", "1.2@", "-1.2@n", "x.2@n", "1.2.3",
        ] {
            let error = bad.parse::<Version>().unwrap_err();
            assert!(
                error.to_string().contains("hlc_ms.counter@writer"),
                "{error}"
            );
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
            let decoded = Record::decode(&record.encode(), own_writer).unwrap();
            assert_eq!(decoded, record);
        }
        assert!(Record::decode(b"\xff\xff\xff", own_writer).is_err());
    }

    #[test]
    fn the_envelope_is_the_bytes_prost_writes() {
        let mut records = vec![
            Record::live(version(0, 0, ""), Bytes::new(), None),
            Record::live(version(0, 0, ""), Bytes::new(), Some(0)),
            Record::tombstone(version(u64::MAX, u64::MAX, "writer")),
        ];
        for (i, at) in [None, Some(1), Some(300), Some(u64::MAX)]
            .into_iter()
            .enumerate()
        {
            let value = Bytes::from(vec![7u8; i * 100]);
            let live = Record::live(version(1 << (i * 9), i as u64 * 200, "n1@x"), value, at);
            records.push(live.to_expiry_tombstone());
            records.push(live);
        }
        for record in records {
            let kind = match record.kind {
                RecordKind::Live => pb::RecordKind::Live,
                RecordKind::Tombstone => pb::RecordKind::Tombstone,
                RecordKind::ExpiryTombstone => pb::RecordKind::ExpiryTombstone,
            };
            let prost = pb::Record {
                hlc_ms: record.version.hlc_ms,
                counter: record.version.counter,
                writer: record.version.writer.to_string(),
                kind: kind as i32,
                value: record.value.clone(),
                expires_at_ms: record.expires_at_ms,
            }
            .encode_to_vec();
            assert_eq!(record.encode(), prost, "{record:?}");
            let mut appended = b"prefix".to_vec();
            record.encode_into(&mut appended);
            assert_eq!(&appended[6..], &prost[..], "{record:?}");
        }
    }

    fn prost_decoded(bytes: &[u8]) -> Option<Record> {
        let message = pb::Record::decode(bytes).ok()?;
        let kind = match pb::RecordKind::try_from(message.kind).ok()? {
            pb::RecordKind::Live => RecordKind::Live,
            pb::RecordKind::Tombstone => RecordKind::Tombstone,
            pb::RecordKind::ExpiryTombstone => RecordKind::ExpiryTombstone,
            _ => return None,
        };
        Some(Record {
            version: version(message.hlc_ms, message.counter, &message.writer),
            kind,
            value: message.value,
            expires_at_ms: message.expires_at_ms,
        })
    }

    proptest::proptest! {
        /// The borrowed decoder reads what prost reads, unknown fields
        /// skipped and repeated fields resolved alike.
        #[test]
        fn the_borrowed_decoder_agrees_with_prost(
            hlc_ms in proptest::num::u64::ANY,
            counter in proptest::num::u64::ANY,
            writer in ".{0,12}",
            kind in 1i32..4,
            value in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            expires_at_ms in proptest::option::of(proptest::num::u64::ANY),
            unknown in proptest::collection::vec(proptest::num::u8::ANY, 0..16),
            repeat_counter in proptest::option::of(proptest::num::u64::ANY),
        ) {
            let mut bytes = pb::Record {
                hlc_ms,
                counter,
                writer,
                kind,
                value: Bytes::from(value),
                expires_at_ms,
            }
            .encode_to_vec();
            // Unknown fields of each wire type, then a repeated known field.
            prost::encoding::bytes::encode(9, &Bytes::from(unknown), &mut bytes);
            prost::encoding::uint64::encode(10, &7, &mut bytes);
            prost::encoding::fixed64::encode(11, &7, &mut bytes);
            prost::encoding::fixed32::encode(12, &7, &mut bytes);
            if let Some(again) = repeat_counter {
                prost::encoding::uint64::encode(2, &again, &mut bytes);
            }
            let ours = Record::decode(&bytes, own_writer).unwrap();
            proptest::prop_assert_eq!(Some(ours), prost_decoded(&bytes));
        }

        /// On arbitrary bytes the borrowed decoder never accepts what prost
        /// refuses, and what it accepts it reads as prost does.
        #[test]
        fn the_borrowed_decoder_accepts_nothing_prost_refuses(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..48),
        ) {
            if let Ok(ours) = Record::decode(&bytes, own_writer) {
                proptest::prop_assert_eq!(Some(ours), prost_decoded(&bytes));
            }
        }
    }

    #[test]
    fn truncated_and_mistyped_fields_are_refused() {
        let record = Record::live(version(1, 2, "w"), Bytes::from_static(b"value"), Some(3));
        let good = record.encode();
        for cut in 1..good.len() {
            // A cut between fields decodes to fewer fields, never to the
            // whole record; a cut inside one is an error.
            if let Ok(shorter) = Record::decode(&good[..cut], own_writer) {
                assert_ne!(shorter, record, "cut at {cut}");
            }
        }
        // Field 1 (hlc_ms) sent as length-delimited.
        assert!(matches!(
            RecordView::decode(&[0x0a, 0x00]),
            Err(DecodeError::Malformed(_))
        ));
        assert!(matches!(
            RecordView::decode(&[0x20, 0x09]),
            Err(DecodeError::UnknownKind(9))
        ));
        assert!(
            RecordView::decode(&[0x1a, 0x01, 0xff]).is_err(),
            "writer not UTF-8"
        );
    }
}
