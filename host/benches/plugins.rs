//! Plugin functions vs the same functions compiled natively (registered as
//! native SQL functions) vs ebb's built-in json_extract vs SQLite's
//! json_extract on the same 1 million JSON rows, side by side in one run,
//! each side's answer checked against the others first; plus upload-to-first-call time per bundled
//! plugin, the overhead of one plugin call per batch, and the per-row cost
//! of one batch in a loop, sandbox against native.
//!
//! Run with `make bench-plugins` (needs `make plugins`; `ROWS=...` to change
//! the row count, `RUNS=...` the number of rounds). For profiling,
//! `EBB_BENCH_ONLY=plugin` (or `native`, `builtin`) runs one side of one query 40 times
//! and nothing else after loading (the first query; `EBB_BENCH_QUERY=2` for
//! the second); with `EBB_PLUGIN_PERFMAP=1`, `perf` names the plugin's
//! functions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, wasm};
use ebb_guest::{Aggregate, FromValue};
use ebb_host::plugin::Tier;
use ebb_host::store::MemoryStore;
use ebb_host::{Node, NodeConfig, QueryRequest};
use ebb_plugin_json::Doc;
use ebb_plugin_stats::P95;
use ebb_proto::plugin::v1 as abi;
use ebb_query::{AggState, AggregateFunction, Arity, FunctionError, ScalarFunction, Value};

