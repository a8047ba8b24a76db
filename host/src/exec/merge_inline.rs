//! The key-order merge of a light query run inline, straight over the
//! partitions' snapshots: one walk per partition, the next record taken
//! from whichever has the smallest key (the largest when descending), rows
//! evaluated in batches in merge order. So a `LIMIT n` visits about `n`
//! records plus one per partition, where a page per partition visits a
//! share of `n` in every one. Bounded like the inline pages it replaces;
//! past those bounds the paged merge goes on from where this one stopped.

use std::sync::Arc;

use ebb_query::{EvalError, Meter, RowSource, Shape, Value};

use super::cursor::Sealer;
use super::error::{self, QueryError};
use super::inline::{INLINE_BUILD_BYTES, INLINE_VALUE_BYTES, INLINE_VISITS};
use super::page::{BATCH, PageOutput, ScanRow, Walk, bare_columns, evaluate};
use super::physical::{PhysicalPlan, Strategy};
use super::scan::{self, Scan};
use super::schedule::Schedule;
use super::sink::Sink;
use crate::fragment::entry::Header;

/// How the inline merge ended.
pub(crate) enum Outcome {
    /// The response is complete: its cursor when it filled before the
    /// result ended.
    Done(Option<String>),
    /// It reached its bounds: every partition is set to resume after the
    /// last row passed (returned or skipped), with nothing buffered, for
    /// the paged merge to go on.
    HandedOver,
}

/// Rows passed so far: returned into the sink, or skipped by OFFSET.
pub(crate) struct Progress {
    /// Rows still to skip.
    pub to_skip: u64,
    /// Rows returned.
    pub returned: u64,
}

/// The partitions' next records in a tournament (loser) tree: the next
/// one in merge order is at the root, and replacing it takes one
/// comparison per level (4 for 16 partitions, where a binary heap's pop
/// and push take about three times as many).
struct Tournament<'a> {
    /// Each partition's next record; `None` once it has none (or its walk
    /// stopped at the bounds).
    heads: Vec<Option<ScanRow<'a>>>,
    /// The key of each partition's next record, apart, so that matches
    /// read only these.
    keys: Vec<Option<&'a str>>,
    /// `losers[n]`, for each inner node `n` in `1..k`: the partition that
    /// lost the match there; `losers[0]`: the overall winner. Leaf `i`
    /// (partition `i`) sits at node `k + i`; node `n`'s parent is `n / 2`.
    losers: Vec<usize>,
    descending: bool,
}

impl<'a> Tournament<'a> {
    /// Whether partition `a`'s record goes before partition `b`'s (a
    /// partition with none goes last; keys are unique across partitions).
    fn beats(&self, a: usize, b: usize) -> bool {
        match (self.keys[a], self.keys[b]) {
            (Some(x), Some(y)) => {
                if self.descending {
                    x > y
                } else {
                    x < y
                }
            }
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Play every match, bottom up.
    fn build(&mut self) {
        let k = self.heads.len();
        self.losers = vec![0; k.max(1)];
        let mut winners = vec![0; 2 * k];
        for (i, winner) in winners[k..].iter_mut().enumerate() {
            *winner = i;
        }
        for n in (1..k).rev() {
            let (left, right) = (winners[2 * n], winners[2 * n + 1]);
            let (winner, loser) = if self.beats(left, right) {
                (left, right)
            } else {
                (right, left)
            };
            winners[n] = winner;
            self.losers[n] = loser;
        }
        self.losers[0] = if k > 1 { winners[1] } else { 0 };
    }

    /// The partition whose record goes next, if any has one.
    fn winner(&self) -> Option<usize> {
        let winner = *self.losers.first()?;
        self.keys.get(winner)?.map(|_| winner)
    }

    /// Replay partition `i`'s matches after its record changed.
    fn replay(&mut self, i: usize) {
        let mut winner = i;
        let mut node = (i + self.heads.len()) / 2;
        while node >= 1 {
            if self.beats(self.losers[node], winner) {
                std::mem::swap(&mut self.losers[node], &mut winner);
            }
            node /= 2;
        }
        self.losers[0] = winner;
    }
}

/// What the merge may still do before it hands over: the inline pages'
/// bounds, summed over the partitions.
struct Allowance {
    visits: usize,
    value_bytes: usize,
    reads_value: bool,
}

impl Allowance {
    /// Take `header`'s record, visited; `false` (taking nothing) when
    /// its value would go past the bytes left.
    fn take(&mut self, header: &Header, visible: bool) -> bool {
        if visible && self.reads_value {
            if header.value_len() > self.value_bytes {
                return false;
            }
            self.value_bytes -= header.value_len();
        }
        self.visits = self.visits.saturating_sub(1);
        true
    }
}

/// The partitions' walks and the tournament of their next visible records.
struct Merge<'a> {
    walks: Vec<Option<Walk<'a>>>,
    /// Each partition's fragment.
    fragments: Vec<u32>,
    tournament: Tournament<'a>,
    snapshot_ms: u64,
    visited: usize,
}

impl Merge<'_> {
    /// Advance `scan`'s walk to its next visible record, which becomes its
    /// head (none when the walk ends, which drops it). `false` when the
    /// allowance ran out first: the head is then none though the walk has
    /// more, and the record stays unvisited.
    fn advance(&mut self, scan: usize, allowance: &mut Allowance) -> bool {
        self.tournament.heads[scan] = None;
        self.tournament.keys[scan] = None;
        let Some(walk) = &mut self.walks[scan] else {
            return true;
        };
        loop {
            if allowance.visits == 0 {
                return false;
            }
            let Some(entry) = walk.next() else {
                self.walks[scan] = None;
                return true;
            };
            let header = entry.header();
            let visible = header.is_visible_at(self.snapshot_ms);
            if !allowance.take(&header, visible) {
                return false;
            }
            self.visited += 1;
            if visible {
                let row = ScanRow::new(entry, header, self.fragments[scan]);
                self.tournament.keys[scan] = Some(row.key_str());
                self.tournament.heads[scan] = Some(row);
                return true;
            }
        }
    }
}

