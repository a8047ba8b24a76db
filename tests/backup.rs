//! Backup and restore, export and import, against real `ebb serve`
//! processes: a backup taken under load serves every write acknowledged
//! before it, expiry events pending at backup time are delivered after a
//! restore, bad targets fail clearly and leave the source serving, and
//! export/import round-trips binary values and deadlines.

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::expiry::{module, now_ms};
use common::{Server, call, ebb_bin, wait_until};
use serde_json::{Value, json};

fn ebb(url: &str, args: &[&str]) -> Output {
    Command::new(ebb_bin())
        .args(args)
        .env("EBB_URL", url)
        .env_remove("EBB_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn backup(url: &str, dir: &Path) -> common::Answer {
    let body = json!({ "dir": dir.to_str().unwrap() }).to_string();
    call(
        "POST",
        &format!("{url}/v1/admin/backup"),
        &[("content-type", "application/json")],
        Some(body.as_bytes()),
    )
}

fn get(url: &str, table: &str, key: &str) -> common::Answer {
    call(
        "GET",
        &format!("{url}/v1/tables/{table}/keys/{key}"),
        &[],
        None,
    )
}

/// A value that shows whether it was stored whole: the key, repeated.
fn value_of(key: &str) -> String {
    format!("{key}|").repeat(20)
}

#[test]
fn a_backup_under_load_serves_every_write_acknowledged_before_it() {
    let dir = tempfile::tempdir().unwrap();
    // Memory writes reach the store only in bursts (or through the
    // backup's own flush): nothing else makes the newest ones durable.
    let server = Server::start(&dir.path().join("source"), &["--flush-interval", "1h"]);
    let url = server.url.clone();
    let started = Arc::new(AtomicBool::new(false));
    // Each writer returns the keys acknowledged before the backup request
    // was sent; they keep writing (puts and batches) until it ends.
    let writers: Vec<_> = ["memory", "batch"]
        .into_iter()
        .map(|mode| {
            let url = url.clone();
            let started = started.clone();
            std::thread::spawn(move || {
                let mut before = Vec::new();
                let mut written_after = 0;
                for n in 0.. {
                    if started.load(Ordering::SeqCst) && written_after >= 50 {
                        break;
                    }
                    let keys: Vec<String> = if mode == "batch" {
                        (0..10).map(|i| format!("{mode}-{n}-{i}")).collect()
                    } else {
                        vec![format!("{mode}-{n}")]
                    };
                    let answer = if mode == "batch" {
                        let body: Vec<String> = keys
                            .iter()
                            .map(|k| json!({"key": k, "value": value_of(k)}).to_string())
                            .collect();
                        call(
                            "POST",
                            &format!("{url}/v1/tables/load/batch?durability=memory"),
                            &[("content-type", "application/x-ndjson")],
                            Some(body.join("\n").as_bytes()),
                        )
                    } else {
                        call(
                            "PUT",
                            &format!("{url}/v1/tables/load/keys/{}?durability=memory", keys[0]),
                            &[],
                            Some(value_of(&keys[0]).as_bytes()),
                        )
                    };
                    assert_eq!(answer.status, 200, "{}", answer.text());
                    if mode == "batch" {
                        for result in answer.json()["results"].as_array().unwrap() {
                            assert_eq!(result["status"], 200, "{result}");
                        }
                    }
                    // Read after the answer: a write counts as acknowledged
                    // before the backup only if its answer came before the
                    // backup was requested.
                    if started.load(Ordering::SeqCst) {
                        written_after += 1;
                    } else {
                        before.extend(keys);
                    }
                }
                before
            })
        })
        .collect();
    wait_until(Duration::from_secs(30), "writes before the backup", || {
        call("GET", &format!("{url}/v1/tables"), &[], None).json()["tables"][0]["live_records"]
            .as_u64()
            .unwrap_or(0)
            >= 2000
    });
    started.store(true, Ordering::SeqCst);
    let copy = dir.path().join("copy");
    let answer = backup(&url, &copy);
    assert_eq!(answer.status, 200, "{}", answer.text());
    let report = answer.json();
    assert_eq!(report["dir"], copy.to_str().unwrap());
    assert!(report["bytes"].as_u64().unwrap() > 0, "{report}");
    assert!(report["duration_ms"].is_u64(), "{report}");
    let acknowledged: Vec<String> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert!(acknowledged.len() >= 2000);
    // The source still serves, the copy is served on its own.
    assert_eq!(get(&url, "load", &acknowledged[0]).status, 200);
    assert_eq!(server.stop(), 0);
    let restored = Server::start(&copy, &[]);
    let restored_url = &restored.url;
    for key in &acknowledged {
        let answer = get(restored_url, "load", key);
        assert_eq!(answer.status, 200, "{key} missing from the backup");
        assert_eq!(answer.text(), value_of(key));
    }
    // Nothing half written: every record in the copy (including writes
    // that raced the backup) is whole.
    let export = ebb(restored_url, &["export", "load"]);
    assert_eq!(export.status.code(), Some(0), "{}", text(&export.stderr));
    let mut lines = 0;
    for line in text(&export.stdout).lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let key = record["key"].as_str().unwrap();
        assert_eq!(record["value"], value_of(key), "torn record {key}");
        lines += 1;
    }
    assert!(lines >= acknowledged.len());
    assert_eq!(restored.stop(), 0);
}

