//! No SQL text overflows a stack: operator chains are refused by
//! `max_expr_depth` before parsing, nestings by the parser's recursion limit
//! (`max_depth`), and every stage runs at the deepest accepted expression
//! within a quarter of a thread's 2 MiB stack.

use bytes::Bytes;
use ebb_query::{
    Builtins, Column, Limits, Meter, PlanError, RowSource, Value, eval_batch, eval_one, plan,
};

/// A quarter of the 2 MiB that tokio workers and std threads get: whatever
/// runs here at the deepest accepted expression has 4x headroom there.
const QUARTER_STACK: usize = 512 * 1024;

/// Run `f` on a thread with a quarter of the usual stack; an overflow aborts
/// the test binary.
fn on_quarter_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(QUARTER_STACK)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// An expression `prefix^n core suffix^n`: `1 + 1 + ...` is ("", "1", " + 1").
#[derive(Clone, Copy, Debug)]
struct Deep {
    name: &'static str,
    prefix: &'static str,
    core: &'static str,
    suffix: &'static str,
}

impl Deep {
    fn text(self, n: usize) -> String {
        format!(
            "{}{}{}",
            self.prefix.repeat(n),
            self.core,
            self.suffix.repeat(n)
        )
    }

    fn over_key(self) -> Deep {
        Deep {
            core: "key",
            ..self
        }
    }
}

const fn chain(name: &'static str, suffix: &'static str) -> Deep {
    Deep {
        name,
        prefix: "",
        core: "1",
        suffix,
    }
}

const fn nest(
    name: &'static str,
    prefix: &'static str,
    core: &'static str,
    suffix: &'static str,
) -> Deep {
    Deep {
        name,
        prefix,
        core,
        suffix,
    }
}

/// Every operator that builds one level per use in a left-deep chain.
const CHAINS: &[Deep] = &[
    chain("+", " + 1"),
    chain("-", " - 1"),
    chain("*", " * 1"),
    chain("/", " / 1"),
    chain("%", " % 1"),
    chain("||", " || 1"),
    chain("AND", " AND 1"),
    chain("OR", " OR 1"),
    chain("=", " = 1"),
    chain("<>", " <> 1"),
    chain("!=", " != 1"),
    chain("<", " < 1"),
    chain("<=", " <= 1"),
    chain(">", " > 1"),
    chain(">=", " >= 1"),
    chain("LIKE", " LIKE 1"),
    chain("NOT LIKE", " NOT LIKE 1"),
    chain("IS NULL", " IS NULL"),
    chain("IS NOT NULL", " IS NOT NULL"),
    chain("BETWEEN", " BETWEEN 0 AND 2"),
    chain("IN", " IN (1, 2)"),
    chain("NOT IN", " NOT IN (1, 2)"),
    // A right side that calls a function is evaluated lazily (a frame more).
    chain("AND calling", " AND length(1)"),
    chain("OR calling", " OR length(1)"),
    chain("->", " -> '$'"),
];

/// Chains ebb refuses as unsupported, after parsing: the tree is still built
/// and dropped.
const REFUSED_CHAINS: &[Deep] = &[
    chain("::", "::INTEGER"),
    nest("subscript", "", "key", "[1]"),
    chain("IS TRUE", " IS TRUE"),
    chain("COLLATE", " COLLATE x"),
];

/// Constructs the parser recurses into, once per level.
const NESTINGS: &[Deep] = &[
    nest("NOT", "NOT ", "1", ""),
    nest("unary -", "- ", "1", ""),
    nest("unary +", "+ ", "1", ""),
    nest("parentheses", "(", "1", ")"),
    nest("function", "lower(", "key", ")"),
    nest("CAST", "CAST(", "1", " AS INTEGER)"),
    nest("IN list", "1 IN (", "1", ")"),
    nest("subscript", "key[", "1", "]"),
    nest("CASE", "CASE WHEN 1 THEN ", "1", " END"),
    nest("simple CASE", "CASE 1 WHEN 2 THEN 3 ELSE ", "1", " END"),
    nest("iif", "iif(1, ", "1", ", 2)"),
    nest("json_extract", "json_extract(", "'1'", ", '$')"),
];

