//! Batch evaluation of planned expressions over rows, with SQLite's NULL,
//! comparison and arithmetic rules.

use std::cmp::Ordering;

use crate::expr::{BinaryOp, CastType, Column, Expr, UnaryOp};
use crate::functions::{FunctionError, ScalarFunction};
use crate::meter::{EvalError, Meter, heap_bytes};
use crate::value::Value;

/// What expressions read: table columns of a scanned record, or group keys
/// and aggregate results of a group after aggregation.
pub trait RowSource {
    /// A column of the record.
    fn column(&self, column: Column) -> Value;
    /// A column of the joined table's record (NULL when there is none).
    fn joined(&self, _column: Column) -> Value {
        Value::Null
    }
    /// GROUP BY value `i` (groups only).
    fn group_key(&self, _i: usize) -> Value {
        Value::Null
    }
    /// Aggregate result `i` (groups only).
    fn agg_result(&self, _i: usize) -> Value {
        Value::Null
    }
    /// The built-in `length` of a column (characters of text, bytes of a
    /// blob, NULL for NULL) when the source can tell it without building
    /// the value; `None` to have the value built and measured.
    fn column_length(&self, _column: Column) -> Option<Value> {
        None
    }
}

/// The column whose built-in `length` `function` with `args` computes,
/// when it is one: as SQLite reads a column's length from the record
/// header, the row source may answer it without building the value.
pub(crate) fn length_of_column(function: &dyn ScalarFunction, args: &[Expr]) -> Option<Column> {
    match args {
        [Expr::Column(column)] if function.is_builtin() && function.name() == "length" => {
            Some(*column)
        }
        _ => None,
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
        Expr::Joined(c) => rows.iter().map(|r| r.joined(*c)).collect(),
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
        Expr::Binary {
            op: op @ (BinaryOp::And | BinaryOp::Or),
            left,
            right,
        } if calls_function(right) => short_circuit(*op, left, right, rows, meter)?,
        Expr::Binary {
            op: op @ (BinaryOp::Arrow | BinaryOp::LongArrow),
            left,
            right,
        } => {
            let l = eval_batch(left, rows, meter)?;
            let r = eval_batch(right, rows, meter)?;
            json_arrow(*op, l, r, meter)?
        }
        Expr::Binary { op, left, right } if matches!(**right, Expr::Literal(_)) => {
            // A comparison with a constant (`length(value) > 100`): one
            // copy of the constant per batch, no column of copies.
            let Expr::Literal(constant) = &**right else {
                unreachable!("matched a literal")
            };
            meter.charge(heap_bytes(constant))?;
            let constant = batch_copy(constant);
            let (la, ra) = (is_key(left), is_key(right));
            eval_batch(left, rows, meter)?
                .into_iter()
                .map(|a| binary(*op, a, constant.clone(), la, ra))
                .collect()
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
        Expr::Case {
            operand,
            branches,
            otherwise,
        } => case(
            operand.as_deref(),
            branches,
            otherwise.as_deref(),
            rows,
            meter,
        )?,
        Expr::Call { function, args } => {
            if let Some(column) = length_of_column(function.as_ref(), args) {
                let mut out = Vec::with_capacity(n);
                for row in rows {
                    match row.column_length(column) {
                        Some(length) => out.push(length),
                        None => out.extend(function.call(&[vec![row.column(column)]], 1)?),
                    }
                }
                return Ok(out);
            }
            let columns: Vec<Vec<Value>> = args
                .iter()
                .map(|a| eval_batch(a, rows, meter))
                .collect::<Result<_, _>>()?;
            let out = function.call_metered(&columns, n, meter)?;
            if out.len() != n {
                return Err(FunctionError {
                    function: function.name().to_string(),
                    message: format!("returned {} values for {n} rows", out.len()),
                    plugin: function.is_plugin(),
                    host: false,
                }
                .into());
            }
            out
        }
    })
}

