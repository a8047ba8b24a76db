//! WASM plugins: the sandboxed runtime, the registry of installed plugins,
//! and their functions in SQL.

pub(crate) mod budget;
pub mod encode;
pub(crate) mod error;
#[cfg(test)]
pub(crate) mod fuzz;
pub(crate) mod instance;
pub(crate) mod kind;
pub(crate) mod limits;
pub(crate) mod read;
pub(crate) mod registry;
pub(crate) mod runtime;
pub(crate) mod sql;
pub(crate) mod threads;
pub(crate) mod ticker;
pub(crate) mod version;

pub use error::{
    ArtifactRejected, CallCause, EngineError, PluginCallError, PluginError, PluginInvalid,
};
pub use instance::PluginInstance;
pub use kind::{HandlerKind, NotAHandler, is_expiry_handler, is_handler};
pub use limits::{PluginLimits, pool_capacity};
pub use read::{MAX_READ_BYTES_PER_CALL, MAX_READS_PER_CALL, RecordReader};
pub use registry::{Installed, PluginRegistry};
pub use runtime::{Artifact, PluginRuntime, Tier};
pub use version::{FunctionMetrics, PluginVersion, VersionInfo};
