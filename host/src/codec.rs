//! The SQL value codec: SQL values to and from the protobuf `Value` (shared
//! by cursors and the plugin ABI), its hand-written wire form, and JSON.
//!
//! A leaf of the engine: it uses only `ebb_query`'s values and `ebb_proto`,
//! so the executor and the plugin sandbox (and the HTTP edge and the CLI)
//! can all use it without depending on one another.

use base64::Engine as _;
use bytes::Bytes;
use ebb_proto::plugin::v1 as pb;
use ebb_proto::wire::WireValue;
use ebb_query::Value;
use serde_json::{Value as Json, json};

/// A SQL value as a protobuf value.
pub fn to_proto(value: &Value) -> pb::Value {
    use pb::value::Kind;
    let kind = match value {
        Value::Null => Kind::Null(true),
        Value::Bool(b) => Kind::Boolean(*b),
        Value::Int(i) => Kind::Int(*i),
        Value::Float(f) => Kind::Float(*f),
        Value::Text(t) => Kind::Text(t.to_string()),
        Value::Bytes(b) => Kind::Bytes(b.clone()),
    };
    pb::Value { kind: Some(kind) }
}

/// A value the codec cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// A protobuf `Value` with no field set.
    #[error("a value with no field set")]
    Empty,
    /// A JSON number that is neither an i64 nor an f64.
    #[error("number out of range")]
    NumberOutOfRange,
    /// `{"base64": ...}` whose value is not a string.
    #[error("base64 must be a string")]
    Base64NotString,
    /// `{"base64": "..."}` that is not base64.
    #[error("bad base64: {0}")]
    BadBase64(String),
    /// JSON that is not a parameter value (an array, another object).
    #[error(
        "{0} is not a parameter value (use null, a boolean, a number, a string or {{\"base64\": ...}})"
    )]
    NotAValue(String),
}

/// A protobuf value as a SQL value; a value with no field set is refused.
pub fn from_proto(value: &pb::Value) -> Result<Value, ValueError> {
    use pb::value::Kind;
    Ok(match &value.kind {
        None => return Err(ValueError::Empty),
        Some(Kind::Null(_)) => Value::Null,
        Some(Kind::Boolean(b)) => Value::Bool(*b),
        Some(Kind::Int(i)) => Value::Int(*i),
        Some(Kind::Float(f)) => Value::Float(*f),
        Some(Kind::Text(t)) => Value::text(t.as_str()),
        Some(Kind::Bytes(b)) => Value::Bytes(b.clone()),
    })
}

/// `value` as the wire writes it.
pub fn wire_value(value: &Value) -> WireValue<'_> {
    match value {
        Value::Null => WireValue::Null,
        Value::Bool(b) => WireValue::Bool(*b),
        Value::Int(i) => WireValue::Int(*i),
        Value::Float(x) => WireValue::Float(*x),
        Value::Text(t) => WireValue::Text(t),
        Value::Bytes(b) => WireValue::Bytes(b),
    }
}

/// A SQL value read from the wire (text and bytes copied out).
pub fn from_wire(value: WireValue<'_>) -> Value {
    match value {
        WireValue::Null => Value::Null,
        WireValue::Bool(b) => Value::Bool(b),
        WireValue::Int(i) => Value::Int(i),
        WireValue::Float(x) => Value::Float(x),
        WireValue::Text(t) => Value::text(t),
        WireValue::Bytes(b) => Value::Bytes(Bytes::copy_from_slice(b)),
    }
}

/// A result value as JSON: bytes as a string when valid UTF-8, else
/// `{"base64": ...}`; non-finite floats as null.
pub fn to_json(value: &Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Bool(b) => json!(b),
        Value::Int(i) => json!(i),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Value::Text(t) => json!(t.as_ref()),
        Value::Bytes(b) => bytes_json(b),
    }
}

/// Bytes as JSON: a string when valid UTF-8, else `{"base64": ...}` (the
/// one rule for values in query results, dead letters and the CLI).
pub fn bytes_json(bytes: &[u8]) -> Json {
    match std::str::from_utf8(bytes) {
        Ok(text) => json!(text),
        Err(_) => json!({ "base64": base64::engine::general_purpose::STANDARD.encode(bytes) }),
    }
}

/// A request parameter from JSON: null, boolean, integer, float, string
/// (text) or `{"base64": ...}` (bytes).
pub fn from_json(value: &Json) -> Result<Value, ValueError> {
    Ok(match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().ok_or(ValueError::NumberOutOfRange)?),
        },
        Json::String(s) => Value::text(s.as_str()),
        Json::Object(map) if map.len() == 1 && map.contains_key("base64") => {
            let text = map["base64"].as_str().ok_or(ValueError::Base64NotString)?;
            Value::Bytes(Bytes::from(
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|e| ValueError::BadBase64(e.to_string()))?,
            ))
        }
        other => return Err(ValueError::NotAValue(other.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_proto_and_json() {
        let values = [
            Value::Null,
            Value::Bool(true),
            Value::Int(-3),
            Value::Float(2.5),
            Value::text("é"),
            Value::Bytes(Bytes::from_static(b"\xff\x00")),
        ];
        for value in &values {
            assert_eq!(&from_proto(&to_proto(value)).unwrap(), value);
            assert_eq!(&from_json(&to_json(value)).unwrap(), value);
        }
        assert_eq!(
            to_json(&Value::Bytes(Bytes::from_static(b"abc"))),
            json!("abc")
        );
        assert_eq!(
            from_proto(&pb::Value { kind: None }),
            Err(ValueError::Empty)
        );
        assert!(matches!(
            from_json(&json!([1])),
            Err(ValueError::NotAValue(_))
        ));
        assert_eq!(
            from_json(&json!({"base64": 1})),
            Err(ValueError::Base64NotString)
        );
        assert_eq!(
            from_json(&json!([1])).unwrap_err().to_string(),
            "[1] is not a parameter value (use null, a boolean, a number, a string or {\"base64\": ...})"
        );
    }
}
