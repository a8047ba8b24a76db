//! What runs inline, on the task that runs the query instead of a query
//! thread: the plans that may, and the bounds of that work (pages, the
//! key-order merge, aggregate merges and finishes).

use ebb_query::Plan;

/// Pages of at most this many records run on the task that asks for them,
/// still admitted by the fragment's pool, when the plan is a row query that
/// calls only built-in functions (no plugin, no embedder's native, none
/// whose result may outgrow its arguments, such as `printf`) and has at
/// most [`INLINE_LITERAL_BYTES`] of constants; such a page reads at most
/// [`INLINE_VALUE_BYTES`] of values and builds at most
/// [`INLINE_BUILD_BYTES`]. Records live in memory (no I/O), so such a page
/// costs microseconds: less than handing it to a query thread and back,
/// which wakes two sleeping threads (measured at 50-60 us on this project's
/// machine) and dominated small key-ordered queries. A page that would
/// pass one of those bounds before visiting anything, or build past
/// [`INLINE_BUILD_BYTES`], runs on a query thread instead.
pub(crate) const INLINE_VISITS: usize = 64;

/// Bytes of values a page run inline may read: with
/// [`INLINE_LITERAL_BYTES`], what bounds its worst case (a LIKE pattern
/// matched against every byte read) to a few milliseconds.
pub(crate) const INLINE_VALUE_BYTES: usize = 16 * 1024;

/// Bytes of text and blob constants a plan whose pages run inline may have.
pub(crate) const INLINE_LITERAL_BYTES: usize = 256;

/// Bytes of values a page run inline may build.
pub(crate) const INLINE_BUILD_BYTES: usize = 1024 * 1024;

/// Groups an aggregate merges or finishes inline (on the task running the
/// query, not a query thread) when its plan calls only built-ins.
pub(crate) const INLINE_GROUPS: usize = 64;

/// Whether `plan` calls only built-ins (none that outgrows its arguments)
/// and has at most [`INLINE_LITERAL_BYTES`] of constants: its small pages
/// (row queries) and its key-order merge may run inline.
pub(crate) fn calls_only_light_builtins(plan: &Plan) -> bool {
    plan.calls_only_builtins()
        && !plan.calls_outgrowing()
        && plan.literal_bytes() <= INLINE_LITERAL_BYTES
}
