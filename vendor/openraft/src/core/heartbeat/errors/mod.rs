mod raft_core_closed;
mod stopped;

pub(crate) use raft_core_closed::RaftCoreClosed;
pub(crate) use stopped::Stopped;
