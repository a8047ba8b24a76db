//! Placement: which nodes hold each fragment's replicas, by rendezvous
//! (highest random weight) hashing over node ids.
//!
//! Every node scores every fragment with a hash of the pair; a fragment's
//! replicas are the `R` nodes with the highest scores. The result depends
//! only on the fragment, the set of node ids and `R`, so every node
//! computes the same placement, and a change of members moves as little
//! as it can: a node that joins enters exactly the fragments where it
//! outranks a current replica (taking that one replica's place), and a
//! node that leaves is replaced only in the fragments it held, by the
//! next-ranked node. The metadata group stores the placement it decided,
//! so a move is an explicit membership change of the group, never a
//! silent consequence of a recomputation.
//!
//! Each fragment also has a preferred leader among its replicas
//! ([`preferred_leaders`]), chosen so every node prefers to lead about
//! as many fragments as the others: the member that forms the fragment's
//! group, and where leadership returns once it is up (`cluster::balance`).
//!
//! The score is the first 8 bytes of SHA-256 over the fragment and node id
//! (big-endian, with a domain tag): fixed by this file, the same on every
//! platform and release, so placements never change under an upgrade.

use sha2::{Digest, Sha256};

use crate::raft::NodeId;
use crate::store::FragmentId;

/// A placement that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// A replication factor of zero.
    #[error("replication must be at least 1 (--replication)")]
    ZeroReplication,
    /// Fewer nodes than replicas.
    #[error(
        "replication {replication} needs at least {replication} nodes but the cluster has {nodes}; lower --replication or add nodes to --peers"
    )]
    TooFewNodes {
        /// The replication factor asked for.
        replication: usize,
        /// The nodes there are.
        nodes: usize,
    },
    /// A node id listed twice.
    #[error("node id {0} is listed twice in --peers")]
    DuplicateNode(NodeId),
}

const DOMAIN: &[u8] = b"ebb placement v1";

fn score(fragment: FragmentId, node: NodeId) -> u64 {
    let mut hash = Sha256::new();
    hash.update(DOMAIN);
    hash.update(fragment.to_be_bytes());
    hash.update(node.to_be_bytes());
    let digest = hash.finalize();
    u64::from_be_bytes(digest[..8].try_into().expect("SHA-256 has 32 bytes"))
}

fn check(nodes: &[NodeId], replication: usize) -> Result<(), PlacementError> {
    if replication == 0 {
        return Err(PlacementError::ZeroReplication);
    }
    let mut sorted = nodes.to_vec();
    sorted.sort_unstable();
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(PlacementError::DuplicateNode(pair[0]));
    }
    if nodes.len() < replication {
        return Err(PlacementError::TooFewNodes {
            replication,
            nodes: nodes.len(),
        });
    }
    Ok(())
}

/// The `replication` nodes of `nodes` that hold `fragment`, highest score
/// first. The order of `nodes` does not matter; ties in score (a 2^-64
/// chance) go to the smaller node id.
pub fn replicas(
    fragment: FragmentId,
    nodes: &[NodeId],
    replication: usize,
) -> Result<Vec<NodeId>, PlacementError> {
    check(nodes, replication)?;
    let mut ranked: Vec<(u64, NodeId)> = nodes
        .iter()
        .map(|&node| (score(fragment, node), node))
        .collect();
    ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok(ranked
        .into_iter()
        .take(replication)
        .map(|(_, node)| node)
        .collect())
}

/// [`replicas`] of every fragment `0..fragments`, in fragment order.
pub fn place(
    fragments: u32,
    nodes: &[NodeId],
    replication: usize,
) -> Result<Vec<Vec<NodeId>>, PlacementError> {
    check(nodes, replication)?;
    (0..fragments)
        .map(|fragment| replicas(fragment, nodes, replication))
        .collect()
}

