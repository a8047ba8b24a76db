//! Raft messages between nodes: the [`Transport`] the server supplies (bytes
//! to a member and back) and openraft's network over it, one client per
//! group and target, all sharing the transport's connections.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use openraft::BasicNode;
use openraft::errors::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::v2::RaftNetworkV2;
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::alias::{SnapshotOf, VoteOf};

use super::machine::SnapshotData;
use super::types::{GroupId, NodeId, TypeConfig};
use super::wire::{RaftRequest, RaftResponse};

/// Which of a node's internal services a message is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// A Raft RPC of one group (`ebb.raft.v1.RaftRequest`).
    Raft,
    /// A client request forwarded to a fragment's leader
    /// (`ebb.cluster.v1.ForwardRequest`).
    Forward,
    /// A forwarded request its leader answers within about one Raft
    /// round (a write, a read index, a linearizable read): the transport
    /// may carry it in one message with others of its kind to the same
    /// member, each still answered on its own.
    ForwardShort,
}

/// A member could not be reached or refused the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The id is not a member.
    #[error("node {0} is not a member of the cluster")]
    UnknownNode(NodeId),
    /// No connection, or it broke before the answer.
    #[error("node {node} is unreachable: {reason}")]
    Unreachable {
        /// The member.
        node: NodeId,
        /// What failed.
        reason: String,
    },
    /// No answer within the deadline.
    #[error("node {node} did not answer within {ms} ms")]
    Timeout {
        /// The member.
        node: NodeId,
        /// The deadline.
        ms: u64,
    },
    /// The member answered with a refusal (a wrong secret, not a member).
    #[error("node {node} refused the message: {reason}")]
    Refused {
        /// The member.
        node: NodeId,
        /// Its reason.
        reason: String,
    },
}

/// Carries one message to a member and brings back its answer. Implemented
/// by the server over its cluster port; every group and service shares it.
pub trait Transport: Send + Sync + 'static {
    /// Send `body` to `service` of member `to`; its answer, or why there is
    /// none within `timeout`.
    fn call(
        &self,
        to: NodeId,
        service: Service,
        body: Bytes,
        timeout: Duration,
    ) -> BoxFuture<'static, Result<Bytes, TransportError>>;
}

/// openraft's network factory for one group.
pub(crate) struct GroupNetwork {
    pub(crate) group: GroupId,
    pub(crate) transport: Arc<dyn Transport>,
}

/// One group's client of one target.
pub(crate) struct PeerClient {
    group: GroupId,
    to: NodeId,
    transport: Arc<dyn Transport>,
}

impl RaftNetworkFactory<TypeConfig> for GroupNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, _: &BasicNode) -> PeerClient {
        PeerClient {
            group: self.group,
            to: target,
            transport: self.transport.clone(),
        }
    }
}

/// A message that could not be carried or answered, as openraft's
/// "unreachable" (it backs off and retries).
fn unreachable(error: impl std::error::Error + 'static) -> Unreachable<TypeConfig> {
    Unreachable::new(&error)
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Remote(String);

impl PeerClient {
    async fn call(
        &self,
        request: RaftRequest,
        option: &RPCOption,
    ) -> Result<RaftResponse, Unreachable<TypeConfig>> {
        let body = Bytes::from(request.encode(self.group));
        let timeout = option.hard_ttl();
        let answer = self
            .transport
            .call(self.to, Service::Raft, body, timeout)
            .await
            .map_err(unreachable)?;
        let response = RaftResponse::decode(&answer).map_err(unreachable)?;
        match response {
            RaftResponse::Error(reason) => Err(unreachable(Remote(reason))),
            other => Ok(other),
        }
    }

    fn unexpected(&self, what: &str) -> Unreachable<TypeConfig> {
        unreachable(Remote(format!(
            "node {} answered {what} with another message",
            self.to
        )))
    }
}

impl RaftNetworkV2<TypeConfig> for PeerClient {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        match self.call(RaftRequest::AppendEntries(rpc), &option).await? {
            RaftResponse::AppendEntries(response) => Ok(response),
            _ => Err(self.unexpected("append-entries").into()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        match self.call(RaftRequest::Vote(rpc), &option).await? {
            RaftResponse::Vote(response) => Ok(response),
            _ => Err(self.unexpected("vote").into()),
        }
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        match self.call(RaftRequest::PreVote(rpc), &option).await? {
            RaftResponse::Vote(response) => Ok(response),
            _ => Err(self.unexpected("pre-vote").into()),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: VoteOf<TypeConfig>,
        snapshot: SnapshotOf<TypeConfig, SnapshotData>,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        // A deferred view is encoded here, on a blocking thread, only when
        // a follower needs it.
        let snapshot = SnapshotOf::<TypeConfig, Bytes> {
            meta: snapshot.meta,
            snapshot: snapshot.snapshot.into_bytes().await.map_err(unreachable)?,
        };
        match self
            .call(RaftRequest::FullSnapshot { vote, snapshot }, &option)
            .await?
        {
            RaftResponse::Snapshot(response) => Ok(response),
            _ => Err(self.unexpected("snapshot").into()),
        }
    }

    async fn transfer_leader(
        &mut self,
        request: TransferLeaderRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<TypeConfig>, RPCError<TypeConfig>> {
        match self
            .call(RaftRequest::TransferLeader(request), &option)
            .await?
        {
            RaftResponse::TransferLeader => Ok(Ok(())),
            _ => Err(self.unexpected("transfer-leader").into()),
        }
    }
}
