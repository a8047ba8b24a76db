//! Running a planned query: fan-out, page fetching, merging, budgets and
//! cursors.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use ebb_proto::query::v1 as pb;
use ebb_query::{
    AggState, Column, EvalError, Expr, Limits, Meter, OutputColumn, OverBudget, Plan, RowSource,
    Shape, SqlType, Value, eval_batch,
};
use futures::{FutureExt, StreamExt};
use tokio::sync::{mpsc, oneshot};

use super::convert::{from_proto, to_proto};
use super::cursor;
use super::merge_order::MergeOrder;
use super::page::{Groups, OutRow, PageBudget, PageOutput, run_page};
use super::{Consistency, QueryBudgets, QueryError, QueryOutput, QueryRequest, QueryStats};
use crate::Node;
use crate::clock::now_ms;
use crate::fragment::partition::PartitionSnapshot;
use crate::plugin::sql::HostFunctions;

/// Plan and run `request`, returning one page of results.
pub async fn execute(node: &Node, request: QueryRequest) -> Result<QueryOutput, QueryError> {
    let _admitted = node.inner.gate.admit().ok_or(crate::Error::ShuttingDown)?;
    let mut run = Run::prepare(node, request)?;
    let mut sink = Sink::Page {
        rows: Vec::new(),
        bytes: 0,
    };
    let cursor = run.run(&mut sink).await?;
    let Sink::Page { rows, .. } = sink else {
        unreachable!("page sink")
    };
    let mut stats = run.stats;
    stats.rows = rows.len() as u64;
    stats.elapsed_ms = run.started.elapsed().as_secs_f64() * 1000.0;
    Ok(QueryOutput {
        columns: run.columns.clone(),
        rows,
        cursor,
        stats,
    })
}

/// Plan `request` and stream every result row into `rows` (no paging).
/// `columns` receives the result columns before the first row.
pub async fn stream(
    node: &Node,
    request: QueryRequest,
    columns: oneshot::Sender<Vec<OutputColumn>>,
    rows: mpsc::Sender<Vec<Value>>,
) -> Result<QueryStats, QueryError> {
    let _admitted = node.inner.gate.admit().ok_or(crate::Error::ShuttingDown)?;
    let mut run = Run::prepare(node, request)?;
    let _ = columns.send(run.columns.clone());
    let mut sink = Sink::Stream { rows, sent: 0 };
    run.run(&mut sink).await?;
    let Sink::Stream { sent, .. } = sink else {
        unreachable!("stream sink")
    };
    let mut stats = run.stats;
    stats.rows = sent;
    stats.elapsed_ms = run.started.elapsed().as_secs_f64() * 1000.0;
    Ok(stats)
}

/// Where result rows go.
enum Sink {
    /// One response page (bounded by page size and result bytes).
    Page { rows: Vec<Vec<Value>>, bytes: usize },
    /// A stream of every row.
    Stream {
        rows: mpsc::Sender<Vec<Value>>,
        sent: u64,
    },
}

fn row_bytes(row: &[Value]) -> usize {
    row.iter()
        .map(|v| match v {
            Value::Text(t) => t.len() + 8,
            Value::Bytes(b) => b.len() * 4 / 3 + 16,
            _ => 8,
        })
        .sum()
}

impl Sink {
    /// Whether one more row fits in this response (streams always take more).
    fn has_room(
        &self,
        row: &[Value],
        page_size: usize,
        max_bytes: usize,
    ) -> Result<bool, QueryError> {
        match self {
            Sink::Stream { .. } => Ok(true),
            Sink::Page { rows, bytes } => {
                let size = row_bytes(row);
                if rows.is_empty() && size > max_bytes {
                    return Err(QueryError::Budget {
                        budget: "max_result_bytes",
                        limit: max_bytes as u64,
                        message: format!(
                            "one result row is {size} bytes, over the {max_bytes}-byte response budget (max_result_bytes); select fewer or smaller columns"
                        ),
                    });
                }
                Ok(rows.len() < page_size && bytes + size <= max_bytes)
            }
        }
    }

    async fn push(&mut self, row: Vec<Value>) -> Result<(), QueryError> {
        match self {
            Sink::Page { rows, bytes } => {
                *bytes += row_bytes(&row);
                rows.push(row);
            }
            Sink::Stream { rows, sent } => {
                rows.send(row)
                    .await
                    .map_err(|_| QueryError::InvalidRequest("the client went away".into()))?;
                *sent += 1;
            }
        }
        Ok(())
    }
}

