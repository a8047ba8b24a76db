//! Differential checks of SQL expressions against SQLite (rusqlite's bundled
//! SQLite): the same `SELECT <expression>` with the same parameters, planned
//! and evaluated by ebb and run by SQLite, must give the same value and type,
//! or both fail.
#![allow(dead_code)]

use ebb_query::{Builtins, Column, Limits, Meter, RowSource, Shape, Value, eval_one, plan};

/// A record with no columns set: the checked expressions read none.
struct NoRecord;

impl RowSource for NoRecord {
    fn column(&self, _column: Column) -> Value {
        Value::Null
    }
}

/// ebb's answer to `SELECT <expr>` with `params` bound to `?`: the value, or
/// the error's text (planning or evaluation).
pub fn ebb(expr: &str, params: &[Value]) -> Result<Value, String> {
    let sql = format!("SELECT {expr} FROM t");
    let plan = plan(&sql, params, &Builtins, &Limits::default()).map_err(|e| e.to_string())?;
    let Shape::Rows { projection } = &plan.shape else {
        return Err(format!("{sql} is not a row query"));
    };
    let mut meter = Meter::new(64 << 20);
    eval_one(&projection[0], NoRecord, &mut meter).map_err(|e| e.to_string())
}

/// A connection to an in-memory SQLite database.
pub struct Sqlite(rusqlite::Connection);

impl Sqlite {
    /// Open one.
    pub fn new() -> Self {
        Sqlite(rusqlite::Connection::open_in_memory().expect("open SQLite in memory"))
    }

    /// SQLite's answer to `SELECT <expr>` with `params` bound to `?`: the
    /// value, or the error's text.
    pub fn eval(&self, expr: &str, params: &[Value]) -> Result<Value, String> {
        let sql = format!("SELECT {expr}");
        let mut statement = self.0.prepare(&sql).map_err(|e| e.to_string())?;
        let params: Vec<rusqlite::types::Value> = params.iter().map(to_sqlite).collect();
        statement
            .query_row(rusqlite::params_from_iter(params), |row| {
                Ok(from_sqlite(row.get_ref(0)?))
            })
            .map_err(|e| e.to_string())
    }

    /// Assert that ebb and SQLite agree on `expr` with `params`: the same
    /// value of the same type (ebb's booleans are SQLite's integers 0 and 1;
    /// floats must be equal to the bit, NaN aside), or both an error.
    #[track_caller]
    pub fn check(&self, expr: &str, params: &[Value]) {
        let theirs = self.eval(expr, params);
        let ours = ebb(expr, params);
        match (&ours, &theirs) {
            (Ok(a), Ok(b)) if same(a, b) => {}
            (Err(_), Err(_)) => {}
            _ => panic!("SELECT {expr} with {params:?}\n  ebb:    {ours:?}\n  SQLite: {theirs:?}"),
        }
    }
}

/// Same value and same SQLite type.
pub fn same(ours: &Value, theirs: &Value) -> bool {
    match (ours, theirs) {
        (Value::Bool(b), Value::Int(i)) => i64::from(*b) == *i,
        (Value::Int(a), Value::Int(b)) => a == b,
        (Value::Float(a), Value::Float(b)) => {
            a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan()
        }
        (Value::Text(a), Value::Text(b)) => a == b,
        (Value::Bytes(a), Value::Bytes(b)) => a == b,
        (Value::Null, Value::Null) => true,
        _ => false,
    }
}

fn to_sqlite(value: &Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as S;
    match value {
        Value::Null => S::Null,
        Value::Bool(b) => S::Integer(i64::from(*b)),
        Value::Int(i) => S::Integer(*i),
        Value::Float(f) => S::Real(*f),
        Value::Text(t) => S::Text(t.to_string()),
        Value::Bytes(b) => S::Blob(b.to_vec()),
    }
}

fn from_sqlite(value: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef as S;
    match value {
        S::Null => Value::Null,
        S::Integer(i) => Value::Int(i),
        S::Real(f) => Value::Float(f),
        S::Text(t) => Value::text(String::from_utf8_lossy(t).into_owned()),
        S::Blob(b) => Value::Bytes(b.to_vec().into()),
    }
}
