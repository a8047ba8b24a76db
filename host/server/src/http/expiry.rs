//! Expiry-handler routes: bind, read status, unbind, list and redrive dead
//! letters.

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
    json!({
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
    })
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

/// `PUT /v1/tables/{t}/expiry-handler`: `{plugin, function, max_batch?,
/// max_attempts?, config?}`.
pub async fn bind(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let table = path(target)?;
    no_params(params)?;
    let request: BindRequest = json_body(&headers, body, false).await?;
    let binding = app.node.bind_expiry(&table, request).await?;
    Ok(Json(binding_json(&table.to_ascii_lowercase(), &binding)))
}

/// `GET /v1/tables/{t}/expiry-handler`: the binding and its delivery status.
pub async fn status(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: RawQuery,
) -> Result<Json<Value>, ApiError> {
    let table = path(target)?;
    no_params(params)?;
    let status = app.node.expiry_status(&table).await?;
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

/// `DELETE /v1/tables/{t}/expiry-handler[?discard_pending=true]`.
pub async fn unbind(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: Result<Query<UnbindQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let table = path(target)?;
    let params = query(params)?;
    let binding = app
        .node
        .unbind_expiry(&table, params.discard_pending)
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
    let e = event.event();
    json!({
        "id": hex::encode(&e.id),
        "key": e.key,
        "value": ebb_host::codec::bytes_json(&e.value),
        "version": format!("{}.{}", e.version_ms, e.version_counter),
        "expires_at_ms": e.expires_at_ms,
        "observed_at_ms": e.observed_at_ms,
        "attempts": e.attempt,
        "last_error": event.stored.last_error,
        "last_attempt_ms": event.stored.last_attempt_ms,
        "dead_at_ms": event.stored.dead_at_ms,
    })
}

/// `GET /v1/tables/{t}/expiry/dead-letters[?limit=&after=]`.
pub async fn dead_letters(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let table = path(target)?;
    let params = query(params)?;
    let page = app
        .node
        .dead_letters(
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

/// `POST /v1/tables/{t}/expiry/dead-letters/redrive` with optional `{"ids": [...]}`;
/// answers `{"redriven": n, "more": bool}` (redrive again while `more`).
pub async fn redrive(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let table = path(target)?;
    no_params(params)?;
    let body: RedriveBody = json_body(&headers, body, true).await?;
    let (count, more) = app.node.redrive(&table, body.ids).await?;
    Ok(Json(json!({ "redriven": count, "more": more })))
}
