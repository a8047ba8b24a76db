//! The protobuf wire format of the plugin ABI's per-row messages (`Value`,
//! `Row`, `ScalarResult`), read and written by hand: the host and the guest
//! SDK use it on the hot path of SQL calls, where building a prost message
//! per row costs more than many functions do. Writers produce exactly the
//! bytes prost writes for the same message; readers accept what prost
//! accepts for the shapes they handle and report `Malformed` otherwise.

/// Wire type of varints.
pub const WIRE_VARINT: u64 = 0;
/// Wire type of 8-byte fixed values.
pub const WIRE_FIXED64: u64 = 1;
/// Wire type of length-delimited values.
pub const WIRE_LEN: u64 = 2;
/// Wire type of 4-byte fixed values.
pub const WIRE_FIXED32: u64 = 5;

/// One `ebb.plugin.v1.Value`, borrowed from the bytes it was read from (or
/// from the value it is written for).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WireValue<'a> {
    /// `null`.
    Null,
    /// `boolean`.
    Bool(bool),
    /// `int`.
    Int(i64),
    /// `float`.
    Float(f64),
    /// `text` (valid UTF-8).
    Text(&'a str),
    /// `bytes`.
    Bytes(&'a [u8]),
}

/// The bytes are not a valid message; the text says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// A cursor over protobuf bytes.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    #[inline]
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    /// True when every byte was read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// A varint (at most 10 bytes).
    ///
    /// The one-byte case is always inlined, the rest is a call: nearly
    /// every key and length on the per-row path is one byte, and a wasm
    /// build left the whole function out of line, a call per key.
    #[inline(always)]
    pub fn varint(&mut self) -> Result<u64, Malformed> {
        if let Some(&byte) = self.bytes.first()
            && byte < 0x80
        {
            self.bytes = &self.bytes[1..];
            return Ok(u64::from(byte));
        }
        self.varint_long()
    }

    /// [`Reader::varint`] past its one-byte case.
    #[inline(never)]
    fn varint_long(&mut self) -> Result<u64, Malformed> {
        let mut value = 0u64;
        for (i, byte) in self.bytes.iter().enumerate().take(10) {
            // The tenth byte holds bit 63 alone: more would not fit a u64
            // (prost refuses such a varint too).
            if i == 9 && *byte > 1 {
                return Err(Malformed("invalid varint"));
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.bytes = &self.bytes[i + 1..];
                return Ok(value);
            }
        }
        Err(Malformed("invalid varint"))
    }

    /// The next `len` bytes.
    #[inline]
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], Malformed> {
        if len > self.bytes.len() {
            return Err(Malformed("buffer underflow"));
        }
        let (head, tail) = self.bytes.split_at(len);
        self.bytes = tail;
        Ok(head)
    }

    /// A field key: `(field number, wire type)`.
    #[inline]
    pub fn key(&mut self) -> Result<(u64, u64), Malformed> {
        let key = self.varint()?;
        let field = key >> 3;
        if field == 0 || field > u64::from(u32::MAX >> 3) {
            return Err(Malformed("invalid field number"));
        }
        Ok((field, key & 7))
    }

    /// A length-delimited value.
    #[inline]
    pub fn delimited(&mut self) -> Result<&'a [u8], Malformed> {
        let len = usize::try_from(self.varint()?).map_err(|_| Malformed("length too large"))?;
        self.take(len)
    }

    /// Skip a value of wire type `wire`.
    #[inline]
    pub fn skip(&mut self, wire: u64) -> Result<(), Malformed> {
        match wire {
            WIRE_VARINT => self.varint().map(drop),
            WIRE_FIXED64 => self.take(8).map(drop),
            WIRE_LEN => self.delimited().map(drop),
            WIRE_FIXED32 => self.take(4).map(drop),
            _ => Err(Malformed("unsupported wire type")),
        }
    }
}