#[test]
fn expiry_events_pending_at_backup_time_are_delivered_after_a_restore() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("source"),
        &["--expiry-backoff", "50ms", "--expiry-backoff-max", "200ms"],
    );
    let url = &server.url;
    let upload = call(
        "PUT",
        &format!("{url}/v1/plugins/handler"),
        &[],
        Some(&module("ebb_test_flaky")),
    );
    assert_eq!(upload.status, 200, "{}", upload.text());
    let handler = format!("{url}/v1/tables/jobs/expiry-handler");
    let bind = call(
        "PUT",
        &handler,
        &[],
        Some(br#"{"plugin": "handler", "function": "copy", "max_attempts": 1000}"#),
    );
    assert_eq!(bind.status, 200, "{}", bind.text());
    let keys = ["a", "b", "c", "d"];
    for key in keys {
        let put = call(
            "PUT",
            &format!("{url}/v1/tables/jobs/keys/{key}?ttl_ms=20&durability=memory"),
            &[],
            Some(format!("fail {key}").as_bytes()),
        );
        assert_eq!(put.status, 200, "{}", put.text());
    }
    // The handler keeps asking for retries: the events stay pending.
    wait_until(
        Duration::from_secs(10),
        "4 events pending and tried",
        || {
            let status = call("GET", &handler, &[], None).json()["status"].clone();
            status["outbox_depth"] == 4 && status["failed_events"].as_u64().unwrap_or(0) >= 4
        },
    );
    let copy = dir.path().join("copy");
    let answer = backup(url, &copy);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(server.stop(), 0);

    let restored = Server::start(
        &copy,
        &["--expiry-backoff", "50ms", "--expiry-backoff-max", "200ms"],
    );
    let url = &restored.url;
    let handler = format!("{url}/v1/tables/jobs/expiry-handler");
    let status = call("GET", &handler, &[], None);
    assert_eq!(status.status, 200, "{}", status.text());
    assert_eq!(status.json()["binding"]["plugin"], "handler");
    assert_eq!(status.json()["status"]["outbox_depth"], 4);
    for key in keys {
        assert_eq!(get(url, "jobs", key).status, 404, "{key} is expired");
    }
    // Fix the handler in the copy: the pending events are delivered.
    let fixed = call(
        "PUT",
        &format!("{url}/v1/plugins/handler"),
        &[],
        Some(&module("ebb_plugin_archive")),
    );
    assert_eq!(fixed.status, 200, "{}", fixed.text());
    wait_until(Duration::from_secs(20), "the events delivered", || {
        keys.iter()
            .all(|key| get(url, "jobs_archive", key).status == 200)
    });
    assert_eq!(get(url, "jobs_archive", "a").text(), "fail a");
    assert_eq!(restored.stop(), 0);
}

#[test]
fn a_backup_into_a_bad_dir_fails_clearly_and_the_source_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("source"), &[]);
    let url = &server.url;
    let put = call("PUT", &format!("{url}/v1/tables/t/keys/k"), &[], Some(b"v"));
    assert_eq!(put.status, 200, "{}", put.text());

    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep"), b"mine").unwrap();
    let refused = backup(url, &full);
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (400, "invalid_backup_dir"),
        "{}",
        refused.text()
    );
    assert!(refused.text().contains("not empty"), "{}", refused.text());
    assert_eq!(refused.json()["error"]["dir"], full.to_str().unwrap());
    let left: Vec<_> = std::fs::read_dir(&full).unwrap().collect();
    assert_eq!(left.len(), 1, "the non-empty dir is untouched");
    assert_eq!(std::fs::read(full.join("keep")).unwrap(), b"mine");

    // Running as root, permission bits do not stop writes: a parent that is
    // a regular file does.
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let unwritable = backup(url, &file.join("copy"));
    assert_eq!(
        (unwritable.status, unwritable.code().as_str()),
        (400, "invalid_backup_dir"),
        "{}",
        unwritable.text()
    );
    assert!(
        unwritable.text().contains("is not a directory"),
        "{}",
        unwritable.text()
    );
    let relative = call(
        "POST",
        &format!("{url}/v1/admin/backup"),
        &[],
        Some(br#"{"dir": "relative/copy"}"#),
    );
    assert_eq!(
        (relative.status, relative.code().as_str()),
        (400, "invalid_backup_dir")
    );
    let malformed = call(
        "POST",
        &format!("{url}/v1/admin/backup"),
        &[],
        Some(br#"{"path": "/x"}"#),
    );
    assert_eq!(
        (malformed.status, malformed.code().as_str()),
        (400, "invalid_request")
    );

    let cli = ebb(url, &["backup", full.to_str().unwrap()]);
    assert_eq!(cli.status.code(), Some(1));
    assert!(
        text(&cli.stderr).contains("not empty"),
        "{}",
        text(&cli.stderr)
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with('.')),
        "temporary directory left: {names:?}"
    );

    // The source is untouched and serving; a good target still works, an
    // existing empty directory included.
    assert_eq!(get(url, "t", "k").text(), "v");
    let put = call(
        "PUT",
        &format!("{url}/v1/tables/t/keys/k2"),
        &[],
        Some(b"w"),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let cli = ebb(url, &["backup", empty.to_str().unwrap()]);
    assert_eq!(cli.status.code(), Some(0), "{}", text(&cli.stderr));
    assert!(
        text(&cli.stdout).starts_with("backup written to "),
        "{}",
        text(&cli.stdout)
    );
    assert_eq!(server.stop(), 0);
    let restored = Server::start(&empty, &[]);
    assert_eq!(get(&restored.url, "t", "k2").text(), "w");
    assert_eq!(restored.stop(), 0);
}

#[test]
fn a_backup_needs_the_token_when_one_is_set() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("source"), &["--auth-token", "s3cret"]);
    let copy = dir.path().join("copy");
    let refused = backup(&server.url, &copy);
    assert_eq!(refused.status, 401);
    assert!(!copy.exists());
    assert_eq!(server.stop(), 0);
}

