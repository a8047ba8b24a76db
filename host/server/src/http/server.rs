//! The HTTP server: an accept loop with a connection cap, TLS (HTTP/2 and HTTP/1.1 by ALPN), header, body and idle timeouts, graceful shutdown (a drain).
//!
//! Every connection holds a permit of a semaphore sized by the cap; a
//! connection accepted without one is answered a minimal 503 and closed at
//! once, so descriptors never run out on open connections alone (over TLS
//! the refusal needs a handshake: at most [`TLS_REFUSALS`] run at once, a
//! connection past them is closed without an answer). Beside each hyper
//! connection runs a watchdog that closes it when a request's line and
//! headers (or, over TLS, the handshake) take longer than the header read
//! timeout (counted from the accept for a new connection, from the first
//! byte for a later HTTP/1.1 request) or when it waits idle for a next
//! request longer than the idle timeout. A request body that stalls while a
//! handler reads it fails the read with [`BodyReadTimeout`], which handlers
//! answer 408 (and the connection closes). The watchdog never runs while a
//! request is with its handler or its response is being sent: those are
//! bounded by the handlers' own limits (the query timeout, for one).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Request, StatusCode};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::time::{Instant, Sleep, sleep, sleep_until};

use super::HttpLimits;
use super::error::ApiError;
use super::keys::Routes;
use super::observe::HttpMetrics;
use super::tls::{ALPN_H2, Tls};

/// Highest open-files limit [`raise_open_files_limit`] asks for.
const OPEN_FILES_CEILING: u64 = 1 << 20;
/// First pause after a failed accept; it doubles per failure in a row.
const ACCEPT_PAUSE_MIN: Duration = Duration::from_millis(10);
/// Longest pause after failed accepts.
const ACCEPT_PAUSE_MAX: Duration = Duration::from_secs(1);
/// Most TLS connections over the cap being answered 503 at once (each
/// needs a handshake); past them a connection over the cap is closed.
pub const TLS_REFUSALS: usize = 32;
/// Longest a TLS refusal (handshake and answer) may take.
const TLS_REFUSAL_TIMEOUT: Duration = Duration::from_secs(1);

/// Connection counters, shown on `/metrics`.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    /// Connections open now.
    pub open: AtomicU64,
    /// Connections answered 503 and closed because the cap was reached.
    pub refused: AtomicU64,
    /// Failed accepts other than a client's reset: out of descriptors or
    /// memory (each followed by a pause).
    pub accept_errors: AtomicU64,
    /// Connections closed because a request's line and headers took too long.
    pub header_timeouts: AtomicU64,
    /// Keep-alive connections closed after waiting too long for a request.
    pub idle_timeouts: AtomicU64,
    /// TLS handshakes that failed (a client that does not trust the
    /// certificate, speaks plain HTTP to the TLS port, or no TLS version
    /// or cipher in common).
    pub tls_handshake_failures: AtomicU64,
}

/// A request body stalled: nothing arrived for the body read timeout while
/// the handler waited for it.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request body stalled: nothing arrived for {} ms (server setting --body-read-timeout); the connection is closed",
    .0.as_millis()
)]
pub struct BodyReadTimeout(pub Duration);

/// Raise the soft open-files limit (`RLIMIT_NOFILE`) to the hard limit (at
/// most 2^20). Answers the soft limit in force afterwards; `None` where it
/// cannot be read. A limit that cannot be raised is left as it is.
pub fn raise_open_files_limit() -> Option<u64> {
    let limit = open_files()?;
    let wanted = limit.rlim_max.min(OPEN_FILES_CEILING);
    if wanted > limit.rlim_cur {
        let raised = libc::rlimit {
            rlim_cur: wanted,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Some(wanted);
        }
    }
    Some(limit.rlim_cur)
}

/// The soft open-files limit now in force, `None` where it cannot be read.
pub fn open_files_limit() -> Option<u64> {
    open_files().map(|limit| limit.rlim_cur)
}

fn open_files() -> Option<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given, which we own.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0).then_some(limit)
}

