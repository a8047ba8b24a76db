//! Scheduling a query's work: each partition page on a query thread (never
//! on a tokio worker, so requests are answered while pages run), admitted
//! by its fragment's background pool, except small pages that call only
//! built-ins (see [`super::inline`]); the work between pages (sorts,
//! merges, finishes, which may call plugins) on the query threads; and the
//! budgets counted as the query goes: time, records visited, bytes held.

use std::sync::Arc;
use std::time::Instant;

use ebb_query::{EvalError, Plan, Shape, Value};

use super::error::{self, QueryError};
use super::inline::{
    INLINE_BUILD_BYTES, INLINE_GROUPS, INLINE_VALUE_BYTES, INLINE_VISITS, calls_only_light_builtins,
};
use super::join::JoinStage;
use super::page::{OutRow, PageBudget, PageOutput, run_page};
use super::scan::Scan;
use super::{QueryBudgets, QueryStats};
use crate::fragment::Fragment;
use crate::fragment::partition::PartitionSnapshot;
use crate::fragment::pool::{Admission, Permit};
use crate::plugin::PluginRuntime;

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
    /// A row query that calls only built-ins, with few constant bytes:
    /// its small pages run inline.
    light: bool,
    /// The plan calls only built-ins (none that outgrows its arguments),
    /// with few constant bytes: its small pages (row queries) and the work
    /// between pages over at most [`INLINE_GROUPS`] groups run inline.
    builtins: bool,
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
        let builtins = calls_only_light_builtins(&plan);
        let light = builtins && matches!(plan.shape, Shape::Rows { .. });
        Self {
            fragments,
            runtime,
            plan,
            join: join.map(Arc::new),
            light,
            builtins,
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

    /// The next page of `scans[i]`: run now if it may run inline, else on
    /// a query thread, admitted by the fragment's background pool, or
    /// asked of the member that pinned a remote scan. The future borrows
    /// nothing of the schedule, so pages run while it records others.
    pub(crate) fn page_job(
        &self,
        scans: &[Scan],
        i: usize,
    ) -> impl Future<Output = Result<(usize, PageOutput), QueryError>> + Send + use<'a> {
        let inline = self.inline_page(&scans[i]);
        self.job(scans, i, inline)
    }

    /// The page of `scans[i]` as a future: `inline` when it already ran
    /// inline, else from the member that pinned a remote scan or on a
    /// query thread; then through the join, if any.
    fn job(
        &self,
        scans: &[Scan],
        i: usize,
        inline: Option<Result<PageOutput, QueryError>>,
    ) -> impl Future<Output = Result<(usize, PageOutput), QueryError>> + Send + use<'a> {
        let scan = &scans[i];
        let page = match inline {
            Some(page) => futures::future::Either::Left(std::future::ready(page)),
            None => {
                let resume = scan.resume_after.clone();
                let budget = PageBudget::new(scan.budget, self.budgets.max_page_bytes);
                let remote = scan
                    .remote
                    .as_ref()
                    .map(|remote| remote.next_page(resume.clone(), budget, self.deadline()));
                futures::future::Either::Right(self.scan_page(
                    remote,
                    scan.snapshot.clone(),
                    self.plan.clone(),
                    scan.fragment,
                    resume,
                    budget,
                ))
            }
        };
        let join = self.join.clone();
        async move {
            let page = page.await?;
            let page = match join {
                Some(join) => join.join(page).await?,
                None => page,
            };
            Ok((i, page))
        }
    }

    /// The next page of `scan` run here and now, when it may run inline
    /// (see [`INLINE_VISITS`]): `None` when it may not, or when it made no
    /// progress within the inline bounds (a large value first) or built
    /// more than they allow, so it runs on a query thread with the full
    /// budget instead.
    fn inline_page(&self, scan: &Scan) -> Option<Result<PageOutput, QueryError>> {
        if !self.light || scan.budget > INLINE_VISITS || scan.remote.is_some() {
            return None;
        }
        let snapshot = scan.snapshot.as_ref()?;
        let budget = PageBudget {
            visit: scan.budget,
            max_bytes: self.budgets.max_page_bytes.min(INLINE_BUILD_BYTES),
            max_value_bytes: INLINE_VALUE_BYTES,
        };
        let admitted = match self.fragments[scan.fragment as usize].admit_background() {
            Ok(admitted) => admitted,
            Err(shed) => return Some(Err(shed.into())),
        };
        let page = run_page(
            &self.plan,
            snapshot,
            scan.fragment,
            scan.resume_after.as_deref(),
            budget,
            self.snapshot_ms,
        );
        drop(admitted);
        match page {
            Ok(page) if page.visited == 0 && !page.done => None,
            Err(EvalError::OverBudget(_)) => None,
            page => Some(page.map_err(error::page)),
        }
    }

    /// One page of a partition's scan, before any join: from the member
    /// that pinned a remote scan, or on a query thread.
    fn scan_page<F>(
        &self,
        remote: Option<F>,
        snapshot: Option<PartitionSnapshot>,
        plan: Arc<Plan>,
        fragment: u32,
        resume: Option<Arc<str>>,
        budget: PageBudget,
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
        self.count_visits(1, page.visited)
    }

    /// Count `pages` more pages and `visited` more records visited, failing
    /// past `max_scanned_records`.
    pub(crate) fn count_visits(&mut self, pages: u64, visited: usize) -> Result<(), QueryError> {
        self.stats.pages += pages;
        self.stats.scanned += visited as u64;
        if self.stats.scanned > self.budgets.max_scanned_records {
            return Err(error::scanned_records(self.budgets.max_scanned_records));
        }
        Ok(())
    }

    /// Whether the key-order merge of `scans` may run inline, straight over
    /// their snapshots ([`super::merge_inline`]): the plan is light (as for
    /// inline pages), joins nothing, and every partition still to read is
    /// held here.
    pub(crate) fn merges_inline(&self, scans: &[Scan]) -> bool {
        self.light
            && self.join.is_none()
            && scans
                .iter()
                .all(|s| s.done || (s.remote.is_none() && s.snapshot.is_some()))
    }

    /// What pages run: the query's plan (without a join).
    pub(crate) fn page_plan(&self) -> &Plan {
        &self.plan
    }

    /// The time records are read as of.
    pub(crate) fn snapshot_ms(&self) -> u64 {
        self.snapshot_ms
    }

    /// A slot in `fragment`'s background pool, as a page takes, for a read
    /// on the caller's stack (the inline merge): the permit borrows the
    /// fragment's admission. Shed with `Overloaded` when the pool is full.
    pub(crate) fn admit(&self, fragment: u32) -> Result<Permit<&'a Admission>, QueryError> {
        let fragments: &'a [Fragment] = self.fragments;
        Ok(fragments[fragment as usize].admit_background_borrowed()?)
    }

    /// Fetch one page for each of `scans[indexes]` concurrently.
    pub(crate) async fn fetch(
        &mut self,
        scans: &mut [Scan],
        indexes: &[usize],
    ) -> Result<Vec<(usize, PageOutput)>, QueryError> {
        self.check_deadline()?;
        let mut pages = Vec::with_capacity(indexes.len());
        let mut jobs = Vec::new();
        for &i in indexes {
            let inline = self.inline_page(&scans[i]);
            match inline {
                // Nothing to await: no future, no join.
                Some(page) if self.join.is_none() => pages.push((i, page?)),
                inline => jobs.push(self.job(scans, i, inline)),
            }
        }
        if !jobs.is_empty() {
            pages.extend(futures::future::try_join_all(jobs).await?);
        }
        for (i, page) in &pages {
            self.record(&mut scans[*i], page)?;
        }
        Ok(pages)
    }

    /// Whether merging or finishing `groups` aggregate groups may run
    /// inline: the plan calls only built-ins and they are few.
    pub(crate) fn groups_inline(&self, groups: usize) -> bool {
        self.builtins && groups <= INLINE_GROUPS
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
