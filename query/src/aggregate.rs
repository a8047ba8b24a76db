//! Built-in aggregates as mergeable partial states: COUNT, SUM, AVG, MIN, MAX.
//!
//! Results follow SQLite: SUM of integers is an integer (overflow is an
//! error), otherwise a float summed with Kahan-Babuska-Neumaier compensation;
//! AVG is a float; SUM, AVG, MIN and MAX of no rows are NULL, COUNT is 0.

use std::sync::Arc;

use crate::functions::{AggState, AggregateFunction, Arity, FunctionError};
use crate::value::{SqlType, Value};

/// The built-in aggregate called `name`, if any. `count` with no arguments
/// is `COUNT(*)`.
pub fn builtin(name: &str) -> Option<Arc<dyn AggregateFunction>> {
    let kind = match name.to_ascii_lowercase().as_str() {
        "count" => Kind::Count,
        "sum" => Kind::Sum,
        "avg" => Kind::Avg,
        "min" => Kind::Min,
        "max" => Kind::Max,
        _ => return None,
    };
    Some(Arc::new(Builtin(kind)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

/// A built-in aggregate.
#[derive(Debug, Clone, Copy)]
struct Builtin(Kind);

fn error(function: &str, message: &str) -> FunctionError {
    FunctionError {
        function: function.to_string(),
        message: message.to_string(),
        plugin: false,
    }
}

/// Running sum: exact integer part until a non-integer arrives, then a
/// compensated float sum. State: `[Int(exact), Float(sum), Float(err), Bool(approx), Int(count)]`.
struct Sum {
    exact: i64,
    sum: f64,
    err: f64,
    approx: bool,
    count: i64,
}

impl Sum {
    fn empty() -> Self {
        Sum {
            exact: 0,
            sum: 0.0,
            err: 0.0,
            approx: false,
            count: 0,
        }
    }

    fn from_state(state: &AggState) -> Self {
        let int = |i: usize| match state.get(i) {
            Some(Value::Int(v)) => *v,
            _ => 0,
        };
        let float = |i: usize| match state.get(i) {
            Some(Value::Float(v)) => *v,
            _ => 0.0,
        };
        Sum {
            exact: int(0),
            sum: float(1),
            err: float(2),
            approx: matches!(state.get(3), Some(Value::Bool(true))),
            count: int(4),
        }
    }

    fn into_state(self) -> AggState {
        vec![
            Value::Int(self.exact),
            Value::Float(self.sum),
            Value::Float(self.err),
            Value::Bool(self.approx),
            Value::Int(self.count),
        ]
    }

    fn add_float(&mut self, r: f64) {
        let s = self.sum;
        let t = s + r;
        if s.abs() > r.abs() {
            self.err += (s - t) + r;
        } else {
            self.err += (r - t) + s;
        }
        self.sum = t;
    }

    fn go_approx(&mut self) {
        if !self.approx {
            self.approx = true;
            let exact = self.exact;
            self.exact = 0;
            self.add_float(exact as f64);
        }
    }

    fn add(&mut self, value: &Value, name: &str) -> Result<(), FunctionError> {
        let numeric = match value {
            Value::Null => return Ok(()),
            Value::Text(t) => match t.trim().parse::<i64>() {
                Ok(i) => Value::Int(i),
                Err(_) => Value::Float(float_of(&value.to_numeric())),
            },
            Value::Bytes(_) => Value::Float(float_of(&value.to_numeric())),
            other => other.to_numeric(),
        };
        self.count += 1;
        match numeric {
            Value::Int(i) if !self.approx => {
                self.exact = self
                    .exact
                    .checked_add(i)
                    .ok_or_else(|| error(name, "integer overflow"))?;
            }
            Value::Int(i) => self.add_float(i as f64),
            other => {
                self.go_approx();
                self.add_float(float_of(&other));
            }
        }
        Ok(())
    }

    fn merge(mut self, mut other: Sum, name: &str) -> Result<Sum, FunctionError> {
        self.count += other.count;
        if !self.approx && !other.approx {
            self.exact = self
                .exact
                .checked_add(other.exact)
                .ok_or_else(|| error(name, "integer overflow"))?;
            return Ok(self);
        }
        self.go_approx();
        other.go_approx();
        self.add_float(other.sum);
        self.err += other.err;
        Ok(self)
    }

    fn total(&self) -> f64 {
        if self.approx {
            self.sum + self.err
        } else {
            self.exact as f64
        }
    }
}

fn float_of(value: &Value) -> f64 {
    match value {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        _ => 0.0,
    }
}

impl AggregateFunction for Builtin {
    fn name(&self) -> &str {
        match self.0 {
            Kind::Count => "count",
            Kind::Sum => "sum",
            Kind::Avg => "avg",
            Kind::Min => "min",
            Kind::Max => "max",
        }
    }

    fn arity(&self) -> Arity {
        match self.0 {
            Kind::Count => Arity::Range(0, 1),
            _ => Arity::Exact(1),
        }
    }

    fn return_type(&self) -> SqlType {
        match self.0 {
            Kind::Count => SqlType::Integer,
            Kind::Avg => SqlType::Float,
            _ => SqlType::Any,
        }
    }

    fn init(&self) -> Result<AggState, FunctionError> {
        Ok(match self.0 {
            Kind::Count => vec![Value::Int(0)],
            Kind::Sum | Kind::Avg => Sum::empty().into_state(),
            Kind::Min | Kind::Max => vec![Value::Null],
        })
    }

    fn update(
        &self,
        state: &mut AggState,
        args: &[Vec<Value>],
        rows: usize,
    ) -> Result<(), FunctionError> {
        match self.0 {
            Kind::Count => {
                // COUNT(*) has no argument and counts every row.
                let n = match args.first() {
                    None => rows,
                    Some(column) => column.iter().filter(|v| !v.is_null()).count(),
                } as i64;
                if let Some(Value::Int(count)) = state.first_mut() {
                    *count += n;
                }
            }
            Kind::Sum | Kind::Avg => {
                let mut sum = Sum::from_state(state);
                for value in &args[0] {
                    sum.add(value, self.name())?;
                }
                *state = sum.into_state();
            }
            Kind::Min | Kind::Max => {
                for candidate in &args[0] {
                    if candidate.is_null() {
                        continue;
                    }
                    let replace = match &state[0] {
                        Value::Null => true,
                        current => {
                            let order = candidate.total_cmp(current);
                            if self.0 == Kind::Min {
                                order.is_lt()
                            } else {
                                order.is_gt()
                            }
                        }
                    };
                    if replace {
                        state[0] = candidate.clone();
                    }
                }
            }
        }
        Ok(())
    }

    fn merge(&self, left: AggState, right: AggState) -> Result<AggState, FunctionError> {
        match self.0 {
            Kind::Count => {
                let count = |s: &AggState| match s.first() {
                    Some(Value::Int(n)) => *n,
                    _ => 0,
                };
                Ok(vec![Value::Int(count(&left) + count(&right))])
            }
            Kind::Sum | Kind::Avg => Ok(Sum::from_state(&left)
                .merge(Sum::from_state(&right), self.name())?
                .into_state()),
            Kind::Min | Kind::Max => {
                let mut state = left;
                self.update(&mut state, std::slice::from_ref(&right), 1)?;
                Ok(state)
            }
        }
    }

    fn finish(&self, state: AggState) -> Result<Value, FunctionError> {
        Ok(match self.0 {
            Kind::Count => state.into_iter().next().unwrap_or(Value::Int(0)),
            Kind::Sum => {
                let sum = Sum::from_state(&state);
                if sum.count == 0 {
                    Value::Null
                } else if sum.approx {
                    Value::Float(sum.total())
                } else {
                    Value::Int(sum.exact)
                }
            }
            Kind::Avg => {
                let sum = Sum::from_state(&state);
                if sum.count == 0 {
                    Value::Null
                } else {
                    Value::Float(sum.total() / sum.count as f64)
                }
            }
            Kind::Min | Kind::Max => state.into_iter().next().unwrap_or(Value::Null),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, values: &[Value], split: usize) -> Value {
        let f = builtin(name).unwrap();
        let mut left = f.init().unwrap();
        let mut right = f.init().unwrap();
        f.update(&mut left, &[values[..split].to_vec()], split)
            .unwrap();
        f.update(
            &mut right,
            &[values[split..].to_vec()],
            values.len() - split,
        )
        .unwrap();
        f.finish(f.merge(left, right).unwrap()).unwrap()
    }

    #[test]
    fn results_do_not_depend_on_how_input_is_split() {
        let values = [
            Value::Int(3),
            Value::Null,
            Value::Int(-1),
            Value::Int(10),
            Value::Float(0.5),
        ];
        for split in 0..=values.len() {
            assert_eq!(run("count", &values, split), Value::Int(4));
            assert_eq!(run("sum", &values, split), Value::Float(12.5));
            assert_eq!(run("avg", &values, split), Value::Float(12.5 / 4.0));
            assert_eq!(run("min", &values, split), Value::Int(-1));
            assert_eq!(run("max", &values, split), Value::Int(10));
        }
    }

    #[test]
    fn empty_input_gives_sqlite_results() {
        for (name, expected) in [
            ("count", Value::Int(0)),
            ("sum", Value::Null),
            ("avg", Value::Null),
            ("min", Value::Null),
            ("max", Value::Null),
        ] {
            assert_eq!(run(name, &[], 0), expected, "{name}");
            assert_eq!(
                run(name, &[Value::Null], 1),
                if name == "count" {
                    Value::Int(0)
                } else {
                    Value::Null
                },
                "{name}"
            );
        }
    }

    #[test]
    fn integer_sums_stay_integers_and_overflow_is_an_error() {
        assert_eq!(
            run("sum", &[Value::Int(2), Value::text("40")], 1),
            Value::Int(42)
        );
        let f = builtin("sum").unwrap();
        let mut state = f.init().unwrap();
        let error = f
            .update(&mut state, &[vec![Value::Int(i64::MAX), Value::Int(1)]], 2)
            .unwrap_err();
        assert_eq!(error.message, "integer overflow");
    }

    #[test]
    fn min_and_max_use_the_sqlite_order_across_types() {
        let values = [
            Value::text("b"),
            Value::Int(7),
            Value::Bytes(bytes::Bytes::from_static(b"a")),
        ];
        assert_eq!(run("min", &values, 1), Value::Int(7));
        assert_eq!(
            run("max", &values, 2),
            Value::Bytes(bytes::Bytes::from_static(b"a"))
        );
    }
}
