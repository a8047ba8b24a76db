//! FROM: one table, or one key lookup join `a [LEFT] JOIN b ON b.key =
//! <expression over a>`; and which table a column name refers to.

use sqlparser::ast;

use super::planner::{Place, Planner};
use crate::error::{PlanError, invalid, unsupported};
use crate::expr::{BinaryOp, Column, Expr};

/// The joined table as FROM names it.
pub(super) struct Joined {
    /// The table (lower-case).
    pub(super) table: String,
    /// Its alias (lower-case).
    pub(super) alias: Option<String>,
    /// `LEFT [OUTER] JOIN`.
    pub(super) outer: bool,
}

/// Which table a column belongs to.
pub(super) enum Side {
    /// The scanned table, `a`.
    Scanned,
    /// The joined table, `b`.
    Joined,
}

/// What every refusal of another join says.
const JOIN_SHAPES: &str = "the joins ebb runs are FROM a [LEFT] JOIN b ON b.key = <expression over a's columns> (one point read of b per row of a)";

/// A table of FROM: its name and alias, lower-case.
fn relation(factor: &ast::TableFactor) -> Result<(String, Option<String>), PlanError> {
    match factor {
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
            let ident = match name.0.as_slice() {
                [ast::ObjectNamePart::Identifier(ident)] => ident,
                _ => return Err(unsupported("qualified table names (schema.table)")),
            };
            let alias = match alias {
                Some(alias) if !alias.columns.is_empty() => {
                    return Err(unsupported("column aliases on the table"));
                }
                Some(alias) => Some(alias.name.value.to_ascii_lowercase()),
                None => None,
            };
            Ok((ident.value.to_ascii_lowercase(), alias))
        }
        ast::TableFactor::Derived { .. } => Err(unsupported("subqueries in FROM")),
        _ => Err(unsupported("this kind of FROM item")),
    }
}

impl Planner<'_> {
    /// Read FROM: the scanned table and, for a join, the joined one.
    /// Answers the join's `ON` condition, lowered by [`Planner::join_key`].
    pub(super) fn from<'q>(
        &mut self,
        from: &'q [ast::TableWithJoins],
    ) -> Result<Option<&'q ast::Expr>, PlanError> {
        let table = match from {
            [] => return Err(invalid("a query needs FROM <table>")),
            [one] => one,
            _ => {
                return Err(unsupported(format!(
                    "several tables in FROM; {JOIN_SHAPES}"
                )));
            }
        };
        (self.table, self.table_alias) = relation(&table.relation)?;
        let join = match table.joins.as_slice() {
            [] => return Ok(None),
            [one] => one,
            _ => return Err(unsupported(format!("more than one JOIN; {JOIN_SHAPES}"))),
        };
        let (outer, constraint) = match &join.join_operator {
            ast::JoinOperator::Join(c) | ast::JoinOperator::Inner(c) => (false, c),
            ast::JoinOperator::Left(c) | ast::JoinOperator::LeftOuter(c) => (true, c),
            _ => return Err(unsupported(format!("this kind of JOIN; {JOIN_SHAPES}"))),
        };
        let ast::JoinConstraint::On(on) = constraint else {
            return Err(unsupported(format!(
                "JOIN without ON (USING, NATURAL); {JOIN_SHAPES}"
            )));
        };
        let (joined, alias) = relation(&join.relation)?;
        let scanned_names = [Some(&self.table), self.table_alias.as_ref()];
        let joined_name = alias.as_ref().unwrap_or(&joined);
        if scanned_names.contains(&Some(joined_name)) {
            return Err(invalid(format!(
                "{joined_name} names both tables of the join: give one an alias (FROM t JOIN t AS u ON u.key = ...)"
            )));
        }
        self.joined = Some(Joined {
            table: joined,
            alias,
            outer,
        });
        Ok(Some(on))
    }

    /// The key a join reads in `b`: `on` must be `b.key = <expression over
    /// a>` (either way round).
    pub(super) fn join_key(&mut self, on: &ast::Expr) -> Result<Expr, PlanError> {
        let on = self.expr(on, Place::Where, &[])?;
        let shape = || unsupported(format!("this ON condition; {JOIN_SHAPES}"));
        let Expr::Binary {
            op: BinaryOp::Eq,
            left,
            right,
        } = on
        else {
            return Err(shape());
        };
        let reads_joined = |e: &Expr| {
            let mut joined = false;
            e.walk(&mut |e| joined |= matches!(e, Expr::Joined(_)));
            joined
        };
        match (*left, *right) {
            (Expr::Joined(Column::Key), key) | (key, Expr::Joined(Column::Key))
                if !reads_joined(&key) =>
            {
                Ok(key)
            }
            _ => Err(shape()),
        }
    }

    /// The table a column named with `qualifier` (if any) belongs to.
    pub(super) fn side(&self, qualifier: Option<&str>, name: &str) -> Result<Side, PlanError> {
        let is_scanned = |q: &str| q == self.table || self.table_alias.as_deref() == Some(q);
        let Some(joined) = &self.joined else {
            return match qualifier {
                Some(q) if !is_scanned(q) => {
                    Err(invalid(format!("unknown table {q} in {q}.{name}")))
                }
                _ => Ok(Side::Scanned),
            };
        };
        let is_joined = |q: &str| match &joined.alias {
            Some(alias) => q == alias,
            None => q == joined.table,
        };
        match qualifier {
            None => Err(invalid(format!(
                "ambiguous column {name}: both tables of the join have it; write {}.{name} or {}.{name}",
                self.table_alias.as_deref().unwrap_or(&self.table),
                joined.alias.as_deref().unwrap_or(&joined.table)
            ))),
            Some(q) if is_scanned(q) => Ok(Side::Scanned),
            Some(q) if is_joined(q) => Ok(Side::Joined),
            Some(q) => Err(invalid(format!("unknown table {q} in {q}.{name}"))),
        }
    }
}
