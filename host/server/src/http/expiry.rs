//! Handler routes, for expiry handlers (`/expiry-handler`, `/expiry/...`)
//! and change handlers (`/change-handler`, `/change/...`) alike: bind, read
//! status, unbind, list and redrive dead letters.

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::body::{no_params, path, query, read_limited};
use super::error::ApiError;
use ebb_host::expiry::{BindRequest, Binding, ExpiryError, PendingEvent};
use ebb_host::hex;
use ebb_host::plugin::HandlerKind;

/// Largest body of the expiry routes.
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Dead letters per page unless `limit` says otherwise.
const DEFAULT_PAGE: usize = 100;

impl From<ExpiryError> for ApiError {
    fn from(error: ExpiryError) -> Self {
        let message = error.to_string();
        match error {
            ExpiryError::Invalid(_) => ApiError::invalid_request(message),
            ExpiryError::NotFound(_) => ApiError::not_found(message),
            ExpiryError::Conflict(_) => ApiError::new(StatusCode::CONFLICT, "conflict", message),
            ExpiryError::Store(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_durable", message)
            }
            ExpiryError::ShuttingDown => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", message)
            }
            ExpiryError::Cluster(error) => ApiError::from(error),
            ExpiryError::Unavailable { code, .. } => match code.as_str() {
                "no_quorum" => ApiError::unavailable("no_quorum", message)
                    .with("group", serde_json::json!("metadata")),
                "not_durable" => ApiError::unavailable("not_durable", message),
                "shutting_down" => ApiError::unavailable("shutting_down", message),
                _ => ApiError::unavailable("unavailable", message),
            },
        }
    }
}

fn binding_json(table: &str, binding: &Binding) -> Value {
    let mut out = json!({
        "table": table,
        "plugin": binding.plugin,
        "function": binding.function,
        "max_batch": binding.max_batch,
        "max_attempts": binding.max_attempts,
        "created_ms": binding.created_ms,
        "config": binding
            .config
            .as_deref()
            .and_then(|text| serde_json::from_str::<Value>(text).ok()),
    });
    if let Some(prefix) = &binding.prefix {
        out["prefix"] = json!(prefix);
    }
    out
}

async fn json_body<T: serde::de::DeserializeOwned + Default>(
    headers: &HeaderMap,
    body: Body,
    allow_empty: bool,
) -> Result<T, ApiError> {
    let bytes = read_limited(
        headers,
        body,
        MAX_BODY_BYTES,
        "the request body",
        "1 MiB for expiry routes",
    )
    .await?;
    if allow_empty && bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid_request(format!("bad request body: {e}")))
}

/// The routes of one handler kind: `K` is [`Expiry`] or [`Change`].
pub trait Kind: Send + Sync + 'static {
    /// The kind.
    const KIND: HandlerKind;
}

/// The expiry-handler routes.
pub struct Expiry;

impl Kind for Expiry {
    const KIND: HandlerKind = HandlerKind::Expiry;
}

/// The change-handler routes.
pub struct Change;

impl Kind for Change {
    const KIND: HandlerKind = HandlerKind::Change;
}

/// `PUT /v1/tables/{t}/expiry-handler` (and `change-handler`): `{plugin,
/// function, max_batch?, max_attempts?, config?}`, and for change handlers
/// `prefix?`.
pub async fn bind<K: Kind>(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let table = path(target)?;
    no_params(params)?;
    let request: BindRequest = json_body(&headers, body, false).await?;
    let binding = app.node.bind_handler(K::KIND, &table, request).await?;
    Ok(Json(binding_json(&table.to_ascii_lowercase(), &binding)))
}

