//! Observability routes and request metrics: `/health`, `/metrics`, and
//! the counters and timings of requests by route, method and status.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parking_lot::RwLock;
use serde_json::{Value, json};

use super::AppState;
use super::server::ConnectionStats;
use ebb_host::metrics::{Histogram, PromWriter};
use ebb_host::names::TableName;
use ebb_host::plugin::HandlerKind;

/// Request counters and latency histograms, by route, and connection
/// counters. Recording a request takes no lock once its route, method and
/// status have been seen: read locks and atomic counters only.
///
/// Every key is bounded: routes are the router's patterns (or
/// `unmatched`), methods other than the eight of RFC 9110 and PATCH count as
/// `OTHER` (a client cannot add series by inventing methods), statuses are
/// the server's own.
#[derive(Default)]
pub struct HttpMetrics {
    // Keys come from the router, not from clients: a fast hash is safe.
    routes: RwLock<HashMap<String, Arc<RouteMetrics>, foldhash::fast::RandomState>>,
    /// Connections open, refused and timed out.
    pub connections: ConnectionStats,
}

/// The requests of one route: counts by method and status, and latency.
#[derive(Default)]
pub struct RouteMetrics {
    /// (method, status, count), in the order first seen: a route answers
    /// a handful of combinations, so a scan beats hashing.
    requests: RwLock<Vec<(MethodLabel, u16, AtomicU64)>>,
    latency: Histogram,
}

