//! The HTTP client shared by every CLI command.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};

/// What a request came back with.
#[derive(Debug)]
pub struct Reply {
    /// Response headers.
    pub headers: axum::http::HeaderMap,
    /// Response body.
    pub body: Vec<u8>,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> Result<Value, ClientError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| ClientError::Protocol(format!("response is not JSON: {e}")))
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server could not be reached.
    #[error("cannot reach {url}: {reason}")]
    Connect {
        /// The URL tried.
        url: String,
        /// Why.
        reason: String,
    },
    /// The server answered with an error.
    #[error("{message} ({code}, HTTP {status})")]
    Server {
        /// HTTP status.
        status: u16,
        /// The error code.
        code: String,
        /// The error message.
        message: String,
    },
    /// The answer could not be understood.
    #[error("unexpected response: {0}")]
    Protocol(String),
    /// A local step failed (reading a file, building or running a plugin).
    #[error("{0}")]
    Local(String),
}

/// Largest response body the CLI reads.
const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

/// A client for one server.
pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

/// The PEM certificates in `path`.
fn trusted(path: &Path) -> Result<Vec<Certificate<'static>>, ClientError> {
    let pem = std::fs::read(path)
        .map_err(|e| ClientError::Local(format!("cannot read --cacert {}: {e}", path.display())))?;
    let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
        .filter_map(|item| match item {
            Ok(PemItem::Certificate(cert)) => Some(cert),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(ClientError::Local(format!(
            "--cacert {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        )));
    }
    Ok(certs)
}

/// Percent-encode one path segment (everything but unreserved characters).
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

impl Client {
    /// A client for the server at `base` (e.g. `http://127.0.0.1:7070`, or
    /// `https://…` trusting the Mozilla root set built in).
    pub fn new(base: &str, token: Option<String>) -> Self {
        Self::with_cacert(base, token, None).expect("no certificate file to read")
    }

    /// [`Client::new`] trusting, over HTTPS, the PEM certificates in
    /// `cacert` instead of the built-in roots (a self-signed server's own
    /// certificate, or a private CA). Fails only when `cacert` cannot be
    /// read or holds no certificate.
    pub fn with_cacert(
        base: &str,
        token: Option<String>,
        cacert: Option<&Path>,
    ) -> Result<Self, ClientError> {
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(300)));
        if let Some(path) = cacert {
            config = config.tls_config(
                TlsConfig::builder()
                    .root_certs(RootCerts::Specific(Arc::new(trusted(path)?)))
                    .build(),
            );
        }
        Ok(Self {
            agent: config.build().into(),
            base: base.trim_end_matches('/').to_string(),
            token,
        })
    }

    /// Send a request; non-2xx answers become [`ClientError::Server`].
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<(&[u8], &str)>,
    ) -> Result<Reply, ClientError> {
        self.request(method, path, body, &[])
    }

    /// [`Client::send`] with extra request headers.
    pub fn send_with_headers(
        &self,
        method: &str,
        path: &str,
        body: Option<(&[u8], &str)>,
        headers: &[(&str, &str)],
    ) -> Result<Reply, ClientError> {
        self.request(method, path, body, headers)
    }

    /// Send a JSON body asking for the answer as `accept`.
    pub fn send_with_accept(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
        accept: &str,
    ) -> Result<Reply, ClientError> {
        self.request(
            method,
            path,
            Some((body, "application/json")),
            &[("accept", accept)],
        )
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<(&[u8], &str)>,
        headers: &[(&str, &str)],
    ) -> Result<Reply, ClientError> {
        let url = format!("{}{}", self.base, path);
        let mut builder = axum::http::Request::builder().method(method).uri(&url);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        if let Some(token) = &self.token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        let connect = |e: &dyn std::fmt::Display| ClientError::Connect {
            url: url.clone(),
            reason: e.to_string(),
        };
        let result = match body {
            Some((bytes, content_type)) => {
                let request = builder
                    .header("content-type", content_type)
                    .body(bytes.to_vec())
                    .map_err(|e| connect(&e))?;
                self.agent.run(request)
            }
            None => {
                let request = builder.body(()).map_err(|e| connect(&e))?;
                self.agent.run(request)
            }
        };
        let mut response = result.map_err(|e| connect(&e))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_vec()
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        if (200..300).contains(&status) {
            return Ok(Reply { headers, body });
        }
        let error = serde_json::from_slice::<Value>(&body).ok();
        let field = |name: &str| {
            error
                .as_ref()
                .and_then(|e| e["error"][name].as_str())
                .map(str::to_string)
        };
        Err(ClientError::Server {
            status,
            code: field("code").unwrap_or_else(|| "unknown".into()),
            message: field("message")
                .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(encode_segment("user:1/a b"), "user%3A1%2Fa%20b");
        assert_eq!(encode_segment("é"), "%C3%A9");
        assert_eq!(encode_segment("a-b_c.d~"), "a-b_c.d~");
    }
}