/// One partition's scan state.
struct Scan {
    fragment: u32,
    snapshot: Option<PartitionSnapshot>,
    revision: u64,
    incarnation: u64,
    resume_after: Option<Arc<str>>,
    done: bool,
    buffer: VecDeque<OutRow>,
    /// Resume point for a continuation: the last key handed on (or the start).
    emitted_to: Option<Arc<str>>,
    /// Records the next page may visit: starts at the page visit budget and
    /// doubles with every page up to the maximum page visit budget.
    budget: usize,
}

struct GroupRow<'a> {
    keys: &'a [Value],
    results: &'a [Value],
}

impl RowSource for GroupRow<'_> {
    fn column(&self, _column: Column) -> Value {
        Value::Null
    }
    fn group_key(&self, i: usize) -> Value {
        self.keys[i].clone()
    }
    fn agg_result(&self, i: usize) -> Value {
        self.results[i].clone()
    }
}

struct Run<'a> {
    node: &'a Node,
    plan: Arc<Plan>,
    columns: Vec<OutputColumn>,
    sql: String,
    params: Vec<Value>,
    page_size: usize,
    consistency: Consistency,
    previous: Option<pb::Cursor>,
    budgets: QueryBudgets,
    snapshot_ms: u64,
    started: Instant,
    stats: QueryStats,
    /// Bytes the query holds: its parameters and the rows and group keys it
    /// buffers between pages (`max_query_bytes`).
    held: usize,
}

