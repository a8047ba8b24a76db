//! GROUP BY: an aggregate query's SELECT, HAVING and ORDER BY expressions
//! rewritten over groups, where a GROUP BY expression becomes a group key
//! and any other column must sit inside an aggregate.

use super::{AggregateCall, Shape, SortKey};
use crate::error::{PlanError, invalid};
use crate::expr::Expr;

/// The shape of an aggregate query: its result expressions (`outputs`),
/// HAVING and ORDER BY keys rewritten over the groups of `group_by`.
pub(super) fn aggregate_shape<'e>(
    outputs: impl Iterator<Item = &'e Expr>,
    group_by: Vec<Expr>,
    aggregates: Vec<AggregateCall>,
    having: Option<Expr>,
    order_by: &mut [SortKey],
) -> Result<Shape, PlanError> {
    let groups: Vec<GroupText> = group_by.iter().map(GroupText::of).collect();
    let post = |expr: &Expr, place: &str| to_group_expr(expr, &groups, place);
    let projection = outputs
        .map(|expr| post(expr, "SELECT"))
        .collect::<Result<Vec<_>, _>>()?;
    let having = having.map(|h| post(&h, "HAVING")).transpose()?;
    for key in order_by {
        key.expr = post(&key.expr, "ORDER BY")?;
    }
    Ok(Shape::Aggregate {
        group_by,
        aggregates,
        having,
        projection,
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
        Expr::Column(c) | Expr::Joined(c) => {
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
        Expr::Case {
            operand,
            branches,
            otherwise,
        } => Expr::Case {
            operand: operand.as_deref().map(rec).transpose()?,
            branches: branches
                .iter()
                .map(|(when, then)| {
                    Ok((
                        to_group_expr(when, group_by, place)?,
                        to_group_expr(then, group_by, place)?,
                    ))
                })
                .collect::<Result<_, PlanError>>()?,
            otherwise: otherwise.as_deref().map(rec).transpose()?,
        },
    })
}
