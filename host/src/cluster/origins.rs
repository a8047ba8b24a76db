//! Counting where a group's writes come from, for the leadership balancer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::raft::NodeId;

/// Where a group's writes came from, as one replica counts them: its own
/// clients' writes, whether this member leads the group or forwards them
/// (`Cluster::write`), and, while it leads, the writes each other member
/// forwarded (`Forward::Write::via`). Counting is one relaxed atomic add;
/// a member outside the cluster is not counted.
#[derive(Debug)]
pub(crate) struct WriteOrigins {
    counts: Box<[(NodeId, AtomicU64)]>,
}

impl WriteOrigins {
    /// Counters for `members`.
    pub(crate) fn new(members: impl Iterator<Item = NodeId>) -> Self {
        Self {
            counts: members.map(|m| (m, AtomicU64::new(0))).collect(),
        }
    }

    /// Count a write that came through `member`.
    pub(crate) fn count(&self, member: NodeId) {
        if let Some((_, count)) = self.counts.iter().find(|(m, _)| *m == member) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counts so far, per member (cumulative).
    pub(crate) fn snapshot(&self) -> BTreeMap<NodeId, u64> {
        self.counts
            .iter()
            .map(|(m, count)| (*m, count.load(Ordering::Relaxed)))
            .collect()
    }
}
