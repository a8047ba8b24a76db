//! One page of a partition scan: visit up to a budget of records from a
//! snapshot, evaluate the filter and the projection or partial aggregates.
//!
//! A page reads an immutable snapshot and holds no lock, so calls into
//! functions (plugins included) never block writers.

use std::cell::OnceCell;
use std::collections::hash_map::Entry as Slot;
use std::collections::{HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use ebb_query::{
    AggState, Column, EvalError, Expr, KeyRange, Meter, Plan, RowSource, Shape, Value, eval_batch,
};

use super::prefetch::prefetch_lines as prefetch_lines_at;
use crate::fragment::entry::{Entry, Header};
use crate::fragment::partition::{EntryRange, PartitionSnapshot};

/// Records evaluated together (one function call per batch): small enough
/// that a batch's value vectors stay in cache.
pub(crate) const BATCH: usize = 256;
/// The batch of a query that calls plugins: a plugin call's fixed cost and
/// an aggregate's state round trip through the sandbox are worth spreading
/// over more rows (still far below the plugin deadline).
const PLUGIN_BATCH: usize = 1024;
/// A batch also ends once the values it will read reach this many bytes, so
/// large records are evaluated a few at a time and what a batch builds
/// from them stays proportionate.
const BATCH_VALUE_BYTES: usize = 1 << 20;
/// A page ends early, after the batch that takes the bytes it built past
/// `max_bytes / PAGE_SOFT_SHARE`, so pages of large values stay well
/// inside their budget and the query goes on with the next page.
const PAGE_SOFT_SHARE: usize = 4;

/// Entries a scan asks the CPU to load ahead of the one it reads: entries
/// are scattered over the heap, and a window this deep keeps several loads
/// in flight.
const PREFETCH_AHEAD: usize = 8;

/// A visible record during a scan, borrowed from the snapshot (its key and
/// value are shared, not copied, when an expression reads them; the key's
/// string is built once per row).
pub(crate) struct ScanRow<'a> {
    entry: &'a Entry,
    /// Decoded once per row.
    header: Header,
    key: OnceCell<Arc<str>>,
    fragment: u32,
}

impl<'a> ScanRow<'a> {
    pub(crate) fn new(entry: &'a Entry, header: Header, fragment: u32) -> Self {
        Self {
            entry,
            header,
            key: OnceCell::new(),
            fragment,
        }
    }

    /// The record's key, borrowed from its entry.
    pub(crate) fn key_str(&self) -> &'a str {
        self.entry.key_of(&self.header)
    }
}

/// A row that output rows are made of: what expressions read, and the key
/// that orders it in the key-order merge.
pub(crate) trait KeyedRow: RowSource {
    /// The record's key, as output rows carry it.
    fn key(&self) -> &Arc<str>;
}

impl KeyedRow for ScanRow<'_> {
    fn key(&self) -> &Arc<str> {
        self.key
            .get_or_init(|| Arc::from(self.entry.key_of(&self.header)))
    }
}

impl RowSource for ScanRow<'_> {
    fn column(&self, column: Column) -> Value {
        match column {
            Column::Key => Value::Text(self.key().clone()),
            Column::Value => Value::Bytes(self.entry.value_bytes_of(&self.header)),
            Column::VersionMs => Value::Int(self.header.hlc_ms() as i64),
            Column::ExpiresAt => self
                .header
                .expires_at_ms()
                .map_or(Value::Null, |at| Value::Int(at as i64)),
            Column::Fragment => Value::Int(i64::from(self.fragment)),
        }
    }

    fn column_length(&self, column: Column) -> Option<Value> {
        // From the entry's header and key bytes: no key string, no value copy.
        let length = match column {
            Column::Key => self.entry.key_of(&self.header).chars().count(),
            Column::Value => self.header.value_len(),
            _ => return None,
        };
        Some(Value::Int(length as i64))
    }
}

/// A row query's output row: its key (merge order), projected values and
/// ORDER BY values.
#[derive(Debug, Clone)]
pub(crate) struct OutRow {
    /// The record's key.
    pub key: Arc<str>,
    /// Projected values.
    pub values: Vec<Value>,
    /// ORDER BY values (none when the rows are in key order).
    pub sort: Vec<Value>,
}

