//! Accuracy, split invariance and empty-input tests through the encoded ABI path.

use ebb_guest::{Value, testing};

use super::plugin;

const QUANTILES: [(&str, f64); 3] = [("p50", 0.50), ("p95", 0.95), ("p99", 0.99)];
const ALL: [&str; 6] = ["avg", "stddev", "p50", "p95", "p99", "count_distinct"];

/// Deterministic generator (SplitMix64), so tests need no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Several shapes: uniform, heavy-tailed (log-uniform over 6 decades),
/// mixed-sign with zeros, and small integers.
fn datasets() -> Vec<Vec<f64>> {
    let mut rng = Rng(42);
    let n = 20_000;
    vec![
        (0..n).map(|_| rng.unit() * 1000.0).collect(),
        (0..n).map(|_| 10f64.powf(rng.unit() * 6.0 - 2.0)).collect(),
        (0..n)
            .map(|i| {
                if i % 10 == 0 {
                    0.0
                } else {
                    (rng.unit() - 0.3) * 500.0
                }
            })
            .collect(),
        (0..n).map(|_| (rng.next() % 100) as f64).collect(),
    ]
}

fn rows(values: &[f64]) -> Vec<Vec<Value>> {
    values.iter().map(|&x| vec![Value::Float(x)]).collect()
}

fn float(value: Value) -> f64 {
    match value {
        Value::Float(x) => x,
        other => panic!("expected a float, got {other:?}"),
    }
}

fn run(function: &str, partitions: Vec<Vec<Vec<Value>>>) -> Value {
    testing::aggregate(plugin(), function, partitions).unwrap()
}

/// The state of one partition: init then update with `values`.
fn partial(function: &str, values: &[f64]) -> Vec<u8> {
    let init = testing::agg_init(plugin(), function).unwrap();
    testing::agg_update(plugin(), function, &init, rows(values)).unwrap()
}

fn merge(function: &str, left: &[u8], right: &[u8]) -> Vec<u8> {
    testing::agg_merge(plugin(), function, left, right).unwrap()
}

fn relative_error(estimate: f64, exact: f64) -> f64 {
    if exact == 0.0 {
        estimate.abs()
    } else {
        ((estimate - exact) / exact).abs()
    }
}

#[test]
fn manifest_declares_six_single_argument_aggregates() {
    let manifest = plugin().manifest();
    assert_eq!(manifest.name, "stats");
    let names: Vec<_> = manifest.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ALL);
    for f in &manifest.functions {
        assert_eq!(f.arg_count, 1);
        assert_eq!(f.kind, ebb_guest::proto::FunctionKind::Aggregate as i32);
    }
}

#[test]
fn empty_and_all_null_input_give_null_or_zero() {
    for function in ALL {
        let expected = if function == "count_distinct" {
            Value::Int(0)
        } else {
            Value::Null
        };
        assert_eq!(run(function, vec![]), expected, "{function} of nothing");
        let nulls = vec![vec![vec![Value::Null]; 5], vec![]];
        assert_eq!(run(function, nulls), expected, "{function} of NULLs");
    }
}

#[test]
fn nulls_are_ignored() {
    let values = vec![vec![Value::Int(1)], vec![Value::Null], vec![Value::Int(3)]];
    assert_eq!(run("avg", vec![values.clone()]), Value::Float(2.0));
    assert_eq!(run("count_distinct", vec![values.clone()]), Value::Int(2));
    assert_eq!(
        run("p50", vec![values]),
        run("p50", vec![rows(&[1.0, 3.0])])
    );
}

#[test]
fn stddev_is_the_sample_deviation_and_needs_two_values() {
    assert_eq!(run("stddev", vec![rows(&[5.0])]), Value::Null);
    // Sample variance of 2, 4, 4, 4, 5, 5, 7, 9 is 32 / 7.
    let x = float(run(
        "stddev",
        vec![rows(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])],
    ));
    assert!((x - (32.0f64 / 7.0).sqrt()).abs() < 1e-12, "{x}");
}

#[test]
fn avg_and_stddev_match_exact_two_pass_computation() {
    for data in datasets() {
        let n = data.len() as f64;
        let mean = data.iter().sum::<f64>() / n;
        let variance = data.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let avg = float(run("avg", vec![rows(&data)]));
        let stddev = float(run("stddev", vec![rows(&data)]));
        assert!(relative_error(avg, mean) < 1e-12, "avg {avg} vs {mean}");
        assert!(
            relative_error(stddev, variance.sqrt()) < 1e-12,
            "stddev {stddev}"
        );
    }
}

