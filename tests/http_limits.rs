//! Connection limits of a real `ebb serve` over loopback: silent, slow and
//! idle connections are closed after their timeouts while normal requests
//! are served, connections over the cap are refused at once, accept errors
//! (out of descriptors) pause the server without stopping it, and a
//! shutdown finishes the request in flight.

use crate::common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use common::{Server, call, wait_until};

const HEADER_TIMEOUT: Duration = Duration::from_millis(3000);
const BODY_TIMEOUT: Duration = Duration::from_millis(3000);
const IDLE_TIMEOUT: Duration = Duration::from_millis(6000);
/// How late a close may come after its timeout on a busy test machine.
const SLACK: Duration = Duration::from_millis(2500);
/// How long a normal request or a refusal may take on a busy test machine.
const PROMPT: Duration = Duration::from_secs(1);

fn connect(server: &Server) -> TcpStream {
    let address = server.url.strip_prefix("http://").unwrap();
    let stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    stream
}

/// Read one response (head and a `content-length` body) from `stream`.
fn read_response(stream: &mut TcpStream) -> String {
    let mut data = Vec::new();
    let mut byte = [0u8; 1];
    while !data.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).expect("read a head"),
            1,
            "closed early"
        );
        data.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&data).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .map_or(0, |n| n.trim().parse().unwrap());
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).expect("read a body");
    data.extend(body);
    String::from_utf8_lossy(&data).into_owned()
}

/// Block until the server closes `stream` (EOF or reset); what it sent and when.
fn wait_for_close(mut stream: TcpStream) -> (Instant, String) {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                panic!("the server kept the connection open for 15 s")
            }
            Err(_) => break,
        }
    }
    (
        Instant::now(),
        String::from_utf8_lossy(&received).into_owned(),
    )
}

/// The connection is still open: nothing to read and no close.
fn still_open(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let open = matches!(stream.peek(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock);
    stream.set_nonblocking(false).unwrap();
    open
}

/// GET `path` on a fresh connection with `Connection: close`: the whole
/// answer, read until the server closed the connection.
fn get_closing(server: &Server, path: &str) -> String {
    let mut stream = connect(server);
    let request = format!("GET {path} HTTP/1.1\r\nHost: ebb\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

fn metric(server: &Server, line: &str) -> f64 {
    let text = get_closing(server, "/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(line))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no metric {line}:\n{text}"))
}

/// A request on a fresh connection answers 200 within `within`.
fn served_promptly(server: &Server, within: Duration) {
    let started = Instant::now();
    let answer = get_closing(server, "/health");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        started.elapsed() < within,
        "a normal request took {:?}",
        started.elapsed()
    );
}

#[test]
fn slow_and_idle_connections_are_closed_after_their_timeouts_and_the_cap_refuses_extra_ones_at_once()
 {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        &[
            "--max-connections",
            "40",
            "--header-read-timeout",
            "3s",
            "--body-read-timeout",
            "3s",
            "--idle-timeout",
            "6s",
        ],
    );
    let opened = Instant::now();
    let silent: Vec<TcpStream> = (0..8).map(|_| connect(&server)).collect();
    let partial_head: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut stream = connect(&server);
            stream
                .write_all(b"GET /health HTTP/1.1\r\nHost: ebb\r\n")
                .unwrap();
            stream
        })
        .collect();
    let partial_body: Vec<TcpStream> = (0..8)
        .map(|i| {
            let mut stream = connect(&server);
            let head = format!(
                "PUT /v1/tables/t/keys/slow{i} HTTP/1.1\r\nHost: ebb\r\nContent-Length: 100\r\n\r\n0123456789"
            );
            stream.write_all(head.as_bytes()).unwrap();
            stream
        })
        .collect();
    let keep_alive_started = Instant::now();
    let keep_alive: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut stream = connect(&server);
            stream
                .write_all(b"GET /health HTTP/1.1\r\nHost: ebb\r\n\r\n")
                .unwrap();
            assert!(read_response(&mut stream).starts_with("HTTP/1.1 200"));
            stream
        })
        .collect();
    let answered = Instant::now();

    // 32 of 40 connections are held: normal requests are still served at once.
    for _ in 0..20 {
        served_promptly(&server, PROMPT);
    }
    let put = call(
        "PUT",
        &format!("{}/v1/tables/t/keys/k", server.url),
        &[],
        Some(b"v"),
    );
    assert_eq!(put.status, 200, "{}", put.text());

    // Fill the cap (once the server has closed the connections of the
    // requests above); one more connection is refused at once with a 503
    // (or closed), and so is every further one.
    wait_until(PROMPT, "32 held connections and this one", || {
        metric(&server, "ebb_http_connections ") == 33.0
    });
    thread::sleep(Duration::from_millis(100));
    let filler: Vec<TcpStream> = (0..8).map(|_| connect(&server)).collect();
    let filled = Instant::now();
    for _ in 0..5 {
        let started = Instant::now();
        let mut extra = connect(&server);
        let _ = extra.write_all(b"GET /health HTTP/1.1\r\nHost: ebb\r\nConnection: close\r\n\r\n");
        let (closed, answer) = wait_for_close(extra);
        assert!(
            answer.is_empty()
                || answer.starts_with("HTTP/1.1 503") && answer.contains("overloaded"),
            "a connection over the cap is refused: {answer}"
        );
        assert!(
            closed - started < PROMPT,
            "refusal took {:?}",
            closed - started
        );
    }
    assert!(
        opened.elapsed() < HEADER_TIMEOUT - Duration::from_millis(300),
        "the test itself was too slow to check the cap before the timeouts"
    );

    // Each held connection closes after its own timeout, not before.
    let watch = |streams: Vec<TcpStream>| -> Vec<thread::JoinHandle<(Instant, String)>> {
        streams
            .into_iter()
            .map(|s| thread::spawn(move || wait_for_close(s)))
            .collect()
    };
    let probe = keep_alive[0].try_clone().unwrap();
    let (silent, partial_head, partial_body, keep_alive, filler) = (
        watch(silent),
        watch(partial_head),
        watch(partial_body),
        watch(keep_alive),
        watch(filler),
    );
    let closes = |handles: Vec<thread::JoinHandle<(Instant, String)>>| -> Vec<(Instant, String)> {
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    };
    let check = |what: &str, since: Instant, timeout: Duration, closes: &[(Instant, String)]| {
        for (at, _) in closes {
            let after = *at - since;
            assert!(
                after >= timeout - Duration::from_millis(50) && after <= timeout + SLACK,
                "{what}: closed after {after:?}, the timeout is {timeout:?}"
            );
        }
    };
    check("silent", opened, HEADER_TIMEOUT, &closes(silent));
    check(
        "partial head",
        opened,
        HEADER_TIMEOUT,
        &closes(partial_head),
    );
    let bodies = closes(partial_body);
    check("partial body", opened, BODY_TIMEOUT, &bodies);
    for (_, answer) in &bodies {
        assert!(
            answer.starts_with("HTTP/1.1 408") && answer.contains("request_timeout"),
            "a stalled body is answered 408: {answer}"
        );
    }
    check("filler", filled, HEADER_TIMEOUT, &closes(filler));
    assert!(
        answered.elapsed() < IDLE_TIMEOUT - Duration::from_millis(300),
        "test too slow"
    );
    assert!(
        still_open(&probe),
        "an idle keep-alive connection outlives the header timeout"
    );
    check(
        "keep-alive idle",
        keep_alive_started,
        IDLE_TIMEOUT,
        &closes(keep_alive),
    );

    served_promptly(&server, PROMPT);
    assert!(metric(&server, "ebb_http_connections_refused_total ") >= 5.0);
    assert_eq!(
        metric(
            &server,
            r#"ebb_http_connections_timed_out_total{reason="header"} "#
        ),
        24.0
    );
    assert_eq!(
        metric(
            &server,
            r#"ebb_http_connections_timed_out_total{reason="idle"} "#
        ),
        8.0
    );
    wait_until(
        Duration::from_secs(2),
        "only the metrics request's connection to be open",
        || metric(&server, "ebb_http_connections ") == 1.0,
    );
    assert_eq!(
        call(
            "GET",
            &format!("{}/v1/tables/t/keys/slow0", server.url),
            &[],
            None
        )
        .status,
        404,
        "a stalled upload stored nothing"
    );
    assert_eq!(server.stop(), 0);
}

