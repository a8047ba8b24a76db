//! Call requests encoded straight from SQL columns: the bytes prost would
//! write for the same `CallRequest`, without building a `Row` and a `Value`
//! message per row first (the per-row cost of plugin calls in queries).

use bytes::Bytes;
use ebb_query::Value;

const WIRE_VARINT: u32 = 0;
const WIRE_FIXED64: u32 = 1;
const WIRE_LEN: u32 = 2;

fn varint_len(mut value: u64) -> usize {
    let mut len = 1;
    while value >= 0x80 {
        value >>= 7;
        len += 1;
    }
    len
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_key(out: &mut Vec<u8>, field: u32, wire: u32) {
    put_varint(out, u64::from(field << 3 | wire));
}

/// Length of a field (one-byte key) holding `len` bytes.
fn delimited_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

fn put_delimited(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(out, field, WIRE_LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Encoded length of `ebb.plugin.v1.Value` for `value`.
fn value_len(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => 2,
        Value::Int(i) => 1 + varint_len(*i as u64),
        Value::Float(_) => 9,
        Value::Text(t) => delimited_len(t.len()),
        Value::Bytes(b) => delimited_len(b.len()),
    }
}

fn put_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => {
            put_key(out, 1, WIRE_VARINT);
            out.push(1);
        }
        Value::Bool(b) => {
            put_key(out, 2, WIRE_VARINT);
            out.push(u8::from(*b));
        }
        Value::Int(i) => {
            put_key(out, 3, WIRE_VARINT);
            put_varint(out, *i as u64);
        }
        Value::Float(x) => {
            put_key(out, 4, WIRE_FIXED64);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Value::Text(t) => put_delimited(out, 5, t.as_bytes()),
        Value::Bytes(b) => put_delimited(out, 6, b),
    }
}

fn row_len(args: &[Vec<Value>], row: usize) -> usize {
    args.iter()
        .map(|column| delimited_len(value_len(&column[row])))
        .sum()
}

/// `rows` rows of `args` as repeated `Row` fields numbered `field`.
fn put_rows(out: &mut Vec<u8>, field: u32, args: &[Vec<Value>], rows: usize, lens: &[usize]) {
    for (row, len) in lens.iter().enumerate().take(rows) {
        put_key(out, field, WIRE_LEN);
        put_varint(out, *len as u64);
        for column in args {
            let value = &column[row];
            put_key(out, 1, WIRE_LEN);
            put_varint(out, value_len(value) as u64);
            put_value(out, value);
        }
    }
}

fn request(
    function: &str,
    call_field: u32,
    body_len: usize,
    body: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(delimited_len(function.len()) + delimited_len(body_len));
    if !function.is_empty() {
        put_delimited(&mut out, 1, function.as_bytes());
    }
    put_key(&mut out, call_field, WIRE_LEN);
    put_varint(&mut out, body_len as u64);
    let start = out.len();
    body(&mut out);
    debug_assert_eq!(
        out.len() - start,
        body_len,
        "computed and written lengths agree"
    );
    out
}

/// `CallRequest { function, scalar: ScalarBatch { rows } }`.
pub fn scalar_request(function: &str, args: &[Vec<Value>], rows: usize) -> Vec<u8> {
    let lens: Vec<usize> = (0..rows).map(|row| row_len(args, row)).collect();
    let body_len = lens.iter().map(|len| delimited_len(*len)).sum();
    request(function, 2, body_len, |out| {
        put_rows(out, 1, args, rows, &lens)
    })
}

/// `CallRequest { function, agg_update: AggUpdate { state, rows } }`.
pub fn agg_update_request(
    function: &str,
    state: &Bytes,
    args: &[Vec<Value>],
    rows: usize,
) -> Vec<u8> {
    let lens: Vec<usize> = (0..rows).map(|row| row_len(args, row)).collect();
    let state_len = if state.is_empty() {
        0
    } else {
        delimited_len(state.len())
    };
    let body_len = state_len + lens.iter().map(|len| delimited_len(*len)).sum::<usize>();
    request(function, 4, body_len, |out| {
        if !state.is_empty() {
            put_delimited(out, 1, state);
        }
        put_rows(out, 2, args, rows, &lens);
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
            assert_eq!(
                scalar_request("get", &args, n),
                expected,
                "scalar, {n} rows"
            );
            for state in [Bytes::new(), Bytes::from_static(b"state")] {
                let expected = abi::CallRequest {
                    function: "p95".into(),
                    call: Some(abi::call_request::Call::AggUpdate(abi::AggUpdate {
                        state: state.clone(),
                        rows: rows(&args, n),
                    })),
                }
                .encode_to_vec();
                assert_eq!(
                    agg_update_request("p95", &state, &args, n),
                    expected,
                    "agg_update, {n} rows"
                );
            }
        }
    }
}
