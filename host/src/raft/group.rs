//! One Raft group on this node, in ebb's terms: start and form it, propose
//! a command, confirm a read, serve a peer's RPC, report its state, step
//! down and stop. The rest of the crate drives groups through this file
//! and never sees openraft's types.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use openraft::async_runtime::WatchReceiver;
use openraft::errors::{ClientWriteError, LinearizableReadError, RaftError};
use openraft::type_config::alias::SnapshotOf;
use openraft::{BasicNode, Config, LinearizerOption, Raft, SnapshotPolicy};

use super::log_store::LogStore;
use super::machine::{GroupMachine, SnapshotData, StateMachine};
use super::network::{GroupNetwork, Transport};
use super::types::{Command, GroupId, NodeId, TypeConfig};
use super::wire::{RaftRequest, RaftResponse};

/// Timing of every group of a node.
#[derive(Debug, Clone, Copy)]
pub struct GroupTiming {
    /// A leader's heartbeat interval.
    pub heartbeat: Duration,
    /// A follower that hears no leader for a random time in
    /// `[election_min, 2 × election_min)` stands for election.
    pub election_min: Duration,
}

impl Default for GroupTiming {
    /// 100 ms heartbeats, elections after 400–800 ms of silence: a failed
    /// leader is replaced in well under 2 s on a healthy network.
    fn default() -> Self {
        Self {
            heartbeat: Duration::from_millis(100),
            election_min: Duration::from_millis(400),
        }
    }
}

/// How much log a group holds: it snapshots after `snapshot_every` new
/// entries and purges its log up to `keep` entries behind the snapshot,
/// so a group holds at most about `snapshot_every + keep` entries. A
/// follower missing entries that are gone catches up from a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRetention {
    /// Entries between snapshots; 0 never snapshots (the log grows).
    pub snapshot_every: u64,
    /// Entries kept behind the last snapshot, so a follower a little
    /// behind catches up from the log rather than a whole snapshot.
    pub keep: u64,
}

impl Default for LogRetention {
    /// A snapshot every 10 000 entries, 1 000 kept behind it: at most
    /// about 11 000 entries (a few MiB) per group.
    fn default() -> Self {
        Self {
            snapshot_every: 10_000,
            keep: 1_000,
        }
    }
}

/// A proposal or read the group could not serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// This node does not lead the group; `leader` does, if known.
    #[error("{group}: this node is not the leader (leader: {leader:?})")]
    NotLeader {
        /// The group.
        group: GroupId,
        /// Who leads, as far as this node knows.
        leader: Option<NodeId>,
    },
    /// The leader lost its quorum while confirming a read.
    #[error("{group}: no quorum confirmed the read")]
    NoQuorum {
        /// The group.
        group: GroupId,
    },
    /// The proposal's entry was dropped by a leader change; it may or may
    /// not be committed later.
    #[error("{group}: the leader changed before the entry committed; it may or may not apply")]
    Discarded {
        /// The group.
        group: GroupId,
    },
    /// The group stopped (shutdown, or a storage or apply failure).
    #[error("{group}: the group stopped: {reason}")]
    Stopped {
        /// The group.
        group: GroupId,
        /// Why.
        reason: String,
    },
}

/// Where a group is, from this node's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStatus {
    /// The current leader, if known.
    pub leader: Option<NodeId>,
    /// The current term.
    pub term: u64,
    /// Index of the last entry in this node's log.
    pub last_log_index: u64,
    /// Index of the last entry known committed.
    pub committed: u64,
    /// Index of the last entry this node applied.
    pub applied: u64,
    /// Index of the last entry the last snapshot covers (0: none yet).
    pub snapshot: u64,
    /// Index of the last entry purged from this node's log (0: none);
    /// the log holds the entries after it.
    pub purged: u64,
    /// The voters.
    pub voters: Vec<NodeId>,
    /// On the leader: entries each follower is behind the leader's log
    /// (`None` when nothing is known to have reached it).
    pub lag: BTreeMap<NodeId, Option<u64>>,
}

/// A Raft group replicating `M` on this node.
pub struct Group<M: GroupMachine> {
    id: GroupId,
    raft: Raft<TypeConfig, StateMachine<M>>,
}

