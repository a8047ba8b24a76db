//! The client side of the cluster port: one HTTP/2 connection per member,
//! opened on first use and again after it breaks, multiplexing every
//! group's Raft messages and every forwarded request.
//!
//! Raft messages to one member are batched: while [`MAX_BATCHES_IN_FLIGHT`]
//! batches to it are on the wire, further messages (of any group) wait and
//! leave together in the next one, one HTTP/2 request (`RaftBatch`). An
//! idle link sends each message at once, alone; a busy one pays one
//! request, one header block and one receiving task per batch instead of
//! per message, and the receiver appends the batch's entries in one group
//! commit. Snapshots and other large messages always go alone. Short
//! forwarded requests (writes and reads for a fragment's leader,
//! [`Service::ForwardShort`]) are batched the same way, apart from the
//! Raft messages: a batch's answer waits for its slowest request, so only
//! requests that take about one Raft round share one.
//!
//! Each member's link is logged when it changes, not per message: a
//! warning when messages to it start failing (again every
//! [`STILL_DOWN_EVERY`] while they do) and a note when one gets through.
//! openraft's own warning per failed heartbeat and replication attempt is
//! filtered out of the default log (`cli`), so a member down for an hour
//! costs a few dozen log lines, not one per group per heartbeat.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http2::SendRequest;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use super::{
    FORWARD_BATCH_PATH, FORWARD_PATH, MAX_MESSAGE_BYTES, NODE_HEADER, RAFT_BATCH_PATH, RAFT_PATH,
    SECRET_HEADER,
};
use ebb_host::raft::{NodeId, Service, Transport, TransportError};
use ebb_proto::Message;
use ebb_proto::raft::v1::RaftBatch;

/// How long opening a connection to a member may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Batches of Raft messages on the wire to one member at once.
const MAX_BATCHES_IN_FLIGHT: usize = 2;
/// Most messages in one batch.
const MAX_BATCH_MESSAGES: usize = 256;
/// A Raft message larger than this (a snapshot, a long append) goes alone,
/// so a batch's small messages never wait behind it.
const MAX_BATCHED_BYTES: usize = 64 * 1024;

/// While messages to a member keep failing, how often that is logged again.
const STILL_DOWN_EVERY: Duration = Duration::from_secs(60);

/// A Raft message waiting for the next batch, and where its answer goes.
struct Pending {
    body: Bytes,
    reply: tokio::sync::oneshot::Sender<Result<Bytes, TransportError>>,
}

/// The messages of one kind waiting for a member, and the batches of that
/// kind on the wire.
#[derive(Default)]
struct Batches {
    waiting: Vec<Pending>,
    in_flight: usize,
}

/// What a batch carries: Raft messages, or short forwarded requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Raft = 0,
    Forward = 1,
}

impl Kind {
    /// The path of one message of this kind alone.
    fn single_path(self) -> &'static str {
        match self {
            Kind::Raft => RAFT_PATH,
            Kind::Forward => FORWARD_PATH,
        }
    }

    /// The path of a batch of messages of this kind.
    fn batch_path(self) -> &'static str {
        match self {
            Kind::Raft => RAFT_BATCH_PATH,
            Kind::Forward => FORWARD_BATCH_PATH,
        }
    }
}

/// A member's connection, shared by every caller.
#[derive(Default)]
struct Slot {
    connection: tokio::sync::Mutex<Option<SendRequest<Full<Bytes>>>>,
    /// By [`Kind`].
    batches: [parking_lot::Mutex<Batches>; 2],
    link: parking_lot::Mutex<Link>,
    /// Whether `link` is in a run of failures: a message that gets through
    /// a working link (nearly every one) reads this and takes no lock.
    link_down: std::sync::atomic::AtomicBool,
}

/// Whether messages to a member get through, for the log.
#[derive(Debug, Default)]
struct Link {
    /// Since the first failure of the current run of failures; `None`
    /// while messages get through.
    down_since: Option<Instant>,
    /// Messages failed since `down_since`.
    failed: u64,
    /// When the run of failures was last logged.
    logged_at: Option<Instant>,
}

