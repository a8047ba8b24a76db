//! Changing the metadata from any member: a change proposed by the
//! metadata group's leader (here or forwarded), the wait until the members
//! applied it, and the check of this member's layout against the recorded
//! one. See docs/cluster.md, "The metadata group".

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::error::ClusterError;
use super::forward::{Answer, Forward};
use super::groups::Cluster;
use super::layout::LayoutCheck;
use super::meta::{MetaCommand, MetaOutcome};
use crate::raft::NodeId;

/// Longest a metadata change may take to commit and apply on the leader
/// (compiling a module included) before it answers `no_quorum`.
pub const META_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest a change waits for the other members to apply it before it is
/// answered with those members listed as pending.
pub const SPREAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between attempts while the group has no reachable leader.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// Pause between attempts at recording this member's layout while the
/// metadata group cannot commit it.
const LAYOUT_RETRY: Duration = Duration::from_secs(1);

/// A committed metadata change and how far it spread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaChange {
    /// What applying it answered on the leader.
    pub outcome: MetaOutcome,
    /// Its entry in the metadata group's log.
    pub index: u64,
    /// Members that applied it (this one included, if it did).
    pub applied: Vec<NodeId>,
    /// Members that did not confirm within [`SPREAD_TIMEOUT`] (down, or
    /// slow to compile); they apply it when they catch up.
    pub pending: Vec<NodeId>,
}

impl Cluster {
    /// Commit `command` in the metadata group (proposed here when this
    /// member leads it, forwarded to its leader otherwise), then wait up to
    /// [`SPREAD_TIMEOUT`] until every member applied it. Fails with
    /// [`ClusterError::MetaNoQuorum`] when no leader commits it within
    /// [`META_TIMEOUT`]; a command that fails when applied is not an
    /// error here (its outcome says so).
    pub async fn change_metadata(&self, command: MetaCommand) -> Result<MetaChange, ClusterError> {
        self.serving()?;
        let (outcome, index) = self.commit_metadata(command.encode()).await?;
        let outcome = MetaOutcome::decode(&outcome).map_err(|e| ClusterError::MetaStopped {
            reason: e.to_string(),
        })?;
        let deadline = Instant::now() + SPREAD_TIMEOUT;
        let waits = self.config.peers.keys().map(|node| async move {
            let applied = if *node == self.config.node_id {
                self.meta.wait_applied(index, SPREAD_TIMEOUT).await
            } else {
                let wait_ms = SPREAD_TIMEOUT.as_millis() as u64;
                matches!(
                    self.forward(*node, &Forward::AwaitMeta { index, wait_ms }, deadline)
                        .await,
                    Ok(Answer::MetaApplied(true))
                )
            };
            (*node, applied)
        });
        let (applied, pending): (Vec<_>, Vec<_>) = futures::future::join_all(waits)
            .await
            .into_iter()
            .partition(|(_, applied)| *applied);
        Ok(MetaChange {
            outcome,
            index,
            applied: applied.into_iter().map(|(node, _)| node).collect(),
            pending: pending.into_iter().map(|(node, _)| node).collect(),
        })
    }

