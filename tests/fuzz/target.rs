//! The process under fuzz: a real `ebb serve` whose death, panics and 5xx
//! answers are the failures, and the case runner that shrinks them.
//!
//! The server runs from a private copy of the binary (other builds sharing
//! the target dir cannot swap it mid-run) with its stderr in a log file, so
//! a panic caught by the runtime still shows. A server that dies is
//! restarted on a fresh data dir, so shrinking can go on replaying cases.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{
    Config, RngSeed, TestCaseError, TestCaseResult, TestError, TestRunner,
};

/// What [`Target::send`]'s error starts with when the client refused to
/// send the request (a URI it cannot write): the case is skipped.
const UNSENDABLE: &str = "unsendable request";

/// Bodies larger than this may be refused before they are sent in full
/// (every route's limit in the fuzz servers is at least this).
const EARLY_REFUSAL_BYTES: usize = 64 * 1024;

/// Longest a fuzz request may take before it counts as a hang.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// How much of each fuzz test to run: a number of cases (`EBB_FUZZ_CASES`,
/// default per test) or, for a soak, rounds of cases until `EBB_FUZZ_SECONDS`
/// have passed. `EBB_FUZZ_SEED` replays a reported seed.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub cases: u32,
    pub seconds: Option<u64>,
    pub seed: Option<u64>,
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    Some(
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a number")),
    )
}

impl Budget {
    /// The budget of a test whose default run is `default_cases` cases.
    pub fn from_env(default_cases: u32) -> Budget {
        let cases = env_number("EBB_FUZZ_CASES").map_or(default_cases, |n| n.max(1) as u32);
        Budget {
            cases,
            seconds: env_number("EBB_FUZZ_SECONDS"),
            seed: env_number("EBB_FUZZ_SEED"),
        }
    }
}

/// Run `test` over `strategy` within the budget from the environment; on a
/// failure, panic with the shrunk case and the seed that replays it.
pub fn fuzz<S>(
    name: &str,
    default_cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> TestCaseResult,
) where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    let budget = Budget::from_env(default_cases);
    let started = Instant::now();
    let mut total = 0u64;
    let mut rounds = 0u32;
    loop {
        let seed = budget.seed.unwrap_or_else(rand::random);
        let config = Config {
            cases: budget.cases,
            failure_persistence: None,
            rng_seed: RngSeed::Fixed(seed),
            max_shrink_iters: 2_000,
            max_shrink_time: 180_000,
            max_global_rejects: budget.cases.saturating_mul(4),
            ..Config::default()
        };
        let mut runner = TestRunner::new(config);
        match runner.run(&strategy, &test) {
            Ok(()) => {}
            Err(TestError::Fail(reason, case)) => panic!(
                "fuzz {name}: {reason}\nminimal case: {case:#?}\nreplay: EBB_FUZZ_SEED={seed} EBB_FUZZ_CASES={}",
                budget.cases
            ),
            Err(TestError::Abort(reason)) => panic!("fuzz {name} aborted: {reason} (seed {seed})"),
        }
        total += u64::from(budget.cases);
        rounds += 1;
        let done = match budget.seconds {
            None => true,
            Some(seconds) => budget.seed.is_some() || started.elapsed().as_secs() >= seconds,
        };
        if done {
            break;
        }
    }
    eprintln!(
        "fuzz {name}: {total} cases in {rounds} round(s), {:.1} s, clean",
        started.elapsed().as_secs_f64()
    );
}

/// An answer from the server under fuzz.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The error code of a well-formed error answer.
    pub fn code(&self) -> Option<String> {
        let json = self.json()?;
        Some(json["error"]["code"].as_str()?.to_string())
    }

    pub fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        if text.len() > 600 {
            format!("{}... ({} bytes)", cut(&text, 600), self.body.len())
        } else {
            text.into_owned()
        }
    }
}

/// One request of a case.
#[derive(Clone)]
pub struct Request {
    pub method: String,
    /// Path and query, e.g. `/v1/sql`.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&describe(self))
    }
}

impl Request {
    pub fn new(method: &str, target: impl Into<String>) -> Request {
        Request {
            method: method.into(),
            target: target.into(),
            headers: Vec::new(),
            body: None,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = Some(body.into());
        self
    }

    /// `POST /v1/sql` with a JSON body.
    pub fn sql(body: &serde_json::Value) -> Request {
        Request::new("POST", "/v1/sql")
            .header("content-type", "application/json")
            .body(body.to_string())
    }
}

/// A running `ebb serve` under fuzz.
pub struct Target {
    child: Child,
    pub url: String,
    data_dir: tempfile::TempDir,
    log_path: PathBuf,
    log_seen: u64,
    agent: ureq::Agent,
    extra: Vec<String>,
    /// Runs after every (re)start: writes the data the cases expect.
    seed_data: fn(&mut Target),
    /// Servers started, the first included.
    pub starts: u32,
    /// Cases answered.
    pub exchanges: u64,
    bin: PathBuf,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(REQUEST_TIMEOUT))
        .allow_non_standard_methods(true)
        .build()
        .into()
}

