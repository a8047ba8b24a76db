//! Serving other members' pages (in a cluster): a scan is planned and its
//! partition's snapshot pinned when it opens, its pages run on the query
//! threads like local ones, and pinned scans are bounded in number and
//! dropped once idle.
//!
//! Holding a snapshot costs little (it shares the partition's persistent
//! map) but keeps records that writes replaced alive, so a scan lives at
//! most [`PINNED_IDLE`] after its last page and a member pins at most
//! [`MAX_PINNED`] at once; past that, opens are shed as `overloaded`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ebb_proto::query::v1 as pb;
use ebb_query::Plan;

use super::context::ExecContext;
use super::error::QueryError;
use super::page::PageBudget;
use super::remote::{error_to_proto, output_to_proto};
use super::scan;
use super::schedule::{PageInput, run_admitted};
use super::versions;
use crate::codec::from_proto;
use crate::fragment::partition::PartitionSnapshot;

/// Most scans one member keeps pinned for others.
pub const MAX_PINNED: usize = 1024;
/// How long a pinned scan outlives its last page (beyond the default
/// query timeout of 30 s, so a running query never loses its scan).
pub const PINNED_IDLE: Duration = Duration::from_secs(60);

/// One pinned scan.
struct Pinned {
    plan: Arc<Plan>,
    snapshot: PartitionSnapshot,
    fragment: u32,
    snapshot_ms: u64,
    used: Instant,
}

/// The scans this member pinned for other members' queries.
#[derive(Default)]
pub struct PinnedScans {
    scans: parking_lot::Mutex<HashMap<u64, Pinned>>,
}

impl PinnedScans {
    /// Scans pinned now.
    pub fn len(&self) -> usize {
        self.scans.lock().len()
    }

    /// Whether none is pinned.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pin `pinned`, dropping idle scans first; `None` when
    /// [`MAX_PINNED`] are still in use.
    fn pin(&self, pinned: Pinned) -> Option<u64> {
        let mut scans = self.scans.lock();
        let now = Instant::now();
        scans.retain(|_, s| now.duration_since(s.used) < PINNED_IDLE);
        if scans.len() >= MAX_PINNED {
            return None;
        }
        let mut id = rand::random::<u64>();
        while id == 0 || scans.contains_key(&id) {
            id = rand::random();
        }
        scans.insert(id, pinned);
        Some(id)
    }

    /// What a page of scan `id` reads, marking it used.
    fn get(&self, id: u64) -> Option<(Arc<Plan>, PartitionSnapshot, u32, u64)> {
        let mut scans = self.scans.lock();
        let pinned = scans.get_mut(&id)?;
        if pinned.used.elapsed() >= PINNED_IDLE {
            scans.remove(&id);
            return None;
        }
        pinned.used = Instant::now();
        Some((
            pinned.plan.clone(),
            pinned.snapshot.clone(),
            pinned.fragment,
            pinned.snapshot_ms,
        ))
    }

    fn drop_scan(&self, id: u64) {
        self.scans.lock().remove(&id);
    }
}

fn failed(error: &QueryError) -> pb::PageResponse {
    pb::PageResponse {
        error: Some(error_to_proto(error)),
        ..Default::default()
    }
}

/// Open or continue the scan `request` asks for (see `ebb.query.v1.
/// PageRequest.scan`). The caller admitted the request and, for an open,
/// confirmed that this member leads the fragment. Failures travel in the
/// response's `error`.
pub(crate) async fn serve_page(
    ctx: &ExecContext<'_>,
    pinned: &PinnedScans,
    request: pb::PageRequest,
) -> pb::PageResponse {
    let result = if request.scan == 0 {
        open(ctx, pinned, request)
    } else {
        next_page(ctx, pinned, request).await
    };
    result.unwrap_or_else(|error| failed(&error))
}

fn open(
    ctx: &ExecContext<'_>,
    pinned: &PinnedScans,
    request: pb::PageRequest,
) -> Result<pb::PageResponse, QueryError> {
    let fragment = request.fragment;
    if fragment >= ctx.fragment_count() {
        return Err(QueryError::Internal(format!(
            "fragment {fragment} does not exist here ({} fragments)",
            ctx.fragment_count()
        )));
    }
    let params = request
        .params
        .iter()
        .map(from_proto)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| QueryError::Internal(format!("a malformed parameter: {e}")))?;
    let (plan, uses) = versions::plan(&request.sql, &params, &ctx.functions(), ctx.plugins)?;
    let asked = versions::from_proto(&request.plugins);
    // The same versions both ways: a plugin this member runs at another
    // version, or one the requester's plan does not call.
    if let Some(changed) = versions::change(&asked, &uses).or(versions::change(&uses, &asked)) {
        return Err(changed);
    }
    let Some(snapshot) = scan::snapshot(
        &ctx.fragments[fragment as usize],
        &plan.table,
        request.snapshot_ms,
    ) else {
        return Ok(pb::PageResponse {
            done: true,
            ..Default::default()
        });
    };
    let (revision, incarnation, visible) =
        (snapshot.revision, snapshot.incarnation, snapshot.visible);
    let id = pinned
        .pin(Pinned {
            // A join's pages scan its first table; the requester joins.
            plan: Arc::new(plan.scan_plan()),
            snapshot,
            fragment,
            snapshot_ms: request.snapshot_ms,
            used: Instant::now(),
        })
        .ok_or_else(|| {
            QueryError::Overloaded(format!(
                "this member holds {MAX_PINNED} scans for other members' queries (its limit); retry shortly"
            ))
        })?;
    Ok(pb::PageResponse {
        scan: id,
        revision,
        incarnation,
        visible: visible as u64,
        ..Default::default()
    })
}

async fn next_page(
    ctx: &ExecContext<'_>,
    pinned: &PinnedScans,
    request: pb::PageRequest,
) -> Result<pb::PageResponse, QueryError> {
    let id = request.scan;
    if request.visit_budget == 0 {
        // The requester's query ended before the scan's last page.
        pinned.drop_scan(id);
        return Ok(pb::PageResponse {
            done: true,
            ..Default::default()
        });
    }
    let Some((plan, snapshot, fragment, snapshot_ms)) = pinned.get(id) else {
        return Ok(pb::PageResponse {
            error: Some(pb::PageError {
                kind: pb::page_error::Kind::ScanGone as i32,
                message: format!(
                    "no scan {id} is pinned here (a scan is dropped {} s after its last page)",
                    PINNED_IDLE.as_secs()
                ),
                ..Default::default()
            }),
            ..Default::default()
        });
    };
    let budgets = &ctx.budgets;
    let max_bytes = match request.max_bytes as usize {
        0 => budgets.max_page_bytes,
        asked => asked.min(budgets.max_page_bytes),
    };
    let budget = PageBudget::new(
        (request.visit_budget as usize).clamp(1, budgets.max_page_visit_budget),
        max_bytes,
    );
    let input = PageInput {
        plan,
        snapshot,
        fragment,
        resume_after: request.resume_after.map(Arc::from),
        budget,
        snapshot_ms,
    };
    let output = run_admitted(
        &ctx.fragments[fragment as usize],
        ctx.plugins.runtime(),
        input,
    )
    .await?;
    if output.done {
        pinned.drop_scan(id);
    }
    Ok(output_to_proto(output))
}
