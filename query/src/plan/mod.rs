//! The plan: what a query computes, as the executor runs it. Built from SQL
//! text by [`plan()`] (see `planner.rs` and the files it leads to) and
//! printed by EXPLAIN (`explain.rs`).
//!
//! Planner files, in the order a query goes through them:
//! - `planner.rs`: the entry point: size limits, parsing, one SELECT
//!   statement, parameters; the planner's state.
//! - `clauses.rs`: SELECT, FROM, WHERE, GROUP BY, HAVING, ORDER BY, LIMIT;
//!   the dialect checks that refuse what ebb does not run.
//! - `join.rs`: the tables of FROM: one table, or a key lookup join.
//! - `lower.rs`: SQL expressions to [`Expr`]: operators, columns and
//!   aliases, literals and parameters.
//! - `calls.rs`: function calls resolved against the registry: scalar or
//!   aggregate, arity, `COUNT(*)`.
//! - `grouping.rs`: an aggregate query's outputs rewritten over groups.

mod calls;
mod clauses;
mod explain;
mod grouping;
mod join;
mod lower;
mod planner;

use std::fmt;
use std::sync::Arc;

use crate::analysis::KeyRanges;
use crate::expr::{Column, Expr};
use crate::functions::{AggregateFunction, ScalarFunction};
use crate::value::SqlType;

pub use planner::plan;

/// A result column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputColumn {
    /// Alias, column name, or the expression's text.
    pub name: String,
    /// Static type (`any` when known only at run time).
    pub sql_type: SqlType,
}

/// An aggregate call with its row-level arguments.
#[derive(Debug, Clone)]
pub struct AggregateCall {
    /// The function.
    pub function: Arc<dyn AggregateFunction>,
    /// Arguments, evaluated per record (none for `COUNT(*)`).
    pub args: Vec<Expr>,
}

impl fmt::Display for AggregateCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.args.is_empty() {
            return write!(f, "{}(*)", self.function.name());
        }
        let args: Vec<String> = self.args.iter().map(ToString::to_string).collect();
        let distinct = if self.function.is_distinct() {
            "DISTINCT "
        } else {
            ""
        };
        write!(f, "{}({distinct}{})", self.function.name(), args.join(", "))
    }
}

/// A sort key.
#[derive(Debug, Clone)]
pub struct SortKey {
    /// The expression (over records for row queries, over groups for aggregates).
    pub expr: Expr,
    /// `DESC`.
    pub descending: bool,
}

/// What the query computes.
#[derive(Debug, Clone)]
pub enum Shape {
    /// One output row per matching record.
    Rows {
        /// Output expressions over the record.
        projection: Vec<Expr>,
    },
    /// One output row per group (one group when there is no GROUP BY).
    Aggregate {
        /// GROUP BY expressions over the record.
        group_by: Vec<Expr>,
        /// Aggregates computed per group.
        aggregates: Vec<AggregateCall>,
        /// HAVING over the group (`GroupKey`/`AggResult` references).
        having: Option<Expr>,
        /// Output expressions over the group.
        projection: Vec<Expr>,
    },
}

/// `FROM a [LEFT] JOIN b ON b.key = <expression over a>`: one point read
/// of `b` per record of `a` that passes `before`. Keys are unique, so each
/// record of `a` meets at most one of `b`, and the result keeps `a`'s key
/// order.
#[derive(Debug, Clone)]
pub struct Join {
    /// The looked-up table, `b` (lower-case).
    pub table: String,
    /// `LEFT JOIN`: a record of `a` with no match is kept, `b`'s columns
    /// NULL. Otherwise it is dropped.
    pub outer: bool,
    /// The key read in `b`, over `a`'s record. As SQLite compares it with
    /// `b.key` (text): text matches itself, a number matches its text, and
    /// NULL or bytes match nothing.
    pub key: Expr,
    /// The WHERE conjuncts that read only `a`, evaluated in the scan of `a`
    /// before any read of `b` (the plan's `filter` holds the others).
    pub before: Option<Expr>,
}

