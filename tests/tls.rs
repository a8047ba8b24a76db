//! HTTPS: `ebb serve --tls-cert/--tls-key` with a certificate the test
//! generates answers HTTP/1.1 and HTTP/2 (by ALPN), the CLI trusts it with
//! `--cacert`, a connection over the cap gets its 503 over TLS, plain HTTP
//! on the TLS port is refused without harm, SIGHUP reloads the certificate
//! and a bad certificate stops the server at start.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

use crate::common::{Server, ebb_bin, wait_until};

/// A self-signed certificate for `localhost` and 127.0.0.1, written as
/// `cert.pem` and `key.pem` in `dir`; answers the certificate's PEM.
fn certificate(dir: &Path) -> (PathBuf, PathBuf, String) {
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let pem = generated.cert.pem();
    std::fs::write(&cert, &pem).unwrap();
    std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
    (cert, key, pem)
}

fn tls_args<'a>(cert: &'a Path, key: &'a Path) -> Vec<&'a str> {
    vec![
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]
}

/// An HTTP client trusting only `pem`.
fn agent(pem: &str) -> ureq::Agent {
    use ureq::tls::{Certificate, RootCerts, TlsConfig};
    let cert = Certificate::from_pem(pem.as_bytes()).unwrap();
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .tls_config(
            TlsConfig::builder()
                .root_certs(RootCerts::Specific(Arc::new(vec![cert])))
                .build(),
        )
        .build()
        .into()
}

/// A TLS client config trusting only `pem`, offering `alpn`.
fn client_config(pem: &str, alpn: &[&[u8]]) -> Arc<ClientConfig> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

fn address(server: &Server) -> String {
    server.url.strip_prefix("https://").unwrap().to_string()
}

/// `ebb` as a client of `server`, trusting `cert`.
fn ebb(server: &Server, cert: Option<&Path>, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(ebb_bin());
    command.args(["--url", &server.url]);
    if let Some(cert) = cert {
        command.arg("--cacert").arg(cert);
    }
    command.args(args).output().unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn https_serves_http1_and_http2_and_the_cli_trusts_a_given_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, pem) = certificate(dir.path());
    let data = dir.path().join("data");
    let server = Server::start(&data, &tls_args(&cert, &key));
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );

    // HTTP/1.1 (ureq offers no ALPN: the server falls back to HTTP/1.1).
    let agent = agent(&pem);
    let put = agent
        .put(format!("{}/v1/tables/t/keys/k1", server.url))
        .send("over tls")
        .unwrap();
    assert_eq!(put.status(), 200);
    let mut got = agent
        .get(format!("{}/v1/tables/t/keys/k1", server.url))
        .call()
        .unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.body_mut().read_to_string().unwrap(), "over tls");

    // HTTP/2 chosen by ALPN.
    let (version, status, body) = runtime().block_on(async {
        let stream = tokio::net::TcpStream::connect(address(&server))
            .await
            .unwrap();
        let connector =
            tokio_rustls::TlsConnector::from(client_config(&pem, &[b"h2", b"http/1.1"]));
        let name = ServerName::try_from("localhost").unwrap();
        let stream = connector.connect(name, stream).await.unwrap();
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (mut sender, connection) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await
        .unwrap();
        tokio::spawn(connection);
        let request = hyper::Request::get(format!("{}/v1/tables/t/keys/k1", server.url))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        let (version, status) = (response.version(), response.status());
        use http_body_util::BodyExt;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (version, status, body)
    });
    assert_eq!(version, hyper::Version::HTTP_2);
    assert_eq!(status, 200);
    assert_eq!(&body[..], b"over tls");

    // The CLI with --cacert; without it the certificate is not trusted.
    let out = ebb(&server, Some(&cert), &["put", "t", "k2", "from the cli"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ebb(&server, Some(&cert), &["get", "t", "k2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "from the cli");
    let out = ebb(&server, None, &["get", "t", "k2"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot reach"), "{stderr}");
    let out = ebb(
        &server,
        Some(&dir.path().join("nope.pem")),
        &["get", "t", "k2"],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--cacert") && stderr.contains("nope.pem"),
        "{stderr}"
    );

    // Plain HTTP on the TLS port fails its handshake; the server goes on
    // and counts it.
    runtime().block_on(async {
        let mut stream = tokio::net::TcpStream::connect(address(&server))
            .await
            .unwrap();
        stream
            .write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
            .await
            .expect("the server closes a plain-HTTP connection");
        assert!(!answer.starts_with(b"HTTP/1.1 200"));
    });
    let mut metrics = agent.get(format!("{}/metrics", server.url)).call().unwrap();
    let metrics = metrics.body_mut().read_to_string().unwrap();
    let failures = metrics
        .lines()
        .find_map(|l| l.strip_prefix("ebb_http_tls_handshake_failures_total "))
        .expect("the handshake failure counter");
    assert!(failures.trim().parse::<f64>().unwrap() >= 1.0, "{failures}");
    assert_eq!(server.stop(), 0);
}

#[test]
fn a_connection_over_the_cap_gets_its_503_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, pem) = certificate(dir.path());
    let mut args = tls_args(&cert, &key);
    args.extend(["--max-connections", "1"]);
    let server = Server::start(&dir.path().join("data"), &args);
    runtime().block_on(async {
        let connector = tokio_rustls::TlsConnector::from(client_config(&pem, &[b"http/1.1"]));
        let connect = || async {
            let stream = tokio::net::TcpStream::connect(address(&server))
                .await
                .unwrap();
            let name = ServerName::try_from("localhost").unwrap();
            connector.connect(name, stream).await
        };
        // The one connection allowed, held open.
        let mut held = connect().await.unwrap();
        held.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut first = [0u8; 12];
        held.read_exact(&mut first).await.unwrap();
        assert_eq!(&first, b"HTTP/1.1 200");
        // The next is answered 503 over TLS and closed.
        let mut refused = connect().await.expect("the refusal's handshake");
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), refused.read_to_end(&mut answer))
            .await
            .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("overloaded") && answer.contains("--max-connections"));
        drop(held);
    });
}

#[test]
fn sighup_reloads_the_certificate_and_a_bad_one_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, old_pem) = certificate(dir.path());
    let server = Server::start(&dir.path().join("data"), &tls_args(&cert, &key));
    let health = |pem: &str| {
        agent(pem)
            .get(format!("{}/health", server.url))
            .call()
            .map(|r| r.status().as_u16())
    };
    assert_eq!(health(&old_pem).unwrap(), 200);
    // Renewed in place, then SIGHUP: new connections present the new one.
    let (_, _, new_pem) = certificate(dir.path());
    assert!(health(&new_pem).is_err(), "not reloaded before SIGHUP");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(server.pid() as i32, libc::SIGHUP) };
    wait_until(Duration::from_secs(10), "the new certificate", || {
        health(&new_pem).is_ok()
    });
    assert!(health(&old_pem).is_err());
    // A broken renewal keeps the certificate in force.
    std::fs::write(&cert, "garbage").unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(server.pid() as i32, libc::SIGHUP) };
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(health(&new_pem).unwrap(), 200);
    assert_eq!(server.stop(), 0);

    // A certificate that does not load stops the server at start, naming it.
    let out = Command::new(ebb_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data2"))
        .args(tls_args(&cert, &key))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cert.pem") && stderr.contains("no PEM certificate"),
        "{stderr}"
    );
    // --tls-cert needs --tls-key.
    let out = Command::new(ebb_bin())
        .args(["serve", "--tls-cert"])
        .arg(&cert)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-key"));
}
