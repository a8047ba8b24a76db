//! Installed plugins: versions persisted in the `plugins` column family,
//! loaded at boot from their compiled artifacts, each with a pool of idle
//! instances.

use std::collections::BTreeMap;
use std::sync::Arc;

use ebb_proto::Message;
use ebb_proto::plugin::v1 as abi;
use parking_lot::RwLock;
use sha2::{Digest, Sha256};

use super::error::ArtifactRejected;
use super::error::{EngineError, PluginError, PluginInvalid};
use super::runtime::{Artifact, PluginRuntime};
use super::version::{PluginVersion, VersionInfo};
use crate::clock::now_ms;
use crate::store::{Family, KvStore};

struct Entry {
    current: Arc<PluginVersion>,
    history: Vec<VersionInfo>,
}

/// The outcome of an upload.
pub struct Installed {
    /// The plugin's current version: the new one, or the installed one when
    /// the bytes were the same.
    pub version: Arc<PluginVersion>,
    /// `true` when the bytes equal the current version's: nothing was
    /// compiled or stored.
    pub unchanged: bool,
}

/// The stored parts of one version; all but `info` (the last) go when it
/// stops being current, `info` too when it is pruned. `artifact_sha256` is
/// the SHA-256 of `artifact`, written with it: boot deserializes only an
/// artifact that still hashes to it.
const PARTS: [&str; 5] = ["module", "artifact", "artifact_sha256", "manifest", "info"];

/// The stored parts of one version that only its current version keeps.
const BLOBS: &[&str] = PARTS.split_last().expect("parts").1;

/// The writes that store `artifact` and its hash as version `version` of `name`.
fn artifact_puts(name: &str, version: u32, artifact: Artifact) -> [(Vec<u8>, Vec<u8>); 2] {
    [
        (key(name, version, "artifact"), artifact.bytes),
        (
            key(name, version, "artifact_sha256"),
            artifact.sha256.to_vec(),
        ),
    ]
}

/// The installed plugins. The registry does not own the store (so a node's
/// shutdown can close it); writes take the store as an argument.
pub struct PluginRegistry {
    runtime: Arc<PluginRuntime>,
    plugins: RwLock<BTreeMap<String, Entry>>,
}

fn key(name: &str, version: u32, part: &str) -> Vec<u8> {
    format!("v1/{name}/{version:010}/{part}").into_bytes()
}

/// What the checks of an install found.
enum Admitted {
    /// The bytes are the current version's.
    Unchanged(Arc<PluginVersion>),
    /// A new version, compiled.
    New {
        name: String,
        sha256: String,
        compiled: super::runtime::CompiledPlugin,
    },
}

/// Check a plugin name ([`crate::names::plugin_name`]: the shape of table
/// names, lower-cased, not starting with `ebb_`).
pub fn plugin_name(name: &str) -> Result<String, PluginInvalid> {
    crate::names::plugin_name(name).map_err(|error| PluginInvalid {
        plugin: name.chars().take(80).collect(),
        reason: error.to_string(),
    })
}

