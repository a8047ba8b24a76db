//! Raft messages between nodes: every group's RPCs and their answers, to
//! and from their `ebb.raft.v1` protobuf form (`RaftRequest` and
//! `RaftResponse` in proto/ebb/raft/v1/rpc.proto).
//!
//! One request is one message, its group id inside; one answer is one
//! message. Entries, votes, log ids and memberships share their encoding
//! with the log at rest (`codec`). Bytes that do not decode, from a peer
//! or anyone else, are a [`CorruptRaftState`] naming the message and what
//! was wrong, never a panic or a guess.

use ebb_proto::Message;
use ebb_proto::raft::v1 as pb;
use openraft::StoredMembership;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    VoteRequest, VoteResponse,
};
use openraft::type_config::alias::{SnapshotMetaOf, SnapshotOf};

use bytes::Bytes;

use super::codec::{
    CorruptRaftState, corrupt, entry_from_pb, entry_to_pb, log_id_from_pb, log_id_to_pb,
    membership_from_pb, membership_to_pb, vote_from_pb, vote_to_pb,
};
use super::types::{GroupId, LogId, TypeConfig, Vote};

/// One RPC a node sends a peer for one of its groups (the group travels
/// beside it, in [`RaftRequest::encode`]).
#[derive(Debug, Clone)]
pub enum RaftRequest {
    /// The leader replicating entries, or a heartbeat without any.
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    /// A candidate asking for a vote.
    Vote(VoteRequest<TypeConfig>),
    /// A would-be candidate asking whether it would get a vote.
    PreVote(VoteRequest<TypeConfig>),
    /// The leader installing a whole snapshot on a replica that lags
    /// behind its purged log.
    FullSnapshot {
        /// The leader's vote.
        vote: Vote,
        /// The snapshot, data included.
        snapshot: SnapshotOf<TypeConfig, Bytes>,
    },
    /// A leader stepping down asking the target to take over.
    TransferLeader(TransferLeaderRequest<TypeConfig>),
}

/// The answer to one [`RaftRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RaftResponse {
    /// To [`RaftRequest::AppendEntries`].
    AppendEntries(AppendEntriesResponse<TypeConfig>),
    /// To [`RaftRequest::Vote`] and [`RaftRequest::PreVote`].
    Vote(VoteResponse<TypeConfig>),
    /// To [`RaftRequest::FullSnapshot`].
    Snapshot(SnapshotResponse<TypeConfig>),
    /// To [`RaftRequest::TransferLeader`]: the target accepted it.
    TransferLeader,
    /// The remote could not serve the request (its Raft is shutting down,
    /// the group is not on it, ...).
    Error(String),
}

impl RaftRequest {
    /// This request for `group` as one `ebb.raft.v1.RaftRequest`. Every
    /// request encodes; command and snapshot bytes are shared, not copied,
    /// until the message is written.
    pub fn encode(&self, group: GroupId) -> Vec<u8> {
        use pb::raft_request::Rpc;
        let rpc = match self {
            RaftRequest::AppendEntries(request) => Rpc::AppendEntries(pb::AppendEntries {
                vote: Some(vote_to_pb(&request.vote)),
                prev_log_id: request.prev_log_id.as_ref().map(log_id_to_pb),
                entries: request.entries.iter().map(entry_to_pb).collect(),
                leader_commit: request.leader_commit.as_ref().map(log_id_to_pb),
            }),
            RaftRequest::Vote(request) => Rpc::Vote(vote_request_to_pb(request)),
            RaftRequest::PreVote(request) => Rpc::PreVote(vote_request_to_pb(request)),
            RaftRequest::FullSnapshot { vote, snapshot } => Rpc::FullSnapshot(pb::FullSnapshot {
                vote: Some(vote_to_pb(vote)),
                meta: Some(snapshot_meta_to_pb(&snapshot.meta)),
                data: snapshot.snapshot.clone(),
            }),
            RaftRequest::TransferLeader(request) => Rpc::TransferLeader(pb::TransferLeader {
                from_leader: Some(vote_to_pb(request.from_leader())),
                to_node_id: *request.to_node_id(),
                last_log_id: request.last_log_id().map(log_id_to_pb),
            }),
        };
        pb::RaftRequest {
            group: group.to_wire(),
            rpc: Some(rpc),
        }
        .encode_to_vec()
    }

