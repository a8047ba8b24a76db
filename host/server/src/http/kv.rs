//! Key routes: put, get and delete one key; list tables.

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::body::{no_params, path, query, read_limited};
use super::error::ApiError;
use ebb_host::clock::now_ms;
use ebb_host::names::NameError;
use ebb_host::write::{Durability, Expiry, PutOptions};

/// Query parameters of `PUT /v1/tables/{t}/keys/{k}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutParams {
    ttl_ms: Option<u64>,
    expires_at_ms: Option<u64>,
    durability: Option<String>,
}

/// Query parameters of `DELETE` and batch routes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteParams {
    pub(crate) durability: Option<String>,
}

/// Query parameters of `GET /v1/tables/{t}/keys/{k}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetParams {
    /// In a cluster, how old the answer may be (see docs/cluster.md,
    /// "Follower reads"); absent: linearizable.
    max_staleness_ms: Option<u64>,
}

/// Parse a durability name (default `wal`).
pub fn durability(name: Option<&str>) -> Result<Durability, ApiError> {
    name.map_or(Ok(Durability::Wal), |name| {
        name.parse()
            .map_err(|e: ebb_host::write::UnknownDurability| {
                ApiError::invalid_request(e.to_string())
            })
    })
}

/// The expiry of a write from `ttl_ms` / `expires_at_ms` (not both).
pub fn expiry(ttl_ms: Option<u64>, expires_at_ms: Option<u64>) -> Result<Expiry, ApiError> {
    match (ttl_ms, expires_at_ms) {
        (Some(_), Some(_)) => Err(ApiError::invalid_request(
            "give either ttl_ms or expires_at_ms, not both",
        )),
        (Some(ttl), None) => Ok(Expiry::After(std::time::Duration::from_millis(ttl))),
        (None, Some(at)) => Ok(Expiry::At(at)),
        (None, None) => Ok(Expiry::Never),
    }
}

fn version_header(version: &ebb_host::Version) -> HeaderValue {
    HeaderValue::from_str(&version.to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `PUT /v1/tables/{t}/keys/{k}`: store the body as the value.
pub async fn put_key(
    State(app): State<AppState>,
    target: Result<Path<(String, String)>, PathRejection>,
    params: Result<Query<PutParams>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (table, key) = path(target)?;
    let params = query(params)?;
    let durability = durability(params.durability.as_deref())?;
    // Resolve the deadline here so the answer reports exactly what was stored.
    let expires_at_ms = expiry(params.ttl_ms, params.expires_at_ms)?
        .resolve(now_ms())
        .map_err(|e| ApiError::from(ebb_host::Error::from(e)))?;
    let table = app.node.table(&table).map_err(ApiError::from)?;
    let limit = app.node.config().max_value_bytes;
    let value = read_limited(&headers, body, limit, "the value", "--max-value-bytes").await?;
    let mut options = PutOptions::default().durability(durability);
    if let Some(at) = expires_at_ms {
        options = options.expires_at_ms(at);
    }
    let version = table.put(&key, value, options).await?;
    let mut response = Json(json!({
        "version": version.to_string(),
        "version_ms": version.hlc_ms,
        "expires_at_ms": expires_at_ms,
    }))
    .into_response();
    response
        .headers_mut()
        .insert("ebb-version", version_header(&version));
    Ok(response)
}

/// `GET /v1/tables/{t}/keys/{k}`: the value bytes, version and deadline in
/// headers; with `max_staleness_ms`, `ebb-staleness-ms` bounds the age of
/// the data answered.
pub async fn get_key(
    State(app): State<AppState>,
    target: Result<Path<(String, String)>, PathRejection>,
    params: Result<Query<GetParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let (table, key) = path(target)?;
    let max_staleness = query(params)?
        .max_staleness_ms
        .map(std::time::Duration::from_millis);
    let table = app.node.table(&table)?;
    let read = table.get_within(&key, max_staleness).await?;
    let Some(entry) = read.entry else {
        return Err(ApiError::not_found(format!(
            "key {key:?} not found in table {} (absent, deleted or expired)",
            table.name()
        )));
    };
    let mut response = (StatusCode::OK, entry.value).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert("ebb-version", version_header(&entry.version));
    if let Some(at) = entry.expires_at_ms {
        headers.insert("ebb-expires-at", HeaderValue::from(at));
    }
    if max_staleness.is_some() {
        let staleness_ms =
            u64::try_from(read.staleness.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
        headers.insert("ebb-staleness-ms", HeaderValue::from(staleness_ms));
    }
    Ok(response)
}

/// `DELETE /v1/tables/{t}/keys/{k}`: write a tombstone; 404 when absent.
pub async fn delete_key(
    State(app): State<AppState>,
    target: Result<Path<(String, String)>, PathRejection>,
    params: Result<Query<WriteParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let (table, key) = path(target)?;
    let durability = durability(query(params)?.durability.as_deref())?;
    let table = app.node.table(&table)?;
    match table.delete(&key, durability).await? {
        Some(version) => {
            let mut response = Json(json!({ "version": version.to_string() })).into_response();
            response
                .headers_mut()
                .insert("ebb-version", version_header(&version));
            Ok(response)
        }
        None => Err(ApiError::not_found(format!(
            "key {key:?} not found in table {} (absent, deleted or expired)",
            table.name()
        ))),
    }
}

/// `PUT`, `GET` or `DELETE /v1/tables/{t}/keys/` (an empty key): 400
/// `invalid_request` with the key rule (a bad table name is named first).
pub async fn empty_key(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
) -> ApiError {
    let table = match path(target) {
        Ok(table) => table,
        Err(error) => return error,
    };
    match app.node.table(&table) {
        Ok(_) => ebb_host::Error::InvalidName(NameError::EmptyKey).into(),
        Err(error) => error.into(),
    }
}

/// `GET /v1/tables`: tables with live records: counts and memory.
pub async fn list_tables(
    State(app): State<AppState>,
    params: RawQuery,
) -> Result<Json<serde_json::Value>, ApiError> {
    no_params(params)?;
    let tables: Vec<_> = app
        .node
        .tables()
        .into_iter()
        .map(|t| {
            json!({
                "name": t.name.as_str(),
                "live_records": t.live_records,
                "tombstones": t.tombstones,
                "memory_bytes": t.memory_bytes,
            })
        })
        .collect();
    Ok(Json(json!({ "tables": tables })))
}
