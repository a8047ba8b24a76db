//! The sandbox: two wasmtime engines (a baseline one, Winch, that compiles
//! an upload in a fraction of Cranelift's time, and the optimizing one,
//! Cranelift with the pooling allocator; both with epoch interruption
//! driven by one ticker thread), module validation, and instances that
//! call ABI v1 functions under a deadline and a memory cap.
//!
//! Calls are synchronous and may run for up to their deadline, so they run
//! on the runtime's own threads, never on a tokio worker: query work that
//! calls plugins through [`PluginRuntime::run_blocking`], expiry-handler
//! calls through [`PluginRuntime::run_expiry`], each within its share of
//! the threads (see [`super::threads`]).

use std::sync::Arc;
use std::thread;

use ebb_proto::Message;
use ebb_proto::plugin::v1 as abi;
use sha2::{Digest, Sha256};
use wasmtime::{
    Caller, Config, Engine, ExternType, InstanceAllocationStrategy, Linker, Module,
    PoolConcurrencyLimitError, PoolingAllocationConfig, Store, Strategy, ValType,
};

use super::error::{ArtifactRejected, CallCause, EngineError, PluginInvalid};
use super::instance::{HostState, PluginInstance, begin, describe, on_deadline};
use super::limits::{PluginLimits, pool_capacity};
use super::read::MAX_REQUEST_BYTES;
use super::threads::{PluginThreads, WorkClass, WorkFailed};
use super::ticker::Ticker;

/// A compiled module serialized for the store, with the SHA-256 of those
/// bytes: boot deserializes the bytes only when they still hash to it.
pub struct Artifact {
    /// What `Module::serialize` wrote.
    pub bytes: Vec<u8>,
    /// SHA-256 of `bytes`.
    pub sha256: [u8; 32],
}

/// The engines, their epoch ticker and the threads of query plugin work.
/// The ticker stops once the runtime and every instance are dropped.
///
/// An upload compiles with the baseline engine (Winch: one pass, no
/// optimization, about a fifth of Cranelift's time), so the plugin serves
/// at once; the registry then compiles it again with the optimizing engine
/// in the background and swaps the code in ([`Tier`]). Only optimized code
/// is stored as an artifact. Both engines enforce the same limits: the
/// epoch deadline, the memory cap (the pool's slot size for the optimizing
/// engine, the store's limiter for both) and the stack limit.
pub struct PluginRuntime {
    engine: Engine,
    linker: Linker<HostState>,
    /// Winch, allocating instances on demand: its instances live only until
    /// the optimized code of their version is in.
    baseline: Engine,
    baseline_linker: Linker<HostState>,
    limits: PluginLimits,
    /// Expiry-handler calls that may run at once (part of the pool size).
    expiry_calls: usize,
    /// Advances both engines' epochs (instances hold it too).
    ticker: Arc<Ticker>,
    /// Where plugin code runs: query work and expiry-handler calls.
    threads: PluginThreads,
    /// The engine's warm-up, until it ends (see [`WARM_UP_MODULE`]).
    warm_up: parking_lot::Mutex<Option<thread::JoinHandle<()>>>,
}

/// A minimal module (`(func (export "f") (param i32) (result i32)
/// local.get 0 i32.const 1 i32.add)`), compiled once when the engine
/// starts, on a thread of its own: the first compile in a process pays
/// about 100 ms of one-time costs (the compiler's setup, its worker
/// threads), which would otherwise fall on the first plugin uploaded.
const WARM_UP_MODULE: &[u8] = &[
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
    0x01, 0x06, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f, // type: (i32) -> i32
    0x03, 0x02, 0x01, 0x00, // function 0 of type 0
    0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x00, // export "f"
    0x0a, 0x09, 0x01, 0x07, 0x00, 0x20, 0x00, 0x41, 0x01, 0x6a, 0x0b, // code
];

/// Which engine compiled a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Winch: compiled fast, runs slower; replaced by optimized code.
    Baseline,
    /// Cranelift: what artifacts hold and what plugins run once ready.
    Optimized,
}

impl Tier {
    /// `baseline` or `optimized`, as the API reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Baseline => "baseline",
            Tier::Optimized => "optimized",
        }
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

