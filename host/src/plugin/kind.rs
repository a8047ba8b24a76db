//! Function kinds: the one place that decides whether a declared function
//! is an expiry or a change handler (binding, plugin upload, delivery and
//! SQL all ask here).

use ebb_proto::plugin::v1 as abi;

/// The two kinds of handler a table can be bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HandlerKind {
    /// Called with the table's expiries (`EXPIRY_HANDLER`).
    Expiry,
    /// Called with the table's writes and deletes (`CHANGE_HANDLER`).
    Change,
}

impl HandlerKind {
    /// The declared kind a function must have to be bound as this.
    fn function_kind(self) -> abi::FunctionKind {
        match self {
            HandlerKind::Expiry => abi::FunctionKind::ExpiryHandler,
            HandlerKind::Change => abi::FunctionKind::ChangeHandler,
        }
    }

    /// `expiry` or `change`.
    pub fn as_str(self) -> &'static str {
        match self {
            HandlerKind::Expiry => "expiry",
            HandlerKind::Change => "change",
        }
    }
}

/// Whether `decl` is declared as an expiry handler (kind `EXPIRY_HANDLER`).
pub fn is_expiry_handler(decl: &abi::FunctionDecl) -> bool {
    decl.kind == abi::FunctionKind::ExpiryHandler as i32
}

/// Whether `decl` is declared as a handler of either kind: SQL cannot call
/// it.
pub fn is_handler(decl: &abi::FunctionDecl) -> bool {
    is_expiry_handler(decl) || decl.kind == abi::FunctionKind::ChangeHandler as i32
}

/// Why a function cannot serve as a handler.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAHandler {
    /// The plugin declares no function of that name.
    #[error("plugin {plugin} has no function {function}")]
    Missing {
        /// The plugin.
        plugin: String,
        /// The function asked for.
        function: String,
    },
    /// The function exists but is not declared as a handler of the kind.
    #[error(
        "{plugin}.{function} is not {article} {kind} handler; only a function declared with kind {declared} can be bound",
        article = if *.kind == HandlerKind::Expiry { "an" } else { "a" },
        kind = .kind.as_str(),
        declared = .kind.function_kind().as_str_name()
    )]
    WrongKind {
        /// The plugin.
        plugin: String,
        /// The function.
        function: String,
        /// The kind asked for.
        kind: HandlerKind,
    },
}

/// The expiry handler `function` (case-insensitive) declared in `manifest`
/// of `plugin`.
pub fn expiry_handler<'m>(
    manifest: &'m abi::Manifest,
    plugin: &str,
    function: &str,
) -> Result<&'m abi::FunctionDecl, NotAHandler> {
    handler(manifest, plugin, function, HandlerKind::Expiry)
}

/// The handler of `kind` called `function` (case-insensitive) declared in
/// `manifest` of `plugin`.
pub fn handler<'m>(
    manifest: &'m abi::Manifest,
    plugin: &str,
    function: &str,
    kind: HandlerKind,
) -> Result<&'m abi::FunctionDecl, NotAHandler> {
    let decl = manifest
        .functions
        .iter()
        .find(|f| f.name.eq_ignore_ascii_case(function))
        .ok_or_else(|| NotAHandler::Missing {
            plugin: plugin.to_string(),
            function: function.to_string(),
        })?;
    if decl.kind != kind.function_kind() as i32 {
        return Err(NotAHandler::WrongKind {
            plugin: plugin.to_string(),
            function: function.to_string(),
            kind,
        });
    }
    Ok(decl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_functions_declared_as_handlers_of_a_kind_are_such_handlers() {
        let decl = |name: &str, kind: abi::FunctionKind| abi::FunctionDecl {
            name: name.into(),
            kind: kind as i32,
            ..abi::FunctionDecl::default()
        };
        let manifest = abi::Manifest {
            functions: vec![
                decl("copy", abi::FunctionKind::ExpiryHandler),
                decl("get", abi::FunctionKind::Scalar),
                decl("count", abi::FunctionKind::ChangeHandler),
            ],
            ..abi::Manifest::default()
        };
        assert_eq!(expiry_handler(&manifest, "p", "COPY").unwrap().name, "copy");
        assert!(matches!(
            expiry_handler(&manifest, "p", "get"),
            Err(NotAHandler::WrongKind { .. })
        ));
        assert!(matches!(
            expiry_handler(&manifest, "p", "nope"),
            Err(NotAHandler::Missing { .. })
        ));
        assert!(is_expiry_handler(&manifest.functions[0]));
        assert!(!is_expiry_handler(&manifest.functions[1]));
        assert!(is_handler(&manifest.functions[2]) && !is_handler(&manifest.functions[1]));
        assert!(handler(&manifest, "p", "count", HandlerKind::Change).is_ok());
        let error = handler(&manifest, "p", "copy", HandlerKind::Change).unwrap_err();
        assert_eq!(
            error.to_string(),
            "p.copy is not a change handler; only a function declared with kind CHANGE_HANDLER can be bound"
        );
        let error = expiry_handler(&manifest, "p", "count").unwrap_err();
        assert!(
            error.to_string().contains("not an expiry handler"),
            "{error}"
        );
    }
}