/// Where an expression can stand, each lowered and evaluated differently.
const PLACES: &[&str] = &[
    "SELECT {} FROM t",
    "SELECT key FROM t WHERE {}",
    "SELECT key FROM t ORDER BY {}",
    "SELECT sum({}) FROM t",
];

/// Places over the group key, rewritten after aggregation.
const GROUP_PLACES: &[&str] = &[
    "SELECT key, {} FROM t GROUP BY key",
    "SELECT count(*) FROM t GROUP BY key HAVING {}",
];

/// Only the depth limits apply: the text size and node count would refuse
/// the long chains first otherwise.
fn deep_limits() -> Limits {
    Limits {
        max_sql_bytes: usize::MAX,
        max_expr_nodes: usize::MAX,
        ..Limits::default()
    }
}

/// Whether `error` refuses a text for its depth: `max_expr_depth`, or for a
/// nesting the syntax error sqlparser gives past its recursion limit (not
/// always "recursion limit exceeded": some constructs backtrack and report
/// the token they stopped at).
fn is_depth_refusal(error: &PlanError, nesting: bool) -> bool {
    match error {
        PlanError::Limit { limit, .. } => *limit == "max_expr_depth",
        PlanError::Syntax(_) => nesting,
        _ => false,
    }
}

/// The largest `n` for which `sql(n)` is not refused for its depth.
fn deepest_accepted(sql: impl Fn(usize) -> String, nesting: bool) -> usize {
    let refused = |n: usize| match plan(&sql(n), &[], &Builtins, &deep_limits()) {
        Err(e) => is_depth_refusal(&e, nesting),
        Ok(_) => false,
    };
    let (mut accepted, mut rejected) = (0, 2 * Limits::default().max_expr_depth);
    assert!(!refused(accepted) && refused(rejected));
    while rejected - accepted > 1 {
        let mid = (accepted + rejected) / 2;
        if refused(mid) {
            rejected = mid;
        } else {
            accepted = mid;
        }
    }
    accepted
}

