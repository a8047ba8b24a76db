//! `POST /v1/sql`: run a query; JSON pages with cursors, or an NDJSON stream.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value as JsonValue, json};
use tokio::sync::{mpsc, oneshot};

use super::AppState;
use super::body::{no_params, read_limited};
use super::error::ApiError;
use ebb_host::codec::{from_json, to_json};
use ebb_host::exec::{Consistency, QueryError, QueryRequest, QueryStats};
use ebb_query::{OutputColumn, PlanError};

/// Largest `/v1/sql` request body.
const MAX_SQL_BODY_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SqlBody {
    sql: Option<String>,
    params: Option<Vec<JsonValue>>,
    page_size: Option<usize>,
    cursor: Option<String>,
    consistency: Option<String>,
    max_staleness_ms: Option<u64>,
}

impl From<QueryError> for ApiError {
    fn from(error: QueryError) -> Self {
        let message = error.to_string();
        match error {
            QueryError::InvalidRequest(_) => ApiError::invalid_request(message),
            QueryError::Forbidden { .. } => {
                ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
            }
            QueryError::Plan(PlanError::Limit { limit, value, .. }) => {
                ApiError::too_large(message, value as usize).with("budget", json!(limit))
            }
            QueryError::Plan(_) => ApiError::new(StatusCode::BAD_REQUEST, "invalid_sql", message),
            QueryError::InvalidCursor(_) => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_cursor", message)
            }
            QueryError::QueryChanged { .. } => {
                ApiError::new(StatusCode::CONFLICT, "query_changed", message)
            }
            QueryError::PluginChanged { plugin, .. } => {
                ApiError::new(StatusCode::CONFLICT, "plugin_changed", message)
                    .with("plugin", json!(plugin))
            }
            QueryError::Budget { budget, limit, .. } => {
                ApiError::too_large(message, limit as usize).with("budget", json!(budget))
            }
            QueryError::Timeout(_) => {
                ApiError::new(StatusCode::GATEWAY_TIMEOUT, "timeout", message)
            }
            QueryError::Function(f) if f.host => ApiError::unavailable("overloaded", message),
            QueryError::Function(f) if f.plugin => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "plugin_error", message)
            }
            QueryError::Function(_) => ApiError::invalid_request(message),
            QueryError::Overloaded(_) => ApiError::unavailable("overloaded", message),
            QueryError::ShuttingDown => ApiError::unavailable("shutting_down", message),
            QueryError::Cancelled => ApiError::unavailable("unavailable", message),
            QueryError::Internal(_) => ApiError::internal(message),
            QueryError::Cluster(error) => ApiError::from(error),
        }
    }
}

fn columns_json(columns: &[OutputColumn]) -> JsonValue {
    columns
        .iter()
        .map(|c| json!({ "name": c.name, "type": c.sql_type.name() }))
        .collect()
}

fn stats_json(stats: &QueryStats) -> JsonValue {
    json!({
        "rows": stats.rows,
        "scanned": stats.scanned,
        "pages": stats.pages,
        "elapsed_ms": (stats.elapsed_ms * 1000.0).round() / 1000.0,
    })
}

/// Check a request body: a first request carries `sql` (and optionally
/// `params`, `page_size`, `consistency`, `max_staleness_ms`); a
/// continuation carries `cursor`, optionally `consistency`,
/// `max_staleness_ms` and the cursor's own `sql`, and never `params` or
/// `page_size`, which come from the cursor.
fn parse_request(body: SqlBody) -> Result<QueryRequest, ApiError> {
    if body.cursor.is_some() {
        let fixed: Vec<&str> = [
            ("params", body.params.is_some()),
            ("page_size", body.page_size.is_some()),
        ]
        .into_iter()
        .filter_map(|(field, given)| given.then_some(field))
        .collect();
        if !fixed.is_empty() {
            return Err(ApiError::invalid_request(format!(
                "a continuation takes its parameters and page size from the cursor; remove {} (send \"cursor\", optionally with \"consistency\")",
                fixed
                    .iter()
                    .map(|f| format!("\"{f}\""))
                    .collect::<Vec<_>>()
                    .join(" and ")
            )));
        }
    }
    let params = body
        .params
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            from_json(p).map_err(|e| ApiError::invalid_request(format!("parameter {}: {e}", i + 1)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let consistency = match body.consistency.as_deref() {
        None => None,
        Some("guarded") => Some(Consistency::Guarded),
        Some("relaxed") => Some(Consistency::Relaxed),
        Some(other) => {
            return Err(ApiError::invalid_request(format!(
                "unknown consistency {other:?}; use \"guarded\" or \"relaxed\""
            )));
        }
    };
    if body.sql.is_none() && body.cursor.is_none() {
        return Err(ApiError::invalid_request(
            "send \"sql\", or a \"cursor\" to continue a query",
        ));
    }
    Ok(QueryRequest {
        sql: body.sql,
        params,
        page_size: body.page_size,
        cursor: body.cursor,
        consistency,
        max_staleness: body.max_staleness_ms.map(Duration::from_millis),
        tables: None,
    })
}

fn wants_ndjson(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("application/x-ndjson"))
}

/// `POST /v1/sql`.
pub async fn sql(
    State(app): State<AppState>,
    grant: Option<axum::Extension<std::sync::Arc<super::tokens::Grant>>>,
    params: RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    no_params(params)?;
    let bytes = read_limited(
        &headers,
        body,
        MAX_SQL_BODY_BYTES,
        "the request body",
        "4 MiB for /v1/sql",
    )
    .await?;
    let body: SqlBody = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::invalid_request(format!("bad request body: {e}")))?;
    let mut request = parse_request(body)?;
    // A token limited to tables reads only those.
    request.tables = grant
        .and_then(|grant| grant.tables.clone())
        .map(|tables| tables.iter().map(|t| t.as_str().to_string()).collect());
    if wants_ndjson(&headers) {
        return stream(app, request).await;
    }
    let output = app.node.query(request).await?;
    let rows: Vec<JsonValue> = output
        .rows
        .iter()
        .map(|row| JsonValue::Array(row.iter().map(to_json).collect()))
        .collect();
    Ok(Json(json!({
        "columns": columns_json(&output.columns),
        "rows": rows,
        "cursor": output.cursor,
        "stats": stats_json(&output.stats),
    }))
    .into_response())
}

