//! `POST /v1/sql` and `ebb sql` end to end against a real server.

use crate::common;

use std::process::Command;

use common::{Server, call, ebb_bin};
use serde_json::{Value, json};

fn sql_call(server: &Server, body: Value, accept: Option<&str>) -> common::Answer {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(accept) = accept {
        headers.push(("accept", accept));
    }
    call(
        "POST",
        &format!("{}/v1/sql", server.url),
        &headers,
        Some(body.to_string().as_bytes()),
    )
}

fn load(server: &Server, table: &str, n: usize) {
    let lines: String = (0..n)
        .map(|i| {
            format!(
                "{{\"key\":\"k{i:05}\",\"value\":\"{{\\\"n\\\":{}}}\"}}\n",
                i % 10
            )
        })
        .collect();
    let answer = call(
        "POST",
        &format!("{}/v1/tables/{table}/batch?durability=memory", server.url),
        &[("content-type", "application/x-ndjson")],
        Some(lines.as_bytes()),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
}

#[test]
fn queries_answer_json_pages_and_cursors_continue_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    load(&server, "t", 25);
    let answer = sql_call(
        &server,
        json!({"sql": "SELECT key, length(value) AS n, value FROM t WHERE key LIKE ? LIMIT 3", "params": ["k0000%"]}),
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    let body = answer.json();
    assert_eq!(
        body["columns"],
        json!([{"name": "key", "type": "text"}, {"name": "n", "type": "integer"}, {"name": "value", "type": "bytes"}])
    );
    assert_eq!(
        body["rows"],
        json!([
            ["k00000", 7, "{\"n\":0}"],
            ["k00001", 7, "{\"n\":1}"],
            ["k00002", 7, "{\"n\":2}"]
        ])
    );
    assert_eq!(body["cursor"], Value::Null);
    assert_eq!(body["stats"]["rows"], 3);
    assert!(body["stats"]["elapsed_ms"].is_number());

    let mut keys = Vec::new();
    let mut page = sql_call(
        &server,
        json!({"sql": "SELECT key FROM t", "page_size": 10}),
        None,
    )
    .json();
    loop {
        keys.extend(
            page["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r[0].as_str().unwrap().to_string()),
        );
        match page["cursor"].as_str() {
            Some(cursor) => page = sql_call(&server, json!({"cursor": cursor}), None).json(),
            None => break,
        }
    }
    assert_eq!(keys.len(), 25);

    let explain = sql_call(
        &server,
        json!({"sql": "EXPLAIN SELECT count(*) FROM t WHERE key = 'k00001'"}),
        None,
    )
    .json();
    assert_eq!(
        explain["columns"],
        json!([{"name": "plan", "type": "text"}])
    );
    let plan = explain["rows"].to_string();
    assert!(
        plan.contains("pruned") && plan.contains("count(*)"),
        "{plan}"
    );
    assert_eq!(server.stop(), 0);
}

#[test]
fn ndjson_streams_rows_then_stats_or_an_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--max-scanned-records", "1100"]);
    load(&server, "t", 40);
    let answer = sql_call(
        &server,
        json!({"sql": "SELECT key FROM t WHERE key < 'k00003'"}),
        Some("application/x-ndjson"),
    );
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("application/x-ndjson"));
    let lines: Vec<Value> = answer
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        json!({"columns": [{"name": "key", "type": "text"}]})
    );
    assert_eq!(
        &lines[1..4],
        &[json!(["k00000"]), json!(["k00001"]), json!(["k00002"])]
    );
    assert_eq!(lines[4]["stats"]["rows"], 3);
    assert_eq!(lines.len(), 5);

    load(&server, "big", 4000);
    let answer = sql_call(
        &server,
        json!({"sql": "SELECT key FROM big"}),
        Some("application/x-ndjson"),
    );
    assert_eq!(
        answer.status, 200,
        "the stream started before the budget ran out"
    );
    let lines: Vec<Value> = answer
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines.last().unwrap();
    assert_eq!(last["error"]["code"], "too_large", "{last}");
    assert_eq!(last["error"]["budget"], "max_scanned_records");
    assert!(
        lines.len() > 100,
        "rows were streamed before the error: {}",
        lines.len()
    );

    let early = sql_call(
        &server,
        json!({"sql": "SELEC key"}),
        Some("application/x-ndjson"),
    );
    assert_eq!(
        (early.status, early.code().as_str()),
        (400, "invalid_sql"),
        "errors before the first line keep their status"
    );
    assert_eq!(server.stop(), 0);
}

