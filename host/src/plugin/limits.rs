//! Sandbox limits of the plugin runtime and the instance-pool size they imply.

use std::thread;
use std::time::Duration;

/// Sandbox limits. Defaults are documented in docs/plugins.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginLimits {
    /// Largest module upload. Default 16 MiB.
    pub max_module_bytes: usize,
    /// Most plugins installed. Default 64.
    pub max_plugins: usize,
    /// Versions recorded per plugin, the current one included; older ones
    /// are deleted from the store. Default 8.
    pub max_versions: usize,
    /// Linear memory per instance. Default 64 MiB.
    pub max_memory_bytes: usize,
    /// Deadline of one query-function call (a batch), in CPU time of the
    /// call (`plugin/budget.rs`). Default 100 ms.
    pub query_deadline: Duration,
    /// Deadline of one expiry-handler call, in CPU time of the call.
    /// Default 1 s.
    pub expiry_deadline: Duration,
    /// Largest response a call may return. Default 16 MiB.
    pub max_response_bytes: usize,
    /// Idle instances kept per plugin version. Default 4.
    pub idle_instances: usize,
    /// Plugin code (query pages, merges and finishes; expiry-handler
    /// calls) runs on at most this many threads at once; more waits its
    /// turn. Expiry calls use at most all but one of them. Default: the
    /// machine's cores. More threads than cores only time-share them: a
    /// page then runs slower, on colder caches and more instances.
    pub threads: usize,
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            max_module_bytes: 16 * 1024 * 1024,
            max_plugins: 64,
            max_versions: 8,
            max_memory_bytes: 64 * 1024 * 1024,
            query_deadline: Duration::from_millis(100),
            expiry_deadline: Duration::from_secs(1),
            max_response_bytes: 16 * 1024 * 1024,
            idle_instances: 4,
            threads: thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

/// The most plugin instances alive at once under `limits` with at most
/// `expiry_calls` expiry-handler calls running, which sizes the engine's
/// instance pool (one core instance, one memory and one table each):
///
/// ```text
/// max_plugins × idle_instances   idle, kept per current version
/// + threads                      query work, one call (one instance) at a time per thread
/// + expiry_calls                 expiry-handler calls in flight
/// + 1                            an upload's manifest check (uploads run one at a time)
/// ```
///
/// An instance is either idle in its version's pool or held by the one
/// call using it; a version that stops being current drops its idle ones
/// and keeps none after its calls, so idle instances stay within
/// `max_plugins × idle_instances`. Saturates at `u32::MAX` (the engine
/// then refuses the pool at start, naming the limits).
pub fn pool_capacity(limits: &PluginLimits, expiry_calls: usize) -> u32 {
    let instances = limits
        .max_plugins
        .saturating_mul(limits.idle_instances)
        .saturating_add(limits.threads)
        .saturating_add(expiry_calls)
        .saturating_add(1);
    u32::try_from(instances).unwrap_or(u32::MAX)
}
