//! Key routes: put, get and delete one key; list tables.

use std::borrow::Cow;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::body::{PlainParams, no_params, path, query, read_limited, set_once};
use super::error::ApiError;
use super::{App, AppState};
use ebb_host::clock::now_ms;
use ebb_host::names::NameError;
use ebb_host::write::{Condition, Durability, Expiry, PutOptions, WriteOptions};

/// Query parameters of `PUT /v1/tables/{t}/keys/{k}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutParams {
    ttl_ms: Option<u64>,
    expires_at_ms: Option<u64>,
    durability: Option<Cow<'static, str>>,
}

/// Query parameters of `DELETE` and batch routes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteParams {
    pub(crate) durability: Option<Cow<'static, str>>,
}

/// Query parameters of `GET /v1/tables/{t}/keys/{k}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetParams {
    /// In a cluster, how old the answer may be (see docs/cluster.md,
    /// "Follower reads"); absent: linearizable.
    max_staleness_ms: Option<u64>,
}

impl PlainParams for PutParams {
    fn set(&mut self, name: &str, value: &str) -> bool {
        match name {
            "ttl_ms" => set_once(&mut self.ttl_ms, value.parse().ok()),
            "expires_at_ms" => set_once(&mut self.expires_at_ms, value.parse().ok()),
            "durability" => set_once(&mut self.durability, Some(durability_name(value))),
            _ => false,
        }
    }
}

impl PlainParams for WriteParams {
    fn set(&mut self, name: &str, value: &str) -> bool {
        name == "durability" && set_once(&mut self.durability, Some(durability_name(value)))
    }
}

impl PlainParams for GetParams {
    fn set(&mut self, name: &str, value: &str) -> bool {
        name == "max_staleness_ms" && set_once(&mut self.max_staleness_ms, value.parse().ok())
    }
}

/// A durability name as given in a query string: the known ones without
/// a copy (every write names one).
fn durability_name(value: &str) -> Cow<'static, str> {
    match value {
        "memory" => Cow::Borrowed("memory"),
        "wal" => Cow::Borrowed("wal"),
        "sync" => Cow::Borrowed("sync"),
        other => Cow::Owned(other.to_owned()),
    }
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

/// The condition of a single-key write from its `If-Match: <version>` or
/// `If-None-Match: *` header (not both). A version may be quoted, as an
/// entity tag is.
pub fn condition(headers: &HeaderMap) -> Result<Condition, ApiError> {
    let text = |name: header::HeaderName| -> Result<Option<&str>, ApiError> {
        headers
            .get(&name)
            .map(|value| {
                value.to_str().map(str::trim).map_err(|_| {
                    ApiError::invalid_request(format!("the {name} header is not visible ASCII"))
                })
            })
            .transpose()
    };
    match (text(header::IF_MATCH)?, text(header::IF_NONE_MATCH)?) {
        (Some(_), Some(_)) => Err(ApiError::invalid_request(
            "give either If-Match (write only over that version) or If-None-Match: * (create only), not both",
        )),
        (Some("*"), None) => Err(ApiError::invalid_request(
            "If-Match takes the version to write over (the ebb-version header of a read), not *",
        )),
        (Some(version), None) => Ok(Condition::Version(parse_version(version)?)),
        (None, Some("*")) => Ok(Condition::Absent),
        (None, Some(other)) => Err(ApiError::invalid_request(format!(
            "If-None-Match takes only * (create only), not {other:?}"
        ))),
        (None, None) => Ok(Condition::Always),
    }
}

/// A version in its text form (`hlc_ms.counter@writer`), optionally
/// quoted.
pub fn parse_version(text: &str) -> Result<ebb_host::Version, ApiError> {
    let bare = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text);
    bare.parse()
        .map_err(|e: ebb_host::InvalidVersion| ApiError::invalid_request(e.to_string()))
}

/// The header that carries a record's version.
const EBB_VERSION: HeaderName = HeaderName::from_static("ebb-version");

