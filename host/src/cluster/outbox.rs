//! Redrives and discards of one table's expiry events in one fragment, as
//! a request for the fragment's leader ([`OutboxRequest`], carried as
//! `ebb.cluster.v1.OutboxOp`), and [`OutboxServer`], the member's expiry
//! machinery that carries them out.

use ebb_proto::cluster::v1 as pb;
use futures::future::BoxFuture;

use super::error::ClusterError;
use crate::names::TableName;
use crate::store::FragmentId;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutboxDone {
    /// Events moved or deleted.
    pub count: usize,
    /// Whether more remain (a redrive that met its limit).
    pub more: bool,
}

/// A member's expiry machinery, carrying out [`OutboxRequest`]s for the
/// fragments it leads.
pub trait OutboxServer: Send + Sync {
    /// Carry out `request` on this member, which leads the fragment and
    /// has applied every entry committed before: read the events from its
    /// store and propose the writes to the fragment's group (see
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
            },
        })
    }
}
