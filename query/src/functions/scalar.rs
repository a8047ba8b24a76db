//! The first built-in scalar functions, with SQLite's results: `length`,
//! `lower`, `upper`, `substr`, `starts_with`, `coalesce`, `nullif`; and the
//! lookup of every built-in scalar by name.

use std::sync::Arc;

use bytes::Bytes;

use super::{Arity, FunctionError, ScalarFunction};
use crate::value::{SqlType, Value};

/// The built-in scalar function called `name`, if any.
pub(super) fn builtin(name: &str) -> Option<Arc<dyn ScalarFunction>> {
    let name = name.to_ascii_lowercase();
    let function = match name.as_str() {
        "length" => Builtin::Length,
        "lower" => Builtin::Lower,
        "upper" => Builtin::Upper,
        "substr" | "substring" => Builtin::Substr,
        "starts_with" => Builtin::StartsWith,
        "coalesce" => Builtin::Coalesce,
        "nullif" => Builtin::NullIf,
        _ => {
            return super::math::builtin(&name)
                .or_else(|| super::text::builtin(&name))
                .or_else(|| super::datetime::builtin(&name))
                .or_else(|| super::json::builtin(&name));
        }
    };
    Some(Arc::new(function))
}

/// The built-in scalar functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Builtin {
    /// Characters of text, bytes of bytes.
    Length,
    /// ASCII lower-case.
    Lower,
    /// ASCII upper-case.
    Upper,
    /// 1-based substring (characters of text, bytes of bytes).
    Substr,
    /// Whether the first argument starts with the second.
    StartsWith,
    /// The first non-NULL argument.
    Coalesce,
    /// NULL when both arguments are equal, else the first.
    NullIf,
}

fn map_text(value: &Value, f: fn(&str) -> String) -> Value {
    match value {
        Value::Null => Value::Null,
        Value::Text(t) => Value::text(f(t)),
        other => match other.to_text() {
            Value::Text(t) => Value::text(f(&t)),
            _ => Value::Null,
        },
    }
}

/// SQLite's substr on a sequence of `len` units; returns `(start, count)`.
fn substr_window(len: i64, start: i64, count: Option<i64>) -> (usize, usize) {
    let mut p1 = start;
    let (mut p2, negative) = match count {
        Some(c) if c < 0 => (-c, true),
        Some(c) => (c, false),
        None => (i64::MAX / 4, false),
    };
    if p1 < 0 {
        p1 += len;
        if p1 < 0 {
            p2 += p1;
            if p2 < 0 {
                p2 = 0;
            }
            p1 = 0;
        }
    } else if p1 > 0 {
        p1 -= 1;
    } else if p2 > 0 {
        p2 -= 1;
    }
    if negative {
        p1 -= p2;
        if p1 < 0 {
            p2 += p1;
            p1 = 0;
        }
    }
    let p1 = p1.clamp(0, len);
    let end = (p1 + p2.max(0)).min(len);
    (p1 as usize, (end - p1).max(0) as usize)
}

fn integer_arg(value: &Value) -> Option<i64> {
    match value.to_numeric() {
        Value::Int(i) => Some(i),
        Value::Float(f) => Some(f as i64),
        _ => None,
    }
}

fn substr(args: &[&Value]) -> Value {
    let (Some(start), count) = (
        args.get(1).and_then(|v| integer_arg(v)),
        args.get(2).map(|v| integer_arg(v)),
    ) else {
        return Value::Null;
    };
    let count = match count {
        Some(None) => return Value::Null,
        Some(Some(c)) => Some(c),
        None => None,
    };
    match args[0] {
        Value::Null => Value::Null,
        // SQLite quirk kept for compatibility: substr of an empty blob is NULL.
        Value::Bytes(b) if b.is_empty() => Value::Null,
        Value::Bytes(b) => {
            let (from, n) = substr_window(b.len() as i64, start, count);
            Value::Bytes(b.slice(from..from + n))
        }
        other => {
            let Value::Text(text) = other.to_text() else {
                return Value::Null;
            };
            let chars = text.chars().count() as i64;
            let (from, n) = substr_window(chars, start, count);
            Value::text(text.chars().skip(from).take(n).collect::<String>())
        }
    }
}

fn starts_with(args: &[&Value]) -> Value {
    let bytes = |v: &Value| -> Option<Bytes> {
        match v {
            Value::Null => None,
            Value::Bytes(b) => Some(b.clone()),
            Value::Text(t) => Some(Bytes::copy_from_slice(t.as_bytes())),
            other => Some(Bytes::from(other.render().into_bytes())),
        }
    };
    match (bytes(args[0]), bytes(args[1])) {
        (Some(a), Some(b)) => Value::Bool(a.starts_with(&b)),
        _ => Value::Null,
    }
}

