//! Expiry handlers and queries share the plugin threads (`--plugin-threads`)
//! with a guaranteed share each: a heavy query load does not hold back
//! handler deliveries, and a storm of slow handlers does not hold back a
//! query. Each test builds the load first, checks it is in full swing,
//! then waits for the other kind of work with a deadline.
//!
//! Handlers are the bundled `archive` plugin and the test plugin `flaky`
//! (`slow…` values spin before they are archived); queries call the
//! bundled `json` plugin. All are built by `make plugins`.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ebb_host::store::MemoryStore;
use ebb_host::{
    BatchOp, BindRequest, Durability, Expiry, ExpiryConfig, Node, NodeConfig, QueryBudgets,
    QueryRequest,
};

/// The bound on waiting for the other kind of work (generous: the tests
/// tell waiting for a thread from waiting behind the load by counting).
const BOUND: Duration = Duration::from_secs(10);

/// The tests measure each other's kind of load: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Threads of the node: the smallest count with a thread reserved for each
/// kind of work, the way a two-core machine runs by default.
const THREADS: usize = 2;

fn module(name: &str) -> Vec<u8> {
    let path = common::wasm(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build the plugins with `make plugins`",
            path.display()
        )
    })
}

/// A node with `fragments` fragments, [`THREADS`] plugin threads, pages of
/// `page` records, the `json`, `archive` and `flaky` plugins, and `rows`
/// JSON documents in `requests`.
async fn node(fragments: u32, page: usize, rows: usize) -> Node {
    let mut config = NodeConfig::new("unused")
        .fragments(fragments)
        .query_budgets(QueryBudgets {
            page_visit_budget: page,
            max_page_visit_budget: page,
            ..QueryBudgets::default()
        })
        .expiry(ExpiryConfig {
            backoff_base: Duration::from_millis(50),
            backoff_max: Duration::from_secs(1),
            ..ExpiryConfig::default()
        });
    config.plugins.threads = THREADS;
    // Deadlines far off: the tests measure waiting for a thread, and a
    // machine busy with other work must not fail a call meanwhile.
    config.plugins.query_deadline = Duration::from_secs(10);
    config.plugins.expiry_deadline = Duration::from_secs(10);
    let node = Node::open_with_store(config, Arc::new(MemoryStore::new()))
        .await
        .unwrap();
    for (name, file) in [
        ("json", "ebb_plugin_json"),
        ("archive", "ebb_plugin_archive"),
        ("flaky", "ebb_test_flaky"),
    ] {
        let (node, bytes) = (node.clone(), module(file));
        tokio::task::spawn_blocking(move || node.install_plugin(name, &bytes).map(|_| ()))
            .await
            .unwrap()
            .unwrap();
    }
    let table = node.table("requests").unwrap();
    let items: Vec<BatchOp> = (0..rows)
        .map(|i| BatchOp::Put {
            key: format!("r{i:06}"),
            value: format!(
                r#"{{"user": "u{}", "ms": {}, "path": "/p/{i}"}}"#,
                i % 17,
                i % 1000
            )
            .into(),
            expiry: Expiry::Never,
        })
        .collect();
    for chunk in items.chunks(5000) {
        for outcome in table.batch(chunk.to_vec(), Durability::Memory).await {
            outcome.unwrap();
        }
    }
    node
}

/// A query over every document of `requests` that calls the json plugin
/// on each: one page per `page` records of each fragment.
const HEAVY: &str = "SELECT count(*) FROM requests WHERE json.get(value, '$.user') = 'u3' AND json.get_int(value, '$.ms') >= 0";

async fn count(node: &Node) -> i64 {
    let output = node
        .query(QueryRequest {
            sql: Some(HEAVY.into()),
            ..QueryRequest::default()
        })
        .await
        .unwrap();
    match output.rows[0][0] {
        ebb_query::Value::Int(n) => n,
        ref other => panic!("count(*) answered {other:?}"),
    }
}

