//! Call requests encoded straight from SQL columns into a reused buffer:
//! the bytes prost would write for the same `CallRequest`, without building
//! a `Row` and a `Value` message per row first (the per-row cost of plugin
//! calls in queries).

use bytes::Bytes;
use ebb_proto::wire::{self, WIRE_LEN};
use ebb_query::Value;

use crate::codec::wire_value;

/// `rows` rows of `args` as repeated `Row` fields numbered `field`. Each
/// value's length is computed once (it goes into the value's header and the
/// row's).
fn put_rows(out: &mut Vec<u8>, field: u32, args: &[Vec<Value>], rows: usize) {
    let mut value_lens = vec![0usize; args.len()];
    for row in 0..rows {
        let mut row_len = 0;
        for (column, len) in args.iter().zip(&mut value_lens) {
            *len = wire::value_len(&wire_value(&column[row]));
            row_len += wire::delimited_len(*len);
        }
        out.reserve(row_len + 11);
        wire::put_key(out, field, WIRE_LEN);
        wire::put_varint(out, row_len as u64);
        for (column, &len) in args.iter().zip(&value_lens) {
            wire::put_key(out, 1, WIRE_LEN);
            wire::put_varint(out, len as u64);
            wire::put_value(out, &wire_value(&column[row]));
        }
    }
}

/// Write `CallRequest { function, <call_field>: body }` into `out` (cleared
/// first; its capacity is reused) in one pass over the body, and return
/// where the request starts in `out`. The body is written first, after room
/// for the longest header; the header then goes right before it, so no
/// length is computed ahead and nothing is moved.
fn request(
    out: &mut Vec<u8>,
    function: &str,
    call_field: u32,
    body: impl FnOnce(&mut Vec<u8>),
) -> usize {
    let mut header = Vec::with_capacity(wire::delimited_len(function.len()) + 11);
    if !function.is_empty() {
        wire::put_delimited(&mut header, 1, function.as_bytes());
    }
    wire::put_key(&mut header, call_field, WIRE_LEN);
    // A varint takes at most 10 bytes.
    let room = header.len() + 10;
    out.clear();
    out.resize(room, 0);
    body(out);
    wire::put_varint(&mut header, (out.len() - room) as u64);
    let start = room - header.len();
    out[start..room].copy_from_slice(&header);
    start
}

/// `CallRequest { function, scalar: ScalarBatch { rows } }` into `out`;
/// the request is `out[start..]` for the returned `start`.
pub fn scalar_request(
    out: &mut Vec<u8>,
    function: &str,
    args: &[Vec<Value>],
    rows: usize,
) -> usize {
    request(out, function, 2, |out| put_rows(out, 1, args, rows))
}

/// `CallRequest { function, agg_update: AggUpdate { state, rows } }` into
/// `out`; the request is `out[start..]` for the returned `start`.
pub fn agg_update_request(
    out: &mut Vec<u8>,
    function: &str,
    state: &Bytes,
    args: &[Vec<Value>],
    rows: usize,
) -> usize {
    request(out, function, 4, |out| {
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
    use crate::codec::to_proto;

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
            let start = scalar_request(&mut out, "get", &args, n);
            assert_eq!(out[start..], expected, "scalar, {n} rows");
            for state in [Bytes::new(), Bytes::from_static(b"state")] {
                let expected = abi::CallRequest {
                    function: "p95".into(),
                    call: Some(abi::call_request::Call::AggUpdate(abi::AggUpdate {
                        state: state.clone(),
                        rows: rows(&args, n),
                    })),
                }
                .encode_to_vec();
                let start = agg_update_request(&mut out, "p95", &state, &args, n);
                assert_eq!(out[start..], expected, "agg_update, {n} rows");
            }
        }
    }
}
