//! SQL text to a validated plan: parsing with sqlparser, checking the
//! dialect, resolving names, functions and parameters, and pushdown.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use sqlparser::ast;
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Tokenizer;

use crate::analysis::{KeyRanges, push_down};
use crate::depth::depth_bound;
use crate::error::PlanError;
use crate::expr::{BinaryOp, CastType, Column, Expr, UnaryOp};
use crate::functions::{AggregateFunction, FunctionRegistry};
use crate::limits::Limits;
use crate::value::{SqlType, Value};

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
        write!(f, "{}({})", self.function.name(), args.join(", "))
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
}

impl Plan {
    /// Every expression of the plan: filter, projections, grouping, HAVING,
    /// aggregate arguments, ORDER BY.
    pub fn exprs(&self) -> Vec<&Expr> {
        let mut exprs: Vec<&Expr> = self.filter.iter().collect();
        match &self.shape {
            Shape::Rows { projection } => exprs.extend(projection),
            Shape::Aggregate {
                group_by,
                aggregates,
                having,
                projection,
            } => {
                exprs.extend(group_by);
                exprs.extend(having);
                exprs.extend(projection);
                for aggregate in aggregates {
                    exprs.extend(&aggregate.args);
                }
            }
        }
        exprs.extend(self.order_by.iter().map(|k| &k.expr));
        exprs
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

    /// Whether any expression reads the record's `value` column.
    pub fn reads_value(&self) -> bool {
        let mut reads = false;
        for expr in self.exprs() {
            expr.walk(&mut |e| reads |= matches!(e, Expr::Column(Column::Value)));
        }
        reads
    }

    /// The plan as text lines, for EXPLAIN.
    pub fn explain_lines(&self, fragments: &str) -> Vec<String> {
        let mut lines = vec![format!("table: {}", self.table)];
        let ranges = if self.ranges.is_all() {
            "all keys".to_string()
        } else if self.ranges.0.is_empty() {
            "none (the filter is never true)".to_string()
        } else {
            self.ranges
                .0
                .iter()
                .map(|r| format!("{:?}..{:?}", r.start, r.end))
                .collect::<Vec<_>>()
                .join(", ")
        };
        lines.push(format!("key ranges: {ranges}"));
        lines.push(format!("fragments: {fragments}"));
        lines.push(format!(
            "pushed down: {}",
            if self.pushed.is_empty() {
                "nothing".to_string()
            } else {
                self.pushed.join(" AND ")
            }
        ));
        lines.push(format!(
            "filter per record: {}",
            self.filter
                .as_ref()
                .map_or("none".to_string(), ToString::to_string)
        ));
        match &self.shape {
            Shape::Rows { projection } => {
                let items: Vec<String> = projection.iter().map(ToString::to_string).collect();
                lines.push(format!("project: {}", items.join(", ")));
            }
            Shape::Aggregate {
                group_by,
                aggregates,
                having,
                ..
            } => {
                let groups: Vec<String> = group_by.iter().map(ToString::to_string).collect();
                let aggs: Vec<String> = aggregates.iter().map(ToString::to_string).collect();
                lines.push(format!(
                    "aggregate: {} (partial per partition, merged)",
                    aggs.join(", ")
                ));
                if !groups.is_empty() {
                    lines.push(format!("group by: {}", groups.join(", ")));
                }
                if let Some(having) = having {
                    lines.push(format!("having: {having}"));
                }
            }
        }
        if !self.order_by.is_empty() {
            let keys: Vec<String> = self
                .order_by
                .iter()
                .map(|k| format!("{}{}", k.expr, if k.descending { " DESC" } else { "" }))
                .collect();
            lines.push(format!("order by: {}", keys.join(", ")));
        }
        if self.limit.is_some() || self.offset > 0 {
            lines.push(format!(
                "limit: {}, offset: {}",
                self.limit.map_or("none".to_string(), |l| l.to_string()),
                self.offset
            ));
        }
        let plugins = self.plugin_calls();
        lines.push(format!(
            "plugin calls: {}",
            if plugins.is_empty() {
                "none".to_string()
            } else {
                plugins.join(", ")
            }
        ));
        lines
    }
}

// The error constructors stay out of line: inlined, their temporaries would
// grow the frame of `Planner::expr`, which recurses once per operator.

#[cold]
#[inline(never)]
fn unsupported(what: impl Into<String>) -> PlanError {
    PlanError::Unsupported(what.into())
}

#[cold]
#[inline(never)]
fn invalid(what: impl Into<String>) -> PlanError {
    PlanError::Invalid(what.into())
}

/// The first `max` characters of `value`'s text. Formatting stops there, so
/// an error message never renders a whole deep expression.
fn text_prefix(value: &dyn fmt::Display, max: usize) -> String {
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

#[cold]
#[inline(never)]
fn too_many_nodes(max: usize) -> PlanError {
    PlanError::Limit {
        limit: "max_expr_nodes",
        value: max as u64,
        message: format!("the query has more than {max} expression nodes (max_expr_nodes)"),
    }
}

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

struct Planner<'a> {
    registry: &'a dyn FunctionRegistry,
    limits: &'a Limits,
    params: &'a [Value],
    next_positional: usize,
    used_params: Vec<bool>,
    nodes: usize,
    aggregates: Vec<AggregateCall>,
    table_alias: Option<String>,
    table: String,
}

/// Where an expression appears: decides whether aggregates and aliases may be used.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Where,
    Select,
    GroupBy,
    Having,
    OrderBy,
    AggregateArg,
}

