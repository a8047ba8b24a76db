//! Guest SDK for ebb plugins. The ABI glue lands with the plugin issue.
