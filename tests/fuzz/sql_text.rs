//! SQL text generators: grammar-based SELECTs over ebb's dialect, token and
//! byte mutations of them, long chains and deep nestings of each operator
//! up to the 64 KiB SQL limit, extreme literals and parameters.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value as Json, json};

/// Stands for a parameter in generated text until the query is finished
/// (then `?` or `$n`), so parameters stay in the order of the text.
const PARAM: char = '\u{1}';

/// Generated SQL text with its parameters (in placeholder order).
#[derive(Debug, Clone)]
pub struct Sql {
    pub text: String,
    pub params: Vec<Json>,
}

impl Sql {
    fn new(text: impl Into<String>) -> Sql {
        Sql {
            text: text.into(),
            params: Vec::new(),
        }
    }

    fn param(value: Json) -> Sql {
        Sql {
            text: PARAM.to_string(),
            params: vec![value],
        }
    }

    /// Concatenate parts: text joined, parameters in order.
    fn join(parts: &[&Sql], around: &[&str]) -> Sql {
        debug_assert_eq!(around.len(), parts.len() + 1);
        let mut text = String::from(around[0]);
        let mut params = Vec::new();
        for (part, after) in parts.iter().zip(&around[1..]) {
            text.push_str(&part.text);
            params.extend(part.params.iter().cloned());
            text.push_str(after);
        }
        Sql { text, params }
    }
}

/// A finished query: text with `?` or `$n` placeholders and its params.
#[derive(Debug, Clone)]
pub struct Query {
    pub sql: String,
    pub params: Vec<Json>,
}

impl Query {
    /// The `/v1/sql` body.
    pub fn body(&self) -> Json {
        if self.params.is_empty() {
            json!({ "sql": self.sql })
        } else {
            json!({ "sql": self.sql, "params": self.params })
        }
    }
}

/// How the placeholders are written, and whether the parameter list is
/// changed after the fact (one missing, one too many).
#[derive(Debug, Clone, Copy)]
enum Placeholders {
    Question,
    Dollar,
    DropLast,
    ExtraOne,
}

fn finish(sql: Sql, style: Placeholders) -> Query {
    let mut text = String::with_capacity(sql.text.len());
    let mut n = 0;
    for c in sql.text.chars() {
        if c == PARAM {
            n += 1;
            match style {
                Placeholders::Dollar => text.push_str(&format!("${n}")),
                _ => text.push('?'),
            }
        } else {
            text.push(c);
        }
    }
    let mut params = sql.params;
    match style {
        Placeholders::DropLast => {
            params.pop();
        }
        Placeholders::ExtraOne => params.push(json!(1)),
        _ => {}
    }
    Query { sql: text, params }
}

fn placeholders() -> impl Strategy<Value = Placeholders> {
    prop_oneof![
        8 => Just(Placeholders::Question),
        3 => Just(Placeholders::Dollar),
        1 => Just(Placeholders::DropLast),
        1 => Just(Placeholders::ExtraOne),
    ]
}

pub const COLUMNS: &[&str] = &[
    "key",
    "value",
    "_version_ms",
    "_expires_at",
    "_fragment",
    "t.key",
    "t.value",
    "KEY",
    "t._fragment",
    "nope",
    "t.nope",
    "u.key",
];

/// Integer literals at and past the bounds of i64.
pub const EXTREME_INTS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999999999999",
    "4294967296",
    "2147483648",
];

/// Float literals: signed zeros, bounds, overflow to infinity, subnormals.
pub const EXTREME_FLOATS: &[&str] = &[
    "-0.0",
    "0.0",
    "1.5",
    ".5",
    "5.",
    "1e308",
    "1e309",
    "-1e309",
    "1.7976931348623157e308",
    "4.9e-324",
    "1e-400",
    "2.5E+3",
    "1e",
    "0x10",
    "1_000",
];

fn int_literal() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(EXTREME_INTS).prop_map(str::to_string),
        2 => any::<i64>().prop_map(|n| n.to_string()),
        2 => (0i64..100).prop_map(|n| n.to_string()),
    ]
}

fn float_literal() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(EXTREME_FLOATS).prop_map(str::to_string),
        1 => any::<f64>().prop_map(|f| format!("{f:?}")),
    ]
}

