//! The physical plan: how a query runs, as plain data. [`build`] decides it
//! once, before anything runs, from the logical plan, the routing, the
//! budgets and the request's paging: which partitions to scan, which
//! strategy (k-way merge in key order, ascending or descending, buffered
//! sort, partial aggregates, or the count shortcut), how many records a first page visits, which rows this response
//! may return, and what relaxed mode refuses. The strategies only carry it
//! out, and EXPLAIN prints it.

use std::collections::BTreeSet;
use std::sync::Arc;

use ebb_query::{Plan, Shape};

use super::error::QueryError;
use super::inline::{INLINE_VALUE_BYTES, INLINE_VISITS, calls_only_light_builtins};
use super::{Consistency, QueryBudgets};

/// How keys map to fragments.
#[derive(Clone, Copy)]
pub(crate) struct Routing<'a> {
    /// The node's fragment count.
    pub fragments: u32,
    /// The fragment of a key.
    pub fragment_of: &'a (dyn Fn(&str) -> u32 + Sync),
}

/// What a request asks beyond its SQL.
#[derive(Debug, Clone, Default)]
pub(crate) struct Paging {
    /// Rows per response.
    pub page_size: usize,
    /// How a continuation treats partitions that changed.
    pub consistency: Consistency,
    /// Where a continuation stands; `None` on a first page.
    pub continuing: Option<Continuing>,
}

/// Where a continuation stands (from its cursor).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Continuing {
    /// Rows earlier pages returned.
    pub emitted: u64,
}

/// A plugin version a plan calls.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PluginUse {
    /// The plugin.
    pub name: String,
    /// Its version number.
    pub version: u32,
    /// SHA-256 of its module, hex.
    pub sha256: String,
}

/// How the rows are produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// Row queries in key order (no ORDER BY, or ORDER BY key [DESC]
    /// first): a k-way merge of the partitions' pages, streaming, each
    /// partition scanned in the result's direction and fetched only when
    /// the merge needs its next row, so it stops once LIMIT + OFFSET rows
    /// are out; a response that fills ends with a cursor at the last key
    /// returned.
    KeyMerge {
        /// `ORDER BY key DESC`: partitions are scanned in reverse.
        descending: bool,
    },
    /// Row queries with another ORDER BY: every matching row is buffered,
    /// sorted and paged; a continuation recomputes the result.
    Sort {
        /// Rows the buffer holds before it is over `max_order_buffer`.
        max_rows: usize,
        /// With a LIMIT whose `OFFSET + LIMIT` is at most half the buffer, a
        /// full buffer is cut to its top rows; without, it fails the query.
        keep_top: Option<usize>,
    },
    /// Aggregates: partial states per page, pipelined, merged in round order.
    Aggregate,
    /// `COUNT(*)` of a whole table with no WHERE: the partitions' visible
    /// record counts, without a scan.
    CountFromPartitions,
}

impl Strategy {
    fn describe(&self) -> String {
        match self {
            Strategy::KeyMerge { descending: false } => {
                "k-way merge of the partitions' pages in key order, stopping at LIMIT + OFFSET rows"
                    .into()
            }
            Strategy::KeyMerge { descending: true } => {
                "k-way merge of the partitions' pages in descending key order (each scanned in reverse), stopping at LIMIT + OFFSET rows"
                    .into()
            }
            Strategy::Sort {
                max_rows,
                keep_top: Some(keep),
            } => format!(
                "buffer and sort every matching row; past {max_rows} rows keep the top {keep}"
            ),
            Strategy::Sort {
                max_rows,
                keep_top: None,
            } => {
                format!("buffer and sort every matching row, at most {max_rows} (max_order_buffer)")
            }
            Strategy::Aggregate => {
                "partial aggregates per page, pipelined, merged in round order".into()
            }
            Strategy::CountFromPartitions => {
                "count from the partitions' live record counts (no scan)".into()
            }
        }
    }
}

/// The rows of the whole result this response may return, in result order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window {
    /// Rows earlier pages returned.
    pub emitted: u64,
    /// Result rows passed over before the first one returned: the OFFSET on
    /// a first page; on a continuation of a buffered strategy, also the
    /// rows already returned (the result is recomputed); 0 on a
    /// continuation of the key-order merge (the partitions resume).
    pub skip: u64,
    /// Rows still to return in all (LIMIT less the rows returned); `None`
    /// without a LIMIT.
    pub remaining: Option<u64>,
}

