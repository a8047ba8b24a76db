//! CASE, iif, nullif and ifnull agree with SQLite.

mod support;

use ebb_query::Value;
use support::{Sqlite, ebb};

fn values() -> Vec<Value> {
    vec![
        Value::Null,
        Value::Int(0),
        Value::Int(1),
        Value::Int(-7),
        Value::Float(0.0),
        Value::Float(2.5),
        Value::text(""),
        Value::text("1"),
        Value::text("abc"),
        Value::Bytes(vec![0x31].into()),
        Value::Bool(true),
    ]
}

#[test]
fn searched_and_simple_case_agree_with_sqlite() {
    let db = Sqlite::new();
    for a in values() {
        for b in values() {
            let params = [a.clone(), b.clone()];
            db.check("CASE WHEN ? THEN 'yes' ELSE 'no' END || ?", &params);
            db.check("CASE ? WHEN ? THEN 'same' END", &params);
            db.check(
                "CASE ? WHEN 1 THEN 'one' WHEN ? THEN 'second' ELSE 'other' END",
                &params,
            );
            db.check("CASE WHEN ? IS NULL THEN 1 WHEN ? THEN 2.5 END", &params);
            db.check("iif(?, 'a', ?)", &params);
            db.check("iif(?, ?)", &params);
            db.check("nullif(?, ?)", &params);
            db.check("ifnull(?, ?)", &params);
            db.check("coalesce(nullif(?, ?), 'x')", &params);
        }
    }
    db.check(
        "CASE 1 WHEN 2 THEN 'a' WHEN 1 THEN 'b' WHEN 1 THEN 'c' END",
        &[],
    );
    db.check("CASE WHEN NULL THEN 1 END", &[]);
    db.check("CASE 'a' WHEN 'A' THEN 1 ELSE 0 END", &[]);
    db.check(
        "CASE WHEN 1 THEN CASE WHEN 0 THEN 'x' ELSE 'y' END END",
        &[],
    );
}

#[test]
fn arity_errors_name_the_function() {
    for (expr, message) in [
        ("iif(1)", "iif() takes 2 or 3 arguments, got 1"),
        ("iif(1, 2, 3, 4)", "iif() takes 2 or 3 arguments, got 4"),
        ("ifnull(1)", "ifnull() takes 2 arguments, got 1"),
        ("nullif(1, 2, 3)", "nullif() takes 2 arguments, got 3"),
    ] {
        let error = ebb(expr, &[]).unwrap_err();
        assert!(error.contains(message), "{expr}: {error}");
    }
}

#[test]
fn simple_case_tells_text_from_numbers() {
    let db = Sqlite::new();
    db.check(
        "CASE '10' WHEN 10 THEN 'num' WHEN '10' THEN 'text' END",
        &[],
    );
}
