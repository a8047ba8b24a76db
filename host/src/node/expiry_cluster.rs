//! Expiry handlers on a cluster member: binding changes committed in the
//! metadata group, the dispatcher told which fragments this member leads,
//! its settlements proposed to each fragment's group, and redrives,
//! discards and dead-letter listings of a table's events carried out by
//! each fragment's leader.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::Node;
use super::inner::NodeInner;
use crate::cluster::{
    Cluster, ClusterError, MetaCommand, MetaOutcome, OutboxAction, OutboxDone, OutboxRequest,
    OutboxServer,
};
use crate::expiry::command::Command;
use crate::expiry::entries::{
    self, DeadLetterPage, MAX_DEAD_LETTER_PAGE, MAX_DEAD_LETTER_PAGE_BYTES,
};
use crate::expiry::outbox::Outbox;
use crate::expiry::settle::Settler;
use crate::expiry::{Binding, ExpiryError, binding};
use crate::names::TableName;
use crate::store::{FamilyWrite, KvStore};

/// Commit a binding change in the metadata group: what applying it
/// answered, a failure as the error it stands for.
pub(super) async fn change_metadata(
    cluster: &Cluster,
    command: MetaCommand,
) -> Result<MetaOutcome, ExpiryError> {
    let change =
        cluster
            .change_metadata(command)
            .await
            .map_err(|error| ExpiryError::Unavailable {
                code: match error {
                    ClusterError::MetaNoQuorum { .. } | ClusterError::NoQuorum { .. } => {
                        "no_quorum"
                    }
                    _ => "unavailable",
                }
                .to_string(),
                message: error.to_string(),
            })?;
    match change.outcome {
        MetaOutcome::Failed { code, message } => Err(ExpiryError::from_contract(&code, message)),
        outcome => Ok(outcome),
    }
}

pub(super) fn decode_binding(bytes: &[u8]) -> Result<Binding, ExpiryError> {
    serde_json::from_slice(bytes).map_err(|e| ExpiryError::Unavailable {
        code: "unavailable".into(),
        message: format!("the metadata group answered a binding that does not decode: {e}"),
    })
}

pub(super) fn unexpected_outcome(outcome: MetaOutcome) -> ExpiryError {
    ExpiryError::Unavailable {
        code: "unavailable".into(),
        message: format!("the metadata group answered {outcome:?}"),
    }
}

/// How often a cluster member looks for fragments it started or stopped
/// leading.
const LEADERSHIP_POLL: Duration = Duration::from_millis(100);

/// Tell the dispatcher which fragments this member leads, for as long as
/// the cluster runs: a fragment it starts leading is taken over once this
/// member applied every earlier entry (its stored events, same ids, are
/// delivered again); one it stops leading is forgotten.
pub(super) async fn follow_leadership(
    cluster: Weak<Cluster>,
    outbox: Arc<Outbox>,
    store: Weak<dyn KvStore>,
) {
    let mut led: std::collections::BTreeSet<u32> = std::collections::BTreeSet::new();
    loop {
        tokio::time::sleep(LEADERSHIP_POLL).await;
        // The dispatcher stopped (shutdown): nothing left to tell.
        let (true, Some(cluster)) = (outbox.is_open(), cluster.upgrade()) else {
            return;
        };
        let now: std::collections::BTreeSet<u32> = cluster.led_fragments().into_iter().collect();
        for lost in led.difference(&now) {
            if !outbox.send(Command::Forget(*lost)) {
                return;
            }
        }
        for gained in now.difference(&led) {
            let fragment = *gained;
            if !outbox.send(Command::Lead(fragment)) {
                return;
            }
            let (cluster, outbox, store) = (cluster.clone(), outbox.clone(), store.clone());
            tokio::spawn(async move {
                // Retry until caught up, unless leadership moves on (the
                // next poll then forgets the fragment) or the node stops.
                while outbox.is_open() && cluster.led_fragments().contains(&fragment) {
                    if cluster.caught_up_as_leader(fragment).await {
                        let Some(store) = store.upgrade() else {
                            return; // The node closed its store.
                        };
                        let loaded = tokio::task::spawn_blocking(move || {
                            entries::load_fragment_outbox(&*store, fragment)
                        })
                        .await;
                        match loaded {
                            Ok(Ok(events)) => {
                                outbox.send(Command::Takeover(fragment, events));
                                return;
                            }
                            Ok(Err(error)) => {
                                tracing::warn!(fragment, %error, "cannot load the outbox of a fragment this member now leads; retrying");
                            }
                            Err(error) => {
                                tracing::warn!(fragment, %error, "loading the outbox failed; retrying");
                            }
                        }
                    }
                    tokio::time::sleep(LEADERSHIP_POLL).await;
                }
            });
        }
        led = now;
    }
}

