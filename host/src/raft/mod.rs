//! Consensus glue on openraft (pinned in Cargo.toml; this module is the only
//! place that names it): the type configuration every Raft group shares,
//! the codec of Raft state at rest, each group's log store in the node's
//! store, and the state machine adapter over what a group replicates. See
//! docs/cluster.md.

mod codec;
mod log_store;
mod log_writer;
mod machine;
mod types;

#[cfg(test)]
mod group_tests;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

pub use codec::CorruptRaftState;
pub use log_store::{AppendDurability, LogReader, LogStore};
pub use log_writer::LogWriter;
pub use machine::{GroupMachine, SnapshotBuilder, StateMachine, encoded};
pub use types::{Command, Entry, GroupId, LogId, Membership, NodeId, Reply, TypeConfig, Vote};
