//! Change handlers end to end: every winning write and delete of a bound
//! table reaches its handler (in key order, with both versions), a key
//! prefix limits them, a handler writing to its own table does not loop,
//! a materialized counter stays exact under redelivery, dead letters and
//! redrive, the HTTP routes and `ebb trigger`, and `kill -9` under write
//! load loses no acknowledged write's event.
//!
//! Handlers are the test plugin `flaky`'s change handlers `record`, `echo`
//! and `count_writes` (tests/plugins/flaky), built by `make plugins`. Every
//! wait polls a condition with a deadline; the one fixed wait (the loop
//! rule) says why it is long enough.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ebb_host::plugin::HandlerKind;
use ebb_host::{BindRequest, Durability, Node, PutOptions, QueryRequest};

use common::expiry::{eventually, install, module, node, value};
use common::{Server, call, ebb_bin, wait_until};

/// Bind `table`'s change handler `flaky.function` with `config`, `prefix`
/// and `max_attempts`.
async fn bind_change(
    node: &Node,
    table: &str,
    function: &str,
    config: Option<serde_json::Value>,
    prefix: Option<&str>,
    max_attempts: u32,
) {
    node.bind_change(
        table,
        BindRequest {
            plugin: "flaky".into(),
            function: function.into(),
            max_attempts: Some(max_attempts),
            config,
            prefix: prefix.map(str::to_string),
            ..BindRequest::default()
        },
    )
    .await
    .unwrap();
}

async fn put(node: &Node, table: &str, key: &str, value: &str) -> String {
    node.table(table)
        .unwrap()
        .put(key, value.to_string(), PutOptions::default())
        .await
        .unwrap()
        .to_string()
}

/// Keys of `table`, page after page; none while it does not exist.
async fn keys(node: &Node, table: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut request = QueryRequest {
        sql: Some(format!("SELECT key FROM {table}")),
        ..QueryRequest::default()
    };
    loop {
        let Ok(output) = node.query(request).await else {
            return keys;
        };
        keys.extend(output.rows.iter().map(|row| match &row[0] {
            ebb_query::Value::Text(key) => key.to_string(),
            other => panic!("a key that is not text: {other:?}"),
        }));
        let Some(cursor) = output.cursor else {
            return keys;
        };
        request = QueryRequest {
            cursor: Some(cursor),
            ..QueryRequest::default()
        };
    }
}

