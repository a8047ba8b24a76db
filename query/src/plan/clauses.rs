//! The clauses of a SELECT: the dialect checks that refuse what ebb does
//! not run, the select list, WHERE, GROUP BY, HAVING, ORDER BY (with result
//! aliases and positions) and LIMIT/OFFSET. FROM is read in `join.rs`.

use sqlparser::ast;

use super::grouping::aggregate_shape;
use super::planner::{Place, Planner, SelectItem};
use super::{Join, OutputColumn, Plan, Shape, SortKey};
use crate::analysis::{push_down, split_at_join};
use crate::error::{PlanError, invalid, unsupported};
use crate::expr::{Column, Expr};
use crate::value::Value;

impl Planner<'_> {
    /// Plan one query, clause by clause. Errors come in clause order.
    pub(super) fn query(&mut self, query: &ast::Query) -> Result<Plan, PlanError> {
        let select = single_select(query)?;
        self.select_checks(select)?;
        let on = self.from(&select.from)?;
        let join_key = on.map(|on| self.join_key(on)).transpose()?;

        let filter = select
            .selection
            .as_ref()
            .map(|e| self.expr(e, Place::Where, &[]))
            .transpose()?;

        let items = self.projection(&select.projection)?;
        let group_by = self.group_by(&select.group_by, &items)?;
        let having = select
            .having
            .as_ref()
            .map(|e| self.expr_or_alias(e, Place::Having, &items))
            .transpose()?;
        let mut order_by = self.order_by(query.order_by.as_ref(), &items)?;
        let (limit, offset) = self.limit(query.limit_clause.as_ref())?;

        let aggregates = std::mem::take(&mut self.aggregates);
        let is_aggregate = !aggregates.is_empty() || !group_by.is_empty() || having.is_some();
        let distinct = matches!(select.distinct, Some(ast::Distinct::Distinct));
        let group_by = match (distinct, is_aggregate) {
            (false, _) => group_by,
            // SELECT DISTINCT a, b is SELECT a, b GROUP BY a, b.
            (true, false) => items.iter().map(|item| item.expr.clone()).collect(),
            (true, true) => {
                return Err(unsupported(
                    "SELECT DISTINCT with GROUP BY or aggregates (its groups are distinct already when GROUP BY lists every result column)",
                ));
            }
        };
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
        let mut pushdown = push_down(filter);
        let join = match (join_key, &self.joined) {
            (Some(key), Some(joined)) => {
                let (before, after) = split_at_join(pushdown.residual.take());
                pushdown.residual = after;
                Some(Join {
                    table: joined.table.clone(),
                    outer: joined.outer,
                    key,
                    before,
                })
            }
            _ => None,
        };
        let shape = if is_aggregate || distinct {
            aggregate_shape(
                items.iter().map(|item| &item.expr),
                group_by,
                aggregates,
                having,
                &mut order_by,
            )
            .map_err(|e| match e {
                PlanError::Invalid(message) if distinct && message.contains("ORDER BY") => {
                    invalid("with SELECT DISTINCT, ORDER BY may use only the selected expressions")
                }
                other => other,
            })?
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
            distinct,
            join,
        })
    }

    fn select_checks(&self, select: &ast::Select) -> Result<(), PlanError> {
        if let Some(ast::Distinct::On(_)) = select.distinct {
            return Err(unsupported("DISTINCT ON (use GROUP BY)"));
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
                    // A join's * is both tables' columns, as in SQLite.
                    if self.joined.is_some() {
                        for column in [Column::Key, Column::Value] {
                            out.push(SelectItem {
                                expr: Expr::Joined(column),
                                name: column.name().into(),
                                alias: None,
                            });
                        }
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

    /// GROUP BY expressions (result aliases and positions allowed).
    fn group_by(
        &mut self,
        group_by: &ast::GroupByExpr,
        items: &[SelectItem],
    ) -> Result<Vec<Expr>, PlanError> {
        let group_exprs: Vec<&ast::Expr> = match group_by {
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
            group_by.push(self.expr_or_alias(expr, Place::GroupBy, items)?);
        }
        if group_by.iter().any(|g| {
            let mut has_aggregate = false;
            g.walk(&mut |e| has_aggregate |= matches!(e, Expr::AggResult(_)));
            has_aggregate
        }) {
            return Err(invalid("aggregates are not allowed in GROUP BY"));
        }
        Ok(group_by)
    }

    /// ORDER BY keys (result aliases and positions allowed).
    fn order_by(
        &mut self,
        order: Option<&ast::OrderBy>,
        items: &[SelectItem],
    ) -> Result<Vec<SortKey>, PlanError> {
        let mut order_by = Vec::new();
        if let Some(order) = order {
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
                let expr = self.expr_or_alias(&key.expr, Place::OrderBy, items)?;
                order_by.push(SortKey { expr, descending });
            }
        }
        Ok(order_by)
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
}

/// The SELECT of a query, refusing query-level clauses ebb does not run.
fn single_select(query: &ast::Query) -> Result<&ast::Select, PlanError> {
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
    match &*query.body {
        ast::SetExpr::Select(select) => Ok(select),
        ast::SetExpr::SetOperation { op, .. } => Err(unsupported(format!("{op}"))),
        ast::SetExpr::Values(_) => Err(unsupported("VALUES")),
        ast::SetExpr::Query(_) => Err(unsupported("parenthesized subqueries")),
        _ => Err(unsupported("this kind of query")),
    }
}
