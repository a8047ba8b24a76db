//! Built-in aggregates as mergeable partial states: COUNT, SUM, AVG, MIN, MAX.
//!
//! Results follow SQLite: SUM of integers is an integer (an "integer
//! overflow" error when the total does not fit 64 bits), otherwise a float
//! summed with Kahan-Babuska-Neumaier compensation; AVG is a float and never
//! fails; SUM, AVG, MIN and MAX of no rows are NULL, COUNT is 0.

use std::sync::Arc;

use super::{AggState, AggregateFunction, Arity, FunctionError};
use crate::value::{SqlType, Value};

/// The built-in aggregate called `name`, if any. `count` with no arguments
/// is `COUNT(*)`.
pub(super) fn builtin(name: &str) -> Option<Arc<dyn AggregateFunction>> {
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
        host: false,
    }
}

/// Running sum of SUM and AVG: integer inputs summed exactly (an `i128`,
/// which no count of `i64` inputs overflows), other inputs summed as floats
/// with Kahan-Babuska-Neumaier compensation. Both halves merge by addition,
/// so the result does not depend on how the input is split into partitions
/// or in which order the partial states merge.
///
/// SQLite sums in scan order and fails SUM when an intermediate integer sum
/// overflows, even if later inputs bring it back; a partitioned scan has no
/// single order, so here SUM of integers fails only when the exact total does
/// not fit an `i64`.
///
/// State: `[Int(exact high 64 bits), Int(exact low 64 bits), Float(sum),
/// Float(err), Bool(any non-integer input), Int(count)]`.
struct Sum {
    exact: i128,
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
            exact: (i128::from(int(0)) << 64) | i128::from(int(1) as u64),
            sum: float(2),
            err: float(3),
            approx: matches!(state.get(4), Some(Value::Bool(true))),
            count: int(5),
        }
    }

    fn into_state(self) -> AggState {
        vec![
            Value::Int((self.exact >> 64) as i64),
            Value::Int(self.exact as u64 as i64),
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

    fn add(&mut self, value: &Value) {
        // SQLite's numeric type of the input: text that reads as an integer
        // is one, any other text and all bytes are read as floats.
        let numeric = match value {
            Value::Null => return,
            Value::Text(t) => match t.trim().parse::<i64>() {
                Ok(i) => Value::Int(i),
                Err(_) => Value::Float(float_of(&value.to_numeric())),
            },
            Value::Bytes(_) => Value::Float(float_of(&value.to_numeric())),
            other => other.to_numeric(),
        };
        self.count += 1;
        match numeric {
            Value::Int(i) => self.exact += i128::from(i),
            other => {
                self.approx = true;
                self.add_float(float_of(&other));
            }
        }
    }

    fn merge(mut self, other: Sum) -> Sum {
        self.exact += other.exact;
        self.add_float(other.sum);
        self.err += other.err;
        self.approx |= other.approx;
        self.count += other.count;
        self
    }

    /// The sum as a float: the exact integer part joins the compensated sum
    /// in two halves, so it is not rounded twice. A compensation that
    /// overflowed (an infinite sum) is dropped, as SQLite does.
    fn total(&self) -> f64 {
        let mut sum = Sum { exact: 0, ..*self };
        let high = self.exact as f64;
        sum.add_float(high);
        sum.add_float((self.exact - high as i128) as f64);
        if sum.err.is_finite() {
            sum.sum + sum.err
        } else {
            sum.sum
        }
    }
}

/// A float result: NaN (infinities that cancel) is NULL, as in SQLite.
fn float(f: f64) -> Value {
    if f.is_nan() {
        Value::Null
    } else {
        Value::Float(f)
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

    fn is_builtin(&self) -> bool {
        true
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
                    sum.add(value);
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
                .merge(Sum::from_state(&right))
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
                    float(sum.total())
                } else {
                    Value::Int(
                        i64::try_from(sum.exact)
                            .map_err(|_| error(self.name(), "integer overflow"))?,
                    )
                }
            }
            Kind::Avg => {
                let sum = Sum::from_state(&state);
                if sum.count == 0 {
                    Value::Null
                } else {
                    float(sum.total() / sum.count as f64)
                }
            }
            Kind::Min | Kind::Max => state.into_iter().next().unwrap_or(Value::Null),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name` over `values` updated as two partitions split at `split`,
    /// merged and finished.
    fn split_run(name: &str, values: &[Value], split: usize) -> Result<Value, FunctionError> {
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
        f.finish(f.merge(left, right).unwrap())
    }

    fn run(name: &str, values: &[Value], split: usize) -> Value {
        split_run(name, values, split).unwrap()
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

    /// Every way of splitting `values` in two partitions gives `expected`.
    fn every_split(name: &str, values: &[Value], expected: Result<Value, &str>) {
        for split in 0..=values.len() {
            let got = split_run(name, values, split).map_err(|e| e.message);
            assert_eq!(
                got,
                expected.clone().map_err(str::to_string),
                "{name} {values:?} split at {split}"
            );
        }
    }

    #[test]
    fn integer_sums_stay_integers_and_overflow_is_an_error() {
        let (max, min) = (Value::Int(i64::MAX), Value::Int(i64::MIN));
        every_split(
            "sum",
            &[Value::Int(2), Value::text("40")],
            Ok(Value::Int(42)),
        );
        every_split(
            "sum",
            &[max.clone(), Value::Int(1)],
            Err("integer overflow"),
        );
        every_split(
            "sum",
            &[min.clone(), Value::Int(-1)],
            Err("integer overflow"),
        );
        every_split("sum", &[max.clone(), max.clone()], Err("integer overflow"));
        every_split("sum", std::slice::from_ref(&min), Ok(min.clone()));
        // SQLite fails when a prefix overflows in its scan order; partitions
        // have no single order, so only the total counts.
        every_split(
            "sum",
            &[max.clone(), Value::Int(1), Value::Int(-1)],
            Ok(max.clone()),
        );
    }

    #[test]
    fn a_float_input_makes_sum_a_float_that_never_overflows() {
        let max = Value::Int(i64::MAX);
        every_split(
            "sum",
            &[max.clone(), max.clone(), Value::Float(0.5)],
            Ok(Value::Float(2.0 * i64::MAX as f64)),
        );
        every_split(
            "sum",
            &[max.clone(), Value::text("x"), Value::Int(1)],
            Ok(Value::Float(i64::MAX as f64 + 1.0)),
        );
        every_split(
            "sum",
            &[Value::Float(1e308), Value::Float(1e308), Value::Int(1)],
            Ok(Value::Float(f64::INFINITY)),
        );
    }

    #[test]
    fn avg_is_a_float_even_when_the_integer_sum_overflows() {
        let max = Value::Int(i64::MAX);
        every_split(
            "avg",
            std::slice::from_ref(&max),
            Ok(Value::Float(i64::MAX as f64)),
        );
        every_split(
            "avg",
            &[max.clone(), max.clone(), Value::Int(1)],
            Ok(Value::Float((2.0 * i64::MAX as f64 + 1.0) / 3.0)),
        );
        every_split(
            "avg",
            &[Value::Int(i64::MIN), Value::Int(i64::MIN)],
            Ok(Value::Float(i64::MIN as f64)),
        );
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
