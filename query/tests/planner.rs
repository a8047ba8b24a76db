//! Planner acceptance, refusals and limits.

use ebb_query::{Builtins, Limits, Plan, PlanError, Shape, Value, plan};

fn ok(sql: &str) -> Plan {
    plan(sql, &[], &Builtins, &Limits::default()).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn err(sql: &str) -> PlanError {
    match plan(sql, &[], &Builtins, &Limits::default()) {
        Ok(_) => panic!("{sql} should be refused"),
        Err(e) => e,
    }
}

#[test]
fn the_dialect_is_accepted() {
    for sql in [
        "SELECT * FROM t",
        "select key AS k, value v FROM T",
        "SELECT key FROM t WHERE key = 'a' OR (key > 'b' AND key <= 'c') OR key IN ('x', 'y')",
        "SELECT key FROM t WHERE key BETWEEN 'a' AND 'b' AND value IS NOT NULL AND NOT key LIKE '%z'",
        "SELECT length(value) + 1, -2 * 3 / 4 % 5, 'a' || key, CAST(value AS TEXT) FROM t",
        "SELECT substr(key, 2), substring(key from 2 for 1), lower(key), upper(key), coalesce(NULL, key), starts_with(key, 'a') FROM t",
        "SELECT count(*), count(value), sum(length(value)), min(key), max(key), avg(length(value)) FROM t",
        "SELECT substr(key, 1, 2) AS p, count(*) AS n FROM t GROUP BY p HAVING n > 1 ORDER BY n DESC, p LIMIT 5 OFFSET 1",
        "SELECT substr(key, 1, 2), count(*) FROM t GROUP BY 1 ORDER BY 2",
        "SELECT t.key FROM t WHERE t.key > 'a'",
        "SELECT x.key FROM t AS x",
        "SELECT _version_ms, _expires_at, _fragment FROM t",
        "SELECT key FROM t LIMIT 2, 3",
        "SELECT key FROM t WHERE value = X'00ff' AND TRUE",
        "EXPLAIN SELECT key FROM t WHERE key = 'a'",
        "SELECT DISTINCT substr(key, 1, 2) AS p FROM t ORDER BY p DESC",
        "SELECT count(DISTINCT value), sum(DISTINCT length(value)), min(DISTINCT key) FROM t",
        "SELECT CASE WHEN key = 'a' THEN 1 WHEN key > 'b' THEN 2 ELSE 3 END, CASE key WHEN 'x' THEN 'y' END FROM t",
        "SELECT iif(key > 'a', 1, 0), ifnull(value, 'none'), nullif(key, 'a'), max(key, 'm', 'a') FROM t",
        "SELECT trim(key), trim(key, 'x'), TRIM(LEADING 'x' FROM key), TRIM(TRAILING FROM key) FROM t",
    ] {
        ok(sql);
    }
}

#[test]
fn parameters_bind_positionally_or_by_number() {
    let p = plan(
        "SELECT key FROM t WHERE key = ? LIMIT ?",
        &[Value::text("a"), Value::Int(3)],
        &Builtins,
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(p.ranges.points(), Some(vec!["a"]));
    assert_eq!(p.limit, Some(3));
    let p = plan(
        "SELECT key FROM t WHERE key IN ($2, $1)",
        &[Value::text("a"), Value::text("b")],
        &Builtins,
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(p.ranges.points(), Some(vec!["a", "b"]));
    let missing = plan(
        "SELECT key FROM t WHERE key = $2",
        &[Value::text("a")],
        &Builtins,
        &Limits::default(),
    )
    .unwrap_err();
    assert!(missing.to_string().contains("parameter 2"), "{missing}");
    let unused = plan(
        "SELECT key FROM t",
        &[Value::Int(1)],
        &Builtins,
        &Limits::default(),
    )
    .unwrap_err();
    assert!(unused.to_string().contains("does not use"), "{unused}");
}

#[test]
fn every_unsupported_construct_is_named() {
    for (sql, named) in [
        ("INSERT INTO t VALUES ('a', 'b')", "INSERT"),
        ("UPDATE t SET value = 'x'", "UPDATE"),
        ("DELETE FROM t", "DELETE"),
        ("CREATE TABLE x (a INT)", "CREATE"),
        (
            "SELECT key FROM t; SELECT key FROM t",
            "more than one statement",
        ),
        (
            "SELECT a.key FROM t a JOIN u b ON a.value = b.value",
            "this ON condition",
        ),
        (
            "SELECT a.key FROM t a RIGHT JOIN u b ON b.key = a.key",
            "this kind of JOIN",
        ),
        (
            "SELECT a.key FROM t a JOIN u b USING (key)",
            "JOIN without ON",
        ),
        (
            "SELECT a.key FROM t a JOIN u b ON b.key = a.key JOIN v c ON c.key = a.key",
            "more than one JOIN",
        ),
        (
            "SELECT a.key FROM t a JOIN u b ON b.key = b.value",
            "this ON condition",
        ),
        (
            "SELECT a.key FROM t a JOIN u b ON b.key = a.key OR b.key = 'x'",
            "this ON condition",
        ),
        ("SELECT key FROM t, u", "several tables"),
        ("SELECT key FROM (SELECT key FROM t)", "subqueries in FROM"),
        (
            "SELECT key FROM t WHERE key IN (SELECT key FROM u)",
            "subqueries",
        ),
        (
            "SELECT key FROM t WHERE EXISTS (SELECT 1 FROM u)",
            "subqueries",
        ),
        ("SELECT key FROM t UNION SELECT key FROM u", "UNION"),
        ("WITH x AS (SELECT key FROM t) SELECT key FROM x", "WITH"),
        ("SELECT DISTINCT ON (key) key FROM t", "DISTINCT ON"),
        (
            "SELECT DISTINCT substr(key, 1, 1), count(*) FROM t GROUP BY 1",
            "SELECT DISTINCT with GROUP BY",
        ),
        ("SELECT count(*) OVER () FROM t", "window functions"),
        ("SELECT key FROM t WHERE key ILIKE 'a%'", "ILIKE"),
        ("SELECT key FROM t WHERE key LIKE 'a%' ESCAPE '!'", "ESCAPE"),
        ("SELECT key FROM t ORDER BY key NULLS LAST", "NULLS FIRST"),
        ("SELECT TRY_CAST(key AS INTEGER) FROM t", "TRY_CAST"),
        ("SELECT CAST(key AS DATE) FROM t", "CAST to DATE"),
        ("SELECT key FROM s.t", "qualified table names"),
        ("SELECT t.* FROM t", "qualified wildcards"),
        ("SELECT key FROM t WHERE key IS TRUE", "IS TRUE"),
    ] {
        let error = err(sql);
        assert!(
            matches!(error, PlanError::Unsupported(_)),
            "{sql}: {error:?}"
        );
        assert!(error.to_string().contains(named), "{sql}: {error}");
    }
}

#[test]
fn semantic_errors_say_what_is_wrong() {
    for (sql, says) in [
        ("SELECT nope FROM t", "unknown column nope"),
        ("SELECT key FROM t WHERE \"a\" = key", "quoted identifier"),
        ("SELECT frob(key) FROM t", "unknown function frob"),
        ("SELECT length(key, 1) FROM t", "takes 1 arguments, got 2"),
        (
            "SELECT key FROM t WHERE count(*) > 1",
            "not allowed in WHERE",
        ),
        (
            "SELECT sum(count(*)) FROM t",
            "not allowed in an aggregate's arguments",
        ),
        ("SELECT key, count(*) FROM t", "must appear in GROUP BY"),
        ("SELECT sum(*) FROM t", "only COUNT(*)"),
        ("SELECT count() FROM t", "takes"),
        ("SELECT key FROM t ORDER BY 3", "out of range"),
        (
            "SELECT count(*) AS n FROM t GROUP BY n",
            "not allowed in GROUP BY",
        ),
        ("SELECT key FROM u.x JOIN", "syntax"),
        ("SELECT key FROM t LIMIT -1", "non-negative"),
        ("SELECT key", "FROM"),
        ("SELECT x.key FROM t", "unknown table"),
        (
            "SELECT key FROM t JOIN u ON u.key = t.value",
            "ambiguous column key: both tables of the join have it; write t.key or u.key",
        ),
        (
            "SELECT t.key FROM t JOIN t ON t.key = t.value",
            "t names both tables of the join",
        ),
        (
            "SELECT z.key FROM t JOIN u ON u.key = t.value",
            "unknown table z",
        ),
        (
            "SELECT nope FROM t JOIN u ON u.key = t.value",
            "unknown column nope",
        ),
        (
            "SELECT count(DISTINCT key, value) FROM t",
            "count(DISTINCT ...) takes exactly 1 argument, got 2",
        ),
        (
            "SELECT length(DISTINCT key) FROM t",
            "DISTINCT inside length() is only valid in an aggregate",
        ),
        (
            "SELECT DISTINCT key FROM t ORDER BY value",
            "with SELECT DISTINCT, ORDER BY may use only the selected expressions",
        ),
    ] {
        let error = err(sql);
        assert!(error.to_string().contains(says), "{sql}: {error}");
    }
}

#[test]
fn every_limit_is_enforced_by_name() {
    let small = Limits {
        max_sql_bytes: 200,
        max_expr_nodes: 20,
        max_literal_bytes: 8,
        max_in_list: 3,
        max_limit: 100,
        max_offset: 10,
        max_params: 2,
        max_distinct_values: 5,
        max_depth: 20,
        max_expr_depth: 20,
    };
    let run = |sql: &str, params: &[Value]| plan(sql, params, &Builtins, &small).unwrap_err();
    let limit_of = |e: PlanError| match e {
        PlanError::Limit { limit, .. } => limit,
        other => panic!("expected a limit error, got {other:?}"),
    };
    assert_eq!(
        limit_of(run(
            &format!("SELECT key FROM t WHERE key = '{}'", "a".repeat(300)),
            &[]
        )),
        "max_sql_bytes"
    );
    assert_eq!(
        limit_of(run("SELECT key FROM t WHERE key = '123456789'", &[])),
        "max_literal_bytes"
    );
    assert_eq!(
        limit_of(run(
            "SELECT key FROM t WHERE key = ?",
            &[Value::text("123456789")]
        )),
        "max_literal_bytes"
    );
    assert_eq!(
        limit_of(run("SELECT key FROM t WHERE key IN ('a','b','c','d')", &[])),
        "max_in_list"
    );
    assert_eq!(
        limit_of(run("SELECT key FROM t LIMIT 101", &[])),
        "max_limit"
    );
    assert_eq!(
        limit_of(run("SELECT key FROM t LIMIT 1 OFFSET 11", &[])),
        "max_offset"
    );
    assert_eq!(
        limit_of(run(
            "SELECT key FROM t",
            &[Value::Int(1), Value::Int(2), Value::Int(3)]
        )),
        "max_params"
    );
    let many = format!("SELECT key FROM t WHERE {}", ["key = 'a'"; 8].join(" OR "));
    assert_eq!(limit_of(run(&many, &[])), "max_expr_nodes");
    let chain = format!("SELECT 1{} FROM t", " + 1".repeat(19));
    assert_eq!(limit_of(run(&chain, &[])), "max_expr_depth");
    let deep = format!("SELECT {}1{} FROM t", "(".repeat(40), ")".repeat(40));
    assert!(matches!(
        run(&deep, &[]),
        PlanError::Syntax(_) | PlanError::Limit { .. }
    ));
}

#[test]
fn pushdown_and_shapes() {
    let p = ok("SELECT key FROM t WHERE key LIKE 'user:%'");
    assert!(p.filter.is_none());
    assert!(!p.ranges.is_all());
    let p = ok("SELECT key FROM t WHERE key = 'a' AND length(value) > 2");
    assert_eq!(p.ranges.points(), Some(vec!["a"]));
    assert!(p.filter.is_some(), "the non-key conjunct stays");
    let p = ok("SELECT count(*) FROM t WHERE starts_with(key, 'x')");
    assert!(matches!(p.shape, Shape::Aggregate { .. }));
    assert!(p.filter.is_none());
    let p = ok("EXPLAIN SELECT key FROM t WHERE key >= 'b'");
    assert!(p.explain);
    let lines = p.explain_lines("all 16");
    assert!(
        lines.iter().any(|l| l.starts_with("key ranges:")),
        "{lines:?}"
    );
}

#[test]
fn a_plan_knows_whether_it_reads_values() {
    for sql in [
        "SELECT * FROM t",
        "SELECT key FROM t WHERE length(value) > 3",
        "SELECT count(*) FROM t WHERE value IS NOT NULL",
        "SELECT sum(length(value)) FROM t",
        "SELECT substr(CAST(value AS TEXT), 1, 2) AS p, count(*) FROM t GROUP BY p",
        "SELECT key FROM t ORDER BY value",
    ] {
        assert!(ok(sql).reads_value(), "{sql}");
    }
    for sql in [
        "SELECT key FROM t",
        "SELECT count(*) FROM t WHERE key > 'a'",
        "SELECT substr(key, 1, 2) AS p, count(*) AS n FROM t GROUP BY p HAVING n > 1",
        "SELECT _version_ms, _expires_at, _fragment FROM t",
    ] {
        assert!(!ok(sql).reads_value(), "{sql}");
    }
    // `length(value)` reads the record's header, not the value's bytes.
    for sql in [
        "SELECT key FROM t WHERE length(value) > 3",
        "SELECT sum(length(value)) FROM t",
    ] {
        let plan = ok(sql);
        assert!(plan.reads_value() && !plan.reads_value_bytes(), "{sql}");
    }
    for sql in [
        "SELECT * FROM t",
        "SELECT key FROM t WHERE length(value) > 3 AND value > 'a'",
        "SELECT length(value || 'x') FROM t",
        "SELECT key FROM t ORDER BY value",
    ] {
        assert!(ok(sql).reads_value_bytes(), "{sql}");
    }
}

#[test]
fn the_smallest_integer_literal_is_an_integer_as_in_sqlite() {
    struct NoRow;
    impl ebb_query::RowSource for NoRow {
        fn column(&self, _: ebb_query::Column) -> Value {
            Value::Null
        }
    }
    let p = ok(
        "SELECT -9223372036854775808, - 9223372036854775808, -((9223372036854775808)), \
         9223372036854775808, -(-9223372036854775808), -9223372036854775809, 9223372036854775807 FROM t",
    );
    let Shape::Rows { projection } = &p.shape else {
        panic!("a row query")
    };
    let values: Vec<Value> = projection
        .iter()
        .map(|e| ebb_query::eval_one(e, NoRow, &mut ebb_query::Meter::unlimited()).unwrap())
        .collect();
    let two_63 = 9_223_372_036_854_775_808.0;
    assert_eq!(
        values,
        [
            Value::Int(i64::MIN),
            Value::Int(i64::MIN),
            Value::Int(i64::MIN),
            Value::Float(two_63),
            Value::Float(two_63),
            Value::Float(-two_63),
            Value::Int(i64::MAX),
        ]
    );
}

#[test]
fn select_distinct_groups_by_every_result_column() {
    let p = ok("SELECT DISTINCT substr(key, 1, 2) AS p, length(value) FROM t ORDER BY p");
    assert!(p.distinct);
    let Shape::Aggregate {
        group_by,
        aggregates,
        ..
    } = &p.shape
    else {
        panic!("DISTINCT is planned as grouping: {:?}", p.shape);
    };
    assert_eq!(group_by.len(), 2);
    assert!(aggregates.is_empty());
    assert!(
        p.explain_lines("all")
            .iter()
            .any(|l| l.contains("group by: substr(key, 1, 2), length(value)"))
    );
    let counted = ok("SELECT count(DISTINCT value) FROM t");
    assert!(
        counted
            .explain_lines("all")
            .iter()
            .any(|l| l.contains("count(DISTINCT value)")),
        "{:?}",
        counted.explain_lines("all")
    );
    assert!(!ok("SELECT key FROM t").distinct);
}

#[test]
fn key_lookup_joins_are_planned_as_a_scan_and_a_lookup() {
    use ebb_query::{Column, Expr};
    let p = ok(
        "SELECT x.key, y.value FROM a AS x LEFT JOIN b AS y ON x.value = y.key WHERE x.key > 'm' AND length(x.value) > 1 AND y.value IS NULL",
    );
    let join = p.join.as_ref().expect("a join");
    assert_eq!(join.table, "b");
    assert!(join.outer);
    assert!(matches!(join.key, Expr::Column(Column::Value)));
    assert!(!p.ranges.is_all(), "x.key > 'm' is a key range of a");
    assert_eq!(
        join.before.as_ref().map(ToString::to_string).as_deref(),
        Some("(length(value) > 1)")
    );
    assert_eq!(
        p.filter.as_ref().map(ToString::to_string).as_deref(),
        Some("joined.value IS NULL")
    );
    let lines = p.explain_lines("all");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("join: LEFT JOIN b ON b.key = value")),
        "{lines:?}"
    );
    // Pages of `a` project the record and the key to look up.
    let scan = p.scan_plan();
    assert!(scan.join.is_none());
    let Shape::Rows { projection } = &scan.shape else {
        panic!("the scan is a row query")
    };
    assert_eq!(projection.len(), 6);
    assert_eq!(
        scan.filter.as_ref().map(ToString::to_string).as_deref(),
        Some("(length(value) > 1)")
    );
    // Keyed the other way round, inner, with *.
    let star = ok("SELECT * FROM a JOIN b ON b.key = lower(a.key) ORDER BY a.key DESC");
    assert!(!star.join.as_ref().unwrap().outer);
    assert_eq!(star.columns.len(), 4);
    assert_eq!(star.key_order(), Some(true));
    assert_eq!(star.scan_plan().key_order(), Some(true));
    assert!(ok("SELECT key FROM a").scan_plan().join.is_none());
}
