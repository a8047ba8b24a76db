//! Metrics: a lock-free latency histogram, and the Prometheus text
//! exposition (format 0.0.4) written by the `prometheus-client` crate.
//!
//! The histogram stays ours: recording a sample is two relaxed atomic adds
//! with no lock (prometheus-client's histogram takes a mutex per sample), and
//! its buckets can be read back for quantiles (`ebb expiry status`). It
//! implements prometheus-client's [`EncodeMetric`], so the crate encodes it
//! like its own metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet, prometheus_text,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// The `Content-Type` of the text [`PromWriter::finish`] writes.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Upper bounds of the latency buckets, in seconds.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
    5.0,
];

/// A fixed-bucket latency histogram; recording is two relaxed atomic adds.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One counter per bound, then one for observations past the last bound.
    buckets: Box<[AtomicU64]>,
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
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Record one observation.
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = self
            .bounds
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(self.bounds.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }

    /// Observations per bucket (not cumulative), the overflow bucket last.
    fn counts(&self) -> Vec<u64> {
        self.buckets
            .iter()
            .map(|bucket| bucket.load(Ordering::Relaxed))
            .collect()
    }

    /// Observations recorded so far.
    pub fn count(&self) -> u64 {
        self.counts().iter().sum()
    }

    /// The upper bound (seconds) of the bucket holding quantile `q` (0..=1):
    /// an over-estimate by at most one bucket. `None` before any
    /// observation; infinity when the quantile is past the last bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let counts = self.counts();
        let count: u64 = counts.iter().sum();
        if count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * count as f64).ceil() as u64).max(1);
        let mut cumulative = 0;
        for (bound, bucket) in self.bounds.iter().zip(&counts) {
            cumulative += bucket;
            if cumulative >= rank {
                return Some(*bound);
            }
        }
        Some(f64::INFINITY)
    }

    /// A consistent copy for encoding: the count is the sum of the buckets
    /// read, so the `+Inf` bucket never falls below a finite one.
    fn snapshot(&self) -> HistogramSnapshot {
        let mut counts = self.counts();
        let overflow = counts.pop().unwrap_or(0);
        let finite: u64 = counts.iter().sum();
        HistogramSnapshot {
            sum_seconds: self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6,
            count: finite + overflow,
            buckets: self.bounds.iter().copied().zip(counts).collect(),
        }
    }
}

