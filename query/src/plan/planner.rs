//! The planner's entry point: SQL text to a [`Plan`] through size limits,
//! tokenizing (with the depth bound), parsing, one SELECT statement and its
//! parameters. The planner's state lives here; its clauses, expressions,
//! calls and grouping are lowered in the sibling files.

use std::fmt;

use sqlparser::ast;
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Tokenizer;

use super::join::Joined;
use super::{AggregateCall, Plan};
use crate::depth::depth_bound;
use crate::error::{PlanError, invalid, unsupported};
use crate::expr::Expr;
use crate::functions::FunctionRegistry;
use crate::limits::Limits;
use crate::value::Value;

/// Plan `sql` with `params`, resolving functions in `registry`.
pub fn plan(
    sql: &str,
    params: &[Value],
    registry: &dyn FunctionRegistry,
    limits: &Limits,
) -> Result<Plan, PlanError> {
    if sql.len() > limits.max_sql_bytes {
        return Err(PlanError::Limit {
            limit: "max_sql_bytes",
            value: limits.max_sql_bytes as u64,
            message: format!(
                "SQL text is {} bytes; the limit is {} (max_sql_bytes)",
                sql.len(),
                limits.max_sql_bytes
            ),
        });
    }
    if params.len() > limits.max_params {
        return Err(PlanError::Limit {
            limit: "max_params",
            value: limits.max_params as u64,
            message: format!(
                "{} parameters; the limit is {} (max_params)",
                params.len(),
                limits.max_params
            ),
        });
    }
    let statements = parse(sql, limits)?;
    let statement = match statements.as_slice() {
        [] => return Err(invalid("no statement: send one SELECT")),
        [one] => one,
        _ => return Err(unsupported("more than one statement per request")),
    };
    let (query, explain) = match statement {
        ast::Statement::Query(query) => (query, false),
        ast::Statement::Explain {
            statement,
            analyze: false,
            verbose: false,
            ..
        } => match &**statement {
            ast::Statement::Query(query) => (query, true),
            _ => return Err(unsupported("EXPLAIN of anything but SELECT")),
        },
        other => {
            let text = text_prefix(other, 40);
            let word = text
                .split_whitespace()
                .next()
                .unwrap_or("this statement")
                .to_uppercase();
            return Err(unsupported(format!(
                "{word} (only SELECT queries are accepted)"
            )));
        }
    };
    let mut planner = Planner {
        registry,
        limits,
        params,
        next_positional: 0,
        used_params: vec![false; params.len()],
        nodes: 0,
        aggregates: Vec::new(),
        table_alias: None,
        table: String::new(),
        joined: None,
    };
    let mut plan = planner.query(query)?;
    plan.explain = explain;
    if let Some(unused) = planner.used_params.iter().position(|used| !used) {
        return Err(invalid(format!(
            "parameter {} was given but the query does not use it",
            unused + 1
        )));
    }
    Ok(plan)
}

/// Tokenize, refuse expressions deeper than `max_expr_depth` while they are
/// still tokens, then parse with sqlparser's recursion limit (`max_depth`).
fn parse(sql: &str, limits: &Limits) -> Result<Vec<ast::Statement>, PlanError> {
    let dialect = GenericDialect {};
    let syntax = |e: ParserError| PlanError::Syntax(e.to_string());
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(|e| syntax(e.into()))?;
    let depth = depth_bound(tokens.iter().map(|t| &t.token));
    if depth > limits.max_expr_depth {
        return Err(PlanError::Limit {
            limit: "max_expr_depth",
            value: limits.max_expr_depth as u64,
            message: format!(
                "an expression is up to {depth} levels deep (each operator of a chain is one level); the limit is {} (max_expr_depth): write long OR chains of equalities as x IN (a, b, ...), or split the expression",
                limits.max_expr_depth
            ),
        });
    }
    Parser::new(&dialect)
        .with_recursion_limit(limits.max_depth)
        .with_tokens_with_locations(tokens)
        .parse_statements()
        .map_err(syntax)
}

/// The planner's state while it lowers one query.
pub(super) struct Planner<'a> {
    pub(super) registry: &'a dyn FunctionRegistry,
    pub(super) limits: &'a Limits,
    pub(super) params: &'a [Value],
    /// The next `?` parameter.
    pub(super) next_positional: usize,
    /// Which parameters the query used (all must be).
    pub(super) used_params: Vec<bool>,
    /// Expression nodes lowered so far (`max_expr_nodes`).
    pub(super) nodes: usize,
    /// Aggregate calls found so far; `Expr::AggResult(i)` is the i-th.
    pub(super) aggregates: Vec<AggregateCall>,
    /// The alias of the table in FROM (lower-case).
    pub(super) table_alias: Option<String>,
    /// The table (lower-case).
    pub(super) table: String,
    /// The joined table, in a join.
    pub(super) joined: Option<Joined>,
}

/// Where an expression appears: decides whether aggregates and aliases may be used.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    Where,
    Select,
    GroupBy,
    Having,
    OrderBy,
    AggregateArg,
}

impl Place {
    pub(super) fn allows_aggregates(self) -> bool {
        matches!(self, Place::Select | Place::Having | Place::OrderBy)
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Place::Where => "WHERE",
            Place::Select => "SELECT",
            Place::GroupBy => "GROUP BY",
            Place::Having => "HAVING",
            Place::OrderBy => "ORDER BY",
            Place::AggregateArg => "an aggregate's arguments",
        }
    }
}

/// A SELECT item: its expression, its result column name and its alias.
pub(super) struct SelectItem {
    pub(super) expr: Expr,
    pub(super) name: String,
    pub(super) alias: Option<String>,
}

/// The first `max` characters of `value`'s text. Formatting stops there, so
/// an error message never renders a whole deep expression.
pub(super) fn text_prefix(value: &dyn fmt::Display, max: usize) -> String {
    struct Prefix {
        text: String,
        room: usize,
    }
    impl fmt::Write for Prefix {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            for c in s.chars() {
                if self.room == 0 {
                    return Err(fmt::Error);
                }
                self.text.push(c);
                self.room -= 1;
            }
            Ok(())
        }
    }
    let mut prefix = Prefix {
        text: String::new(),
        room: max,
    };
    // Err only means the text was cut at `max` characters.
    let _ = fmt::write(&mut prefix, format_args!("{value}"));
    prefix.text
}