#[test]
fn every_sql_error_has_its_status_and_code() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--max-scanned-records", "500"]);
    load(&server, "t", 30);
    let first = sql_call(
        &server,
        json!({"sql": "SELECT key FROM t", "page_size": 5}),
        None,
    )
    .json();
    let cursor = first["cursor"].as_str().unwrap().to_string();
    call(
        "PUT",
        &format!("{}/v1/tables/t/keys/k00002", server.url),
        &[],
        Some(b"x"),
    );
    let huge = format!("SELECT key FROM t WHERE key = '{}'", "x".repeat(70_000));
    load(&server, "big", 2000);
    let cases = [
        (
            json!({"sql": "INSERT INTO t VALUES ('a', 'b')"}),
            400,
            "invalid_sql",
        ),
        (json!({"sql": "SELECT nope FROM t"}), 400, "invalid_sql"),
        (
            json!({"sql": "SELECT key FROM t", "page_size": 0}),
            400,
            "invalid_request",
        ),
        (
            json!({"sql": "SELECT key FROM t", "consistency": "eventual"}),
            400,
            "invalid_request",
        ),
        (
            json!({"sql": "SELECT key FROM t", "limit": 5}),
            400,
            "invalid_request",
        ),
        (
            json!({"sql": "SELECT key FROM t WHERE key = ?", "params": [[1]]}),
            400,
            "invalid_request",
        ),
        (json!({}), 400, "invalid_request"),
        (json!({"cursor": "garbage"}), 400, "invalid_cursor"),
        (
            json!({"sql": "SELECT value FROM t", "cursor": cursor.clone()}),
            400,
            "invalid_cursor",
        ),
        (json!({"cursor": cursor.clone()}), 409, "query_changed"),
        (
            json!({"sql": "SELECT key FROM t", "cursor": cursor.clone()}),
            409,
            "query_changed",
        ),
        (
            json!({"cursor": cursor.clone(), "params": []}),
            400,
            "invalid_request",
        ),
        (
            json!({"cursor": cursor.clone(), "page_size": 10}),
            400,
            "invalid_request",
        ),
        (json!({"sql": huge}), 413, "too_large"),
        (
            json!({"sql": "SELECT count(value) FROM big"}),
            413,
            "too_large",
        ),
        (
            json!({"sql": "SELECT sum(9223372036854775807 + length(key)) FROM t"}),
            200,
            "",
        ),
    ];
    for (body, status, code) in cases {
        let answer = sql_call(&server, body.clone(), None);
        assert_eq!(answer.status, status, "{body}: {}", answer.text());
        if !code.is_empty() {
            assert_eq!(answer.code(), code, "{body}");
        }
    }
    let fixed = sql_call(
        &server,
        json!({"cursor": cursor.clone(), "params": [1], "page_size": 10}),
        None,
    );
    assert!(
        fixed
            .text()
            .contains(r#"remove \"params\" and \"page_size\""#),
        "the refusal names the fields: {}",
        fixed.text()
    );
    let relaxed = sql_call(
        &server,
        json!({"cursor": cursor, "consistency": "relaxed"}),
        None,
    );
    assert_eq!(relaxed.status, 200, "{}", relaxed.text());
    assert_eq!(server.stop(), 0);

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--query-timeout", "0ms"]);
    load(&server, "t", 5);
    let answer = sql_call(&server, json!({"sql": "SELECT key FROM t"}), None);
    assert_eq!((answer.status, answer.code().as_str()), (504, "timeout"));
    assert_eq!(server.stop(), 0);
}

#[test]
fn an_expression_chain_too_deep_is_refused_by_name_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    load(&server, "t", 3);
    // Each of these aborted the server with a stack overflow before
    // max_expr_depth; both are within the 64 KiB SQL text limit.
    let sums = format!("SELECT 1{} FROM t", " + 1".repeat(10_000));
    let conjuncts = format!(
        "SELECT key FROM t WHERE 1 = 1{}",
        " AND 1 = 1".repeat(4_200)
    );
    for sql in [sums, conjuncts] {
        assert!(sql.len() < 64 * 1024);
        let answer = sql_call(&server, json!({ "sql": sql }), None);
        assert_eq!(answer.status, 413, "{}", answer.text());
        let error = &answer.json()["error"];
        assert_eq!(error["code"], "too_large");
        assert_eq!(error["budget"], "max_expr_depth");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("max_expr_depth"),
            "{error}"
        );
    }
    let answer = sql_call(&server, json!({"sql": "SELECT count(*) FROM t"}), None);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["rows"], json!([[3]]));
    assert_eq!(server.stop(), 0);
}

