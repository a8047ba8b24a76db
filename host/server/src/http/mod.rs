//! The HTTP API (v1): routes, errors, auth, limits and observability.

pub mod admin;
pub mod auth;
pub mod batch;
pub mod body;
pub mod cluster;
pub mod console;
pub mod error;
pub mod expiry;
mod keys;
pub mod kv;
pub mod observe;
pub mod plugins;
pub mod server;
pub mod sql;
pub mod tls;
pub mod tokens;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use tokio::net::TcpListener;

use ebb_host::Node;
use error::ApiError;
use expiry::{Change, Expiry};
use keys::Routes;
use observe::HttpMetrics;

/// Limits of the HTTP layer: request sizes (values are limited by the
/// node's `max_value_bytes`), timeouts and the connection cap. Documented
/// in docs/http-api.md (server settings).
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Largest batch body in bytes. Default 32 MiB.
    pub max_body_bytes: usize,
    /// Most items in one batch. Default 10 000.
    pub max_batch_items: usize,
    /// Longest a client may take to send a request's line and headers,
    /// counted from the accept for a connection's first request and from
    /// the first byte for later ones; past it the connection is closed.
    /// Default 10 s.
    pub header_read_timeout: Duration,
    /// Longest a handler waits for the next piece of a request body; past
    /// it the request fails with 408 and the connection is closed.
    /// Default 30 s.
    pub body_read_timeout: Duration,
    /// Longest a keep-alive connection may wait for its next request before
    /// it is closed. Default 60 s.
    pub idle_timeout: Duration,
    /// Most connections open at once; one more is answered 503 and closed
    /// at once. `None`: [`server::default_max_connections`] of the
    /// open-files limit.
    pub max_connections: Option<usize>,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: 32 * 1024 * 1024,
            max_batch_items: 10_000,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: None,
        }
    }
}

/// Shared by every handler: one pointer, so the clone each extractor and
/// middleware takes per request is one reference count.
#[derive(Clone)]
pub struct AppState(Arc<App>);

impl AppState {
    /// Share `app` with every handler.
    pub fn new(app: App) -> Self {
        Self(Arc::new(app))
    }
}

impl std::ops::Deref for AppState {
    type Target = App;

    fn deref(&self) -> &App {
        &self.0
    }
}

/// What the handlers share: the node and the HTTP layer's settings.
pub struct App {
    /// The node served.
    pub node: Node,
    /// Request limits.
    pub limits: HttpLimits,
    /// The tokens accepted and what each may do (none: no auth).
    pub auth: Arc<auth::Auth>,
    /// Origins browsers may call the API from (CORS); empty: none.
    pub cors_origins: Arc<[String]>,
    /// Request metrics.
    pub metrics: Arc<HttpMetrics>,
    /// Set when shutdown begins: `/health` answers 503 and new `/v1`
    /// requests are refused while those in flight finish.
    pub draining: Arc<AtomicBool>,
    /// Serve over TLS with this certificate (`--tls-cert`); `None`: plain HTTP.
    pub tls: Option<Arc<tls::Tls>>,
    /// Serve the web console at `/` (off with `--no-console`).
    pub console: bool,
}

/// The one middleware every routed request passes (one layer, not one per
/// concern, because each layer costs clones and boxes per request): see
/// [`fronted`].
async fn front(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().cloned();
    let route = route.as_ref().map(MatchedPath::as_str);
    fronted(&app, route, request, |request| next.run(request)).await
}

/// What every request passes, through the router or the key fast path
/// ([`keys`]): count and time it by route, method and status, and admit it
/// ([`admit`]) before `handler` runs.
async fn fronted<F, Fut>(
    app: &App,
    route: Option<&str>,
    mut request: Request,
    handler: F,
) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let started = Instant::now();
    let counters = app.metrics.route(route.unwrap_or("unmatched"));
    let method = request.method().clone();
    let response = match admit(app, route, &mut request) {
        Ok(()) => handler(request).await,
        Err(refusal) => refusal.into_response(),
    };
    let status = response.status();
    let elapsed = started.elapsed();
    // Only internal errors are logged at warn: a 503 (shed, no quorum,
    // draining) is the node protecting itself, and logging each of a
    // flood of them would add to the load they refuse.
    if status == StatusCode::INTERNAL_SERVER_ERROR {
        tracing::warn!(route, %method, %status, ?elapsed, "request failed");
    } else {
        tracing::debug!(route, %method, %status, ?elapsed, "request");
    }
    counters.record(&method, status.as_u16(), elapsed);
    response
}

