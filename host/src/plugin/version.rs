//! One installed plugin version: its record, manifest and module, the
//! pool of idle instances its calls reuse, and per-function call metrics.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ebb_proto::Message;
use ebb_proto::plugin::v1 as abi;
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use wasmtime::Module;

use super::error::{CallCause, PluginCallError};
use super::instance::PluginInstance;
use super::kind::{HandlerKind, NotAHandler};
use super::read::{Reads, RecordReader};
use super::runtime::{PluginRuntime, Tier};

/// What is kept about every version of a plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// 1, 2, ... per plugin name.
    pub version: u32,
    /// SHA-256 of the module bytes, hex.
    pub sha256: String,
    /// Module size in bytes.
    pub size: usize,
    /// Upload time, Unix ms.
    pub created_ms: u64,
}

/// Call statistics of one function (of one plugin version).
#[derive(Debug, Default)]
pub struct FunctionMetrics {
    /// Calls made.
    pub calls: std::sync::atomic::AtomicU64,
    /// Rows passed in scalar batches and aggregate updates.
    pub rows: std::sync::atomic::AtomicU64,
    /// Failed calls by cause (`deadline`, `memory_cap`, `trap`, `malformed`,
    /// `too_large`, `guest_error`).
    pub errors: Mutex<BTreeMap<&'static str, u64>>,
    /// Call durations.
    pub duration: crate::metrics::Histogram,
}

fn cause_name(cause: &CallCause) -> &'static str {
    match cause {
        CallCause::Deadline(_) => "deadline",
        CallCause::Starved { .. } => "starved",
        CallCause::MemoryCap(_) => "memory_cap",
        CallCause::Trap(_) => "trap",
        CallCause::Malformed(_) => "malformed",
        CallCause::TooLarge(_) => "too_large",
        CallCause::Guest(_) => "guest_error",
        CallCause::NoInstance(_) => "no_instance",
    }
}

fn rows_of(call: &abi::call_request::Call) -> u64 {
    match call {
        abi::call_request::Call::Scalar(batch) => batch.rows.len() as u64,
        abi::call_request::Call::AggUpdate(update) => update.rows.len() as u64,
        abi::call_request::Call::Expiry(batch) => batch.events.len() as u64,
        _ => 0,
    }
}

/// One installed version: its module, manifest and idle instances. Queries
/// hold an `Arc` of the version they planned with, so replacing a plugin
/// never changes a running query.
pub struct PluginVersion {
    /// Plugin name.
    pub name: String,
    /// Version info.
    pub info: VersionInfo,
    /// The manifest the module declared.
    pub manifest: abi::Manifest,
    /// Whether boot loaded the stored artifact (`false`: compiled now).
    pub from_artifact: bool,
    /// The code calls instantiate: baseline code from an upload until
    /// [`Self::upgrade`] swaps in the optimized code.
    module: RwLock<Module>,
    runtime: Arc<PluginRuntime>,
    /// Set when another version replaces this one or the plugin is removed:
    /// its idle instances are dropped and no more are kept, so only current
    /// versions hold idle instances (the pool is sized on that).
    retired: std::sync::atomic::AtomicBool,
    idle: Mutex<Vec<PluginInstance>>,
    metrics: Mutex<BTreeMap<String, Arc<FunctionMetrics>>>,
}

impl PluginVersion {
    /// Version `info` of plugin `name`, compiled as `module`.
    pub(super) fn new(
        name: String,
        info: VersionInfo,
        manifest: abi::Manifest,
        from_artifact: bool,
        module: Module,
        runtime: Arc<PluginRuntime>,
    ) -> Self {
        Self {
            name,
            info,
            manifest,
            from_artifact,
            module: RwLock::new(module),
            runtime,
            retired: std::sync::atomic::AtomicBool::new(false),
            idle: Mutex::new(Vec::new()),
            metrics: Mutex::new(BTreeMap::new()),
        }
    }

    /// Statistics per function called so far.
    pub fn metrics(&self) -> Vec<(String, Arc<FunctionMetrics>)> {
        self.metrics
            .lock()
            .iter()
            .map(|(name, m)| (name.clone(), m.clone()))
            .collect()
    }

    /// The declared function called `name` (case-insensitive).
    pub fn function(&self, name: &str) -> Option<&abi::FunctionDecl> {
        self.manifest
            .functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
    }

    /// The declared expiry handler called `function` (case-insensitive).
    pub fn expiry_handler(&self, function: &str) -> Result<&abi::FunctionDecl, NotAHandler> {
        super::kind::expiry_handler(&self.manifest, &self.name, function)
    }

    /// The declared handler of `kind` called `function` (case-insensitive).
    pub fn handler(
        &self,
        function: &str,
        kind: HandlerKind,
    ) -> Result<&abi::FunctionDecl, NotAHandler> {
        super::kind::handler(&self.manifest, &self.name, function, kind)
    }

    /// Call `function` with `call` under `deadline`. Blocking: run it on a
    /// blocking thread. An instance that traps, times out or answers
    /// garbage is discarded; a guest-reported error keeps it.
    pub fn call(
        &self,
        function: &str,
        call: abi::call_request::Call,
        deadline: Duration,
    ) -> Result<abi::CallResponse, PluginCallError> {
        self.call_reading(function, call, deadline, None)
    }

    /// [`Self::call`] for a handler: `ebb.get` reads through `reader`
    /// within the call's deadline and its read budget.
    pub fn call_handler(
        &self,
        function: &str,
        call: abi::call_request::Call,
        deadline: Duration,
        reader: Arc<dyn RecordReader>,
    ) -> Result<abi::CallResponse, PluginCallError> {
        self.call_reading(function, call, deadline, Some(reader))
    }