/// The dispatcher's settler on a cluster member: a `Settle` command
/// proposed by the fragment's leader, so every replica removes the same
/// events (the fsync flag is the group's: its log entry is as durable as
/// its writes).
pub(super) struct ClusterSettler(pub(super) Arc<Cluster>);

impl Settler for ClusterSettler {
    fn settle(
        &self,
        fragment: u32,
        writes: Vec<crate::store::FamilyWrite>,
        _sync: bool,
    ) -> BoxFuture<'static, Result<(), String>> {
        let cluster = self.0.clone();
        Box::pin(async move { cluster.settle(fragment, writes).await })
    }
}

/// Carry out `action` on `table`'s events in every fragment, each by its
/// leader, one fragment after another. A redrive without ids moves at most
/// [`entries::MAX_REDRIVE`] events in all; once it did, the fragments left
/// are only asked whether they hold more (a limit of 0 moves nothing). The
/// first failure ends it: what earlier fragments did stays done, and
/// repeating the request is safe.
pub(super) async fn on_every_fragment(
    cluster: &Cluster,
    fragments: u32,
    table: &TableName,
    action: OutboxAction,
) -> Result<OutboxDone, ExpiryError> {
    let mut total = OutboxDone::default();
    for fragment in 0..fragments {
        let action = match &action {
            OutboxAction::Redrive { ids: None, limit } => {
                if total.more && total.count >= *limit {
                    break; // Known: more remain beyond this redrive.
                }
                OutboxAction::Redrive {
                    ids: None,
                    limit: limit.saturating_sub(total.count),
                }
            }
            other => other.clone(),
        };
        let done = cluster
            .on_outbox_leader(OutboxRequest {
                table: table.clone(),
                fragment,
                action,
            })
            .await?;
        total.count += done.count;
        total.more |= done.more;
    }
    Ok(total)
}

/// The first `limit` dead letters of `table` after `after` across every
/// fragment, in id order: each fragment's leader lists its own (after a
/// read index, so the listing holds every dead letter committed before
/// the request; each within its share of the page's bytes), all
/// fragments at once, merged by id. Events belong to one fragment each,
/// so no id comes twice. A fragment that has more than it listed may hold
/// ids between its last and the others', so the page ends at the least
/// such last id, and `next` is set.
pub(super) async fn list_dead_letters(
    cluster: &Cluster,
    fragments: u32,
    table: &TableName,
    after: Option<Vec<u8>>,
    limit: usize,
) -> Result<DeadLetterPage, ExpiryError> {
    let pages = futures::future::try_join_all((0..fragments).map(|fragment| {
        cluster.on_outbox_leader(OutboxRequest {
            table: table.clone(),
            fragment,
            action: OutboxAction::ListDeadLetters {
                after: after.clone(),
                limit,
            },
        })
    }))
    .await?;
    Ok(merge_dead_letters(pages, limit))
}

