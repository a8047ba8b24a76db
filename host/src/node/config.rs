//! Node settings with their defaults, in one place.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::memory::MaxMemory;
use crate::cluster::ClusterConfig;
use crate::exec::QueryBudgets;
use crate::expiry::ExpiryConfig;
use crate::fragment::pool::PoolConfig;
use crate::plugin::PluginLimits;
use crate::raft::Transport;

/// Fragments of a new data dir unless configured otherwise.
pub const DEFAULT_FRAGMENTS: u32 = 16;
/// Largest value accepted by default.
pub const DEFAULT_MAX_VALUE_BYTES: usize = 1024 * 1024;
/// Largest value the limit can be raised to.
pub const MAX_VALUE_BYTES_CEILING: usize = 16 * 1024 * 1024;
/// How long tombstones stand before they are purged, by default.
pub const DEFAULT_TOMBSTONE_RETENTION: Duration = Duration::from_secs(60);
/// Most fragments a data dir can have.
pub const MAX_FRAGMENTS: u32 = 1024;

/// Settings of a [`crate::Node`]. `NodeConfig::new(dir)` gives the defaults;
/// the builder methods change one setting each.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Data directory (created if missing). Default `./ebb-data`.
    pub data_dir: PathBuf,
    /// Fragment count for a new data dir; for an existing one, `Some(n)` must
    /// match what it was created with. Default: `None` (16 for a new dir).
    pub fragments: Option<u32>,
    /// Largest value in bytes. Default 1 MiB, at most 16 MiB.
    pub max_value_bytes: usize,
    /// Buffered (`memory`) writes reach the store within this interval.
    /// Default 100 ms.
    pub flush_interval: Duration,
    /// A fragment starts a flush once this many records are buffered.
    /// Default 4096.
    pub flush_records: usize,
    /// Bytes a fragment may buffer for the store before refusing writes
    /// (only reached when the store is slow or failing). Default 64 MiB.
    pub max_backlog_bytes: usize,
    /// The cleaner sweeps at least this often besides waking at deadlines.
    /// Default 1 s.
    pub clean_interval: Duration,
    /// Tombstones (deletes and converted expiries) are purged from memory
    /// and the store once they stood this long; zero purges them at the
    /// cleaner's next run. Default 60 s (see docs/storage.md).
    pub tombstone_retention: Duration,
    /// Client writes, per fragment: worker actors that apply them and
    /// writes admitted at once. Default 2 workers, 4096 queued.
    pub high_pool: PoolConfig,
    /// Whether a write whose worker slot is idle (nothing queued, nothing
    /// applying) applies on the caller's task instead of its worker's, in
    /// the same order and under the same admission (docs/runtime.md).
    /// Default true; false sends every write through its worker.
    pub inline_writes: bool,
    /// Query pages admitted at once per fragment (waiting for or running on
    /// a query thread); one more is shed with `QueryError::Overloaded`.
    /// Admission only: the pages run on the query threads. Default 256.
    pub background_capacity: usize,
    /// SQL budgets and page sizes.
    pub query: QueryBudgets,
    /// Plugin sandbox limits.
    pub plugins: PluginLimits,
    /// Expiry handler pacing: retry backoff, batching, concurrency.
    pub expiry: ExpiryConfig,
    /// Bound on the process's resident memory past which puts are refused
    /// ([`crate::node::memory`]). Default 80 % of the machine's or cgroup's
    /// memory ([`super::memory::DEFAULT_MAX_MEMORY`]).
    pub max_memory: MaxMemory,
    /// Membership of a cluster: each fragment is then a Raft group
    /// replicated on `replication` members (docs/cluster.md). Default
    /// `None`: a single node.
    pub cluster: Option<ClusterSetup>,
}

/// What a node needs to be a member of a cluster: its settings and the
/// transport that carries its messages to the other members.
#[derive(Clone)]
pub struct ClusterSetup {
    /// The cluster settings.
    pub config: ClusterConfig,
    /// Carries Raft and forwarded requests to the other members.
    pub transport: Arc<dyn Transport>,
}

impl std::fmt::Debug for ClusterSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSetup")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Default for NodeConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("ebb-data"),
            fragments: None,
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            flush_interval: Duration::from_millis(100),
            flush_records: 4096,
            max_backlog_bytes: 64 * 1024 * 1024,
            clean_interval: Duration::from_secs(1),
            tombstone_retention: DEFAULT_TOMBSTONE_RETENTION,
            high_pool: PoolConfig {
                workers: 2,
                capacity: 4096,
            },
            inline_writes: true,
            background_capacity: 256,
            query: QueryBudgets::default(),
            plugins: PluginLimits::default(),
            expiry: ExpiryConfig::default(),
            max_memory: MaxMemory::default(),
            cluster: None,
        }
    }
}

/// A setting is out of range.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);