/// A request method as counted: a standard one, or `OTHER`.
#[derive(Clone, Copy, PartialEq, Eq)]
struct MethodLabel(&'static str);

impl MethodLabel {
    fn of(method: &Method) -> Self {
        const KNOWN: [Method; 9] = [
            Method::GET,
            Method::HEAD,
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::PATCH,
            Method::OPTIONS,
            Method::CONNECT,
            Method::TRACE,
        ];
        Self(
            KNOWN
                .iter()
                .find(|known| *known == method)
                .map_or("OTHER", Method::as_str),
        )
    }
}

impl HttpMetrics {
    /// The counters of `route` (a matched route pattern, or `unmatched`).
    pub fn route(&self, route: &str) -> Arc<RouteMetrics> {
        if let Some(found) = self.routes.read().get(route) {
            return found.clone();
        }
        self.routes
            .write()
            .entry(route.to_string())
            .or_default()
            .clone()
    }

    /// Each route's counters, ordered by route.
    fn by_route(&self) -> Vec<(String, Arc<RouteMetrics>)> {
        let mut routes: Vec<_> = self
            .routes
            .read()
            .iter()
            .map(|(route, metrics)| (route.clone(), metrics.clone()))
            .collect();
        routes.sort_by(|a, b| a.0.cmp(&b.0));
        routes
    }
}

impl RouteMetrics {
    /// Count one request answered `status` after `elapsed`.
    pub fn record(&self, method: &Method, status: u16, elapsed: Duration) {
        self.latency.observe(elapsed);
        let method = MethodLabel::of(method);
        let seen = |requests: &[(MethodLabel, u16, AtomicU64)]| {
            requests
                .iter()
                .find(|(m, s, _)| *s == status && *m == method)
                .map(|(_, _, count)| count.fetch_add(1, Ordering::Relaxed))
                .is_some()
        };
        if seen(&self.requests.read()) {
            return;
        }
        let mut requests = self.requests.write();
        if !seen(&requests) {
            requests.push((method, status, AtomicU64::new(1)));
        }
    }

    /// (method, status, count), ordered by method and status.
    fn counts(&self) -> Vec<(String, u16, u64)> {
        let mut counts: Vec<_> = self
            .requests
            .read()
            .iter()
            .map(|(method, status, count)| {
                (method.0.to_string(), *status, count.load(Ordering::Relaxed))
            })
            .collect();
        counts.sort();
        counts
    }
}

/// `GET /health`: 200 with per-fragment health while serving (`status` is
/// `ok` or `degraded`), 503 once shutting down (from the start of the
/// drain) and while a cluster member refuses client requests because its
/// layout conflicts with the cluster's (`layout_conflict`, with the
/// message).
pub async fn health(State(app): State<AppState>) -> Response {
    let mut health = app.node.health().await;
    health.accepting &= !app.draining.load(std::sync::atomic::Ordering::Acquire);
    let fragments: Vec<Value> = health
        .fragments
        .iter()
        .enumerate()
        .map(|(id, fragment)| match fragment {
            None => {
                json!({ "fragment": id, "healthy": false, "error": "supervisor did not answer" })
            }
            Some(f) => json!({
                "fragment": f.fragment,
                "healthy": f.is_healthy(),
                "running_workers": f.running_workers,
                "restarts": f.restarts,
                "pools": f.pools.iter().map(|p| json!({
                    "pool": p.pool, "workers": p.workers, "queued": p.queued,
                    "capacity": p.capacity, "shed": p.shed,
                })).collect::<Vec<_>>(),
                "flush": {
                    "backlog_records": f.flush.backlog_records,
                    "backlog_bytes": f.flush.backlog_bytes,
                    "flushes": f.flush.flushes,
                    "failures": f.flush.failures,
                    "last_error": f.flush.last_error,
                },
            }),
        })
        .collect();
    let status = if !health.accepting {
        "shutting_down"
    } else if health.layout_conflict.is_some() {
        "layout_conflict"
    } else if health.is_healthy() {
        "ok"
    } else {
        "degraded"
    };
    let code = if health.accepting && health.layout_conflict.is_none() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut body = json!({
        "status": status,
        "version": env!("CARGO_PKG_VERSION"),
        "node_id": app.node.node_id(),
        "fragment_count": app.node.fragment_count(),
        "active_operations": health.active_operations,
        "memory": {
            "resident_bytes": health.memory.resident_bytes,
            "max_memory_bytes": health.memory.limit_bytes,
            "full": health.memory.full,
            "refused_writes": health.memory.refused_writes,
        },
        "fragments": fragments,
    });
    if let Some(message) = &health.layout_conflict {
        body["layout_conflict"] = json!(message);
    }
    (code, Json(body)).into_response()
}

/// `GET /metrics`: Prometheus text format.
pub async fn metrics(State(app): State<AppState>) -> Response {
    let mut out = PromWriter::new();
    out.family(
        "ebb_http_requests_total",
        "counter",
        "HTTP requests by route, method and status.",
    );
    let routes = app.metrics.by_route();
    for (route, metrics) in &routes {
        for (method, status, count) in metrics.counts() {
            let status = status.to_string();
            out.sample(
                "ebb_http_requests_total",
                &[("route", route), ("method", &method), ("status", &status)],
                count as f64,
            );
        }
    }
    out.family(
        "ebb_http_request_duration_seconds",
        "histogram",
        "HTTP request latency by route.",
    );
    for (route, metrics) in &routes {
        out.histogram(
            "ebb_http_request_duration_seconds",
            &[("route", route)],
            &metrics.latency,
        );
    }
    connection_metrics(&mut out, &app.metrics.connections);

    let health = app.node.health().await;
    let fragments: Vec<_> = health
        .fragments
        .iter()
        .enumerate()
        .filter_map(|(id, f)| f.as_ref().map(|f| (id.to_string(), f)))
        .collect();
    out.family(
        "ebb_fragment_queue_depth",
        "gauge",
        "Operations admitted and not finished, per fragment pool.",
    );
    for (id, f) in &fragments {
        for pool in &f.pools {
            out.sample(
                "ebb_fragment_queue_depth",
                &[("fragment", id), ("pool", pool.pool)],
                pool.queued as f64,
            );
        }
    }
    out.family(
        "ebb_fragment_shed_total",
        "counter",
        "Operations shed because a pool was full.",
    );
    for (id, f) in &fragments {
        for pool in &f.pools {
            out.sample(
                "ebb_fragment_shed_total",
                &[("fragment", id), ("pool", pool.pool)],
                pool.shed as f64,
            );
        }
    }
    out.family(
        "ebb_fragment_restarts_total",
        "counter",
        "Supervised child restarts per fragment.",
    );
    for (id, f) in &fragments {
        for (child, count) in &f.restarts {
            out.sample(
                "ebb_fragment_restarts_total",
                &[("fragment", id), ("child", child)],
                *count as f64,
            );
        }
    }
    out.family(
        "ebb_flush_backlog_records",
        "gauge",
        "Records waiting to be written to the store.",
    );
    for (id, f) in &fragments {
        out.sample(
            "ebb_flush_backlog_records",
            &[("fragment", id)],
            f.flush.backlog_records as f64,
        );
    }
    out.family(
        "ebb_flush_backlog_bytes",
        "gauge",
        "Bytes waiting to be written to the store.",
    );
    for (id, f) in &fragments {
        out.sample(
            "ebb_flush_backlog_bytes",
            &[("fragment", id)],
            f.flush.backlog_bytes as f64,
        );
    }
    out.family(
        "ebb_store_errors_total",
        "counter",
        "Failed store writes (each retried).",
    );
    for (id, f) in &fragments {
        out.sample(
            "ebb_store_errors_total",
            &[("fragment", id)],
            f.flush.failures as f64,
        );
    }
    out.family(
        "ebb_flush_duration_seconds",
        "histogram",
        "Duration of successful flushes.",
    );
    for (id, latency) in app.node.flush_latencies().enumerate() {
        let id = id.to_string();
        out.histogram("ebb_flush_duration_seconds", &[("fragment", &id)], latency);
    }
    let plugins = app.node.plugins().list();
    let plugin_metrics: Vec<(
        String,
        String,
        std::sync::Arc<ebb_host::plugin::FunctionMetrics>,
    )> = plugins
        .iter()
        .flat_map(|p| {
            p.metrics()
                .into_iter()
                .map(move |(f, m)| (p.name.clone(), f, m))
        })
        .collect();
    let counter =
        |m: &std::sync::atomic::AtomicU64| m.load(std::sync::atomic::Ordering::Relaxed) as f64;
    out.family(
        "ebb_plugin_calls_total",
        "counter",
        "Plugin calls per function.",
    );
    for (plugin, function, m) in &plugin_metrics {
        out.sample(
            "ebb_plugin_calls_total",
            &[("plugin", plugin), ("function", function)],
            counter(&m.calls),
        );
    }
    out.family(
        "ebb_plugin_rows_total",
        "counter",
        "Rows passed to plugin functions.",
    );
    for (plugin, function, m) in &plugin_metrics {
        out.sample(
            "ebb_plugin_rows_total",
            &[("plugin", plugin), ("function", function)],
            counter(&m.rows),
        );
    }
    out.family(
        "ebb_plugin_errors_total",
        "counter",
        "Failed plugin calls by cause.",
    );
    for (plugin, function, m) in &plugin_metrics {
        for (cause, count) in m.errors.lock().iter() {
            out.sample(
                "ebb_plugin_errors_total",
                &[("plugin", plugin), ("function", function), ("cause", cause)],
                *count as f64,
            );
        }
    }
    out.family(
        "ebb_plugin_call_duration_seconds",
        "histogram",
        "Plugin call durations.",
    );
    for (plugin, function, m) in &plugin_metrics {
        out.histogram(
            "ebb_plugin_call_duration_seconds",
            &[("plugin", plugin), ("function", function)],
            &m.duration,
        );
    }
    expiry_metrics(&app, &mut out).await;
    memory_metrics(&app, &mut out).await;
    let mut response = out.finish().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(ebb_host::metrics::CONTENT_TYPE),
    );
    response
}

