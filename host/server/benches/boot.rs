//! Boot time at size: how long a real `ebb serve` process takes from spawn
//! until it answers `/health` on a data dir holding N records (a 10-byte
//! key, a 100-byte value), the median of three boots.
//!
//! Run with `make bench-boot`. `EBB_BENCH_RECORDS` is a comma-separated list
//! of sizes (default `1000000`; e.g. `1000000,10000000`), `EBB_BENCH_DIR`
//! the directory the data dirs are made in (default the system temp dir;
//! 10 M records take about 1.5 GB), `EBB_BENCH_SERVER` runs another `ebb`
//! binary. Each data dir is written in-process through the embedded API at
//! `memory` durability, shut down cleanly, booted three times and deleted.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ebb_host::{BatchOp, Durability, Error, Expiry, Node, NodeConfig};
use ebb_server::cli::client::Client;

#[path = "../../benches/common/mod.rs"]
mod common;

/// Items per batch.
const BATCH: u64 = 10_000;
/// Batches in flight at once while loading.
const WRITERS: usize = 4;
/// Boots per size.
const BOOTS: usize = 3;
/// The longest one boot or one shutdown may take before the bench gives up.
const BOUND: Duration = Duration::from_secs(600);

/// Key `i`, as Redis's `DEBUG POPULATE` names it.
fn key(i: u64) -> String {
    format!("key:{i}")
}

/// A 100-byte value: `value:i` padded with NUL bytes.
fn value(i: u64) -> Bytes {
    let mut v = format!("value:{i}").into_bytes();
    v.resize(100, 0);
    Bytes::from(v)
}

