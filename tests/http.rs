//! The HTTP API end to end: a real `ebb serve` process, real HTTP over
//! loopback, real RocksDB.

use crate::common;

use std::time::Duration;

use common::{Server, call};
use serde_json::json;

fn key_url(server: &Server, table: &str, key: &str) -> String {
    format!("{}/v1/tables/{table}/keys/{key}", server.url)
}

#[test]
fn keys_can_be_put_read_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let url = key_url(&server, "users", "user%3A1");

    let put = call("PUT", &url, &[], Some(b"\x00binary\xff"));
    assert_eq!(put.status, 200, "{}", put.text());
    let version = put.json()["version"].as_str().unwrap().to_string();
    assert_eq!(put.header("ebb-version"), Some(version.as_str()));
    assert!(put.json()["expires_at_ms"].is_null());

    let get = call("GET", &url, &[], None);
    assert_eq!(get.status, 200);
    assert_eq!(get.body, b"\x00binary\xff");
    assert_eq!(get.header("ebb-version"), Some(version.as_str()));
    assert_eq!(get.header("content-type"), Some("application/octet-stream"));
    assert_eq!(get.header("ebb-expires-at"), None);
    assert_eq!(get.header("ebb-staleness-ms"), None);
    // A read allowing staleness: a single node is always current.
    let stale = call("GET", &format!("{url}?max_staleness_ms=250"), &[], None);
    assert_eq!(stale.body, b"\x00binary\xff");
    assert_eq!(stale.header("ebb-staleness-ms"), Some("0"));
    let unbounded = call(
        "GET",
        &format!("{url}?max_staleness_ms=86400001"),
        &[],
        None,
    );
    assert_eq!(unbounded.status, 400, "{}", unbounded.text());
    assert!(unbounded.text().contains("max_staleness_ms"));

    let tables = call("GET", &format!("{}/v1/tables", server.url), &[], None);
    assert_eq!(
        tables.json(),
        json!({"tables": [{"name": "users", "live_records": 1, "tombstones": 0,
                           "memory_bytes": tables.json()["tables"][0]["memory_bytes"]}]})
    );

    let delete = call("DELETE", &url, &[], None);
    assert_eq!(delete.status, 200);
    assert_ne!(
        delete.json()["version"],
        json!(version),
        "the tombstone has its own version"
    );
    let gone = call("GET", &url, &[], None);
    assert_eq!((gone.status, gone.code().as_str()), (404, "not_found"));
    assert!(
        gone.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("user:1")
    );
    let again = call("DELETE", &url, &[], None);
    assert_eq!((again.status, again.code().as_str()), (404, "not_found"));
    assert_eq!(server.stop(), 0);
}

#[test]
fn a_ttl_expires_the_key_for_readers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let url = key_url(&server, "sessions", "s1");
    let put = call(
        "PUT",
        &format!("{url}?ttl_ms=300&durability=sync"),
        &[],
        Some(b"v"),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    let deadline = put.json()["expires_at_ms"].as_u64().unwrap();
    let get = call("GET", &url, &[], None);
    assert_eq!(get.status, 200);
    assert_eq!(
        get.header("ebb-expires-at"),
        Some(deadline.to_string().as_str())
    );
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(call("GET", &url, &[], None).status, 404);

    let at = call("PUT", &format!("{url}?expires_at_ms=1"), &[], Some(b"v"));
    assert_eq!(at.status, 200);
    assert_eq!(
        call("GET", &url, &[], None).status,
        404,
        "a past deadline expires at once"
    );
    assert_eq!(server.stop(), 0);
}