fn cmp_values(a: &[Value], b: &[Value], descending: &[bool]) -> Ordering {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let order = x.total_cmp(y);
        let order = if descending.get(i).copied().unwrap_or(false) {
            order.reverse()
        } else {
            order
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

impl<'a> Run<'a> {
    fn prepare(node: &'a Node, request: QueryRequest) -> Result<Self, QueryError> {
        let budgets = node.inner.config.query;
        let key = &node.inner.meta.cursor_key;
        let previous = request
            .cursor
            .as_deref()
            .map(|token| cursor::open(key, token))
            .transpose()?;
        let (sql, params, page_size, consistency) = match &previous {
            Some(previous) => {
                if let Some(sql) = &request.sql
                    && sql != &previous.sql
                {
                    return Err(cursor::InvalidCursor(
                        "it belongs to another query; send the cursor alone".into(),
                    )
                    .into());
                }
                let params = previous
                    .params
                    .iter()
                    .map(from_proto)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| cursor::InvalidCursor(e).into_query())?;
                let consistency = request.consistency.unwrap_or(if previous.relaxed {
                    Consistency::Relaxed
                } else {
                    Consistency::Guarded
                });
                (
                    previous.sql.clone(),
                    params,
                    previous.page_size as usize,
                    consistency,
                )
            }
            None => {
                let sql = request.sql.clone().ok_or_else(|| {
                    QueryError::InvalidRequest("send \"sql\" (or a \"cursor\" to continue)".into())
                })?;
                let page_size = request.page_size.unwrap_or(budgets.default_page_size);
                (
                    sql,
                    request.params.clone(),
                    page_size,
                    request.consistency.unwrap_or_default(),
                )
            }
        };
        if page_size == 0 || page_size > budgets.max_page_size {
            return Err(QueryError::InvalidRequest(format!(
                "page_size must be 1 to {}",
                budgets.max_page_size
            )));
        }
        let functions = HostFunctions::new(node.inner.plugins.clone(), node.inner.natives.clone());
        let plan = ebb_query::plan(&sql, &params, &functions, &Limits::default())?;
        if consistency == Consistency::Relaxed && !plan.explain && !key_ordered(&plan) {
            return Err(QueryError::InvalidRequest(
                "\"consistency\": \"relaxed\" continues only row queries in key order (no ORDER BY, or ORDER BY key [DESC] first): a record whose ORDER BY values or group change between pages could be returned twice or skipped; use the default guarded consistency, or order by key".into(),
            ));
        }
        let held = params.iter().map(value_bytes).sum();
        let columns = if plan.explain {
            vec![OutputColumn {
                name: "plan".into(),
                sql_type: SqlType::Text,
            }]
        } else {
            plan.columns.clone()
        };
        let run = Run {
            node,
            plan: Arc::new(plan),
            columns,
            sql,
            params,
            page_size,
            consistency,
            previous,
            budgets,
            snapshot_ms: now_ms(),
            started: Instant::now(),
            stats: QueryStats::default(),
            held: 0,
        };
        run.hold_more(held)
    }

    /// Count `bytes` more held by the query, failing past `max_query_bytes`.
    fn hold_more(mut self, bytes: usize) -> Result<Self, QueryError> {
        self.hold(bytes)?;
        Ok(self)
    }

    fn hold(&mut self, bytes: usize) -> Result<(), QueryError> {
        self.held = self.held.saturating_add(bytes);
        if self.held > self.budgets.max_query_bytes {
            return Err(query_bytes_error(self.budgets.max_query_bytes));
        }
        Ok(())
    }

    fn release(&mut self, bytes: usize) {
        self.held = self.held.saturating_sub(bytes);
    }

    /// The fragments whose partitions can hold matching keys.
    fn fragments(&self) -> Vec<u32> {
        let router = &self.node.inner.router;
        match self.plan.ranges.points() {
            Some(points) => points
                .iter()
                .map(|key| router.fragment_of(key))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
            None if self.plan.ranges.0.is_empty() => Vec::new(),
            None => (0..router.fragments()).collect(),
        }
    }

    fn snapshot(&self, fragment: u32) -> Result<Option<PartitionSnapshot>, QueryError> {
        let table = match crate::names::TableName::new(&self.plan.table) {
            Ok(table) => table,
            // A name that cannot be a table has no records.
            Err(_) => return Ok(None),
        };
        Ok(self.node.inner.fragments[fragment as usize]
            .state()
            .snapshot(&table, self.snapshot_ms))
    }

    /// Open every partition's scan, checking guarded continuations.
    fn open_scans(&self) -> Result<Vec<Scan>, QueryError> {
        let resumes: HashMap<u32, &pb::PartitionCursor> = self
            .previous
            .iter()
            .flat_map(|c| c.partitions.iter())
            .map(|p| (p.fragment, p))
            .collect();
        let fragments = self.fragments();
        let first_budget = self.first_page_budget();
        if fragments.iter().any(|f| *f >= self.node.fragment_count()) {
            return Err(cursor::InvalidCursor(
                "it names a fragment this node does not have".into(),
            )
            .into());
        }
        let mut scans = Vec::new();
        for fragment in fragments {
            let snapshot = self.snapshot(fragment)?;
            let (revision, incarnation) = snapshot
                .as_ref()
                .map_or((0, 0), |s| (s.revision, s.incarnation));
            let mut scan = Scan {
                fragment,
                snapshot,
                revision,
                incarnation,
                resume_after: None,
                done: false,
                buffer: VecDeque::new(),
                emitted_to: None,
                budget: first_budget,
            };
            if let Some(previous) = resumes.get(&fragment) {
                if self.consistency == Consistency::Guarded
                    && (previous.revision, previous.incarnation) != (revision, incarnation)
                {
                    return Err(QueryError::QueryChanged { fragment });
                }
                scan.resume_after = previous.resume_after.as_deref().map(Arc::from);
                scan.emitted_to = scan.resume_after.clone();
                scan.done = previous.done;
            } else if self.previous.is_some() && self.is_merge() {
                // A continuation only revisits the partitions it recorded.
                scan.done = true;
            }
            if scan.snapshot.is_none() {
                scan.done = true;
            }
            scans.push(scan);
        }
        if self.is_merge() {
            // Every partition continues after the last key returned, not
            // after its own last one. Unchanged data has no unreturned key
            // below that position, so guarded pages are the same; a relaxed
            // continuation skips keys written behind it since, rather than
            // returning them out of key order.
            let position = scans.iter().filter_map(|s| s.resume_after.clone()).max();
            for scan in &mut scans {
                scan.resume_after.clone_from(&position);
                scan.emitted_to.clone_from(&position);
            }
        }
        Ok(scans)
    }

    /// Records a partition's first page visits: the page visit budget, or
    /// fewer when a key-order query cannot use more rows from one partition
    /// (its LIMIT, or the rows one response holds), so a small LIMIT does
    /// not evaluate a full page in every partition.
    fn first_page_budget(&self) -> usize {
        let full = self.budgets.page_visit_budget;
        if !self.is_merge() {
            return full;
        }
        let emitted = self.previous.as_ref().map_or(0, |c| c.emitted);
        let skip = if self.previous.is_some() {
            0
        } else {
            self.plan.offset
        };
        let response = skip.saturating_add(self.page_size as u64);
        let wanted = match self.plan.limit {
            Some(limit) => response.min(skip.saturating_add(limit.saturating_sub(emitted))),
            None => response,
        };
        usize::try_from(wanted).unwrap_or(usize::MAX).clamp(1, full)
    }

    fn is_merge(&self) -> bool {
        matches!(self.plan.shape, Shape::Rows { .. }) && self.plan.order_by.is_empty()
    }

    fn check_deadline(&self) -> Result<(), QueryError> {
        if self.started.elapsed() > self.budgets.timeout {
            return Err(QueryError::Timeout(self.budgets.timeout));
        }
        Ok(())
    }

    /// The next page of `scans[i]`, on a query thread (never on a tokio
    /// worker, so requests are answered while pages run), admitted by the
    /// fragment's background pool.
    fn page_job(
        &self,
        scans: &[Scan],
        i: usize,
    ) -> impl Future<Output = Result<(usize, PageOutput), QueryError>> + Send + use<'a> {
        let scan = &scans[i];
        let plan = self.plan.clone();
        let snapshot = scan.snapshot.clone();
        let resume = scan.resume_after.clone();
        let fragment = scan.fragment;
        let budget = PageBudget {
            visit: scan.budget,
            max_bytes: self.budgets.max_page_bytes,
        };
        let snapshot_ms = self.snapshot_ms;
        let node = self.node;
        async move {
            let Some(snapshot) = snapshot else {
                return Ok((
                    i,
                    PageOutput {
                        done: true,
                        ..PageOutput::default()
                    },
                ));
            };
            let page = move || {
                run_page(
                    &plan,
                    &snapshot,
                    fragment,
                    resume.as_deref(),
                    budget,
                    snapshot_ms,
                )
            };
            let permit = node.inner.fragments[fragment as usize]
                .admit_background()
                .map_err(crate::Error::from)?;
            let page = node
                .inner
                .plugins
                .runtime()
                .run_blocking(move || {
                    let _admitted = permit;
                    page()
                })
                .await
                .map_err(|_| crate::Error::Interrupted { fragment })?
                .map_err(page_error)?;
            Ok((i, page))
        }
    }

    /// Account for a page of `scan`: where the next one starts, how many
    /// records it may visit, and the scanned-records budget.
    fn record(&mut self, scan: &mut Scan, page: &PageOutput) -> Result<(), QueryError> {
        scan.resume_after = page.resume_after.clone();
        scan.done = page.done;
        scan.budget = scan
            .budget
            .saturating_mul(2)
            .min(self.budgets.max_page_visit_budget)
            .max(self.budgets.page_visit_budget);
        self.stats.pages += 1;
        self.stats.scanned += page.visited as u64;
        if self.stats.scanned > self.budgets.max_scanned_records {
            return Err(QueryError::Budget {
                budget: "max_scanned_records",
                limit: self.budgets.max_scanned_records,
                message: format!(
                    "the query visited more than {} records (max_scanned_records); narrow the key range or the WHERE",
                    self.budgets.max_scanned_records
                ),
            });
        }
        Ok(())
    }

    /// Fetch one page for each of `scans[indexes]` concurrently.
    async fn fetch(
        &mut self,
        scans: &mut [Scan],
        indexes: &[usize],
    ) -> Result<Vec<(usize, PageOutput)>, QueryError> {
        self.check_deadline()?;
        let jobs: Vec<_> = indexes.iter().map(|&i| self.page_job(scans, i)).collect();
        let pages = futures::future::try_join_all(jobs).await?;
        for (i, page) in &pages {
            self.record(&mut scans[*i], page)?;
        }
        Ok(pages)
    }

    async fn run(&mut self, sink: &mut Sink) -> Result<Option<String>, QueryError> {
        if self.plan.explain {
            let fragments = self.fragments();
            let described = if fragments.len() as u32 == self.node.fragment_count() {
                format!("all {}", fragments.len())
            } else {
                format!("{fragments:?} (pruned by key)")
            };
            for line in self.plan.explain_lines(&described) {
                sink.push(vec![Value::text(line)]).await?;
            }
            return Ok(None);
        }
        if self.is_merge() {
            self.run_merge(sink).await
        } else {
            self.run_buffered(sink).await
        }
    }

    fn seal(&self, scans: &[Scan], emitted: u64, last_key: Option<&str>) -> String {
        let partitions = scans
            .iter()
            .map(|scan| pb::PartitionCursor {
                fragment: scan.fragment,
                resume_after: scan.emitted_to.as_deref().map(str::to_string),
                revision: scan.revision,
                incarnation: scan.incarnation,
                done: scan.done && scan.buffer.is_empty(),
            })
            .collect();
        cursor::seal(
            &self.node.inner.meta.cursor_key,
            pb::Cursor {
                format: 0,
                sql: self.sql.clone(),
                params: self.params.iter().map(to_proto).collect(),
                page_size: self.page_size as u32,
                relaxed: self.consistency == Consistency::Relaxed,
                partitions,
                emitted,
                last_key: last_key.map(str::to_string),
            },
        )
    }

    /// Row queries in key order: a k-way merge of the partitions' pages.
    async fn run_merge(&mut self, sink: &mut Sink) -> Result<Option<String>, QueryError> {
        let mut scans = self.open_scans()?;
        let emitted_before = self.previous.as_ref().map_or(0, |c| c.emitted);
        let mut to_skip = if self.previous.is_some() {
            0
        } else {
            self.plan.offset
        };
        let mut emitted = emitted_before;
        loop {
            loop {
                let needy: Vec<usize> = (0..scans.len())
                    .filter(|&i| scans[i].buffer.is_empty() && !scans[i].done)
                    .collect();
                if needy.is_empty() {
                    break;
                }
                for (i, page) in self.fetch(&mut scans, &needy).await? {
                    self.hold(page.rows.iter().map(out_row_bytes).sum())?;
                    scans[i].buffer.extend(page.rows);
                }
            }
            let next = (0..scans.len())
                .filter(|&i| !scans[i].buffer.is_empty())
                .min_by(|&a, &b| scans[a].buffer[0].key.cmp(&scans[b].buffer[0].key));
            let Some(i) = next else { return Ok(None) };
            if self.plan.limit.is_some_and(|limit| emitted >= limit) {
                return Ok(None);
            }
            if to_skip == 0
                && !sink.has_room(
                    &scans[i].buffer[0].values,
                    self.page_size,
                    self.budgets.max_result_bytes,
                )?
            {
                return Ok(Some(self.seal(&scans, emitted, None)));
            }
            let row = scans[i].buffer.pop_front().expect("non-empty buffer");
            self.release(out_row_bytes(&row));
            scans[i].emitted_to = Some(row.key.clone());
            if to_skip > 0 {
                to_skip -= 1;
                continue;
            }
            sink.push(row.values).await?;
            emitted += 1;
        }
    }

    /// Sorted row queries and aggregates: scan everything, then order and page.
    ///
    /// A continuation recomputes the result. Guarded, nothing changed, so it
    /// skips the rows already returned by count. Relaxed (key order only,
    /// see [`key_ordered`]), it starts after the last key returned, so no
    /// key is returned twice or skipped whatever was written between pages.
    async fn run_buffered(&mut self, sink: &mut Sink) -> Result<Option<String>, QueryError> {
        let mut scans = self.open_scans()?;
        for scan in &mut scans {
            scan.resume_after = None;
            scan.emitted_to = None;
            scan.done = scan.snapshot.is_none();
        }
        let emitted_before = self.previous.as_ref().map_or(0, |c| c.emitted);
        let rows: Vec<(Option<Arc<str>>, Vec<Value>)> = match &self.plan.shape {
            Shape::Rows { .. } => self
                .sorted_rows(&mut scans)
                .await?
                .into_iter()
                .map(|row| (Some(row.key), row.values))
                .collect(),
            Shape::Aggregate { .. } => self
                .aggregate_rows(&mut scans)
                .await?
                .into_iter()
                .map(|values| (None, values))
                .collect(),
        };
        let resume_key = match &self.previous {
            Some(previous) if self.consistency == Consistency::Relaxed => {
                previous.last_key.as_deref()
            }
            _ => None,
        };
        let (start, end) = match resume_key {
            Some(last) => {
                let descending = self.plan.order_by.first().is_some_and(|k| k.descending);
                let start = rows.partition_point(|(key, _)| {
                    let key = key.as_deref().unwrap_or_default();
                    if descending { key >= last } else { key <= last }
                });
                let remaining = self
                    .plan
                    .limit
                    .map_or(usize::MAX, |l| l.saturating_sub(emitted_before) as usize);
                (start, start.saturating_add(remaining).min(rows.len()))
            }
            None => {
                let offset = self.plan.offset as usize;
                let end = self
                    .plan
                    .limit
                    .map_or(rows.len(), |l| (offset + l as usize).min(rows.len()));
                ((offset + emitted_before as usize).min(end), end)
            }
        };
        let mut last_key: Option<Arc<str>> = None;
        let mut rows = rows;
        for (emitted, (key, row)) in (emitted_before..).zip(rows.drain(start..end)) {
            if !sink.has_room(&row, self.page_size, self.budgets.max_result_bytes)? {
                return Ok(Some(self.seal(&scans, emitted, last_key.as_deref())));
            }
            sink.push(row).await?;
            last_key = key;
        }
        Ok(None)
    }

    fn order_buffer_error(&self) -> QueryError {
        QueryError::Budget {
            budget: "max_order_buffer",
            limit: self.budgets.max_order_buffer as u64,
            message: format!(
                "ORDER BY needs more than {} rows in memory (max_order_buffer); add a LIMIT or narrow the WHERE",
                self.budgets.max_order_buffer
            ),
        }
    }

    /// Every matching row, in ORDER BY order (then key order). With a LIMIT,
    /// only the rows that can still be in it are kept between pages.
    async fn sorted_rows(&mut self, scans: &mut [Scan]) -> Result<Vec<OutRow>, QueryError> {
        let descending: Arc<[bool]> = self.plan.order_by.iter().map(|k| k.descending).collect();
        let keep = self
            .plan
            .limit
            .map(|l| self.plan.offset as usize + l as usize);
        let mut buffer: Vec<OutRow> = Vec::new();
        loop {
            let pending: Vec<usize> = (0..scans.len()).filter(|&i| !scans[i].done).collect();
            if pending.is_empty() {
                break;
            }
            for (_, page) in self.fetch(scans, &pending).await? {
                self.hold(page.rows.iter().map(out_row_bytes).sum())?;
                buffer.extend(page.rows);
            }
            if buffer.len() > self.budgets.max_order_buffer {
                match keep {
                    Some(keep) if keep <= self.budgets.max_order_buffer / 2 => {
                        let before: usize = buffer.iter().map(out_row_bytes).sum();
                        let order = descending.clone();
                        buffer = self
                            .off_worker(move || {
                                sort_rows(&mut buffer, &order);
                                buffer.truncate(keep);
                                Ok(buffer)
                            })
                            .await?;
                        self.release(before - buffer.iter().map(out_row_bytes).sum::<usize>());
                    }
                    _ => return Err(self.order_buffer_error()),
                }
            }
        }
        self.off_worker(move || {
            sort_rows(&mut buffer, &descending);
            Ok(buffer)
        })
        .await
    }

    /// Run `work` (sorting, merging or finishing a query's rows, which may
    /// call plugins) on a query thread, never on a tokio worker.
    async fn off_worker<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, QueryError> + Send + 'static,
    ) -> Result<T, QueryError> {
        self.node
            .inner
            .plugins
            .runtime()
            .run_blocking(work)
            .await
            .map_err(|e| QueryError::Internal(format!("query task failed: {e}")))?
    }

    async fn aggregate_rows(&mut self, scans: &mut [Scan]) -> Result<Vec<Vec<Value>>, QueryError> {
        let Shape::Aggregate {
            group_by,
            aggregates,
            ..
        } = &self.plan.shape
        else {
            unreachable!("aggregate shape");
        };
        let mut groups: Groups = HashMap::new();
        let only_count_star = group_by.is_empty()
            && self.plan.filter.is_none()
            && self.plan.ranges.is_all()
            && aggregates.iter().all(|a| {
                a.args.is_empty() && a.function.name() == "count" && !a.function.is_plugin()
            });
        if only_count_star {
            // COUNT(*) of a whole table: partitions know their visible counts.
            let total: usize = scans
                .iter()
                .filter_map(|s| s.snapshot.as_ref().map(|s| s.visible))
                .sum();
            let state = vec![Value::Int(total as i64)];
            groups.insert(Vec::new(), vec![state; aggregates.len()]);
            for scan in scans.iter_mut() {
                scan.done = true;
            }
        }
        // Pages are pipelined: each partition's next page starts as soon as
        // its previous one is done, so no core waits for the slowest page.
        // Their partial states merge in round order (see `MergeOrder`), so
        // the result does not depend on which page finished first; merges
        // run on the blocking pool (plugin merges call the sandbox) while
        // pages go on.
        let mut order = MergeOrder::new(scans.iter().map(|s| s.done));
        let mut in_flight = futures::stream::FuturesUnordered::new();
        for i in (0..scans.len()).filter(|&i| !scans[i].done) {
            in_flight.push(self.page_job(scans, i));
        }
        let mut due: Vec<Groups> = Vec::new();
        let mut merged = Some(groups);
        let mut merging = None;
        loop {
            if merging.is_none() && !due.is_empty() {
                let (plan, pages) = (self.plan.clone(), std::mem::take(&mut due));
                let mut groups = merged.take().expect("no merge running");
                let merge = move || {
                    let mut added = 0;
                    for page in pages {
                        added += merge_groups(&plan, &mut groups, page)?;
                    }
                    Ok::<_, QueryError>((groups, added))
                };
                let runtime = self.node.inner.plugins.runtime().clone();
                merging = Some(
                    async move { runtime.run_blocking(merge).await.map_err(|e| e.to_string()) }
                        .boxed(),
                );
            }
            tokio::select! {
                Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                    let (i, mut page) = done?;
                    self.record(&mut scans[i], &page)?;
                    if !scans[i].done {
                        self.check_deadline()?;
                        in_flight.push(self.page_job(scans, i));
                    }
                    due.extend(order.arrive(i, scans[i].done, std::mem::take(&mut page.groups)));
                }
                result = async { merging.as_mut().expect("checked").await }, if merging.is_some() => {
                    merging = None;
                    let (groups, added) = result
                        .map_err(|e| QueryError::Internal(format!("query task failed: {e}")))??;
                    self.hold(added)?;
                    if groups.len() > self.budgets.max_groups {
                        return Err(QueryError::Budget {
                            budget: "max_groups",
                            limit: self.budgets.max_groups as u64,
                            message: format!(
                                "GROUP BY produced more than {} groups (max_groups); group by something coarser or narrow the WHERE",
                                self.budgets.max_groups
                            ),
                        });
                    }
                    merged = Some(groups);
                }
                else => break,
            }
        }
        let groups = merged.expect("every merge finished");
        debug_assert!(order.is_drained(), "every page merged");
        let plan = self.plan.clone();
        let room = self.budgets.max_query_bytes.saturating_sub(self.held);
        let max_query_bytes = self.budgets.max_query_bytes;
        self.off_worker(move || {
            let mut meter = Meter::new(room);
            finish_groups(&plan, groups, &mut meter).map_err(|e| match e {
                EvalError::OverBudget(_) => query_bytes_error(max_query_bytes),
                EvalError::Function(f) => QueryError::Function(f),
            })
        })
        .await
    }
}

