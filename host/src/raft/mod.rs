//! Consensus glue on openraft (pinned in Cargo.toml; this module is the only
//! place that names it): the type configuration every Raft group shares,
//! the codec of Raft state at rest and of Raft messages on the wire, each
//! group's log store in the node's store, the state machine adapter over
//! what a group replicates, the network over the server's transport, and
//! a group as the rest of the crate drives it. See docs/cluster.md.

mod codec;
mod group;
mod log_store;
mod log_writer;
mod machine;
mod network;
mod types;
mod wire;

#[cfg(test)]
mod group_tests;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

pub use codec::CorruptRaftState;
pub use group::{Group, GroupError, GroupStatus, GroupTiming, LogRetention};
pub use log_store::{AppendDurability, LogReader, LogStore};
pub use log_writer::LogWriter;
pub use machine::{GroupMachine, Position, SnapshotBuilder, SnapshotData, StateMachine, encoded};
pub use network::{Service, Transport, TransportError};
pub use types::{
    Command, Entry, GroupId, LogId, Membership, NodeId, Reply, StoredMembership, TypeConfig, Vote,
};
pub use wire::{RaftRequest, RaftResponse};

/// The index of the applied position `group` holds in `store`, if any.
#[cfg(test)]
pub(crate) async fn applied_index_at_rest(
    group: GroupId,
    store: std::sync::Arc<dyn crate::store::KvStore>,
) -> Option<u64> {
    log_store::read_position(group, store)
        .await
        .expect("a readable position")
        .map(|(id, _)| id.index)
}