/// What to log about a link after a message's outcome.
#[derive(Debug, PartialEq)]
enum LinkEvent {
    /// The first failure after messages got through (or since start).
    Down,
    /// Failures go on, and [`STILL_DOWN_EVERY`] passed since the last log.
    StillDown { for_: Duration, failed: u64 },
    /// A message got through after failures.
    Up { after: Duration, failed: u64 },
}

impl Link {
    /// Record one message's outcome at `now`; what to log, if anything.
    fn record(&mut self, ok: bool, now: Instant) -> Option<LinkEvent> {
        match (ok, self.down_since) {
            (true, None) => None,
            (true, Some(since)) => {
                let event = LinkEvent::Up {
                    after: now.saturating_duration_since(since),
                    failed: self.failed,
                };
                *self = Link::default();
                Some(event)
            }
            (false, None) => {
                *self = Link {
                    down_since: Some(now),
                    failed: 1,
                    logged_at: Some(now),
                };
                Some(LinkEvent::Down)
            }
            (false, Some(since)) => {
                self.failed += 1;
                let due = self
                    .logged_at
                    .is_none_or(|at| now.saturating_duration_since(at) >= STILL_DOWN_EVERY);
                due.then(|| {
                    self.logged_at = Some(now);
                    LinkEvent::StillDown {
                        for_: now.saturating_duration_since(since),
                        failed: self.failed,
                    }
                })
            }
        }
    }
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
    /// Note the outcome of a message to `to`, logging a change of its link.
    /// A refusal counts as getting through: the member answered, and the
    /// refusal reaches its caller (and the log, where it matters) as such.
    fn record(&self, to: NodeId, outcome: &Result<Bytes, TransportError>) {
        let Some((addr, slot)) = self.peers.get(&to) else {
            return;
        };
        let ok = !matches!(
            outcome,
            Err(TransportError::Unreachable { .. } | TransportError::Timeout { .. })
        );
        let down = &slot.link_down;
        if ok && !down.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let event = {
            let mut link = slot.link.lock();
            let event = link.record(ok, Instant::now());
            down.store(
                link.down_since.is_some(),
                std::sync::atomic::Ordering::Relaxed,
            );
            event
        };
        match (event, outcome) {
            (None, _) => {}
            (Some(LinkEvent::Down), Err(error)) => tracing::warn!(
                member = to,
                %addr,
                %error,
                "messages to member {to} fail; they are retried, and this is logged again every {} s while it lasts",
                STILL_DOWN_EVERY.as_secs()
            ),
            (Some(LinkEvent::StillDown { for_, failed }), Err(error)) => tracing::warn!(
                member = to,
                %addr,
                %error,
                "messages to member {to} still fail after {} s ({failed} failed)",
                for_.as_secs()
            ),
            (Some(LinkEvent::Up { after, failed }), _) => tracing::info!(
                member = to,
                %addr,
                "member {to} is reachable again after {:.1} s ({failed} messages failed)",
                after.as_secs_f64()
            ),
            (Some(_), Ok(_)) => {}
        }
    }

