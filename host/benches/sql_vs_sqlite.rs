//! ebb vs SQLite on the same 1 million generated rows, side by side in one
//! run: whole-table count, prefix-range aggregate, filtered projection with
//! LIMIT, GROUP BY, and the key-ordered first pages and keyset page. SQLite
//! uses a file database with a warm cache and case-sensitive LIKE (so its
//! LIKE prefix optimization applies too), with the rows twice: a rowid
//! table with a primary-key index on `key` (`t`), and a `WITHOUT ROWID`
//! table clustered by key (`c`), the layout closest to ebb's. Before
//! timing, each query's answers are compared row by row (in order where
//! the query orders them), on all three.
//!
//! Run with `make bench-sql` (`ROWS=...` to change the row count, `RUNS=...`
//! the least timed runs per query, `QUERY=...` to run only queries whose
//! label contains it). A query that answers in under a few milliseconds is
//! timed more often than `RUNS`, on every side alike (as many times as its
//! slowest side's second, warm run fits in [`MIN_TIMED`]): the median of
//! five runs of a 6 µs query measures the caches more than the query. The
//! sides' runs are interleaved (one of each per round), so that the
//! machine's speed drifting during a query's runs counts on every side.
//!
//! For profiling, `EBB_BENCH_LOOP=N` runs only ebb's side of each selected
//! query N times once the answers are checked, and prints how long that
//! took instead of the table (`QUERY=keyset EBB_BENCH_LOOP=300000 make
//! bench-sql` under `perf record`). `EBB_BENCH_VALGRIND=1` shrinks the
//! plugin pool so that the bench runs under valgrind, to count
//! instructions (docs/testing.md).

use crate::common;

use std::time::{Duration, Instant};

use ebb_host::{Node, NodeConfig, QueryRequest};
use ebb_query::Value;

/// A fast query is timed as many times per side as its slowest side's
/// warm (untimed) run fits in this, at most [`MAX_RUNS`] times.
const MIN_TIMED: Duration = Duration::from_millis(200);
/// The most timed runs of one query per side.
const MAX_RUNS: usize = 100_001;

fn row(i: usize) -> (String, String) {
    let prefix = ["user", "item", "order", "event"][i % 4];
    let key = format!("{prefix}:{i:08}");
    let pad = "x".repeat(i % 50);
    let value = format!(
        "{{\"n\": {}, \"name\": \"name-{i}\", \"pad\": \"{pad}\"}}",
        i % 1000
    );
    (key, value)
}