/// Add `ebb.get(request_ptr, request_len) -> packed response` to `linker`.
/// The response is written into memory from the guest's own `ebb_alloc`
/// and belongs to the guest. A request outside memory or an `ebb_alloc`
/// that fails traps the call (a broken guest); everything else is an
/// answer.
fn link_get(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        "ebb",
        "get",
        |mut caller: Caller<'_, HostState>, ptr: i32, len: i32| -> wasmtime::Result<i64> {
            let memory = caller
                .get_export("memory")
                .and_then(|export| export.into_memory())
                .ok_or_else(|| wasmtime::Error::msg("ebb.get: the instance has no memory"))?;
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            let answer = if len > MAX_REQUEST_BYTES {
                abi::get_response::Result::Error(format!(
                    "ebb.get: request of {len} bytes; at most {MAX_REQUEST_BYTES}"
                ))
            } else {
                let mut request = vec![0u8; len];
                memory
                    .read(&caller, ptr as u32 as usize, &mut request)
                    .map_err(|_| wasmtime::Error::msg("ebb.get: request outside memory"))?;
                match caller.data_mut().reads.as_mut() {
                    Some(reads) => reads.get(&request),
                    None => abi::get_response::Result::Error(
                        "ebb.get is available to expiry and change handlers, not to SQL functions"
                            .into(),
                    ),
                }
            };
            let bytes = abi::GetResponse {
                result: Some(answer),
            }
            .encode_to_vec();
            let alloc = caller
                .get_export("ebb_alloc")
                .and_then(|export| export.into_func())
                .ok_or_else(|| wasmtime::Error::msg("ebb.get: no ebb_alloc export"))?
                .typed::<i32, i32>(&caller)?;
            let out_len = i32::try_from(bytes.len())?;
            let out = alloc.call(&mut caller, out_len)?;
            if out == 0 && !bytes.is_empty() {
                return Err(wasmtime::Error::msg(
                    "ebb.get: ebb_alloc could not allocate the response",
                ));
            }
            memory
                .write(&mut caller, out as u32 as usize, &bytes)
                .map_err(|_| {
                    wasmtime::Error::msg("ebb.get: ebb_alloc returned memory outside the instance")
                })?;
            Ok((((out as u32 as u64) << 32) | bytes.len() as u64) as i64)
        },
    )?;
    Ok(())
}

/// `perf` map files of the compiled code when `EBB_PLUGIN_PERFMAP` is set.
fn profiler() -> wasmtime::ProfilingStrategy {
    if std::env::var_os("EBB_PLUGIN_PERFMAP").is_some() {
        wasmtime::ProfilingStrategy::PerfMap
    } else {
        wasmtime::ProfilingStrategy::None
    }
}