    /// Start proposing this member's layout to the metadata group in the
    /// background: recorded if the cluster has none, otherwise checked
    /// against the recorded one (see `cluster::layout`). While the group
    /// cannot commit it the check stays `pending` with the reason and is
    /// tried again every [`LAYOUT_RETRY`]; it ends once `agreed` or in
    /// `conflict`, or at shutdown.
    pub(crate) fn start_layout_check(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            loop {
                let Some(cluster) = weak.upgrade() else {
                    return;
                };
                let check = cluster.check_layout().await;
                let done = !matches!(check, LayoutCheck::Pending { .. });
                if let LayoutCheck::Conflict { message } = &check {
                    tracing::error!(%message, "this member refuses client requests");
                }
                *cluster.layout.lock() = check;
                drop(cluster);
                if done {
                    return;
                }
                tokio::time::sleep(LAYOUT_RETRY).await;
            }
        });
        *self.layout_task.lock() = Some(task);
    }

    /// One attempt at recording this member's layout.
    async fn check_layout(&self) -> LayoutCheck {
        let command = MetaCommand::RecordLayout {
            proposer: self.config.node_id,
            layout: self.own_layout.clone(),
        };
        let (outcome, index) = match self.commit_metadata(command.encode()).await {
            Ok(committed) => committed,
            Err(error) => {
                return LayoutCheck::Pending {
                    reason: error.to_string(),
                };
            }
        };
        // The outcome is the leader's; this member's status shows the
        // recorded layout from its own copy of the metadata, so the check
        // ends once that copy holds it too (or after SPREAD_TIMEOUT, the
        // outcome being decided either way).
        self.meta.wait_applied(index, SPREAD_TIMEOUT).await;
        match MetaOutcome::decode(&outcome) {
            Ok(MetaOutcome::LayoutRecorded { first }) => LayoutCheck::Agreed { index, first },
            Ok(MetaOutcome::Failed { code, message }) if code == "layout_conflict" => {
                LayoutCheck::Conflict { message }
            }
            Ok(other) => LayoutCheck::Pending {
                reason: format!("the metadata group answered {other:?}"),
            },
            Err(error) => LayoutCheck::Pending {
                reason: error.to_string(),
            },
        }
    }

    /// How this member's layout compares with the recorded one.
    pub fn layout_check(&self) -> LayoutCheck {
        self.layout.lock().clone()
    }

    /// Whether this member serves client requests: not while its layout
    /// conflicts with the recorded one ([`ClusterError::LayoutConflict`]).
    /// A member whose check is still pending serves.
    pub(crate) fn serving(&self) -> Result<(), ClusterError> {
        match &*self.layout.lock() {
            LayoutCheck::Conflict { message } => Err(ClusterError::LayoutConflict {
                message: message.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Propose `command` through the metadata group's leader: its outcome
    /// on the leader and its index.
    async fn commit_metadata(&self, command: Bytes) -> Result<(Bytes, u64), ClusterError> {
        let deadline = Instant::now() + META_TIMEOUT;
        let mut hint: Option<NodeId> = None;
        let mut reason = String::from("no leader known");
        loop {
            match hint.or_else(|| self.meta.leader()) {
                Some(node) if node == self.config.node_id => {
                    match self.propose_metadata_here(command.clone(), deadline).await {
                        Ok(committed) => return Ok(committed),
                        Err(error) => reason = error,
                    }
                    hint = None;
                }
                Some(node) => {
                    match self
                        .forward(node, &Forward::ProposeMeta(command.clone()), deadline)
                        .await
                    {
                        Ok(Answer::MetaCommitted { outcome, index }) => {
                            return Ok((outcome, index));
                        }
                        Ok(Answer::Failure {
                            message, leader, ..
                        }) => {
                            hint = leader.filter(|l| *l != node);
                            reason = message;
                        }
                        Ok(other) => {
                            hint = None;
                            reason = format!("node {node} answered {other:?}");
                        }
                        Err(error) => {
                            hint = None;
                            reason = error.to_string();
                        }
                    }
                }
                None => {}
            }
            if Instant::now() + RETRY_PAUSE >= deadline {
                return Err(ClusterError::MetaNoQuorum {
                    waited_ms: META_TIMEOUT.as_millis() as u64,
                    reason,
                });
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// Propose on this member, which leads the metadata group (or did when
    /// asked): the outcome and index, or why not.
    async fn propose_metadata_here(
        &self,
        command: Bytes,
        deadline: Instant,
    ) -> Result<(Bytes, u64), String> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(remaining, self.meta.propose_at(command, false)).await {
            Ok(Ok(committed)) => Ok(committed),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err("the proposal did not commit".into()),
        }
    }

    /// Serve a metadata proposal another member forwarded: proposed if
    /// this member leads the group, otherwise answered `not_leader` with
    /// the leader it knows.
    pub(super) async fn answer_propose_meta(&self, command: Bytes) -> Answer {
        if !self.meta.is_leader() {
            return Answer::Failure {
                code: "not_leader".into(),
                message: format!(
                    "node {} does not lead the metadata group",
                    self.config.node_id
                ),
                leader: self.meta.leader(),
            };
        }
        let deadline = Instant::now() + META_TIMEOUT;
        match self.propose_metadata_here(command, deadline).await {
            Ok((outcome, index)) => Answer::MetaCommitted { outcome, index },
            Err(reason) => Answer::failure("no_quorum", reason),
        }
    }

    /// Whether this member applied metadata entry `index` within `wait`.
    pub(super) async fn answer_await_meta(&self, index: u64, wait: Duration) -> Answer {
        Answer::MetaApplied(
            self.meta
                .wait_applied(index, wait.min(SPREAD_TIMEOUT))
                .await,
        )
    }
}
