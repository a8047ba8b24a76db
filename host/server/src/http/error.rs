//! The HTTP error type: one JSON shape and status per error code.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use ebb_host::Error;
use ebb_host::cluster::ClusterError;
use ebb_host::names::NameError;

/// An error answered as `{"error": {"code", "message", ...}}`.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable snake_case code.
    pub code: &'static str,
    /// What went wrong and what to do.
    pub message: String,
    /// Seconds for `Retry-After` (503 answers).
    pub retry_after: Option<u64>,
    /// Extra fields next to `code` and `message`.
    pub details: Map<String, Value>,
}

impl ApiError {
    /// An error with `status`, `code` and `message`.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
            details: Map::new(),
        }
    }

    /// 400 `invalid_request`.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 413 `too_large`, naming the limit.
    pub fn too_large(message: impl Into<String>, limit: usize) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message).with("limit", json!(limit))
    }

    /// 408 `request_timeout` (the connection is closed after the answer).
    pub fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(StatusCode::REQUEST_TIMEOUT, "request_timeout", message)
    }

    /// 401 `unauthorized`.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this server needs `Authorization: Bearer <token>` on /v1 routes",
        )
    }

    /// 500 `internal`: the server failed, not the request.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// 503 with `Retry-After`.
    pub(crate) fn unavailable(code: &'static str, message: String) -> Self {
        let mut error = Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message);
        error.retry_after = Some(1);
        error
    }

    /// Add a detail field.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.details.insert(key.to_string(), value);
        self
    }

    /// The JSON body (also used for per-item batch outcomes).
    pub fn body(&self) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), json!(self.code));
        error.insert("message".into(), json!(self.message));
        for (key, value) in &self.details {
            error.insert(key.clone(), value.clone());
        }
        json!({ "error": error })
    }
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        let message = error.to_string();
        match error {
            Error::InvalidName(NameError::KeyTooLong { .. }) => {
                ApiError::too_large(message, ebb_host::names::MAX_KEY_BYTES)
            }
            Error::InvalidName(_)
            | Error::InvalidTtl(_)
            | Error::InvalidFunction(_)
            | Error::InvalidStaleness(_) => ApiError::invalid_request(message),
            Error::ValueTooLarge { limit, .. } => ApiError::too_large(message, limit),
            Error::Overloaded(_) | Error::Backlog(_) => {
                ApiError::unavailable("overloaded", message)
            }
            Error::ShuttingDown => ApiError::unavailable("shutting_down", message),
            Error::Interrupted { .. } => ApiError::unavailable("interrupted", message),
            Error::NotDurable { .. } => ApiError::unavailable("not_durable", message),
            Error::Plugin(error) => ApiError::from(error),
            Error::MemoryFull(full) => {
                ApiError::new(StatusCode::INSUFFICIENT_STORAGE, "memory_full", message)
                    .with("limit", json!("--max-memory"))
                    .with("max_memory_bytes", json!(full.limit_bytes))
                    .with("resident_bytes", json!(full.resident_bytes))
            }
            Error::PreconditionFailed { current } => ApiError::new(
                StatusCode::PRECONDITION_FAILED,
                "precondition_failed",
                message,
            )
            .with(
                "current_version",
                json!(current.map(|version| version.to_string())),
            ),
            Error::Cluster(error) => ApiError::from(error),
        }
    }
}