    /// The group and request of a message written by
    /// [`RaftRequest::encode`]. Fails, naming the message at fault, if the
    /// bytes are not protobuf, a required part is missing (the RPC, a vote,
    /// a snapshot's metadata or membership, an entry's log id or payload),
    /// or a membership is one openraft refuses. Unknown fields are skipped.
    pub fn decode(bytes: &[u8]) -> Result<(GroupId, RaftRequest), CorruptRaftState> {
        use pb::raft_request::Rpc;
        let what = "request";
        let message = pb::RaftRequest::decode(bytes).map_err(|e| corrupt(what, e))?;
        let group = GroupId::from_wire(message.group);
        let request = match message.rpc.ok_or_else(|| corrupt(what, "no rpc"))? {
            Rpc::AppendEntries(request) => {
                let what = "append entries request";
                RaftRequest::AppendEntries(AppendEntriesRequest {
                    vote: required_vote(what, request.vote.as_ref())?,
                    prev_log_id: request.prev_log_id.as_ref().map(log_id_from_pb),
                    entries: request
                        .entries
                        .into_iter()
                        .map(entry_from_pb)
                        .collect::<Result<_, _>>()?,
                    leader_commit: request.leader_commit.as_ref().map(log_id_from_pb),
                })
            }
            Rpc::Vote(request) => RaftRequest::Vote(vote_request_from_pb("vote request", request)?),
            Rpc::PreVote(request) => {
                RaftRequest::PreVote(vote_request_from_pb("pre-vote request", request)?)
            }
            Rpc::FullSnapshot(request) => {
                let what = "snapshot";
                let meta = request.meta.ok_or_else(|| corrupt(what, "no meta"))?;
                RaftRequest::FullSnapshot {
                    vote: required_vote(what, request.vote.as_ref())?,
                    snapshot: SnapshotOf::<TypeConfig, Bytes> {
                        meta: snapshot_meta_from_pb(meta)?,
                        snapshot: request.data,
                    },
                }
            }
            Rpc::TransferLeader(request) => {
                let what = "transfer leader request";
                RaftRequest::TransferLeader(TransferLeaderRequest::new(
                    required_vote(what, request.from_leader.as_ref())?,
                    request.to_node_id,
                    request.last_log_id.as_ref().map(log_id_from_pb),
                ))
            }
        };
        Ok((group, request))
    }
}

impl RaftResponse {
    /// This answer as one `ebb.raft.v1.RaftResponse`. Every answer encodes.
    pub fn encode(&self) -> Vec<u8> {
        use pb::append_entries_response as append;
        use pb::raft_response::Response;
        let response = match self {
            RaftResponse::AppendEntries(response) => {
                let outcome = match response {
                    AppendEntriesResponse::Success => append::Outcome::Success(append::Success {}),
                    AppendEntriesResponse::PartialSuccess(log_id) => {
                        append::Outcome::PartialSuccess(append::PartialSuccess {
                            log_id: log_id.as_ref().map(log_id_to_pb),
                        })
                    }
                    AppendEntriesResponse::Conflict => {
                        append::Outcome::Conflict(append::Conflict {})
                    }
                    AppendEntriesResponse::HigherVote(vote) => {
                        append::Outcome::HigherVote(vote_to_pb(vote))
                    }
                };
                Response::AppendEntries(pb::AppendEntriesResponse {
                    outcome: Some(outcome),
                })
            }
            RaftResponse::Vote(response) => Response::Vote(pb::VoteResponse {
                vote: Some(vote_to_pb(&response.vote)),
                vote_granted: response.vote_granted,
                last_log_id: response.last_log_id.as_ref().map(log_id_to_pb),
            }),
            RaftResponse::Snapshot(response) => Response::Snapshot(pb::SnapshotResponse {
                vote: Some(vote_to_pb(&response.vote)),
            }),
            RaftResponse::TransferLeader => Response::TransferLeader(pb::TransferLeaderAccepted {}),
            RaftResponse::Error(message) => Response::Error(pb::RemoteError {
                message: message.clone(),
            }),
        };
        pb::RaftResponse {
            response: Some(response),
        }
        .encode_to_vec()
    }

