//! Native functions an embedding application registers under a namespace
//! (`myapp.score(value)`): resolved before plugins of the same name, run
//! in-process without a sandbox.
//!
//! A leaf of the engine (it uses only `ebb_query`'s function traits): the
//! node owns the registry, and the plugin layer's `HostFunctions` resolves
//! names in it before plugins.

use std::collections::HashMap;
use std::sync::Arc;

use ebb_query::{AggregateFunction, ScalarFunction};
use parking_lot::RwLock;

type Name = (String, String);

/// The registered native functions, by `(namespace, name)` in lower case.
#[derive(Default)]
pub struct NativeFunctions {
    scalars: RwLock<HashMap<Name, Arc<dyn ScalarFunction>>>,
    aggregates: RwLock<HashMap<Name, Arc<dyn AggregateFunction>>>,
}

fn key(namespace: &str, name: &str) -> Name {
    (namespace.to_ascii_lowercase(), name.to_ascii_lowercase())
}

/// A namespace or function name SQL cannot write unquoted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {name:?} must match [A-Za-z_][A-Za-z0-9_]{{0,62}}")]
pub struct InvalidFunctionName {
    /// "namespace" or "function name".
    pub what: &'static str,
    /// The name refused.
    pub name: String,
}

/// A namespace or function name that SQL can write unquoted.
fn check_identifier(what: &'static str, text: &str) -> Result<(), InvalidFunctionName> {
    let mut chars = text.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && text.len() <= 63;
    if valid {
        Ok(())
    } else {
        Err(InvalidFunctionName {
            what,
            name: text.to_string(),
        })
    }
}

impl NativeFunctions {
    /// Register (or replace) scalar `namespace.name`.
    pub fn add_scalar(
        &self,
        namespace: &str,
        name: &str,
        function: Arc<dyn ScalarFunction>,
    ) -> Result<(), InvalidFunctionName> {
        check_identifier("namespace", namespace)?;
        check_identifier("function name", name)?;
        self.scalars.write().insert(key(namespace, name), function);
        Ok(())
    }

    /// Register (or replace) aggregate `namespace.name`.
    pub fn add_aggregate(
        &self,
        namespace: &str,
        name: &str,
        function: Arc<dyn AggregateFunction>,
    ) -> Result<(), InvalidFunctionName> {
        check_identifier("namespace", namespace)?;
        check_identifier("function name", name)?;
        self.aggregates
            .write()
            .insert(key(namespace, name), function);
        Ok(())
    }

    /// The scalar `namespace.name`, if registered.
    pub fn scalar(&self, namespace: &str, name: &str) -> Option<Arc<dyn ScalarFunction>> {
        self.scalars.read().get(&key(namespace, name)).cloned()
    }

    /// The aggregate `namespace.name`, if registered.
    pub fn aggregate(&self, namespace: &str, name: &str) -> Option<Arc<dyn AggregateFunction>> {
        self.aggregates.read().get(&key(namespace, name)).cloned()
    }

    /// Whether any function is registered under `namespace`.
    pub fn has_namespace(&self, namespace: &str) -> bool {
        let namespace = namespace.to_ascii_lowercase();
        self.scalars.read().keys().any(|(ns, _)| *ns == namespace)
            || self
                .aggregates
                .read()
                .keys()
                .any(|(ns, _)| *ns == namespace)
    }
}
