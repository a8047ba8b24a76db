//! Memory accounting and the memory bound of a real `ebb serve`: puts past
//! `--max-memory` are refused with 507 `memory_full` and leave nothing
//! behind, while reads, deletes and health keep working; `/metrics` and
//! `GET /v1/tables` report records and memory per table and the process's
//! and RocksDB's memory. On a full embedded node, expiry and its handler's
//! puts keep working.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::expiry::{bind, config, eventually, install, live, put_in, value};
use common::{Server, call, wait_until};
use ebb_host::node::memory::MaxMemory;
use ebb_host::store::MemoryStore;
use ebb_host::{Durability, Error, Node, PutOptions};
use serde_json::json;

const MIB: u64 = 1 << 20;

fn key_url(server: &Server, table: &str, key: &str) -> String {
    format!("{}/v1/tables/{table}/keys/{key}", server.url)
}

fn health(server: &Server) -> serde_json::Value {
    call("GET", &format!("{}/health", server.url), &[], None).json()
}

#[test]
fn puts_past_max_memory_are_refused_and_reads_and_deletes_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    // What an idle node holds at boot, measured by the node itself.
    let unbounded = Server::start(dir.path(), &["--max-memory", "none"]);
    let memory = health(&unbounded)["memory"].clone();
    assert_eq!(memory["max_memory_bytes"], json!(null), "{memory}");
    assert_eq!(memory["full"], json!(false), "{memory}");
    let boot_resident = memory["resident_bytes"]
        .as_u64()
        .expect("resident on Linux");
    assert_eq!(unbounded.stop(), 0);

    let bound = boot_resident + 64 * MIB;
    let server = Server::start(dir.path(), &["--max-memory", &bound.to_string()]);
    let memory = health(&server)["memory"].clone();
    assert_eq!(memory["max_memory_bytes"], json!(bound), "{memory}");

    let put = call("PUT", &key_url(&server, "big", "keep"), &[], Some(b"kept"));
    assert_eq!(put.status, 200, "{}", put.text());
    let value = vec![b'v'; MIB as usize];
    let mut written = Vec::new();
    let refused = loop {
        assert!(
            written.len() < 1000,
            "1000 MiB written without reaching a bound 64 MiB above boot"
        );
        let key = format!("k{}", written.len());
        let put = call(
            "PUT",
            &format!("{}?durability=memory", key_url(&server, "big", &key)),
            &[],
            Some(&value),
        );
        match put.status {
            200 => written.push(key),
            507 => break (key, put),
            other => panic!("unexpected {other}: {}", put.text()),
        }
    };
    let (refused_key, answer) = refused;
    let error = &answer.json()["error"];
    assert_eq!(error["code"], "memory_full", "{error}");
    assert_eq!(error["limit"], "--max-memory", "{error}");
    assert_eq!(error["max_memory_bytes"], json!(bound), "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("--max-memory") && message.contains("Delete data"),
        "{message}"
    );

    // Nothing of the refused put was applied; earlier writes are readable.
    let get = call("GET", &key_url(&server, "big", &refused_key), &[], None);
    assert_eq!(get.status, 404, "{}", get.text());
    let get = call("GET", &key_url(&server, "big", "keep"), &[], None);
    assert_eq!((get.status, get.body.as_slice()), (200, b"kept".as_slice()));

    // Health shows the refusal while writes are being refused: retry a
    // refused put until a health answer lands within its sample interval.
    wait_until(
        Duration::from_secs(10),
        "health showing memory full",
        || {
            let put = call("PUT", &key_url(&server, "big", "more"), &[], Some(&value));
            assert_eq!(put.status, 507, "{}", put.text());
            let health = health(&server);
            health["memory"]["full"] == json!(true) && health["status"] == "degraded"
        },
    );
    let memory = health(&server)["memory"].clone();
    assert!(memory["refused_writes"].as_u64().unwrap() >= 2, "{memory}");
    assert!(
        memory["resident_bytes"].as_u64().unwrap() > boot_resident,
        "{memory}"
    );

    // In a batch, the put is refused and the delete applied.
    let batch = call(
        "POST",
        &format!("{}/v1/tables/big/batch", server.url),
        &[("content-type", "application/json")],
        Some(
            json!([
                {"op": "put", "key": "batched", "value": "x".repeat(MIB as usize)},
                {"op": "delete", "key": written[0]},
            ])
            .to_string()
            .as_bytes(),
        ),
    );
    assert_eq!(batch.status, 200, "{}", batch.text());
    let results = batch.json()["results"].clone();
    assert_eq!(results[0]["status"], 507, "{results}");
    assert_eq!(results[0]["error"]["code"], "memory_full", "{results}");
    assert_eq!(results[1]["status"], 200, "{results}");
    let get = call("GET", &key_url(&server, "big", "batched"), &[], None);
    assert_eq!(get.status, 404);

    // Deletes go through one by one too.
    for key in &written[1..] {
        let delete = call("DELETE", &key_url(&server, "big", key), &[], None);
        assert_eq!(delete.status, 200, "{}", delete.text());
    }
    let tables = call("GET", &format!("{}/v1/tables", server.url), &[], None).json();
    assert_eq!(tables["tables"][0]["live_records"], 1, "{tables}");
    assert_eq!(
        tables["tables"][0]["tombstones"],
        json!(written.len()),
        "{tables}"
    );
    assert_eq!(server.stop(), 0);
}

