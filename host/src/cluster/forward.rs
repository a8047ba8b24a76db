//! Requests one member forwards to another (a write to its fragment's
//! leader, a read index, a ping, a metadata change and the wait for it, a
//! page of a fragment held elsewhere, a redrive or discard of expiry
//! events) and their answers, to and from
//! `ebb.cluster.v1`; and [`PageServer`], the executor that answers pages.

use std::sync::Arc;

use bytes::Bytes;
use ebb_proto::Message;
use ebb_proto::cluster::v1 as pb;
use ebb_proto::query::v1 as query;
use futures::future::BoxFuture;

use super::error::ClusterError;
use super::outbox::{OutboxDone, OutboxRequest};
use crate::fragment::command::{condition_message, condition_of, version_message, version_of};
use crate::fragment::state::Mutation;
use crate::names::{TableName, validate_key};
use crate::raft::NodeId;
use crate::record::Version;
use crate::store::FragmentId;
use crate::write::{Condition, Durability, Origin};

/// A request for another member.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Forward {
    /// A client write for the leader of `fragment`.
    Write {
        /// The fragment of the key.
        fragment: FragmentId,
        /// The table.
        table: TableName,
        /// The key.
        key: Arc<str>,
        /// What to do.
        mutation: Mutation,
        /// What the key's record must be.
        condition: Condition,
        /// Who makes it (a change handler's writes emit no change events).
        origin: Origin,
        /// When to acknowledge.
        durability: Durability,
        /// The member the client sent the write to (`None`: not said).
        via: Option<NodeId>,
    },
    /// The read index of `fragment`, from its leader.
    ReadIndex {
        /// The fragment.
        fragment: FragmentId,
    },
    /// Whether the member is up.
    Ping,
    /// Member `node` is stopping cleanly: hand it no leadership (answered
    /// with a `Pong`).
    Stopping {
        /// The member.
        node: NodeId,
    },
    /// A metadata command (`ebb.cluster.v1.MetaCommand` bytes) for the
    /// metadata group's leader to propose.
    ProposeMeta(Bytes),
    /// Whether the member applied entry `index` of the metadata group,
    /// waiting up to `wait_ms` for it.
    AwaitMeta {
        /// The entry.
        index: u64,
        /// The longest wait, in ms.
        wait_ms: u64,
    },
    /// A linearizable read of one key, for the leader of `fragment`.
    Get {
        /// The fragment of the key.
        fragment: FragmentId,
        /// The table.
        table: TableName,
        /// The key.
        key: Arc<str>,
    },
    /// A page of a fragment the asking member holds no replica of: opening
    /// a scan for the fragment's leader, or continuing one on the member
    /// that pinned it.
    Page(Box<query::PageRequest>),
    /// A redrive or discard of one table's expiry events in one fragment,
    /// for the fragment's leader.
    Outbox(OutboxRequest),
}

/// A member's answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// The write applied with this version.
    Written(Version),
    /// A delete found nothing visible.
    NotFound,
    /// A write's condition did not hold; the key's visible version, if any.
    ConditionFailed(Option<Version>),
    /// The read index.
    ReadIndex(u64),
    /// The member is up.
    Pong(NodeId),
    /// A metadata command committed at `index`; what applying it answered
    /// on the leader (`ebb.cluster.v1.MetaOutcome` bytes).
    MetaCommitted {
        /// The outcome's bytes.
        outcome: Bytes,
        /// Its entry in the metadata group's log.
        index: u64,
    },
    /// Whether the member applied the metadata entry asked about.
    MetaApplied(bool),
    /// The visible record a `Get` found.
    Found {
        /// Its value.
        value: Bytes,
        /// Its version.
        version: Version,
        /// Its deadline, if any.
        expires_at_ms: Option<u64>,
    },
    /// A page (or the failure of a query's page, in its `error`).
    Page(Box<query::PageResponse>),
    /// What an outbox request did.
    OutboxDone(OutboxDone),
    /// The member could not serve the request.
    Failure {
        /// An error code of the HTTP contract, or `not_leader`.
        code: String,
        /// What happened, for people.
        message: String,
        /// The leader as the member knows it, for `not_leader`.
        leader: Option<NodeId>,
    },
}

