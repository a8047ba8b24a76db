//! Hostile and malformed plugins against a running server: each is refused
//! or contained with its specific error, and the server keeps answering,
//! healthy plugins included. Plugins are written against the raw ABI in WAT,
//! without the SDK (ABI conformance).

use crate::common;

use common::{Server, call};
use ebb_proto::Message;
use ebb_proto::plugin::v1 as abi;
use serde_json::{Value, json};

fn escape(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

fn manifest(abi_version: u32) -> Vec<u8> {
    abi::Manifest {
        abi_version,
        name: "raw".into(),
        version: "1.0.0".into(),
        functions: vec![abi::FunctionDecl {
            name: "f".into(),
            kind: abi::FunctionKind::Scalar as i32,
            arg_count: 1,
            description: "test function".into(),
        }],
    }
    .encode_to_vec()
}

fn answer_42() -> Vec<u8> {
    abi::CallResponse {
        result: Some(abi::call_response::Result::Scalar(abi::ScalarResult {
            values: vec![abi::Value {
                kind: Some(abi::value::Kind::Int(42)),
            }],
        })),
    }
    .encode_to_vec()
}

/// A raw ABI v1 module: `call_body` is the body of `ebb_call` (returns i64).
fn module(
    extra: &str,
    abi_version: i32,
    manifest: &[u8],
    call_body: &str,
    response: &[u8],
) -> Vec<u8> {
    let wat = format!(
        r#"(module
  {extra}
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 1024) "{manifest}")
  (data (i32.const 4096) "{response}")
  (func (export "ebb_abi_version") (result i32) (i32.const {abi_version}))
  (func (export "ebb_alloc") (param i32) (result i32) (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (local.get 0)))
    (local.get $p))
  (func (export "ebb_dealloc") (param i32 i32) (global.set $heap (i32.const 8192)))
  (func (export "ebb_manifest") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const {manifest_len})))
  (func $recurse (param i32) (result i32) (call $recurse (i32.add (local.get 0) (i32.const 1))))
  (func (export "ebb_call") (param i32 i32) (result i64) {call_body})
)"#,
        manifest = escape(manifest),
        manifest_len = manifest.len(),
        response = escape(response),
    );
    wat::parse_str(wat).expect("valid WAT")
}

fn respond(response_len: usize) -> String {
    format!("(i64.or (i64.shl (i64.const 4096) (i64.const 32)) (i64.const {response_len}))")
}

fn healthy() -> Vec<u8> {
    let response = answer_42();
    module("", 1, &manifest(1), &respond(response.len()), &response)
}

fn upload(server: &Server, name: &str, bytes: &[u8]) -> common::Answer {
    call(
        "PUT",
        &format!("{}/v1/plugins/{name}", server.url),
        &[],
        Some(bytes),
    )
}

fn sql(server: &Server, text: &str) -> common::Answer {
    let body = json!({ "sql": text }).to_string();
    call(
        "POST",
        &format!("{}/v1/sql", server.url),
        &[("content-type", "application/json")],
        Some(body.as_bytes()),
    )
}

fn server_still_serves(server: &Server) {
    let answer = sql(server, "SELECT good.f(key), count(*) FROM t GROUP BY 1");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["rows"], json!([[42, 1]]));
    let get = call(
        "GET",
        &format!("{}/v1/tables/t/keys/only", server.url),
        &[],
        None,
    );
    assert_eq!(get.status, 200);
}

#[test]
fn a_raw_abi_plugin_works_in_sql() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    call(
        "PUT",
        &format!("{}/v1/tables/t/keys/only", server.url),
        &[],
        Some(b"v"),
    );
    let answer = upload(&server, "good", &healthy());
    assert_eq!(answer.status, 200, "{}", answer.text());
    let body: Value = answer.json();
    assert_eq!(body["version"], 1);
    assert_eq!(body["functions"][0]["name"], "f");
    assert_eq!(body["functions"][0]["kind"], "scalar");
    assert_eq!(body["sha256"].as_str().unwrap().len(), 64);
    let rows = sql(
        &server,
        "SELECT key, good.f(value) AS answer FROM t WHERE good.f(key) = 42",
    );
    assert_eq!(rows.status, 200, "{}", rows.text());
    assert_eq!(rows.json()["rows"], json!([["only", 42]]));
    let explain = sql(&server, "EXPLAIN SELECT good.f(key) FROM t");
    assert!(
        explain.text().contains("plugin calls: good.f"),
        "{}",
        explain.text()
    );
    for (text, says) in [
        ("SELECT nope.f(key) FROM t", "unknown plugin nope"),
        ("SELECT good.g(key) FROM t", "has no function g"),
        ("SELECT good.f(key, 1) FROM t", "takes 1 arguments"),
        (
            "SELECT count(*) FROM t WHERE good.f(key, key) = 1",
            "takes 1",
        ),
    ] {
        let answer = sql(&server, text);
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (400, "invalid_sql"),
            "{text}: {}",
            answer.text()
        );
        assert!(answer.text().contains(says), "{text}: {}", answer.text());
    }
    // The same bytes again store nothing and answer the current version.
    let again = upload(&server, "good", &healthy());
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(
        (
            again.json()["version"].clone(),
            again.json()["unchanged"].clone()
        ),
        (json!(1), json!(true))
    );
    // Other bytes create version 2; the listing and detail show it.
    let replaced = upload(&server, "good", &answering(7)).json();
    assert_eq!(
        (replaced["version"].clone(), replaced["unchanged"].clone()),
        (json!(2), json!(false))
    );
    let detail = call("GET", &format!("{}/v1/plugins/good", server.url), &[], None).json();
    assert_eq!(detail["versions"].as_array().unwrap().len(), 2);
    let list = call("GET", &format!("{}/v1/plugins", server.url), &[], None).json();
    assert_eq!(list["plugins"][0]["name"], "good");
    assert_eq!(server.stop(), 0);
}