impl Place {
    fn allows_aggregates(self) -> bool {
        matches!(self, Place::Select | Place::Having | Place::OrderBy)
    }

    fn name(self) -> &'static str {
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

struct SelectItem {
    expr: Expr,
    name: String,
    alias: Option<String>,
}

impl Planner<'_> {
    fn count_node(&mut self) -> Result<(), PlanError> {
        self.nodes += 1;
        if self.nodes > self.limits.max_expr_nodes {
            return Err(too_many_nodes(self.limits.max_expr_nodes));
        }
        Ok(())
    }

    fn check_literal(&self, value: &Value) -> Result<(), PlanError> {
        let len = match value {
            Value::Text(t) => t.len(),
            Value::Bytes(b) => b.len(),
            _ => 0,
        };
        if len > self.limits.max_literal_bytes {
            return Err(PlanError::Limit {
                limit: "max_literal_bytes",
                value: self.limits.max_literal_bytes as u64,
                message: format!(
                    "a literal or parameter is {len} bytes; the limit is {} (max_literal_bytes)",
                    self.limits.max_literal_bytes
                ),
            });
        }
        Ok(())
    }

    fn query(&mut self, query: &ast::Query) -> Result<Plan, PlanError> {
        if query.with.is_some() {
            return Err(unsupported("WITH (common table expressions)"));
        }
        if query.fetch.is_some() {
            return Err(unsupported("FETCH"));
        }
        if !query.locks.is_empty() {
            return Err(unsupported("FOR UPDATE / FOR SHARE"));
        }
        if query.for_clause.is_some() || query.settings.is_some() || query.format_clause.is_some() {
            return Err(unsupported("FOR / SETTINGS / FORMAT clauses"));
        }
        if !query.pipe_operators.is_empty() {
            return Err(unsupported("pipe operators"));
        }
        let select = match &*query.body {
            ast::SetExpr::Select(select) => select,
            ast::SetExpr::SetOperation { op, .. } => return Err(unsupported(format!("{op}"))),
            ast::SetExpr::Values(_) => return Err(unsupported("VALUES")),
            ast::SetExpr::Query(_) => return Err(unsupported("parenthesized subqueries")),
            _ => return Err(unsupported("this kind of query")),
        };
        self.select_checks(select)?;
        self.from(&select.from)?;

        let filter = select
            .selection
            .as_ref()
            .map(|e| self.expr(e, Place::Where, &[]))
            .transpose()?;

        let items = self.projection(&select.projection)?;

        let group_exprs: Vec<&ast::Expr> = match &select.group_by {
            ast::GroupByExpr::Expressions(exprs, modifiers) => {
                if !modifiers.is_empty() {
                    return Err(unsupported("GROUP BY modifiers (ROLLUP, CUBE, TOTALS)"));
                }
                exprs.iter().collect()
            }
            ast::GroupByExpr::All(_) => return Err(unsupported("GROUP BY ALL")),
        };
        let mut group_by = Vec::new();
        for expr in group_exprs {
            group_by.push(self.expr_or_alias(expr, Place::GroupBy, &items)?);
        }
        if group_by.iter().any(|g| {
            let mut has_aggregate = false;
            g.walk(&mut |e| has_aggregate |= matches!(e, Expr::AggResult(_)));
            has_aggregate
        }) {
            return Err(invalid("aggregates are not allowed in GROUP BY"));
        }
        let having = select
            .having
            .as_ref()
            .map(|e| self.expr_or_alias(e, Place::Having, &items))
            .transpose()?;

        let mut order_by = Vec::new();
        if let Some(order) = &query.order_by {
            if order.interpolate.is_some() {
                return Err(unsupported("INTERPOLATE"));
            }
            let keys = match &order.kind {
                ast::OrderByKind::Expressions(keys) => keys,
                ast::OrderByKind::All(_) => return Err(unsupported("ORDER BY ALL")),
            };
            for key in keys {
                if key.with_fill.is_some() {
                    return Err(unsupported("WITH FILL"));
                }
                if key.options.nulls_first.is_some() {
                    return Err(unsupported(
                        "NULLS FIRST / NULLS LAST (NULLs sort first ascending, last descending)",
                    ));
                }
                let descending = match &key.options.sort {
                    None | Some(ast::OrderBySort::Asc) => false,
                    Some(ast::OrderBySort::Desc) => true,
                    Some(ast::OrderBySort::Using(_)) => {
                        return Err(unsupported("ORDER BY ... USING"));
                    }
                };
                let expr = self.expr_or_alias(&key.expr, Place::OrderBy, &items)?;
                order_by.push(SortKey { expr, descending });
            }
        }
        let (limit, offset) = self.limit(query.limit_clause.as_ref())?;

        let aggregates = std::mem::take(&mut self.aggregates);
        let is_aggregate = !aggregates.is_empty() || !group_by.is_empty() || having.is_some();
        let columns: Vec<OutputColumn> = items
            .iter()
            .map(|item| OutputColumn {
                name: item.name.clone(),
                sql_type: match item.expr {
                    Expr::AggResult(i) => aggregates[i].function.return_type(),
                    _ => item.expr.sql_type(),
                },
            })
            .collect();
        let pushdown = push_down(filter);
        let shape = if is_aggregate {
            let groups: Vec<GroupText> = group_by.iter().map(GroupText::of).collect();
            let post = |expr: &Expr, place: &str| to_group_expr(expr, &groups, place);
            let projection = items
                .iter()
                .map(|item| post(&item.expr, "SELECT"))
                .collect::<Result<Vec<_>, _>>()?;
            let having = having.map(|h| post(&h, "HAVING")).transpose()?;
            for key in &mut order_by {
                key.expr = post(&key.expr, "ORDER BY")?;
            }
            Shape::Aggregate {
                group_by,
                aggregates,
                having,
                projection,
            }
        } else {
            Shape::Rows {
                projection: items.into_iter().map(|item| item.expr).collect(),
            }
        };
        Ok(Plan {
            table: self.table.clone(),
            ranges: pushdown.ranges,
            pushed: pushdown.pushed,
            filter: pushdown.residual,
            shape,
            columns,
            order_by,
            limit,
            offset,
            explain: false,
        })
    }

