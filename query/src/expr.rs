//! Planned expressions: what the evaluator runs, with functions resolved.

use std::fmt;
use std::sync::Arc;

use crate::functions::ScalarFunction;
use crate::value::{SqlType, Value};

/// A column of every table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Column {
    /// `key` (text).
    Key,
    /// `value` (bytes).
    Value,
    /// `_version_ms` (integer): the version's clock time.
    VersionMs,
    /// `_expires_at` (integer or NULL): the deadline in Unix ms.
    ExpiresAt,
    /// `_fragment` (integer).
    Fragment,
}

impl Column {
    /// Resolve a column name (case-insensitive).
    pub(crate) fn from_name(name: &str) -> Option<Column> {
        match name.to_ascii_lowercase().as_str() {
            "key" => Some(Column::Key),
            "value" => Some(Column::Value),
            "_version_ms" => Some(Column::VersionMs),
            "_expires_at" => Some(Column::ExpiresAt),
            "_fragment" => Some(Column::Fragment),
            _ => None,
        }
    }

    /// The column's name.
    pub fn name(self) -> &'static str {
        match self {
            Column::Key => "key",
            Column::Value => "value",
            Column::VersionMs => "_version_ms",
            Column::ExpiresAt => "_expires_at",
            Column::Fragment => "_fragment",
        }
    }

    /// The column's type.
    pub(crate) fn sql_type(self) -> SqlType {
        match self {
            Column::Key => SqlType::Text,
            Column::Value => SqlType::Bytes,
            Column::VersionMs | Column::ExpiresAt | Column::Fragment => SqlType::Integer,
        }
    }
}

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `=`
    Eq,
    /// `<>`, `!=`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
    /// `AND`
    And,
    /// `OR`
    Or,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Rem,
    /// `||`
    Concat,
    /// `->`: the JSON text of an element of a JSON document.
    Arrow,
    /// `->>`: the SQL value of an element of a JSON document.
    LongArrow,
}

impl BinaryOp {
    fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Eq => "=",
            BinaryOp::NotEq => "<>",
            BinaryOp::Lt => "<",
            BinaryOp::LtEq => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::GtEq => ">=",
            BinaryOp::And => "AND",
            BinaryOp::Or => "OR",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::Concat => "||",
            BinaryOp::Arrow => "->",
            BinaryOp::LongArrow => "->>",
        }
    }

    /// Whether the operator compares its operands.
    pub(crate) fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq
                | BinaryOp::NotEq
                | BinaryOp::Lt
                | BinaryOp::LtEq
                | BinaryOp::Gt
                | BinaryOp::GtEq
        )
    }
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// `NOT`
    Not,
    /// `-`
    Neg,
    /// `+`
    Plus,
}

/// Target of a `CAST`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CastType {
    /// `INTEGER`, `INT`, `BIGINT`
    Integer,
    /// `REAL`, `FLOAT`, `DOUBLE`
    Float,
    /// `TEXT`, `VARCHAR`
    Text,
    /// `BLOB`, `BYTES`, `BYTEA`
    Bytes,
    /// `BOOLEAN`
    Boolean,
}

/// A planned expression.
#[derive(Debug, Clone)]
pub enum Expr {
    /// A constant (parameters are bound into literals at plan time).
    Literal(Value),
    /// A table column.
    Column(Column),
    /// `op expr`
    Unary {
        /// The operator.
        op: UnaryOp,
        /// The operand.
        expr: Box<Expr>,
    },
    /// `left op right`
    Binary {
        /// The operator.
        op: BinaryOp,
        /// Left operand.
        left: Box<Expr>,
        /// Right operand.
        right: Box<Expr>,
    },
    /// `expr IS [NOT] NULL`
    IsNull {
        /// The operand.
        expr: Box<Expr>,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// `expr [NOT] IN (list)`
    InList {
        /// The operand.
        expr: Box<Expr>,
        /// The candidates.
        list: Vec<Expr>,
        /// `NOT IN`.
        negated: bool,
    },
    /// `expr [NOT] BETWEEN low AND high`
    Between {
        /// The operand.
        expr: Box<Expr>,
        /// Lower bound (inclusive).
        low: Box<Expr>,
        /// Upper bound (inclusive).
        high: Box<Expr>,
        /// `NOT BETWEEN`.
        negated: bool,
    },
    /// `expr [NOT] LIKE pattern` (case-sensitive)
    Like {
        /// The operand.
        expr: Box<Expr>,
        /// The pattern (`%` any run, `_` one character).
        pattern: Box<Expr>,
        /// `NOT LIKE`.
        negated: bool,
    },
    /// `CAST(expr AS type)`
    Cast {
        /// The operand.
        expr: Box<Expr>,
        /// The target type.
        to: CastType,
    },
    /// A scalar function call (built-in or plugin), evaluated a batch at a time.
    Call {
        /// The resolved function.
        function: Arc<dyn ScalarFunction>,
        /// Arguments.
        args: Vec<Expr>,
    },
    /// `CASE [operand] WHEN when THEN then ... [ELSE otherwise] END`, and
    /// `iif(c, a, b)`. As in SQLite, each `when` and `then` is evaluated only
    /// for the rows that reach it, so `CASE WHEN json_valid(value) THEN
    /// value ->> 'a' END` never reads an invalid document.
    Case {
        /// The simple form's operand, compared with `=` to each `when`;
        /// `None` in the searched form, where each `when` is a condition.
        operand: Option<Box<Expr>>,
        /// `(when, then)` pairs, tried in order; at least one.
        branches: Vec<(Expr, Expr)>,
        /// `ELSE`; NULL when absent.
        otherwise: Option<Box<Expr>>,
    },
    /// A column of the joined table's record (`FROM a JOIN b ON b.key =
    /// ...`): NULL where a `LEFT JOIN` found no record.
    Joined(Column),
    /// After aggregation: the value of GROUP BY expression `i` for the group.
    GroupKey(usize),
    /// After aggregation: the result of aggregate `i` for the group.
    AggResult(usize),
}

impl Expr {
    /// Visit this expression and every subexpression.
    pub(crate) fn walk(&self, visit: &mut dyn FnMut(&Expr)) {
        visit(self);
        match self {
            Expr::Unary { expr, .. } | Expr::IsNull { expr, .. } | Expr::Cast { expr, .. } => {
                expr.walk(visit)
            }
            Expr::Binary { left, right, .. } => {
                left.walk(visit);
                right.walk(visit);
            }
            Expr::InList { expr, list, .. } => {
                expr.walk(visit);
                list.iter().for_each(|e| e.walk(visit));
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                expr.walk(visit);
                low.walk(visit);
                high.walk(visit);
            }
            Expr::Like { expr, pattern, .. } => {
                expr.walk(visit);
                pattern.walk(visit);
            }
            Expr::Call { args, .. } => args.iter().for_each(|e| e.walk(visit)),
            Expr::Case {
                operand,
                branches,
                otherwise,
            } => {
                operand.iter().for_each(|e| e.walk(visit));
                for (when, then) in branches {
                    when.walk(visit);
                    then.walk(visit);
                }
                otherwise.iter().for_each(|e| e.walk(visit));
            }
            Expr::Literal(_)
            | Expr::Column(_)
            | Expr::Joined(_)
            | Expr::GroupKey(_)
            | Expr::AggResult(_) => {}
        }
    }

