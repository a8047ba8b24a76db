//! The node's side of a cluster: the Raft group of every fragment it holds
//! a replica of, and how a request reaches a fragment's leader (proposed
//! here when this node leads, forwarded otherwise), within a bounded time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::time::Instant;

use super::config::ClusterConfig;
pub use super::error::ClusterError;
use super::forward::{Answer, Forward, PageServer};
use super::layout::{Layout, LayoutCheck};
use super::meta::{self, MetaMachine, Metadata};
use super::origins::WriteOrigins;
use super::outbox::OutboxServer;

use crate::clock::now_ms;
use crate::fragment::command::{Applied, Command, Proposal};
use crate::fragment::state::{FragmentState, Mutation, WriteOutcome};
use crate::fragment::{BacklogFull, Replicator};
use crate::names::TableName;
use crate::raft::{
    AppendDurability, Group, GroupError, GroupId, GroupStatus, GroupTiming, LogStore, LogWriter,
    NodeId, RaftRequest, RaftResponse, Service, StateMachine, Transport, TransportError,
};
use crate::store::{FragmentId, KvStore};
use crate::write::{Condition, Durability, Origin};

/// How long one forwarded request may take on the wire.
pub(super) const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between attempts while a fragment has no reachable leader.
pub(super) const RETRY_PAUSE: Duration = Duration::from_millis(25);
/// How long a stopping member waits for each other member to take note of
/// its stop (`Cluster::hand_over`); one that is down is not waited for
/// longer.
const STOPPING_NOTICE_TIMEOUT: Duration = Duration::from_millis(300);
/// Most attempts at a put that a newer record superseded while it was in
/// flight (each with a fresh version).
const SUPERSEDED_RETRIES: usize = 3;

/// A fragment's replica on this node: its state and its group.
pub(super) struct Replica {
    pub(super) state: Arc<FragmentState>,
    pub(super) group: Group<FragmentState>,
    /// When the newest read index this replica has applied was asked for:
    /// every write acknowledged before then is in this replica (see
    /// `Cluster::read_within`). `None` until the first linearizable read.
    pub(super) confirmed: parking_lot::Mutex<Option<Instant>>,
    /// Held while this node asks for a read index of the fragment: one
    /// round at a time, which serves every read that arrived before it was
    /// asked for (see `Cluster::linearize`).
    pub(super) asking: tokio::sync::Mutex<()>,
    /// Where the group's writes came from as this replica counts them
    /// (`cluster::origins`), for the leadership balancer.
    pub(super) origins: WriteOrigins,
}

/// The groups of this node and the way to other members.
pub struct Cluster {
    pub(super) config: ClusterConfig,
    pub(super) placement: Vec<Vec<NodeId>>,
    /// Each fragment's preferred leader (`placement::preferred_leaders`).
    pub(super) preferred: Vec<NodeId>,
    pub(super) replicas: BTreeMap<FragmentId, Replica>,
    /// The metadata group, on every member.
    pub(super) meta: Group<MetaMachine>,
    /// Its state machine, for the recorded layout.
    pub(super) meta_machine: Arc<MetaMachine>,
    /// The layout this member's flags give.
    pub(super) own_layout: Layout,
    /// How this member's layout compares with the recorded one.
    pub(super) layout: parking_lot::Mutex<LayoutCheck>,
    /// The task recording this member's layout, stopped at shutdown.
    pub(super) layout_task: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The leadership balancer (`cluster::balance`), stopped before a clean
    /// stop hands leadership away.
    pub(super) balance_task: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Members that announced their clean stop (`Forward::Stopping`), and
    /// when: the balancer hands them no leadership for its cooldown.
    pub(super) stopping: parking_lot::Mutex<BTreeMap<NodeId, std::time::Instant>>,
    transport: Arc<dyn Transport>,
    writer: LogWriter,
    /// The executor serving other members' pages, once the node is built.
    pub(super) pages: OnceLock<Arc<dyn PageServer>>,
    /// The expiry machinery carrying out outbox requests, once the node is
    /// built.
    pub(super) outboxes: OnceLock<Arc<dyn OutboxServer>>,
}