    /// The answer of a message written by [`RaftResponse::encode`]. Fails,
    /// naming the message at fault, if the bytes are not protobuf or a
    /// required part is missing (the answer, an append's outcome, a vote).
    /// Unknown fields are skipped.
    pub fn decode(bytes: &[u8]) -> Result<RaftResponse, CorruptRaftState> {
        use pb::append_entries_response::Outcome;
        use pb::raft_response::Response;
        let what = "response";
        let message = pb::RaftResponse::decode(bytes).map_err(|e| corrupt(what, e))?;
        let response = message
            .response
            .ok_or_else(|| corrupt(what, "no response"))?;
        Ok(match response {
            Response::AppendEntries(response) => {
                let what = "append entries response";
                let outcome = response
                    .outcome
                    .ok_or_else(|| corrupt(what, "no outcome"))?;
                RaftResponse::AppendEntries(match outcome {
                    Outcome::Success(_) => AppendEntriesResponse::Success,
                    Outcome::PartialSuccess(partial) => AppendEntriesResponse::PartialSuccess(
                        partial.log_id.as_ref().map(log_id_from_pb),
                    ),
                    Outcome::Conflict(_) => AppendEntriesResponse::Conflict,
                    Outcome::HigherVote(vote) => {
                        AppendEntriesResponse::HigherVote(vote_from_pb(&vote))
                    }
                })
            }
            Response::Vote(response) => RaftResponse::Vote(VoteResponse {
                vote: required_vote("vote response", response.vote.as_ref())?,
                vote_granted: response.vote_granted,
                last_log_id: response.last_log_id.as_ref().map(log_id_from_pb),
            }),
            Response::Snapshot(response) => RaftResponse::Snapshot(SnapshotResponse {
                vote: required_vote("snapshot response", response.vote.as_ref())?,
            }),
            Response::Error(error) => RaftResponse::Error(error.message),
            Response::TransferLeader(_) => RaftResponse::TransferLeader,
        })
    }
}

/// The vote a message of kind `what` must carry, or a corruption saying
/// it has none.
fn required_vote(what: &'static str, vote: Option<&pb::Vote>) -> Result<Vote, CorruptRaftState> {
    vote.map(vote_from_pb)
        .ok_or_else(|| corrupt(what, "no vote"))
}

fn vote_request_to_pb(request: &VoteRequest<TypeConfig>) -> pb::VoteRequest {
    pb::VoteRequest {
        vote: Some(vote_to_pb(&request.vote)),
        last_log_id: request.last_log_id.as_ref().map(log_id_to_pb),
        leadership_transfer: request.leadership_transfer,
    }
}

fn vote_request_from_pb(
    what: &'static str,
    request: pb::VoteRequest,
) -> Result<VoteRequest<TypeConfig>, CorruptRaftState> {
    Ok(VoteRequest {
        vote: required_vote(what, request.vote.as_ref())?,
        last_log_id: request.last_log_id.as_ref().map(log_id_from_pb),
        leadership_transfer: request.leadership_transfer,
    })
}

fn snapshot_meta_to_pb(meta: &SnapshotMetaOf<TypeConfig>) -> pb::SnapshotMeta {
    pb::SnapshotMeta {
        last_log_id: meta.last_log_id.as_ref().map(log_id_to_pb),
        last_membership: Some(pb::StoredMembership {
            log_id: meta.last_membership.log_id().as_ref().map(log_id_to_pb),
            membership: Some(membership_to_pb(meta.last_membership.membership())),
        }),
    }
}

