//! Graceful shutdown of a real `ebb serve`: after SIGTERM a request in
//! flight finishes and is answered, `/health` answers 503 meanwhile, new
//! `/v1` requests are refused with 503, and the process exits 0 once the
//! request is done.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Server, call, wait_until};

/// `GET url`, or `None` when the connection fails: one the server accepted
/// just before the drain began, and so closed as idle, is such a failure.
fn try_get(url: &str) -> Option<(u16, serde_json::Value)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let mut response = agent.get(url).call().ok()?;
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().ok()?;
    Some((status, serde_json::from_str(&body).unwrap_or_default()))
}

/// Reads one HTTP/1.1 response head (status line and headers) from `reader`.
fn read_head(reader: &mut impl BufRead) -> (u16, Vec<String>) {
    let mut status = String::new();
    reader.read_line(&mut status).expect("read a status line");
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not a status line: {status:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("read a header line");
        if line.trim_end().is_empty() {
            return (code, headers);
        }
        headers.push(line.trim_end().to_ascii_lowercase());
    }
}

#[test]
fn sigterm_finishes_the_request_in_flight_while_health_answers_503() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let address = server.url.strip_prefix("http://").unwrap().to_string();
    assert_eq!(
        call("GET", &format!("{}/health", server.url), &[], None).status,
        200
    );

    // A request whose body arrives slowly: once the server answers
    // `100 Continue`, its handler is reading the body, so the request is in
    // flight.
    let body = b"written while the server drains";
    let stream = TcpStream::connect(&address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    write!(
        writer,
        "PUT /v1/tables/t/keys/slow?durability=sync HTTP/1.1\r\nhost: {address}\r\n\
         content-length: {}\r\nexpect: 100-continue\r\n\r\n",
        body.len()
    )
    .unwrap();
    let (code, _) = read_head(&mut reader);
    assert_eq!(code, 100, "the handler is reading the body");
    writer.write_all(&body[..10]).unwrap();
    writer.flush().unwrap();

    server.terminate();

    // While the request is in flight the server says it is going away.
    let health = format!("{}/health", server.url);
    let mut answer = None;
    wait_until(Duration::from_secs(10), "/health to answer 503", || {
        answer = try_get(&health);
        answer.as_ref().is_some_and(|(status, _)| *status == 503)
    });
    let (_, health_body) = answer.unwrap();
    assert_eq!(health_body["status"], "shutting_down", "{health_body}");
    let refused = call(
        "PUT",
        &format!("{}/v1/tables/t/keys/late", server.url),
        &[],
        Some(b"x"),
    );
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (503, "shutting_down"),
        "{}",
        refused.text()
    );
    assert_eq!(refused.header("retry-after"), Some("1"));

    // The request in flight completes, and only then does the process end.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        try_get(&health).map(|(status, _)| status),
        Some(503),
        "still draining while the request waits for its body"
    );
    writer.write_all(&body[10..]).unwrap();
    writer.flush().unwrap();
    let (code, headers) = read_head(&mut reader);
    let length: usize = headers
        .iter()
        .find_map(|h| h.strip_prefix("content-length:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a content-length");
    let mut response = vec![0; length];
    reader.read_exact(&mut response).unwrap();
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&response));
    let started = Instant::now();
    assert_eq!(server.wait(), 0, "a clean shutdown");
    assert!(started.elapsed() < Duration::from_secs(20));

    // The write answered during the drain is in the data dir.
    let server = Server::start(dir.path(), &[]);
    let got = call(
        "GET",
        &format!("{}/v1/tables/t/keys/slow", server.url),
        &[],
        None,
    );
    assert_eq!((got.status, got.body.as_slice()), (200, &body[..]));
    assert_eq!(server.stop(), 0);
}
