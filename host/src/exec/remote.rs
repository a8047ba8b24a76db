//! Partitions held on other members (in a cluster): opening a pinned scan
//! on a fragment's leader, fetching its pages, and the page protocol's
//! codec (pages and page errors to and from `ebb.query.v1`).
//!
//! A remote scan behaves as a local one: the leader pins one snapshot when
//! the scan opens (after a read index), every page of the request reads it,
//! and its revision and incarnation go into the cursor. A continuation
//! served by another leader, or after a write, sees another incarnation or
//! revision, so a guarded continuation is refused (409) rather than
//! silently returning a different result.

use std::collections::HashMap;
use std::sync::Arc;

use ebb_proto::query::v1 as pb;
use ebb_query::{FunctionError, Value};
use tokio::time::Instant;

use super::error::{self, QueryError};
use super::page::{OutRow, PageBudget, PageOutput};
use crate::cluster::{Cluster, ClusterError};
use crate::codec::{from_proto, to_proto};
use crate::raft::NodeId;

/// A partition's scan pinned on the member that led its fragment when the
/// query opened it. Dropped before its last page (a `LIMIT` met, an error,
/// a response page that filled), it closes the scan there, in a task of
/// its own, so the member drops it now rather than when it expires.
pub(crate) struct RemoteScan {
    cluster: Arc<Cluster>,
    /// The member that pinned the scan.
    node: NodeId,
    /// The pinned scan's id on that member.
    scan: u64,
    fragment: u32,
    /// Whether the member still holds it (no last page yet).
    open: bool,
}

impl RemoteScan {
    /// The member sent the last page and dropped the scan with it.
    pub(crate) fn finished(&mut self) {
        self.open = false;
    }

    /// The next page, after `resume_after`. The future borrows nothing.
    pub(crate) fn next_page(
        &self,
        resume_after: Option<Arc<str>>,
        budget: PageBudget,
        deadline: Instant,
    ) -> impl Future<Output = Result<PageOutput, QueryError>> + Send + use<> {
        let (cluster, node, fragment) = (self.cluster.clone(), self.node, self.fragment);
        let request = pb::PageRequest {
            fragment,
            scan: self.scan,
            resume_after: resume_after.map(|key| key.to_string()),
            visit_budget: budget.visit.clamp(1, u32::MAX as usize) as u32,
            max_bytes: budget.max_bytes as u64,
            ..Default::default()
        };
        async move {
            let answer = cluster.remote_page(node, request, deadline).await?;
            if let Some(failure) = answer.error {
                return Err(error_from_proto(fragment, node, failure));
            }
            output_from_proto(answer).map_err(|reason| {
                QueryError::Cluster(ClusterError::Refused {
                    code: "internal".into(),
                    message: format!("node {node} sent a malformed page: {reason}"),
                })
            })
        }
    }
}

impl Drop for RemoteScan {
    fn drop(&mut self) {
        // Outside a runtime, the scan expires on its member instead.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.open {
            return;
        }
        let (cluster, node, fragment, scan) =
            (self.cluster.clone(), self.node, self.fragment, self.scan);
        runtime.spawn(async move { cluster.close_remote_scan(node, fragment, scan).await });
    }
}

/// A remote partition as opened: `remote` is `None` when the fragment
/// holds no record of the table.
pub(crate) struct Opened {
    pub remote: Option<RemoteScan>,
    pub revision: u64,
    pub incarnation: u64,
    pub visible: usize,
}

/// What a query sends to open its remote scans.
pub(crate) struct OpenRequest<'a> {
    pub cluster: &'a Arc<Cluster>,
    /// The query's cursor template: its SQL, parameters and plugin versions.
    pub template: &'a pb::Cursor,
    pub table: &'a str,
    pub snapshot_ms: u64,
    pub deadline: Instant,
}

