//! Plugin errors: refused uploads and failed calls, each naming the plugin,
//! the function and the cause.

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
    /// The call ran past its deadline.
    #[error("exceeded its {0} ms deadline")]
    Deadline(u64),
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
    /// ([`super::runtime::pool_capacity`]), so this means a bug or more
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
    /// The engine could not be set up.
    #[error("plugin engine: {0}")]
    Engine(String),
}