    /// Encode `call` and make it, reading through `reader` when given.
    fn call_reading(
        &self,
        function: &str,
        call: abi::call_request::Call,
        deadline: Duration,
        reader: Option<Arc<dyn RecordReader>>,
    ) -> Result<abi::CallResponse, PluginCallError> {
        let rows = rows_of(&call);
        let request = abi::CallRequest {
            function: function.to_string(),
            call: Some(call),
        }
        .encode_to_vec();
        self.call_metered(function, &request, rows, deadline, reader, response)
    }

    /// [`Self::call`] with the `CallRequest` already encoded (for `function`,
    /// carrying `rows` rows, counted in the metrics).
    pub fn call_encoded(
        &self,
        function: &str,
        request: &[u8],
        rows: u64,
        deadline: Duration,
    ) -> Result<abi::CallResponse, PluginCallError> {
        self.call_encoded_with(function, request, rows, deadline, response)
    }

    /// [`Self::call_encoded`], with the response bytes read by `read` where
    /// they lie in the instance (no copy). `read` reports a guest error as
    /// [`CallCause::Guest`] (the instance is kept) and anything it cannot
    /// read as another cause (the instance is discarded).
    pub fn call_encoded_with<R>(
        &self,
        function: &str,
        request: &[u8],
        rows: u64,
        deadline: Duration,
        read: impl FnOnce(&[u8]) -> Result<R, CallCause>,
    ) -> Result<R, PluginCallError> {
        self.call_metered(function, request, rows, deadline, None, read)
    }

    /// A counted and timed call, reading through `reader` when given.
    fn call_metered<R>(
        &self,
        function: &str,
        request: &[u8],
        rows: u64,
        deadline: Duration,
        reader: Option<Arc<dyn RecordReader>>,
        read: impl FnOnce(&[u8]) -> Result<R, CallCause>,
    ) -> Result<R, PluginCallError> {
        let metrics = self
            .metrics
            .lock()
            .entry(function.to_string())
            .or_default()
            .clone();
        metrics
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        metrics
            .rows
            .fetch_add(rows, std::sync::atomic::Ordering::Relaxed);
        let started = std::time::Instant::now();
        let result = self
            .call_instance(request, deadline, reader, read)
            .map_err(|cause| PluginCallError {
                plugin: self.name.clone(),
                function: function.to_string(),
                cause,
            });
        metrics.duration.observe(started.elapsed());
        if let Err(error) = &result {
            *metrics
                .errors
                .lock()
                .entry(cause_name(&error.cause))
                .or_default() += 1;
        }
        result
    }

    fn call_instance<R>(
        &self,
        request: &[u8],
        deadline: Duration,
        reader: Option<Arc<dyn RecordReader>>,
        read: impl FnOnce(&[u8]) -> Result<R, CallCause>,
    ) -> Result<R, CallCause> {
        let instance = self.idle.lock().pop();
        let mut instance = match instance {
            Some(instance) => instance,
            None => {
                let module = self.module.read().clone();
                self.runtime.instantiate(&self.name, &module)?
            }
        };
        let reads = reader.map(|reader| Reads::new(reader, Instant::now() + deadline));
        let reading = reads.is_some();
        if reading {
            instance.set_reads(reads);
        }
        let result = instance.call_with(request, deadline, read);
        if reading {
            // An instance goes back to the pool without its reader.
            instance.set_reads(None);
        }
        let result = result?;
        if matches!(result, Ok(_) | Err(CallCause::Guest(_))) {
            let mut idle = self.idle.lock();
            // An instance of code that was replaced meanwhile is not kept.
            let current = wasmtime::Engine::same(instance.engine(), self.module.read().engine());
            if idle.len() < self.runtime.limits().idle_instances
                && !self.retired.load(std::sync::atomic::Ordering::Acquire)
                && current
            {
                idle.push(instance);
            }
        }
        result
    }

    /// Stop keeping idle instances: drop the ones kept and keep none after
    /// the calls still running (a query planned with this version still
    /// completes, instantiating as it needs).
    pub(super) fn retire(&self) {
        self.retired
            .store(true, std::sync::atomic::Ordering::Release);
        self.idle.lock().clear();
    }

    /// Replace the code with `optimized` (the same module, compiled by the
    /// optimizing engine): new calls instantiate it, the idle instances of
    /// the old code are dropped, and calls running on them finish there.
    pub(super) fn upgrade(&self, optimized: Module) {
        let mut idle = self.idle.lock();
        *self.module.write() = optimized;
        idle.clear();
    }

    /// Which engine compiled the code calls run.
    pub fn tier(&self) -> Tier {
        self.runtime.tier(&self.module.read())
    }

    /// The runtime this version runs in.
    pub fn runtime(&self) -> &Arc<PluginRuntime> {
        &self.runtime
    }

    /// The idle instances kept for reuse.
    pub fn idle_instances(&self) -> usize {
        self.idle.lock().len()
    }
}

/// A whole `CallResponse`: a guest error is [`CallCause::Guest`], an empty
/// one is malformed.
pub(super) fn response(bytes: &[u8]) -> Result<abi::CallResponse, CallCause> {
    let response =
        abi::CallResponse::decode(bytes).map_err(|e| CallCause::Malformed(e.to_string()))?;
    match response.result {
        Some(abi::call_response::Result::Error(message)) => Err(CallCause::Guest(message)),
        None => Err(CallCause::Malformed("empty CallResponse".into())),
        Some(_) => Ok(response),
    }
}