/// A validated query plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The table (lower-case).
    pub table: String,
    /// Keys the query can touch.
    pub ranges: KeyRanges,
    /// WHERE conjuncts expressed by `ranges` (for EXPLAIN).
    pub pushed: Vec<String>,
    /// What is evaluated per record in range.
    pub filter: Option<Expr>,
    /// Rows or aggregate.
    pub shape: Shape,
    /// Result columns.
    pub columns: Vec<OutputColumn>,
    /// ORDER BY keys; empty means key order.
    pub order_by: Vec<SortKey>,
    /// LIMIT.
    pub limit: Option<u64>,
    /// OFFSET.
    pub offset: u64,
    /// `EXPLAIN` was asked for.
    pub explain: bool,
    /// `SELECT DISTINCT`: planned as an aggregate grouped by every result
    /// expression (so its distinct rows count against the group budget).
    pub distinct: bool,
    /// A key lookup join; `None` for a query over one table. With a join,
    /// `filter`, the shape and ORDER BY read [`Expr::Joined`] columns too,
    /// and are evaluated after the lookup (see [`Plan::scan_plan`]).
    pub join: Option<Join>,
}

/// The columns of a record, in the order [`Plan::scan_plan`] projects them
/// for a join: then the key to look up.
pub const RECORD_COLUMNS: [Column; 5] = [
    Column::Key,
    Column::Value,
    Column::VersionMs,
    Column::ExpiresAt,
    Column::Fragment,
];

impl Plan {
    /// Every expression of the plan: filter, projections, grouping, HAVING,
    /// aggregate arguments, ORDER BY.
    pub fn exprs(&self) -> Vec<&Expr> {
        let mut exprs = Vec::new();
        self.for_each_expr(|e| exprs.push(e));
        exprs
    }

    /// Call `visit` with every expression of the plan, in the order of
    /// [`Plan::exprs`] (without building a list: pages ask per page).
    fn for_each_expr<'a>(&'a self, mut visit: impl FnMut(&'a Expr)) {
        self.filter.iter().for_each(&mut visit);
        if let Some(join) = &self.join {
            visit(&join.key);
            join.before.iter().for_each(&mut visit);
        }
        match &self.shape {
            Shape::Rows { projection } => projection.iter().for_each(&mut visit),
            Shape::Aggregate {
                group_by,
                aggregates,
                having,
                projection,
            } => {
                group_by.iter().for_each(&mut visit);
                having.iter().for_each(&mut visit);
                projection.iter().for_each(&mut visit);
                for aggregate in aggregates {
                    aggregate.args.iter().for_each(&mut visit);
                }
            }
        }
        self.order_by.iter().for_each(|k| visit(&k.expr));
    }

    /// Whether any node of any expression satisfies `test`.
    fn any_node(&self, mut test: impl FnMut(&Expr) -> bool) -> bool {
        let mut found = false;
        self.for_each_expr(|expr| expr.walk(&mut |e| found = found || test(e)));
        found
    }

    /// Whether any function the query calls satisfies `scalar` (a scalar
    /// function) or `aggregate` (an aggregate).
    fn any_function(
        &self,
        scalar: impl Fn(&dyn ScalarFunction) -> bool,
        aggregate: impl Fn(&dyn AggregateFunction) -> bool,
    ) -> bool {
        let aggregates = match &self.shape {
            Shape::Aggregate { aggregates, .. } => {
                aggregates.iter().any(|a| aggregate(a.function.as_ref()))
            }
            Shape::Rows { .. } => false,
        };
        aggregates
            || self
                .any_node(|e| matches!(e, Expr::Call { function, .. } if scalar(function.as_ref())))
    }

    /// Whether the query calls a plugin function (scalar or aggregate).
    pub fn calls_plugins(&self) -> bool {
        self.any_function(|f| f.is_plugin(), |a| a.is_plugin())
    }

    /// Names of the plugin functions the query calls, each once.
    pub fn plugin_calls(&self) -> Vec<String> {
        let mut calls: Vec<String> = self
            .exprs()
            .into_iter()
            .flat_map(Expr::plugin_calls)
            .collect();
        if let Shape::Aggregate { aggregates, .. } = &self.shape {
            calls.extend(
                aggregates
                    .iter()
                    .filter(|a| a.function.is_plugin())
                    .map(|a| a.function.name().to_string()),
            );
        }
        calls.sort();
        calls.dedup();
        calls
    }

