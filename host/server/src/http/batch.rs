//! `POST /v1/tables/{t}/batch`: many puts and deletes in one request, each
//! with its own outcome.

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use base64::Engine as _;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::body::{path, query, read_limited};
use super::error::ApiError;
use super::kv::{WriteParams, durability, expiry, parse_version};
use ebb_host::write::{BatchItem, BatchOp, BatchOutcome, Condition};

/// One item as sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Item {
    #[serde(default = "default_op")]
    op: String,
    key: String,
    value: Option<ItemValue>,
    ttl_ms: Option<u64>,
    expires_at_ms: Option<u64>,
    if_version: Option<String>,
    if_absent: Option<bool>,
}

fn default_op() -> String {
    "put".to_string()
}

/// A value: UTF-8 text, or bytes as `{"base64": "..."}`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ItemValue {
    Text(String),
    Base64 { base64: String },
}

fn parse_item(raw: Value) -> Result<BatchItem, ApiError> {
    let item: Item = serde_json::from_value(raw)
        .map_err(|e| ApiError::invalid_request(format!("bad batch item: {e}")))?;
    let condition = match (&item.if_version, item.if_absent) {
        (Some(_), Some(true)) => {
            return Err(ApiError::invalid_request(
                "give either if_version or if_absent, not both",
            ));
        }
        (Some(version), _) => Condition::Version(parse_version(version)?),
        (None, Some(true)) => Condition::Absent,
        (None, _) => Condition::Always,
    };
    Ok(parse_op(item)?.when(condition))
}

fn parse_op(item: Item) -> Result<BatchOp, ApiError> {
    match item.op.as_str() {
        "put" => {
            let value = match item.value {
                Some(ItemValue::Text(text)) => Bytes::from(text),
                Some(ItemValue::Base64 { base64 }) => base64::engine::general_purpose::STANDARD
                    .decode(base64.as_bytes())
                    .map(Bytes::from)
                    .map_err(|e| ApiError::invalid_request(format!("bad base64 value: {e}")))?,
                None => {
                    return Err(ApiError::invalid_request(
                        "a put needs a value: a JSON string or {\"base64\": \"...\"}",
                    ));
                }
            };
            Ok(BatchOp::Put {
                key: item.key,
                value,
                expiry: expiry(item.ttl_ms, item.expires_at_ms)?,
            })
        }
        "delete" => {
            if item.value.is_some() || item.ttl_ms.is_some() || item.expires_at_ms.is_some() {
                return Err(ApiError::invalid_request(
                    "a delete takes only a key (no value, ttl_ms or expires_at_ms)",
                ));
            }
            Ok(BatchOp::Delete { key: item.key })
        }
        other => Err(ApiError::invalid_request(format!(
            "unknown op {other:?}; use \"put\" or \"delete\""
        ))),
    }
}

/// Split a body into items: a JSON array, or NDJSON (one object per line,
/// blank lines ignored). A line that is not JSON is that item's error.
fn split_items(headers: &HeaderMap, body: &[u8]) -> Result<Vec<Result<Value, ApiError>>, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    let is_array = if content_type.starts_with("application/x-ndjson") {
        false
    } else {
        content_type.starts_with("application/json") || first == Some(&b'[')
    };
    if is_array {
        let items: Vec<Value> = serde_json::from_slice(body).map_err(|e| {
            ApiError::invalid_request(format!("batch body is not a JSON array: {e}"))
        })?;
        return Ok(items.into_iter().map(Ok).collect());
    }
    Ok(body
        .split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, line)| line.iter().any(|b| !b.is_ascii_whitespace()))
        .map(|(n, line)| {
            serde_json::from_slice(line)
                .map_err(|e| ApiError::invalid_request(format!("line {} is not JSON: {e}", n + 1)))
        })
        .collect())
}

/// `POST /v1/tables/{t}/batch`.
pub async fn batch(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: Result<Query<WriteParams>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let table = path(target)?;
    let durability = durability(query(params)?.durability.as_deref())?;
    let table = app.node.table(&table)?;
    let limits = &app.limits;
    let body = read_limited(
        &headers,
        body,
        limits.max_body_bytes,
        "the batch body",
        "--max-body-bytes",
    )
    .await?;
    let items = split_items(&headers, &body)?;
    if items.len() > limits.max_batch_items {
        return Err(ApiError::too_large(
            format!(
                "batch has {} items; the limit is {} (split it into several requests)",
                items.len(),
                limits.max_batch_items
            ),
            limits.max_batch_items,
        ));
    }
    let parsed: Vec<Result<BatchItem, ApiError>> = items
        .into_iter()
        .map(|item| item.and_then(parse_item))
        .collect();
    let ops: Vec<BatchItem> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok().cloned())
        .collect();
    let mut applied = table.batch_items(ops, durability).await.into_iter();
    let results: Vec<Value> = parsed
        .into_iter()
        .map(|item| {
            let outcome = match item {
                Err(error) => Err(error),
                Ok(_) => applied
                    .next()
                    .expect("one outcome per valid item")
                    .map_err(ApiError::from),
            };
            match outcome {
                Ok(BatchOutcome::Written(version)) => {
                    json!({ "status": 200, "version": version.to_string() })
                }
                Ok(BatchOutcome::NotFound) => {
                    let error = ApiError::not_found("key not found (absent, deleted or expired)");
                    let mut body = error.body();
                    body["status"] = json!(404);
                    body
                }
                Err(error) => {
                    let mut body = error.body();
                    body["status"] = json!(error.status.as_u16());
                    body
                }
            }
        })
        .collect();
    Ok(Json(json!({ "results": results })))
}