    fn select_checks(&self, select: &ast::Select) -> Result<(), PlanError> {
        if select.distinct.is_some() {
            return Err(unsupported("DISTINCT"));
        }
        if select.top.is_some() {
            return Err(unsupported("TOP"));
        }
        if select.into.is_some() {
            return Err(unsupported("SELECT INTO"));
        }
        if select.exclude.is_some()
            || select.select_modifiers.is_some()
            || !select.optimizer_hints.is_empty()
        {
            return Err(unsupported("SELECT modifiers"));
        }
        if !select.lateral_views.is_empty() {
            return Err(unsupported("LATERAL VIEW"));
        }
        if select.prewhere.is_some() {
            return Err(unsupported("PREWHERE"));
        }
        if !select.connect_by.is_empty() {
            return Err(unsupported("CONNECT BY"));
        }
        if !select.cluster_by.is_empty()
            || !select.distribute_by.is_empty()
            || !select.sort_by.is_empty()
        {
            return Err(unsupported("CLUSTER BY / DISTRIBUTE BY / SORT BY"));
        }
        if !select.named_window.is_empty() {
            return Err(unsupported("WINDOW"));
        }
        if select.qualify.is_some() {
            return Err(unsupported("QUALIFY"));
        }
        if select.value_table_mode.is_some() {
            return Err(unsupported("SELECT AS VALUE / STRUCT"));
        }
        Ok(())
    }

    fn from(&mut self, from: &[ast::TableWithJoins]) -> Result<(), PlanError> {
        let table = match from {
            [] => return Err(invalid("a query needs FROM <table>")),
            [one] => one,
            _ => return Err(unsupported("several tables in FROM (joins)")),
        };
        if !table.joins.is_empty() {
            return Err(unsupported("JOIN"));
        }
        match &table.relation {
            ast::TableFactor::Table {
                name,
                alias,
                args,
                with_hints,
                version,
                with_ordinality,
                partitions,
                json_path,
                sample,
                index_directives,
                inheritance,
            } => {
                if args.is_some() {
                    return Err(unsupported("table functions"));
                }
                if !with_hints.is_empty()
                    || version.is_some()
                    || *with_ordinality
                    || !partitions.is_empty()
                    || json_path.is_some()
                    || sample.is_some()
                    || !index_directives.is_empty()
                    || inheritance.is_some()
                {
                    return Err(unsupported("table modifiers (hints, versions, samples)"));
                }
                let parts = &name.0;
                let ident = match parts.as_slice() {
                    [ast::ObjectNamePart::Identifier(ident)] => ident,
                    _ => return Err(unsupported("qualified table names (schema.table)")),
                };
                self.table = ident.value.to_ascii_lowercase();
                if let Some(alias) = alias {
                    if !alias.columns.is_empty() {
                        return Err(unsupported("column aliases on the table"));
                    }
                    self.table_alias = Some(alias.name.value.to_ascii_lowercase());
                }
                Ok(())
            }
            ast::TableFactor::Derived { .. } => Err(unsupported("subqueries in FROM")),
            _ => Err(unsupported("this kind of FROM item")),
        }
    }

