//! Point reads while heavy queries run: the latency of one-key GETs over
//! HTTP against a real `ebb serve` process, idle, while a query builds huge
//! values, and while several full-table aggregates run at once, with the
//! server's resident memory before, at its peak and after each phase.
//!
//! Run with `make bench-isolation` (or `cargo bench -p ebb-host --bench
//! isolation`). `EBB_BENCH_ROWS` sets the table size (default 1 000 000),
//! `EBB_BENCH_SECONDS` each phase's length (default 5). `EBB_BENCH_SERVER`
//! runs another `ebb` binary (an older build, for a before/after), and
//! `EBB_BENCH_SKIP_HUGE=1` leaves out the two phases with huge values (an
//! unbounded build would take tens of GB on them).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use ebb_server::cli::client::{Client, ClientError};
use serde_json::json;

#[path = "../../benches/common/mod.rs"]
mod common;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Server {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let binary =
            std::env::var("EBB_BENCH_SERVER").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ebb").into());
        println!("server: {binary}");
        let mut child = Command::new(binary)
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("ebb listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line}"))
            .to_string();
        Self {
            child,
            url,
            _dir: dir,
        }
    }

    fn client(&self) -> Client {
        Client::new(&self.url, None)
    }

    /// Resident memory of the server process, in MiB.
    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long after a phase its memory is read again.
const SETTLE: Duration = Duration::from_secs(10);

fn key(i: u64) -> String {
    format!("key:{i}")
}

fn load(server: &Server, rows: u64) {
    let client = server.client();
    let started = Instant::now();
    for start in (0..rows).step_by(10_000) {
        let mut body = String::new();
        for i in start..(start + 10_000).min(rows) {
            let value = format!("{{\"n\":{},\"pad\":\"{}\"}}", i % 1000, "x".repeat(70));
            body.push_str(&json!({"op": "put", "key": key(i), "value": value}).to_string());
            body.push('\n');
        }
        client
            .send(
                "POST",
                "/v1/tables/t/batch?durability=memory",
                Some((body.as_bytes(), "application/x-ndjson")),
            )
            .unwrap();
    }
    println!(
        "loaded {rows} records in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// What one phase measured.
struct Phase {
    name: &'static str,
    reads: usize,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    background: u64,
    background_errors: u64,
    rss_before: f64,
    rss_peak: f64,
    rss_after: f64,
}

/// GET random keys one after another for `seconds` while `workers` clients
/// run `work` in a loop; `work` answers whether its request succeeded.
fn phase(
    server: &Server,
    name: &'static str,
    rows: u64,
    seconds: u64,
    workers: usize,
    work: fn(&Client) -> bool,
) -> Phase {
    let rss_before = server.rss_mib();
    let stop = Arc::new(AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let background: Vec<_> = (0..workers)
        .map(|_| {
            let (stop, done, failed) = (stop.clone(), done.clone(), failed.clone());
            let client = server.client();
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if work(&client) {
                        done.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    // Let the background work start before measuring.
    thread::sleep(Duration::from_millis(if workers > 0 { 500 } else { 0 }));
    let client = server.client();
    let mut latencies = Vec::new();
    let mut rss_peak = rss_before;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let started = Instant::now();
    let mut sampled = Instant::now();
    while started.elapsed() < Duration::from_secs(seconds) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let path = format!(
            "/v1/tables/t/keys/{}",
            key(state % rows).replace(':', "%3A")
        );
        let at = Instant::now();
        client.send("GET", &path, None).unwrap();
        latencies.push(at.elapsed().as_secs_f64() * 1000.0);
        if sampled.elapsed() > Duration::from_millis(100) {
            rss_peak = rss_peak.max(server.rss_mib());
            sampled = Instant::now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for worker in background {
        worker.join().unwrap();
    }
    rss_peak = rss_peak.max(server.rss_mib());
    thread::sleep(SETTLE);
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    Phase {
        name,
        reads: latencies.len(),
        p50_ms: at(0.50),
        p99_ms: at(0.99),
        max_ms: *latencies.last().unwrap(),
        background: done.load(Ordering::Relaxed),
        background_errors: failed.load(Ordering::Relaxed),
        rss_before,
        rss_peak,
        rss_after: server.rss_mib(),
    }
}

fn sql(client: &Client, body: serde_json::Value) -> bool {
    match client.send(
        "POST",
        "/v1/sql",
        Some((body.to_string().as_bytes(), "application/json")),
    ) {
        Ok(_) => true,
        Err(ClientError::Server { .. }) => false,
        Err(e) => panic!("{e}"),
    }
}

fn huge_values(client: &Client) -> bool {
    let big = "x".repeat(1_000_000);
    sql(
        client,
        json!({"sql": "SELECT ? || ? || ? || ? FROM t", "params": [big, big, big, big]}),
    )
}

fn huge_values_limited(client: &Client) -> bool {
    let big = "x".repeat(1_000_000);
    sql(
        client,
        json!({"sql": "SELECT ? || ? || ? || ? FROM t LIMIT 2", "params": [big, big, big, big]}),
    )
}

fn full_scan_group_by(client: &Client) -> bool {
    sql(
        client,
        json!({"sql": "SELECT length(value), count(*) FROM t GROUP BY 1"}),
    )
}

fn main() {
    if !common::benchmarking("make bench-isolation") {
        return;
    }
    let rows = env_number("EBB_BENCH_ROWS", 1_000_000);
    let seconds = env_number("EBB_BENCH_SECONDS", 5);
    let server = Server::start();
    load(&server, rows);
    // Let the write buffers reach the store before the idle phase.
    thread::sleep(Duration::from_secs(5));
    let huge = std::env::var("EBB_BENCH_SKIP_HUGE").is_err();
    let mut phases = vec![phase(&server, "idle", rows, seconds, 0, |_| true)];
    if huge {
        phases.push(phase(
            &server,
            "1 client: SELECT ?||?||?||? (4 x 1 MB params) LIMIT 2",
            rows,
            seconds,
            1,
            huge_values_limited,
        ));
        phases.push(phase(
            &server,
            "1 client: SELECT ?||?||?||? (4 x 1 MB params), no LIMIT (refused: max_page_bytes)",
            rows,
            seconds,
            1,
            huge_values,
        ));
    }
    phases.push(phase(
        &server,
        "4 clients: full-scan GROUP BY",
        rows,
        seconds,
        4,
        full_scan_group_by,
    ));
    println!(
        "\n{rows} records, {} cores; point GETs one at a time from one client, {seconds} s per phase\n",
        thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "| phase | GETs | p50 ms | p99 ms | max ms | background queries ok / refused | RSS MiB before / peak / {} s after |",
        SETTLE.as_secs()
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for p in &phases {
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.1} | {} / {} | {:.0} / {:.0} / {:.0} |",
            p.name,
            p.reads,
            p.p50_ms,
            p.p99_ms,
            p.max_ms,
            p.background,
            p.background_errors,
            p.rss_before,
            p.rss_peak,
            p.rss_after
        );
    }
}
