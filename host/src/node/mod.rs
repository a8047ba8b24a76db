//! The node: owns the store, the clock, the fragments and their router, the
//! operation gate, and the boot and shutdown sequences.

mod admin;
pub mod backup;
pub(crate) mod boot;
pub mod config;
pub(crate) mod error;
mod expiry;
mod expiry_cluster;
pub(crate) mod gate;
mod inner;
pub mod memory;
mod pages;
mod plugins;
pub(crate) mod router;
pub(crate) mod table;

pub use backup::{BackupError, BackupReport};
pub use boot::BootStats;
pub use inner::Node;
pub(crate) use inner::NodeInner;
pub use plugins::PluginChange;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use crate::clock::{HybridClock, now_ms};
use crate::cluster::{Cluster, ClusterStatus};
use crate::exec::{ExecContext, QueryError, QueryOutput, QueryRequest, QueryStats};
use crate::expiry::outbox::Outbox;
use crate::fragment::flush::Persistence;
use crate::fragment::runtime::FragmentConfig;
use crate::fragment::state::FragmentState;
use crate::fragment::{Fragment, FragmentHealth};
use crate::names::TableName;
use crate::plugin::{PluginError, PluginRegistry, PluginRuntime};
use crate::store::{Committer, DataDirMeta, KvStore, RocksStore, StoreError};
use config::{DEFAULT_FRAGMENTS, NodeConfig};
use error::{OpenError, ShutdownError};
use gate::OperationGate;
use memory::{MemoryHealth, MemoryMonitor};
use router::Router;
use table::Table;

/// A table with its record counts and the memory its records hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    /// The table.
    pub name: TableName,
    /// Live records over all fragments (records past their deadline count
    /// until the cleaner converts them, normally within milliseconds).
    pub live_records: usize,
    /// Tombstones (deletes and converted expiries) over all fragments.
    pub tombstones: usize,
    /// Bytes the table's records and their index hold in memory.
    pub memory_bytes: usize,
}

/// Health of the whole node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeHealth {
    /// Whether the node admits operations.
    pub accepting: bool,
    /// Operations in progress.
    pub active_operations: usize,
    /// Per-fragment reports, in fragment order; `None` when a supervisor did
    /// not answer.
    pub fragments: Vec<Option<FragmentHealth>>,
    /// Resident memory, the bound, and whether writes are refused.
    pub memory: MemoryHealth,
    /// In a cluster, why this member refuses client requests: its layout
    /// conflicts with the one the cluster recorded.
    pub layout_conflict: Option<String>,
}

impl NodeHealth {
    /// Accepting, not refusing writes for memory, and every fragment
    /// answered and is healthy.
    pub fn is_healthy(&self) -> bool {
        self.accepting
            && self.layout_conflict.is_none()
            && !self.memory.full
            && self
                .fragments
                .iter()
                .all(|f| f.as_ref().is_some_and(FragmentHealth::is_healthy))
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StoreError::Engine(format!("blocking task failed: {e}")))?
}

impl Node {
    /// Open (or create) the data dir of `config` and start serving: load
    /// every record, convert records that expired while down, seed the
    /// clock above every persisted version and start the fragments.
    pub async fn open(config: NodeConfig) -> Result<Node, OpenError> {
        config.validate()?;
        let dir = config.data_dir.clone();
        std::fs::create_dir_all(&dir).map_err(|source| OpenError::DataDir {
            path: dir.display().to_string(),
            source,
        })?;
        let store = blocking(move || RocksStore::open(&dir)).await?;
        Self::open_with_store(config, store).await
    }

