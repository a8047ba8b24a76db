//! Handler bindings: which handler a table's expiries or changes go to,
//! their limits, and how they are stored (entries `expiry-binding/<source>`
//! of `meta`, the source being a table or its change stream).

use serde::{Deserialize, Serialize};

use super::ExpiryError;
use crate::names::TableName;
use crate::plugin::HandlerKind;
use crate::store::{Family, FamilyWrite, KvStore, StoreError};

/// Default events per handler call.
pub(crate) const DEFAULT_MAX_BATCH: u32 = 256;
/// Largest `max_batch` accepted.
pub(crate) const MAX_MAX_BATCH: u32 = 4096;
/// Default deliveries of one event before it moves to dead letters.
pub(crate) const DEFAULT_MAX_ATTEMPTS: u32 = 10;
/// Largest `max_attempts` accepted.
pub(crate) const MAX_MAX_ATTEMPTS: u32 = 1000;
/// Largest binding `config`, as compact JSON text.
pub const MAX_CONFIG_BYTES: usize = 64 * 1024;

const KEY_PREFIX: &str = "expiry-binding/";

/// A table's expiry handler, or its change handler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Plugin name.
    pub plugin: String,
    /// Function of the plugin, declared as `EXPIRY_HANDLER` (or
    /// `CHANGE_HANDLER` for a change handler).
    pub function: String,
    /// Most events per call.
    pub max_batch: u32,
    /// Deliveries of an event before it moves to dead letters.
    pub max_attempts: u32,
    /// When the binding was made (Unix ms).
    pub created_ms: u64,
    /// Settings handed to every call of the handler: compact JSON text of
    /// at most [`MAX_CONFIG_BYTES`]; `None` when the binding has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// A change handler's key prefix: only writes of keys starting with it
    /// produce events. `None`: every key. Expiry bindings have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

impl Binding {
    /// Whether a write of `key` produces a change event under this binding.
    pub fn covers(&self, key: &str) -> bool {
        self.prefix
            .as_deref()
            .is_none_or(|prefix| key.starts_with(prefix))
    }
}

/// A binding as requested (`PUT /v1/tables/{t}/expiry-handler`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BindRequest {
    /// Plugin name.
    pub plugin: String,
    /// Function name.
    pub function: String,
    /// Most events per call (default 256, at most 4096).
    pub max_batch: Option<u32>,
    /// Deliveries before dead letters (default 10, at most 1000).
    pub max_attempts: Option<u32>,
    /// Settings for the handler (any JSON; `null` is none), at most
    /// [`MAX_CONFIG_BYTES`] as compact JSON.
    pub config: Option<serde_json::Value>,
    /// Change handlers only: handle only the writes of keys starting with
    /// this (1 to 4096 bytes).
    pub prefix: Option<String>,
}

impl BindRequest {
    /// Check the limits and fill in defaults for a binding to `source` (a
    /// table's expiries, or its change stream); the plugin is checked by
    /// the caller, who holds the registry.
    pub(crate) fn resolve(self, source: &TableName, now_ms: u64) -> Result<Binding, ExpiryError> {
        match (&self.prefix, source.changes_of()) {
            (Some(_), None) => {
                return Err(ExpiryError::Invalid(
                    "prefix applies to change handlers only; an expiry handler gets every expiry of its table".into(),
                ));
            }
            (Some(prefix), Some(_)) => crate::names::validate_key(prefix).map_err(|e| {
                ExpiryError::Invalid(format!("prefix is not a valid key prefix: {e}"))
            })?,
            (None, _) => {}
        }
        let max_batch = self.max_batch.unwrap_or(DEFAULT_MAX_BATCH);
        if !(1..=MAX_MAX_BATCH).contains(&max_batch) {
            return Err(ExpiryError::Invalid(format!(
                "max_batch {max_batch} is out of range; use 1 to {MAX_MAX_BATCH}"
            )));
        }
        let max_attempts = self.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
        if !(1..=MAX_MAX_ATTEMPTS).contains(&max_attempts) {
            return Err(ExpiryError::Invalid(format!(
                "max_attempts {max_attempts} is out of range; use 1 to {MAX_MAX_ATTEMPTS}"
            )));
        }
        if self.plugin.is_empty() || self.function.is_empty() {
            return Err(ExpiryError::Invalid(
                "plugin and function are required".into(),
            ));
        }
        let config = match self.config {
            None | Some(serde_json::Value::Null) => None,
            Some(config) => {
                let text = config.to_string();
                if text.len() > MAX_CONFIG_BYTES {
                    return Err(ExpiryError::Invalid(format!(
                        "config is {} bytes as compact JSON; the limit is {MAX_CONFIG_BYTES}: keep large settings in a table and name it in config",
                        text.len()
                    )));
                }
                Some(text)
            }
        };
        Ok(Binding {
            plugin: self.plugin.to_ascii_lowercase(),
            function: self.function,
            max_batch,
            max_attempts,
            created_ms: now_ms,
            config,
            prefix: self.prefix,
        })
    }
}

/// The kind of handler `source` binds: a change stream's is a change
/// handler, a table's an expiry handler.
pub(crate) fn kind_of(source: &TableName) -> HandlerKind {
    match source.changes_of() {
        Some(_) => HandlerKind::Change,
        None => HandlerKind::Expiry,
    }
}

/// What an operation on `source`'s binding answers when it has none.
pub(crate) fn not_bound(source: &TableName) -> ExpiryError {
    ExpiryError::NotFound(format!(
        "table {} has no {} handler",
        source.table(),
        kind_of(source).as_str()
    ))
}

