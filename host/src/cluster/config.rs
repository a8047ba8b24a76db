//! A node's cluster settings (`--node-id`, `--cluster-listen`, `--peers`,
//! `--replication`, `--cluster-secret`) and their checks.

use std::collections::BTreeMap;
use std::time::Duration;

use super::placement::{PlacementError, place};
use crate::raft::{LogRetention, NodeId};
use crate::store::FragmentId;

/// Replicas per fragment unless `--replication` says otherwise.
pub const DEFAULT_REPLICATION: usize = 3;

/// How long a write or linearizable read waits for its fragment to have a
/// leader and a quorum before answering `no_quorum`, by default.
pub const DEFAULT_QUORUM_TIMEOUT: Duration = Duration::from_secs(3);

/// Settings that make a node a member of a cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// This node's id; must be one of `peers`.
    pub node_id: NodeId,
    /// Every member with the address of its cluster port, this node
    /// included. The same list on every node.
    pub peers: BTreeMap<NodeId, String>,
    /// Replicas per fragment (`R`), at most the member count.
    pub replication: usize,
    /// Shared secret every internal request carries; `None` accepts
    /// members without one (a trusted network only).
    pub secret: Option<String>,
    /// Longest a write or linearizable read waits for a leader and a quorum
    /// before it fails with `no_quorum`.
    pub quorum_timeout: Duration,
    /// How much Raft log each group keeps (`--raft-snapshot-every`).
    pub retention: LogRetention,
}

/// Cluster settings that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterConfigError {
    /// `--node-id` is not among `--peers`.
    #[error("--node-id {0} is not one of --peers; list every member, this node included")]
    NotAPeer(NodeId),
    /// Node id 0 (reserved: openraft's and the log's "no node").
    #[error("node id 0 is reserved; number the members from 1")]
    ZeroNodeId,
    /// An empty secret would authenticate nothing.
    #[error("--cluster-secret is empty; give a secret or leave the flag out")]
    EmptySecret,
    /// No placement fits the members and the replication factor.
    #[error(transparent)]
    Placement(#[from] PlacementError),
}

impl ClusterConfig {
    /// Settings for member `node_id` of `peers`, `R` = 3 (or fewer when the
    /// cluster is smaller), no secret.
    pub fn new(node_id: NodeId, peers: BTreeMap<NodeId, String>) -> Self {
        let replication = DEFAULT_REPLICATION.min(peers.len().max(1));
        Self {
            node_id,
            peers,
            replication,
            secret: None,
            quorum_timeout: DEFAULT_QUORUM_TIMEOUT,
            retention: LogRetention::default(),
        }
    }

    /// Check the settings; the placement they give, one replica list per
    /// fragment.
    pub fn validate(&self, fragments: u32) -> Result<Vec<Vec<NodeId>>, ClusterConfigError> {
        if self.peers.contains_key(&0) || self.node_id == 0 {
            return Err(ClusterConfigError::ZeroNodeId);
        }
        if !self.peers.contains_key(&self.node_id) {
            return Err(ClusterConfigError::NotAPeer(self.node_id));
        }
        if self.secret.as_deref() == Some("") {
            return Err(ClusterConfigError::EmptySecret);
        }
        let nodes: Vec<NodeId> = self.peers.keys().copied().collect();
        Ok(place(fragments, &nodes, self.replication)?)
    }

    /// The fragments this node holds a replica of, under `placement`.
    pub fn local_fragments(&self, placement: &[Vec<NodeId>]) -> Vec<FragmentId> {
        placement
            .iter()
            .enumerate()
            .filter(|(_, replicas)| replicas.contains(&self.node_id))
            .map(|(fragment, _)| fragment as FragmentId)
            .collect()
    }
}

/// Parse `--peers`: `1=HOST:PORT,2=HOST:PORT,...`.
pub fn parse_peers(text: &str) -> Result<BTreeMap<NodeId, String>, String> {
    let mut peers = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (id, addr) = item
            .split_once('=')
            .ok_or_else(|| format!("`{item}` is not ID=HOST:PORT"))?;
        let id: NodeId = id
            .trim()
            .parse()
            .map_err(|_| format!("`{id}` in `{item}` is not a node id (a positive integer)"))?;
        let addr = addr.trim();
        if addr
            .rsplit_once(':')
            .is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().is_err())
        {
            return Err(format!("`{addr}` in `{item}` is not HOST:PORT"));
        }
        if peers.insert(id, addr.to_string()).is_some() {
            return Err(format!("node id {id} is listed twice"));
        }
    }
    if peers.is_empty() {
        return Err("no peers listed; give ID=HOST:PORT for every member".into());
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(n: u64) -> BTreeMap<NodeId, String> {
        (1..=n)
            .map(|id| (id, format!("127.0.0.1:{}", 7100 + id)))
            .collect()
    }

    #[test]
    fn peers_parse_and_bad_lists_say_what_is_wrong() {
        let parsed = parse_peers("1=127.0.0.1:7101, 2=127.0.0.1:7102,3=localhost:7103").unwrap();
        assert_eq!(parsed.len(), 3);
        assert_eq!(parsed[&3], "localhost:7103");
        for (bad, says) in [
            ("1=127.0.0.1:7101,1=127.0.0.1:7102", "twice"),
            ("x=127.0.0.1:1", "not a node id"),
            ("1=127.0.0.1", "HOST:PORT"),
            ("1:127.0.0.1:7", "ID=HOST:PORT"),
            ("", "no peers"),
        ] {
            let error = parse_peers(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn validation_refuses_what_cannot_work() {
        let mut config = ClusterConfig::new(4, peers(3));
        assert_eq!(config.validate(4), Err(ClusterConfigError::NotAPeer(4)));
        config.node_id = 1;
        assert_eq!(config.validate(4).unwrap().len(), 4);
        config.replication = 4;
        assert!(matches!(
            config.validate(4),
            Err(ClusterConfigError::Placement(
                PlacementError::TooFewNodes { .. }
            ))
        ));
        config.replication = 3;
        config.secret = Some(String::new());
        assert_eq!(config.validate(4), Err(ClusterConfigError::EmptySecret));
    }

    #[test]
    fn every_node_of_a_full_replication_holds_every_fragment() {
        let config = ClusterConfig::new(2, peers(3));
        let placement = config.validate(8).unwrap();
        assert_eq!(
            config.local_fragments(&placement),
            (0..8).collect::<Vec<_>>()
        );
        let mut five = ClusterConfig::new(5, peers(5));
        five.replication = 3;
        let placement = five.validate(16).unwrap();
        let local = five.local_fragments(&placement);
        assert!(!local.is_empty() && local.len() < 16, "{local:?}");
    }
}
