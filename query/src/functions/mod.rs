//! Functions as the planner and the executor see them: the traits a scalar
//! or aggregate function implements (built-in or plugin, native or wasm),
//! and the registry the planner resolves names against.
//!
//! - `builtins.rs`: [`Builtins`], the registry of the built-in functions.
//! - `rowwise.rs`: [`rowwise::RowFunction`], a built-in defined per row.
//! - `scalar.rs`: the first built-in scalar functions (`length`, `substr`,
//!   ...) and the lookup of every built-in scalar by name.
//! - `math.rs`, `text.rs`, `datetime/`, `json/`: SQLite's numeric, text,
//!   date and time, and JSON functions.
//! - `printf.rs`: SQLite's `printf` formatter and float-to-decimal
//!   conversion, for `printf`, `format`, `quote`, `round` and the fractions
//!   of the date and time functions.
//! - `aggregate.rs`: the built-in aggregates (`count`, `sum`, ...).
//! - `distinct.rs`: any aggregate over the distinct values of its argument.

mod aggregate;
mod builtins;
mod datetime;
mod distinct;
mod json;
mod math;
mod printf;
mod rowwise;
mod scalar;
mod text;

use std::fmt::Debug;
use std::sync::Arc;

use crate::meter::{EvalError, Meter};
use crate::value::{SqlType, Value};

pub use builtins::Builtins;
pub(crate) use distinct::Distinct;

/// The JSON operator `->`, or `->>` when `long`.
pub(crate) fn json_arrow(long: bool) -> Arc<dyn ScalarFunction> {
    json::arrow(long)
}

/// How many arguments a function takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// Exactly n.
    Exact(usize),
    /// From `min` to `max` inclusive.
    Range(usize, usize),
    /// At least n.
    AtLeast(usize),
}

impl Arity {
    /// Whether `n` arguments fit.
    pub(crate) fn accepts(self, n: usize) -> bool {
        match self {
            Arity::Exact(k) => n == k,
            Arity::Range(min, max) => (min..=max).contains(&n),
            Arity::AtLeast(min) => n >= min,
        }
    }

    /// Human description, for errors.
    pub(crate) fn describe(self) -> String {
        match self {
            Arity::Exact(k) => format!("{k}"),
            Arity::Range(min, max) => format!("{min} to {max}"),
            Arity::AtLeast(min) => format!("at least {min}"),
        }
    }
}

/// A function failed; the query fails with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{function}: {message}")]
pub struct FunctionError {
    /// The function (qualified name for plugins).
    pub function: String,
    /// What went wrong.
    pub message: String,
    /// Whether a plugin failed (HTTP 422 `plugin_error`) rather than the input (400).
    pub plugin: bool,
    /// The host could not run the function (no sandbox instance free, or
    /// the call was starved of CPU): nothing is wrong with the plugin or
    /// the input, and retrying may succeed (HTTP 503 `overloaded`).
    pub host: bool,
}

/// A scalar function, called with a batch of argument rows at a time.
pub trait ScalarFunction: Send + Sync + Debug {
    /// The name as written in SQL (`lower`, `json.get`).
    fn name(&self) -> &str;
    /// Accepted argument counts.
    fn arity(&self) -> Arity;
    /// Result type, when fixed.
    fn return_type(&self) -> SqlType {
        SqlType::Any
    }
    /// Whether this is a plugin function (shown by EXPLAIN).
    fn is_plugin(&self) -> bool {
        false
    }
    /// Whether this is one of ebb's built-ins: its cost is linear in the
    /// bytes it reads and builds (bounded by the page's budgets), so a
    /// small page calling only built-ins may run on the task that asks
    /// for it. Plugins and embedders' natives are not.
    fn is_builtin(&self) -> bool {
        false
    }
    /// Whether one call may build far more bytes than its arguments hold
    /// (`printf`'s width, `replace`'s multiplication): a batch's results
    /// are measured only once the call returns, so pages calling such a
    /// function never run inline.
    fn may_outgrow_arguments(&self) -> bool {
        false
    }
    /// One result per row. `args[j]` holds argument `j` for each of the
    /// `rows` rows (columnar, so a batch costs no per-row allocation).
    fn call(&self, args: &[Vec<Value>], rows: usize) -> Result<Vec<Value>, FunctionError>;
    /// [`ScalarFunction::call`], charging the bytes its results hold to
    /// `meter`: by default the whole batch once the call returns. A
    /// built-in that computes row by row charges each result as it is
    /// built, so a batch stops at the meter's limit (plus one result) rather
    /// than building every row first.
    fn call_metered(
        &self,
        args: &[Vec<Value>],
        rows: usize,
        meter: &mut Meter,
    ) -> Result<Vec<Value>, EvalError> {
        let out = self.call(args, rows)?;
        meter.charge_values(&out)?;
        Ok(out)
    }
}