/// Open the scan of `fragment` on its leader.
pub(crate) async fn open(request: &OpenRequest<'_>, fragment: u32) -> Result<Opened, QueryError> {
    let page = pb::PageRequest {
        sql: request.template.sql.clone(),
        params: request.template.params.clone(),
        table: request.table.to_string(),
        fragment,
        snapshot_ms: request.snapshot_ms,
        plugins: request.template.plugins.clone(),
        ..Default::default()
    };
    let (node, answer) = request
        .cluster
        .open_remote_scan(page, request.deadline)
        .await?;
    if let Some(failure) = answer.error {
        return Err(error_from_proto(fragment, node, failure));
    }
    Ok(Opened {
        remote: (answer.scan != 0).then(|| RemoteScan {
            cluster: request.cluster.clone(),
            node,
            scan: answer.scan,
            fragment,
            open: true,
        }),
        revision: answer.revision,
        incarnation: answer.incarnation,
        visible: answer.visible as usize,
    })
}

fn values_to_proto(values: &[Value]) -> Vec<ebb_proto::plugin::v1::Value> {
    values.iter().map(to_proto).collect()
}

fn values_from_proto(values: &[ebb_proto::plugin::v1::Value]) -> Result<Vec<Value>, String> {
    values
        .iter()
        .map(|v| from_proto(v).map_err(|e| e.to_string()))
        .collect()
}

/// A page as the protocol sends it.
pub(crate) fn output_to_proto(output: PageOutput) -> pb::PageResponse {
    let mut response = pb::PageResponse {
        resume_after: output.resume_after.map(|key| key.to_string()),
        done: output.done,
        visited: output.visited.min(u32::MAX as usize) as u32,
        ..Default::default()
    };
    for row in output.rows {
        response.row_keys.push(row.key.to_string());
        response.rows.push(pb::Row {
            values: values_to_proto(&row.values),
            sort: values_to_proto(&row.sort),
        });
    }
    for (keys, states) in output.groups {
        response.groups.push(pb::Group {
            keys: values_to_proto(&keys),
            states: states
                .iter()
                .map(|state| pb::AggState {
                    values: values_to_proto(state),
                })
                .collect(),
        });
    }
    response
}

