//! How a cluster request fails, as the rest of the node sees it.

use crate::store::FragmentId;

/// A cluster request that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// No leader with a quorum answered within the quorum timeout.
    #[error(
        "fragment {fragment} has no quorum: no leader committed within {waited_ms} ms ({reason}); retry once a majority of its replicas is up"
    )]
    NoQuorum {
        /// The fragment.
        fragment: FragmentId,
        /// How long the request waited.
        waited_ms: u64,
        /// The last thing that went wrong.
        reason: String,
    },
    /// The leader changed while the write was in flight: it may or may not
    /// be applied.
    #[error(
        "fragment {fragment}: the leader changed before the write committed; it may or may not be applied, retry it"
    )]
    Interrupted {
        /// The fragment.
        fragment: FragmentId,
    },
    /// The leader refused the request with an error of the HTTP contract.
    #[error("{message}")]
    Refused {
        /// The contract's error code.
        code: String,
        /// The leader's message.
        message: String,
    },
    /// The fragment's group stopped on this node.
    #[error("fragment {fragment}: its group stopped on this node: {reason}")]
    Stopped {
        /// The fragment.
        fragment: FragmentId,
        /// Why.
        reason: String,
    },
    /// No leader of the metadata group committed a change in time.
    #[error(
        "the metadata group has no quorum: no leader committed the change within {waited_ms} ms ({reason}); retry once a majority of the members is up"
    )]
    MetaNoQuorum {
        /// How long the change waited.
        waited_ms: u64,
        /// The last thing that went wrong.
        reason: String,
    },
    /// This member was started with another layout than the one the
    /// cluster recorded (see `cluster::layout`): it refuses client
    /// requests until restarted with the cluster's flags.
    #[error("{message}")]
    LayoutConflict {
        /// What differs and what to do.
        message: String,
    },
    /// The metadata group stopped on this node, or answered nonsense.
    #[error("the metadata group failed on this node: {reason}")]
    MetaStopped {
        /// Why.
        reason: String,
    },
}