/// How a query runs.
#[derive(Debug, Clone)]
pub(crate) struct PhysicalPlan {
    /// The logical plan.
    pub logical: Arc<Plan>,
    /// How the rows are produced.
    pub strategy: Strategy,
    /// The fragments whose partitions are scanned, ascending, after pruning.
    pub fragments: Vec<u32>,
    /// The node's fragment count.
    pub fragment_count: u32,
    /// Records each partition's first page visits.
    pub first_page_visits: usize,
    /// Records a page visits at most (each page of a partition visits twice
    /// as many as the one before, from the first page's up to this).
    pub max_page_visits: usize,
    /// Rows per response.
    pub page_size: usize,
    /// How a continuation treats partitions that changed.
    pub consistency: Consistency,
    /// A continuation: the key-order merge then revisits only the
    /// partitions its cursor recorded.
    pub continuing: bool,
    /// Which rows this response may return.
    pub window: Window,
    /// The plugin versions the plan calls, by name.
    pub plugins: Vec<PluginUse>,
}

/// Whether `plan` is `COUNT(*)`s of a whole table: the partitions know it.
fn counts_only(plan: &Plan) -> bool {
    let Shape::Aggregate {
        group_by,
        aggregates,
        ..
    } = &plan.shape
    else {
        return false;
    };
    group_by.is_empty()
        && plan.filter.is_none()
        && plan.join.is_none()
        && plan.ranges.is_all()
        && aggregates
            .iter()
            .all(|a| a.args.is_empty() && a.function.name() == "count" && !a.function.is_plugin())
}

/// The fragments whose partitions can hold matching keys: those of the
/// keys when every range is one key, none when no key can match, else all.
fn prune(plan: &Plan, routing: Routing<'_>) -> Vec<u32> {
    match plan.ranges.points() {
        Some(points) => points
            .iter()
            .map(|key| (routing.fragment_of)(key))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        None if plan.ranges.0.is_empty() => Vec::new(),
        None => (0..routing.fragments).collect(),
    }
}

/// Decide how `logical` runs. Refuses (400 `invalid_request`) a relaxed
/// query that cannot be continued exactly.
pub(crate) fn build(
    logical: Arc<Plan>,
    routing: Routing<'_>,
    budgets: &QueryBudgets,
    paging: Paging,
    plugins: Vec<PluginUse>,
) -> Result<PhysicalPlan, QueryError> {
    // Only the key-order merge resumes by key, so only it continues exactly
    // whatever was written between pages.
    if paging.consistency == Consistency::Relaxed
        && !logical.explain
        && logical.key_order().is_none()
    {
        return Err(QueryError::InvalidRequest(
            "\"consistency\": \"relaxed\" continues only row queries in key order (no ORDER BY, or ORDER BY key [DESC] first): a record whose ORDER BY values or group change between pages could be returned twice or skipped; use the default guarded consistency, or order by key".into(),
        ));
    }
    let strategy = match (&logical.shape, logical.key_order()) {
        (Shape::Rows { .. }, Some(descending)) => Strategy::KeyMerge { descending },
        (Shape::Rows { .. }, None) => {
            let max_rows = budgets.max_order_buffer;
            let keep_top = logical
                .limit
                .map(|l| (logical.offset as usize).saturating_add(l as usize))
                .filter(|&keep| keep <= max_rows / 2);
            Strategy::Sort { max_rows, keep_top }
        }
        (Shape::Aggregate { .. }, _) if counts_only(&logical) => Strategy::CountFromPartitions,
        (Shape::Aggregate { .. }, _) => Strategy::Aggregate,
    };
    let emitted = paging.continuing.as_ref().map_or(0, |c| c.emitted);
    let remaining = logical.limit.map(|l| l.saturating_sub(emitted));
    let skip = match (&paging.continuing, strategy) {
        (None, _) => logical.offset,
        (Some(_), Strategy::KeyMerge { .. }) => 0,
        (Some(_), _) => logical.offset.saturating_add(emitted),
    };
    let window = Window {
        emitted,
        skip,
        remaining,
    };
    let full = budgets.page_visit_budget;
    let fragments = prune(&logical, routing);
    // A key-order merge cannot use more rows from one partition than the
    // response holds (or the LIMIT leaves), so a small LIMIT does not
    // evaluate a full page in every partition. Keys spread evenly over the
    // fragments, so a first page of one and a half fair shares (and two
    // more) rarely falls short (of 100 rows over 16 partitions, one
    // partition holds 12 or more about one query in three); a partition
    // that runs dry (or whose filter rejects more) fetches its next,
    // larger page when the merge needs it. Rows fetched beyond what the
    // response uses are built and dropped, so a generous share costs
    // every query, a short one only some.
    let first_page_visits = match strategy {
        Strategy::KeyMerge { .. } => {
            let response = skip.saturating_add(paging.page_size as u64);
            let wanted = remaining.map_or(response, |r| response.min(skip.saturating_add(r)));
            let wanted = if fragments.len() > 1 {
                wanted.min(
                    wanted
                        .saturating_mul(3)
                        .div_ceil(2 * fragments.len() as u64)
                        + 2,
                )
            } else {
                wanted
            };
            usize::try_from(wanted).unwrap_or(usize::MAX).clamp(1, full)
        }
        _ => full,
    };
    // Key lookups (`key = ?`, `key IN (...)`) visit at most one record per
    // key, so their page need not be larger (and a small one may run
    // inline, see `schedule`).
    let first_page_visits = match logical.ranges.points() {
        Some(keys) => first_page_visits.min(keys.len().max(1)),
        None => first_page_visits,
    };
    Ok(PhysicalPlan {
        fragments,
        fragment_count: routing.fragments,
        logical,
        strategy,
        first_page_visits,
        max_page_visits: budgets.max_page_visit_budget,
        page_size: paging.page_size,
        consistency: paging.consistency,
        continuing: paging.continuing.is_some(),
        window,
        plugins,
    })
}

