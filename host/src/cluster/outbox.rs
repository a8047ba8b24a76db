//! Redrives, discards and dead-letter listings of one table's expiry
//! events in one fragment, as a request for the fragment's leader
//! ([`OutboxRequest`], carried as `ebb.cluster.v1.OutboxOp`), and
//! [`OutboxServer`], the member's expiry machinery that carries them out.

use ebb_proto::cluster::v1 as pb;
use futures::future::BoxFuture;

use super::error::ClusterError;
use crate::names::TableName;
use crate::store::{FragmentId, PendingEvent};

/// What to do with one table's expiry events in one fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboxAction {
    /// Move dead letters back into the outbox as fresh events: those with
    /// these ids (the ones of this fragment), or else up to `limit`.
    Redrive {
        /// Event ids, or `None` for the first `limit` by id.
        ids: Option<Vec<Vec<u8>>>,
        /// Most to move.
        limit: usize,
    },
    /// Delete the pending events (the table was unbound).
    Discard,
    /// Read the first `limit` dead letters with ids after `after`, in id
    /// order; nothing changes.
    ListDeadLetters {
        /// The id to continue after, or `None` for the first.
        after: Option<Vec<u8>>,
        /// Most to list.
        limit: usize,
    },
}

/// An [`OutboxAction`] on `table`'s events in `fragment`, for the
/// fragment's leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRequest {
    /// The table.
    pub table: TableName,
    /// The fragment.
    pub fragment: FragmentId,
    /// What to do.
    pub action: OutboxAction,
}

/// What an [`OutboxRequest`] did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OutboxDone {
    /// Events moved, deleted or listed.
    pub count: usize,
    /// Whether more remain (a redrive or listing that met its limit).
    pub more: bool,
    /// A listing's dead letters, in id order (empty for other actions).
    pub listed: Vec<PendingEvent>,
}

/// A member's expiry machinery, carrying out [`OutboxRequest`]s for the
/// fragments it leads.
pub trait OutboxServer: Send + Sync {
    /// Carry out `request` on this member, which leads the fragment and
    /// has applied every entry committed before: read the events from its
    /// store (all a listing does) and propose the writes to the fragment's
    /// group (see
    /// `Cluster::settle`). Fails with a code of the HTTP contract.
    fn serve(&self, request: OutboxRequest) -> BoxFuture<'_, Result<OutboxDone, ClusterError>>;
}

impl OutboxRequest {
    /// The `ebb.cluster.v1.OutboxOp` form.
    pub(super) fn to_pb(&self) -> pb::OutboxOp {
        pb::OutboxOp {
            table: self.table.as_str().to_string(),
            fragment: self.fragment,
            op: Some(match &self.action {
                OutboxAction::Redrive { ids, limit } => pb::outbox_op::Op::Redrive(pb::Redrive {
                    by_id: ids.is_some(),
                    ids: ids.iter().flatten().cloned().map(Into::into).collect(),
                    limit: u32::try_from(*limit).unwrap_or(u32::MAX),
                }),
                OutboxAction::Discard => pb::outbox_op::Op::Discard(pb::Discard {}),
                OutboxAction::ListDeadLetters { after, limit } => {
                    pb::outbox_op::Op::ListDeadLetters(pb::ListDeadLetters {
                        after: after.clone().unwrap_or_default().into(),
                        has_after: after.is_some(),
                        limit: u32::try_from(*limit).unwrap_or(u32::MAX),
                    })
                }
            }),
        }
    }

    /// From [`Self::to_pb`]'s form; `None` when it is not one.
    pub(super) fn from_pb(op: pb::OutboxOp) -> Option<Self> {
        Some(OutboxRequest {
            table: TableName::source(&op.table).ok()?,
            fragment: op.fragment,
            action: match op.op? {
                pb::outbox_op::Op::Redrive(redrive) => OutboxAction::Redrive {
                    ids: redrive
                        .by_id
                        .then(|| redrive.ids.into_iter().map(|id| id.to_vec()).collect()),
                    limit: redrive.limit as usize,
                },
                pb::outbox_op::Op::Discard(_) => OutboxAction::Discard,
                pb::outbox_op::Op::ListDeadLetters(list) => OutboxAction::ListDeadLetters {
                    after: list.has_after.then(|| list.after.to_vec()),
                    limit: list.limit as usize,
                },
            },
        })
    }
}

impl OutboxDone {
    /// The `ebb.cluster.v1.OutboxDone` form.
    pub(super) fn to_pb(&self) -> pb::OutboxDone {
        pb::OutboxDone {
            count: self.count as u64,
            more: self.more,
            listed: self
                .listed
                .iter()
                .map(|event| pb::DeadLetter {
                    key: event.key.clone().into(),
                    event: event.encode().into(),
                })
                .collect(),
        }
    }

    /// From [`Self::to_pb`]'s form; `None` when a listed dead letter does
    /// not decode.
    pub(super) fn from_pb(done: pb::OutboxDone) -> Option<Self> {
        Some(OutboxDone {
            count: done.count as usize,
            more: done.more,
            listed: done
                .listed
                .iter()
                .map(|dead| PendingEvent::decode(&dead.key, &dead.event).ok())
                .collect::<Option<_>>()?,
        })
    }
}