/// `l -> r` (`->>`) over a batch: SQLite's JSON operators, which fail the
/// query on a malformed document.
#[inline(never)]
fn json_arrow(
    op: BinaryOp,
    l: Vec<Value>,
    r: Vec<Value>,
    meter: &mut Meter,
) -> Result<Vec<Value>, EvalError> {
    let rows = l.len();
    let out = crate::functions::json_arrow(op == BinaryOp::LongArrow).call(&[l, r], rows)?;
    meter.charge_values(&out)?;
    Ok(out)
}

/// Whether `expr` calls a function or reads JSON (either may fail, or cost
/// a sandbox call).
#[inline(never)]
fn calls_function(expr: &Expr) -> bool {
    let mut calls = false;
    expr.walk(&mut |e| {
        calls |= matches!(
            e,
            Expr::Call { .. }
                | Expr::Binary {
                    op: BinaryOp::Arrow | BinaryOp::LongArrow,
                    ..
                }
        )
    });
    calls
}

/// `left AND right` (`OR`) evaluating `right` only for the rows `left` does
/// not decide (false for `AND`, true for `OR`), as SQLite does: so
/// `json_valid(value) AND value ->> 'a' = 1` never reads an invalid
/// document. Used when `right` calls a function; otherwise both sides are
/// evaluated whole, which is cheaper and gives the same values. A chain of
/// the same operator (`a AND b AND c`, left-deep) is evaluated in one loop,
/// operand by operand, so a long chain does not recurse once per term.
#[inline(never)]
fn short_circuit<R: RowSource>(
    op: BinaryOp,
    left: &Expr,
    right: &Expr,
    rows: &[R],
    meter: &mut Meter,
) -> Result<Vec<Value>, EvalError> {
    let mut operands = vec![right];
    let mut first = left;
    while let Expr::Binary {
        op: inner,
        left,
        right,
    } = first
        && *inner == op
    {
        operands.push(right);
        first = left;
    }
    let decided = op == BinaryOp::Or;
    let mut out: Vec<Value> = eval_batch(first, rows, meter)?;
    for operand in operands.into_iter().rev() {
        let open: Vec<usize> = (0..rows.len())
            .filter(|&i| out[i].truth() != Some(decided))
            .collect();
        let values = eval_subset(operand, rows, &open, meter)?;
        for (i, value) in open.into_iter().zip(values) {
            let so_far = std::mem::replace(&mut out[i], Value::Null);
            out[i] = binary(op, so_far, value, false, false);
        }
    }
    for value in &mut out {
        if value.truth() == Some(decided) && !matches!(value, Value::Bool(_)) {
            *value = Value::Bool(decided);
        }
    }
    Ok(out)
}

/// `CASE` over a batch: each `when` is evaluated for the rows no earlier
/// branch took, each `then` for the rows its `when` took, `ELSE` for the
/// rest; the simple form's operand once for every row.
#[inline(never)]
fn case<R: RowSource>(
    operand: Option<&Expr>,
    branches: &[(Expr, Expr)],
    otherwise: Option<&Expr>,
    rows: &[R],
    meter: &mut Meter,
) -> Result<Vec<Value>, EvalError> {
    let mut out = vec![Value::Null; rows.len()];
    let subject = operand.map(|o| eval_batch(o, rows, meter)).transpose()?;
    let operand_is_key = operand.is_some_and(is_key);
    let mut pending: Vec<usize> = (0..rows.len()).collect();
    for (when, then) in branches {
        if pending.is_empty() {
            break;
        }
        let conditions = eval_subset(when, rows, &pending, meter)?;
        let (mut taken, mut left) = (Vec::new(), Vec::new());
        for (i, condition) in pending.iter().zip(&conditions) {
            let matched = match &subject {
                Some(subject) => {
                    compare(&subject[*i], condition, operand_is_key, is_key(when))
                        == Some(Ordering::Equal)
                }
                None => condition.truth() == Some(true),
            };
            if matched { &mut taken } else { &mut left }.push(*i);
        }
        for (i, value) in taken.iter().zip(eval_subset(then, rows, &taken, meter)?) {
            out[*i] = value;
        }
        pending = left;
    }
    if let Some(otherwise) = otherwise {
        for (i, value) in pending
            .iter()
            .zip(eval_subset(otherwise, rows, &pending, meter)?)
        {
            out[*i] = value;
        }
    }
    Ok(out)
}

