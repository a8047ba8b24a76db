//! Batch evaluation of planned expressions over rows, with SQLite's NULL,
//! comparison and arithmetic rules.

use std::cmp::Ordering;

use crate::expr::{BinaryOp, CastType, Column, Expr, UnaryOp};
use crate::functions::FunctionError;
use crate::meter::{EvalError, Meter, heap_bytes};
use crate::value::Value;

/// What expressions read: table columns of a scanned record, or group keys
/// and aggregate results of a group after aggregation.
pub trait RowSource {
    /// A column of the record.
    fn column(&self, column: Column) -> Value;
    /// GROUP BY value `i` (groups only).
    fn group_key(&self, _i: usize) -> Value {
        Value::Null
    }
    /// Aggregate result `i` (groups only).
    fn agg_result(&self, _i: usize) -> Value {
        Value::Null
    }
}

/// A literal's copy for one batch's column. Text and bytes are copied once
/// per batch so the batch's clones count references on a copy of its own:
/// cloning the plan's one shared copy from every thread that runs a page
/// made the threads contend on its reference count.
fn batch_copy(value: &Value) -> Value {
    match value {
        Value::Text(t) => Value::text(&**t),
        Value::Bytes(b) => Value::Bytes(bytes::Bytes::copy_from_slice(b)),
        other => other.clone(),
    }
}

/// Evaluate `expr` for every row; scalar functions are called once per batch.
/// Every text or blob value built is charged to `meter`; a concatenation is
/// refused before it allocates past the meter's limit.
pub fn eval_batch<R: RowSource>(
    expr: &Expr,
    rows: &[R],
    meter: &mut Meter,
) -> Result<Vec<Value>, EvalError> {
    let n = rows.len();
    Ok(match expr {
        Expr::Literal(v) => {
            meter.charge(heap_bytes(v))?;
            vec![batch_copy(v); n]
        }
        Expr::Column(c) => rows.iter().map(|r| r.column(*c)).collect(),
        Expr::GroupKey(i) => rows.iter().map(|r| r.group_key(*i)).collect(),
        Expr::AggResult(i) => rows.iter().map(|r| r.agg_result(*i)).collect(),
        Expr::Unary { op, expr } => eval_batch(expr, rows, meter)?
            .into_iter()
            .map(|v| unary(*op, v))
            .collect(),
        Expr::Binary {
            op: BinaryOp::Concat,
            left,
            right,
        } => {
            let l = eval_batch(left, rows, meter)?;
            let r = eval_batch(right, rows, meter)?;
            l.into_iter()
                .zip(r)
                .map(|(a, b)| concat(&a, &b, meter))
                .collect::<Result<_, _>>()?
        }
        Expr::Binary { op, left, right } => {
            let l = eval_batch(left, rows, meter)?;
            let r = eval_batch(right, rows, meter)?;
            let (la, ra) = (is_key(left), is_key(right));
            l.into_iter()
                .zip(r)
                .map(|(a, b)| binary(*op, a, b, la, ra))
                .collect()
        }
        Expr::IsNull { expr, negated } => eval_batch(expr, rows, meter)?
            .into_iter()
            .map(|v| Value::Bool(v.is_null() != *negated))
            .collect(),
        Expr::InList {
            expr,
            list,
            negated,
        } => {
            let subject = eval_batch(expr, rows, meter)?;
            let key = is_key(expr);
            let candidates: Vec<Vec<Value>> = list
                .iter()
                .map(|e| eval_batch(e, rows, meter))
                .collect::<Result<_, _>>()?;
            subject
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    let mut outcome = Some(false);
                    for candidate in &candidates {
                        match compare(&v, &candidate[i], key, false) {
                            None => outcome = None,
                            Some(Ordering::Equal) => {
                                outcome = Some(true);
                                break;
                            }
                            Some(_) => {}
                        }
                    }
                    bool_value(outcome.map(|found| found != *negated))
                })
                .collect()
        }
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let subject = eval_batch(expr, rows, meter)?;
            let lows = eval_batch(low, rows, meter)?;
            let highs = eval_batch(high, rows, meter)?;
            let key = is_key(expr);
            subject
                .into_iter()
                .zip(lows.into_iter().zip(highs))
                .map(|(v, (lo, hi))| {
                    let above = compare(&v, &lo, key, false).map(Ordering::is_ge);
                    let below = compare(&v, &hi, key, false).map(Ordering::is_le);
                    let inside = and3(above, below);
                    bool_value(inside.map(|b| b != *negated))
                })
                .collect()
        }
        Expr::Like {
            expr,
            pattern,
            negated,
        } => {
            let subject = eval_batch(expr, rows, meter)?;
            let patterns = eval_batch(pattern, rows, meter)?;
            subject
                .into_iter()
                .zip(patterns)
                .map(|(v, p)| {
                    if v.is_null() || p.is_null() {
                        return Value::Null;
                    }
                    let text = v.render();
                    let pattern = p.render();
                    Value::Bool(like(&text, &pattern) != *negated)
                })
                .collect()
        }
        Expr::Cast { expr, to } => {
            let out: Vec<Value> = eval_batch(expr, rows, meter)?
                .into_iter()
                .map(|v| cast(v, *to))
                .collect();
            meter.charge_values(&out)?;
            out
        }
        Expr::Call { function, args } => {
            let columns: Vec<Vec<Value>> = args
                .iter()
                .map(|a| eval_batch(a, rows, meter))
                .collect::<Result<_, _>>()?;
            let out = function.call(&columns, n)?;
            if out.len() != n {
                return Err(FunctionError {
                    function: function.name().to_string(),
                    message: format!("returned {} values for {n} rows", out.len()),
                    plugin: function.is_plugin(),
                    host: false,
                }
                .into());
            }
            meter.charge_values(&out)?;
            out
        }
    })
}