/// A quoted text literal (quotes doubled), sometimes long.
fn text_literal() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z0-9:%_ é'\\\\\"\\-]{0,12}",
        1 => prop::sample::select(vec!["", "%", "_", "k%", "%0_", "'", "''", "\u{0}", "\u{10ffff}", "😀", "\r\n", "\\"]).prop_map(str::to_string),
        1 => any::<String>().prop_map(|s| s.chars().take(20).collect::<String>()),
        1 => (0usize..8192).prop_map(|n| "x".repeat(n)),
    ]
    .prop_map(|s: String| format!("'{}'", s.replace('\'', "''")))
}

fn blob_literal() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..16).prop_map(|b| {
            format!("X'{}'", b.iter().map(|b| format!("{b:02x}")).collect::<String>())
        }),
        1 => prop::sample::select(vec!["X''", "x'0'", "X'zz'", "X'00FF'", "X'", "b'01'"]).prop_map(str::to_string),
        1 => (0usize..2048).prop_map(|n| format!("X'{}'", "ab".repeat(n))),
    ]
}

/// A parameter value as JSON: every type, extremes, bytes, wrong shapes.
pub fn param_value() -> impl Strategy<Value = Json> {
    prop_oneof![
        2 => any::<i64>().prop_map(|n| json!(n)),
        2 => prop::sample::select(vec![
            json!(i64::MAX), json!(i64::MIN), json!(u64::MAX), json!(0), json!(-0.0),
            json!(1e308), json!(f64::MIN_POSITIVE), json!(5e-324), json!(1.5), json!(null),
            json!(true), json!(false), json!(""), json!("%"), json!("k01"), json!("é"),
        ]),
        2 => "[a-z0-9%_:]{0,10}".prop_map(|s| json!(s)),
        1 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        1 => prop::collection::vec(any::<u8>(), 0..12).prop_map(|b| {
            use base64::Engine as _;
            json!({ "base64": base64::engine::general_purpose::STANDARD.encode(b) })
        }),
        1 => prop::sample::select(vec![
            json!({"base64": "!!"}), json!({"base64": 1}), json!({}), json!([]), json!([1]),
            json!({"base64": "AA==", "x": 1}), json!({"text": "a"}),
        ]),
        1 => (0usize..16384).prop_map(|n| json!("y".repeat(n))),
    ]
}

fn leaf() -> impl Strategy<Value = Sql> {
    prop_oneof![
        6 => prop::sample::select(COLUMNS).prop_map(Sql::new),
        3 => int_literal().prop_map(Sql::new),
        2 => float_literal().prop_map(Sql::new),
        3 => text_literal().prop_map(Sql::new),
        1 => blob_literal().prop_map(Sql::new),
        1 => prop::sample::select(vec!["TRUE", "FALSE", "NULL", "*"]).prop_map(Sql::new),
        2 => param_value().prop_map(Sql::param),
    ]
}

const BINARY: &[&str] = &[
    "+", "-", "*", "/", "%", "||", "=", "==", "!=", "<>", "<", "<=", ">", ">=", "AND", "OR",
    "LIKE", "NOT LIKE", "IS", "IS NOT", "ILIKE", "&", "|", "<<", "->",
];

const SCALARS: &[&str] = &[
    "length",
    "lower",
    "upper",
    "substr",
    "starts_with",
    "coalesce",
    "abs",
    "round",
    "iif",
    "nullif",
    "replace",
    "trim",
    "hex",
    "char",
    "printf",
    "datetime",
    "strftime",
    "json_extract",
    "json_type",
    "nope",
    "echo.f",
    "x.y",
    "LENGTH",
];

const AGGREGATES: &[&str] = &["count", "sum", "avg", "min", "max", "COUNT", "total"];

const TYPES: &[&str] = &[
    "INTEGER",
    "INT",
    "BIGINT",
    "REAL",
    "FLOAT",
    "DOUBLE",
    "TEXT",
    "VARCHAR",
    "BLOB",
    "BYTES",
    "BOOLEAN",
    "BOOL",
    "DATE",
    "VARCHAR(10)",
];

