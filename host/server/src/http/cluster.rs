//! `GET /v1/cluster`: the members and, per fragment, its replicas and its
//! group as the answering node sees it.

use axum::Json;
use axum::extract::{RawQuery, State};
use serde_json::{Value, json};

use super::AppState;
use super::body::no_params;
use super::error::ApiError;
use ebb_host::cluster::{ClusterStatus, LayoutCheck};
use ebb_host::raft::GroupStatus;

/// `GET /v1/cluster`. On a single node: `{"mode": "single"}`.
pub async fn status(
    State(app): State<AppState>,
    params: RawQuery,
) -> Result<Json<Value>, ApiError> {
    no_params(params)?;
    Ok(Json(match app.node.cluster_status().await {
        Some(status) => to_json(&status),
        None => json!({ "mode": "single" }),
    }))
}

/// The JSON form of a cluster status (the contract of `GET /v1/cluster`).
pub fn to_json(status: &ClusterStatus) -> Value {
    let members: Vec<Value> = status
        .members
        .iter()
        .map(|m| json!({ "id": m.id, "addr": m.addr, "state": m.state }))
        .collect();
    let fragments: Vec<Value> = status
        .fragments
        .iter()
        .map(|f| {
            let mut fragment = json!({
                "fragment": f.fragment,
                "replicas": f.replicas,
                "preferred_leader": f.preferred_leader,
            });
            if let Some(group) = &f.group {
                add_group(&mut fragment, group);
            }
            fragment
        })
        .collect();
    let mut metadata = json!({ "replicas": status.metadata.voters });
    add_group(&mut metadata, &status.metadata);
    json!({
        "mode": "cluster",
        "node_id": status.node_id,
        "replication": status.replication,
        "members": members,
        "fragments": fragments,
        "metadata": metadata,
        "pinned_scans": status.pinned_scans,
        "layout": layout_json(status),
    })
}

/// This member's layout check and the layout the cluster recorded.
fn layout_json(status: &ClusterStatus) -> Value {
    let mut layout = json!({ "state": status.layout.state() });
    match &status.layout {
        LayoutCheck::Pending { reason } => layout["reason"] = json!(reason),
        LayoutCheck::Agreed { index, first } => {
            layout["index"] = json!(index);
            layout["recorded_here"] = json!(first);
        }
        LayoutCheck::Conflict { message } => layout["message"] = json!(message),
    }
    if let Some(recorded) = &status.recorded_layout {
        layout["recorded"] = json!({
            "members": recorded.members,
            "replication": recorded.replication,
            "fragments": recorded.fragments,
        });
    }
    layout
}

/// A group's state as this member sees it, added to `out`.
fn add_group(out: &mut Value, group: &GroupStatus) {
    let lag: serde_json::Map<String, Value> = group
        .lag
        .iter()
        .map(|(node, lag)| (node.to_string(), json!(lag)))
        .collect();
    out["leader"] = json!(group.leader);
    out["term"] = json!(group.term);
    out["last_log_index"] = json!(group.last_log_index);
    out["commit_index"] = json!(group.committed);
    out["applied_index"] = json!(group.applied);
    out["snapshot_index"] = json!(group.snapshot);
    out["purged_index"] = json!(group.purged);
    out["voters"] = json!(group.voters);
    out["lag"] = Value::Object(lag);
}