impl PluginRegistry {
    /// Load every installed plugin (blocking). A stored artifact is
    /// deserialized only when it hashes to the SHA-256 recorded with it;
    /// one that does not (changed on disk, or written before hashes were
    /// recorded), or that this build cannot load, is logged as a warning
    /// naming the plugin and version, recompiled from the stored module
    /// (validated as on upload), and stored again with its hash. Failing to
    /// store the fresh artifact is logged and the plugin still loads.
    pub fn load(runtime: Arc<PluginRuntime>, store: &dyn KvStore) -> Result<Self, PluginError> {
        let mut parts: BTreeMap<(String, u32), BTreeMap<String, Vec<u8>>> = BTreeMap::new();
        store.scan_family(Family::Plugins, b"v1/", &mut |k, v| {
            let text = String::from_utf8_lossy(k);
            let mut fields = text.splitn(4, '/').skip(1);
            if let (Some(name), Some(version), Some(part)) =
                (fields.next(), fields.next(), fields.next())
                && let Ok(version) = version.parse::<u32>()
            {
                parts
                    .entry((name.to_string(), version))
                    .or_default()
                    .insert(part.to_string(), v.to_vec());
            }
            Ok(())
        })?;
        let mut plugins: BTreeMap<String, Entry> = BTreeMap::new();
        // Versions come in order, so the ones before a plugin's current
        // version (kept without blobs) are gathered here first.
        let mut histories: BTreeMap<String, Vec<VersionInfo>> = BTreeMap::new();
        for ((name, _), blobs) in parts {
            let Some(info) = blobs
                .get("info")
                .and_then(|b| serde_json::from_slice::<VersionInfo>(b).ok())
            else {
                continue;
            };
            let history = histories.entry(name.clone()).or_default();
            history.push(info.clone());
            let history = history.clone();
            let (Some(module_bytes), Some(manifest)) = (blobs.get("module"), blobs.get("manifest"))
            else {
                // An older version whose blobs were dropped when it was replaced.
                continue;
            };
            let manifest = abi::Manifest::decode(manifest.as_slice()).map_err(|e| {
                PluginError::Engine(EngineError::CorruptManifest {
                    plugin: name.clone(),
                    reason: e.to_string(),
                })
            })?;
            let loaded = match blobs.get("artifact") {
                Some(artifact) => {
                    runtime.load_artifact(artifact, blobs.get("artifact_sha256").map(Vec::as_slice))
                }
                None => Err(ArtifactRejected::Missing),
            };
            let (module, from_artifact) = match loaded {
                Ok(module) => (module, true),
                Err(rejected) => {
                    let number = info.version;
                    tracing::warn!(
                        plugin = %name,
                        version = number,
                        "stored artifact of plugin {name} version {number} {rejected}; recompiling it from the stored module"
                    );
                    let compiled = runtime.compile_optimized(&name, module_bytes)?;
                    let stored = runtime
                        .serialize_artifact(&compiled.module)
                        .map_err(PluginError::Engine)
                        .and_then(|artifact| {
                            let puts = artifact_puts(&name, number, artifact);
                            Ok(store.write_family(Family::Plugins, &puts, &[])?)
                        });
                    if let Err(error) = stored {
                        tracing::warn!(
                            plugin = %name,
                            version = number,
                            "cannot store the recompiled artifact of plugin {name} version {number} ({error}); the next boot recompiles it again"
                        );
                    }
                    (compiled.module, false)
                }
            };
            let version = Arc::new(PluginVersion::new(
                name.clone(),
                info,
                manifest,
                from_artifact,
                module,
                runtime.clone(),
            ));
            plugins.insert(
                name,
                Entry {
                    current: version,
                    history,
                },
            );
        }
        Ok(Self {
            runtime,
            plugins: RwLock::new(plugins),
        })
    }

    /// The runtime.
    pub fn runtime(&self) -> &Arc<PluginRuntime> {
        &self.runtime
    }

    /// Validate, compile and store `bytes` as the next version of `name`
    /// (blocking); the current version when the bytes are the same. The
    /// new version serves new queries at once, with baseline code; no
    /// artifact is stored until [`Self::optimize`] compiled its optimized
    /// code.
    pub fn install(
        &self,
        store: &dyn KvStore,
        name: &str,
        bytes: &[u8],
    ) -> Result<Arc<PluginVersion>, PluginError> {
        self.install_checked(store, name, bytes, &|_| Ok(()))
            .map(|installed| installed.version)
    }

