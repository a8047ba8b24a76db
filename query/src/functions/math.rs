//! SQLite's numeric scalar functions: `abs`, `round`, `sign`, and the
//! multi-argument `min` and `max`.

use std::cmp::Ordering;
use std::sync::Arc;

use super::rowwise::RowFunction;
use super::{Arity, ScalarFunction, printf};
use crate::value::{SqlType, Value};

/// Every function of this module.
const FUNCTIONS: &[RowFunction] = &[
    RowFunction::new("abs", Arity::Exact(1), SqlType::Any, abs),
    RowFunction::new("round", Arity::Range(1, 2), SqlType::Any, round),
    RowFunction::new("sign", Arity::Exact(1), SqlType::Any, sign),
    RowFunction::new("min", Arity::AtLeast(2), SqlType::Any, min),
    RowFunction::new("max", Arity::AtLeast(2), SqlType::Any, max),
];

/// The numeric built-in called `name` (lower-case), if any.
pub(super) fn builtin(name: &str) -> Option<Arc<dyn ScalarFunction>> {
    super::rowwise::lookup(FUNCTIONS, name)
}

/// The value as SQLite's `sqlite3_value_double` reads it: NULL and text
/// without a numeric prefix are 0.0.
pub(super) fn to_real(value: &Value) -> f64 {
    match value.to_numeric() {
        Value::Int(i) => i as f64,
        Value::Float(f) => f,
        _ => 0.0,
    }
}

/// `abs(X)`: integers stay integers (`abs(-9223372036854775808)` is an
/// integer overflow), NULL stays NULL, anything else is read as a float.
fn abs(args: &[&Value]) -> Result<Value, String> {
    Ok(match args[0] {
        Value::Null => Value::Null,
        Value::Bool(b) => Value::Int(i64::from(*b)),
        Value::Int(i) => match i.checked_abs() {
            Some(a) => Value::Int(a),
            None => return Err("integer overflow".into()),
        },
        other => {
            let r = to_real(other);
            // As SQLite: only negative values flip, so -0.0 stays -0.0.
            Value::Float(if r < 0.0 { -r } else { r })
        }
    })
}

/// `round(X [, N])`: a float rounded half away from zero to N (0 to 30)
/// decimals, through SQLite's own decimal rendering.
fn round(args: &[&Value]) -> Result<Value, String> {
    let mut digits = 0;
    if let Some(n) = args.get(1) {
        if n.is_null() {
            return Ok(Value::Null);
        }
        digits = n.to_integer().clamp(0, 30);
    }
    if args[0].is_null() {
        return Ok(Value::Null);
    }
    let r = to_real(args[0]);
    const WHOLE: f64 = 4_503_599_627_370_496.0;
    if !(-WHOLE..=WHOLE).contains(&r) {
        // No fractional part to round (or infinite).
        return Ok(Value::Float(r));
    }
    if digits == 0 {
        let shifted = r + if r < 0.0 { -0.5 } else { 0.5 };
        return Ok(Value::Float(shifted as i64 as f64));
    }
    let text = printf::format(b"%!.*f", &[&Value::Int(digits), &Value::Float(r)])?;
    let parsed = std::str::from_utf8(&text)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .ok_or_else(|| format!("cannot read back {}", String::from_utf8_lossy(&text)))?;
    Ok(Value::Float(parsed))
}

/// Whether `text` is entirely a number (spaces around allowed), as
/// SQLite's `sqlite3AtoF` accepts it: `[+-]digits[.digits][e[+-]digits]`
/// or `[+-].digits[...]`. Text ends at its first NUL, as in C.
fn is_numeric_text(text: &[u8]) -> bool {
    let text = text.split(|b| *b == 0).next().unwrap_or_default();
    let space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r');
    let mut i = text.iter().take_while(|b| space(b)).count();
    let digits_from = |i: usize| text[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    if matches!(text.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let whole = digits_from(i);
    i += whole;
    let mut fraction = 0;
    if text.get(i) == Some(&b'.') {
        fraction = digits_from(i + 1);
        i += 1 + fraction;
    }
    if whole + fraction == 0 {
        return false;
    }
    if matches!(text.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(text.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exponent = digits_from(j);
        if exponent > 0 {
            i = j + exponent;
        }
    }
    text[i..].iter().all(space)
}

/// `sign(X)`: -1, 0 or +1 for a number or text that is entirely a number;
/// NULL for anything else (blobs, other text, NULL).
fn sign(args: &[&Value]) -> Result<Value, String> {
    let x = match args[0] {
        Value::Null | Value::Bytes(_) => return Ok(Value::Null),
        Value::Text(t) if !is_numeric_text(t.as_bytes()) => return Ok(Value::Null),
        other => to_real(other),
    };
    Ok(Value::Int(if x < 0.0 {
        -1
    } else if x > 0.0 {
        1
    } else {
        0
    }))
}

/// The argument SQLite's `minmaxFunc` picks: NULL if any is NULL; among
/// equal values `min` takes the last and `max` the first, as SQLite does.
fn pick(args: &[&Value], replace: fn(Ordering) -> bool) -> Value {
    let mut best = args[0];
    for arg in args {
        if arg.is_null() {
            return Value::Null;
        }
    }
    for arg in &args[1..] {
        if replace(best.total_cmp(arg)) {
            best = arg;
        }
    }
    best.clone()
}

/// Scalar `min(X, Y, ...)`.
fn min(args: &[&Value]) -> Result<Value, String> {
    Ok(pick(args, |best_vs_arg| best_vs_arg != Ordering::Less))
}

/// Scalar `max(X, Y, ...)`.
fn max(args: &[&Value]) -> Result<Value, String> {
    Ok(pick(args, |best_vs_arg| best_vs_arg == Ordering::Less))
}
