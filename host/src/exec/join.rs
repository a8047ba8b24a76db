//! Key lookup joins (`FROM a [LEFT] JOIN b ON b.key = <expression over
//! a>`): each page of `a` comes back projecting its records and the keys to
//! look up ([`Plan::scan_plan`]); this reads those keys of `b` (from this
//! member's snapshots of `b`'s partitions, or from the leaders of the
//! fragments other members hold, concurrently), then evaluates the query's
//! filter and shape over the joined rows on a query thread, so the page
//! leaves here as if it had been evaluated over one table.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

use ebb_query::{Column, Meter, Plan, RECORD_COLUMNS, RowSource, Value, eval_batch};

use super::error::{self, QueryError};
use super::page::{BATCH, KeyedRow, OutRow, PageOutput, evaluate_kept};
use crate::cluster::Cluster;
use crate::fragment::Fragment;
use crate::fragment::partition::PartitionSnapshot;
use crate::names::{TableName, validate_key};
use crate::plugin::PluginRuntime;

/// A record of `b` as the joined row reads it, in [`RECORD_COLUMNS`] order.
type Found = [Value; 5];

/// Where the records of `b` in one fragment are read.
enum Source {
    /// This member's snapshot of the partition (`None`: no records).
    Local(Option<PartitionSnapshot>),
    /// The fragment's leader: this member holds no replica.
    Remote,
}

/// The lookup side of a join, opened with the query.
pub(crate) struct JoinStage<'a> {
    /// The query's plan, evaluated over the joined rows.
    plan: Arc<Plan>,
    /// `b`, or `None` when its name cannot be a table (it has no records).
    table: Option<TableName>,
    /// Per fragment, where `b`'s records are.
    sources: Arc<Vec<Source>>,
    fragment_of: &'a (dyn Fn(&str) -> u32 + Sync),
    cluster: Option<Arc<Cluster>>,
    runtime: Arc<PluginRuntime>,
    snapshot_ms: u64,
    max_page_bytes: usize,
}

/// The key a row of `a` looks up, as SQLite compares a value with `b.key`
/// (text affinity): text is itself, a number its text, and NULL, bytes or
/// anything that cannot be a key matches nothing.
fn lookup_key(value: &Value) -> Option<Arc<str>> {
    let key: Arc<str> = match value {
        Value::Text(t) => t.clone(),
        Value::Int(_) | Value::Float(_) | Value::Bool(_) => Arc::from(value.render()),
        Value::Null | Value::Bytes(_) => return None,
    };
    validate_key(&key).ok()?;
    Some(key)
}

impl<'a> JoinStage<'a> {
    /// Open the lookup side of `plan`'s join at `snapshot_ms`: a snapshot
    /// of `b`'s partition in every fragment this member holds.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        plan: Arc<Plan>,
        fragments: &[Fragment],
        fragment_of: &'a (dyn Fn(&str) -> u32 + Sync),
        cluster: Option<&Arc<Cluster>>,
        runtime: Arc<PluginRuntime>,
        snapshot_ms: u64,
        max_page_bytes: usize,
    ) -> Option<Self> {
        let join = plan.join.as_ref()?;
        let table = TableName::new(&join.table).ok();
        let sources = fragments
            .iter()
            .enumerate()
            .map(|(id, fragment)| match cluster {
                Some(cluster) if !cluster.holds(id as u32) => Source::Remote,
                _ => Source::Local(
                    table
                        .as_ref()
                        .and_then(|t| fragment.state().snapshot(t, snapshot_ms)),
                ),
            })
            .collect();
        Some(JoinStage {
            plan,
            table,
            sources: Arc::new(sources),
            fragment_of,
            cluster: cluster.cloned(),
            runtime,
            snapshot_ms,
            max_page_bytes,
        })
    }

    /// `page` of `a` (rows of [`Plan::scan_plan`]) joined: `b`'s records
    /// read, then the query's filter and its projection or partial
    /// aggregates over the joined rows. The page's position and counts
    /// are kept.
    pub(crate) fn join(
        &self,
        mut page: PageOutput,
    ) -> impl Future<Output = Result<PageOutput, QueryError>> + Send + use<'a> {
        let keys: Vec<Option<(Arc<str>, u32)>> = page
            .rows
            .iter()
            .map(|row| {
                let key = lookup_key(row.values.get(RECORD_COLUMNS.len())?)?;
                let fragment = (self.fragment_of)(&key);
                Some((key, fragment))
            })
            .collect();
        let mut remote: Vec<(Arc<str>, u32)> = keys
            .iter()
            .flatten()
            .filter(|(_, fragment)| {
                matches!(self.sources.get(*fragment as usize), Some(Source::Remote))
            })
            .cloned()
            .collect();
        remote.sort();
        remote.dedup();
        let (plan, sources, table, cluster, runtime) = (
            self.plan.clone(),
            self.sources.clone(),
            self.table.clone(),
            self.cluster.clone(),
            self.runtime.clone(),
        );
        let (snapshot_ms, max_page_bytes) = (self.snapshot_ms, self.max_page_bytes);
        async move {
            let mut fetched: HashMap<Arc<str>, Option<Found>> = HashMap::new();
            if let (Some(cluster), Some(table)) = (&cluster, &table) {
                let reads = remote.iter().map(|(key, fragment)| async move {
                    let found = cluster.get_remote(*fragment, table, key).await?;
                    Ok::<_, QueryError>((
                        key.clone(),
                        found.map(|(value, version, expires)| {
                            [
                                Value::Text(key.clone()),
                                Value::Bytes(value),
                                Value::Int(version.hlc_ms as i64),
                                expires.map_or(Value::Null, |at| Value::Int(at as i64)),
                                Value::Int(i64::from(*fragment)),
                            ]
                        }),
                    ))
                });
                fetched.extend(futures::future::try_join_all(reads).await?);
            }
            let rows = std::mem::take(&mut page.rows);
            let work = move || {
                let joined: Vec<JoinedRow> = rows
                    .into_iter()
                    .zip(keys)
                    .map(|(row, key)| {
                        let found = key.and_then(|(key, fragment)| {
                            match sources.get(fragment as usize)? {
                                Source::Local(snapshot) => {
                                    read_local(snapshot.as_ref()?, &key, fragment, snapshot_ms)
                                }
                                Source::Remote => fetched.get(&key).cloned().flatten(),
                            }
                        });
                        JoinedRow { row, found }
                    })
                    .collect();
                evaluate(&plan, joined, max_page_bytes)
            };
            let evaluated = runtime
                .run_blocking(work)
                .await
                .map_err(error::thread_failed)??;
            page.rows = evaluated.rows;
            page.groups = evaluated.groups;
            Ok(page)
        }
    }
}

