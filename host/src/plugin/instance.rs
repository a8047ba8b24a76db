//! One instantiated plugin: its store, memory limiter and typed ABI v1
//! exports, called under a deadline (CPU time, checked at epoch ticks) and
//! a memory cap.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::{
    Instance, Memory, ResourceLimiter, Store, StoreContextMut, Trap, TypedFunc, UpdateDeadline,
};

use super::budget::{Budget, STARVED_AFTER, Verdict};
use super::error::CallCause;
use super::read::Reads;
use super::ticker::{TICK, Ticker};

/// Per-store data: the memory limiter and the plugin name for logs.
pub struct HostState {
    plugin: Arc<str>,
    max_memory: usize,
    memory_cap_hit: bool,
    /// The reads of the handler call running now; `None` outside handler
    /// calls (SQL functions), where `ebb.get` answers an error.
    pub(super) reads: Option<Reads>,
    /// The deadline of the call running now (set as each entry begins).
    budget: Option<Budget>,
    /// The call was interrupted as starved of CPU ([`Verdict::Starved`]).
    starved: bool,
}

impl HostState {
    /// State of an instance of `plugin` whose memory may grow to `max_memory` bytes.
    pub(super) fn new(plugin: &str, max_memory: usize) -> Self {
        Self {
            plugin: Arc::from(plugin),
            max_memory,
            memory_cap_hit: false,
            reads: None,
            budget: None,
            starved: false,
        }
    }

    /// Why the entry begun last was interrupted: starved of CPU, or past
    /// its deadline.
    pub(super) fn interrupted(&self) -> CallCause {
        let deadline = self.budget.map_or(Duration::ZERO, |b| b.deadline());
        if self.starved {
            CallCause::Starved {
                deadline_ms: deadline.as_millis() as u64,
                waited_ms: (deadline * STARVED_AFTER).as_millis() as u64,
            }
        } else {
            CallCause::Deadline(deadline.as_millis() as u64)
        }
    }

    /// The plugin name, for its log lines.
    pub(super) fn plugin(&self) -> &Arc<str> {
        &self.plugin
    }
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

/// Start an entry into plugin code in `store` (instantiation or a call)
/// with `deadline` of CPU time; the epoch deadline fires first when that
/// much has passed on the wall clock ([`on_deadline`] then judges).
pub(super) fn begin(store: &mut Store<HostState>, deadline: Duration) {
    let state = store.data_mut();
    state.budget = Some(Budget::start(deadline));
    state.starved = false;
    store.set_epoch_deadline(ticks(deadline));
}

/// The store's epoch-deadline callback: when the deadline fires on the
/// wall clock, interrupt the call if it used its CPU time or has been
/// starved of it for too long, else let it run for the CPU time it has left.
pub(super) fn on_deadline(
    mut store: StoreContextMut<'_, HostState>,
) -> wasmtime::Result<UpdateDeadline> {
    let verdict = store
        .data()
        .budget
        .map_or(Verdict::Exceeded, |budget| budget.verdict());
    Ok(match verdict {
        Verdict::Continue(left) => UpdateDeadline::Continue(ticks(left)),
        Verdict::Starved => {
            store.data_mut().starved = true;
            UpdateDeadline::Interrupt
        }
        Verdict::Exceeded => UpdateDeadline::Interrupt,
    })
}

/// `deadline` in whole epoch ticks, at least one.
pub(super) fn ticks(deadline: Duration) -> u64 {
    (deadline.as_millis() as u64)
        .div_ceil(TICK.as_millis() as u64)
        .max(1)
}

/// A wasmtime error with its root cause.
pub(super) fn describe(error: &wasmtime::Error) -> String {
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
    /// Ticks while a call runs (each entry into the instance holds a guard).
    ticker: Arc<Ticker>,
}

impl PluginInstance {
    /// The engine the instance runs in (the one that compiled its module).
    pub(super) fn engine(&self) -> &wasmtime::Engine {
        self.store.engine()
    }

    /// Wrap a fresh `instance` living in `store`, checking its exports'
    /// types; [`CallCause::Malformed`] names a missing or mistyped one.
    pub(super) fn new(
        mut store: Store<HostState>,
        instance: Instance,
        max_response: usize,
        ticker: Arc<Ticker>,
    ) -> Result<Self, CallCause> {
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
        Ok(Self {
            store,
            memory,
            abi_version,
            alloc,
            dealloc,
            manifest,
            call,
            max_response,
            ticker,
        })
    }

    fn classify(&self, error: wasmtime::Error) -> CallCause {
        if matches!(error.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
            return self.store.data().interrupted();
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

    /// Call `ebb_abi_version` (100 ms deadline).
    pub(super) fn abi_version(&mut self) -> Result<i32, CallCause> {
        let deadline = Duration::from_millis(100);
        begin(&mut self.store, deadline);
        let _running = self.ticker.running();
        self.abi_version
            .call(&mut self.store, ())
            .map_err(|e| self.classify(e))
    }

    /// Call `ebb_manifest` (100 ms deadline); the encoded manifest.
    pub(super) fn manifest_bytes(&mut self) -> Result<Vec<u8>, CallCause> {
        let deadline = Duration::from_millis(100);
        begin(&mut self.store, deadline);
        let _running = self.ticker.running();
        let packed = self
            .manifest
            .call(&mut self.store, ())
            .map_err(|e| self.classify(e))?;
        self.packed_slice(packed).map(<[u8]>::to_vec)
    }

    /// Call `ebb_call` with an encoded request; the encoded response.
    pub fn call(&mut self, request: &[u8], deadline: Duration) -> Result<Vec<u8>, CallCause> {
        self.call_with(request, deadline, <[u8]>::to_vec)
    }

    /// Let the next calls read through `reads` (`None`: no reads, as for
    /// SQL functions).
    pub(super) fn set_reads(&mut self, reads: Option<Reads>) {
        self.store.data_mut().reads = reads;
    }

    /// Call `ebb_call` with an encoded request and hand the response to
    /// `read` where it lies in the instance's memory (no copy).
    pub fn call_with<R>(
        &mut self,
        request: &[u8],
        deadline: Duration,
        read: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, CallCause> {
        begin(&mut self.store, deadline);
        let _running = self.ticker.running();
        let len = i32::try_from(request.len())
            .map_err(|_| CallCause::Malformed("request too large".into()))?;
        let ptr = self
            .alloc
            .call(&mut self.store, len)
            .map_err(|e| self.classify(e))?;
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
            .map_err(|e| self.classify(e))?;
        let response = read(self.packed_slice(packed)?);
        self.dealloc
            .call(&mut self.store, (ptr, len))
            .map_err(|e| self.classify(e))?;
        Ok(response)
    }
}
