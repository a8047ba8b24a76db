//! Conditional writes and TTL control end to end: `If-Match` /
//! `If-None-Match` on PUT and DELETE, conditions on batch items, `PATCH`
//! of a TTL, `_expires_at` in SQL, and the CLI's `--if-version`,
//! `--if-absent` and `ebb ttl`.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Answer, Server, call, ebb_bin};
use serde_json::{Value, json};

fn key_url(server: &Server, key: &str) -> String {
    format!("{}/v1/tables/t/keys/{key}", server.url)
}

fn version_of(answer: &Answer) -> String {
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()["version"].as_str().unwrap().to_string()
}

fn assert_precondition_failed(answer: &Answer, current: Value) {
    assert_eq!(
        (answer.status, answer.code().as_str()),
        (412, "precondition_failed"),
        "{}",
        answer.text()
    );
    assert_eq!(answer.json()["error"]["current_version"], current);
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn expires_at_in_sql(server: &Server, key: &str) -> Value {
    let answer = call(
        "POST",
        &format!("{}/v1/sql", server.url),
        &[("content-type", "application/json")],
        Some(
            json!({"sql": "SELECT _expires_at FROM t WHERE key = ?", "params": [key]})
                .to_string()
                .as_bytes(),
        ),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()["rows"][0][0].clone()
}

#[test]
fn puts_and_deletes_apply_only_when_their_condition_holds() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let url = key_url(&server, "k");
    let create_only = [("if-none-match", "*")];

    // Create only: the first put creates, the second is refused with the
    // version it would have overwritten, and nothing changes.
    let first = version_of(&call("PUT", &url, &create_only, Some(b"one")));
    assert_precondition_failed(&call("PUT", &url, &create_only, Some(b"two")), json!(first));
    assert_eq!(call("GET", &url, &[], None).body, b"one");

    // If-Match: only over the version read (quoted like an entity tag or
    // not); a stale version fails and names the current one.
    let second = version_of(&call("PUT", &url, &[("if-match", &first)], Some(b"two")));
    let quoted = format!("\"{second}\"");
    let third = version_of(&call("PUT", &url, &[("if-match", &quoted)], Some(b"three")));
    assert_precondition_failed(
        &call("PUT", &url, &[("if-match", &first)], Some(b"lost")),
        json!(third),
    );
    assert_precondition_failed(
        &call("DELETE", &url, &[("if-match", &second)], None),
        json!(third),
    );
    assert_eq!(call("GET", &url, &[], None).body, b"three");
    let get = call("GET", &url, &[], None);
    assert_eq!(get.header("ebb-version"), Some(third.as_str()));

    // A conditional delete, then a missing key matches no version.
    let deleted = call("DELETE", &url, &[("if-match", &third)], None);
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    assert_precondition_failed(
        &call("PUT", &url, &[("if-match", &third)], Some(b"x")),
        Value::Null,
    );
    assert_precondition_failed(
        &call("DELETE", &url, &[("if-match", &third)], None),
        Value::Null,
    );
    // A deleted key can be created again.
    version_of(&call("PUT", &url, &create_only, Some(b"again")));

    // Bad conditions are 400s that say what to send.
    for headers in [
        vec![("if-match", "not-a-version")],
        vec![("if-match", "*")],
        vec![("if-none-match", "1.0@n1")],
        vec![("if-match", first.as_str()), ("if-none-match", "*")],
    ] {
        let answer = call("PUT", &url, &headers, Some(b"x"));
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (400, "invalid_request"),
            "{headers:?}: {}",
            answer.text()
        );
    }
    let bad = call("PUT", &url, &[("if-match", "nope")], Some(b"x"));
    assert!(
        bad.text().contains("hlc_ms.counter@writer"),
        "{}",
        bad.text()
    );
    assert_eq!(call("GET", &url, &[], None).body, b"again");
    assert_eq!(server.stop(), 0);
}

#[test]
fn batch_items_carry_their_own_conditions() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let existing = version_of(&call("PUT", &key_url(&server, "a"), &[], Some(b"1")));
    let body = json!([
        {"key": "a", "value": "2", "if_version": existing},
        {"key": "b", "value": "new", "if_absent": true},
        {"key": "a", "value": "3", "if_absent": true},
        {"op": "delete", "key": "b", "if_version": "1.0@nobody"},
        {"key": "c", "value": "x", "if_version": "garbage"},
        {"key": "d", "value": "x", "if_version": existing, "if_absent": true},
    ]);
    let answer = call(
        "POST",
        &format!("{}/v1/tables/t/batch", server.url),
        &[("content-type", "application/json")],
        Some(body.to_string().as_bytes()),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    let results = answer.json()["results"].as_array().unwrap().clone();
    let statuses: Vec<u64> = results
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    // Items on one key run concurrently, so which of the two on `a` wins
    // is not fixed; exactly one of them does.
    assert_eq!(statuses[1], 200, "{results:?}");
    assert_eq!(&statuses[3..], [412, 400, 400], "{results:?}");
    let mut on_a = [statuses[0], statuses[2]];
    on_a.sort();
    assert_eq!(on_a, [200, 412], "{results:?}");
    assert_eq!(results[3]["error"]["code"], "precondition_failed");
    let b = call("GET", &key_url(&server, "b"), &[], None);
    assert_eq!(b.body, b"new");
    assert_eq!(
        results[3]["error"]["current_version"],
        json!(b.header("ebb-version"))
    );
    assert_eq!(call("GET", &key_url(&server, "c"), &[], None).status, 404);
    assert_eq!(server.stop(), 0);
}