    /// [`Self::install`], refusing the module when `check` refuses its
    /// manifest (checked after validation, before anything is stored).
    ///
    /// Bytes equal to the current version's (same SHA-256) store nothing and
    /// answer that version, `unchanged`. A new version drops the stored
    /// module, manifest and artifact of the one it replaces (a running
    /// query keeps its version in memory; an expiry binding names the
    /// plugin, so it always uses the current version), and keeps the
    /// records (`info`) of the last [`PluginLimits::max_versions`] versions,
    /// deleting older ones.
    ///
    /// [`PluginLimits::max_versions`]: super::PluginLimits::max_versions
    pub fn install_checked(
        &self,
        store: &dyn KvStore,
        name: &str,
        bytes: &[u8],
        check: &dyn Fn(&abi::Manifest) -> Result<(), PluginError>,
    ) -> Result<Installed, PluginError> {
        let (name, sha256, compiled) = match self.admit(name, bytes, check)? {
            Admitted::Unchanged(current) => {
                return Ok(Installed {
                    version: current,
                    unchanged: true,
                });
            }
            Admitted::New {
                name,
                sha256,
                compiled,
            } => (name, sha256, compiled),
        };
        let mut plugins = self.plugins.write();
        let previous = plugins.get(&name);
        if let Some(previous) = previous
            && previous.current.info.sha256 == sha256
        {
            // The same bytes were installed while these compiled.
            return Ok(Installed {
                version: previous.current.clone(),
                unchanged: true,
            });
        }
        let number = previous.map_or(1, |e| e.current.info.version + 1);
        let info = VersionInfo {
            version: number,
            sha256,
            size: bytes.len(),
            created_ms: now_ms(),
        };
        let puts = vec![
            (key(&name, number, "module"), bytes.to_vec()),
            (
                key(&name, number, "manifest"),
                compiled.manifest.encode_to_vec(),
            ),
            (
                key(&name, number, "info"),
                serde_json::to_vec(&info).expect("plain struct serializes"),
            ),
        ];
        // Older versions keep their info (history) but not their blobs, and
        // only the last `max_versions` versions keep even that.
        let mut history = previous.map(|e| e.history.clone()).unwrap_or_default();
        history.push(info.clone());
        let excess = history
            .len()
            .saturating_sub(self.runtime.limits().max_versions.max(1));
        let pruned: Vec<VersionInfo> = history.drain(..excess).collect();
        let mut deletes: Vec<Vec<u8>> = previous
            .map(|e| {
                let v = e.current.info.version;
                BLOBS.iter().map(|part| key(&name, v, part)).collect()
            })
            .unwrap_or_default();
        for old in &pruned {
            deletes.extend(PARTS.iter().map(|part| key(&name, old.version, part)));
        }
        store.write_family(Family::Plugins, &puts, &deletes)?;
        if let Some(previous) = previous {
            previous.current.retire();
        }
        let version = Arc::new(PluginVersion::new(
            name.clone(),
            info.clone(),
            compiled.manifest,
            false,
            compiled.module,
            self.runtime.clone(),
        ));
        plugins.insert(
            name,
            Entry {
                current: version.clone(),
                history,
            },
        );
        Ok(Installed {
            version,
            unchanged: false,
        })
    }

    /// Compile the optimized code of `version`, installed from `bytes`
    /// (blocking, about five times the upload's compile), store it as the
    /// version's artifact and swap it in. `Ok(false)` when `version` is no
    /// longer current (replaced or removed meanwhile): nothing is stored.
    /// On an error the version keeps serving its baseline code, and the
    /// next boot, finding no artifact, compiles the optimized code.
    pub fn optimize(
        &self,
        store: &dyn KvStore,
        version: &Arc<PluginVersion>,
        bytes: &[u8],
    ) -> Result<bool, PluginError> {
        let module = self.runtime.optimize(bytes)?;
        self.swap_in_optimized(store, version, module)
    }

    /// The second half of [`Self::optimize`]: store `module`, the optimized
    /// code of `version` ([`PluginRuntime::optimize`]), as its artifact and
    /// swap it in, unless `version` is no longer current (`Ok(false)`).
    pub fn swap_in_optimized(
        &self,
        store: &dyn KvStore,
        version: &Arc<PluginVersion>,
        module: wasmtime::Module,
    ) -> Result<bool, PluginError> {
        let artifact = self.runtime.serialize_artifact(&module)?;
        // Installs and removals take the write lock around their store
        // writes: under the read lock the version stays current while its
        // artifact is stored.
        let plugins = self.plugins.read();
        let current = plugins
            .get(&version.name)
            .is_some_and(|entry| Arc::ptr_eq(&entry.current, version));
        if !current {
            return Ok(false);
        }
        let puts = artifact_puts(&version.name, version.info.version, artifact);
        store.write_family(Family::Plugins, &puts, &[])?;
        version.upgrade(module);
        Ok(true)
    }

    /// Whether [`Self::install_checked`] would accept `bytes` as plugin
    /// `name` (blocking: it compiles them), storing nothing. A cluster
    /// member checks an upload so before proposing it to every member.
    pub fn validate_checked(
        &self,
        name: &str,
        bytes: &[u8],
        check: &dyn Fn(&abi::Manifest) -> Result<(), PluginError>,
    ) -> Result<(), PluginError> {
        self.admit(name, bytes, check).map(|_| ())
    }

