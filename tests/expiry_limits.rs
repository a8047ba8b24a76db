//! The limits and controls of expiry handlers that docs/expiry.md promises:
//! the handler deadline, the memory cap and the per-event action limit (each
//! fails the call, the event is retried and then dead-lettered, nothing of
//! the failed call is written, and the node keeps serving); unbinding with
//! `discard_pending`; and the 409 for a new plugin version that drops a
//! bound handler.
//!
//! The handlers are the test plugin `flaky` (tests/plugins/flaky: `spin`,
//! `hog N` and `spam N` values) and the bundled `archive`, built by
//! `make plugins`. Every wait polls a condition with a generous deadline.

use crate::common;

use std::time::Duration;

use ebb_host::{ExpiryConfig, ExpiryError, Node, NodeConfig};
use ebb_proto::Message;
use ebb_proto::plugin::v1 as abi;

use common::expiry::{
    bind, eventually, install, last_attempt, live, module, node, now_ms, put_expiring, put_in,
    value,
};
use common::{Server, call, ebb_bin, wait_until, wasm};

/// `ebb <args>` against `url`: exit code and stdout + stderr.
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

/// Upload `file` as plugin `name` over HTTP; must succeed.
fn upload(url: &str, name: &str, file: &str) -> serde_json::Value {
    let answer = call(
        "PUT",
        &format!("{url}/v1/plugins/{name}"),
        &[],
        Some(&module(file)),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()
}

/// Bind `table` over HTTP with the JSON `body`; must succeed.
fn bind_http(url: &str, table: &str, body: &str) {
    let answer = call(
        "PUT",
        &format!("{url}/v1/tables/{table}/expiry-handler"),
        &[],
        Some(body.as_bytes()),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
}

/// Put `table`/`key` = `value` over HTTP with a TTL of `ttl_ms`.
fn put_http(url: &str, table: &str, key: &str, value: &str, ttl_ms: u64) {
    let answer = call(
        "PUT",
        &format!("{url}/v1/tables/{table}/keys/{key}?ttl_ms={ttl_ms}"),
        &[],
        Some(value.as_bytes()),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
}

/// The HTTP status of `GET table/key`.
fn get_status(url: &str, table: &str, key: &str) -> u16 {
    call(
        "GET",
        &format!("{url}/v1/tables/{table}/keys/{key}"),
        &[],
        None,
    )
    .status
}

/// The dead letters of `table` over HTTP (first page).
fn dead_letters_http(url: &str, table: &str) -> Vec<serde_json::Value> {
    call(
        "GET",
        &format!("{url}/v1/tables/{table}/expiry/dead-letters"),
        &[],
        None,
    )
    .json()["dead_letters"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// `GET /v1/tables/{t}/expiry-handler`.
fn status_http(url: &str, table: &str) -> serde_json::Value {
    call(
        "GET",
        &format!("{url}/v1/tables/{table}/expiry-handler"),
        &[],
        None,
    )
    .json()
}

/// Wait until `key` of table `t` is archived in `t_archive` and `t`'s
/// outbox is empty: the handled count moves when the batch settles, after
/// the archive's write commits.
fn wait_archived_and_settled(url: &str, key: &str) {
    wait_until(
        Duration::from_secs(10),
        &format!("{key} archived, outbox empty"),
        || {
            get_status(url, "t_archive", key) == 200
                && status_http(url, "t")["status"]["outbox_depth"] == 0
        },
    );
}

fn is_not_found<T: std::fmt::Debug>(status: Result<T, ExpiryError>) -> bool {
    matches!(status, Err(ExpiryError::NotFound(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_past_its_deadline_is_stopped_retried_and_dead_lettered() {
    // Default plugin limits: the documented 1 s handler deadline. One
    // event per call, so only the spinning event's calls fail.
    let node = node(1).await;
    install(&node, "handler", "ebb_test_flaky").await;
    bind(&node, "t", "handler", 1, 3).await;
    let at = now_ms() + 200;
    let mut items: Vec<(String, String, u64)> = (0..20)
        .map(|i| (format!("k{i:02}"), format!("v{i}"), at))
        .collect();
    items.push(("stuck".into(), "spin forever".into(), at));
    put_expiring(&node, "t", items).await;

    // A call that never returned by itself would hold its partition: the
    // dead letter and the other 20 events prove each call was stopped.
    eventually(
        Duration::from_secs(60),
        "the spinning event in dead letters",
        || async { node.expiry_status("t").await.unwrap().dead_letters == 1 },
    )
    .await;
    eventually(Duration::from_secs(30), "20 archived events", || async {
        live(&node, "t_archive").await == 20
    })
    .await;
    eventually(Duration::from_secs(10), "an empty outbox", || async {
        node.expiry_status("t").await.unwrap().queue.pending == 0
    })
    .await;
    let status = node.expiry_status("t").await.unwrap();
    assert_eq!(
        (status.calls, status.failed_calls, status.failed_events),
        (23, 3, 3),
        "20 calls that succeeded, 3 that hit the deadline: {status:?}"
    );
    assert_eq!(status.handled, 20);
    assert!(
        status
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("exceeded its 1000 ms deadline")),
        "{:?}",
        status.last_error
    );

    let page = node.dead_letters("t", None, 10).await.unwrap();
    assert_eq!(page.events.len(), 1);
    let dead = &page.events[0];
    assert_eq!(dead.record_key(), "stuck");
    assert_eq!(dead.attempt(), 3, "retried up to max_attempts");
    assert!(
        dead.stored
            .last_error
            .contains("handler.copy exceeded its 1000 ms deadline"),
        "{}",
        dead.stored.last_error
    );
    // Each of the three calls ran until the deadline, not less (the epoch
    // ticks at most every 2 ms, so a 1 s deadline lasts at least 998 ms);
    // load can only make them longer.
    let spent = dead.stored.dead_at_ms - dead.expiry_event().unwrap().observed_at_ms;
    assert!(spent >= 2900, "three 1 s calls took {spent} ms");
    assert_eq!(value(&node, "t_archive", "stuck").await, None);
    node.shutdown().await.unwrap();
}

#[test]
fn the_expiry_deadline_flag_bounds_handler_calls_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        &["--expiry-deadline", "300ms", "--expiry-backoff", "50ms"],
    );
    let url = &server.url;
    upload(url, "flaky", "ebb_test_flaky");
    bind_http(
        url,
        "t",
        r#"{"plugin": "flaky", "function": "copy", "max_batch": 1, "max_attempts": 2}"#,
    );
    put_http(url, "t", "stuck", "spin", 50);
    put_http(url, "t", "fine", "ok", 50);
    wait_until(Duration::from_secs(30), "one dead letter", || {
        dead_letters_http(url, "t").len() == 1
    });
    wait_archived_and_settled(url, "fine");
    let dead = &dead_letters_http(url, "t")[0];
    assert_eq!(dead["key"], "stuck");
    assert_eq!(dead["attempts"], 2);
    let error = dead["last_error"].as_str().unwrap();
    assert!(error.contains("exceeded its 300 ms deadline"), "{error}");
    let spent = dead["dead_at_ms"].as_u64().unwrap() - dead["observed_at_ms"].as_u64().unwrap();
    assert!(spent >= 580, "two 300 ms calls took {spent} ms");

    let metrics = call("GET", &format!("{url}/metrics"), &[], None).text();
    let expected = r#"ebb_plugin_errors_total{plugin="flaky",function="copy",cause="deadline"} 2"#;
    assert!(metrics.contains(expected), "no {expected} in:\n{metrics}");
    let status = status_http(url, "t");
    assert_eq!(status["status"]["failed_calls"], 2, "{status}");
    assert_eq!(status["status"]["handled"], 1, "{status}");
    assert_eq!(call("GET", &format!("{url}/health"), &[], None).status, 200);
    assert_eq!(server.stop(), 0);
}

#[test]
fn a_handler_past_the_memory_cap_fails_its_call_and_the_node_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--expiry-backoff", "50ms"]);
    let url = &server.url;
    upload(url, "flaky", "ebb_test_flaky");
    bind_http(
        url,
        "t",
        r#"{"plugin": "flaky", "function": "copy", "max_batch": 1, "max_attempts": 2}"#,
    );
    // 32 MiB fits under the default 64 MiB cap; 128 MiB does not.
    put_http(url, "t", "small", "hog 32", 50);
    put_http(url, "t", "big", "hog 128", 50);
    wait_until(Duration::from_secs(30), "one dead letter", || {
        dead_letters_http(url, "t").len() == 1
    });
    wait_until(Duration::from_secs(10), "small archived", || {
        get_status(url, "t_archive", "small") == 200
    });
    let dead = &dead_letters_http(url, "t")[0];
    assert_eq!(dead["key"], "big");
    assert_eq!(dead["attempts"], 2);
    let error = dead["last_error"].as_str().unwrap();
    assert!(
        error.contains("flaky.copy hit the 67108864-byte memory cap"),
        "{error}"
    );
    assert_eq!(get_status(url, "t_archive", "big"), 404);
    let metrics = call("GET", &format!("{url}/metrics"), &[], None).text();
    let expected =
        r#"ebb_plugin_errors_total{plugin="flaky",function="copy",cause="memory_cap"} 2"#;
    assert!(metrics.contains(expected), "no {expected} in:\n{metrics}");

    // The node keeps serving: reads, writes, SQL, and the same handler
    // allocating within the cap again.
    assert_eq!(call("GET", &format!("{url}/health"), &[], None).status, 200);
    put_http(url, "t", "again", "hog 32", 50);
    wait_archived_and_settled(url, "again");
    let count = call(
        "POST",
        &format!("{url}/v1/sql"),
        &[],
        Some(br#"{"sql": "SELECT count(*) FROM t_archive"}"#),
    );
    assert_eq!(count.status, 200, "{}", count.text());
    assert_eq!(count.json()["rows"][0][0], 2);
    let status = status_http(url, "t");
    assert_eq!(status["status"]["failed_calls"], 2, "{status}");
    assert_eq!(status["status"]["handled"], 2, "{status}");
    assert_eq!(server.stop(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_actions_than_the_per_event_limit_fail_the_call_and_none_is_written() {
    // One event per call: the limit of an answer is 16 actions.
    let node = node(1).await;
    install(&node, "handler", "ebb_test_flaky").await;
    bind(&node, "t", "handler", 1, 2).await;
    let at = now_ms() + 200;
    let items = vec![
        ("at".to_string(), "spam 16".to_string(), at),
        ("over".to_string(), "spam 17".to_string(), at),
        ("next".to_string(), "v".to_string(), at),
    ];
    put_expiring(&node, "t", items).await;
    eventually(
        Duration::from_secs(30),
        "one dead letter and an empty outbox",
        || async {
            let status = node.expiry_status("t").await.unwrap();
            status.dead_letters == 1 && status.queue.pending == 0
        },
    )
    .await;
    let page = node.dead_letters("t", None, 10).await.unwrap();
    let dead = &page.events[0];
    assert_eq!(dead.record_key(), "over");
    assert_eq!(dead.attempt(), 2, "retried up to max_attempts");
    assert!(
        dead.stored
            .last_error
            .contains("returned 17 actions for 1 events; the limit is 16 per event"),
        "{}",
        dead.stored.last_error
    );
    // Exactly the limit is allowed and applied; one past it writes nothing.
    for i in 0..16 {
        assert!(
            value(&node, "t_spam", &format!("at.{i}")).await.is_some(),
            "at.{i} written"
        );
    }
    for i in 0..17 {
        assert_eq!(
            value(&node, "t_spam", &format!("over.{i}")).await,
            None,
            "over.{i} must not be written"
        );
    }
    assert_eq!(live(&node, "t_spam").await, 16);
    assert_eq!(
        value(&node, "t_archive", "next").await.as_deref(),
        Some("v")
    );
    let status = node.expiry_status("t").await.unwrap();
    assert_eq!((status.handled, status.failed_calls), (2, 2), "{status:?}");
    node.shutdown().await.unwrap();
}

/// A node on `dir` with one fragment whose failed events wait at least
/// 15 s before their next attempt.
fn slow_retry_config(dir: &std::path::Path) -> NodeConfig {
    NodeConfig::new(dir).fragments(1).expiry(ExpiryConfig {
        backoff_base: Duration::from_secs(30),
        backoff_max: Duration::from_secs(60),
        ..ExpiryConfig::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbinding_with_discard_pending_deletes_pending_events_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::open(slow_retry_config(dir.path())).await.unwrap();
    install(&node, "handler", "ebb_test_flaky").await;
    bind(&node, "t", "handler", 256, 10).await;
    let at = now_ms() + 100;
    let items = (0..3)
        .map(|i| (format!("bad{i}"), "fail".to_string(), at))
        .collect();
    put_expiring(&node, "t", items).await;
    eventually(
        Duration::from_secs(10),
        "three events tried once and backing off",
        || async {
            let queue = node.expiry_status("t").await.unwrap().queue;
            (queue.backing_off, queue.in_flight) == (3, 0)
        },
    )
    .await;

    let removed = node.unbind_expiry("t", true).await.unwrap();
    assert_eq!(removed.plugin, "handler");
    assert!(
        is_not_found(node.expiry_status("t").await),
        "nothing bound, pending or dead: {:?}",
        node.expiry_status("t").await
    );
    // The deletion is durable: boot loads no event of t.
    node.shutdown().await.unwrap();
    let node = Node::open(slow_retry_config(dir.path())).await.unwrap();
    assert!(
        is_not_found(node.expiry_status("t").await),
        "after a restart: {:?}",
        node.expiry_status("t").await
    );

    // Bound again to a handler that would archive them: only a new expiry
    // is delivered. With the outbox empty, every event left was handled.
    install(&node, "handler", "ebb_plugin_archive").await;
    bind(&node, "t", "handler", 256, 10).await;
    put_in(&node, "t", "m", "marker", 50).await;
    eventually(Duration::from_secs(10), "m archived", || async {
        value(&node, "t_archive", "m").await.is_some()
    })
    .await;
    eventually(Duration::from_secs(10), "an empty outbox", || async {
        node.expiry_status("t").await.unwrap().queue.pending == 0
    })
    .await;
    let status = node.expiry_status("t").await.unwrap();
    assert_eq!((status.handled, status.dead_letters), (1, 0), "{status:?}");
    for i in 0..3 {
        let key = format!("bad{i}");
        assert_eq!(value(&node, "t_archive", &key).await, None, "{key}");
        assert_eq!(last_attempt(&node, "t", &key).await, 1, "{key}");
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discard_pending_also_deletes_an_event_whose_call_was_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        let mut config = slow_retry_config(dir.path());
        config.plugins.expiry_deadline = Duration::from_millis(500);
        config
    };
    let node = Node::open(config()).await.unwrap();
    install(&node, "handler", "ebb_test_flaky").await;
    bind(&node, "t", "handler", 1, 10).await;
    put_in(&node, "t", "stuck", "spin", 50).await;
    eventually(Duration::from_secs(10), "the call in flight", || async {
        node.expiry_status("t").await.unwrap().queue.in_flight == 1
    })
    .await;
    // Unbind while the call runs: it finishes (failing at its deadline),
    // and its event, which is in the outbox, is deleted like the others.
    node.unbind_expiry("t", true).await.unwrap();
    eventually(
        Duration::from_secs(10),
        "nothing bound, pending or dead",
        || async { is_not_found(node.expiry_status("t").await) },
    )
    .await;
    node.shutdown().await.unwrap();
    let node = Node::open(config()).await.unwrap();
    assert!(
        is_not_found(node.expiry_status("t").await),
        "after a restart: {:?}",
        node.expiry_status("t").await
    );
    node.shutdown().await.unwrap();
}

/// A module whose manifest declares `copy` and `stamp` as scalar functions
/// (never called).
fn scalar_copy_module() -> Vec<u8> {
    let decl = |name: &str| abi::FunctionDecl {
        name: name.into(),
        kind: abi::FunctionKind::Scalar as i32,
        arg_count: 1,
        description: format!("scalar {name}"),
    };
    let manifest = abi::Manifest {
        abi_version: 1,
        name: "scalars".into(),
        version: "1.0.0".into(),
        functions: vec![decl("copy"), decl("stamp")],
    }
    .encode_to_vec();
    let escaped: String = manifest.iter().map(|b| format!("\\{b:02x}")).collect();
    let wat = format!(
        r#"(module
  (memory (export "memory") 2)
  (data (i32.const 1024) "{escaped}")
  (func (export "ebb_abi_version") (result i32) (i32.const 1))
  (func (export "ebb_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "ebb_dealloc") (param i32 i32))
  (func (export "ebb_manifest") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const {len})))
  (func (export "ebb_call") (param i32 i32) (result i64) (unreachable))
)"#,
        len = manifest.len(),
    );
    wat::parse_str(wat).expect("valid WAT")
}

#[test]
fn a_new_version_without_a_bound_handler_is_refused_with_409_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let url = &server.url;
    assert_eq!(upload(url, "handler", "ebb_test_flaky")["version"], 1);
    bind_http(url, "t1", r#"{"plugin": "handler", "function": "copy"}"#);
    bind_http(url, "t2", r#"{"plugin": "handler", "function": "stamp"}"#);
    let push = |bytes: &[u8]| {
        call(
            "PUT",
            &format!("{url}/v1/plugins/handler"),
            &[],
            Some(bytes),
        )
    };

    // `archive` declares copy but not stamp; `json` neither; the scalar
    // module declares both, but not as expiry handlers.
    let refused = push(&module("ebb_plugin_archive"));
    assert_eq!((refused.status, refused.code().as_str()), (409, "conflict"));
    let message = refused.text();
    assert!(
        message.contains("t2") && message.contains("handler.stamp"),
        "{message}"
    );
    let refused = push(&module("ebb_plugin_json"));
    assert_eq!((refused.status, refused.code().as_str()), (409, "conflict"));
    let refused = push(&scalar_copy_module());
    assert_eq!((refused.status, refused.code().as_str()), (409, "conflict"));
    assert!(
        refused.text().contains("expiry handler"),
        "{}",
        refused.text()
    );
    let archive = wasm("ebb_plugin_archive");
    let (code, out) = ebb(
        url,
        &[
            "plugin",
            "push",
            archive.to_str().unwrap(),
            "--name",
            "handler",
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("(conflict, HTTP 409)"), "{out}");

    // Nothing changed: still version 1, both bindings deliver through it.
    let plugin = call("GET", &format!("{url}/v1/plugins/handler"), &[], None).json();
    assert_eq!(plugin["version"], 1, "{plugin}");
    assert_eq!(status_http(url, "t2")["binding"]["function"], "stamp");
    put_http(url, "t2", "k", "v", 50);
    put_http(url, "t1", "k", "w", 50);
    let archived = |table: &str| {
        let answer = call(
            "GET",
            &format!("{url}/v1/tables/{table}_archive/keys/k"),
            &[],
            None,
        );
        (answer.status == 200).then(|| answer.text())
    };
    wait_until(Duration::from_secs(10), "both archived", || {
        archived("t1").is_some() && archived("t2").is_some()
    });
    assert_eq!(archived("t2").as_deref(), Some("v attempt=1"));
    assert_eq!(archived("t1").as_deref(), Some("w"));

    // Once t2 is unbound, a version keeping `copy` as a handler is accepted
    // and serves t1's next batch.
    let unbound = call(
        "DELETE",
        &format!("{url}/v1/tables/t2/expiry-handler"),
        &[],
        None,
    );
    assert_eq!(unbound.status, 200, "{}", unbound.text());
    assert_eq!(upload(url, "handler", "ebb_plugin_archive")["version"], 2);
    put_http(url, "t1", "n", "x", 50);
    wait_until(Duration::from_secs(10), "n archived", || {
        get_status(url, "t1_archive", "n") == 200
    });
    assert_eq!(status_http(url, "t1")["status"]["dead_letters"], 0);
    assert_eq!(server.stop(), 0);
}
