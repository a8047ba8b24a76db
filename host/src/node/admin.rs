//! The node's plugin and binding changes with the checks every change
//! passes: plugins against the bindings that use them, bindings against
//! the plugins installed (one lock serializes both). The same operations
//! are what the cluster's metadata group applies on every member
//! ([`Metadata`]).

use std::sync::{Arc, Weak};

use bytes::Bytes;

use crate::cluster::{MetaOutcome, Metadata};
use crate::expiry::outbox::Outbox;
use crate::expiry::{Binding, ExpiryError, binding};
use crate::names::TableName;
use crate::plugin::{
    HandlerKind, Installed, NotAHandler, PluginError, PluginRegistry, PluginVersion,
};
use crate::raft::Position;
use crate::store::{Family, FamilyWrite, KvStore, StoreError};

/// The node's plugin registry with the checks every change passes.
pub(crate) struct PluginAdmin {
    plugins: Arc<PluginRegistry>,
    outbox: Arc<Outbox>,
    /// Held weakly: the node owns the store and closes it at shutdown.
    store: Weak<dyn KvStore>,
    /// Serializes binding changes with plugin installs and removals.
    pub(crate) bindings_lock: parking_lot::Mutex<()>,
    /// The threads compiling installed versions' optimized code.
    optimizing: parking_lot::Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl PluginAdmin {
    /// The admin of `plugins` stored in `store`, checked against the
    /// bindings `outbox` holds.
    pub(crate) fn new(
        plugins: Arc<PluginRegistry>,
        outbox: Arc<Outbox>,
        store: &Arc<dyn KvStore>,
    ) -> Self {
        Self {
            plugins,
            outbox,
            store: Arc::downgrade(store),
            bindings_lock: parking_lot::Mutex::new(()),
            optimizing: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// The store, unless the node closed it.
    fn store(&self) -> Result<Arc<dyn KvStore>, StoreError> {
        self.store.upgrade().ok_or(StoreError::Closed)
    }

    /// The bindings that name plugin `name`.
    fn bound_to(&self, name: &str) -> Vec<(TableName, Binding)> {
        self.outbox
            .bindings()
            .into_iter()
            .filter(|(_, b)| b.plugin.eq_ignore_ascii_case(name))
            .collect()
    }

    /// Refuses a module that does not declare, as handlers of their kind,
    /// the functions tables are bound to.
    fn keeps_handlers<'a>(
        name: &'a str,
        bound: &'a [(TableName, Binding)],
    ) -> impl Fn(&ebb_proto::plugin::v1::Manifest) -> Result<(), PluginError> + 'a {
        move |manifest| {
            for (source, binding) in bound {
                let kind = binding::kind_of(source);
                if crate::plugin::kind::handler(manifest, name, &binding.function, kind).is_err() {
                    return Err(PluginError::InUse(format!(
                        "table {} is bound to {name}.{}, which this module does not declare as {} {} handler; unbind the table first",
                        source.table(),
                        binding.function,
                        if kind == HandlerKind::Expiry {
                            "an"
                        } else {
                            "a"
                        },
                        kind.as_str(),
                    )));
                }
            }
            Ok(())
        }
    }

    /// Validate, compile and store `bytes` as the next version of `name`
    /// (see [`PluginRegistry::install_checked`]), then compile its
    /// optimized code on a thread of its own ([`PluginRegistry::optimize`]).
    /// Blocking until the version serves (baseline code).
    pub(crate) fn install(&self, name: &str, bytes: &[u8]) -> Result<Installed, PluginError> {
        let _guard = self.bindings_lock.lock();
        let bound = self.bound_to(name);
        let installed = self.plugins.install_checked(
            &*self.store()?,
            name,
            bytes,
            &Self::keeps_handlers(name, &bound),
        )?;
        if !installed.unchanged {
            self.optimize_in_background(installed.version.clone(), bytes.to_vec());
        }
        Ok(installed)
    }

    /// Compile `version`'s optimized code on a thread of its own. A failure
    /// is logged; the version keeps its baseline code until the next boot
    /// compiles the optimized code.
    fn optimize_in_background(&self, version: Arc<PluginVersion>, bytes: Vec<u8>) {
        let plugins = self.plugins.clone();
        let store = self.store.clone();
        let name = version.name.clone();
        let number = version.info.version;
        let plugin = name.clone();
        let spawned = std::thread::Builder::new()
            .name("ebb-plugin-optimize".into())
            .spawn(move || {
                // The store is held only to write the artifact, so a node
                // dropped meanwhile closes its store without waiting.
                let swapped = plugins
                    .runtime()
                    .optimize(&bytes)
                    .map_err(PluginError::from)
                    .and_then(|module| match store.upgrade() {
                        Some(store) => plugins.swap_in_optimized(&*store, &version, module),
                        None => Ok(false),
                    });
                if let Err(error) = swapped {
                    tracing::warn!(plugin = %name, version = number, %error, "cannot compile the optimized code of plugin {name} version {number}; it keeps running its baseline code");
                }
            });
        let mut optimizing = self.optimizing.lock();
        optimizing.retain(|thread| !thread.is_finished());
        match spawned {
            Ok(thread) => optimizing.push(thread),
            Err(error) => {
                tracing::warn!(%plugin, %error, "cannot start a thread to compile a plugin's optimized code; it keeps running its baseline code")
            }
        }
    }

    /// Wait until every optimized compile started so far ended (stored
    /// and swapped in, or failed). Blocking: shutdown calls it before it
    /// closes the store, so the next boot loads the artifacts.
    pub(crate) fn finish_optimizing(&self) {
        let threads = std::mem::take(&mut *self.optimizing.lock());
        for thread in threads {
            let _ = thread.join();
        }
    }

    /// Whether [`Self::install`] would accept `bytes`, storing nothing.
    /// Blocking (it compiles).
    pub(crate) fn validate(&self, name: &str, bytes: &[u8]) -> Result<(), PluginError> {
        let bound = self.bound_to(name);
        self.plugins
            .validate_checked(name, bytes, &Self::keeps_handlers(name, &bound))
    }

    /// `binding` as it would be bound to `source`: its plugin installed
    /// and declaring the function as a handler of the source's kind (the
    /// function's name as the plugin spells it).
    pub(crate) fn check_binding(
        &self,
        source: &TableName,
        binding: Binding,
    ) -> Result<Binding, ExpiryError> {
        let plugin = self.plugins.get(&binding.plugin).ok_or_else(|| {
            ExpiryError::NotFound(format!(
                "plugin {} not found; upload it with PUT /v1/plugins/{}",
                binding.plugin, binding.plugin
            ))
        })?;
        plugin
            .handler(&binding.function, binding::kind_of(source))
            .map_err(|error| match error {
                NotAHandler::Missing { .. } => ExpiryError::NotFound(error.to_string()),
                NotAHandler::WrongKind { .. } => ExpiryError::Invalid(error.to_string()),
            })?;
        Ok(Binding {
            function: plugin
                .function(&binding.function)
                .map(|f| f.name.clone())
                .unwrap_or(binding.function),
            ..binding
        })
    }

    /// Bind `source` (a table's expiries or its change stream) to
    /// `binding` (checked, stored, in force). Blocking.
    pub(crate) fn bind(&self, table: &TableName, binding: Binding) -> Result<Binding, ExpiryError> {
        let _guard = self.bindings_lock.lock();
        let binding = self.check_binding(table, binding)?;
        binding::save(&*self.store()?, table, &binding)?;
        self.outbox
            .set_binding(table.clone(), Some(binding.clone()));
        Ok(binding)
    }

    /// Remove `table`'s binding; the binding removed. Blocking.
    pub(crate) fn unbind(&self, table: &TableName) -> Result<Binding, ExpiryError> {
        let _guard = self.bindings_lock.lock();
        let binding = self
            .outbox
            .binding(table)
            .ok_or_else(|| binding::not_bound(table))?;
        binding::remove(&*self.store()?, table)?;
        self.outbox.set_binding(table.clone(), None);
        Ok(binding)
    }

    /// Remove `name`; refused while a binding uses it. Blocking.
    pub(crate) fn remove(&self, name: &str) -> Result<(), PluginError> {
        let _guard = self.bindings_lock.lock();
        let users: Vec<String> = self
            .bound_to(name)
            .into_iter()
            .map(|(table, _)| binding::describe(&table))
            .collect();
        if !users.is_empty() {
            return Err(PluginError::InUse(format!(
                "plugin {name} is the handler of {}; unbind first (DELETE /v1/tables/{{t}}/expiry-handler or change-handler)",
                users.join(", ")
            )));
        }
        self.plugins.remove(&*self.store()?, name)
    }
}

/// The error code of the HTTP contract a plugin error answers with, as a
/// failed metadata command carries it to the member that asked.
fn contract_code(error: &PluginError) -> &'static str {
    match error {
        PluginError::Invalid(_) => "plugin_invalid",
        PluginError::NotFound(_) => "not_found",
        PluginError::Limit(_) | PluginError::InUse(_) | PluginError::Replicated => "conflict",
        PluginError::Store(_) => "not_durable",
        PluginError::Engine(_) => "internal",
    }
}