/// The `ebb-version` header of a version in its text form.
fn version_header(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `PUT /v1/tables/{t}/keys/{k}`: store the body as the value.
pub async fn put_key(
    State(app): State<AppState>,
    target: Result<Path<(String, String)>, PathRejection>,
    params: Result<Query<PutParams>, QueryRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let (table, key) = path(target)?;
    put(&app, &table, &key, query(params)?, request).await
}

/// [`put_key`] once its path and parameters are read (also the key fast
/// path's). The headers are read from the request rather than extracted:
/// extracting a `HeaderMap` copies it.
pub(super) async fn put(
    app: &App,
    table: &str,
    key: &str,
    params: PutParams,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let durability = durability(params.durability.as_deref())?;
    // Resolve the deadline here so the answer reports exactly what was stored.
    let expires_at_ms = expiry(params.ttl_ms, params.expires_at_ms)?
        .resolve(now_ms())
        .map_err(|e| ApiError::from(ebb_host::Error::from(e)))?;
    let table = app.node.table(table).map_err(ApiError::from)?;
    let limit = app.node.config().max_value_bytes;
    let value = read_limited(headers, body, limit, "the value", "--max-value-bytes").await?;
    let condition = condition(headers)?;
    let mut options = PutOptions::default().durability(durability);
    if let Some(at) = expires_at_ms {
        options = options.expires_at_ms(at);
    }
    let version = table.put_if(key, value, options, condition).await?;
    Ok(written(&version, expires_at_ms))
}

/// The answer to a put or a TTL change: the new version and deadline, the
/// version also in `ebb-version`. The body is what serializing
/// `{"version", "version_ms", "expires_at_ms"}` with serde gives, written
/// straight into one buffer (it is in every write's answer); when the
/// version needs no escaping in JSON (a writer name of printable ASCII but
/// `"` and `\`, as node ids are), the header is a slice of that buffer,
/// not a copy.
fn written(version: &ebb_host::Version, expires_at_ms: Option<u64>) -> Response {
    let plain = version
        .writer
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
    let mut body = Vec::with_capacity(96 + version.writer.len());
    body.extend_from_slice(b"{\"version\":");
    let text = if plain {
        body.push(b'"');
        let start = body.len();
        version.push_text(&mut body);
        let end = body.len();
        body.push(b'"');
        Ok(start..end)
    } else {
        // The writer's name is any text: serde escapes it.
        let text = version.text();
        serde_json::to_writer(&mut body, &text).expect("writing to a Vec cannot fail");
        Err(text)
    };
    body.extend_from_slice(b",\"version_ms\":");
    body.extend_from_slice(itoa::Buffer::new().format(version.hlc_ms).as_bytes());
    body.extend_from_slice(b",\"expires_at_ms\":");
    match expires_at_ms {
        Some(at) => body.extend_from_slice(itoa::Buffer::new().format(at).as_bytes()),
        None => body.extend_from_slice(b"null"),
    }
    body.push(b'}');
    let body = axum::body::Bytes::from(body);
    let header = match text {
        Ok(range) => HeaderValue::from_maybe_shared(body.slice(range))
            .unwrap_or_else(|_| HeaderValue::from_static("")),
        Err(text) => version_header(&text),
    };
    let mut response = Response::new(Body::from(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(EBB_VERSION, header);
    response
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
    get(&app, &table, &key, query(params)?).await
}

/// [`get_key`] once its path and parameters are read (also the key fast
/// path's).
pub(super) async fn get(
    app: &App,
    table: &str,
    key: &str,
    params: GetParams,
) -> Result<Response, ApiError> {
    let max_staleness = params
        .max_staleness_ms
        .map(std::time::Duration::from_millis);
    let table = app.node.table(table)?;
    let read = table.get_within(key, max_staleness).await?;
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
    headers.insert(EBB_VERSION, version_header(&entry.version.text()));
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

/// `DELETE /v1/tables/{t}/keys/{k}`: write a tombstone; 404 when absent,
/// 412 when an `If-Match` version does not match.
pub async fn delete_key(
    State(app): State<AppState>,
    target: Result<Path<(String, String)>, PathRejection>,
    params: Result<Query<WriteParams>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (table, key) = path(target)?;
    delete(&app, &table, &key, query(params)?, &headers).await
}

/// [`delete_key`] once its path and parameters are read (also the key
/// fast path's).
pub(super) async fn delete(
    app: &App,
    table: &str,
    key: &str,
    params: WriteParams,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let durability = durability(params.durability.as_deref())?;
    let options = WriteOptions::default()
        .durability(durability)
        .condition(condition(headers)?);
    let table = app.node.table(table)?;
    match table.delete_with(key, options).await? {
        Some(version) => {
            let text = version.text();
            let mut response = Json(json!({ "version": &text })).into_response();
            response
                .headers_mut()
                .insert(EBB_VERSION, version_header(&text));
            Ok(response)
        }
        None => Err(ApiError::not_found(format!(
            "key {key:?} not found in table {} (absent, deleted or expired)",
            table.name()
        ))),
    }
}

/// `PATCH /v1/tables/{t}/keys/{k}`: change the record's TTL without
/// sending its value: a body of exactly one of `{"ttl_ms": n}`,
/// `{"expires_at_ms": t}` or `{"ttl_ms": null}` (no TTL). Conditional like
/// a put; 404 when the key has no visible record (an expired record
/// cannot be extended).
pub async fn patch_key(
    State(app): State<AppState>,
    target: Result<Path<(String, String)>, PathRejection>,
    params: Result<Query<WriteParams>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (table, key) = path(target)?;
    let durability = durability(query(params)?.durability.as_deref())?;
    let options = WriteOptions::default()
        .durability(durability)
        .condition(condition(&headers)?);
    let limit = app.limits.max_body_bytes;
    let body = read_limited(&headers, body, limit, "the PATCH body", "--max-body-bytes").await?;
    let expiry = patch_expiry(&body)?;
    // Resolve the deadline here so the answer reports exactly what was stored.
    let expires_at_ms = expiry
        .resolve(now_ms())
        .map_err(|e| ApiError::from(ebb_host::Error::from(e)))?;
    let expiry = expires_at_ms.map_or(Expiry::Never, Expiry::At);
    let table = app.node.table(&table)?;
    match table.set_expiry(&key, expiry, options).await? {
        Some(version) => Ok(written(&version, expires_at_ms)),
        None => Err(ApiError::not_found(format!(
            "key {key:?} not found in table {} (absent, deleted or expired; an expired record cannot be extended)",
            table.name()
        ))),
    }
}

/// The expiry a PATCH body asks for.
fn patch_expiry(body: &[u8]) -> Result<Expiry, ApiError> {
    const SHAPE: &str =
        r#"the body must be one of {"ttl_ms": n}, {"expires_at_ms": t} or {"ttl_ms": null}"#;
    let fields: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid_request(format!("{SHAPE}: {e}")))?;
    let mut fields = fields.into_iter();
    let (Some((name, value)), None) = (fields.next(), fields.next()) else {
        return Err(ApiError::invalid_request(SHAPE));
    };
    let number = |value: &serde_json::Value| {
        value.as_u64().ok_or_else(|| {
            ApiError::invalid_request(format!(
                "{name} must be a whole number of milliseconds or null, not {value}"
            ))
        })
    };
    match (name.as_str(), &value) {
        ("ttl_ms" | "expires_at_ms", serde_json::Value::Null) => Ok(Expiry::Never),
        ("ttl_ms", value) => Ok(Expiry::After(std::time::Duration::from_millis(number(
            value,
        )?))),
        ("expires_at_ms", value) => Ok(Expiry::At(number(value)?)),
        (other, _) => Err(ApiError::invalid_request(format!(
            "unknown field {other:?}; {SHAPE}"
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
    grant: Option<axum::Extension<std::sync::Arc<super::tokens::Grant>>>,
    params: RawQuery,
) -> Result<Json<serde_json::Value>, ApiError> {
    no_params(params)?;
    // A token limited to tables sees only those.
    let tables: Vec<_> = app
        .node
        .tables()
        .into_iter()
        .filter(|t| grant.as_ref().is_none_or(|g| g.covers(t.name.as_str())))
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http_body_util::BodyExt;

    use super::*;

    /// The hand-written body of [`written`] is what serde writes.
    #[tokio::test]
    async fn a_write_answers_what_serde_would_write() {
        #[derive(serde::Serialize)]
        struct Written<'a> {
            version: &'a str,
            version_ms: u64,
            expires_at_ms: Option<u64>,
        }
        let writers = [
            "n1",
            "a \"quoted\\ name\u{1}",
            "é",
            "n018de9954b8bf2f2",
            "tab\there",
            "",
        ];
        let deadlines = [None, Some(0), Some(u64::MAX), Some(7), None, None];
        for (writer, expires_at_ms) in writers.into_iter().zip(deadlines) {
            let version = ebb_host::Version {
                hlc_ms: 1_767_225_600_000,
                counter: 3,
                writer: Arc::from(writer),
            };
            let response = written(&version, expires_at_ms);
            assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
            assert_eq!(
                response.headers()[EBB_VERSION],
                version_header(&version.text())
            );
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let text = version.to_string();
            let expected = serde_json::to_vec(&Written {
                version: &text,
                version_ms: version.hlc_ms,
                expires_at_ms,
            })
            .unwrap();
            assert_eq!(body, expected, "{writer:?}");
        }
    }
}