    /// The checks of an install before anything is stored: the name, the
    /// same bytes as the current version, the plugin count, compilation
    /// and `check`.
    fn admit(
        &self,
        name: &str,
        bytes: &[u8],
        check: &dyn Fn(&abi::Manifest) -> Result<(), PluginError>,
    ) -> Result<Admitted, PluginError> {
        let name = plugin_name(name)?;
        let sha256 = crate::hex::encode(&Sha256::digest(bytes));
        if let Some(current) = self.get(&name)
            && current.info.sha256 == sha256
        {
            return Ok(Admitted::Unchanged(current));
        }
        {
            let plugins = self.plugins.read();
            if !plugins.contains_key(&name) && plugins.len() >= self.runtime.limits().max_plugins {
                return Err(PluginError::Limit(format!(
                    "{} plugins are installed, the limit; delete one first",
                    plugins.len()
                )));
            }
        }
        let compiled = self.runtime.compile(&name, bytes)?;
        check(&compiled.manifest)?;
        Ok(Admitted::New {
            name,
            sha256,
            compiled,
        })
    }

    /// The module bytes of `name`'s current version, read from `store`
    /// (blocking); `None` if there is no such plugin.
    pub fn module(&self, store: &dyn KvStore, name: &str) -> Result<Option<Vec<u8>>, PluginError> {
        let Some(current) = self.get(name) else {
            return Ok(None);
        };
        let key = key(&current.name, current.info.version, "module");
        Ok(store.read_entry(Family::Plugins, &key)?)
    }

    /// The current version of `name`.
    pub fn get(&self, name: &str) -> Option<Arc<PluginVersion>> {
        self.plugins
            .read()
            .get(&name.to_ascii_lowercase())
            .map(|e| e.current.clone())
    }

    /// The versions of `name` still recorded (at most
    /// [`super::PluginLimits::max_versions`], oldest first).
    pub fn history(&self, name: &str) -> Vec<VersionInfo> {
        self.plugins
            .read()
            .get(&name.to_ascii_lowercase())
            .map(|e| e.history.clone())
            .unwrap_or_default()
    }

    /// All plugins, by name.
    pub fn list(&self) -> Vec<Arc<PluginVersion>> {
        self.plugins
            .read()
            .values()
            .map(|e| e.current.clone())
            .collect()
    }