/// An expression of the dialect (and some constructs outside it).
pub fn expr() -> impl Strategy<Value = Sql> {
    leaf().prop_recursive(5, 40, 4, |inner| {
        let list = prop::collection::vec(inner.clone(), 0..4);
        prop_oneof![
            6 => (inner.clone(), prop::sample::select(BINARY), inner.clone())
                .prop_map(|(a, op, b)| Sql::join(&[&a, &b], &["", &format!(" {op} "), ""])),
            2 => (prop::sample::select(vec!["-", "+", "NOT ", "~"]), inner.clone())
                .prop_map(|(op, a)| Sql::join(&[&a], &[op, ""])),
            1 => (inner.clone(), any::<bool>()).prop_map(|(a, not)| {
                Sql::join(&[&a], &["", if not { " IS NOT NULL" } else { " IS NULL" }])
            }),
            2 => (inner.clone(), any::<bool>(), list.clone()).prop_map(|(a, not, items)| {
                let items = comma_list(&items);
                Sql::join(&[&a, &items], &["", if not { " NOT IN (" } else { " IN (" }, ")"])
            }),
            1 => (inner.clone(), any::<bool>(), inner.clone(), inner.clone()).prop_map(
                |(a, not, low, high)| Sql::join(
                    &[&a, &low, &high],
                    &["", if not { " NOT BETWEEN " } else { " BETWEEN " }, " AND ", ""],
                )
            ),
            2 => (inner.clone(), prop::sample::select(TYPES))
                .prop_map(|(a, ty)| Sql::join(&[&a], &["CAST(", &format!(" AS {ty})")])),
            3 => (prop::sample::select(SCALARS), list.clone()).prop_map(|(f, args)| call(f, &args)),
            1 => (inner.clone(), inner.clone(), prop::option::of(inner.clone())).prop_map(
                |(x, from, len)| match len {
                    Some(len) => Sql::join(&[&x, &from, &len], &["SUBSTRING(", " FROM ", " FOR ", ")"]),
                    None => Sql::join(&[&x, &from], &["SUBSTRING(", " FROM ", ")"]),
                }
            ),
            2 => (prop::sample::select(AGGREGATES), prop::option::of(inner.clone())).prop_map(
                |(f, arg)| match arg {
                    Some(arg) => call(f, &[arg]),
                    None => Sql::new(format!("{f}(*)")),
                }
            ),
            1 => (prop::sample::select(vec!["stats.p95", "echo.agg"]), inner.clone())
                .prop_map(|(f, a)| call(f, &[a])),
            2 => inner.clone().prop_map(|a| Sql::join(&[&a], &["(", ")"])),
        ]
    })
}

fn call(function: &str, args: &[Sql]) -> Sql {
    let open = format!("{function}(");
    let mut around: Vec<&str> = vec![&open];
    around.extend(std::iter::repeat_n(", ", args.len().saturating_sub(1)));
    if args.is_empty() {
        return Sql::new(format!("{function}()"));
    }
    around.push(")");
    let parts: Vec<&Sql> = args.iter().collect();
    Sql::join(&parts, &around)
}

fn comma_list(items: &[Sql]) -> Sql {
    let mut around: Vec<&str> = vec![""];
    around.extend(std::iter::repeat_n(", ", items.len().saturating_sub(1)));
    around.push("");
    if items.is_empty() {
        return Sql::new("");
    }
    let parts: Vec<&Sql> = items.iter().collect();
    Sql::join(&parts, &around)
}

fn limit_value() -> impl Strategy<Value = Sql> {
    prop_oneof![
        4 => (0i64..30).prop_map(|n| Sql::new(n.to_string())),
        2 => prop::sample::select(EXTREME_INTS).prop_map(Sql::new),
        1 => prop::sample::select(vec!["1000000000", "1000000001", "10000000", "10000001", "-1", "1.5", "'3'", "NULL"]).prop_map(Sql::new),
        1 => param_value().prop_map(Sql::param),
    ]
}

