//! SQL values as plugin functions see them, and their conversions to Rust types.

use std::fmt;

use ebb_proto::plugin::v1 as proto;
use ebb_proto::wire::WireValue;
use proto::value::Kind;

/// One SQL value crossing the ABI; mirrors `ebb.plugin.v1.Value`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// A 64-bit signed integer.
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// UTF-8 text.
    Text(String),
    /// Raw bytes (table `value` columns arrive this way).
    Bytes(Vec<u8>),
}

impl Value {
    /// The SQL-facing name of this value's type, as used in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Text(_) => "text",
            Value::Bytes(_) => "bytes",
        }
    }

    /// True for SQL NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Converts a copy of this value into `T` (see [`FromValue`] for the rules).
    pub fn get<T: FromValue>(&self) -> Result<T, FromValueError> {
        T::from_value(self.clone())
    }
}

/// A SQL value borrowed from the request (see [`crate::Plugin::scalar_ref`]):
/// text and bytes point into the call's input, so reading them allocates
/// nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// A 64-bit signed integer.
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// UTF-8 text.
    Text(&'a str),
    /// Raw bytes.
    Bytes(&'a [u8]),
}

impl<'a> ValueRef<'a> {
    /// The SQL-facing name of this value's type, as used in error messages.
    pub fn type_name(&self) -> &'static str {
        self.to_owned().type_name()
    }

    /// An owned copy.
    pub fn to_owned(&self) -> Value {
        match *self {
            ValueRef::Null => Value::Null,
            ValueRef::Bool(b) => Value::Bool(b),
            ValueRef::Int(i) => Value::Int(i),
            ValueRef::Float(x) => Value::Float(x),
            ValueRef::Text(s) => Value::Text(s.to_owned()),
            ValueRef::Bytes(b) => Value::Bytes(b.to_vec()),
        }
    }
}

impl<'a> From<WireValue<'a>> for ValueRef<'a> {
    fn from(value: WireValue<'a>) -> Self {
        match value {
            WireValue::Null => ValueRef::Null,
            WireValue::Bool(b) => ValueRef::Bool(b),
            WireValue::Int(i) => ValueRef::Int(i),
            WireValue::Float(x) => ValueRef::Float(x),
            WireValue::Text(s) => ValueRef::Text(s),
            WireValue::Bytes(b) => ValueRef::Bytes(b),
        }
    }
}

impl<'a> From<ValueRef<'a>> for WireValue<'a> {
    fn from(value: ValueRef<'a>) -> Self {
        match value {
            ValueRef::Null => WireValue::Null,
            ValueRef::Bool(b) => WireValue::Bool(b),
            ValueRef::Int(i) => WireValue::Int(i),
            ValueRef::Float(x) => WireValue::Float(x),
            ValueRef::Text(s) => WireValue::Text(s),
            ValueRef::Bytes(b) => WireValue::Bytes(b),
        }
    }
}

impl Value {
    /// This value, borrowed.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Bool(b) => ValueRef::Bool(*b),
            Value::Int(i) => ValueRef::Int(*i),
            Value::Float(x) => ValueRef::Float(*x),
            Value::Text(s) => ValueRef::Text(s),
            Value::Bytes(b) => ValueRef::Bytes(b),
        }
    }
}

/// A proto `Value` with no field set; the ABI forbids it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmptyValueError;

impl fmt::Display for EmptyValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Value has no field set")
    }
}

impl std::error::Error for EmptyValueError {}

impl TryFrom<proto::Value> for Value {
    type Error = EmptyValueError;

    fn try_from(value: proto::Value) -> Result<Self, Self::Error> {
        Ok(match value.kind.ok_or(EmptyValueError)? {
            Kind::Null(_) => Value::Null,
            Kind::Boolean(b) => Value::Bool(b),
            Kind::Int(i) => Value::Int(i),
            Kind::Float(x) => Value::Float(x),
            Kind::Text(s) => Value::Text(s),
            Kind::Bytes(b) => Value::Bytes(b.to_vec()),
        })
    }
}

impl From<Value> for proto::Value {
    fn from(value: Value) -> Self {
        let kind = match value {
            Value::Null => Kind::Null(true),
            Value::Bool(b) => Kind::Boolean(b),
            Value::Int(i) => Kind::Int(i),
            Value::Float(x) => Kind::Float(x),
            Value::Text(s) => Kind::Text(s),
            Value::Bytes(b) => Kind::Bytes(b.into()),
        };
        proto::Value { kind: Some(kind) }
    }
}

/// Why a [`Value`] did not convert to the Rust type a function asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromValueError {
    /// The value was NULL and the type is not an `Option`. Scalar functions
    /// then return NULL for the row instead of failing (SQL convention).
    Null,
    /// The value has another type.
    Mismatch {
        /// The type the function expected.
        expected: &'static str,
        /// What it got.
        found: &'static str,
    },
}

impl fmt::Display for FromValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FromValueError::Null => f.write_str("expected a value, got NULL"),
            FromValueError::Mismatch { expected, found } => {
                write!(f, "expected {expected}, got {found}")
            }
        }
    }
}

impl std::error::Error for FromValueError {}