pub fn main() {
    if !common::benchmarking("make bench-sql") {
        return;
    }
    let rows: usize = common::env_or("ROWS", 1_000_000);
    let runs: usize = common::env_or("RUNS", 5);
    let only = std::env::var("QUERY").unwrap_or_default();
    let profile_loop: Option<usize> = std::env::var("EBB_BENCH_LOOP")
        .ok()
        .map(|n| n.parse().expect("EBB_BENCH_LOOP is a number of runs"));
    let dir = tempfile::tempdir().unwrap();
    let runtime = common::runtime();

    eprintln!("loading {rows} rows into ebb and SQLite...");
    let mut config = NodeConfig::new(dir.path().join("ebb"));
    if let Some(page) = std::env::var("PAGE").ok().and_then(|v| v.parse().ok()) {
        config.query.page_visit_budget = page;
        config.query.max_page_visit_budget = page;
    }
    if std::env::var_os("EBB_BENCH_VALGRIND").is_some() {
        // Under valgrind, whose address space cannot hold the default
        // plugin pool's reservation: no idle instances, as `ebb serve
        // --plugin-idle-instances 0` (no query here calls a plugin).
        config.plugins.idle_instances = 0;
    }
    let node = runtime.block_on(Node::open(config)).unwrap();
    runtime.block_on(common::load_ebb(&node, rows, row));

    let sqlite = common::load_sqlite(dir.path(), rows, row, common::SqliteValue::Blob);
    sqlite
        .execute_batch(
            "CREATE TABLE c (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID;
             INSERT INTO c SELECT key, value FROM t ORDER BY key;",
        )
        .unwrap();

    // (label, query, whether its rows come in a defined order, the goal of
    // its SQLite/ebb ratio if it is a headline)
    let queries = [
        (
            "count(*) (ebb: from counters)",
            "SELECT count(*) FROM t",
            true,
            None,
        ),
        (
            "prefix-range aggregate",
            "SELECT count(*), sum(length(value)) FROM t WHERE key LIKE 'user:%'",
            true,
            None,
        ),
        (
            "filtered full-scan projection",
            "SELECT key, value FROM t WHERE length(value) > 100 LIMIT 100",
            false,
            Some(1.0),
        ),
        (
            "GROUP BY",
            "SELECT substr(key, 1, 4) AS p, count(*), max(length(value)) FROM t GROUP BY p",
            false,
            None,
        ),
        (
            "filter ORDER BY key LIMIT 100",
            "SELECT key FROM t WHERE length(value) > 38 ORDER BY key LIMIT 100",
            true,
            Some(0.5),
        ),
        (
            "ORDER BY key LIMIT 100",
            "SELECT key FROM t ORDER BY key LIMIT 100",
            true,
            Some(0.5),
        ),
        (
            "ORDER BY key DESC LIMIT 100",
            "SELECT key FROM t ORDER BY key DESC LIMIT 100",
            true,
            Some(0.5),
        ),
        (
            "keyset key >= ? LIMIT 10",
            "SELECT key FROM t WHERE key >= 'order:00500000' ORDER BY key LIMIT 10",
            true,
            Some(0.5),
        ),
    ];
    println!();
    println!(
        "{rows} rows, median of at least {runs} warm runs per side (more for a fast query: as many as its slowest side's warm run fits {} ms times, at most {MAX_RUNS}; column runs; the sides interleaved, one run each per round), {} cores (ebb's pages on every core, SQLite on one thread), commit {}, load average {}",
        MIN_TIMED.as_millis(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        common::commit(),
        common::load_average()
    );
    println!(
        "{:<30} {:>10} {:>14} {:>10} {:>14} {:>12} {:>12} {:>12} {:>8}",
        "query",
        "ebb ms",
        "ebb rows/s",
        "SQLite ms",
        "SQLite rows/s",
        "SQLite/ebb",
        "clustered ms",
        "clustered/ebb",
        "runs"
    );
    let mut headlines = Vec::new();
    for (name, sql, ordered, goal) in queries {
        if !name.contains(only.as_str()) {
            continue;
        }
        let run_ebb = || {
            runtime.block_on(async {
                let started = Instant::now();
                let output = node
                    .query(QueryRequest {
                        sql: Some(sql.into()),
                        page_size: Some(10_000),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                (started.elapsed(), output.rows, output.stats.scanned)
            })
        };
        let clustered_sql = sql.replacen("FROM t", "FROM c", 1);
        let run_sqlite = |sql: &str| {
            let started = Instant::now();
            let mut statement = sqlite.prepare_cached(sql).unwrap();
            let columns = statement.column_count();
            let mut rows = statement.query([]).unwrap();
            let mut out: Vec<Vec<String>> = Vec::new();
            while let Some(row) = rows.next().unwrap() {
                out.push(
                    (0..columns)
                        .map(|i| sqlite_text(row.get_ref(i).unwrap()))
                        .collect(),
                );
            }
            (started.elapsed(), out)
        };
        let (_, ebb_rows, scanned) = run_ebb();
        let (_, sqlite_rows) = run_sqlite(sql);
        let (_, mut clustered_rows) = run_sqlite(&clustered_sql);
        // The same number of runs on every side, sized by a warm run (the
        // first one above also fills the caches and the plan caches).
        let slowest = run_ebb()
            .0
            .max(run_sqlite(sql).0)
            .max(run_sqlite(&clustered_sql).0);
        let runs = runs
            .max((MIN_TIMED.as_nanos() / slowest.as_nanos().max(1)).min(MAX_RUNS as u128) as usize);
        let mut ebb_rows: Vec<Vec<String>> = ebb_rows
            .iter()
            .map(|row| row.iter().map(ebb_text).collect())
            .collect();
        let mut sqlite_rows = sqlite_rows;
        if !ordered {
            ebb_rows.sort();
            sqlite_rows.sort();
            clustered_rows.sort();
        }
        assert_eq!(ebb_rows, sqlite_rows, "{name}: the answers differ");
        assert_eq!(
            ebb_rows, clustered_rows,
            "{name}: the answers differ (WITHOUT ROWID)"
        );
        if let Some(n) = profile_loop {
            // Profiling aid: ebb's side alone, in a loop.
            let started = Instant::now();
            for _ in 0..n {
                run_ebb();
            }
            let took = started.elapsed();
            println!(
                "{name}: ebb's side {n} times in {took:?} ({:.2} µs each)",
                took.as_secs_f64() * 1e6 / n.max(1) as f64
            );
            continue;
        }
        // Interleaved, one run of each side per round: this machine's speed
        // drifts within a minute, and a drift between two blocks of runs
        // would count as a difference between the sides.
        let (mut ebb, mut lite, mut clustered) = (
            Vec::with_capacity(runs),
            Vec::with_capacity(runs),
            Vec::with_capacity(runs),
        );
        for _ in 0..runs {
            ebb.push(run_ebb().0);
            lite.push(run_sqlite(sql).0);
            clustered.push(run_sqlite(&clustered_sql).0);
        }
        let (ebb, lite, clustered) = (
            common::median(ebb),
            common::median(lite),
            common::median(clustered),
        );
        let per_second = |d: Duration| scanned as f64 / d.as_secs_f64();
        println!(
            "{:<30} {:>10.2} {:>14.0} {:>10.2} {:>14.0} {:>12.2} {:>12.2} {:>12.2} {:>8}",
            name,
            ebb.as_secs_f64() * 1000.0,
            per_second(ebb),
            lite.as_secs_f64() * 1000.0,
            per_second(lite),
            lite.as_secs_f64() / ebb.as_secs_f64(),
            clustered.as_secs_f64() * 1000.0,
            clustered.as_secs_f64() / ebb.as_secs_f64(),
            runs
        );
        if let Some(goal) = goal {
            headlines.push((name, lite.as_secs_f64() / ebb.as_secs_f64(), goal));
        }
    }
    if profile_loop.is_some() {
        return;
    }
    println!(
        "rows/s = records the query visits (as ebb counts them) per second; SQLite/ebb > 1 means ebb is faster; every answer checked equal"
    );
    for (name, ratio, goal) in headlines {
        let what = if goal >= 1.0 {
            format!("{name}: at least as fast as SQLite")
        } else {
            format!("{name}: within {:.0}x of SQLite's time", 1.0 / goal)
        };
        common::headline(
            &what,
            &format!(
                "SQLite in process, {rows} rows (SQLite time / ebb time, median of interleaved runs)"
            ),
            ratio,
            common::Goal::AtLeast(goal),
        );
    }
    runtime.block_on(node.shutdown()).unwrap();
}

/// An ebb value as text, to compare with SQLite's.
fn ebb_text(value: &Value) -> String {
    match value {
        Value::Null => "NULL".into(),
        Value::Bool(b) => i64::from(*b).to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Text(t) => t.to_string(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
    }
}

/// A SQLite value as text, to compare with ebb's.
fn sqlite_text(value: rusqlite::types::ValueRef<'_>) -> String {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Null => "NULL".into(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
    }
}