    /// Remove `name` and every stored version (blocking).
    pub fn remove(&self, store: &dyn KvStore, name: &str) -> Result<(), PluginError> {
        let name = name.to_ascii_lowercase();
        let mut plugins = self.plugins.write();
        if !plugins.contains_key(&name) {
            return Err(PluginError::NotFound(name));
        }
        let mut keys = Vec::new();
        store.scan_family(
            Family::Plugins,
            format!("v1/{name}/").as_bytes(),
            &mut |k, _| {
                keys.push(k.to_vec());
                Ok(())
            },
        )?;
        store.write_family(Family::Plugins, &[], &keys)?;
        if let Some(entry) = plugins.remove(&name) {
            entry.current.retire();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Arc;
    use std::time::Duration;

    use parking_lot::Mutex;

    use super::*;
    use crate::plugin::{CallCause, PluginInstance, PluginLimits, Tier};
    use crate::store::MemoryStore;

    /// A raw ABI v1 module whose scalar `f` answers 42.
    fn answering_42() -> Vec<u8> {
        let manifest = abi::Manifest {
            abi_version: 1,
            name: "good".into(),
            version: "1.0.0".into(),
            functions: vec![abi::FunctionDecl {
                name: "f".into(),
                kind: abi::FunctionKind::Scalar as i32,
                arg_count: 1,
                description: String::new(),
            }],
        }
        .encode_to_vec();
        let response = abi::CallResponse {
            result: Some(abi::call_response::Result::Scalar(abi::ScalarResult {
                values: vec![abi::Value {
                    kind: Some(abi::value::Kind::Int(42)),
                }],
            })),
        }
        .encode_to_vec();
        let escape =
            |bytes: &[u8]| -> String { bytes.iter().map(|b| format!("\\{b:02x}")).collect() };
        wat::parse_str(format!(
            r#"(module
  (memory (export "memory") 1)
  (data (i32.const 1024) "{manifest}")
  (data (i32.const 4096) "{response}")
  (func (export "ebb_abi_version") (result i32) (i32.const 1))
  (func (export "ebb_alloc") (param i32) (result i32) (i32.const 8192))
  (func (export "ebb_dealloc") (param i32 i32))
  (func (export "ebb_manifest") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const {manifest_len})))
  (func (export "ebb_call") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 4096) (i64.const 32)) (i64.const {response_len})))
)"#,
            manifest = escape(&manifest),
            manifest_len = manifest.len(),
            response = escape(&response),
            response_len = response.len(),
        ))
        .expect("valid WAT")
    }

    fn runtime() -> Arc<PluginRuntime> {
        let limits = PluginLimits {
            max_plugins: 2,
            idle_instances: 1,
            threads: 1,
            ..PluginLimits::default()
        };
        PluginRuntime::new(limits, 1).unwrap()
    }

    fn calls_answer_42(version: &PluginVersion) {
        let call = abi::call_request::Call::Scalar(abi::ScalarBatch {
            rows: vec![abi::Row {
                args: vec![abi::Value::default()],
            }],
        });
        let answer = version.call("f", call, Duration::from_secs(1)).unwrap();
        let Some(abi::call_response::Result::Scalar(result)) = answer.result else {
            panic!("not a scalar result: {answer:?}");
        };
        assert_eq!(result.values[0].kind, Some(abi::value::Kind::Int(42)));
    }

    /// A log line sink for one thread's `tracing` output.
    #[derive(Clone, Default)]
    struct Logs(Arc<Mutex<Vec<u8>>>);

    impl Write for Logs {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Boot the registry from `store`, with what it logged.
    fn boot(store: &MemoryStore) -> (PluginRegistry, String) {
        let logs = Logs::default();
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        let registry = tracing::subscriber::with_default(subscriber, || {
            PluginRegistry::load(runtime(), store).unwrap()
        });
        let text = String::from_utf8(logs.0.lock().clone()).unwrap();
        (registry, text)
    }

    fn stored(store: &MemoryStore, part: &str) -> Option<Vec<u8>> {
        let mut found = None;
        let wanted = key("good", 1, part);
        store
            .scan_family(Family::Plugins, &wanted, &mut |k, v| {
                if k == wanted.as_slice() {
                    found = Some(v.to_vec());
                }
                Ok(())
            })
            .unwrap();
        found
    }

    /// A store holding plugin `good`, installed and optimized.
    fn installed() -> MemoryStore {
        let store = MemoryStore::new();
        let registry = PluginRegistry::load(runtime(), &store).unwrap();
        let version = registry.install(&store, "good", &answering_42()).unwrap();
        assert!(
            registry
                .optimize(&store, &version, &answering_42())
                .unwrap()
        );
        store
    }

    #[test]
    fn an_upload_serves_baseline_code_until_its_optimized_code_is_stored_and_swapped_in() {
        let store = MemoryStore::new();
        let registry = PluginRegistry::load(runtime(), &store).unwrap();
        let version = registry.install(&store, "good", &answering_42()).unwrap();
        assert_eq!(version.tier(), Tier::Baseline);
        assert_eq!(
            stored(&store, "artifact"),
            None,
            "baseline code is not stored"
        );
        calls_answer_42(&version);
        assert_eq!(version.idle_instances(), 1);

        assert!(
            registry
                .optimize(&store, &version, &answering_42())
                .unwrap()
        );
        assert_eq!(version.tier(), Tier::Optimized);
        assert_eq!(
            version.idle_instances(),
            0,
            "the baseline instance is dropped"
        );
        assert!(stored(&store, "artifact").is_some());
        calls_answer_42(&version);
        assert_eq!(version.idle_instances(), 1);

        // A version replaced before its optimized code is ready stores none.
        let mut other = answering_42();
        other.extend_from_slice(b"\0\x06\x04test\x01");
        let second = registry.install(&store, "good", &other).unwrap();
        let third = registry.install(&store, "good", &answering_42()).unwrap();
        assert!(!registry.optimize(&store, &second, &other).unwrap());
        assert_eq!(second.tier(), Tier::Baseline);
        let artifacts = |version: u32| {
            let mut found = 0;
            store
                .scan_family(
                    Family::Plugins,
                    &key("good", version, "artifact"),
                    &mut |_, _| {
                        found += 1;
                        Ok(())
                    },
                )
                .unwrap();
            found
        };
        assert_eq!(artifacts(2), 0, "nothing stored for a replaced version");
        assert_eq!(third.tier(), Tier::Baseline);
    }

    #[test]
    fn an_intact_artifact_loads_without_recompiling() {
        let store = installed();
        let artifact = stored(&store, "artifact").unwrap();
        assert_eq!(
            stored(&store, "artifact_sha256").unwrap(),
            Sha256::digest(&artifact).to_vec(),
            "the artifact's hash is stored with it"
        );
        let (registry, logs) = boot(&store);
        let version = registry.get("good").unwrap();
        assert!(version.from_artifact);
        assert!(!logs.contains("WARN"), "{logs}");
        calls_answer_42(&version);
    }

    #[test]
    fn a_corrupted_artifact_is_not_deserialized_but_recompiled_logged_and_stored_again() {
        let store = installed();
        let mut artifact = stored(&store, "artifact").unwrap();
        let middle = artifact.len() / 2;
        artifact[middle] ^= 0xff;
        store
            .write_family(
                Family::Plugins,
                &[(key("good", 1, "artifact"), artifact)],
                &[],
            )
            .unwrap();

        let (registry, logs) = boot(&store);
        let version = registry.get("good").unwrap();
        assert!(!version.from_artifact, "recompiled from the stored module");
        assert!(
            logs.contains("WARN")
                && logs.contains("plugin good version 1")
                && logs.contains("does not match its recorded SHA-256"),
            "{logs}"
        );
        calls_answer_42(&version);

        let (registry, logs) = boot(&store);
        assert!(
            registry.get("good").unwrap().from_artifact,
            "the fresh artifact and its hash were stored: {logs}"
        );
    }

    #[test]
    fn an_artifact_without_a_recorded_hash_is_recompiled_and_its_hash_recorded() {
        let store = installed();
        store
            .write_family(Family::Plugins, &[], &[key("good", 1, "artifact_sha256")])
            .unwrap();

        let (registry, logs) = boot(&store);
        let version = registry.get("good").unwrap();
        assert!(!version.from_artifact);
        assert!(logs.contains("has no recorded hash"), "{logs}");
        calls_answer_42(&version);

        let artifact = stored(&store, "artifact").unwrap();
        assert_eq!(
            stored(&store, "artifact_sha256").unwrap(),
            Sha256::digest(&artifact).to_vec()
        );
        assert!(boot(&store).0.get("good").unwrap().from_artifact);
    }

    #[test]
    fn a_replaced_version_keeps_no_idle_instances() {
        let store = MemoryStore::new();
        let registry = PluginRegistry::load(runtime(), &store).unwrap();
        let first = registry.install(&store, "good", &answering_42()).unwrap();
        calls_answer_42(&first);
        assert_eq!(first.idle_instances(), 1);
        let mut other = answering_42();
        // A custom section: other bytes, the same behaviour.
        other.extend_from_slice(b"\0\x06\x04test\x01");
        registry.install(&store, "good", &other).unwrap();
        assert_eq!(first.idle_instances(), 0, "dropped when replaced");
        calls_answer_42(&first);
        assert_eq!(
            first.idle_instances(),
            0,
            "a running query's calls keep none"
        );
    }

    #[test]
    fn the_pool_holds_the_limits_worst_case_and_past_it_answers_no_instance() {
        let runtime = runtime();
        // 2 plugins × 1 idle + 1 thread + 1 expiry call + 1 upload.
        let capacity = crate::plugin::pool_capacity(runtime.limits(), 1);
        assert_eq!(capacity, 5);
        // The pool holds optimized code's instances.
        let compiled = runtime.compile_optimized("good", &answering_42()).unwrap();
        let held: Vec<PluginInstance> = (0..capacity)
            .map(|_| match runtime.instantiate("good", &compiled.module) {
                Ok(instance) => instance,
                Err(cause) => panic!("the worst case must fit the pool: {cause}"),
            })
            .collect();
        match runtime.instantiate("good", &compiled.module) {
            Err(CallCause::NoInstance(reason)) => {
                assert!(reason.contains("the pool holds 5 instances"), "{reason}")
            }
            Err(other) => panic!("not NoInstance: {other}"),
            Ok(_) => panic!("the pool is larger than the limits need"),
        }
        drop(held);
        assert!(runtime.instantiate("good", &compiled.module).is_ok());
    }
}
