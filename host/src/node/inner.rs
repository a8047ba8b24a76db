//! The node's shared state: [`Node`], the handle every part of the node holds,
//! and [`NodeInner`], what it shares.

use std::sync::Arc;

use tokio::sync::Mutex;

use super::boot::BootStats;
use super::config::NodeConfig;
use super::gate::OperationGate;
use super::memory::MemoryMonitor;
use super::router::Router;
use crate::clock::HybridClock;
use crate::cluster::Cluster;
use crate::expiry::outbox::Outbox;
use crate::fragment::Fragment;
use crate::plugin::PluginRegistry;
use crate::store::{Committer, DataDirMeta, KvStore};

pub(crate) struct NodeInner {
    pub(crate) config: NodeConfig,
    pub(crate) meta: DataDirMeta,
    pub(crate) router: Router,
    pub(crate) fragments: Vec<Fragment>,
    pub(crate) gate: OperationGate,
    /// Resident-memory sampler and the write check against `max_memory`.
    pub(crate) memory: MemoryMonitor,
    /// Taken out (and so closed) by a completed shutdown.
    pub(super) store: parking_lot::Mutex<Option<Arc<dyn KvStore>>>,
    pub(crate) plugins: Arc<PluginRegistry>,
    /// Native SQL functions registered by the embedding application.
    pub(crate) natives: Arc<crate::native::NativeFunctions>,
    /// Expiry bindings, outbox sequence and statistics.
    pub(crate) outbox: Arc<Outbox>,
    /// Plugin installs and removals, checked against the bindings (its
    /// lock serializes binding changes with them).
    pub(crate) admin: Arc<super::admin::PluginAdmin>,
    /// The expiry dispatcher, until shutdown stops it.
    pub(super) dispatcher: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
    pub(super) committer: Arc<Committer>,
    pub(super) clock: Arc<HybridClock>,
    pub(super) boot: BootStats,
    pub(super) closed: Mutex<bool>,
    /// The fragments' Raft groups, in a cluster.
    pub(crate) cluster: Option<Arc<Cluster>>,
}

/// An ebb node. Cheap to clone; all clones share the node.
///
/// Open it with [`Node::open`] inside a tokio runtime and end it with
/// [`Node::shutdown`], which drains admitted work and flushes everything;
/// dropping a node without shutting it down loses only `memory`-durability
/// writes of the last flush interval.
#[derive(Clone)]
pub struct Node {
    pub(crate) inner: Arc<NodeInner>,
}
