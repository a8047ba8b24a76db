//! The aggregate strategies: partial states per page, pipelined (each
//! partition's next page starts as soon as its previous one ends) and merged
//! in round order; then HAVING, the projection and ORDER BY over the
//! finished groups. `COUNT(*)` of a whole table takes the partitions' live
//! counts instead of a scan.

use std::collections::HashMap;

use ebb_query::{AggState, Column, EvalError, Meter, Plan, RowSource, Shape, Value, eval_batch};
use futures::{FutureExt, StreamExt};

use super::error::{self, QueryError};
use super::merge_order::MergeOrder;
use super::page::Groups;
use super::physical::{PhysicalPlan, Strategy};
use super::scan::Scan;
use super::schedule::{Schedule, values_bytes};
use super::sort::cmp_values;

/// A finished group, as expressions over it read it.
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

/// The result rows of an aggregate `plan` over `scans`, in result order.
pub(crate) async fn aggregate_rows(
    schedule: &mut Schedule<'_>,
    plan: &PhysicalPlan,
    scans: &mut [Scan],
) -> Result<Vec<Vec<Value>>, QueryError> {
    let logical = plan.logical.clone();
    let aggregates = aggregates_of(&logical);
    let mut groups: Groups = HashMap::new();
    if plan.strategy == Strategy::CountFromPartitions {
        // COUNT(*) of a whole table: partitions know their visible counts.
        let total: usize = scans.iter().map(|s| s.visible).sum();
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
    // run on the query threads (plugin merges call the sandbox) while
    // pages go on.
    let mut order = MergeOrder::new(scans.iter().map(|s| s.done));
    let mut in_flight = futures::stream::FuturesUnordered::new();
    for i in (0..scans.len()).filter(|&i| !scans[i].done) {
        in_flight.push(schedule.page_job(scans, i));
    }
    let max_groups = schedule.budgets().max_groups;
    let mut due: Vec<Groups> = Vec::new();
    let mut merged = Some(groups);
    let mut merging = None;
    // What a merge answers is checked the same wherever it ran.
    let settle = |schedule: &mut Schedule<'_>, (groups, added): (Groups, usize)| {
        schedule.hold(added)?;
        if groups.len() > max_groups {
            return Err(error::groups(max_groups, logical.distinct));
        }
        Ok(groups)
    };
    loop {
        if merging.is_none() && !due.is_empty() {
            let (plan, pages) = (logical.clone(), std::mem::take(&mut due));
            let groups = merged.take().expect("no merge running");
            let page_groups: usize = pages.iter().map(HashMap::len).sum();
            let merge = move || merge_pages(&plan, groups, pages);
            if schedule.groups_inline(page_groups) {
                // A few groups of built-ins merge in microseconds.
                merged = Some(settle(schedule, merge()?)?);
            } else {
                let runtime = schedule.runtime();
                merging = Some(async move { runtime.run_blocking(merge).await }.boxed());
            }
        }
        tokio::select! {
            Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                let (i, mut page) = done?;
                schedule.record(&mut scans[i], &page)?;
                if !scans[i].done {
                    schedule.check_deadline()?;
                    in_flight.push(schedule.page_job(scans, i));
                }
                due.extend(order.arrive(i, scans[i].done, std::mem::take(&mut page.groups)));
            }
            result = async { merging.as_mut().expect("checked").await }, if merging.is_some() => {
                merging = None;
                merged = Some(settle(schedule, result.map_err(error::thread_failed)??)?);
            }
            else => break,
        }
    }
    let groups = merged.expect("every merge finished");
    debug_assert!(order.is_drained(), "every page merged");
    let room = schedule.room();
    let max_query_bytes = schedule.budgets().max_query_bytes;
    // A few groups of built-ins finish in microseconds, less than a
    // query thread's round trip.
    let inline = schedule.groups_inline(groups.len());
    let finish = move || {
        let mut meter = Meter::new(room);
        finish_groups(&logical, groups, &mut meter).map_err(|e| match e {
            EvalError::OverBudget(_) => error::query_bytes(max_query_bytes),
            EvalError::Function(f) => QueryError::Function(f),
        })
    };
    if inline {
        finish()
    } else {
        schedule.off_worker(finish).await
    }
}

fn aggregates_of(plan: &Plan) -> &[ebb_query::AggregateCall] {
    match &plan.shape {
        Shape::Aggregate { aggregates, .. } => aggregates,
        Shape::Rows { .. } => &[],
    }
}

/// Merge pages' partial states into `groups`, in order; answers the merged
/// groups and the bytes of the group keys the pages added.
fn merge_pages(
    plan: &Plan,
    mut groups: Groups,
    pages: Vec<Groups>,
) -> Result<(Groups, usize), QueryError> {
    let mut added = 0;
    for page in pages {
        added += merge_groups(plan, &mut groups, page)?;
    }
    Ok((groups, added))
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

#[cfg(test)]
mod tests {
    use ebb_query::{Builtins, Limits};

    use super::*;

    /// One page's partial states: for each `(group, lengths)`, `count(*)`
    /// and `sum(x)` over `lengths`.
    fn page(plan: &Plan, groups: &[(&str, &[i64])]) -> Groups {
        let aggregates = aggregates_of(plan);
        groups
            .iter()
            .map(|(group, lengths)| {
                let column: Vec<Value> = lengths.iter().map(|&n| Value::Int(n)).collect();
                let states = aggregates
                    .iter()
                    .map(|a| {
                        let mut state = a.function.init().unwrap();
                        let args = if a.args.is_empty() {
                            Vec::new()
                        } else {
                            vec![column.clone()]
                        };
                        a.function.update(&mut state, &args, column.len()).unwrap();
                        state
                    })
                    .collect();
                (vec![Value::text(*group)], states)
            })
            .collect()
    }

    #[test]
    fn pages_merge_per_group_then_having_projection_and_order_apply() {
        let plan = ebb_query::plan(
            "SELECT value, count(*), sum(length(key)) FROM t GROUP BY value \
             HAVING count(*) > 1 ORDER BY 2 DESC, 1 DESC",
            &[],
            &Builtins,
            &Limits::default(),
        )
        .unwrap();
        let mut groups = Groups::new();
        let added = merge_groups(
            &plan,
            &mut groups,
            page(&plan, &[("a", &[1, 2]), ("b", &[5])]),
        )
        .unwrap();
        assert!(added > 0, "new group keys are counted as held");
        let again = merge_groups(
            &plan,
            &mut groups,
            page(&plan, &[("a", &[4]), ("c", &[1, 1, 1])]),
        )
        .unwrap();
        assert!(again > 0 && again < added, "only c is new");
        let rows = finish_groups(&plan, groups, &mut Meter::new(1 << 20)).unwrap();
        assert_eq!(
            rows,
            vec![
                vec![Value::text("c"), Value::Int(3), Value::Int(3)],
                vec![Value::text("a"), Value::Int(3), Value::Int(7)],
            ],
            "b has one row (HAVING); ties on count order by value descending"
        );
    }

    #[test]
    fn no_rows_without_group_by_is_one_row_of_empty_aggregates() {
        let plan = ebb_query::plan(
            "SELECT count(*), sum(length(key)) FROM t",
            &[],
            &Builtins,
            &Limits::default(),
        )
        .unwrap();
        let rows = finish_groups(&plan, Groups::new(), &mut Meter::new(1 << 20)).unwrap();
        assert_eq!(rows, vec![vec![Value::Int(0), Value::Null]]);
    }
}
