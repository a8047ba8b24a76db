//! The cluster's own logic, apart from consensus: its settings, where each
//! fragment's replicas live, the requests members forward to each other,
//! the node's groups with the routing of requests to their leaders, and
//! the metadata group (plugins, bindings, the recorded layout) on every
//! member, leadership balance, reads from this member's
//! replicas (linearizable or within a staleness bound) and of fragments
//! held elsewhere.
//! See docs/cluster.md.

mod balance;
mod config;
mod error;
mod expiry;
mod forward;
mod groups;
mod layout;
mod meta;
mod meta_group;
mod origins;
mod outbox;
mod placement;
mod reads;
mod remote;

pub use config::{
    ClusterConfig, ClusterConfigError, DEFAULT_QUORUM_TIMEOUT, DEFAULT_REPLICATION, parse_peers,
};
pub use forward::{MalformedForward, PageServer};
pub(crate) use groups::WriteFailure;
pub use groups::{Cluster, ClusterError, ClusterStatus, FragmentStatus, MemberStatus};
pub use layout::{Layout, LayoutCheck};
pub use meta::{MetaCommand, MetaOutcome, Metadata};
pub use meta_group::{META_TIMEOUT, MetaChange, SPREAD_TIMEOUT};
pub use outbox::{OutboxAction, OutboxDone, OutboxRequest, OutboxServer};
pub use placement::{PlacementError, place, preferred_leaders, replicas};
pub use reads::{MAX_STALENESS, check_staleness};
