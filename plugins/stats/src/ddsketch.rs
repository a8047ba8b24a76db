//! A DDSketch quantile sketch: log-spaced buckets with 1% relative accuracy,
//! counted in a dense array of buckets (one add is an index computation and
//! an increment).

use ebb_guest::state::{StateReader, StateWriter};

/// Relative accuracy: a quantile estimate `v` of true value `x` has
/// `|v - x| <= ALPHA * |x|` (while no buckets were collapsed).
pub const ALPHA: f64 = 0.01;

/// Widest span of bucket indexes kept per sign. Past it, the buckets
/// nearest zero fold into the lowest kept one. At 1% accuracy, 2048 buckets
/// cover magnitudes spanning a factor of about 1e17, so real data rarely
/// folds; a store holds at most this many counters (16 KiB).
pub const MAX_BUCKETS: usize = 2048;

/// Coefficients of the cubic that stands in for `log2(1 + s)` on `[0, 1)`
/// (DDSketch's cubically interpolated mapping): `P(0) = 0`, `P(1) = 1`, and
/// its slope against `log2(1 + s)` is never below `C * ln 2`.
const A: f64 = 6.0 / 35.0;
const B: f64 = -3.0 / 5.0;
const C: f64 = 10.0 / 7.0;

/// `1 / (C * ln(gamma))` with `gamma = (1 + ALPHA) / (1 - ALPHA)`, written
/// out because `ln` is not a const fn (a test checks it): buckets
/// `1 / MULTIPLIER` wide in `approx_log2` are at most `log2(gamma)` wide in
/// `log2` (by the slope bound above), so a bucket's upper bound is at most
/// `gamma` times its lower bound.
const MULTIPLIER: f64 = 34.998833302220746;

/// `log2(x)` for a positive normal `x`, approximated without a logarithm:
/// the binary exponent plus the cubic of the significand's fraction. Exact at
/// powers of two and strictly increasing. (A logarithm has no instruction in
/// WebAssembly: a software `ln` per value was a quarter of an update.)
#[inline]
fn approx_log2(x: f64) -> f64 {
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let s = f64::from_bits(bits & 0x000f_ffff_ffff_ffff | 0x3ff0_0000_0000_0000) - 1.0;
    ((A * s + B) * s + C) * s + exponent as f64
}

/// The inverse of [`approx_log2`]: the `x` with `approx_log2(x) = t`.
fn approx_exp2(t: f64) -> f64 {
    let exponent = t.floor();
    let fraction = t - exponent;
    // P is increasing on [0, 1]: bisect to the last bit.
    let (mut low, mut high) = (0.0f64, 1.0f64);
    for _ in 0..64 {
        let mid = (low + high) / 2.0;
        if ((A * mid + B) * mid + C) * mid < fraction {
            low = mid;
        } else {
            high = mid;
        }
    }
    // Powers of two by repeated doubling are exact (subnormal ones too).
    (1.0 + high) * 2f64.powi(exponent as i32)
}

/// Bucket `i` holds magnitudes `x` with `approx_log2(x) * MULTIPLIER` in
/// `(i - 1, i]`; for positive normal magnitudes only.
#[inline]
fn bucket_of(magnitude: f64) -> i32 {
    (approx_log2(magnitude) * MULTIPLIER).ceil() as i32
}

/// The value with relative error at most `ALPHA` to anything in bucket `i`:
/// with bounds `low < x <= high` and `high <= gamma * low`, the value
/// `2 * low * high / (low + high)` is within `(high - low) / (high + low)
/// <= ALPHA` of every `x`.
fn bucket_value(i: i32) -> f64 {
    let low = approx_exp2(f64::from(i - 1) / MULTIPLIER);
    let high = approx_exp2(f64::from(i) / MULTIPLIER);
    // In this order nothing overflows or underflows near the ends of the
    // float range.
    2.0 * low * (high / (low + high))
}

/// Counts of consecutive buckets `offset..offset + counts.len()` (with
/// room to grow on either side), and the highest non-empty one.
#[derive(Debug, Clone, Default)]
struct Store {
    offset: i32,
    counts: Vec<u64>,
    highest: i32,
}

impl PartialEq for Store {
    /// Equal when the non-empty buckets are (however much room each has).
    fn eq(&self, other: &Self) -> bool {
        self.buckets().eq(other.buckets())
    }
}