    /// Send one message of `kind` to `to` in the next batch of its kind,
    /// sending that batch now when fewer than [`MAX_BATCHES_IN_FLIGHT`] of
    /// them are on the wire.
    async fn send_batched(
        self: Arc<Self>,
        kind: Kind,
        to: NodeId,
        body: Bytes,
    ) -> Result<Bytes, TransportError> {
        let (_, slot) = self.peers.get(&to).ok_or(TransportError::UnknownNode(to))?;
        if body.len() > MAX_BATCHED_BYTES {
            return self.send(to, kind.single_path(), body).await;
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let batch = {
            let mut batches = slot.batches[kind as usize].lock();
            batches.waiting.push(Pending { body, reply });
            (batches.in_flight < MAX_BATCHES_IN_FLIGHT).then(|| {
                batches.in_flight += 1;
                take_batch(&mut batches.waiting)
            })
        };
        if let Some(batch) = batch {
            // Its own task: a caller that gives up (its timeout) must not
            // cancel the other callers' messages.
            tokio::spawn(self.clone().run_batches(kind, to, batch));
        }
        answer.await.unwrap_or_else(|_| {
            Err(TransportError::Unreachable {
                node: to,
                reason: "the batch carrying the message was dropped".into(),
            })
        })
    }

    /// Send `batch`, then every batch that gathered meanwhile, until none
    /// waits.
    async fn run_batches(self: Arc<Self>, kind: Kind, to: NodeId, mut batch: Vec<Pending>) {
        let slot = &self.peers[&to].1;
        loop {
            self.send_batch(kind, to, batch).await;
            let mut batches = slot.batches[kind as usize].lock();
            if batches.waiting.is_empty() {
                batches.in_flight -= 1;
                return;
            }
            batch = take_batch(&mut batches.waiting);
        }
    }

    /// One HTTP/2 request for `batch` (a plain request for one message),
    /// and each message's answer to its caller.
    async fn send_batch(&self, kind: Kind, to: NodeId, batch: Vec<Pending>) {
        if batch.is_empty() {
            return;
        }
        if batch.len() == 1 {
            let Pending { body, reply } = batch.into_iter().next().expect("one message");
            let _ = reply.send(self.send(to, kind.single_path(), body).await);
            return;
        }
        let (bodies, replies): (Vec<Bytes>, Vec<_>) =
            batch.into_iter().map(|p| (p.body, p.reply)).unzip();
        // Kept to send each alone should the member have no batch route
        // for them (only forwarded requests can meet one).
        let fallback = (kind == Kind::Forward).then(|| bodies.clone());
        let envelope = RaftBatch { messages: bodies }.encode_to_vec();
        let answers = match self
            .exchange(to, kind.batch_path(), Bytes::from(envelope))
            .await
        {
            // A member of an earlier version has no route for batches of
            // forwarded requests (a rolling upgrade): each goes alone.
            Ok((StatusCode::NOT_FOUND, _)) if fallback.is_some() => {
                let alone = fallback
                    .into_iter()
                    .flatten()
                    .map(|body| self.send(to, kind.single_path(), body));
                let answers = futures::future::join_all(alone).await;
                for (reply, answer) in replies.into_iter().zip(answers) {
                    let _ = reply.send(answer);
                }
                return;
            }
            answered => answered.and_then(|(status, body)| refused_unless_ok(to, status, body)),
        };
        let answers = answers.and_then(|bytes| {
            let answers = RaftBatch::decode(bytes).map_err(|e| e.to_string());
            match answers {
                Ok(answers) if answers.messages.len() == replies.len() => Ok(answers.messages),
                Ok(answers) => Err(format!(
                    "{} answers to a batch of {}",
                    answers.messages.len(),
                    replies.len()
                )),
                Err(error) => Err(error),
            }
            .map_err(|reason| TransportError::Unreachable { node: to, reason })
        });
        match answers {
            Ok(answers) => {
                for (reply, answer) in replies.into_iter().zip(answers) {
                    let _ = reply.send(Ok(answer));
                }
            }
            Err(error) => {
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
        }
    }

    /// One request to `to`; its answer's body when the status is 200 OK,
    /// else [`TransportError::Refused`].
    async fn send(
        &self,
        to: NodeId,
        path: &'static str,
        body: Bytes,
    ) -> Result<Bytes, TransportError> {
        let (status, body) = self.exchange(to, path, body).await?;
        refused_unless_ok(to, status, body)
    }

    /// One request to `to`: the answer's status and body.
    async fn exchange(
        &self,
        to: NodeId,
        path: &'static str,
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), TransportError> {
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
        Ok((status, body))
    }
}

/// `body` when `status` is 200 OK, else a refusal by `to` quoting it.
fn refused_unless_ok(to: NodeId, status: StatusCode, body: Bytes) -> Result<Bytes, TransportError> {
    if status == StatusCode::OK {
        Ok(body)
    } else {
        Err(TransportError::Refused {
            node: to,
            reason: format!("{status}: {}", String::from_utf8_lossy(&body)),
        })
    }
}

/// The first [`MAX_BATCH_MESSAGES`] of `waiting`, less those whose caller
/// gave up meanwhile (its timeout): a request nobody waits for is not sent
/// late, after the caller may have asked another member.
fn take_batch(waiting: &mut Vec<Pending>) -> Vec<Pending> {
    let mut batch = if waiting.len() <= MAX_BATCH_MESSAGES {
        std::mem::take(waiting)
    } else {
        let rest = waiting.split_off(MAX_BATCH_MESSAGES);
        std::mem::replace(waiting, rest)
    };
    batch.retain(|pending| !pending.reply.is_closed());
    batch
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
            let sent = async {
                match service {
                    Service::Raft => this.clone().send_batched(Kind::Raft, to, body).await,
                    Service::ForwardShort => {
                        this.clone().send_batched(Kind::Forward, to, body).await
                    }
                    Service::Forward => this.send(to, FORWARD_PATH, body).await,
                }
            };
            let outcome = match tokio::time::timeout(timeout, sent).await {
                Ok(result) => result,
                Err(_) => Err(TransportError::Timeout {
                    node: to,
                    ms: timeout.as_millis() as u64,
                }),
            };
            this.record(to, &outcome);
            outcome
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use hyper::Response;
    use hyper::body::Incoming;

    use super::*;

    /// Requests a test peer received, by path: (requests, messages).
    #[derive(Default)]
    struct Seen(parking_lot::Mutex<BTreeMap<String, (usize, usize)>>);

    impl Seen {
        fn at(&self, path: &str) -> (usize, usize) {
            self.0.lock().get(path).copied().unwrap_or_default()
        }
    }

    /// A peer answering every message with its own bytes (each message of
    /// a batch with its own), slowly (1 ms), so messages gather while
    /// batches are on the wire; without `forward_batches` (a member of an
    /// earlier version) it answers batches of forwarded requests 404.
    async fn echo_peer(seen: Arc<Seen>, forward_batches: bool) -> String {
        let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            loop {
                let (stream, _) = socket.accept().await.unwrap();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                        let seen = seen.clone();
                        async move {
                            let path = request.uri().path().to_string();
                            let body = request.into_body().collect().await.unwrap().to_bytes();
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            if path == FORWARD_BATCH_PATH && !forward_batches {
                                seen.0.lock().entry(path).or_default().0 += 1;
                                let mut refused = Response::new(Full::new(Bytes::new()));
                                *refused.status_mut() = StatusCode::NOT_FOUND;
                                return Ok::<_, Infallible>(refused);
                            }
                            let messages = match path.as_str() {
                                RAFT_BATCH_PATH | FORWARD_BATCH_PATH => {
                                    RaftBatch::decode(body.clone()).unwrap().messages.len()
                                }
                                RAFT_PATH | FORWARD_PATH => 1,
                                other => panic!("no route {other}"),
                            };
                            let mut seen = seen.0.lock();
                            let at = seen.entry(path).or_default();
                            at.0 += 1;
                            at.1 += messages;
                            Ok::<_, Infallible>(Response::new(Full::new(body)))
                        }
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        addr
    }

    /// 300 calls of `service` at once to a fresh echo peer (with
    /// `forward_batches` or not): each gets its own answer; what the peer
    /// saw.
    async fn many_at_once(service: Service, forward_batches: bool) -> Arc<Seen> {
        let seen = Arc::new(Seen::default());
        let addr = echo_peer(seen.clone(), forward_batches).await;
        let peers = BTreeMap::from([(1, "127.0.0.1:1".to_string()), (2, addr)]);
        let transport = HttpTransport::new(1, &peers, None);
        let calls = (0..300).map(|i| {
            let body = Bytes::from(format!("message {i}"));
            let call = transport.call(2, service, body, Duration::from_secs(10));
            async move { (i, call.await) }
        });
        for (i, answer) in futures::future::join_all(calls).await {
            assert_eq!(answer.unwrap(), Bytes::from(format!("message {i}")));
        }
        seen
    }

    /// Checks that the peer got each of 300 messages once, on `batch_path` or
    /// `single_path`, in fewer than 100 requests.
    fn assert_batched(seen: &Seen, batch_path: &str, single_path: &str) {
        let (batches, batched) = seen.at(batch_path);
        let (single, _) = seen.at(single_path);
        assert_eq!(batched + single, 300, "every message sent once");
        assert!(
            batches + single < 100,
            "{batches} batches and {single} single requests for 300 messages"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn raft_messages_gather_into_batches_and_each_gets_its_own_answer() {
        let seen = Arc::new(Seen::default());
        let addr = echo_peer(seen.clone(), true).await;
        let peers = BTreeMap::from([(1, "127.0.0.1:1".to_string()), (2, addr)]);
        let transport = HttpTransport::new(1, &peers, None);
        // Alone: one plain request.
        let alone = transport
            .call(
                2,
                Service::Raft,
                Bytes::from_static(b"one"),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(&alone[..], b"one");
        assert_eq!(seen.at(RAFT_PATH), (1, 1));
        // A large message goes alone even when others wait.
        let large = Bytes::from(vec![7u8; MAX_BATCHED_BYTES + 1]);
        let answer = transport
            .call(2, Service::Raft, large.clone(), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(answer, large);
        assert_eq!(seen.at(RAFT_PATH), (2, 2));
        // Many at once: each answer is its own message's, in fewer requests.
        let seen = many_at_once(Service::Raft, true).await;
        assert_batched(&seen, RAFT_BATCH_PATH, RAFT_PATH);
        assert_eq!(seen.at(FORWARD_PATH), (0, 0));
        assert_eq!(seen.at(FORWARD_BATCH_PATH), (0, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn short_forwards_gather_into_their_own_batches_and_others_go_alone() {
        let seen = many_at_once(Service::ForwardShort, true).await;
        assert_batched(&seen, FORWARD_BATCH_PATH, FORWARD_PATH);
        assert_eq!(
            seen.at(RAFT_BATCH_PATH),
            (0, 0),
            "no Raft batch carries them"
        );
        // Other forwarded requests (pages, metadata) never share a request.
        let seen = many_at_once(Service::Forward, true).await;
        assert_eq!(seen.at(FORWARD_PATH), (300, 300));
        assert_eq!(seen.at(FORWARD_BATCH_PATH), (0, 0));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_without_forward_batches_gets_each_request_alone() {
        let seen = many_at_once(Service::ForwardShort, false).await;
        assert!(
            seen.at(FORWARD_BATCH_PATH).0 >= 1,
            "batches were tried and refused"
        );
        assert_eq!(
            seen.at(FORWARD_PATH),
            (300, 300),
            "every request answered, each alone"
        );
    }

    #[test]
    fn a_link_is_logged_when_it_fails_every_minute_while_it_does_and_when_it_is_back() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut link = Link::default();
        assert_eq!(
            link.record(true, at(0)),
            None,
            "a working link logs nothing"
        );
        assert_eq!(link.record(false, at(1)), Some(LinkEvent::Down));
        for s in 2..61 {
            assert_eq!(link.record(false, at(s)), None, "no log at {s} s");
        }
        assert_eq!(
            link.record(false, at(61)),
            Some(LinkEvent::StillDown {
                for_: Duration::from_secs(60),
                failed: 61
            })
        );
        assert_eq!(link.record(false, at(62)), None);
        assert_eq!(
            link.record(true, at(70)),
            Some(LinkEvent::Up {
                after: Duration::from_secs(69),
                failed: 62
            })
        );
        assert_eq!(link.record(true, at(71)), None);
        assert_eq!(
            link.record(false, at(72)),
            Some(LinkEvent::Down),
            "a new run of failures is logged at once"
        );
    }

    #[test]
    fn a_batch_takes_at_most_its_limit_and_leaves_out_callers_that_gave_up() {
        let mut answers = Vec::new();
        let mut waiting: Vec<Pending> = (0..MAX_BATCH_MESSAGES + 3)
            .map(|i| {
                let (reply, answer) = tokio::sync::oneshot::channel();
                answers.push(answer);
                Pending {
                    body: Bytes::from(i.to_string()),
                    reply,
                }
            })
            .collect();
        assert_eq!(take_batch(&mut waiting).len(), MAX_BATCH_MESSAGES);
        // The caller of the next-but-one message gave up.
        drop(answers.remove(MAX_BATCH_MESSAGES + 1));
        let rest = take_batch(&mut waiting);
        let bodies: Vec<_> = rest.iter().map(|p| p.body.clone()).collect();
        assert_eq!(
            bodies,
            [MAX_BATCH_MESSAGES, MAX_BATCH_MESSAGES + 2].map(|i| Bytes::from(i.to_string()))
        );
        assert!(waiting.is_empty());
    }
}