/// One member as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberStatus {
    /// Its id.
    pub id: NodeId,
    /// Its cluster address.
    pub addr: String,
    /// `self`, `up` (answered a ping) or `unreachable`.
    pub state: &'static str,
}

/// One fragment's replicas and, where this node holds one, its group's
/// state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FragmentStatus {
    /// The fragment.
    pub fragment: FragmentId,
    /// The nodes holding its replicas.
    pub replicas: Vec<NodeId>,
    /// The replica that forms its group and leads it whenever it is up
    /// and caught up (see `cluster::balance`).
    pub preferred_leader: NodeId,
    /// Its group as this node sees it (`None`: no replica here).
    pub group: Option<GroupStatus>,
}

/// The cluster as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStatus {
    /// This node's id.
    pub node_id: NodeId,
    /// Replicas per fragment.
    pub replication: usize,
    /// Every member.
    pub members: Vec<MemberStatus>,
    /// Every fragment.
    pub fragments: Vec<FragmentStatus>,
    /// The metadata group as this node sees it.
    pub metadata: GroupStatus,
    /// Scans this member keeps pinned for other members' queries.
    pub pinned_scans: usize,
    /// This member's layout against the recorded one.
    pub layout: LayoutCheck,
    /// The layout the cluster recorded, as this member has applied it.
    pub recorded_layout: Option<Layout>,
}

impl Cluster {
    /// Start the metadata group over `metadata` and the group of every
    /// fragment in `states` this node holds under `placement`, and form the
    /// groups that were never formed (this node's first start with these
    /// peers).
    pub(crate) async fn start(
        config: ClusterConfig,
        placement: Vec<Vec<NodeId>>,
        states: &[Arc<FragmentState>],
        store: Arc<dyn KvStore>,
        transport: Arc<dyn Transport>,
        metadata: Arc<dyn Metadata>,
    ) -> Result<Self, ClusterError> {
        let writer = LogWriter::start(store.clone()).map_err(|e| ClusterError::Stopped {
            fragment: 0,
            reason: e.to_string(),
        })?;
        let own_layout = Layout::new(
            config.peers.keys().copied(),
            config.replication,
            placement.clone(),
        );
        let (meta, meta_machine) =
            match meta::start_group(&config, &store, &writer, &transport, metadata).await {
                Ok(started) => started,
                Err(error) => {
                    writer.close();
                    return Err(error);
                }
            };
        let preferred = super::placement::preferred_leaders(&placement);
        let mut replicas = BTreeMap::new();
        for fragment in config.local_fragments(&placement) {
            let state = states[fragment as usize].clone();
            let started = start_replica(
                &config, &placement, &preferred, fragment, &state, &store, &writer, &transport,
            )
            .await;
            match started {
                Ok(group) => {
                    replicas.insert(
                        fragment,
                        Replica {
                            state,
                            group,
                            confirmed: parking_lot::Mutex::new(None),
                            asking: tokio::sync::Mutex::new(()),
                            origins: WriteOrigins::new(config.peers.keys().copied()),
                        },
                    );
                }
                Err(error) => {
                    // Stop what started, so a failed open leaves nothing running.
                    for replica in replicas.values() {
                        replica.group.shutdown().await;
                    }
                    meta.shutdown().await;
                    writer.close();
                    return Err(error);
                }
            }
        }
        Ok(Self {
            config,
            placement,
            preferred,
            replicas,
            meta,
            meta_machine,
            own_layout,
            layout: parking_lot::Mutex::new(LayoutCheck::Pending {
                reason: "not proposed yet".into(),
            }),
            layout_task: parking_lot::Mutex::new(None),
            balance_task: parking_lot::Mutex::new(None),
            stopping: parking_lot::Mutex::new(BTreeMap::new()),
            transport,
            writer,
            pages: OnceLock::new(),
            outboxes: OnceLock::new(),
        })
    }

    /// This node's id.
    pub fn node_id(&self) -> NodeId {
        self.config.node_id
    }

