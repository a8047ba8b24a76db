//! The hot path of SQL queries: scalar batches and aggregate updates decoded
//! straight from the request bytes into borrowed argument values (each row
//! once, `rows.rs`), and scalar answers written straight as response bytes,
//! without building the intermediate protobuf messages. Answers exactly what
//! the general path (`dispatch.rs`) answers; anything unusual (another call
//! kind, repeated or unknown top-level fields) is left to the general path.

use ebb_proto::Message;
use ebb_proto::plugin::v1 as proto;
use ebb_proto::wire::{self, Malformed, Reader, WIRE_LEN};
use proto::call_response::Result as Reply;

use crate::dispatch::error_response;
use crate::registry::{Registry, ScalarKind};
use crate::rows::Rows;
use crate::value::{EmptyValueError, ValueRef};

/// `CallRequest` field of a scalar batch.
const CALL_SCALAR: u64 = 2;
/// `CallRequest` field of an aggregate update.
const CALL_AGG_UPDATE: u64 = 4;
/// `CallResponse` field of a scalar result.
const RESPONSE_SCALAR: u32 = 1;

/// The request's function name, call field and call body, when the request
/// is a plain scalar or aggregate-update call (each top-level field once,
/// no other call set).
fn split(request: &[u8]) -> Option<(&str, u64, &[u8])> {
    let mut reader = Reader::new(request);
    let (mut function, mut call) = (None, None);
    while !reader.is_empty() {
        let (field, wire) = reader.key().ok()?;
        match (field, wire) {
            (1, WIRE_LEN) if function.is_none() => {
                function = Some(std::str::from_utf8(reader.delimited().ok()?).ok()?)
            }
            (CALL_SCALAR | CALL_AGG_UPDATE, WIRE_LEN) if call.is_none() => {
                call = Some((field, reader.delimited().ok()?))
            }
            _ => return None,
        }
    }
    let (field, body) = call?;
    Some((function?, field, body))
}

/// Answer a scalar call or an aggregate update, or `None` to take the
/// general path.
pub(crate) fn answer(registry: &Registry, request: &[u8]) -> Option<Vec<u8>> {
    match split(request)? {
        (function, CALL_SCALAR, batch) => scalar(registry, function, batch),
        (function, _, update) => agg_update(registry, function, update),
    }
}

/// The general path's checks of one decoded row: argument count, then no
/// value without a field. The passing case is inlined into the row loop;
/// building the message is not.
#[inline(always)]
fn check_row(
    qualified: &str,
    index: usize,
    args: &[ValueRef<'_>],
    empty_at: Option<usize>,
    arg_count: i32,
) -> Result<(), String> {
    if (arg_count < 0 || args.len() == arg_count as usize) && empty_at.is_none() {
        return Ok(());
    }
    row_error(qualified, index, args, empty_at, arg_count)
}

/// The message of a row that fails [`check_row`].
#[cold]
#[inline(never)]
fn row_error(
    qualified: &str,
    index: usize,
    args: &[ValueRef<'_>],
    empty_at: Option<usize>,
    arg_count: i32,
) -> Result<(), String> {
    if arg_count >= 0 && args.len() != arg_count as usize {
        return Err(format!(
            "{qualified}: row {index}: takes {arg_count} arguments, got {}",
            args.len()
        ));
    }
    if let Some(position) = empty_at {
        return Err(format!(
            "{qualified}: row {index}, argument {}: {}",
            position + 1,
            EmptyValueError
        ));
    }
    Ok(())
}

fn decoded<'a>(registry: &Registry, body: &'a [u8], rows_field: u64) -> Result<Rows<'a>, String> {
    Rows::decode(body, rows_field)
        .map_err(|Malformed(why)| format!("{}: malformed CallRequest: {why}", registry.plugin))
}

/// An aggregate update: the state decoded once, each row folded in from a
/// reused argument buffer.
fn agg_update(registry: &Registry, function: &str, body: &[u8]) -> Option<Vec<u8>> {
    let (aggregate, arg_count) = registry.aggregate(function)?;
    let qualified = format!("{}.{function}", registry.plugin);
    let fail = |message: String| Some(error_response(message).encode_to_vec());
    let rows = match decoded(registry, body, 2) {
        Ok(rows) => rows,
        Err(message) => return fail(message),
    };
    // The general path converts every row before folding any in.
    for (index, args, empty_at) in rows.iter() {
        if let Err(message) = check_row(&qualified, index, args, empty_at, arg_count) {
            return fail(message);
        }
    }
    let updated = aggregate.update_rows(&rows);
    match updated {
        Ok(state) => Some(
            proto::CallResponse {
                result: Some(Reply::State(state.into())),
            }
            .encode_to_vec(),
        ),
        Err(e) => fail(format!("{qualified}: {e}")),
    }
}