fn snapshot_meta_from_pb(
    meta: pb::SnapshotMeta,
) -> Result<SnapshotMetaOf<TypeConfig>, CorruptRaftState> {
    let what = "snapshot meta";
    let stored = meta
        .last_membership
        .ok_or_else(|| corrupt(what, "no membership"))?;
    let membership = stored
        .membership
        .ok_or_else(|| corrupt(what, "no membership in the stored membership"))?;
    let log_id: Option<LogId> = stored.log_id.as_ref().map(log_id_from_pb);
    Ok(SnapshotMetaOf::<TypeConfig> {
        last_log_id: meta.last_log_id.as_ref().map(log_id_from_pb),
        last_membership: StoredMembership::new(log_id, membership_from_pb(membership)?),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use openraft::BasicNode;
    use openraft::impls::leader_id_adv::LeaderId;
    use proptest::prelude::*;

    use super::*;
    use crate::raft::types::{Command, Entry, Membership, NodeId, Payload};

    fn log_id(term: u64, node: u64, index: u64) -> LogId {
        LogId::new(
            LeaderId {
                term,
                node_id: node,
            },
            index,
        )
    }

    /// Voters {1, 2} moving to {1, 2, 3}, with learner 4.
    fn joint() -> Membership {
        let nodes: BTreeMap<NodeId, BasicNode> = (1..=4)
            .map(|id| (id, BasicNode::new(format!("127.0.0.1:710{id}"))))
            .collect();
        Membership::new(
            vec![BTreeSet::from([1, 2]), BTreeSet::from([1, 2, 3])],
            nodes,
        )
        .unwrap()
    }

    /// One entry of each payload kind, and an empty command.
    fn entries() -> Vec<Entry> {
        [
            Payload::Blank,
            Payload::Normal(Command::new(Bytes::from_static(b"\0put\xff"), false)),
            Payload::Normal(Command::new(Bytes::new(), false)),
            Payload::Normal(Command::new(Bytes::from_static(b"synced"), true)),
            Payload::Membership(joint()),
        ]
        .into_iter()
        .zip(11..)
        .map(|(payload, index)| Entry {
            log_id: log_id(7, 3, index),
            payload,
        })
        .collect()
    }

    fn snapshot(meta: SnapshotMetaOf<TypeConfig>, data: &'static [u8]) -> RaftRequest {
        RaftRequest::FullSnapshot {
            vote: Vote::new_committed(8, 2),
            snapshot: SnapshotOf::<TypeConfig, Bytes> {
                meta,
                snapshot: Bytes::from_static(data),
            },
        }
    }

    /// Requests of every kind, with and without their optional parts.
    fn requests() -> Vec<RaftRequest> {
        vec![
            RaftRequest::AppendEntries(AppendEntriesRequest {
                vote: Vote::new_committed(7, 3),
                prev_log_id: Some(log_id(6, 1, 10)),
                entries: entries(),
                leader_commit: Some(log_id(6, 1, 9)),
            }),
            // A heartbeat to an empty log.
            RaftRequest::AppendEntries(AppendEntriesRequest {
                vote: Vote::new_committed(1, 1),
                prev_log_id: None,
                entries: vec![],
                leader_commit: None,
            }),
            RaftRequest::Vote(VoteRequest::new(
                Vote::new(5, 2),
                Some(log_id(4, 1, 1 << 40)),
            )),
            RaftRequest::Vote(VoteRequest {
                vote: Vote::new(1, 3),
                last_log_id: None,
                leadership_transfer: true,
            }),
            RaftRequest::PreVote(VoteRequest::new(Vote::new(5, 2), None)),
            RaftRequest::PreVote(VoteRequest::new(Vote::new(9, 1), Some(log_id(8, 3, 77)))),
            snapshot(
                SnapshotMetaOf::<TypeConfig> {
                    last_log_id: Some(log_id(7, 3, 14)),
                    last_membership: StoredMembership::new(Some(log_id(7, 3, 14)), joint()),
                },
                b"\x01snapshot\0bytes",
            ),
            // The initial, empty snapshot: nothing applied, no membership.
            snapshot(SnapshotMetaOf::<TypeConfig>::default(), b""),
            RaftRequest::TransferLeader(TransferLeaderRequest::new(
                Vote::new_committed(4, 1),
                2,
                Some(log_id(4, 1, 99)),
            )),
            RaftRequest::TransferLeader(TransferLeaderRequest::new(
                Vote::new_committed(1, 3),
                1,
                None,
            )),
        ]
    }

    fn responses() -> Vec<RaftResponse> {
        vec![
            RaftResponse::AppendEntries(AppendEntriesResponse::Success),
            RaftResponse::AppendEntries(AppendEntriesResponse::PartialSuccess(None)),
            RaftResponse::AppendEntries(AppendEntriesResponse::PartialSuccess(Some(log_id(
                7, 3, 12,
            )))),
            RaftResponse::AppendEntries(AppendEntriesResponse::Conflict),
            RaftResponse::AppendEntries(AppendEntriesResponse::HigherVote(Vote::new(9, 2))),
            RaftResponse::AppendEntries(AppendEntriesResponse::HigherVote(Vote::new_committed(
                9, 2,
            ))),
            RaftResponse::Vote(VoteResponse::new(Vote::new(5, 2), None, true)),
            RaftResponse::Vote(VoteResponse::new(
                Vote::new_committed(6, 1),
                Some(log_id(6, 1, 30)),
                false,
            )),
            RaftResponse::Snapshot(SnapshotResponse::new(Vote::new_committed(8, 2))),
            RaftResponse::Error("raft of fragment 3 is shutting down".to_owned()),
            RaftResponse::Error(String::new()),
            RaftResponse::TransferLeader,
        ]
    }

    /// Whether two requests are the same, field by field (openraft's
    /// append request and snapshot have no `PartialEq`).
    fn same(a: &RaftRequest, b: &RaftRequest) -> bool {
        match (a, b) {
            (RaftRequest::AppendEntries(a), RaftRequest::AppendEntries(b)) => {
                a.vote == b.vote
                    && a.prev_log_id == b.prev_log_id
                    && a.entries == b.entries
                    && a.leader_commit == b.leader_commit
            }
            (RaftRequest::Vote(a), RaftRequest::Vote(b))
            | (RaftRequest::PreVote(a), RaftRequest::PreVote(b)) => a == b,
            (
                RaftRequest::FullSnapshot {
                    vote: vote_a,
                    snapshot: a,
                },
                RaftRequest::FullSnapshot {
                    vote: vote_b,
                    snapshot: b,
                },
            ) => vote_a == vote_b && a.meta == b.meta && a.snapshot == b.snapshot,
            (RaftRequest::TransferLeader(a), RaftRequest::TransferLeader(b)) => {
                a.from_leader() == b.from_leader()
                    && a.to_node_id() == b.to_node_id()
                    && a.last_log_id() == b.last_log_id()
            }
            _ => false,
        }
    }

    #[test]
    fn every_request_round_trips() {
        for group in [GroupId::fragment(0), GroupId::fragment(41), GroupId::META] {
            for request in requests() {
                let (decoded_group, decoded) = RaftRequest::decode(&request.encode(group)).unwrap();
                assert_eq!(decoded_group, group);
                assert!(same(&decoded, &request), "{decoded:?} != {request:?}");
            }
        }
    }

    #[test]
    fn every_response_round_trips() {
        for response in responses() {
            assert_eq!(RaftResponse::decode(&response.encode()).unwrap(), response);
        }
    }

    #[test]
    fn a_vote_and_a_pre_vote_stay_apart() {
        let request = VoteRequest::new(Vote::new(5, 2), None);
        let vote = RaftRequest::Vote(request.clone()).encode(GroupId::META);
        let pre_vote = RaftRequest::PreVote(request).encode(GroupId::META);
        assert_ne!(vote, pre_vote);
        assert!(matches!(
            RaftRequest::decode(&pre_vote).unwrap().1,
            RaftRequest::PreVote(_)
        ));
    }

    #[test]
    fn garbage_and_missing_parts_are_reported_as_corruption() {
        let error = RaftRequest::decode(b"\xff\xff\xff").unwrap_err();
        assert_eq!(error.what, "request");
        assert_eq!(
            RaftResponse::decode(b"\xff\xff\xff").unwrap_err().what,
            "response"
        );

        // An empty message is a valid protobuf without its RPC.
        assert_eq!(RaftRequest::decode(b"").unwrap_err().reason, "no rpc");
        assert_eq!(RaftResponse::decode(b"").unwrap_err().reason, "no response");

        let rpc = |rpc| pb::RaftRequest {
            group: 3,
            rpc: Some(rpc),
        };
        use pb::raft_request::Rpc;
        let no_vote = rpc(Rpc::PreVote(pb::VoteRequest::default())).encode_to_vec();
        let error = RaftRequest::decode(&no_vote).unwrap_err();
        assert_eq!(
            (error.what, error.reason.as_str()),
            ("pre-vote request", "no vote")
        );

        let no_payload = rpc(Rpc::AppendEntries(pb::AppendEntries {
            vote: Some(pb::Vote::default()),
            entries: vec![pb::Entry {
                log_id: Some(pb::LogId::default()),
                payload: None,
                sync: false,
            }],
            ..Default::default()
        }))
        .encode_to_vec();
        let error = RaftRequest::decode(&no_payload).unwrap_err();
        assert_eq!(
            (error.what, error.reason.as_str()),
            ("log entry", "no payload")
        );

        let no_meta = rpc(Rpc::FullSnapshot(pb::FullSnapshot {
            vote: Some(pb::Vote::default()),
            ..Default::default()
        }))
        .encode_to_vec();
        assert_eq!(RaftRequest::decode(&no_meta).unwrap_err().what, "snapshot");

        // Voter 5 has no node: openraft refuses such a membership.
        let bad_membership = rpc(Rpc::FullSnapshot(pb::FullSnapshot {
            vote: Some(pb::Vote::default()),
            meta: Some(pb::SnapshotMeta {
                last_log_id: None,
                last_membership: Some(pb::StoredMembership {
                    log_id: None,
                    membership: Some(pb::Membership {
                        configs: vec![pb::VoterSet { ids: vec![5] }],
                        nodes: vec![],
                    }),
                }),
            }),
            data: Bytes::new(),
        }))
        .encode_to_vec();
        assert_eq!(
            RaftRequest::decode(&bad_membership).unwrap_err().what,
            "membership"
        );

        let no_outcome = pb::RaftResponse {
            response: Some(pb::raft_response::Response::AppendEntries(
                pb::AppendEntriesResponse { outcome: None },
            )),
        }
        .encode_to_vec();
        let error = RaftResponse::decode(&no_outcome).unwrap_err();
        assert_eq!(
            (error.what, error.reason.as_str()),
            ("append entries response", "no outcome")
        );
    }

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: 1000,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    /// The encoding of a valid message of every kind, requests and
    /// responses alike.
    fn valid_messages() -> Vec<Vec<u8>> {
        requests()
            .iter()
            .map(|request| request.encode(GroupId::fragment(7)))
            .chain(responses().iter().map(RaftResponse::encode))
            .collect()
    }

    proptest! {
        #![proptest_config(config())]

        /// Whatever bytes arrive, decoding answers a message or an error.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = RaftRequest::decode(&bytes);
            let _ = RaftResponse::decode(&bytes);
        }

        /// Nor do valid messages with a byte changed and cut short, which
        /// reach deeper into the decoders than random bytes.
        #[test]
        fn mutated_messages_never_panic(
            which in any::<prop::sample::Index>(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let messages = valid_messages();
            let mut bytes = messages[which.index(messages.len())].clone();
            let at = at.index(bytes.len());
            bytes[at] = byte;
            bytes.truncate(cut.index(bytes.len() + 1));
            let _ = RaftRequest::decode(&bytes);
            let _ = RaftResponse::decode(&bytes);
        }
    }
}