/// A partial aggregate state: a tuple of values, so it can cross pages,
/// partitions and (later) the network.
pub type AggState = Vec<Value>;

/// An aggregate with mergeable partial states: `merge` must be associative,
/// and the result of empty input is `finish(init())`.
pub trait AggregateFunction: Send + Sync + Debug {
    /// The name as written in SQL (`count`, `stats.p95`).
    fn name(&self) -> &str;
    /// Accepted argument counts.
    fn arity(&self) -> Arity;
    /// Result type, when fixed.
    fn return_type(&self) -> SqlType {
        SqlType::Any
    }
    /// Whether this is a plugin function.
    fn is_plugin(&self) -> bool {
        false
    }
    /// Whether this is one of ebb's built-ins (see
    /// [`ScalarFunction::is_builtin`]).
    fn is_builtin(&self) -> bool {
        false
    }
    /// Whether it folds only the distinct values of its argument (`DISTINCT`
    /// inside the call), shown by EXPLAIN.
    fn is_distinct(&self) -> bool {
        false
    }
    /// The empty state.
    fn init(&self) -> Result<AggState, FunctionError>;
    /// Fold `rows` rows into `state`; `args[j]` holds argument `j` per row.
    fn update(
        &self,
        state: &mut AggState,
        args: &[Vec<Value>],
        rows: usize,
    ) -> Result<(), FunctionError>;
    /// Combine two partial states.
    fn merge(&self, left: AggState, right: AggState) -> Result<AggState, FunctionError>;
    /// The final value.
    fn finish(&self, state: AggState) -> Result<Value, FunctionError>;
}

/// Where the planner finds functions. `namespace` is the plugin name of a
/// qualified call (`json` in `json.get`), `None` for built-ins.
pub trait FunctionRegistry: Send + Sync {
    /// A scalar function, or `Ok(None)` when unknown; `Err` explains a
    /// known name used wrongly (e.g. an unknown plugin).
    fn scalar(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<dyn ScalarFunction>>, LookupError>;
    /// An aggregate function, or `Ok(None)` when unknown.
    fn aggregate(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<dyn AggregateFunction>>, LookupError>;
}

/// Why a [`FunctionRegistry`] refused a qualified name. The planner reports
/// it as [`crate::PlanError::Invalid`] with this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// No plugin is installed under the namespace.
    #[error("unknown plugin {plugin} in {plugin}.{name}: install it with PUT /v1/plugins/{plugin}")]
    UnknownPlugin {
        /// The namespace written.
        plugin: String,
        /// The function name written.
        name: String,
    },
    /// The plugin exists but declares no such function.
    #[error("plugin {plugin} has no function {name} (it has: {})", available.join(", "))]
    NoSuchFunction {
        /// The plugin.
        plugin: String,
        /// The function name written.
        name: String,
        /// The functions the plugin declares, in manifest order.
        available: Vec<String>,
    },
    /// The function is a handler (expiry or change), which SQL cannot call.
    #[error("{plugin}.{name} is a handler (expiry or change) and cannot be called in SQL")]
    ExpiryHandler {
        /// The plugin.
        plugin: String,
        /// The handler.
        name: String,
    },
    /// The namespace holds only native functions, none of this name.
    #[error("no function {namespace}.{name}")]
    UnknownFunction {
        /// The namespace.
        namespace: String,
        /// The function name written.
        name: String,
    },
    /// An aggregate was called where only a scalar fits.
    #[error("{namespace}.{name} is an aggregate; use it where an aggregate fits")]
    NotScalar {
        /// The namespace.
        namespace: String,
        /// The function name written.
        name: String,
    },
}

#[cfg(test)]
mod tests {
    use super::LookupError;

    #[test]
    fn lookup_errors_tell_the_user_what_to_do() {
        let cases = [
            (
                LookupError::UnknownPlugin {
                    plugin: "json".into(),
                    name: "get".into(),
                },
                "unknown plugin json in json.get: install it with PUT /v1/plugins/json",
            ),
            (
                LookupError::NoSuchFunction {
                    plugin: "json".into(),
                    name: "put".into(),
                    available: vec!["get".into(), "len".into()],
                },
                "plugin json has no function put (it has: get, len)",
            ),
            (
                LookupError::ExpiryHandler {
                    plugin: "archive".into(),
                    name: "on_expire".into(),
                },
                "archive.on_expire is a handler (expiry or change) and cannot be called in SQL",
            ),
            (
                LookupError::UnknownFunction {
                    namespace: "geo".into(),
                    name: "area".into(),
                },
                "no function geo.area",
            ),
            (
                LookupError::NotScalar {
                    namespace: "stats".into(),
                    name: "p99".into(),
                },
                "stats.p99 is an aggregate; use it where an aggregate fits",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }
}
