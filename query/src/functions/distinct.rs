//! [`Distinct`]: an aggregate over the distinct values of its argument
//! (`count(DISTINCT x)`, `sum(DISTINCT x)`, a plugin's `p95(DISTINCT x)`).

use std::cmp::Ordering;
use std::sync::Arc;

use super::{AggState, AggregateFunction, Arity, FunctionError};
use crate::value::{SqlType, Value};

/// `inner` over the distinct values of its one argument. The partial state
/// is the set of values seen, kept sorted (SQLite's order for equal-looking
/// values: numbers numerically, `1` equal to `1.0`) and unique, so states
/// merge across pages and partitions by a linear merge. At finish, `inner`
/// folds the set in ascending order, as SQLite feeds it from its index.
///
/// A set over `max_values` values fails the query with an error naming
/// `max_distinct_values`; nothing is dropped.
#[derive(Debug)]
pub(crate) struct Distinct {
    inner: Arc<dyn AggregateFunction>,
    max_values: usize,
}

impl Distinct {
    /// `inner(DISTINCT x)`, holding at most `max_values` distinct values.
    pub(crate) fn new(inner: Arc<dyn AggregateFunction>, max_values: usize) -> Distinct {
        Distinct { inner, max_values }
    }

    fn check(&self, set: &[Value]) -> Result<(), FunctionError> {
        if set.len() <= self.max_values {
            return Ok(());
        }
        Err(FunctionError {
            function: format!("{}(DISTINCT ...)", self.inner.name()),
            message: format!(
                "more than {} distinct values (max_distinct_values); narrow the WHERE or group by something finer",
                self.max_values
            ),
            plugin: false,
            host: false,
        })
    }
}

/// The sorted union of two sorted, unique sets.
fn union(left: Vec<Value>, right: Vec<Value>) -> Vec<Value> {
    if left.is_empty() {
        return right;
    }
    if right.is_empty() {
        return left;
    }
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut left, mut right) = (left.into_iter().peekable(), right.into_iter().peekable());
    loop {
        let order = match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => l.total_cmp(r),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => return out,
        };
        match order {
            Ordering::Less => out.extend(left.next()),
            Ordering::Greater => out.extend(right.next()),
            Ordering::Equal => {
                out.extend(left.next());
                right.next();
            }
        }
    }
}

impl AggregateFunction for Distinct {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn arity(&self) -> Arity {
        Arity::Exact(1)
    }

    fn return_type(&self) -> SqlType {
        self.inner.return_type()
    }

    fn is_plugin(&self) -> bool {
        self.inner.is_plugin()
    }

    fn is_builtin(&self) -> bool {
        self.inner.is_builtin()
    }

    fn is_distinct(&self) -> bool {
        true
    }

    fn init(&self) -> Result<AggState, FunctionError> {
        Ok(Vec::new())
    }

    fn update(
        &self,
        state: &mut AggState,
        args: &[Vec<Value>],
        rows: usize,
    ) -> Result<(), FunctionError> {
        let mut batch: Vec<Value> = args[0][..rows].to_vec();
        batch.sort_by(Value::total_cmp);
        batch.dedup_by(|a, b| a.total_cmp(b) == Ordering::Equal);
        *state = union(std::mem::take(state), batch);
        self.check(state)
    }

    fn merge(&self, left: AggState, right: AggState) -> Result<AggState, FunctionError> {
        let merged = union(left, right);
        self.check(&merged)?;
        Ok(merged)
    }

    fn finish(&self, state: AggState) -> Result<Value, FunctionError> {
        let mut inner = self.inner.init()?;
        let rows = state.len();
        if rows > 0 {
            self.inner.update(&mut inner, &[state], rows)?;
        }
        self.inner.finish(inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions::{Builtins, FunctionRegistry};

    fn distinct(name: &str, max: usize) -> Distinct {
        let inner = Builtins.aggregate(None, name).unwrap().unwrap();
        Distinct::new(inner, max)
    }

    fn run(f: &Distinct, pages: &[Vec<Value>]) -> Result<Value, FunctionError> {
        let mut states = Vec::new();
        for page in pages {
            let mut state = f.init()?;
            f.update(&mut state, std::slice::from_ref(page), page.len())?;
            states.push(state);
        }
        let mut merged = f.init()?;
        for state in states {
            merged = f.merge(merged, state)?;
        }
        f.finish(merged)
    }

    #[test]
    fn distinct_values_are_counted_once_across_pages() {
        let count = distinct("count", 100);
        let pages = vec![
            vec![
                Value::Int(1),
                Value::Float(1.0),
                Value::text("1"),
                Value::Null,
            ],
            vec![Value::Int(2), Value::Int(1), Value::Bool(true)],
            vec![],
        ];
        // 1 = 1.0 = TRUE; '1' is text; NULL is not counted.
        assert_eq!(run(&count, &pages), Ok(Value::Int(3)));
        let sum = distinct("sum", 100);
        assert_eq!(run(&sum, &pages), Ok(Value::Float(4.0)));
        assert_eq!(run(&sum, &[vec![Value::Null]]), Ok(Value::Null));
    }

    #[test]
    fn a_set_over_its_limit_fails_naming_it() {
        let count = distinct("count", 2);
        let error = run(
            &count,
            &[vec![Value::Int(1)], vec![Value::Int(2), Value::Int(3)]],
        )
        .unwrap_err();
        assert!(error.to_string().contains("max_distinct_values"), "{error}");
        // Duplicates do not count against it.
        let values = vec![Value::Int(1); 10];
        assert_eq!(run(&count, &[values.clone(), values]), Ok(Value::Int(1)));
    }
}
