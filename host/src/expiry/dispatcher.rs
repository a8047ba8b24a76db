//! The dispatcher: one task per node that queues outbox events per table
//! partition, forms batches, calls the bound handler, applies its actions
//! and settles each event (deleted, retried later, or dead-lettered).
//!
//! Invariants: at most one batch per `(table, fragment)` queue is in flight,
//! so first deliveries of a partition go out in outbox order; an event
//! leaves the outbox only after its handler call succeeded and the call's
//! actions were applied (durably, `wal`); events of an unbound table wait in
//! the outbox. Retries may overtake: a failed event waits out its backoff
//! while later events of its partition flow.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Weak};
use std::time::Duration;

use ebb_proto::plugin::v1 as abi;
use futures::FutureExt;
use rand::Rng;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::ExpiryConfig;
use super::binding::Binding;
use super::entries;
use super::event::{PendingEvent, dead_letter_key, outbox_seq};
use super::outbox::Outbox;
use crate::clock::now_ms;
use crate::names::{TableName, validate_key};
use crate::node::NodeInner;
use crate::plugin::PluginRegistry;
use crate::store::{Family, FamilyWrite, FragmentId, KvStore};
use crate::write::{BatchOp, Durability, Expiry};
use crate::{Error, Node};

/// A failed batch is retried in pieces of at most `1 / SPLIT` of its size,
/// so a poison event is alone after a few failures (256 → 32 → 4 → 1).
const SPLIT: usize = 8;
/// Tries of the store write that settles a batch before giving up (the
/// events then stay in the outbox and are delivered again after a restart).
const SETTLE_TRIES: u32 = 3;

/// Messages to the dispatcher.
pub enum Command {
    /// Events now durable in the outbox.
    Events(Vec<PendingEvent>),
    /// A batch finished; its events to try again.
    Finished(Finished),
    /// Report on one table's queues.
    Status(TableName, oneshot::Sender<QueueStatus>),
    /// Drop the table's queued events that are not in flight; answers with
    /// them so the caller deletes them from the store. Events of a batch in
    /// flight that are not handled are deleted when it finishes.
    Purge(TableName, oneshot::Sender<Vec<PendingEvent>>),
    /// Stop forming batches; answer once none is in flight.
    Stop(oneshot::Sender<()>),
}

/// A finished batch.
pub struct Finished {
    table: TableName,
    fragment: FragmentId,
    retry: Vec<Slot>,
    events: usize,
}

/// One table's queued events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStatus {
    /// Events in the outbox not yet handled (in flight included).
    pub pending: usize,
    /// Events being delivered now.
    pub in_flight: usize,
    /// Events waiting out a retry delay.
    pub backing_off: usize,
    /// Deadline of the oldest pending event (Unix ms).
    pub oldest_deadline_ms: Option<u64>,
}

/// What a batch needs from the node.
pub(crate) struct Context {
    /// Bindings, statistics, the command channel.
    pub outbox: Arc<Outbox>,
    /// Where events are settled.
    pub store: Arc<dyn KvStore>,
    /// The handlers.
    pub plugins: Arc<PluginRegistry>,
    /// The node, for applying actions through the normal write path.
    pub(crate) node: Weak<NodeInner>,
    /// Pacing.
    pub config: ExpiryConfig,
    /// Deadline of one handler call.
    pub deadline: Duration,
    /// Largest value an action may put.
    pub max_value_bytes: usize,
}

#[derive(Debug)]
struct Slot {
    event: PendingEvent,
    /// Not delivered again before this.
    not_before: Instant,
    /// Most events of the batch this slot may go out in.
    piece: usize,
    arrived: Instant,
    /// Consecutive deliveries that failed on the node's side (not charged
    /// as attempts); paces their retries.
    node_failures: u32,
}

/// Events of one `(table, fragment)`. Every operation the scheduler runs
/// per message is O(1) or O(log n) in the queue's length, so a backlog of
/// any size costs nothing per event beyond its own delivery.
#[derive(Default)]
struct Queue {
    /// Not yet tried, in outbox order (which is close to deadline order).
    fresh: VecDeque<Slot>,
    /// Backing off, by `(not_before, outbox sequence)`.
    waiting: BTreeMap<(Instant, u64), Slot>,
    in_flight: usize,
    oldest_in_flight_ms: Option<u64>,
}

