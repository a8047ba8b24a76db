//! Expiry's errors: what the expiry API answers ([`ExpiryError`]), and why
//! one delivery failed ([`Failure`]), which decides whether the failure
//! costs the events an attempt.

use crate::cluster::ClusterError;
use crate::names::NameError;
use crate::plugin::threads::WorkFailed;
use crate::plugin::{HandlerKind, PluginCallError};
use crate::record::InvalidVersion;
use crate::store::StoreError;

/// An expiry-handler operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExpiryError {
    /// The request is malformed or names a function that is not an expiry handler.
    #[error("{0}")]
    Invalid(String),
    /// The table, plugin, function or binding does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The operation conflicts with the current state (e.g. redrive with no binding).
    #[error("{0}")]
    Conflict(String),
    /// Storage failed; nothing was changed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The node is shutting down.
    #[error("the node is shutting down")]
    ShuttingDown,
    /// In a cluster: a fragment's leader could not carry out its part of a
    /// redrive or discard (no quorum, refused, unreachable).
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// In a cluster: the change could not be committed (no quorum of the
    /// metadata group, or it stopped); `code` is the contract's.
    #[error("{message}")]
    Unavailable {
        /// The error code (`no_quorum`, `unavailable`).
        code: String,
        /// What happened.
        message: String,
    },
}

impl ExpiryError {
    /// The error code of the HTTP contract this error answers with, as a
    /// failed metadata command carries it to the member that asked.
    pub(crate) fn contract_code(&self) -> &str {
        match self {
            ExpiryError::Invalid(_) => "invalid_request",
            ExpiryError::NotFound(_) => "not_found",
            ExpiryError::Conflict(_) => "conflict",
            ExpiryError::Store(_) => "not_durable",
            ExpiryError::ShuttingDown => "shutting_down",
            ExpiryError::Unavailable { code, .. } => code,
            ExpiryError::Cluster(ClusterError::Refused { code, .. }) => code,
            ExpiryError::Cluster(ClusterError::NoQuorum { .. }) => "no_quorum",
            ExpiryError::Cluster(_) => "unavailable",
        }
    }

    /// The error a contract code and message stand for (the inverse of
    /// [`Self::contract_code`], for a failure another member reported).
    pub(crate) fn from_contract(code: &str, message: String) -> Self {
        match code {
            "invalid_request" => ExpiryError::Invalid(message),
            "not_found" => ExpiryError::NotFound(message),
            "conflict" => ExpiryError::Conflict(message),
            other => ExpiryError::Unavailable {
                code: other.to_string(),
                message,
            },
        }
    }
}

/// Why a delivery failed. Only the handler's own failures cost the events
/// an attempt; the host's never do, so the node's trouble can never move
/// an event to dead letters.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Failure {
    /// The handler failed: charged as an attempt of every event of the call.
    #[error(transparent)]
    Handler(#[from] HandlerFailed),
    /// The host failed: retried with backoff, not charged.
    #[error(transparent)]
    Host(#[from] HostFailed),
}

/// The handler failed (its events are charged an attempt).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum HandlerFailed {
    /// The bound plugin is not installed.
    #[error("plugin {plugin} is not installed; install it or unbind the table")]
    NotInstalled {
        /// The plugin.
        plugin: String,
    },
    /// The current version of the plugin has no such handler.
    #[error("plugin {plugin} version {version} has no {} handler {function}", .kind.as_str())]
    NotAHandler {
        /// The plugin.
        plugin: String,
        /// Its current version.
        version: u32,
        /// The bound function.
        function: String,
        /// The kind it is bound as.
        kind: HandlerKind,
    },
    /// The call trapped, ran past its deadline or memory cap, answered
    /// garbage or reported an error.
    #[error(transparent)]
    Call(PluginCallError),
    /// The answer is out of bounds.
    #[error(transparent)]
    Answer(#[from] InvalidAnswer),
    /// The write path refused one of the actions.
    #[error("applying an action on {table}: {reason}")]
    Rejected {
        /// The table the action writes.
        table: String,
        /// Why.
        reason: String,
    },
}

/// The host failed (not charged).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum HostFailed {
    /// The call did not finish on the plugin threads: the host's work
    /// panicked or the threads stopped.
    #[error("the handler call failed on the host: {0}")]
    Work(WorkFailed),
    /// No plugin instance was free (the instance pool is full).
    #[error(transparent)]
    NoInstance(PluginCallError),
    /// The call was starved of CPU: the node was too busy to give it its
    /// deadline of CPU time.
    #[error(transparent)]
    Starved(PluginCallError),
    /// The node could not apply the actions: overloaded, store failing,
    /// shutting down.
    #[error("applying an action on {table}: {reason}")]
    Unavailable {
        /// The table the action writes.
        table: String,
        /// Why.
        reason: String,
    },
}

/// A handler's answer that is out of bounds; fails the whole call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvalidAnswer {
    /// Not an expiry result.
    #[error("handler {handler} returned something other than an expiry result")]
    NotExpiryResult {
        /// `plugin.function`.
        handler: String,
    },
    /// A `failed` index past the batch.
    #[error("handler listed failed event {index}, but the batch has {count} events")]
    FailedOutOfRange {
        /// The index listed.
        index: u32,
        /// Events in the batch.
        count: usize,
    },
    /// More actions than the batch allows.
    #[error(
        "handler returned {actions} actions for {count} events; the limit is {per_event} per event"
    )]
    TooManyActions {
        /// Actions returned.
        actions: usize,
        /// Events in the batch.
        count: usize,
        /// The limit per event.
        per_event: usize,
    },
    /// One action is invalid.
    #[error("action {index}: {reason}")]
    Action {
        /// Its index in the answer.
        index: usize,
        /// What is wrong with it.
        reason: InvalidAction,
    },
}

/// What is wrong with one action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvalidAction {
    /// Bad table name or key.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The value is over `max_value_bytes`.
    #[error("value is {len} bytes; the limit is {limit} (max_value_bytes)")]
    ValueTooLarge {
        /// Its size.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The TTL puts the deadline past the last one a record may have.
    #[error("invalid TTL: deadline {deadline} ms is after year 9999 (max expires_at_ms {max})")]
    Deadline {
        /// The deadline the TTL gives.
        deadline: u64,
        /// The latest allowed.
        max: u64,
    },
    /// Neither a put nor a delete.
    #[error("empty action")]
    Empty,
    /// `if_version` is not a version's text form.
    #[error(transparent)]
    Version(#[from] InvalidVersion),
    /// A put with both `if_version` and `if_absent`.
    #[error("a put takes if_version or if_absent, not both")]
    TwoConditions,
}