impl EncodeMetric for Histogram {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.snapshot().encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// A histogram's numbers at one moment.
#[derive(Debug, Clone)]
struct HistogramSnapshot {
    sum_seconds: f64,
    count: u64,
    /// `(upper bound, observations in this bucket)` for the finite bounds.
    buckets: Vec<(f64, u64)>,
}

impl EncodeMetric for HistogramSnapshot {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.sum_seconds, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// One sample of a family.
#[derive(Debug)]
enum Sample {
    Value(f64),
    Histogram(HistogramSnapshot),
}

/// One metric family: its descriptor and samples.
#[derive(Debug)]
struct Family {
    name: String,
    help: String,
    kind: MetricType,
    samples: Vec<(Vec<(String, String)>, Sample)>,
}

/// Builds a metrics document, one family at a time, for
/// prometheus-client to write in the Prometheus text format (version
/// 0.0.4): it escapes label values and help text, formats numbers, and
/// writes histogram buckets cumulatively with `le` bounds as Go's clients do
/// (`5e-05`, `0.1`, `+Inf`).
#[derive(Debug, Default)]
pub struct PromWriter {
    families: Vec<Family>,
}

fn metric_type(kind: &str) -> MetricType {
    match kind {
        "counter" => MetricType::Counter,
        "gauge" => MetricType::Gauge,
        "histogram" => MetricType::Histogram,
        _ => MetricType::Unknown,
    }
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

impl PromWriter {
    /// An empty document.
    pub fn new() -> Self {
        Self::default()
    }

    /// Start a metric family of `kind` (`counter`, `gauge` or `histogram`).
    /// A counter's `name` ends in `_total`, as the exposition requires.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let kind = metric_type(kind);
        debug_assert!(kind != MetricType::Unknown, "unknown metric type of {name}");
        debug_assert!(
            kind != MetricType::Counter || name.ends_with("_total"),
            "counter {name} must end in _total"
        );
        self.families.push(Family {
            name: name.to_string(),
            help: help.to_string(),
            kind,
            samples: Vec::new(),
        });
    }

    fn current(&mut self, name: &str) -> &mut Family {
        let family = self
            .families
            .last_mut()
            .expect("a sample follows its family");
        debug_assert_eq!(family.name, name, "a sample of another family");
        family
    }

    /// One sample of the current family.
    pub fn sample(&mut self, name: &str, pairs: &[(&str, &str)], value: f64) {
        self.current(name)
            .samples
            .push((owned(pairs), Sample::Value(value)));
    }

    /// One histogram of the current family (its buckets, sum and count).
    pub fn histogram(&mut self, name: &str, pairs: &[(&str, &str)], histogram: &Histogram) {
        self.current(name)
            .samples
            .push((owned(pairs), Sample::Histogram(histogram.snapshot())));
    }

    /// The finished document.
    pub fn finish(self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut out = String::new();
        prometheus_text::encode(&mut out, &registry).expect("writing to a String cannot fail");
        out
    }
}

/// A whole number that an integer type holds exactly.
fn whole(value: f64) -> Option<i64> {
    (value.fract() == 0.0 && value.abs() < (1u64 << 53) as f64).then_some(value as i64)
}

impl Collector for PromWriter {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in &self.families {
            // prometheus-client adds the `_total` of a counter itself.
            let name = match family.kind {
                MetricType::Counter => family.name.strip_suffix("_total").unwrap_or(&family.name),
                _ => &family.name,
            };
            let mut metric = encoder.encode_descriptor(name, &family.help, None, family.kind)?;
            for (labels, sample) in &family.samples {
                let encoder = metric.encode_family(labels)?;
                match (sample, family.kind) {
                    (Sample::Histogram(histogram), _) => histogram.encode(encoder)?,
                    (Sample::Value(value), MetricType::Counter) => match whole(*value) {
                        Some(n) if n >= 0 => ConstCounter::new(n as u64).encode(encoder)?,
                        _ => ConstCounter::new(*value).encode(encoder)?,
                    },
                    (Sample::Value(value), _) => match whole(*value) {
                        Some(n) => ConstGauge::new(n).encode(encoder)?,
                        None => ConstGauge::new(*value).encode(encoder)?,
                    },
                }
            }
        }
        Ok(())
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
        assert!(text.contains("# TYPE lat_seconds histogram"), "{text}");
        assert!(
            text.contains(r#"lat_seconds_bucket{route="/a\"b",le="5e-05"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"lat_seconds_bucket{route="/a\"b",le="0.0001"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"lat_seconds_bucket{route="/a\"b",le="0.005"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"lat_seconds_bucket{route="/a\"b",le="5"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"lat_seconds_bucket{route="/a\"b",le="+Inf"} 3"#),
            "{text}"
        );
        assert!(
            text.contains(r#"lat_seconds_sum{route="/a\"b"} 10.00308"#),
            "{text}"
        );
        assert!(
            text.contains(r#"lat_seconds_count{route="/a\"b"} 3"#),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "Prometheus text, not OpenMetrics");
    }

    #[test]
    fn families_keep_their_names_types_and_values() {
        let mut out = PromWriter::new();
        out.family("ebb_x_total", "counter", "Things done.");
        out.sample("ebb_x_total", &[("table", "t\n1")], 3.0);
        out.family("ebb_depth", "gauge", "Things waiting.");
        out.sample("ebb_depth", &[], 0.0);
        out.family("ebb_age_seconds", "gauge", "Age.");
        out.sample("ebb_age_seconds", &[("table", "t")], 1.5);
        out.family("ebb_empty_total", "counter", "Nothing yet.");
        let text = out.finish();
        let expected = "# HELP ebb_x_total Things done.\n\
                        # TYPE ebb_x_total counter\n\
                        ebb_x_total{table=\"t\\n1\"} 3\n\
                        # HELP ebb_depth Things waiting.\n\
                        # TYPE ebb_depth gauge\n\
                        ebb_depth 0\n\
                        # HELP ebb_age_seconds Age.\n\
                        # TYPE ebb_age_seconds gauge\n\
                        ebb_age_seconds{table=\"t\"} 1.5\n\
                        # HELP ebb_empty_total Nothing yet.\n\
                        # TYPE ebb_empty_total counter\n";
        assert_eq!(text, expected);
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
        assert_eq!(histogram.count(), 100);
        assert_eq!(histogram.quantile(0.5), Some(0.01));
        assert_eq!(histogram.quantile(0.99), Some(0.1));
        assert_eq!(histogram.quantile(1.0), Some(f64::INFINITY));
    }
}