#[test]
fn batches_report_each_item_in_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let batch_url = format!("{}/v1/tables/t/batch", server.url);
    call("PUT", &key_url(&server, "t", "old"), &[], Some(b"x"));

    let array = json!([
        {"op": "put", "key": "a", "value": "text"},
        {"op": "put", "key": "b", "value": {"base64": "AP8="}, "ttl_ms": 60000},
        {"op": "delete", "key": "old"},
        {"op": "delete", "key": "missing"},
        {"op": "frobnicate", "key": "c"},
        {"op": "put", "key": "", "value": "x"},
        {"key": "d", "value": "op defaults to put"}
    ]);
    let answer = call(
        "POST",
        &batch_url,
        &[("content-type", "application/json")],
        Some(array.to_string().as_bytes()),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    let results = answer.json()["results"].as_array().unwrap().clone();
    let statuses: Vec<u64> = results
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [200, 200, 200, 404, 400, 400, 200]);
    assert_eq!(results[4]["error"]["code"], "invalid_request");
    assert!(
        results[4]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("frobnicate")
    );
    assert_eq!(
        call("GET", &key_url(&server, "t", "a"), &[], None).body,
        b"text"
    );
    assert_eq!(
        call("GET", &key_url(&server, "t", "b"), &[], None).body,
        b"\x00\xff"
    );
    assert_eq!(
        call("GET", &key_url(&server, "t", "old"), &[], None).status,
        404
    );

    let ndjson = "{\"op\":\"put\",\"key\":\"n1\",\"value\":\"1\"}\n\nnot json\n{\"op\":\"put\",\"key\":\"n2\",\"value\":\"2\"}\n";
    let answer = call(
        "POST",
        &batch_url,
        &[("content-type", "application/x-ndjson")],
        Some(ndjson.as_bytes()),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    let statuses: Vec<u64> = answer.json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [200, 400, 200], "a bad line fails alone");
    assert_eq!(
        call("GET", &key_url(&server, "t", "n2"), &[], None).body,
        b"2"
    );
    assert_eq!(server.stop(), 0);
}

#[test]
fn data_written_over_http_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    for (i, durability) in ["memory", "wal", "sync"].iter().enumerate() {
        let url = format!(
            "{}?durability={durability}",
            key_url(&server, "t", &format!("k{i}"))
        );
        assert_eq!(
            call("PUT", &url, &[], Some(durability.as_bytes())).status,
            200
        );
    }
    assert_eq!(server.stop(), 0, "SIGTERM shuts down cleanly");
    let server = Server::start(dir.path(), &[]);
    for (i, durability) in ["memory", "wal", "sync"].iter().enumerate() {
        let get = call("GET", &key_url(&server, "t", &format!("k{i}")), &[], None);
        assert_eq!(
            (get.status, get.body.as_slice()),
            (200, durability.as_bytes())
        );
    }
    assert_eq!(server.stop(), 0);
}

#[test]
fn a_token_guards_v1_and_metrics_but_not_health() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--auth-token", "s3cret"]);
    let url = key_url(&server, "t", "k");
    let none = call("PUT", &url, &[], Some(b"v"));
    assert_eq!((none.status, none.code().as_str()), (401, "unauthorized"));
    assert_eq!(none.header("www-authenticate"), Some("Bearer"));
    let wrong = call(
        "GET",
        &format!("{}/v1/tables", server.url),
        &[("authorization", "Bearer nope")],
        None,
    );
    assert_eq!(wrong.status, 401);
    let right = call(
        "PUT",
        &url,
        &[("authorization", "Bearer s3cret")],
        Some(b"v"),
    );
    assert_eq!(right.status, 200);
    let read = call("GET", &url, &[("authorization", "Bearer s3cret")], None);
    assert_eq!(read.body, b"v");
    assert_eq!(
        call("GET", &format!("{}/health", server.url), &[], None).status,
        200
    );
    // /metrics names every table: it needs the token too (docs/security.md).
    let metrics = format!("{}/metrics", server.url);
    assert_eq!(call("GET", &metrics, &[], None).status, 401);
    assert_eq!(
        call("GET", &metrics, &[("authorization", "Bearer s3cret")], None).status,
        200
    );
    assert_eq!(server.stop(), 0);
}