impl<M: GroupMachine> Clone for Group<M> {
    fn clone(&self) -> Self {
        Self {
            id: self.id,
            raft: self.raft.clone(),
        }
    }
}

/// How recently a voter must have acknowledged the leader to count as up
/// (ten heartbeats; a member that is down acknowledges nothing).
const ACK_WINDOW: Duration = Duration::from_secs(1);

/// On a leader: the other voters that acknowledged it within
/// [`ACK_WINDOW`], the most recent first; empty on a follower.
fn recent_acks(metrics: &openraft::RaftMetrics<TypeConfig>) -> Vec<NodeId> {
    let mut acked: Vec<_> = metrics
        .heartbeat
        .iter()
        .flatten()
        .filter_map(|(node, at)| Some((*node, (*at)?)))
        .filter(|(node, at)| *node != metrics.id && openraft::Instant::elapsed(&**at) < ACK_WINDOW)
        .collect();
    acked.sort_by_key(|(_, at)| std::cmp::Reverse(*at));
    acked.into_iter().map(|(node, _)| node).collect()
}

/// How far behind the leader's log a follower may be to be handed the
/// leadership by [`Group::can_take_over`]: the new leader first receives
/// what it lacks, and writes wait meanwhile.
const TAKE_OVER_MAX_LAG: u64 = 256;

/// Purge a restarted replica's log behind the snapshot it starts from,
/// keeping the entries `config` keeps behind a snapshot.
///
/// openraft takes the state machine's position after start (its durable
/// position, then the committed entries re-applied) as the replica's
/// snapshot, but purges only after it builds a snapshot: a replica
/// stopped between building one and purging behind it, or while a
/// leader's purge waited for a replication in flight, would keep its log
/// back to its last purge until `snapshot_every` more entries are
/// applied, and for good if the writes stop (past the bound of
/// [`LogRetention`]). A group that never snapshots keeps its log. Only
/// logged if it cannot be asked: the next snapshot purges as before.
pub(crate) async fn purge_behind_restored<M: GroupMachine>(
    raft: &Raft<TypeConfig, StateMachine<M>>,
    config: &Config,
) {
    if matches!(config.snapshot_policy, SnapshotPolicy::Never) {
        return;
    }
    let keep = config.max_in_snapshot_log_to_keep;
    let snapshot = raft
        .with_raft_state(|state| state.snapshot_meta.last_log_id.as_ref().map(|id| id.index))
        .await;
    let upto = match snapshot {
        Ok(Some(index)) if index > keep => index - keep,
        Ok(_) => return,
        Err(error) => {
            tracing::warn!(%error, "cannot read the snapshot a group starts from");
            return;
        }
    };
    if let Err(error) = raft.trigger().purge_log(upto).await {
        tracing::warn!(%error, upto, "cannot purge the log behind the snapshot a group starts from");
    }
}

impl<M: GroupMachine> Group<M> {
    /// Start this node's replica of group `id` over `machine`, with its
    /// `log` (in the node's store) kept as `retention` says. The group has
    /// no members until [`Self::form`] (first start) or until it reads
    /// them from its log. A machine that purges its log must be durable
    /// ([`StateMachine::open`]): a transient one could not restart.
    pub async fn start(
        node: NodeId,
        id: GroupId,
        log: LogStore,
        machine: StateMachine<M>,
        transport: Arc<dyn Transport>,
        timing: GroupTiming,
        retention: LogRetention,
    ) -> Result<Self, GroupError> {
        let election = timing.election_min.as_millis() as u64;
        let config = Config {
            cluster_name: format!("ebb {id}"),
            heartbeat_interval: timing.heartbeat.as_millis() as u64,
            election_timeout_min: election,
            election_timeout_max: election * 2,
            snapshot_policy: match retention.snapshot_every {
                0 => SnapshotPolicy::Never,
                every => SnapshotPolicy::LogsSinceLast(every),
            },
            max_in_snapshot_log_to_keep: retention.keep,
            // Purge in runs of up to a hundred entries, not one by one.
            purge_batch_size: retention.snapshot_every.clamp(1, 100),
            ..Default::default()
        }
        .validate()
        .map_err(|e| GroupError::Stopped {
            group: id,
            reason: e.to_string(),
        })?;
        let network = GroupNetwork {
            group: id,
            transport,
        };
        let config = Arc::new(config);
        let raft = Raft::new(node, config.clone(), network, log, machine)
            .await
            .map_err(|e| GroupError::Stopped {
                group: id,
                reason: e.to_string(),
            })?;
        purge_behind_restored(&raft, &config).await;
        Ok(Self { id, raft })
    }

