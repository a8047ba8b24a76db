//! Plugin functions vs SQLite's json_extract on the same 1 million JSON
//! rows, side by side in one run; plus upload-to-first-call time per bundled
//! plugin and the overhead of one plugin call per batch.
//!
//! Run with `make bench-plugins` (needs `make plugins`; `ROWS=...` to change
//! the row count).

use std::path::PathBuf;
use std::sync::Arc;
mod common;

use std::time::{Duration, Instant};

use ebb_host::store::MemoryStore;
use ebb_host::{Node, NodeConfig, QueryRequest};
use ebb_proto::plugin::v1 as abi;

const RUNS: usize = 5;

fn wasm(name: &str) -> Vec<u8> {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join(format!("wasm32-unknown-unknown/release/{name}.wasm"));
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run `make plugins` first", path.display()))
}

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

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("plugins bench: run with `make bench-plugins`");
        return;
    }
    let rows: usize = std::env::var("ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = Arc::new(MemoryStore::new());
    let node = runtime
        .block_on(Node::open_with_store(
            NodeConfig::new("unused"),
            store.clone(),
        ))
        .unwrap();

    println!("upload-to-first-call (validate, compile, store, first call):");
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
            abi::call_request::Call::Expiry(abi::ExpiryBatch { events: vec![] }),
        ),
    ] {
        let bytes = wasm(&format!("ebb_plugin_{name}"));
        let started = Instant::now();
        let version = node.plugins().install(&*store, name, &bytes).unwrap();
        let installed = started.elapsed();
        version
            .call(function, call, Duration::from_secs(1))
            .unwrap();
        println!(
            "  {name:<8} {:>8} bytes: install {:>7.1} ms, first call {:>6.2} ms, total {:>7.1} ms",
            bytes.len(),
            ms(installed),
            ms(started.elapsed() - installed),
            ms(started.elapsed())
        );
    }

    let json = node.plugins().get("json").unwrap();
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

    eprintln!("loading {rows} JSON rows into ebb and SQLite...");
    runtime.block_on(common::load_ebb(&node, rows, row));
    let sqlite = common::load_sqlite(dir.path(), rows, row, common::SqliteValue::Text);
    let p95_offset = rows * 95 / 100;
    let queries = [
        (
            "count where json n > 500",
            "SELECT count(*) FROM t WHERE json.get_int(value, '$.n') > 500".to_string(),
            "SELECT count(*) FROM t WHERE json_extract(value, '$.n') > 500".to_string(),
        ),
        (
            "p95 of json ms",
            "SELECT stats.p95(json.get_float(value, '$.ms')) FROM t".to_string(),
            format!(
                "SELECT ms FROM (SELECT json_extract(value, '$.ms') AS ms FROM t) ORDER BY ms LIMIT 1 OFFSET {p95_offset}"
            ),
        ),
    ];
    println!();
    println!(
        "{rows} JSON rows, median of {RUNS} warm runs, ebb (plugins, 16 fragments) vs SQLite (json_extract)"
    );
    println!(
        "{:<28} {:>10} {:>10} {:>12}",
        "query", "ebb ms", "SQLite ms", "SQLite/ebb"
    );
    for (name, ebb_sql, sqlite_sql) in queries {
        let run_ebb = || {
            runtime.block_on(async {
                let started = Instant::now();
                node.query(QueryRequest {
                    sql: Some(ebb_sql.clone()),
                    ..Default::default()
                })
                .await
                .unwrap();
                started.elapsed()
            })
        };
        let run_sqlite = || {
            let started = Instant::now();
            let mut statement = sqlite.prepare_cached(&sqlite_sql).unwrap();
            let mut result = statement.query([]).unwrap();
            while let Some(row) = result.next().unwrap() {
                let _ = row.get_ref(0).unwrap();
            }
            started.elapsed()
        };
        run_ebb();
        run_sqlite();
        let ebb = common::median((0..RUNS).map(|_| run_ebb()).collect());
        let lite = common::median((0..RUNS).map(|_| run_sqlite()).collect());
        println!(
            "{:<28} {:>10.1} {:>10.1} {:>12.2}",
            name,
            ms(ebb),
            ms(lite),
            lite.as_secs_f64() / ebb.as_secs_f64()
        );
    }
    runtime.block_on(node.shutdown()).unwrap();
}

fn text(s: &str) -> abi::Value {
    abi::Value {
        kind: Some(abi::value::Kind::Text(s.to_string())),
    }
}