/// Bytes a varint of `value` takes.
#[inline]
pub fn varint_len(value: u64) -> usize {
    // 1 byte per started group of 7 bits, at least one.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// Append `value` as a varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Append the key of field `field` with wire type `wire`.
#[inline]
pub fn put_key(out: &mut Vec<u8>, field: u32, wire: u64) {
    put_varint(out, u64::from(field) << 3 | wire);
}

/// Bytes a length-delimited field (with a one-byte key) holding `len` bytes
/// takes.
#[inline]
pub fn delimited_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// Append field `field` holding `bytes`.
#[inline]
pub fn put_delimited(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(out, field, WIRE_LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Encoded length of the `Value` message for `value`.
#[inline]
pub fn value_len(value: &WireValue<'_>) -> usize {
    match value {
        WireValue::Null | WireValue::Bool(_) => 2,
        WireValue::Int(i) => 1 + varint_len(*i as u64),
        WireValue::Float(_) => 9,
        WireValue::Text(t) => delimited_len(t.len()),
        WireValue::Bytes(b) => delimited_len(b.len()),
    }
}

/// Append the fields of the `Value` message for `value` (a oneof: the set
/// field is written even when it holds its default).
#[inline]
pub fn put_value(out: &mut Vec<u8>, value: &WireValue<'_>) {
    match value {
        WireValue::Null => {
            put_key(out, 1, WIRE_VARINT);
            out.push(1);
        }
        WireValue::Bool(b) => {
            put_key(out, 2, WIRE_VARINT);
            out.push(u8::from(*b));
        }
        WireValue::Int(i) => {
            put_key(out, 3, WIRE_VARINT);
            put_varint(out, *i as u64);
        }
        WireValue::Float(x) => {
            put_key(out, 4, WIRE_FIXED64);
            out.extend_from_slice(&x.to_le_bytes());
        }
        WireValue::Text(t) => put_delimited(out, 5, t.as_bytes()),
        WireValue::Bytes(b) => put_delimited(out, 6, b),
    }
}

/// Append field `field` holding the `Value` message for `value` (a `Row`'s
/// `args` or a `ScalarResult`'s `values`).
#[inline]
pub fn put_value_field(out: &mut Vec<u8>, field: u32, value: &WireValue<'_>) {
    put_key(out, field, WIRE_LEN);
    put_varint(out, value_len(value) as u64);
    put_value(out, value);
}

/// `bytes` as text; ASCII (most text in queries) is checked inline.
#[inline]
fn text(bytes: &[u8]) -> Result<&str, Malformed> {
    if bytes.is_ascii() {
        // SAFETY: ASCII bytes are valid UTF-8.
        return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
    }
    std::str::from_utf8(bytes)
        .map_err(|_| Malformed("invalid string value: data is not UTF-8 encoded"))
}

/// Read one `Value` message; `None` when no field is set (which the ABI
/// forbids: the caller decides how to report it). As in prost, the last
/// field of the oneof wins and unknown fields are skipped.
#[inline]
pub fn read_value(bytes: &[u8]) -> Result<Option<WireValue<'_>>, Malformed> {
    // What encoders write: one field, its key and any length one byte each.
    // Read without a loop (in the sandbox each loop pass costs an
    // interruption check); anything else takes the general loop below.
    match bytes {
        [0x21, rest @ ..] if rest.len() == 8 => {
            let raw: [u8; 8] = rest.try_into().expect("8 bytes");
            return Ok(Some(WireValue::Float(f64::from_le_bytes(raw))));
        }
        [0x18, byte] if *byte < 0x80 => return Ok(Some(WireValue::Int(i64::from(*byte)))),
        [0x2a, len, rest @ ..] if usize::from(*len) == rest.len() && *len < 0x80 => {
            return Ok(Some(WireValue::Text(text(rest)?)));
        }
        [0x32, len, rest @ ..] if usize::from(*len) == rest.len() && *len < 0x80 => {
            return Ok(Some(WireValue::Bytes(rest)));
        }
        _ => {}
    }
    let mut reader = Reader::new(bytes);
    let mut kind = None;
    while !reader.is_empty() {
        let (field, wire) = reader.key()?;
        kind = Some(match (field, wire) {
            (1, WIRE_VARINT) => {
                reader.varint()?;
                WireValue::Null
            }
            (2, WIRE_VARINT) => WireValue::Bool(reader.varint()? != 0),
            (3, WIRE_VARINT) => WireValue::Int(reader.varint()? as i64),
            (4, WIRE_FIXED64) => {
                let raw: [u8; 8] = reader.take(8)?.try_into().expect("took 8 bytes");
                WireValue::Float(f64::from_le_bytes(raw))
            }
            (5, WIRE_LEN) => WireValue::Text(text(reader.delimited()?)?),
            (6, WIRE_LEN) => WireValue::Bytes(reader.delimited()?),
            (1..=6, _) => return Err(Malformed("invalid wire type")),
            (_, wire) => {
                reader.skip(wire)?;
                continue;
            }
        });
    }
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::plugin::v1 as abi;

    fn values() -> Vec<WireValue<'static>> {
        vec![
            WireValue::Null,
            WireValue::Bool(false),
            WireValue::Bool(true),
            WireValue::Int(0),
            WireValue::Int(-1),
            WireValue::Int(i64::MAX),
            WireValue::Int(300),
            WireValue::Float(0.0),
            WireValue::Float(-2.5),
            WireValue::Text(""),
            WireValue::Text("é"),
            WireValue::Bytes(&[]),
            WireValue::Bytes(&[0; 200]),
        ]
    }

    fn prost_value(value: &WireValue<'_>) -> abi::Value {
        use abi::value::Kind;
        let kind = match *value {
            WireValue::Null => Kind::Null(true),
            WireValue::Bool(b) => Kind::Boolean(b),
            WireValue::Int(i) => Kind::Int(i),
            WireValue::Float(x) => Kind::Float(x),
            WireValue::Text(t) => Kind::Text(t.into()),
            WireValue::Bytes(b) => Kind::Bytes(b.to_vec().into()),
        };
        abi::Value { kind: Some(kind) }
    }

    #[test]
    fn values_are_written_as_prost_writes_them_and_read_back() {
        for value in values() {
            let expected = prost_value(&value).encode_to_vec();
            let mut out = Vec::new();
            put_value(&mut out, &value);
            assert_eq!(out, expected, "{value:?}");
            assert_eq!(value_len(&value), expected.len(), "{value:?}");
            assert_eq!(read_value(&out), Ok(Some(value)), "{value:?}");
        }
        let result = abi::ScalarResult {
            values: values().iter().map(prost_value).collect(),
        }
        .encode_to_vec();
        let mut out = Vec::new();
        for value in values() {
            put_value_field(&mut out, 1, &value);
        }
        assert_eq!(out, result);
    }

    #[test]
    fn a_varint_past_64_bits_is_refused_as_prost_refuses_it() {
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(Reader::new(&max).varint(), Ok(u64::MAX));
        assert_eq!(
            prost::encoding::decode_varint(&mut &max[..]).ok(),
            Some(u64::MAX)
        );
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(Reader::new(&over).varint().is_err());
        assert!(prost::encoding::decode_varint(&mut &over[..]).is_err());
    }

    #[test]
    fn varint_lengths_match_what_is_written() {
        for shift in 0..64 {
            for value in [1u64 << shift, (1u64 << shift) - 1, u64::MAX >> shift] {
                let mut out = Vec::new();
                put_varint(&mut out, value);
                assert_eq!(varint_len(value), out.len(), "{value}");
                assert_eq!(Reader::new(&out).varint(), Ok(value));
            }
        }
    }

    /// A read value as text to compare by (floats by their bits).
    fn described(value: Option<WireValue<'_>>) -> String {
        match value {
            Some(WireValue::Float(x)) => format!("float {:x}", x.to_bits()),
            other => format!("{other:?}"),
        }
    }

    /// What prost reads from `bytes`, described (`Err` when prost refuses
    /// them).
    fn prost_read(bytes: &[u8]) -> Result<String, ()> {
        use abi::value::Kind;
        let value = abi::Value::decode(bytes).map_err(drop)?;
        Ok(described(value.kind.as_ref().map(|kind| match kind {
            Kind::Null(_) => WireValue::Null,
            Kind::Boolean(b) => WireValue::Bool(*b),
            Kind::Int(i) => WireValue::Int(*i),
            Kind::Float(x) => WireValue::Float(*x),
            Kind::Text(t) => WireValue::Text(t),
            Kind::Bytes(b) => WireValue::Bytes(b),
        })))
    }

    #[test]
    fn random_values_read_as_prost_reads_them() {
        // Pieces of Value messages, valid and not, strung together.
        let pieces: [&[u8]; 14] = [
            &[0x08, 0x01],
            &[0x10, 0x00],
            &[0x18, 0x7f],
            &[0x18, 0x96, 0x01],
            &[0x21, 1, 2, 3, 4, 5, 6, 7, 8],
            &[0x21, 1, 2],
            &[0x2a, 0x02, b'h', b'i'],
            &[0x2a, 0x01, 0xff],
            &[0x2a, 0x03, b'a'],
            &[0x32, 0x00],
            &[0x32, 0x02, 0xff, 0x00],
            &[0x38, 0x05],
            &[0x1a, 0x00],
            &[0x80],
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for _ in 0..20_000 {
            let mut bytes = Vec::new();
            for _ in 0..next(3) + 1 {
                bytes.extend_from_slice(pieces[next(pieces.len())]);
            }
            let got = read_value(&bytes).map(described).map_err(drop);
            assert_eq!(got, prost_read(&bytes), "{bytes:x?}");
        }
    }

    #[test]
    fn malformed_values_are_refused() {
        assert_eq!(read_value(&[]), Ok(None));
        assert!(read_value(&[0x2a, 0x01, 0xff]).is_err(), "text not UTF-8");
        assert!(read_value(&[0x2a, 0x05, b'a']).is_err(), "short text");
        assert!(read_value(&[0x18]).is_err(), "truncated varint");
        assert!(
            read_value(&[0x1a, 0x00]).is_err(),
            "int with the LEN wire type"
        );
        assert!(read_value(&[0x00, 0x00]).is_err(), "field 0");
        // An unknown field is skipped; the last field of the oneof wins.
        assert_eq!(
            read_value(&[0x38, 0x01, 0x18, 0x05, 0x10, 0x01]),
            Ok(Some(WireValue::Bool(true)))
        );
    }
}
