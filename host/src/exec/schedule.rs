//! Scheduling a query's work: each partition page on a query thread (never
//! on a tokio worker, so requests are answered while pages run), admitted
//! by its fragment's background pool, except tiny pages that read only keys
//! and metadata (see [`INLINE_VISITS`]); the work between pages (sorts,
//! merges, finishes, which may call plugins) on the query threads; and the
//! budgets counted as the query goes: time, records visited, bytes held.

use std::sync::Arc;
use std::time::Instant;

use ebb_query::{Plan, Shape, Value};

use super::error::{self, QueryError};
use super::join::JoinStage;
use super::page::{OutRow, PageBudget, PageOutput, run_page};
use super::scan::Scan;
use super::{QueryBudgets, QueryStats};
use crate::fragment::Fragment;
use crate::fragment::partition::PartitionSnapshot;
use crate::plugin::PluginRuntime;

/// Pages of at most this many records run on the task that asks for them,
/// still admitted by the fragment's pool, when the plan is a row query that
/// calls no function (so no plugin and no unsandboxed native) and reads no
/// value: such a page costs a few microseconds (no I/O, no sandbox, no
/// value bytes), less than handing it to a query thread and back, which
/// dominated a key-ordered `LIMIT` query's time.
pub(crate) const INLINE_VISITS: usize = 64;

/// A running query's pages and budgets.
pub(crate) struct Schedule<'a> {
    fragments: &'a [Fragment],
    runtime: &'a Arc<PluginRuntime>,
    /// What a page runs: the query's plan, or for a join the scan of its
    /// first table ([`Plan::scan_plan`]).
    plan: Arc<Plan>,
    /// A join's lookup side, which turns each page of the scan into the
    /// query's rows.
    join: Option<Arc<JoinStage<'a>>>,
    /// A row query that calls no function and reads no value: its small
    /// pages run inline.
    light: bool,
    budgets: QueryBudgets,
    snapshot_ms: u64,
    started: Instant,
    /// Records visited and pages run so far.
    pub stats: QueryStats,
    /// Bytes the query holds: its parameters and the rows and group keys it
    /// buffers between pages (`max_query_bytes`).
    held: usize,
}

/// Memory a held value costs: its slot and its text or blob bytes.
pub(crate) fn value_bytes(value: &Value) -> usize {
    std::mem::size_of::<Value>() + ebb_query::meter::heap_bytes(value)
}

/// Memory held values cost.
pub(crate) fn values_bytes(values: &[Value]) -> usize {
    values.iter().map(value_bytes).sum()
}

/// Memory a buffered row costs (its key is shared with the record).
pub(crate) fn out_row_bytes(row: &OutRow) -> usize {
    std::mem::size_of::<OutRow>() + values_bytes(&row.values) + values_bytes(&row.sort)
}

/// One page to run over a partition's snapshot.
pub(crate) struct PageInput {
    pub plan: Arc<Plan>,
    pub snapshot: PartitionSnapshot,
    pub fragment: u32,
    pub resume_after: Option<Arc<str>>,
    pub budget: PageBudget,
    pub snapshot_ms: u64,
}

/// Run `input` on a query thread (never a tokio worker), admitted by
/// `pool`, its fragment's background pool: shed with `Overloaded` when the
/// pool is full.
pub(crate) async fn run_admitted(
    pool: &Fragment,
    runtime: &PluginRuntime,
    input: PageInput,
) -> Result<PageOutput, QueryError> {
    let permit = pool.admit_background()?;
    runtime
        .run_blocking(move || {
            let _admitted = permit;
            run_page(
                &input.plan,
                &input.snapshot,
                input.fragment,
                input.resume_after.as_deref(),
                input.budget,
                input.snapshot_ms,
            )
        })
        .await
        .map_err(error::thread_failed)?
        .map_err(error::page)
}

impl<'a> Schedule<'a> {
    /// The schedule of `plan` over `fragments` (and, in a cluster, the
    /// remote scans of partitions other members hold), reading the
    /// partitions as of `snapshot_ms`, started now.
    pub(crate) fn new(
        fragments: &'a [Fragment],
        runtime: &'a Arc<PluginRuntime>,
        plan: Arc<Plan>,
        join: Option<JoinStage<'a>>,
        budgets: QueryBudgets,
        snapshot_ms: u64,
    ) -> Self {
        let plan = if plan.join.is_some() {
            Arc::new(plan.scan_plan())
        } else {
            plan
        };
        let light = matches!(plan.shape, Shape::Rows { .. })
            && !plan.calls_functions()
            && !plan.reads_value();
        Self {
            fragments,
            runtime,
            plan,
            join: join.map(Arc::new),
            light,
            budgets,
            snapshot_ms,
            started: Instant::now(),
            stats: QueryStats::default(),
            held: 0,
        }
    }