#[test]
fn bad_uploads_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--max-plugin-bytes", "20000"]);
    call(
        "PUT",
        &format!("{}/v1/tables/t/keys/only", server.url),
        &[],
        Some(b"v"),
    );
    assert_eq!(upload(&server, "good", &healthy()).status, 200);
    let response = answer_42();
    let cases: Vec<(&str, Vec<u8>, u16, &str, &str)> = vec![
        ("not wasm", b"hello, world".to_vec(), 422, "plugin_invalid", "not a WebAssembly module"),
        ("broken wasm", b"\0asm\x01\0\0\0\x99".to_vec(), 422, "plugin_invalid", "not a valid WebAssembly"),
        (
            "wasi import",
            module(r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#, 1, &manifest(1), &respond(response.len()), &response),
            422,
            "plugin_invalid",
            "forbidden import wasi_snapshot_preview1.fd_write",
        ),
        (
            "other import",
            module(r#"(import "env" "now" (func (result i64)))"#, 1, &manifest(1), &respond(response.len()), &response),
            422,
            "plugin_invalid",
            "forbidden import env.now",
        ),
        (
            "ebb.get of the wrong type",
            module(r#"(import "ebb" "get" (func (param i32) (result i32)))"#, 1, &manifest(1), &respond(response.len()), &response),
            422,
            "plugin_invalid",
            "forbidden import ebb.get",
        ),
        ("wrong abi", module("", 2, &manifest(1), &respond(response.len()), &response), 422, "plugin_invalid", "ABI version 2"),
        ("wrong manifest abi", module("", 1, &manifest(7), &respond(response.len()), &response), 422, "plugin_invalid", "manifest says ABI version 7"),
        (
            "missing export",
            wat::parse_str(r#"(module (memory (export "memory") 1) (func (export "ebb_abi_version") (result i32) (i32.const 1)))"#).unwrap(),
            422,
            "plugin_invalid",
            "missing export ebb_alloc",
        ),
        ("garbage manifest", module("", 1, b"\xff\xff\xff", &respond(response.len()), &response), 422, "plugin_invalid", "malformed Manifest"),
        ("oversized", vec![0u8; 25_000], 413, "too_large", "limit"),
    ];
    for (what, bytes, status, code, says) in cases {
        let answer = upload(&server, "bad", &bytes);
        assert_eq!(answer.status, status, "{what}: {}", answer.text());
        assert_eq!(answer.code(), code, "{what}");
        assert!(answer.text().contains(says), "{what}: {}", answer.text());
    }
    let reserved = upload(&server, "EBB_good", &healthy());
    assert_eq!(
        (reserved.status, reserved.code().as_str()),
        (422, "plugin_invalid"),
        "{}",
        reserved.text()
    );
    assert!(reserved.text().contains("reserved"), "{}", reserved.text());
    assert_eq!(
        call("GET", &format!("{}/v1/plugins/bad", server.url), &[], None).status,
        404,
        "nothing was installed"
    );
    server_still_serves(&server);
    assert_eq!(server.stop(), 0);
}

#[test]
fn hostile_calls_fail_with_plugin_error_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    call(
        "PUT",
        &format!("{}/v1/tables/t/keys/only", server.url),
        &[],
        Some(b"v"),
    );
    assert_eq!(upload(&server, "good", &healthy()).status, 200);
    let response = answer_42();
    let garbage = b"\xff\xff\xff\xff".to_vec();
    let wrong_count = abi::CallResponse {
        result: Some(abi::call_response::Result::Scalar(abi::ScalarResult {
            values: vec![],
        })),
    }
    .encode_to_vec();
    let guest_error = abi::CallResponse {
        result: Some(abi::call_response::Result::Error("bad input".into())),
    }
    .encode_to_vec();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "infinite loop",
            module(
                "",
                1,
                &manifest(1),
                "(loop $l (br $l)) (unreachable)",
                &response,
            ),
            "deadline",
        ),
        (
            "memory growth",
            module(
                "",
                1,
                &manifest(1),
                "(if (i32.eq (memory.grow (i32.const 2000)) (i32.const -1)) (then (unreachable))) (i64.const 0)",
                &response,
            ),
            "memory cap",
        ),
        (
            "recursion",
            module(
                "",
                1,
                &manifest(1),
                "(drop (call $recurse (i32.const 0))) (i64.const 0)",
                &response,
            ),
            "trapped",
        ),
        (
            "trap",
            module("", 1, &manifest(1), "(unreachable)", &response),
            "trapped",
        ),
        (
            "ebb.get of a request outside memory",
            module(
                r#"(import "ebb" "get" (func $get (param i32 i32) (result i64)))"#,
                1,
                &manifest(1),
                "(drop (call $get (i32.const 100000000) (i32.const 10))) (i64.const 0)",
                &response,
            ),
            "ebb.get: request outside memory",
        ),
        (
            "huge response",
            module("", 1, &manifest(1), "(i64.const 4294967295)", &response),
            "response limit",
        ),
        (
            "out of bounds response",
            module(
                "",
                1,
                &manifest(1),
                "(i64.or (i64.shl (i64.const 100000000) (i64.const 32)) (i64.const 10))",
                &response,
            ),
            "outside memory",
        ),
        (
            "malformed response",
            module("", 1, &manifest(1), &respond(garbage.len()), &garbage),
            "malformed",
        ),
        (
            "wrong value count",
            module(
                "",
                1,
                &manifest(1),
                &respond(wrong_count.len()),
                &wrong_count,
            ),
            "0 values for 1 rows",
        ),
        (
            "guest error",
            module(
                "",
                1,
                &manifest(1),
                &respond(guest_error.len()),
                &guest_error,
            ),
            "bad input",
        ),
    ];
    for (what, bytes, says) in cases {
        let installed = upload(&server, "evil", &bytes);
        assert_eq!(installed.status, 200, "{what}: {}", installed.text());
        let answer = sql(&server, "SELECT evil.f(key) FROM t");
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (422, "plugin_error"),
            "{what}: {}",
            answer.text()
        );
        let message = answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            message.contains("evil.f") && message.contains(says),
            "{what}: {message}"
        );
        server_still_serves(&server);
    }
    let metrics = call("GET", &format!("{}/metrics", server.url), &[], None).text();
    for expected in [
        r#"ebb_plugin_errors_total{plugin="evil",function="f",cause="guest_error"} 1"#,
        r#"ebb_plugin_calls_total{plugin="evil",function="f"} 1"#,
        r#"ebb_plugin_rows_total{plugin="evil",function="f"} 1"#,
        r#"ebb_plugin_call_duration_seconds_count{plugin="good",function="f"}"#,
    ] {
        assert!(
            metrics.contains(expected),
            "metrics lack {expected}:\n{metrics}"
        );
    }
    assert_eq!(
        call(
            "DELETE",
            &format!("{}/v1/plugins/evil", server.url),
            &[],
            None
        )
        .status,
        200
    );
    assert_eq!(
        call(
            "DELETE",
            &format!("{}/v1/plugins/evil", server.url),
            &[],
            None
        )
        .status,
        404
    );
    assert_eq!(server.stop(), 0);
}