impl PhysicalPlan {
    /// The plan as text lines, for EXPLAIN: the logical plan, then how it
    /// runs.
    pub(crate) fn explain(&self) -> Vec<String> {
        let fragments = if self.fragments.len() as u32 == self.fragment_count {
            format!("all {}", self.fragments.len())
        } else {
            format!("{:?} (pruned by key)", self.fragments)
        };
        let mut lines = self.logical.explain_lines(&fragments);
        lines.push(format!("strategy: {}", self.strategy.describe()));
        if self.strategy == Strategy::CountFromPartitions {
            lines.push("pages: none".into());
        } else {
            lines.push(format!(
                "pages: the first visits {} records per partition, each next one twice as many up to {}",
                self.first_page_visits,
                self.max_page_visits.max(self.first_page_visits)
            ));
        }
        if matches!(self.strategy, Strategy::KeyMerge { .. })
            && self.logical.join.is_none()
            && calls_only_light_builtins(&self.logical)
        {
            lines.push(format!(
                "inline: a response page merges straight over the partitions' snapshots first when this member holds them all, up to {INLINE_VISITS} records and {} KiB of values per partition, then by pages",
                INLINE_VALUE_BYTES / 1024
            ));
        }
        if !self.plugins.is_empty() {
            let versions: Vec<String> = self
                .plugins
                .iter()
                .map(|p| format!("{}@{}", p.name, p.version))
                .collect();
            lines.push(format!("plugin versions: {}", versions.join(", ")));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use ebb_query::{Builtins, Limits};

    use super::*;

    /// Four fragments; a key's fragment is its last digit modulo 4.
    fn route(key: &str) -> u32 {
        key.bytes().last().map_or(0, |b| u32::from(b) % 4)
    }

    fn routing() -> Routing<'static> {
        Routing {
            fragments: 4,
            fragment_of: &route,
        }
    }

    fn logical(sql: &str) -> Arc<Plan> {
        Arc::new(ebb_query::plan(sql, &[], &Builtins, &Limits::default()).unwrap())
    }

    fn first(page_size: usize) -> Paging {
        Paging {
            page_size,
            ..Paging::default()
        }
    }

    fn physical(sql: &str, paging: Paging) -> Result<PhysicalPlan, QueryError> {
        build(
            logical(sql),
            routing(),
            &QueryBudgets::default(),
            paging,
            Vec::new(),
        )
    }

    fn strategy(sql: &str) -> Strategy {
        physical(sql, first(100)).unwrap().strategy
    }

    #[test]
    fn each_shape_gets_its_strategy() {
        let ascending = Strategy::KeyMerge { descending: false };
        assert_eq!(strategy("SELECT key FROM t"), ascending);
        assert_eq!(
            strategy("SELECT key FROM t WHERE value = 'a' LIMIT 5"),
            ascending
        );
        assert_eq!(
            strategy("SELECT key FROM t WHERE key > 'k' ORDER BY key LIMIT 5"),
            ascending,
            "ORDER BY key is the merge's order"
        );
        assert_eq!(
            strategy("SELECT key, value FROM t ORDER BY key DESC, value LIMIT 5 OFFSET 2"),
            Strategy::KeyMerge { descending: true },
            "keys are unique: later sort keys never decide"
        );
        let max_rows = QueryBudgets::default().max_order_buffer;
        assert_eq!(
            strategy("SELECT key FROM t ORDER BY value"),
            Strategy::Sort {
                max_rows,
                keep_top: None
            }
        );
        assert_eq!(
            strategy("SELECT key FROM t ORDER BY value, key"),
            Strategy::Sort {
                max_rows,
                keep_top: None
            },
            "the key second is not key order"
        );
        assert_eq!(
            strategy("SELECT key FROM t ORDER BY value LIMIT 10 OFFSET 5"),
            Strategy::Sort {
                max_rows,
                keep_top: Some(15)
            }
        );
        assert_eq!(
            strategy(&format!(
                "SELECT key FROM t ORDER BY value LIMIT {}",
                max_rows / 2 + 1
            )),
            Strategy::Sort {
                max_rows,
                keep_top: None
            },
            "a LIMIT over half the buffer cannot be kept by cutting it"
        );
        assert_eq!(
            strategy("SELECT count(*) FROM t"),
            Strategy::CountFromPartitions
        );
        assert_eq!(
            strategy("SELECT count(*), count(*) FROM t"),
            Strategy::CountFromPartitions
        );
        for aggregate in [
            "SELECT count(*) FROM t WHERE value = 'a'",
            "SELECT count(*) FROM t WHERE key > 'a'",
            "SELECT count(value) FROM t",
            "SELECT count(*), sum(length(key)) FROM t",
            "SELECT value, count(*) FROM t GROUP BY value",
        ] {
            assert_eq!(strategy(aggregate), Strategy::Aggregate, "{aggregate}");
        }
    }

    #[test]
    fn point_queries_scan_only_their_keys_fragments() {
        let fragments = |sql: &str| physical(sql, first(10)).unwrap().fragments;
        assert_eq!(fragments("SELECT key FROM t"), vec![0, 1, 2, 3]);
        assert_eq!(
            fragments("SELECT key FROM t WHERE key > 'k1'"),
            vec![0, 1, 2, 3]
        );
        assert_eq!(
            fragments("SELECT key FROM t WHERE key = 'k1'"),
            vec![route("k1")]
        );
        let two = fragments("SELECT key FROM t WHERE key IN ('k1', 'k2', 'k5')");
        assert_eq!(two, vec![1, 2], "k1 and k5 share fragment 1");
        assert_eq!(
            fragments("SELECT key FROM t WHERE key = 'a' AND key = 'b'"),
            Vec::<u32>::new()
        );
    }

    #[test]
    fn a_key_order_first_page_visits_only_what_the_response_can_use() {
        let visits = |sql: &str, paging: Paging| physical(sql, paging).unwrap().first_page_visits;
        let full = QueryBudgets::default().page_visit_budget;
        assert_eq!(visits("SELECT key FROM t", first(1000)), full);
        assert_eq!(visits("SELECT key FROM t LIMIT 2", first(1000)), 2);
        // Five wanted, one and a half fair shares of four partitions and
        // two more: four.
        assert_eq!(visits("SELECT key FROM t LIMIT 2 OFFSET 3", first(1000)), 4);
        assert_eq!(visits("SELECT key FROM t", first(7)), 5);
        assert_eq!(
            visits("SELECT key FROM t ORDER BY key DESC LIMIT 3", first(1000)),
            3
        );
        assert_eq!(visits("SELECT key FROM t LIMIT 0", first(10)), 1);
        // One and a half fair shares of the four partitions, and two more.
        assert_eq!(visits("SELECT key FROM t LIMIT 100", first(1000)), 40);
        assert_eq!(
            visits("SELECT key FROM t WHERE value > 'a' LIMIT 100", first(1000)),
            40
        );
        assert_eq!(
            visits("SELECT key FROM t WHERE key >= 'k1' LIMIT 100", first(1000)),
            40
        );
        // A key lookup visits at most one record per key, whatever the
        // strategy.
        assert_eq!(
            visits("SELECT key FROM t WHERE key = 'k1' LIMIT 100", first(1000)),
            1
        );
        assert_eq!(
            visits(
                "SELECT count(value) FROM t WHERE key IN ('k1', 'k2', 'k3')",
                first(1000)
            ),
            3
        );
        // A continuation skips no OFFSET and wants what the LIMIT leaves.
        let continuing = Paging {
            page_size: 1000,
            continuing: Some(Continuing { emitted: 8 }),
            ..Paging::default()
        };
        assert_eq!(
            visits("SELECT key FROM t LIMIT 10 OFFSET 50", continuing),
            2
        );
        // Buffered strategies read every row anyway.
        assert_eq!(
            visits("SELECT key FROM t ORDER BY value LIMIT 2", first(1000)),
            full
        );
        assert_eq!(visits("SELECT count(value) FROM t", first(1)), full);
    }

    #[test]
    fn the_window_skips_the_offset_first_and_what_was_returned_after() {
        let window = |sql: &str, paging: Paging| physical(sql, paging).unwrap().window;
        let continuing = |consistency| Paging {
            page_size: 10,
            consistency,
            continuing: Some(Continuing { emitted: 4 }),
        };
        let sorted = "SELECT key FROM t ORDER BY value LIMIT 20 OFFSET 3";
        let opening = window(sorted, first(10));
        assert_eq!((opening.skip, opening.remaining), (3, Some(20)));
        let guarded = window(sorted, continuing(Consistency::Guarded));
        assert_eq!(
            (guarded.skip, guarded.remaining),
            (7, Some(16)),
            "a guarded continuation recomputes and skips OFFSET and the rows returned"
        );
        for merged in [
            "SELECT key FROM t LIMIT 20 OFFSET 3",
            "SELECT key FROM t ORDER BY key DESC LIMIT 20 OFFSET 3",
        ] {
            let merge = window(merged, continuing(Consistency::Relaxed));
            assert_eq!(
                (merge.skip, merge.remaining),
                (0, Some(16)),
                "{merged}: the merge resumes its partitions instead"
            );
        }
        assert_eq!(window("SELECT key FROM t", first(10)).remaining, None);
    }

    #[test]
    fn relaxed_mode_refuses_what_it_cannot_continue_exactly() {
        let relaxed = Paging {
            page_size: 10,
            consistency: Consistency::Relaxed,
            continuing: None,
        };
        for refused in [
            "SELECT key FROM t ORDER BY value",
            "SELECT key FROM t ORDER BY value, key",
            "SELECT count(*) FROM t",
            "SELECT value, count(*) FROM t GROUP BY value",
        ] {
            match physical(refused, relaxed.clone()) {
                Err(QueryError::InvalidRequest(message)) => {
                    assert!(message.contains("relaxed"), "{message}")
                }
                other => panic!("{refused}: {other:?}"),
            }
        }
        for accepted in [
            "SELECT key FROM t",
            "SELECT key FROM t ORDER BY key DESC, value",
            "EXPLAIN SELECT count(*) FROM t",
        ] {
            assert!(physical(accepted, relaxed.clone()).is_ok(), "{accepted}");
        }
    }

    #[test]
    fn explain_prints_the_physical_plan() {
        let lines = |sql: &str| physical(sql, first(10)).unwrap().explain();
        let merge = lines("EXPLAIN SELECT key FROM t WHERE key = 'k1' LIMIT 3");
        assert!(
            merge.contains(&"fragments: [1] (pruned by key)".to_string()),
            "{merge:?}"
        );
        assert!(
            merge.contains(
                &"strategy: k-way merge of the partitions' pages in key order, stopping at LIMIT + OFFSET rows".to_string()
            ),
            "{merge:?}"
        );
        let reverse = lines("EXPLAIN SELECT key FROM t ORDER BY key DESC LIMIT 3");
        assert!(
            reverse
                .iter()
                .any(|l| l.contains("descending key order (each scanned in reverse)")),
            "{reverse:?}"
        );
        assert!(
            reverse
                .iter()
                .any(|l| l.starts_with("inline: a response page merges straight over")),
            "{reverse:?}"
        );
        // printf may build far more than its arguments: never inline.
        let printed = lines("EXPLAIN SELECT printf('%d', 1) FROM t ORDER BY key LIMIT 3");
        assert!(
            !printed.iter().any(|l| l.starts_with("inline:")),
            "{printed:?}"
        );
        // A key lookup visits at most its one record.
        assert!(
            merge
                .iter()
                .any(|l| l.starts_with("pages: the first visits 1 records")),
            "{merge:?}"
        );
        let count = lines("EXPLAIN SELECT count(*) FROM t");
        assert!(count.contains(&"fragments: all 4".to_string()), "{count:?}");
        assert!(count.contains(&"pages: none".to_string()), "{count:?}");
        let sort = lines("EXPLAIN SELECT key FROM t ORDER BY value LIMIT 5");
        assert!(
            sort.iter().any(|l| l.contains("keep the top 5")),
            "{sort:?}"
        );
        let with_plugin = build(
            logical("EXPLAIN SELECT key FROM t"),
            routing(),
            &QueryBudgets::default(),
            first(10),
            vec![PluginUse {
                name: "json".into(),
                version: 3,
                sha256: "ab".into(),
            }],
        )
        .unwrap()
        .explain();
        assert_eq!(with_plugin.last().unwrap(), "plugin versions: json@3");
    }
}
