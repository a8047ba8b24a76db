//! A DDSketch quantile sketch: log-spaced buckets with 1% relative accuracy.

use std::collections::BTreeMap;

use ebb_guest::state::{StateReader, StateWriter};

/// Relative accuracy: a quantile estimate `v` of true value `x` has
/// `|v - x| <= ALPHA * |x|` (while no buckets were collapsed).
pub const ALPHA: f64 = 0.01;

/// Most non-empty buckets kept per sign. Past it, the buckets nearest zero
/// fold into the smallest kept one. At 1% accuracy, 2048 buckets cover
/// magnitudes spanning a factor of about 1e17, so real data rarely folds.
pub const MAX_BUCKETS: usize = 2048;

fn gamma() -> f64 {
    (1.0 + ALPHA) / (1.0 - ALPHA)
}

/// Bucket `i` holds magnitudes in `(gamma^(i-1), gamma^i]`.
fn bucket_of(magnitude: f64) -> i32 {
    (magnitude.ln() / gamma().ln()).ceil() as i32
}

/// The value with relative error at most `ALPHA` to anything in bucket `i`.
fn bucket_value(i: i32) -> f64 {
    let g = gamma();
    2.0 * (f64::from(i) * g.ln()).exp() / (g + 1.0)
}

/// A mergeable quantile sketch. Merge is exact: the result does not depend
/// on how the input was split or in which order partial sketches merge.
#[derive(Debug, Clone, PartialEq)]
pub struct Sketch {
    positive: BTreeMap<i32, u64>,
    negative: BTreeMap<i32, u64>,
    zero: u64,
    count: u64,
    min: f64,
    max: f64,
}

impl Default for Sketch {
    fn default() -> Self {
        Sketch {
            positive: BTreeMap::new(),
            negative: BTreeMap::new(),
            zero: 0,
            count: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

/// Keeps the `MAX_BUCKETS` highest buckets, folding the rest into the
/// lowest kept one. Depends only on the set of non-empty buckets, so
/// folding early or late gives the same sketch.
fn collapse(store: &mut BTreeMap<i32, u64>) {
    if store.len() <= MAX_BUCKETS {
        return;
    }
    let &cutoff = store
        .keys()
        .nth_back(MAX_BUCKETS - 1)
        .expect("len > MAX_BUCKETS");
    let kept = store.split_off(&cutoff);
    let folded: u64 = store.values().sum();
    *store = kept;
    *store.get_mut(&cutoff).expect("cutoff is kept") += folded;
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
        } else {
            let store = if x > 0.0 {
                &mut self.positive
            } else {
                &mut self.negative
            };
            *store.entry(bucket_of(magnitude)).or_default() += 1;
            collapse(store);
        }
        self.count += 1;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        Ok(())
    }

    /// Combines two sketches.
    pub fn merge(mut self, other: Sketch) -> Sketch {
        for (store, theirs) in [
            (&mut self.positive, other.positive),
            (&mut self.negative, other.negative),
        ] {
            for (i, n) in theirs {
                *store.entry(i).or_default() += n;
            }
            collapse(store);
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
        let ascending = self
            .negative
            .iter()
            .rev()
            .map(|(&i, &n)| (-bucket_value(i), n))
            .chain(std::iter::once((0.0, self.zero)))
            .chain(self.positive.iter().map(|(&i, &n)| (bucket_value(i), n)));
        let mut seen = 0u64;
        for (value, n) in ascending {
            seen += n;
            if seen > rank {
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
            w.u64(store.len() as u64);
            let mut previous = 0i32;
            for (&i, &n) in store {
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
            let mut index = 0i64;
            let mut store = BTreeMap::new();
            for position in 0..len {
                let delta = r.i64()?;
                if position > 0 && delta <= 0 {
                    return Err("bucket indexes are not increasing".to_owned());
                }
                index = index
                    .checked_add(delta)
                    .filter(|i| i32::try_from(*i).is_ok())
                    .ok_or("bucket index out of range")?;
                store.insert(index as i32, r.u64()?);
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
            .flat_map(BTreeMap::values)
            .chain([&sketch.zero])
            .try_fold(0u64, |total, &n| total.checked_add(n))
            .ok_or("bucket counts overflow")?;
        Ok(sketch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_value_is_within_alpha_of_its_bucket() {
        for x in [1e-300, 1e-9, 0.5, 1.0, 1.5, 3.0, 1e6, 123_456.789, 1e300] {
            let v = bucket_value(bucket_of(x));
            assert!((v - x).abs() <= ALPHA * x * 1.000_001, "{x} -> {v}");
        }
    }

    #[test]
    fn bucket_count_is_bounded_and_folding_keeps_large_values_exact() {
        let mut sketch = Sketch::default();
        // Magnitudes from 1e-150 to 1e150 need far more than MAX_BUCKETS buckets.
        for e in -1500..=1500 {
            sketch.add(10f64.powf(f64::from(e) / 10.0)).unwrap();
        }
        assert_eq!(sketch.positive.len(), MAX_BUCKETS);
        let p99 = sketch.quantile(0.99).unwrap();
        let exact = 10f64.powf(f64::from(-1500 + 2970) / 10.0);
        assert!((p99 - exact).abs() <= ALPHA * exact, "{p99} vs {exact}");
        assert_eq!(Sketch::decode(&sketch.encode()), Ok(sketch));
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