fn aggregates_of(plan: &Plan) -> &[ebb_query::AggregateCall] {
    match &plan.shape {
        Shape::Aggregate { aggregates, .. } => aggregates,
        Shape::Rows { .. } => &[],
    }
}

/// Merge one page's partial states into `groups`; answers the bytes of the
/// group keys it added.
fn merge_groups(plan: &Plan, groups: &mut Groups, page: Groups) -> Result<usize, QueryError> {
    let mut added = 0;
    let aggregates = aggregates_of(plan);
    for (key, states) in page {
        match groups.remove(&key) {
            Some(existing) => {
                let merged = existing
                    .into_iter()
                    .zip(states)
                    .zip(aggregates)
                    .map(|((left, right), a)| a.function.merge(left, right))
                    .collect::<Result<Vec<AggState>, _>>()?;
                groups.insert(key, merged);
            }
            None => {
                added += values_bytes(&key);
                groups.insert(key, states);
            }
        }
    }
    Ok(added)
}

/// Finish every group, apply HAVING, project and order the result rows,
/// charging the values built to `meter`.
fn finish_groups(
    plan: &Plan,
    mut groups: Groups,
    meter: &mut Meter,
) -> Result<Vec<Vec<Value>>, EvalError> {
    let Shape::Aggregate {
        group_by,
        aggregates,
        having,
        projection,
    } = &plan.shape
    else {
        unreachable!("aggregate shape");
    };
    if group_by.is_empty() && groups.is_empty() {
        let empty = aggregates
            .iter()
            .map(|a| a.function.init())
            .collect::<Result<Vec<_>, _>>()?;
        groups.insert(Vec::new(), empty);
    }
    let mut finished: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(groups.len());
    for (key, states) in groups {
        let results = states
            .into_iter()
            .zip(aggregates)
            .map(|(state, a)| a.function.finish(state))
            .collect::<Result<Vec<_>, _>>()?;
        finished.push((key, results));
    }
    finished.sort_by(|a, b| cmp_values(&a.0, &b.0, &[]));
    let group_rows: Vec<GroupRow> = finished
        .iter()
        .map(|(k, r)| GroupRow {
            keys: k,
            results: r,
        })
        .collect();
    let keep: Vec<bool> = match having {
        None => vec![true; group_rows.len()],
        Some(h) => eval_batch(h, &group_rows, meter)?
            .into_iter()
            .map(|v| v.truth() == Some(true))
            .collect(),
    };
    let kept: Vec<GroupRow> = group_rows
        .into_iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(g, _)| g)
        .collect();
    let columns: Vec<Vec<Value>> = projection
        .iter()
        .map(|e| eval_batch(e, &kept, meter))
        .collect::<Result<_, _>>()?;
    let sorts: Vec<Vec<Value>> = plan
        .order_by
        .iter()
        .map(|k| eval_batch(&k.expr, &kept, meter))
        .collect::<Result<_, _>>()?;
    let mut rows: Vec<(Vec<Value>, Vec<Value>)> = (0..kept.len())
        .map(|i| {
            (
                columns.iter().map(|c| c[i].clone()).collect(),
                sorts.iter().map(|c| c[i].clone()).collect(),
            )
        })
        .collect();
    let descending: Vec<bool> = plan.order_by.iter().map(|k| k.descending).collect();
    rows.sort_by(|a, b| cmp_values(&a.1, &b.1, &descending));
    Ok(rows.into_iter().map(|(values, _)| values).collect())
}