    /// Names of the plugin functions this expression calls.
    pub(crate) fn plugin_calls(&self) -> Vec<String> {
        let mut calls = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Call { function, .. } = e
                && function.is_plugin()
            {
                calls.push(function.name().to_string());
            }
        });
        calls
    }

    /// The static result type, when known before evaluation.
    pub(crate) fn sql_type(&self) -> SqlType {
        match self {
            Expr::Literal(v) => v.sql_type(),
            Expr::Column(c) | Expr::Joined(c) => c.sql_type(),
            Expr::Unary {
                op: UnaryOp::Not, ..
            }
            | Expr::IsNull { .. }
            | Expr::InList { .. }
            | Expr::Between { .. }
            | Expr::Like { .. } => SqlType::Boolean,
            Expr::Binary { op, .. }
                if op.is_comparison() || matches!(op, BinaryOp::And | BinaryOp::Or) =>
            {
                SqlType::Boolean
            }
            Expr::Binary {
                op: BinaryOp::Concat,
                ..
            } => SqlType::Text,
            Expr::Cast { to, .. } => match to {
                CastType::Integer => SqlType::Integer,
                CastType::Float => SqlType::Float,
                CastType::Text => SqlType::Text,
                CastType::Bytes => SqlType::Bytes,
                CastType::Boolean => SqlType::Boolean,
            },
            Expr::Call { function, .. } => function.return_type(),
            Expr::Case {
                branches,
                otherwise,
                ..
            } => {
                // One type when every result has it (a missing ELSE is NULL).
                let mut results = branches.iter().map(|(_, then)| then.sql_type());
                let first = results.next().unwrap_or(SqlType::Any);
                let agree = results.all(|t| t == first)
                    && otherwise.as_ref().is_some_and(|e| e.sql_type() == first);
                if agree { first } else { SqlType::Any }
            }
            _ => SqlType::Any,
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Literal(v) => write!(f, "{v}"),
            Expr::Column(c) => f.write_str(c.name()),
            Expr::Joined(c) => write!(f, "joined.{}", c.name()),
            Expr::Unary { op, expr } => match op {
                UnaryOp::Not => write!(f, "NOT {expr}"),
                UnaryOp::Neg => write!(f, "-{expr}"),
                UnaryOp::Plus => write!(f, "+{expr}"),
            },
            Expr::Binary { op, left, right } => write!(f, "({left} {} {right})", op.symbol()),
            Expr::IsNull { expr, negated } => {
                write!(f, "{expr} IS {}NULL", if *negated { "NOT " } else { "" })
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let items: Vec<String> = list.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "{expr} {}IN ({})",
                    if *negated { "NOT " } else { "" },
                    items.join(", ")
                )
            }
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => write!(
                f,
                "{expr} {}BETWEEN {low} AND {high}",
                if *negated { "NOT " } else { "" }
            ),
            Expr::Like {
                expr,
                pattern,
                negated,
            } => {
                write!(
                    f,
                    "{expr} {}LIKE {pattern}",
                    if *negated { "NOT " } else { "" }
                )
            }
            Expr::Cast { expr, to } => write!(f, "CAST({expr} AS {to:?})"),
            Expr::Call { function, args } => {
                let items: Vec<String> = args.iter().map(ToString::to_string).collect();
                write!(f, "{}({})", function.name(), items.join(", "))
            }
            Expr::Case {
                operand,
                branches,
                otherwise,
            } => {
                f.write_str("CASE")?;
                if let Some(operand) = operand {
                    write!(f, " {operand}")?;
                }
                for (when, then) in branches {
                    write!(f, " WHEN {when} THEN {then}")?;
                }
                if let Some(otherwise) = otherwise {
                    write!(f, " ELSE {otherwise}")?;
                }
                f.write_str(" END")
            }
            Expr::GroupKey(i) => write!(f, "#group{i}"),
            Expr::AggResult(i) => write!(f, "#agg{i}"),
        }
    }
}
