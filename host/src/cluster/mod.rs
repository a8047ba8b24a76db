//! The cluster's own logic, apart from consensus: its settings, where each
//! fragment's replicas live, the requests members forward to each other,
//! and the node's groups with the routing of requests to their leaders.
//! See docs/cluster.md.

mod config;
mod forward;
mod groups;
mod placement;

pub use config::{
    ClusterConfig, ClusterConfigError, DEFAULT_QUORUM_TIMEOUT, DEFAULT_REPLICATION, parse_peers,
};
pub use forward::MalformedForward;
pub(crate) use groups::WriteFailure;
pub use groups::{Cluster, ClusterError, ClusterStatus, FragmentStatus, MemberStatus};
pub use placement::{PlacementError, place, replicas};
