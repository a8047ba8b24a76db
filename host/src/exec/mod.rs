//! The SQL executor: plans a query, fans pages out to the partitions that
//! can match, merges them (key order, sort, or aggregate states), applies
//! budgets, and pages results across requests with signed cursors.
//!
//! The node hands it an `ExecContext` (budgets, cursor key, functions,
//! routing, fragments) and never the node itself. Its files, from the entry
//! points down (a file uses only files below it):
//!
//! - `request`: the entry points (`execute`, `stream`): open the cursor,
//!   plan, check the plugin versions a continuation recorded, run.
//! - `serve`: the entry point of other members' pages (in a cluster):
//!   scans pinned on open, pages run like local ones.
//! - `versions`: the plugin versions a plan calls, recorded in cursors and
//!   checked on continuations.
//! - `plans`: the cache of plans that call only built-ins, by SQL text and
//!   parameters.
//! - `physical`: the physical plan, built once by a pure function from the
//!   logical plan, the routing and the budgets; EXPLAIN prints it.
//! - `merge`, `sort`, `aggregate`: the strategies (k-way merge in key order,
//!   buffered ORDER BY, partial aggregates merged in round order).
//! - `merge_inline`: the key-order merge of light queries straight over the
//!   partitions' snapshots, before the paged merge.
//! - `schedule`: pages on the query threads, budgets of time, records and
//!   held bytes.
//! - `join`: key lookup joins: the joined table's records read for each
//!   page of the scanned table, the query evaluated over the joined rows.
//! - `scan`: per-partition scan state, opened from snapshots and cursors.
//! - `remote`: partitions held on other members (pinned scans opened on
//!   their leaders, their pages) and the page protocol's codec.
//! - `sink`: where result rows go (a response page or a stream).
//! - `page`: one page of one partition (filter, project, partial states).
//! - `inline`: which plans run inline and the bounds of that work.
//! - `merge_order`, `cursor`, `context`, `error`, `prefetch`: leaves.

mod aggregate;
mod context;
mod cursor;
mod error;
mod inline;
mod join;
mod merge;
mod merge_inline;
mod merge_order;
mod page;
mod physical;
mod plans;
mod prefetch;
mod remote;
mod request;
mod scan;
mod schedule;
mod serve;
mod sink;
mod sort;
mod versions;

use std::time::Duration;

use ebb_query::{OutputColumn, Value};

pub(crate) use context::ExecContext;
pub use cursor::InvalidCursor;
pub(crate) use cursor::shared_key as shared_cursor_key;
pub use error::QueryError;
pub(crate) use request::{execute, stream};
pub(crate) use serve::serve_page;
pub use serve::{MAX_PINNED, PINNED_IDLE, PinnedScans};

/// How a continuation treats partitions that changed since the first page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Consistency {
    /// A continuation whose partitions changed fails with `QueryChanged`.
    #[default]
    Guarded,
    /// Continue from the resume keys: each key at most once, later pages may
    /// see newer data.
    Relaxed,
}

/// A query request.
#[derive(Debug, Clone, Default)]
pub struct QueryRequest {
    /// The SQL (absent when continuing with `cursor`).
    pub sql: Option<String>,
    /// Parameters for `?` / `$n`.
    pub params: Vec<Value>,
    /// Rows per response (default 1000, at most 10 000).
    pub page_size: Option<usize>,
    /// Continue a previous response.
    pub cursor: Option<String>,
    /// Consistency of continuations (default guarded).
    pub consistency: Option<Consistency>,
    /// In a cluster, how old the data of fragments this member holds a
    /// replica of may be (at most [`crate::cluster::MAX_STALENESS`]):
    /// `None` reads them linearizably. Fragments held elsewhere are read
    /// from their leaders either way; a single node is always current.
    pub max_staleness: Option<std::time::Duration>,
    /// The tables the query may read (lower-case names); `None`: any. A
    /// query (or a continuation) that reads another answers
    /// [`QueryError::Forbidden`]: how a token limited to tables runs SQL.
    pub tables: Option<Vec<String>>,
}

/// Query budgets: exceeding one fails the query with an error naming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryBudgets {
    /// Records a query may visit. Default 10 million.
    pub max_scanned_records: u64,
    /// Time a request may take. Default 30 s.
    pub timeout: Duration,
    /// Result bytes per response: a response stops early (with a cursor)
    /// when the next row would pass it. Default 16 MiB.
    pub max_result_bytes: usize,
    /// Groups an aggregate may hold. Default 100 000.
    pub max_groups: usize,
    /// Rows ORDER BY may buffer. Default 100 000.
    pub max_order_buffer: usize,
    /// Records the first page of a partition scan visits. Default 256.
    pub page_visit_budget: usize,
    /// Records a page visits at most: each page of a scan visits twice as
    /// many records as the one before, from `page_visit_budget` up to this,
    /// so a small `LIMIT` stays cheap and a long scan pays little per page.
    /// Default 4096.
    pub max_page_visit_budget: usize,
    /// Default rows per response. Default 1000.
    pub default_page_size: usize,
    /// Largest `page_size`. Default 10 000.
    pub max_page_size: usize,
    /// Bytes of text and blob values one page may build (intermediate and
    /// result values, literals and parameters included). A page ends early
    /// once it has built a quarter of this; a query fails with this budget
    /// only when one batch of records would build past all of it.
    /// Default 64 MiB.
    pub max_page_bytes: usize,
    /// Bytes one query may hold at once: its parameters, the rows it
    /// buffers between pages (merge and ORDER BY buffers) and its group
    /// keys. Default 256 MiB.
    pub max_query_bytes: usize,
}

impl Default for QueryBudgets {
    fn default() -> Self {
        Self {
            max_scanned_records: 10_000_000,
            timeout: Duration::from_secs(30),
            max_result_bytes: 16 * 1024 * 1024,
            max_groups: 100_000,
            max_order_buffer: 100_000,
            page_visit_budget: 256,
            max_page_visit_budget: 4096,
            default_page_size: 1000,
            max_page_size: 10_000,
            max_page_bytes: 64 * 1024 * 1024,
            max_query_bytes: 256 * 1024 * 1024,
        }
    }
}

/// Statistics of one response.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QueryStats {
    /// Rows returned.
    pub rows: u64,
    /// Records visited.
    pub scanned: u64,
    /// Pages run.
    pub pages: u64,
    /// Wall time in milliseconds.
    pub elapsed_ms: f64,
}

/// A response: columns, rows, and a cursor when more rows remain.
#[derive(Debug, Clone)]
pub struct QueryOutput {
    /// Result columns.
    pub columns: Vec<OutputColumn>,
    /// Rows of values.
    pub rows: Vec<Vec<Value>>,
    /// Continue with this cursor; `None` when the result is complete.
    pub cursor: Option<String>,
    /// Statistics.
    pub stats: QueryStats,
}
