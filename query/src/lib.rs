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

pub mod aggregate;
pub mod analysis;
pub mod depth;
pub mod error;
pub mod eval;
pub mod expr;
pub mod functions;
pub mod limits;
pub mod meter;
pub mod plan;
pub mod value;

pub use analysis::{KeyRange, KeyRanges};
pub use error::PlanError;
pub use eval::{RowSource, eval_batch, eval_one};
pub use expr::{Column, Expr};
pub use functions::{
    AggState, AggregateFunction, Arity, Builtins, FunctionError, FunctionRegistry, ScalarFunction,
};
pub use limits::Limits;
pub use meter::{EvalError, Meter, OverBudget};
pub use plan::{AggregateCall, OutputColumn, Plan, Shape, SortKey, plan};
pub use value::{SqlType, Value};