#[test]
fn bad_input_gets_a_4xx_with_a_code_and_what_to_fix() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        &[
            "--max-value-bytes",
            "1024",
            "--max-batch-items",
            "3",
            "--max-body-bytes",
            "4096",
        ],
    );
    let base = &server.url;
    // (method, url, body, status, code, a hint the message must contain)
    type Case<'a> = (&'a str, String, Option<Vec<u8>>, u16, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        ("PUT", format!("{base}/v1/tables/bad-name/keys/k"), Some(b"v".to_vec()), 400, "invalid_request", "table name"),
        ("PUT", format!("{base}/v1/tables/ebb_meta/keys/k"), Some(b"v".to_vec()), 400, "invalid_request", "reserved"),
        ("PUT", format!("{base}/v1/tables/t/keys/{}", "k".repeat(4097)), Some(b"v".to_vec()), 413, "too_large", "4096"),
        ("PUT", format!("{base}/v1/tables/t/keys/k"), Some(vec![b'x'; 1025]), 413, "too_large", "--max-value-bytes"),
        ("PUT", format!("{base}/v1/tables/t/keys/k?ttl_ms=abc"), Some(b"v".to_vec()), 400, "invalid_request", "ttl_ms"),
        ("PUT", format!("{base}/v1/tables/t/keys/k?ttl_ms=0"), Some(b"v".to_vec()), 400, "invalid_request", "at least 1 ms"),
        ("PUT", format!("{base}/v1/tables/t/keys/k?ttl_ms=5&expires_at_ms=5"), Some(b"v".to_vec()), 400, "invalid_request", "not both"),
        ("PUT", format!("{base}/v1/tables/t/keys/k?durability=eventually"), Some(b"v".to_vec()), 400, "invalid_request", "memory, wal or sync"),
        ("PUT", format!("{base}/v1/tables/t/keys/k?tll_ms=5"), Some(b"v".to_vec()), 400, "invalid_request", "tll_ms"),
        ("POST", format!("{base}/v1/tables/t/batch"), Some(b"[{\"op\": ".to_vec()), 400, "invalid_request", "JSON array"),
        ("POST", format!("{base}/v1/tables/t/batch"), Some(br#"[{"key":"a","value":"1"},{"key":"b","value":"1"},{"key":"c","value":"1"},{"key":"d","value":"1"}]"#.to_vec()), 413, "too_large", "split it"),
        ("POST", format!("{base}/v1/tables/t/batch"), Some(vec![b' '; 5000]), 413, "too_large", "--max-body-bytes"),
        ("POST", format!("{base}/v1/tables/t/keys/k"), Some(b"v".to_vec()), 405, "method_not_allowed", "method"),
        ("GET", format!("{base}/v2/nothing"), None, 404, "not_found", "no such route"),
        ("PUT", format!("{base}/v1/tables/t/keys/"), Some(b"v".to_vec()), 400, "invalid_request", "key must not be empty"),
        ("GET", format!("{base}/v1/tables/t/keys/"), None, 400, "invalid_request", "1 to 4096 bytes"),
        ("DELETE", format!("{base}/v1/tables/t/keys/"), None, 400, "invalid_request", "key must not be empty"),
        ("PUT", format!("{base}/v1/tables/bad-name/keys/"), Some(b"v".to_vec()), 400, "invalid_request", "table name"),
        ("PATCH", format!("{base}/v1/tables/t/keys/"), Some(br#"{"ttl_ms": 5}"#.to_vec()), 400, "invalid_request", "key must not be empty"),
        ("PATCH", format!("{base}/v1/tables/t/keys/k"), Some(br#"{"ttl_ms": 5, "expires_at_ms": 5}"#.to_vec()), 400, "invalid_request", "one of"),
    ];
    for (method, url, body, status, code, hint) in cases {
        let answer = call(method, &url, &[], body.as_deref());
        assert_eq!(answer.status, status, "{method} {url}: {}", answer.text());
        assert_eq!(answer.code(), code, "{method} {url}");
        let message = answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            message.contains(hint),
            "{method} {url}: {message:?} should mention {hint:?}"
        );
    }
    assert_eq!(
        call("GET", &key_url(&server, "t", "k"), &[], None).status,
        404,
        "refused writes changed nothing"
    );
    assert_eq!(server.stop(), 0);
}

#[test]
fn health_and_metrics_describe_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    call("PUT", &key_url(&server, "t", "k"), &[], Some(b"v"));
    call("GET", &key_url(&server, "t", "nope"), &[], None);
    let health = call("GET", &format!("{}/health", server.url), &[], None);
    assert_eq!(health.status, 200);
    let health = health.json();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["fragment_count"], 4);
    assert_eq!(health["fragments"].as_array().unwrap().len(), 4);
    assert_eq!(health["fragments"][0]["running_workers"], 2);
    let pools = health["fragments"][0]["pools"].as_array().unwrap();
    let names: Vec<_> = pools.iter().map(|p| p["pool"].as_str().unwrap()).collect();
    assert_eq!(names, ["high", "background"], "no default pool");
    assert_eq!(pools[0]["workers"], 2);
    assert_eq!(
        pools[1]["workers"], 0,
        "background admits; it has no workers"
    );

    let metrics = call("GET", &format!("{}/metrics", server.url), &[], None);
    assert!(
        metrics
            .header("content-type")
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = metrics.text();
    for expected in [
        r#"ebb_http_requests_total{route="/v1/tables/{table}/keys/{key}",method="PUT",status="200"} 1"#,
        r#"ebb_http_requests_total{route="/v1/tables/{table}/keys/{key}",method="GET",status="404"} 1"#,
        r#"ebb_http_request_duration_seconds_count{route="/v1/tables/{table}/keys/{key}"} 2"#,
        r#"ebb_fragment_queue_depth{fragment="0",pool="high"} 0"#,
        r#"ebb_fragment_shed_total{fragment="3",pool="background"} 0"#,
        r#"ebb_fragment_queue_depth{fragment="0",pool="background"} 0"#,
        "ebb_flush_backlog_records{fragment=\"0\"}",
        "ebb_flush_duration_seconds_bucket{fragment=\"0\",le=\"+Inf\"}",
        "ebb_store_errors_total{fragment=\"0\"} 0",
        r#"ebb_table_records{table="t",state="live"} 1"#,
    ] {
        assert!(text.contains(expected), "metrics lack {expected}:\n{text}");
    }
    assert!(
        !text.contains(r#"pool="default""#),
        "no default pool:\n{text}"
    );
    assert_eq!(server.stop(), 0);
}

#[test]
fn every_v1_route_refuses_query_parameters_it_does_not_take() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let base = &server.url;
    assert_eq!(
        call("PUT", &key_url(&server, "t", "k"), &[], Some(b"v")).status,
        200
    );
    let sql = br#"{"sql": "SELECT key FROM t"}"#.to_vec();
    let bind = br#"{"plugin": "p", "function": "f"}"#.to_vec();
    // (method, url, body, the parameter the message must name)
    type Case<'a> = (&'a str, String, Option<Vec<u8>>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "GET",
            format!("{base}/v1/tables/t/keys/k?durability=bogus"),
            None,
            "durability",
        ),
        (
            "PUT",
            format!("{base}/v1/tables/t/keys/k?bogus=1"),
            Some(b"v".to_vec()),
            "bogus",
        ),
        (
            "DELETE",
            format!("{base}/v1/tables/t/keys/k?bogus=1"),
            None,
            "bogus",
        ),
        (
            "POST",
            format!("{base}/v1/tables/t/batch?bogus=1"),
            Some(b"[]".to_vec()),
            "bogus",
        ),
        ("GET", format!("{base}/v1/tables?bogus=1"), None, "bogus"),
        (
            "POST",
            format!("{base}/v1/sql?page_size=5"),
            Some(sql),
            "page_size",
        ),
        ("GET", format!("{base}/v1/plugins?bogus"), None, "bogus"),
        ("GET", format!("{base}/v1/plugins/p?bogus=1"), None, "bogus"),
        (
            "PUT",
            format!("{base}/v1/plugins/p?bogus=1"),
            Some(b"x".to_vec()),
            "bogus",
        ),
        (
            "DELETE",
            format!("{base}/v1/plugins/p?bogus=1"),
            None,
            "bogus",
        ),
        (
            "PUT",
            format!("{base}/v1/tables/t/expiry-handler?bogus=1"),
            Some(bind),
            "bogus",
        ),
        (
            "GET",
            format!("{base}/v1/tables/t/expiry-handler?bogus=1"),
            None,
            "bogus",
        ),
        (
            "DELETE",
            format!("{base}/v1/tables/t/expiry-handler?bogus=1"),
            None,
            "bogus",
        ),
        (
            "GET",
            format!("{base}/v1/tables/t/expiry/dead-letters?bogus=1"),
            None,
            "bogus",
        ),
        (
            "POST",
            format!("{base}/v1/tables/t/expiry/dead-letters/redrive?bogus=1"),
            None,
            "bogus",
        ),
    ];
    for (method, url, body, name) in cases {
        let answer = call(method, &url, &[], body.as_deref());
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (400, "invalid_request"),
            "{method} {url}: {}",
            answer.text()
        );
        assert!(
            answer.text().contains(&format!("`{name}`")),
            "{method} {url}: {}",
            answer.text()
        );
    }
    assert_eq!(
        call("GET", &key_url(&server, "t", "k"), &[], None).body,
        b"v",
        "refused requests changed nothing"
    );
    assert_eq!(server.stop(), 0);
}