/// Keys of `table` over HTTP, page after page; none while it does not
/// exist.
fn keys_over_http(url: &str, table: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut body = serde_json::json!({ "sql": format!("SELECT key FROM {table}") });
    loop {
        let answer = call(
            "POST",
            &format!("{url}/v1/sql"),
            &[],
            Some(body.to_string().as_bytes()),
        );
        if answer.status != 200 {
            return keys;
        }
        let page = answer.json();
        keys.extend(
            page["rows"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|row| row[0].as_str().map(str::to_string)),
        );
        match page["cursor"].as_str() {
            Some(cursor) => body = serde_json::json!({ "cursor": cursor }),
            None => return keys,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_winning_write_and_delete_of_covered_keys_reaches_the_handler() {
    let node = node(4).await;
    install(&node, "flaky", "ebb_test_flaky").await;
    bind_change(
        &node,
        "orders",
        "record",
        Some(serde_json::json!({"table": "seen"})),
        Some("o/"),
        10,
    )
    .await;
    let mut expected = BTreeSet::new();
    for i in 0..50 {
        let key = format!("o/{}", i % 10);
        let version = put(&node, "orders", &key, &format!("v{i}")).await;
        expected.insert(format!("{key}@{version}"));
    }
    put(&node, "orders", "x/1", "not covered").await;
    let deleted = node
        .table("orders")
        .unwrap()
        .delete("o/3", Durability::Wal)
        .await
        .unwrap()
        .unwrap();
    expected.insert(format!("o/3@{deleted}"));
    // Nothing visible to delete: no write, no event.
    assert!(
        node.table("orders")
            .unwrap()
            .delete("o/99", Durability::Wal)
            .await
            .unwrap()
            .is_none()
    );
    eventually(Duration::from_secs(20), "every event recorded", || async {
        keys(&node, "seen").await.len() >= expected.len()
    })
    .await;
    assert_eq!(keys(&node, "seen").await, expected, "one per winning write");
    assert_eq!(
        value(&node, "seen", &format!("o/3@{deleted}"))
            .await
            .as_deref(),
        Some("deleted")
    );
    // The handler's writes commit before its batch is settled (acks come
    // after the actions): the count is read once the outbox is empty.
    eventually(Duration::from_secs(10), "an empty outbox", || async {
        node.handler_status(HandlerKind::Change, "orders")
            .await
            .unwrap()
            .queue
            .pending
            == 0
    })
    .await;
    let status = node
        .handler_status(HandlerKind::Change, "orders")
        .await
        .unwrap();
    assert_eq!(status.handled, expected.len() as u64);
    assert_eq!((status.dead_letters, status.failed_calls), (0, 0));
    assert_eq!(status.binding.unwrap().prefix.as_deref(), Some("o/"));
    // Expiry and change handlers of one table are apart.
    assert!(node.expiry_status("orders").await.is_err());

    // Unbound, the table's writes write no events.
    node.unbind_handler(HandlerKind::Change, "orders", false)
        .await
        .unwrap();
    put(&node, "orders", "o/1", "after").await;
    assert_eq!(keys(&node, "seen").await, expected);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_writing_to_its_own_table_does_not_trigger_itself() {
    let node = node(2).await;
    install(&node, "flaky", "ebb_test_flaky").await;
    bind_change(&node, "notes", "echo", None, None, 10).await;
    for i in 0..5 {
        put(&node, "notes", &format!("n{i}"), "hello").await;
    }
    let echoed_once = || async {
        let mut all = true;
        for i in 0..5 {
            all &= value(&node, "notes", &format!("n{i}")).await.as_deref() == Some("hello!");
        }
        all
    };
    eventually(Duration::from_secs(10), "every note echoed", echoed_once).await;
    // Were the echo's own writes events, the handler would run again
    // within a few ms (linger 2 ms); 500 ms is far past that.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(echoed_once().await, "each note echoed once, not again");
    let status = node
        .handler_status(HandlerKind::Change, "notes")
        .await
        .unwrap();
    assert_eq!(status.handled, 5, "one event per client write");
    assert_eq!(status.queue.pending, 0);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_materialized_counter_counts_every_write_once() {
    let node = node(4).await;
    install(&node, "flaky", "ebb_test_flaky").await;
    bind_change(&node, "views", "count_writes", None, None, 10).await;
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let node = node.clone();
            tokio::spawn(async move {
                for i in 0..25 {
                    put(&node, "views", &format!("page{}", (w + i) % 5), "v").await;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let count = |key: String| {
        let node = node.clone();
        async move {
            value(&node, "counts", &key)
                .await
                .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
                .and_then(|json| json["count"].as_u64())
                .unwrap_or(0)
        }
    };
    eventually(Duration::from_secs(20), "100 writes counted", || async {
        let mut total = 0;
        for page in 0..5 {
            total += count(format!("page{page}")).await;
        }
        total == 100
    })
    .await;
    for page in 0..5 {
        assert_eq!(count(format!("page{page}")).await, 20, "page{page}");
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_change_events_dead_letter_and_redrive_after_the_fix() {
    let node = node(2).await;
    install(&node, "flaky", "ebb_test_flaky").await;
    // A target table name the write path refuses: every call fails.
    let bad = Some(serde_json::json!({"table": "not a table"}));
    bind_change(&node, "jobs", "record", bad, None, 2).await;
    for i in 0..3 {
        put(&node, "jobs", &format!("j{i}"), "run").await;
    }
    eventually(Duration::from_secs(20), "three dead letters", || async {
        node.handler_status(HandlerKind::Change, "jobs")
            .await
            .unwrap()
            .dead_letters
            == 3
    })
    .await;
    let page = node
        .handler_dead_letters(HandlerKind::Change, "jobs", None, 10)
        .await
        .unwrap();
    assert_eq!(page.events.len(), 3);
    assert!(page.events.iter().all(|e| e.change_event().is_some()));
    assert!(
        node.dead_letters("jobs", None, 10)
            .await
            .unwrap()
            .events
            .is_empty(),
        "the expiry handler's dead letters are apart"
    );
    bind_change(
        &node,
        "jobs",
        "record",
        Some(serde_json::json!({"table": "done"})),
        None,
        2,
    )
    .await;
    let (moved, more) = node
        .redrive_handler(HandlerKind::Change, "jobs", None)
        .await
        .unwrap();
    assert_eq!((moved, more), (3, false));
    eventually(Duration::from_secs(20), "three jobs recorded", || async {
        keys(&node, "done").await.len() == 3
    })
    .await;
    node.shutdown().await.unwrap();
}

fn ebb(url: &str, args: &[&str]) -> (i32, String) {
    let output = std::process::Command::new(ebb_bin())
        .arg("--url")
        .arg(url)
        .args(args)
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap_or(-1), text)
}

#[test]
fn change_handlers_over_http_and_ebb_trigger() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let url = &server.url;
    let upload = call(
        "PUT",
        &format!("{url}/v1/plugins/flaky"),
        &[],
        Some(&module("ebb_test_flaky")),
    );
    assert_eq!(upload.status, 200, "{}", upload.text());
    let functions = upload.json()["functions"].clone();
    let record = functions
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "record")
        .unwrap();
    assert_eq!(record["kind"], "change_handler", "{functions}");
    let route = format!("{url}/v1/tables/orders/change-handler");
    // An expiry handler is not a change handler, and the other way round.
    let wrong = call(
        "PUT",
        &route,
        &[],
        Some(br#"{"plugin": "flaky", "function": "copy"}"#),
    );
    assert_eq!(wrong.status, 400, "{}", wrong.text());
    assert!(
        wrong.text().contains("not a change handler"),
        "{}",
        wrong.text()
    );
    let wrong = call(
        "PUT",
        &format!("{url}/v1/tables/orders/expiry-handler"),
        &[],
        Some(br#"{"plugin": "flaky", "function": "record", "prefix": "o/"}"#),
    );
    assert_eq!(wrong.status, 400, "{}", wrong.text());
    assert!(
        wrong
            .text()
            .contains("prefix applies to change handlers only")
    );
    let missing = call("GET", &route, &[], None);
    assert_eq!(missing.status, 404);
    assert!(
        missing.text().contains("no change handler"),
        "{}",
        missing.text()
    );

    let (code, out) = ebb(
        url,
        &[
            "trigger",
            "bind",
            "orders",
            "flaky",
            "record",
            "--prefix",
            "o/",
            "--config",
            r#"{"table": "seen"}"#,
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("bound: orders writes of keys starting with \"o/\" run flaky.record"),
        "{out}"
    );
    let bound = call("GET", &route, &[], None).json();
    assert_eq!(bound["binding"]["prefix"], "o/", "{bound}");
    assert_eq!(bound["binding"]["config"]["table"], "seen", "{bound}");
    let put = call(
        "PUT",
        &format!("{url}/v1/tables/orders/keys/o%2F1"),
        &[],
        Some(b"first"),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    let version = put.header("ebb-version").unwrap().to_string();
    // Handled is counted when the batch settles, after the handler's write
    // commits: wait for both.
    wait_until(
        Duration::from_secs(20),
        "the write recorded and settled",
        || {
            keys_over_http(url, "seen").contains(&format!("o/1@{version}"))
                && call("GET", &route, &[], None).json()["status"]["outbox_depth"] == 0
        },
    );
    let (code, out) = ebb(url, &["trigger", "status", "orders"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("flaky.record") && out.contains("prefix      \"o/\""),
        "{out}"
    );
    assert!(out.contains("handled     1 events"), "{out}");
    let metrics = call("GET", &format!("{url}/metrics"), &[], None).text();
    assert!(
        metrics.contains("ebb_change_handled_total{table=\"orders\"} 1"),
        "{metrics}"
    );
    let (code, out) = ebb(url, &["trigger", "dead-letters", "orders"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("(0 dead letters)"), "{out}");
    // Deleting the plugin while bound is refused, naming the change handler.
    let delete = call("DELETE", &format!("{url}/v1/plugins/flaky"), &[], None);
    assert_eq!(delete.status, 409, "{}", delete.text());
    assert!(
        delete.text().contains("orders (change)"),
        "{}",
        delete.text()
    );
    let (code, out) = ebb(url, &["trigger", "unbind", "orders"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("unbound: orders no longer runs flaky.record"),
        "{out}"
    );
    assert_eq!(call("GET", &route, &[], None).status, 404);
    assert_eq!(server.stop(), 0);
}

#[test]
fn sigkill_under_write_load_loses_no_acknowledged_writes_event() {
    let dir = tempfile::tempdir().unwrap();
    let acknowledged: Arc<parking_lot::Mutex<Vec<String>>> = Arc::default();
    {
        let server = Server::start(dir.path(), &[]);
        let url = server.url.clone();
        let upload = call(
            "PUT",
            &format!("{url}/v1/plugins/flaky"),
            &[],
            Some(&module("ebb_test_flaky")),
        );
        assert_eq!(upload.status, 200, "{}", upload.text());
        let bind = call(
            "PUT",
            &format!("{url}/v1/tables/t/change-handler"),
            &[],
            Some(br#"{"plugin": "flaky", "function": "record", "max_batch": 64}"#),
        );
        assert_eq!(bind.status, 200, "{}", bind.text());
        // Four writers put keys at `wal` until the server dies; each keeps
        // the versions acknowledged to it.
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let (url, stop, acknowledged) = (url.clone(), stop.clone(), acknowledged.clone());
                std::thread::spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) && i < 5_000 {
                        let key = format!("w{w}k{}", i % 200);
                        let answer = std::panic::catch_unwind(|| {
                            call(
                                "PUT",
                                &format!("{url}/v1/tables/t/keys/{key}"),
                                &[],
                                Some(format!("v{i}").as_bytes()),
                            )
                        });
                        match answer {
                            Ok(answer) if answer.status == 200 => {
                                let version = answer.header("ebb-version").unwrap().to_string();
                                acknowledged.lock().push(format!("{key}@{version}"));
                            }
                            _ => return, // The server is gone.
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        wait_until(
            Duration::from_secs(30),
            "writes handled while writing",
            || {
                let status = call(
                    "GET",
                    &format!("{url}/v1/tables/t/change-handler"),
                    &[],
                    None,
                );
                acknowledged.lock().len() >= 1_000
                    && status.json()["status"]["handled"].as_u64().unwrap_or(0) >= 200
            },
        );
        drop(server); // SIGKILL, the writers mid-write
        stop.store(true, Ordering::Relaxed);
        for writer in writers {
            writer.join().unwrap();
        }
    }
    let acknowledged = acknowledged.lock().clone();
    assert!(acknowledged.len() >= 1_000);
    let server = Server::start(dir.path(), &[]);
    let url = &server.url;
    wait_until(
        Duration::from_secs(60),
        "every acknowledged write's event handled after the restart",
        || {
            let seen = keys_over_http(url, "seen");
            acknowledged.iter().all(|write| seen.contains(write))
        },
    );
    wait_until(Duration::from_secs(10), "an empty outbox", || {
        call(
            "GET",
            &format!("{url}/v1/tables/t/change-handler"),
            &[],
            None,
        )
        .json()["status"]["outbox_depth"]
            == 0
    });
    assert_eq!(server.stop(), 0);
}
