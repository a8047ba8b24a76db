//! A real `ebb serve` process on an ephemeral loopback port, for end-to-end tests.
#![allow(dead_code)]

pub mod expiry;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Path of the `ebb` binary under test.
pub fn ebb_bin() -> &'static str {
    env!("CARGO_BIN_EXE_ebb")
}

/// Path of a wasm module built by `make plugins` (`ebb_plugin_json`, ...).
pub fn wasm(name: &str) -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            // The workspace root (where Cargo.lock is) holds the default target dir.
            let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            let root = manifest.ancestors().find(|d| d.join("Cargo.lock").exists());
            root.unwrap_or(manifest).join("target")
        });
    target.join(format!("wasm32-unknown-unknown/release/{name}.wasm"))
}

/// Wait until `check` holds, polling every 20 ms; panics with `what` after `timeout`.
pub fn wait_until(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running server; killed (SIGKILL) on drop unless stopped.
pub struct Server {
    child: Option<Child>,
    /// Base URL, e.g. `http://127.0.0.1:40123`.
    pub url: String,
    /// Data directory.
    pub data_dir: PathBuf,
}

impl Server {
    /// Start `ebb serve` on `data_dir` with extra arguments; waits until it listens.
    pub fn start(data_dir: &Path, extra: &[&str]) -> Server {
        Self::spawn(Self::command(data_dir, extra), data_dir)
    }

    /// [`Server::start`] with the open-files limit (soft and hard) set to
    /// `open_files`, so the server cannot raise it.
    pub fn start_with_open_files(data_dir: &Path, extra: &[&str], open_files: u64) -> Server {
        let command = Self::limited(data_dir, extra, libc::RLIMIT_NOFILE, open_files);
        Self::spawn(command, data_dir)
    }

    /// The command of [`Server::start`] with the resource limit `resource`
    /// (soft and hard) set to `limit` in the child.
    pub fn limited(
        data_dir: &Path,
        extra: &[&str],
        resource: libc::__rlimit_resource_t,
        limit: u64,
    ) -> Command {
        use std::os::unix::process::CommandExt;
        let mut command = Self::command(data_dir, extra);
        // SAFETY: setrlimit is async-signal-safe; the closure allocates nothing.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(resource, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        command
    }

    fn command(data_dir: &Path, extra: &[&str]) -> Command {
        let mut command = Command::new(ebb_bin());
        command.args(["serve", "--listen", "127.0.0.1:0"]);
        // Four fragments unless the test asks for another count.
        if !extra.contains(&"--fragments") {
            command.args(["--fragments", "4"]);
        }
        command
            .arg("--data-dir")
            .arg(data_dir)
            .args(extra)
            .env("RUST_LOG", "warn,openraft=error")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        command
    }

    /// Start `command` (of [`Server::start`], or [`Server::limited`]) on
    /// `data_dir`; waits until it listens.
    pub fn spawn(mut command: Command, data_dir: &Path) -> Server {
        let mut child = command.spawn().expect("start ebb serve");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read the listen line");
        let Some(url) = line.trim().strip_prefix("ebb listening on ") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("unexpected first line: {line:?}");
        };
        let url = url.to_string();
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in stdout.lines() {});
        Server {
            child: Some(child),
            url,
            data_dir: data_dir.to_path_buf(),
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Send SIGTERM (the server starts its graceful shutdown) without waiting.
    pub fn terminate(&self) {
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
    }

    /// SIGTERM, then wait (bounded) for a clean exit; returns the exit code.
    pub fn stop(self) -> i32 {
        self.terminate();
        self.wait()
    }

    /// Wait (bounded) for the server to exit; returns the exit code.
    pub fn wait(mut self) -> i32 {
        let mut child = self.child.take().unwrap();
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "server did not stop"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// An HTTP answer.
pub struct Answer {
    pub status: u16,
    pub headers: ureq::http::HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The error code of an error answer.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
}

/// Send one request (any status is returned, never an error).
pub fn call(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Answer {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let mut request = ureq::http::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = match body {
        Some(body) => agent.run(request.body(body.to_vec()).unwrap()),
        None => agent.run(request.body(()).unwrap()),
    }
    .expect("request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_vec()
        .unwrap();
    Answer {
        status,
        headers,
        body,
    }
}
