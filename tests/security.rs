//! Scoped tokens, protected metrics and CORS on `ebb serve`: every route
//! with every scope, tokens limited to tables (keys, SQL, the table list),
//! `/metrics` behind a token unless `--metrics-open`, the tokens file
//! reloaded on SIGHUP (a bad file keeps the tokens in force), and CORS off
//! unless `--cors-origin`.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{Server, call, ebb_bin, wait_until};

/// A token made by `ebb token new`: (token, entry JSON).
fn new_token(name: &str, scopes: &[&str], tables: &[&str]) -> (String, serde_json::Value) {
    let mut args = vec!["token", "new", name];
    for scope in scopes {
        args.extend(["--scope", scope]);
    }
    for table in tables {
        args.extend(["--table", table]);
    }
    let output = std::process::Command::new(ebb_bin())
        .args(&args)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let token = text
        .lines()
        .find_map(|l| l.strip_prefix("token: "))
        .unwrap()
        .to_string();
    let entry = text
        .lines()
        .find_map(|l| l.strip_prefix("entry: "))
        .unwrap();
    assert!(!entry.contains(&token), "the entry holds no token");
    (token, serde_json::from_str(entry).unwrap())
}

fn write_tokens(path: &Path, entries: &[&serde_json::Value]) {
    let file = serde_json::json!({ "tokens": entries });
    std::fs::write(path, file.to_string()).unwrap();
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// Each route of the API with a request that is harmless to repeat, the
/// scope it needs, and whether it names table `t`.
fn routes() -> Vec<(
    &'static str,
    &'static str,
    Option<&'static [u8]>,
    &'static str,
)> {
    vec![
        ("GET", "/v1/tables/t/keys/k", None, "read"),
        ("PUT", "/v1/tables/t/keys/k", Some(b"v"), "write"),
        (
            "PATCH",
            "/v1/tables/t/keys/k",
            Some(br#"{"ttl_ms": 60000}"#),
            "write",
        ),
        ("DELETE", "/v1/tables/t/keys/gone", None, "write"),
        (
            "POST",
            "/v1/tables/t/batch",
            Some(br#"{"op": "put", "key": "b", "value": "v"}"#),
            "write",
        ),
        ("GET", "/v1/tables", None, "read"),
        (
            "POST",
            "/v1/sql",
            Some(br#"{"sql": "SELECT count(*) FROM t"}"#),
            "read",
        ),
        ("GET", "/v1/tables/t/expiry-handler", None, "read"),
        (
            "PUT",
            "/v1/tables/t/expiry-handler",
            Some(br#"{"plugin": "none", "function": "f"}"#),
            "admin",
        ),
        ("DELETE", "/v1/tables/t/expiry-handler", None, "admin"),
        ("GET", "/v1/tables/t/expiry/dead-letters", None, "read"),
        (
            "POST",
            "/v1/tables/t/expiry/dead-letters/redrive",
            Some(b"{}"),
            "admin",
        ),
        ("GET", "/v1/tables/t/change-handler", None, "read"),
        (
            "PUT",
            "/v1/tables/t/change-handler",
            Some(br#"{"plugin": "none", "function": "f"}"#),
            "admin",
        ),
        ("DELETE", "/v1/tables/t/change-handler", None, "admin"),
        ("GET", "/v1/tables/t/change/dead-letters", None, "read"),
        (
            "POST",
            "/v1/tables/t/change/dead-letters/redrive",
            Some(b"{}"),
            "admin",
        ),
        ("GET", "/v1/plugins", None, "read"),
        ("GET", "/v1/plugins/none", None, "read"),
        ("PUT", "/v1/plugins/none", Some(b"not wasm"), "admin"),
        ("DELETE", "/v1/plugins/none", None, "admin"),
        ("POST", "/v1/admin/backup", Some(br#"{"dir": ""}"#), "admin"),
        ("GET", "/v1/cluster", None, "read"),
    ]
}

#[test]
fn every_route_answers_each_scope_as_it_should() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.json");
    let (reader, read_entry) = new_token("reader", &["read"], &[]);
    let (writer, write_entry) = new_token("writer", &["write"], &[]);
    let (admin, admin_entry) = new_token("admin", &["admin"], &[]);
    let (other, other_entry) = new_token("other", &["read", "write", "admin"], &["other"]);
    write_tokens(
        &file,
        &[&read_entry, &write_entry, &admin_entry, &other_entry],
    );
    let data = dir.path().join("data");
    let server = Server::start(
        &data,
        &[
            "--tokens",
            file.to_str().unwrap(),
            "--auth-token",
            "everything",
        ],
    );
    let url = &server.url;
    let tokens = [
        ("read", reader.as_str()),
        ("write", writer.as_str()),
        ("admin", admin.as_str()),
    ];
    for (method, path, body, needed) in routes() {
        let target = format!("{url}{path}");
        let anonymous = call(method, &target, &[], body);
        assert_eq!(anonymous.status, 401, "{method} {path} without a token");
        for (scope, token) in tokens {
            let answer = call(method, &target, &[("authorization", &bearer(token))], body);
            if scope == needed {
                assert!(
                    answer.status != 401 && answer.status != 403,
                    "{method} {path} with {scope}: {} {}",
                    answer.status,
                    answer.text()
                );
            } else {
                assert_eq!(
                    answer.status,
                    403,
                    "{method} {path} with {scope}: {}",
                    answer.text()
                );
                assert_eq!(answer.code(), "forbidden");
                assert!(
                    answer.text().contains(&format!("lacks the {needed} scope")),
                    "{}",
                    answer.text()
                );
            }
        }
        // A token with every scope but only on table `other`.
        let limited = call(method, &target, &[("authorization", &bearer(&other))], body);
        if path.starts_with("/v1/tables/t/") {
            assert_eq!(limited.status, 403, "{method} {path}: {}", limited.text());
            assert!(
                limited.text().contains("may not touch table t"),
                "{}",
                limited.text()
            );
        } else if path == "/v1/sql" {
            assert_eq!(limited.status, 403, "{}", limited.text());
            assert!(
                limited.text().contains("may not read table t"),
                "{}",
                limited.text()
            );
        } else {
            assert!(
                limited.status != 401 && limited.status != 403,
                "{method} {path}: {}",
                limited.text()
            );
        }
        // --auth-token keeps every scope.
        let all = call(
            method,
            &target,
            &[("authorization", "Bearer everything")],
            body,
        );
        assert!(
            all.status != 401 && all.status != 403,
            "{method} {path}: {}",
            all.text()
        );
    }
    // A limited token works on its table, in SQL (joins included) and in
    // the table list.
    let with = |token: &str| [("authorization", bearer(token))];
    let h = with(&other);
    let headers = [(h[0].0, h[0].1.as_str())];
    assert_eq!(
        call(
            "PUT",
            &format!("{url}/v1/tables/other/keys/a"),
            &headers,
            Some(b"1")
        )
        .status,
        200
    );
    let rows = call(
        "POST",
        &format!("{url}/v1/sql"),
        &headers,
        Some(br#"{"sql": "SELECT key FROM other"}"#),
    );
    assert_eq!(rows.status, 200, "{}", rows.text());
    assert_eq!(rows.json()["rows"], serde_json::json!([["a"]]));
    let join = call(
        "POST",
        &format!("{url}/v1/sql"),
        &headers,
        Some(br#"{"sql": "SELECT o.key FROM other o JOIN t ON t.key = o.key"}"#),
    );
    assert_eq!(join.status, 403, "{}", join.text());
    let listed = call("GET", &format!("{url}/v1/tables"), &headers, None).json();
    let names: Vec<&str> = listed["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["other"], "table t exists but is not listed");

    // /health is open; /metrics needs read on every table.
    assert_eq!(call("GET", &format!("{url}/health"), &[], None).status, 200);
    let metrics = format!("{url}/metrics");
    assert_eq!(call("GET", &metrics, &[], None).status, 401);
    assert_eq!(
        call(
            "GET",
            &metrics,
            &[("authorization", &bearer(&writer))],
            None
        )
        .status,
        403
    );
    assert_eq!(
        call("GET", &metrics, &headers, None).status,
        403,
        "limited to a table"
    );
    assert_eq!(
        call(
            "GET",
            &metrics,
            &[("authorization", &bearer(&reader))],
            None
        )
        .status,
        200
    );
    assert_eq!(server.stop(), 0);

    let open = Server::start(
        &data,
        &["--tokens", file.to_str().unwrap(), "--metrics-open"],
    );
    assert_eq!(
        call("GET", &format!("{}/metrics", open.url), &[], None).status,
        200
    );
    assert_eq!(
        call("GET", &format!("{}/v1/tables", open.url), &[], None).status,
        401
    );
    assert_eq!(open.stop(), 0);
}

#[test]
fn the_tokens_file_is_reloaded_on_sighup_and_a_bad_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens.json");
    let (first, first_entry) = new_token("first", &["read"], &[]);
    let (second, second_entry) = new_token("second", &["read"], &[]);
    write_tokens(&file, &[&first_entry]);
    let server = Server::start(
        &dir.path().join("data"),
        &["--tokens", file.to_str().unwrap()],
    );
    let tables = format!("{}/v1/tables", server.url);
    let status =
        |token: &str| call("GET", &tables, &[("authorization", &bearer(token))], None).status;
    assert_eq!((status(&first), status(&second)), (200, 401));
    let hangup = || {
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(server.pid() as i32, libc::SIGHUP) };
    };
    write_tokens(&file, &[&second_entry]);
    hangup();
    wait_until(Duration::from_secs(10), "the new token accepted", || {
        status(&second) == 200
    });
    assert_eq!(status(&first), 401, "the removed token is refused");
    // A file that does not load keeps the tokens in force.
    std::fs::write(&file, "{not json").unwrap();
    hangup();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!((status(&first), status(&second)), (401, 200));
    // A tokens file that does not load stops the server at start.
    let output = std::process::Command::new(ebb_bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--tokens",
            file.to_str().unwrap(),
        ])
        .arg("--data-dir")
        .arg(dir.path().join("other"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("tokens file"));
    assert_eq!(server.stop(), 0);
}

#[test]
fn cors_is_off_unless_an_origin_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let preflight = |url: &str, origin: &str| {
        call(
            "OPTIONS",
            &format!("{url}/v1/tables/t/keys/k"),
            &[
                ("origin", origin),
                ("access-control-request-method", "PUT"),
                ("access-control-request-headers", "authorization"),
            ],
            None,
        )
    };
    let get = |url: &str, origin: &str| {
        call(
            "GET",
            &format!("{url}/v1/tables"),
            &[("origin", origin)],
            None,
        )
    };
    let closed = Server::start(&dir.path().join("a"), &[]);
    assert_eq!(
        preflight(&closed.url, "http://app.example").header("access-control-allow-origin"),
        None
    );
    assert_eq!(
        get(&closed.url, "http://app.example").header("access-control-allow-origin"),
        None
    );
    assert_eq!(closed.stop(), 0);

    let open = Server::start(
        &dir.path().join("b"),
        &["--cors-origin", "http://app.example"],
    );
    let answer = preflight(&open.url, "http://app.example");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.header("access-control-allow-origin"),
        Some("http://app.example")
    );
    assert!(
        answer
            .header("access-control-allow-headers")
            .is_some_and(|h| h.contains("authorization")),
        "{:?}",
        answer.header("access-control-allow-headers")
    );
    assert_eq!(
        get(&open.url, "http://app.example").header("access-control-allow-origin"),
        Some("http://app.example")
    );
    assert_eq!(
        get(&open.url, "http://evil.example").header("access-control-allow-origin"),
        None
    );
    assert_eq!(open.stop(), 0);
}
