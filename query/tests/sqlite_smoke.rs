//! The differential harness itself: ebb and SQLite agree on the first
//! built-ins, and a disagreement is caught.

mod support;

use ebb_query::Value;
use support::{Sqlite, ebb, same};

#[test]
fn the_harness_compares_values_and_types() {
    let db = Sqlite::new();
    db.check("length(?)", &[Value::text("héllo")]);
    db.check("substr('hello', ?, 2)", &[Value::Int(-3)]);
    db.check("1 + 2.5", &[]);
    assert!(
        !same(&Value::Int(1), &Value::Float(1.0)),
        "types must match"
    );
    assert!(!same(&Value::text("1"), &Value::Int(1)));
    assert_eq!(ebb("upper(?)", &[Value::text("ab")]), Ok(Value::text("AB")));
}
