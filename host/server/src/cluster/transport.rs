//! The client side of the cluster port: one HTTP/2 connection per member,
//! opened on first use and again after it breaks, multiplexing every
//! group's Raft messages and every forwarded request.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http2::SendRequest;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use super::{FORWARD_PATH, MAX_MESSAGE_BYTES, NODE_HEADER, RAFT_PATH, SECRET_HEADER};
use ebb_host::raft::{NodeId, Service, Transport, TransportError};

/// How long opening a connection to a member may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A member's connection, shared by every caller.
#[derive(Default)]
struct Slot {
    connection: tokio::sync::Mutex<Option<SendRequest<Full<Bytes>>>>,
}

/// Carries this node's messages to the other members over HTTP/2.
pub struct HttpTransport(Arc<Inner>);

struct Inner {
    node_id: NodeId,
    secret: Option<String>,
    peers: BTreeMap<NodeId, (String, Slot)>,
}

impl HttpTransport {
    /// A transport from member `node_id` to `peers` (id → cluster address),
    /// sending `secret` with every message when set.
    pub fn new(
        node_id: NodeId,
        peers: &BTreeMap<NodeId, String>,
        secret: Option<String>,
    ) -> Arc<Self> {
        Arc::new(Self(Arc::new(Inner {
            node_id,
            secret,
            peers: peers
                .iter()
                .map(|(id, addr)| (*id, (addr.clone(), Slot::default())))
                .collect(),
        })))
    }
}

impl Inner {
    async fn send(
        &self,
        to: NodeId,
        service: Service,
        body: Bytes,
    ) -> Result<Bytes, TransportError> {
        let (addr, slot) = self.peers.get(&to).ok_or(TransportError::UnknownNode(to))?;
        let unreachable = |reason: String| TransportError::Unreachable { node: to, reason };
        let mut sender = {
            let mut connection = slot.connection.lock().await;
            match connection.as_ref() {
                Some(sender) if !sender.is_closed() => sender.clone(),
                _ => {
                    let sender = connect(addr).await.map_err(unreachable)?;
                    *connection = Some(sender.clone());
                    sender
                }
            }
        };
        let path = match service {
            Service::Raft => RAFT_PATH,
            Service::Forward => FORWARD_PATH,
        };
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{addr}{path}"))
            .header(NODE_HEADER, self.node_id.to_string())
            .header("content-type", "application/x-protobuf");
        if let Some(secret) = &self.secret {
            request = request.header(SECRET_HEADER, secret.as_str());
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| unreachable(e.to_string()))?;
        sender
            .ready()
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let response = match sender.send_request(request).await {
            Ok(response) => response,
            Err(error) => {
                // The connection broke: the next call opens a new one.
                *slot.connection.lock().await = None;
                return Err(unreachable(error.to_string()));
            }
        };
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_MESSAGE_BYTES)
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .to_bytes();
        if status == StatusCode::OK {
            Ok(body)
        } else {
            Err(TransportError::Refused {
                node: to,
                reason: format!("{status}: {}", String::from_utf8_lossy(&body)),
            })
        }
    }
}

/// Open an HTTP/2 connection (prior knowledge, no TLS) to `addr`.
async fn connect(addr: &str) -> Result<SendRequest<Full<Bytes>>, String> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| format!("no connection to {addr} within {CONNECT_TIMEOUT:?}"))?
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP/2 handshake with {addr} failed: {e}"))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "cluster connection closed");
        }
    });
    Ok(sender)
}

impl Transport for HttpTransport {
    fn call(
        &self,
        to: NodeId,
        service: Service,
        body: Bytes,
        timeout: Duration,
    ) -> BoxFuture<'static, Result<Bytes, TransportError>> {
        // The future must not borrow `self`: openraft holds it across awaits.
        let this = self.0.clone();
        Box::pin(async move {
            match tokio::time::timeout(timeout, this.send(to, service, body)).await {
                Ok(result) => result,
                Err(_) => Err(TransportError::Timeout {
                    node: to,
                    ms: timeout.as_millis() as u64,
                }),
            }
        })
    }
}