#[test]
fn export_then_import_round_trips_binary_values_and_deadlines() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let url = &server.url;
    let later = now_ms() + 3_600_000;
    let all_bytes: Vec<u8> = (0..=255).collect();
    let binary = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &all_bytes);
    let items = [
        json!({"key": "a-text", "value": "plain text é"}),
        json!({"key": "b-binary", "value": {"base64": binary}}),
        json!({"key": "c-ttl", "value": "expires later", "expires_at_ms": later}),
        json!({"key": "d-empty", "value": ""}),
        json!({"key": "e-soon", "value": "gone soon", "ttl_ms": 1}),
    ];
    let body: Vec<String> = items.iter().map(Value::to_string).collect();
    let put = call(
        "POST",
        &format!("{url}/v1/tables/src/batch"),
        &[("content-type", "application/x-ndjson")],
        Some(body.join("\n").as_bytes()),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    wait_until(Duration::from_secs(5), "e-soon past its deadline", || {
        get(url, "src", "e-soon").status == 404
    });

    let file = dir.path().join("src.ndjson");
    let export = ebb(url, &["export", "src", "--output", file.to_str().unwrap()]);
    assert_eq!(export.status.code(), Some(0), "{}", text(&export.stderr));
    assert!(
        text(&export.stderr).contains("exported 4 records"),
        "{}",
        text(&export.stderr)
    );
    let exported = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<Value> = exported
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        vec![
            json!({"key": "a-text", "value": "plain text é"}),
            json!({"key": "b-binary", "value": {"base64": binary}}),
            json!({"key": "c-ttl", "value": "expires later", "expires_at_ms": later}),
            json!({"key": "d-empty", "value": ""}),
        ],
        "expired records are not exported"
    );

    // A line whose deadline passed is skipped and counted, never written.
    let mut input = exported.clone();
    input.push_str(&json!({"key": "z-past", "value": "x", "expires_at_ms": 1}).to_string());
    input.push('\n');
    std::fs::write(&file, &input).unwrap();
    let import = ebb(
        url,
        &[
            "import",
            file.to_str().unwrap(),
            "--table",
            "dst",
            "--format",
            "json",
        ],
    );
    assert_eq!(import.status.code(), Some(0), "{}", text(&import.stderr));
    let summary: Value = serde_json::from_slice(&import.stdout).unwrap();
    assert_eq!(summary["written"], 4, "{summary}");
    assert_eq!(summary["skipped_expired"], 1, "{summary}");
    assert_eq!(get(url, "dst", "z-past").status, 404);

    let binary_back = get(url, "dst", "b-binary");
    assert_eq!(binary_back.body, all_bytes, "binary value decoded exactly");
    let ttl_back = get(url, "dst", "c-ttl");
    assert_eq!(
        ttl_back.header("ebb-expires-at"),
        Some(later.to_string().as_str())
    );
    let again = ebb(url, &["export", "dst"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout), exported, "the round trip is exact");

    let filtered = ebb(
        url,
        &[
            "export",
            "src",
            "--where",
            "key >= 'b' AND _expires_at IS NULL",
        ],
    );
    assert_eq!(
        filtered.status.code(),
        Some(0),
        "{}",
        text(&filtered.stderr)
    );
    let keys: Vec<String> = text(&filtered.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["key"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(keys, ["b-binary", "d-empty"]);
    let bad = ebb(url, &["export", "src", "--where", "key >>> 1"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("invalid_sql"),
        "{}",
        text(&bad.stderr)
    );
    assert_eq!(server.stop(), 0);
}