/// A member's executor, serving the pages other members ask of it.
pub trait PageServer: Send + Sync {
    /// Open a scan (`request.scan` 0: this member leads the fragment and
    /// confirmed it) or run the next page of one it pinned. Query failures
    /// travel in the response's `error`; `Err` is for the member itself
    /// (it is shutting down).
    fn serve(
        &self,
        request: query::PageRequest,
    ) -> BoxFuture<'_, Result<query::PageResponse, ClusterError>>;

    /// Scans pinned now.
    fn pinned(&self) -> usize;
}

/// Bytes that are not a forwarded request or answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed cluster message: {0}")]
pub struct MalformedForward(String);

fn malformed(reason: impl ToString) -> MalformedForward {
    MalformedForward(reason.to_string())
}

impl Forward {
    /// The `ebb.cluster.v1.ForwardRequest` bytes.
    pub(crate) fn encode(&self) -> Bytes {
        let request = match self {
            Forward::Write {
                fragment,
                table,
                key,
                mutation,
                condition,
                origin,
                durability,
                via,
            } => pb::forward_request::Request::Write(pb::Write {
                via: via.unwrap_or(0),
                quiet: *origin == Origin::ChangeHandler,
                fragment: *fragment,
                table: table.as_str().to_string(),
                key: key.to_string(),
                mutation: Some(match mutation {
                    Mutation::Put {
                        value,
                        expires_at_ms,
                    } => pb::write::Mutation::Put(pb::Put {
                        value: value.clone(),
                        expires_at_ms: *expires_at_ms,
                    }),
                    Mutation::Delete => pb::write::Mutation::Delete(pb::Delete {}),
                    Mutation::Retime { expires_at_ms } => pb::write::Mutation::Retime(pb::Retime {
                        expires_at_ms: *expires_at_ms,
                    }),
                }),
                condition: condition_message(condition),
                durability: match durability {
                    Durability::Memory => pb::Durability::Memory,
                    Durability::Wal => pb::Durability::Wal,
                    Durability::Sync => pb::Durability::Sync,
                } as i32,
            }),
            Forward::ReadIndex { fragment } => {
                pb::forward_request::Request::ReadIndex(pb::ReadIndex {
                    fragment: *fragment,
                })
            }
            Forward::Ping => pb::forward_request::Request::Ping(pb::Ping {}),
            Forward::Stopping { node } => {
                pb::forward_request::Request::Stopping(pb::Stopping { node: *node })
            }
            Forward::ProposeMeta(command) => {
                pb::forward_request::Request::ProposeMeta(pb::ProposeMeta {
                    command: command.clone(),
                })
            }
            Forward::AwaitMeta { index, wait_ms } => {
                pb::forward_request::Request::AwaitMeta(pb::AwaitMeta {
                    index: *index,
                    wait_ms: *wait_ms,
                })
            }
            Forward::Get {
                fragment,
                table,
                key,
            } => pb::forward_request::Request::Get(pb::Get {
                fragment: *fragment,
                table: table.as_str().to_string(),
                key: key.to_string(),
            }),
            Forward::Page(page) => pb::forward_request::Request::Page((**page).clone()),
            Forward::Outbox(request) => pb::forward_request::Request::Outbox(request.to_pb()),
        };
        pb::ForwardRequest {
            request: Some(request),
        }
        .encode_to_vec()
        .into()
    }