impl Store {
    /// The non-empty buckets, lowest first.
    fn buckets(&self) -> impl DoubleEndedIterator<Item = (i32, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(at, n)| (self.offset + at as i32, *n))
    }

    /// Add `n` to bucket `i`. Buckets `MAX_BUCKETS` or more below the
    /// highest one fold into the lowest kept one, whenever they arrive: what
    /// is kept depends only on the highest bucket, so the store does not
    /// depend on the order of adds or merges.
    fn add(&mut self, i: i32, n: u64) {
        if self.counts.is_empty() {
            self.offset = i;
            self.highest = i;
            self.counts.push(0);
        }
        let lowest_kept = self.highest.max(i) - (MAX_BUCKETS as i32 - 1);
        let i = i.max(lowest_kept);
        if i < self.offset || i >= self.offset + self.counts.len() as i32 {
            self.grow(i, lowest_kept);
        }
        self.counts[(i - self.offset) as usize] += n;
        if i > self.highest {
            self.highest = i;
            self.collapse();
        }
    }

    /// Make room for bucket `i` (never below `lowest_kept`), with slack on
    /// the side that grew so a run of growing adds rarely copies.
    fn grow(&mut self, i: i32, lowest_kept: i32) {
        let slack = (self.counts.len() as i32 / 2).clamp(8, MAX_BUCKETS as i32 / 4);
        let top = self.offset + self.counts.len() as i32 - 1;
        let low = if i < self.offset {
            (i - slack).max(lowest_kept)
        } else {
            self.offset
        };
        let high = if i > top { i + slack } else { top };
        let mut counts = vec![0; (high - low + 1) as usize];
        let from = (self.offset - low) as usize;
        counts[from..from + self.counts.len()].copy_from_slice(&self.counts);
        self.offset = low;
        self.counts = counts;
    }

    /// Fold the buckets below the lowest kept one into it and drop their
    /// room.
    fn collapse(&mut self) {
        let cutoff = self.highest - (MAX_BUCKETS as i32 - 1);
        if cutoff <= self.offset {
            return;
        }
        let below = (cutoff - self.offset) as usize;
        let folded: u64 = self.counts.drain(..below).sum();
        self.offset = cutoff;
        self.counts[0] += folded;
    }

    fn total(&self) -> Option<u64> {
        self.counts
            .iter()
            .try_fold(0u64, |total, &n| total.checked_add(n))
    }
}

/// A mergeable quantile sketch. Merge is exact: the result does not depend
/// on how the input was split or in which order partial sketches merge.
#[derive(Debug, Clone, PartialEq)]
pub struct Sketch {
    positive: Store,
    negative: Store,
    zero: u64,
    count: u64,
    min: f64,
    max: f64,
}

