//! The hot path of SQL queries: a scalar batch decoded straight from the
//! request bytes into argument values, row by row, without building the
//! intermediate protobuf messages. Answers exactly what the general path
//! answers; anything unusual (another call kind, repeated or unknown
//! top-level fields) is left to the general path.

use ebb_proto::Message;
use ebb_proto::plugin::v1 as proto;
use proto::call_response::Result as Reply;

use crate::plugin::{Plugin, ScalarKind, error_response};
use crate::value::ValueRef;

const WIRE_VARINT: u64 = 0;
const WIRE_FIXED64: u64 = 1;
const WIRE_LEN: u64 = 2;
const WIRE_FIXED32: u64 = 5;

/// A cursor over protobuf bytes.
struct Reader<'a> {
    bytes: &'a [u8],
}

/// The bytes are not a valid message.
struct Malformed(&'static str);

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn varint(&mut self) -> Result<u64, Malformed> {
        let mut value = 0u64;
        for (i, byte) in self.bytes.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.bytes = &self.bytes[i + 1..];
                return Ok(value);
            }
        }
        Err(Malformed("invalid varint"))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], Malformed> {
        if len > self.bytes.len() {
            return Err(Malformed("buffer underflow"));
        }
        let (head, tail) = self.bytes.split_at(len);
        self.bytes = tail;
        Ok(head)
    }

    fn key(&mut self) -> Result<(u64, u64), Malformed> {
        let key = self.varint()?;
        let field = key >> 3;
        if field == 0 {
            return Err(Malformed("invalid field number 0"));
        }
        Ok((field, key & 7))
    }

    fn delimited(&mut self) -> Result<&'a [u8], Malformed> {
        let len = usize::try_from(self.varint()?).map_err(|_| Malformed("length too large"))?;
        self.take(len)
    }

    fn skip(&mut self, wire: u64) -> Result<(), Malformed> {
        match wire {
            WIRE_VARINT => self.varint().map(drop),
            WIRE_FIXED64 => self.take(8).map(drop),
            WIRE_LEN => self.delimited().map(drop),
            WIRE_FIXED32 => self.take(4).map(drop),
            _ => Err(Malformed("unsupported wire type")),
        }
    }
}

/// The request's function name and scalar batch, when the request is a
/// plain scalar call (each top-level field once, no other call set).
fn split(request: &[u8]) -> Option<(&str, &[u8])> {
    let mut reader = Reader::new(request);
    let (mut function, mut batch) = (None, None);
    while !reader.is_empty() {
        let (field, wire) = reader.key().ok()?;
        match (field, wire) {
            (1, WIRE_LEN) if function.is_none() => {
                function = Some(std::str::from_utf8(reader.delimited().ok()?).ok()?)
            }
            (2, WIRE_LEN) if batch.is_none() => batch = Some(reader.delimited().ok()?),
            _ => return None,
        }
    }
    Some((function?, batch?))
}

/// One `Value` message, borrowed from the request; `None` when no field
/// is set.
fn value(bytes: &[u8]) -> Result<Option<ValueRef<'_>>, Malformed> {
    let mut reader = Reader::new(bytes);
    let mut kind = None;
    while !reader.is_empty() {
        let (field, wire) = reader.key()?;
        kind = Some(match (field, wire) {
            (1, WIRE_VARINT) => {
                reader.varint()?;
                ValueRef::Null
            }
            (2, WIRE_VARINT) => ValueRef::Bool(reader.varint()? != 0),
            (3, WIRE_VARINT) => ValueRef::Int(reader.varint()? as i64),
            (4, WIRE_FIXED64) => {
                let raw: [u8; 8] = reader.take(8)?.try_into().expect("took 8 bytes");
                ValueRef::Float(f64::from_le_bytes(raw))
            }
            (5, WIRE_LEN) => ValueRef::Text(
                std::str::from_utf8(reader.delimited()?)
                    .map_err(|_| Malformed("invalid string value: data is not UTF-8 encoded"))?,
            ),
            (6, WIRE_LEN) => ValueRef::Bytes(reader.delimited()?),
            (1..=6, _) => return Err(Malformed("invalid wire type")),
            (_, wire) => {
                reader.skip(wire)?;
                continue;
            }
        });
    }
    Ok(kind)
}