/// Each fragment's preferred leader, in fragment order: one of its
/// replicas, chosen fragment by fragment as the replica preferred for the
/// fewest fragments so far (ties to the earlier replica in placement
/// order). With every node a replica of every fragment the counts differ
/// by at most one; otherwise each node prefers about its share of the
/// fragments it holds. Taking the first replica of each instead leaves the
/// counts to the hash (4, 4 and 8 of 16 fragments on a three-member
/// cluster of this repository's tests). A function of the placement alone,
/// so every member computes the same.
pub fn preferred_leaders(placement: &[Vec<NodeId>]) -> Vec<NodeId> {
    let mut preferred: std::collections::BTreeMap<NodeId, usize> = Default::default();
    placement
        .iter()
        .map(|replicas| {
            let chosen = replicas
                .iter()
                .copied()
                .min_by_key(|node| preferred.get(node).copied().unwrap_or(0))
                .expect("a fragment has at least one replica");
            *preferred.entry(chosen).or_default() += 1;
            chosen
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::*;

    const FRAGMENTS: u32 = 4096;

    fn sets(placement: &[Vec<NodeId>]) -> Vec<BTreeSet<NodeId>> {
        placement
            .iter()
            .map(|replicas| replicas.iter().copied().collect())
            .collect()
    }

    #[test]
    fn placement_is_a_function_of_the_set_of_nodes() {
        let a = place(64, &[1, 2, 3, 4, 5], 3).unwrap();
        let b = place(64, &[5, 3, 1, 4, 2], 3).unwrap();
        assert_eq!(a, b, "the order nodes are listed in does not matter");
        for replicas in &a {
            assert_eq!(replicas.len(), 3);
            assert_eq!(replicas.iter().collect::<BTreeSet<_>>().len(), 3);
        }
        // Fixed scores: the placement of this file never changes (values
        // computed independently from the SHA-256 definition above).
        assert_eq!(
            place(3, &[1, 2, 3, 4, 5], 3).unwrap(),
            [vec![4, 3, 1], vec![5, 1, 4], vec![1, 4, 5]]
        );
        assert_eq!(
            replicas(7, &[1, 2, 3, 4, 5], 3).unwrap(),
            replicas(7, &[1, 2, 3, 4, 5], 5).unwrap()[..3],
            "the first R of a larger R are the same nodes"
        );
    }

    #[test]
    fn replicas_and_leaders_spread_evenly() {
        let nodes = [1, 2, 3, 4, 5];
        let placement = place(FRAGMENTS, &nodes, 3).unwrap();
        let mut held: HashMap<NodeId, usize> = HashMap::new();
        let mut leads: HashMap<NodeId, usize> = HashMap::new();
        for (replicas, leader) in placement.iter().zip(preferred_leaders(&placement)) {
            for node in replicas {
                *held.entry(*node).or_default() += 1;
            }
            assert!(
                replicas.contains(&leader),
                "a preferred leader is a replica"
            );
            *leads.entry(leader).or_default() += 1;
        }
        let fair_held = FRAGMENTS as f64 * 3.0 / 5.0;
        let fair_leads = FRAGMENTS as f64 / 5.0;
        for node in nodes {
            let h = held[&node] as f64;
            let l = leads[&node] as f64;
            assert!(
                (h - fair_held).abs() < fair_held * 0.1,
                "node {node} holds {h}"
            );
            assert!(
                (l - fair_leads).abs() < fair_leads * 0.02,
                "node {node} leads {l}"
            );
        }
    }

    #[test]
    fn with_every_node_a_replica_preferred_leaders_differ_by_at_most_one() {
        for (fragments, nodes) in [(16, vec![1, 2, 3]), (4, vec![1, 2, 3]), (64, vec![3, 7])] {
            let placement = place(fragments, &nodes, nodes.len()).unwrap();
            let leaders = preferred_leaders(&placement);
            assert_eq!(leaders.len(), fragments as usize);
            let counts: Vec<usize> = nodes
                .iter()
                .map(|node| leaders.iter().filter(|l| *l == node).count())
                .collect();
            let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(
                max - min <= 1,
                "{fragments} fragments on {nodes:?}: {counts:?}"
            );
            // The same placement, computed again, prefers the same leaders.
            assert_eq!(preferred_leaders(&placement), leaders);
        }
        // One replica each: that replica.
        let single = place(8, &[1, 2, 3], 1).unwrap();
        let firsts: Vec<NodeId> = single.iter().map(|r| r[0]).collect();
        assert_eq!(preferred_leaders(&single), firsts);
    }

    #[test]
    fn a_joining_node_takes_one_place_where_it_outranks_and_no_other_moves() {
        let before = sets(&place(FRAGMENTS, &[1, 2, 3, 4, 5], 3).unwrap());
        let after = sets(&place(FRAGMENTS, &[1, 2, 3, 4, 5, 6], 3).unwrap());
        let mut moved = 0;
        for (old, new) in before.iter().zip(&after) {
            if old == new {
                continue;
            }
            moved += 1;
            assert!(new.contains(&6), "only the new node enters");
            assert_eq!(old.difference(new).count(), 1, "exactly one replica leaves");
        }
        // The new node ends up with its fair share, 3/6 of the fragments.
        let fair = FRAGMENTS as f64 / 2.0;
        assert!(
            (moved as f64 - fair).abs() < fair * 0.1,
            "{moved} fragments moved"
        );
    }

    #[test]
    fn a_leaving_node_is_replaced_only_where_it_was() {
        let before = sets(&place(FRAGMENTS, &[1, 2, 3, 4, 5], 3).unwrap());
        let after = sets(&place(FRAGMENTS, &[1, 2, 4, 5], 3).unwrap());
        for (old, new) in before.iter().zip(&after) {
            if old.contains(&3) {
                assert!(!new.contains(&3));
                assert_eq!(old.intersection(new).count(), 2, "the other two stay");
            } else {
                assert_eq!(old, new, "fragments without the node do not move");
            }
        }
    }

    #[test]
    fn impossible_placements_say_which_flag_to_change() {
        assert_eq!(
            replicas(0, &[1, 2], 3),
            Err(PlacementError::TooFewNodes {
                replication: 3,
                nodes: 2
            })
        );
        assert_eq!(
            replicas(0, &[1, 2, 3], 0),
            Err(PlacementError::ZeroReplication)
        );
        assert_eq!(
            place(4, &[1, 2, 2], 1),
            Err(PlacementError::DuplicateNode(2))
        );
        assert!(
            PlacementError::TooFewNodes {
                replication: 3,
                nodes: 2
            }
            .to_string()
            .contains("--replication")
        );
    }
}
