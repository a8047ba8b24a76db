//! Plugin errors: refused uploads and failed calls, each naming the plugin,
//! the function and the cause.

use std::sync::Arc;

/// Why a module was refused at upload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plugin {plugin}: {reason}")]
pub struct PluginInvalid {
    /// The plugin name it was uploaded as.
    pub plugin: String,
    /// What is wrong and what to do.
    pub reason: String,
}

/// Why one call failed. The instance that failed is discarded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallCause {
    /// The call used its deadline of CPU time.
    #[error("exceeded its {0} ms deadline")]
    Deadline(u64),
    /// The call got less than its deadline of CPU time in
    /// [`super::budget::STARVED_AFTER`] times the deadline on the wall
    /// clock: the node was too busy to run it. The host's failure, not the
    /// plugin's; the call may be retried.
    #[error(
        "was starved of CPU: it got less than its {deadline_ms} ms deadline of CPU time in {waited_ms} ms (the node is overloaded; retry later)"
    )]
    Starved {
        /// The call's deadline of CPU time.
        deadline_ms: u64,
        /// The wall-clock time it was given before it counted as starved
        /// ([`super::budget::STARVED_AFTER`] times the deadline).
        waited_ms: u64,
    },
    /// The instance tried to grow memory past the cap.
    #[error("hit the {0}-byte memory cap")]
    MemoryCap(usize),
    /// The guest trapped (panic, unreachable, stack overflow, bad access).
    #[error("trapped: {0}")]
    Trap(String),
    /// The guest answered something that is not a valid response.
    #[error("returned a malformed response: {0}")]
    Malformed(String),
    /// The response was larger than allowed.
    #[error("returned {0} bytes, over the response limit")]
    TooLarge(usize),
    /// The guest reported an error.
    #[error("failed: {0}")]
    Guest(String),
    /// No instance could be created: the engine's instance pool is full.
    /// The pool is sized for the limits' worst case
    /// ([`super::limits::pool_capacity`]), so this means a bug or more
    /// concurrent callers than the limits allow; the call may be retried.
    #[error("could not get an instance: {0}")]
    NoInstance(String),
}

/// Why boot did not deserialize a stored artifact; the plugin version is
/// then recompiled from its stored module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArtifactRejected {
    /// No artifact is stored.
    #[error("is missing")]
    Missing,
    /// No hash was recorded with the artifact (written by an older build).
    #[error("has no recorded hash")]
    Unverified,
    /// The bytes are not the ones written: their SHA-256 differs from the
    /// one recorded with them.
    #[error("does not match its recorded SHA-256")]
    Mismatch,
    /// The bytes are the ones written, but this build or engine
    /// configuration cannot load them.
    #[error("cannot be loaded by this build: {0}")]
    Incompatible(String),
}

/// A call into a plugin failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plugin function {plugin}.{function} {cause}")]
pub struct PluginCallError {
    /// The plugin.
    pub plugin: String,
    /// The function.
    pub function: String,
    /// What happened.
    pub cause: CallCause,
}

/// Registry operations that fail.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PluginError {
    /// The upload is not an acceptable plugin.
    #[error(transparent)]
    Invalid(#[from] PluginInvalid),
    /// No such plugin.
    #[error("plugin {0} not found")]
    NotFound(String),
    /// A limit on plugins was reached.
    #[error("{0}")]
    Limit(String),
    /// An expiry binding uses the plugin in a way the operation would break.
    #[error("{0}")]
    InUse(String),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The engine could not be set up, or could not do its part of the
    /// operation (a server fault, not the caller's).
    #[error("plugin engine: {0}")]
    Engine(#[from] EngineError),
    /// The node is a cluster member: its plugins change only through the
    /// metadata group, so every member has the same ones.
    #[error(
        "this node is a cluster member: change plugins on every member at once with PUT or DELETE /v1/plugins/{{name}} (Node::put_plugin, Node::delete_plugin)"
    )]
    Replicated,
}

/// The plugin engine failed: it could not start or could not handle a
/// compiled module. A fault of the host, never of the upload.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// The instance pool could not be reserved (too large for the address
    /// space).
    #[error(
        "cannot reserve a pool of {capacity} plugin instances ({max_plugins} plugins × {idle_instances} idle + {threads} threads + {expiry_calls} expiry calls + 1); lower the plugin limits (`ebb serve --plugin-idle-instances`, `--plugin-threads`, `--expiry-concurrency`; embedded: `PluginLimits`): {reason}"
    )]
    Pool {
        /// Instances asked for ([`super::pool_capacity`]).
        capacity: u32,
        /// `PluginLimits::max_plugins`.
        max_plugins: usize,
        /// `PluginLimits::idle_instances`.
        idle_instances: usize,
        /// `PluginLimits::threads`.
        threads: usize,
        /// Expiry-handler calls that may run at once.
        expiry_calls: usize,
        /// What wasmtime said.
        reason: String,
    },
    /// The baseline (Winch) engine could not be set up.
    #[error("cannot set up the baseline plugin compiler (Winch): {0}")]
    Baseline(String),
    /// The host functions could not be linked.
    #[error("cannot link the host functions: {0}")]
    Link(String),
    /// The plugin threads could not start.
    #[error("cannot start the plugin threads: {0}")]
    Threads(#[source] Arc<std::io::Error>),
    /// The epoch ticker thread could not start.
    #[error("cannot start the epoch ticker: {0}")]
    Ticker(#[source] Arc<std::io::Error>),
    /// The optimizing compile of a module the baseline engine accepted
    /// failed.
    #[error("cannot compile optimized code: {0}")]
    Optimize(String),
    /// A compiled module could not be serialized for the store.
    #[error("cannot serialize compiled module: {0}")]
    Serialize(String),
    /// A stored manifest does not decode.
    #[error("stored manifest of {plugin} is corrupt: {reason}")]
    CorruptManifest {
        /// The plugin.
        plugin: String,
        /// The decoder's complaint.
        reason: String,
    },
}