    /// The budgets.
    pub(crate) fn budgets(&self) -> &QueryBudgets {
        &self.budgets
    }

    /// When the query started.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// The query threads, for work that runs while pages go on.
    pub(crate) fn runtime(&self) -> Arc<PluginRuntime> {
        self.runtime.clone()
    }

    /// Count `bytes` more held by the query, failing past `max_query_bytes`.
    pub(crate) fn hold(&mut self, bytes: usize) -> Result<(), QueryError> {
        self.held = self.held.saturating_add(bytes);
        if self.held > self.budgets.max_query_bytes {
            return Err(error::query_bytes(self.budgets.max_query_bytes));
        }
        Ok(())
    }

    /// Count `bytes` no longer held.
    pub(crate) fn release(&mut self, bytes: usize) {
        self.held = self.held.saturating_sub(bytes);
    }

    /// Bytes the query may still hold.
    pub(crate) fn room(&self) -> usize {
        self.budgets.max_query_bytes.saturating_sub(self.held)
    }

    /// Fail once the query ran past its timeout.
    pub(crate) fn check_deadline(&self) -> Result<(), QueryError> {
        if self.started.elapsed() > self.budgets.timeout {
            return Err(QueryError::Timeout(self.budgets.timeout));
        }
        Ok(())
    }

    /// When the query must end (its timeout).
    pub(crate) fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.started + self.budgets.timeout)
    }

    /// The next page of `scans[i]`: on a query thread, admitted by the
    /// fragment's background pool, or asked of the member that pinned a
    /// remote scan. The future borrows nothing of the schedule, so pages
    /// run while it records others.
    pub(crate) fn page_job(
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
        let inline = self.light && budget.visit <= INLINE_VISITS;
        let remote = scan
            .remote
            .as_ref()
            .map(|remote| remote.next_page(resume.clone(), budget, self.deadline()));
        let join = self.join.clone();
        let page = self.scan_page(remote, snapshot, plan, fragment, resume, budget, inline);
        async move {
            let page = page.await?;
            let page = match join {
                Some(join) => join.join(page).await?,
                None => page,
            };
            Ok((i, page))
        }
    }

    /// One page of a partition's scan, before any join: from the member
    /// that pinned a remote scan, inline, or on a query thread.
    #[allow(clippy::too_many_arguments)]
    fn scan_page<F>(
        &self,
        remote: Option<F>,
        snapshot: Option<PartitionSnapshot>,
        plan: Arc<Plan>,
        fragment: u32,
        resume: Option<Arc<str>>,
        budget: PageBudget,
        inline: bool,
    ) -> impl Future<Output = Result<PageOutput, QueryError>> + Send + use<'a, F>
    where
        F: Future<Output = Result<PageOutput, QueryError>> + Send,
    {
        let snapshot_ms = self.snapshot_ms;
        let (fragments, runtime) = (self.fragments, self.runtime);
        async move {
            if let Some(remote) = remote {
                return remote.await;
            }
            let Some(snapshot) = snapshot else {
                return Ok(PageOutput {
                    done: true,
                    ..PageOutput::default()
                });
            };
            if inline {
                let _admitted = fragments[fragment as usize].admit_background()?;
                return run_page(
                    &plan,
                    &snapshot,
                    fragment,
                    resume.as_deref(),
                    budget,
                    snapshot_ms,
                )
                .map_err(error::page);
            }
            let input = PageInput {
                plan,
                snapshot,
                fragment,
                resume_after: resume,
                budget,
                snapshot_ms,
            };
            run_admitted(&fragments[fragment as usize], runtime, input).await
        }
    }

    /// Account for a page of `scan`: where the next one starts, how many
    /// records it may visit, and the scanned-records budget.
    pub(crate) fn record(&mut self, scan: &mut Scan, page: &PageOutput) -> Result<(), QueryError> {
        scan.resume_after = page.resume_after.clone();
        scan.done = page.done;
        if page.done
            && let Some(remote) = &mut scan.remote
        {
            remote.finished();
        }
        scan.budget = scan
            .budget
            .saturating_mul(2)
            .min(self.budgets.max_page_visit_budget)
            .max(self.budgets.page_visit_budget);
        self.stats.pages += 1;
        self.stats.scanned += page.visited as u64;
        if self.stats.scanned > self.budgets.max_scanned_records {
            return Err(error::scanned_records(self.budgets.max_scanned_records));
        }
        Ok(())
    }

    /// Fetch one page for each of `scans[indexes]` concurrently.
    pub(crate) async fn fetch(
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

    /// Run `work` (sorting, merging or finishing a query's rows, which may
    /// call plugins) on a query thread, never on a tokio worker.
    pub(crate) async fn off_worker<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, QueryError> + Send + 'static,
    ) -> Result<T, QueryError> {
        self.runtime
            .run_blocking(work)
            .await
            .map_err(error::thread_failed)?
    }
}