    /// Like [`Node::open`] over a given store (e.g. [`crate::store::MemoryStore`]).
    pub async fn open_with_store(
        config: NodeConfig,
        store: Arc<dyn KvStore>,
    ) -> Result<Node, OpenError> {
        config.validate()?;
        let mut meta = {
            let store = store.clone();
            let requested = config.fragments;
            tokio::task::spawn_blocking(move || {
                DataDirMeta::open(&*store, requested, DEFAULT_FRAGMENTS)
            })
            .await
            .map_err(|e| StoreError::Engine(e.to_string()))??
        };
        // Members sharing a cluster secret share a cursor key, so a cursor
        // continues on any of them (docs/cluster.md, "Cursors").
        if let Some(secret) = config
            .cluster
            .as_ref()
            .and_then(|setup| setup.config.secret.as_deref())
        {
            meta.cursor_key = crate::exec::shared_cursor_key(secret);
        }
        let placement = match &config.cluster {
            Some(setup) => Some(setup.config.validate(meta.fragments)?),
            None => None,
        };
        let outbox = Arc::new(Outbox::new());
        let pending_events = {
            let store = store.clone();
            let outbox = outbox.clone();
            blocking(move || expiry::load(&*store, &outbox)).await?
        };
        // A replica converts due records only through its group's log, so
        // boot converts nothing there (readers hide expired records anyway).
        let now = if placement.is_some() { 0 } else { now_ms() };
        let mut loads = Vec::new();
        for fragment in 0..meta.fragments {
            let store = store.clone();
            let outbox = outbox.clone();
            loads.push(tokio::task::spawn_blocking(move || {
                let loaded = boot::load_fragment(&*store, fragment, now, &outbox);
                // The load's scratch (each table's list of records) was
                // freed on this thread: hand it back now, not when the
                // idle thread exits 10 s later.
                crate::alloc::release_thread_memory();
                loaded
            }));
        }
        let mut loaded = Vec::new();
        for load in loads {
            loaded.push(
                load.await
                    .map_err(|e| StoreError::Engine(e.to_string()))??,
            );
        }
        let high_water = loaded
            .iter()
            .map(|f| f.high_water)
            .fold(meta.hlc_high_water, Ord::max);
        let clock = Arc::new(HybridClock::new(
            meta.node_id.clone(),
            high_water.0,
            high_water.1,
        ));
        let boot = BootStats {
            records: loaded.iter().map(|f| f.records).sum(),
            converted: loaded.iter().map(|f| f.converted).sum(),
        };
        let mut pending_events = pending_events;
        for fragment in &mut loaded {
            pending_events.append(&mut fragment.events);
        }
        let plugins = {
            let store = store.clone();
            let limits = config.plugins;
            let expiry_calls = config.expiry.concurrency;
            tokio::task::spawn_blocking(move || {
                let runtime =
                    PluginRuntime::new(limits, expiry_calls).map_err(PluginError::Engine)?;
                PluginRegistry::load(runtime, &*store)
            })
            .await
            .map_err(|e| StoreError::Engine(e.to_string()))?
            .map_err(OpenError::Plugins)?
        };
        let plugins = Arc::new(plugins);
        let admin = Arc::new(admin::PluginAdmin::new(
            plugins.clone(),
            outbox.clone(),
            &store,
        ));
        let memory_limit = config.max_memory.resolve();
        if memory_limit.is_none() && config.max_memory != memory::MaxMemory::Unbounded {
            tracing::warn!(
                bound = %config.max_memory,
                "the machine's memory cannot be read: max_memory is not enforced"
            );
        }
        let committer = Arc::new(Committer::start(store.clone())?);
        let fragment_config = FragmentConfig {
            high_pool: config.high_pool,
            inline_writes: config.inline_writes,
            background_capacity: config.background_capacity,
            flush_interval: config.flush_interval,
            clean_interval: config.clean_interval,
            tombstone_retention: config.tombstone_retention,
            replicated: placement.is_some(),
        };
        let mut fragments: Vec<Fragment> = Vec::new();
        for (id, fragment) in loaded.into_iter().enumerate() {
            let id = id as u32;
            let persistence = Arc::new(Persistence::new(
                id,
                committer.clone(),
                config.flush_records,
                config.max_backlog_bytes,
                outbox.clone(),
            ));
            let state = Arc::new(FragmentState::new(
                id,
                fragment.partitions,
                persistence,
                clock.clone(),
            ));
            match Fragment::start(state, fragment_config.clone()).await {
                Ok(started) => fragments.push(started),
                Err(error) => {
                    // Roll back: nothing was written yet, stop what started.
                    for started in &fragments {
                        started.stop().await;
                    }
                    let closing = committer.clone();
                    let _ = tokio::task::spawn_blocking(move || closing.close()).await;
                    return Err(OpenError::Runtime {
                        fragment: id,
                        source: error,
                    });
                }
            }
        }
        let cluster = match (&config.cluster, placement) {
            (Some(setup), Some(placement)) => {
                let states: Vec<Arc<FragmentState>> =
                    fragments.iter().map(|f| f.state().clone()).collect();
                let started = Cluster::start(
                    setup.config.clone(),
                    placement,
                    &states,
                    store.clone(),
                    setup.transport.clone(),
                    admin.clone(),
                )
                .await;
                let cluster = match started {
                    Ok(cluster) => cluster,
                    Err(error) => {
                        for started in &fragments {
                            started.stop().await;
                        }
                        let closing = committer.clone();
                        let _ = tokio::task::spawn_blocking(move || closing.close()).await;
                        return Err(OpenError::Cluster(error));
                    }
                };
                for (fragment, hook) in cluster.replicators() {
                    fragments[fragment as usize].set_replicator(hook);
                }
                Some(Arc::new(cluster))
            }
            _ => None,
        };
        tracing::info!(
            fragments = meta.fragments,
            records = boot.records,
            converted = boot.converted,
            expiry_events = pending_events.len(),
            node_id = %meta.node_id,
            max_memory_bytes = memory_limit,
            "node open"
        );
        let node = Node {
            inner: Arc::new(NodeInner {
                router: Router::new(meta.fragments),
                config,
                meta,
                fragments,
                gate: OperationGate::default(),
                memory: MemoryMonitor::start(memory_limit),
                store: parking_lot::Mutex::new(Some(store.clone())),
                plugins,
                natives: Arc::default(),
                outbox,
                admin,
                dispatcher: parking_lot::Mutex::new(None),
                committer,
                clock,
                boot,
                closed: Mutex::new(false),
                cluster,
            }),
        };
        if let Some(cluster) = &node.inner.cluster {
            cluster.set_page_server(Arc::new(pages::NodePages::new(&node.inner)));
            cluster.set_outbox_server(Arc::new(expiry_cluster::NodeOutboxes::new(&node.inner)));
            cluster.start_layout_check();
            cluster.start_leader_balance();
        }
        node.start_dispatcher(store, pending_events);
        Ok(node)
    }