#[test]
fn quantiles_are_within_one_percent_of_exact() {
    for data in datasets() {
        let mut sorted = data.clone();
        sorted.sort_by(f64::total_cmp);
        for (function, q) in QUANTILES {
            let exact = sorted[(q * (sorted.len() - 1) as f64).floor() as usize];
            let estimate = float(run(function, vec![rows(&data)]));
            assert!(
                relative_error(estimate, exact) <= 0.01 * 1.000_001,
                "{function}: {estimate} vs exact {exact}"
            );
        }
    }
}

#[test]
fn quantiles_of_tiny_inputs_are_exact_at_the_ends() {
    assert_eq!(run("p50", vec![rows(&[7.25])]), Value::Float(7.25));
    assert_eq!(run("p99", vec![rows(&[1.0, 1000.0])]), Value::Float(1.0));
    assert_eq!(
        run("p50", vec![rows(&[-3.0, -3.0, -3.0])]),
        Value::Float(-3.0)
    );
    assert_eq!(
        run("p50", vec![vec![vec![Value::Int(0)]]]),
        Value::Float(0.0)
    );
}

#[test]
fn count_distinct_is_within_five_percent() {
    // 5% is ~3 standard errors; the hash is fixed, so this is deterministic.
    for n in [1u64, 2, 10, 100, 1_000, 5_000, 20_000, 200_000] {
        let distinct: Vec<Vec<Value>> = (0..n)
            .flat_map(|i| {
                let v = Value::Text(format!("user-{i}"));
                [vec![v.clone()], vec![v]]
            })
            .collect();
        let Value::Int(estimate) = run("count_distinct", vec![distinct]) else {
            panic!("count_distinct returns an int");
        };
        let error = relative_error(estimate as f64, n as f64);
        assert!(
            error <= 0.05,
            "n = {n}: estimate {estimate} (error {error:.4})"
        );
    }
}

/// The same data split three ways must merge to the same result whatever
/// the split and the merge tree.
#[test]
fn merge_is_associative_and_split_independent() {
    let data = &datasets()[2];
    let splits = [
        (1usize, 2usize),
        (5_000, 5_001),
        (7_000, 15_000),
        (19_999, 20_000),
    ];
    for function in ALL {
        let whole = partial(function, data);
        let expected = testing::agg_finish(plugin(), function, &whole).unwrap();
        for (i, j) in splits {
            let (a, b, c) = (&data[..i], &data[i..j], &data[j..]);
            let (a, b, c) = (
                partial(function, a),
                partial(function, b),
                partial(function, c),
            );
            let left = merge(function, &merge(function, &a, &b), &c);
            let right = merge(function, &a, &merge(function, &b, &c));
            let swapped = merge(function, &c, &merge(function, &b, &a));
            for state in [left, right, swapped] {
                let got = testing::agg_finish(plugin(), function, &state).unwrap();
                if matches!(function, "avg" | "stddev") {
                    let (got, expected) = (float(got), float(expected.clone()));
                    assert!(relative_error(got, expected) < 1e-12, "{function} {i}/{j}");
                } else {
                    // Sketches merge exactly: identical state bytes and result.
                    assert_eq!(state, whole, "{function} state for split {i}/{j}");
                    assert_eq!(got, expected, "{function} split {i}/{j}");
                }
            }
        }
    }
}

#[test]
fn non_numbers_and_corrupt_states_fail_the_call() {
    let text = vec![vec![vec![Value::Text("x".into())]]];
    let error = testing::aggregate(plugin(), "avg", text).unwrap_err();
    assert_eq!(error, "stats.avg: expected a number, got text");
    let nan = vec![rows(&[f64::NAN])];
    let error = testing::aggregate(plugin(), "p95", nan).unwrap_err();
    assert!(error.starts_with("stats.p95: cannot rank NaN"), "{error}");
    for function in ALL {
        let error = testing::agg_finish(plugin(), function, &[0xff]).unwrap_err();
        assert!(
            error.starts_with(&format!("stats.{function}: corrupt state")),
            "{error}"
        );
    }
}
