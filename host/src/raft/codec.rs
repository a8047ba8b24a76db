//! Raft state at rest: log entries, votes and log markers to and from their
//! `ebb.raft.v1` protobuf form. A value that does not decode is corruption,
//! reported with what was wrong, never guessed at.

use std::collections::{BTreeMap, BTreeSet};

use ebb_proto::Message;
use ebb_proto::raft::v1 as pb;
use openraft::BasicNode;
use openraft::impls::leader_id_adv::LeaderId;

use super::types::{Command, Entry, LogId, Membership, NodeId, Payload, StoredMembership, Vote};

/// Raft state that does not decode: stored by this node, or received from
/// a peer (see `wire`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt raft {what}: {reason}")]
pub struct CorruptRaftState {
    /// What was being decoded (`log entry`, `vote`, `log marker`, or the
    /// wire message, such as `append entries request`).
    pub what: &'static str,
    /// What was wrong with it.
    pub reason: String,
}

/// A [`CorruptRaftState`] saying `reason` about `what`.
pub(super) fn corrupt(what: &'static str, reason: impl ToString) -> CorruptRaftState {
    CorruptRaftState {
        what,
        reason: reason.to_string(),
    }
}

/// A log id's protobuf form.
pub(super) fn log_id_to_pb(id: &LogId) -> pb::LogId {
    pb::LogId {
        term: id.leader_id.term,
        node_id: id.leader_id.node_id,
        index: id.index,
    }
}

/// The log id of its protobuf form; every protobuf log id is one.
pub(super) fn log_id_from_pb(id: &pb::LogId) -> LogId {
    LogId::new(
        LeaderId {
            term: id.term,
            node_id: id.node_id,
        },
        id.index,
    )
}

/// A membership's protobuf form: its voter configurations in order, and
/// every node with its address.
pub(super) fn membership_to_pb(membership: &Membership) -> pb::Membership {
    pb::Membership {
        configs: membership
            .get_joint_config()
            .iter()
            .map(|voters| pb::VoterSet {
                ids: voters.iter().copied().collect(),
            })
            .collect(),
        nodes: membership
            .nodes()
            .map(|(id, node)| pb::Node {
                id: *id,
                addr: node.addr.clone(),
            })
            .collect(),
    }
}

/// The membership of its protobuf form, or a `membership` corruption if
/// openraft refuses it (an empty voter set, a voter without a node).
pub(super) fn membership_from_pb(
    membership: pb::Membership,
) -> Result<Membership, CorruptRaftState> {
    let configs: Vec<BTreeSet<NodeId>> = membership
        .configs
        .into_iter()
        .map(|voters| voters.ids.into_iter().collect())
        .collect();
    let nodes: BTreeMap<NodeId, BasicNode> = membership
        .nodes
        .into_iter()
        .map(|node| (node.id, BasicNode { addr: node.addr }))
        .collect();
    Membership::new(configs, nodes).map_err(|e| corrupt("membership", e))
}

/// A log entry's protobuf form.
pub(super) fn entry_to_pb(entry: &Entry) -> pb::Entry {
    let payload = match &entry.payload {
        Payload::Blank => pb::entry::Payload::Blank(pb::Blank {}),
        Payload::Normal(command) => pb::entry::Payload::Command(command.bytes.clone()),
        Payload::Membership(membership) => {
            pb::entry::Payload::Membership(membership_to_pb(membership))
        }
    };
    let sync = matches!(&entry.payload, Payload::Normal(command) if command.sync);
    pb::Entry {
        log_id: Some(log_id_to_pb(&entry.log_id)),
        payload: Some(payload),
        sync,
    }
}

/// The log entry of its protobuf form, or a `log entry` corruption if it
/// lacks its log id or payload (a `membership` one if openraft refuses its
/// membership).
pub(super) fn entry_from_pb(entry: pb::Entry) -> Result<Entry, CorruptRaftState> {
    let what = "log entry";
    let log_id = entry
        .log_id
        .as_ref()
        .map(log_id_from_pb)
        .ok_or_else(|| corrupt(what, "no log id"))?;
    let payload = match entry.payload.ok_or_else(|| corrupt(what, "no payload"))? {
        pb::entry::Payload::Blank(_) => Payload::Blank,
        pb::entry::Payload::Command(bytes) => Payload::Normal(Command::new(bytes, entry.sync)),
        pb::entry::Payload::Membership(membership) => {
            Payload::Membership(membership_from_pb(membership)?)
        }
    };
    Ok(Entry { log_id, payload })
}

/// Encode a log entry.
pub(crate) fn encode_entry(entry: &Entry) -> Vec<u8> {
    entry_to_pb(entry).encode_to_vec()
}

/// Decode a log entry written by [`encode_entry`].
pub(crate) fn decode_entry(bytes: &[u8]) -> Result<Entry, CorruptRaftState> {
    let entry = pb::Entry::decode(bytes).map_err(|e| corrupt("log entry", e))?;
    entry_from_pb(entry)
}

/// A vote's protobuf form.
pub(super) fn vote_to_pb(vote: &Vote) -> pb::Vote {
    pb::Vote {
        term: vote.leader_id.term,
        node_id: vote.leader_id.node_id,
        committed: vote.committed,
    }
}

/// The vote of its protobuf form; every protobuf vote is one.
pub(super) fn vote_from_pb(vote: &pb::Vote) -> Vote {
    if vote.committed {
        Vote::new_committed(vote.term, vote.node_id)
    } else {
        Vote::new(vote.term, vote.node_id)
    }
}

/// Encode a vote.
pub(crate) fn encode_vote(vote: &Vote) -> Vec<u8> {
    vote_to_pb(vote).encode_to_vec()
}

