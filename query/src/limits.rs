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
    /// Most distinct values one `DISTINCT` aggregate (`count(DISTINCT x)`)
    /// holds per group; more fails the query naming this limit. Default
    /// 1 000 000.
    pub max_distinct_values: usize,
    /// Deepest recursion of the parser: nested parentheses, function calls,
    /// `CAST`, `CASE`, prefix `NOT` and `-`, each one level. sqlparser
    /// refuses deeper text with a syntax error (usually "recursion limit
    /// exceeded"). sqlparser's frames are large (up to 20 KiB a level for a
    /// function call), so it is built with `recursive-protection`: it moves
    /// to a heap-allocated stack segment when its thread's stack runs low.
    /// Default 64.
    pub max_depth: usize,
    /// Deepest expression tree, as bounded from the tokens before parsing
    /// (`depth::depth_bound`): every operator or keyword is a level
    /// (`1 + 1 + 1` is 2, `a = 1 OR a = 2` is 3), a bracketed group adds one,
    /// and siblings (select items, arguments, IN list items) take the
    /// deepest. It catches what `max_depth` cannot: sqlparser reads a chain
    /// of left-associative operators in a loop but builds a tree one level
    /// per operator, and planning, evaluation, EXPLAIN, cloning and dropping
    /// the tree recurse once per level. Default 1000, SQLite's
    /// `SQLITE_MAX_EXPR_DEPTH`. On a 512 KiB stack (a quarter of the 2 MiB a
    /// tokio worker or std thread gets) planning fits about 2000 levels
    /// (1450 with GROUP BY), evaluation 1500, EXPLAIN 1700, cloning 4000 and
    /// dropping 8000; `query/tests/limits.rs` runs every stage at the
    /// deepest accepted expression on such a stack.
    pub max_expr_depth: usize,
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
            max_distinct_values: 1_000_000,
            max_depth: 64,
            max_expr_depth: 1000,
        }
    }
}
