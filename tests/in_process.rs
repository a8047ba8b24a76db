//! Cluster members in one process for the in-process suites: each message
//! delivered by calling the target member's cluster directly (the server
//! carries them over its cluster port; the routing above it is the same).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use ebb_host::cluster::{Cluster, ClusterConfig};
use ebb_host::node::config::ClusterSetup;
use ebb_host::raft::{NodeId, Service, Transport, TransportError};
use ebb_host::store::MemoryStore;
use ebb_host::{Node, NodeConfig};
use futures::future::BoxFuture;

/// Delivers each message to the member it is for, in this process.
#[derive(Default)]
pub struct InProcess {
    members: parking_lot::RwLock<HashMap<NodeId, Weak<Cluster>>>,
}

impl Transport for InProcess {
    fn call(
        &self,
        to: NodeId,
        service: Service,
        body: Bytes,
        timeout: Duration,
    ) -> BoxFuture<'static, Result<Bytes, TransportError>> {
        let target = self.members.read().get(&to).and_then(Weak::upgrade);
        Box::pin(async move {
            let Some(cluster) = target else {
                return Err(TransportError::Unreachable {
                    node: to,
                    reason: "not started".into(),
                });
            };
            let answer = async {
                match service {
                    Service::Raft => cluster.serve_raft(&body).await,
                    Service::Forward | Service::ForwardShort => cluster.serve_forward(&body).await,
                }
            };
            tokio::time::timeout(timeout, answer)
                .await
                .map_err(|_| TransportError::Timeout {
                    node: to,
                    ms: timeout.as_millis() as u64,
                })
        })
    }
}

/// Open `members` members (ids 1 to `members`) of one cluster with
/// `replication` replicas of each of `fragments` fragments, each over a
/// memory store, with `configure` applied to each member's node config.
pub async fn open_cluster(
    members: u64,
    replication: usize,
    fragments: u32,
    configure: impl Fn(NodeConfig) -> NodeConfig,
) -> Vec<Node> {
    let transport = Arc::new(InProcess::default());
    let peers: BTreeMap<NodeId, String> = (1..=members)
        .map(|id| (id, format!("in-process-{id}")))
        .collect();
    let opens = (1..=members).map(|id| {
        let mut settings = ClusterConfig::new(id, peers.clone());
        settings.replication = replication;
        let mut config = configure(NodeConfig::new(format!("member-{id}")).fragments(fragments));
        config.cluster = Some(ClusterSetup {
            config: settings,
            transport: transport.clone(),
        });
        let transport = transport.clone();
        async move {
            let node = Node::open_with_store(config, Arc::new(MemoryStore::new()))
                .await
                .unwrap();
            let member = Arc::downgrade(node.cluster().unwrap());
            transport.members.write().insert(id, member);
            node
        }
    });
    futures::future::join_all(opens).await
}