    /// A handle on a validated table.
    pub(crate) fn table_handle(&self, name: TableName) -> Table {
        Table::new(self.clone(), name)
    }

    /// A handle on table `name` (validated, lower-cased). A table exists
    /// once written to; reading a table never written is not an error.
    pub fn table(&self, name: &str) -> Result<Table, crate::Error> {
        Ok(Table::new(self.clone(), TableName::new(name)?))
    }

    /// Tables with at least one live record, sorted by name.
    pub fn tables(&self) -> Vec<TableInfo> {
        let mut tables = self.table_usage();
        tables.retain(|table| table.live_records > 0);
        tables
    }

    /// Every table holding records (live or tombstones), sorted by name:
    /// what each holds in memory.
    pub fn table_usage(&self) -> Vec<TableInfo> {
        let mut tables: std::collections::BTreeMap<TableName, TableInfo> = Default::default();
        for fragment in &self.inner.fragments {
            for info in fragment.state().partition_infos() {
                let table = tables
                    .entry(info.table.clone())
                    .or_insert_with(|| TableInfo {
                        name: info.table,
                        live_records: 0,
                        tombstones: 0,
                        memory_bytes: 0,
                    });
                table.live_records += info.live;
                table.tombstones += info.tombstones;
                table.memory_bytes += info.memory_bytes;
            }
        }
        tables
            .into_values()
            .filter(|table| table.live_records + table.tombstones > 0)
            .collect()
    }

    /// Resident memory, the bound, and whether writes are refused.
    pub fn memory(&self) -> MemoryHealth {
        self.inner.memory.health()
    }

    /// The store's memory and disk use (RocksDB memtables, block cache,
    /// live SST files), read on a blocking thread. Fails with
    /// [`StoreError::Closed`] after shutdown.
    pub async fn store_stats(&self) -> Result<crate::store::StoreStats, StoreError> {
        let store = self.inner.store.lock().clone().ok_or(StoreError::Closed)?;
        blocking(move || store.stats()).await
    }