    fn projection(&mut self, items: &[ast::SelectItem]) -> Result<Vec<SelectItem>, PlanError> {
        let mut out = Vec::new();
        for item in items {
            match item {
                ast::SelectItem::UnnamedExpr(expr) => {
                    let planned = self.expr(expr, Place::Select, &[])?;
                    let name = match &planned {
                        Expr::Column(c) => c.name().to_string(),
                        _ => expr.to_string(),
                    };
                    out.push(SelectItem {
                        expr: planned,
                        name,
                        alias: None,
                    });
                }
                ast::SelectItem::ExprWithAlias { expr, alias } => {
                    let planned = self.expr(expr, Place::Select, &[])?;
                    out.push(SelectItem {
                        expr: planned,
                        name: alias.value.clone(),
                        alias: Some(alias.value.to_ascii_lowercase()),
                    });
                }
                ast::SelectItem::Wildcard(options) => {
                    if *options != ast::WildcardAdditionalOptions::default() {
                        return Err(unsupported(
                            "wildcard options (EXCLUDE, EXCEPT, REPLACE, RENAME)",
                        ));
                    }
                    for column in [Column::Key, Column::Value] {
                        out.push(SelectItem {
                            expr: Expr::Column(column),
                            name: column.name().into(),
                            alias: None,
                        });
                    }
                }
                ast::SelectItem::QualifiedWildcard(..) => {
                    return Err(unsupported("qualified wildcards (t.*); use *"));
                }
                _ => return Err(unsupported("this kind of select item")),
            }
        }
        Ok(out)
    }

    /// An expression in GROUP BY, HAVING or ORDER BY, where a result alias or
    /// a 1-based result column position may stand for the result expression.
    fn expr_or_alias(
        &mut self,
        expr: &ast::Expr,
        place: Place,
        items: &[SelectItem],
    ) -> Result<Expr, PlanError> {
        if place != Place::Having
            && let ast::Expr::Value(v) = expr
            && let ast::Value::Number(n, _) = &v.value
        {
            let position: usize = n.parse().map_err(|_| {
                invalid(format!(
                    "{} position {n} is not a result column number",
                    place.name()
                ))
            })?;
            if position == 0 || position > items.len() {
                return Err(invalid(format!(
                    "{} position {position} is out of range: the query has {} result columns",
                    place.name(),
                    items.len()
                )));
            }
            return Ok(items[position - 1].expr.clone());
        }
        self.expr(expr, place, items)
    }

    fn limit(
        &mut self,
        clause: Option<&ast::LimitClause>,
    ) -> Result<(Option<u64>, u64), PlanError> {
        let (limit, offset) = match clause {
            None => return Ok((None, 0)),
            Some(ast::LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) => {
                if !limit_by.is_empty() {
                    return Err(unsupported("LIMIT BY"));
                }
                (limit.as_ref(), offset.as_ref().map(|o| &o.value))
            }
            Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => {
                (Some(limit), Some(offset))
            }
        };
        let (max_limit, max_offset) = (self.limits.max_limit, self.limits.max_offset);
        let mut number = |expr: Option<&ast::Expr>,
                          what: &'static str,
                          max: u64|
         -> Result<Option<u64>, PlanError> {
            let Some(expr) = expr else { return Ok(None) };
            let value = match self.expr(expr, Place::Where, &[])? {
                Expr::Literal(v) => v,
                _ => {
                    return Err(invalid(format!(
                        "{what} must be a non-negative integer or a parameter"
                    )));
                }
            };
            let n = match value {
                Value::Int(n) if n >= 0 => n as u64,
                _ => {
                    return Err(invalid(format!(
                        "{what} must be a non-negative integer, not {value}"
                    )));
                }
            };
            if n > max {
                return Err(PlanError::Limit {
                    limit: if what == "LIMIT" {
                        "max_limit"
                    } else {
                        "max_offset"
                    },
                    value: max,
                    message: format!("{what} {n} is over the maximum {max}"),
                });
            }
            Ok(Some(n))
        };
        let limit = number(limit, "LIMIT", max_limit)?;
        let offset = number(offset, "OFFSET", max_offset)?.unwrap_or(0);
        Ok((limit, offset))
    }

    fn param(&mut self, placeholder: &str) -> Result<Value, PlanError> {
        let index = if placeholder == "?" {
            self.next_positional += 1;
            self.next_positional - 1
        } else if let Some(n) = placeholder
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
        {
            if n == 0 {
                return Err(invalid("parameters are numbered from $1"));
            }
            n - 1
        } else {
            return Err(unsupported(format!(
                "parameter style {placeholder} (use ? or $1)"
            )));
        };
        let value = self.params.get(index).cloned().ok_or_else(|| {
            invalid(format!(
                "the query uses parameter {} but {} were given",
                index + 1,
                self.params.len()
            ))
        })?;
        self.used_params[index] = true;
        self.check_literal(&value)?;
        Ok(value)
    }