/// A binding as the metadata group carries it: the JSON a node stores.
pub(crate) fn binding_bytes(binding: &Binding) -> Bytes {
    serde_json::to_vec(binding)
        .expect("plain struct serializes")
        .into()
}

fn expiry_failed(error: ExpiryError) -> MetaOutcome {
    MetaOutcome::Failed {
        code: error.contract_code().to_string(),
        message: error.to_string(),
    }
}

fn failed(error: PluginError) -> MetaOutcome {
    MetaOutcome::Failed {
        code: contract_code(&error).to_string(),
        message: error.to_string(),
    }
}

impl Metadata for PluginAdmin {
    fn install_plugin(&self, name: &str, module: &[u8]) -> MetaOutcome {
        match self.install(name, module) {
            Ok(installed) => MetaOutcome::Installed {
                version: installed.version.info.version,
                sha256: installed.version.info.sha256.clone(),
                unchanged: installed.unchanged,
            },
            Err(error) => failed(error),
        }
    }

    fn remove_plugin(&self, name: &str) -> MetaOutcome {
        match self.remove(name) {
            Ok(()) => MetaOutcome::Removed,
            Err(error) => failed(error),
        }
    }

    fn plugin_modules(&self) -> Result<Vec<(String, Bytes)>, String> {
        let mut modules = Vec::new();
        for version in self.plugins.list() {
            let module = self
                .plugins
                .module(&*self.store().map_err(|e| e.to_string())?, &version.name)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("plugin {} has no stored module", version.name))?;
            modules.push((version.name.clone(), Bytes::from(module)));
        }
        Ok(modules)
    }

    fn bind_expiry(&self, table: &str, binding: &[u8]) -> MetaOutcome {
        let bound = TableName::source(table)
            .map_err(|e| ExpiryError::Invalid(e.to_string()))
            .and_then(|table| {
                let binding: Binding = serde_json::from_slice(binding).map_err(|e| {
                    ExpiryError::Invalid(format!("a binding that does not decode: {e}"))
                })?;
                self.bind(&table, binding)
            });
        match bound {
            Ok(binding) => MetaOutcome::Bound(binding_bytes(&binding)),
            Err(error) => expiry_failed(error),
        }
    }

    fn unbind_expiry(&self, table: &str) -> MetaOutcome {
        let unbound = TableName::source(table)
            .map_err(|e| ExpiryError::Invalid(e.to_string()))
            .and_then(|table| self.unbind(&table));
        match unbound {
            Ok(binding) => MetaOutcome::Unbound(binding_bytes(&binding)),
            Err(error) => expiry_failed(error),
        }
    }

    fn expiry_bindings(&self) -> Vec<(String, Bytes)> {
        self.outbox
            .bindings()
            .into_iter()
            .map(|(table, binding)| (table.to_string(), binding_bytes(&binding)))
            .collect()
    }

    fn write_position(&self, position: Position) -> Result<(), String> {
        self.store()
            .map_err(|e| e.to_string())?
            .write_entries(
                &[FamilyWrite::Put(
                    Family::RaftState,
                    position.key,
                    position.value,
                )],
                true,
            )
            .map_err(|e| e.to_string())
    }
}