/// `GET /v1/tables/{t}/expiry-handler` (and `change-handler`): the binding
/// and its delivery status.
pub async fn status<K: Kind>(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: RawQuery,
) -> Result<Json<Value>, ApiError> {
    let table = path(target)?;
    no_params(params)?;
    let status = app.node.handler_status(K::KIND, &table).await?;
    let name = status.table.to_string();
    let mut out = json!({
        "table": name,
        "binding": status.binding.as_ref().map(|b| binding_json(&name, b)),
        "status": {
            "outbox_depth": status.queue.pending,
            "in_flight": status.queue.in_flight,
            "backing_off": status.queue.backing_off,
            "oldest_pending_age_ms": status.oldest_pending_age_ms,
            "handled": status.handled,
            "calls": status.calls,
            "attempts": status.attempts,
            "failed_calls": status.failed_calls,
            "failed_events": status.failed_events,
            "dead_letters": status.dead_letters,
            "skipped_actions": status.skipped_actions,
            "lag_ms": {
                "p50": status.lag_p50_ms,
                "p99": status.lag_p99_ms,
                "max": status.lag_max_ms,
            },
            "last_error": status.last_error,
        },
    });
    if let Some(stored) = status.stored_events {
        out["status"]["stored_events"] = json!(stored);
    }
    Ok(Json(out))
}

/// Query of `DELETE /v1/tables/{t}/expiry-handler`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnbindQuery {
    /// Also delete the table's pending events.
    #[serde(default)]
    discard_pending: bool,
}

/// `DELETE /v1/tables/{t}/expiry-handler[?discard_pending=true]` (and
/// `change-handler`).
pub async fn unbind<K: Kind>(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: Result<Query<UnbindQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let table = path(target)?;
    let params = query(params)?;
    let binding = app
        .node
        .unbind_handler(K::KIND, &table, params.discard_pending)
        .await?;
    let table = table.to_ascii_lowercase();
    Ok(Json(json!({
        "unbound": binding_json(&table, &binding),
        "discarded_pending": params.discard_pending,
    })))
}

/// Query of the dead-letter listing.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// Most entries (1 to 1000, default 100).
    limit: Option<usize>,
    /// Continue after this id (the `next` of the previous page).
    after: Option<String>,
}

fn dead_letter_json(event: &PendingEvent) -> Value {
    let mut out = match (event.expiry_event(), event.change_event()) {
        (Some(e), _) => json!({
            "key": e.key,
            "value": ebb_host::codec::bytes_json(&e.value),
            "version": format!("{}.{}", e.version_ms, e.version_counter),
            "expires_at_ms": e.expires_at_ms,
            "observed_at_ms": e.observed_at_ms,
        }),
        (None, Some(c)) => json!({
            "key": c.key,
            "value": (!c.deleted).then(|| ebb_host::codec::bytes_json(&c.value)),
            "deleted": c.deleted,
            "old_version": (!c.old_version.is_empty()).then_some(&c.old_version),
            "new_version": c.new_version,
            "written_at_ms": c.written_at_ms,
        }),
        (None, None) => json!({}),
    };
    out["id"] = json!(hex::encode(event.id()));
    out["attempts"] = json!(event.attempt());
    out["last_error"] = json!(event.stored.last_error);
    out["last_attempt_ms"] = json!(event.stored.last_attempt_ms);
    out["dead_at_ms"] = json!(event.stored.dead_at_ms);
    out
}

/// `GET /v1/tables/{t}/expiry/dead-letters[?limit=&after=]` (and
/// `change/dead-letters`).
pub async fn dead_letters<K: Kind>(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let table = path(target)?;
    let params = query(params)?;
    let page = app
        .node
        .handler_dead_letters(
            K::KIND,
            &table,
            params.after.as_deref(),
            params.limit.unwrap_or(DEFAULT_PAGE),
        )
        .await?;
    let items: Vec<Value> = page.events.iter().map(dead_letter_json).collect();
    Ok(Json(json!({ "dead_letters": items, "next": page.next })))
}

/// Body of a redrive: no body (or `{}`) redrives every dead letter.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedriveBody {
    /// Ids (hex) to redrive.
    ids: Option<Vec<String>>,
}

/// `POST /v1/tables/{t}/expiry/dead-letters/redrive` (and
/// `change/dead-letters/redrive`) with optional `{"ids": [...]}`; answers
/// `{"redriven": n, "more": bool}` (redrive again while `more`).
pub async fn redrive<K: Kind>(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let table = path(target)?;
    no_params(params)?;
    let body: RedriveBody = json_body(&headers, body, true).await?;
    let (count, more) = app.node.redrive_handler(K::KIND, &table, body.ids).await?;
    Ok(Json(json!({ "redriven": count, "more": more })))
}
