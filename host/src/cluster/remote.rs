//! Reads of fragments a member holds no replica of: point reads and SQL
//! pages asked of the fragment's leader (found through its replicas'
//! `not_leader` answers), continuing a scan on the member that pinned it,
//! and the answering member's use of its executor ([`PageServer`]).
//!
//! The page protocol is `ebb.query.v1`'s `PageRequest` and `PageResponse`;
//! this file only routes them. Opening needs the leader (after a read index,
//! so the pinned snapshot is linearizable); a continuation goes to the
//! member holding the pinned scan and nowhere else (another replica's
//! snapshot could differ), so it fails instead of retrying elsewhere.

use std::sync::Arc;

use bytes::Bytes;
use ebb_proto::query::v1 as query;
use tokio::time::Instant;

use super::forward::{Answer, Forward, PageServer};
use super::groups::{Cluster, ClusterError, RETRY_PAUSE, Replica, asks_elsewhere, failure_of};
use crate::names::TableName;
use crate::raft::NodeId;
use crate::record::Version;
use crate::store::FragmentId;

impl Cluster {
    /// Serve other members' pages with `server` (set once, when the node
    /// that owns this cluster is built; until then pages are refused as
    /// `unavailable`).
    pub fn set_page_server(&self, server: Arc<dyn PageServer>) {
        let _ = self.pages.set(server);
    }

    /// Ask the leader of `fragment` (held elsewhere): its replicas in
    /// placement order, then the leader each `not_leader` answer names,
    /// until an answer that is not "ask elsewhere" comes, before the quorum
    /// timeout or `deadline`. The member that answered and its answer;
    /// [`ClusterError::NoQuorum`] when none did in time, the leader's
    /// refusal as [`ClusterError::Refused`].
    pub(super) async fn ask_leader(
        &self,
        fragment: FragmentId,
        request: &Forward,
        deadline: Instant,
    ) -> Result<(NodeId, Answer), ClusterError> {
        let deadline = deadline.min(Instant::now() + self.config.quorum_timeout);
        let mut target = Some(self.preferred[fragment as usize]);
        let mut reason = String::from("no replica answered");
        while let Some(node) = target {
            match self.forward(node, request, deadline).await {
                Ok(Answer::Failure {
                    code,
                    message,
                    leader,
                }) if asks_elsewhere(&code) => {
                    target = self.after(fragment, node, leader);
                    reason = message;
                }
                Ok(Answer::Failure { code, message, .. }) => {
                    return Err(ClusterError::Refused { code, message });
                }
                Ok(answer) => return Ok((node, answer)),
                Err(error) => {
                    target = self.next_replica(fragment, node);
                    reason = error.to_string();
                }
            }
            if Instant::now() + RETRY_PAUSE >= deadline {
                break;
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
        Err(self.no_quorum(fragment, reason))
    }

    /// A linearizable read of `key` of a fragment this node holds no
    /// replica of, answered by the fragment's leader. `None`: nothing
    /// visible.
    pub(crate) async fn get_remote(
        &self,
        fragment: FragmentId,
        table: &TableName,
        key: &Arc<str>,
    ) -> Result<Option<(Bytes, Version, Option<u64>)>, ClusterError> {
        self.serving()?;
        let request = Forward::Get {
            fragment,
            table: table.clone(),
            key: key.clone(),
        };
        match self
            .ask_leader(
                fragment,
                &request,
                Instant::now() + self.config.quorum_timeout,
            )
            .await?
        {
            (
                _,
                Answer::Found {
                    value,
                    version,
                    expires_at_ms,
                },
            ) => Ok(Some((value, version, expires_at_ms))),
            (_, Answer::NotFound) => Ok(None),
            (node, other) => Err(unexpected(node, &other)),
        }
    }

    /// Open a scan of `request.fragment` (held elsewhere) on its leader:
    /// the member that pinned it and its answer.
    pub(crate) async fn open_remote_scan(
        &self,
        request: query::PageRequest,
        deadline: Instant,
    ) -> Result<(NodeId, query::PageResponse), ClusterError> {
        self.serving()?;
        let fragment = request.fragment;
        let request = Forward::Page(Box::new(request));
        match self.ask_leader(fragment, &request, deadline).await? {
            (node, Answer::Page(page)) => Ok((node, *page)),
            (node, other) => Err(unexpected(node, &other)),
        }
    }

    /// The next page of the scan `node` pinned. A member that does not
    /// answer fails the query (`unavailable`: rerun it): no other member
    /// holds that snapshot.
    pub(crate) async fn remote_page(
        &self,
        node: NodeId,
        request: query::PageRequest,
        deadline: Instant,
    ) -> Result<query::PageResponse, ClusterError> {
        let fragment = request.fragment;
        let unavailable = |reason: String| ClusterError::Refused {
            code: "unavailable".into(),
            message: format!(
                "node {node}, which holds this query's scan of fragment {fragment}, {reason}; rerun the query"
            ),
        };
        match self
            .forward(node, &Forward::Page(Box::new(request)), deadline)
            .await
        {
            Ok(Answer::Page(page)) => Ok(*page),
            Ok(Answer::Failure { code, message, .. }) if code == "unavailable" => {
                Err(unavailable(format!("could not serve it ({message})")))
            }
            Ok(Answer::Failure { code, message, .. }) => {
                Err(ClusterError::Refused { code, message })
            }
            Ok(other) => Err(unavailable(format!("answered {other:?}"))),
            Err(error) => Err(unavailable(format!("did not answer ({error})"))),
        }
    }

    /// Tell `node` that the scan it pinned is no longer needed (a query
    /// that ended before its last page). Best effort: a close that does not
    /// arrive leaves the scan to expire there.
    pub(crate) async fn close_remote_scan(&self, node: NodeId, fragment: FragmentId, scan: u64) {
        let request = Forward::Page(Box::new(query::PageRequest {
            fragment,
            scan,
            visit_budget: 0,
            ..Default::default()
        }));
        let deadline = Instant::now() + super::groups::FORWARD_TIMEOUT;
        if let Err(error) = self.forward(node, &request, deadline).await {
            tracing::debug!(node, fragment, %error, "a pinned scan's close did not arrive; it expires there");
        }
    }

    /// Open a scan on this member, which leads the fragment: a read index
    /// first, so the snapshot the executor pins holds every write
    /// acknowledged before the request.
    pub(super) async fn answer_open(
        &self,
        replica: &Replica,
        request: query::PageRequest,
    ) -> Answer {
        let fragment = request.fragment;
        match tokio::time::timeout(self.config.quorum_timeout, replica.group.read_index()).await {
            Ok(Ok(_)) => self.answer_page(request).await,
            Ok(Err(error)) => {
                Answer::failure("no_quorum", self.no_quorum(fragment, error.to_string()))
            }
            Err(_) => Answer::failure(
                "no_quorum",
                self.no_quorum(fragment, "the leader could not confirm a quorum".into()),
            ),
        }
    }

    /// Run a page request through the executor.
    pub(super) async fn answer_page(&self, request: query::PageRequest) -> Answer {
        let Some(server) = self.pages.get() else {
            return Answer::failure(
                "unavailable",
                format!("node {} is still starting", self.config.node_id),
            );
        };
        match server.serve(request).await {
            Ok(page) => Answer::Page(Box::new(page)),
            Err(error) => failure_of(&error),
        }
    }
}

/// A member answered with something the request cannot get.
fn unexpected(node: NodeId, answer: &Answer) -> ClusterError {
    ClusterError::Refused {
        code: "internal".into(),
        message: format!("node {node} answered {answer:?}"),
    }
}
