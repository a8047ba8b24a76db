//! The key-order strategy: a k-way merge of the partitions' pages (after
//! the inline merge of [`merge_inline`], when the query is light). Each
//! partition's buffer is refilled when it runs dry (and only then, so a
//! LIMIT stops the fetching), the smallest key goes next (the largest when
//! descending: the partitions then scan in reverse), and a response that
//! fills ends with a cursor at the last key returned.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use super::cursor::Sealer;
use super::error::{self, QueryError};
use super::merge_inline::{self, Outcome, Progress};
use super::physical::{PhysicalPlan, Strategy};
use super::scan::{self, Scan};
use super::schedule::{Schedule, out_row_bytes};
use super::sink::Sink;

/// A partition whose buffer holds rows, by the key of its first row: the
/// heap's greatest is the partition whose row goes next.
struct Head {
    key: Arc<str>,
    scan: usize,
    descending: bool,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        // Keys are unique across partitions; the index only makes the
        // order total.
        let order = self.key.cmp(&other.key).then(self.scan.cmp(&other.scan));
        if self.descending {
            order
        } else {
            order.reverse()
        }
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

/// Merge `scans` into `sink` in key order (descending for `ORDER BY key
/// DESC`); the cursor when the response filled before the result ended.
pub(crate) async fn run(
    schedule: &mut Schedule<'_>,
    plan: &PhysicalPlan,
    mut scans: Vec<Scan>,
    sink: &mut Sink,
    sealer: &Sealer<'_>,
) -> Result<Option<String>, QueryError> {
    let max_result_bytes = schedule.budgets().max_result_bytes;
    let descending = plan.strategy == Strategy::KeyMerge { descending: true };
    let head = |scans: &[Scan], scan: usize| Head {
        key: scans[scan].buffer[0].key.clone(),
        scan,
        descending,
    };
    let mut progress = Progress {
        to_skip: plan.window.skip,
        returned: 0,
    };
    if sink.is_page() && schedule.merges_inline(&scans) {
        match merge_inline::run(schedule, plan, &mut scans, sink, sealer, &mut progress).await? {
            Outcome::Done(cursor) => return Ok(cursor),
            Outcome::HandedOver => {}
        }
    }
    let Progress {
        mut to_skip,
        mut returned,
    } = progress;
    // Partitions with buffered rows, and those whose buffer ran dry while
    // they have more (every one, at the start).
    let mut heads: BinaryHeap<Head> = BinaryHeap::with_capacity(scans.len());
    let mut needy: Vec<usize> = (0..scans.len()).collect();
    loop {
        if plan.window.remaining.is_some_and(|r| returned >= r) {
            return Ok(None);
        }
        // Without a filter (or a join, which may find nothing) every
        // visible record visited is a row, and no partition can contribute
        // more rows than are still wanted, so a page need not visit more
        // records than that. With a filter, pages keep growing: a visit may
        // yield no row.
        let wanted = plan
            .window
            .remaining
            .filter(|_| plan.logical.filter.is_none() && plan.logical.join.is_none())
            .map(|r| usize::try_from(to_skip.saturating_add(r - returned)).unwrap_or(usize::MAX));
        while !needy.is_empty() {
            needy.retain(|&i| !scans[i].done);
            if let Some(wanted) = wanted {
                for &i in &needy {
                    scans[i].budget = scans[i].budget.min(wanted.max(1));
                }
            }
            for (i, page) in schedule.fetch(&mut scans, &needy).await? {
                schedule.hold(page.rows.iter().map(out_row_bytes).sum())?;
                scans[i].buffer.extend(page.rows);
            }
            needy.retain(|&i| {
                if scans[i].buffer.is_empty() {
                    return true;
                }
                heads.push(head(&scans, i));
                false
            });
        }
        let Some(next) = heads.peek() else {
            return Ok(None);
        };
        let i = next.scan;
        if to_skip == 0
            && !sink.has_room(&scans[i].buffer[0].values, plan.page_size, max_result_bytes)?
        {
            if plan.logical.join.is_some() {
                return Err(error::join_result(plan.page_size, max_result_bytes));
            }
            let emitted = plan.window.emitted + returned;
            return Ok(Some(sealer.seal(scan::positions(&scans), emitted)));
        }
        heads.pop();
        let row = scans[i].buffer.pop_front().expect("non-empty buffer");
        if scans[i].buffer.is_empty() {
            needy.push(i);
        } else {
            heads.push(head(&scans, i));
        }
        schedule.release(out_row_bytes(&row));
        scans[i].emitted_to = Some(row.key);
        if to_skip > 0 {
            to_skip -= 1;
            continue;
        }
        if let Some(values) = sink.push_now(row.values)? {
            sink.push(values).await?;
        }
        returned += 1;
    }
}
