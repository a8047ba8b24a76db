//! `ebb backup`: ask the server for an online backup into a directory on
//! the server's machine.

use std::path::Path;

use serde_json::{Value, json};

use super::client::{Client, ClientError};

/// The directory as the server should see it: a relative `dir` is made
/// absolute against this process's working directory (right when the CLI
/// runs on the server's machine; give an absolute path otherwise).
pub fn absolute(dir: &Path) -> Result<String, ClientError> {
    let absolute = std::path::absolute(dir)
        .map_err(|e| ClientError::Local(format!("cannot resolve {}: {e}", dir.display())))?;
    absolute
        .to_str()
        .map(str::to_string)
        .ok_or_else(|| ClientError::Local(format!("{} is not UTF-8", absolute.display())))
}

/// `POST /v1/admin/backup` for `dir`; the server's report.
pub fn backup(client: &Client, dir: &Path) -> Result<Value, ClientError> {
    let body = json!({ "dir": absolute(dir)? });
    client
        .send(
            "POST",
            "/v1/admin/backup",
            Some((body.to_string().as_bytes(), "application/json")),
        )?
        .json()
}