    /// Decode [`Self::encode`]'s bytes; anything else is malformed.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, MalformedForward> {
        let request = pb::ForwardRequest::decode(bytes).map_err(malformed)?;
        Ok(
            match request.request.ok_or_else(|| malformed("no request"))? {
                pb::forward_request::Request::Write(write) => {
                    validate_key(&write.key).map_err(malformed)?;
                    let durability = match pb::Durability::try_from(write.durability) {
                        Ok(pb::Durability::Memory) => Durability::Memory,
                        Ok(pb::Durability::Wal) => Durability::Wal,
                        Ok(pb::Durability::Sync) => Durability::Sync,
                        _ => return Err(malformed("a write without a durability")),
                    };
                    Forward::Write {
                        fragment: write.fragment,
                        table: TableName::system(&write.table).map_err(malformed)?,
                        key: Arc::from(write.key),
                        mutation: match write.mutation.ok_or_else(|| malformed("no mutation"))? {
                            pb::write::Mutation::Put(put) => Mutation::Put {
                                value: put.value,
                                expires_at_ms: put.expires_at_ms,
                            },
                            pb::write::Mutation::Delete(_) => Mutation::Delete,
                            pb::write::Mutation::Retime(retime) => Mutation::Retime {
                                expires_at_ms: retime.expires_at_ms,
                            },
                        },
                        condition: condition_of(write.condition),
                        origin: if write.quiet {
                            Origin::ChangeHandler
                        } else {
                            Origin::Client
                        },
                        durability,
                        via: (write.via != 0).then_some(write.via),
                    }
                }
                pb::forward_request::Request::ReadIndex(read) => Forward::ReadIndex {
                    fragment: read.fragment,
                },
                pb::forward_request::Request::Ping(_) => Forward::Ping,
                pb::forward_request::Request::Stopping(stopping) => Forward::Stopping {
                    node: stopping.node,
                },
                pb::forward_request::Request::ProposeMeta(propose) => {
                    Forward::ProposeMeta(propose.command)
                }
                pb::forward_request::Request::AwaitMeta(wait) => Forward::AwaitMeta {
                    index: wait.index,
                    wait_ms: wait.wait_ms,
                },
                pb::forward_request::Request::Get(get) => {
                    validate_key(&get.key).map_err(malformed)?;
                    Forward::Get {
                        fragment: get.fragment,
                        table: TableName::system(&get.table).map_err(malformed)?,
                        key: Arc::from(get.key),
                    }
                }
                pb::forward_request::Request::Page(page) => Forward::Page(Box::new(page)),
                pb::forward_request::Request::Outbox(op) => {
                    Forward::Outbox(OutboxRequest::from_pb(op).ok_or_else(|| {
                        malformed("an outbox request without a table or an action")
                    })?)
                }
            },
        )
    }
}

impl Answer {
    /// A failure with `code`, saying `message`.
    pub(crate) fn failure(code: &str, message: impl ToString) -> Self {
        Answer::Failure {
            code: code.to_string(),
            message: message.to_string(),
            leader: None,
        }
    }

    /// The `ebb.cluster.v1.ForwardResponse` bytes (consuming the answer: a
    /// page's rows move into the message rather than being copied).
    pub(crate) fn encode(self) -> Bytes {
        let response = match self {
            Answer::Written(version) => {
                pb::forward_response::Response::Written(version_message(&version))
            }
            Answer::Found {
                value,
                version,
                expires_at_ms,
            } => pb::forward_response::Response::Found(pb::Found {
                value,
                version: Some(version_message(&version)),
                expires_at_ms,
            }),
            Answer::NotFound => pb::forward_response::Response::NotFound(pb::NotFound {}),
            Answer::ConditionFailed(current) => {
                pb::forward_response::Response::ConditionFailed(pb::ConditionFailed {
                    current: current.as_ref().map(version_message),
                })
            }
            Answer::ReadIndex(index) => {
                pb::forward_response::Response::ReadIndex(pb::ReadIndexAnswer { index })
            }
            Answer::Pong(node_id) => pb::forward_response::Response::Pong(pb::Pong { node_id }),
            Answer::MetaCommitted { outcome, index } => {
                pb::forward_response::Response::MetaCommitted(pb::MetaCommitted { outcome, index })
            }
            Answer::MetaApplied(applied) => {
                pb::forward_response::Response::MetaApplied(pb::MetaApplied { applied })
            }
            Answer::Page(page) => pb::forward_response::Response::Page(*page),
            Answer::OutboxDone(done) => pb::forward_response::Response::Outbox(done.to_pb()),
            Answer::Failure {
                code,
                message,
                leader,
            } => pb::forward_response::Response::Failure(pb::Failure {
                code,
                message,
                leader: leader.unwrap_or(0),
            }),
        };
        pb::ForwardResponse {
            response: Some(response),
        }
        .encode_to_vec()
        .into()
    }