    /// Which group this is.
    pub fn id(&self) -> GroupId {
        self.id
    }

    /// Form the group with `members` as its voters if it has never been
    /// formed; a group that has a log (formed before, or joined by a
    /// leader) is left as it is.
    pub async fn form(&self, members: &BTreeMap<NodeId, String>) -> Result<(), GroupError> {
        if self
            .raft
            .is_initialized()
            .await
            .map_err(|e| self.stopped(e))?
        {
            return Ok(());
        }
        let members: BTreeMap<NodeId, BasicNode> = members
            .iter()
            .map(|(id, addr)| (*id, BasicNode::new(addr)))
            .collect();
        match self.raft.initialize(members).await {
            Ok(()) => Ok(()),
            // Formed in between by another member's leader.
            Err(RaftError::APIError(_)) => Ok(()),
            Err(RaftError::Fatal(fatal)) => Err(self.stopped(fatal)),
        }
    }

    /// The leader as this node knows it.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow_watched().current_leader
    }

    /// Whether this node leads the group.
    pub fn is_leader(&self) -> bool {
        self.leader() == Some(*self.raft.node_id())
    }

    /// Propose `command` (fsynced on every replica before it counts when
    /// `sync`) and wait until this node applied it: the machine's answer.
    pub async fn propose(&self, command: Bytes, sync: bool) -> Result<Bytes, GroupError> {
        self.propose_at(command, sync).await.map(|(reply, _)| reply)
    }

    /// [`Self::propose`], also answering the entry's index in the log.
    pub async fn propose_at(&self, command: Bytes, sync: bool) -> Result<(Bytes, u64), GroupError> {
        match self.raft.client_write(Command::new(command, sync)).await {
            Ok(response) => Ok((response.data.0, response.log_id.index)),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => {
                Err(GroupError::NotLeader {
                    group: self.id,
                    leader: forward.leader_id,
                })
            }
            Err(RaftError::APIError(ClientWriteError::LogEntryDiscarded(_))) => {
                Err(GroupError::Discarded { group: self.id })
            }
            Err(RaftError::APIError(other)) => Err(GroupError::Stopped {
                group: self.id,
                reason: other.to_string(),
            }),
            Err(RaftError::Fatal(fatal)) => Err(self.stopped(fatal)),
        }
    }

    /// On the leader: confirm leadership with a quorum and wait until this
    /// node applied everything committed before; the log index a reader
    /// anywhere must have applied to read linearizably. A quorum's
    /// acknowledgement within the leader lease confirms it without a new
    /// round (heartbeats every 100 ms keep one that recent while the group
    /// is healthy); an older one sends heartbeats at once and waits (at
    /// most a lease) for a quorum to answer them. Safe because a follower
    /// grants no other candidate a vote within a lease of its last word
    /// from the leader, also across its own restart (the vendored
    /// openraft renews that lease at startup, vendor/README.md).
    pub async fn read_index(&self) -> Result<u64, GroupError> {
        match self
            .raft
            .ensure_linearizable(LinearizerOption::new(None, true))
            .await
        {
            Ok(read) => Ok(read.log_id().index),
            Err(RaftError::APIError(LinearizableReadError::ForwardToLeader(forward))) => {
                Err(GroupError::NotLeader {
                    group: self.id,
                    leader: forward.leader_id,
                })
            }
            Err(RaftError::APIError(LinearizableReadError::QuorumNotEnough(_))) => {
                Err(GroupError::NoQuorum { group: self.id })
            }
            Err(RaftError::Fatal(fatal)) => Err(self.stopped(fatal)),
        }
    }

    /// Wait until this node applied entry `index`, for at most `timeout`;
    /// whether it did.
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> bool {
        self.raft
            .wait(Some(timeout))
            .applied_index_at_least(Some(index), "a linearizable read")
            .await
            .is_ok()
    }

    /// Serve a peer's RPC for this group.
    pub async fn serve(&self, request: RaftRequest) -> RaftResponse {
        let answer = match request {
            RaftRequest::AppendEntries(rpc) => self
                .raft
                .append_entries(rpc)
                .await
                .map(RaftResponse::AppendEntries)
                .map_err(|e| e.to_string()),
            RaftRequest::Vote(rpc) => self
                .raft
                .vote(rpc)
                .await
                .map(RaftResponse::Vote)
                .map_err(|e| e.to_string()),
            RaftRequest::PreVote(rpc) => self
                .raft
                .pre_vote(rpc)
                .await
                .map(RaftResponse::Vote)
                .map_err(|e| e.to_string()),
            RaftRequest::FullSnapshot { vote, snapshot } => self
                .raft
                .install_full_snapshot(
                    vote,
                    SnapshotOf::<TypeConfig, SnapshotData> {
                        meta: snapshot.meta,
                        snapshot: SnapshotData::Encoded(snapshot.snapshot),
                    },
                )
                .await
                .map(RaftResponse::Snapshot)
                .map_err(|e| e.to_string()),
            RaftRequest::TransferLeader(request) => {
                match self.raft.handle_transfer_leader(request).await {
                    Ok(Ok(())) => Ok(RaftResponse::TransferLeader),
                    Ok(Err(refused)) => Err(refused.to_string()),
                    Err(fatal) => Err(fatal.to_string()),
                }
            }
        };
        answer.unwrap_or_else(RaftResponse::Error)
    }

    /// The group's state from this node's view.
    pub fn status(&self) -> GroupStatus {
        let metrics = self.raft.metrics().borrow_watched().clone();
        let last = metrics.last_log_index.unwrap_or(0);
        let lag = metrics
            .replication
            .as_ref()
            .map(|replication| {
                replication
                    .iter()
                    .filter(|(node, _)| **node != metrics.id)
                    .map(|(node, matched)| {
                        (
                            *node,
                            matched.as_ref().map(|m| last.saturating_sub(m.index)),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        GroupStatus {
            leader: metrics.current_leader,
            term: metrics.current_term,
            last_log_index: last,
            committed: metrics
                .cluster_committed
                .or(metrics.local_committed)
                .map_or(0, |id| id.index),
            applied: metrics.last_applied.map_or(0, |id| id.index),
            snapshot: metrics.snapshot.map_or(0, |id| id.index),
            purged: metrics.purged.map_or(0, |id| id.index),
            voters: metrics.membership_config.membership().voter_ids().collect(),
            lag,
        }
    }

    /// If this node leads: the other voter that acknowledged the leader
    /// most recently, within [`ACK_WINDOW`], to take over before a clean
    /// stop. `None` when this node does not lead, leads alone, or no other
    /// voter answered lately.
    pub fn successor(&self) -> Option<NodeId> {
        let metrics = self.raft.metrics().borrow_watched().clone();
        recent_acks(&metrics).first().copied()
    }

    /// The current term as this node knows it.
    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow_watched().current_term
    }

    /// If this node leads: whether voter `node` could take over now: it
    /// acknowledged the leader within [`ACK_WINDOW`] and its log is at
    /// most [`TAKE_OVER_MAX_LAG`] entries behind.
    pub fn can_take_over(&self, node: NodeId) -> bool {
        let metrics = self.raft.metrics().borrow_watched().clone();
        if metrics.current_leader != Some(metrics.id) || node == metrics.id {
            return false;
        }
        let recent = recent_acks(&metrics).contains(&node);
        let last = metrics.last_log_index.unwrap_or(0);
        let caught_up = metrics
            .replication
            .as_ref()
            .and_then(|r| r.get(&node).cloned().flatten())
            .is_some_and(|matched| last.saturating_sub(matched.index) <= TAKE_OVER_MAX_LAG);
        recent && caught_up
    }

    /// If this node leads, ask `to` to take over (it starts an election at
    /// once); returns without waiting for the outcome. Until a new leader
    /// is elected this one proposes nothing (writes answer `not_leader`
    /// and are tried again): a caller that sees this node still leading
    /// in the same term later must hand over again, to another member if
    /// `to` cannot take over.
    pub async fn hand_over(&self, to: NodeId) {
        if self.is_leader() {
            let _ = self.raft.trigger().transfer_leader(to).await;
        }
    }

    /// Stop the group (its log and state stay as they are).
    pub async fn shutdown(&self) {
        let _ = self.raft.shutdown().await;
    }

    fn stopped(&self, error: impl std::fmt::Display) -> GroupError {
        GroupError::Stopped {
            group: self.id,
            reason: error.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::{AppendDurability, GroupId, LogWriter, Service, TransportError, Vote};
    use crate::store::{KvStore, MemoryStore};
    use futures::future::BoxFuture;
    use openraft::raft::{AppendEntriesRequest, VoteRequest};

    /// A machine that applies nothing.
    struct Nothing;

    impl GroupMachine for Nothing {
        type Captured = ();
        fn apply(&self, _: &[u8]) -> Result<Bytes, String> {
            Ok(Bytes::new())
        }
        fn capture(&self) {}
        fn encode((): ()) -> Result<Bytes, String> {
            Ok(Bytes::new())
        }
        fn restore(&self, _: &[u8]) -> Result<(), String> {
            Ok(())
        }
    }

    /// A network where no member answers.
    struct Nobody;

    impl Transport for Nobody {
        fn call(
            &self,
            to: NodeId,
            _: Service,
            _: Bytes,
            _: Duration,
        ) -> BoxFuture<'static, Result<Bytes, TransportError>> {
            Box::pin(async move { Err(TransportError::UnknownNode(to)) })
        }
    }

    /// Start replica 2 of fragment 0's group over `store`.
    async fn start(
        store: &Arc<dyn KvStore>,
        writer: &LogWriter,
        timing: GroupTiming,
    ) -> Group<Nothing> {
        Group::start(
            2,
            GroupId::fragment(0),
            LogStore::new(
                GroupId::fragment(0),
                store.clone(),
                writer.clone(),
                AppendDurability::Wal,
            ),
            StateMachine::new(Arc::new(Nothing)),
            Arc::new(Nobody),
            timing,
            LogRetention::default(),
        )
        .await
        .unwrap()
    }

    fn granted(response: RaftResponse) -> bool {
        match response {
            RaftResponse::Vote(response) => response.vote_granted,
            other => panic!("not a vote answer: {other:?}"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restarted_follower_grants_no_vote_for_a_lease() {
        let store: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
        let writer = LogWriter::start(store.clone()).unwrap();
        let timing = GroupTiming {
            heartbeat: Duration::from_millis(50),
            election_min: Duration::from_millis(200),
        };
        // Leader 1 is heard (a heartbeat of term 5); the replica stops.
        let group = start(&store, &writer, timing).await;
        let heartbeat = RaftRequest::AppendEntries(AppendEntriesRequest {
            vote: Vote::new_committed(5, 1),
            prev_log_id: None,
            entries: vec![],
            leader_commit: None,
        });
        assert!(matches!(
            group.serve(heartbeat).await,
            RaftResponse::AppendEntries(_)
        ));
        group.shutdown().await;
        // Restarted at once: the lease it granted leader 1 may not have
        // run out, so a candidate of a later term gets no vote within one
        // lease (two shortest election timeouts) of the start, then does.
        let group = start(&store, &writer, timing).await;
        let ask = || RaftRequest::Vote(VoteRequest::new(Vote::new(6, 3), None));
        assert!(
            !granted(group.serve(ask()).await),
            "a vote within the lease"
        );
        tokio::time::sleep(timing.election_min * 2 + Duration::from_millis(50)).await;
        assert!(granted(group.serve(ask()).await), "a vote after the lease");
        group.shutdown().await;
        writer.close();
    }
}