/// The visible record at `key` in `snapshot`, if any.
fn read_local(
    snapshot: &PartitionSnapshot,
    key: &str,
    fragment: u32,
    snapshot_ms: u64,
) -> Option<Found> {
    let entry = snapshot
        .range::<(Bound<&str>, Bound<&str>)>((Bound::Included(key), Bound::Included(key)))
        .next()?;
    let header = entry.header();
    if !header.is_visible_at(snapshot_ms) {
        return None;
    }
    Some([
        Value::text(key),
        Value::Bytes(entry.value_bytes_of(&header)),
        Value::Int(header.hlc_ms() as i64),
        header
            .expires_at_ms()
            .map_or(Value::Null, |at| Value::Int(at as i64)),
        Value::Int(i64::from(fragment)),
    ])
}

/// A row of `a` (as the scan plan projects it) and the record of `b` it
/// found, if any.
struct JoinedRow {
    row: OutRow,
    found: Option<Found>,
}

/// Where `column` sits in [`RECORD_COLUMNS`].
fn slot(column: Column) -> usize {
    RECORD_COLUMNS
        .iter()
        .position(|c| *c == column)
        .expect("every column is a record column")
}

impl RowSource for JoinedRow {
    fn column(&self, column: Column) -> Value {
        self.row.values[slot(column)].clone()
    }
    fn joined(&self, column: Column) -> Value {
        self.found
            .as_ref()
            .map_or(Value::Null, |found| found[slot(column)].clone())
    }
}

impl KeyedRow for JoinedRow {
    fn key(&self) -> &Arc<str> {
        &self.row.key
    }
}

/// Drop the rows an inner join found nothing for, then evaluate the
/// query's filter and shape, a batch at a time, into a page's output.
fn evaluate(
    plan: &Plan,
    mut rows: Vec<JoinedRow>,
    max_page_bytes: usize,
) -> Result<PageOutput, QueryError> {
    let outer = plan.join.as_ref().is_some_and(|j| j.outer);
    if !outer {
        rows.retain(|row| row.found.is_some());
    }
    let mut out = PageOutput::default();
    let mut meter = Meter::new(max_page_bytes);
    let mut batch: Vec<JoinedRow> = Vec::with_capacity(BATCH);
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        batch.clear();
        batch.extend(rows.by_ref().take(BATCH));
        if let Some(filter) = &plan.filter {
            let keep = eval_batch(filter, &batch, &mut meter).map_err(error::page)?;
            let mut keep = keep.iter();
            batch.retain(|_| keep.next().is_some_and(|k| k.truth() == Some(true)));
        }
        evaluate_kept(plan, &batch, &mut out, &mut meter).map_err(error::page)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use bytes::Bytes;

    #[test]
    fn lookup_keys_follow_sqlite_text_affinity() {
        assert_eq!(lookup_key(&Value::text("a")).as_deref(), Some("a"));
        assert_eq!(lookup_key(&Value::Int(10)).as_deref(), Some("10"));
        assert_eq!(lookup_key(&Value::Float(1.5)).as_deref(), Some("1.5"));
        assert_eq!(lookup_key(&Value::Float(2.0)).as_deref(), Some("2.0"));
        assert_eq!(lookup_key(&Value::Bool(true)).as_deref(), Some("1"));
        assert_eq!(lookup_key(&Value::Null), None);
        assert_eq!(lookup_key(&Value::Bytes(Bytes::from_static(b"a"))), None);
        assert_eq!(lookup_key(&Value::text("")), None, "not a key");
    }
}
