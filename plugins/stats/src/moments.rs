//! Count, mean and sum of squared deviations (Welford), merged with Chan's formula.

use ebb_guest::state::{StateReader, StateWriter};

/// Running moments of a sample. Merging is exact in real arithmetic; in
/// floating point, results from different splits of the input agree to a
/// relative error around 1e-15, not bit for bit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moments {
    /// Number of values.
    pub count: u64,
    /// Their mean (0 when empty).
    pub mean: f64,
    /// Sum of squared deviations from the mean.
    pub m2: f64,
}

impl Moments {
    /// Adds one value (Welford's update).
    pub fn add(&mut self, x: f64) {
        self.count += 1;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Combines two samples (Chan et al.).
    pub fn merge(self, other: Moments) -> Moments {
        if self.count == 0 {
            return other;
        }
        if other.count == 0 {
            return self;
        }
        let count = self.count + other.count;
        let (n_left, n_right, n) = (self.count as f64, other.count as f64, count as f64);
        let delta = other.mean - self.mean;
        Moments {
            count,
            mean: self.mean + delta * (n_right / n),
            m2: self.m2 + other.m2 + delta * delta * (n_left * n_right / n),
        }
    }

    /// The mean, or `None` when empty.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then_some(self.mean)
    }

    /// The sample standard deviation (divisor `n - 1`), or `None` below two values.
    pub fn sample_stddev(&self) -> Option<f64> {
        (self.count > 1).then(|| (self.m2 / (self.count - 1) as f64).max(0.0).sqrt())
    }

    /// Encodes as `count, mean, m2`.
    pub fn encode(&self) -> Vec<u8> {
        StateWriter::new()
            .u64(self.count)
            .f64(self.mean)
            .f64(self.m2)
            .finish()
    }

    /// Decodes what [`Moments::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Moments, String> {
        let mut r = StateReader::new(bytes);
        let moments = Moments {
            count: r.u64()?,
            mean: r.f64()?,
            m2: r.f64()?,
        };
        r.finish()?;
        Ok(moments)
    }
}