/// Partial aggregates by group key.
pub(crate) type Groups = HashMap<Vec<Value>, Vec<AggState>>;

/// What a page produced.
#[derive(Debug, Default)]
pub(crate) struct PageOutput {
    /// Row queries: matching rows in key order.
    pub rows: Vec<OutRow>,
    /// Aggregate queries: partial states.
    pub groups: Groups,
    /// The last key visited; the next page starts after it.
    pub resume_after: Option<Arc<str>>,
    /// No records remain in the ranges.
    pub done: bool,
    /// Records visited (tombstones and expired ones included).
    pub visited: usize,
}

/// How much one page may do.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageBudget {
    /// Records it may visit.
    pub visit: usize,
    /// Bytes of values it may build (`max_page_bytes`).
    pub max_bytes: usize,
    /// Bytes of record values it may read, when the plan reads their bytes:
    /// the page ends early (not done) before the record that would take
    /// it past this. Unlimited except for pages run inline (see
    /// [`super::inline::INLINE_VISITS`]).
    pub max_value_bytes: usize,
}

impl PageBudget {
    /// A page visiting at most `visit` records and building at most
    /// `max_bytes`, reading values of any size.
    pub(crate) fn new(visit: usize, max_bytes: usize) -> Self {
        PageBudget {
            visit,
            max_bytes,
            max_value_bytes: usize::MAX,
        }
    }
}

/// An ascending scan's lower bound: the range's start, or after `resume`
/// (the last key visited) once that is inside the range.
fn lower_bound<'a>(start: &'a Bound<String>, resume: Option<&'a str>) -> Bound<&'a str> {
    let start = borrowed(start);
    match (start, resume) {
        (start, None) => start,
        (Bound::Unbounded, Some(r)) => Bound::Excluded(r),
        (Bound::Included(s) | Bound::Excluded(s), Some(r)) if r < s => start,
        (Bound::Excluded(s), Some(r)) if r == s => start,
        (_, Some(r)) => Bound::Excluded(r),
    }
}

/// A range's bound as the index's range takes it.
fn borrowed(bound: &Bound<String>) -> Bound<&str> {
    bound.as_ref().map(String::as_str)
}

fn past_end(resume: &str, end: &Bound<String>) -> bool {
    match end {
        Bound::Included(e) => resume >= e.as_str(),
        Bound::Excluded(e) => resume >= e.as_str(),
        Bound::Unbounded => false,
    }
}

/// A descending scan's upper bound: the range's end, or below `resume`
/// (the last key visited) once that is inside the range.
fn upper_bound_before<'a>(end: &'a Bound<String>, resume: Option<&'a str>) -> Bound<&'a str> {
    let end = borrowed(end);
    match (end, resume) {
        (end, None) => end,
        (Bound::Unbounded, Some(r)) => Bound::Excluded(r),
        (Bound::Included(e) | Bound::Excluded(e), Some(r)) if r > e => end,
        (Bound::Excluded(e), Some(r)) if r == e => end,
        (_, Some(r)) => Bound::Excluded(r),
    }
}

/// Whether a descending scan that last visited `resume` has nothing left
/// in a range starting at `start`.
fn before_start(resume: &str, start: &Bound<String>) -> bool {
    match start {
        Bound::Included(s) | Bound::Excluded(s) => resume <= s.as_str(),
        Bound::Unbounded => false,
    }
}

/// The entries a scan of a plan's key ranges visits, tombstones included:
/// in key order after `resume` (the last key visited), or in descending
/// key order before it when the plan orders by key descending. Each range
/// is opened (one seek) when the walk reaches it.
pub(crate) struct Walk<'a> {
    snapshot: &'a PartitionSnapshot,
    ranges: &'a [KeyRange],
    /// Ranges opened so far, counted from the walk's first.
    opened: usize,
    descending: bool,
    resume: Option<&'a str>,
    entries: Option<EntryRange<'a>>,
}