/// A scalar call on a scalar function: each row run on its borrowed
/// arguments, each result appended to the response as it comes.
fn scalar(registry: &Registry, function: &str, batch: &[u8]) -> Option<Vec<u8>> {
    let (handler, arg_count) = registry.scalar(function)?;
    let qualified = format!("{}.{function}", registry.plugin);
    let fail = |message: String| Some(error_response(message).encode_to_vec());
    let rows = match decoded(registry, batch, 1) {
        Ok(rows) => rows,
        Err(message) => return fail(message),
    };
    // Each row is checked, then run, in order, as the general path does.
    let mut values = Vec::with_capacity(rows.len() * 4);
    for (index, args, empty_at) in rows.iter() {
        if let Err(message) = check_row(&qualified, index, args, empty_at, arg_count) {
            return fail(message);
        }
        let result = match &handler {
            ScalarKind::Owned(f) => f(args.iter().map(ValueRef::to_owned).collect()),
            ScalarKind::Borrowed(f) => f(args),
        };
        match result {
            Ok(value) => wire::put_value_field(&mut values, 1, &value.as_ref().into()),
            Err(e) => return fail(format!("{qualified}: row {index}: {e}")),
        }
    }
    // CallResponse { scalar: ScalarResult { values } }
    let mut response = Vec::with_capacity(wire::delimited_len(values.len()));
    wire::put_delimited(&mut response, RESPONSE_SCALAR, &values);
    Some(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::call_request::Call;

    use crate::plugin::Plugin;
    use crate::value::Value;

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
            .aggregate::<Sum>("sum", "")
    }

    /// A sum of integers that refuses negative ones and short states.
    struct Sum;

    impl crate::Aggregate for Sum {
        type State = i64;
        fn init() -> i64 {
            0
        }
        fn update(state: &mut i64, args: &[Value]) -> Result<(), String> {
            let x: i64 = args[0].get().map_err(|e| e.to_string())?;
            if x < 0 {
                return Err(format!("negative {x}"));
            }
            *state = state.wrapping_add(x);
            Ok(())
        }
        fn merge(left: i64, right: i64) -> i64 {
            left.wrapping_add(right)
        }
        fn finish(state: i64) -> Value {
            Value::Int(state)
        }
        fn encode(state: &i64) -> Vec<u8> {
            state.to_le_bytes().to_vec()
        }
        fn decode(bytes: &[u8]) -> Result<i64, String> {
            Ok(i64::from_le_bytes(
                bytes.try_into().map_err(|_| "want 8 bytes".to_string())?,
            ))
        }
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
            let function = [
                "pair", "checked", "count", "describe", "agg", "sum", "missing",
            ][rng.below(7) as usize];
            let rows = (0..rng.below(6))
                .map(|_| proto::Row {
                    args: (0..rng.below(3)).map(|_| random_value(&mut rng)).collect(),
                })
                .collect();
            let call = if rng.below(2) == 0 {
                Call::Scalar(proto::ScalarBatch { rows })
            } else {
                let state = match rng.below(3) {
                    0 => Vec::new(),
                    1 => vec![1, 2, 3],
                    _ => (rng.below(1000) as i64).to_le_bytes().to_vec(),
                };
                Call::AggUpdate(proto::AggUpdate {
                    state: state.into(),
                    rows,
                })
            };
            let scalar_call = matches!(call, Call::Scalar(_));
            let request = proto::CallRequest {
                function: function.into(),
                call: Some(call),
            }
            .encode_to_vec();
            let expected = general(&plugin, &request);
            match answer(&plugin.registry, &request) {
                Some(fast) => {
                    fast_taken += 1;
                    let fast = proto::CallResponse::decode(fast.as_slice()).unwrap();
                    assert_eq!(fast, expected, "case {case}: {function}");
                }
                None => {
                    let aggregate = matches!(function, "agg" | "sum");
                    assert!(
                        function == "missing" || aggregate == scalar_call,
                        "case {case}: {function} took the general path"
                    );
                }
            }
            // Truncated and corrupted requests: an error on both paths.
            let cut = rng.below(request.len() as u64 + 1) as usize;
            let mut broken = request[..cut].to_vec();
            if !broken.is_empty() && rng.below(2) == 0 {
                let at = rng.below(broken.len() as u64) as usize;
                broken[at] ^= 0xff;
            }
            let general_failed = matches!(general(&plugin, &broken).result, Some(Reply::Error(_)));
            if let Some(fast) = answer(&plugin.registry, &broken) {
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
