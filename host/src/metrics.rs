//! Prometheus text exposition: a lock-free latency histogram and a writer
//! for the text format.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
    5.0,
];

/// A fixed-bucket latency histogram; recording is three atomic adds.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::with_bounds(&LATENCY_BUCKETS)
    }
}

impl Histogram {
    /// A histogram with these bucket upper bounds in seconds (ascending).
    pub fn with_bounds(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Record one observation.
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        if let Some(bucket) = self.bounds.iter().position(|bound| seconds <= *bound) {
            self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }

    /// Observations recorded so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The upper bound (seconds) of the bucket holding quantile `q` (0..=1):
    /// an over-estimate by at most one bucket. `None` before any
    /// observation; infinity when the quantile is past the last bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * count as f64).ceil() as u64).max(1);
        let mut cumulative = 0;
        for (bound, bucket) in self.bounds.iter().zip(self.buckets.iter()) {
            cumulative += bucket.load(Ordering::Relaxed);
            if cumulative >= rank {
                return Some(*bound);
            }
        }
        Some(f64::INFINITY)
    }
}

/// Writes metrics in the Prometheus text format (version 0.0.4).
#[derive(Debug, Default)]
pub struct PromWriter {
    out: String,
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

impl PromWriter {
    /// An empty document.
    pub fn new() -> Self {
        Self::default()
    }

    /// Start a metric family: `# HELP` and `# TYPE` lines.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample of the current family.
    pub fn sample(&mut self, name: &str, pairs: &[(&str, &str)], value: f64) {
        let _ = writeln!(self.out, "{name}{} {value}", labels(pairs));
    }

    /// All samples of a histogram (cumulative buckets, sum, count).
    pub fn histogram(&mut self, name: &str, pairs: &[(&str, &str)], histogram: &Histogram) {
        let mut cumulative = 0;
        for (bound, bucket) in histogram.bounds.iter().zip(histogram.buckets.iter()) {
            cumulative += bucket.load(Ordering::Relaxed);
            let le = bound.to_string();
            let mut with_le = pairs.to_vec();
            with_le.push(("le", &le));
            self.sample(&format!("{name}_bucket"), &with_le, cumulative as f64);
        }
        let count = histogram.count.load(Ordering::Relaxed);
        let mut with_inf = pairs.to_vec();
        with_inf.push(("le", "+Inf"));
        self.sample(&format!("{name}_bucket"), &with_inf, count as f64);
        let sum = histogram.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        self.sample(&format!("{name}_sum"), pairs, sum);
        self.sample(&format!("{name}_count"), pairs, count as f64);
    }

    /// The finished document.
    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_render_cumulative_buckets() {
        let histogram = Histogram::default();
        histogram.observe(Duration::from_micros(80));
        histogram.observe(Duration::from_millis(3));
        histogram.observe(Duration::from_secs(10));
        let mut out = PromWriter::new();
        out.family("lat_seconds", "histogram", "test");
        out.histogram("lat_seconds", &[("route", "/a\"b")], &histogram);
        let text = out.finish();
        assert!(text.contains("# TYPE lat_seconds histogram"));
        assert!(
            text.contains(r#"lat_seconds_bucket{route="/a\"b",le="0.0001"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"lat_seconds_bucket{route="/a\"b",le="0.005"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"lat_seconds_bucket{route="/a\"b",le="+Inf"} 3"#),
            "{text}"
        );
        assert!(
            text.contains(r#"lat_seconds_count{route="/a\"b"} 3"#),
            "{text}"
        );
    }

    #[test]
    fn quantiles_are_bucket_upper_bounds() {
        static BOUNDS: [f64; 3] = [0.01, 0.1, 1.0];
        let histogram = Histogram::with_bounds(&BOUNDS);
        assert_eq!(histogram.quantile(0.5), None);
        for _ in 0..98 {
            histogram.observe(Duration::from_millis(5));
        }
        histogram.observe(Duration::from_millis(50));
        histogram.observe(Duration::from_secs(3));
        assert_eq!(histogram.quantile(0.5), Some(0.01));
        assert_eq!(histogram.quantile(0.99), Some(0.1));
        assert_eq!(histogram.quantile(1.0), Some(f64::INFINITY));
    }
}
