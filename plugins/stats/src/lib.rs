//! ebb plugin `stats`: aggregates whose partial states merge, so the host can
//! compute them per partition and page and combine the results.
//!
//! | function | result | accuracy |
//! | --- | --- | --- |
//! | `stats.avg(x)` | mean, float | floating point (see below) |
//! | `stats.stddev(x)` | **sample** standard deviation (divisor `n - 1`), float; NULL below 2 values | floating point |
//! | `stats.p50(x)`, `p95(x)`, `p99(x)` | quantile, float | relative error ≤ 1% |
//! | `stats.count_distinct(x)` | estimated number of distinct values, int | ~1.6% standard error |
//!
//! `x` is an int or a float (ints convert to float, exactly up to 2^53);
//! `count_distinct` takes a value of any type. NULL inputs are ignored.
//! Empty input (or only NULLs) gives NULL, except `count_distinct`, which
//! gives 0.
//!
//! **avg, stddev** keep `(count, mean, M2)` updated with Welford's method and
//! merged with Chan et al.'s formula, which is numerically stable. Merging is
//! associative in exact arithmetic; in floating point, different splits of
//! the same input agree to about 1e-15 relative, not bit for bit.
//!
//! **p50, p95, p99** use a DDSketch ([`ddsketch`]): log-spaced buckets with
//! relative accuracy α = 1%, counted in a dense array covering at most 2048
//! consecutive buckets per sign. A value's bucket comes from its binary
//! exponent and a cubic of its significand (DDSketch's cubically
//! interpolated mapping) rather than a logarithm, which WebAssembly computes
//! in software. It takes about 1% more buckets than a logarithm would, and
//! the guarantee is unchanged. The estimate of the value at rank
//! `floor(q * (n - 1))` is within 1% of it (relative), and never outside the
//! exact minimum and maximum. Only data spanning more than about 17 orders
//! of magnitude on one side of zero folds buckets (those more than 2048
//! below the highest fold into the lowest kept one), losing accuracy for the
//! magnitudes nearest zero. NaN and
//! infinities are rejected with an error. The state is at most ~30 KB and
//! typically a few hundred bytes. Merge is exact: any split gives the
//! identical result.
//!
//! **count_distinct** uses HyperLogLog ([`hll`]) with precision 12 (4096
//! one-byte registers, standard error 1.04/√4096 ≈ 1.6%) and Ertl's improved
//! estimator, accurate from 0 to billions without bias correction tables.
//! Values are hashed with a fixed hash (FNV-1a + MurmurHash3 finalizer), the
//! same on every platform. A float with an integer value counts as that
//! integer, and text counts as its UTF-8 bytes. Merge is exact. The state
//! is sparse (3 bytes a register) while small, at most ~4 KB.

pub mod ddsketch;
pub mod hll;
pub mod moments;

use ebb_guest::{Aggregate, Value};

use ddsketch::Sketch;
use hll::HyperLogLog;
use moments::Moments;

/// Reads the numeric argument.
fn number(args: &[Value]) -> Result<f64, String> {
    match args {
        [Value::Int(i)] => Ok(*i as f64),
        [Value::Float(x)] => Ok(*x),
        [other] => Err(format!("expected a number, got {}", other.type_name())),
        _ => Err(format!("takes 1 argument, got {}", args.len())),
    }
}

/// Aggregates over running moments (count, mean, M2); `STDDEV` picks the
/// result: the mean, or the sample standard deviation.
pub struct Moment<const STDDEV: bool>;

/// `stats.avg(x)`.
pub type Avg = Moment<false>;

/// `stats.stddev(x)`: the sample standard deviation.
pub type Stddev = Moment<true>;

impl<const STDDEV: bool> Aggregate for Moment<STDDEV> {
    type State = Moments;

    fn init() -> Moments {
        Moments::default()
    }

    fn update(state: &mut Moments, args: &[Value]) -> Result<(), String> {
        state.add(number(args)?);
        Ok(())
    }

    fn merge(left: Moments, right: Moments) -> Moments {
        left.merge(right)
    }

    fn finish(state: Moments) -> Value {
        let result = if STDDEV {
            state.sample_stddev()
        } else {
            state.mean()
        };
        result.map_or(Value::Null, Value::Float)
    }

    fn encode(state: &Moments) -> Vec<u8> {
        state.encode()
    }

    fn decode(bytes: &[u8]) -> Result<Moments, String> {
        Moments::decode(bytes)
    }
}

/// `stats.pNN(x)`: the `PERCENT`-th percentile.
pub struct Percentile<const PERCENT: u8>;

/// `stats.p50(x)`: the median.
pub type P50 = Percentile<50>;
/// `stats.p95(x)`.
pub type P95 = Percentile<95>;
/// `stats.p99(x)`.
pub type P99 = Percentile<99>;

impl<const PERCENT: u8> Aggregate for Percentile<PERCENT> {
    type State = Sketch;

    fn init() -> Sketch {
        Sketch::default()
    }

    fn update(state: &mut Sketch, args: &[Value]) -> Result<(), String> {
        state.add(number(args)?)
    }

    fn merge(left: Sketch, right: Sketch) -> Sketch {
        left.merge(right)
    }

    fn finish(state: Sketch) -> Value {
        state
            .quantile(f64::from(PERCENT) / 100.0)
            .map_or(Value::Null, Value::Float)
    }

    fn encode(state: &Sketch) -> Vec<u8> {
        state.encode()
    }

    fn decode(bytes: &[u8]) -> Result<Sketch, String> {
        Sketch::decode(bytes)
    }
}

/// `stats.count_distinct(x)`.
pub struct CountDistinct;

impl Aggregate for CountDistinct {
    type State = HyperLogLog;

    fn init() -> HyperLogLog {
        HyperLogLog::default()
    }

    fn update(state: &mut HyperLogLog, args: &[Value]) -> Result<(), String> {
        match args {
            [value] => {
                state.add(value);
                Ok(())
            }
            _ => Err(format!("takes 1 argument, got {}", args.len())),
        }
    }

    fn merge(left: HyperLogLog, right: HyperLogLog) -> HyperLogLog {
        left.merge(&right)
    }

    fn finish(state: HyperLogLog) -> Value {
        Value::Int(state.estimate().round() as i64)
    }

    fn encode(state: &HyperLogLog) -> Vec<u8> {
        state.encode()
    }

    fn decode(bytes: &[u8]) -> Result<HyperLogLog, String> {
        HyperLogLog::decode(bytes)
    }
}

ebb_guest::export! {
    name: "stats",
    version: env!("CARGO_PKG_VERSION"),
    functions: {
        aggregate "avg" => Avg, "Arithmetic mean; NULL for empty input";
        aggregate "stddev" => Stddev, "Sample standard deviation (n - 1); NULL below two values";
        aggregate "p50" => P50, "Median, within 1% relative error (DDSketch)";
        aggregate "p95" => P95, "95th percentile, within 1% relative error (DDSketch)";
        aggregate "p99" => P99, "99th percentile, within 1% relative error (DDSketch)";
        aggregate "count_distinct" => CountDistinct, "Approximate distinct count, ~1.6% standard error (HyperLogLog)";
    }
}

#[cfg(test)]
mod tests;
