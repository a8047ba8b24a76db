//! Limits on what one query may ask for, checked at plan time.

/// Planning limits. Every one answers with an error naming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest SQL text in bytes. Default 64 KiB.
    pub max_sql_bytes: usize,
    /// Most expression nodes in one query. Default 10 000.
    pub max_expr_nodes: usize,
    /// Longest text or bytes literal (or parameter). Default 1 MiB.
    pub max_literal_bytes: usize,
    /// Most items in one IN list. Default 10 000.
    pub max_in_list: usize,
    /// Largest LIMIT. Default 1 000 000 000.
    pub max_limit: u64,
    /// Largest OFFSET. Default 10 000 000.
    pub max_offset: u64,
    /// Most parameters. Default 10 000.
    pub max_params: usize,
    /// Deepest expression nesting. Default 64.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_sql_bytes: 64 * 1024,
            max_expr_nodes: 10_000,
            max_literal_bytes: 1024 * 1024,
            max_in_list: 10_000,
            max_limit: 1_000_000_000,
            max_offset: 10_000_000,
            max_params: 10_000,
            max_depth: 64,
        }
    }
}
