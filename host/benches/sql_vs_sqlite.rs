//! ebb vs SQLite on the same 1 million generated rows, side by side in one
//! run: full-scan count, prefix-range aggregate, filtered projection with
//! LIMIT, GROUP BY. SQLite uses a file database with a warm cache and
//! case-sensitive LIKE (so its LIKE prefix optimization applies too).
//!
//! Run with `make bench-sql` (`ROWS=...` to change the row count).

use std::time::{Duration, Instant};

use bytes::Bytes;
use ebb_host::{BatchOp, Durability, Expiry, Node, NodeConfig, QueryRequest};

const RUNS: usize = 5;

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

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    // `cargo test --all-targets` runs bench binaries without `--bench`: do
    // nothing then, the load takes minutes.
    if !std::env::args().any(|a| a == "--bench") {
        println!("sql_vs_sqlite: run with `make bench-sql`");
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

    eprintln!("loading {rows} rows into ebb and SQLite...");
    let mut config = NodeConfig::new(dir.path().join("ebb"));
    if let Some(page) = std::env::var("PAGE").ok().and_then(|v| v.parse().ok()) {
        config.query.page_visit_budget = page;
    }
    let node = runtime.block_on(Node::open(config)).unwrap();
    let table = node.table("t").unwrap();
    runtime.block_on(async {
        for start in (0..rows).step_by(10_000) {
            let ops = (start..(start + 10_000).min(rows))
                .map(|i| {
                    let (key, value) = row(i);
                    BatchOp::Put {
                        key,
                        value: Bytes::from(value),
                        expiry: Expiry::Never,
                    }
                })
                .collect();
            for outcome in table.batch(ops, Durability::Memory).await {
                outcome.unwrap();
            }
        }
    });

    let sqlite = rusqlite::Connection::open(dir.path().join("sqlite.db")).unwrap();
    sqlite
        .execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -1048576;
             PRAGMA case_sensitive_like = ON; CREATE TABLE t (key TEXT PRIMARY KEY, value BLOB);",
        )
        .unwrap();
    {
        let tx = sqlite.unchecked_transaction().unwrap();
        let mut insert = tx
            .prepare("INSERT INTO t (key, value) VALUES (?, ?)")
            .unwrap();
        for i in 0..rows {
            let (key, value) = row(i);
            insert
                .execute(rusqlite::params![key, value.into_bytes()])
                .unwrap();
        }
        drop(insert);
        tx.commit().unwrap();
    }

    let queries = [
        ("full-scan count", "SELECT count(*) FROM t"),
        (
            "prefix-range aggregate",
            "SELECT count(*), sum(length(value)) FROM t WHERE key LIKE 'user:%'",
        ),
        (
            "filtered projection + LIMIT",
            "SELECT key, value FROM t WHERE length(value) > 100 LIMIT 100",
        ),
        (
            "GROUP BY",
            "SELECT substr(key, 1, 4) AS p, count(*), max(length(value)) FROM t GROUP BY p",
        ),
    ];
    println!();
    println!(
        "{rows} rows, median of {RUNS} warm runs, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<30} {:>10} {:>14} {:>10} {:>14} {:>12}",
        "query", "ebb ms", "ebb rows/s", "SQLite ms", "SQLite rows/s", "SQLite/ebb"
    );
    for (name, sql) in queries {
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
                (started.elapsed(), output.rows.len(), output.stats.scanned)
            })
        };
        let run_sqlite = || {
            let started = Instant::now();
            let mut statement = sqlite.prepare_cached(sql).unwrap();
            let columns = statement.column_count();
            let mut rows = statement.query([]).unwrap();
            let mut n = 0;
            while let Some(row) = rows.next().unwrap() {
                for i in 0..columns {
                    let _ = row.get_ref(i).unwrap();
                }
                n += 1;
            }
            (started.elapsed(), n)
        };
        let (_, ebb_rows, scanned) = run_ebb();
        let (_, sqlite_rows) = run_sqlite();
        assert_eq!(ebb_rows, sqlite_rows, "{name}: result sizes differ");
        let ebb = median((0..RUNS).map(|_| run_ebb().0).collect());
        let lite = median((0..RUNS).map(|_| run_sqlite().0).collect());
        let per_second = |d: Duration| scanned as f64 / d.as_secs_f64();
        println!(
            "{:<30} {:>10.2} {:>14.0} {:>10.2} {:>14.0} {:>12.2}",
            name,
            ebb.as_secs_f64() * 1000.0,
            per_second(ebb),
            lite.as_secs_f64() * 1000.0,
            per_second(lite),
            lite.as_secs_f64() / ebb.as_secs_f64()
        );
    }
    println!(
        "rows/s = records the query visits (as ebb counts them) per second; SQLite/ebb > 1 means ebb is faster"
    );
    runtime.block_on(node.shutdown()).unwrap();
}
