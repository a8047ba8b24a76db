//! Per-partition scan state: opened from the partitions' snapshots and,
//! on a continuation, the positions its cursor recorded (checking guarded
//! continuations); turned back into positions when a response is sealed.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use ebb_proto::query::v1 as pb;

use super::Consistency;
use super::cursor::InvalidCursor;
use super::error::QueryError;
use super::page::OutRow;
use super::physical::{PhysicalPlan, Strategy};
use super::remote::{self, OpenRequest, Opened, RemoteScan};
use crate::fragment::Fragment;
use crate::fragment::partition::PartitionSnapshot;
use crate::names::TableName;

/// One partition's scan state.
pub(crate) struct Scan {
    pub fragment: u32,
    /// The partition's snapshot, when this member holds the fragment.
    pub snapshot: Option<PartitionSnapshot>,
    /// The scan pinned on the member that leads the fragment, when this
    /// member holds no replica of it (in a cluster).
    pub remote: Option<RemoteScan>,
    /// Records visible in the snapshot.
    pub visible: usize,
    pub revision: u64,
    pub incarnation: u64,
    pub resume_after: Option<Arc<str>>,
    pub done: bool,
    /// Rows fetched and not yet handed on (the key-order merge).
    pub buffer: VecDeque<OutRow>,
    /// Resume point for a continuation: the last key handed on (or the start).
    pub emitted_to: Option<Arc<str>>,
    /// Records the next page may visit: starts at the first page's visits
    /// and doubles with every page up to the maximum page visit budget.
    pub budget: usize,
}

/// The snapshot of `table`'s partition in `fragment` at `snapshot_ms`.
pub(crate) fn snapshot(
    fragment: &Fragment,
    table: &str,
    snapshot_ms: u64,
) -> Option<PartitionSnapshot> {
    // A name that cannot be a table has no records.
    let table = TableName::new(table).ok()?;
    fragment.state().snapshot(&table, snapshot_ms)
}

/// Open the scan of every partition `plan` reads, at `snapshot_ms`: from
/// this member's snapshot, or (in a cluster, `remote`) pinned on the leader
/// of a fragment held elsewhere, all opened at once. On a continuation
/// (`previous`), a guarded one fails with `QueryChanged` when a partition
/// it recorded changed since; the key-order merge resumes every partition
/// after the last key returned, the buffered strategies start over (they
/// recompute the result).
pub(crate) async fn open(
    plan: &PhysicalPlan,
    fragments: &[Fragment],
    previous: &[pb::PartitionCursor],
    snapshot_ms: u64,
    remote: Option<&OpenRequest<'_>>,
) -> Result<Vec<Scan>, QueryError> {
    let resumes: HashMap<u32, &pb::PartitionCursor> =
        previous.iter().map(|p| (p.fragment, p)).collect();
    if plan
        .fragments
        .iter()
        .any(|f| *f as usize >= fragments.len())
    {
        return Err(InvalidCursor("it names a fragment this node does not have".into()).into());
    }
    let merge = matches!(plan.strategy, Strategy::KeyMerge { .. });
    let descending = plan.strategy == Strategy::KeyMerge { descending: true };
    let mut opened: HashMap<u32, Opened> = HashMap::new();
    if let Some(request) = remote {
        let elsewhere: Vec<u32> = plan
            .fragments
            .iter()
            .copied()
            .filter(|f| !request.cluster.holds(*f))
            .collect();
        let opens = elsewhere.iter().map(|f| remote::open(request, *f));
        let answers = futures::future::try_join_all(opens).await?;
        opened.extend(elsewhere.into_iter().zip(answers));
    }
    // A name that cannot be a table has no records.
    let table = TableName::new(&plan.logical.table).ok();
    let mut scans = Vec::with_capacity(plan.fragments.len());
    for &fragment in &plan.fragments {
        // (An empty map is not asked: removing hashes the key first.)
        let elsewhere = if opened.is_empty() {
            None
        } else {
            opened.remove(&fragment)
        };
        let (snapshot, remote, revision, incarnation, visible) = match elsewhere {
            Some(o) => (None, o.remote, o.revision, o.incarnation, o.visible),
            None => {
                let snapshot = table.as_ref().and_then(|table| {
                    fragments[fragment as usize]
                        .state()
                        .snapshot(table, snapshot_ms)
                });
                let (revision, incarnation, visible) = snapshot
                    .as_ref()
                    .map_or((0, 0, 0), |s| (s.revision, s.incarnation, s.visible));
                (snapshot, None, revision, incarnation, visible)
            }
        };
        // Pushed first and set in place: a scan is a few hundred bytes, and
        // building it apart copied it into the vector (twice) per partition.
        scans.push(Scan {
            fragment,
            snapshot,
            remote,
            visible,
            revision,
            incarnation,
            resume_after: None,
            done: false,
            buffer: VecDeque::new(),
            emitted_to: None,
            budget: plan.first_page_visits,
        });
        let scan = scans.last_mut().expect("a scan was just pushed");
        if let Some(previous) = resumes.get(&fragment) {
            if plan.consistency == Consistency::Guarded
                && (previous.revision, previous.incarnation) != (revision, incarnation)
            {
                return Err(QueryError::QueryChanged { fragment });
            }
            if merge {
                scan.resume_after = previous.resume_after.as_deref().map(Arc::from);
                scan.emitted_to = scan.resume_after.clone();
                scan.done = previous.done;
            }
        } else if plan.continuing && merge {
            // A continuation only revisits the partitions it recorded.
            scan.done = true;
        }
        if scan.snapshot.is_none() && scan.remote.is_none() {
            scan.done = true;
        }
    }
    if merge {
        // Every partition continues after the last key returned (in the
        // merge's direction), not after its own last one. Unchanged data
        // has no unreturned key before that position, so guarded pages are
        // the same; a relaxed continuation skips keys written behind it
        // since, rather than returning them out of key order.
        let positions = scans.iter().filter_map(|s| s.resume_after.clone());
        let position = if descending {
            positions.min()
        } else {
            positions.max()
        };
        for scan in &mut scans {
            scan.resume_after.clone_from(&position);
            scan.emitted_to.clone_from(&position);
        }
    }
    Ok(scans)
}

/// Where every partition stands, for a cursor.
pub(crate) fn positions(scans: &[Scan]) -> Vec<pb::PartitionCursor> {
    scans
        .iter()
        .map(|scan| pb::PartitionCursor {
            fragment: scan.fragment,
            resume_after: scan.emitted_to.as_deref().map(str::to_string),
            revision: scan.revision,
            incarnation: scan.incarnation,
            done: scan.done && scan.buffer.is_empty(),
        })
        .collect()
}