#[test]
fn patch_changes_a_ttl_without_the_value_and_expired_is_expired() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let url = key_url(&server, "lease");
    let patch = |headers: &[(&str, &str)], body: Value| {
        let mut all = vec![("content-type", "application/json")];
        all.extend_from_slice(headers);
        call("PATCH", &url, &all, Some(body.to_string().as_bytes()))
    };

    // A missing key cannot be given a TTL.
    let missing = patch(&[], json!({"ttl_ms": 60_000}));
    assert_eq!(
        (missing.status, missing.code().as_str()),
        (404, "not_found")
    );

    let put = call(
        "PUT",
        &format!("{url}?ttl_ms=60000"),
        &[],
        Some(b"holder-1"),
    );
    let first = version_of(&put);

    // Extend: a new version of the same value, with the new deadline in
    // the answer, the GET headers and SQL.
    let before = now_ms();
    let extended = patch(&[("if-match", &first)], json!({"ttl_ms": 3_600_000}));
    let second = version_of(&extended);
    assert_ne!(second, first);
    let deadline = extended.json()["expires_at_ms"].as_u64().unwrap();
    assert!(deadline >= before + 3_600_000, "{}", extended.text());
    assert_eq!(extended.header("ebb-version"), Some(second.as_str()));
    let get = call("GET", &url, &[], None);
    assert_eq!(get.body, b"holder-1");
    assert_eq!(get.header("ebb-version"), Some(second.as_str()));
    assert_eq!(
        get.header("ebb-expires-at"),
        Some(deadline.to_string().as_str())
    );
    assert_eq!(expires_at_in_sql(&server, "lease"), json!(deadline));

    // The old version no longer matches; an absolute deadline; clearing.
    assert_precondition_failed(
        &patch(&[("if-match", &first)], json!({"ttl_ms": 1})),
        json!(second),
    );
    let at = now_ms() + 7_200_000;
    let absolute = patch(&[], json!({"expires_at_ms": at}));
    assert_eq!(
        absolute.json()["expires_at_ms"],
        json!(at),
        "{}",
        absolute.text()
    );
    let cleared = patch(&[], json!({"ttl_ms": null}));
    assert_eq!(cleared.status, 200, "{}", cleared.text());
    assert!(cleared.json()["expires_at_ms"].is_null());
    let get = call("GET", &url, &[], None);
    assert_eq!(get.header("ebb-expires-at"), None);
    assert_eq!(expires_at_in_sql(&server, "lease"), Value::Null);

    // Bodies that are not exactly one known field are refused.
    for body in [
        json!({}),
        json!({"ttl_ms": 5, "expires_at_ms": 5}),
        json!({"ttl": 5}),
        json!({"ttl_ms": "5s"}),
        json!({"ttl_ms": 0}),
        json!([1]),
    ] {
        let answer = patch(&[], body.clone());
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (400, "invalid_request"),
            "{body}: {}",
            answer.text()
        );
    }

    // Expired is expired: once the deadline passed, extending is a 404
    // and the value is not revived.
    patch(&[], json!({"ttl_ms": 200}));
    std::thread::sleep(Duration::from_millis(400));
    let late = patch(&[], json!({"ttl_ms": 60_000}));
    assert_eq!(
        (late.status, late.code().as_str()),
        (404, "not_found"),
        "{}",
        late.text()
    );
    assert!(late.text().contains("expired"), "{}", late.text());
    assert_eq!(call("GET", &url, &[], None).status, 404);
    assert_eq!(server.stop(), 0);
}

fn ebb(server: &Server, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(ebb_bin())
        .args(args)
        .env("EBB_URL", &server.url)
        .env_remove("EBB_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_cli_writes_conditionally_and_sets_ttls() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let json_out = |args: &[&str]| -> Value {
        let mut all = vec!["--format", "json"];
        all.extend_from_slice(args);
        let (code, out, err) = ebb(&server, &all);
        assert_eq!(code, 0, "{args:?}: {err}");
        serde_json::from_str(&out).unwrap()
    };
    let first = json_out(&["put", "t", "k", "v1", "--if-absent"])["version"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _, err) = ebb(&server, &["put", "t", "k", "v2", "--if-absent"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("precondition_failed") || err.contains("precondition failed"),
        "{err}"
    );
    assert!(
        err.contains(&first),
        "the error names the current version: {err}"
    );
    let got = json_out(&["get", "t", "k"]);
    assert_eq!(got["version"], json!(first));
    let second = json_out(&["put", "t", "k", "v2", "--if-version", &first])["version"]
        .as_str()
        .unwrap()
        .to_string();

    let (code, out, err) = ebb(&server, &["ttl", "t", "k", "30s", "--if-version", &second]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("expires at"), "{out}");
    let got = json_out(&["get", "t", "k"]);
    assert_eq!(got["value"], "v2");
    assert!(
        got["expires_at_ms"].as_u64().unwrap() > now_ms() + 20_000,
        "{got}"
    );
    let (code, out, err) = ebb(&server, &["ttl", "t", "k", "none"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("no TTL"), "{out}");
    assert!(json_out(&["get", "t", "k"])["expires_at_ms"].is_null());
    let (code, _, err) = ebb(&server, &["ttl", "t", "k", "soon"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("none"), "{err}");
    let (code, _, err) = ebb(&server, &["ttl", "t", "missing", "30s"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("not_found") || err.contains("not found"),
        "{err}"
    );

    let (code, _, err) = ebb(&server, &["del", "t", "k", "--if-version", &first]);
    assert_eq!(code, 1, "a stale version deletes nothing: {err}");
    assert_eq!(json_out(&["get", "t", "k"])["value"], "v2");
    assert_eq!(server.stop(), 0);
}