fn deadline(slot: &Slot) -> u64 {
    slot.event.event().expires_at_ms
}

impl Queue {
    fn busy(&self) -> bool {
        self.in_flight > 0
    }

    fn is_empty(&self) -> bool {
        self.fresh.is_empty() && self.waiting.is_empty()
    }

    fn wait(&mut self, slot: Slot) {
        let seq = outbox_seq(&slot.event.key).unwrap_or_default();
        self.waiting.insert((slot.not_before, seq), slot);
    }

    /// When the earliest retry is due.
    fn next_retry(&self) -> Option<Instant> {
        self.waiting.keys().next().map(|(at, _)| *at)
    }

    /// The scheduling priority: deadline of the oldest event at a queue
    /// end (an estimate that costs O(1); lower goes first).
    fn priority(&self) -> u64 {
        [
            self.fresh.front().map(deadline),
            self.waiting.values().next().map(deadline),
            self.oldest_in_flight_ms,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(u64::MAX)
    }

    /// The exact oldest deadline (O(n): for status requests only).
    fn oldest_deadline(&self) -> Option<u64> {
        self.fresh
            .iter()
            .chain(self.waiting.values())
            .map(deadline)
            .chain(self.oldest_in_flight_ms)
            .min()
    }

    /// The next batch: due retries first (in pieces), else fresh events.
    fn take_batch(&mut self, max_batch: usize, now: Instant) -> Vec<Slot> {
        if let Some(first) = self.waiting.values().next()
            && first.not_before <= now
        {
            let limit = first.piece.clamp(1, max_batch);
            let mut batch = Vec::with_capacity(limit.min(self.waiting.len()));
            while batch.len() < limit
                && let Some(entry) = self.waiting.first_entry()
                && entry.key().0 <= now
            {
                batch.push(entry.remove());
            }
            return batch;
        }
        let count = self.fresh.len().min(max_batch);
        self.fresh.drain(..count).collect()
    }
}

struct Dispatcher {
    ctx: Arc<Context>,
    queues: HashMap<(TableName, FragmentId), Queue>,
    running: usize,
    /// Queues purged while a batch was in flight: the events that batch
    /// does not handle are deleted instead of retried.
    discarding: HashSet<(TableName, FragmentId)>,
}

/// Run the dispatcher until [`Command::Stop`], starting with the events
/// loaded from the outbox at boot.
pub(crate) async fn run(
    ctx: Arc<Context>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    loaded: Vec<PendingEvent>,
) {
    let mut dispatcher = Dispatcher {
        ctx,
        queues: HashMap::new(),
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
            },
            _ = sleep => {}
        }
    }
}

impl Dispatcher {
    fn add(&mut self, events: Vec<PendingEvent>) {
        let now = Instant::now();
        for event in events {
            let fragment = event.stored.fragment;
            self.queues
                .entry((event.table.clone(), fragment))
                .or_default()
                .fresh
                .push_back(Slot {
                    event,
                    not_before: now,
                    piece: usize::MAX,
                    arrived: now,
                    node_failures: 0,
                });
        }
    }

    fn finished(&mut self, done: Finished) {
        if self.discarding.remove(&(done.table.clone(), done.fragment)) && !done.retry.is_empty() {
            // The batch stays in flight until its events are deleted.
            discard(self.ctx.clone(), done);
            return;
        }
        self.running -= 1;
        let queue = self.queues.entry((done.table, done.fragment)).or_default();
        queue.in_flight = queue.in_flight.saturating_sub(done.events);
        queue.oldest_in_flight_ms = None;
        for slot in done.retry {
            queue.wait(slot);
        }
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
            if queue.busy() || queue.is_empty() {
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
            queue.in_flight = slots.len();
            queue.oldest_in_flight_ms = slots
                .iter()
                .map(|slot| slot.event.event().expires_at_ms)
                .min();
            self.running += 1;
            let ctx = self.ctx.clone();
            tokio::spawn(async move {
                let outbox = ctx.outbox.clone();
                let events = slots.len();
                let delivery = deliver(ctx, table.clone(), fragment, binding, slots);
                if AssertUnwindSafe(delivery).catch_unwind().await.is_err() {
                    // A bug, not a plugin failure (those are errors). The
                    // events stay in the outbox for the next boot; the queue
                    // must not stay busy.
                    tracing::error!(%table, fragment, events, "expiry delivery panicked; its events will be delivered after a restart");
                    outbox.send(Command::Finished(Finished {
                        table,
                        fragment,
                        retry: Vec::new(),
                        events,
                    }));
                }
            });
        }
        next
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
        let store = ctx.store.clone();
        let count = events.len();
        let deleted =
            tokio::task::spawn_blocking(move || entries::delete_from_outbox(&*store, &events))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()));
        if let Err(error) = deleted {
            tracing::warn!(table = %done.table, %error, events = count, "cannot discard expiry events; they stay in the outbox until the next boot");
        }
        ctx.outbox.send(Command::Finished(done));
    });
}