impl From<ClusterError> for ApiError {
    /// `no_quorum` names the fragment; a refusal by the leader keeps the
    /// leader's code where the contract has it.
    fn from(error: ClusterError) -> Self {
        let message = error.to_string();
        match error {
            ClusterError::NoQuorum { fragment, .. } => {
                ApiError::unavailable("no_quorum", message).with("fragment", json!(fragment))
            }
            ClusterError::Interrupted { fragment } => {
                ApiError::unavailable("interrupted", message).with("fragment", json!(fragment))
            }
            ClusterError::Refused { code, .. } => match code.as_str() {
                "overloaded" => ApiError::unavailable("overloaded", message),
                "memory_full" => {
                    ApiError::new(StatusCode::INSUFFICIENT_STORAGE, "memory_full", message)
                }
                "invalid_request" => ApiError::invalid_request(message),
                // A metadata command the members refused when applying it.
                "plugin_invalid" => {
                    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "plugin_invalid", message)
                }
                "not_found" => ApiError::not_found(message),
                "conflict" => ApiError::new(StatusCode::CONFLICT, "conflict", message),
                "not_durable" => ApiError::unavailable("not_durable", message),
                "shutting_down" => ApiError::unavailable("shutting_down", message),
                "internal" => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message),
                _ => ApiError::unavailable("unavailable", message),
            },
            ClusterError::Stopped { .. } | ClusterError::MetaStopped { .. } => {
                ApiError::unavailable("unavailable", message)
            }
            ClusterError::LayoutConflict { .. } => {
                ApiError::unavailable("layout_conflict", message)
            }
            ClusterError::MetaNoQuorum { .. } => {
                ApiError::unavailable("no_quorum", message).with("group", json!("metadata"))
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::REQUEST_TIMEOUT {
            // The rest of the request may still be on its way: do not read it.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// Asserts that `error` answers `status` and `code` with its own message,
/// and carries `Retry-After` exactly when the status is 503.
#[cfg(test)]
pub(crate) fn assert_maps<E: std::fmt::Display>(error: E, status: u16, code: &str)
where
    ApiError: From<E>,
{
    let message = error.to_string();
    let api = ApiError::from(error);
    assert_eq!((api.status.as_u16(), api.code), (status, code), "{message}");
    assert_eq!(api.body()["error"]["message"], message);
    let response = api.into_response();
    assert_eq!(
        response
            .headers()
            .contains_key(axum::http::header::RETRY_AFTER),
        status == 503,
        "{message}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_host::fragment::{BacklogFull, Shed};
    use ebb_host::plugin::{EngineError, PluginError, PluginInvalid};
    use ebb_host::store::StoreError;

    #[test]
    fn a_request_timeout_closes_the_connection() {
        let response = ApiError::request_timeout("stalled").into_response();
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(response.headers().get(header::CONNECTION).unwrap(), "close");
        let other = ApiError::invalid_request("bad").into_response();
        assert!(!other.headers().contains_key(header::CONNECTION));
    }

    #[test]
    fn every_node_error_maps_to_its_status_and_code() {
        let cases: Vec<(Error, u16, &str)> = vec![
            (
                Error::InvalidName(NameError::EmptyKey),
                400,
                "invalid_request",
            ),
            (
                Error::InvalidName(NameError::KeyTooLong { len: 5000 }),
                413,
                "too_large",
            ),
            (Error::ValueTooLarge { len: 2, limit: 1 }, 413, "too_large"),
            (
                Error::InvalidTtl(ebb_host::InvalidTtl::Zero),
                400,
                "invalid_request",
            ),
            (
                Error::Overloaded(Shed {
                    fragment: 1,
                    pool: "high",
                    capacity: 8,
                }),
                503,
                "overloaded",
            ),
            (
                Error::Backlog(BacklogFull {
                    fragment: 1,
                    pending_bytes: 9,
                    limit_bytes: 8,
                }),
                503,
                "overloaded",
            ),
            (
                Error::InvalidFunction(ebb_host::InvalidFunctionName {
                    what: "namespace",
                    name: "9x".into(),
                }),
                400,
                "invalid_request",
            ),
            (
                Error::Plugin(PluginError::Invalid(PluginInvalid {
                    plugin: "p".into(),
                    reason: "not wasm".into(),
                })),
                422,
                "plugin_invalid",
            ),
            (
                Error::Plugin(PluginError::Engine(EngineError::Serialize("x".into()))),
                500,
                "internal",
            ),
            (Error::ShuttingDown, 503, "shutting_down"),
            (Error::Interrupted { fragment: 2 }, 503, "interrupted"),
            (
                Error::NotDurable {
                    fragment: 2,
                    source: StoreError::Closed,
                },
                503,
                "not_durable",
            ),
            (
                Error::MemoryFull(ebb_host::node::memory::MemoryFull {
                    resident_bytes: 10,
                    write_bytes: 2,
                    limit_bytes: 11,
                }),
                507,
                "memory_full",
            ),
        ];
        for (error, status, code) in cases {
            assert_maps(error, status, code);
        }
    }
}
