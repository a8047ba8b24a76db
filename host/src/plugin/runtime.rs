//! The sandbox: one wasmtime engine (pooling allocator, epoch interruption
//! driven by a ticker thread), module validation, and instances that call
//! ABI v1 functions under a deadline and a memory cap.
//!
//! Calls are synchronous and may run for up to their deadline, so they run
//! on the runtime's own threads, never on a tokio worker: query work that
//! calls plugins through [`PluginRuntime::run_blocking`], expiry-handler
//! calls through [`PluginRuntime::run_expiry`], each within its share of
//! the threads (see [`super::threads`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use ebb_proto::Message;
use ebb_proto::plugin::v1 as abi;
use sha2::{Digest, Sha256};
use wasmtime::{
    Caller, Config, Engine, ExternType, InstanceAllocationStrategy, Linker, Memory, Module,
    PoolConcurrencyLimitError, PoolingAllocationConfig, ResourceLimiter, Store, Trap, TypedFunc,
    ValType,
};

use super::error::{ArtifactRejected, CallCause, PluginInvalid};
use super::threads::{PluginThreads, WorkClass, WorkFailed};

/// The epoch ticks this often; deadlines are whole ticks.
const TICK: Duration = Duration::from_millis(2);

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
    /// Deadline of one query-function call (a batch). Default 100 ms.
    pub query_deadline: Duration,
    /// Deadline of one expiry-handler call. Default 1 s.
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

/// A compiled module serialized for the store, with the SHA-256 of those
/// bytes: boot deserializes the bytes only when they still hash to it.
pub struct Artifact {
    /// What `Module::serialize` wrote.
    pub bytes: Vec<u8>,
    /// SHA-256 of `bytes`.
    pub sha256: [u8; 32],
}

/// Per-store data: the memory limiter and the plugin name for logs.
pub struct HostState {
    plugin: Arc<str>,
    max_memory: usize,
    memory_cap_hit: bool,
}

impl ResourceLimiter for HostState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.memory_cap_hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// The engine, its epoch ticker and the threads of query plugin work.
/// Dropping it stops the ticker.
pub struct PluginRuntime {
    engine: Engine,
    linker: Linker<HostState>,
    limits: PluginLimits,
    /// Expiry-handler calls that may run at once (part of the pool size).
    expiry_calls: usize,
    stop: Arc<AtomicBool>,
    /// Where plugin code runs: query work and expiry-handler calls.
    threads: PluginThreads,
}