/// The connection cap when none is configured: half the open-files limit
/// (the other half is for the store's files, the plugin engine and spare),
/// 32 to 16 384; 1024 when the limit is unknown.
pub fn default_max_connections(open_files: Option<u64>) -> usize {
    open_files.map_or(1024, |n| (n / 2).clamp(32, 16_384) as usize)
}

/// Serve `routes` on `listener` under `limits` (over TLS with `tls`) until
/// `shutdown` resolves, then drain: set `draining` (so `/health` answers
/// 503 and new `/v1` requests are refused), close idle connections, let
/// requests in flight finish, and meanwhile keep answering new
/// connections, one request each. Once every connection from before the
/// drain has closed, stop accepting and return when the rest have closed
/// too. Accept errors never end the loop: they pause it (10 ms, doubling
/// to 1 s).
pub async fn run(
    listener: TcpListener,
    routes: Routes,
    limits: HttpLimits,
    metrics: Arc<HttpMetrics>,
    draining: Arc<AtomicBool>,
    tls: Option<Arc<Tls>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let cap = limits
        .max_connections
        .unwrap_or_else(|| default_max_connections(open_files_limit()))
        .clamp(1, u32::MAX as usize);
    let permits = Arc::new(Semaphore::new(cap));
    let refusal: Arc<[u8]> = refusal(cap).into();
    let tls_refusals = Arc::new(Semaphore::new(TLS_REFUSALS));
    let (stop_tx, stop_rx) = watch::channel(());
    // Every connection accepted before the drain holds a sender: the
    // receiver ends once they have all closed.
    let (serving, mut served) = mpsc::channel::<()>(1);
    let mut shutdown = pin!(shutdown);
    let mut pause = None;
    let admit = |stream: TcpStream, stop: watch::Receiver<()>, serving: Option<_>| match permits
        .clone()
        .try_acquire_owned()
    {
        Ok(permit) => {
            let connection = Connection {
                routes: routes.clone(),
                limits,
                metrics: metrics.clone(),
                keep_alive: serving.is_some(),
                _serving: serving,
                _permit: permit,
            };
            tokio::spawn(connection.start(stream, tls.clone(), stop));
        }
        Err(_) => {
            metrics.connections.refused.fetch_add(1, Ordering::Relaxed);
            match &tls {
                None => refuse(stream, &refusal),
                Some(tls) => refuse_tls(stream, tls, refusal.clone(), &tls_refusals),
            }
        }
    };
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            stream = accept(&listener, &mut pause, &metrics.connections) => stream,
        };
        admit(stream, stop_rx.clone(), Some(serving.clone()));
    }
    // Drain. Tell every connection to finish its request in flight.
    draining.store(true, Ordering::Release);
    drop(serving);
    let _ = stop_tx.send(());
    // Connections accepted from now on answer one request (503 but for
    // `/metrics`) and close; their stop signal never comes.
    let (_never, no_stop) = watch::channel(());
    loop {
        let stream = tokio::select! {
            None = served.recv() => break,
            stream = accept(&listener, &mut pause, &metrics.connections) => stream,
        };
        admit(stream, no_stop.clone(), None);
    }
    drop(listener);
    // Wait until all permits are back: every connection has closed.
    let _all = permits.acquire_many(cap as u32).await;
    Ok(())
}

/// The next accepted connection. A failure that concerns one connection
/// (reset or aborted before the accept) is skipped; others (out of
/// descriptors or memory) are counted, logged once per run of failures and
/// followed by a pause, so the loop never spins.
async fn accept(
    listener: &TcpListener,
    pause: &mut Option<Duration>,
    stats: &ConnectionStats,
) -> TcpStream {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                *pause = None;
                return stream;
            }
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::ConnectionAborted
                        | io::ErrorKind::ConnectionReset
                        | io::ErrorKind::ConnectionRefused
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(error) => {
                stats.accept_errors.fetch_add(1, Ordering::Relaxed);
                let next = pause.map_or(ACCEPT_PAUSE_MIN, |p| (p * 2).min(ACCEPT_PAUSE_MAX));
                if pause.is_none() {
                    tracing::error!(
                        "accept error: {error}; pausing accepts (lower --max-connections or raise the open-files limit)"
                    );
                } else {
                    tracing::debug!("accept error: {error}; pausing {next:?}");
                }
                *pause = Some(next);
                sleep(next).await;
            }
        }
    }
}

