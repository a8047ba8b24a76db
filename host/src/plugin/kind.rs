//! Function kinds: the one place that decides whether a declared function
//! is an expiry handler (binding, plugin upload, delivery and SQL all ask
//! here).

use ebb_proto::plugin::v1 as abi;

/// Whether `decl` is declared as an expiry handler (kind `EXPIRY_HANDLER`).
pub fn is_expiry_handler(decl: &abi::FunctionDecl) -> bool {
    decl.kind == abi::FunctionKind::ExpiryHandler as i32
}

/// Why a function cannot serve as an expiry handler.
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
    /// The function exists but is not declared as an expiry handler.
    #[error(
        "{plugin}.{function} is not an expiry handler; only a function declared with kind EXPIRY_HANDLER can be bound"
    )]
    WrongKind {
        /// The plugin.
        plugin: String,
        /// The function.
        function: String,
    },
}

/// The expiry handler `function` (case-insensitive) declared in `manifest`
/// of `plugin`.
pub fn expiry_handler<'m>(
    manifest: &'m abi::Manifest,
    plugin: &str,
    function: &str,
) -> Result<&'m abi::FunctionDecl, NotAHandler> {
    let decl = manifest
        .functions
        .iter()
        .find(|f| f.name.eq_ignore_ascii_case(function))
        .ok_or_else(|| NotAHandler::Missing {
            plugin: plugin.to_string(),
            function: function.to_string(),
        })?;
    if !is_expiry_handler(decl) {
        return Err(NotAHandler::WrongKind {
            plugin: plugin.to_string(),
            function: function.to_string(),
        });
    }
    Ok(decl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_functions_declared_as_expiry_handlers_are_handlers() {
        let decl = |name: &str, kind: abi::FunctionKind| abi::FunctionDecl {
            name: name.into(),
            kind: kind as i32,
            ..abi::FunctionDecl::default()
        };
        let manifest = abi::Manifest {
            functions: vec![
                decl("copy", abi::FunctionKind::ExpiryHandler),
                decl("get", abi::FunctionKind::Scalar),
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
    }
}
