//! The server side of the cluster port: accepts HTTP/2 connections, checks
//! that each message comes from a member (and carries the secret when one
//! is set), and hands Raft messages and forwarded requests to the node.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::{
    FORWARD_BATCH_PATH, FORWARD_PATH, MAX_MESSAGE_BYTES, NODE_HEADER, RAFT_BATCH_PATH, RAFT_PATH,
    SECRET_HEADER,
};
use ebb_host::Node;
use ebb_host::raft::NodeId;
use ebb_proto::Message;
use ebb_proto::raft::v1::RaftBatch;

/// Most connections open at once on the cluster port (members need one
/// each way; the rest is headroom for reconnects).
const MAX_CONNECTIONS: usize = 256;

/// What the cluster port serves: the node once it is open. Messages that
/// arrive before (peers reach a starting node) are answered 503 and
/// retried by their sender.
pub struct ClusterListener {
    node: OnceLock<Node>,
    members: BTreeMap<NodeId, String>,
    secret: Option<String>,
}

impl ClusterListener {
    /// A listener admitting `members`, requiring `secret` when set.
    pub fn new(members: BTreeMap<NodeId, String>, secret: Option<String>) -> Arc<Self> {
        Arc::new(Self {
            node: OnceLock::new(),
            members,
            secret,
        })
    }

    /// Start serving `node`.
    pub fn set_node(&self, node: Node) {
        let _ = self.node.set(node);
    }

    async fn handle(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        if let Err((status, reason)) = self.admit(&request) {
            return answer(status, reason);
        }
        let path = request.uri().path().to_string();
        let body = match Limited::new(request.into_body(), MAX_MESSAGE_BYTES)
            .collect()
            .await
        {
            Ok(body) => body.to_bytes(),
            Err(error) => {
                return answer(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("cannot read the message (at most {MAX_MESSAGE_BYTES} bytes): {error}"),
                );
            }
        };
        let Some(cluster) = self.node.get().and_then(|node| node.cluster()) else {
            return answer(StatusCode::SERVICE_UNAVAILABLE, "the node is starting");
        };
        let reply = match path.as_str() {
            RAFT_PATH => cluster.serve_raft(&body).await,
            FORWARD_PATH => cluster.serve_forward(&body).await,
            // Every message of a batch at once: Raft appends share a log
            // commit, forwarded writes to one group share a round.
            RAFT_BATCH_PATH | FORWARD_BATCH_PATH => match RaftBatch::decode(body) {
                Ok(batch) => {
                    let raft = path == RAFT_BATCH_PATH;
                    let answers = batch.messages.iter().map(|m| async move {
                        if raft {
                            cluster.serve_raft(m).await
                        } else {
                            cluster.serve_forward(m).await
                        }
                    });
                    let messages = futures::future::join_all(answers).await;
                    Bytes::from(RaftBatch { messages }.encode_to_vec())
                }
                Err(error) => {
                    return answer(
                        StatusCode::BAD_REQUEST,
                        format!("a malformed batch on {path}: {error}"),
                    );
                }
            },
            _ => return answer(StatusCode::NOT_FOUND, format!("no internal route {path}")),
        };
        Response::new(Full::new(reply))
    }

    /// Whether the sender is a member with the right secret.
    fn admit(&self, request: &Request<Incoming>) -> Result<(), (StatusCode, &'static str)> {
        if let Some(secret) = &self.secret {
            let given = request
                .headers()
                .get(SECRET_HEADER)
                .map(|v| v.as_bytes())
                .unwrap_or_default();
            if !bool::from(given.ct_eq(secret.as_bytes())) {
                return Err((
                    StatusCode::UNAUTHORIZED,
                    "wrong or missing cluster secret (--cluster-secret)",
                ));
            }
        }
        let sender = request
            .headers()
            .get(NODE_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<NodeId>().ok());
        match sender {
            Some(id) if self.members.contains_key(&id) => Ok(()),
            _ => Err((
                StatusCode::FORBIDDEN,
                "the sender is not a member of this cluster (--peers)",
            )),
        }
    }
}

fn answer(status: StatusCode, message: impl Into<String>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(message.into())));
    *response.status_mut() = status;
    response
}

/// Serve `listener` on `socket` until the process ends.
pub async fn serve_cluster(socket: TcpListener, listener: Arc<ClusterListener>) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match socket.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "cluster port accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "cluster port at {MAX_CONNECTIONS} connections; refused one");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let listener = listener.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let listener = listener.clone();
                async move { Ok::<_, Infallible>(listener.handle(request).await) }
            });
            let served = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .max_concurrent_streams(1024)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(error) = served {
                tracing::debug!(%peer, %error, "cluster connection ended");
            }
            drop(permit);
        });
    }
}