    /// Decode [`Self::encode`]'s bytes; anything else is malformed.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, MalformedForward> {
        let response = pb::ForwardResponse::decode(bytes).map_err(malformed)?;
        Ok(
            match response.response.ok_or_else(|| malformed("no response"))? {
                pb::forward_response::Response::Written(written) => {
                    Answer::Written(version_of(written))
                }
                pb::forward_response::Response::Found(found) => Answer::Found {
                    value: found.value,
                    version: version_of(
                        found
                            .version
                            .ok_or_else(|| malformed("a found record without a version"))?,
                    ),
                    expires_at_ms: found.expires_at_ms,
                },
                pb::forward_response::Response::NotFound(_) => Answer::NotFound,
                pb::forward_response::Response::ConditionFailed(failed) => {
                    Answer::ConditionFailed(failed.current.map(version_of))
                }
                pb::forward_response::Response::ReadIndex(read) => Answer::ReadIndex(read.index),
                pb::forward_response::Response::Pong(pong) => Answer::Pong(pong.node_id),
                pb::forward_response::Response::MetaCommitted(committed) => Answer::MetaCommitted {
                    outcome: committed.outcome,
                    index: committed.index,
                },
                pb::forward_response::Response::MetaApplied(applied) => {
                    Answer::MetaApplied(applied.applied)
                }
                pb::forward_response::Response::Page(page) => Answer::Page(Box::new(page)),
                pb::forward_response::Response::Outbox(done) => Answer::OutboxDone(
                    OutboxDone::from_pb(done)
                        .ok_or_else(|| malformed("a listed dead letter that does not decode"))?,
                ),
                pb::forward_response::Response::Failure(failure) => Answer::Failure {
                    code: failure.code,
                    message: failure.message,
                    leader: (failure.leader != 0).then_some(failure.leader),
                },
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::outbox::OutboxAction;

    #[test]
    fn requests_and_answers_round_trip() {
        let requests = [
            Forward::Write {
                fragment: 3,
                table: TableName::new("users").unwrap(),
                key: Arc::from("k1"),
                mutation: Mutation::Put {
                    value: Bytes::from_static(b"v"),
                    expires_at_ms: Some(9),
                },
                condition: Condition::Absent,
                origin: Origin::ChangeHandler,
                durability: Durability::Sync,
                via: Some(2),
            },
            Forward::Write {
                fragment: 0,
                table: TableName::new("t").unwrap(),
                key: Arc::from("gone"),
                mutation: Mutation::Delete,
                condition: Condition::Version(Version {
                    hlc_ms: 3,
                    counter: 1,
                    writer: Arc::from("n2"),
                }),
                origin: Origin::Client,
                durability: Durability::Memory,
                via: None,
            },
            Forward::Write {
                fragment: 1,
                table: TableName::new("t").unwrap(),
                key: Arc::from("lease"),
                mutation: Mutation::Retime {
                    expires_at_ms: None,
                },
                condition: Condition::Always,
                origin: Origin::Client,
                durability: Durability::Wal,
                via: Some(1),
            },
            Forward::ReadIndex { fragment: 7 },
            Forward::Ping,
            Forward::Stopping { node: 3 },
            Forward::Get {
                fragment: 2,
                table: TableName::new("t").unwrap(),
                key: Arc::from("k"),
            },
            Forward::ProposeMeta(Bytes::from_static(b"\x0a\x00")),
            Forward::AwaitMeta {
                index: 12,
                wait_ms: 500,
            },
            Forward::Page(Box::new(query::PageRequest {
                sql: "SELECT key FROM t".into(),
                table: "t".into(),
                fragment: 3,
                snapshot_ms: 77,
                scan: 9,
                resume_after: Some("k".into()),
                ..Default::default()
            })),
            Forward::Outbox(OutboxRequest {
                table: TableName::new("jobs").unwrap(),
                fragment: 5,
                action: OutboxAction::Redrive {
                    ids: Some(vec![vec![1, 2], vec![3]]),
                    limit: 10_000,
                },
            }),
            Forward::Outbox(OutboxRequest {
                table: TableName::new("jobs").unwrap(),
                fragment: 0,
                action: OutboxAction::Redrive {
                    ids: None,
                    limit: 7,
                },
            }),
            Forward::Outbox(OutboxRequest {
                table: TableName::new("jobs").unwrap(),
                fragment: 2,
                action: OutboxAction::Discard,
            }),
            Forward::Outbox(OutboxRequest {
                table: TableName::new("jobs").unwrap(),
                fragment: 4,
                action: OutboxAction::ListDeadLetters {
                    after: Some(vec![0; 32]),
                    limit: 1000,
                },
            }),
            Forward::Outbox(OutboxRequest {
                table: TableName::new("jobs").unwrap(),
                fragment: 4,
                action: OutboxAction::ListDeadLetters {
                    after: None,
                    limit: 1,
                },
            }),
        ];
        for request in requests {
            assert_eq!(Forward::decode(&request.encode()).unwrap(), request);
        }
        let answers = [
            Answer::Written(Version {
                hlc_ms: 5,
                counter: 2,
                writer: Arc::from("node-a"),
            }),
            Answer::NotFound,
            Answer::ConditionFailed(None),
            Answer::ConditionFailed(Some(Version {
                hlc_ms: 5,
                counter: 0,
                writer: Arc::from("n3"),
            })),
            Answer::ReadIndex(42),
            Answer::Pong(3),
            Answer::Found {
                value: Bytes::from_static(b"\0v"),
                version: Version {
                    hlc_ms: 1,
                    counter: 0,
                    writer: Arc::from("w"),
                },
                expires_at_ms: None,
            },
            Answer::Failure {
                code: "not_leader".into(),
                message: "ask 2".into(),
                leader: Some(2),
            },
            Answer::failure("no_quorum", "x"),
            Answer::MetaCommitted {
                outcome: Bytes::from_static(b"\x12\x00"),
                index: 9,
            },
            Answer::MetaApplied(true),
            Answer::Page(Box::new(query::PageResponse {
                row_keys: vec!["a".into()],
                scan: 4,
                visible: 12,
                done: true,
                ..Default::default()
            })),
            Answer::OutboxDone(OutboxDone {
                count: 12,
                more: true,
                listed: Vec::new(),
            }),
            Answer::OutboxDone(OutboxDone {
                count: 1,
                more: false,
                listed: vec![crate::store::outbox::PendingEvent::new(
                    4,
                    17,
                    &TableName::new("jobs").unwrap(),
                    "k1",
                    &crate::record::Record::live(
                        Version {
                            hlc_ms: 3,
                            counter: 1,
                            writer: Arc::from("n2"),
                        },
                        Bytes::from_static(b"payload"),
                        Some(9),
                    ),
                    10,
                )],
            }),
        ];
        for answer in answers {
            assert_eq!(Answer::decode(&answer.clone().encode()).unwrap(), answer);
        }
    }

    #[test]
    fn malformed_bytes_and_bad_fields_are_refused() {
        assert!(Forward::decode(b"\xff\xff").is_err());
        assert!(Forward::decode(&[]).is_err(), "an empty request");
        let bad_key = pb::ForwardRequest {
            request: Some(pb::forward_request::Request::Write(pb::Write {
                fragment: 0,
                table: "t".into(),
                key: String::new(),
                mutation: Some(pb::write::Mutation::Delete(pb::Delete {})),
                condition: None,
                quiet: false,
                durability: pb::Durability::Wal as i32,
                via: 0,
            })),
        };
        assert!(Forward::decode(&bad_key.encode_to_vec()).is_err());
        assert!(Answer::decode(&[]).is_err());
    }
}
