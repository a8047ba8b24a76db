//! Expiry-handler lag and throughput on RocksDB, side by side in one run:
//! handler lag at a steady 1 000 and 10 000 expirations/s while writes go
//! on, and the drain rate of a burst of preloaded expirations. Every table
//! is bound to `archive.copy`, which copies each expired record into
//! `<table>_archive`.
//!
//! Each record's value is its deadline (Unix ms, decimal text), so the lag
//! of every record is exact: the `hlc_ms` of its archived copy minus that
//! deadline. Run with `make bench-expiry` (needs `make plugins`);
//! `EBB_BENCH_SECONDS`, `EBB_BENCH_PRELOAD` and `EBB_BENCH_WAIT_SECONDS`
//! shorten or lengthen the phases.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{self, env_or, wasm};
use bytes::Bytes;
use ebb_host::{BatchOp, BindRequest, Durability, Expiry, Node, NodeConfig, Table};
use tokio::task::JoinSet;

/// How far ahead of its write a steady-phase record expires.
const LEAD_MS: u64 = 1000;
/// The steady writer's period: `rate / 100` records per tick.
const TICK_MS: u64 = 10;
/// The window the burst phase's deadlines are spread over.
const BURST_WINDOW_MS: u64 = 1000;
/// Records per batch when preloading the burst phase.
const PRELOAD_BATCH: usize = 10_000;
/// How often the drain check looks at the outbox and the archive.
const POLL: Duration = Duration::from_millis(10);

pub fn main() {
    if !common::benchmarking("make bench-expiry") {
        return;
    }
    let seconds: u64 = env_or("EBB_BENCH_SECONDS", 10);
    let preload: usize = env_or("EBB_BENCH_PRELOAD", 200_000);
    let wait = Duration::from_secs(env_or("EBB_BENCH_WAIT_SECONDS", 60));
    let dir = tempfile::tempdir().unwrap();
    let runtime = common::runtime();
    let node = runtime
        .block_on(Node::open(NodeConfig::new(dir.path().join("ebb"))))
        .unwrap();
    let archive = wasm("ebb_plugin_archive");
    let installer = node.clone();
    runtime
        .block_on(
            runtime
                .spawn_blocking(move || installer.install_plugin("archive", &archive).map(|_| ())),
        )
        .unwrap()
        .unwrap();

    let mut phases = Vec::new();
    for (table, rate) in [("s1k", 1_000), ("s10k", 10_000)] {
        eprintln!("steady {rate}/s for {seconds} s on {table}...");
        phases.push(runtime.block_on(steady(&node, table, rate, seconds, wait)));
    }
    eprintln!("burst of {preload} expirations on bulk...");
    phases.push(runtime.block_on(burst(&node, "bulk", preload, wait)));

    print_results(&node, seconds, preload, wait, &phases);
    runtime.block_on(node.shutdown()).unwrap();
}

/// What one phase measured.
struct Phase {
    label: String,
    /// Records written with a deadline (each must expire and be archived).
    scheduled: usize,
    /// Of those, found in the archive table after the wait.
    archived: usize,
    /// Exact lag of every archived record in ms, sorted.
    lags: Vec<i64>,
    /// From the first deadline until the outbox was empty and every record
    /// archived; `None` when that did not happen within the wait.
    drain_ms: Option<u64>,
    dead_letters: u64,
    failed_calls: u64,
    /// The node's own lag histogram (bucket upper bound), for comparison.
    status_p99_ms: Option<f64>,
    /// How the writes went.
    writes: String,
}