    /// `Some(descending)` when the result is in key order, so partitions
    /// can be merged as they are scanned: a row query without ORDER BY
    /// (ascending) or whose first sort key is the record's key (keys are
    /// unique, so later sort keys never decide). `None` otherwise.
    pub fn key_order(&self) -> Option<bool> {
        if !matches!(self.shape, Shape::Rows { .. }) {
            return None;
        }
        match self.order_by.first() {
            None => Some(false),
            Some(first) if matches!(first.expr, Expr::Column(Column::Key)) => {
                Some(first.descending)
            }
            Some(_) => None,
        }
    }

    /// The plan a page of the scanned table runs. Without a join, the plan
    /// itself. With one, a row query over `a` alone: the conjuncts in
    /// [`Join::before`], projecting [`RECORD_COLUMNS`] and then the key to
    /// look up, in the result's key direction. The executor reads `b` for
    /// each of its rows and evaluates the plan over the joined rows.
    pub fn scan_plan(&self) -> Plan {
        let Some(join) = &self.join else {
            return self.clone();
        };
        let mut projection: Vec<Expr> = RECORD_COLUMNS.iter().map(|c| Expr::Column(*c)).collect();
        projection.push(join.key.clone());
        let order_by = match self.key_order() {
            Some(true) => vec![SortKey {
                expr: Expr::Column(Column::Key),
                descending: true,
            }],
            _ => Vec::new(),
        };
        Plan {
            table: self.table.clone(),
            ranges: self.ranges.clone(),
            pushed: self.pushed.clone(),
            filter: join.before.clone(),
            columns: projection
                .iter()
                .map(|e| OutputColumn {
                    name: e.to_string(),
                    sql_type: e.sql_type(),
                })
                .collect(),
            shape: Shape::Rows { projection },
            order_by,
            limit: None,
            offset: 0,
            explain: false,
            distinct: false,
            join: None,
        }
    }

    /// Whether every function the plan calls (scalar and aggregate) is a
    /// built-in ([`crate::ScalarFunction::is_builtin`]).
    pub fn calls_only_builtins(&self) -> bool {
        !self.any_function(|f| !f.is_builtin(), |a| !a.is_builtin())
    }

    /// Whether a scalar function the plan calls may build far more bytes
    /// than its arguments ([`crate::ScalarFunction::may_outgrow_arguments`]).
    pub fn calls_outgrowing(&self) -> bool {
        self.any_node(
            |e| matches!(e, Expr::Call { function, .. } if function.may_outgrow_arguments()),
        )
    }

    /// Bytes of the text and blob constants (literals and bound
    /// parameters) in the plan's expressions: with the bytes of the
    /// values it reads, what bounds the work of a built-in such as LIKE.
    pub fn literal_bytes(&self) -> usize {
        let mut bytes = 0;
        self.for_each_expr(|expr| {
            expr.walk(&mut |e| {
                if let Expr::Literal(value) = e {
                    bytes += crate::meter::heap_bytes(value);
                }
            });
        });
        bytes
    }

    /// Whether any expression reads the record's `value` column.
    pub fn reads_value(&self) -> bool {
        self.any_node(|e| matches!(e, Expr::Column(Column::Value)))
    }

    /// Whether any expression reads the bytes of the record's `value`:
    /// `value` anywhere but as the argument of the built-in `length`,
    /// which the row source answers from the record's header.
    pub fn reads_value_bytes(&self) -> bool {
        let (mut reads, mut measured) = (0usize, 0usize);
        self.for_each_expr(|expr| {
            expr.walk(&mut |e| match e {
                Expr::Column(Column::Value) => reads += 1,
                Expr::Call { function, args }
                    if crate::eval::length_of_column(function.as_ref(), args)
                        == Some(Column::Value) =>
                {
                    measured += 1
                }
                _ => {}
            });
        });
        reads > measured
    }
}