/// The whole answer to a connection over the cap.
fn refusal(cap: usize) -> Vec<u8> {
    let body = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "overloaded",
        format!(
            "the server has {cap} connections open, its limit (--max-connections); retry later"
        ),
    )
    .body()
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answer `refusal` without waiting and close. What the client already sent
/// is read first, so the close is not a reset that could discard the answer.
fn refuse(stream: TcpStream, refusal: &[u8]) {
    let _ = stream.try_write(refusal);
    let mut sink = [0u8; 4096];
    let _ = stream.try_read(&mut sink);
}

/// [`refuse`] over TLS: handshake (HTTP/1.1 only) and answer on a task of
/// its own, at most [`TLS_REFUSALS`] at once and each within
/// [`TLS_REFUSAL_TIMEOUT`]; past them the connection is closed unanswered.
fn refuse_tls(stream: TcpStream, tls: &Tls, refusal: Arc<[u8]>, refusals: &Arc<Semaphore>) {
    let Ok(permit) = refusals.clone().try_acquire_owned() else {
        return;
    };
    let acceptor = tls.refusal_acceptor();
    tokio::spawn(async move {
        let answer = async {
            let mut stream = acceptor.accept(stream).await?;
            stream.write_all(&refusal).await?;
            stream.shutdown().await
        };
        let _ = tokio::time::timeout(TLS_REFUSAL_TIMEOUT, answer).await;
        drop(permit);
    });
}

/// One accepted connection and what it needs.
struct Connection {
    routes: Routes,
    limits: HttpLimits,
    metrics: Arc<HttpMetrics>,
    /// Serve more than one request (`false` for a connection accepted
    /// while draining).
    keep_alive: bool,
    /// Held by a connection accepted before the drain, until it closes.
    _serving: Option<mpsc::Sender<()>>,
    /// Returned to the cap when the connection ends.
    _permit: OwnedSemaphorePermit,
}

/// Why the watchdog closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    Header,
    Idle,
}