/// Whether continuations of `plan` can resume by key exactly: row queries
/// in key order (no ORDER BY, or the key first, ascending or descending;
/// keys are unique, so later sort keys never decide).
fn key_ordered(plan: &Plan) -> bool {
    matches!(plan.shape, Shape::Rows { .. })
        && plan
            .order_by
            .first()
            .is_none_or(|k| matches!(k.expr, Expr::Column(Column::Key)))
}

/// Memory a held value costs: its slot and its text or blob bytes.
fn value_bytes(value: &Value) -> usize {
    std::mem::size_of::<Value>() + ebb_query::meter::heap_bytes(value)
}

fn values_bytes(values: &[Value]) -> usize {
    values.iter().map(value_bytes).sum()
}

/// Memory a buffered row costs (its key is shared with the record).
fn out_row_bytes(row: &OutRow) -> usize {
    std::mem::size_of::<OutRow>() + values_bytes(&row.values) + values_bytes(&row.sort)
}

/// Order rows by their ORDER BY values, then by key.
fn sort_rows(rows: &mut [OutRow], descending: &[bool]) {
    rows.sort_by(|a, b| cmp_values(&a.sort, &b.sort, descending).then_with(|| a.key.cmp(&b.key)));
}

fn page_error(error: EvalError) -> QueryError {
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

fn query_bytes_error(limit: usize) -> QueryError {
    QueryError::Budget {
        budget: "max_query_bytes",
        limit: limit as u64,
        message: format!(
            "the query would hold more than {limit} bytes of parameters, rows and groups (max_query_bytes); add a LIMIT, select fewer or smaller columns, or raise --max-query-bytes"
        ),
    }
}

impl cursor::InvalidCursor {
    fn into_query(self) -> QueryError {
        QueryError::InvalidCursor(self)
    }
}