/// Evaluate `expr` for one row.
pub fn eval_one<R: RowSource>(expr: &Expr, row: R, meter: &mut Meter) -> Result<Value, EvalError> {
    Ok(eval_batch(expr, std::slice::from_ref(&row), meter)?.remove(0))
}

/// `a || b` as SQLite: NULL if either is NULL, otherwise both as text. The
/// result's size is charged before it is built.
fn concat(a: &Value, b: &Value, meter: &mut Meter) -> Result<Value, EvalError> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    let (a, b) = (as_text(a), as_text(b));
    meter.charge(a.len() + b.len())?;
    let mut joined = String::with_capacity(a.len() + b.len());
    joined.push_str(&a);
    joined.push_str(&b);
    Ok(Value::text(joined))
}

/// A value's text form, borrowed where it already is text.
fn as_text(value: &Value) -> std::borrow::Cow<'_, str> {
    match value {
        Value::Text(t) => std::borrow::Cow::Borrowed(&**t),
        Value::Bytes(b) => String::from_utf8_lossy(b),
        other => std::borrow::Cow::Owned(other.render()),
    }
}

fn is_key(expr: &Expr) -> bool {
    matches!(expr, Expr::Column(Column::Key))
}

fn bool_value(b: Option<bool>) -> Value {
    b.map_or(Value::Null, Value::Bool)
}

fn and3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn or3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

/// Compare with SQLite's column affinity for `key` (TEXT): a number compared
/// with the key column is compared as text.
fn compare(a: &Value, b: &Value, a_is_key: bool, b_is_key: bool) -> Option<Ordering> {
    let numeric = |v: &Value| matches!(v, Value::Int(_) | Value::Float(_) | Value::Bool(_));
    if a_is_key && numeric(b) {
        return a.sql_cmp(&b.to_text());
    }
    if b_is_key && numeric(a) {
        return a.to_text().sql_cmp(b);
    }
    a.sql_cmp(b)
}