/// `expr` for the rows at `picked` (ascending indexes into `rows`), in
/// that order. All rows are evaluated in place; a proper subset is first
/// copied into [`Copied`] rows holding what `expr` reads, so a branch is
/// never evaluated for a row that does not reach it.
#[inline(never)]
fn eval_subset<R: RowSource>(
    expr: &Expr,
    rows: &[R],
    picked: &[usize],
    meter: &mut Meter,
) -> Result<Vec<Value>, EvalError> {
    if picked.is_empty() {
        return Ok(Vec::new());
    }
    if picked.len() == rows.len() {
        return eval_batch(expr, rows, meter);
    }
    let reads = Reads::of(expr);
    let copied: Vec<Copied> = picked.iter().map(|i| reads.copy(&rows[*i])).collect();
    eval_batch(expr, &copied, meter)
}

/// What an expression reads from its row source.
struct Reads {
    columns: Vec<Column>,
    joined: Vec<Column>,
    group_keys: usize,
    agg_results: usize,
}

impl Reads {
    fn of(expr: &Expr) -> Reads {
        let mut reads = Reads {
            columns: Vec::new(),
            joined: Vec::new(),
            group_keys: 0,
            agg_results: 0,
        };
        expr.walk(&mut |e| match e {
            Expr::Column(c) if !reads.columns.contains(c) => reads.columns.push(*c),
            Expr::Joined(c) if !reads.joined.contains(c) => reads.joined.push(*c),
            Expr::GroupKey(i) => reads.group_keys = reads.group_keys.max(i + 1),
            Expr::AggResult(i) => reads.agg_results = reads.agg_results.max(i + 1),
            _ => {}
        });
        reads
    }

    fn copy<R: RowSource>(&self, row: &R) -> Copied {
        Copied {
            columns: self.columns.iter().map(|c| (*c, row.column(*c))).collect(),
            joined: self.joined.iter().map(|c| (*c, row.joined(*c))).collect(),
            group_keys: (0..self.group_keys).map(|i| row.group_key(i)).collect(),
            agg_results: (0..self.agg_results).map(|i| row.agg_result(i)).collect(),
        }
    }
}

/// A row of a subset: the values its expression reads, copied out of the
/// original row source. One concrete type, so nested `CASE` does not
/// instantiate the evaluator for ever deeper row types.
struct Copied {
    columns: Vec<(Column, Value)>,
    joined: Vec<(Column, Value)>,
    group_keys: Vec<Value>,
    agg_results: Vec<Value>,
}

impl RowSource for Copied {
    fn column(&self, column: Column) -> Value {
        self.columns
            .iter()
            .find(|(c, _)| *c == column)
            .map_or(Value::Null, |(_, v)| v.clone())
    }
    fn joined(&self, column: Column) -> Value {
        self.joined
            .iter()
            .find(|(c, _)| *c == column)
            .map_or(Value::Null, |(_, v)| v.clone())
    }
    fn group_key(&self, i: usize) -> Value {
        self.group_keys.get(i).cloned().unwrap_or(Value::Null)
    }
    fn agg_result(&self, i: usize) -> Value {
        self.agg_results.get(i).cloned().unwrap_or(Value::Null)
    }
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
        BinaryOp::Arrow | BinaryOp::LongArrow => unreachable!("JSON operators run as a batch"),
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

    /// A function that fails on 0 and records the arguments it was given.
    #[derive(Debug, Default)]
    struct Recording(std::sync::Mutex<Vec<i64>>);

