//! The dispatcher task: one per node. It owns the delivery queue of every
//! table partition, answers [`Command`]s, and starts the batches that are
//! due, most lagging partition first, at most `concurrency` at once.
//!
//! In a cluster only the leader of a fragment delivers its events: the
//! dispatcher starts leading no fragment, drops events of fragments it
//! does not lead, and delivers a fragment's events only once it has taken
//! it over ([`Command::Lead`], [`Command::Takeover`], [`Command::Forget`]).
//!
//! Invariants: at most one batch per `(table, fragment)` queue is in flight,
//! so first deliveries of a partition go out in outbox order; an event
//! leaves the outbox only after its handler call succeeded and the call's
//! actions were applied (durably, `wal`); events of an unbound table wait in
//! the outbox. Retries may overtake: a failed event waits out its backoff
//! while later events of its partition flow.

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::binding::Binding;
use super::command::{Command, Finished, QueueStatus};
use super::deliver::{Context, deliver};
use super::queue::{Queue, Slot};
use super::settle::retry_after_host_failure;
use crate::names::TableName;
use crate::store::{Family, FamilyWrite, FragmentId, PendingEvent};

struct Dispatcher {
    ctx: Arc<Context>,
    queues: HashMap<(TableName, FragmentId), Queue>,
    /// In a cluster, the fragments this node leads, and whether each was
    /// taken over (its outbox loaded); `None` on a single node, which
    /// delivers every fragment's events.
    leading: Option<HashMap<FragmentId, bool>>,
    running: usize,
    /// Queues purged while a batch was in flight: the events that batch
    /// does not handle are deleted instead of retried.
    discarding: HashSet<(TableName, FragmentId)>,
}