async fn bind(node: &Node, table: &str, plugin: &str, max_batch: u32) {
    node.bind_expiry(
        table,
        BindRequest {
            plugin: plugin.into(),
            function: "copy".into(),
            max_batch: Some(max_batch),
            max_attempts: Some(10),
            config: None,
            prefix: None,
        },
    )
    .await
    .unwrap();
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Put `count` records into `table` with values `value_i`, all expiring at `at`.
async fn put_expiring(node: &Node, table: &str, count: usize, value: &str, at: u64) {
    let ops = (0..count)
        .map(|i| BatchOp::Put {
            key: format!("k{i:05}"),
            value: format!("{value}{i}").into(),
            expiry: Expiry::At(at),
        })
        .collect();
    for outcome in node.table(table).unwrap().batch(ops, Durability::Wal).await {
        outcome.unwrap();
    }
}

fn live(node: &Node, table: &str) -> usize {
    node.tables()
        .into_iter()
        .find(|t| t.name.as_str() == table)
        .map_or(0, |t| t.live_records)
}

/// Wait until `check` holds, polling every 5 ms; panics with `what` after `timeout`.
async fn until<F: std::future::Future<Output = bool>>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> F,
) {
    let started = Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heavy_query_load_does_not_hold_back_handler_deliveries() {
    let _serial = SERIAL.lock().await;
    // Eight fragments, so each query queues eight pages at once (each
    // calling the json plugin twice per record), and many more queries at
    // once than threads: a handler call waiting its turn behind the queued
    // pages would see about every running query finish first.
    let node = node(8, 50_000, 100_000).await;
    let expected = count(&node).await;
    assert!(expected > 0);
    // The longest of three runs alone: a query's eight pages on the two
    // threads, so at least one page.
    let mut one_query = Duration::ZERO;
    for _ in 0..3 {
        let started = Instant::now();
        assert_eq!(count(&node).await, expected);
        one_query = one_query.max(started.elapsed());
    }
    bind(&node, "sessions", "archive", 256).await;

    const CLIENTS: usize = 32;
    let stop = Arc::new(AtomicBool::new(false));
    let (running, done) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let load: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (node, stop) = (node.clone(), stop.clone());
            let (running, done) = (running.clone(), done.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    running.fetch_add(1, Ordering::SeqCst);
                    assert_eq!(count(&node).await, expected);
                    running.fetch_sub(1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    until(
        Duration::from_secs(60),
        "the query load to start",
        || async {
            done.load(Ordering::SeqCst) >= CLIENTS && running.load(Ordering::SeqCst) == CLIENTS
        },
    )
    .await;

    let deadline = now_ms() + 100;
    put_expiring(&node, "sessions", 20, "session-", deadline).await;
    tokio::time::sleep(Duration::from_millis(deadline.saturating_sub(now_ms()))).await;
    let done_before = done.load(Ordering::SeqCst);
    until(
        BOUND,
        "20 sessions archived while the query load runs",
        || async { live(&node, "sessions_archive") == 20 },
    )
    .await;
    let lag = Duration::from_millis(now_ms().saturating_sub(deadline));
    let done_meanwhile = done.load(Ordering::SeqCst) - done_before;
    let in_flight = running.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    for client in load {
        client.await.unwrap();
    }
    eprintln!(
        "one query alone {one_query:?}; archived {lag:?} after the deadline; {done_meanwhile} queries finished meanwhile, {in_flight} in flight"
    );
    assert_eq!(in_flight, CLIENTS, "the load was in full swing throughout");
    // The handler call waits for at most one running page; queued behind
    // the load's pages it would wait for about CLIENTS / THREADS queries'
    // worth of them (over a second here).
    let most = one_query + Duration::from_millis(500);
    assert!(
        lag <= most,
        "the handlers ran {lag:?} after the deadline, more than {most:?} (a query alone took {one_query:?})"
    );
    // The archive's writes commit before the batch is settled: the count
    // is read once the outbox is empty.
    until(BOUND, "an empty outbox", || async {
        node.expiry_status("sessions").await.unwrap().queue.pending == 0
    })
    .await;
    let status = node.expiry_status("sessions").await.unwrap();
    assert_eq!((status.handled, status.failed_calls), (20, 0));
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_slow_handlers_does_not_hold_back_a_query() {
    let _serial = SERIAL.lock().await;
    // Small pages: the query needs many of them, one after the other per
    // fragment, so it would wait for a handler call before nearly every one
    // if handler calls could take every thread.
    let node = node(2, 250, 10_000).await;
    let started = Instant::now();
    let expected = count(&node).await;
    let one_query = started.elapsed();

    // Four handler calls at once (the default concurrency, more than the
    // threads), each spinning through a batch of slow events for a good
    // part of its deadline.
    bind(&node, "jobs", "flaky", 8).await;
    put_expiring(&node, "jobs", 400, "slow-", now_ms()).await;
    until(BOUND, "the handler storm to start", || async {
        node.expiry_status("jobs")
            .await
            .is_ok_and(|s| s.calls >= 3 && s.queue.in_flight > 0)
    })
    .await;

    let calls_before = node.expiry_status("jobs").await.unwrap().calls;
    let started = Instant::now();
    let query = tokio::time::timeout(BOUND, count(&node)).await;
    let took = started.elapsed();
    let status = node.expiry_status("jobs").await.unwrap();
    let calls_meanwhile = status.calls - calls_before;
    eprintln!(
        "one query alone {one_query:?}; {took:?} in the storm; {calls_meanwhile} handler calls meanwhile; {} events still pending",
        status.queue.pending
    );
    assert_eq!(
        query.unwrap_or_else(|_| panic!(
            "the query did not finish within {BOUND:?} during the storm"
        )),
        expected
    );
    // Had handler calls taken every thread, the query's forty pages would
    // have waited for one every few pages.
    assert!(
        calls_meanwhile < 3,
        "the query waited through {calls_meanwhile} handler calls"
    );
    assert!(
        status.queue.pending > 0,
        "the storm was still going when the query finished"
    );
    assert_eq!(status.dead_letters, 0);
    node.unbind_expiry("jobs", true).await.unwrap();
    node.shutdown().await.unwrap();
}
