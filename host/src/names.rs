//! Validation of table names and keys: the only shapes the store accepts.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// Longest key in bytes.
pub const MAX_KEY_BYTES: usize = 4096;
/// Longest table name in bytes.
pub const MAX_TABLE_NAME_BYTES: usize = 63;
/// Prefix reserved for the system: no table or plugin name may start with it.
pub const RESERVED_PREFIX: &str = "ebb_";

/// A validated table name: `[a-z_][a-z0-9_]{0,62}`, stored lower-case.
/// Cloning is cheap.
///
/// Inside the handler machinery (bindings, outbox queues, statistics, dead
/// letters) a `TableName` names a *handler source*: a table (its expiries)
/// or a table's change stream, [`TableName::changes`], whose name
/// `<table>/changes` no table can have. [`TableName::source`] reads either
/// back.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableName(Arc<str>);

/// Why a table name or key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The table name does not match the allowed pattern.
    #[error(
        "invalid table name {name:?}: use 1 to 63 characters from a-z, 0-9 and _, not starting with a digit"
    )]
    InvalidTable {
        /// The name as given (shortened when very long).
        name: String,
    },
    /// The table name starts with the reserved prefix.
    #[error("table name {name:?} is reserved: names starting with `ebb_` belong to system tables")]
    ReservedTable {
        /// The name as given.
        name: String,
    },
    /// The plugin name does not match the allowed pattern.
    #[error(
        "invalid plugin name {name:?}: use 1 to 63 characters from a-z, 0-9 and _, not starting with a digit"
    )]
    InvalidPlugin {
        /// The name as given (shortened when very long).
        name: String,
    },
    /// The plugin name starts with the reserved prefix.
    #[error("plugin name {name:?} is reserved: names starting with `ebb_` belong to the system")]
    ReservedPlugin {
        /// The name as given.
        name: String,
    },
    /// The key is empty.
    #[error("key must not be empty: a key is 1 to {MAX_KEY_BYTES} bytes of UTF-8")]
    EmptyKey,
    /// The key is longer than [`MAX_KEY_BYTES`].
    #[error("key is {len} bytes; keys are at most {MAX_KEY_BYTES} bytes")]
    KeyTooLong {
        /// Length of the refused key in bytes.
        len: usize,
    },
}

impl TableName {
    /// Validate a user-supplied table name. Names are case-insensitive and
    /// stored lower-case; the `ebb_` prefix is refused.
    pub fn new(name: &str) -> Result<Self, NameError> {
        let table = Self::system(name)?;
        if table.0.starts_with(RESERVED_PREFIX) {
            return Err(NameError::ReservedTable {
                name: name.to_string(),
            });
        }
        Ok(table)
    }

    /// Validate a name that may use the reserved prefix (system tables and
    /// names read back from storage).
    pub fn system(name: &str) -> Result<Self, NameError> {
        identifier(name)
            .map(|lower| Self(Arc::from(&*lower)))
            .ok_or_else(|| NameError::InvalidTable {
                name: name.chars().take(80).collect(),
            })
    }

    /// The lower-case name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The source of this table's change events (`<table>/changes`): what
    /// its change handler is bound to and its change events are queued,
    /// counted and dead-lettered under.
    pub fn changes(&self) -> TableName {
        Self(Arc::from(format!("{}{CHANGES_SUFFIX}", self.0)))
    }

    /// The table whose change stream this is; `None` for a table.
    pub fn changes_of(&self) -> Option<TableName> {
        self.0
            .strip_suffix(CHANGES_SUFFIX)
            .map(|table| Self(Arc::from(table)))
    }

    /// The table this names: itself, or the table of a change stream.
    pub fn table(&self) -> TableName {
        self.changes_of().unwrap_or_else(|| self.clone())
    }

    /// Validate a handler source read back from storage or the wire: a
    /// table name (the reserved prefix allowed) or a table's change stream.
    pub fn source(name: &str) -> Result<Self, NameError> {
        match name.strip_suffix(CHANGES_SUFFIX) {
            Some(table) => Ok(Self::system(table)?.changes()),
            None => Self::system(name),
        }
    }
}