impl<'a> Walk<'a> {
    /// The walk of `plan`'s ranges over `snapshot`, after `resume`.
    pub(crate) fn new(
        plan: &'a Plan,
        snapshot: &'a PartitionSnapshot,
        resume: Option<&'a str>,
    ) -> Self {
        Walk {
            snapshot,
            ranges: &plan.ranges.0,
            opened: 0,
            descending: plan.key_order() == Some(true),
            resume,
            entries: None,
        }
    }

    /// The entries of `range` the walk visits; `None` when the resume
    /// point is past it.
    fn open(&self, range: &'a KeyRange) -> Option<EntryRange<'a>> {
        let resume = self.resume;
        if self.descending {
            if resume.is_some_and(|resume| before_start(resume, &range.start)) {
                return None;
            }
            let bounds = (
                borrowed(&range.start),
                upper_bound_before(&range.end, resume),
            );
            Some(self.snapshot.range(bounds))
        } else {
            if resume.is_some_and(|resume| past_end(resume, &range.end)) {
                return None;
            }
            let bounds = (lower_bound(&range.start, resume), borrowed(&range.end));
            Some(self.snapshot.range(bounds))
        }
    }
}

impl<'a> Iterator for Walk<'a> {
    type Item = &'a Entry;

    fn next(&mut self) -> Option<&'a Entry> {
        loop {
            if let Some(entries) = &mut self.entries {
                let next = if self.descending {
                    entries.next_back()
                } else {
                    entries.next()
                };
                if next.is_some() {
                    return next;
                }
            }
            let range = if self.descending {
                self.ranges.len().checked_sub(self.opened + 1)?
            } else {
                (self.opened < self.ranges.len()).then_some(self.opened)?
            };
            self.opened += 1;
            self.entries = self.open(&self.ranges[range]);
        }
    }
}

/// Evaluate one page of `plan` over `snapshot`: visit at most
/// `budget.visit` records after `resume_after` (in descending key order,
/// before it, when the plan orders by key descending), keep those visible
/// at `snapshot_ms`; stop before a visible record whose value would take
/// the values read past `budget.max_value_bytes` (when the plan reads
/// their bytes). The page ends early once it has built a quarter of
/// `budget.max_bytes`; it fails with [`EvalError::OverBudget`] only when
/// one batch would build past all of it.
pub(crate) fn run_page(
    plan: &Plan,
    snapshot: &PartitionSnapshot,
    fragment: u32,
    resume_after: Option<&str>,
    budget: PageBudget,
    snapshot_ms: u64,
) -> Result<PageOutput, EvalError> {
    let mut out = PageOutput::default();
    let mut meter = Meter::new(budget.max_bytes);
    let soft_bytes = budget.max_bytes / PAGE_SOFT_SHARE;
    let mut batch_bytes = 0usize;
    let batch_size = if !plan.calls_plugins() {
        BATCH
    } else {
        PLUGIN_BATCH
    };
    let mut batch: Vec<ScanRow<'_>> = Vec::with_capacity(batch_size.min(budget.visit));
    // An entry's first cache line holds its header and short keys; values
    // follow. Loading the lines a plan reads a few entries ahead keeps the
    // scan from waiting on memory one row at a time.
    // `length(value)` reads only the header: neither the value's cache
    // line nor `max_value_bytes` concern it.
    let reads_value = plan.reads_value_bytes();
    let prefetch_lines = if reads_value { 2 } else { 1 };
    // Value bytes of the visible records visited (`max_value_bytes`).
    let mut value_bytes = 0usize;
    let mut window: VecDeque<&Entry> = VecDeque::with_capacity(PREFETCH_AHEAD);
    // Borrowed while scanning; copied once at the end.
    let mut last: Option<&Entry> = None;
    let mut exhausted = true;
    let mut entries = Walk::new(plan, snapshot, resume_after);
    loop {
        while window.len() < PREFETCH_AHEAD
            && let Some(next) = entries.next()
        {
            prefetch_lines_at(next.address(), prefetch_lines);
            window.push_back(next);
        }
        let Some(entry) = window.pop_front() else {
            break;
        };
        // A page that built nothing never ends early (a budget under 4
        // bytes makes the soft share 0), so every page makes progress.
        if out.visited == budget.visit || (meter.used() > 0 && meter.used() >= soft_bytes) {
            exhausted = false;
            break;
        }
        let header = entry.header();
        let visible = header.is_visible_at(snapshot_ms);
        if visible && reads_value {
            value_bytes = value_bytes.saturating_add(header.value_len());
            if value_bytes > budget.max_value_bytes {
                exhausted = false;
                break;
            }
        }
        out.visited += 1;
        last = Some(entry);
        if !visible {
            continue;
        }
        batch_bytes += header.value_len();
        batch.push(ScanRow::new(entry, header, fragment));
        if batch.len() == batch_size || batch_bytes >= BATCH_VALUE_BYTES {
            evaluate(plan, &mut batch, &mut out, &mut meter)?;
            batch_bytes = 0;
        }
    }
    evaluate(plan, &mut batch, &mut out, &mut meter)?;
    out.done = exhausted;
    out.resume_after = last
        .map(|entry| Arc::from(entry.key()))
        .or_else(|| resume_after.map(Arc::from));
    Ok(out)
}

