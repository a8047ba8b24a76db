//! Three replicas of one group in one process, joined by a channel router
//! that can cut a node off: they agree on every committed command, a cut-off
//! leader is replaced and commits nothing alone, a node that rejoins after
//! the log it missed was purged catches up from a snapshot, and a commit
//! reaches the followers with nothing after it to carry it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;

use super::machine::GroupMachine;
use super::testing::{
    Replica, Router, WAIT, cluster, cluster_with, config, eventually, last_log_index,
    leader_other_than, purge_past,
};
use super::types::{Command, NodeId};

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

    type Captured = BTreeMap<String, String>;

    fn capture(&self) -> Self::Captured {
        self.0.lock().clone()
    }

    fn encode(map: Self::Captured) -> Result<Bytes, String> {
        let lines: Vec<String> = map.iter().map(|(k, v)| format!("{k}={v}")).collect();
        Ok(Bytes::from(lines.join("\n")))
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

/// Write `key` through the leader among the replicas other than `not`,
/// the one leading when the write is made: on a busy machine leadership
/// may move between two writes, which is not what the test is about.
async fn write(replicas: &BTreeMap<NodeId, Replica<Kv>>, not: Option<NodeId>, key: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let leader = leader_other_than(replicas, not).await;
        let written = replicas[&leader]
            .raft
            .client_write(Command::new(
                Bytes::from(format!("k{key:03}=v{key}")),
                false,
            ))
            .await;
        match written {
            Ok(_) => return,
            Err(error) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(%error, "the leader changed under a write; writing again");
            }
            Err(error) => panic!("k{key:03} not written in {WAIT:?}: {error}"),
        }
    }
}

async fn converged(replicas: &BTreeMap<NodeId, Replica<Kv>>, keys: usize) {
    let expected: BTreeMap<String, String> = (0..keys)
        .map(|key| (format!("k{key:03}"), format!("v{key}")))
        .collect();
    eventually(&format!("the replicas to converge on {keys} keys"), || {
        replicas
            .values()
            .all(|replica| *replica.machine.0.lock() == expected)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_agree_replace_a_cut_off_leader_and_catch_up_from_a_snapshot() {
    let router = Router::default();
    let replicas = cluster(&router, 3, Kv::default).await;

    let first = leader_other_than(&replicas, None).await;
    for key in 0..40 {
        write(&replicas, None, key).await;
    }
    converged(&replicas, 40).await;

    // Cut the leader off: the other two elect a new one and go on.
    router.cut.lock().insert(first);
    let second = leader_other_than(&replicas, Some(first)).await;
    for key in 40..80 {
        write(&replicas, Some(first), key).await;
    }
    // Alone, the old leader commits nothing.
    let lonely = tokio::time::timeout(
        Duration::from_millis(500),
        replicas[&first]
            .raft
            .client_write(Command::new(Bytes::from_static(b"lost=write"), false)),
    )
    .await;
    assert!(
        !matches!(lonely, Ok(Ok(_))),
        "a cut-off leader must not commit"
    );
    assert!(!replicas[&second].machine.0.lock().contains_key("lost"));

    // The leader snapshots and purges the log the cut-off node lacks, so
    // the only way back for it is the snapshot.
    let behind = last_log_index(&replicas[&first].raft);
    let second = leader_other_than(&replicas, Some(first)).await;
    purge_past(&replicas[&second].raft, behind).await;

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

/// The vendored openraft holds a commit back for a moment so the next
/// entries carry it (vendor/README.md); with no entries after it, it must
/// still go alone. Heartbeats (which carry commits too) and elections
/// (a new leader commits an entry of its own) are off here, so the last
/// write reaches the followers' machines only that way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_with_nothing_after_it_still_reaches_the_followers() {
    let router = Router::default();
    let quiet = openraft::Config {
        enable_heartbeat: false,
        enable_elect: false,
        ..(*config()).clone()
    };
    let replicas = cluster_with(&router, 3, Kv::default, Arc::new(quiet)).await;
    for key in 0..3 {
        write(&replicas, None, key).await;
        converged(&replicas, key + 1).await;
    }
    for replica in replicas.values() {
        replica.raft.shutdown().await.unwrap();
    }
}