/// A SELECT statement: projection, FROM, optional clauses.
pub fn select() -> impl Strategy<Value = Query> {
    let item = (expr(), prop::option::weighted(0.3, "[a-z_]{1,6}"));
    let order_item = (
        prop_oneof![3 => expr(), 1 => (1i64..5).prop_map(|n| Sql::new(n.to_string()))],
        prop::sample::select(vec!["", " ASC", " DESC"]),
    );
    (
        prop::bool::weighted(0.05),
        prop_oneof![1 => Just(None), 8 => prop::collection::vec(item, 1..4).prop_map(Some)],
        prop::sample::select(vec!["t", "t AS u", "t u", "T", "missing", "ebb_x", "t2"]),
        prop::option::weighted(0.6, expr()),
        prop::option::weighted(0.3, prop::collection::vec(expr(), 1..3)),
        prop::option::weighted(0.2, expr()),
        prop::option::weighted(0.3, prop::collection::vec(order_item, 1..3)),
        prop::option::weighted(0.3, limit_value()),
        prop::option::weighted(0.15, limit_value()),
        placeholders(),
    )
        .prop_map(
            |(explain, items, from, filter, group, having, order, limit, offset, style)| {
                let mut parts: Vec<Sql> = Vec::new();
                let projection = match items {
                    None => Sql::new("*"),
                    Some(items) => comma_list(
                        &items
                            .into_iter()
                            .map(|(e, alias)| match alias {
                                Some(alias) => Sql::join(&[&e], &["", &format!(" AS {alias}")]),
                                None => e,
                            })
                            .collect::<Vec<_>>(),
                    ),
                };
                let head = if explain {
                    "EXPLAIN SELECT "
                } else {
                    "SELECT "
                };
                parts.push(Sql::join(&[&projection], &[head, &format!(" FROM {from}")]));
                if let Some(filter) = filter {
                    parts.push(Sql::join(&[&filter], &[" WHERE ", ""]));
                }
                if let Some(group) = group {
                    parts.push(Sql::join(&[&comma_list(&group)], &[" GROUP BY ", ""]));
                }
                if let Some(having) = having {
                    parts.push(Sql::join(&[&having], &[" HAVING ", ""]));
                }
                if let Some(order) = order {
                    let items: Vec<Sql> = order
                        .into_iter()
                        .map(|(e, dir)| Sql::join(&[&e], &["", dir]))
                        .collect();
                    parts.push(Sql::join(&[&comma_list(&items)], &[" ORDER BY ", ""]));
                }
                if let Some(limit) = limit {
                    parts.push(Sql::join(&[&limit], &[" LIMIT ", ""]));
                }
                if let Some(offset) = offset {
                    parts.push(Sql::join(&[&offset], &[" OFFSET ", ""]));
                }
                let refs: Vec<&Sql> = parts.iter().collect();
                let around = vec![""; refs.len() + 1];
                finish(Sql::join(&refs, &around), style)
            },
        )
}

/// Words and symbols a mutation inserts.
const TOKENS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP",
    "BY",
    "HAVING",
    "ORDER",
    "LIMIT",
    "OFFSET",
    "AND",
    "OR",
    "NOT",
    "IN",
    "BETWEEN",
    "LIKE",
    "IS",
    "NULL",
    "CAST",
    "AS",
    "(",
    ")",
    ",",
    "'",
    "\"",
    ";",
    "--",
    "/*",
    "*/",
    "?",
    "$1",
    "$0",
    "$99999999999",
    "*",
    "t",
    "key",
    "value",
    "JOIN",
    "UNION",
    "DISTINCT",
    "WITH",
    "CASE",
    "WHEN",
    "END",
    "INSERT",
    "EXPLAIN",
    "ESCAPE",
    "COLLATE",
    "OVER",
    "[",
    "]",
    "{",
    "}",
    "`",
    "@",
    ":",
    "::",
    ".",
    "..",
    "\\",
    "\u{0}",
    "\u{feff}",
    "é",
    "X'",
];

/// One mutation of the text.
#[derive(Debug, Clone)]
pub enum Mutation {
    DeleteToken(Index),
    DuplicateToken(Index),
    InsertToken(Index, &'static str),
    SwapTokens(Index, Index),
    InsertChars(Index, String),
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => any::<Index>().prop_map(Mutation::DeleteToken),
        2 => any::<Index>().prop_map(Mutation::DuplicateToken),
        4 => (any::<Index>(), prop::sample::select(TOKENS)).prop_map(|(i, t)| Mutation::InsertToken(i, t)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(i, j)| Mutation::SwapTokens(i, j)),
        2 => (any::<Index>(), any::<String>()).prop_map(|(i, s)| Mutation::InsertChars(i, s.chars().take(8).collect())),
        1 => any::<Index>().prop_map(Mutation::Truncate),
    ]
}

/// Split text into tokens: identifier/number runs, quoted strings, single
/// other characters (whitespace included), so joining them gives it back.
fn tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let mut token = String::from(c);
        if c.is_alphanumeric() || c == '_' {
            while let Some(&next) = chars.peek() {
                if next.is_alphanumeric() || next == '_' || next == '.' {
                    token.push(next);
                    chars.next();
                } else {
                    break;
                }
            }
        } else if c == '\'' {
            for next in chars.by_ref() {
                token.push(next);
                if next == '\'' {
                    break;
                }
            }
        }
        out.push(token);
    }
    out
}