impl Connection {
    /// Serve `stream` (after a TLS handshake within the header read
    /// timeout, with `tls`) until the client closes, a timeout passes, or
    /// (after `stop` changes) the request in flight is answered.
    async fn start(self, stream: TcpStream, tls: Option<Arc<Tls>>, stop: watch::Receiver<()>) {
        let stats = &self.metrics.connections;
        stats.open.fetch_add(1, Ordering::Relaxed);
        match tls {
            None => self.serve(stream, false, stop).await,
            Some(tls) => {
                let handshake = tls.acceptor().accept(stream);
                match tokio::time::timeout(self.limits.header_read_timeout, handshake).await {
                    Ok(Ok(stream)) => {
                        let h2 = stream.get_ref().1.alpn_protocol() == Some(ALPN_H2);
                        self.serve(stream, h2, stop).await;
                    }
                    Ok(Err(error)) => {
                        stats.tls_handshake_failures.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!("TLS handshake failed: {error}");
                    }
                    Err(_) => {
                        stats.header_timeouts.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!("closing a connection whose TLS handshake took too long");
                    }
                }
            }
        }
        stats.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Serve HTTP/2 (`h2`) or HTTP/1.1 on `stream` under the watchdog.
    async fn serve<S>(&self, stream: S, h2: bool, stop: watch::Receiver<()>)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let activity = Arc::new(Activity::new());
        let io = TokioIo::new(Watched {
            stream,
            activity: activity.clone(),
            // HTTP/2 sends frames (pings, settings) that start no request.
            heads: !h2,
        });
        let routes = self.routes.clone();
        let body_timeout = self.limits.body_read_timeout;
        let requests = activity.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let busy = requests.begin();
            let request = request.map(|body| TimedBody::new(body, body_timeout));
            // Boxed: the answer's future is about 3.7 KB, and hyper moves
            // the future it is handed (into its in-flight slot) while this
            // block's would be moved twice more; a box moves a pointer.
            let response = Box::pin(routes.clone().call(request));
            async move {
                let response = response.await;
                Ok::<_, Infallible>(response.map(|body| UntilSent { body, _busy: busy }))
            }
        });
        if h2 {
            let connection =
                pin!(http2::Builder::new(TokioExecutor::new()).serve_connection(io, service));
            // HTTP/2 has no "one request and close": a connection accepted
            // while draining is sent GOAWAY at once.
            let at_once = !self.keep_alive;
            self.watch(
                connection,
                |c| c.graceful_shutdown(),
                &activity,
                stop,
                at_once,
            )
            .await;
        } else {
            // No hyper timer: the watchdog keeps the header and idle timeouts.
            let mut builder = http1::Builder::new();
            builder
                .header_read_timeout(None)
                .keep_alive(self.keep_alive);
            let connection = pin!(builder.serve_connection(io, service));
            self.watch(
                connection,
                |c| c.graceful_shutdown(),
                &activity,
                stop,
                false,
            )
            .await;
        }
    }

    /// Drive `connection` until it ends or its [`Activity`] passes a
    /// deadline; `graceful` starts its graceful shutdown when `stop`
    /// changes (at once for a connection accepted while draining over
    /// HTTP/2, which cannot be limited to one request).
    async fn watch<C>(
        &self,
        mut connection: Pin<&mut C>,
        graceful: impl Fn(Pin<&mut C>),
        activity: &Activity,
        mut stop: watch::Receiver<()>,
        stop_at_once: bool,
    ) where
        C: Future<Output = hyper::Result<()>>,
    {
        let stats = &self.metrics.connections;
        // A state change (a request begins or ends, bytes arrive) can only
        // move the deadline later or clear it, except the first byte after
        // an idle wait; waking this often catches that one in time.
        let recheck = self
            .limits
            .header_read_timeout
            .min(self.limits.idle_timeout);
        let mut stopping = stop_at_once;
        if stopping {
            graceful(connection.as_mut());
        }
        loop {
            let now = Instant::now();
            let wake = match activity.deadline(&self.limits) {
                Some((at, why)) if at <= now => {
                    let counter = match why {
                        Expiry::Header => &stats.header_timeouts,
                        Expiry::Idle => &stats.idle_timeouts,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(?why, "closing a connection past its timeout");
                    break;
                }
                Some((at, _)) => at.min(now + recheck),
                None => now + recheck,
            };
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!("connection ended: {error}");
                    }
                    break;
                }
                () = sleep_until(wake) => {}
                _ = stop.changed(), if !stopping => {
                    stopping = true;
                    graceful(connection.as_mut());
                }
            }
        }
    }
}

/// What one connection is doing, for its watchdog: whether a request is
/// with the router, and since when it waits for a request's head or idles.
struct Activity(Mutex<Phase>);

#[derive(Debug, Clone, Copy)]
struct Phase {
    /// Requests handed to the router whose response is not yet sent.
    busy: usize,
    /// When the head of the next request started: the accept for a new
    /// connection, its first byte later; `None` while idle.
    head_since: Option<Instant>,
    /// When the last response was sent.
    idle_since: Instant,
}

impl Activity {
    fn new() -> Self {
        let now = Instant::now();
        Self(Mutex::new(Phase {
            busy: 0,
            head_since: Some(now),
            idle_since: now,
        }))
    }

    /// When the connection is to be closed unless something happens, and
    /// why; `None` while a request is being handled or answered.
    fn deadline(&self, limits: &HttpLimits) -> Option<(Instant, Expiry)> {
        let phase = *self.0.lock();
        if phase.busy > 0 {
            return None;
        }
        Some(match phase.head_since {
            Some(since) => (since + limits.header_read_timeout, Expiry::Header),
            None => (phase.idle_since + limits.idle_timeout, Expiry::Idle),
        })
    }

