//! ebb's SQL layer: SQL text to a validated plan, key-range pushdown,
//! expression evaluation and mergeable aggregates. Pure: no I/O, no async.
//!
//! ```
//! use ebb_query::{Builtins, Limits, Value, plan};
//!
//! let plan = plan(
//!     "SELECT key, length(value) FROM users WHERE key LIKE 'user:%' ORDER BY 2 DESC LIMIT ?",
//!     &[Value::Int(10)],
//!     &Builtins,
//!     &Limits::default(),
//! )
//! .unwrap();
//! assert_eq!(plan.table, "users");
//! assert!(plan.filter.is_none(), "the LIKE prefix became a key range");
//! assert_eq!(plan.limit, Some(10));
//! ```
//!
//! Source layout, each file depending only on those listed before it:
//! `value.rs` (SQL values), `error.rs` and `limits.rs` (planning errors and
//! limits), `depth.rs` (expression depth from tokens), `functions/` (the
//! function traits and the built-ins), `expr.rs` (planned expressions),
//! `meter.rs` (the memory budget of an evaluation), `eval.rs` (evaluation),
//! `analysis.rs` (WHERE to key ranges), `plan/` (the plan, EXPLAIN, and the
//! planner: SQL text to a plan).

mod analysis;
mod depth;
mod error;
mod eval;
mod expr;
mod functions;
mod limits;
pub mod meter;
mod plan;
mod value;

pub use analysis::{KeyRange, KeyRanges};
pub use error::PlanError;
pub use eval::{RowSource, eval_batch, eval_one};
pub use expr::{BinaryOp, CastType, Column, Expr, UnaryOp};
pub use functions::{
    AggState, AggregateFunction, Arity, Builtins, FunctionError, FunctionRegistry, LookupError,
    ScalarFunction,
};
pub use limits::Limits;
pub use meter::{EvalError, Meter, OverBudget};
pub use plan::{AggregateCall, Join, OutputColumn, Plan, RECORD_COLUMNS, Shape, SortKey, plan};
pub use value::{SqlType, Value};