fn apply(text: &str, mutations: &[Mutation]) -> String {
    let mut tokens = tokens(text);
    for mutation in mutations {
        if tokens.is_empty() {
            tokens.push(String::new());
        }
        let n = tokens.len();
        match mutation {
            Mutation::DeleteToken(i) => {
                tokens.remove(i.index(n));
            }
            Mutation::DuplicateToken(i) => {
                let at = i.index(n);
                tokens.insert(at, tokens[at].clone());
            }
            Mutation::InsertToken(i, token) => tokens.insert(i.index(n + 1), format!(" {token} ")),
            Mutation::SwapTokens(i, j) => tokens.swap(i.index(n), j.index(n)),
            Mutation::InsertChars(i, chars) => tokens.insert(i.index(n + 1), chars.clone()),
            Mutation::Truncate(i) => tokens.truncate(i.index(n)),
        }
    }
    tokens.concat()
}

/// A generated SELECT with 1 to 4 mutations.
pub fn mutated_select() -> impl Strategy<Value = Query> {
    (select(), prop::collection::vec(mutation(), 1..5)).prop_map(|(query, mutations)| Query {
        sql: apply(&query.sql, &mutations),
        params: query.params,
    })
}

/// Arbitrary text (any chars) as SQL.
pub fn random_text() -> impl Strategy<Value = Query> {
    prop_oneof![
        any::<String>(),
        "[ -~]{0,200}",
        prop::collection::vec(prop::sample::select(TOKENS), 0..40).prop_map(|t| t.join(" ")),
    ]
    .prop_map(|sql| Query {
        sql,
        params: Vec::new(),
    })
}

/// Terms and operators of long chains.
const CHAIN_TERMS: &[&str] = &[
    "1",
    "key",
    "'a'",
    "X'00'",
    "1.5",
    "NULL",
    "_fragment",
    "value",
    "-1",
];
const CHAIN_OPS: &[&str] = &[
    "+", "-", "*", "/", "%", "||", " AND ", " OR ", "=", "<", " LIKE ", " IS ", ">=",
];

/// Where a chain or nesting is put in the statement.
const PLACES: &[&str] = &["select", "where", "group", "order", "having"];

fn place(expr: &str, at: &str) -> String {
    match at {
        "select" => format!("SELECT {expr} FROM t"),
        "where" => format!("SELECT key FROM t WHERE {expr}"),
        "group" => format!("SELECT count(*) FROM t GROUP BY {expr}"),
        "order" => format!("SELECT key FROM t ORDER BY {expr} LIMIT 3"),
        _ => format!("SELECT count(*) FROM t HAVING {expr}"),
    }
}

/// `t op t op ... t` with up to `max_terms` terms, in any clause.
pub fn chain(max_terms: usize) -> impl Strategy<Value = Query> {
    (
        prop::sample::select(CHAIN_TERMS),
        prop::sample::select(CHAIN_OPS),
        1..=max_terms.max(1),
        prop::sample::select(PLACES),
    )
        .prop_map(|(term, op, n, at)| {
            let mut expr = String::with_capacity(n * (term.len() + op.len()));
            expr.push_str(term);
            for _ in 1..n {
                expr.push_str(op);
                expr.push_str(term);
            }
            Query {
                sql: place(&expr, at),
                params: Vec::new(),
            }
        })
}

/// Nestings: `open` repeated, the core, `close` repeated.
const NESTINGS: &[(&str, &str, &str)] = &[
    ("(", "1", ")"),
    ("NOT ", "key = 'a'", ""),
    ("- ", "1", ""),
    ("+ ", "1", ""),
    ("lower(", "key", ")"),
    ("length(", "key", ")"),
    ("coalesce(", "key", ", NULL)"),
    ("substr(", "key", ", 1)"),
    ("CAST(", "key", " AS TEXT)"),
    ("(1 IN (", "1", "))"),
    ("(1 BETWEEN ", "1", " AND 2)"),
    ("(key LIKE ", "'a'", ")"),
    ("(", "1", " IS NULL)"),
    ("SUBSTRING(", "key", " FROM 1)"),
    ("echo.f(", "key", ")"),
    ("count(", "1", ")"),
    ("CASE WHEN key > 'a' THEN ", "key", " END"),
    ("CASE key WHEN 'a' THEN 1 ELSE ", "2", " END"),
    ("iif(key > 'a', ", "key", ", NULL)"),
    ("printf('%s', ", "key", ")"),
    ("json_extract(", "'{\"a\": 1}'", ", '$.a')"),
    ("(key > 'a' AND length(", "key", ") > 1)"),
];

