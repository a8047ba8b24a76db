//! The bytes of text and blob values an evaluation builds, held against a
//! budget so no expression can allocate without bound.
//!
//! What counts: every text or blob value an operator or function creates
//! (a concatenation, a cast, a function's result, a literal's per-batch
//! copy). What does not: values shared with the record or the plan (a
//! column read, a group key), which cost no new memory. The count only
//! grows: it bounds what was built, an upper bound of what is held.

use crate::functions::FunctionError;
use crate::value::Value;

/// Bytes built so far and the most that may be.
#[derive(Debug, Clone)]
pub struct Meter {
    used: usize,
    limit: usize,
}

impl Meter {
    /// A meter that allows `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self { used: 0, limit }
    }

    /// A meter without a limit (tests, and evaluation of data already bounded).
    pub fn unlimited() -> Self {
        Self::new(usize::MAX)
    }

    /// Bytes built so far.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Count `bytes` about to be built. Fails, counting nothing, when they
    /// would pass the limit, so the caller can refuse before allocating.
    pub(crate) fn charge(&mut self, bytes: usize) -> Result<(), OverBudget> {
        match self.used.checked_add(bytes) {
            Some(used) if used <= self.limit => {
                self.used = used;
                Ok(())
            }
            _ => Err(OverBudget {
                limit: self.limit,
                wanted: self.used.saturating_add(bytes),
            }),
        }
    }

    /// Count the text and blob bytes of `values`, already built.
    pub(crate) fn charge_values(&mut self, values: &[Value]) -> Result<(), OverBudget> {
        self.charge(values.iter().map(heap_bytes).sum())
    }
}

/// Bytes of a value's text or blob (0 for other types).
pub fn heap_bytes(value: &Value) -> usize {
    match value {
        Value::Text(t) => t.len(),
        Value::Bytes(b) => b.len(),
        _ => 0,
    }
}

/// Evaluation would build more bytes than its meter allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("evaluation would build {wanted} bytes of values; the limit is {limit}")]
pub struct OverBudget {
    /// The meter's limit.
    pub limit: usize,
    /// What the meter would have reached.
    pub wanted: usize,
}

/// Why an evaluation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// A function failed.
    #[error(transparent)]
    Function(#[from] FunctionError),
    /// The values built passed the meter's limit.
    #[error(transparent)]
    OverBudget(#[from] OverBudget),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_past_the_limit_is_refused_and_not_counted() {
        let mut meter = Meter::new(10);
        meter.charge(6).unwrap();
        let refused = meter.charge(5).unwrap_err();
        assert_eq!(
            refused,
            OverBudget {
                limit: 10,
                wanted: 11
            }
        );
        assert_eq!(meter.used(), 6);
        meter.charge(4).unwrap();
        assert!(meter.charge(1).is_err());
        assert!(Meter::new(1).charge(usize::MAX).is_err(), "no overflow");
    }

    #[test]
    fn charge_values_counts_text_and_blob_bytes() {
        let mut meter = Meter::new(100);
        meter
            .charge_values(&[Value::text("abc"), Value::Int(7), Value::Null])
            .unwrap();
        assert_eq!(meter.used(), 3);
    }
}
