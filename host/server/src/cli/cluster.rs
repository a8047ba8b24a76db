//! `ebb cluster status`: what `GET /v1/cluster` answers, as a table.

use serde_json::Value;

use super::client::{Client, ClientError};

/// Subcommands of `ebb cluster`.
#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// Members and, per fragment, its replicas (the preferred leader
    /// marked *), leader, term, commit and applied index and the
    /// followers' lag, as the server sees them.
    Status,
}

/// `GET /v1/cluster`.
pub fn status(client: &Client) -> Result<Value, ClientError> {
    client.send("GET", "/v1/cluster", None)?.json()
}

/// The human form of a status.
pub fn print_status(status: &Value) {
    if status["mode"] == "single" {
        println!("single node (no cluster flags)");
        return;
    }
    println!(
        "node {} of a cluster, replication {}",
        status["node_id"], status["replication"]
    );
    let layout = &status["layout"];
    match layout["state"].as_str() {
        Some("agreed") => println!("layout: agreed with the cluster's"),
        Some("conflict") => println!(
            "layout: CONFLICT, this member refuses client requests: {}",
            layout["message"].as_str().unwrap_or("?")
        ),
        Some(state) => println!(
            "layout: {state} ({})",
            layout["reason"].as_str().unwrap_or("")
        ),
        None => {}
    }
    println!("members:");
    for member in status["members"].as_array().into_iter().flatten() {
        println!(
            "  {:>4}  {:<22} {}",
            member["id"],
            member["addr"].as_str().unwrap_or("?"),
            member["state"].as_str().unwrap_or("?")
        );
    }
    println!(
        "{:>8}  {:<12} {:>6} {:>6} {:>10} {:>10} {:>10}  lag",
        "fragment", "replicas", "leader", "term", "commit", "applied", "log held"
    );
    for fragment in status["fragments"].as_array().into_iter().flatten() {
        print_group(&fragment["fragment"].to_string(), fragment);
    }
    print_group("metadata", &status["metadata"]);
    println!("(* marks a fragment's preferred leader)");
}

/// One row of the table: a group's replicas (its preferred leader marked
/// `*`), leader, term, commit and applied index, the entries this member's
/// log holds, and the lag.
fn print_group(name: &str, group: &Value) {
    let preferred = &group["preferred_leader"];
    let replicas: Vec<String> = group["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|id| {
            if id == preferred {
                format!("{id}*")
            } else {
                id.to_string()
            }
        })
        .collect();
    let number = |key: &str| match &group[key] {
        Value::Null => "-".to_string(),
        value => value.to_string(),
    };
    let lag: Vec<String> = group["lag"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(node, lag)| {
            format!(
                "{node}:{}",
                if lag.is_null() {
                    "?".into()
                } else {
                    lag.to_string()
                }
            )
        })
        .collect();
    // Entries this member's log holds: after the last purged one.
    let held = match (
        group["last_log_index"].as_u64(),
        group["purged_index"].as_u64(),
    ) {
        (Some(last), Some(purged)) => last.saturating_sub(purged).to_string(),
        _ => "-".to_string(),
    };
    println!(
        "{:>8}  {:<12} {:>6} {:>6} {:>10} {:>10} {:>10}  {}",
        name,
        replicas.join(","),
        number("leader"),
        number("term"),
        number("commit_index"),
        number("applied_index"),
        held,
        lag.join(" ")
    );
}