/// Picks one counter of a table's expiry statistics.
type StatField = fn(&ebb_host::expiry::TableStats) -> &std::sync::atomic::AtomicU64;

/// Handler metrics per table: `ebb_expiry_*` for expiry handlers and
/// `ebb_change_*` for change handlers, each labelled with the table.
async fn expiry_metrics(app: &AppState, out: &mut PromWriter) {
    let stats = app.node.expiry_stats();
    let depths = app.node.expiry_depths().await;
    for kind in [HandlerKind::Expiry, HandlerKind::Change] {
        handler_metrics(
            out,
            kind,
            &of_kind(kind, stats.clone()),
            &of_kind(kind, depths.clone()),
        );
    }
}

/// The items of handler sources of `kind`, by the table they belong to.
fn of_kind<T>(kind: HandlerKind, items: Vec<(TableName, T)>) -> Vec<(TableName, T)> {
    items
        .into_iter()
        .filter_map(|(source, item)| match (kind, source.changes_of()) {
            (HandlerKind::Expiry, None) => Some((source, item)),
            (HandlerKind::Change, Some(table)) => Some((table, item)),
            _ => None,
        })
        .collect()
}

/// The metrics of one handler kind, by table: outbox depth, lag, handled,
/// failures, dead letters.
fn handler_metrics(
    out: &mut PromWriter,
    kind: HandlerKind,
    stats: &[(TableName, std::sync::Arc<ebb_host::expiry::TableStats>)],
    depths: &[(TableName, ebb_host::expiry::QueueStatus)],
) {
    let load =
        |m: &std::sync::atomic::AtomicU64| m.load(std::sync::atomic::Ordering::Relaxed) as f64;
    let name = |suffix: &str| format!("ebb_{}_{suffix}", kind.as_str());
    let (what, due) = match kind {
        HandlerKind::Expiry => ("Expiry", "deadline"),
        HandlerKind::Change => ("Change", "write"),
    };
    let depth = name("outbox_depth");
    out.family(
        &depth,
        "gauge",
        &format!("{what} events in the outbox not yet handled."),
    );
    for (table, status) in depths {
        out.sample(&depth, &[("table", table.as_str())], status.pending as f64);
    }
    let oldest = name("oldest_pending_seconds");
    out.family(
        &oldest,
        "gauge",
        &format!(
            "Time since the {due} of the oldest pending {} event.",
            kind.as_str()
        ),
    );
    let now = ebb_host::clock::now_ms();
    for (table, status) in depths {
        if let Some(deadline) = status.oldest_deadline_ms {
            out.sample(
                &oldest,
                &[("table", table.as_str())],
                now.saturating_sub(deadline) as f64 / 1000.0,
            );
        }
    }
    let counters: [(&str, &str, StatField); 6] = [
        ("handled_total", "events handled.", |s| &s.handled),
        ("calls_total", "handler calls.", |s| &s.calls),
        (
            "attempts_total",
            "event deliveries (events passed to handlers, retries included).",
            |s| &s.attempts,
        ),
        (
            "failed_calls_total",
            "handler calls that failed as a whole.",
            |s| &s.failed_calls,
        ),
        (
            "failed_events_total",
            "event deliveries that failed (retried or dead-lettered).",
            |s| &s.failed_events,
        ),
        (
            "skipped_actions_total",
            "handler actions skipped because their condition did not hold.",
            |s| &s.skipped_actions,
        ),
    ];
    for (suffix, help, field) in counters {
        let family = name(suffix);
        out.family(&family, "counter", &format!("{what} {help}"));
        for (table, s) in stats {
            out.sample(&family, &[("table", table.as_str())], load(field(s)));
        }
    }
    let dead = name("dead_letters");
    out.family(&dead, "gauge", &format!("{what} events in dead letters."));
    for (table, s) in stats {
        out.sample(&dead, &[("table", table.as_str())], load(&s.dead_letters));
    }
    let lag = name("lag_seconds");
    out.family(
        &lag,
        "histogram",
        &format!("{what} {due} to successful handling."),
    );
    for (table, s) in stats {
        out.histogram(&lag, &[("table", table.as_str())], &s.lag);
    }
}