/// Run the dispatcher until [`Command::Stop`], starting with the events
/// loaded from the outbox at boot. A `replicated` node (a cluster member)
/// starts leading no fragment, so it drops those events.
pub(crate) async fn run(
    ctx: Arc<Context>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    loaded: Vec<PendingEvent>,
    replicated: bool,
) {
    let mut dispatcher = Dispatcher {
        ctx,
        queues: HashMap::new(),
        leading: replicated.then(HashMap::new),
        running: 0,
        discarding: HashSet::new(),
    };
    dispatcher.add(loaded);
    let mut stopping: Option<oneshot::Sender<()>> = None;
    loop {
        let wake = if stopping.is_none() {
            dispatcher.schedule()
        } else if dispatcher.running == 0 {
            if let Some(reply) = stopping.take() {
                let _ = reply.send(());
            }
            return;
        } else {
            None
        };
        let sleep = async move {
            match wake {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            command = commands.recv() => match command {
                None => return,
                Some(Command::Events(events)) => dispatcher.add(events),
                Some(Command::Finished(done)) => dispatcher.finished(done),
                Some(Command::Status(table, reply)) => {
                    let _ = reply.send(dispatcher.status(&table));
                }
                Some(Command::Purge(table, reply)) => {
                    let _ = reply.send(dispatcher.purge(&table));
                }
                Some(Command::Stop(reply)) => stopping = Some(reply),
                Some(Command::Lead(fragment)) => dispatcher.lead(fragment),
                Some(Command::Takeover(fragment, events)) => dispatcher.take_over(fragment, events),
                Some(Command::Forget(fragment)) => dispatcher.forget(fragment),
            },
            _ = sleep => {}
        }
    }
}

impl Dispatcher {
    /// Whether events of `fragment` are accepted here.
    fn accepts(&self, fragment: FragmentId) -> bool {
        self.leading
            .as_ref()
            .is_none_or(|leading| leading.contains_key(&fragment))
    }

    /// Whether events of `fragment` are delivered from here.
    fn delivers(&self, fragment: FragmentId) -> bool {
        self.leading
            .as_ref()
            .is_none_or(|leading| leading.get(&fragment) == Some(&true))
    }

    fn lead(&mut self, fragment: FragmentId) {
        if let Some(leading) = &mut self.leading {
            leading.entry(fragment).or_insert(false);
        }
    }

    /// Add the fragment's stored events not already queued, and start
    /// delivering it. Nothing of it is in flight yet: it was not delivered
    /// before this.
    fn take_over(&mut self, fragment: FragmentId, events: Vec<PendingEvent>) {
        let Some(leading) = &mut self.leading else {
            return;
        };
        let Some(taken) = leading.get_mut(&fragment) else {
            return; // Lost again before the outbox was loaded.
        };
        *taken = true;
        let queued: HashSet<Vec<u8>> = self
            .queues
            .iter()
            .filter(|((_, f), _)| *f == fragment)
            .flat_map(|(_, queue)| {
                queue
                    .fresh
                    .iter()
                    .chain(queue.waiting.values())
                    .map(|slot| slot.event.key.clone())
            })
            .collect();
        let fresh = events
            .into_iter()
            .filter(|event| !queued.contains(&event.key))
            .collect();
        self.add(fresh);
    }

    /// Drop the fragment's queued events; a batch in flight finishes and
    /// retries nothing.
    fn forget(&mut self, fragment: FragmentId) {
        if let Some(leading) = &mut self.leading {
            leading.remove(&fragment);
        }
        self.queues.retain(|(_, f), queue| {
            if *f != fragment {
                return true;
            }
            queue.fresh.clear();
            queue.waiting.clear();
            queue.busy()
        });
    }

    fn add(&mut self, events: Vec<PendingEvent>) {
        let now = Instant::now();
        for event in events {
            let fragment = event.stored.fragment;
            if !self.accepts(fragment) {
                continue; // Another member leads it: its events wait in the outbox.
            }
            self.queues
                .entry((event.table.clone(), fragment))
                .or_default()
                .fresh
                .push_back(Slot::fresh(event, now));
        }
    }

    fn finished(&mut self, done: Finished) {
        if self.discarding.remove(&(done.table.clone(), done.fragment)) && !done.retry.is_empty() {
            // The batch stays in flight until its events are deleted.
            discard(self.ctx.clone(), done);
            return;
        }
        self.running -= 1;
        let retry = if self.accepts(done.fragment) {
            done.retry
        } else {
            Vec::new() // No longer led here: the next leader delivers them.
        };
        self.queues
            .entry((done.table, done.fragment))
            .or_default()
            .finish(done.events, retry);
    }

    fn status(&self, table: &TableName) -> QueueStatus {
        let mut status = QueueStatus::default();
        for ((t, _), queue) in &self.queues {
            if t != table {
                continue;
            }
            status.pending += queue.fresh.len() + queue.waiting.len() + queue.in_flight;
            status.in_flight += queue.in_flight;
            status.backing_off += queue.waiting.len();
            status.oldest_deadline_ms = match (status.oldest_deadline_ms, queue.oldest_deadline()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        status
    }

    fn purge(&mut self, table: &TableName) -> Vec<PendingEvent> {
        let mut purged = Vec::new();
        for ((t, fragment), queue) in self.queues.iter_mut() {
            if t == table {
                if queue.busy() {
                    self.discarding.insert((t.clone(), *fragment));
                }
                purged.extend(queue.fresh.drain(..).map(|slot| slot.event));
                purged.extend(
                    std::mem::take(&mut queue.waiting)
                        .into_values()
                        .map(|slot| slot.event),
                );
            }
        }
        purged
    }

    /// Start every batch that is due, most lagging partition first; returns
    /// when to look again (a linger or backoff ending), if ever.
    fn schedule(&mut self) -> Option<Instant> {
        let now = Instant::now();
        let linger = self.ctx.config.linger;
        let mut next: Option<Instant> = None;
        let mut wake_at = |at: Instant| next = Some(next.map_or(at, |n: Instant| n.min(at)));
        let mut bindings: HashMap<TableName, Option<Binding>> = HashMap::new();
        let mut ready: Vec<(u64, TableName, FragmentId)> = Vec::new();
        for ((table, fragment), queue) in &self.queues {
            if queue.busy() || queue.is_empty() || !self.delivers(*fragment) {
                continue;
            }
            let binding = bindings
                .entry(table.clone())
                .or_insert_with(|| self.ctx.outbox.binding(table));
            let Some(binding) = binding else {
                continue; // Unbound: the events wait in the outbox.
            };
            let retry_due = queue.next_retry();
            let fresh_due = queue.fresh.front().map(|first| {
                if queue.fresh.len() >= binding.max_batch as usize {
                    now
                } else {
                    first.arrived + linger
                }
            });
            match [retry_due, fresh_due].into_iter().flatten().min() {
                Some(due) if due <= now => ready.push((queue.priority(), table.clone(), *fragment)),
                Some(due) => wake_at(due),
                None => {}
            }
        }
        ready.sort();
        for (_, table, fragment) in ready {
            if self.running >= self.ctx.config.concurrency.max(1) {
                break; // A finishing batch wakes the loop.
            }
            let Some(Some(binding)) = bindings.get(&table).cloned() else {
                continue;
            };
            let queue = self
                .queues
                .get_mut(&(table.clone(), fragment))
                .expect("ready queues exist");
            let slots = queue.take_batch(binding.max_batch as usize, now);
            if slots.is_empty() {
                continue;
            }
            queue.start(&slots);
            self.running += 1;
            tokio::spawn(deliver_guarded(
                self.ctx.clone(),
                table,
                fragment,
                binding,
                slots,
            ));
        }
        next
    }
}

/// [`deliver`], reporting back even if it panics. A panic is a failure of
/// the host, not of the handler: the batch's events are retried with
/// backoff as they were before the delivery, charged nothing (an event the
/// delivery had already settled may be delivered again, which at-least-once
/// allows).
async fn deliver_guarded(
    ctx: Arc<Context>,
    table: TableName,
    fragment: FragmentId,
    binding: Binding,
    slots: Vec<Slot>,
) {
    let outbox = ctx.outbox.clone();
    let config = ctx.config;
    let events = slots.len();
    let before = slots.clone();
    let delivery = deliver(ctx, table.clone(), fragment, binding, slots);
    if AssertUnwindSafe(delivery).catch_unwind().await.is_err() {
        tracing::error!(%table, fragment, events, "expiry delivery panicked; retrying its events without charging an attempt");
        *outbox.stats(&table).last_error.lock() =
            Some("the delivery failed on the host (it panicked)".into());
        outbox.send(Command::Finished(Finished {
            table,
            fragment,
            retry: retry_after_host_failure(&config, before),
            events,
        }));
    }
}

/// Delete the events a batch of a purged queue did not handle from the
/// outbox (fsynced, like the purge itself), then report the batch finished
/// with nothing to retry. Should the write fail, they stay in the store
/// and are loaded again at the next boot.
fn discard(ctx: Arc<Context>, mut done: Finished) {
    let events: Vec<PendingEvent> = std::mem::take(&mut done.retry)
        .into_iter()
        .map(|slot| slot.event)
        .collect();
    tokio::spawn(async move {
        let count = events.len();
        let deletes = events
            .iter()
            .map(|event| FamilyWrite::Delete(Family::ExpiryOutbox, event.key.clone()))
            .collect();
        let deleted = ctx.settler.settle(done.fragment, deletes, true).await;
        if let Err(error) = deleted {
            tracing::warn!(table = %done.table, %error, events = count, "cannot discard expiry events; they stay in the outbox until the next boot");
        }
        ctx.outbox.send(Command::Finished(done));
    });
}