/// The host functions plugins may import (`ebb.log`, `ebb.get`), for
/// `engine`.
fn link(engine: &Engine) -> Result<Linker<HostState>, EngineError> {
    let mut linker = Linker::new(engine);
    linker
        .func_wrap(
            "ebb",
            "log",
            |mut caller: Caller<'_, HostState>, level: i32, ptr: i32, len: i32| {
                let plugin = caller.data().plugin().clone();
                let Some(memory) = caller.get_export("memory").and_then(|e| e.into_memory()) else {
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
        .map_err(|e| EngineError::Link(describe(&e)))?;
    link_get(&mut linker).map_err(|e| EngineError::Link(describe(&e)))?;
    Ok(linker)
}

fn same_types(actual: impl ExactSizeIterator<Item = ValType>, expected: &[ValType]) -> bool {
    actual.len() == expected.len() && actual.zip(expected).all(|(a, e)| ValType::eq(&a, e))
}

impl PluginRuntime {
    /// Start both engines and their ticker, the optimizing engine with an
    /// instance pool of [`pool_capacity`]`(limits, expiry_calls)`
    /// instances (the baseline engine allocates its short-lived instances
    /// on demand; the store's limiter caps their memory). `Err` when the
    /// pool cannot be reserved (too large for the address space: lower
    /// `max_plugins` or `idle_instances`), the baseline compiler cannot be
    /// set up, or a thread cannot start.
    pub fn new(limits: PluginLimits, expiry_calls: usize) -> Result<Arc<Self>, EngineError> {
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
            .profiler(profiler())
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(|e| EngineError::Pool {
            capacity,
            max_plugins: limits.max_plugins,
            idle_instances: limits.idle_instances,
            threads: limits.threads,
            expiry_calls,
            reason: describe(&e),
        })?;
        let linker = link(&engine)?;
        let mut baseline_config = Config::new();
        baseline_config
            .strategy(Strategy::Winch)
            .epoch_interruption(true)
            // Winch requires lazy table initialization.
            .table_lazy_init(true)
            .profiler(profiler());
        let baseline =
            Engine::new(&baseline_config).map_err(|e| EngineError::Baseline(describe(&e)))?;
        let baseline_linker = link(&baseline)?;
        let threads =
            PluginThreads::start(limits.threads).map_err(|e| EngineError::Threads(Arc::new(e)))?;
        let ticker = Ticker::start(vec![engine.clone(), baseline.clone()])
            .map_err(|e| EngineError::Ticker(Arc::new(e)))?;
        let warm_engines = [baseline.clone(), engine.clone()];
        let warm_up = thread::Builder::new()
            .name("ebb-plugin-warm-up".into())
            .spawn(move || {
                for engine in &warm_engines {
                    if let Err(error) = Module::new(engine, WARM_UP_MODULE) {
                        tracing::warn!(error = %describe(&error), "the plugin engine's warm-up failed");
                    }
                }
            })
            .ok();
        Ok(Arc::new(Self {
            engine,
            linker,
            baseline,
            baseline_linker,
            limits,
            expiry_calls,
            ticker,
            threads,
            warm_up: parking_lot::Mutex::new(warm_up),
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

    /// Wait until the engine's warm-up compile ended (at once if it did).
    /// Blocking. Compiles never need it; it lets a measurement start from a
    /// warm engine, as an upload to a running server does.
    pub fn wait_warm(&self) {
        if let Some(warm_up) = self.warm_up.lock().take() {
            let _ = warm_up.join();
        }
    }

    /// The limits.
    pub fn limits(&self) -> &PluginLimits {
        &self.limits
    }

    /// Validate and compile `bytes` uploaded as `name` with the baseline
    /// engine: size, imports (only `ebb.log` and `ebb.get`), exports and
    /// their types, ABI version and manifest. The module serves at once;
    /// [`Self::optimize`] compiles the code that replaces it.
    pub fn compile(&self, name: &str, bytes: &[u8]) -> Result<CompiledPlugin, PluginInvalid> {
        self.compile_with(Tier::Baseline, name, bytes)
    }

    /// [`Self::compile`] with the optimizing engine: what boot does when a
    /// stored artifact cannot be used.
    pub fn compile_optimized(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> Result<CompiledPlugin, PluginInvalid> {
        self.compile_with(Tier::Optimized, name, bytes)
    }

    /// The optimized code of `bytes`, which [`Self::compile`] accepted (so
    /// only compiled, not checked again).
    pub fn optimize(&self, bytes: &[u8]) -> Result<Module, EngineError> {
        Module::new(&self.engine, bytes).map_err(|e| EngineError::Optimize(describe(&e)))
    }

    /// Which engine compiled `module`.
    pub fn tier(&self, module: &Module) -> Tier {
        if Engine::same(module.engine(), &self.engine) {
            Tier::Optimized
        } else {
            Tier::Baseline
        }
    }

    fn compile_with(
        &self,
        tier: Tier,
        name: &str,
        bytes: &[u8],
    ) -> Result<CompiledPlugin, PluginInvalid> {
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
        let engine = match tier {
            Tier::Baseline => &self.baseline,
            Tier::Optimized => &self.engine,
        };
        let module = Module::new(engine, bytes)
            .map_err(|e| invalid(format!("not a valid WebAssembly core module: {e}")))?;
        self.check_interface(name, &module)?;
        let manifest = self.read_manifest(name, &module)?;
        Ok(CompiledPlugin {
            module,
            manifest,
            sha256: Sha256::digest(bytes).into(),
        })
    }

    /// Serialize `module` (optimized code) for the store, hashing the bytes
    /// written.
    /// [`EngineError::Serialize`] when wasmtime cannot serialize it.
    pub fn serialize_artifact(&self, module: &Module) -> Result<Artifact, EngineError> {
        let bytes = module
            .serialize()
            .map_err(|e| EngineError::Serialize(describe(&e)))?;
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
            let ExternType::Func(f) = import.ty() else {
                return Err(invalid(format!(
                    "forbidden import {}.{}: plugins may import only the functions ebb.log(i32, i32, i32) and ebb.get(i32, i32) -> i64 (no WASI)",
                    import.module(),
                    import.name()
                )));
            };
            let allowed = import.module() == "ebb"
                && match import.name() {
                    "log" => {
                        same_types(f.params(), &[ValType::I32, ValType::I32, ValType::I32])
                            && f.results().len() == 0
                    }
                    "get" => {
                        same_types(f.params(), &[ValType::I32, ValType::I32])
                            && same_types(f.results(), &[ValType::I64])
                    }
                    _ => false,
                };
            if !allowed {
                return Err(invalid(format!(
                    "forbidden import {}.{}: plugins may import only ebb.log(i32, i32, i32) and ebb.get(i32, i32) -> i64 (no WASI)",
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

    /// A fresh instance of `module`, in the engine that compiled it.
    /// [`CallCause::NoInstance`] when the instance pool is full;
    /// [`CallCause::Trap`] when instantiation fails otherwise.
    pub fn instantiate(&self, plugin: &str, module: &Module) -> Result<PluginInstance, CallCause> {
        let (engine, linker) = match self.tier(module) {
            Tier::Optimized => (&self.engine, &self.linker),
            Tier::Baseline => (&self.baseline, &self.baseline_linker),
        };
        let mut store = Store::new(engine, HostState::new(plugin, self.limits.max_memory_bytes));
        store.limiter(|state| state);
        store.epoch_deadline_callback(on_deadline);
        begin(&mut store, self.limits.query_deadline);
        let running = self.ticker.running();
        let instance = linker.instantiate(&mut store, module).map_err(|e| {
            if let Some(full) = e.downcast_ref::<PoolConcurrencyLimitError>() {
                return CallCause::NoInstance(format!(
                    "{full}; the pool holds {} instances (see PluginLimits)",
                    pool_capacity(&self.limits, self.expiry_calls)
                ));
            }
            match store.data().interrupted() {
                starved @ CallCause::Starved { .. } => starved,
                _ => CallCause::Trap(format!("instantiation failed: {}", describe(&e))),
            }
        })?;
        drop(running);
        PluginInstance::new(
            store,
            instance,
            self.limits.max_response_bytes,
            self.ticker.clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use super::super::budget::{STARVED_AFTER, thread_cpu_time};
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

    /// A module whose `ebb_call` counts down from the request's first four
    /// bytes (little endian) and answers nothing.
    fn counting_down() -> Vec<u8> {
        wat::parse_str(
            r#"(module
  (memory (export "memory") 1)
  (func (export "ebb_abi_version") (result i32) (i32.const 1))
  (func (export "ebb_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "ebb_dealloc") (param i32 i32))
  (func (export "ebb_manifest") (result i64) (i64.const 0))
  (func (export "ebb_call") (param i32 i32) (result i64) (local $n i32)
    (local.set $n (i32.load (local.get 0)))
    (block $done (loop $next
      (br_if $done (i32.eqz (local.get $n)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br $next)))
    (i64.const 0))
)"#,
        )
        .expect("valid WAT")
    }

    /// The lowest-numbered CPU this thread may run on (CPU 0 may be outside
    /// a container's set).
    fn first_cpu() -> usize {
        // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes it
        // and CPU_ISSET reads it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set),
                0
            );
            (0..libc::CPU_SETSIZE as usize)
                .find(|&cpu| libc::CPU_ISSET(cpu, &set))
                .expect("a CPU to run on")
        }
    }

    /// Pin the calling thread to CPU `cpu`.
    fn pin(cpu: usize) {
        // SAFETY: a zeroed cpu_set_t is valid, CPU_SET writes inside it,
        // and sched_setaffinity only reads it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                0,
                "pinning to CPU {cpu}"
            );
        }
    }

    /// Count down `n` in a fresh call under `deadline`: the outcome, the
    /// thread's CPU time and the wall time it took.
    fn count_down(
        instance: &mut PluginInstance,
        n: u32,
        deadline: Duration,
    ) -> (Result<Vec<u8>, CallCause>, Duration, Duration) {
        let (cpu, wall) = (thread_cpu_time(), Instant::now());
        let outcome = instance.call(&n.to_le_bytes(), deadline);
        (outcome, thread_cpu_time() - cpu, wall.elapsed())
    }

    /// [`count_down`] on a thread pinned to one CPU at nice value `nice`,
    /// next to `spinners` threads spinning on that CPU at nice value 0.
    fn count_down_crowded(
        instance: &mut PluginInstance,
        n: u32,
        deadline: Duration,
        spinners: usize,
        nice: i32,
    ) -> (Result<Vec<u8>, CallCause>, Duration, Duration) {
        thread::scope(|scope| {
            scope
                .spawn(|| {
                    let cpu = first_cpu();
                    pin(cpu);
                    let spinning = AtomicBool::new(true);
                    thread::scope(|inner| {
                        for _ in 0..spinners {
                            inner.spawn(|| {
                                pin(cpu);
                                while spinning.load(Ordering::Relaxed) {
                                    std::hint::spin_loop();
                                }
                            });
                        }
                        // After spawning the spinners (a new thread takes
                        // its creator's nice value): on Linux this changes
                        // only this thread's (raising it needs no privilege).
                        // SAFETY: no pointers; a failure leaves it as it was.
                        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
                        let run = count_down(instance, n, deadline);
                        spinning.store(false, Ordering::Relaxed);
                        run
                    })
                })
                .join()
                .unwrap()
        })
    }

    #[test]
    fn deadlines_count_the_calls_cpu_time_not_the_time_others_took() {
        let runtime = PluginRuntime::new(PluginLimits::default(), 1).unwrap();
        let module = runtime.optimize(&counting_down()).unwrap();
        let mut instance = runtime.instantiate("counter", &module).unwrap();
        // Size the work to at least 60 ms of CPU time, the machine alone,
        // and give it twice that as its deadline (the same work's CPU time
        // varies with the clock speed of a busy machine).
        let mut n: u32 = 1 << 20;
        let alone = loop {
            let (outcome, cpu, _) = count_down(&mut instance, n, Duration::from_secs(10));
            outcome.unwrap();
            if cpu >= Duration::from_millis(60) || n == u32::MAX {
                break cpu;
            }
            let scale = 0.07 / cpu.as_secs_f64().max(0.001);
            n = (f64::from(n) * scale.clamp(1.5, 16.0)).min(f64::from(u32::MAX)) as u32;
        };
        let deadline = alone * 2;
        // Crowded onto one CPU, the work takes longer on the wall clock than
        // its deadline; whenever it used less CPU time than the deadline it
        // must not be interrupted. More spinners until the wall clock passes
        // the deadline; less work if the CPU time came near it.
        let mut seen = None;
        for spinners in [1, 2, 3, 3, 4, 4] {
            let (outcome, cpu, wall) = count_down_crowded(&mut instance, n, deadline, spinners, 0);
            if cpu * 10 >= deadline * 9 {
                n = n / 3 * 2;
                continue;
            }
            assert!(
                outcome.is_ok(),
                "{outcome:?} after {cpu:?} of CPU in {wall:?} ({deadline:?} deadline)"
            );
            if wall > deadline {
                seen = Some((cpu, wall));
                break;
            }
        }
        assert!(
            seen.is_some(),
            "the wall clock never passed the {deadline:?} deadline with CPU time left"
        );
        // Work without end is still stopped at its deadline of CPU time.
        let (outcome, cpu, wall) = count_down(&mut instance, u32::MAX, Duration::from_millis(50));
        assert_eq!(outcome, Err(CallCause::Deadline(50)), "{cpu:?} in {wall:?}");
        // With almost no CPU (the lowest priority, next to two spinning
        // threads), a call that cannot get its deadline of CPU time within
        // ten times the deadline fails as starved, the host's failure.
        let mut instance = runtime.instantiate("counter", &module).unwrap();
        let (outcome, cpu, wall) = count_down_crowded(&mut instance, n, deadline, 2, 19);
        assert_eq!(
            outcome,
            Err(CallCause::Starved {
                deadline_ms: deadline.as_millis() as u64,
                waited_ms: (deadline * STARVED_AFTER).as_millis() as u64,
            }),
            "{cpu:?} of CPU in {wall:?}"
        );
        assert!(cpu < deadline, "{cpu:?} of CPU");
    }
}