/// A copy of the `ebb` binary in a private directory, made once per test
/// process before any server is spawned (a copy still open for writing in
/// a child forked by another test cannot be executed: `ETXTBSY`).
fn private_binary() -> PathBuf {
    static COPY: std::sync::OnceLock<(tempfile::TempDir, PathBuf)> = std::sync::OnceLock::new();
    COPY.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir for the binary");
        let path = dir.path().join("ebb");
        std::fs::copy(crate::common::ebb_bin(), &path).expect("copy the ebb binary");
        (dir, path)
    })
    .1
    .clone()
}

fn spawn(bin: &Path, data_dir: &Path, log: &Path, extra: &[String]) -> (Child, String) {
    let log_file = File::create(log).expect("create the server log");
    let mut tries = 0;
    let mut child = loop {
        let spawned = Command::new(bin)
            .args(["serve", "--listen", "127.0.0.1:0", "--fragments", "4"])
            .arg("--data-dir")
            .arg(data_dir)
            .args(extra)
            .env("RUST_LOG", "warn")
            .env("RUST_BACKTRACE", "1")
            .stdout(Stdio::piped())
            .stderr(log_file.try_clone().expect("server log"))
            .spawn();
        match spawned {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            other => break other.expect("start ebb serve"),
        }
    };
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read the listen line");
    let url = line
        .trim()
        .strip_prefix("ebb listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string();
    std::thread::spawn(move || for _ in stdout.lines() {});
    (child, url)
}

impl Target {
    /// Start a server with `extra` arguments; `seed_data` writes its data.
    pub fn start(extra: &[&str], seed_data: fn(&mut Target)) -> Target {
        let bin = private_binary();
        let data_dir = tempfile::tempdir().expect("data dir");
        let log_path = data_dir.path().with_extension("log");
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let (child, url) = spawn(&bin, &data_dir.path().join("data"), &log_path, &extra);
        let mut target = Target {
            child,
            url,
            data_dir,
            log_path,
            log_seen: 0,
            agent: agent(),
            extra,
            seed_data,
            starts: 1,
            exchanges: 0,
            bin,
        };
        seed_data(&mut target);
        target
    }

    /// The data dir of the running server.
    pub fn data_path(&self) -> PathBuf {
        self.data_dir.path().join("data")
    }

    fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.data_dir = tempfile::tempdir().expect("data dir");
        self.log_path = self.data_dir.path().with_extension("log");
        self.log_seen = 0;
        let (child, url) = spawn(&self.bin, &self.data_path(), &self.log_path, &self.extra);
        self.child = child;
        self.url = url;
        self.agent = agent();
        self.starts += 1;
        (self.seed_data)(self);
    }

    /// Stop the server (SIGTERM), run `f` on its data dir, then start it
    /// again on the same data dir.
    pub fn stop_then(&mut self, f: impl FnOnce(&Path)) {
        // SAFETY: a signal to our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        f(&self.data_path());
        self.log_seen = 0;
        let (child, url) = spawn(&self.bin, &self.data_path(), &self.log_path, &self.extra);
        self.child = child;
        self.url = url;
        self.agent = agent();
    }

    /// Stop the server with SIGTERM and wait (bounded) for its exit code.
    pub fn stop(mut self) -> i32 {
        eprintln!(
            "fuzz target: {} cases answered by {} server start(s)",
            self.exchanges, self.starts
        );
        // SAFETY: a signal to our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "server did not stop"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Send a request; `Err` when no answer came (connection refused or
    /// reset, timeout). A pooled connection the server closed after a
    /// refusal (without reading the body) fails at once: that is retried
    /// on a new connection.
    pub fn send(&mut self, request: &Request) -> Result<Reply, String> {
        match self.send_once(request) {
            Err(e)
                if e.contains("Peer disconnected")
                    || e.contains("onnection reset")
                    || e.contains("Broken pipe") =>
            {
                self.agent = agent();
                self.send_once(request)
            }
            other => other,
        }
    }

    fn send_once(&self, request: &Request) -> Result<Reply, String> {
        let uri = format!("{}{}", self.url, request.target);
        let mut builder = ureq::http::Request::builder()
            .method(request.method.as_str())
            .uri(&uri);
        for (name, value) in &request.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let built = match &request.body {
            Some(body) => builder.body(body.clone()).map(|r| self.agent.run(r)),
            None => builder.body(()).map(|r| self.agent.run(r)),
        };
        let mut response = match built {
            Ok(Ok(response)) => response,
            Ok(Err(
                e @ (ureq::Error::Io(_)
                | ureq::Error::Timeout(_)
                | ureq::Error::ConnectionFailed
                | ureq::Error::Protocol(_)
                | ureq::Error::BodyStalled),
            )) => return Err(format!("no answer: {e}")),
            Ok(Err(e)) => return Err(format!("{UNSENDABLE} {uri:?}: {e}")),
            Err(e) => return Err(format!("{UNSENDABLE} {uri:?}: {e}")),
        };
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = response
            .body_mut()
            .with_config()
            .limit(256 << 20)
            .read_to_vec()
            .map_err(|e| format!("answer cut short: {e}"))?;
        Ok(Reply {
            status,
            content_type,
            body,
        })
    }

    /// Send a request the test itself needs (setup): panics unless 200.
    pub fn must(&mut self, request: &Request) -> Reply {
        let reply = self
            .send(request)
            .unwrap_or_else(|e| panic!("{} {}: {e}", request.method, request.target));
        assert_eq!(
            reply.status,
            200,
            "{} {}: {}",
            request.method,
            request.target,
            reply.text()
        );
        reply
    }

    /// New lines of the server's log since the last look.
    fn new_log(&mut self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log_path) {
            let _ = file.seek(SeekFrom::Start(self.log_seen));
            let mut bytes = Vec::new();
            let _ = file.read_to_end(&mut bytes);
            self.log_seen += bytes.len() as u64;
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        text
    }

    /// Why the server is not healthy after a case, if it is not: dead,
    /// `/health` not 200, or a panic in its log. A dead server is restarted.
    pub fn health_problem(&mut self) -> Option<String> {
        if let Some(status) = self.child.try_wait().ok().flatten() {
            let log = self.new_log();
            let problem = format!("the server died ({status}); its log ends:\n{}", tail(&log));
            self.restart();
            return Some(problem);
        }
        let health = self.send(&Request::new("GET", "/health"));
        let log = self.new_log();
        if let Some(at) = log.find("panicked") {
            return Some(format!("the server logged a panic:\n{}", tail(&log[at..])));
        }
        match health {
            Ok(reply) if reply.status == 200 => None,
            Ok(reply) => Some(format!(
                "/health answered {}: {}",
                reply.status,
                reply.text()
            )),
            Err(e) => {
                std::thread::sleep(Duration::from_millis(200));
                let problem = match self.child.try_wait().ok().flatten() {
                    Some(status) => format!(
                        "the server died ({status}); its log ends:\n{}",
                        tail(&self.new_log())
                    ),
                    None => format!("/health got no answer: {e}"),
                };
                self.restart();
                Some(problem)
            }
        }
    }

    /// Send one case's request and check the universal oracle: an answer
    /// came, its status is below 500, a non-2xx answer is a well-formed
    /// JSON error, and the server is still healthy. Returns the reply for
    /// further checks.
    pub fn exchange(&mut self, request: &Request) -> Result<Reply, TestCaseError> {
        let reply = self.send(request);
        if let Err(e) = &reply
            && e.starts_with(UNSENDABLE)
        {
            return Err(TestCaseError::reject(e.clone()));
        }
        if let Some(problem) = self.health_problem() {
            return Err(fail(request, &reply, &problem));
        }
        self.exchanges += 1;
        let reply = match reply {
            // A body over a route's limit is refused (413) before it is
            // read, and the connection closed: a client still writing sees
            // the close, not the answer.
            Err(e)
                if request
                    .body
                    .as_ref()
                    .is_some_and(|b| b.len() > EARLY_REFUSAL_BYTES)
                    && (e.contains("Broken pipe") || e.contains("reset")) =>
            {
                return Ok(Reply {
                    status: 413,
                    content_type: String::new(),
                    body: br#"{"error":{"code":"too_large","message":"closed while the body was sent"}}"#.to_vec(),
                });
            }
            reply => reply.map_err(|e| fail(request, &Err(e.clone()), &e))?,
        };
        if reply.status >= 500 {
            let problem = format!("a {} answer", reply.status);
            return Err(fail(request, &Ok(reply), &problem));
        }
        if !(200..300).contains(&reply.status) {
            let well_formed = reply.json().is_some_and(|json| {
                json["error"]["code"].is_string() && json["error"]["message"].is_string()
            });
            if !well_formed {
                let problem = format!("a {} answer that is not a JSON error", reply.status);
                return Err(fail(request, &Ok(reply), &problem));
            }
        }
        Ok(reply)
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(30);
    lines[start..]
        .iter()
        .map(|line| cut(line, 400))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Describe a request briefly (bodies are cut to 300 bytes).
pub fn describe(request: &Request) -> String {
    let body = request.body.as_deref().map(|body| {
        let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
        if body.len() > 300 {
            format!("{text}... ({} bytes)", body.len())
        } else {
            text
        }
    });
    format!(
        "{} {} {:?} body {:?}",
        request.method,
        if request.target.len() > 300 {
            format!(
                "{}... ({} bytes)",
                cut(&request.target, 300),
                request.target.len()
            )
        } else {
            request.target.clone()
        },
        request.headers,
        body
    )
}

/// A case failure naming the request, the answer and the problem.
pub fn fail(request: &Request, reply: &Result<Reply, String>, problem: &str) -> TestCaseError {
    let answer = match reply {
        Ok(reply) => format!("{} {}", reply.status, reply.text()),
        Err(e) => e.clone(),
    };
    TestCaseError::fail(format!(
        "{problem}\nrequest: {}\nanswer: {answer}",
        describe(request)
    ))
}