fn ebb_sql(server: &Server, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(ebb_bin())
        .arg("sql")
        .args(args)
        .env("EBB_URL", &server.url)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_cli_prints_tables_csv_ndjson_and_follows_cursors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    load(&server, "t", 12);

    let (code, out, err) = ebb_sql(
        &server,
        &[
            "SELECT key, length(value) AS n FROM t WHERE key < ?",
            "--param",
            "k00003",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0].split('|').map(str::trim).collect::<Vec<_>>(),
        ["key", "n"]
    );
    assert!(lines[2].starts_with("k00000 | 7"), "{out}");
    assert!(out.contains("(3 rows,"), "{out}");

    let (code, out, _) = ebb_sql(
        &server,
        &[
            "SELECT key FROM t",
            "--page-size",
            "5",
            "--all",
            "--format",
            "csv",
        ],
        None,
    );
    assert_eq!(code, 0);
    let csv: Vec<&str> = out.lines().collect();
    assert_eq!(csv.len(), 13, "header and 12 rows across 3 pages: {out}");
    assert_eq!(csv[0], "key");

    let (code, out, _) = ebb_sql(&server, &["SELECT key FROM t", "--page-size", "5"], None);
    assert_eq!(code, 0);
    assert!(out.contains("more rows: rerun with --all"), "{out}");

    let (code, out, _) = ebb_sql(
        &server,
        &["SELECT count(*) AS c FROM t", "--format", "ndjson"],
        None,
    );
    assert_eq!(code, 0);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[1], json!([12]));

    let (code, out, _) = ebb_sql(
        &server,
        &["SELECT count(*) AS c FROM t", "--format", "json"],
        None,
    );
    assert_eq!(code, 0);
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["rows"], json!([[12]]));

    let (code, out, err) = ebb_sql(
        &server,
        &[],
        Some("SELECT count(*) FROM t;\nSELECT max(key) FROM t\n"),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("12") && out.contains("k00011"), "{out}");

    let (code, _, err) = ebb_sql(&server, &["SELECT nope FROM t"], None);
    assert_eq!(code, 1);
    assert!(err.contains("invalid_sql"), "{err}");
    assert_eq!(server.stop(), 0);
}

#[test]
fn joins_json_dates_and_distinct_answer_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    load(&server, "t", 25);
    let names: String = ["zero", "one", "two", "three", "four"]
        .iter()
        .enumerate()
        .map(|(i, name)| format!("{{\"key\":\"{i}\",\"value\":\"{name}\"}}\n"))
        .collect();
    let answer = call(
        "POST",
        &format!("{}/v1/tables/u/batch?durability=memory", server.url),
        &[("content-type", "application/x-ndjson")],
        Some(names.as_bytes()),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    // The lookup key is a JSON number: compared as text, as SQLite does.
    let join = "SELECT t.key, t.value ->> 'n' AS n, u.value FROM t LEFT JOIN u ON u.key = t.value ->> 'n' WHERE t.key >= 'k00003' AND t.key < 'k00007' ORDER BY t.key";
    let answer = sql_call(&server, json!({ "sql": join }), None);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.json()["rows"],
        json!([
            ["k00003", 3, "three"],
            ["k00004", 4, "four"],
            ["k00005", 5, null],
            ["k00006", 6, null]
        ])
    );
    let plan = sql_call(&server, json!({ "sql": format!("EXPLAIN {join}") }), None).json();
    let lines: Vec<&str> = plan["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row[0].as_str().unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("join: LEFT JOIN u ON u.key = (value ->> 'n')")),
        "{lines:?}"
    );
    // An inner join bigger than the page: one response, or a named budget.
    let inner = "SELECT t.key, u.value FROM t JOIN u ON u.key = t.value ->> 'n'";
    let answer = sql_call(&server, json!({"sql": inner, "page_size": 5}), None);
    assert_eq!(answer.status, 413, "{}", answer.text());
    let error = answer.json();
    assert_eq!(error["error"]["code"], "too_large");
    assert_eq!(error["error"]["budget"], "join_result");
    let streamed = sql_call(
        &server,
        json!({ "sql": inner }),
        Some("application/x-ndjson"),
    );
    assert_eq!(streamed.status, 200);
    // 25 records, n = i % 10, names for 0..=4: 15 rows, a header and stats.
    assert_eq!(streamed.text().lines().count(), 17, "{}", streamed.text());
    // DISTINCT, CASE and a date over the same records.
    let answer = sql_call(
        &server,
        json!({"sql": "SELECT DISTINCT CASE WHEN value ->> 'n' < 5 THEN 'low' ELSE 'high' END AS half, date(_version_ms / 1000, 'unixepoch') IS NOT NULL FROM t ORDER BY half"}),
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.json()["rows"],
        json!([["high", true], ["low", true]])
    );
}
