//! [`Builtins`]: the registry of the built-in functions.

use std::sync::Arc;

use super::{AggregateFunction, FunctionRegistry, LookupError, ScalarFunction, aggregate, scalar};

/// The built-in functions: SQLite's core scalar functions (`length`,
/// `substr`, `printf`, ...), its date and time and JSON functions,
/// `starts_with`, and the aggregates `count`, `sum`, `min`, `max`, `avg`
/// (docs/sql.md lists them all).
#[derive(Debug, Default, Clone, Copy)]
pub struct Builtins;

impl FunctionRegistry for Builtins {
    fn scalar(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<dyn ScalarFunction>>, LookupError> {
        if namespace.is_some() {
            return Ok(None);
        }
        Ok(scalar::builtin(name))
    }

    fn aggregate(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<dyn AggregateFunction>>, LookupError> {
        if namespace.is_some() {
            return Ok(None);
        }
        Ok(aggregate::builtin(name))
    }
}