#[test]
fn plugins_survive_a_restart_without_recompiling() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    call(
        "PUT",
        &format!("{}/v1/tables/t/keys/only", server.url),
        &[],
        Some(b"v"),
    );
    assert_eq!(upload(&server, "good", &healthy()).status, 200);
    assert_eq!(server.stop(), 0);
    let server = Server::start(dir.path(), &[]);
    let detail = call("GET", &format!("{}/v1/plugins/good", server.url), &[], None).json();
    assert_eq!(
        detail["loaded_from_artifact"], true,
        "the stored artifact was used: {detail}"
    );
    server_still_serves(&server);
    assert_eq!(server.stop(), 0);
}

fn answering(value: i64) -> Vec<u8> {
    let response = abi::CallResponse {
        result: Some(abi::call_response::Result::Scalar(abi::ScalarResult {
            values: vec![abi::Value {
                kind: Some(abi::value::Kind::Int(value)),
            }],
        })),
    }
    .encode_to_vec();
    module("", 1, &manifest(1), &respond(response.len()), &response)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_a_plugin_does_not_change_a_running_query() {
    use std::sync::Arc;

    use ebb_host::store::MemoryStore;
    use ebb_host::{Durability, Node, NodeConfig, PutOptions, QueryBudgets, QueryRequest};

    // Pages of one record, so the query calls the plugin once per row, and
    // a one-slot channel, so the query is still running between rows.
    let config = NodeConfig::new("unused")
        .fragments(1)
        .query_budgets(QueryBudgets {
            page_visit_budget: 1,
            max_page_visit_budget: 1,
            ..QueryBudgets::default()
        });
    let store = Arc::new(MemoryStore::new());
    let node = Node::open_with_store(config, store.clone()).await.unwrap();
    let t = node.table("t").unwrap();
    for i in 0..50 {
        t.put(
            &format!("k{i:02}"),
            "v",
            PutOptions::default().durability(Durability::Memory),
        )
        .await
        .unwrap();
    }
    node.plugins()
        .install(&*store, "p", &answering(42))
        .unwrap();

    let (columns, _) = tokio::sync::oneshot::channel();
    let (rows_tx, mut rows) = tokio::sync::mpsc::channel(1);
    let query = QueryRequest {
        sql: Some("SELECT p.f(key) FROM t".into()),
        ..Default::default()
    };
    let running = {
        let node = node.clone();
        tokio::spawn(async move { node.query_stream(query, columns, rows_tx).await })
    };
    let first = rows.recv().await.unwrap();
    node.plugins().install(&*store, "p", &answering(7)).unwrap();
    let mut answers = vec![first];
    while let Some(row) = rows.recv().await {
        answers.push(row);
    }
    running.await.unwrap().unwrap();
    assert_eq!(answers.len(), 50);
    assert!(
        answers
            .iter()
            .all(|row| row[0] == ebb_query::Value::Int(42)),
        "the running query kept the version it was planned with"
    );
    let after = node
        .query(QueryRequest {
            sql: Some("SELECT p.f(key) FROM t LIMIT 1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        after.rows[0][0],
        ebb_query::Value::Int(7),
        "new queries use the new version"
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_uploads_keep_one_version_and_old_versions_are_pruned_with_their_blobs() {
    use std::sync::Arc;

    use ebb_host::plugin::PluginRegistry;
    use ebb_host::store::{Family, KvStore, MemoryStore};
    use ebb_host::{Node, NodeConfig};

    let mut config = NodeConfig::new("unused").fragments(1);
    config.plugins.max_versions = 3;
    let store = Arc::new(MemoryStore::new());
    let node = Node::open_with_store(config, store.clone()).await.unwrap();
    let first = node.install_plugin("p", &answering(0)).unwrap();
    assert_eq!((first.version.info.version, first.unchanged), (1, false));
    for _ in 0..150 {
        let again = node.install_plugin("P", &answering(0)).unwrap();
        assert_eq!((again.version.info.version, again.unchanged), (1, true));
    }
    assert_eq!(node.plugins().history("p").len(), 1, "no version was added");
    for answer in 1..=5 {
        let next = node.install_plugin("p", &answering(answer)).unwrap();
        assert_eq!(next.version.info.version, answer as u32 + 1);
    }
    let versions = |history: Vec<ebb_host::plugin::VersionInfo>| -> Vec<u32> {
        history.iter().map(|v| v.version).collect()
    };
    assert_eq!(versions(node.plugins().history("p")), [4, 5, 6]);
    // The current version's artifact is stored once its optimized code,
    // compiled in the background, is in.
    let current = node.plugins().get("p").unwrap();
    let started = std::time::Instant::now();
    while current.tier() != ebb_host::plugin::Tier::Optimized {
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let mut keys = Vec::new();
    store
        .scan_family(Family::Plugins, b"v1/p/", &mut |key, _| {
            keys.push(String::from_utf8_lossy(key).into_owned());
            Ok(())
        })
        .unwrap();
    keys.sort();
    assert_eq!(
        keys,
        [
            "v1/p/0000000004/info",
            "v1/p/0000000005/info",
            "v1/p/0000000006/artifact",
            "v1/p/0000000006/artifact_sha256",
            "v1/p/0000000006/info",
            "v1/p/0000000006/manifest",
            "v1/p/0000000006/module",
        ],
        "only the current version keeps its module, manifest, artifact and its hash; pruned versions are gone"
    );
    let reloaded = PluginRegistry::load(node.plugins().runtime().clone(), &*store).unwrap();
    assert_eq!(
        versions(reloaded.history("p")),
        [4, 5, 6],
        "a restart sees the same versions"
    );
    assert_eq!(reloaded.get("p").unwrap().info.version, 6);
    node.shutdown().await.unwrap();
}
