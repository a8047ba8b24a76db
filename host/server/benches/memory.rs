//! Memory per record, side by side with Redis: the resident memory a real
//! `ebb serve` process gains from N records of a 10-byte key and a 100-byte
//! value loaded over HTTP, and what Debian's `redis-server` gains from
//! `DEBUG POPULATE N key 100`, both read from `/proc/PID/status`.
//!
//! Run with `make bench-memory` (it installs `redis-server` when it can; the
//! bench measures ebb alone when `redis-server` is not on PATH).
//! `EBB_BENCH_RECORDS` sets N (default 1 000 000), `EBB_BENCH_SERVER` runs
//! another `ebb` binary (an older build, for a before/after). `ROUNDS`
//! (default 3) rounds each load a fresh ebb, then a fresh Redis; the
//! headline is the median round's ratio (one ebb load's resident size
//! moved by some 15 MB between runs of the same binary, BENCHMARKS.md).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use ebb_server::cli::client::{Client, ClientError};
use serde_json::json;

#[path = "../../benches/common/mod.rs"]
mod common;

/// Items per batch request (the server's default `--max-batch-items`).
const BATCH: u64 = 10_000;
/// Concurrent loading clients.
const CLIENTS: usize = 4;
/// Value length, as `DEBUG POPULATE N key 100` makes them.
const VALUE_BYTES: usize = 100;
/// The longest a process's memory may take to stop changing.
const SETTLE_BOUND: Duration = Duration::from_secs(60);
/// Gauges of the server's `/metrics` that break its memory down.
const BREAKDOWN: [&str; 3] = [
    "ebb_table_memory_bytes",
    "ebb_rocksdb_",
    "ebb_process_resident_bytes",
];

/// Key `i`, as `DEBUG POPULATE` names it.
fn key(i: u64) -> String {
    format!("key:{i}")
}

/// Value `i`, as `DEBUG POPULATE` makes it: `value:i` padded with NUL bytes.
fn value(i: u64) -> String {
    let mut v = format!("value:{i}");
    v.extend(std::iter::repeat_n('\0', VALUE_BYTES - v.len()));
    v
}