/// Whether a request on `route` may run: while the server drains, a `/v1`
/// request that arrives is answered 503 `shutting_down` (with
/// `Retry-After`; those already admitted finish); `/v1` routes and
/// `/metrics` need a token that grants what they do ([`auth`]).
fn admit(app: &App, route: Option<&str>, request: &mut Request) -> Result<(), ApiError> {
    match route {
        Some(route) if route.starts_with("/v1/") => {
            if app.draining.load(Ordering::Acquire) {
                return Err(ebb_host::Error::ShuttingDown.into());
            }
            app.auth.authorize(route, request)
        }
        Some("/metrics") => app.auth.authorize_metrics(request),
        _ => Ok(()),
    }
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such route; see docs/http-api.md for the routes")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method; see docs/http-api.md",
    )
}

/// The full router: `/v1` routes behind auth, `/metrics` behind auth unless
/// opened, `/health` and the console's files open; every request through
/// [`front`].
pub fn router(state: AppState) -> Router {
    let v1 = Router::new()
        .route(
            keys::KEY_ROUTE,
            put(kv::put_key)
                .get(kv::get_key)
                .delete(kv::delete_key)
                .patch(kv::patch_key),
        )
        .route(
            "/v1/tables/{table}/keys/",
            put(kv::empty_key)
                .get(kv::empty_key)
                .delete(kv::empty_key)
                .patch(kv::empty_key),
        )
        .route("/v1/tables/{table}/batch", post(batch::batch))
        .route(
            "/v1/tables/{table}/expiry-handler",
            put(expiry::bind::<Expiry>)
                .get(expiry::status::<Expiry>)
                .delete(expiry::unbind::<Expiry>),
        )
        .route(
            "/v1/tables/{table}/expiry/dead-letters",
            get(expiry::dead_letters::<Expiry>),
        )
        .route(
            "/v1/tables/{table}/expiry/dead-letters/redrive",
            post(expiry::redrive::<Expiry>),
        )
        .route(
            "/v1/tables/{table}/change-handler",
            put(expiry::bind::<Change>)
                .get(expiry::status::<Change>)
                .delete(expiry::unbind::<Change>),
        )
        .route(
            "/v1/tables/{table}/change/dead-letters",
            get(expiry::dead_letters::<Change>),
        )
        .route(
            "/v1/tables/{table}/change/dead-letters/redrive",
            post(expiry::redrive::<Change>),
        )
        .route("/v1/tables", get(kv::list_tables))
        .route("/v1/sql", post(sql::sql))
        .route("/v1/admin/backup", post(admin::backup))
        .route("/v1/cluster", get(cluster::status))
        .route("/v1/plugins", get(plugins::list_plugins))
        .route(
            "/v1/plugins/{name}",
            put(plugins::put_plugin)
                .get(plugins::get_plugin)
                .delete(plugins::delete_plugin),
        );
    let router = Router::new()
        .merge(v1)
        .route("/health", get(observe::health))
        .route("/metrics", get(observe::metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    let router = if state.console {
        router
            .route("/", get(console::index))
            .route("/console/console.js", get(console::script))
            .route("/console/console.css", get(console::style))
    } else {
        router
    };
    let router = router
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn_with_state(state.clone(), front));
    // No CORS unless origins are given: browsers then keep other sites'
    // pages from calling the API.
    let router = if state.cors_origins.is_empty() {
        router
    } else {
        router.layer(cors(&state.cors_origins))
    };
    router.with_state(state)
}

/// CORS for `origins` (`--cors-origin`): their pages may call every route
/// with a token, and read the version headers.
fn cors(origins: &[String]) -> tower_http::cors::CorsLayer {
    use axum::http::{HeaderName, HeaderValue, Method, header};
    let allowed: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|origin| HeaderValue::from_str(origin).ok())
        .collect();
    tower_http::cors::CorsLayer::new()
        .allow_origin(allowed)
        .allow_methods([
            Method::GET,
            Method::PUT,
            Method::POST,
            Method::DELETE,
            Method::PATCH,
        ])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::ACCEPT,
            header::IF_MATCH,
            header::IF_NONE_MATCH,
        ])
        .expose_headers([
            HeaderName::from_static("ebb-version"),
            HeaderName::from_static("ebb-expires-at"),
        ])
}

/// Serve `state` on `listener` under `state.limits` until `shutdown`
/// resolves, then drain: finish the requests in flight while `/health`
/// answers 503 (see [`server::run`]). Does not shut the node down.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = state.limits;
    let metrics = state.metrics.clone();
    let draining = state.draining.clone();
    let tls = state.tls.clone();
    // CORS answers need the router's layer: no fast path with it.
    let routes = if state.cors_origins.is_empty() {
        Routes::with_keys(router(state.clone()), state)
    } else {
        Routes::router(router(state))
    };
    server::run(listener, routes, limits, metrics, draining, tls, shutdown).await
}
