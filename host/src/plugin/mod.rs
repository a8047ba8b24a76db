//! WASM plugins: the sandboxed runtime, the registry of installed plugins,
//! and their functions in SQL.

pub mod encode;
pub mod error;
#[cfg(test)]
pub(crate) mod fuzz;
pub mod instance;
pub mod kind;
pub mod limits;
pub mod registry;
pub mod runtime;
pub mod sql;
pub mod threads;
pub mod version;

pub use error::{
    ArtifactRejected, CallCause, EngineError, PluginCallError, PluginError, PluginInvalid,
};
pub use instance::PluginInstance;
pub use kind::{NotAHandler, is_expiry_handler};
pub use limits::{PluginLimits, pool_capacity};
pub use registry::{Installed, PluginRegistry};
pub use runtime::{Artifact, PluginRuntime};
pub use version::{FunctionMetrics, PluginVersion, VersionInfo};