/// The value of the sample `series` (name and labels, exactly) in `text`.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("metrics lack {series}:\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn metrics_and_tables_report_records_and_memory() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--max-memory", "2GiB"]);
    for key in ["a", "b", "c"] {
        let put = call("PUT", &key_url(&server, "t", key), &[], Some(&[7; 1000]));
        assert_eq!(put.status, 200, "{}", put.text());
    }
    let delete = call("DELETE", &key_url(&server, "t", "a"), &[], None);
    assert_eq!(delete.status, 200);
    let put = call("PUT", &key_url(&server, "gone", "x"), &[], Some(b"1"));
    assert_eq!(put.status, 200);
    let delete = call("DELETE", &key_url(&server, "gone", "x"), &[], None);
    assert_eq!(delete.status, 200);

    let text = call("GET", &format!("{}/metrics", server.url), &[], None).text();
    assert_eq!(
        sample(&text, r#"ebb_table_records{table="t",state="live"}"#),
        2.0
    );
    assert_eq!(
        sample(&text, r#"ebb_table_records{table="t",state="tombstone"}"#),
        1.0
    );
    // A table holding only tombstones still holds memory and is reported.
    assert_eq!(
        sample(&text, r#"ebb_table_records{table="gone",state="live"}"#),
        0.0
    );
    assert_eq!(
        sample(
            &text,
            r#"ebb_table_records{table="gone",state="tombstone"}"#
        ),
        1.0
    );
    let table_bytes = sample(&text, r#"ebb_table_memory_bytes{table="t"}"#);
    assert!(
        (2000.0..1_000_000.0).contains(&table_bytes),
        "{table_bytes}"
    );
    let resident = sample(&text, "ebb_process_resident_bytes");
    assert!((MIB as f64..2e10).contains(&resident), "{resident}");
    assert_eq!(sample(&text, "ebb_memory_limit_bytes"), (2u64 << 30) as f64);
    assert_eq!(sample(&text, "ebb_memory_refused_writes_total"), 0.0);
    // The writes were acknowledged at `wal`: they are in a memtable.
    assert!(sample(&text, "ebb_rocksdb_memtable_bytes") > 0.0, "{text}");
    sample(&text, "ebb_rocksdb_block_cache_bytes");
    sample(&text, "ebb_rocksdb_live_sst_bytes");

    let tables = call("GET", &format!("{}/v1/tables", server.url), &[], None).json();
    let t = &tables["tables"][0];
    assert_eq!(t["name"], "t", "only tables with live records: {tables}");
    assert_eq!(tables["tables"].as_array().unwrap().len(), 1, "{tables}");
    assert_eq!(
        (t["live_records"].clone(), t["tombstones"].clone()),
        (json!(2), json!(1))
    );
    assert_eq!(t["memory_bytes"].as_f64().unwrap(), table_bytes);

    let health = health(&server);
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["memory"]["full"], false, "{health}");
    assert_eq!(health["memory"]["max_memory_bytes"], json!(2u64 << 30));
    assert_eq!(server.stop(), 0);
}

#[test]
fn a_bad_max_memory_is_a_usage_error_that_says_what_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(common::ebb_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--max-memory", "lots"])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--max-memory") && stderr.contains("512MiB") && stderr.contains("80%"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_node_still_deletes_expires_and_applies_expiry_handler_puts() {
    let store = Arc::new(MemoryStore::new());
    let node = Node::open_with_store(config(2).max_memory(MaxMemory::Unbounded), store.clone())
        .await
        .unwrap();
    install(&node, "archive", "ebb_plugin_archive").await;
    bind(&node, "sessions", "archive", 256, 10).await;
    put_in(&node, "sessions", "s1", "ada", 1000).await;
    put_in(&node, "sessions", "s2", "bob", 60_000).await;
    node.shutdown().await.unwrap();

    // A bound of one byte: every client put is refused.
    let node = Node::open_with_store(config(2).max_memory(MaxMemory::Bytes(1)), store)
        .await
        .unwrap();
    let sessions = node.table("sessions").unwrap();
    let refused = sessions
        .put("s3", "cy", PutOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::MemoryFull(_)), "{refused}");
    assert!(refused.to_string().contains("--max-memory"), "{refused}");
    assert_eq!(sessions.get("s3").await.unwrap(), None, "nothing applied");
    let health = node.health().await;
    assert!(health.memory.full && !health.is_healthy(), "{health:?}");
    assert_eq!(health.memory.limit_bytes, Some(1));

    // Deletes go through; s1 expires and the handler's put archives it.
    let deleted = sessions.delete("s2", Durability::Wal).await.unwrap();
    assert!(deleted.is_some(), "the delete was applied");
    eventually(Duration::from_secs(10), "s1 archived", || async {
        live(&node, "sessions_archive").await == 1
    })
    .await;
    assert_eq!(
        value(&node, "sessions_archive", "s1").await.as_deref(),
        Some("ada")
    );
    assert_eq!(live(&node, "sessions").await, 0);
    node.shutdown().await.unwrap();
}