/// The streaming query's task failed (it panicked or was cancelled): the
/// server's failure, 500 `internal`.
fn task_failed(join: tokio::task::JoinError) -> ApiError {
    ApiError::internal(format!("the query task failed: {join}"))
}

fn line(value: JsonValue) -> Result<bytes::Bytes, Infallible> {
    let mut text = value.to_string();
    text.push('\n');
    Ok(bytes::Bytes::from(text))
}

/// Stream the whole result as NDJSON: a `columns` line, one line per row,
/// then `{"stats": ...}` or `{"error": ...}`. Errors before the first line
/// get their own status; later ones end the stream with an error line.
async fn stream(app: AppState, request: QueryRequest) -> Result<Response, ApiError> {
    let (columns_tx, columns_rx) = oneshot::channel();
    let (rows_tx, rows_rx) = mpsc::channel(256);
    let node = app.node.clone();
    let task = tokio::spawn(async move { node.query_stream(request, columns_tx, rows_tx).await });
    let columns = match columns_rx.await {
        Ok(columns) => columns,
        Err(_) => {
            return Err(match task.await {
                Ok(Err(error)) => error.into(),
                Ok(Ok(_)) => ApiError::internal("the query ended before producing columns"),
                Err(join) => task_failed(join),
            });
        }
    };
    let header_line =
        futures::stream::once(async move { line(json!({ "columns": columns_json(&columns) })) });
    let rows = futures::stream::unfold(rows_rx, |mut rx| async move {
        rx.recv().await.map(|row: Vec<ebb_query::Value>| {
            (
                line(JsonValue::Array(row.iter().map(to_json).collect())),
                rx,
            )
        })
    });
    let last = futures::stream::once(async move {
        match task.await {
            Ok(Ok(stats)) => line(json!({ "stats": stats_json(&stats) })),
            Ok(Err(error)) => line(ApiError::from(error).body()),
            Err(join) => line(task_failed(join).body()),
        }
    });
    let body = Body::from_stream(header_line.chain(rows).chain(last));
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ebb_query::FunctionError;

    use super::*;
    use ebb_host::exec::InvalidCursor;

    #[test]
    fn every_query_error_maps_to_its_status_and_code() {
        let budget = QueryError::Budget {
            budget: "max_result_bytes",
            limit: 10,
            message: "one result row is 20 bytes".into(),
        };
        let function = |plugin| {
            QueryError::Function(FunctionError {
                function: "f".into(),
                message: "failed".into(),
                plugin,
                host: false,
            })
        };
        let no_instance = QueryError::Function(FunctionError {
            function: "f".into(),
            message: "could not get an instance".into(),
            plugin: true,
            host: true,
        });
        let cases: Vec<(QueryError, u16, &str)> = vec![
            (
                QueryError::InvalidRequest("bad".into()),
                400,
                "invalid_request",
            ),
            (
                QueryError::Plan(PlanError::Invalid("no".into())),
                400,
                "invalid_sql",
            ),
            (
                QueryError::InvalidCursor(InvalidCursor("garbage".into())),
                400,
                "invalid_cursor",
            ),
            (
                QueryError::QueryChanged { fragment: 1 },
                409,
                "query_changed",
            ),
            (
                QueryError::PluginChanged {
                    plugin: "json".into(),
                    message: "plugin json was replaced".into(),
                },
                409,
                "plugin_changed",
            ),
            (budget, 413, "too_large"),
            (QueryError::Timeout(Duration::ZERO), 504, "timeout"),
            (function(true), 422, "plugin_error"),
            (function(false), 400, "invalid_request"),
            (no_instance, 503, "overloaded"),
            (QueryError::Overloaded("full".into()), 503, "overloaded"),
            (QueryError::ShuttingDown, 503, "shutting_down"),
            (QueryError::Cancelled, 503, "unavailable"),
            (
                QueryError::Internal("query task failed".into()),
                500,
                "internal",
            ),
        ];
        for (error, status, code) in cases {
            crate::http::error::assert_maps(error, status, code);
        }
        let changed = ApiError::from(QueryError::PluginChanged {
            plugin: "json".into(),
            message: "replaced".into(),
        });
        assert_eq!(changed.body()["error"]["plugin"], "json");
        let budget = ApiError::from(QueryError::Budget {
            budget: "max_result_bytes",
            limit: 10,
            message: String::new(),
        });
        assert_eq!(budget.body()["error"]["budget"], "max_result_bytes");
    }

    #[tokio::test]
    async fn a_failed_query_task_is_the_servers_fault() {
        let join = tokio::spawn(async { panic!("boom") }).await.unwrap_err();
        let api = task_failed(join);
        assert_eq!((api.status.as_u16(), api.code), (500, "internal"));
    }
}
