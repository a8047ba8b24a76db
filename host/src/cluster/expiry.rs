//! Expiry handlers in a cluster, on the cluster's side: which fragments
//! this member leads (only their leader delivers a fragment's events),
//! settling a delivered batch through the fragment's group, so every
//! replica removes the same events from its outbox, and routing redrives
//! and discards of a table's events to each fragment's leader
//! ([`OutboxServer`](super::OutboxServer)). The node plugs these into its dispatcher
//! (`node/expiry.rs`, `node/expiry_cluster.rs`), so this layer names no
//! expiry type.

use std::sync::Arc;

use tokio::time::Instant;

use super::forward::{Answer, Forward};
use super::groups::{Cluster, ClusterError, Replica};
use super::outbox::{OutboxDone, OutboxRequest, OutboxServer};
use crate::fragment::command::Command;
use crate::fragment::settle::SettleCommand;
use crate::store::{FamilyWrite, FragmentId};

impl Cluster {
    /// Carry out outbox requests with `server` (set once, when the node
    /// that owns this cluster is built; until then they are refused as
    /// `unavailable`).
    pub fn set_outbox_server(&self, server: Arc<dyn OutboxServer>) {
        let _ = self.outboxes.set(server);
    }

    /// Have the leader of `request.fragment` carry out `request` (this
    /// member when it leads the fragment, else forwarded), within the
    /// quorum timeout: [`ClusterError::NoQuorum`] when no leader answered,
    /// the leader's refusal as [`ClusterError::Refused`]. A request whose
    /// answer was lost may have been carried out; both actions can be
    /// repeated safely (a redrive moves what is still dead, a discard
    /// deletes what is still pending).
    pub(crate) async fn on_outbox_leader(
        &self,
        request: OutboxRequest,
    ) -> Result<OutboxDone, ClusterError> {
        let fragment = request.fragment;
        let forward = Forward::Outbox(request);
        let answer = match self.replicas.get(&fragment) {
            Some(replica) if replica.group.is_leader() => {
                self.answer_outbox(replica, forward).await
            }
            _ => {
                let deadline = Instant::now() + self.config.quorum_timeout;
                self.ask_leader(fragment, &forward, deadline).await?.1
            }
        };
        match answer {
            Answer::OutboxDone(done) => Ok(done),
            Answer::Failure { code, message, .. } => Err(ClusterError::Refused { code, message }),
            other => Err(ClusterError::Refused {
                code: "unavailable".into(),
                message: format!("the leader of fragment {fragment} answered {other:?}"),
            }),
        }
    }

    /// Serve an outbox request as the leader of its fragment: once this
    /// member applied every entry committed before (a read index), so its
    /// store holds every event and dead letter earlier leaders made.
    pub(super) async fn answer_outbox(&self, replica: &Replica, request: Forward) -> Answer {
        let Forward::Outbox(request) = request else {
            return Answer::failure("invalid_request", "not an outbox request");
        };
        let Some(server) = self.outboxes.get() else {
            return Answer::failure("unavailable", "this member is starting");
        };
        match tokio::time::timeout(self.config.quorum_timeout, replica.group.read_index()).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => return Answer::failure("no_quorum", error),
            Err(_) => return Answer::failure("no_quorum", "the leader could not confirm a quorum"),
        }
        match server.serve(request).await {
            Ok(done) => Answer::OutboxDone(done),
            Err(ClusterError::Refused { code, message }) => Answer::failure(&code, message),
            Err(error) => super::groups::failure_of(&error),
        }
    }

    /// The fragments this member leads now.
    pub(crate) fn led_fragments(&self) -> Vec<FragmentId> {
        self.replicas
            .iter()
            .filter(|(_, replica)| replica.group.is_leader())
            .map(|(fragment, _)| *fragment)
            .collect()
    }

    /// Whether this member leads `fragment` and has applied every entry
    /// committed before (a read index on the leader): from then on its
    /// outbox holds every event earlier leaders converted and not settled.
    pub(crate) async fn caught_up_as_leader(&self, fragment: FragmentId) -> bool {
        match self.replicas.get(&fragment) {
            Some(replica) if replica.group.is_leader() => replica.group.read_index().await.is_ok(),
            _ => false,
        }
    }

    /// Propose the writes that settle delivered events of `fragment`, as
    /// its leader: committed and applied here before this returns. Refused
    /// when this member does not lead the fragment (the events stay in the
    /// outbox, and its leader delivers them again).
    pub(crate) async fn settle(
        &self,
        fragment: FragmentId,
        writes: Vec<FamilyWrite>,
    ) -> Result<(), String> {
        if !SettleCommand::is_settlement(&writes) {
            return Err("only outbox and dead letter writes settle events".into());
        }
        let replica = self
            .replicas
            .get(&fragment)
            .ok_or_else(|| format!("fragment {fragment} has no replica here"))?;
        if !replica.group.is_leader() {
            return Err(format!("this member no longer leads fragment {fragment}"));
        }
        let command = Command::Settle(SettleCommand { writes }).encode();
        let timeout = self.config.quorum_timeout;
        match tokio::time::timeout(timeout, replica.group.propose(command.into(), false)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!(
                "the settlement of fragment {fragment} did not commit within {} ms",
                timeout.as_millis()
            )),
        }
    }
}
