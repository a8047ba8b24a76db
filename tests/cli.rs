//! The `ebb` client commands against a real server: put, get, del, tables,
//! import, output formats and exit codes.

use crate::common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use common::{Server, ebb_bin};

fn ebb(server_url: &str, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(ebb_bin())
        .args(args)
        .env("EBB_URL", server_url)
        .env_remove("EBB_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        input.write_all(bytes).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn put_get_del_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let url = server.url.as_str();

    let put = ebb(url, &["put", "users", "user:1/a b", "Ada"], None);
    assert_eq!(put.status.code(), Some(0), "{}", stderr(&put));
    assert!(stdout(&put).starts_with("ok: version "), "{}", stdout(&put));

    let get = ebb(url, &["get", "users", "user:1/a b"], None);
    assert_eq!(get.status.code(), Some(0));
    assert_eq!(get.stdout, b"Ada", "raw value bytes on stdout");

    let piped = ebb(
        url,
        &["put", "users", "blob", "-", "--ttl", "1h"],
        Some(b"\xff\x00"),
    );
    assert_eq!(piped.status.code(), Some(0), "{}", stderr(&piped));
    assert!(stdout(&piped).contains("expires at"));
    let json = ebb(url, &["get", "users", "blob", "--format", "json"], None);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        json["value"]["base64"], "/wA=",
        "non-UTF-8 values come as base64"
    );
    assert!(json["expires_at_ms"].as_u64().is_some());
    assert!(json["version"].as_str().is_some());

    let tables = ebb(url, &["tables"], None);
    assert_eq!(tables.status.code(), Some(0));
    let text = stdout(&tables);
    assert!(
        text.contains("TABLE")
            && text.contains("TOMBSTONES")
            && text.contains("MEMORY")
            && text.contains("users")
            && text.contains("2"),
        "{text}"
    );
    let tables = ebb(url, &["tables", "--format", "json"], None);
    let tables: serde_json::Value = serde_json::from_slice(&tables.stdout).unwrap();
    assert_eq!(tables["tables"][0]["live_records"], 2);

    let del = ebb(url, &["del", "users", "user:1/a b"], None);
    assert_eq!(del.status.code(), Some(0), "{}", stderr(&del));
    let missing = ebb(url, &["get", "users", "user:1/a b"], None);
    assert_eq!(missing.status.code(), Some(1), "a server error exits 1");
    assert!(
        stderr(&missing).contains("not_found"),
        "{}",
        stderr(&missing)
    );
    assert_eq!(server.stop(), 0);
}

#[test]
fn import_streams_a_file_in_batches_and_reports_failures() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let file = dir.path().join("data.ndjson");
    let mut lines = String::new();
    for i in 0..2_500 {
        lines.push_str(&format!("{{\"key\": \"item:{i}\", \"value\": \"v{i}\"}}\n"));
    }
    lines.push_str("{\"key\": \"\", \"value\": \"empty key\"}\n");
    std::fs::write(&file, lines).unwrap();
    let output = ebb(
        &server.url,
        &[
            "import",
            file.to_str().unwrap(),
            "--table",
            "items",
            "--batch-size",
            "1000",
        ],
        None,
    );
    assert_eq!(
        output.status.code(),
        Some(1),
        "one record failed: {}",
        stderr(&output)
    );
    assert!(
        stdout(&output).contains("imported 2500 records"),
        "{}",
        stdout(&output)
    );
    assert!(stderr(&output).contains("line 2501"), "{}", stderr(&output));
    let get = ebb(&server.url, &["get", "items", "item:2499"], None);
    assert_eq!(get.stdout, b"v2499");
    assert_eq!(server.stop(), 0);
}

#[test]
fn usage_errors_exit_2_and_unreachable_servers_exit_1() {
    let no_args = ebb("http://127.0.0.1:9", &[], None);
    assert_eq!(no_args.status.code(), Some(2));
    let bad_flag = ebb("http://127.0.0.1:9", &["get", "t", "k", "--bogus"], None);
    assert_eq!(bad_flag.status.code(), Some(2));
    let bad_ttl = ebb(
        "http://127.0.0.1:9",
        &["put", "t", "k", "v", "--ttl", "30"],
        None,
    );
    assert_eq!(bad_ttl.status.code(), Some(2));
    assert!(
        stderr(&bad_ttl).contains("time unit needed") && stderr(&bad_ttl).contains("500ms"),
        "says what is missing and what to write: {}",
        stderr(&bad_ttl)
    );
    // Port 9 (discard) on loopback: nothing listens there.
    let unreachable = ebb("http://127.0.0.1:9", &["get", "t", "k"], None);
    assert_eq!(unreachable.status.code(), Some(1));
    assert!(
        stderr(&unreachable).contains("cannot reach"),
        "{}",
        stderr(&unreachable)
    );
}

#[test]
fn a_token_from_the_environment_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--auth-token", "tok"]);
    let denied = ebb(&server.url, &["tables"], None);
    assert_eq!(denied.status.code(), Some(1));
    assert!(stderr(&denied).contains("unauthorized"));
    let allowed = Command::new(ebb_bin())
        .args(["tables"])
        .env("EBB_URL", &server.url)
        .env("EBB_TOKEN", "tok")
        .output()
        .unwrap();
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    assert_eq!(server.stop(), 0);
}