fn row(i: usize) -> (String, String) {
    (
        format!("req:{i:08}"),
        format!(
            r#"{{"n": {}, "ms": {:.2}, "user": "u{}"}}"#,
            i % 1000,
            (i * 7919 % 100_000) as f64 / 100.0,
            i % 5000
        ),
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn main() {
    if !common::benchmarking("make bench-plugins") {
        return;
    }
    let rows: usize = common::env_or("ROWS", 1_000_000);
    let runs: usize = common::env_or("RUNS", 9);
    let dir = tempfile::tempdir().unwrap();
    let runtime = common::runtime();
    let store = Arc::new(MemoryStore::new());
    let node = runtime
        .block_on(Node::open_with_store(
            NodeConfig::new("unused"),
            store.clone(),
        ))
        .unwrap();

    println!(
        "commit {}, load average {}",
        common::commit(),
        common::load_average()
    );
    // A running server's engine has finished its warm-up compile (it
    // takes well under a second from the start) before its first upload.
    node.plugins().runtime().wait_warm();
    println!(
        "upload-to-first-call (validate, baseline compile, store, first call; Node::put_plugin as the server calls it), on a node whose engines finished their warm-up compile; then until the optimized code, compiled in the background, is in:"
    );
    for (name, function, call) in [
        (
            "json",
            "get_int",
            abi::call_request::Call::Scalar(abi::ScalarBatch {
                rows: vec![abi::Row {
                    args: vec![text(r#"{"n": 1}"#), text("$.n")],
                }],
            }),
        ),
        (
            "stats",
            "p95",
            abi::call_request::Call::AggInit(abi::AggInit {}),
        ),
        (
            "archive",
            "copy",
            abi::call_request::Call::Expiry(abi::ExpiryBatch::default()),
        ),
    ] {
        let bytes = wasm(&format!("ebb_plugin_{name}"));
        let started = Instant::now();
        let version = runtime
            .block_on(node.put_plugin(name, bytes.clone().into()))
            .unwrap()
            .version
            .unwrap();
        let installed = started.elapsed();
        assert_eq!(
            version.tier(),
            Tier::Baseline,
            "an upload serves baseline code first"
        );
        version
            .call(function, call, Duration::from_secs(1))
            .unwrap();
        let total = started.elapsed();
        if name == "json" {
            // Per-row cost of baseline code, while the optimized code compiles.
            let per_row = json_per_row(&version, 20);
            if version.tier() == Tier::Baseline {
                println!(
                    "  json.get_int on baseline code: {per_row:.3} µs per row (batches of 256)"
                );
            }
        }
        while version.tier() != Tier::Optimized {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{name} was not optimized"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        println!(
            "  {name:<8} {:>8} bytes: install {:>7.1} ms, first call {:>6.2} ms, total {:>7.1} ms; optimized code in after {:>7.1} ms",
            bytes.len(),
            ms(installed),
            ms(total - installed),
            ms(total),
            ms(started.elapsed())
        );
        // Where an install's time goes, measured on a second compile of the
        // same bytes (so the install above paid the engine's first-use
        // costs, as a first upload to a running server does).
        let plugin_runtime = node.plugins().runtime();
        let started = Instant::now();
        plugin_runtime.compile(name, &bytes).unwrap();
        let baseline = started.elapsed();
        let started = Instant::now();
        let compiled = plugin_runtime.compile_optimized(name, &bytes).unwrap();
        let optimized = started.elapsed();
        let started_serialize = Instant::now();
        let artifact = plugin_runtime.serialize_artifact(&compiled.module).unwrap();
        println!(
            "  {name:<8} again: validate, compile and instantiate {:>7.1} ms baseline (Winch), {:>7.1} ms optimized (Cranelift); serialize and hash the {} KiB optimized artifact {:>5.1} ms",
            ms(baseline),
            ms(optimized),
            artifact.bytes.len() / 1024,
            ms(started_serialize.elapsed())
        );
        if name == "json" {
            common::headline(
                "the bundled json plugin ready within 200 ms of its upload",
                "goal 200 ms (200 ms / upload-to-first-call)",
                200.0 / ms(total),
                common::Goal::AtLeast(1.0),
            );
        }
    }

    let json = node.plugins().get("json").unwrap();
    assert_eq!(
        json.tier(),
        Tier::Optimized,
        "calls are timed on optimized code"
    );
    println!(
        "json.get_int on optimized code: {:.3} µs per row (batches of 256)",
        json_per_row(&json, 20)
    );
    println!("per-call overhead of json.get_int (median of 2000 calls):");
    for batch in [1usize, 256] {
        let rows_abi: Vec<abi::Row> = (0..batch)
            .map(|i| abi::Row {
                args: vec![text(&row(i).1), text("$.n")],
            })
            .collect();
        let times: Vec<Duration> = (0..2000)
            .map(|_| {
                let call = abi::call_request::Call::Scalar(abi::ScalarBatch {
                    rows: rows_abi.clone(),
                });
                let started = Instant::now();
                json.call("get_int", call, Duration::from_secs(1)).unwrap();
                started.elapsed()
            })
            .collect();
        let m = common::median(times);
        println!(
            "  batch of {batch:>3} rows: {:>7.1} µs per call, {:>6.3} µs per row",
            m.as_secs_f64() * 1e6,
            m.as_secs_f64() * 1e6 / batch as f64
        );
    }

    batch_costs(&node);

    register_natives(&node);
    eprintln!("loading {rows} JSON rows into ebb and SQLite...");
    runtime.block_on(common::load_ebb(&node, rows, row));
    let sqlite = common::load_sqlite(dir.path(), rows, row, common::SqliteValue::Text);
    let p95_offset = rows * 95 / 100;
    // (name, plugin, native, built-in, SQLite, how the answers must agree)
    let queries = [
        (
            "count where json n > 500",
            "SELECT count(*) FROM t WHERE json.get_int(value, '$.n') > 500".to_string(),
            "SELECT count(*) FROM t WHERE native.json_get_int(value, '$.n') > 500".to_string(),
            "SELECT count(*) FROM t WHERE json_extract(value, '$.n') > 500".to_string(),
            "SELECT count(*) FROM t WHERE json_extract(value, '$.n') > 500".to_string(),
            Agreement::Exact,
        ),
        (
            "p95 of json ms",
            "SELECT stats.p95(json.get_float(value, '$.ms')) FROM t".to_string(),
            "SELECT native.p95(native.json_get_float(value, '$.ms')) FROM t".to_string(),
            "SELECT stats.p95(json_extract(value, '$.ms')) FROM t".to_string(),
            format!(
                "SELECT ms FROM (SELECT json_extract(value, '$.ms') AS ms FROM t) ORDER BY ms LIMIT 1 OFFSET {p95_offset}"
            ),
            Agreement::Sketch,
        ),
    ];
    println!();
    println!(
        "{rows} JSON rows, median of {runs} interleaved warm rounds, 16 fragments, pages on every core of the machine: ebb with the json plugin (sandboxed), ebb with the same Rust functions compiled natively, ebb with its built-in json_extract, SQLite (json_extract, one thread)"
    );
    println!(
        "the p95 row: ebb's three columns compute the stats plugin's DDSketch p95 (1 % relative accuracy); SQLite sorts every value and reads the exact p95 row; the answers are checked to agree within 1 %"
    );
    println!(
        "{:<26} {:>10} {:>10} {:>11} {:>10} {:>14} {:>15} {:>12}   plugin/native per round",
        "query",
        "plugin ms",
        "native ms",
        "built-in ms",
        "SQLite ms",
        "plugin/native",
        "plugin/built-in",
        "SQLite/plugin",
    );
    let profiled: usize = common::env_or("EBB_BENCH_QUERY", 1);
    for (number, (name, ebb_sql, native_sql, builtin_sql, sqlite_sql, agreement)) in
        (1..).zip(queries)
    {
        let answer = |sql: &str| {
            runtime.block_on(async {
                let output = node
                    .query(QueryRequest {
                        sql: Some(sql.to_string()),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                output.rows[0][0].clone()
            })
        };
        let run = |sql: &str| {
            let started = Instant::now();
            answer(sql);
            started.elapsed()
        };
        let run_ebb = || run(&ebb_sql);
        let run_native = || run(&native_sql);
        let run_builtin = || run(&builtin_sql);
        let sqlite_answer = || {
            let mut statement = sqlite.prepare_cached(&sqlite_sql).unwrap();
            let mut result = statement.query([]).unwrap();
            let mut first = None;
            while let Some(row) = result.next().unwrap() {
                first.get_or_insert_with(|| match row.get_ref(0).unwrap() {
                    rusqlite::types::ValueRef::Integer(i) => Value::Int(i),
                    rusqlite::types::ValueRef::Real(f) => Value::Float(f),
                    other => panic!("SQLite answered {other:?}"),
                });
            }
            first.expect("SQLite answered no row")
        };
        let run_sqlite = || {
            let started = Instant::now();
            sqlite_answer();
            started.elapsed()
        };
        if let Ok(only) = std::env::var("EBB_BENCH_ONLY") {
            // Profiling aid: run one side of one query many times.
            if number != profiled {
                continue;
            }
            for _ in 0..40 {
                match only.as_str() {
                    "native" => drop(run_native()),
                    "plugin" => drop(run_ebb()),
                    "builtin" => drop(run_builtin()),
                    _ => {}
                }
            }
            return;
        }
        // Before any timing counts, every side must compute the same answer.
        let answers = [answer(&ebb_sql), answer(&native_sql), answer(&builtin_sql)];
        let theirs = sqlite_answer();
        agreement.check(name, &answers, &theirs);
        // Rounds interleave the four, so a slow spell of the machine hits
        // all of them alike.
        let (mut ebb, mut native, mut builtin, mut lite) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            ebb.push(run_ebb());
            native.push(run_native());
            builtin.push(run_builtin());
            lite.push(run_sqlite());
        }
        let ratios: Vec<f64> = ebb
            .iter()
            .zip(&native)
            .map(|(e, n)| e.as_secs_f64() / n.as_secs_f64())
            .collect();
        let lowest = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let highest = ratios.iter().copied().fold(0.0, f64::max);
        let (ebb, native, builtin, lite) = (
            common::median(ebb),
            common::median(native),
            common::median(builtin),
            common::median(lite),
        );
        println!(
            "{:<26} {:>10.1} {:>10.1} {:>11.1} {:>10.1} {:>14.2} {:>15.2} {:>12.2}   {lowest:.2}-{highest:.2}",
            name,
            ms(ebb),
            ms(native),
            ms(builtin),
            ms(lite),
            ebb.as_secs_f64() / native.as_secs_f64(),
            ebb.as_secs_f64() / builtin.as_secs_f64(),
            lite.as_secs_f64() / ebb.as_secs_f64()
        );
        common::headline(
            &format!("{name}: plugin calls within 1.25x of native"),
            "the same Rust compiled natively (plugin time / native time)",
            ebb.as_secs_f64() / native.as_secs_f64(),
            common::Goal::AtMost(1.25),
        );
        common::headline(
            &format!("{name}: built-in JSON at least as fast as the json plugin"),
            "the json plugin (plugin time / built-in time)",
            ebb.as_secs_f64() / builtin.as_secs_f64(),
            common::Goal::AtLeast(1.0),
        );
    }
    runtime.block_on(node.shutdown()).unwrap();
}

/// How the answers of one bench query must agree before it is timed.
#[derive(Clone, Copy)]
enum Agreement {
    /// ebb's three answers and SQLite's are the same value.
    Exact,
    /// ebb's three answers are the same sketch quantile, within 1 % of
    /// SQLite's exact one.
    Sketch,
}

impl Agreement {
    fn check(self, query: &str, ours: &[Value; 3], theirs: &Value) {
        let same = ours.iter().all(|v| v == &ours[0]);
        let agree = match self {
            Agreement::Exact => same && &ours[0] == theirs,
            Agreement::Sketch => {
                let (Value::Float(a), Value::Float(b)) = (&ours[0], theirs) else {
                    panic!("{query}: not floats: {ours:?} and {theirs:?}")
                };
                same && (a - b).abs() <= 0.01 * b.abs()
            }
        };
        assert!(
            agree,
            "{query}: the sides disagree (plugin, native, built-in: {ours:?}; SQLite: {theirs:?})"
        );
    }
}

/// Rows in the one-batch measurements.
const BATCH: usize = 1000;

/// Best time per row, in µs, of `run` (which handles `BATCH` rows) over 15
/// rounds of 100 runs: one batch in a loop, the steadiest measure of a
/// change to the per-row path.
fn per_row(mut run: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..15 {
        let started = Instant::now();
        for _ in 0..100 {
            run();
        }
        best = best.min(started.elapsed().as_secs_f64() / (100 * BATCH) as f64);
    }
    best * 1e6
}

/// The best per-row time of `calls` calls of `json.get_int` over a batch of
/// 256 rows.
fn json_per_row(json: &ebb_host::plugin::PluginVersion, calls: usize) -> f64 {
    let rows: Vec<abi::Row> = (0..256)
        .map(|i| abi::Row {
            args: vec![text(&row(i).1), text("$.n")],
        })
        .collect();
    let mut best = f64::INFINITY;
    for _ in 0..calls {
        let call = abi::call_request::Call::Scalar(abi::ScalarBatch { rows: rows.clone() });
        let started = Instant::now();
        json.call("get_int", call, Duration::from_secs(1)).unwrap();
        best = best.min(started.elapsed().as_secs_f64() * 1e6 / 256.0);
    }
    best
}

/// Per-row cost of one batch through the sandbox (request encoded from SQL
/// columns, the call, the response left unread) and of the same Rust
/// function called natively, on the bench's documents.
fn batch_costs(node: &Node) {
    use ebb_host::plugin::encode::{agg_update_request, scalar_request};
    let deadline = Duration::from_secs(1);
    let unread = |bytes: &[u8]| Ok(bytes.len());
    println!(
        "one batch of {BATCH} rows in a loop (best of 15 x 100), µs per row: sandbox (encode + call) / native / encoding the request alone"
    );
    let json = node.plugins().get("json").unwrap();
    let docs: Vec<Value> = (0..BATCH)
        .map(|i| Value::Bytes(row(i).1.into_bytes().into()))
        .collect();
    for (function, path, float) in [("get_int", "$.n", false), ("get_float", "$.ms", true)] {
        let args = vec![docs.clone(), vec![Value::text(path); BATCH]];
        let mut request = Vec::new();
        let encode = per_row(|| {
            scalar_request(&mut request, function, &args, BATCH);
        });
        let sandbox = per_row(|| {
            let start = scalar_request(&mut request, function, &args, BATCH);
            json.call_encoded_with(function, &request[start..], BATCH as u64, deadline, unread)
                .unwrap();
        });
        let native_json = NativeJson {
            name: "native.json",
            float,
        };
        let native = per_row(|| {
            native_json.call(&args, BATCH).unwrap();
        });
        println!("  json.{function:<10} {sandbox:.3} / {native:.3} / {encode:.3}");
    }
    // stats.p95 update, from the state one batch leaves (as later batches
    // of a query see it).
    let stats = node.plugins().get("stats").unwrap();
    let args = vec![
        (0..BATCH)
            .map(|i| Value::Float((i * 7919 % 100_000) as f64 / 100.0))
            .collect::<Vec<_>>(),
    ];
    let mut native_state = NativeP95.init().unwrap();
    NativeP95.update(&mut native_state, &args, BATCH).unwrap();
    let state = match &native_state[0] {
        Value::Bytes(bytes) => bytes.clone(),
        _ => unreachable!("the sketch's state is bytes"),
    };
    let mut request = Vec::new();
    let encode = per_row(|| {
        agg_update_request(&mut request, "p95", &state, &args, BATCH);
    });
    let sandbox = per_row(|| {
        let start = agg_update_request(&mut request, "p95", &state, &args, BATCH);
        stats
            .call_encoded_with("p95", &request[start..], BATCH as u64, deadline, unread)
            .unwrap();
    });
    let native = per_row(|| {
        let mut current = native_state.clone();
        NativeP95.update(&mut current, &args, BATCH).unwrap();
    });
    println!("  stats.p95 update {sandbox:.3} / {native:.3} / {encode:.3}");
}

fn text(s: &str) -> abi::Value {
    abi::Value {
        kind: Some(abi::value::Kind::Text(s.to_string())),
    }
}

/// The query value as the guest SDK's value (one copy, as the ABI makes).
fn guest(value: &Value) -> ebb_guest::Value {
    match value {
        Value::Null => ebb_guest::Value::Null,
        Value::Bool(b) => ebb_guest::Value::Bool(*b),
        Value::Int(i) => ebb_guest::Value::Int(*i),
        Value::Float(x) => ebb_guest::Value::Float(*x),
        Value::Text(s) => ebb_guest::Value::Text(s.to_string()),
        Value::Bytes(b) => ebb_guest::Value::Bytes(b.to_vec()),
    }
}

fn failed(function: &str, message: String) -> FunctionError {
    FunctionError {
        function: function.to_string(),
        message,
        plugin: false,
        host: false,
    }
}

/// `native.json_get_int` / `native.json_get_float`: the json plugin's own
/// Rust functions, called in-process on the same batches.
#[derive(Debug)]
struct NativeJson {
    name: &'static str,
    float: bool,
}

impl ScalarFunction for NativeJson {
    fn name(&self) -> &str {
        self.name
    }

    fn arity(&self) -> Arity {
        Arity::Exact(2)
    }

    fn call(&self, args: &[Vec<Value>], rows: usize) -> Result<Vec<Value>, FunctionError> {
        let mut out = Vec::with_capacity(rows);
        for (doc, path) in args[0].iter().zip(&args[1]).take(rows) {
            if matches!(doc, Value::Null) || matches!(path, Value::Null) {
                out.push(Value::Null);
                continue;
            }
            let doc = Doc::from_value(guest(doc)).map_err(|e| failed(self.name, e.to_string()))?;
            let path =
                String::from_value(guest(path)).map_err(|e| failed(self.name, e.to_string()))?;
            let value = if self.float {
                ebb_plugin_json::get_float(doc, path).map(|v| v.map_or(Value::Null, Value::Float))
            } else {
                ebb_plugin_json::get_int(doc, path).map(|v| v.map_or(Value::Null, Value::Int))
            };
            out.push(value.map_err(|e| failed(self.name, e))?);
        }
        Ok(out)
    }
}

/// `native.p95`: the stats plugin's sketch, with its state encoded between
/// batches as the plugin path does.
#[derive(Debug)]
struct NativeP95;

fn sketch(state: &AggState) -> Result<ebb_plugin_stats::ddsketch::Sketch, FunctionError> {
    match state.first() {
        Some(Value::Bytes(bytes)) => P95::decode(bytes).map_err(|e| failed("native.p95", e)),
        _ => Err(failed("native.p95", "bad state".into())),
    }
}

fn state(sketch: &ebb_plugin_stats::ddsketch::Sketch) -> AggState {
    vec![Value::Bytes(P95::encode(sketch).into())]
}

impl AggregateFunction for NativeP95 {
    fn name(&self) -> &str {
        "native.p95"
    }

    fn arity(&self) -> Arity {
        Arity::Exact(1)
    }

    fn init(&self) -> Result<AggState, FunctionError> {
        Ok(state(&P95::init()))
    }

    fn update(
        &self,
        current: &mut AggState,
        args: &[Vec<Value>],
        rows: usize,
    ) -> Result<(), FunctionError> {
        let mut s = sketch(current)?;
        for value in args[0].iter().take(rows) {
            if !matches!(value, Value::Null) {
                P95::update(&mut s, &[guest(value)]).map_err(|e| failed("native.p95", e))?;
            }
        }
        *current = state(&s);
        Ok(())
    }

    fn merge(&self, left: AggState, right: AggState) -> Result<AggState, FunctionError> {
        Ok(state(&P95::merge(sketch(&left)?, sketch(&right)?)))
    }

    fn finish(&self, current: AggState) -> Result<Value, FunctionError> {
        Ok(match P95::finish(sketch(&current)?) {
            ebb_guest::Value::Float(x) => Value::Float(x),
            _ => Value::Null,
        })
    }
}

fn register_natives(node: &Node) {
    for (name, float) in [("json_get_int", false), ("json_get_float", true)] {
        let qualified = if float {
            "native.json_get_float"
        } else {
            "native.json_get_int"
        };
        node.register_scalar(
            "native",
            name,
            Arc::new(NativeJson {
                name: qualified,
                float,
            }),
        )
        .unwrap();
    }
    node.register_aggregate("native", "p95", Arc::new(NativeP95))
        .unwrap();
}
