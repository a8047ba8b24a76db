//! [`RowFunction`]: a built-in scalar function defined by what it does to
//! one row, so each built-in is a plain `fn` and a table entry.

use std::sync::Arc;

use super::{Arity, FunctionError, ScalarFunction};
use crate::meter::{EvalError, Meter, heap_bytes};
use crate::value::{SqlType, Value};

/// What a built-in computes for one row's arguments: the value, or the
/// message of the error that fails the query (HTTP 400, as SQLite's
/// `malformed JSON` fails its statement).
pub(crate) type RowFn = fn(&[&Value]) -> Result<Value, String>;

/// A built-in scalar function from its name, arity, result type and row
/// function. Calling it applies the row function to each row of the batch;
/// the first error fails the batch, named after the function.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowFunction {
    /// The name as written in SQL.
    pub(crate) name: &'static str,
    /// Accepted argument counts.
    pub(crate) arity: Arity,
    /// Result type, [`SqlType::Any`] when it depends on the arguments.
    pub(crate) returns: SqlType,
    /// The row function.
    pub(crate) eval: RowFn,
}

impl RowFunction {
    /// The function `name`, taking `arity` arguments, of result type
    /// `returns`, computing `eval` per row.
    pub(crate) const fn new(
        name: &'static str,
        arity: Arity,
        returns: SqlType,
        eval: RowFn,
    ) -> Self {
        RowFunction {
            name,
            arity,
            returns,
            eval,
        }
    }
}

/// Built-ins whose one result may be far larger than their arguments (up
/// to [`MAX_RESULT_BYTES`]): a width or precision, or a replacement
/// repeated at every match.
const OUTGROWING: [&str; 3] = ["printf", "format", "replace"];

/// The function named `name` in `table`, if any.
pub(crate) fn lookup(table: &[RowFunction], name: &str) -> Option<Arc<dyn ScalarFunction>> {
    table
        .iter()
        .find(|f| f.name == name)
        .map(|f| Arc::new(*f) as Arc<dyn ScalarFunction>)
}

impl ScalarFunction for RowFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn arity(&self) -> Arity {
        self.arity
    }

    fn return_type(&self) -> SqlType {
        self.returns
    }

    fn is_builtin(&self) -> bool {
        true
    }

    fn may_outgrow_arguments(&self) -> bool {
        OUTGROWING.contains(&self.name)
    }

    fn call(&self, args: &[Vec<Value>], rows: usize) -> Result<Vec<Value>, FunctionError> {
        self.call_metered(args, rows, &mut Meter::unlimited())
            .map_err(|error| match error {
                EvalError::Function(error) => error,
                EvalError::OverBudget(_) => unreachable!("an unlimited meter"),
            })
    }

    fn call_metered(
        &self,
        args: &[Vec<Value>],
        rows: usize,
        meter: &mut Meter,
    ) -> Result<Vec<Value>, EvalError> {
        let mut row: Vec<&Value> = Vec::with_capacity(args.len());
        let mut out = Vec::with_capacity(rows);
        for i in 0..rows {
            row.clear();
            row.extend(args.iter().map(|column| &column[i]));
            let value = (self.eval)(&row).map_err(|message| FunctionError {
                function: self.name.to_string(),
                message,
                plugin: false,
                host: false,
            })?;
            meter.charge(heap_bytes(&value))?;
            out.push(value);
        }
        Ok(out)
    }
}

/// Largest text or blob one call of a built-in may build: 16 MiB. A call
/// that would build more (`printf('%*d', 1e9, 1)`, `replace` of a long
/// text, a long `char(...)`) fails the query with an error naming the
/// function and this limit, before it allocates.
pub(crate) const MAX_RESULT_BYTES: usize = 16 << 20;

/// The error for a result over [`MAX_RESULT_BYTES`]: `needed` bytes.
pub(crate) fn too_large(needed: usize) -> String {
    format!(
        "the result would be {needed} bytes, over the limit of {MAX_RESULT_BYTES} bytes (16 MiB) for one value a built-in function builds"
    )
}
