//! Administration routes: `POST /v1/admin/backup`.

use axum::Json;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::body::{no_params, read_limited};
use super::error::ApiError;
use ebb_host::BackupError;

/// Largest body of the admin routes.
const MAX_BODY_BYTES: usize = 64 * 1024;

impl From<BackupError> for ApiError {
    fn from(error: BackupError) -> Self {
        let message = error.to_string();
        match error {
            BackupError::InvalidDir { path, .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_backup_dir", message)
                    .with("dir", json!(path))
            }
            BackupError::ShuttingDown => ApiError::unavailable("shutting_down", message),
            BackupError::Flush { .. } => ApiError::unavailable("not_durable", message),
            BackupError::Store { .. } | BackupError::Io { .. } => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "backup_failed", message)
            }
        }
    }
}

/// Body of `POST /v1/admin/backup`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackupRequest {
    /// Absolute path on the server: missing (its parent must exist) or an
    /// empty directory.
    dir: String,
}

/// `POST /v1/admin/backup` `{"dir": "/abs/path"}`: an online, consistent
/// copy of the node; answers what was written.
pub async fn backup(
    State(app): State<AppState>,
    params: RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    no_params(params)?;
    let bytes = read_limited(
        &headers,
        body,
        MAX_BODY_BYTES,
        "the request body",
        "64 KiB for admin routes",
    )
    .await?;
    let request: BackupRequest = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::invalid_request(format!(
            "bad request body: {e}; send {{\"dir\": \"/absolute/path\"}}"
        ))
    })?;
    let report = app.node.backup(request.dir).await?;
    Ok(Json(json!({
        "dir": report.dir.display().to_string(),
        "bytes": report.bytes,
        "files": report.files,
        "duration_ms": report.duration.as_millis() as u64,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::error::assert_maps;
    use ebb_host::store::StoreError;

    #[test]
    fn every_backup_error_maps_to_its_status_and_code() {
        let cases: Vec<(BackupError, u16, &str)> = vec![
            (
                BackupError::InvalidDir {
                    path: "/x".into(),
                    reason: "is not empty".into(),
                },
                400,
                "invalid_backup_dir",
            ),
            (BackupError::ShuttingDown, 503, "shutting_down"),
            (
                BackupError::Flush {
                    fragment: 1,
                    source: StoreError::Closed,
                },
                503,
                "not_durable",
            ),
            (
                BackupError::Store {
                    path: "/x".into(),
                    source: StoreError::Unsupported {
                        operation: "checkpoints",
                    },
                },
                500,
                "backup_failed",
            ),
            (
                BackupError::Io {
                    path: "/x".into(),
                    source: std::io::Error::other("disk full"),
                },
                500,
                "backup_failed",
            ),
        ];
        for (error, status, code) in cases {
            assert_maps(error, status, code);
        }
    }
}
