//! Function calls: a name resolved against the registry as an aggregate
//! (allowed only where aggregates are, collected into the plan's aggregate
//! list) or a scalar function, with its arity and `COUNT(*)` checked.

use std::sync::Arc;

use sqlparser::ast;

use super::AggregateCall;
use super::planner::{Place, Planner, SelectItem};
use crate::error::{PlanError, invalid, lookup, unsupported};
use crate::expr::Expr;
use crate::functions::Distinct;

impl Planner<'_> {
    pub(super) fn function(
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
        let distinct;
        let (args, star) = match &function.args {
            ast::FunctionArguments::None => {
                return Err(unsupported(format!("{display} without parentheses")));
            }
            ast::FunctionArguments::Subquery(_) => return Err(unsupported("subqueries")),
            ast::FunctionArguments::List(list) => {
                distinct = list.duplicate_treatment == Some(ast::DuplicateTreatment::Distinct);
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
        if ns.is_none() && !star && !distinct {
            let lower = name.to_ascii_lowercase();
            if let Some(conditional) = self.conditional(&lower, &args, place, items)? {
                return Ok(conditional);
            }
            // min(a, b, ...) and max(a, b, ...) are scalars, as in SQLite.
            if matches!(lower.as_str(), "min" | "max") && args.len() > 1 {
                let args = args
                    .into_iter()
                    .map(|a| self.expr(a, place, items))
                    .collect::<Result<Vec<_>, _>>()?;
                return self.builtin_call(&lower, args);
            }
        }
        if let Some(aggregate) = self.registry.aggregate(ns, &name).map_err(lookup)? {
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
            if distinct && args.len() != 1 {
                return Err(invalid(format!(
                    "{display}(DISTINCT ...) takes exactly 1 argument, got {}",
                    args.len()
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
            let function = if distinct {
                Arc::new(Distinct::new(aggregate, self.limits.max_distinct_values))
            } else {
                aggregate
            };
            let args = args
                .into_iter()
                .map(|a| self.expr(a, Place::AggregateArg, items))
                .collect::<Result<Vec<_>, _>>()?;
            self.aggregates.push(AggregateCall { function, args });
            return Ok(Expr::AggResult(self.aggregates.len() - 1));
        }
        if star {
            return Err(invalid(format!(
                "{display}(*) is not valid; only COUNT(*) takes *"
            )));
        }
        if distinct {
            return Err(invalid(format!(
                "DISTINCT inside {display}() is only valid in an aggregate"
            )));
        }
        let Some(scalar) = self.registry.scalar(ns, &name).map_err(lookup)? else {
            return Err(invalid(match ns {
                None => format!(
                    "unknown function {display}: docs/sql.md lists the built-in functions; plugin functions are called as plugin.function(...)"
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

    /// `iif(c, a[, b])` (alias `if`) as `CASE WHEN c THEN a ELSE b END`,
    /// evaluated lazily like it; `ifnull(a, b)` as `coalesce(a, b)`; `None`
    /// for any other name.
    fn conditional(
        &mut self,
        name: &str,
        args: &[&ast::Expr],
        place: Place,
        items: &[SelectItem],
    ) -> Result<Option<Expr>, PlanError> {
        match name {
            "iif" | "if" => {
                if !(2..=3).contains(&args.len()) {
                    return Err(invalid(format!(
                        "{name}() takes 2 or 3 arguments, got {}",
                        args.len()
                    )));
                }
                let mut lowered = args
                    .iter()
                    .map(|a| self.expr(a, place, items))
                    .collect::<Result<Vec<_>, _>>()?
                    .into_iter();
                let (Some(when), Some(then)) = (lowered.next(), lowered.next()) else {
                    unreachable!("two arguments were counted");
                };
                Ok(Some(Expr::Case {
                    operand: None,
                    branches: vec![(when, then)],
                    otherwise: lowered.next().map(Box::new),
                }))
            }
            "ifnull" => {
                if args.len() != 2 {
                    return Err(invalid(format!(
                        "ifnull() takes 2 arguments, got {}",
                        args.len()
                    )));
                }
                let args = args
                    .iter()
                    .map(|a| self.expr(a, place, items))
                    .collect::<Result<Vec<_>, _>>()?;
                self.builtin_call("coalesce", args).map(Some)
            }
            _ => Ok(None),
        }
    }
}