/// Filter `batch`, then project or aggregate the rows it keeps into `out`;
/// the batch is left empty, with its capacity.
pub(crate) fn evaluate(
    plan: &Plan,
    batch: &mut Vec<ScanRow<'_>>,
    out: &mut PageOutput,
    meter: &mut Meter,
) -> Result<(), EvalError> {
    if batch.is_empty() {
        return Ok(());
    }
    if let Some(filter) = &plan.filter {
        let keep = eval_batch(filter, batch, meter)?;
        let mut keep = keep.iter();
        batch.retain(|_| keep.next().is_some_and(|k| k.truth() == Some(true)));
    }
    // The batch keeps its capacity for the next one.
    let result = evaluate_kept(plan, batch, out, meter);
    batch.clear();
    result
}

/// The columns `exprs` read when each is a bare column (`key`, `value`,
/// ...); `None` when one computes something.
pub(crate) fn bare_columns<'e>(exprs: impl IntoIterator<Item = &'e Expr>) -> Option<Vec<Column>> {
    exprs
        .into_iter()
        .map(|e| match e {
            Expr::Column(column) => Some(*column),
            _ => None,
        })
        .collect()
}

/// Project or aggregate the rows that passed the filter.
pub(crate) fn evaluate_kept<R: KeyedRow>(
    plan: &Plan,
    rows: &[R],
    out: &mut PageOutput,
    meter: &mut Meter,
) -> Result<(), EvalError> {
    if rows.is_empty() {
        return Ok(());
    }
    match &plan.shape {
        Shape::Rows { projection } => {
            // Rows in key order are merged by key: their ORDER BY values
            // (the key first) are never read.
            let order_by = if plan.key_order().is_some() {
                &[][..]
            } else {
                &plan.order_by[..]
            };
            if let (Some(columns), Some(sorts)) = (
                bare_columns(projection),
                bare_columns(order_by.iter().map(|k| &k.expr)),
            ) {
                // Only columns (`SELECT key, value`): each row's values
                // read straight from it, no column of values per batch.
                out.rows.reserve(rows.len());
                for row in rows {
                    out.rows.push(OutRow {
                        key: row.key().clone(),
                        values: columns.iter().map(|c| row.column(*c)).collect(),
                        sort: sorts.iter().map(|c| row.column(*c)).collect(),
                    });
                }
                return Ok(());
            }
            let mut columns: Vec<std::vec::IntoIter<Value>> = projection
                .iter()
                .map(|e| eval_batch(e, rows, meter).map(Vec::into_iter))
                .collect::<Result<_, _>>()?;
            let mut sorts: Vec<std::vec::IntoIter<Value>> = order_by
                .iter()
                .map(|k| eval_batch(&k.expr, rows, meter).map(Vec::into_iter))
                .collect::<Result<_, _>>()?;
            // Each column holds one value per row: moved out, not cloned.
            let mut next =
                |column: &mut std::vec::IntoIter<Value>| column.next().expect("one value per row");
            out.rows.reserve(rows.len());
            for row in rows {
                out.rows.push(OutRow {
                    key: row.key().clone(),
                    values: columns.iter_mut().map(&mut next).collect(),
                    sort: sorts.iter_mut().map(&mut next).collect(),
                });
            }
        }
        Shape::Aggregate {
            group_by,
            aggregates,
            ..
        } => {
            let args: Vec<Vec<Vec<Value>>> = aggregates
                .iter()
                .map(|a| {
                    a.args
                        .iter()
                        .map(|e| eval_batch(e, rows, meter))
                        .collect::<Result<_, _>>()
                })
                .collect::<Result<_, _>>()?;
            let init = || {
                aggregates
                    .iter()
                    .map(|a| a.function.init())
                    .collect::<Result<Vec<_>, _>>()
            };
            if group_by.is_empty() {
                // One group: every row updates it, no per-row bookkeeping.
                let states = match out.groups.entry(Vec::new()) {
                    Slot::Occupied(slot) => slot.into_mut(),
                    Slot::Vacant(slot) => slot.insert(init()?),
                };
                for (a, aggregate) in aggregates.iter().enumerate() {
                    aggregate
                        .function
                        .update(&mut states[a], &args[a], rows.len())?;
                }
                return Ok(());
            }
            let keys: Vec<Vec<Value>> = group_by
                .iter()
                .map(|e| eval_batch(e, rows, meter))
                .collect::<Result<_, _>>()?;
            // Rows of each group, so each aggregate is updated once per group per batch.
            let mut members: HashMap<Vec<Value>, Vec<usize>> = HashMap::new();
            for i in 0..rows.len() {
                let key: Vec<Value> = keys.iter().map(|c| c[i].clone()).collect();
                members.entry(key).or_default().push(i);
            }
            for (key, indexes) in members {
                let states = match out.groups.entry(key) {
                    Slot::Occupied(slot) => slot.into_mut(),
                    Slot::Vacant(slot) => slot.insert(init()?),
                };
                for (a, aggregate) in aggregates.iter().enumerate() {
                    let gathered: Vec<Vec<Value>> = args[a]
                        .iter()
                        .map(|column| indexes.iter().map(|&i| column[i].clone()).collect())
                        .collect();
                    aggregate
                        .function
                        .update(&mut states[a], &gathered, indexes.len())?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inc(s: &str) -> Bound<String> {
        Bound::Included(s.to_string())
    }

    fn exc(s: &str) -> Bound<String> {
        Bound::Excluded(s.to_string())
    }

    #[test]
    fn an_ascending_scan_resumes_after_the_last_key_inside_its_range() {
        assert_eq!(lower_bound(&inc("b"), None), Bound::Included("b"));
        assert_eq!(lower_bound(&inc("b"), Some("a")), Bound::Included("b"));
        assert_eq!(lower_bound(&inc("b"), Some("b")), Bound::Excluded("b"));
        assert_eq!(lower_bound(&exc("b"), Some("b")), Bound::Excluded("b"));
        assert_eq!(lower_bound(&inc("b"), Some("c")), Bound::Excluded("c"));
        assert_eq!(
            lower_bound(&Bound::Unbounded, Some("c")),
            Bound::Excluded("c")
        );
        assert!(past_end("d", &exc("d")) && past_end("d", &inc("d")));
        assert!(!past_end("c", &inc("d")) && !past_end("z", &Bound::Unbounded));
    }

    #[test]
    fn a_descending_scan_resumes_before_the_last_key_inside_its_range() {
        assert_eq!(upper_bound_before(&inc("m"), None), Bound::Included("m"));
        assert_eq!(
            upper_bound_before(&inc("m"), Some("n")),
            Bound::Included("m")
        );
        assert_eq!(
            upper_bound_before(&inc("m"), Some("m")),
            Bound::Excluded("m")
        );
        assert_eq!(
            upper_bound_before(&exc("m"), Some("m")),
            Bound::Excluded("m")
        );
        assert_eq!(
            upper_bound_before(&inc("m"), Some("k")),
            Bound::Excluded("k")
        );
        assert_eq!(
            upper_bound_before(&Bound::Unbounded, Some("k")),
            Bound::Excluded("k")
        );
        assert!(before_start("b", &inc("b")) && before_start("a", &exc("b")));
        assert!(!before_start("c", &inc("b")) && !before_start("", &Bound::Unbounded));
    }
}