/// Merge `scans` into `sink` (a response page) in key order, inline, as
/// [`Schedule::merges_inline`] allows: `Done` when the response is
/// complete, `HandedOver` once the merge reached the inline bounds
/// (records visited, value bytes read, bytes built by a batch) with rows
/// still to go.
pub(crate) async fn run(
    schedule: &mut Schedule<'_>,
    plan: &PhysicalPlan,
    scans: &mut [Scan],
    sink: &mut Sink,
    sealer: &Sealer<'_>,
    progress: &mut Progress,
) -> Result<Outcome, QueryError> {
    schedule.check_deadline()?;
    let page_plan = schedule.page_plan();
    let mut allowance = Allowance {
        visits: INLINE_VISITS * scans.len(),
        value_bytes: INLINE_VALUE_BYTES * scans.len(),
        reads_value: page_plan.reads_value_bytes(),
    };
    let max_build = schedule.budgets().max_page_bytes.min(INLINE_BUILD_BYTES);
    let max_result_bytes = schedule.budgets().max_result_bytes;
    // Each partition read is admitted by its fragment's pool, as its
    // pages would be, for the few microseconds this takes (a response
    // page: pushing a row never waits).
    let _admitted = scans
        .iter()
        .filter(|scan| !scan.done)
        .map(|scan| schedule.admit(scan.fragment))
        .collect::<Result<Vec<_>, _>>()?;
    // After `open`, every partition resumes at the same position.
    let mut passed: Option<Arc<str>> = scans.iter().find_map(|s| s.emitted_to.clone());
    let mut merge = Merge {
        walks: scans
            .iter()
            .map(|scan| match (&scan.snapshot, scan.done) {
                (Some(snapshot), false) => {
                    Some(Walk::new(page_plan, snapshot, scan.resume_after.as_deref()))
                }
                _ => None,
            })
            .collect(),
        fragments: scans.iter().map(|scan| scan.fragment).collect(),
        tournament: Tournament {
            heads: scans.iter().map(|_| None).collect(),
            keys: vec![None; scans.len()],
            losers: Vec::new(),
            descending: plan.strategy == Strategy::KeyMerge { descending: true },
        },
        snapshot_ms: schedule.snapshot_ms(),
        visited: 0,
    };
    let mut bounded = false;
    for i in 0..scans.len() {
        bounded |= !merge.advance(i, &mut allowance);
    }
    merge.tournament.build();
    // A plan that only reads columns, without a filter, needs no
    // evaluation: the rows it passes are their key, kept borrowed.
    let columns = match &page_plan.shape {
        Shape::Rows { projection } if page_plan.filter.is_none() => bare_columns(projection),
        _ => None,
    };
    let mut last: Option<&str> = None;
    // Sized by the first batch's rows wanted (a LIMIT 10 page touches 10
    // rows' worth, not `BATCH`).
    let mut batch: Vec<ScanRow<'_>> = Vec::new();
    let mut out = PageOutput::default();
    let end = loop {
        let wanted = plan
            .window
            .remaining
            .map(|r| r.saturating_sub(progress.returned));
        if wanted == Some(0) {
            break End::Complete;
        }
        // Rows this batch may need: those still to skip, then at most a
        // response's worth (the LIMIT's rest if smaller).
        let response = wanted.map_or(plan.page_size as u64, |w| w.min(plan.page_size as u64));
        let want = usize::try_from(progress.to_skip.saturating_add(response))
            .unwrap_or(usize::MAX)
            .clamp(1, BATCH);
        sink.reserve(want);
        batch.reserve(want);
        // Once a walk stopped short of its next record, no row may follow:
        // that record could come first.
        while batch.len() < want && !bounded {
            let Some(next) = merge.tournament.winner() else {
                break;
            };
            let row = merge.tournament.heads[next].take();
            batch.push(row.expect("the winner has a record"));
            bounded = !merge.advance(next, &mut allowance);
            merge.tournament.replay(next);
        }
        if batch.is_empty() {
            break if merge.tournament.winner().is_none() && !bounded {
                End::Complete
            } else {
                End::Bounded
            };
        }
        if let Some(columns) = &columns {
            // Only columns, no filter: each row's values straight from its
            // record, in merge order.
            let mut full = false;
            for row in batch.drain(..) {
                if plan
                    .window
                    .remaining
                    .is_some_and(|r| progress.returned >= r)
                {
                    break;
                }
                let values: Vec<Value> = columns.iter().map(|c| row.column(*c)).collect();
                if progress.to_skip == 0
                    && !sink.has_room(&values, plan.page_size, max_result_bytes)?
                {
                    full = true;
                    break;
                }
                last = Some(row.key_str());
                if progress.to_skip > 0 {
                    progress.to_skip -= 1;
                    continue;
                }
                if let Some(values) = sink.push_now(values)? {
                    sink.push(values).await?;
                }
                progress.returned += 1;
            }
            if full {
                break End::Full;
            }
            continue;
        }
        let mut meter = Meter::new(max_build);
        match evaluate(page_plan, &mut batch, &mut out, &mut meter) {
            Ok(()) => {}
            // Too much built for inline work: the pages redo this batch.
            Err(EvalError::OverBudget(_)) => break End::Bounded,
            Err(e) => return Err(error::page(e)),
        }
        let mut full = false;
        for row in out.rows.drain(..) {
            if plan
                .window
                .remaining
                .is_some_and(|r| progress.returned >= r)
            {
                break;
            }
            if progress.to_skip == 0
                && !sink.has_room(&row.values, plan.page_size, max_result_bytes)?
            {
                full = true;
                break;
            }
            passed = Some(row.key);
            if progress.to_skip > 0 {
                progress.to_skip -= 1;
                continue;
            }
            if let Some(values) = sink.push_now(row.values)? {
                sink.push(values).await?;
            }
            progress.returned += 1;
        }
        if full {
            break End::Full;
        }
    };
    let visited = merge.visited;
    if let End::Complete = end {
        // No cursor to seal and nothing handed over: the partitions'
        // positions are not set (no key copied, and no reference count
        // taken and given back twice per partition).
        schedule.count_visits(1, visited)?;
        return Ok(Outcome::Done(None));
    }
    if let Some(last) = last {
        passed = Some(Arc::from(last));
    }
    schedule.count_visits(1, visited)?;
    // Every partition goes on after the last row passed: rows taken past
    // it (a batch not all returned, records visited ahead) are read again.
    for scan in scans.iter_mut().filter(|scan| !scan.done) {
        scan.resume_after.clone_from(&passed);
        scan.emitted_to.clone_from(&passed);
    }
    // Full or bounded: complete answers returned above.
    Ok(if let End::Full = end {
        let emitted = plan.window.emitted + progress.returned;
        Outcome::Done(Some(sealer.seal(scan::positions(scans), emitted)))
    } else {
        Outcome::HandedOver
    })
}