/// A nesting of one construct `depth` deep, up to `max_depth`.
pub fn nesting(max_depth: usize) -> impl Strategy<Value = Query> {
    (
        prop::sample::select(NESTINGS),
        1..=max_depth.max(1),
        prop::sample::select(PLACES),
    )
        .prop_map(|((open, core, close), depth, at)| {
            let expr = format!("{}{core}{}", open.repeat(depth), close.repeat(depth));
            Query {
                sql: place(&expr, at),
                params: Vec::new(),
            }
        })
}

/// Long lists: IN lists, projections, coalesce arguments, GROUP BY and
/// ORDER BY items, up to and past their limits and the 64 KiB text limit.
pub fn long_list() -> impl Strategy<Value = Query> {
    (
        prop::sample::select(vec!["in", "select", "coalesce", "group", "order", "params"]),
        1usize..14_000,
    )
        .prop_map(|(kind, n)| {
            let items = |item: &str| vec![item; n].join(", ");
            match kind {
                "in" => Query {
                    sql: format!("SELECT key FROM t WHERE _fragment IN ({})", items("1")),
                    params: Vec::new(),
                },
                "select" => Query {
                    sql: format!("SELECT {} FROM t LIMIT 1", items("key")),
                    params: Vec::new(),
                },
                "coalesce" => Query {
                    sql: format!("SELECT coalesce({}) FROM t", items("NULL")),
                    params: Vec::new(),
                },
                "group" => Query {
                    sql: format!("SELECT count(*) FROM t GROUP BY {}", items("key")),
                    params: Vec::new(),
                },
                "order" => Query {
                    sql: format!("SELECT key FROM t ORDER BY {}", items("key")),
                    params: Vec::new(),
                },
                _ => Query {
                    sql: format!("SELECT key FROM t WHERE key IN ({})", items("?")),
                    params: vec![json!("k01"); n],
                },
            }
        })
}

/// Text right around the 64 KiB limit.
pub fn at_text_limit() -> impl Strategy<Value = Query> {
    (
        -64i64..64,
        prop::sample::select(vec!["literal", "comment", "spaces"]),
    )
        .prop_map(|(delta, how)| {
            let target = (64 * 1024 + delta) as usize;
            let head = "SELECT key FROM t WHERE key = '";
            let sql = match how {
                "literal" => {
                    let n = target.saturating_sub(head.len() + 1);
                    format!("{head}{}'", "x".repeat(n))
                }
                "comment" => {
                    let base = "SELECT key FROM t /**/";
                    let n = target.saturating_sub(base.len());
                    format!("SELECT key FROM t /*{}*/", "c".repeat(n))
                }
                _ => {
                    let base = "SELECT key FROM t";
                    format!(
                        "SELECT{}key FROM t",
                        " ".repeat(target.saturating_sub(base.len()) + 1)
                    )
                }
            };
            Query {
                sql,
                params: Vec::new(),
            }
        })
}

/// Large parameters, kept well under a memory blow-up on today's code:
/// one up to just past the 1 MiB parameter limit used once, or up to four
/// of at most 64 KiB concatenated (four 1 MB parameters concatenated pin
/// gigabytes before the fix of issue #13 lands; see `known` in fuzz.rs).
pub fn large_params(max_concat_param: usize) -> impl Strategy<Value = Query> {
    prop_oneof![
        prop::sample::select(vec![0usize, 1, 1 << 16, (1 << 20) - 1, 1 << 20, (1 << 20) + 1])
            .prop_map(|n| Query {
                sql: "SELECT length(?) FROM t LIMIT 1".into(),
                params: vec![json!("p".repeat(n))],
            }),
        (1usize..=4, 0..=max_concat_param).prop_map(|(k, n)| Query {
            sql: format!("SELECT {} FROM t LIMIT 2", vec!["?"; k].join(" || ")),
            params: vec![json!("q".repeat(n)); k],
        }),
        (0..=max_concat_param).prop_map(|n| {
            use base64::Engine as _;
            Query {
                sql: "SELECT key FROM t WHERE value = ? OR key LIKE ?".into(),
                params: vec![
                    json!({"base64": base64::engine::general_purpose::STANDARD.encode(vec![0xffu8; n])}),
                    json!("%".repeat(n.min(60_000))),
                ],
            }
        }),
    ]
}