#[test]
fn a_shutdown_finishes_the_request_in_flight_and_closes_idle_connections() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut idle = connect(&server);
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: ebb\r\n\r\n")
        .unwrap();
    assert!(read_response(&mut idle).starts_with("HTTP/1.1 200"));
    let mut upload = connect(&server);
    upload
        .write_all(
            b"PUT /v1/tables/t/keys/k HTTP/1.1\r\nHost: ebb\r\nContent-Length: 10\r\n\r\n01234",
        )
        .unwrap();
    // Let the handler start waiting for the rest of the body.
    thread::sleep(Duration::from_millis(200));

    server.terminate();
    let started = Instant::now();
    let (closed, _) = wait_for_close(idle);
    assert!(
        closed - started < Duration::from_secs(2),
        "an idle connection closes at once on shutdown ({:?})",
        closed - started
    );
    upload.write_all(b"56789").unwrap();
    let answer = read_response(&mut upload);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(server.wait(), 0);
}

/// User and system CPU time of process `pid` so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15 of the whole line; 12 and 13 after the name.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[test]
fn running_out_of_descriptors_pauses_accepts_without_spinning_and_the_server_recovers() {
    let dir = tempfile::tempdir().unwrap();
    // A cap above the descriptors: accepts fail with EMFILE.
    let server = Server::start_with_open_files(dir.path(), &["--max-connections", "10000"], 160);
    served_promptly(&server, Duration::from_secs(1));
    let spare = 160usize.saturating_sub(open_descriptors(server.pid()));
    assert!(spare > 10, "the server uses too many descriptors at rest");
    let held: Vec<TcpStream> = (0..spare + 40).map(|_| connect(&server)).collect();
    wait_until(Duration::from_secs(5), "descriptors to run out", || {
        open_descriptors(server.pid()) >= 158
    });
    let before = cpu_time(server.pid());
    thread::sleep(Duration::from_secs(2));
    let used = cpu_time(server.pid()) - before;
    assert!(
        used < Duration::from_millis(400),
        "the accept loop spins: {used:?} of CPU in 2 s"
    );
    drop(held);
    wait_until(Duration::from_secs(10), "the server to serve again", || {
        let address = server.url.strip_prefix("http://").unwrap();
        TcpStream::connect(address).is_ok_and(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            s.write_all(b"GET /health HTTP/1.1\r\nHost: ebb\r\nConnection: close\r\n\r\n")
                .is_ok()
                && {
                    let mut answer = String::new();
                    let _ = s.read_to_string(&mut answer);
                    answer.starts_with("HTTP/1.1 200")
                }
        })
    });
    assert!(metric(&server, "ebb_http_accept_errors_total ") >= 1.0);
    assert_eq!(server.stop(), 0);
}
