//! `ebb plugin` commands: call a module locally, push it to a server, list
//! it, use it from `ebb sql`.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::{Server, ebb_bin, wasm};

fn ebb(url: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(ebb_bin())
        .args(args)
        .env("EBB_URL", url)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn plugins_are_called_locally_pushed_listed_and_used_in_sql() {
    let json = wasm("ebb_plugin_json");
    let json = json.to_str().unwrap();
    let (code, out, err) = ebb(
        "http://127.0.0.1:9",
        &[
            "plugin",
            "call",
            json,
            "get_int",
            r#"{"a": {"b": 7}}"#,
            "$.a.b",
        ],
    );
    assert_eq!((code, out.trim()), (0, "7"), "{err}");
    let stats = wasm("ebb_plugin_stats");
    let (code, out, _) = ebb(
        "http://127.0.0.1:9",
        &[
            "plugin",
            "call",
            stats.to_str().unwrap(),
            "count_distinct",
            "a",
            "b",
            "a",
        ],
    );
    assert_eq!((code, out.trim()), (0, "2"));
    let (code, _, err) = ebb("http://127.0.0.1:9", &["plugin", "call", json, "nope"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("no function nope") && err.contains("get_int"),
        "the functions are listed: {err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let (code, out, err) = ebb(&server.url, &["plugin", "push", json]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("installed json version 1"), "{out}");
    let (code, out, _) = ebb(&server.url, &["plugin", "ls"]);
    assert_eq!(code, 0);
    assert!(out.contains("json") && out.contains("get_int"), "{out}");
    put_a_doc(&server.url);
    assert_json_n_plus_one(&server.url);
    let (code, _, _) = ebb(&server.url, &["plugin", "rm", "json"]);
    assert_eq!(code, 0);
    let (code, _, err) = ebb(&server.url, &["plugin", "show", "json"]);
    assert_eq!(code, 1);
    assert!(err.contains("not_found"), "{err}");
    assert_eq!(server.stop(), 0);
}

/// Put `docs/d1` = `{"n": 41}` through `ebb put`.
fn put_a_doc(url: &str) {
    let (code, _, err) = ebb(url, &["put", "docs", "d1", r#"{"n": 41}"#]);
    assert_eq!(code, 0, "{err}");
}

/// `ebb sql` calls the json plugin on `docs/d1` and gets 41 + 1.
fn assert_json_n_plus_one(url: &str) {
    let (code, out, err) = ebb(
        url,
        &[
            "sql",
            "SELECT json.get_int(value, '$.n') + 1 AS n FROM docs",
            "--format",
            "csv",
        ],
    );
    assert_eq!((code, out.as_str()), (0, "n\n42\n"), "{err}");
}

/// A directory holding the bundled json plugin, for `--plugin-dir`.
fn json_plugin_dir() -> tempfile::TempDir {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        wasm("ebb_plugin_json"),
        plugins.path().join("ebb_plugin_json.wasm"),
    )
    .unwrap();
    plugins
}

#[test]
fn a_plugin_dir_installs_each_module_once_across_restarts() {
    let plugins = json_plugin_dir();
    let dir = tempfile::tempdir().unwrap();
    let args = ["--plugin-dir", plugins.path().to_str().unwrap()];
    let detail = |server: &Server| {
        common::call("GET", &format!("{}/v1/plugins/json", server.url), &[], None).json()
    };
    let server = Server::start(dir.path(), &args);
    assert_eq!(detail(&server)["version"], 1);
    assert_eq!(server.stop(), 0);
    let server = Server::start(dir.path(), &args);
    let again = detail(&server);
    assert_eq!(again["version"], 1, "the same bytes are not a new version");
    assert_eq!(again["versions"].as_array().unwrap().len(), 1);
    assert_eq!(server.stop(), 0);
}

#[test]
fn a_signal_while_the_plugin_dir_installs_still_shuts_down_cleanly() {
    let plugins = json_plugin_dir();
    let dir = tempfile::tempdir().unwrap();
    // The listening line comes before the install: SIGTERM lands during it.
    let server = Server::start(
        dir.path(),
        &["--plugin-dir", plugins.path().to_str().unwrap()],
    );
    assert_eq!(server.stop(), 0, "caught, not the default action");
}

/// Where the address space cannot hold the default instance pool (64
/// plugins × 4 idle instances, each slot reserving wasmtime's 4 GiB of
/// linear memory), the server refuses to start and names the flag to
/// lower; with `--plugin-idle-instances 0` the pool is a few slots and
/// plugins still serve, each call instantiating its own.
#[test]
fn a_pool_the_address_space_cannot_hold_names_the_flag_that_shrinks_it() {
    // 64 GiB: about seven pool slots and the rest of the server, far below
    // the 263 slots of the default pool on 2 cores.
    const ADDRESS_SPACE: u64 = 64 << 30;
    let dir = tempfile::tempdir().unwrap();
    let refused = Server::limited(dir.path(), &[], libc::RLIMIT_AS, ADDRESS_SPACE)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot reserve a pool") && err.contains("--plugin-idle-instances"),
        "{err}"
    );

    let plugins = json_plugin_dir();
    let args = [
        "--plugin-idle-instances",
        "0",
        "--plugin-threads",
        "2",
        "--plugin-dir",
        plugins.path().to_str().unwrap(),
    ];
    let command = Server::limited(dir.path(), &args, libc::RLIMIT_AS, ADDRESS_SPACE);
    let server = Server::spawn(command, dir.path());
    common::wait_until(Duration::from_secs(30), "the json plugin", || {
        common::call("GET", &format!("{}/v1/plugins/json", server.url), &[], None).status == 200
    });
    put_a_doc(&server.url);
    for _ in 0..3 {
        assert_json_n_plus_one(&server.url);
    }
    assert_eq!(server.stop(), 0);
}

#[test]
fn handlers_are_called_locally_on_json_events_and_print_their_actions() {
    let flaky = wasm("ebb_test_flaky");
    let flaky = flaky.to_str().unwrap();
    let offline = "http://127.0.0.1:9";
    let (code, out, err) = ebb(
        offline,
        &[
            "plugin",
            "call",
            flaky,
            "dedupe",
            r#"{"key": "a", "value": "x", "table": "t"}"#,
            "--record",
            "t_config/prefix=p:",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("put t_seen/"), "{out}");
    assert_eq!(lines[1], "put t_out/a = p:x", "{out}");

    // JSON output, a binding config, a conditional action.
    let archive = wasm("ebb_plugin_archive");
    let (code, out, err) = ebb(
        offline,
        &[
            "--format",
            "json",
            "plugin",
            "call",
            archive.to_str().unwrap(),
            "copy",
            r#"{"key": "s1", "value": "alice", "table": "sessions"}"#,
            "--config",
            r#"{"table": "old"}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    let answer: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        answer,
        serde_json::json!({"actions": [{"op": "put", "table": "old", "key": "s1", "value": "alice", "ttl_ms": 0}], "failed": []})
    );
    let (code, out, err) = ebb(
        offline,
        &[
            "plugin",
            "call",
            flaky,
            "first",
            r#"{"key": "k", "value": "1.0@n1"}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "put t_archive/k = 1.0@n1 if absent",
            "delete t_lock/k if version 1.0@n1"
        ]
    );

    // A change handler takes change events.
    let (code, out, err) = ebb(
        offline,
        &[
            "plugin",
            "call",
            flaky,
            "record",
            r#"{"key": "o/1", "value": "x", "new_version": "7.0@n1"}"#,
            r#"{"key": "o/2", "deleted": true}"#,
            "--config",
            r#"{"table": "log"}"#,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["put log/o/1@7.0@n1 = x", "put log/o/2@1.0@local = deleted"]
    );
    let (code, _, err) = ebb(
        offline,
        &[
            "plugin",
            "call",
            flaky,
            "record",
            r#"{"key": "k", "version": "1.0@n"}"#,
        ],
    );
    assert_eq!(code, 1);
    assert!(err.contains("change events take"), "{err}");

    // Bad events say what to write; a guest error is an error.
    let (code, _, err) = ebb(offline, &["plugin", "call", flaky, "copy", "{}"]);
    assert_eq!(code, 1);
    assert!(err.contains("key (a string) is required"), "{err}");
    let (code, _, err) = ebb(
        offline,
        &[
            "plugin",
            "call",
            archive.to_str().unwrap(),
            "copy",
            r#"{"key": "k"}"#,
            "--config",
            r#"{"tabel": 1}"#,
        ],
    );
    assert_eq!(code, 1);
    assert!(err.contains("bad binding config"), "{err}");
}

#[test]
fn a_new_plugin_crate_passes_its_own_tests_and_builds_for_wasm() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("greeter");
    let offline = "http://127.0.0.1:9";
    let (code, out, err) = ebb(
        offline,
        &["plugin", "new", "greeter", "--dir", dir.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("cargo test"), "{out}");
    // This workspace's lock file pins the same versions, so the crate
    // builds offline from the registry cache, reusing the shared target.
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .args(["test", "--release", "--offline", "--quiet"])
        .current_dir(&dir);
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        cargo.env("CARGO_TARGET_DIR", target);
    }
    let tested = cargo.output().unwrap();
    let report = String::from_utf8_lossy(&tested.stdout).into_owned()
        + &String::from_utf8_lossy(&tested.stderr);
    assert!(tested.status.success(), "{report}");
    assert!(report.contains("4 passed"), "{report}");
    let (code, out, err) = ebb(offline, &["plugin", "build", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("greet") && out.contains("on_expiry") && out.contains("audit"),
        "{out}"
    );
}
