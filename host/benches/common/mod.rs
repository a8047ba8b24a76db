//! Data loading, timing and machine load shared by the benches.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use ebb_host::{BatchOp, Durability, Expiry, Node};

/// The allocator the `ebb` binary uses, so benches measure what it runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How SQLite stores the `value` column.
pub enum SqliteValue {
    /// `BLOB` (as ebb's bytes).
    Blob,
    /// `TEXT` (what `json_extract` reads).
    Text,
}

/// Write rows `0..rows` of `row` into table `t` of `node`, 10 000 per batch.
pub async fn load_ebb(node: &Node, rows: usize, row: fn(usize) -> (String, String)) {
    let table = node.table("t").unwrap();
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
}

/// A SQLite file database in `dir` holding the same rows in `t(key, value)`,
/// with a 1 GiB cache, WAL and case-sensitive LIKE.
pub fn load_sqlite(
    dir: &Path,
    rows: usize,
    row: fn(usize) -> (String, String),
    value: SqliteValue,
) -> rusqlite::Connection {
    let sqlite = rusqlite::Connection::open(dir.join("sqlite.db")).unwrap();
    let value_type = match value {
        SqliteValue::Blob => "BLOB",
        SqliteValue::Text => "TEXT",
    };
    sqlite
        .execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -1048576;
             PRAGMA case_sensitive_like = ON; CREATE TABLE t (key TEXT PRIMARY KEY, value {value_type});"
        ))
        .unwrap();
    let tx = sqlite.unchecked_transaction().unwrap();
    {
        let mut insert = tx
            .prepare("INSERT INTO t (key, value) VALUES (?, ?)")
            .unwrap();
        for i in 0..rows {
            let (key, text) = row(i);
            match value {
                SqliteValue::Blob => insert.execute(rusqlite::params![key, text.into_bytes()]),
                SqliteValue::Text => insert.execute(rusqlite::params![key, text]),
            }
            .unwrap();
        }
    }
    tx.commit().unwrap();
    sqlite
}

/// The median of `times`.
pub fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The bytes of a wasm module built by `make plugins` (`ebb_plugin_json`, ...).
pub fn wasm(name: &str) -> Vec<u8> {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            // The workspace root (where Cargo.lock is) holds the default target dir.
            let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            let root = manifest.ancestors().find(|d| d.join("Cargo.lock").exists());
            root.unwrap_or(manifest).join("target")
        });
    let path = target.join(format!("wasm32-unknown-unknown/release/{name}.wasm"));
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run `make plugins` first", path.display()))
}

/// Whether the binary runs as a benchmark: `cargo test --all-targets` runs
/// bench binaries without `--bench`, and then they only print how to run.
pub fn benchmarking(how: &str) -> bool {
    let bench = std::env::args().any(|a| a == "--bench");
    if !bench {
        println!("run with `{how}`");
    }
    bench
}

/// The commit the benchmark runs (`git rev-parse --short HEAD`, with
/// `+changes` when the work tree differs from it), for every table's header.
pub fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(head) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "unknown (not a git checkout)".into();
    };
    match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(changes) if !changes.is_empty() => format!("{head}+changes"),
        _ => head,
    }
}

/// Which way a headline ratio must go to meet its goal.
pub enum Goal {
    /// The ratio must be at least this.
    AtLeast(f64),
    /// The ratio must be at most this.
    AtMost(f64),
}

/// Print one headline line, which `make bench-all` collects into its
/// table: what the goal is, the anchor it is measured against, the
/// measured ratio and whether it meets the goal.
pub fn headline(goal: &str, anchor: &str, ratio: f64, target: Goal) {
    let (met, wanted) = match target {
        Goal::AtLeast(t) => (ratio >= t, format!(">= {t}")),
        Goal::AtMost(t) => (ratio <= t, format!("<= {t}")),
    };
    println!(
        "headline: {goal} | {anchor} | {ratio:.2} | {wanted} | {}",
        if met { "met" } else { "not met" }
    );
}

/// Environment variable `name` parsed, or `default` when unset or unparsable.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The benchmarks' runtime: multi-threaded, one worker per core here.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`): other work on
/// the machine skews the timings.
pub fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
