//! Expression lowering: sqlparser expressions to [`Expr`], counting nodes
//! (`max_expr_nodes`) and refusing what ebb does not evaluate. Columns,
//! table qualifiers and result aliases; literals and parameters; operators,
//! IN lists and CAST. Function calls are resolved in `calls.rs`.

use bytes::Bytes;
use sqlparser::ast;

use super::join::Side;
use super::planner::{Place, Planner, SelectItem, text_prefix};
use crate::error::{PlanError, invalid, lookup, unsupported};
use crate::expr::{BinaryOp, CastType, Column, Expr, UnaryOp};
use crate::value::Value;

#[cold]
#[inline(never)]
fn too_many_nodes(max: usize) -> PlanError {
    PlanError::Limit {
        limit: "max_expr_nodes",
        value: max as u64,
        message: format!("the query has more than {max} expression nodes (max_expr_nodes)"),
    }
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
        let (qualifier, name) = match parts {
            [name] => {
                let lower = name.value.to_ascii_lowercase();
                if matches!(place, Place::GroupBy | Place::Having | Place::OrderBy)
                    && let Some(item) = items
                        .iter()
                        .find(|i| i.alias.as_deref() == Some(lower.as_str()))
                {
                    return Ok(item.expr.clone());
                }
                (None, *name)
            }
            [qualifier, name] => (Some(qualifier.value.to_ascii_lowercase()), *name),
            _ => return Err(unsupported("identifiers with more than two parts")),
        };
        let known = Column::from_name(&name.value).is_some();
        if qualifier.is_some() || (self.joined.is_some() && known) {
            let side = self.side(qualifier.as_deref(), &name.value)?;
            if let (Side::Joined, Some(column)) = (side, Column::from_name(&name.value)) {
                return Ok(Expr::Joined(column));
            }
        }
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
    pub(super) fn expr(
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

    /// A call of the built-in scalar `name` (as the registry has it).
    #[inline(never)]
    pub(super) fn builtin_call(&self, name: &str, args: Vec<Expr>) -> Result<Expr, PlanError> {
        let function = self
            .registry
            .scalar(None, name)
            .map_err(lookup)?
            .ok_or_else(|| invalid(format!("{name} is not available")))?;
        Ok(Expr::Call { function, args })
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
                self.builtin_call("substr", args)?
            }
            ast::Expr::Function(function) => self.function(function, place, items)?,
            ast::Expr::Subquery(_) | ast::Expr::Exists { .. } => {
                return Err(unsupported("subqueries"));
            }
            ast::Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => Expr::Case {
                operand: operand.as_deref().map(|o| sub(self, o)).transpose()?,
                branches: conditions
                    .iter()
                    .map(|branch| {
                        Ok((
                            self.expr(&branch.condition, place, items)?,
                            self.expr(&branch.result, place, items)?,
                        ))
                    })
                    .collect::<Result<_, PlanError>>()?,
                otherwise: else_result.as_deref().map(|e| sub(self, e)).transpose()?,
            },
            ast::Expr::Trim {
                trim_where,
                trim_what,
                expr,
                trim_characters,
            } => {
                // SQLite's trim(x[, chars]) and standard TRIM([side] [chars FROM] x).
                let name = match trim_where {
                    None | Some(ast::TrimWhereField::Both) => "trim",
                    Some(ast::TrimWhereField::Leading) => "ltrim",
                    Some(ast::TrimWhereField::Trailing) => "rtrim",
                };
                let mut args = vec![*sub(self, expr)?];
                match (trim_what, trim_characters.as_deref()) {
                    (Some(what), None) => args.push(*sub(self, what)?),
                    (None, Some([chars])) => args.push(*sub(self, chars)?),
                    (None, None) => {}
                    _ => return Err(invalid("trim() takes 1 or 2 arguments")),
                }
                self.builtin_call(name, args)?
            }

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
        ast::BinaryOperator::Arrow => BinaryOp::Arrow,
        ast::BinaryOperator::LongArrow => BinaryOp::LongArrow,
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