/// Records and memory per table; the process's resident memory and bound;
/// RocksDB's memtables, block cache and live SST files.
async fn memory_metrics(app: &AppState, out: &mut PromWriter) {
    let tables = app.node.table_usage();
    out.family(
        "ebb_table_records",
        "gauge",
        "Records per table: live, or tombstones (deletes and converted expiries).",
    );
    for table in &tables {
        for (state, count) in [
            ("live", table.live_records),
            ("tombstone", table.tombstones),
        ] {
            out.sample(
                "ebb_table_records",
                &[("table", table.name.as_str()), ("state", state)],
                count as f64,
            );
        }
    }
    out.family(
        "ebb_table_memory_bytes",
        "gauge",
        "Bytes a table's records and their index hold in memory.",
    );
    for table in &tables {
        out.sample(
            "ebb_table_memory_bytes",
            &[("table", table.name.as_str())],
            table.memory_bytes as f64,
        );
    }
    let memory = app.node.memory();
    out.family(
        "ebb_process_resident_bytes",
        "gauge",
        "Resident memory of the process (last sample, every 100 ms).",
    );
    if let Some(resident) = memory.resident_bytes {
        out.sample("ebb_process_resident_bytes", &[], resident as f64);
    }
    out.family(
        "ebb_memory_limit_bytes",
        "gauge",
        "The memory bound (--max-memory); absent when unbounded.",
    );
    if let Some(limit) = memory.limit_bytes {
        out.sample("ebb_memory_limit_bytes", &[], limit as f64);
    }
    out.family(
        "ebb_memory_refused_writes_total",
        "counter",
        "Writes refused with memory_full.",
    );
    out.sample(
        "ebb_memory_refused_writes_total",
        &[],
        memory.refused_writes as f64,
    );
    // After shutdown the store is closed: the gauges are left out.
    if let Ok(stats) = app.node.store_stats().await {
        for (name, help, value) in [
            (
                "ebb_rocksdb_memtable_bytes",
                "Bytes in RocksDB memtables, over all column families.",
                stats.memtable_bytes,
            ),
            (
                "ebb_rocksdb_block_cache_bytes",
                "Bytes in RocksDB block caches, over all column families.",
                stats.block_cache_bytes,
            ),
            (
                "ebb_rocksdb_live_sst_bytes",
                "Bytes of live RocksDB SST files, over all column families.",
                stats.live_sst_bytes,
            ),
        ] {
            out.family(name, "gauge", help);
            out.sample(name, &[], value as f64);
        }
    }
}