impl From<FromValueError> for String {
    fn from(error: FromValueError) -> Self {
        error.to_string()
    }
}

fn mismatch<T>(expected: &'static str, found: &Value) -> Result<T, FromValueError> {
    match found {
        Value::Null => Err(FromValueError::Null),
        other => Err(FromValueError::Mismatch {
            expected,
            found: other.type_name(),
        }),
    }
}

/// A Rust type a function argument can be read as.
///
/// Conversions are strict except where SQLite is lenient in an obvious way:
/// an int reads as `f64`, UTF-8 bytes read as `String` (SQL `value` columns
/// arrive as bytes), and text reads as `Vec<u8>`. NULL reads only as `None`.
pub trait FromValue: Sized {
    /// Converts `value`, naming the expected type on a mismatch.
    fn from_value(value: Value) -> Result<Self, FromValueError>;
}

impl FromValue for Value {
    #[inline]
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        Ok(value)
    }
}

impl FromValue for i64 {
    #[inline]
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Int(i) => Ok(i),
            other => mismatch("int", &other),
        }
    }
}

impl FromValue for f64 {
    #[inline]
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Float(x) => Ok(x),
            Value::Int(i) => Ok(i as f64),
            other => mismatch("float", &other),
        }
    }
}

impl FromValue for bool {
    #[inline]
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Bool(b) => Ok(b),
            other => mismatch("bool", &other),
        }
    }
}

impl FromValue for String {
    #[inline]
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Text(s) => Ok(s),
            Value::Bytes(b) => String::from_utf8(b).map_err(|_| FromValueError::Mismatch {
                expected: "text",
                found: "bytes that are not UTF-8",
            }),
            other => mismatch("text", &other),
        }
    }
}

impl FromValue for Vec<u8> {
    #[inline]
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Bytes(b) => Ok(b),
            Value::Text(s) => Ok(s.into_bytes()),
            other => mismatch("bytes", &other),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    #[inline]
    fn from_value(value: Value) -> Result<Self, FromValueError> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// A Rust type a function can return as a SQL value.
pub trait IntoValue {
    /// Converts `self`; `None` becomes NULL.
    fn into_value(self) -> Value;
}

impl IntoValue for Value {
    #[inline]
    fn into_value(self) -> Value {
        self
    }
}

impl IntoValue for i64 {
    #[inline]
    fn into_value(self) -> Value {
        Value::Int(self)
    }
}

impl IntoValue for f64 {
    #[inline]
    fn into_value(self) -> Value {
        Value::Float(self)
    }
}

impl IntoValue for bool {
    #[inline]
    fn into_value(self) -> Value {
        Value::Bool(self)
    }
}

impl IntoValue for String {
    #[inline]
    fn into_value(self) -> Value {
        Value::Text(self)
    }
}

impl IntoValue for &str {
    #[inline]
    fn into_value(self) -> Value {
        Value::Text(self.to_owned())
    }
}

impl IntoValue for Vec<u8> {
    #[inline]
    fn into_value(self) -> Value {
        Value::Bytes(self)
    }
}

impl<T: IntoValue> IntoValue for Option<T> {
    #[inline]
    fn into_value(self) -> Value {
        self.map_or(Value::Null, IntoValue::into_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proto_round_trip_keeps_every_kind() {
        let values = [
            Value::Null,
            Value::Bool(true),
            Value::Int(-7),
            Value::Float(2.5),
            Value::Text("héllo".into()),
            Value::Bytes(vec![0, 255]),
        ];
        for value in values {
            let wire: proto::Value = value.clone().into();
            assert_eq!(Value::try_from(wire), Ok(value));
        }
    }

    #[test]
    fn proto_value_without_kind_is_an_error() {
        assert_eq!(
            Value::try_from(proto::Value { kind: None }),
            Err(EmptyValueError)
        );
    }

    #[test]
    fn lenient_conversions_follow_sqlite() {
        assert_eq!(Value::Int(3).get::<f64>(), Ok(3.0));
        assert_eq!(
            Value::Bytes(b"abc".to_vec()).get::<String>(),
            Ok("abc".into())
        );
        assert_eq!(
            Value::Text("ab".into()).get::<Vec<u8>>(),
            Ok(b"ab".to_vec())
        );
        assert!(Value::Bytes(vec![0xff]).get::<String>().is_err());
    }

    #[test]
    fn mismatch_names_the_expected_type() {
        let error = Value::Text("x".into()).get::<i64>().unwrap_err();
        assert_eq!(error.to_string(), "expected int, got text");
        assert_eq!(
            Value::Float(1.0).get::<i64>().unwrap_err().to_string(),
            "expected int, got float"
        );
    }

    #[test]
    fn null_reads_only_as_none() {
        assert_eq!(Value::Null.get::<i64>(), Err(FromValueError::Null));
        assert_eq!(Value::Null.get::<Option<i64>>(), Ok(None));
        assert_eq!(Value::Int(1).get::<Option<i64>>(), Ok(Some(1)));
        assert_eq!(None::<i64>.into_value(), Value::Null);
        assert_eq!(Some("a").into_value(), Value::Text("a".into()));
    }
}
