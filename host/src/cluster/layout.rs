//! The cluster's layout (member ids, replicas per fragment, fragment count
//! and the placement they give) as the metadata group records it, and the
//! check of a member's own flags against the recorded one.
//!
//! Every member proposes the layout its flags give once it starts; the
//! first to commit records it, every later one must equal it. A member
//! whose flags differ is in conflict: it refuses client requests (503
//! `layout_conflict`) until it is restarted with the cluster's flags,
//! since its view of where each fragment lives is not the cluster's.
//! Member addresses are not part of the layout: each member reaches the
//! others at the addresses of its own `--peers`.

use bytes::Bytes;
use ebb_proto::Message;
use ebb_proto::cluster::v1 as pb;

use crate::raft::NodeId;

/// Where the cluster keeps its fragments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Member ids, ascending.
    pub members: Vec<NodeId>,
    /// Replicas per fragment.
    pub replication: u32,
    /// Fragments per table.
    pub fragments: u32,
    /// Each fragment's replicas, highest placement score first, in fragment
    /// order (the preferred leaders are `placement::preferred_leaders` of it).
    pub placement: Vec<Vec<NodeId>>,
}

/// Bytes that are not a layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed layout: {0}")]
pub struct MalformedLayout(String);

impl Layout {
    /// The layout of `members` (any order) with `replication` replicas of
    /// each fragment placed as `placement` says.
    pub fn new(
        members: impl IntoIterator<Item = NodeId>,
        replication: usize,
        placement: Vec<Vec<NodeId>>,
    ) -> Self {
        let mut members: Vec<NodeId> = members.into_iter().collect();
        members.sort_unstable();
        Self {
            members,
            replication: replication as u32,
            fragments: placement.len() as u32,
            placement,
        }
    }

    pub(super) fn to_proto(&self) -> pb::Layout {
        pb::Layout {
            members: self.members.clone(),
            replication: self.replication,
            fragments: self.fragments,
            placement: self
                .placement
                .iter()
                .map(|nodes| pb::Replicas {
                    nodes: nodes.clone(),
                })
                .collect(),
        }
    }

    pub(super) fn from_proto(layout: pb::Layout) -> Result<Self, MalformedLayout> {
        if layout.placement.len() != layout.fragments as usize {
            return Err(MalformedLayout(format!(
                "{} fragments but {} replica lists",
                layout.fragments,
                layout.placement.len()
            )));
        }
        Ok(Self {
            members: layout.members,
            replication: layout.replication,
            fragments: layout.fragments,
            placement: layout
                .placement
                .into_iter()
                .map(|replicas| replicas.nodes)
                .collect(),
        })
    }

    /// The `ebb.cluster.v1.Layout` bytes (how a member stores it).
    pub fn encode(&self) -> Bytes {
        self.to_proto().encode_to_vec().into()
    }

    /// Decode [`Self::encode`]'s bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, MalformedLayout> {
        Self::from_proto(pb::Layout::decode(bytes).map_err(|e| MalformedLayout(e.to_string()))?)
    }

    /// How `self` (what a member's flags give) differs from `recorded`
    /// (the cluster's), one phrase per difference naming the flag; empty
    /// when they agree.
    pub fn differences(&self, recorded: &Layout) -> Vec<String> {
        let mut differences = Vec::new();
        if self.members != recorded.members {
            differences.push(format!(
                "--peers lists members {:?}, the cluster has {:?}",
                self.members, recorded.members
            ));
        }
        if self.replication != recorded.replication {
            differences.push(format!(
                "--replication is {}, the cluster's is {}",
                self.replication, recorded.replication
            ));
        }
        if self.fragments != recorded.fragments {
            differences.push(format!(
                "the data dir has {} fragments, the cluster {}",
                self.fragments, recorded.fragments
            ));
        }
        if differences.is_empty() && self.placement != recorded.placement {
            // Same flags, other placement: the cluster recorded a move
            // (a later release's membership change).
            let moved = self
                .placement
                .iter()
                .zip(&recorded.placement)
                .filter(|(a, b)| a != b)
                .count();
            differences.push(format!(
                "the cluster placed {moved} of {} fragments elsewhere than these flags do",
                self.fragments
            ));
        }
        differences
    }

    /// The message of a conflict of member `member`'s layout with
    /// `recorded`, saying what to do (empty differences: no conflict).
    pub fn conflict_message(member: NodeId, differences: &[String]) -> String {
        format!(
            "member {member} was started with another cluster layout than the one the cluster recorded: {}; restart it with the cluster's --peers and --replication (and its own data dir)",
            differences.join("; ")
        )
    }
}

/// Where this member stands with the recorded layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutCheck {
    /// Not yet checked: the metadata group has not committed this member's
    /// layout (no quorum yet, or still starting).
    Pending {
        /// Why not yet.
        reason: String,
    },
    /// The member's flags give the recorded layout.
    Agreed {
        /// The metadata entry that checked it.
        index: u64,
        /// This member's proposal is the one that recorded it.
        first: bool,
    },
    /// The member's flags give another layout; it refuses client requests.
    Conflict {
        /// What differs and what to do.
        message: String,
    },
}

impl LayoutCheck {
    /// `pending`, `agreed` or `conflict`.
    pub fn state(&self) -> &'static str {
        match self {
            LayoutCheck::Pending { .. } => "pending",
            LayoutCheck::Agreed { .. } => "agreed",
            LayoutCheck::Conflict { .. } => "conflict",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::place;

    fn layout(members: &[NodeId], replication: usize, fragments: u32) -> Layout {
        Layout::new(
            members.iter().copied(),
            replication,
            place(fragments, members, replication).unwrap(),
        )
    }

    #[test]
    fn layouts_round_trip_and_differences_name_the_flag() {
        let recorded = layout(&[1, 2, 3], 3, 8);
        assert_eq!(Layout::decode(&recorded.encode()).unwrap(), recorded);
        assert_eq!(
            layout(&[3, 1, 2], 3, 8),
            recorded,
            "member order does not matter"
        );
        assert!(recorded.differences(&recorded).is_empty());

        let fewer_replicas = layout(&[1, 2, 3], 2, 8).differences(&recorded);
        assert_eq!(fewer_replicas.len(), 1, "{fewer_replicas:?}");
        assert!(fewer_replicas[0].contains("--replication is 2, the cluster's is 3"));

        let other_members = layout(&[1, 2, 3, 4], 3, 16).differences(&recorded);
        assert_eq!(other_members.len(), 2, "{other_members:?}");
        assert!(other_members[0].contains("--peers"));
        assert!(other_members[1].contains("16 fragments"));

        let mut moved = recorded.clone();
        moved.placement[0].reverse();
        let differences = recorded.differences(&moved);
        assert_eq!(
            differences,
            ["the cluster placed 1 of 8 fragments elsewhere than these flags do"]
        );
        assert!(Layout::conflict_message(4, &differences).contains("member 4"));
    }

    #[test]
    fn a_layout_whose_placement_does_not_match_its_fragment_count_is_refused() {
        let mut proto = layout(&[1, 2, 3], 3, 4).to_proto();
        proto.fragments = 5;
        assert!(Layout::from_proto(proto).is_err());
        assert!(Layout::decode(b"\xff\xff").is_err());
    }
}
