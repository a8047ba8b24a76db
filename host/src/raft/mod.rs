//! Consensus glue on openraft (pinned in Cargo.toml; this module is the only
//! place that names it): the type configuration every Raft group shares,
//! the codec of Raft state at rest, and each group's log store in the
//! node's store. See docs/cluster.md.

mod codec;
mod log_store;
mod log_writer;
mod types;

#[cfg(test)]
mod tests;

pub use codec::CorruptRaftState;
pub use log_store::{AppendDurability, LogReader, LogStore};
pub use log_writer::LogWriter;
pub use types::{Command, Entry, GroupId, LogId, Membership, NodeId, Reply, TypeConfig, Vote};
