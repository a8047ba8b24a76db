//! Three replicas of one group in one process, joined by a channel router
//! that can cut a node off: they agree on every committed command, a cut-off
//! leader is replaced and commits nothing alone, and a node that rejoins
//! after the log it missed was purged catches up from a snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
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
use super::machine::{GroupMachine, StateMachine};
use super::types::{Command, GroupId, NodeId, TypeConfig};
use crate::store::{KvStore, MemoryStore};

/// A replicated map: commands are `key=value`; the answer is the number of
/// keys after the command.
#[derive(Default)]
struct Kv(Mutex<BTreeMap<String, String>>);

impl GroupMachine for Kv {
    fn apply(&self, command: &[u8]) -> Result<Bytes, String> {
        let text = std::str::from_utf8(command).map_err(|e| e.to_string())?;
        let (key, value) = text.split_once('=').ok_or("not key=value")?;
        let mut map = self.0.lock();
        map.insert(key.to_string(), value.to_string());
        Ok(Bytes::from(map.len().to_string()))
    }

    fn snapshot(&self) -> Bytes {
        let map = self.0.lock();
        let lines: Vec<String> = map.iter().map(|(k, v)| format!("{k}={v}")).collect();
        Bytes::from(lines.join("\n"))
    }

    fn restore(&self, snapshot: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(snapshot).map_err(|e| e.to_string())?;
        let mut map = BTreeMap::new();
        for line in text.lines() {
            let (key, value) = line.split_once('=').ok_or("not key=value")?;
            map.insert(key.to_string(), value.to_string());
        }
        *self.0.lock() = map;
        Ok(())
    }
}

type TestRaft = Raft<TypeConfig, StateMachine<Kv>>;

/// Delivers every message by calling the target's `Raft` directly, unless
/// either end is cut off.
#[derive(Clone, Default)]
struct Router {
    nodes: Arc<Mutex<BTreeMap<NodeId, TestRaft>>>,
    cut: Arc<Mutex<BTreeSet<NodeId>>>,
}

impl Router {
    fn reach(&self, from: NodeId, to: NodeId) -> Result<TestRaft, Unreachable<TypeConfig>> {
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

struct Network {
    router: Router,
    from: NodeId,
}

struct Client {
    router: Router,
    from: NodeId,
    to: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Client;

    async fn new_client(&mut self, target: NodeId, _: &BasicNode) -> Client {
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

impl RaftNetworkV2<TypeConfig> for Client {
    type SnapshotData = Bytes;

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
        snapshot: SnapshotOf<TypeConfig, Bytes>,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let raft = self.router.reach(self.from, self.to)?;
        raft.install_full_snapshot(vote, snapshot)
            .await
            .map_err(|e| StreamingError::Unreachable(unreachable(e)))
    }
}

struct Replica {
    raft: TestRaft,
    machine: Arc<Kv>,
    _writer: LogWriter,
}

async fn start(router: &Router, id: NodeId, config: &Arc<Config>) -> Replica {
    let store: Arc<dyn KvStore> = Arc::new(MemoryStore::new());
    let writer = LogWriter::start(store.clone()).unwrap();
    let log = LogStore::new(
        GroupId::fragment(0),
        store,
        writer.clone(),
        AppendDurability::Wal,
    );
    let machine = Arc::new(Kv::default());
    let raft = Raft::new(
        id,
        config.clone(),
        Network {
            router: router.clone(),
            from: id,
        },
        log,
        StateMachine::new(machine.clone()),
    )
    .await
    .unwrap();
    router.nodes.lock().insert(id, raft.clone());
    Replica {
        raft,
        machine,
        _writer: writer,
    }
}

const WAIT: Duration = Duration::from_secs(10);

async fn leader_other_than(replicas: &BTreeMap<NodeId, Replica>, not: Option<NodeId>) -> NodeId {
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

async fn write(raft: &TestRaft, key: usize) {
    raft.client_write(Command(Bytes::from(format!("k{key:03}=v{key}"))))
        .await
        .unwrap();
}

async fn converged(replicas: &BTreeMap<NodeId, Replica>, keys: usize) {
    let expected: BTreeMap<String, String> = (0..keys)
        .map(|key| (format!("k{key:03}"), format!("v{key}")))
        .collect();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if replicas
            .values()
            .all(|replica| *replica.machine.0.lock() == expected)
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "replicas did not converge on {keys} keys"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_agree_replace_a_cut_off_leader_and_catch_up_from_a_snapshot() {
    let config = Arc::new(
        Config {
            heartbeat_interval: 50,
            election_timeout_min: 300,
            election_timeout_max: 600,
            // Snapshot and purge often, so a node that was away catches up
            // from a snapshot rather than from the log.
            snapshot_policy: SnapshotPolicy::LogsSinceLast(10),
            max_in_snapshot_log_to_keep: 0,
            purge_batch_size: 1,
            ..Default::default()
        }
        .validate()
        .unwrap(),
    );
    let router = Router::default();
    let mut replicas = BTreeMap::new();
    for id in 1..=3 {
        replicas.insert(id, start(&router, id, &config).await);
    }
    let members: BTreeMap<NodeId, BasicNode> = (1..=3)
        .map(|id| (id, BasicNode::new(format!("node-{id}"))))
        .collect();
    replicas[&1].raft.initialize(members).await.unwrap();

    let first = leader_other_than(&replicas, None).await;
    for key in 0..40 {
        write(&replicas[&first].raft, key).await;
    }
    converged(&replicas, 40).await;

    // Cut the leader off: the other two elect a new one and go on.
    router.cut.lock().insert(first);
    let second = leader_other_than(&replicas, Some(first)).await;
    for key in 40..80 {
        write(&replicas[&second].raft, key).await;
    }
    // Alone, the old leader commits nothing.
    let lonely = tokio::time::timeout(
        Duration::from_millis(500),
        replicas[&first]
            .raft
            .client_write(Command(Bytes::from_static(b"lost=write"))),
    )
    .await;
    assert!(
        !matches!(lonely, Ok(Ok(_))),
        "a cut-off leader must not commit"
    );
    assert!(!replicas[&second].machine.0.lock().contains_key("lost"));

    // The leader snapshots and purges the log the cut-off node lacks, so
    // the only way back for it is the snapshot.
    let behind = replicas[&first]
        .raft
        .metrics()
        .borrow_watched()
        .last_log_index
        .unwrap_or(0);
    let leader = &replicas[&second].raft;
    leader.trigger().snapshot().await.unwrap();
    let snapshot = leader
        .wait(Some(WAIT))
        .metrics(
            |m| m.snapshot.is_some_and(|s| s.index > behind),
            "a snapshot past the cut-off node's log",
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
            "the purge past the cut-off node's log",
        )
        .await
        .unwrap();

    // Back in: it catches up from the snapshot and drops what it wrote
    // alone.
    router.cut.lock().clear();
    converged(&replicas, 80).await;
    for replica in replicas.values() {
        assert!(!replica.machine.0.lock().contains_key("lost"));
    }
    for replica in replicas.values() {
        replica.raft.shutdown().await.unwrap();
    }
}