/// One `Row` message into `args` (cleared first); returns the position of
/// the first value with no field set (which fails the row).
fn row<'a>(bytes: &'a [u8], args: &mut Vec<ValueRef<'a>>) -> Result<Option<usize>, Malformed> {
    args.clear();
    let mut empty_at = None;
    let mut reader = Reader::new(bytes);
    while !reader.is_empty() {
        match reader.key()? {
            (1, WIRE_LEN) => match value(reader.delimited()?)? {
                Some(value) => args.push(value),
                None => {
                    empty_at.get_or_insert(args.len());
                    args.push(ValueRef::Null);
                }
            },
            (1, _) => return Err(Malformed("invalid wire type")),
            (_, wire) => reader.skip(wire)?,
        }
    }
    Ok(empty_at)
}

/// Answer a scalar call on a scalar function, or `None` to take the
/// general path.
pub(crate) fn scalar(plugin: &Plugin, request: &[u8]) -> Option<Vec<u8>> {
    let (function, batch) = split(request)?;
    let (handler, arg_count) = plugin.scalar_handler(function)?;
    let qualified = || format!("{}.{function}", plugin.name());
    let fail = |message: String| Some(error_response(message).encode_to_vec());
    // The rows' slices first: a malformed batch fails before any row runs,
    // as a full decode would.
    let mut rows = Vec::new();
    let mut reader = Reader::new(batch);
    while !reader.is_empty() {
        let decoded = reader.key().and_then(|key| match key {
            (1, WIRE_LEN) => reader.delimited().map(Some),
            (1, _) => Err(Malformed("invalid wire type")),
            (_, wire) => reader.skip(wire).map(|()| None),
        });
        match decoded {
            Ok(Some(slice)) => rows.push(slice),
            Ok(None) => {}
            Err(Malformed(why)) => {
                return fail(format!("{}: malformed CallRequest: {why}", plugin.name()));
            }
        }
    }
    // Every row is decoded once to check it (nothing is copied), so a
    // malformed row fails the call before any row runs.
    let mut args: Vec<ValueRef<'_>> = Vec::new();
    for slice in &rows {
        if let Err(Malformed(why)) = row(slice, &mut args) {
            return fail(format!("{}: malformed CallRequest: {why}", plugin.name()));
        }
    }
    let mut values = Vec::with_capacity(rows.len());
    for (index, slice) in rows.into_iter().enumerate() {
        let Ok(empty_at) = row(slice, &mut args) else {
            unreachable!("every row was checked above");
        };
        if arg_count >= 0 && args.len() != arg_count as usize {
            return fail(format!(
                "{}: row {index}: takes {arg_count} arguments, got {}",
                qualified(),
                args.len()
            ));
        }
        if let Some(position) = empty_at {
            return fail(format!(
                "{}: row {index}, argument {}: {}",
                qualified(),
                position + 1,
                crate::value::EmptyValueError
            ));
        }
        let result = match &handler {
            ScalarKind::Owned(f) => f(args.iter().map(ValueRef::to_owned).collect()),
            ScalarKind::Borrowed(f) => f(&args),
        };
        match result {
            Ok(value) => values.push(proto::Value::from(value)),
            Err(e) => return fail(format!("{}: row {index}: {e}", qualified())),
        }
    }
    Some(
        proto::CallResponse {
            result: Some(Reply::Scalar(proto::ScalarResult { values })),
        }
        .encode_to_vec(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;
    use proto::call_request::Call;

    fn plugin() -> Plugin {
        Plugin::new("t", "1")
            .scalar("pair", "", |a: Value, b: Option<String>| {
                format!("{a:?}/{b:?}")
            })
            .scalar("checked", "", |x: i64| {
                if x < 0 {
                    Err(format!("negative {x}"))
                } else {
                    Ok(x * 2)
                }
            })
            .scalar("count", "", |args: &[Value]| args.len() as i64)
            .scalar_ref("describe", "", 2, |args: &[ValueRef<'_>]| match args[0] {
                ValueRef::Int(i) if i < 0 => Err(format!("negative {i}")),
                first => Ok(format!("{first:?}|{:?}", args[1])),
            })
            .aggregate::<Nothing>("agg", "")
    }

    /// An aggregate, to check that scalar calls to it take the general path.
    struct Nothing;

    impl crate::Aggregate for Nothing {
        type State = ();
        fn init() {}
        fn update(_: &mut (), _: &[Value]) -> Result<(), String> {
            Ok(())
        }
        fn merge(_: (), _: ()) {}
        fn finish(_: ()) -> Value {
            Value::Null
        }
        fn encode(_: &()) -> Vec<u8> {
            Vec::new()
        }
        fn decode(_: &[u8]) -> Result<(), String> {
            Ok(())
        }
    }

    /// A small deterministic generator (xorshift).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn random_value(rng: &mut Rng) -> proto::Value {
        use proto::value::Kind;
        let kind = match rng.below(8) {
            0 => Some(Kind::Null(true)),
            1 => Some(Kind::Boolean(rng.below(2) == 1)),
            2 => Some(Kind::Int(rng.next() as i64 >> rng.below(64))),
            3 => Some(Kind::Float(rng.next() as f64 / 7.0)),
            4 => Some(Kind::Text(format!("t{}é", rng.below(1000)))),
            5 => Some(Kind::Bytes(
                vec![rng.below(256) as u8; rng.below(5) as usize].into(),
            )),
            6 => Some(Kind::Int(-(rng.below(3) as i64))),
            _ if rng.below(10) == 0 => None,
            _ => Some(Kind::Int(rng.below(100) as i64)),
        };
        proto::Value { kind }
    }

    fn general(plugin: &Plugin, request: &[u8]) -> proto::CallResponse {
        match proto::CallRequest::decode(request) {
            Ok(request) => plugin.call(request),
            Err(e) => error_response(format!("{}: malformed CallRequest: {e}", plugin.name())),
        }
    }

    #[test]
    fn the_fast_path_answers_exactly_what_the_general_path_answers() {
        let plugin = plugin();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut fast_taken = 0;
        for case in 0..3000 {
            let function =
                ["pair", "checked", "count", "describe", "agg", "missing"][rng.below(6) as usize];
            let rows = (0..rng.below(6))
                .map(|_| proto::Row {
                    args: (0..rng.below(4)).map(|_| random_value(&mut rng)).collect(),
                })
                .collect();
            let request = proto::CallRequest {
                function: function.into(),
                call: Some(Call::Scalar(proto::ScalarBatch { rows })),
            }
            .encode_to_vec();
            let expected = general(&plugin, &request);
            match scalar(&plugin, &request) {
                Some(fast) => {
                    fast_taken += 1;
                    let fast = proto::CallResponse::decode(fast.as_slice()).unwrap();
                    assert_eq!(fast, expected, "case {case}: {function}");
                }
                None => assert!(
                    matches!(function, "agg" | "missing"),
                    "case {case}: {function} took the general path"
                ),
            }
            // Truncated and corrupted requests: an error on both paths.
            let cut = rng.below(request.len() as u64 + 1) as usize;
            let mut broken = request[..cut].to_vec();
            if !broken.is_empty() && rng.below(2) == 0 {
                let at = rng.below(broken.len() as u64) as usize;
                broken[at] ^= 0xff;
            }
            let general_failed = matches!(general(&plugin, &broken).result, Some(Reply::Error(_)));
            if let Some(fast) = scalar(&plugin, &broken) {
                let fast = proto::CallResponse::decode(fast.as_slice()).unwrap();
                let fast_failed = matches!(fast.result, Some(Reply::Error(_)));
                assert_eq!(fast_failed, general_failed, "case {case}: {broken:?}");
                if !fast_failed {
                    assert_eq!(fast, general(&plugin, &broken), "case {case}");
                }
            }
        }
        assert!(fast_taken > 1000, "the fast path ran {fast_taken} times");
    }
}