/// Deliver one batch and settle its events; always reports back.
async fn deliver(
    ctx: Arc<Context>,
    table: TableName,
    fragment: FragmentId,
    binding: Binding,
    slots: Vec<Slot>,
) {
    let events = slots.len();
    let stats = ctx.outbox.stats(&table);
    stats
        .calls
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    stats
        .attempts
        .fetch_add(events as u64, std::sync::atomic::Ordering::Relaxed);
    let outcome = call_and_apply(&ctx, &binding, &slots).await;
    let whole_failure = outcome.is_err();
    let mut handled = Vec::new();
    let mut failed = Vec::new();
    let outcome = match outcome {
        Err(Failure::Node(error)) => {
            tracing::warn!(%table, fragment, events, %error, "expiry actions not applied; retrying without charging an attempt");
            *stats.last_error.lock() = Some(error);
            let retry = slots
                .into_iter()
                .map(|mut slot| {
                    slot.node_failures += 1;
                    slot.not_before = Instant::now() + backoff(&ctx.config, slot.node_failures);
                    slot
                })
                .collect();
            ctx.outbox.send(Command::Finished(Finished {
                table,
                fragment,
                retry,
                events,
            }));
            return;
        }
        Err(Failure::Handler(error)) => Err(error),
        Ok(retry) => Ok(retry),
    };
    match outcome {
        Ok(retry) => {
            for (index, slot) in slots.into_iter().enumerate() {
                if retry.contains(&(index as u32)) {
                    failed.push(slot);
                } else {
                    handled.push(slot);
                }
            }
        }
        Err(error) => {
            tracing::warn!(%table, fragment, events, %error, "expiry handler call failed; retrying");
            stats
                .failed_calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            *stats.last_error.lock() = Some(error.clone());
            for mut slot in slots {
                slot.event.stored.last_error = error.clone();
                failed.push(slot);
            }
        }
    }
    let retry = settle(
        &ctx,
        &table,
        &binding,
        handled,
        failed,
        whole_failure,
        events,
    )
    .await;
    ctx.outbox.send(Command::Finished(Finished {
        table,
        fragment,
        retry,
        events,
    }));
}

/// Why a delivery failed.
#[derive(Debug)]
enum Failure {
    /// The handler failed (trap, deadline, error, bad answer): charged as an
    /// attempt of every event of the call.
    Handler(String),
    /// The node could not apply the actions (overloaded, store failing,
    /// shutting down): retried with backoff, not charged, never dead-lettered.
    Node(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Handler(message)
    }
}

/// Call the handler and apply the actions it returned. `Ok` holds the
/// indexes of events the handler asked to retry.
async fn call_and_apply(
    ctx: &Context,
    binding: &Binding,
    slots: &[Slot],
) -> Result<Vec<u32>, Failure> {
    let plugin = ctx.plugins.get(&binding.plugin).ok_or_else(|| {
        format!(
            "plugin {} is not installed; install it or unbind the table",
            binding.plugin
        )
    })?;
    match plugin.function(&binding.function) {
        Some(decl) if decl.kind == abi::FunctionKind::ExpiryHandler as i32 => {}
        _ => {
            return Err(Failure::Handler(format!(
                "plugin {} version {} has no expiry handler {}",
                binding.plugin, plugin.info.version, binding.function
            )));
        }
    }
    let events: Vec<abi::ExpiryEvent> = slots
        .iter()
        .map(|slot| {
            let mut event = slot.event.event().clone();
            event.attempt += 1;
            event
        })
        .collect();
    let count = events.len();
    let function = binding.function.clone();
    let deadline = ctx.deadline;
    let call = abi::call_request::Call::Expiry(abi::ExpiryBatch { events });
    let response = tokio::task::spawn_blocking(move || plugin.call(&function, call, deadline))
        .await
        .map_err(|e| format!("handler task failed: {e}"))?
        .map_err(|e| e.to_string())?;
    let handler = format!("{}.{}", binding.plugin, binding.function);
    let HandlerOutcome { actions, failed } = handler_outcome(
        response,
        &handler,
        count,
        ctx.config.max_actions_per_event,
        ctx.max_value_bytes,
    )?;
    apply(ctx, actions).await?;
    Ok(failed)
}