/// Write `rate / 100` records every 10 ms for `seconds`, each expiring 1 s
/// after its tick, so expirations run at `rate` while writes go on. Each
/// tick's batch is its own task so a slow write does not delay the next
/// tick, as with independent clients.
async fn steady(node: &Node, table: &str, rate: u64, seconds: u64, wait: Duration) -> Phase {
    bind_archive(node, table).await;
    let handle = node.table(table).unwrap();
    let per_tick = rate * TICK_MS / 1000;
    let ticks = seconds * 1000 / TICK_MS;
    let first_deadline = unix_ms() + LEAD_MS;
    let started = Instant::now();
    let mut interval = tokio::time::interval(Duration::from_millis(TICK_MS));
    let mut writes = JoinSet::new();
    let mut max_tick_late = Duration::ZERO;
    for tick in 0..ticks {
        interval.tick().await;
        let planned = Duration::from_millis(tick * TICK_MS);
        max_tick_late = max_tick_late.max(started.elapsed().saturating_sub(planned));
        let tick_deadline = first_deadline + tick * TICK_MS;
        let ops = (0..per_tick)
            .map(|i| {
                // Spread the tick's deadlines over its 10 ms.
                let deadline = tick_deadline + i * TICK_MS / per_tick;
                put((tick * per_tick + i) as usize, deadline)
            })
            .collect();
        writes.spawn(write(handle.clone(), ops));
    }
    let mut max_write = Duration::ZERO;
    let mut late_writes = 0;
    while let Some(written) = writes.join_next().await {
        let (took, late) = written.unwrap();
        max_write = max_write.max(took);
        late_writes += late;
    }
    let scheduled = (ticks * per_tick) as usize;
    let last_deadline = first_deadline + ticks * TICK_MS;
    let writes = format!(
        "{ticks} batches of {per_tick}, slowest {:.1} ms, writer at most {:.1} ms behind, {late_writes} acknowledged after their deadline",
        max_write.as_secs_f64() * 1000.0,
        max_tick_late.as_secs_f64() * 1000.0
    );
    let schedule = Schedule {
        label: format!("steady {rate}/s"),
        scheduled,
        first_deadline,
        last_deadline,
        writes,
    };
    finish(node, table, schedule, wait).await
}

/// Preload `records` whose deadlines are spread over one second that starts
/// after the load, then measure how fast the handler drains them.
async fn burst(node: &Node, table: &str, records: usize, wait: Duration) -> Phase {
    bind_archive(node, table).await;
    let handle = node.table(table).unwrap();
    // Room for the load (a few µs per record) before the first deadline.
    let first_deadline = unix_ms() + 2000 + records as u64 / 50;
    let last_deadline = first_deadline + BURST_WINDOW_MS;
    let started = Instant::now();
    let mut late_writes = 0;
    for start in (0..records).step_by(PRELOAD_BATCH) {
        let ops = (start..(start + PRELOAD_BATCH).min(records))
            .map(|n| {
                put(
                    n,
                    first_deadline + n as u64 * BURST_WINDOW_MS / records as u64,
                )
            })
            .collect();
        late_writes += write(handle.clone(), ops).await.1;
    }
    let loaded = started.elapsed();
    let overran = unix_ms().saturating_sub(first_deadline);
    let writes = format!(
        "preloaded in {} ms ({:.0} records/s), {late_writes} acknowledged after their deadline{}",
        loaded.as_millis(),
        records as f64 / loaded.as_secs_f64(),
        if overran > 0 {
            format!("; THE LOAD OVERRAN THE FIRST DEADLINE BY {overran} ms")
        } else {
            String::new()
        }
    );
    if let Some(early) = first_deadline.checked_sub(unix_ms()) {
        tokio::time::sleep(Duration::from_millis(early)).await;
    }
    let schedule = Schedule {
        label: format!("burst of {records} in 1 s"),
        scheduled: records,
        first_deadline,
        last_deadline,
        writes,
    };
    finish(node, table, schedule, wait).await
}

/// What a phase wrote: keys `0..scheduled`, deadlines in
/// `first_deadline..last_deadline`.
struct Schedule {
    label: String,
    scheduled: usize,
    first_deadline: u64,
    last_deadline: u64,
    writes: String,
}

/// Wait for the drain (up to `wait` past the last deadline), then read
/// every archived copy.
async fn finish(node: &Node, table: &str, schedule: Schedule, wait: Duration) -> Phase {
    let give_up = schedule.last_deadline + wait.as_millis() as u64;
    let drained_at = drained(node, table, schedule.scheduled, give_up).await;
    let (archived, lags) = archived_lags(node, table, schedule.scheduled).await;
    let status = node.expiry_status(table).await.unwrap();
    Phase {
        label: schedule.label,
        scheduled: schedule.scheduled,
        archived,
        lags,
        drain_ms: drained_at.map(|at| at.saturating_sub(schedule.first_deadline)),
        dead_letters: status.dead_letters,
        failed_calls: status.failed_calls,
        status_p99_ms: status.lag_p99_ms,
        writes: schedule.writes,
    }
}