    impl crate::functions::ScalarFunction for Recording {
        fn name(&self) -> &str {
            "recording"
        }
        fn arity(&self) -> crate::functions::Arity {
            crate::functions::Arity::Exact(1)
        }
        fn call(&self, args: &[Vec<Value>], rows: usize) -> Result<Vec<Value>, FunctionError> {
            let seen: Vec<i64> = args[0].iter().map(Value::to_integer).collect();
            assert_eq!(seen.len(), rows);
            self.0.lock().unwrap().extend(&seen);
            if seen.contains(&0) {
                return Err(FunctionError {
                    function: "recording".into(),
                    message: "zero".into(),
                    plugin: false,
                    host: false,
                });
            }
            Ok(seen.into_iter().map(|i| Value::Int(100 / i)).collect())
        }
    }

    /// Rows whose value is `bytes`; odd rows tell their value's length
    /// (a made-up one, to show it is used) without building it.
    struct Sized(i64, &'static str);

    impl RowSource for Sized {
        fn column(&self, column: Column) -> Value {
            match column {
                Column::Key => Value::text("ké"),
                Column::Value => Value::Bytes(bytes::Bytes::from_static(self.1.as_bytes())),
                _ => Value::Null,
            }
        }

        fn column_length(&self, column: Column) -> Option<Value> {
            (column == Column::Value && self.0 % 2 == 1).then_some(Value::Int(1000))
        }
    }

    #[test]
    fn length_of_a_column_asks_the_row_source_before_building_the_value() {
        use crate::functions::{Builtins, FunctionRegistry};
        let length = Builtins.scalar(None, "length").unwrap().unwrap();
        let of = |column| Expr::Call {
            function: length.clone(),
            args: vec![Expr::Column(column)],
        };
        let rows = [Sized(0, "abc"), Sized(1, "abc"), Sized(2, "")];
        let mut meter = Meter::new(1 << 20);
        let values = eval_batch(&of(Column::Value), &rows, &mut meter).unwrap();
        assert_eq!(values, [Value::Int(3), Value::Int(1000), Value::Int(0)]);
        // Characters of text, from the value when the source cannot tell.
        let keys = eval_batch(&of(Column::Key), &rows, &mut meter).unwrap();
        assert_eq!(keys, [Value::Int(2), Value::Int(2), Value::Int(2)]);
        // Anything but a bare column is evaluated as usual.
        let concat = Expr::Call {
            function: length.clone(),
            args: vec![Expr::Binary {
                op: BinaryOp::Concat,
                left: Box::new(Expr::Column(Column::Value)),
                right: Box::new(Expr::Literal(Value::text("x"))),
            }],
        };
        let values = eval_batch(&concat, &rows[1..2], &mut meter).unwrap();
        assert_eq!(values, [Value::Int(4)]);
    }

    #[test]
    fn a_built_in_stops_at_the_meter_instead_of_building_the_whole_batch() {
        use crate::functions::{Builtins, FunctionRegistry};
        let printf = Builtins.scalar(None, "printf").unwrap().unwrap();
        let megabyte = Expr::Call {
            function: printf,
            args: vec![
                Expr::Literal(Value::text("%01000000d")),
                Expr::Literal(Value::Int(1)),
            ],
        };
        // Built in full, this batch would be 100 GB.
        let rows: Vec<Row> = (0..100_000).map(Row).collect();
        let mut meter = Meter::new(4 << 20);
        let failed = eval_batch(&megabyte, &rows, &mut meter).unwrap_err();
        assert!(matches!(failed, EvalError::OverBudget(_)), "{failed:?}");
        assert!(meter.used() <= 4 << 20);
    }

    struct Row(i64);

    impl RowSource for Row {
        fn column(&self, column: Column) -> Value {
            match column {
                Column::Fragment => Value::Int(self.0),
                _ => Value::Null,
            }
        }
    }

    #[test]
    fn case_evaluates_each_branch_only_for_the_rows_that_reach_it() {
        let function = std::sync::Arc::new(Recording::default());
        let call = |arg: Expr| Expr::Call {
            function: function.clone(),
            args: vec![arg],
        };
        let fragment = || Box::new(Expr::Column(Column::Fragment));
        // CASE WHEN _fragment = 0 THEN -1 WHEN _fragment > 2 THEN f(_fragment)
        //      ELSE f(_fragment + 10) END
        let expr = Expr::Case {
            operand: None,
            branches: vec![
                (
                    Expr::Binary {
                        op: BinaryOp::Eq,
                        left: fragment(),
                        right: Box::new(Expr::Literal(Value::Int(0))),
                    },
                    Expr::Literal(Value::Int(-1)),
                ),
                (
                    Expr::Binary {
                        op: BinaryOp::Gt,
                        left: fragment(),
                        right: Box::new(Expr::Literal(Value::Int(2))),
                    },
                    call(Expr::Column(Column::Fragment)),
                ),
            ],
            otherwise: Some(Box::new(call(Expr::Binary {
                op: BinaryOp::Add,
                left: fragment(),
                right: Box::new(Expr::Literal(Value::Int(10))),
            }))),
        };
        let rows: Vec<Row> = [0, 1, 4, 2, 5].into_iter().map(Row).collect();
        let out = eval_batch(&expr, &rows, &mut Meter::unlimited()).unwrap();
        assert_eq!(
            out,
            [-1, 9, 25, 8, 20].map(Value::Int).to_vec(),
            "row 0 never reaches the function that fails on 0"
        );
        assert_eq!(*function.0.lock().unwrap(), vec![4, 5, 11, 12]);
        // Every row taking one branch evaluates it in place, once.
        let all = vec![Row(3), Row(4)];
        function.0.lock().unwrap().clear();
        let out = eval_batch(&expr, &all, &mut Meter::unlimited()).unwrap();
        assert_eq!(out, vec![Value::Int(33), Value::Int(25)]);
        assert_eq!(*function.0.lock().unwrap(), vec![3, 4]);
    }

    #[test]
    fn and_or_evaluate_a_calling_right_side_only_where_the_left_does_not_decide() {
        let function = std::sync::Arc::new(Recording::default());
        let fragment = || Box::new(Expr::Column(Column::Fragment));
        let int = |i| Box::new(Expr::Literal(Value::Int(i)));
        let positive_call = || {
            Box::new(Expr::Binary {
                op: BinaryOp::Gt,
                left: Box::new(Expr::Call {
                    function: function.clone(),
                    args: vec![Expr::Column(Column::Fragment)],
                }),
                right: int(0),
            })
        };
        // _fragment > 2 AND recording(_fragment) > 0
        let and = Expr::Binary {
            op: BinaryOp::And,
            left: Box::new(Expr::Binary {
                op: BinaryOp::Gt,
                left: fragment(),
                right: int(2),
            }),
            right: positive_call(),
        };
        let rows: Vec<Row> = [0, 1, 4].into_iter().map(Row).collect();
        let out = eval_batch(&and, &rows, &mut Meter::unlimited()).unwrap();
        assert_eq!(out, [false, false, true].map(Value::Bool).to_vec());
        assert_eq!(*function.0.lock().unwrap(), vec![4]);
        // _fragment % 2 OR recording(_fragment) > 0: a true integer is TRUE.
        function.0.lock().unwrap().clear();
        let or = Expr::Binary {
            op: BinaryOp::Or,
            left: Box::new(Expr::Binary {
                op: BinaryOp::Rem,
                left: fragment(),
                right: int(2),
            }),
            right: positive_call(),
        };
        let rows: Vec<Row> = [7, 0].into_iter().map(Row).collect();
        let error = eval_batch(&or, &rows, &mut Meter::unlimited()).unwrap_err();
        assert!(error.to_string().contains("zero"), "row 0 reaches the call");
        assert_eq!(*function.0.lock().unwrap(), vec![0]);
        function.0.lock().unwrap().clear();
        let rows = vec![Row(7), Row(-2), Row(4)];
        let out = eval_batch(&or, &rows, &mut Meter::unlimited()).unwrap();
        assert_eq!(out, [true, false, true].map(Value::Bool).to_vec());
        assert_eq!(*function.0.lock().unwrap(), vec![-2, 4]);
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