impl Default for Sketch {
    fn default() -> Self {
        Sketch {
            positive: Store::default(),
            negative: Store::default(),
            zero: 0,
            count: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl Sketch {
    /// Adds a finite value; `Err` for NaN and infinities, which have no rank bucket.
    pub fn add(&mut self, x: f64) -> Result<(), String> {
        if !x.is_finite() {
            return Err(format!("cannot rank {x}; quantiles need finite numbers"));
        }
        let magnitude = x.abs();
        if magnitude < f64::MIN_POSITIVE {
            self.zero += 1;
        } else if x > 0.0 {
            self.positive.add(bucket_of(magnitude), 1);
        } else {
            self.negative.add(bucket_of(magnitude), 1);
        }
        self.count += 1;
        // Comparisons rather than `f64::min`/`max` (x is not NaN): in the
        // sandbox those are calls.
        if x < self.min {
            self.min = x;
        }
        if x > self.max {
            self.max = x;
        }
        Ok(())
    }

    /// Combines two sketches.
    pub fn merge(mut self, other: Sketch) -> Sketch {
        for (store, theirs) in [
            (&mut self.positive, other.positive),
            (&mut self.negative, other.negative),
        ] {
            for (i, n) in theirs.buckets() {
                store.add(i, n);
            }
        }
        self.zero += other.zero;
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self
    }

    /// The `q`-quantile (0 ≤ q ≤ 1), or `None` when empty: the value of rank
    /// `floor(q * (n - 1))` in sorted order, within the relative accuracy,
    /// clamped to the exact minimum and maximum.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * (self.count - 1) as f64).floor() as u64;
        // Ascending: negative buckets from the largest magnitude, zero,
        // positive buckets. Only the bucket holding the rank is valued.
        let ascending = self
            .negative
            .buckets()
            .rev()
            .map(|(i, n)| (Some((i, -1.0)), n))
            .chain(std::iter::once((None, self.zero)))
            .chain(self.positive.buckets().map(|(i, n)| (Some((i, 1.0)), n)));
        let mut seen = 0u64;
        for (bucket, n) in ascending {
            seen += n;
            if seen > rank {
                let value = bucket.map_or(0.0, |(i, sign)| sign * bucket_value(i));
                return Some(value.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// Encodes canonically: equal sketches give equal bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = StateWriter::new();
        w.u64(self.zero).f64(self.min).f64(self.max);
        for store in [&self.positive, &self.negative] {
            w.u64(store.buckets().count() as u64);
            let mut previous = 0i32;
            for (i, n) in store.buckets() {
                w.i64(i64::from(i) - i64::from(previous)).u64(n);
                previous = i;
            }
        }
        w.finish()
    }

    /// Decodes what [`Sketch::encode`] wrote, rejecting states no sketch has.
    pub fn decode(bytes: &[u8]) -> Result<Sketch, String> {
        let mut r = StateReader::new(bytes);
        let mut sketch = Sketch {
            zero: r.u64()?,
            min: r.f64()?,
            max: r.f64()?,
            ..Sketch::default()
        };
        for negative in [false, true] {
            let len = r.u64()?;
            if len > MAX_BUCKETS as u64 {
                return Err(format!("{len} buckets, at most {MAX_BUCKETS} allowed"));
            }
            let mut buckets = Vec::with_capacity(len as usize);
            let mut index = 0i64;
            for position in 0..len {
                let delta = r.i64()?;
                if position > 0 && delta <= 0 {
                    return Err("bucket indexes are not increasing".to_owned());
                }
                index = index
                    .checked_add(delta)
                    .filter(|i| i32::try_from(*i).is_ok())
                    .ok_or("bucket index out of range")?;
                let n = r.u64()?;
                if n == 0 {
                    return Err("an empty bucket is listed".to_owned());
                }
                buckets.push((index as i32, n));
            }
            if let (Some(&(low, _)), Some(&(high, _))) = (buckets.first(), buckets.last())
                && i64::from(high) - i64::from(low) >= MAX_BUCKETS as i64
            {
                return Err(format!(
                    "buckets span {low}..={high}, more than {MAX_BUCKETS} indexes"
                ));
            }
            let mut store = Store::default();
            for (i, n) in buckets {
                store.add(i, n);
            }
            if negative {
                sketch.negative = store;
            } else {
                sketch.positive = store;
            }
        }
        r.finish()?;
        sketch.count = [&sketch.positive, &sketch.negative]
            .into_iter()
            .map(Store::total)
            .chain([Some(sketch.zero)])
            .try_fold(0u64, |total, n| total.checked_add(n?))
            .ok_or("bucket counts overflow")?;
        Ok(sketch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GAMMA: f64 = (1.0 + ALPHA) / (1.0 - ALPHA);

    #[test]
    fn bucket_value_is_within_alpha_of_its_bucket() {
        for x in [1e-300, 1e-9, 0.5, 1.0, 1.5, 3.0, 1e6, 123_456.789, 1e300] {
            let v = bucket_value(bucket_of(x));
            assert!((v - x).abs() <= ALPHA * x * 1.000_001, "{x} -> {v}");
        }
        // Every significand of several octaves, finely: the worst case of
        // the cubic's slope lies inside an octave.
        let mut x = f64::MIN_POSITIVE;
        while x < 1e300 {
            for step in 0..4096 {
                let y = x * (1.0 + f64::from(step) / 4096.0);
                let v = bucket_value(bucket_of(y));
                assert!((v - y).abs() <= ALPHA * y * (1.0 + 1e-12), "{y} -> {v}");
            }
            x *= 1e30;
        }
    }

    #[test]
    fn the_multiplier_is_what_its_formula_gives() {
        assert_eq!(MULTIPLIER, 1.0 / (C * GAMMA.ln()));
    }

    #[test]
    fn buckets_grow_with_the_magnitude_and_invert_exactly() {
        let mut previous = i32::MIN;
        let mut x = 1e-10;
        while x < 1e10 {
            let i = bucket_of(x);
            assert!(i >= previous, "{x}");
            previous = i;
            // The bounds of each bucket map back into it.
            let high = approx_exp2(f64::from(i) / MULTIPLIER);
            assert!(
                high >= x * (1.0 - 1e-15),
                "{x} above its bucket's top {high}"
            );
            assert!(high <= x * GAMMA * (1.0 + 1e-12), "{x}: bucket too wide");
            x *= 1.000_37;
        }
        for t in [-3.5, -1.0, 0.0, 0.25, 0.999, 1.0, 7.75] {
            let back = approx_log2(approx_exp2(t));
            assert!((back - t).abs() < 1e-12, "{t} -> {back}");
        }
    }

    #[test]
    fn bucket_count_is_bounded_and_folding_keeps_large_values_exact() {
        let mut sketch = Sketch::default();
        // Magnitudes from 1e-150 to 1e150 need far more than MAX_BUCKETS buckets.
        for e in -1500..=1500 {
            sketch.add(10f64.powf(f64::from(e) / 10.0)).unwrap();
        }
        let buckets: Vec<_> = sketch.positive.buckets().collect();
        let span = buckets.last().unwrap().0 - buckets.first().unwrap().0;
        assert_eq!(
            span,
            MAX_BUCKETS as i32 - 1,
            "the kept buckets span the limit"
        );
        assert!(sketch.positive.counts.len() <= MAX_BUCKETS * 3);
        let p99 = sketch.quantile(0.99).unwrap();
        let exact = 10f64.powf(f64::from(-1500 + 2970) / 10.0);
        assert!((p99 - exact).abs() <= ALPHA * exact, "{p99} vs {exact}");
        assert_eq!(Sketch::decode(&sketch.encode()), Ok(sketch));
    }

    #[test]
    fn order_and_splits_do_not_change_the_sketch_even_when_folding() {
        // Magnitudes from 1e-200 to 1e200 in a scrambled order: far more
        // than MAX_BUCKETS apart, arriving above and below what is kept.
        let values: Vec<f64> = (0..4000u64)
            .map(|k| {
                let e = (k * 7919 % 4000) as f64 / 10.0 - 200.0;
                let sign = if k % 3 == 0 { -1.0 } else { 1.0 };
                sign * 10f64.powf(e)
            })
            .collect();
        let whole = values.iter().fold(Sketch::default(), |mut s, &x| {
            s.add(x).unwrap();
            s
        });
        let mut reversed = Sketch::default();
        for &x in values.iter().rev() {
            reversed.add(x).unwrap();
        }
        assert_eq!(reversed.encode(), whole.encode());
        for parts in [2, 3, 7] {
            let merged = values
                .chunks(values.len() / parts + 1)
                .map(|chunk| {
                    let mut s = Sketch::default();
                    for &x in chunk {
                        s.add(x).unwrap();
                    }
                    s
                })
                .rev()
                .reduce(Sketch::merge)
                .unwrap();
            assert_eq!(merged.encode(), whole.encode(), "{parts} parts");
        }
        assert_eq!(Sketch::decode(&whole.encode()), Ok(whole));
    }

    #[test]
    fn a_value_far_below_the_kept_buckets_folds_into_the_lowest() {
        let mut sketch = Sketch::default();
        sketch.add(1e100).unwrap();
        sketch.add(1e-100).unwrap();
        sketch.add(1e-300).unwrap();
        assert_eq!(sketch.count, 3);
        let buckets: Vec<_> = sketch.positive.buckets().collect();
        assert_eq!(buckets.len(), 2);
        assert_eq!(buckets[1].0 - buckets[0].0, MAX_BUCKETS as i32 - 1);
        assert_eq!(buckets[0].1, 2);
        // The largest stays within the accuracy; the folded ones read as
        // the lowest kept bucket, about 1e17 below it.
        let top = sketch.quantile(1.0).unwrap();
        assert!((top - 1e100).abs() <= ALPHA * 1e100, "{top}");
        let bottom = sketch.quantile(0.0).unwrap();
        assert!((1e82..1e84).contains(&bottom), "{bottom}");
    }

    #[test]
    fn rejects_non_finite_values_and_corrupt_states() {
        let mut sketch = Sketch::default();
        assert!(sketch.add(f64::NAN).is_err());
        assert!(sketch.add(f64::INFINITY).is_err());
        assert_eq!(sketch.count, 0);
        sketch.add(2.0).unwrap();
        sketch.add(3.0).unwrap();
        let bytes = sketch.encode();
        assert!(Sketch::decode(&bytes[..bytes.len() - 1]).is_err());
        let mut unordered = StateWriter::new();
        unordered
            .u64(0)
            .f64(1.0)
            .f64(2.0)
            .u64(2)
            .i64(5)
            .u64(1)
            .i64(-1)
            .u64(1)
            .u64(0);
        assert!(Sketch::decode(&unordered.finish()).is_err());
    }
}