    fn literal(&mut self, value: &ast::Value) -> Result<Value, PlanError> {
        let v = match value {
            ast::Value::Number(n, _) => match n.parse::<i64>() {
                Ok(i) => Value::Int(i),
                Err(_) => Value::Float(
                    n.parse::<f64>()
                        .map_err(|_| invalid(format!("bad number {n}")))?,
                ),
            },
            ast::Value::SingleQuotedString(s) => Value::text(s.as_str()),
            ast::Value::HexStringLiteral(h) => {
                if h.len() % 2 != 0 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(invalid(format!(
                        "bad blob literal X'{h}': use an even number of hex digits"
                    )));
                }
                let bytes: Vec<u8> = (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex digits"))
                    .collect();
                Value::Bytes(Bytes::from(bytes))
            }
            ast::Value::Boolean(b) => Value::Bool(*b),
            ast::Value::Null => Value::Null,
            ast::Value::Placeholder(p) => return self.param(p),
            ast::Value::DoubleQuotedString(s) => {
                return Err(invalid(format!(
                    "\"{s}\" is a quoted identifier, and there is no such column; write text as '{s}'"
                )));
            }
            other => return Err(unsupported(format!("literal {other}"))),
        };
        self.check_literal(&v)?;
        Ok(v)
    }

    fn column(
        &self,
        parts: &[&ast::Ident],
        items: &[SelectItem],
        place: Place,
    ) -> Result<Expr, PlanError> {
        let name = match parts {
            [name] => {
                let lower = name.value.to_ascii_lowercase();
                if matches!(place, Place::GroupBy | Place::Having | Place::OrderBy)
                    && let Some(item) = items
                        .iter()
                        .find(|i| i.alias.as_deref() == Some(lower.as_str()))
                {
                    return Ok(item.expr.clone());
                }
                *name
            }
            [qualifier, name] => {
                let q = qualifier.value.to_ascii_lowercase();
                if q != self.table && Some(&q) != self.table_alias.as_ref() {
                    return Err(invalid(format!(
                        "unknown table {} in {}.{}",
                        qualifier.value, qualifier.value, name.value
                    )));
                }
                *name
            }
            _ => return Err(unsupported("identifiers with more than two parts")),
        };
        Column::from_name(&name.value).map(Expr::Column).ok_or_else(|| {
            let hint = if name.quote_style == Some('"') {
                format!(" (\"{0}\" is a quoted identifier; write text as '{0}')", name.value)
            } else {
                String::new()
            };
            invalid(format!(
                "unknown column {}: columns are key, value, _version_ms, _expires_at and _fragment{hint}",
                name.value
            ))
        })
    }

    /// Lower one expression. An operator chain recurses here once per level
    /// (up to `max_expr_depth` levels), so this frame stays small: the node
    /// kinds that chain are lowered here and everything else out of line in
    /// [`Planner::other_expr`].
    fn expr(
        &mut self,
        expr: &ast::Expr,
        place: Place,
        items: &[SelectItem],
    ) -> Result<Expr, PlanError> {
        self.count_node()?;
        let sub = |this: &mut Self, e: &ast::Expr| this.expr(e, place, items).map(Box::new);
        Ok(match expr {
            ast::Expr::Nested(inner) => return self.expr(inner, place, items),
            ast::Expr::BinaryOp { left, op, right } => Expr::Binary {
                op: binary_op(op)?,
                left: sub(self, left)?,
                right: sub(self, right)?,
            },
            ast::Expr::UnaryOp {
                op: ast::UnaryOperator::Minus,
                expr: operand,
            } if is_two_to_the_63(operand) => Expr::Literal(Value::Int(i64::MIN)),
            ast::Expr::UnaryOp { op, expr } => Expr::Unary {
                op: unary_op(op)?,
                expr: sub(self, expr)?,
            },
            ast::Expr::IsNull(e) => Expr::IsNull {
                expr: sub(self, e)?,
                negated: false,
            },
            ast::Expr::IsNotNull(e) => Expr::IsNull {
                expr: sub(self, e)?,
                negated: true,
            },
            ast::Expr::Between {
                expr,
                negated,
                low,
                high,
            } => Expr::Between {
                expr: sub(self, expr)?,
                low: sub(self, low)?,
                high: sub(self, high)?,
                negated: *negated,
            },
            ast::Expr::Like {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            } => {
                if *any {
                    return Err(unsupported("LIKE ANY"));
                }
                if escape_char.is_some() {
                    return Err(unsupported("LIKE ... ESCAPE"));
                }
                Expr::Like {
                    expr: sub(self, expr)?,
                    pattern: sub(self, pattern)?,
                    negated: *negated,
                }
            }
            ast::Expr::In {
                expr,
                target: ast::InTarget::List(list),
                negated,
                ..
            } => {
                self.check_in_list(list.len())?;
                Expr::InList {
                    expr: sub(self, expr)?,
                    list: self.expr_list(list, place, items)?,
                    negated: *negated,
                }
            }
            ast::Expr::Cast {
                kind,
                expr,
                data_type,
                format,
            } => {
                if !matches!(kind, ast::CastKind::Cast) || format.is_some() {
                    return Err(unsupported(
                        "TRY_CAST, SAFE_CAST, :: and CAST ... FORMAT (use CAST(x AS type))",
                    ));
                }
                Expr::Cast {
                    to: cast_type(data_type)?,
                    expr: sub(self, expr)?,
                }
            }
            other => return self.other_expr(other, place, items),
        })
    }