/// What [`TableName::changes`] appends: `/` is in no table name.
const CHANGES_SUFFIX: &str = "/changes";

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `name` lower-cased if it matches `[a-z_][a-z0-9_]{0,62}` (case-insensitive):
/// the one shape of table and plugin names.
fn identifier(name: &str) -> Option<Cow<'_, str>> {
    let bytes = name.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= MAX_TABLE_NAME_BYTES
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_');
    if !valid {
        return None;
    }
    // Names arrive lower-case nearly always: then nothing is copied here.
    Some(if bytes.iter().any(u8::is_ascii_uppercase) {
        Cow::Owned(name.to_ascii_lowercase())
    } else {
        Cow::Borrowed(name)
    })
}

/// Validate a user-supplied plugin name: the shape of table names, stored
/// lower-case; the `ebb_` prefix is refused.
pub fn plugin_name(name: &str) -> Result<String, NameError> {
    let lower = identifier(name)
        .ok_or_else(|| NameError::InvalidPlugin {
            name: name.chars().take(80).collect(),
        })?
        .into_owned();
    if lower.starts_with(RESERVED_PREFIX) {
        return Err(NameError::ReservedPlugin {
            name: name.to_string(),
        });
    }
    Ok(lower)
}

/// Check a key: UTF-8 (guaranteed by `&str`), 1 to [`MAX_KEY_BYTES`] bytes.
pub fn validate_key(key: &str) -> Result<(), NameError> {
    if key.is_empty() {
        return Err(NameError::EmptyKey);
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(NameError::KeyTooLong { len: key.len() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_lower_cased_and_validated() {
        assert_eq!(TableName::new("Users").unwrap().as_str(), "users");
        assert_eq!(TableName::new("_t9").unwrap().as_str(), "_t9");
        assert_eq!(TableName::new("_Tab9_X").unwrap().as_str(), "_tab9_x");
        assert!(TableName::new(&"a".repeat(63)).is_ok());
        for bad in ["", "9lives", "a-b", "a b", "é", &"a".repeat(64)] {
            assert!(
                matches!(TableName::new(bad), Err(NameError::InvalidTable { .. })),
                "{bad:?} must be refused"
            );
        }
        assert!(matches!(
            TableName::new("EBB_meta"),
            Err(NameError::ReservedTable { .. })
        ));
        assert!(TableName::system("ebb_meta").is_ok());
    }

    #[test]
    fn a_change_stream_is_named_apart_from_every_table() {
        let orders = TableName::new("orders").unwrap();
        let changes = orders.changes();
        assert_eq!(changes.as_str(), "orders/changes");
        assert_eq!(changes.changes_of(), Some(orders.clone()));
        assert_eq!(
            (orders.changes_of(), changes.table()),
            (None, orders.clone())
        );
        assert_eq!(TableName::source("orders/changes").unwrap(), changes);
        assert_eq!(TableName::source("orders").unwrap(), orders);
        assert!(TableName::new("orders/changes").is_err());
        assert!(TableName::source("a-b/changes").is_err());
    }

    #[test]
    fn plugin_names_follow_table_names_and_the_reserved_prefix_is_refused() {
        assert_eq!(plugin_name("Json").unwrap(), "json");
        assert_eq!(plugin_name("_p9").unwrap(), "_p9");
        for bad in ["", "9lives", "a-b", "é", &"a".repeat(64)] {
            assert!(
                matches!(plugin_name(bad), Err(NameError::InvalidPlugin { .. })),
                "{bad:?} must be refused"
            );
        }
        for reserved in ["ebb_x", "EBB_json", "ebb_"] {
            assert!(
                matches!(plugin_name(reserved), Err(NameError::ReservedPlugin { .. })),
                "{reserved:?} must be refused"
            );
        }
        assert!(plugin_name("ebbx").is_ok());
    }

    #[test]
    fn keys_have_bounded_length() {
        assert_eq!(validate_key(""), Err(NameError::EmptyKey));
        assert!(validate_key("k").is_ok());
        assert!(validate_key(&"k".repeat(MAX_KEY_BYTES)).is_ok());
        assert_eq!(
            validate_key(&"k".repeat(MAX_KEY_BYTES + 1)),
            Err(NameError::KeyTooLong {
                len: MAX_KEY_BYTES + 1
            })
        );
    }
}
