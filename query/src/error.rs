//! Planning errors: what is wrong with the SQL and what to do instead.

/// The query cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The text is not valid SQL.
    #[error("SQL syntax error: {0}")]
    Syntax(String),
    /// Valid SQL that ebb does not support; the message names the construct.
    #[error("{0} is not supported")]
    Unsupported(String),
    /// A semantic error: unknown column, wrong argument count, misplaced aggregate.
    #[error("{0}")]
    Invalid(String),
    /// A limit was exceeded; the message names it.
    #[error("{message}")]
    Limit {
        /// Which limit (`max_sql_bytes`, ...).
        limit: &'static str,
        /// Its value.
        value: u64,
        /// What was too large.
        message: String,
    },
}

// The constructors stay out of line: inlined, their temporaries would grow
// the frame of the planner's expression lowering, which recurses once per
// operator.

/// [`PlanError::Unsupported`] naming `what`.
#[cold]
#[inline(never)]
pub(crate) fn unsupported(what: impl Into<String>) -> PlanError {
    PlanError::Unsupported(what.into())
}

/// [`PlanError::Invalid`] carrying a registry's refusal, in its words.
#[cold]
#[inline(never)]
pub(crate) fn lookup(error: crate::functions::LookupError) -> PlanError {
    PlanError::Invalid(error.to_string())
}

/// [`PlanError::Invalid`] saying `what`.
#[cold]
#[inline(never)]
pub(crate) fn invalid(what: impl Into<String>) -> PlanError {
    PlanError::Invalid(what.into())
}
