//! The executor's errors: one typed [`QueryError`], and the constructors of
//! its budget errors (each names its budget and says what to do).

use std::time::Duration;

use ebb_query::{EvalError, FunctionError, OverBudget, PlanError};

use super::cursor::InvalidCursor;
use crate::fragment::SubmitError;

/// A query failed. Nothing partial is returned with an error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum QueryError {
    /// The request itself is malformed (page size, consistency, parameters).
    #[error("{0}")]
    InvalidRequest(String),
    /// The query reads a table the request may not read
    /// ([`crate::QueryRequest::tables`]).
    #[error("this token may not read table {table}; it is limited to: {allowed}")]
    Forbidden {
        /// The table read.
        table: String,
        /// The tables allowed, comma-separated.
        allowed: String,
    },
    /// The SQL cannot be planned.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The cursor is garbage, tampered, or belongs to another query.
    #[error(transparent)]
    InvalidCursor(#[from] InvalidCursor),
    /// Under guarded consistency, a partition changed since the first page.
    #[error(
        "the data changed since the first page (fragment {fragment}); rerun the query, or continue with \"consistency\": \"relaxed\""
    )]
    QueryChanged {
        /// The fragment whose partition changed.
        fragment: u32,
    },
    /// A plugin the query's plan called was replaced or removed since the
    /// first page (in either consistency: the node keeps only a plugin's
    /// current version, so the continuation cannot run the one recorded).
    #[error("{message}")]
    PluginChanged {
        /// The plugin.
        plugin: String,
        /// What changed and what to do.
        message: String,
    },
    /// A budget was exceeded.
    #[error("{message}")]
    Budget {
        /// Which budget.
        budget: &'static str,
        /// Its value.
        limit: u64,
        /// What happened and what to do.
        message: String,
    },
    /// The query ran past its time budget.
    #[error("the query ran longer than {0:?} (timeout); narrow it or raise the timeout")]
    Timeout(Duration),
    /// A function failed (a plugin's failure or an error like integer overflow).
    #[error(transparent)]
    Function(#[from] FunctionError),
    /// A fragment's background pool is full: the page was shed. Retry shortly.
    #[error("{0}")]
    Overloaded(String),
    /// The node is shutting down and admits no new queries.
    #[error("the node is shutting down")]
    ShuttingDown,
    /// Whoever received the streamed rows went away (the client
    /// disconnected) before the query ended.
    #[error("the receiver of the rows went away before the query ended")]
    Cancelled,
    /// The server failed running the query (not the request's fault): a
    /// query thread panicked, or the query task failed.
    #[error("{0}")]
    Internal(String),
    /// In a cluster: a fragment's leader could not confirm the read (no
    /// quorum within the timeout, or the fragment is not held here).
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
}

impl From<SubmitError> for QueryError {
    fn from(error: SubmitError) -> Self {
        match error {
            SubmitError::Shed(shed) => QueryError::Overloaded(shed.to_string()),
            SubmitError::Stopped(_) => QueryError::ShuttingDown,
        }
    }
}

/// The query's work did not finish on a query thread (it panicked, or the
/// threads stopped): the server's failure, not the request's.
pub(crate) fn thread_failed(error: impl std::fmt::Display) -> QueryError {
    QueryError::Internal(format!("query task failed: {error}"))
}

/// `max_scanned_records` exceeded.
pub(crate) fn scanned_records(limit: u64) -> QueryError {
    QueryError::Budget {
        budget: "max_scanned_records",
        limit,
        message: format!(
            "the query visited more than {limit} records (max_scanned_records); narrow the key range or the WHERE"
        ),
    }
}

/// A join's result did not fit one response.
pub(crate) fn join_result(page_size: usize, max_result_bytes: usize) -> QueryError {
    QueryError::Budget {
        budget: "join_result",
        limit: page_size as u64,
        message: format!(
            "a join answers in one response, and this result has more than {page_size} rows (the page size) or {max_result_bytes} bytes: add LIMIT, page by key yourself (WHERE a.key > ? ORDER BY a.key LIMIT n), or stream it (Accept: application/x-ndjson)"
        ),
    }
}

/// `max_groups` exceeded.
pub(crate) fn groups(limit: usize, distinct: bool) -> QueryError {
    let message = if distinct {
        format!(
            "SELECT DISTINCT produced more than {limit} distinct rows (max_groups); select fewer or coarser columns, narrow the WHERE, or drop DISTINCT and page through the rows"
        )
    } else {
        format!(
            "GROUP BY produced more than {limit} groups (max_groups); group by something coarser or narrow the WHERE"
        )
    };
    QueryError::Budget {
        budget: "max_groups",
        limit: limit as u64,
        message,
    }
}

/// `max_order_buffer` exceeded.
pub(crate) fn order_buffer(limit: usize) -> QueryError {
    QueryError::Budget {
        budget: "max_order_buffer",
        limit: limit as u64,
        message: format!(
            "ORDER BY needs more than {limit} rows in memory (max_order_buffer); add a LIMIT or narrow the WHERE"
        ),
    }
}

/// `max_query_bytes` exceeded.
pub(crate) fn query_bytes(limit: usize) -> QueryError {
    QueryError::Budget {
        budget: "max_query_bytes",
        limit: limit as u64,
        message: format!(
            "the query would hold more than {limit} bytes of parameters, rows and groups (max_query_bytes); add a LIMIT, select fewer or smaller columns, or raise --max-query-bytes"
        ),
    }
}

/// One result row over `max_result_bytes`.
pub(crate) fn result_row(size: usize, limit: usize) -> QueryError {
    QueryError::Budget {
        budget: "max_result_bytes",
        limit: limit as u64,
        message: format!(
            "one result row is {size} bytes, over the {limit}-byte response budget (max_result_bytes); select fewer or smaller columns"
        ),
    }
}

/// A page's evaluation failed: a function's error, or `max_page_bytes`.
pub(crate) fn page(error: EvalError) -> QueryError {
    match error {
        EvalError::Function(f) => QueryError::Function(f),
        EvalError::OverBudget(OverBudget { limit, .. }) => QueryError::Budget {
            budget: "max_page_bytes",
            limit: limit as u64,
            message: format!(
                "one page of the query would build more than {limit} bytes of values (max_page_bytes); select smaller values, add a LIMIT, or raise --max-page-bytes"
            ),
        },
    }
}