fn unary(op: UnaryOp, v: Value) -> Value {
    match op {
        UnaryOp::Not => bool_value(v.truth().map(|b| !b)),
        UnaryOp::Plus => v,
        UnaryOp::Neg => match v.to_numeric() {
            Value::Int(i) => i
                .checked_neg()
                .map_or(Value::Float(-(i as f64)), Value::Int),
            Value::Float(f) => Value::Float(-f),
            _ => Value::Null,
        },
    }
}

fn binary(op: BinaryOp, a: Value, b: Value, a_key: bool, b_key: bool) -> Value {
    match op {
        BinaryOp::And => bool_value(and3(a.truth(), b.truth())),
        BinaryOp::Or => bool_value(or3(a.truth(), b.truth())),
        BinaryOp::Eq => bool_value(compare(&a, &b, a_key, b_key).map(Ordering::is_eq)),
        BinaryOp::NotEq => bool_value(compare(&a, &b, a_key, b_key).map(Ordering::is_ne)),
        BinaryOp::Lt => bool_value(compare(&a, &b, a_key, b_key).map(Ordering::is_lt)),
        BinaryOp::LtEq => bool_value(compare(&a, &b, a_key, b_key).map(Ordering::is_le)),
        BinaryOp::Gt => bool_value(compare(&a, &b, a_key, b_key).map(Ordering::is_gt)),
        BinaryOp::GtEq => bool_value(compare(&a, &b, a_key, b_key).map(Ordering::is_ge)),
        BinaryOp::Concat => unreachable!("concatenation is evaluated with its meter"),
        BinaryOp::Rem => remainder(a, b),
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
            arithmetic(op, a.to_numeric(), b.to_numeric())
        }
    }
}

fn arithmetic(op: BinaryOp, a: Value, b: Value) -> Value {
    let float = |v: &Value| match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        _ => 0.0,
    };
    match (&a, &b) {
        (Value::Null, _) | (_, Value::Null) => Value::Null,
        (Value::Int(x), Value::Int(y)) => {
            let (x, y) = (*x, *y);
            let exact = match op {
                BinaryOp::Add => x.checked_add(y),
                BinaryOp::Sub => x.checked_sub(y),
                BinaryOp::Mul => x.checked_mul(y),
                BinaryOp::Div => {
                    if y == 0 {
                        return Value::Null;
                    }
                    x.checked_div(y)
                }
                _ => unreachable!("arithmetic operator"),
            };
            // SQLite turns integer overflow into a float result.
            exact.map_or_else(
                || arithmetic(op, Value::Float(x as f64), Value::Float(y as f64)),
                Value::Int,
            )
        }
        _ => {
            let (x, y) = (float(&a), float(&b));
            let result = match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul => x * y,
                BinaryOp::Div => {
                    if y == 0.0 {
                        return Value::Null;
                    }
                    x / y
                }
                _ => unreachable!("arithmetic operator"),
            };
            // SQLite answers NULL where the result is not a number (inf - inf).
            if result.is_nan() {
                Value::Null
            } else {
                Value::Float(result)
            }
        }
    }
}

/// `a % b` as SQLite computes it: on integers an integer; otherwise a float,
/// the remainder of both read as integers (text by its integer prefix, so
/// `'1e3' % 7` is 1).
fn remainder(a: Value, b: Value) -> Value {
    match (a.to_numeric(), b.to_numeric()) {
        (Value::Null, _) | (_, Value::Null) => Value::Null,
        (x, y) => {
            let (xi, yi) = (a.to_integer(), b.to_integer());
            if yi == 0 {
                return Value::Null;
            }
            // i64::MIN % -1 overflows; the remainder is 0.
            let r = xi.checked_rem(yi).unwrap_or(0);
            match (x, y) {
                (Value::Int(_), Value::Int(_)) => Value::Int(r),
                _ => Value::Float(r as f64),
            }
        }
    }
}