    /// What the executor needs of this node for one query (it never sees
    /// the node itself).
    fn exec_context<'a>(
        &'a self,
        fragment_of: &'a (dyn Fn(&str) -> u32 + Sync),
    ) -> ExecContext<'a> {
        ExecContext {
            budgets: self.inner.config.query,
            cursor_key: &self.inner.meta.cursor_key,
            plugins: &self.inner.plugins,
            natives: &self.inner.natives,
            fragment_of,
            fragments: &self.inner.fragments,
            cluster: self.inner.cluster.as_ref(),
        }
    }

    /// In a cluster, wait until every fragment this node holds a replica
    /// of can be read from it linearizably (see [`Cluster::linearize`]),
    /// or within `max_staleness` when the request allows it (see
    /// [`Cluster::read_within`]); at once otherwise. The executor reads
    /// the others from their leaders.
    async fn linearize_all(&self, max_staleness: Option<Duration>) -> Result<(), QueryError> {
        crate::cluster::check_staleness(max_staleness).map_err(QueryError::InvalidRequest)?;
        let Some(cluster) = &self.inner.cluster else {
            return Ok(());
        };
        let reads = (0..self.inner.meta.fragments)
            .filter(|fragment| cluster.holds(*fragment))
            .map(|fragment| async move {
                match max_staleness {
                    Some(bound) => cluster.read_within(fragment, bound).await.map(drop),
                    None => cluster.linearize(fragment).await,
                }
            });
        for result in futures::future::join_all(reads).await {
            result?;
        }
        Ok(())
    }

    /// The cluster as this node sees it, or `None` for a single node.
    pub async fn cluster_status(&self) -> Option<ClusterStatus> {
        match &self.inner.cluster {
            Some(cluster) => Some(cluster.status().await),
            None => None,
        }
    }

    /// The node's cluster runtime, or `None` for a single node: serves the
    /// Raft and forwarded requests of the other members.
    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.inner.cluster.as_ref()
    }

    /// Run a SQL query (or continue one with a cursor); one page of results.
    pub async fn query(&self, request: QueryRequest) -> Result<QueryOutput, QueryError> {
        let _admitted = self.inner.gate.admit().ok_or(QueryError::ShuttingDown)?;
        self.linearize_all(request.max_staleness).await?;
        let router = self.inner.router;
        let fragment_of = move |key: &str| router.fragment_of(key);
        crate::exec::execute(&self.exec_context(&fragment_of), request).await
    }

    /// Run a SQL query and stream every result row into `rows` (no
    /// paging); `columns` receives the result columns before the first
    /// row. A query whose `rows` receiver goes away fails with
    /// [`QueryError::Cancelled`].
    pub async fn query_stream(
        &self,
        request: QueryRequest,
        columns: tokio::sync::oneshot::Sender<Vec<ebb_query::OutputColumn>>,
        rows: tokio::sync::mpsc::Sender<Vec<ebb_query::Value>>,
    ) -> Result<QueryStats, QueryError> {
        let _admitted = self.inner.gate.admit().ok_or(QueryError::ShuttingDown)?;
        self.linearize_all(request.max_staleness).await?;
        let router = self.inner.router;
        let fragment_of = move |key: &str| router.fragment_of(key);
        crate::exec::stream(&self.exec_context(&fragment_of), request, columns, rows).await
    }

    /// The store, until shutdown closes it.
    pub(crate) fn store(&self) -> Result<Arc<dyn KvStore>, crate::Error> {
        self.inner
            .store
            .lock()
            .clone()
            .ok_or(crate::Error::ShuttingDown)
    }

    /// Register a native scalar function callable in SQL as
    /// `namespace.name(...)` (replacing one of that name). Natives run
    /// in-process, unsandboxed, on the query threads, and
    /// shadow a plugin function of the same qualified name.
    pub fn register_scalar(
        &self,
        namespace: &str,
        name: &str,
        function: Arc<dyn ebb_query::ScalarFunction>,
    ) -> Result<(), crate::Error> {
        self.inner
            .natives
            .add_scalar(namespace, name, function)
            .map_err(crate::Error::InvalidFunction)
    }

    /// Register a native aggregate function (see [`Node::register_scalar`]).
    pub fn register_aggregate(
        &self,
        namespace: &str,
        name: &str,
        function: Arc<dyn ebb_query::AggregateFunction>,
    ) -> Result<(), crate::Error> {
        self.inner
            .natives
            .add_aggregate(namespace, name, function)
            .map_err(crate::Error::InvalidFunction)
    }

    /// The installed plugins.
    pub fn plugins(&self) -> &Arc<PluginRegistry> {
        &self.inner.plugins
    }

    /// Per-fragment health.
    pub async fn health(&self) -> NodeHealth {
        let mut fragments = Vec::with_capacity(self.inner.fragments.len());
        for fragment in &self.inner.fragments {
            fragments.push(fragment.health().await);
        }
        NodeHealth {
            accepting: self.inner.gate.is_open(),
            active_operations: self.inner.gate.active(),
            fragments,
            memory: self.inner.memory.health(),
            layout_conflict: self.inner.cluster.as_ref().and_then(|cluster| {
                match cluster.layout_check() {
                    crate::cluster::LayoutCheck::Conflict { message } => Some(message),
                    _ => None,
                }
            }),
        }
    }

    /// Number of fragments (fixed for the data dir).
    pub fn fragment_count(&self) -> u32 {
        self.inner.meta.fragments
    }

    /// This node's id, stamped into the versions it issues.
    pub fn node_id(&self) -> &str {
        &self.inner.meta.node_id
    }

    /// The data directory.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.inner.config.data_dir
    }

    /// The configuration the node was opened with.
    pub fn config(&self) -> &NodeConfig {
        &self.inner.config
    }

    /// Each fragment's flush latencies, in fragment order.
    pub fn flush_latencies(&self) -> impl Iterator<Item = &crate::metrics::Histogram> {
        self.inner
            .fragments
            .iter()
            .map(|fragment| fragment.state().persistence().flush_latency())
    }

    /// What boot loaded and converted.
    pub fn boot_stats(&self) -> BootStats {
        self.inner.boot
    }

    /// The fragment a key belongs to (the same in every table).
    pub fn fragment_of(&self, key: &str) -> u32 {
        self.inner.router.fragment_of(key)
    }

    /// Kill one child of one fragment as a crash would; its supervisor
    /// restarts it. For tests and failure drills.
    pub async fn kill_fragment_child(&self, fragment: u32, child: crate::fragment::Child) {
        if let Some(fragment) = self.inner.fragments.get(fragment as usize) {
            fragment.kill_child(child).await;
        }
    }

    /// Graceful shutdown: close admission, wait for admitted operations,
    /// quiesce every fragment (final expiry pass and flush), record the
    /// clock's high-water mark, sync and close the store.
    ///
    /// On error nothing buffered is dropped: the node stays closed to new
    /// work and calling `shutdown` again retries the remaining steps.
    pub async fn shutdown(&self) -> Result<(), ShutdownError> {
        let mut closed = self.inner.closed.lock().await;
        if *closed {
            return Ok(());
        }
        self.stop_dispatcher().await;
        self.inner.gate.close_and_drain().await;
        self.inner.memory.stop();
        if let Some(cluster) = &self.inner.cluster {
            // Leaders step down first, so their fragments are writable on
            // the other replicas within a heartbeat rather than after an
            // election timeout; then the groups stop applying.
            cluster.hand_over().await;
            cluster.shutdown().await;
        }
        let mut quiesces = Vec::new();
        for fragment in &self.inner.fragments {
            quiesces.push(fragment.quiesce());
        }
        for result in futures::future::join_all(quiesces).await {
            result?;
        }
        for fragment in &self.inner.fragments {
            fragment.stop().await;
        }
        let Some(store) = self.inner.store.lock().clone() else {
            return Err(ShutdownError::Store(StoreError::Closed));
        };
        let high_water = self.inner.clock.high_water();
        let committer = self.inner.committer.clone();
        let admin = self.inner.admin.clone();
        blocking(move || {
            // Optimized plugin code still compiling is stored before the
            // store closes, so the next boot loads it instead of compiling.
            admin.finish_optimizing();
            DataDirMeta::save_high_water(&*store, high_water)?;
            store.sync()?;
            // The next boot then reads table files, not the log: replaying
            // a log of a million records doubled the first boot's time.
            store.flush_log()?;
            // The committer thread holds the store too: stop it, then drop
            // our reference so the database closes (and its lock is released).
            committer.close();
            Ok(())
        })
        .await?;
        let store = self.inner.store.lock().take();
        let _ = tokio::task::spawn_blocking(move || drop(store)).await;
        *closed = true;
        tracing::info!("node shut down");
        Ok(())
    }
}