/// What a handler answered for a batch of `count` events, validated: the
/// actions to apply and the indexes of the events to retry. Anything out
/// of range (an index past the batch, too many actions, a bad table, key,
/// value or TTL) fails the whole call.
fn handler_outcome(
    response: abi::CallResponse,
    handler: &str,
    count: usize,
    max_actions_per_event: usize,
    max_value_bytes: usize,
) -> Result<HandlerOutcome, String> {
    let Some(abi::call_response::Result::Expiry(result)) = response.result else {
        return Err(format!(
            "handler {handler} returned something other than an expiry result"
        ));
    };
    if let Some(bad) = result.failed.iter().find(|&&i| i as usize >= count) {
        return Err(format!(
            "handler listed failed event {bad}, but the batch has {count} events"
        ));
    }
    let limit = count * max_actions_per_event;
    if result.actions.len() > limit {
        return Err(format!(
            "handler returned {} actions for {count} events; the limit is {} per event",
            result.actions.len(),
            max_actions_per_event
        ));
    }
    let actions = result
        .actions
        .into_iter()
        .enumerate()
        .map(|(index, action)| {
            to_op(action, max_value_bytes).map_err(|reason| format!("action {index}: {reason}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(HandlerOutcome {
        actions,
        failed: result.failed,
    })
}

/// A handler's answer, validated.
struct HandlerOutcome {
    /// The actions to apply, in order.
    actions: Vec<(TableName, BatchOp)>,
    /// Indexes of the events to retry.
    failed: Vec<u32>,
}

/// A validated action.
fn to_op(action: abi::Action, max_value_bytes: usize) -> Result<(TableName, BatchOp), String> {
    match action.action {
        Some(abi::action::Action::Put(put)) => {
            let table = TableName::new(&put.table).map_err(|e| e.to_string())?;
            validate_key(&put.key).map_err(|e| e.to_string())?;
            if put.value.len() > max_value_bytes {
                return Err(format!(
                    "value is {} bytes; the limit is {max_value_bytes} (max_value_bytes)",
                    put.value.len()
                ));
            }
            let expiry = match put.ttl_ms {
                0 => Expiry::Never,
                ms => Expiry::After(Duration::from_millis(ms)),
            };
            expiry.resolve(now_ms()).map_err(|e| e.to_string())?;
            Ok((
                table,
                BatchOp::Put {
                    key: put.key,
                    value: put.value,
                    expiry,
                },
            ))
        }
        Some(abi::action::Action::Delete(delete)) => {
            let table = TableName::new(&delete.table).map_err(|e| e.to_string())?;
            validate_key(&delete.key).map_err(|e| e.to_string())?;
            Ok((table, BatchOp::Delete { key: delete.key }))
        }
        None => Err("empty action".into()),
    }
}

/// Apply actions through the normal write path with `wal` durability, in
/// order: actions are grouped into rounds in which no key repeats, each
/// round applied as one batch per table.
async fn apply(ctx: &Context, actions: Vec<(TableName, BatchOp)>) -> Result<(), Failure> {
    if actions.is_empty() {
        return Ok(());
    }
    let node = Node {
        inner: ctx
            .node
            .upgrade()
            .ok_or_else(|| Failure::Node("the node is shutting down".into()))?,
    };
    let mut rounds: Vec<BTreeMap<TableName, Vec<BatchOp>>> = Vec::new();
    let mut seen: Vec<HashSet<(TableName, String)>> = Vec::new();
    for (table, op) in actions {
        let key = match &op {
            BatchOp::Put { key, .. } | BatchOp::Delete { key } => key.clone(),
        };
        let id = (table.clone(), key);
        let round = seen
            .iter()
            .rposition(|keys| keys.contains(&id))
            .map_or(0, |last| last + 1);
        if round == rounds.len() {
            rounds.push(BTreeMap::new());
            seen.push(HashSet::new());
        }
        // Later rounds never hold the key, so it may join the first round
        // after its last occurrence.
        seen[round].insert(id);
        rounds[round].entry(table).or_default().push(op);
    }
    for round in rounds {
        let writes = round.into_iter().map(|(table, ops)| {
            let node = node.clone();
            async move {
                let handle = node.table_handle(table.clone());
                for outcome in handle.batch(ops, Durability::Wal).await {
                    outcome.map_err(|error| {
                        let message = format!("applying an action on {table}: {error}");
                        match error {
                            Error::InvalidName(_)
                            | Error::ValueTooLarge { .. }
                            | Error::InvalidTtl(_) => Failure::Handler(message),
                            _ => Failure::Node(message),
                        }
                    })?;
                }
                Ok::<(), Failure>(())
            }
        });
        for result in futures::future::join_all(writes).await {
            result?;
        }
    }
    Ok(())
}

/// Delay before attempt `attempt + 1` after `attempt` failures: doubling
/// from the base, capped, with jitter in [½, 1] of the delay.
fn backoff(config: &ExpiryConfig, attempt: u32) -> Duration {
    let doubled = config
        .backoff_base
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    let capped = doubled.min(config.backoff_max);
    capped.mul_f64(rand::rng().random_range(0.5..=1.0))
}

/// Persist the outcome of a batch: handled events leave the outbox; failed
/// events get their attempt and error recorded, or move to dead letters
/// after `max_attempts`. Returns the slots to deliver again.
async fn settle(
    ctx: &Arc<Context>,
    table: &TableName,
    binding: &Binding,
    handled: Vec<Slot>,
    failed: Vec<Slot>,
    whole_failure: bool,
    batch_len: usize,
) -> Vec<Slot> {
    let stats = ctx.outbox.stats(table);
    let now = now_ms();
    let mut writes = Vec::with_capacity(handled.len() + failed.len() * 2);
    for slot in &handled {
        writes.push(FamilyWrite::Delete(
            Family::ExpiryOutbox,
            slot.event.key.clone(),
        ));
        stats.record_lag(now.saturating_sub(slot.event.event().expires_at_ms));
    }
    stats
        .handled
        .fetch_add(handled.len() as u64, std::sync::atomic::Ordering::Relaxed);
    let piece = if whole_failure {
        batch_len.div_ceil(SPLIT).max(1)
    } else {
        usize::MAX
    };
    let mut retry = Vec::new();
    let mut dead = 0u64;
    for mut slot in failed {
        slot.node_failures = 0;
        let stored = &mut slot.event.stored;
        if stored.last_error.is_empty() {
            stored.last_error = "the handler listed the event in `failed`".into();
        }
        stored.last_attempt_ms = now;
        let attempt = {
            let event = slot.event.event_mut();
            event.attempt += 1;
            event.attempt
        };
        if attempt >= binding.max_attempts {
            slot.event.stored.dead_at_ms = now;
            writes.push(FamilyWrite::Delete(
                Family::ExpiryOutbox,
                slot.event.key.clone(),
            ));
            writes.push(FamilyWrite::Put(
                Family::DeadLetters,
                dead_letter_key(table, &slot.event.event().id),
                slot.event.encode(),
            ));
            dead += 1;
            tracing::warn!(%table, key = %slot.event.event().key, attempt, error = %slot.event.stored.last_error, "expiry event moved to dead letters");
        } else {
            writes.push(FamilyWrite::Put(
                Family::ExpiryOutbox,
                slot.event.key.clone(),
                slot.event.encode(),
            ));
            slot.not_before = Instant::now() + backoff(&ctx.config, attempt);
            slot.piece = piece;
            retry.push(slot);
        }
    }
    stats.failed_events.fetch_add(
        retry.len() as u64 + dead,
        std::sync::atomic::Ordering::Relaxed,
    );
    stats
        .dead_letters
        .fetch_add(dead, std::sync::atomic::Ordering::Relaxed);
    let writes = Arc::new(writes);
    for attempt in 1..=SETTLE_TRIES {
        let store = ctx.store.clone();
        let batch = writes.clone();
        let result = tokio::task::spawn_blocking(move || store.write_entries(&batch, false))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        match result {
            Ok(()) => break,
            Err(error) if attempt == SETTLE_TRIES => {
                // The events stay in the outbox as they were: a restart
                // delivers them again, which at-least-once allows.
                tracing::error!(%table, %error, "cannot settle expiry events; they will be delivered again after a restart");
                *stats.last_error.lock() = Some(format!("settling events: {error}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10 << (2 * attempt))).await,
        }
    }
    retry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let config = ExpiryConfig {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(1),
            ..ExpiryConfig::default()
        };
        for _ in 0..50 {
            let first = backoff(&config, 1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let third = backoff(&config, 3);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
            assert!(backoff(&config, 40) <= Duration::from_secs(1));
        }
    }

    #[test]
    fn retries_go_first_and_in_pieces() {
        let table = TableName::new("t").unwrap();
        let record = crate::record::Record::live(
            crate::record::Version {
                hlc_ms: 1,
                counter: 0,
                writer: Arc::from("w"),
            },
            bytes::Bytes::new(),
            Some(5),
        );
        let now = Instant::now();
        let slot = |seq: u64, not_before: Instant, piece: usize| Slot {
            event: PendingEvent::new(0, seq, &table, &format!("k{seq}"), &record, 6),
            not_before,
            piece,
            arrived: now,
            node_failures: 0,
        };
        let mut queue = Queue::default();
        for seq in 0..10 {
            queue.fresh.push_back(slot(seq, now, usize::MAX));
        }
        for seq in 10..15 {
            queue.wait(slot(seq, now, 2));
        }
        queue.wait(slot(99, now + Duration::from_secs(60), 2));
        let first = queue.take_batch(256, now);
        assert_eq!(first.len(), 2, "due retries go first, in pieces of 2");
        assert_eq!(queue.take_batch(256, now).len(), 2);
        assert_eq!(queue.take_batch(256, now).len(), 1);
        let fresh = queue.take_batch(4, now);
        assert_eq!(fresh.len(), 4, "then fresh events, up to max_batch");
        assert_eq!(outbox_seqs(&fresh), vec![0, 1, 2, 3], "in outbox order");
        assert_eq!(queue.waiting.len(), 1, "the retry not yet due waits");
    }

    fn outbox_seqs(slots: &[Slot]) -> Vec<u64> {
        slots
            .iter()
            .map(|slot| outbox_seq(&slot.event.key).unwrap())
            .collect()
    }

    /// Whatever a handler answers is validated actions or an error for
    /// the whole call, never a panic or an action out of bounds.
    mod fuzz {
        use ebb_proto::Message;
        use proptest::prelude::*;

        use super::*;
        use crate::plugin::fuzz::{config, response_bytes};

        const MAX_ACTIONS: usize = 16;
        const MAX_VALUE: usize = 1024;

        proptest! {
            #![proptest_config(config())]

            #[test]
            fn any_handler_answer_is_validated_actions_or_an_error(
                bytes in response_bytes(),
                count in 1usize..20,
            ) {
                let Ok(response) = abi::CallResponse::decode(bytes.as_slice()) else {
                    return Ok(());
                };
                match handler_outcome(response, "p.h", count, MAX_ACTIONS, MAX_VALUE) {
                    Ok(HandlerOutcome { actions, failed }) => {
                        prop_assert!(failed.iter().all(|&i| (i as usize) < count));
                        prop_assert!(actions.len() <= count * MAX_ACTIONS);
                        for (_, op) in &actions {
                            match op {
                                BatchOp::Put { key, value, expiry } => {
                                    prop_assert!(validate_key(key).is_ok());
                                    prop_assert!(value.len() <= MAX_VALUE);
                                    prop_assert!(expiry.resolve(now_ms()).is_ok());
                                }
                                BatchOp::Delete { key } => prop_assert!(validate_key(key).is_ok()),
                            }
                        }
                    }
                    Err(message) => prop_assert!(!message.is_empty()),
                }
            }
        }
    }
}
