//! The executor's entry points: open a continuation's cursor, plan the
//! query (checking the plugin versions a continuation recorded), build the
//! physical plan, and run it into a response page or a stream.

use std::sync::Arc;

use ebb_proto::query::v1 as pb;
use ebb_query::{OutputColumn, SqlType, Value};
use tokio::sync::{mpsc, oneshot};

use super::context::ExecContext;
use super::cursor::{self, InvalidCursor, Sealer};
use super::error::{self, QueryError};
use super::join::JoinStage;
use super::physical::{self, Continuing, Paging, PhysicalPlan, Routing, Strategy};
use super::remote::OpenRequest;
use super::scan::{self, Scan};
use super::schedule::{Schedule, value_bytes};
use super::sink::Sink;
use super::{
    Consistency, QueryOutput, QueryRequest, QueryStats, aggregate, merge, plans, sort, versions,
};
use crate::clock::now_ms;
use crate::codec::{from_proto, to_proto};

/// Plan and run `request`, returning one page of results. The caller has
/// admitted the request (the node's operation gate).
pub(crate) async fn execute(
    ctx: &ExecContext<'_>,
    request: QueryRequest,
) -> Result<QueryOutput, QueryError> {
    let mut query = Query::prepare(ctx, request)?;
    let mut sink = Sink::page();
    let cursor = query.run(&mut sink).await?;
    let Sink::Page { rows, .. } = sink else {
        unreachable!("page sink")
    };
    let mut stats = query.schedule.stats;
    stats.rows = rows.len() as u64;
    stats.elapsed_ms = query.schedule.started().elapsed().as_secs_f64() * 1000.0;
    Ok(QueryOutput {
        columns: query.columns,
        rows,
        cursor,
        stats,
    })
}

/// Plan `request` and stream every result row into `rows` (no paging).
/// `columns` receives the result columns before the first row.
pub(crate) async fn stream(
    ctx: &ExecContext<'_>,
    request: QueryRequest,
    columns: oneshot::Sender<Vec<OutputColumn>>,
    rows: mpsc::Sender<Vec<Value>>,
) -> Result<QueryStats, QueryError> {
    let mut query = Query::prepare(ctx, request)?;
    let _ = columns.send(query.columns.clone());
    let mut sink = Sink::Stream { rows, sent: 0 };
    query.run(&mut sink).await?;
    let Sink::Stream { sent, .. } = sink else {
        unreachable!("stream sink")
    };
    let mut stats = query.schedule.stats;
    stats.rows = sent;
    stats.elapsed_ms = query.schedule.started().elapsed().as_secs_f64() * 1000.0;
    Ok(stats)
}

/// A planned query, ready to run.
struct Query<'a> {
    ctx: &'a ExecContext<'a>,
    plan: PhysicalPlan,
    columns: Vec<OutputColumn>,
    /// The cursor this query seals when a response ends early.
    template: pb::Cursor,
    /// Where a continuation's partitions stood.
    previous: Vec<pb::PartitionCursor>,
    snapshot_ms: u64,
    schedule: Schedule<'a>,
}

/// What a request runs: its SQL, parameters, paging and, on a
/// continuation, its cursor.
struct Resolved {
    sql: String,
    params: Vec<Value>,
    page_size: usize,
    consistency: Consistency,
    previous: Option<pb::Cursor>,
}

/// The SQL, parameters, page size and consistency of `request`, from its
/// cursor on a continuation.
fn resolve(ctx: &ExecContext<'_>, request: QueryRequest) -> Result<Resolved, QueryError> {
    let budgets = &ctx.budgets;
    let previous = request
        .cursor
        .as_deref()
        .map(|token| cursor::open(ctx.cursor_key, token))
        .transpose()?;
    let resolved = match previous {
        Some(previous) => {
            if let Some(sql) = &request.sql
                && sql != &previous.sql
            {
                return Err(InvalidCursor(
                    "it belongs to another query; send the cursor alone".into(),
                )
                .into());
            }
            let params = previous
                .params
                .iter()
                .map(from_proto)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| InvalidCursor(e.to_string()))?;
            let consistency = request.consistency.unwrap_or(if previous.relaxed {
                Consistency::Relaxed
            } else {
                Consistency::Guarded
            });
            Resolved {
                sql: previous.sql.clone(),
                params,
                page_size: previous.page_size as usize,
                consistency,
                previous: Some(previous),
            }
        }
        None => Resolved {
            sql: request.sql.ok_or_else(|| {
                QueryError::InvalidRequest("send \"sql\" (or a \"cursor\" to continue)".into())
            })?,
            params: request.params,
            page_size: request.page_size.unwrap_or(budgets.default_page_size),
            consistency: request.consistency.unwrap_or_default(),
            previous: None,
        },
    };
    if resolved.page_size == 0 || resolved.page_size > budgets.max_page_size {
        return Err(QueryError::InvalidRequest(format!(
            "page_size must be 1 to {}",
            budgets.max_page_size
        )));
    }
    Ok(resolved)
}