    /// The maintenance hook of each local replica, to hand to its fragment.
    pub(crate) fn replicators(&self) -> Vec<(FragmentId, Arc<dyn Replicator>)> {
        self.replicas
            .iter()
            .map(|(fragment, replica)| {
                let hook: Arc<dyn Replicator> = Arc::new(GroupHook {
                    group: replica.group.clone(),
                });
                (*fragment, hook)
            })
            .collect()
    }

    /// Apply a client write to `fragment`: versioned and proposed here when
    /// this node leads it, forwarded to its leader otherwise. Fails with
    /// [`ClusterError::NoQuorum`] once the quorum timeout passes without a
    /// leader committing it. `origin` decides whether the write may emit a
    /// change event (the leader decides it when proposing).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn write(
        &self,
        fragment: FragmentId,
        table: &TableName,
        key: &Arc<str>,
        mutation: Mutation,
        condition: &Condition,
        origin: Origin,
        durability: Durability,
    ) -> Result<WriteOutcome, WriteFailure> {
        self.serving()?;
        // This member's clients' writes count towards its leading the
        // group whether it leads it now or forwards them.
        if let Some(replica) = self.replicas.get(&fragment) {
            replica.origins.count(self.config.node_id);
        }
        let deadline = Instant::now() + self.config.quorum_timeout;
        let mut hint: Option<NodeId> = None;
        let mut reason = String::from("no leader known");
        loop {
            let target = match (self.replicas.get(&fragment), hint) {
                (Some(replica), _) => replica.group.leader(),
                (None, Some(node)) => Some(node),
                // Not held here: ask its replicas in turn, the one that
                // most likely leads first.
                (None, None) => Some(self.preferred[fragment as usize]),
            };
            match target {
                Some(node) if node == self.config.node_id => {
                    let replica = &self.replicas[&fragment];
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    match tokio::time::timeout(
                        remaining,
                        write_here(
                            replica,
                            fragment,
                            table,
                            key,
                            mutation.clone(),
                            condition,
                            origin,
                            durability,
                        ),
                    )
                    .await
                    {
                        Ok(Err(WriteFailure::Cluster(ClusterError::Refused { code, message })))
                            if code == "not_leader" =>
                        {
                            reason = message;
                        }
                        Ok(result) => return result,
                        Err(_) => reason = "the proposal did not commit".into(),
                    }
                }
                Some(node) => {
                    let request = Forward::Write {
                        fragment,
                        table: table.clone(),
                        key: key.clone(),
                        mutation: mutation.clone(),
                        condition: condition.clone(),
                        origin,
                        durability,
                        via: Some(self.config.node_id),
                    };
                    match self.forward(node, &request, deadline).await {
                        Ok(Answer::Written(version)) => {
                            return Ok(WriteOutcome::Applied { version, seq: 0 });
                        }
                        Ok(Answer::NotFound) => return Ok(WriteOutcome::NotFound),
                        Ok(Answer::ConditionFailed(current)) => {
                            return Ok(WriteOutcome::ConditionFailed { current });
                        }
                        Ok(Answer::Failure {
                            code,
                            message,
                            leader,
                        }) => match code.as_str() {
                            code if asks_elsewhere(code) => {
                                hint = self.after(fragment, node, leader);
                                reason = message;
                            }
                            "interrupted" => {
                                return Err(ClusterError::Interrupted { fragment }.into());
                            }
                            _ => return Err(ClusterError::Refused { code, message }.into()),
                        },
                        Ok(other) => reason = format!("node {node} answered {other:?}"),
                        Err(error) => {
                            hint = self.next_replica(fragment, node);
                            reason = error.to_string();
                        }
                    }
                }
                None => {}
            }
            if Instant::now() + RETRY_PAUSE >= deadline {
                return Err(self.no_quorum(fragment, reason).into());
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// Whether this node holds a replica of `fragment`.
    pub(crate) fn holds(&self, fragment: FragmentId) -> bool {
        self.replicas.contains_key(&fragment)
    }

    /// Serve a Raft RPC from a member (`ebb.raft.v1.RaftRequest` bytes).
    pub async fn serve_raft(&self, body: &[u8]) -> Bytes {
        let response = match RaftRequest::decode(body) {
            Ok((GroupId::META, request)) => self.meta.serve(request).await,
            Ok((group, request)) => match group
                .as_fragment()
                .and_then(|fragment| self.replicas.get(&fragment))
            {
                Some(replica) => replica.group.serve(request).await,
                None => RaftResponse::Error(format!(
                    "{group} has no replica on node {}",
                    self.config.node_id
                )),
            },
            Err(error) => RaftResponse::Error(error.to_string()),
        };
        Bytes::from(response.encode())
    }

    /// Serve a request another member forwarded
    /// (`ebb.cluster.v1.ForwardRequest` bytes). Served only if this node
    /// leads the fragment; otherwise the answer names the leader.
    pub async fn serve_forward(&self, body: &[u8]) -> Bytes {
        let answer = match Forward::decode(body) {
            Ok(request) => self.answer(request).await,
            Err(error) => Answer::failure("invalid_request", error),
        };
        answer.encode()
    }

    async fn answer(&self, request: Forward) -> Answer {
        let request = match request {
            // A continuation runs where its scan is pinned, leader or not.
            Forward::Page(page) if page.scan != 0 => return self.answer_page(*page).await,
            request => request,
        };
        let fragment = match &request {
            Forward::Ping => return Answer::Pong(self.config.node_id),
            Forward::Stopping { node } => {
                // Only members are recorded, so the map stays as small as
                // the cluster.
                if !self.config.peers.contains_key(node) {
                    return Answer::failure(
                        "invalid_request",
                        format!("node {node} is not a member of this cluster"),
                    );
                }
                tracing::info!(node, "member {node} is stopping; handing it no leadership");
                self.stopping
                    .lock()
                    .insert(*node, std::time::Instant::now());
                return Answer::Pong(self.config.node_id);
            }
            Forward::ProposeMeta(command) => {
                return self.answer_propose_meta(command.clone()).await;
            }
            Forward::AwaitMeta { index, wait_ms } => {
                return self
                    .answer_await_meta(*index, Duration::from_millis(*wait_ms))
                    .await;
            }
            Forward::Page(page) => page.fragment,
            Forward::Outbox(request) => request.fragment,
            Forward::Write { fragment, .. }
            | Forward::ReadIndex { fragment }
            | Forward::Get { fragment, .. } => *fragment,
        };
        let Some(replica) = self.replicas.get(&fragment) else {
            return Answer::Failure {
                code: "not_leader".into(),
                message: format!(
                    "fragment {fragment} has no replica on node {}",
                    self.config.node_id
                ),
                leader: None,
            };
        };
        if !replica.group.is_leader() {
            return Answer::Failure {
                code: "not_leader".into(),
                message: format!(
                    "node {} does not lead fragment {fragment}",
                    self.config.node_id
                ),
                leader: replica.group.leader(),
            };
        }
        let timeout = self.config.quorum_timeout;
        match request {
            Forward::Write {
                table,
                key,
                mutation,
                condition,
                origin,
                durability,
                via,
                ..
            } => {
                if let Some(via) = via {
                    replica.origins.count(via);
                }
                let write = write_here(
                    replica, fragment, &table, &key, mutation, &condition, origin, durability,
                );
                match tokio::time::timeout(timeout, write).await {
                    Ok(Ok(WriteOutcome::Applied { version, .. })) => Answer::Written(version),
                    Ok(Ok(WriteOutcome::NotFound)) => Answer::NotFound,
                    Ok(Ok(WriteOutcome::ConditionFailed { current })) => {
                        Answer::ConditionFailed(current)
                    }
                    Ok(Err(WriteFailure::Backlog(full))) => Answer::failure("overloaded", full),
                    Ok(Err(WriteFailure::Cluster(error))) => failure_of(&error),
                    Err(_) => Answer::failure(
                        "no_quorum",
                        self.no_quorum(fragment, "the proposal did not commit".into()),
                    ),
                }
            }
            Forward::ReadIndex { .. } => {
                match tokio::time::timeout(timeout, replica.group.read_index()).await {
                    Ok(Ok(index)) => Answer::ReadIndex(index),
                    Ok(Err(error)) => Answer::failure("no_quorum", error),
                    Err(_) => Answer::failure("no_quorum", "the leader could not confirm a quorum"),
                }
            }
            Forward::Get { table, key, .. } => {
                match tokio::time::timeout(timeout, replica.group.read_index()).await {
                    Ok(Ok(_)) => match replica.state.get(&table, &key, now_ms()) {
                        Some(record) => Answer::Found {
                            value: record.value,
                            version: record.version,
                            expires_at_ms: record.expires_at_ms,
                        },
                        None => Answer::NotFound,
                    },
                    Ok(Err(error)) => Answer::failure("no_quorum", error),
                    Err(_) => Answer::failure("no_quorum", "the leader could not confirm a quorum"),
                }
            }
            Forward::Page(page) => self.answer_open(replica, *page).await,
            request @ Forward::Outbox(_) => self.answer_outbox(replica, request).await,
            Forward::Ping
            | Forward::Stopping { .. }
            | Forward::ProposeMeta(_)
            | Forward::AwaitMeta { .. } => {
                unreachable!("answered above")
            }
        }
    }

    /// The cluster as this node sees it; members are pinged (briefly).
    pub async fn status(&self) -> ClusterStatus {
        let pings = self.config.peers.iter().map(|(id, addr)| async move {
            let state = if *id == self.config.node_id {
                "self"
            } else {
                let deadline = Instant::now() + Duration::from_millis(500);
                match self.forward(*id, &Forward::Ping, deadline).await {
                    Ok(Answer::Pong(_)) => "up",
                    _ => "unreachable",
                }
            };
            MemberStatus {
                id: *id,
                addr: addr.clone(),
                state,
            }
        });
        let members = futures::future::join_all(pings).await;
        let fragments = self
            .placement
            .iter()
            .enumerate()
            .map(|(fragment, replicas)| FragmentStatus {
                fragment: fragment as FragmentId,
                replicas: replicas.clone(),
                preferred_leader: self.preferred[fragment],
                group: self
                    .replicas
                    .get(&(fragment as FragmentId))
                    .map(|replica| replica.group.status()),
            })
            .collect();
        ClusterStatus {
            node_id: self.config.node_id,
            replication: self.config.replication,
            members,
            fragments,
            metadata: self.meta.status(),
            pinned_scans: self.pages.get().map_or(0, |server| server.pinned()),
            layout: self.layout.lock().clone(),
            recorded_layout: self.meta_machine.layout(),
        }
    }

    /// Before a clean stop: tell the other members this one is stopping
    /// (their balancers then hand it no leadership, even when it leads
    /// nothing to hand away; each is waited for at most
    /// [`STOPPING_NOTICE_TIMEOUT`]), hand every group this node leads to
    /// the other replica that acknowledged it most recently, and wait (at
    /// most 2 s) until they took over. A group this node comes to lead
    /// meanwhile (a hand-over to it that crossed the notice) is handed on
    /// too. A group with no other replica (R = 1) has no one to take over
    /// and is not waited for.
    pub async fn hand_over(&self) {
        self.stop_leader_balance();
        let me = self.config.node_id;
        let notice_deadline = Instant::now() + STOPPING_NOTICE_TIMEOUT;
        let notice = Forward::Stopping { node: me };
        let notices = self
            .config
            .peers
            .keys()
            .filter(|id| **id != me)
            .map(|id| self.forward(*id, &notice, notice_deadline));
        futures::future::join_all(notices).await;
        let meta_to = self.meta.successor();
        if let Some(to) = meta_to {
            self.meta.hand_over(to).await;
        }
        let mut handed = BTreeSet::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            for (fragment, replica) in &self.replicas {
                if !handed.contains(fragment)
                    && replica.group.is_leader()
                    && let Some(to) = replica.group.successor()
                {
                    replica.group.hand_over(to).await;
                    handed.insert(*fragment);
                }
            }
            let leading = (meta_to.is_some() && self.meta.is_leader())
                || handed
                    .iter()
                    .any(|fragment| self.replicas[fragment].group.is_leader());
            if !leading || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// Stop every group and the log writer.
    pub async fn shutdown(&self) {
        if let Some(task) = self.layout_task.lock().take() {
            task.abort();
        }
        self.stop_leader_balance();
        for replica in self.replicas.values() {
            replica.group.shutdown().await;
        }
        self.meta.shutdown().await;
        self.writer.close();
    }

    pub(super) async fn forward(
        &self,
        to: NodeId,
        request: &Forward,
        deadline: Instant,
    ) -> Result<Answer, TransportError> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        // A client request gives up on one member after FORWARD_TIMEOUT to
        // try another; a metadata request waits for the leader's work
        // (compiling a module on apply), bounded by its own deadline:
        // giving up early would propose the same change again.
        let timeout = match request {
            Forward::ProposeMeta(_) | Forward::AwaitMeta { .. } => remaining,
            // A page is bounded by its query's deadline (a page of plugin
            // calls may run longer than a write).
            Forward::Page(_) => remaining,
            _ => remaining.min(FORWARD_TIMEOUT),
        };
        let service = match request {
            Forward::Write { .. } | Forward::ReadIndex { .. } | Forward::Get { .. } => {
                Service::ForwardShort
            }
            _ => Service::Forward,
        };
        let answer = self
            .transport
            .call(to, service, request.encode(), timeout)
            .await?;
        Answer::decode(&answer).map_err(|e| TransportError::Unreachable {
            node: to,
            reason: e.to_string(),
        })
    }

    /// Whom to ask about `fragment` after `node` answered that it cannot
    /// serve it: the leader it named (`leader`), or the next replica.
    pub(super) fn after(
        &self,
        fragment: FragmentId,
        node: NodeId,
        leader: Option<NodeId>,
    ) -> Option<NodeId> {
        leader
            .filter(|l| *l != node)
            .or_else(|| self.next_replica(fragment, node))
    }

    /// The replica of `fragment` after `node` in placement order (wrapping),
    /// to try when `node` does not answer.
    pub(super) fn next_replica(&self, fragment: FragmentId, node: NodeId) -> Option<NodeId> {
        let replicas = &self.placement[fragment as usize];
        let at = replicas.iter().position(|id| *id == node)?;
        Some(replicas[(at + 1) % replicas.len()])
    }

    pub(super) fn no_quorum(&self, fragment: FragmentId, reason: String) -> ClusterError {
        ClusterError::NoQuorum {
            fragment,
            waited_ms: self.config.quorum_timeout.as_millis() as u64,
            reason,
        }
    }
}

/// Start this node's replica of `fragment`'s group and, on its preferred
/// leader, form it.
#[allow(clippy::too_many_arguments)]
async fn start_replica(
    config: &ClusterConfig,
    placement: &[Vec<NodeId>],
    preferred: &[NodeId],
    fragment: FragmentId,
    state: &Arc<FragmentState>,
    store: &Arc<dyn KvStore>,
    writer: &LogWriter,
    transport: &Arc<dyn Transport>,
) -> Result<Group<FragmentState>, ClusterError> {
    state.snapshot_outbox_from(store);
    let group = Group::start(
        config.node_id,
        GroupId::fragment(fragment),
        LogStore::new(
            GroupId::fragment(fragment),
            store.clone(),
            writer.clone(),
            AppendDurability::Wal,
        ),
        StateMachine::open(state.clone(), GroupId::fragment(fragment), store.clone())
            .await
            .map_err(|e| stopped(fragment, e))?,
        transport.clone(),
        GroupTiming::default(),
        config.retention,
    )
    .await
    .map_err(|e| stopped(fragment, e))?;
    // One member forms each group: its preferred leader, so leadership
    // starts spread evenly over the members.
    if preferred[fragment as usize] == config.node_id {
        let members: BTreeMap<NodeId, String> = placement[fragment as usize]
            .iter()
            .map(|id| (*id, config.peers[id].clone()))
            .collect();
        if let Err(error) = group.form(&members).await {
            group.shutdown().await;
            return Err(stopped(fragment, error));
        }
    }
    Ok(group)
}

/// A client write that failed.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum WriteFailure {
    /// The leader's write buffer is full.
    #[error(transparent)]
    Backlog(#[from] BacklogFull),
    /// The cluster could not commit it.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

/// Version and propose a write on this node, which leads `fragment`.
/// Every replica judges the write's condition where it applies it; when
/// that fails (the key changed between the proposal and its turn in the
/// log), the proposal is decided again against the new record, which
/// answers the failure, or, for a TTL change whose record was rewritten,
/// proposes it for the new record.
#[allow(clippy::too_many_arguments)]
async fn write_here(
    replica: &Replica,
    fragment: FragmentId,
    table: &TableName,
    key: &Arc<str>,
    mutation: Mutation,
    condition: &Condition,
    origin: Origin,
    durability: Durability,
) -> Result<WriteOutcome, WriteFailure> {
    let is_delete = matches!(mutation, Mutation::Delete);
    for _ in 0..SUPERSEDED_RETRIES {
        let write = match replica.state.propose_write(
            table,
            key,
            mutation.clone(),
            condition,
            origin,
            now_ms(),
        )? {
            Proposal::Write(write) => write,
            Proposal::Done(outcome) => return Ok(outcome),
        };
        let version = write.record.version.clone();
        let command = Bytes::from(Command::Write(write).encode());
        let sync = durability == Durability::Sync;
        let reply = replica
            .group
            .propose(command, sync)
            .await
            .map_err(|e| group_failure(fragment, e))?;
        match Applied::decode(&reply).map_err(|e| stopped(fragment, e))? {
            Applied::Written { .. } => return Ok(WriteOutcome::Applied { version, seq: 0 }),
            Applied::Skipped if is_delete => return Ok(WriteOutcome::NotFound),
            // A newer record of an earlier leader applied first (this
            // node's clock has now passed it), or the key changed before
            // the condition was judged: decide again.
            _ => continue,
        }
    }
    Err(ClusterError::Interrupted { fragment }.into())
}

fn group_failure(fragment: FragmentId, error: GroupError) -> ClusterError {
    match error {
        GroupError::NotLeader { .. } => ClusterError::Refused {
            code: "not_leader".into(),
            message: error.to_string(),
        },
        GroupError::Discarded { .. } => ClusterError::Interrupted { fragment },
        GroupError::NoQuorum { .. } => ClusterError::NoQuorum {
            fragment,
            waited_ms: 0,
            reason: error.to_string(),
        },
        GroupError::Stopped { .. } => stopped(fragment, error),
    }
}

/// Whether a member's failure `code` means "ask another member": it does
/// not lead the fragment, stepped down (lost its quorum) or is stopping.
pub(super) fn asks_elsewhere(code: &str) -> bool {
    matches!(code, "not_leader" | "no_quorum" | "unavailable")
}

pub(super) fn failure_of(error: &ClusterError) -> Answer {
    let code = match error {
        ClusterError::NoQuorum { .. } | ClusterError::MetaNoQuorum { .. } => "no_quorum",
        ClusterError::Interrupted { .. } => "interrupted",
        ClusterError::Refused { code, .. } => code.as_str(),
        ClusterError::Stopped { .. } | ClusterError::MetaStopped { .. } => "unavailable",
        ClusterError::LayoutConflict { .. } => "layout_conflict",
    };
    Answer::failure(code, error)
}

fn stopped(fragment: FragmentId, error: impl std::fmt::Display) -> ClusterError {
    ClusterError::Stopped {
        fragment,
        reason: error.to_string(),
    }
}

/// A fragment's group as its maintenance proposes through it.
struct GroupHook {
    group: Group<FragmentState>,
}

impl Replicator for GroupHook {
    fn ready(&self) -> BoxFuture<'_, bool> {
        // A read index on the leader waits until it applied every entry of
        // earlier terms; a follower answers at once.
        Box::pin(async move { self.group.is_leader() && self.group.read_index().await.is_ok() })
    }

    fn propose(&self, command: Command) -> BoxFuture<'_, Result<Applied, String>> {
        Box::pin(async move {
            let reply = self
                .group
                .propose(Bytes::from(command.encode()), false)
                .await
                .map_err(|e| e.to_string())?;
            Applied::decode(&reply).map_err(|e| e.to_string())
        })
    }
}