/// Resident memory of process `pid` in bytes (`VmRSS`), 0 once it is gone.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The resident memory of `pid` once it stops changing: sampled every
/// second until three samples in a row are within 1 MiB of the one before,
/// or [`SETTLE_BOUND`] passed (then the last sample, with a warning).
fn settled_rss(pid: u32, what: &str) -> u64 {
    let started = Instant::now();
    let mut last = rss(pid);
    let mut steady = 0;
    while steady < 3 {
        if started.elapsed() > SETTLE_BOUND {
            println!(
                "warning: {what}: RSS still changing after {} s",
                SETTLE_BOUND.as_secs()
            );
            break;
        }
        thread::sleep(Duration::from_secs(1));
        let now = rss(pid);
        steady = if now.abs_diff(last) < 1 << 20 {
            steady + 1
        } else {
            0
        };
        last = now;
    }
    println!(
        "{what}: {:.1} MiB (settled in {:.0} s)",
        mib(last),
        started.elapsed().as_secs_f64()
    );
    last
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// A child process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What one side measured.
struct Measured {
    baseline: u64,
    loaded: u64,
    load_seconds: f64,
}

// ---------------------------------------------------------------- ebb

fn start_ebb(dir: &std::path::Path) -> (Process, String) {
    let binary =
        std::env::var("EBB_BENCH_SERVER").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ebb").into());
    println!("ebb: {binary}");
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
    let url = line
        .trim()
        .strip_prefix("ebb listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_string();
    // Keep draining stdout so the server never blocks on a full pipe.
    thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    (Process(child), url)
}

/// Load `key(0..n)` into table `t` with `CLIENTS` concurrent clients,
/// `BATCH` items per request, default durability, retrying shed batches.
fn load_ebb(url: &str, n: u64) {
    let next = AtomicU64::new(0);
    thread::scope(|scope| {
        for _ in 0..CLIENTS {
            scope.spawn(|| {
                let client = Client::new(url, None);
                loop {
                    let start = next.fetch_add(BATCH, Ordering::Relaxed);
                    if start >= n {
                        break;
                    }
                    let mut body = String::new();
                    for i in start..(start + BATCH).min(n) {
                        body.push_str(&json!({"key": key(i), "value": value(i)}).to_string());
                        body.push('\n');
                    }
                    send_batch(&client, &body);
                }
            });
        }
    });
}

/// Send one batch until every item is applied: a shed request or item (503:
/// overloaded, backlog) is sent again after a pause; any other failure panics.
fn send_batch(client: &Client, body: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut lines: Vec<&str> = body.lines().collect();
    while !lines.is_empty() {
        let body = lines.join("\n");
        match client.send(
            "POST",
            "/v1/tables/t/batch",
            Some((body.as_bytes(), "application/x-ndjson")),
        ) {
            Ok(reply) => {
                let reply = reply.json().unwrap();
                let results = reply["results"].as_array().expect("batch results");
                assert_eq!(results.len(), lines.len(), "one result per item");
                let mut shed = Vec::new();
                for (line, result) in lines.iter().zip(results) {
                    match result["status"].as_u64() {
                        Some(200) => {}
                        Some(503) if Instant::now() < deadline => shed.push(*line),
                        _ => panic!("batch item failed: {result}"),
                    }
                }
                lines = shed;
            }
            Err(ClientError::Server { status: 503, .. }) if Instant::now() < deadline => {}
            Err(e) => panic!("batch failed: {e}"),
        }
        if !lines.is_empty() {
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Wait until no fragment has buffered writes left (bounded).
fn wait_flushed(client: &Client) {
    let deadline = Instant::now() + SETTLE_BOUND;
    loop {
        let health = client.send("GET", "/health", None).unwrap().json().unwrap();
        let backlog: u64 = health["fragments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["flush"]["backlog_records"].as_u64().unwrap_or(0))
            .sum();
        if backlog == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{backlog} records still buffered"
        );
        thread::sleep(Duration::from_millis(200));
    }
}

/// `SELECT count(*)` is `n` and a few values read back over GET are right.
fn check_ebb(client: &Client, n: u64) {
    let reply = client
        .send(
            "POST",
            "/v1/sql",
            Some((
                json!({"sql": "SELECT count(*) FROM t"})
                    .to_string()
                    .as_bytes(),
                "application/json",
            )),
        )
        .unwrap()
        .json()
        .unwrap();
    let count = &reply["rows"][0][0];
    let count = count
        .as_u64()
        .or_else(|| count.as_str().and_then(|s| s.parse().ok()));
    assert_eq!(count, Some(n), "SELECT count(*) answered {reply}");
    for i in [0, n / 3, n / 2, n - 1] {
        let path = format!("/v1/tables/t/keys/{}", key(i).replace(':', "%3A"));
        let reply = client.send("GET", &path, None).unwrap();
        assert_eq!(reply.body, value(i).as_bytes(), "value of {}", key(i));
    }
    println!("ebb: SELECT count(*) = {n}; 4 values read back over GET match");
}

/// The memory gauges of `/metrics`, if the server has them.
fn breakdown(client: &Client) -> Vec<String> {
    let Ok(reply) = client.send("GET", "/metrics", None) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&reply.body)
        .lines()
        .filter(|l| BREAKDOWN.iter().any(|p| l.starts_with(p)))
        .map(str::to_string)
        .collect()
}

fn measure_ebb(n: u64) -> (Measured, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let (server, url) = start_ebb(dir.path());
    let pid = server.0.id();
    let client = Client::new(&url, None);
    let baseline = settled_rss(pid, "ebb baseline");
    let started = Instant::now();
    load_ebb(&url, n);
    let load_seconds = started.elapsed().as_secs_f64();
    println!("ebb: loaded {n} records over HTTP in {load_seconds:.1} s");
    wait_flushed(&client);
    let loaded = settled_rss(pid, "ebb loaded");
    check_ebb(&client, n);
    let gauges = breakdown(&client);
    (
        Measured {
            baseline,
            loaded,
            load_seconds,
        },
        gauges,
    )
}

// ---------------------------------------------------------------- Redis

/// A minimal RESP2 client: commands as arrays of bulk strings, one reply each.
struct Resp {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

/// One RESP reply.
#[derive(Debug, PartialEq)]
enum Reply {
    Status(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Resp {
    fn connect(port: u16) -> std::io::Result<Self> {
        let writer = TcpStream::connect(("127.0.0.1", port))?;
        writer.set_read_timeout(Some(Duration::from_secs(600)))?;
        Ok(Self {
            reader: BufReader::new(writer.try_clone()?),
            writer,
        })
    }

    fn command(&mut self, args: &[&str]) -> std::io::Result<Reply> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&out)?;
        self.read()
    }

    fn read(&mut self) -> std::io::Result<Reply> {
        let bad =
            |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at_checked(1).ok_or_else(|| bad("empty line"))?;
        let number = || rest.parse::<i64>().map_err(|_| bad(line));
        Ok(match kind {
            "+" => Reply::Status(rest.to_string()),
            "-" => Reply::Error(rest.to_string()),
            ":" => Reply::Integer(number()?),
            "$" => match number()? {
                len if len < 0 => Reply::Bulk(None),
                len => {
                    let mut data = vec![0; len as usize + 2];
                    self.reader.read_exact(&mut data)?;
                    data.truncate(len as usize);
                    Reply::Bulk(Some(data))
                }
            },
            "*" => Reply::Array(
                (0..number()?.max(0))
                    .map(|_| self.read())
                    .collect::<std::io::Result<_>>()?,
            ),
            _ => return Err(bad(line)),
        })
    }
}

/// A loopback port nothing listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `redis-server`'s major version, from `redis-server --version`.
fn redis_major(binary: &str) -> Option<u32> {
    let out = Command::new(binary).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
    version.split('.').next()?.parse().ok()
}

fn measure_redis(n: u64) -> Option<(Measured, String)> {
    let binary = "redis-server";
    let Some(major) = redis_major(binary) else {
        println!(
            "\nredis-server is not on PATH: measuring ebb alone (`make bench-memory` installs it)"
        );
        return None;
    };
    let version = Command::new(binary)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("\nredis: {version}");
    let version = version
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .map_or("Redis".to_string(), |v| format!("Redis {v}"));
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut command = Command::new(binary);
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .args(["--loglevel", "warning", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    if major >= 7 {
        // DEBUG is refused by default since Redis 7.
        command.args(["--enable-debug-command", "local"]);
    }
    let server = Process(command.spawn().unwrap());
    let pid = server.0.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut redis = loop {
        if let Ok(mut c) = Resp::connect(port)
            && c.command(&["PING"]).ok() == Some(Reply::Status("PONG".into()))
        {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "redis-server did not answer PING on port {port}"
        );
        thread::sleep(Duration::from_millis(50));
    };
    for setting in ["save", "appendonly"] {
        let reply = redis.command(&["CONFIG", "GET", setting]).unwrap();
        let Reply::Array(pair) = reply else {
            panic!("CONFIG GET {setting}: {reply:?}")
        };
        let Some(Reply::Bulk(Some(value))) = pair.get(1) else {
            panic!("CONFIG GET {setting}: {pair:?}")
        };
        println!("redis: {setting} '{}'", String::from_utf8_lossy(value));
    }
    let baseline = settled_rss(pid, "redis baseline");
    let started = Instant::now();
    let populated = redis
        .command(&[
            "DEBUG",
            "POPULATE",
            &n.to_string(),
            "key",
            &VALUE_BYTES.to_string(),
        ])
        .unwrap();
    assert_eq!(populated, Reply::Status("OK".into()), "DEBUG POPULATE");
    let load_seconds = started.elapsed().as_secs_f64();
    println!("redis: DEBUG POPULATE {n} key {VALUE_BYTES} in {load_seconds:.1} s");
    assert_eq!(
        redis.command(&["DBSIZE"]).unwrap(),
        Reply::Integer(n as i64),
        "DBSIZE"
    );
    for i in [0, n - 1] {
        let got = redis.command(&["GET", &key(i)]).unwrap();
        assert_eq!(got, Reply::Bulk(Some(value(i).into_bytes())), "{}", key(i));
    }
    println!("redis: DBSIZE = {n}; values match ebb's byte for byte");
    let loaded = settled_rss(pid, "redis loaded");
    Some((
        Measured {
            baseline,
            loaded,
            load_seconds,
        },
        version,
    ))
}

// ---------------------------------------------------------------- report

fn main() {
    if !common::benchmarking("make bench-memory") {
        return;
    }
    println!(
        "commit {}, load average at start: {}",
        common::commit(),
        common::load_average()
    );
    let n: u64 = common::env_or("EBB_BENCH_RECORDS", 1_000_000);
    assert!(n > 0, "EBB_BENCH_RECORDS must be positive");
    let rounds: usize = common::env_or("ROUNDS", 3);
    assert!(rounds > 0, "ROUNDS must be positive");
    // (ebb, Redis and its version), one fresh process of each per round.
    let mut measured = Vec::new();
    let mut gauges = Vec::new();
    for round in 1..=rounds {
        println!("== round {round} of {rounds}");
        let (ebb, ebb_gauges) = measure_ebb(n);
        gauges = ebb_gauges;
        measured.push((ebb, measure_redis(n)));
    }

    let machine_load = common::load_average();
    let cores = thread::available_parallelism().map_or(0, |c| c.get());
    println!(
        "\n{n} records: key `key:0`..`key:{}` (up to {} bytes), {VALUE_BYTES}-byte value, no TTL.",
        n - 1,
        key(n - 1).len()
    );
    println!(
        "Both hold every record in memory, one process each, measured one after the other on {cores} cores (load average {machine_load}), {rounds} rounds of a fresh ebb then a fresh Redis; \
         RSS from /proc/PID/status (VmRSS), read once it stopped changing."
    );
    println!(
        "ebb: `ebb serve`, loaded over HTTP batches of {BATCH} by {CLIENTS} clients, default durability (wal), all flushed."
    );
    let redis_version = measured
        .iter()
        .find_map(|(_, redis)| redis.as_ref().map(|(_, version)| version.clone()));
    if redis_version.is_some() {
        println!(
            "Redis: `DEBUG POPULATE {n} key {VALUE_BYTES}`, no persistence (--save '' --appendonly no)."
        );
    }
    println!();
    println!(
        "| round | server | load s | baseline MiB | loaded MiB | (loaded - baseline) / N bytes | loaded / N bytes |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let per = |m: &Measured| m.loaded.saturating_sub(m.baseline) as f64 / n as f64;
    let row = |round: usize, name: &str, m: &Measured| {
        println!(
            "| {round} | {name} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} |",
            m.load_seconds,
            mib(m.baseline),
            mib(m.loaded),
            per(m),
            m.loaded as f64 / n as f64
        );
    };
    let mut ratios = Vec::new();
    for (round, (ebb, redis)) in measured.iter().enumerate() {
        row(round + 1, "ebb", ebb);
        if let Some((redis, version)) = redis {
            row(round + 1, version, redis);
            ratios.push(per(ebb) / per(redis));
        }
    }
    if let Some(version) = redis_version {
        let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        ratios.sort_by(f64::total_cmp);
        // The lower middle of an even count, as the other benches take it.
        let median = ratios[(ratios.len() - 1) / 2];
        println!(
            "\nebb / Redis per record over baseline: {median:.2}x, the median of {} rounds ({})",
            ratios.len(),
            shown.join(", ")
        );
        common::headline(
            "memory per record at or below Redis",
            &format!(
                "{version}, {n} records (ebb bytes per record over baseline / Redis's, median of {} interleaved rounds)",
                ratios.len()
            ),
            median,
            common::Goal::AtMost(1.0),
        );
    }
    if gauges.is_empty() {
        println!(
            "\nebb's /metrics has no memory breakdown gauges yet ({})",
            BREAKDOWN.join(", ")
        );
    } else {
        println!("\nebb's memory breakdown (/metrics):");
        for line in gauges {
            println!("  {line}");
        }
    }
}