impl<'a> Query<'a> {
    fn prepare(ctx: &'a ExecContext<'a>, request: QueryRequest) -> Result<Self, QueryError> {
        let tables = request.tables.clone();
        let Resolved {
            sql,
            params,
            page_size,
            consistency,
            previous,
        } = resolve(ctx, request)?;
        let recorded = previous.as_ref().map(versions::recorded);
        if let Some(recorded) = &recorded {
            versions::check_installed(recorded, ctx.plugins)?;
        }
        let cache_key = plans::key(&sql, &params);
        let (logical, plugins) = match cache_key.as_deref().and_then(plans::get) {
            Some(plan) => (plan, Vec::new()),
            None => {
                let (plan, plugins) = versions::plan(&sql, &params, &ctx.functions(), ctx.plugins)?;
                let plan = Arc::new(plan);
                if let Some(key) = cache_key {
                    plans::insert(key, &plan);
                }
                (plan, plugins)
            }
        };
        if let Some(allowed) = &tables {
            let read = std::iter::once(&logical.table).chain(logical.join.iter().map(|j| &j.table));
            for table in read {
                if !allowed.contains(table) {
                    return Err(QueryError::Forbidden {
                        table: table.clone(),
                        allowed: allowed.join(", "),
                    });
                }
            }
        }
        if let Some(recorded) = &recorded
            && let Some(changed) = versions::change(recorded, &plugins)
        {
            return Err(changed);
        }
        let paging = Paging {
            page_size,
            consistency,
            continuing: previous.as_ref().map(|c| Continuing { emitted: c.emitted }),
        };
        let routing = Routing {
            fragments: ctx.fragment_count(),
            fragment_of: ctx.fragment_of,
        };
        let plan = physical::build(logical.clone(), routing, &ctx.budgets, paging, plugins)?;
        let columns = if logical.explain {
            vec![OutputColumn {
                name: "plan".into(),
                sql_type: SqlType::Text,
            }]
        } else {
            logical.columns.clone()
        };
        let snapshot_ms = now_ms();
        let join = JoinStage::open(
            logical.clone(),
            ctx.fragments,
            ctx.fragment_of,
            ctx.cluster,
            ctx.plugins.runtime().clone(),
            snapshot_ms,
            ctx.budgets.max_page_bytes,
        );
        let mut schedule = Schedule::new(
            ctx.fragments,
            ctx.plugins.runtime(),
            logical,
            join,
            ctx.budgets,
            snapshot_ms,
        );
        schedule.hold(params.iter().map(value_bytes).sum())?;
        let template = pb::Cursor {
            format: 0,
            params: params.iter().map(to_proto).collect(),
            sql,
            page_size: page_size as u32,
            relaxed: consistency == Consistency::Relaxed,
            plugins: versions::to_cursor(&plan.plugins),
            ..Default::default()
        };
        Ok(Query {
            ctx,
            plan,
            columns,
            template,
            previous: previous.map(|c| c.partitions).unwrap_or_default(),
            snapshot_ms,
            schedule,
        })
    }

    async fn run(&mut self, sink: &mut Sink) -> Result<Option<String>, QueryError> {
        if self.plan.logical.explain {
            for line in self.plan.explain() {
                sink.push(vec![Value::text(line)]).await?;
            }
            return Ok(None);
        }
        let remote = self.ctx.cluster.map(|cluster| OpenRequest {
            cluster,
            template: &self.template,
            table: &self.plan.logical.table,
            snapshot_ms: self.snapshot_ms,
            deadline: self.schedule.deadline(),
        });
        let scans = scan::open(
            &self.plan,
            self.ctx.fragments,
            &self.previous,
            self.snapshot_ms,
            remote.as_ref(),
        )
        .await?;
        // The sealer borrows the template, moved out of `self` meanwhile
        // (the buffered strategies borrow all of `self`) and put back
        // after (a run dropped midway drops its query with it): no copy
        // of the query's text unless a cursor is sealed.
        let template = std::mem::take(&mut self.template);
        let sealer = Sealer::new(self.ctx.cursor_key, &template);
        let cursor = match self.plan.strategy {
            Strategy::KeyMerge { .. } => {
                merge::run(&mut self.schedule, &self.plan, scans, sink, &sealer).await
            }
            _ => self.run_buffered(scans, sink, &sealer).await,
        };
        self.template = template;
        cursor
    }

    /// Sorted row queries and aggregates: compute the whole result, then
    /// return the rows of the plan's window that fit.
    ///
    /// A continuation recomputes the result and, guarded (the only
    /// consistency these strategies continue in), nothing changed, so the
    /// window skips the rows already returned by count.
    async fn run_buffered(
        &mut self,
        mut scans: Vec<Scan>,
        sink: &mut Sink,
        sealer: &Sealer<'_>,
    ) -> Result<Option<String>, QueryError> {
        let plan = &self.plan;
        let mut rows: Vec<Vec<Value>> = match plan.strategy {
            Strategy::Sort { .. } => {
                let descending = plan.logical.order_by.iter().map(|k| k.descending).collect();
                sort::sorted_rows(&mut self.schedule, plan.strategy, descending, &mut scans)
                    .await?
                    .into_iter()
                    .map(|row| row.values)
                    .collect()
            }
            Strategy::Aggregate | Strategy::CountFromPartitions => {
                aggregate::aggregate_rows(&mut self.schedule, plan, &mut scans).await?
            }
            Strategy::KeyMerge { .. } => unreachable!("the key-order merge is not buffered"),
        };
        let window = &plan.window;
        let start = usize::try_from(window.skip).map_or(rows.len(), |s| s.min(rows.len()));
        let end = window.remaining.map_or(rows.len(), |r| {
            start
                .saturating_add(usize::try_from(r).unwrap_or(usize::MAX))
                .min(rows.len())
        });
        let max_result_bytes = self.ctx.budgets.max_result_bytes;
        for (emitted, row) in (window.emitted..).zip(rows.drain(start..end)) {
            if !sink.has_room(&row, plan.page_size, max_result_bytes)? {
                if plan.logical.join.is_some() {
                    return Err(error::join_result(plan.page_size, max_result_bytes));
                }
                let positions = scan::positions(&scans);
                return Ok(Some(sealer.seal(positions, emitted)));
            }
            if let Some(row) = sink.push_now(row)? {
                sink.push(row).await?;
            }
        }
        Ok(None)
    }
}