    #[inline(never)]
    fn check_in_list(&self, len: usize) -> Result<(), PlanError> {
        if len > self.limits.max_in_list {
            return Err(PlanError::Limit {
                limit: "max_in_list",
                value: self.limits.max_in_list as u64,
                message: format!(
                    "IN list has {len} items; the limit is {} (max_in_list)",
                    self.limits.max_in_list
                ),
            });
        }
        Ok(())
    }

    #[inline(never)]
    fn expr_list(
        &mut self,
        list: &[ast::Expr],
        place: Place,
        items: &[SelectItem],
    ) -> Result<Vec<Expr>, PlanError> {
        list.iter().map(|e| self.expr(e, place, items)).collect()
    }

    /// Lower the expressions that do not chain: names, literals, IN lists,
    /// function calls, and refusals.
    #[inline(never)]
    fn other_expr(
        &mut self,
        expr: &ast::Expr,
        place: Place,
        items: &[SelectItem],
    ) -> Result<Expr, PlanError> {
        let sub = |this: &mut Self, e: &ast::Expr| this.expr(e, place, items).map(Box::new);
        Ok(match expr {
            ast::Expr::Identifier(ident) => self.column(&[ident], items, place)?,
            ast::Expr::CompoundIdentifier(idents) => {
                let parts: Vec<&ast::Ident> = idents.iter().collect();
                self.column(&parts, items, place)?
            }
            ast::Expr::Value(v) => Expr::Literal(self.literal(&v.value)?),
            ast::Expr::In {
                target: ast::InTarget::Subquery(_),
                ..
            } => return Err(unsupported("subqueries")),
            ast::Expr::In { .. } => return Err(unsupported("this form of IN")),
            ast::Expr::ILike { .. } => {
                return Err(unsupported(
                    "ILIKE (LIKE is case-sensitive; compare lower(x) instead)",
                ));
            }
            ast::Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![*sub(self, expr)?];
                match substring_from {
                    Some(from) => args.push(*sub(self, from)?),
                    None => args.push(Expr::Literal(Value::Int(1))),
                }
                if let Some(count) = substring_for {
                    args.push(*sub(self, count)?);
                }
                let function = self
                    .registry
                    .scalar(None, "substr")
                    .map_err(invalid)?
                    .ok_or_else(|| invalid("substr is not available"))?;
                Expr::Call { function, args }
            }
            ast::Expr::Function(function) => self.function(function, place, items)?,
            ast::Expr::Subquery(_) | ast::Expr::Exists { .. } => {
                return Err(unsupported("subqueries"));
            }
            ast::Expr::Case { .. } => return Err(unsupported("CASE")),
            ast::Expr::Wildcard(_) => {
                return Err(invalid("* is only allowed alone in SELECT or in COUNT(*)"));
            }
            ast::Expr::IsTrue(_)
            | ast::Expr::IsFalse(_)
            | ast::Expr::IsNotTrue(_)
            | ast::Expr::IsNotFalse(_)
            | ast::Expr::IsUnknown(_)
            | ast::Expr::IsNotUnknown(_) => {
                return Err(unsupported(
                    "IS TRUE / IS FALSE / IS UNKNOWN (use = TRUE, NOT x, IS NULL)",
                ));
            }
            ast::Expr::IsDistinctFrom(..) | ast::Expr::IsNotDistinctFrom(..) => {
                return Err(unsupported("IS [NOT] DISTINCT FROM"));
            }
            other => {
                return Err(unsupported(format!(
                    "the expression {}",
                    text_prefix(other, 60)
                )));
            }
        })
    }

    fn function(
        &mut self,
        function: &ast::Function,
        place: Place,
        items: &[SelectItem],
    ) -> Result<Expr, PlanError> {
        let (namespace, name) = match function.name.0.as_slice() {
            [ast::ObjectNamePart::Identifier(name)] => (None, name.value.clone()),
            [
                ast::ObjectNamePart::Identifier(ns),
                ast::ObjectNamePart::Identifier(name),
            ] => (Some(ns.value.to_ascii_lowercase()), name.value.clone()),
            _ => return Err(unsupported(format!("function name {}", function.name))),
        };
        let display = match &namespace {
            Some(ns) => format!("{ns}.{name}"),
            None => name.to_ascii_lowercase(),
        };
        if function.over.is_some() {
            return Err(unsupported("window functions (OVER)"));
        }
        if function.filter.is_some() {
            return Err(unsupported("FILTER (WHERE ...) on aggregates"));
        }
        if !function.within_group.is_empty()
            || function.null_treatment.is_some()
            || function.uses_odbc_syntax
        {
            return Err(unsupported(format!("modifiers on {display}")));
        }
        if !matches!(function.parameters, ast::FunctionArguments::None) {
            return Err(unsupported(format!("parametric function {display}")));
        }
        let (args, star) = match &function.args {
            ast::FunctionArguments::None => {
                return Err(unsupported(format!("{display} without parentheses")));
            }
            ast::FunctionArguments::Subquery(_) => return Err(unsupported("subqueries")),
            ast::FunctionArguments::List(list) => {
                if list.duplicate_treatment.is_some() {
                    return Err(unsupported(format!("DISTINCT or ALL inside {display}()")));
                }
                if !list.clauses.is_empty() {
                    return Err(unsupported(format!("clauses inside {display}()")));
                }
                let mut args = Vec::new();
                let mut star = false;
                for arg in &list.args {
                    match arg {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => args.push(e),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) => star = true,
                        _ => {
                            return Err(unsupported(format!(
                                "named or qualified arguments to {display}"
                            )));
                        }
                    }
                }
                (args, star)
            }
        };
        let ns = namespace.as_deref();
        if let Some(aggregate) = self.registry.aggregate(ns, &name).map_err(invalid)? {
            if !place.allows_aggregates() {
                return Err(invalid(format!(
                    "aggregate {display}() is not allowed in {}",
                    place.name()
                )));
            }
            if star && (!args.is_empty() || display != "count") {
                return Err(invalid(format!(
                    "{display}(*) is not valid; only COUNT(*) takes *"
                )));
            }
            if !star && !aggregate.arity().accepts(args.len())
                || (display == "count" && !star && args.is_empty())
            {
                return Err(invalid(format!(
                    "{display}() takes {} arguments, got {}",
                    aggregate.arity().describe(),
                    args.len()
                )));
            }
            let args = args
                .into_iter()
                .map(|a| self.expr(a, Place::AggregateArg, items))
                .collect::<Result<Vec<_>, _>>()?;
            self.aggregates.push(AggregateCall {
                function: aggregate,
                args,
            });
            return Ok(Expr::AggResult(self.aggregates.len() - 1));
        }
        if star {
            return Err(invalid(format!(
                "{display}(*) is not valid; only COUNT(*) takes *"
            )));
        }
        let Some(scalar) = self.registry.scalar(ns, &name).map_err(invalid)? else {
            return Err(invalid(match ns {
                None => format!(
                    "unknown function {display}: built-ins are length, lower, upper, substr, starts_with, coalesce, count, sum, min, max, avg; plugin functions are called as plugin.function(...)"
                ),
                Some(_) => format!("unknown function {display}"),
            }));
        };
        if !scalar.arity().accepts(args.len()) {
            return Err(invalid(format!(
                "{display}() takes {} arguments, got {}",
                scalar.arity().describe(),
                args.len()
            )));
        }
        let args = args
            .into_iter()
            .map(|a| self.expr(a, place, items))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Expr::Call {
            function: scalar,
            args,
        })
    }
}