/// A page the protocol sent; malformed values are refused.
fn output_from_proto(response: pb::PageResponse) -> Result<PageOutput, String> {
    if response.rows.len() != response.row_keys.len() {
        return Err(format!(
            "{} rows with {} keys",
            response.rows.len(),
            response.row_keys.len()
        ));
    }
    let rows = response
        .rows
        .iter()
        .zip(response.row_keys)
        .map(|(row, key)| {
            Ok(OutRow {
                key: Arc::from(key),
                values: values_from_proto(&row.values)?,
                sort: values_from_proto(&row.sort)?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut groups = HashMap::with_capacity(response.groups.len());
    for group in &response.groups {
        let states = group
            .states
            .iter()
            .map(|state| values_from_proto(&state.values))
            .collect::<Result<Vec<_>, String>>()?;
        groups.insert(values_from_proto(&group.keys)?, states);
    }
    Ok(PageOutput {
        rows,
        groups,
        resume_after: response.resume_after.map(Arc::from),
        done: response.done,
        visited: response.visited as usize,
    })
}

/// A query error of a page, as the protocol sends it. Only what a page or
/// an open can fail with is typed; anything else travels as `INTERNAL`
/// with its message.
pub(crate) fn error_to_proto(error: &QueryError) -> pb::PageError {
    use pb::page_error::Kind;
    let mut failure = pb::PageError {
        message: error.to_string(),
        ..Default::default()
    };
    let kind = match error {
        QueryError::Function(f) => {
            failure.message = f.message.clone();
            failure.function = f.function.clone();
            failure.plugin = f.plugin;
            failure.host = f.host;
            Kind::Function
        }
        QueryError::Budget { budget, limit, .. } if *budget == "max_page_bytes" => {
            failure.limit = *limit;
            Kind::PageBytes
        }
        QueryError::PluginChanged { plugin, .. } => {
            failure.function = plugin.clone();
            Kind::PluginChanged
        }
        QueryError::Overloaded(_) => Kind::Overloaded,
        _ => Kind::Internal,
    };
    failure.kind = kind as i32;
    failure
}

/// The query error a member's page failure stands for.
fn error_from_proto(fragment: u32, node: NodeId, failure: pb::PageError) -> QueryError {
    use pb::page_error::Kind;
    match Kind::try_from(failure.kind).unwrap_or(Kind::Internal) {
        Kind::Function => QueryError::Function(FunctionError {
            function: failure.function,
            message: failure.message,
            plugin: failure.plugin,
            host: failure.host,
        }),
        Kind::PageBytes => error::page(ebb_query::EvalError::OverBudget(ebb_query::OverBudget {
            limit: failure.limit as usize,
            wanted: failure.limit as usize,
        })),
        Kind::PluginChanged => QueryError::PluginChanged {
            plugin: failure.function,
            message: failure.message,
        },
        Kind::Overloaded => QueryError::Overloaded(failure.message),
        Kind::ScanGone => QueryError::Cluster(ClusterError::Refused {
            code: "unavailable".into(),
            message: format!(
                "node {node} no longer holds this query's scan of fragment {fragment} ({}); rerun the query",
                failure.message
            ),
        }),
        Kind::Internal | Kind::Unspecified => QueryError::Internal(format!(
            "node {node} failed a page of fragment {fragment}: {}",
            failure.message
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_round_trip_through_the_protocol() {
        let mut groups = HashMap::new();
        groups.insert(
            vec![Value::text("a"), Value::Null],
            vec![
                vec![Value::Int(3)],
                vec![Value::Float(1.5), Value::Bool(true)],
            ],
        );
        let output = PageOutput {
            rows: vec![OutRow {
                key: Arc::from("k1"),
                values: vec![Value::Bytes(bytes::Bytes::from_static(b"\0v"))],
                sort: vec![Value::Int(-7)],
            }],
            groups,
            resume_after: Some(Arc::from("k1")),
            done: false,
            visited: 12,
        };
        let (row, groups) = (output.rows[0].clone(), output.groups.clone());
        let back = output_from_proto(output_to_proto(output)).unwrap();
        assert_eq!(back.rows.len(), 1);
        assert_eq!(&*back.rows[0].key, "k1");
        assert_eq!(back.rows[0].values, row.values);
        assert_eq!(back.rows[0].sort, row.sort);
        assert_eq!(back.groups, groups);
        assert_eq!(back.resume_after.as_deref(), Some("k1"));
        assert_eq!((back.done, back.visited), (false, 12));
    }

    #[test]
    fn a_page_with_rows_and_keys_of_different_counts_is_refused() {
        let response = pb::PageResponse {
            row_keys: vec!["a".into(), "b".into()],
            rows: vec![pb::Row::default()],
            ..Default::default()
        };
        assert!(output_from_proto(response).is_err());
    }

    #[test]
    fn page_errors_keep_their_kind_and_details() {
        let function = QueryError::Function(FunctionError {
            function: "json.get".into(),
            message: "trapped".into(),
            plugin: true,
            host: false,
        });
        let QueryError::Function(back) = error_from_proto(2, 3, error_to_proto(&function)) else {
            panic!("a function error");
        };
        assert_eq!(
            (
                back.function.as_str(),
                back.message.as_str(),
                back.plugin,
                back.host
            ),
            ("json.get", "trapped", true, false)
        );
        let bytes = error::page(ebb_query::EvalError::OverBudget(ebb_query::OverBudget {
            limit: 1024,
            wanted: 4096,
        }));
        assert!(matches!(
            error_from_proto(0, 1, error_to_proto(&bytes)),
            QueryError::Budget {
                budget: "max_page_bytes",
                limit: 1024,
                ..
            }
        ));
        let changed = QueryError::PluginChanged {
            plugin: "stats".into(),
            message: "replaced".into(),
        };
        assert!(matches!(
            error_from_proto(0, 1, error_to_proto(&changed)),
            QueryError::PluginChanged { plugin, .. } if plugin == "stats"
        ));
        assert!(matches!(
            error_from_proto(0, 1, error_to_proto(&QueryError::Overloaded("full".into()))),
            QueryError::Overloaded(_)
        ));
        assert!(matches!(
            error_from_proto(0, 1, error_to_proto(&QueryError::Internal("boom".into()))),
            QueryError::Internal(m) if m.contains("boom")
        ));
    }
}