/// The Unix ms at which `table`'s outbox was empty and its archive held
/// `expected` records, or `None` if that had not happened by `give_up`.
/// The outbox is asked only once the archive is complete: a status request
/// is served by the dispatcher, and asking it every poll would slow what is
/// measured.
async fn drained(node: &Node, table: &str, expected: usize, give_up: u64) -> Option<u64> {
    let archive = format!("{table}_archive");
    loop {
        let archived = node
            .tables()
            .iter()
            .find(|info| info.name.as_str() == archive)
            .map_or(0, |info| info.live_records);
        if archived >= expected && node.expiry_status(table).await.unwrap().queue.pending == 0 {
            return Some(unix_ms());
        }
        let now = unix_ms();
        if now > give_up {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// How many of keys `0..scheduled` are in `table`'s archive, and the sorted
/// lag of each: its copy's `hlc_ms` minus the deadline held in its value.
async fn archived_lags(node: &Node, table: &str, scheduled: usize) -> (usize, Vec<i64>) {
    let archive = node.table(&format!("{table}_archive")).unwrap();
    let mut lags = Vec::with_capacity(scheduled);
    for n in 0..scheduled {
        let Some(entry) = archive.get(&key(n)).await.unwrap() else {
            continue;
        };
        let deadline: u64 = std::str::from_utf8(&entry.value)
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or_else(|| panic!("{}: value is not a deadline", key(n)));
        lags.push(entry.version.hlc_ms as i64 - deadline as i64);
    }
    lags.sort_unstable();
    (lags.len(), lags)
}

async fn bind_archive(node: &Node, table: &str) {
    node.bind_expiry(
        table,
        BindRequest {
            plugin: "archive".into(),
            function: "copy".into(),
            max_batch: None,
            max_attempts: None,
            config: None,
            prefix: None,
        },
    )
    .await
    .unwrap();
}

/// Write `ops` durably; returns how long that took and how many records
/// were acknowledged after their own deadline (their lag then includes the
/// write).
async fn write(table: Table, ops: Vec<BatchOp>) -> (Duration, usize) {
    let deadlines: Vec<u64> = ops
        .iter()
        .map(|op| match op {
            BatchOp::Put {
                expiry: Expiry::At(deadline),
                ..
            } => *deadline,
            _ => unreachable!("the bench only writes puts with a deadline"),
        })
        .collect();
    let started = Instant::now();
    for outcome in table.batch(ops, Durability::Wal).await {
        outcome.unwrap();
    }
    let acknowledged = unix_ms();
    let late = deadlines.iter().filter(|&&d| d < acknowledged).count();
    (started.elapsed(), late)
}

fn put(n: usize, deadline: u64) -> BatchOp {
    BatchOp::Put {
        key: key(n),
        value: Bytes::from(deadline.to_string()),
        expiry: Expiry::At(deadline),
    }
}

fn key(n: usize) -> String {
    format!("k{n:09}")
}

fn print_results(node: &Node, seconds: u64, preload: usize, wait: Duration, phases: &[Phase]) {
    println!();
    println!(
        "Expiry handler `archive.copy`, RocksDB, {} fragments, {} cores, writes `wal`",
        node.fragment_count(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "`EBB_BENCH_SECONDS={seconds} EBB_BENCH_PRELOAD={preload} EBB_BENCH_WAIT_SECONDS={} cargo bench -p ebb-host --bench engine -- expiry`",
        wait.as_secs()
    );
    println!();
    println!(
        "| phase | expirations | archived | lost | lag p50 ms | lag p99 ms | lag max ms | drained after s | handled/s | dead letters | failed calls |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for phase in phases {
        let lag = |q: f64| percentile(&phase.lags, q).map_or("-".into(), |v| v.to_string());
        let (drain, rate) = match phase.drain_ms {
            Some(ms) => (
                format!("{:.2}", ms as f64 / 1000.0),
                format!("{:.0}", phase.archived as f64 * 1000.0 / ms.max(1) as f64),
            ),
            None => ("not drained".into(), "-".into()),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {drain} | {rate} | {} | {} |",
            phase.label,
            phase.scheduled,
            phase.archived,
            phase.scheduled - phase.archived,
            lag(0.5),
            lag(0.99),
            lag(1.0),
            phase.dead_letters,
            phase.failed_calls,
        );
    }
    println!();
    println!(
        "lag: `hlc_ms` of the archived copy minus the record's deadline, every record; \
         drained after: first deadline until the outbox is empty and every record archived \
         (polled every {} ms); handled/s: archived / drained after. A burst drained in \
         about its {} ms window means the handler kept up with the arrivals: its handled/s \
         is then a lower bound on throughput.",
        POLL.as_millis(),
        BURST_WINDOW_MS
    );
    for phase in phases {
        println!(
            "- {}: {}; node's own lag p99 {}",
            phase.label,
            phase.writes,
            phase
                .status_p99_ms
                .map_or("-".into(), |ms| format!("≤ {ms:.0} ms")),
        );
    }
}

/// Nearest-rank percentile of sorted `values`.
fn percentile(values: &[i64], q: f64) -> Option<i64> {
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len().max(1));
    values.get(rank - 1).copied()
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}
