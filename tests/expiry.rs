//! Durable expiry handlers end to end: every expiry handled, retries with
//! growing delays, dead letters and redrive, poison events, unbinding,
//! refusing to delete a bound plugin, and SIGKILL in the middle of delivery.
//! The handler limits, `discard_pending` and replacing a bound plugin are in
//! tests/expiry_limits.rs; the helpers in tests/common/expiry.rs.
//!
//! Handlers are the bundled `archive` plugin and the test plugin `flaky`
//! (tests/plugins/flaky), both built by `make plugins`. Every wait polls a
//! condition with a deadline; the one fixed wait watches that nothing is
//! delivered while a table is unbound, and says why it is long enough.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ebb_host::store::MemoryStore;
use ebb_host::{ExpiryConfig, Node, NodeConfig};

use common::expiry::{
    bind, bind_function, eventually, install, last_attempt, live, module, node, now_ms,
    put_expiring, put_in, value,
};
use common::{Server, call, ebb_bin, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_expiries_are_each_handled_and_the_outbox_drains() {
    let node = node(4).await;
    install(&node, "archive", "ebb_plugin_archive").await;
    bind(&node, "sessions", "archive", 256, 10).await;
    let start = now_ms() + 300;
    let items: Vec<(String, String, u64)> = (0..10_000u64)
        .map(|i| (format!("s{i:05}"), format!("user-{i}"), start + i * 3 / 10))
        .collect();
    put_expiring(&node, "sessions", items).await;
    eventually(
        Duration::from_secs(60),
        "10 000 archived sessions",
        || async { live(&node, "sessions_archive").await == 10_000 },
    )
    .await;
    eventually(Duration::from_secs(10), "an empty outbox", || async {
        node.expiry_status("sessions").await.unwrap().queue.pending == 0
    })
    .await;
    let status = node.expiry_status("sessions").await.unwrap();
    assert_eq!(status.dead_letters, 0);
    assert_eq!(status.failed_calls, 0);
    assert!(status.handled >= 10_000, "handled {}", status.handled);
    assert!(status.lag_p99_ms.is_some());
    assert_eq!(live(&node, "sessions").await, 0);
    let archive = node.table("sessions_archive").unwrap();
    for i in (0..10_000).step_by(997) {
        let entry = archive.get(&format!("s{i:05}")).await.unwrap().unwrap();
        assert_eq!(entry.value, format!("user-{i}"));
        assert_eq!(entry.expires_at_ms, None, "archived without a TTL");
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_config_reaches_the_handler_and_archive_follows_it() {
    let node = node(2).await;
    install(&node, "archive", "ebb_plugin_archive").await;
    let bind = |config: serde_json::Value| {
        let node = node.clone();
        async move {
            node.bind_expiry(
                "sessions",
                ebb_host::BindRequest {
                    plugin: "archive".into(),
                    function: "copy".into(),
                    config: Some(config),
                    ..ebb_host::BindRequest::default()
                },
            )
            .await
        }
    };
    let binding = bind(serde_json::json!({"table": "old_sessions", "ttl_ms": 600000}))
        .await
        .unwrap();
    assert_eq!(
        binding.config.as_deref(),
        Some(r#"{"table":"old_sessions","ttl_ms":600000}"#)
    );
    put_in(&node, "sessions", "s1", "alice", 100).await;
    eventually(Duration::from_secs(10), "s1 in old_sessions", || async {
        value(&node, "old_sessions", "s1").await.as_deref() == Some("alice")
    })
    .await;
    let copy = node
        .table("old_sessions")
        .unwrap()
        .get("s1")
        .await
        .unwrap()
        .unwrap();
    assert!(copy.expires_at_ms.is_some(), "the config's ttl_ms applies");
    assert_eq!(
        live(&node, "sessions_archive").await,
        0,
        "not the default table"
    );

    // A config the handler refuses fails its calls visibly, losing nothing.
    bind(serde_json::json!({"tabel": "typo"})).await.unwrap();
    put_in(&node, "sessions", "s2", "bob", 50).await;
    eventually(Duration::from_secs(10), "a failed call", || async {
        node.expiry_status("sessions").await.unwrap().failed_calls > 0
    })
    .await;
    let status = node.expiry_status("sessions").await.unwrap();
    let error = status.last_error.unwrap_or_default();
    assert!(error.contains("bad binding config"), "{error}");
    // Fixing the binding delivers the waiting event.
    bind(serde_json::json!({"table": "old_sessions"}))
        .await
        .unwrap();
    eventually(Duration::from_secs(30), "s2 in old_sessions", || async {
        value(&node, "old_sessions", "s2").await.as_deref() == Some("bob")
    })
    .await;

    let too_big = serde_json::Value::String("x".repeat(70_000));
    let error = bind(too_big).await.unwrap_err().to_string();
    assert!(
        error.contains("config") && error.contains("65536"),
        "{error}"
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_reads_a_config_record_and_skips_event_ids_it_recorded() {
    let node = node(2).await;
    install(&node, "handler", "ebb_test_flaky").await;
    bind_function(&node, "jobs", "handler", "dedupe", 256, 5).await;
    node.table("jobs_config")
        .unwrap()
        .put("prefix", "cfg:", ebb_host::PutOptions::default())
        .await
        .unwrap();
    let at = now_ms() + 150;
    put_expiring(
        &node,
        "jobs",
        vec![
            ("a".into(), "one".into(), at),
            ("b".into(), "twice".into(), at),
        ],
    )
    .await;
    // b is delivered twice: the second delivery finds its id recorded.
    eventually(Duration::from_secs(10), "b's repeat skipped", || async {
        value(&node, "jobs_dupes", "b").await.as_deref() == Some("skipped")
    })
    .await;
    assert_eq!(
        value(&node, "jobs_out", "a").await.as_deref(),
        Some("cfg:one")
    );
    assert_eq!(
        value(&node, "jobs_out", "b").await.as_deref(),
        Some("cfg:twice")
    );
    assert_eq!(value(&node, "jobs_dupes", "a").await, None, "a came once");
    assert_eq!(live(&node, "jobs_seen").await, 2);
    let status = node.expiry_status("jobs").await.unwrap();
    assert_eq!((status.failed_calls, status.dead_letters), (0, 0));

    // From SQL, ebb.get is refused: functions stay pure.
    let refused = node
        .query(ebb_host::QueryRequest {
            sql: Some("SELECT handler.peek('jobs_config', 'prefix') FROM jobs_config".into()),
            ..Default::default()
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("not to SQL functions"), "{refused}");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_actions_are_judged_and_a_failed_one_is_skipped_not_a_failure() {
    let node = node(4).await;
    install(&node, "handler", "ebb_test_flaky").await;
    bind_function(&node, "jobs", "handler", "first", 256, 3).await;
    let put = |table: &'static str, key: &'static str, value: String| {
        let node = node.clone();
        async move {
            node.table(table)
                .unwrap()
                .put(key, value, ebb_host::PutOptions::default())
                .await
                .unwrap()
        }
    };
    // b's archive copy exists already: the handler's if_absent put skips.
    put("jobs_archive", "b", "earlier".into()).await;
    // a's value names its lock's version (the delete applies); b's does not.
    let lock_a = put("jobs_lock", "a", "held".into()).await;
    put("jobs_lock", "b", "held".into()).await;
    let at = now_ms() + 200;
    put_expiring(
        &node,
        "jobs",
        vec![
            ("a".into(), lock_a.to_string(), at),
            ("b".into(), "1.0@nobody".into(), at),
        ],
    )
    .await;
    eventually(Duration::from_secs(10), "both events handled", || async {
        node.expiry_status("jobs").await.unwrap().handled == 2
    })
    .await;
    assert_eq!(
        value(&node, "jobs_archive", "a").await,
        Some(lock_a.to_string())
    );
    assert_eq!(
        value(&node, "jobs_archive", "b").await.as_deref(),
        Some("earlier")
    );
    assert_eq!(
        value(&node, "jobs_lock", "a").await,
        None,
        "deleted at its version"
    );
    assert_eq!(
        value(&node, "jobs_lock", "b").await.as_deref(),
        Some("held")
    );
    let status = node.expiry_status("jobs").await.unwrap();
    assert_eq!(status.skipped_actions, 2, "b's put and b's delete");
    assert_eq!(status.failed_calls, 0);
    assert_eq!(status.failed_events, 0);
    assert_eq!(status.dead_letters, 0);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_events_back_off_then_dead_letter_and_redrive_after_the_fix() {
    let node = node(4).await;
    install(&node, "handler", "ebb_test_flaky").await;
    bind(&node, "jobs", "handler", 256, 4).await;
    let at = now_ms() + 200;
    let mut items: Vec<(String, String, u64)> = (0..50)
        .map(|i| (format!("ok{i:02}"), format!("job {i}"), at))
        .collect();
    items.extend((0..5).map(|i| (format!("bad{i}"), "fail please".to_string(), at)));
    put_expiring(&node, "jobs", items).await;

    eventually(Duration::from_secs(10), "50 archived jobs", || async {
        live(&node, "jobs_archive").await == 50
    })
    .await;
    eventually(Duration::from_secs(30), "5 dead letters", || async {
        node.expiry_status("jobs").await.unwrap().dead_letters == 5
    })
    .await;
    let page = node.dead_letters("jobs", None, 100).await.unwrap();
    assert_eq!(page.events.len(), 5);
    for dead in &page.events {
        assert_eq!(dead.attempt(), 4, "dead after max_attempts");
        assert!(
            dead.stored.last_error.contains("failed"),
            "{:?}",
            dead.stored.last_error
        );
        assert!(dead.record_key().starts_with("bad"));
    }
    // Each attempt left a marker; the delays between attempts grow.
    let attempts = node.table("jobs_attempts").unwrap();
    let mut times = Vec::new();
    for attempt in 1..=4 {
        let entry = attempts.get(&format!("bad0:{attempt}")).await.unwrap();
        times.push(entry.expect("every attempt recorded").version.hlc_ms);
    }
    // Delay before attempt n+1 is 100 ms * 2^(n-1) times a jitter in
    // [1/2, 1]: at least 50, 100 and 200 ms (load can only add to a gap).
    let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    for (gap, floor) in gaps.iter().zip([50, 100, 200]) {
        assert!(*gap >= floor, "backoff grows: gaps {gaps:?}");
    }
    // The healthy events did not wait for the failing ones: each was
    // archived before any failing event had its last attempt (which comes
    // at least 350 ms of backoff after the first). The versions are the
    // node's own write times, so this does not depend on when we looked.
    let archive = node.table("jobs_archive").unwrap();
    let mut last_archived = 0;
    for i in 0..50 {
        let entry = archive.get(&format!("ok{i:02}")).await.unwrap().unwrap();
        last_archived = last_archived.max(entry.version.hlc_ms);
    }
    for i in 0..5 {
        let last = attempts.get(&format!("bad{i}:4")).await.unwrap().unwrap();
        assert!(
            last_archived < last.version.hlc_ms,
            "healthy events archived by {last_archived}, bad{i} last tried at {}",
            last.version.hlc_ms
        );
    }
    // The dead-letter count and the queue are read apart: wait for both.
    eventually(Duration::from_secs(10), "nothing pending", || async {
        node.expiry_status("jobs").await.unwrap().queue.pending == 0
    })
    .await;

    // Fix the handler (replace the plugin), then redrive.
    install(&node, "handler", "ebb_plugin_archive").await;
    let one = vec![
        page.events[0]
            .id()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    ];
    assert_eq!(node.redrive("jobs", Some(one)).await.unwrap(), (1, false));
    assert_eq!(node.redrive("jobs", None).await.unwrap(), (4, false));
    eventually(Duration::from_secs(10), "55 archived jobs", || async {
        live(&node, "jobs_archive").await == 55
    })
    .await;
    // A handler's writes commit before its event is acknowledged, so the
    // archive can be complete a moment before the queue is empty.
    eventually(
        Duration::from_secs(10),
        "no dead letter, nothing pending",
        || async {
            let status = node.expiry_status("jobs").await.unwrap();
            (status.dead_letters, status.queue.pending) == (0, 0)
        },
    )
    .await;
    assert!(
        node.dead_letters("jobs", None, 10)
            .await
            .unwrap()
            .events
            .is_empty()
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_event_does_not_hold_back_the_rest_of_its_batch() {
    // One fragment: every event is in the same partition and the same batch.
    let node = node(1).await;
    install(&node, "handler", "ebb_test_flaky").await;
    bind(&node, "t", "handler", 256, 6).await;
    let at = now_ms() + 200;
    let mut items: Vec<(String, String, u64)> = (0..199)
        .map(|i| (format!("k{i:03}"), format!("v{i}"), at))
        .collect();
    items.push(("k100x".into(), "poison".into(), at));
    put_expiring(&node, "t", items).await;
    eventually(Duration::from_secs(10), "199 archived events", || async {
        live(&node, "t_archive").await == 199
    })
    .await;
    let status = node.expiry_status("t").await.unwrap();
    assert!(status.failed_calls >= 1, "the first call trapped");
    eventually(
        Duration::from_secs(30),
        "the poison event in dead letters",
        || async { node.expiry_status("t").await.unwrap().dead_letters == 1 },
    )
    .await;
    let page = node.dead_letters("t", None, 10).await.unwrap();
    assert_eq!(page.events[0].record_key(), "k100x");
    assert!(
        page.events[0].stored.last_error.contains("trap"),
        "{}",
        page.events[0].stored.last_error
    );
    assert_eq!(live(&node, "t_archive").await, 199);
    node.shutdown().await.unwrap();
}

/// A node on one fragment (one partition per table, so first deliveries
/// follow outbox order) retrying after 50 ms, doubling up to 200 ms.
async fn quick_retry_node(store: Arc<MemoryStore>, linger: Duration) -> Node {
    let config = NodeConfig::new("unused").fragments(1).expiry(ExpiryConfig {
        backoff_base: Duration::from_millis(50),
        backoff_max: Duration::from_millis(200),
        linger,
        ..ExpiryConfig::default()
    });
    Node::open_with_store(config, store).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbinding_stops_delivery_keeps_pending_events_and_writes_no_new_ones() {
    let node = quick_retry_node(Arc::new(MemoryStore::new()), Duration::from_millis(2)).await;
    install(&node, "handler", "ebb_test_flaky").await;
    bind(&node, "t", "handler", 256, 1000).await;
    put_expiring(
        &node,
        "t",
        vec![
            ("a".into(), "1".into(), now_ms() + 100),
            ("bad".into(), "fail".into(), now_ms() + 100),
        ],
    )
    .await;
    eventually(Duration::from_secs(10), "a archived, bad tried", || async {
        value(&node, "t_archive", "a").await.as_deref() == Some("1")
            && last_attempt(&node, "t", "bad").await >= 1
    })
    .await;

    let removed = node.unbind_expiry("t", false).await.unwrap();
    assert_eq!(removed.plugin, "handler");
    // A call in flight finishes; the failing event stays pending.
    eventually(Duration::from_secs(10), "no call in flight", || async {
        node.expiry_status("t").await.unwrap().queue.in_flight == 0
    })
    .await;
    let status = node.expiry_status("t").await.unwrap();
    assert_eq!(status.binding, None);
    assert_eq!(
        (status.queue.pending, status.queue.backing_off),
        (1, 1),
        "the pending event is kept"
    );
    let tried = last_attempt(&node, "t", "bad").await;
    let calls = status.calls;

    // b expires while the table is unbound: the cleaner converts it (it is
    // no longer live), writing no event.
    put_in(&node, "t", "b", "2", 50).await;
    eventually(Duration::from_secs(10), "b converted", || async {
        live(&node, "t").await == 0
    })
    .await;
    // Nothing is delivered while unbound. A negative can only be watched
    // for a while: 1 s is five times the longest retry delay (200 ms) of
    // the pending event, which would be tried again about 5 times if
    // unbinding did not stop delivery.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let status = node.expiry_status("t").await.unwrap();
    assert_eq!(status.calls, calls, "no handler call while unbound");
    assert_eq!(
        last_attempt(&node, "t", "bad").await,
        tried,
        "no delivery while unbound"
    );
    assert_eq!(status.queue.pending, 1);

    // Bound again to a fixed handler: the kept event is delivered, and so
    // is a new expiry; b had no event to deliver.
    install(&node, "handler", "ebb_plugin_archive").await;
    bind(&node, "t", "handler", 256, 1000).await;
    put_in(&node, "t", "c", "3", 50).await;
    eventually(Duration::from_secs(10), "bad and c archived", || async {
        value(&node, "t_archive", "bad").await.as_deref() == Some("fail")
            && value(&node, "t_archive", "c").await.as_deref() == Some("3")
    })
    .await;
    eventually(Duration::from_secs(10), "an empty outbox", || async {
        node.expiry_status("t").await.unwrap().queue.pending == 0
    })
    .await;
    let status = node.expiry_status("t").await.unwrap();
    // With the outbox empty, every event ever written was handled: a, bad
    // and c, none for b.
    assert_eq!(status.handled, 3, "{status:?}");
    assert_eq!(value(&node, "t_archive", "b").await, None);
    assert_eq!(status.dead_letters, 0);

    node.unbind_expiry("t", false).await.unwrap();
    let plugin = node.clone();
    tokio::task::spawn_blocking(move || plugin.remove_plugin("handler"))
        .await
        .unwrap()
        .expect("an unbound plugin can be deleted");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_store_delays_delivery_without_charging_attempts() {
    let store = Arc::new(MemoryStore::new());
    // A partial batch waits 3 s for more events: time to make the store
    // fail after the event is durable in the outbox and before its call.
    let node = quick_retry_node(store.clone(), Duration::from_secs(3)).await;
    install(&node, "handler", "ebb_test_flaky").await;
    // One attempt only: a charged failure would dead-letter at once.
    bind_function(&node, "t", "handler", "stamp", 256, 1).await;
    let started = Instant::now();
    put_in(&node, "t", "k", "v", 100).await;
    eventually(
        Duration::from_secs(10),
        "the event in the outbox",
        || async { node.expiry_status("t").await.unwrap().queue.pending == 1 },
    )
    .await;
    let status = node.expiry_status("t").await.unwrap();
    assert_eq!(
        (status.calls, status.queue.in_flight),
        (0, 0),
        "the call waits for its batch to fill ({:?} after the put)",
        started.elapsed()
    );
    // The handler will succeed, but its actions cannot become durable.
    store.set_failing(true);
    eventually(
        Duration::from_secs(20),
        "two deliveries whose actions failed",
        || async {
            let status = node.expiry_status("t").await.unwrap();
            status.calls >= 2
                && status
                    .last_error
                    .as_deref()
                    .is_some_and(|e| e.contains("applying an action"))
        },
    )
    .await;
    let status = node.expiry_status("t").await.unwrap();
    assert_eq!(
        status.dead_letters, 0,
        "node-side failures are not attempts"
    );
    assert_eq!(status.queue.pending, 1);
    store.set_failing(false);
    eventually(
        Duration::from_secs(10),
        "delivery once the store recovers",
        || async { node.expiry_status("t").await.unwrap().queue.pending == 0 },
    )
    .await;
    let status = node.expiry_status("t").await.unwrap();
    assert_eq!((status.dead_letters, status.handled), (0, 1));
    // The successful delivery was still the event's first attempt.
    assert_eq!(
        value(&node, "t_archive", "k").await.as_deref(),
        Some("v attempt=1")
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_events_and_their_attempts_survive_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        NodeConfig::new(dir.path())
            .fragments(2)
            .expiry(ExpiryConfig {
                // After the second attempt the next waits at least 2 s: time
                // enough to read the attempts and shut down.
                backoff_base: Duration::from_secs(2),
                backoff_max: Duration::from_secs(10),
                ..ExpiryConfig::default()
            })
    };
    let node = Node::open(config()).await.unwrap();
    install(&node, "handler", "ebb_test_flaky").await;
    bind(&node, "t", "handler", 256, 50).await;
    let at = now_ms() + 100;
    let items = (0..3)
        .map(|i| (format!("bad{i}"), "fail".to_string(), at))
        .collect();
    put_expiring(&node, "t", items).await;
    eventually(
        Duration::from_secs(10),
        "two attempts of each event",
        || async {
            for key in ["bad0", "bad1", "bad2"] {
                if last_attempt(&node, "t", key).await < 2 {
                    return false;
                }
            }
            true
        },
    )
    .await;
    let before = last_attempt(&node, "t", "bad0").await;
    assert_eq!(before, 2, "two attempts were recorded");
    node.shutdown().await.unwrap();

    let node = Node::open(config()).await.unwrap();
    let status = node.expiry_status("t").await.unwrap();
    assert_eq!(
        status.binding.unwrap().max_attempts,
        50,
        "the binding persisted"
    );
    assert_eq!(status.queue.pending, 3, "pending events were reloaded");
    eventually(
        Duration::from_secs(10),
        "the next attempt after the restart",
        || async { last_attempt(&node, "t", "bad0").await > before },
    )
    .await;
    assert_eq!(
        last_attempt(&node, "t", "bad0").await,
        before + 1,
        "attempts continue where they stopped"
    );
    install(&node, "handler", "ebb_plugin_archive").await;
    eventually(Duration::from_secs(10), "all three archived", || async {
        live(&node, "t_archive").await == 3
    })
    .await;
    eventually(Duration::from_secs(5), "an empty outbox", || async {
        node.expiry_status("t").await.unwrap().queue.pending == 0
    })
    .await;
    node.shutdown().await.unwrap();
}

fn ebb(url: &str, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(ebb_bin())
        .args(args)
        .env("EBB_URL", url)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn binding_over_http_and_the_cli_refuses_bad_handlers_and_bound_plugin_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let url = &server.url;
    let upload = |name: &str, file: &str| {
        let answer = call(
            "PUT",
            &format!("{url}/v1/plugins/{name}"),
            &[],
            Some(&module(file)),
        );
        assert_eq!(answer.status, 200, "{}", answer.text());
    };
    upload("archive", "ebb_plugin_archive");
    upload("json", "ebb_plugin_json");
    let handler = format!("{url}/v1/tables/sessions/expiry-handler");
    let bind = |body: &str| call("PUT", &handler, &[], Some(body.as_bytes()));

    let scalar = bind(r#"{"plugin": "json", "function": "get"}"#);
    assert_eq!(
        (scalar.status, scalar.code().as_str()),
        (400, "invalid_request")
    );
    assert!(
        scalar.text().contains("not an expiry handler"),
        "{}",
        scalar.text()
    );
    assert_eq!(
        bind(r#"{"plugin": "archive", "function": "nope"}"#).status,
        404
    );
    assert_eq!(
        bind(r#"{"plugin": "missing", "function": "copy"}"#).status,
        404
    );
    assert_eq!(
        bind(r#"{"plugin": "archive", "function": "copy", "max_batch": 0}"#).status,
        400
    );
    assert_eq!(call("GET", &handler, &[], None).status, 404);

    let (code, out) = ebb(
        url,
        &[
            "expiry",
            "bind",
            "sessions",
            "archive",
            "copy",
            "--max-attempts",
            "5",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("archive.copy"), "{out}");
    let refused = call("DELETE", &format!("{url}/v1/plugins/archive"), &[], None);
    assert_eq!((refused.status, refused.code().as_str()), (409, "conflict"));
    assert!(refused.text().contains("sessions"), "{}", refused.text());

    let put = call(
        "PUT",
        &format!("{url}/v1/tables/sessions/keys/s1?ttl_ms=100"),
        &[],
        Some(b"alice"),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    let archived = format!("{url}/v1/tables/sessions_archive/keys/s1");
    wait_until(Duration::from_secs(5), "s1 archived", || {
        call("GET", &archived, &[], None).status == 200
    });
    assert_eq!(call("GET", &archived, &[], None).text(), "alice");

    // The event leaves the outbox just after the handler's actions commit.
    wait_until(Duration::from_secs(5), "the event settled", || {
        call("GET", &handler, &[], None).json()["status"]["outbox_depth"] == 0
    });
    let status = call("GET", &handler, &[], None).json();
    assert_eq!(status["binding"]["max_attempts"], 5);
    assert_eq!(status["status"]["handled"], 1);
    assert_eq!(status["status"]["outbox_depth"], 0);
    let (code, out) = ebb(url, &["expiry", "status", "sessions"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 events in 1 calls (1 deliveries)"), "{out}");
    let metrics = call("GET", &format!("{url}/metrics"), &[], None).text();
    assert!(
        metrics.contains("ebb_expiry_handled_total{table=\"sessions\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("ebb_expiry_lag_seconds_bucket{table=\"sessions\""));
    let (code, out) = ebb(url, &["expiry", "dead-letters", "sessions"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("(0 dead letters)"), "{out}");

    let (code, out) = ebb(url, &["expiry", "unbind", "sessions"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = ebb(url, &["expiry", "redrive", "sessions"]);
    assert_eq!(code, 1, "redrive needs a binding: {out}");
    assert!(out.contains("bind one"), "{out}");
    let put = call(
        "PUT",
        &format!("{url}/v1/tables/sessions/keys/s2?ttl_ms=50"),
        &[],
        Some(b"bob"),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    // s2 expires while unbound: wait until the cleaner has converted it
    // (a table leaves GET /v1/tables once no record is live, and a record
    // past its deadline counts as live until converted).
    wait_until(Duration::from_secs(10), "s2 converted", || {
        let tables = call("GET", &format!("{url}/v1/tables"), &[], None).json();
        !tables["tables"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "sessions")
    });
    // Its conversion wrote no event: bind again, let s3 expire and drain
    // the outbox; then every event ever written has been handled, and that
    // is s1 and s3 only.
    let (code, out) = ebb(url, &["expiry", "bind", "sessions", "archive", "copy"]);
    assert_eq!(code, 0, "{out}");
    let put = call(
        "PUT",
        &format!("{url}/v1/tables/sessions/keys/s3?ttl_ms=50"),
        &[],
        Some(b"carol"),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    wait_until(Duration::from_secs(10), "s3 archived, outbox empty", || {
        let status = call("GET", &handler, &[], None).json();
        status["status"]["outbox_depth"] == 0
            && call(
                "GET",
                &format!("{url}/v1/tables/sessions_archive/keys/s3"),
                &[],
                None,
            )
            .status
                == 200
    });
    let status = call("GET", &handler, &[], None).json();
    assert_eq!(status["status"]["handled"], 2, "{status}");
    assert_eq!(
        call(
            "GET",
            &format!("{url}/v1/tables/sessions_archive/keys/s2"),
            &[],
            None
        )
        .status,
        404,
        "no delivery of an expiry while unbound"
    );
    let (code, out) = ebb(url, &["expiry", "unbind", "sessions"]);
    assert_eq!(code, 0, "{out}");
    let deleted = call("DELETE", &format!("{url}/v1/plugins/archive"), &[], None);
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    assert_eq!(server.stop(), 0);
}

#[test]
fn dead_letters_over_http_and_the_cli_list_page_and_redrive() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let url = &server.url;
    let upload = call(
        "PUT",
        &format!("{url}/v1/plugins/handler"),
        &[],
        Some(&module("ebb_test_flaky")),
    );
    assert_eq!(upload.status, 200, "{}", upload.text());
    let bind = call(
        "PUT",
        &format!("{url}/v1/tables/jobs/expiry-handler"),
        &[],
        Some(br#"{"plugin": "handler", "function": "copy", "max_attempts": 1}"#),
    );
    assert_eq!(bind.status, 200, "{}", bind.text());
    for key in ["a", "b", "c"] {
        let put = call(
            "PUT",
            &format!("{url}/v1/tables/jobs/keys/{key}?ttl_ms=50"),
            &[],
            Some(b"fail me"),
        );
        assert_eq!(put.status, 200, "{}", put.text());
    }
    let listing = format!("{url}/v1/tables/jobs/expiry/dead-letters");
    wait_until(Duration::from_secs(10), "3 dead letters", || {
        call("GET", &listing, &[], None).json()["dead_letters"]
            .as_array()
            .map_or(0, Vec::len)
            == 3
    });
    let first = call("GET", &format!("{listing}?limit=2"), &[], None).json();
    let page: Vec<serde_json::Value> = first["dead_letters"].as_array().unwrap().clone();
    assert_eq!(page.len(), 2);
    assert_eq!(page[0]["value"], "fail me");
    assert_eq!(page[0]["attempts"], 1);
    assert!(page[0]["last_error"].as_str().unwrap().contains("failed"));
    assert_eq!(page[0]["id"].as_str().unwrap().len(), 64);
    let next = first["next"].as_str().expect("a next page").to_string();
    let second = call("GET", &format!("{listing}?limit=2&after={next}"), &[], None).json();
    assert_eq!(second["dead_letters"].as_array().unwrap().len(), 1);
    assert!(second["next"].is_null());
    let bad = call("GET", &format!("{listing}?limit=0"), &[], None);
    assert_eq!((bad.status, bad.code().as_str()), (400, "invalid_request"));

    let (code, out) = ebb(url, &["expiry", "dead-letters", "jobs", "--limit", "2"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("more: --after {next}")), "{out}");
    // Redrive one by id over HTTP (it fails again: back to dead letters),
    // then fix the handler and redrive the rest with the CLI.
    let id = page[0]["id"].as_str().unwrap().to_string();
    let redrive = call(
        "POST",
        &format!("{listing}/redrive"),
        &[],
        Some(format!(r#"{{"ids": ["{id}"]}}"#).as_bytes()),
    );
    assert_eq!(redrive.json()["redriven"], 1);
    wait_until(
        Duration::from_secs(10),
        "the redriven event dead again",
        || {
            call("GET", &listing, &[], None).json()["dead_letters"]
                .as_array()
                .map_or(0, Vec::len)
                == 3
        },
    );
    let fixed = call(
        "PUT",
        &format!("{url}/v1/plugins/handler"),
        &[],
        Some(&module("ebb_plugin_archive")),
    );
    assert_eq!(fixed.status, 200, "{}", fixed.text());
    let (code, out) = ebb(url, &["expiry", "redrive", "jobs"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("redriven: 3"), "{out}");
    wait_until(Duration::from_secs(10), "all three archived", || {
        ["a", "b", "c"].iter().all(|key| {
            call(
                "GET",
                &format!("{url}/v1/tables/jobs_archive/keys/{key}"),
                &[],
                None,
            )
            .status
                == 200
        })
    });
    let status = call(
        "GET",
        &format!("{url}/v1/tables/jobs/expiry-handler"),
        &[],
        None,
    )
    .json();
    assert_eq!(status["status"]["dead_letters"], 0, "{status}");
    assert_eq!(server.stop(), 0);
}

#[test]
fn sigkill_while_events_are_pending_and_handlers_run_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let total: u64 = 3000;
    let last_deadline = {
        let server = Server::start(dir.path(), &[]);
        let url = &server.url;
        let answer = call(
            "PUT",
            &format!("{url}/v1/plugins/flaky"),
            &[],
            Some(&module("ebb_test_flaky")),
        );
        assert_eq!(answer.status, 200, "{}", answer.text());
        let bind = call(
            "PUT",
            &format!("{url}/v1/tables/t/expiry-handler"),
            &[],
            Some(br#"{"plugin": "flaky", "function": "copy", "max_batch": 64}"#),
        );
        assert_eq!(bind.status, 200, "{}", bind.text());
        // Deadlines spread over 3 s; every 10th event stalls its handler call.
        let start = now_ms() + 500;
        let items: Vec<String> = (0..total)
            .map(|i| {
                let value = if i % 10 == 0 { format!("slow {i}") } else { format!("v{i}") };
                serde_json::json!({"key": format!("k{i:05}"), "value": value, "expires_at_ms": start + i})
                    .to_string()
            })
            .collect();
        let body = items.join("\n");
        let put = call(
            "POST",
            &format!("{url}/v1/tables/t/batch"),
            &[("content-type", "application/x-ndjson")],
            Some(body.as_bytes()),
        );
        assert_eq!(put.status, 200, "{}", put.text());
        // Kill in the middle: some events handled, some pending or in a
        // handler call, some records not even expired yet.
        let status = || {
            call(
                "GET",
                &format!("{url}/v1/tables/t/expiry-handler"),
                &[],
                None,
            )
            .json()["status"]
                .clone()
        };
        let handled = || status()["handled"].as_u64().unwrap_or(0);
        wait_until(
            Duration::from_secs(30),
            "some events handled and a handler call running",
            || {
                let now = status();
                now["handled"].as_u64().unwrap_or(0) >= 300
                    && now["in_flight"].as_u64().unwrap_or(0) > 0
            },
        );
        let at_kill = handled();
        assert!(at_kill < total, "killed before the end ({at_kill} handled)");
        drop(server); // SIGKILL
        start + total - 1
    };
    // Let the remaining deadlines pass while the server is down: boot
    // converts those records and writes their events.
    while now_ms() <= last_deadline + 100 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let server = Server::start(dir.path(), &[]);
    let url = &server.url;
    let count = || {
        call(
            "POST",
            &format!("{url}/v1/sql"),
            &[],
            Some(br#"{"sql": "SELECT count(*) FROM t_archive"}"#),
        )
        .json()["rows"][0][0]
            .as_u64()
            .unwrap_or(0)
    };
    wait_until(
        Duration::from_secs(60),
        "every event archived after the restart",
        || count() == total,
    );
    wait_until(Duration::from_secs(10), "an empty outbox", || {
        call(
            "GET",
            &format!("{url}/v1/tables/t/expiry-handler"),
            &[],
            None,
        )
        .json()["status"]["outbox_depth"]
            == 0
    });
    let status = call(
        "GET",
        &format!("{url}/v1/tables/t/expiry-handler"),
        &[],
        None,
    )
    .json();
    assert_eq!(status["status"]["dead_letters"], 0, "{status}");
    assert_eq!(server.stop(), 0);
}

#[test]
fn expiry_settings_out_of_range_are_refused_at_start_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value, named) in [
        ("--expiry-deadline", "0ms", "expiry_deadline"),
        ("--expiry-concurrency", "0", "concurrency"),
        ("--expiry-backoff", "0ms", "backoff_base"),
    ] {
        let out = std::process::Command::new(ebb_bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .args([flag, value])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag}: {stderr}");
        assert!(stderr.contains(named), "{flag}: {stderr}");
    }
}
