//! Test support: replicas of one group in one process, joined by a channel
//! router that delivers each message by calling the target's `Raft` and can
//! cut nodes off.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use openraft::errors::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::v2::RaftNetworkV2;
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::alias::{SnapshotOf, VoteOf};
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use parking_lot::Mutex;

use super::log_store::{AppendDurability, LogStore};
use super::log_writer::LogWriter;
use super::machine::{GroupMachine, SnapshotData, StateMachine};
use super::types::{GroupId, NodeId, TypeConfig};
use crate::store::{KvStore, MemoryStore};

/// Timeouts short enough for tests, and a snapshot and purge every few
/// entries, so a node that was away catches up from a snapshot. The
/// election timeout leaves room for a test machine whose cores are busy
/// with other tests: a leader whose heartbeats are late is not deposed
/// mid-test.
pub(crate) fn config() -> Arc<Config> {
    Arc::new(
        Config {
            heartbeat_interval: 100,
            election_timeout_min: 1000,
            election_timeout_max: 2000,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(10),
            max_in_snapshot_log_to_keep: 0,
            purge_batch_size: 1,
            ..Default::default()
        }
        .validate()
        .expect("a valid test configuration"),
    )
}

/// Start replicas `1..=count` over the machines `machine` makes, and
/// initialize the group with all of them as voters.
pub(crate) async fn cluster<M: GroupMachine>(
    router: &Router<M>,
    count: NodeId,
    machine: impl Fn() -> M,
) -> BTreeMap<NodeId, Replica<M>> {
    cluster_with(router, count, machine, config()).await
}

/// [`cluster`] with `config` instead of [`config`]'s.
pub(crate) async fn cluster_with<M: GroupMachine>(
    router: &Router<M>,
    count: NodeId,
    machine: impl Fn() -> M,
    config: Arc<Config>,
) -> BTreeMap<NodeId, Replica<M>> {
    let mut replicas = BTreeMap::new();
    for id in 1..=count {
        replicas.insert(id, start(router, id, &config, Arc::new(machine())).await);
    }
    let members: BTreeMap<NodeId, BasicNode> = (1..=count)
        .map(|id| (id, BasicNode::new(format!("node-{id}"))))
        .collect();
    replicas[&1].raft.initialize(members).await.unwrap();
    replicas
}

/// Snapshot and purge on `leader` past `behind`, the last log index of a
/// node that is away, so that node can only come back from the snapshot.
pub(crate) async fn purge_past<M: GroupMachine>(leader: &TestRaft<M>, behind: u64) {
    leader.trigger().snapshot().await.unwrap();
    let snapshot = leader
        .wait(Some(WAIT))
        .metrics(
            |m| m.snapshot.is_some_and(|s| s.index > behind),
            "a snapshot past the node that is away",
        )
        .await
        .unwrap()
        .snapshot
        .unwrap()
        .index;
    leader.trigger().purge_log(snapshot).await.unwrap();
    leader
        .wait(Some(WAIT))
        .metrics(
            |m| m.purged.is_some_and(|p| p.index > behind),
            "the purge past the node that is away",
        )
        .await
        .unwrap();
}

/// The last log index of `raft`.
pub(crate) fn last_log_index<M: GroupMachine>(raft: &TestRaft<M>) -> u64 {
    raft.metrics().borrow_watched().last_log_index.unwrap_or(0)
}

/// Wait until `check` holds, or fail saying `what`.
pub(crate) async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A Raft of one group over machine `M`.
pub(crate) type TestRaft<M> = Raft<TypeConfig, StateMachine<M>>;

/// Delivers every message by calling the target's `Raft` directly, unless
/// either end is cut off.
pub(crate) struct Router<M: GroupMachine> {
    nodes: Arc<Mutex<BTreeMap<NodeId, TestRaft<M>>>>,
    /// Nodes cut off from every other.
    pub(crate) cut: Arc<Mutex<BTreeSet<NodeId>>>,
}

impl<M: GroupMachine> Clone for Router<M> {
    fn clone(&self) -> Self {
        Self {
            nodes: self.nodes.clone(),
            cut: self.cut.clone(),
        }
    }
}

impl<M: GroupMachine> Default for Router<M> {
    fn default() -> Self {
        Self {
            nodes: Arc::default(),
            cut: Arc::default(),
        }
    }
}

impl<M: GroupMachine> Router<M> {
    fn reach(&self, from: NodeId, to: NodeId) -> Result<TestRaft<M>, Unreachable<TypeConfig>> {
        if self.cut.lock().iter().any(|n| *n == from || *n == to) {
            return Err(Unreachable::from_string(format!("{from} -> {to} is cut")));
        }
        self.nodes
            .lock()
            .get(&to)
            .cloned()
            .ok_or_else(|| Unreachable::from_string(format!("no node {to}")))
    }
}

struct Network<M: GroupMachine> {
    router: Router<M>,
    from: NodeId,
}

struct Client<M: GroupMachine> {
    router: Router<M>,
    from: NodeId,
    to: NodeId,
}

