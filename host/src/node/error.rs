//! Errors of the embedded API: what a caller did wrong or what the node
//! could not do, each saying what to do next.

use super::config::ConfigError;
use super::memory::MemoryFull;
use crate::cluster::{ClusterConfigError, ClusterError, WriteFailure};
use crate::fragment::{BacklogFull, FragmentShutdownError, Shed, SubmitError};
use crate::names::NameError;
use crate::native::InvalidFunctionName;
use crate::plugin::PluginError;
use crate::record::Version;
use crate::store::{MetaError, StoreError};
use crate::write::InvalidTtl;

/// An operation failed. Nothing was applied unless the variant says so.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// Bad table name or key.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// The value is over `max_value_bytes`.
    #[error("value is {len} bytes; the limit is {limit} bytes (max_value_bytes, at most 16 MiB)")]
    ValueTooLarge {
        /// Size of the refused value.
        len: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The read allows more staleness than [`crate::cluster::MAX_STALENESS`].
    #[error("{0}")]
    InvalidStaleness(String),
    /// The TTL or deadline is not usable.
    #[error(transparent)]
    InvalidTtl(#[from] InvalidTtl),
    /// A conditional write's condition did not hold; nothing was written.
    #[error("{}", precondition_message(current.as_ref()))]
    PreconditionFailed {
        /// The version of the key's visible record, `None` when it has none
        /// (absent, deleted or expired).
        current: Option<Version>,
    },
    /// The fragment's pool is full; the operation was shed. Retry shortly.
    #[error(transparent)]
    Overloaded(#[from] Shed),
    /// The store is slow or failing and the fragment's write buffer is full.
    #[error(transparent)]
    Backlog(#[from] BacklogFull),
    /// The write would take the process past `max_memory`; nothing was
    /// applied. Deletes and expiry free memory; reads keep working.
    #[error(transparent)]
    MemoryFull(#[from] MemoryFull),
    /// The node is shutting down and admits no new operations.
    #[error("the node is shutting down")]
    ShuttingDown,
    /// The worker died before answering: the write may or may not have been
    /// applied. Writes are idempotent per key and version, so retry.
    #[error(
        "fragment {fragment}: the worker stopped before answering; the write may or may not be applied, retry it"
    )]
    Interrupted {
        /// The fragment whose worker died.
        fragment: u32,
    },
    /// A plugin operation failed (invalid module, limit, storage, engine).
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// A native function could not be registered (bad name).
    #[error("cannot register function: {0}")]
    InvalidFunction(#[from] InvalidFunctionName),
    /// The write is applied (visible to reads) but the store failed before
    /// it became durable. It stays buffered and is retried; health shows the
    /// store error.
    #[error(
        "fragment {fragment}: the write is applied but not yet durable ({source}); it is retained and retried"
    )]
    NotDurable {
        /// The fragment whose flush failed.
        fragment: u32,
        /// The store error.
        source: StoreError,
    },
    /// In a cluster: the fragment's leader could not commit or confirm the
    /// operation (no quorum within the timeout, a leader change mid-write,
    /// or a refusal by the leader).
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

fn precondition_message(current: Option<&Version>) -> String {
    match current {
        Some(version) => format!(
            "precondition failed: the key's current version is {version}; read it again and retry with that version"
        ),
        None => "precondition failed: the key has no visible record (absent, deleted or expired)"
            .to_string(),
    }
}

impl From<WriteFailure> for Error {
    fn from(failure: WriteFailure) -> Self {
        match failure {
            WriteFailure::Backlog(full) => Error::Backlog(full),
            WriteFailure::Cluster(error) => Error::Cluster(error),
        }
    }
}

impl From<SubmitError> for Error {
    fn from(error: SubmitError) -> Self {
        match error {
            SubmitError::Shed(shed) => Error::Overloaded(shed),
            SubmitError::Stopped(_) => Error::ShuttingDown,
        }
    }
}

/// The node could not start.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A setting is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The data directory cannot be created.
    #[error("cannot create data dir {path}: {source}")]
    DataDir {
        /// The directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The data dir does not match this build or these settings.
    #[error(transparent)]
    Meta(#[from] MetaError),
    /// Storage failed while opening or loading.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The plugin engine could not start or installed plugins could not
    /// be loaded.
    #[error("cannot load plugins: {0}")]
    Plugins(#[source] PluginError),
    /// The cluster settings cannot work.
    #[error(transparent)]
    ClusterConfig(#[from] ClusterConfigError),
    /// The fragments' Raft groups could not start.
    #[error("cannot start the cluster: {0}")]
    Cluster(#[source] ClusterError),
    /// The actor runtime could not start a fragment.
    #[error("cannot start fragment {fragment}: {source}")]
    Runtime {
        /// The fragment.
        fragment: u32,
        /// The actor runtime's error.
        source: ractor::SpawnErr,
    },
}

/// Shutdown could not finish; calling it again retries what is left.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ShutdownError {
    /// A fragment could not drain or flush.
    #[error(transparent)]
    Fragment(#[from] FragmentShutdownError),
    /// The final store sync failed.
    #[error("final store sync failed: {0}")]
    Store(#[from] StoreError),
}