#[derive(Clone)]
struct Row(&'static str);

impl RowSource for Row {
    fn column(&self, column: Column) -> Value {
        match column {
            Column::Key => Value::text(self.0),
            Column::Value => Value::Bytes(Bytes::from_static(b"12")),
            Column::ExpiresAt => Value::Null,
            _ => Value::Int(1),
        }
    }

    fn group_key(&self, _i: usize) -> Value {
        Value::text(self.0)
    }

    fn agg_result(&self, _i: usize) -> Value {
        Value::Int(2)
    }
}

/// Plan `sql`, then clone, walk, EXPLAIN, evaluate (a batch and one row)
/// and drop the plan: every stage that recurses over the tree.
fn every_stage(sql: &str) -> Result<(), PlanError> {
    let plan = plan(sql, &[], &Builtins, &Limits::default())?;
    let copy = plan.clone();
    assert!(!copy.explain_lines("all 4").is_empty());
    let _ = (copy.reads_value(), copy.plugin_calls());
    let rows = [Row("a"), Row("1")];
    for expr in copy.exprs() {
        let batch = eval_batch(expr, &rows, &mut Meter::unlimited()).unwrap();
        assert_eq!(batch.len(), rows.len());
        eval_one(expr, Row("b"), &mut Meter::unlimited()).unwrap();
    }
    drop(copy);
    drop(plan);
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Planned and run.
    Chain,
    /// Parsed, then refused by the planner.
    Refused,
    /// Bounded by the parser's recursion limit.
    Nesting,
}

#[test]
fn every_stage_fits_in_a_quarter_stack_at_the_deepest_accepted_expression() {
    let mut cases = Vec::new();
    for deep in CHAINS {
        for place in PLACES {
            cases.push((place.replace("{}", "{deep}"), *deep, Kind::Chain));
        }
        // Over the group key, which is not JSON, `->` would fail (rightly).
        for place in GROUP_PLACES.iter().filter(|_| deep.name != "->") {
            cases.push((place.replace("{}", "{deep}"), deep.over_key(), Kind::Chain));
        }
    }
    for deep in REFUSED_CHAINS {
        cases.push(("SELECT {deep} FROM t".into(), *deep, Kind::Refused));
    }
    for deep in NESTINGS {
        cases.push(("SELECT {deep} FROM t".into(), *deep, Kind::Nesting));
    }
    for (place, deep, kind) in cases {
        let sql = |n: usize| place.replace("{deep}", &deep.text(n));
        let n = deepest_accepted(sql, kind == Kind::Nesting);
        let must_plan = kind == Kind::Chain;
        if must_plan {
            // A chain stops at max_expr_depth, not at the parser's limit.
            let one_more = plan(&sql(n + 1), &[], &Builtins, &deep_limits()).unwrap_err();
            assert!(
                matches!(
                    one_more,
                    PlanError::Limit {
                        limit: "max_expr_depth",
                        ..
                    }
                ),
                "{} in {place}: {one_more:?}",
                deep.name
            );
        }
        let text = sql(n);
        let outcome = on_quarter_stack(move || every_stage(&text));
        match outcome {
            Ok(()) => {}
            Err(e) if !must_plan => assert!(!is_depth_refusal(&e, false), "{e}"),
            Err(e) => panic!("{} at {n} levels in {place}: {e}", deep.name),
        }
    }
}

#[test]
fn a_100_000_term_chain_of_any_operator_is_refused_by_max_expr_depth() {
    let mut texts: Vec<(&str, String)> = CHAINS
        .iter()
        .chain(REFUSED_CHAINS)
        .map(|deep| (deep.name, format!("SELECT {} FROM t", deep.text(100_000))))
        .collect();
    let conjuncts = vec!["1 = 1"; 100_000].join(" AND ");
    texts.push(("WHERE AND", format!("SELECT key FROM t WHERE {conjuncts}")));
    for (name, sql) in texts {
        let error =
            on_quarter_stack(move || plan(&sql, &[], &Builtins, &deep_limits()).unwrap_err());
        assert!(
            matches!(
                error,
                PlanError::Limit {
                    limit: "max_expr_depth",
                    value: 1000,
                    ..
                }
            ),
            "{name}: {error:?}"
        );
    }
}

#[test]
fn a_100_000_level_nesting_is_refused_before_the_parser_recurses() {
    for deep in NESTINGS {
        let sql = format!("SELECT {} FROM t", deep.text(100_000));
        let error =
            on_quarter_stack(move || plan(&sql, &[], &Builtins, &deep_limits()).unwrap_err());
        assert!(
            matches!(
                error,
                PlanError::Limit {
                    limit: "max_expr_depth",
                    ..
                }
            ),
            "{}: {error:?}",
            deep.name
        );
    }
}

#[test]
fn a_nesting_within_max_expr_depth_is_still_refused_by_the_parser_recursion_limit() {
    for deep in NESTINGS {
        // 200 levels: under max_expr_depth, over max_depth.
        let sql = format!("SELECT {} FROM t", deep.text(200));
        let error =
            on_quarter_stack(move || plan(&sql, &[], &Builtins, &deep_limits()).unwrap_err());
        assert!(is_depth_refusal(&error, true), "{}: {error:?}", deep.name);
    }
}

#[test]
fn the_depth_error_names_the_limit_and_what_to_write_instead() {
    let terms = vec!["key = 'k'"; 600].join(" OR ");
    let error = plan(
        &format!("SELECT key FROM t WHERE {terms}"),
        &[],
        &Builtins,
        &deep_limits(),
    )
    .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("max_expr_depth"), "{message}");
    assert!(message.contains("IN ("), "{message}");
    assert!(
        message.len() < 300,
        "the message does not quote the SQL: {message}"
    );
    let keys: Vec<String> = (0..5000).map(|i| format!("'k{i}'")).collect();
    let sql = format!("SELECT key FROM t WHERE key IN ({})", keys.join(", "));
    plan(&sql, &[], &Builtins, &Limits::default()).expect("a long IN list is flat");
}

#[test]
fn a_smaller_max_expr_depth_is_enforced_exactly_as_documented() {
    let limits = Limits {
        max_expr_depth: 10,
        ..Limits::default()
    };
    // SELECT and FROM count one level each, as every keyword does.
    let sql = |n: usize| format!("SELECT {} FROM t", chain("+", " + 1").text(n));
    assert!(plan(&sql(8), &[], &Builtins, &limits).is_ok());
    assert!(matches!(
        plan(&sql(9), &[], &Builtins, &limits),
        Err(PlanError::Limit {
            limit: "max_expr_depth",
            value: 10,
            ..
        })
    ));
}