impl<M: GroupMachine> RaftNetworkFactory<TypeConfig> for Network<M> {
    type Network = Client<M>;

    async fn new_client(&mut self, target: NodeId, _: &BasicNode) -> Client<M> {
        Client {
            router: self.router.clone(),
            from: self.from,
            to: target,
        }
    }
}

fn unreachable(error: impl std::error::Error + 'static) -> Unreachable<TypeConfig> {
    Unreachable::new(&error)
}

impl<M: GroupMachine> RaftNetworkV2<TypeConfig> for Client<M> {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        let raft = self.router.reach(self.from, self.to)?;
        raft.append_entries(rpc)
            .await
            .map_err(|e| RPCError::Unreachable(unreachable(e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        let raft = self.router.reach(self.from, self.to)?;
        raft.vote(rpc)
            .await
            .map_err(|e| RPCError::Unreachable(unreachable(e)))
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        let raft = self.router.reach(self.from, self.to)?;
        raft.pre_vote(rpc)
            .await
            .map_err(|e| RPCError::Unreachable(unreachable(e)))
    }

    async fn full_snapshot(
        &mut self,
        vote: VoteOf<TypeConfig>,
        snapshot: SnapshotOf<TypeConfig, SnapshotData>,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let raft = self.router.reach(self.from, self.to)?;
        raft.install_full_snapshot(vote, snapshot)
            .await
            .map_err(|e| StreamingError::Unreachable(unreachable(e)))
    }
}

/// One replica: its Raft, its machine and its log's writer.
pub(crate) struct Replica<M: GroupMachine> {
    pub(crate) raft: TestRaft<M>,
    pub(crate) machine: Arc<M>,
    _writer: LogWriter,
}

/// Start replica `id` of group 0 over `machine`, with its own in-memory
/// store, reachable through `router`.
pub(crate) async fn start<M: GroupMachine>(
    router: &Router<M>,
    id: NodeId,
    config: &Arc<Config>,
    machine: Arc<M>,
) -> Replica<M> {
    let store: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
    let state_machine = StateMachine::new(machine.clone());
    start_on(router, id, config, machine, state_machine, store).await
}

/// Start replica `id` of group 0 over `machine`, durable in `store` (its
/// log and its applied position both there, as in a node), reachable
/// through `router`. Starting it again over the same store restarts it.
pub(crate) async fn start_durable<M: GroupMachine>(
    router: &Router<M>,
    id: NodeId,
    config: &Arc<Config>,
    machine: Arc<M>,
    store: Arc<dyn KvStore>,
) -> Replica<M> {
    let state_machine = StateMachine::open(machine.clone(), GroupId::fragment(0), store.clone())
        .await
        .unwrap();
    start_on(router, id, config, machine, state_machine, store).await
}

async fn start_on<M: GroupMachine>(
    router: &Router<M>,
    id: NodeId,
    config: &Arc<Config>,
    machine: Arc<M>,
    state_machine: StateMachine<M>,
    store: Arc<dyn KvStore>,
) -> Replica<M> {
    let writer = LogWriter::start(store.clone()).unwrap();
    let log = LogStore::new(
        GroupId::fragment(0),
        store,
        writer.clone(),
        AppendDurability::Wal,
    );
    let raft = Raft::new(
        id,
        config.clone(),
        Network {
            router: router.clone(),
            from: id,
        },
        log,
        state_machine,
    )
    .await
    .unwrap();
    super::group::purge_behind_restored(&raft, config).await;
    router.nodes.lock().insert(id, raft.clone());
    Replica {
        raft,
        machine,
        _writer: writer,
    }
}

/// Form the group with `replica` (id 1) as its only voter, and wait
/// until it leads.
pub(crate) async fn form_alone<M: GroupMachine>(replica: &Replica<M>) {
    let members: BTreeMap<NodeId, BasicNode> =
        [(1, BasicNode::new("node-1"))].into_iter().collect();
    replica.raft.initialize(members).await.unwrap();
    replica
        .raft
        .wait(Some(WAIT))
        .current_leader(1, "the only voter to lead")
        .await
        .unwrap();
}

/// The index of the last entry `raft` purged from its log (0: none).
pub(crate) fn purged_index<M: GroupMachine>(raft: &TestRaft<M>) -> u64 {
    raft.metrics()
        .borrow_watched()
        .purged
        .map_or(0, |id| id.index)
}

/// The index of the last entry `raft` applied (0: none).
pub(crate) fn applied_index<M: GroupMachine>(raft: &TestRaft<M>) -> u64 {
    raft.metrics()
        .borrow_watched()
        .last_applied
        .map_or(0, |id| id.index)
}

/// How long a test waits for an election or convergence.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// The leader, once one other than `not` is elected.
pub(crate) async fn leader_other_than<M: GroupMachine>(
    replicas: &BTreeMap<NodeId, Replica<M>>,
    not: Option<NodeId>,
) -> NodeId {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        for (id, replica) in replicas {
            let metrics = replica.raft.metrics().borrow_watched().clone();
            if metrics.current_leader == Some(*id) && Some(*id) != not {
                return *id;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "no leader elected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