impl Drop for PluginRuntime {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A module that passed validation, with its manifest.
pub struct CompiledPlugin {
    /// The compiled module.
    pub module: Module,
    /// Its manifest.
    pub manifest: abi::Manifest,
    /// SHA-256 of the uploaded bytes.
    pub sha256: [u8; 32],
}

const EXPORTS: [(&str, &[ValType], &[ValType]); 5] = [
    ("ebb_abi_version", &[], &[ValType::I32]),
    ("ebb_alloc", &[ValType::I32], &[ValType::I32]),
    ("ebb_dealloc", &[ValType::I32, ValType::I32], &[]),
    ("ebb_manifest", &[], &[ValType::I64]),
    ("ebb_call", &[ValType::I32, ValType::I32], &[ValType::I64]),
];

fn same_types(actual: impl ExactSizeIterator<Item = ValType>, expected: &[ValType]) -> bool {
    actual.len() == expected.len() && actual.zip(expected).all(|(a, e)| ValType::eq(&a, e))
}

impl PluginRuntime {
    /// Start the engine and its ticker, with an instance pool of
    /// [`pool_capacity`]`(limits, expiry_calls)` instances. `Err` when the
    /// pool cannot be reserved (too large for the address space: lower
    /// `max_plugins` or `idle_instances`) or a thread cannot start.
    pub fn new(limits: PluginLimits, expiry_calls: usize) -> Result<Arc<Self>, String> {
        let capacity = pool_capacity(&limits, expiry_calls);
        let mut pool = PoolingAllocationConfig::default();
        pool.total_core_instances(capacity)
            .total_memories(capacity)
            .total_tables(capacity)
            .max_memories_per_module(1)
            .max_tables_per_module(1)
            .max_memory_size(limits.max_memory_bytes);
        let mut config = Config::new();
        config
            .epoch_interruption(true)
            // Tables filled at instantiation (instances are pooled, so that
            // is rare): an indirect call, as the SDK makes per row, then
            // skips the lazy-initialization check.
            .table_lazy_init(false)
            .profiler(if std::env::var_os("EBB_PLUGIN_PERFMAP").is_some() {
                wasmtime::ProfilingStrategy::PerfMap
            } else {
                wasmtime::ProfilingStrategy::None
            })
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(|e| {
            format!(
                "cannot reserve a pool of {capacity} plugin instances ({} plugins × {} idle + {} threads + {expiry_calls} expiry calls + 1); lower the plugin limits: {}",
                limits.max_plugins,
                limits.idle_instances,
                limits.threads,
                describe(&e)
            )
        })?;
        let mut linker = Linker::new(&engine);
        linker
            .func_wrap(
                "ebb",
                "log",
                |mut caller: Caller<'_, HostState>, level: i32, ptr: i32, len: i32| {
                    let plugin = caller.data().plugin.clone();
                    let Some(memory) = caller.get_export("memory").and_then(|e| e.into_memory())
                    else {
                        return;
                    };
                    let len = (len.max(0) as usize).min(4096);
                    let mut buffer = vec![0u8; len];
                    if memory
                        .read(&caller, ptr.max(0) as usize, &mut buffer)
                        .is_err()
                    {
                        return;
                    }
                    let text = String::from_utf8_lossy(&buffer);
                    match level {
                        0 => tracing::error!(%plugin, "{text}"),
                        1 => tracing::warn!(%plugin, "{text}"),
                        2 => tracing::info!(%plugin, "{text}"),
                        _ => tracing::debug!(%plugin, "{text}"),
                    }
                },
            )
            .map_err(|e| e.to_string())?;
        let threads = PluginThreads::start(limits.threads)
            .map_err(|e| format!("cannot start the plugin threads: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let ticker_engine = engine.clone();
        let ticker_stop = stop.clone();
        thread::Builder::new()
            .name("ebb-epoch".into())
            .spawn(move || {
                while !ticker_stop.load(Ordering::Relaxed) {
                    thread::sleep(TICK);
                    ticker_engine.increment_epoch();
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(Self {
            engine,
            linker,
            limits,
            expiry_calls,
            stop,
            threads,
        }))
    }

    /// Run `work`, which calls plugins, on one of the
    /// [`PluginLimits::threads`] plugin threads, after the work queued
    /// before it. `Err` when `work` panicked.
    pub async fn run_blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, WorkFailed> {
        self.threads.run(work).await
    }

    /// Run `work`, an expiry-handler call, on the plugin threads within
    /// expiry's share of them (it never takes the last thread from queries,
    /// and queued query work does not hold it back). `Err` when `work`
    /// panicked or the threads stopped: a failure of the host, not of the
    /// handler.
    pub async fn run_expiry<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, WorkFailed> {
        self.threads.run_as(WorkClass::Expiry, work).await
    }

    /// The limits.
    pub fn limits(&self) -> &PluginLimits {
        &self.limits
    }

    /// Validate and compile `bytes` uploaded as `name`: size, imports (only
    /// `ebb.log`), exports and their types, ABI version and manifest.
    pub fn compile(&self, name: &str, bytes: &[u8]) -> Result<CompiledPlugin, PluginInvalid> {
        let invalid = |reason: String| PluginInvalid {
            plugin: name.to_string(),
            reason,
        };
        if bytes.len() > self.limits.max_module_bytes {
            return Err(invalid(format!(
                "module is {} bytes; the limit is {} bytes",
                bytes.len(),
                self.limits.max_module_bytes
            )));
        }
        if !bytes.starts_with(b"\0asm") {
            return Err(invalid(
                "not a WebAssembly module (no \\0asm header)".into(),
            ));
        }
        let module = Module::new(&self.engine, bytes)
            .map_err(|e| invalid(format!("not a valid WebAssembly core module: {e}")))?;
        self.check_interface(name, &module)?;
        let manifest = self.read_manifest(name, &module)?;
        Ok(CompiledPlugin {
            module,
            manifest,
            sha256: Sha256::digest(bytes).into(),
        })
    }

    /// Serialize `module` for the store, hashing the bytes written.
    pub fn serialize_artifact(&self, module: &Module) -> Result<Artifact, String> {
        let bytes = module
            .serialize()
            .map_err(|e| format!("cannot serialize compiled module: {}", describe(&e)))?;
        let sha256 = Sha256::digest(&bytes).into();
        Ok(Artifact { bytes, sha256 })
    }

    /// Load a stored artifact, only when it hashes to `recorded`, the
    /// SHA-256 stored with it by [`Self::serialize_artifact`]. Without a
    /// recorded hash, on a mismatch, or when this engine cannot use it
    /// (another wasmtime build or settings) it is not loaded and the caller
    /// recompiles from the module.
    pub fn load_artifact(
        &self,
        artifact: &[u8],
        recorded: Option<&[u8]>,
    ) -> Result<Module, ArtifactRejected> {
        let recorded = recorded.ok_or(ArtifactRejected::Unverified)?;
        if Sha256::digest(artifact).as_slice() != recorded {
            return Err(ArtifactRejected::Mismatch);
        }
        // SAFETY: `Module::deserialize` trusts its input to be what
        // `Module::serialize` wrote. These bytes hash to the SHA-256 recorded
        // when `serialize_artifact` wrote them, so they are those bytes
        // unchanged (a flipped or truncated artifact was refused above), and
        // wasmtime itself refuses an artifact of another engine build or
        // configuration.
        unsafe { Module::deserialize(&self.engine, artifact) }
            .map_err(|e| ArtifactRejected::Incompatible(describe(&e)))
    }

    fn check_interface(&self, name: &str, module: &Module) -> Result<(), PluginInvalid> {
        let invalid = |reason: String| PluginInvalid {
            plugin: name.to_string(),
            reason,
        };
        for import in module.imports() {
            let allowed = import.module() == "ebb"
                && import.name() == "log"
                && matches!(import.ty(), ExternType::Func(f)
                    if same_types(f.params(), &[ValType::I32, ValType::I32, ValType::I32]) && f.results().len() == 0);
            if !allowed {
                return Err(invalid(format!(
                    "forbidden import {}.{}: plugins may import only ebb.log(i32, i32, i32) (no WASI)",
                    import.module(),
                    import.name()
                )));
            }
        }
        match module.get_export("memory") {
            Some(ExternType::Memory(_)) => {}
            _ => return Err(invalid("missing export memory".into())),
        }
        for (export, params, results) in EXPORTS {
            match module.get_export(export) {
                Some(ExternType::Func(f))
                    if same_types(f.params(), params) && same_types(f.results(), results) => {}
                Some(_) => {
                    return Err(invalid(format!(
                        "export {export} has the wrong type; see the ABI v1 table in docs/plugins.md"
                    )));
                }
                None => return Err(invalid(format!("missing export {export}"))),
            }
        }
        Ok(())
    }

    fn read_manifest(&self, name: &str, module: &Module) -> Result<abi::Manifest, PluginInvalid> {
        let invalid = |reason: String| PluginInvalid {
            plugin: name.to_string(),
            reason,
        };
        let mut instance = self.instantiate(name, module).map_err(|e| match e {
            CallCause::Trap(reason) | CallCause::Malformed(reason) => invalid(reason),
            other => invalid(other.to_string()),
        })?;
        let version = instance
            .abi_version()
            .map_err(|e| invalid(format!("ebb_abi_version {e}")))?;
        if version != 1 {
            return Err(invalid(format!(
                "speaks ABI version {version}; this server speaks version 1"
            )));
        }
        let bytes = instance
            .manifest_bytes()
            .map_err(|e| invalid(format!("ebb_manifest {e}")))?;
        let manifest = abi::Manifest::decode(bytes.as_slice())
            .map_err(|e| invalid(format!("ebb_manifest returned a malformed Manifest: {e}")))?;
        if manifest.abi_version != 1 {
            return Err(invalid(format!(
                "manifest says ABI version {}; this server speaks version 1",
                manifest.abi_version
            )));
        }
        if manifest.functions.is_empty() {
            return Err(invalid("manifest declares no functions".into()));
        }
        let mut seen = std::collections::BTreeSet::new();
        for function in &manifest.functions {
            let valid_name = !function.name.is_empty()
                && function.name.len() <= 63
                && function
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !function.name.as_bytes()[0].is_ascii_digit();
            if !valid_name {
                return Err(invalid(format!(
                    "function name {:?} is not an identifier ([a-zA-Z_][a-zA-Z0-9_]*, at most 63 bytes)",
                    function.name
                )));
            }
            if !seen.insert(function.name.to_ascii_lowercase()) {
                return Err(invalid(format!(
                    "function {} is declared twice",
                    function.name
                )));
            }
            if abi::FunctionKind::try_from(function.kind).unwrap_or(abi::FunctionKind::Unspecified)
                == abi::FunctionKind::Unspecified
            {
                return Err(invalid(format!("function {} has no kind", function.name)));
            }
            if function.arg_count < -1 || function.arg_count > 64 {
                return Err(invalid(format!(
                    "function {} declares {} arguments (use -1 for variadic, at most 64)",
                    function.name, function.arg_count
                )));
            }
        }
        Ok(manifest)
    }

    /// A fresh instance of `module`. [`CallCause::NoInstance`] when the
    /// instance pool is full; [`CallCause::Trap`] when instantiation fails
    /// otherwise.
    pub fn instantiate(&self, plugin: &str, module: &Module) -> Result<PluginInstance, CallCause> {
        let mut store = Store::new(
            &self.engine,
            HostState {
                plugin: Arc::from(plugin),
                max_memory: self.limits.max_memory_bytes,
                memory_cap_hit: false,
            },
        );
        store.limiter(|state| state);
        store.set_epoch_deadline(ticks(self.limits.query_deadline));
        store.epoch_deadline_trap();
        let instance =
            self.linker
                .instantiate(&mut store, module)
                .map_err(|e| match e.downcast_ref::<PoolConcurrencyLimitError>() {
                    Some(full) => CallCause::NoInstance(format!(
                        "{full}; the pool holds {} instances (see PluginLimits)",
                        pool_capacity(&self.limits, self.expiry_calls)
                    )),
                    None => CallCause::Trap(format!("instantiation failed: {}", describe(&e))),
                })?;
        let missing = |name: &str| CallCause::Malformed(format!("missing export {name}"));
        let mistyped = |e: wasmtime::Error| CallCause::Malformed(e.to_string());
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or_else(|| missing("memory"))?;
        let typed = |store: &mut Store<HostState>, name: &str| {
            instance
                .get_func(&mut *store, name)
                .ok_or_else(|| missing(name))
        };
        let abi_version = typed(&mut store, "ebb_abi_version")?
            .typed::<(), i32>(&store)
            .map_err(mistyped)?;
        let alloc = typed(&mut store, "ebb_alloc")?
            .typed::<i32, i32>(&store)
            .map_err(mistyped)?;
        let dealloc = typed(&mut store, "ebb_dealloc")?
            .typed::<(i32, i32), ()>(&store)
            .map_err(mistyped)?;
        let manifest = typed(&mut store, "ebb_manifest")?
            .typed::<(), i64>(&store)
            .map_err(mistyped)?;
        let call = typed(&mut store, "ebb_call")?
            .typed::<(i32, i32), i64>(&store)
            .map_err(mistyped)?;
        Ok(PluginInstance {
            store,
            memory,
            abi_version,
            alloc,
            dealloc,
            manifest,
            call,
            max_response: self.limits.max_response_bytes,
        })
    }
}

fn ticks(deadline: Duration) -> u64 {
    (deadline.as_millis() as u64)
        .div_ceil(TICK.as_millis() as u64)
        .max(1)
}

fn describe(error: &wasmtime::Error) -> String {
    let mut text = error.to_string();
    let root = error.root_cause().to_string();
    if !text.contains(&root) {
        text = format!("{text}: {root}");
    }
    text
}

/// One instance of a plugin version, reused across calls while healthy.
pub struct PluginInstance {
    store: Store<HostState>,
    memory: Memory,
    abi_version: TypedFunc<(), i32>,
    alloc: TypedFunc<i32, i32>,
    dealloc: TypedFunc<(i32, i32), ()>,
    manifest: TypedFunc<(), i64>,
    call: TypedFunc<(i32, i32), i64>,
    max_response: usize,
}

impl PluginInstance {
    fn classify(&self, error: wasmtime::Error, deadline: Duration) -> CallCause {
        if matches!(error.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
            return CallCause::Deadline(deadline.as_millis() as u64);
        }
        if self.store.data().memory_cap_hit {
            return CallCause::MemoryCap(self.store.data().max_memory);
        }
        CallCause::Trap(describe(&error))
    }

    /// The bytes at packed `(ptr << 32) | len` in the instance's memory,
    /// borrowed until the next call into the instance.
    fn packed_slice(&self, packed: i64) -> Result<&[u8], CallCause> {
        let ptr = ((packed as u64) >> 32) as usize;
        let len = (packed as u64 & 0xffff_ffff) as usize;
        if len > self.max_response {
            return Err(CallCause::TooLarge(len));
        }
        let data = self.memory.data(&self.store);
        data.get(ptr..ptr.saturating_add(len))
            .ok_or_else(|| CallCause::Malformed(format!("pointer {ptr}+{len} is outside memory")))
    }

    fn abi_version(&mut self) -> Result<i32, CallCause> {
        let deadline = Duration::from_millis(100);
        self.store.set_epoch_deadline(ticks(deadline));
        self.abi_version
            .call(&mut self.store, ())
            .map_err(|e| self.classify(e, deadline))
    }

    fn manifest_bytes(&mut self) -> Result<Vec<u8>, CallCause> {
        let deadline = Duration::from_millis(100);
        self.store.set_epoch_deadline(ticks(deadline));
        let packed = self
            .manifest
            .call(&mut self.store, ())
            .map_err(|e| self.classify(e, deadline))?;
        self.packed_slice(packed).map(<[u8]>::to_vec)
    }

    /// Call `ebb_call` with an encoded request; the encoded response.
    pub fn call(&mut self, request: &[u8], deadline: Duration) -> Result<Vec<u8>, CallCause> {
        self.call_with(request, deadline, <[u8]>::to_vec)
    }

    /// Call `ebb_call` with an encoded request and hand the response to
    /// `read` where it lies in the instance's memory (no copy).
    pub fn call_with<R>(
        &mut self,
        request: &[u8],
        deadline: Duration,
        read: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, CallCause> {
        self.store.set_epoch_deadline(ticks(deadline));
        let len = i32::try_from(request.len())
            .map_err(|_| CallCause::Malformed("request too large".into()))?;
        let ptr = self
            .alloc
            .call(&mut self.store, len)
            .map_err(|e| self.classify(e, deadline))?;
        if self
            .memory
            .write(&mut self.store, ptr as u32 as usize, request)
            .is_err()
        {
            return Err(CallCause::Malformed(format!(
                "ebb_alloc returned {ptr}, outside memory"
            )));
        }
        let packed = self
            .call
            .call(&mut self.store, (ptr, len))
            .map_err(|e| self.classify(e, deadline))?;
        let response = read(self.packed_slice(packed)?);
        self.dealloc
            .call(&mut self.store, (ptr, len))
            .map_err(|e| self.classify(e, deadline))?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_holds_every_idle_instance_and_every_caller_in_flight() {
        let limits = PluginLimits {
            threads: 8,
            ..PluginLimits::default()
        };
        // 64 plugins × 4 idle + 8 threads + 4 expiry calls + 1 upload.
        assert_eq!(pool_capacity(&limits, 4), 64 * 4 + 8 + 4 + 1);
        let huge = PluginLimits {
            max_plugins: usize::MAX,
            ..limits
        };
        assert_eq!(pool_capacity(&huge, 4), u32::MAX, "saturates");
    }
}