/// Write `key(0..n)` into table `t` of a new node in `dir` and shut it down;
/// shed or backlogged items are retried after a pause.
fn create(dir: &Path, n: u64) {
    let runtime = common::runtime();
    runtime.block_on(async {
        let node = Node::open(NodeConfig::new(dir)).await.unwrap();
        let next = Arc::new(AtomicU64::new(0));
        let writers: Vec<_> = (0..WRITERS)
            .map(|_| {
                let (table, next) = (node.table("t").unwrap(), next.clone());
                tokio::spawn(async move {
                    loop {
                        let start = next.fetch_add(BATCH, Ordering::Relaxed);
                        if start >= n {
                            break;
                        }
                        let mut pending: Vec<u64> = (start..(start + BATCH).min(n)).collect();
                        while !pending.is_empty() {
                            let ops = pending
                                .iter()
                                .map(|&i| BatchOp::Put {
                                    key: key(i),
                                    value: value(i),
                                    expiry: Expiry::Never,
                                })
                                .collect();
                            let outcomes = table.batch(ops, Durability::Memory).await;
                            let mut shed = Vec::new();
                            for (i, outcome) in pending.iter().zip(outcomes) {
                                match outcome {
                                    Ok(_) => {}
                                    Err(Error::Overloaded(_) | Error::Backlog(_)) => shed.push(*i),
                                    Err(e) => panic!("put {}: {e}", key(*i)),
                                }
                            }
                            if !shed.is_empty() {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                            pending = shed;
                        }
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
        node.shutdown().await.unwrap();
    });
}

/// Bytes of the files under `dir` whose name passes `counted`.
fn disk_bytes(dir: &Path, counted: fn(&str) -> bool) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(m) if m.is_dir() => disk_bytes(&entry.path(), counted),
            Ok(m) if counted(&entry.file_name().to_string_lossy()) => m.len(),
            _ => 0,
        })
        .sum()
}

/// Resident memory of process `pid` in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// What one boot measured.
struct Boot {
    /// Spawn until the listening line (the node is open).
    listening: Duration,
    /// Spawn until `/health` answered 200.
    health: Duration,
    /// RSS when `/health` first answered, MiB.
    rss_mib: f64,
}

/// Spawn `ebb serve` on `dir`, time it until it answers `/health`, check it
/// loaded `n` records, and stop it with SIGTERM (a clean shutdown).
fn boot(dir: &Path, n: u64) -> Boot {
    let binary =
        std::env::var("EBB_BENCH_SERVER").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ebb").into());
    let started = Instant::now();
    let mut child = Command::new(binary)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let listening = started.elapsed();
    let url = line
        .trim()
        .strip_prefix("ebb listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_string();
    let client = Client::new(&url, None);
    let health = loop {
        if client.send("GET", "/health", None).is_ok() {
            break started.elapsed();
        }
        assert!(started.elapsed() < BOUND, "no /health answer");
        thread::sleep(Duration::from_millis(5));
    };
    let rss_mib = rss_mib(child.id());
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(
        line.contains(&format!(" {n} records loaded")),
        "expected {n} records loaded: {line}"
    );
    thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    // SAFETY: signalling our own child, which has not been reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let stopping = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if stopping.elapsed() > BOUND {
            let _ = child.kill();
            panic!("ebb serve did not stop on SIGTERM");
        }
        thread::sleep(Duration::from_millis(20));
    }
    Boot {
        listening,
        health,
        rss_mib,
    }
}

/// One size's results.
struct Row {
    records: u64,
    write_s: f64,
    disk_gb: f64,
    wal_gb: f64,
    /// The first boot, spawn to `/health`.
    first: Duration,
    listening: Duration,
    health: Duration,
    rss_mib: f64,
}

fn main() {
    if !common::benchmarking("make bench-boot") {
        return;
    }
    println!("load average at start: {}", common::load_average());
    let sizes: Vec<u64> = std::env::var("EBB_BENCH_RECORDS")
        .unwrap_or_else(|_| "1000000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("EBB_BENCH_RECORDS: comma-separated counts")
        })
        .collect();
    let parent = std::env::var("EBB_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    std::fs::create_dir_all(&parent)
        .unwrap_or_else(|e| panic!("EBB_BENCH_DIR {}: {e}", parent.display()));
    let mut rows = Vec::new();
    for n in sizes {
        let dir = tempfile::tempdir_in(&parent).unwrap();
        let started = Instant::now();
        create(dir.path(), n);
        let load = started.elapsed().as_secs_f64();
        let disk = disk_bytes(dir.path(), |_| true) as f64 / 1e9;
        // RocksDB's write-ahead logs: what the first boot replays.
        let wal = disk_bytes(dir.path(), |name| name.ends_with(".log")) as f64 / 1e9;
        println!(
            "{n} records written in-process ({WRITERS} x {BATCH}-item batches, durability memory) in {load:.1} s \
             ({:.0} K/s), {disk:.2} GB on disk, of which {wal:.2} GB write-ahead log",
            n as f64 / load / 1000.0
        );
        let boots: Vec<Boot> = (0..BOOTS)
            .map(|i| {
                let b = boot(dir.path(), n);
                let wal = disk_bytes(dir.path(), |name| name.ends_with(".log")) as f64 / 1e9;
                println!(
                    "  boot {}: listening after {:.3} s, /health after {:.3} s, RSS {:.0} MiB; \
                     write-ahead log after its shutdown {wal:.2} GB",
                    i + 1,
                    b.listening.as_secs_f64(),
                    b.health.as_secs_f64(),
                    b.rss_mib
                );
                b
            })
            .collect();
        let listening = common::median(boots.iter().map(|b| b.listening).collect());
        let health = common::median(boots.iter().map(|b| b.health).collect());
        rows.push(Row {
            records: n,
            write_s: load,
            disk_gb: disk,
            wal_gb: wal,
            first: boots[0].health,
            listening,
            health,
            rss_mib: boots[BOOTS - 1].rss_mib,
        });
        drop(dir);
    }
    let machine_load = common::load_average();
    let cores = thread::available_parallelism().map_or(0, |c| c.get());
    println!(
        "\n`ebb serve` from spawn until it answers /health, median of {BOOTS} boots, {cores} cores, load average {machine_load}\n"
    );
    println!(
        "| records | write s | disk GB (WAL) | first boot s | median spawn to listening s | median spawn to /health s | RSS after boot MiB |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for r in rows {
        println!(
            "| {} | {:.1} | {:.2} ({:.2}) | {:.3} | {:.3} | {:.3} | {:.0} |",
            r.records,
            r.write_s,
            r.disk_gb,
            r.wal_gb,
            r.first.as_secs_f64(),
            r.listening.as_secs_f64(),
            r.health.as_secs_f64(),
            r.rss_mib
        );
    }
    println!(
        "\nThe first boot replays the write-ahead log the loader's clean shutdown left (WAL above); \
         each boot's line shows what its own shutdown left for the next."
    );
}