/// Decode a vote written by [`encode_vote`].
pub(crate) fn decode_vote(bytes: &[u8]) -> Result<Vote, CorruptRaftState> {
    let vote = pb::Vote::decode(bytes).map_err(|e| corrupt("vote", e))?;
    Ok(vote_from_pb(&vote))
}

/// Encode a log marker (last purged, committed); `None` is "no entry yet".
pub(crate) fn encode_marker(id: Option<&LogId>) -> Vec<u8> {
    pb::LogMarker {
        log_id: id.map(log_id_to_pb),
    }
    .encode_to_vec()
}

/// Decode a log marker written by [`encode_marker`].
pub(crate) fn decode_marker(bytes: &[u8]) -> Result<Option<LogId>, CorruptRaftState> {
    let marker = pb::LogMarker::decode(bytes).map_err(|e| corrupt("log marker", e))?;
    Ok(marker.log_id.as_ref().map(log_id_from_pb))
}

/// Encode a state machine's position: the last entry it applied and the
/// last membership among them.
pub(crate) fn encode_position(applied: &LogId, membership: &StoredMembership) -> Vec<u8> {
    let membership_log_id = membership.log_id().as_ref().map(log_id_to_pb);
    pb::Position {
        applied: Some(log_id_to_pb(applied)),
        membership: membership_log_id
            .is_some()
            .then(|| membership_to_pb(membership.membership())),
        membership_log_id,
    }
    .encode_to_vec()
}

/// Decode a position written by [`encode_position`].
pub(crate) fn decode_position(bytes: &[u8]) -> Result<(LogId, StoredMembership), CorruptRaftState> {
    let what = "applied position";
    let position = pb::Position::decode(bytes).map_err(|e| corrupt(what, e))?;
    let applied = position
        .applied
        .as_ref()
        .map(log_id_from_pb)
        .ok_or_else(|| corrupt(what, "no applied log id"))?;
    let membership = match (position.membership_log_id, position.membership) {
        (None, _) => StoredMembership::default(),
        (Some(id), Some(membership)) => {
            StoredMembership::new(Some(log_id_from_pb(&id)), membership_from_pb(membership)?)
        }
        (Some(_), None) => return Err(corrupt(what, "a membership log id without a membership")),
    };
    Ok((applied, membership))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn log_id(term: u64, node: u64, index: u64) -> LogId {
        LogId::new(
            LeaderId {
                term,
                node_id: node,
            },
            index,
        )
    }

    #[test]
    fn every_payload_round_trips() {
        let nodes: BTreeMap<NodeId, BasicNode> = [
            (1, BasicNode::new("127.0.0.1:7101")),
            (2, BasicNode::new("127.0.0.1:7102")),
            (3, BasicNode::new("127.0.0.1:7103")),
        ]
        .into_iter()
        .collect();
        let joint = Membership::new(
            vec![BTreeSet::from([1, 2]), BTreeSet::from([1, 2, 3])],
            nodes,
        )
        .unwrap();
        for payload in [
            Payload::Blank,
            Payload::Normal(Command::new(Bytes::from_static(b"\0put\xff"), false)),
            Payload::Normal(Command::new(Bytes::new(), false)),
            Payload::Membership(joint),
        ] {
            let entry = Entry {
                log_id: log_id(7, 3, u64::MAX - 1),
                payload,
            };
            assert_eq!(decode_entry(&encode_entry(&entry)).unwrap(), entry);
        }
    }

    #[test]
    fn votes_and_markers_round_trip() {
        for vote in [Vote::new(0, 0), Vote::new(9, 2), Vote::new_committed(9, 2)] {
            assert_eq!(decode_vote(&encode_vote(&vote)).unwrap(), vote);
        }
        for marker in [None, Some(log_id(1, 1, 0)), Some(log_id(4, 2, 1 << 40))] {
            assert_eq!(
                decode_marker(&encode_marker(marker.as_ref())).unwrap(),
                marker
            );
        }
    }

    #[test]
    fn positions_round_trip_with_and_without_a_membership() {
        let nodes: BTreeMap<NodeId, BasicNode> =
            [(1, BasicNode::new("a")), (2, BasicNode::new("b"))]
                .into_iter()
                .collect();
        let membership = Membership::new(vec![BTreeSet::from([1, 2])], nodes).unwrap();
        for stored in [
            StoredMembership::default(),
            StoredMembership::new(Some(log_id(1, 1, 1)), membership),
        ] {
            let applied = log_id(3, 2, 77);
            let (back, back_membership) =
                decode_position(&encode_position(&applied, &stored)).unwrap();
            assert_eq!((back, back_membership), (applied, stored));
        }
        let no_applied = pb::Position::default().encode_to_vec();
        assert_eq!(
            decode_position(&no_applied).unwrap_err().reason,
            "no applied log id"
        );
    }

    #[test]
    fn garbage_is_reported_as_corruption() {
        let error = decode_entry(b"\xff\xff\xff").unwrap_err();
        assert_eq!(error.what, "log entry");
        let no_payload = pb::Entry {
            log_id: Some(pb::LogId::default()),
            payload: None,
            sync: false,
        }
        .encode_to_vec();
        assert_eq!(decode_entry(&no_payload).unwrap_err().reason, "no payload");
        let bad_membership = pb::Entry {
            log_id: Some(pb::LogId::default()),
            payload: Some(pb::entry::Payload::Membership(pb::Membership {
                configs: vec![pb::VoterSet { ids: vec![5] }],
                nodes: vec![],
            })),
            sync: false,
        }
        .encode_to_vec();
        // Voter 5 has no node: openraft refuses such a membership.
        assert!(decode_entry(&bad_membership).is_err());
    }
}