/// Why the merge loop ended.
enum End {
    /// No row is left, or the LIMIT is reached.
    Complete,
    /// The response page is full.
    Full,
    /// The inline bounds are reached.
    Bounded,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merge `partitions` (each in the merge's order) through a tournament.
    fn merged(partitions: &[Vec<String>], descending: bool) -> Vec<String> {
        let mut next = vec![0usize; partitions.len()];
        let mut tournament = Tournament {
            heads: partitions.iter().map(|_| None).collect(),
            keys: partitions
                .iter()
                .map(|p| p.first().map(String::as_str))
                .collect(),
            losers: Vec::new(),
            descending,
        };
        tournament.build();
        let mut out = Vec::new();
        while let Some(i) = tournament.winner() {
            out.push(partitions[i][next[i]].clone());
            next[i] += 1;
            tournament.keys[i] = partitions[i].get(next[i]).map(String::as_str);
            tournament.replay(i);
        }
        out
    }

    #[test]
    fn a_tournament_merges_any_number_of_partitions_in_key_order_both_ways() {
        let mut seed = 0x2545_f491_u64;
        for k in 0..=17 {
            for descending in [false, true] {
                // Unique keys spread over `k` partitions at random, some
                // partitions empty.
                let mut partitions = vec![Vec::new(); k];
                let mut all = Vec::new();
                for n in 0..(k * 7) {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    let key = format!("{:08}-{n}", seed >> 40);
                    partitions[(seed >> 20) as usize % k].push(key.clone());
                    all.push(key);
                }
                all.sort();
                for partition in &mut partitions {
                    partition.sort();
                    if descending {
                        partition.reverse();
                    }
                }
                if descending {
                    all.reverse();
                }
                assert_eq!(merged(&partitions, descending), all, "{k} partitions");
            }
        }
    }
}