/// One page of at most `limit` dead letters from each fragment's page
/// (see [`list_dead_letters`]).
fn merge_dead_letters(pages: Vec<OutboxDone>, limit: usize) -> DeadLetterPage {
    let mut cutoff: Option<Vec<u8>> = None;
    let mut events = Vec::new();
    for page in pages {
        if page.more
            && let Some(last) = page.listed.last()
            && cutoff.as_deref().is_none_or(|cut| last.id() < cut)
        {
            cutoff = Some(last.id().to_vec());
        }
        events.extend(page.listed);
    }
    events.sort_by(|a, b| a.id().cmp(b.id()));
    let mut more = cutoff.is_some();
    if let Some(cut) = &cutoff {
        events.retain(|event| event.id() <= cut.as_slice());
    }
    if events.len() > limit {
        events.truncate(limit);
        more = true;
    }
    let next = more
        .then(|| events.last().map(|e| crate::hex::encode(e.id())))
        .flatten();
    DeadLetterPage { events, next }
}

/// The node's expiry machinery as an [`OutboxServer`]: redrives and
/// discards of the fragments this member leads. Holds the node weakly
/// (the cluster it is registered with belongs to the node).
pub(crate) struct NodeOutboxes {
    node: Weak<NodeInner>,
}

impl NodeOutboxes {
    /// Serve outbox requests over `node`.
    pub(crate) fn new(node: &Arc<NodeInner>) -> Self {
        Self {
            node: Arc::downgrade(node),
        }
    }
}

fn refused(code: &str, message: impl ToString) -> ClusterError {
    ClusterError::Refused {
        code: code.into(),
        message: message.to_string(),
    }
}