fn connection_metrics(out: &mut PromWriter, stats: &ConnectionStats) {
    let value = |counter: &std::sync::atomic::AtomicU64| {
        counter.load(std::sync::atomic::Ordering::Relaxed) as f64
    };
    out.family(
        "ebb_http_connections",
        "gauge",
        "HTTP connections open now.",
    );
    out.sample("ebb_http_connections", &[], value(&stats.open));
    out.family(
        "ebb_http_connections_refused_total",
        "counter",
        "Connections answered 503 and closed because --max-connections were open.",
    );
    out.sample(
        "ebb_http_connections_refused_total",
        &[],
        value(&stats.refused),
    );
    out.family(
        "ebb_http_accept_errors_total",
        "counter",
        "Failed accepts (out of descriptors or memory), each followed by a pause.",
    );
    out.sample(
        "ebb_http_accept_errors_total",
        &[],
        value(&stats.accept_errors),
    );
    out.family(
        "ebb_http_tls_handshake_failures_total",
        "counter",
        "TLS handshakes that failed (untrusted certificate, plain HTTP on the TLS port, nothing in common).",
    );
    out.sample(
        "ebb_http_tls_handshake_failures_total",
        &[],
        value(&stats.tls_handshake_failures),
    );
    out.family(
        "ebb_http_connections_timed_out_total",
        "counter",
        "Connections closed by the header read (or TLS handshake) or idle timeout.",
    );
    for (reason, counter) in [
        ("header", &stats.header_timeouts),
        ("idle", &stats.idle_timeouts),
    ] {
        out.sample(
            "ebb_http_connections_timed_out_total",
            &[("reason", reason)],
            value(counter),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invented_methods_share_one_series() {
        let metrics = RouteMetrics::default();
        for i in 0..100 {
            let method = Method::from_bytes(format!("X{i}").as_bytes()).unwrap();
            metrics.record(&method, 405, Duration::from_micros(10));
        }
        metrics.record(&Method::PUT, 200, Duration::from_micros(10));
        metrics.record(&Method::PUT, 200, Duration::from_micros(10));
        metrics.record(&Method::PUT, 409, Duration::from_micros(10));
        assert_eq!(
            metrics.counts(),
            vec![
                ("OTHER".to_string(), 405, 100),
                ("PUT".to_string(), 200, 2),
                ("PUT".to_string(), 409, 1),
            ]
        );
    }

    #[test]
    fn routes_are_counted_apart() {
        let metrics = HttpMetrics::default();
        metrics
            .route("/a")
            .record(&Method::GET, 200, Duration::ZERO);
        metrics
            .route("/a")
            .record(&Method::GET, 200, Duration::ZERO);
        metrics
            .route("/b")
            .record(&Method::GET, 200, Duration::ZERO);
        let counted: Vec<_> = metrics
            .by_route()
            .into_iter()
            .map(|(route, m)| (route, m.counts()))
            .collect();
        assert_eq!(
            counted,
            vec![
                ("/a".to_string(), vec![("GET".to_string(), 200, 2)]),
                ("/b".to_string(), vec![("GET".to_string(), 200, 1)]),
            ]
        );
    }
}
