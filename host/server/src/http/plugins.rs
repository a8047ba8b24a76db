//! Plugin routes: upload (validate, compile, store a new version), list,
//! describe and delete.

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use ebb_proto::plugin::v1 as abi;
use serde_json::{Value, json};

use super::AppState;
use super::body::{no_params, path, read_limited};
use super::error::ApiError;
use ebb_host::PluginChange;
use ebb_host::plugin::{PluginError, PluginVersion};

impl From<PluginError> for ApiError {
    fn from(error: PluginError) -> Self {
        let message = error.to_string();
        match error {
            PluginError::Invalid(_) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "plugin_invalid", message)
            }
            PluginError::NotFound(_) => ApiError::not_found(message),
            PluginError::Limit(_) | PluginError::InUse(_) | PluginError::Replicated => {
                ApiError::new(StatusCode::CONFLICT, "conflict", message)
            }
            PluginError::Store(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_durable", message)
            }
            PluginError::Engine(_) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
            }
        }
    }
}

/// A declared function kind as the API and the CLI print it.
pub fn kind_name(kind: i32) -> &'static str {
    match abi::FunctionKind::try_from(kind) {
        Ok(abi::FunctionKind::Scalar) => "scalar",
        Ok(abi::FunctionKind::Aggregate) => "aggregate",
        Ok(abi::FunctionKind::ExpiryHandler) => "expiry_handler",
        Ok(abi::FunctionKind::ChangeHandler) => "change_handler",
        _ => "unspecified",
    }
}

fn describe(version: &PluginVersion) -> Value {
    let functions: Vec<Value> = version
        .manifest
        .functions
        .iter()
        .map(|f| {
            json!({
                "name": f.name,
                "kind": kind_name(f.kind),
                "arg_count": f.arg_count,
                "description": f.description,
            })
        })
        .collect();
    json!({
        "name": version.name,
        "version": version.info.version,
        "sha256": version.info.sha256,
        "size": version.info.size,
        "created_ms": version.info.created_ms,
        "manifest": {
            "name": version.manifest.name,
            "version": version.manifest.version,
            "abi_version": version.manifest.abi_version,
        },
        "functions": functions,
    })
}

/// `PUT /v1/plugins/{name}`: the body is a wasm core module. Answers the
/// version with `"unchanged": true` when the bytes equal the current
/// version's (nothing stored).
pub async fn put_plugin(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let name = path(target)?;
    no_params(params)?;
    let limit = app.node.plugins().runtime().limits().max_module_bytes;
    let bytes = read_limited(
        &headers,
        body,
        limit,
        "the module",
        "plugin max_module_bytes",
    )
    .await?;
    let change = app.node.put_plugin(&name, bytes).await?;
    let version = change
        .version
        .as_ref()
        .ok_or_else(|| ApiError::internal("an install answered no version"))?;
    let mut out = describe(version);
    out["unchanged"] = json!(change.unchanged);
    add_members(&mut out, &change);
    Ok(Json(out))
}

/// In a cluster: which members applied the change, and which had not
/// confirmed it yet.
fn add_members(out: &mut Value, change: &PluginChange) {
    if let Some((applied, pending)) = &change.members {
        out["cluster"] = json!({ "applied": applied, "pending": pending });
    }
}

/// `GET /v1/plugins`.
pub async fn list_plugins(
    State(app): State<AppState>,
    params: RawQuery,
) -> Result<Json<Value>, ApiError> {
    no_params(params)?;
    let plugins: Vec<Value> = app
        .node
        .plugins()
        .list()
        .iter()
        .map(|v| describe(v))
        .collect();
    Ok(Json(json!({ "plugins": plugins })))
}

/// `GET /v1/plugins/{name}`: the current version, its functions and every version.
pub async fn get_plugin(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: RawQuery,
) -> Result<Json<Value>, ApiError> {
    let name = path(target)?;
    no_params(params)?;
    let registry = app.node.plugins();
    let version = registry
        .get(&name)
        .ok_or_else(|| ApiError::not_found(format!("plugin {name} not found")))?;
    let mut out = describe(&version);
    out["versions"] = json!(registry.history(&name));
    out["loaded_from_artifact"] = json!(version.from_artifact);
    out["code"] = json!(version.tier().as_str());
    out["idle_instances"] = json!(version.idle_instances());
    Ok(Json(out))
}

/// `DELETE /v1/plugins/{name}`: refused with 409 while an expiry binding uses it.
pub async fn delete_plugin(
    State(app): State<AppState>,
    target: Result<Path<String>, PathRejection>,
    params: RawQuery,
) -> Result<Json<Value>, ApiError> {
    let name = path(target)?;
    no_params(params)?;
    let change = app.node.delete_plugin(&name).await?;
    let mut out = json!({ "deleted": name.to_ascii_lowercase() });
    add_members(&mut out, &change);
    Ok(Json(out))
}