/// Whether `expr` is the integer literal 9223372036854775808, maybe in
/// parentheses: negated, it is `i64::MIN`, an integer as in SQLite, though
/// alone it does not fit an `i64` and is a float.
fn is_two_to_the_63(mut expr: &ast::Expr) -> bool {
    while let ast::Expr::Nested(inner) = expr {
        expr = inner;
    }
    matches!(expr, ast::Expr::Value(v)
        if matches!(&v.value, ast::Value::Number(n, _) if n.parse::<u64>() == Ok(1 << 63)))
}

#[inline(never)]
fn binary_op(op: &ast::BinaryOperator) -> Result<BinaryOp, PlanError> {
    Ok(match op {
        ast::BinaryOperator::Eq => BinaryOp::Eq,
        ast::BinaryOperator::NotEq => BinaryOp::NotEq,
        ast::BinaryOperator::Lt => BinaryOp::Lt,
        ast::BinaryOperator::LtEq => BinaryOp::LtEq,
        ast::BinaryOperator::Gt => BinaryOp::Gt,
        ast::BinaryOperator::GtEq => BinaryOp::GtEq,
        ast::BinaryOperator::And => BinaryOp::And,
        ast::BinaryOperator::Or => BinaryOp::Or,
        ast::BinaryOperator::Plus => BinaryOp::Add,
        ast::BinaryOperator::Minus => BinaryOp::Sub,
        ast::BinaryOperator::Multiply => BinaryOp::Mul,
        ast::BinaryOperator::Divide => BinaryOp::Div,
        ast::BinaryOperator::Modulo => BinaryOp::Rem,
        ast::BinaryOperator::StringConcat => BinaryOp::Concat,
        other => return Err(unsupported(format!("operator {other}"))),
    })
}