fn cast(v: Value, to: CastType) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    match to {
        CastType::Text => v.to_text(),
        CastType::Bytes => v.to_bytes(),
        CastType::Integer => Value::Int(v.to_integer()),
        CastType::Float => match v.to_numeric() {
            Value::Int(i) => Value::Float(i as f64),
            other => other,
        },
        CastType::Boolean => bool_value(v.truth()),
    }
}

/// Case-sensitive LIKE: `%` matches any run of characters, `_` one character.
/// As in SQLite, which reads both as C strings, each ends at its first NUL.
pub(crate) fn like(text: &str, pattern: &str) -> bool {
    let text = text.split('\0').next().unwrap_or_default();
    let pattern = pattern.split('\0').next().unwrap_or_default();
    let t: Vec<char> = text.chars().collect();
    let p: Vec<char> = pattern.chars().collect();
    let (mut ti, mut pi) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '%' {
            backtrack = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && (p[pi] == '_' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if let Some((star, matched)) = backtrack {
            pi = star + 1;
            ti = matched + 1;
            backtrack = Some((star, matched + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '%')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_is_case_sensitive_with_both_wildcards() {
        assert!(like("user:1", "user:%"));
        assert!(!like("User:1", "user:%"));
        assert!(like("abc", "a_c"));
        assert!(like("abc", "%"));
        assert!(like("", "%"));
        assert!(!like("abc", "a_"));
        assert!(like("aXbXc", "a%b%c"));
        assert!(like("héllo", "h_llo"));
        assert!(like("ab\0c", "ab") && like("", "\0x"));
    }

    #[test]
    fn arithmetic_follows_sqlite() {
        let int = Value::Int;
        assert_eq!(arithmetic(BinaryOp::Div, int(7), int(2)), int(3));
        assert_eq!(arithmetic(BinaryOp::Div, int(7), int(0)), Value::Null);
        assert_eq!(remainder(int(-7), int(3)), int(-1));
        assert_eq!(remainder(int(i64::MIN), int(-1)), int(0));
        assert_eq!(remainder(Value::text("1e3"), int(7)), Value::Float(1.0));
        assert_eq!(
            arithmetic(BinaryOp::Add, int(i64::MAX), int(1)),
            Value::Float(i64::MAX as f64 + 1.0)
        );
        assert_eq!(
            arithmetic(BinaryOp::Mul, int(2), Value::Float(1.5)),
            Value::Float(3.0)
        );
        let min = Value::Float(i64::MIN as f64);
        assert_eq!(
            remainder(min.clone(), Value::Float(-1.0)),
            Value::Float(0.0)
        );
        assert_eq!(remainder(min, int(-i64::MAX)), Value::Float(-1.0));
        let inf = Value::Float(f64::INFINITY);
        assert_eq!(
            arithmetic(BinaryOp::Sub, inf.clone(), inf.clone()),
            Value::Null
        );
        assert_eq!(arithmetic(BinaryOp::Add, inf.clone(), int(1)), inf);
        assert_eq!(
            binary(BinaryOp::Add, Value::text("2"), int(3), false, false),
            int(5)
        );
    }

    #[test]
    fn three_valued_logic() {
        assert_eq!(
            binary(BinaryOp::And, Value::Null, Value::Bool(false), false, false),
            Value::Bool(false)
        );
        assert_eq!(
            binary(BinaryOp::Or, Value::Null, Value::Bool(true), false, false),
            Value::Bool(true)
        );
        assert_eq!(
            binary(BinaryOp::Or, Value::Null, Value::Bool(false), false, false),
            Value::Null
        );
        assert_eq!(unary(UnaryOp::Not, Value::Null), Value::Null);
        assert_eq!(
            binary(BinaryOp::Eq, Value::Int(1), Value::Null, false, false),
            Value::Null
        );
    }

    #[test]
    fn the_key_column_compares_numbers_as_text() {
        assert_eq!(
            compare(&Value::text("10"), &Value::Int(10), true, false),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare(&Value::text("10"), &Value::Int(10), false, false),
            Some(Ordering::Greater)
        );
    }
}
