//! Expiry handlers in a cluster, on the cluster's side: which fragments
//! this member leads (only their leader delivers a fragment's events), and
//! settling a delivered batch through the fragment's group, so every
//! replica removes the same events from its outbox. The node plugs these
//! into its dispatcher (`node/expiry.rs`), so this layer names no expiry
//! type.

use super::groups::Cluster;
use crate::fragment::command::Command;
use crate::fragment::settle::SettleCommand;
use crate::store::{FamilyWrite, FragmentId};

impl Cluster {
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