impl OutboxServer for NodeOutboxes {
    fn serve(&self, request: OutboxRequest) -> BoxFuture<'_, Result<OutboxDone, ClusterError>> {
        Box::pin(async move {
            let inner = self
                .node
                .upgrade()
                .ok_or_else(|| refused("shutting_down", "the node is shutting down"))?;
            let node = Node { inner };
            let _admitted = node
                .inner
                .gate
                .admit()
                .ok_or_else(|| refused("shutting_down", "the node is shutting down"))?;
            let (Some(cluster), Some(fragment)) = (
                node.inner.cluster.clone(),
                node.inner.fragments.get(request.fragment as usize),
            ) else {
                return Err(refused(
                    "invalid_request",
                    format!(
                        "fragment {} is not a fragment of this cluster",
                        request.fragment
                    ),
                ));
            };
            // Applied settlements and events wait in the write buffer:
            // write them first, so the store holds every one to read.
            fragment
                .state()
                .persistence()
                .flush()
                .await
                .map_err(|error| refused("not_durable", error))?;
            let (table, fragment) = (request.table, request.fragment);
            let outbox = node.inner.outbox.clone();
            let (writes, revived, count, more) = match request.action {
                OutboxAction::ListDeadLetters { after, limit } => {
                    if !(1..=MAX_DEAD_LETTER_PAGE).contains(&limit) {
                        return Err(refused(
                            "invalid_request",
                            format!("a listing takes 1 to {MAX_DEAD_LETTER_PAGE} dead letters"),
                        ));
                    }
                    // The asking member merges every fragment's answer
                    // into one page: each takes its share of the page's
                    // bytes.
                    let max_bytes = MAX_DEAD_LETTER_PAGE_BYTES / node.inner.meta.fragments as usize;
                    let (listed, more) = node
                        .blocking_expiry(move |_, store| {
                            entries::fragment_dead_letters(
                                &*store,
                                &table,
                                fragment,
                                after.as_deref(),
                                limit,
                                max_bytes,
                            )
                            .map_err(ExpiryError::from)
                        })
                        .await
                        .map_err(|error| refused(error.contract_code(), &error))?;
                    return Ok(OutboxDone {
                        count: listed.len(),
                        more,
                        listed,
                    });
                }
                OutboxAction::Redrive { ids, limit } => {
                    // The asking member keeps to these limits; a request
                    // off the wire that does not is refused, never served.
                    if limit > entries::MAX_REDRIVE
                        || ids
                            .as_ref()
                            .is_some_and(|ids| ids.len() > entries::MAX_REDRIVE)
                    {
                        return Err(refused(
                            "invalid_request",
                            format!("one redrive moves at most {} events", entries::MAX_REDRIVE),
                        ));
                    }
                    if !outbox.is_bound(&table) {
                        return Err(refused("conflict", binding::unbound_redrive(&table)));
                    }
                    let read = table.clone();
                    let (dead, more) = node
                        .blocking_expiry(move |_, store| {
                            entries::dead_letters_to_redrive(
                                &*store,
                                &read,
                                Some(fragment),
                                ids.as_deref(),
                                limit,
                            )
                            .map_err(ExpiryError::from)
                        })
                        .await
                        .map_err(|error| refused(error.contract_code(), &error))?;
                    let (writes, revived) = entries::revive(dead, || outbox.next_seq());
                    let count = revived.len();
                    (writes, revived, count, more)
                }
                OutboxAction::Discard => {
                    // Nothing of the table is delivered from now on here;
                    // a batch in flight is deleted when it ends.
                    let (reply, purged) = oneshot::channel();
                    if outbox.send(Command::Purge(table.clone(), reply)) {
                        let _ = purged.await;
                    }
                    let read = table.clone();
                    let pending = node
                        .blocking_expiry(move |_, store| {
                            entries::pending_of(&*store, &read, fragment).map_err(ExpiryError::from)
                        })
                        .await
                        .map_err(|error| refused(error.contract_code(), &error))?;
                    let count = pending.len();
                    let writes = pending
                        .iter()
                        .map(|event| {
                            FamilyWrite::Delete(
                                crate::store::Family::ExpiryOutbox,
                                event.key.clone(),
                            )
                        })
                        .collect();
                    (writes, Vec::new(), count, false)
                }
            };
            if !writes.is_empty() {
                cluster
                    .settle(fragment, writes)
                    .await
                    .map_err(|message| refused("unavailable", message))?;
            }
            if !revived.is_empty() {
                if let Some(stats) = outbox.existing_stats(&table) {
                    let _ = stats.dead_letters.fetch_update(
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                        |n| Some(n.saturating_sub(revived.len() as u64)),
                    );
                }
                outbox.deliver(revived);
            }
            Ok(OutboxDone {
                count,
                more,
                listed: Vec::new(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expiry::entries::test_dead_letter;
    use crate::store::PendingEvent;

    fn dead(key: &str) -> PendingEvent {
        test_dead_letter(&TableName::new("t").unwrap(), key)
    }

    fn by_id(mut events: Vec<PendingEvent>) -> Vec<PendingEvent> {
        events.sort_by(|a, b| a.id().cmp(b.id()));
        events
    }

    fn page(listed: Vec<PendingEvent>, more: bool) -> OutboxDone {
        OutboxDone {
            count: listed.len(),
            more,
            listed,
        }
    }

    #[test]
    fn a_merged_page_ends_where_a_fragment_with_more_stopped() {
        let a = by_id((0..6).map(|i| dead(&format!("a{i}"))).collect());
        let b = by_id((0..6).map(|i| dead(&format!("b{i}"))).collect());
        // Fragment A listed its first three and has more; B listed all.
        let merged = merge_dead_letters(
            vec![page(a[..3].to_vec(), true), page(b.clone(), false)],
            100,
        );
        let cut = a[2].id().to_vec();
        let expected: Vec<Vec<u8>> = by_id(a[..3].iter().chain(&b).cloned().collect())
            .iter()
            .map(|e| e.id().to_vec())
            .filter(|id| *id <= cut)
            .collect();
        let got: Vec<Vec<u8>> = merged.events.iter().map(|e| e.id().to_vec()).collect();
        assert_eq!(got, expected, "nothing past A's last listed id");
        assert_eq!(merged.next, Some(crate::hex::encode(&cut)));

        // Everything listed, nothing more: one page, no `next`.
        let whole = merge_dead_letters(vec![page(a.clone(), false), page(b.clone(), false)], 100);
        assert_eq!(whole.events.len(), 12);
        assert_eq!(whole.next, None);
        // Past the limit: the first `limit` by id, and `next`.
        let all = by_id(a.iter().chain(&b).cloned().collect());
        let limited = merge_dead_letters(vec![page(a, false), page(b, false)], 5);
        assert_eq!(limited.events, all[..5].to_vec());
        assert_eq!(limited.next, Some(crate::hex::encode(all[4].id())));
    }
}