impl Builtin {
    fn eval(self, args: &[&Value]) -> Value {
        match self {
            Builtin::Length => match args[0] {
                Value::Null => Value::Null,
                Value::Text(t) => Value::Int(t.chars().count() as i64),
                Value::Bytes(b) => Value::Int(b.len() as i64),
                other => Value::Int(other.render().chars().count() as i64),
            },
            Builtin::Lower => map_text(args[0], str::to_ascii_lowercase),
            Builtin::Upper => map_text(args[0], str::to_ascii_uppercase),
            Builtin::Substr => substr(args),
            Builtin::StartsWith => starts_with(args),
            Builtin::Coalesce => args
                .iter()
                .find(|v| !v.is_null())
                .map_or(Value::Null, |v| (*v).clone()),
            Builtin::NullIf => match args[0].sql_cmp(args[1]) {
                Some(std::cmp::Ordering::Equal) => Value::Null,
                _ => args[0].clone(),
            },
        }
    }
}

impl ScalarFunction for Builtin {
    fn name(&self) -> &str {
        match self {
            Builtin::Length => "length",
            Builtin::Lower => "lower",
            Builtin::Upper => "upper",
            Builtin::Substr => "substr",
            Builtin::StartsWith => "starts_with",
            Builtin::Coalesce => "coalesce",
            Builtin::NullIf => "nullif",
        }
    }

    fn arity(&self) -> Arity {
        match self {
            Builtin::Length | Builtin::Lower | Builtin::Upper => Arity::Exact(1),
            Builtin::Substr => Arity::Range(2, 3),
            Builtin::StartsWith | Builtin::NullIf => Arity::Exact(2),
            Builtin::Coalesce => Arity::AtLeast(2),
        }
    }

    fn return_type(&self) -> SqlType {
        match self {
            Builtin::Length => SqlType::Integer,
            Builtin::Lower | Builtin::Upper => SqlType::Text,
            Builtin::StartsWith => SqlType::Boolean,
            Builtin::Substr | Builtin::Coalesce | Builtin::NullIf => SqlType::Any,
        }
    }

    fn is_builtin(&self) -> bool {
        true
    }

    fn call(&self, args: &[Vec<Value>], rows: usize) -> Result<Vec<Value>, FunctionError> {
        let mut row: Vec<&Value> = Vec::with_capacity(args.len());
        Ok((0..rows)
            .map(|i| {
                row.clear();
                row.extend(args.iter().map(|column| &column[i]));
                self.eval(&row)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(f: Builtin, args: Vec<Value>) -> Value {
        let columns: Vec<Vec<Value>> = args.into_iter().map(|v| vec![v]).collect();
        f.call(&columns, 1).unwrap().remove(0)
    }

    #[test]
    fn substr_follows_sqlite() {
        let s = || Value::text("hello");
        assert_eq!(
            call(Builtin::Substr, vec![s(), Value::Int(2), Value::Int(3)]),
            Value::text("ell")
        );
        assert_eq!(
            call(Builtin::Substr, vec![s(), Value::Int(0), Value::Int(2)]),
            Value::text("h")
        );
        assert_eq!(
            call(Builtin::Substr, vec![s(), Value::Int(-3)]),
            Value::text("llo")
        );
        assert_eq!(
            call(Builtin::Substr, vec![s(), Value::Int(-7), Value::Int(3)]),
            Value::text("h")
        );
        assert_eq!(
            call(Builtin::Substr, vec![s(), Value::Int(3), Value::Int(-2)]),
            Value::text("he")
        );
        assert_eq!(
            call(Builtin::Substr, vec![s(), Value::Int(9)]),
            Value::text("")
        );
        assert_eq!(
            call(
                Builtin::Substr,
                vec![Value::text("héllo"), Value::Int(2), Value::Int(1)]
            ),
            Value::text("é")
        );
        assert_eq!(
            call(
                Builtin::Substr,
                vec![
                    Value::Bytes(Bytes::from_static(b"\x00\x01\x02")),
                    Value::Int(2)
                ]
            ),
            Value::Bytes(Bytes::from_static(b"\x01\x02"))
        );
        assert_eq!(
            call(Builtin::Substr, vec![Value::Null, Value::Int(1)]),
            Value::Null
        );
    }

    #[test]
    fn length_counts_characters_of_text_and_bytes_of_bytes() {
        assert_eq!(
            call(Builtin::Length, vec![Value::text("héllo")]),
            Value::Int(5)
        );
        assert_eq!(
            call(Builtin::Length, vec![Value::Bytes(Bytes::from("héllo"))]),
            Value::Int(6)
        );
        assert_eq!(call(Builtin::Length, vec![Value::Int(-12)]), Value::Int(3));
        assert_eq!(call(Builtin::Length, vec![Value::Null]), Value::Null);
    }

    #[test]
    fn case_and_prefix_and_coalesce() {
        assert_eq!(
            call(Builtin::Upper, vec![Value::text("abé")]),
            Value::text("ABé")
        );
        assert_eq!(
            call(
                Builtin::StartsWith,
                vec![Value::text("user:1"), Value::text("user:")]
            ),
            Value::Bool(true)
        );
        assert_eq!(
            call(Builtin::StartsWith, vec![Value::Null, Value::text("u")]),
            Value::Null
        );
        assert_eq!(
            call(
                Builtin::Coalesce,
                vec![Value::Null, Value::Int(2), Value::Int(3)]
            ),
            Value::Int(2)
        );
    }
}