/// What a redrive of an unbound `source` answers.
pub(crate) fn unbound_redrive(source: &TableName) -> ExpiryError {
    ExpiryError::Conflict(format!(
        "table {} has no {} handler; bind one before redriving",
        source.table(),
        kind_of(source).as_str()
    ))
}

/// `source` as users name it: `orders` for its expiry handler, `orders
/// (change)` for its change handler.
pub(crate) fn describe(source: &TableName) -> String {
    match source.changes_of() {
        Some(table) => format!("{table} (change)"),
        None => source.to_string(),
    }
}

fn key(table: &TableName) -> Vec<u8> {
    format!("{KEY_PREFIX}{table}").into_bytes()
}

/// Every stored binding. Blocking.
pub(crate) fn load(store: &dyn KvStore) -> Result<Vec<(TableName, Binding)>, StoreError> {
    let mut out = Vec::new();
    store.scan_family(Family::Meta, KEY_PREFIX.as_bytes(), &mut |key, value| {
        let corrupt = |reason: String| StoreError::Corrupt {
            key: String::from_utf8_lossy(key).into_owned(),
            reason,
        };
        let name =
            std::str::from_utf8(&key[KEY_PREFIX.len()..]).map_err(|e| corrupt(e.to_string()))?;
        let table = TableName::source(name).map_err(|e| corrupt(e.to_string()))?;
        let binding = serde_json::from_slice(value).map_err(|e| corrupt(e.to_string()))?;
        out.push((table, binding));
        Ok(())
    })?;
    Ok(out)
}

/// Store `binding` for `table` (fsynced). Blocking.
pub(crate) fn save(
    store: &dyn KvStore,
    table: &TableName,
    binding: &Binding,
) -> Result<(), StoreError> {
    let value = serde_json::to_vec(binding).expect("plain struct serializes");
    store.write_entries(&[FamilyWrite::Put(Family::Meta, key(table), value)], true)
}

/// Remove the binding of `table` (fsynced). Blocking.
pub(crate) fn remove(store: &dyn KvStore, table: &TableName) -> Result<(), StoreError> {
    store.write_entries(&[FamilyWrite::Delete(Family::Meta, key(table))], true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn defaults_limits_and_storage() {
        let source = TableName::new("sessions").unwrap();
        let request = BindRequest {
            plugin: "Archive".into(),
            function: "copy".into(),
            ..BindRequest::default()
        };
        let binding = request.clone().resolve(&source, 5).unwrap();
        let prefixed = BindRequest {
            prefix: Some("user/".into()),
            ..request.clone()
        };
        assert!(
            prefixed
                .clone()
                .resolve(&source, 5)
                .unwrap_err()
                .to_string()
                .contains("change handlers only")
        );
        let changes = prefixed.resolve(&source.changes(), 5).unwrap();
        assert!(changes.covers("user/1") && !changes.covers("order/1"));
        assert!(binding.covers("anything"));
        assert_eq!(
            (
                binding.plugin.as_str(),
                binding.max_batch,
                binding.max_attempts
            ),
            ("archive", 256, 10)
        );
        let too_big = BindRequest {
            max_batch: Some(5000),
            ..request.clone()
        };
        assert!(
            too_big
                .resolve(&source, 5)
                .unwrap_err()
                .to_string()
                .contains("max_batch")
        );
        let zero = BindRequest {
            max_attempts: Some(0),
            ..request
        };
        assert!(
            zero.resolve(&source, 5)
                .unwrap_err()
                .to_string()
                .contains("max_attempts")
        );

        let store = MemoryStore::new();
        let table = TableName::new("sessions").unwrap();
        save(&store, &table, &binding).unwrap();
        assert_eq!(
            load(&store).unwrap(),
            vec![(table.clone(), binding.clone())]
        );
        save(&store, &table.changes(), &changes).unwrap();
        assert_eq!(
            load(&store).unwrap(),
            vec![(table.clone(), binding), (table.changes(), changes)]
        );
        remove(&store, &table).unwrap();
        remove(&store, &table.changes()).unwrap();
        assert!(load(&store).unwrap().is_empty());
    }

    #[test]
    fn a_config_is_kept_as_compact_json_within_its_limit() {
        let source = TableName::new("sessions").unwrap();
        let request = |config| BindRequest {
            plugin: "archive".into(),
            function: "copy".into(),
            config: Some(config),
            ..BindRequest::default()
        };
        let binding = request(serde_json::json!({"table": "old_sessions"}))
            .resolve(&source, 5)
            .unwrap();
        assert_eq!(
            binding.config.as_deref(),
            Some(r#"{"table":"old_sessions"}"#)
        );
        let none = request(serde_json::Value::Null)
            .resolve(&source, 5)
            .unwrap();
        assert_eq!(none.config, None);
        let big = serde_json::Value::String("x".repeat(MAX_CONFIG_BYTES));
        let error = request(big).resolve(&source, 5).unwrap_err().to_string();
        assert!(
            error.contains("config") && error.contains("65536"),
            "{error}"
        );

        // A binding stored before configs existed still loads.
        let store = MemoryStore::new();
        let old = br#"{"plugin":"archive","function":"copy","max_batch":256,"max_attempts":10,"created_ms":5}"#;
        store
            .write_entries(
                &[FamilyWrite::Put(
                    Family::Meta,
                    b"expiry-binding/s".to_vec(),
                    old.to_vec(),
                )],
                true,
            )
            .unwrap();
        assert_eq!(load(&store).unwrap()[0].1.config, None);
        let table = TableName::new("s").unwrap();
        save(&store, &table, &binding).unwrap();
        assert_eq!(load(&store).unwrap(), vec![(table, binding)]);
    }
}
