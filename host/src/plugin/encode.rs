//! Call requests encoded straight from SQL columns into a reused buffer:
//! the bytes prost would write for the same `CallRequest`, without building
//! a `Row` and a `Value` message per row first (the per-row cost of plugin
//! calls in queries).

use bytes::Bytes;
use ebb_proto::wire::{self, WIRE_LEN};
use ebb_query::Value;

use crate::exec::convert::wire_value;

/// Encoded length of row `row`'s `Row` message.
fn row_len(args: &[Vec<Value>], row: usize) -> usize {
    args.iter()
        .map(|column| wire::delimited_len(wire::value_len(&wire_value(&column[row]))))
        .sum()
}

/// Encoded length of `rows` rows as repeated `Row` fields. Also asks the
/// CPU to start loading the text and bytes the rows point at, so copying
/// them in [`put_rows`] does not wait on memory one row at a time.
fn rows_len(args: &[Vec<Value>], rows: usize) -> usize {
    for column in args {
        for value in &column[..rows] {
            match value {
                Value::Text(t) => prefetch(t.as_bytes()),
                Value::Bytes(b) => prefetch(b),
                _ => {}
            }
        }
    }
    (0..rows)
        .map(|row| wire::delimited_len(row_len(args, row)))
        .sum()
}

/// Hint that `bytes` (its first two cache lines) will be read soon.
#[inline]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = bytes.as_ptr().cast::<i8>();
        // SAFETY: a prefetch reads nothing the program sees and never
        // faults, whatever the address; SSE is part of every x86_64.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(start);
            if bytes.len() > 64 {
                _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(64));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// `rows` rows of `args` as repeated `Row` fields numbered `field`.
fn put_rows(out: &mut Vec<u8>, field: u32, args: &[Vec<Value>], rows: usize) {
    for row in 0..rows {
        wire::put_key(out, field, WIRE_LEN);
        wire::put_varint(out, row_len(args, row) as u64);
        for column in args {
            wire::put_value_field(out, 1, &wire_value(&column[row]));
        }
    }
}

/// Write `CallRequest { function, <call_field>: body }` into `out`
/// (cleared first; its capacity is reused).
fn request(
    out: &mut Vec<u8>,
    function: &str,
    call_field: u32,
    body_len: usize,
    body: impl FnOnce(&mut Vec<u8>),
) {
    out.clear();
    out.reserve(wire::delimited_len(function.len()) + wire::delimited_len(body_len));
    if !function.is_empty() {
        wire::put_delimited(out, 1, function.as_bytes());
    }
    wire::put_key(out, call_field, WIRE_LEN);
    wire::put_varint(out, body_len as u64);
    let start = out.len();
    body(out);
    debug_assert_eq!(
        out.len() - start,
        body_len,
        "computed and written lengths agree"
    );
}

/// `CallRequest { function, scalar: ScalarBatch { rows } }` into `out`.
pub fn scalar_request(out: &mut Vec<u8>, function: &str, args: &[Vec<Value>], rows: usize) {
    let body_len = rows_len(args, rows);
    request(out, function, 2, body_len, |out| {
        put_rows(out, 1, args, rows)
    })
}

/// `CallRequest { function, agg_update: AggUpdate { state, rows } }` into
/// `out`.
pub fn agg_update_request(
    out: &mut Vec<u8>,
    function: &str,
    state: &Bytes,
    args: &[Vec<Value>],
    rows: usize,
) {
    let state_len = if state.is_empty() {
        0
    } else {
        wire::delimited_len(state.len())
    };
    let body_len = state_len + rows_len(args, rows);
    request(out, function, 4, body_len, |out| {
        if !state.is_empty() {
            wire::put_delimited(out, 1, state);
        }
        put_rows(out, 2, args, rows);
    })
}

#[cfg(test)]
mod tests {
    use ebb_proto::Message;
    use ebb_proto::plugin::v1 as abi;

    use super::*;
    use crate::exec::convert::to_proto;

    fn columns() -> Vec<Vec<Value>> {
        let long = "x".repeat(300);
        vec![
            vec![
                Value::Null,
                Value::Bool(true),
                Value::Bool(false),
                Value::Int(0),
                Value::Int(-1),
                Value::Int(i64::MAX),
                Value::Float(-2.5),
            ],
            vec![
                Value::text(""),
                Value::text("é"),
                Value::text(long.as_str()),
                Value::Bytes(Bytes::new()),
                Value::Bytes(Bytes::from(vec![0u8; 200])),
                Value::Int(300),
                Value::Float(f64::NAN),
            ],
        ]
    }

    fn rows(args: &[Vec<Value>], n: usize) -> Vec<abi::Row> {
        (0..n)
            .map(|i| abi::Row {
                args: args.iter().map(|column| to_proto(&column[i])).collect(),
            })
            .collect()
    }

    #[test]
    fn requests_are_byte_identical_to_prost() {
        let args = columns();
        for n in [0, 1, 7] {
            let expected = abi::CallRequest {
                function: "get".into(),
                call: Some(abi::call_request::Call::Scalar(abi::ScalarBatch {
                    rows: rows(&args, n),
                })),
            }
            .encode_to_vec();
            let mut out = vec![7u8; 3];
            scalar_request(&mut out, "get", &args, n);
            assert_eq!(out, expected, "scalar, {n} rows");
            for state in [Bytes::new(), Bytes::from_static(b"state")] {
                let expected = abi::CallRequest {
                    function: "p95".into(),
                    call: Some(abi::call_request::Call::AggUpdate(abi::AggUpdate {
                        state: state.clone(),
                        rows: rows(&args, n),
                    })),
                }
                .encode_to_vec();
                agg_update_request(&mut out, "p95", &state, &args, n);
                assert_eq!(out, expected, "agg_update, {n} rows");
            }
        }
    }
}