impl NodeConfig {
    /// Defaults with the data directory `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            ..Self::default()
        }
    }

    /// Set the fragment count (see [`NodeConfig::fragments`]).
    pub fn fragments(mut self, fragments: u32) -> Self {
        self.fragments = Some(fragments);
        self
    }

    /// Set the largest accepted value.
    pub fn max_value_bytes(mut self, bytes: usize) -> Self {
        self.max_value_bytes = bytes;
        self
    }

    /// Set the flush interval of buffered writes.
    pub fn flush_interval(mut self, interval: Duration) -> Self {
        self.flush_interval = interval;
        self
    }

    /// Set the cleaner's fallback sweep interval.
    pub fn clean_interval(mut self, interval: Duration) -> Self {
        self.clean_interval = interval;
        self
    }

    /// Set how long tombstones stand before they are purged.
    pub fn tombstone_retention(mut self, retention: Duration) -> Self {
        self.tombstone_retention = retention;
        self
    }

    /// Set the client write pool.
    pub fn high_pool(mut self, pool: PoolConfig) -> Self {
        self.high_pool = pool;
        self
    }

    /// Set whether writes to an idle worker slot apply on the caller's task.
    pub fn inline_writes(mut self, inline: bool) -> Self {
        self.inline_writes = inline;
        self
    }

    /// Set how many query pages a fragment admits at once.
    pub fn background_capacity(mut self, capacity: usize) -> Self {
        self.background_capacity = capacity;
        self
    }

    /// Set the SQL budgets.
    pub fn query_budgets(mut self, budgets: QueryBudgets) -> Self {
        self.query = budgets;
        self
    }

    /// Set the expiry handler pacing.
    pub fn expiry(mut self, expiry: ExpiryConfig) -> Self {
        self.expiry = expiry;
        self
    }

    /// Set the memory bound.
    pub fn max_memory(mut self, bound: MaxMemory) -> Self {
        self.max_memory = bound;
        self
    }

    /// Set the backlog limit per fragment.
    pub fn max_backlog_bytes(mut self, bytes: usize) -> Self {
        self.max_backlog_bytes = bytes;
        self
    }

    /// Check every setting; the error names the setting and its range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(fragments) = self.fragments
            && !(1..=MAX_FRAGMENTS).contains(&fragments)
        {
            return Err(ConfigError(format!(
                "fragments is {fragments}; use 1 to {MAX_FRAGMENTS}"
            )));
        }
        if self.max_value_bytes == 0 || self.max_value_bytes > MAX_VALUE_BYTES_CEILING {
            return Err(ConfigError(format!(
                "max_value_bytes is {}; use 1 to {MAX_VALUE_BYTES_CEILING}",
                self.max_value_bytes
            )));
        }
        if self.flush_interval.is_zero() || self.clean_interval.is_zero() {
            return Err(ConfigError(
                "flush_interval and clean_interval must be at least 1 ms".into(),
            ));
        }
        if self.high_pool.workers == 0
            || self.high_pool.capacity == 0
            || self.high_pool.workers > 64
        {
            return Err(ConfigError(
                "high_pool needs 1 to 64 workers and a capacity of at least 1".into(),
            ));
        }
        if self.background_capacity == 0 {
            return Err(ConfigError("background_capacity must be at least 1".into()));
        }
        for (name, deadline) in [
            ("plugin query_deadline", self.plugins.query_deadline),
            ("plugin expiry_deadline", self.plugins.expiry_deadline),
        ] {
            if deadline < Duration::from_millis(1) || deadline > Duration::from_secs(600) {
                return Err(ConfigError(format!(
                    "{name} is {deadline:?}; use 1 ms to 10 min"
                )));
            }
        }
        if !(1..=256).contains(&self.plugins.threads) {
            return Err(ConfigError(format!(
                "plugin threads is {}; use 1 to 256",
                self.plugins.threads
            )));
        }
        if self.expiry.backoff_base.is_zero()
            || self.expiry.backoff_max < self.expiry.backoff_base
            || !(1..=256).contains(&self.expiry.concurrency)
        {
            return Err(ConfigError(
                "expiry needs a backoff_base of at least 1 ms, backoff_max >= backoff_base and a concurrency of 1 to 256".into(),
            ));
        }
        match self.max_memory {
            MaxMemory::Bytes(0) => {
                return Err(ConfigError(
                    "max_memory is 0 bytes; use MaxMemory::Unbounded for no bound".into(),
                ));
            }
            MaxMemory::Percent(percent) if !(percent > 0.0 && percent <= 100.0) => {
                return Err(ConfigError(format!(
                    "max_memory is {percent}%; use above 0 to 100%"
                )));
            }
            _ => {}
        }
        if self.max_backlog_bytes < self.max_value_bytes {
            return Err(ConfigError(
                "max_backlog_bytes must be at least max_value_bytes".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_threads_are_one_to_256() {
        let mut config = NodeConfig::new("unused");
        assert!(config.plugins.threads >= 1, "default: the machine's cores");
        config.validate().unwrap();
        for bad in [0, 257] {
            config.plugins.threads = bad;
            let error = config.validate().unwrap_err();
            assert_eq!(error.0, format!("plugin threads is {bad}; use 1 to 256"));
        }
        config.plugins.threads = 256;
        config.validate().unwrap();
    }

    #[test]
    fn pools_need_workers_and_capacity() {
        let mut config = NodeConfig::new("unused");
        config.high_pool.workers = 0;
        assert!(config.validate().unwrap_err().0.contains("high_pool"));
        config.high_pool.workers = 2;
        config.background_capacity = 0;
        assert!(
            config
                .validate()
                .unwrap_err()
                .0
                .contains("background_capacity")
        );
        config.background_capacity = 1;
        config.validate().unwrap();
    }
}