    /// Bytes arrived: on an idle connection they start the next head.
    fn bytes_arrived(&self) {
        let mut phase = self.0.lock();
        if phase.busy == 0 && phase.head_since.is_none() {
            phase.head_since = Some(Instant::now());
        }
    }

    /// A request reached the router; it is busy until the guard drops.
    fn begin(self: &Arc<Self>) -> Busy {
        let mut phase = self.0.lock();
        phase.busy += 1;
        phase.head_since = None;
        Busy(self.clone())
    }
}

/// Held from a request's arrival until its response is sent (or dropped).
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        let mut phase = self.0.0.lock();
        phase.busy -= 1;
        if phase.busy == 0 {
            phase.idle_since = Instant::now();
        }
    }
}

/// The stream of a connection, telling its [`Activity`] when bytes arrive.
struct Watched<S> {
    stream: S,
    activity: Arc<Activity>,
    /// Bytes arriving on an idle connection start a request's head
    /// (HTTP/1.1; not HTTP/2, whose frames may start none).
    heads: bool,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.stream).poll_read(cx, buf);
        if this.heads && buf.filled().len() > before {
            this.activity.bytes_arrived();
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// A request body that fails with [`BodyReadTimeout`] when nothing arrives
/// for `timeout` while the handler waits for the next piece.
struct TimedBody {
    body: Incoming,
    timeout: Duration,
    /// The running wait, armed when a read finds nothing.
    stall: Option<Pin<Box<Sleep>>>,
    waiting: bool,
}

impl TimedBody {
    fn new(body: Incoming, timeout: Duration) -> Self {
        Self {
            body,
            timeout,
            stall: None,
            waiting: false,
        }
    }
}

impl HttpBody for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            this.waiting = false;
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if !this.waiting {
            this.waiting = true;
            let deadline = Instant::now() + this.timeout;
            match &mut this.stall {
                Some(stall) => stall.as_mut().reset(deadline),
                None => this.stall = Some(Box::pin(sleep_until(deadline))),
            }
        }
        if let Some(stall) = &mut this.stall {
            ready!(stall.as_mut().poll(cx));
        }
        Poll::Ready(Some(Err(Box::new(BodyReadTimeout(this.timeout)))))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A response body that keeps its connection busy until it is sent.
struct UntilSent {
    body: Body,
    _busy: Busy,
}

impl HttpBody for UntilSent {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_is_half_the_open_files_limit_within_bounds() {
        assert_eq!(default_max_connections(Some(20_000)), 10_000);
        assert_eq!(default_max_connections(Some(1024)), 512);
        assert_eq!(default_max_connections(Some(40)), 32);
        assert_eq!(default_max_connections(Some(1 << 20)), 16_384);
        assert_eq!(default_max_connections(None), 1024);
    }

    #[test]
    fn an_idle_connection_waits_for_the_idle_timeout_and_a_started_head_for_the_header_timeout() {
        let limits = HttpLimits {
            header_read_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(7),
            ..HttpLimits::default()
        };
        let activity = Arc::new(Activity::new());
        let (at, why) = activity.deadline(&limits).unwrap();
        assert_eq!(why, Expiry::Header, "a new connection owes its first head");
        assert!(at <= Instant::now() + limits.header_read_timeout);
        let busy = activity.begin();
        assert!(
            activity.deadline(&limits).is_none(),
            "a busy connection has no deadline"
        );
        activity.bytes_arrived();
        assert!(activity.deadline(&limits).is_none());
        drop(busy);
        let (at, why) = activity.deadline(&limits).unwrap();
        assert_eq!(why, Expiry::Idle);
        assert!(at > Instant::now() + limits.header_read_timeout);
        activity.bytes_arrived();
        assert_eq!(activity.deadline(&limits).unwrap().1, Expiry::Header);
    }
}