#[inline(never)]
fn unary_op(op: &ast::UnaryOperator) -> Result<UnaryOp, PlanError> {
    Ok(match op {
        ast::UnaryOperator::Not => UnaryOp::Not,
        ast::UnaryOperator::Minus => UnaryOp::Neg,
        ast::UnaryOperator::Plus => UnaryOp::Plus,
        other => return Err(unsupported(format!("operator {other}"))),
    })
}

#[inline(never)]
fn cast_type(data_type: &ast::DataType) -> Result<CastType, PlanError> {
    use ast::DataType as D;
    Ok(match data_type {
        D::Integer(_) | D::Int(_) | D::BigInt(_) | D::Int64 => CastType::Integer,
        D::Real | D::Float(_) | D::Double(_) | D::DoublePrecision | D::Float64 => CastType::Float,
        D::Text | D::Varchar(_) | D::String(_) => CastType::Text,
        D::Blob(_) | D::Bytes(_) | D::Bytea => CastType::Bytes,
        D::Boolean | D::Bool => CastType::Boolean,
        other => {
            return Err(unsupported(format!(
                "CAST to {other} (use INTEGER, REAL, TEXT, BLOB or BOOLEAN)"
            )));
        }
    })
}

/// A GROUP BY expression as [`to_group_expr`] compares it: by its text,
/// and first by its size.
struct GroupText {
    nodes: usize,
    text: String,
}

impl GroupText {
    fn of(expr: &Expr) -> GroupText {
        GroupText {
            nodes: node_count(expr),
            text: expr.to_string(),
        }
    }
}

fn node_count(expr: &Expr) -> usize {
    let mut nodes = 0;
    expr.walk(&mut |_| nodes += 1);
    nodes
}

/// Rewrite a SELECT/HAVING/ORDER BY expression of an aggregate query over
/// groups: GROUP BY expressions become `GroupKey`, and a column outside both
/// GROUP BY and an aggregate is an error.
fn to_group_expr(expr: &Expr, group_by: &[GroupText], place: &str) -> Result<Expr, PlanError> {
    // Sizes first: rendering every subexpression would be quadratic in the
    // depth of a long chain.
    let nodes = node_count(expr);
    if group_by.iter().any(|g| g.nodes == nodes) {
        let text = expr.to_string();
        if let Some(i) = group_by
            .iter()
            .position(|g| g.nodes == nodes && g.text == text)
        {
            return Ok(Expr::GroupKey(i));
        }
    }
    let rec = |e: &Expr| to_group_expr(e, group_by, place).map(Box::new);
    Ok(match expr {
        Expr::Column(c) => {
            return Err(invalid(format!(
                "column {} in {place} must appear in GROUP BY or inside an aggregate",
                c.name()
            )));
        }
        Expr::Literal(_) | Expr::GroupKey(_) | Expr::AggResult(_) => expr.clone(),
        Expr::Unary { op, expr } => Expr::Unary {
            op: *op,
            expr: rec(expr)?,
        },
        Expr::Binary { op, left, right } => Expr::Binary {
            op: *op,
            left: rec(left)?,
            right: rec(right)?,
        },
        Expr::IsNull { expr, negated } => Expr::IsNull {
            expr: rec(expr)?,
            negated: *negated,
        },
        Expr::InList {
            expr,
            list,
            negated,
        } => Expr::InList {
            expr: rec(expr)?,
            list: list
                .iter()
                .map(|e| to_group_expr(e, group_by, place))
                .collect::<Result<_, _>>()?,
            negated: *negated,
        },
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => Expr::Between {
            expr: rec(expr)?,
            low: rec(low)?,
            high: rec(high)?,
            negated: *negated,
        },
        Expr::Like {
            expr,
            pattern,
            negated,
        } => Expr::Like {
            expr: rec(expr)?,
            pattern: rec(pattern)?,
            negated: *negated,
        },
        Expr::Cast { expr, to } => Expr::Cast {
            expr: rec(expr)?,
            to: *to,
        },
        Expr::Call { function, args } => Expr::Call {
            function: function.clone(),
            args: args
                .iter()
                .map(|e| to_group_expr(e, group_by, place))
                .collect::<Result<_, _>>()?,
        },
    })
}
