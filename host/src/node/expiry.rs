//! The node's handler API (expiry and change handlers): binding tables to
//! handlers, status, dead letters and redrive, the dispatcher's start and
//! stop, and the plugin operations that must respect bindings. Also where
//! the node plugs into expiry: the outbox as the fragments'
//! [`ExpiryOutbox`], and the node's write path as the dispatcher's
//! [`ActionWriter`].

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::error::Error;
use super::expiry_cluster::{
    ClusterSettler, change_metadata, decode_binding, follow_leadership, list_dead_letters,
    on_every_fragment, unexpected_outcome,
};
use super::{Node, NodeInner};
use crate::clock::now_ms;
use crate::cluster::{MetaCommand, MetaOutcome, OutboxAction};
use crate::expiry::actions::{Action, ActionError, ActionWriter, Skipped};
use crate::expiry::command::{Command, QueueStatus};
use crate::expiry::deliver::{Context, PluginHandlers};
use crate::expiry::entries::{self, DeadLetterPage};
use crate::expiry::event::parse_hex_id;
use crate::expiry::outbox::Outbox;
use crate::expiry::settle::{Settler, StoreSettler};
use crate::expiry::{BindRequest, Binding, ExpiryError, binding, scheduler};
use crate::fragment::flush::ExpiryOutbox;
use crate::names::TableName;
use crate::plugin::{HandlerKind, Installed, PluginError, RecordReader};
use crate::store::{KvStore, PendingEvent, StoreError};
use crate::write::{BatchItem, BatchOp, Durability, Expiry, Origin};
use ebb_proto::plugin::v1 as abi;

/// How long shutdown waits for handler calls in flight.
const DISPATCHER_STOP_WAIT: Duration = Duration::from_secs(30);
pub use crate::expiry::entries::MAX_DEAD_LETTER_PAGE;

/// A table's binding and how its deliveries are going.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpiryStatus {
    /// The table.
    pub table: TableName,
    /// Its handler, if bound.
    pub binding: Option<Binding>,
    /// Events queued, in flight and backing off.
    pub queue: QueueStatus,
    /// Age of the oldest pending event: now minus its deadline, in ms.
    pub oldest_pending_age_ms: Option<u64>,
    /// Events handled since boot.
    pub handled: u64,
    /// Handler calls since boot.
    pub calls: u64,
    /// Event deliveries since boot (retries included).
    pub attempts: u64,
    /// Calls that failed as a whole since boot.
    pub failed_calls: u64,
    /// Event deliveries that failed since boot.
    pub failed_events: u64,
    /// Events in dead letters now.
    pub dead_letters: u64,
    /// Handler actions skipped since boot because their condition did not
    /// hold (not failures).
    pub skipped_actions: u64,
    /// Lag percentiles in ms (bucket upper bounds), since boot.
    pub lag_p50_ms: Option<f64>,
    /// 99th percentile lag in ms.
    pub lag_p99_ms: Option<f64>,
    /// Largest lag in ms since boot.
    pub lag_max_ms: u64,
    /// The last failure.
    pub last_error: Option<String>,
    /// In a cluster: the table's events in this member's outbox (every
    /// replica holds them until the fragment's leader settles them; only
    /// the leader's are in `queue`). Counted by a scan of the outbox.
    pub stored_events: Option<u64>,
}

/// Read bindings and pending events at boot, before fragments load, so boot
/// conversions of bound tables write events that continue the sequence.
pub(super) fn load(store: &dyn KvStore, outbox: &Outbox) -> Result<Vec<PendingEvent>, StoreError> {
    for (table, binding) in binding::load(store)? {
        outbox.set_binding(table, Some(binding));
    }
    let (events, highest) = entries::load_outbox(store)?;
    outbox.continue_after(highest);
    for (table, count) in entries::count_dead_letters(store)? {
        outbox
            .stats(&table)
            .dead_letters
            .store(count, Ordering::Relaxed);
    }
    Ok(events)
}

fn ms(seconds: Option<f64>) -> Option<f64> {
    seconds.map(|s| s * 1000.0)
}

impl Node {
    pub(super) fn start_dispatcher(&self, store: Arc<dyn KvStore>, loaded: Vec<PendingEvent>) {
        let Some(commands) = self.inner.outbox.take_receiver() else {
            return;
        };
        let settler: Arc<dyn Settler> = match &self.inner.cluster {
            Some(cluster) => Arc::new(ClusterSettler(cluster.clone())),
            None => Arc::new(StoreSettler(store.clone())),
        };
        let ctx = Arc::new(Context {
            outbox: self.inner.outbox.clone(),
            settler,
            handlers: Arc::new(PluginHandlers {
                plugins: self.inner.plugins.clone(),
                deadline: self.inner.config.plugins.expiry_deadline,
                reader: Arc::new(NodeReader {
                    node: Arc::downgrade(&self.inner),
                    runtime: tokio::runtime::Handle::current(),
                }),
            }),
            actions: Arc::new(NodeActions(Arc::downgrade(&self.inner))),
            config: self.inner.config.expiry,
            max_value_bytes: self.inner.config.max_value_bytes,
        });
        let replicated = self.inner.cluster.is_some();
        let task = tokio::spawn(scheduler::run(ctx, commands, loaded, replicated));
        *self.inner.dispatcher.lock() = Some(task);
        if let Some(cluster) = &self.inner.cluster {
            tokio::spawn(follow_leadership(
                Arc::downgrade(cluster),
                self.inner.outbox.clone(),
                Arc::downgrade(&store),
            ));
        }
    }

    /// Stop forming batches and wait (bounded) for the calls in flight.
    /// Events not yet handled stay in the outbox for the next boot.
    pub(super) async fn stop_dispatcher(&self) {
        let Some(task) = self.inner.dispatcher.lock().take() else {
            return;
        };
        let (reply, stopped) = oneshot::channel();
        if self.inner.outbox.send(Command::Stop(reply))
            && tokio::time::timeout(DISPATCHER_STOP_WAIT, stopped)
                .await
                .is_err()
        {
            tracing::warn!(
                "expiry handler calls still running at shutdown; their events stay in the outbox"
            );
            task.abort();
        }
    }

    /// Run `work` on a blocking thread with the node and its store (it
    /// reads or writes the store); `ShuttingDown` once the store closed.
    pub(super) async fn blocking_expiry<T: Send + 'static>(
        &self,
        work: impl FnOnce(Node, Arc<dyn KvStore>) -> Result<T, ExpiryError> + Send + 'static,
    ) -> Result<T, ExpiryError> {
        let store = self.store().map_err(|_| ExpiryError::ShuttingDown)?;
        let node = self.clone();
        tokio::task::spawn_blocking(move || work(node, store))
            .await
            .map_err(|e| ExpiryError::Store(StoreError::Engine(format!("task failed: {e}"))))?
    }

    /// Bind `table`'s expiries to a handler (replacing any binding). Only a
    /// function the plugin declares as `EXPIRY_HANDLER` can be bound. From
    /// now on every expiry in the table produces an event.
    pub async fn bind_expiry(
        &self,
        table: &str,
        request: BindRequest,
    ) -> Result<Binding, ExpiryError> {
        self.bind_handler(HandlerKind::Expiry, table, request).await
    }

    /// Bind `table`'s writes and deletes to a change handler (replacing
    /// any), a function the plugin declares as `CHANGE_HANDLER`. From now
    /// on every winning write of a key the binding covers (its `prefix`)
    /// writes a change event with the record, except the writes of change
    /// handlers themselves (docs/triggers.md).
    pub async fn bind_change(
        &self,
        table: &str,
        request: BindRequest,
    ) -> Result<Binding, ExpiryError> {
        self.bind_handler(HandlerKind::Change, table, request).await
    }

    /// Bind `table`'s handler of `kind` (see [`Node::bind_expiry`] and
    /// [`Node::bind_change`]).
    pub async fn bind_handler(
        &self,
        kind: HandlerKind,
        table: &str,
        request: BindRequest,
    ) -> Result<Binding, ExpiryError> {
        let source = source(kind, table)?;
        let binding = request.resolve(&source, now_ms())?;
        let Some(cluster) = self.inner.cluster.clone() else {
            return self
                .blocking_expiry(move |node, _| node.inner.admin.bind(&source, binding))
                .await;
        };
        // Checked here first, so a binding every member would refuse is
        // never proposed; then bound on every member at once.
        let checked = source.clone();
        let binding = self
            .blocking_expiry(move |node, _| node.inner.admin.check_binding(&checked, binding))
            .await?;
        let outcome = change_metadata(
            &cluster,
            MetaCommand::BindExpiry {
                table: source.to_string(),
                binding: super::admin::binding_bytes(&binding),
            },
        )
        .await?;
        match outcome {
            MetaOutcome::Bound(bound) => decode_binding(&bound),
            other => Err(unexpected_outcome(other)),
        }
    }

    /// Remove `table`'s binding: its expiries stop producing events. Events
    /// already in the outbox wait there (and are delivered if the table is
    /// bound again) unless `discard_pending`, which deletes them (those in
    /// a batch in flight when it finishes, unless it handled them). Returns
    /// the removed binding.
    pub async fn unbind_expiry(
        &self,
        table: &str,
        discard_pending: bool,
    ) -> Result<Binding, ExpiryError> {
        self.unbind_handler(HandlerKind::Expiry, table, discard_pending)
            .await
    }

    /// Remove `table`'s handler of `kind`, as [`Node::unbind_expiry`] does
    /// for expiry handlers. An unbound table's writes stop producing change
    /// events at once.
    pub async fn unbind_handler(
        &self,
        kind: HandlerKind,
        table: &str,
        discard_pending: bool,
    ) -> Result<Binding, ExpiryError> {
        let table = source(kind, table)?;
        if let Some(cluster) = self.inner.cluster.clone() {
            let outcome = change_metadata(
                &cluster,
                MetaCommand::UnbindExpiry {
                    table: table.to_string(),
                },
            )
            .await?;
            let removed = match outcome {
                MetaOutcome::Unbound(removed) => decode_binding(&removed)?,
                other => return Err(unexpected_outcome(other)),
            };
            if discard_pending {
                // Each fragment's leader deletes its pending events of the
                // table through the fragment's group.
                on_every_fragment(
                    &cluster,
                    self.inner.meta.fragments,
                    &table,
                    OutboxAction::Discard,
                )
                .await?;
            }
            return Ok(removed);
        }
        let removed = {
            let table = table.clone();
            self.blocking_expiry(move |node, store| {
                let _guard = node.inner.admin.bindings_lock.lock();
                let binding = node
                    .inner
                    .outbox
                    .binding(&table)
                    .ok_or_else(|| binding::not_bound(&table))?;
                binding::remove(&*store, &table)?;
                node.inner.outbox.set_binding(table, None);
                Ok(binding)
            })
            .await?
        };
        if discard_pending {
            let (reply, purged) = oneshot::channel();
            if self.inner.outbox.send(Command::Purge(table, reply))
                && let Ok(events) = purged.await
            {
                self.blocking_expiry(move |_, store| {
                    entries::delete_from_outbox(&*store, &events).map_err(ExpiryError::from)
                })
                .await?;
            }
        }
        Ok(removed)
    }

    /// The binding of `table` and how its deliveries are going. `NotFound`
    /// when the table has no binding, no pending events and no dead letters.
    pub async fn expiry_status(&self, table: &str) -> Result<ExpiryStatus, ExpiryError> {
        self.handler_status(HandlerKind::Expiry, table).await
    }

    /// The binding of `table`'s handler of `kind` and how its deliveries
    /// are going, as [`Node::expiry_status`] answers for expiry handlers.
    pub async fn handler_status(
        &self,
        kind: HandlerKind,
        table: &str,
    ) -> Result<ExpiryStatus, ExpiryError> {
        let table = source(kind, table)?;
        let (reply, answer) = oneshot::channel();
        let queue = if self
            .inner
            .outbox
            .send(Command::Status(table.clone(), reply))
        {
            answer.await.unwrap_or_default()
        } else {
            QueueStatus::default()
        };
        let stored_events = match self.inner.cluster {
            Some(_) => {
                let table = table.clone();
                Some(
                    self.blocking_expiry(move |_, store| {
                        entries::count_outbox(&*store, &table).map_err(ExpiryError::from)
                    })
                    .await?,
                )
            }
            None => None,
        };
        let binding = self.inner.outbox.binding(&table);
        let stats = self.inner.outbox.existing_stats(&table);
        let dead_letters = stats
            .as_ref()
            .map_or(0, |s| s.dead_letters.load(Ordering::Relaxed));
        if binding.is_none()
            && queue.pending == 0
            && dead_letters == 0
            && stored_events.unwrap_or(0) == 0
        {
            return Err(binding::not_bound(&table));
        }
        // Status of a bound table (or one with events) starts its statistics.
        let stats = stats.unwrap_or_else(|| self.inner.outbox.stats(&table));
        let now = now_ms();
        Ok(ExpiryStatus {
            oldest_pending_age_ms: queue
                .oldest_deadline_ms
                .map(|deadline| now.saturating_sub(deadline)),
            table: table.table(),
            binding,
            queue,
            handled: stats.handled.load(Ordering::Relaxed),
            calls: stats.calls.load(Ordering::Relaxed),
            attempts: stats.attempts.load(Ordering::Relaxed),
            failed_calls: stats.failed_calls.load(Ordering::Relaxed),
            failed_events: stats.failed_events.load(Ordering::Relaxed),
            dead_letters,
            skipped_actions: stats.skipped_actions.load(Ordering::Relaxed),
            lag_p50_ms: ms(stats.lag.quantile(0.5)),
            lag_p99_ms: ms(stats.lag.quantile(0.99)),
            lag_max_ms: stats.max_lag_ms.load(Ordering::Relaxed),
            last_error: stats.last_error.lock().clone(),
            stored_events,
        })
    }

    /// Every binding, by table.
    pub fn expiry_bindings(&self) -> Vec<(TableName, Binding)> {
        self.inner.outbox.bindings()
    }

    /// Statistics of every table with expiry activity (for metrics).
    pub fn expiry_stats(&self) -> Vec<(TableName, Arc<crate::expiry::TableStats>)> {
        self.inner.outbox.all_stats()
    }

    /// Outbox depth per table (for metrics).
    pub async fn expiry_depths(&self) -> Vec<(TableName, QueueStatus)> {
        let mut out = Vec::new();
        for (table, _) in self.expiry_stats() {
            let (reply, answer) = oneshot::channel();
            if self
                .inner
                .outbox
                .send(Command::Status(table.clone(), reply))
                && let Ok(status) = answer.await
            {
                out.push((table, status));
            }
        }
        out
    }

    /// One page of `table`'s dead letters (ordered by id), after the id
    /// `after` (hex) if given; at most `limit` (1 to 1000).
    pub async fn dead_letters(
        &self,
        table: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<DeadLetterPage, ExpiryError> {
        self.handler_dead_letters(HandlerKind::Expiry, table, after, limit)
            .await
    }

    /// One page of the dead letters of `table`'s handler of `kind`, as
    /// [`Node::dead_letters`] answers for expiry handlers.
    pub async fn handler_dead_letters(
        &self,
        kind: HandlerKind,
        table: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<DeadLetterPage, ExpiryError> {
        let table = source(kind, table)?;
        if !(1..=MAX_DEAD_LETTER_PAGE).contains(&limit) {
            return Err(ExpiryError::Invalid(format!(
                "limit {limit} is out of range; use 1 to {MAX_DEAD_LETTER_PAGE}"
            )));
        }
        let after = after
            .map(|text| {
                parse_hex_id(text).ok_or_else(|| {
                    ExpiryError::Invalid(format!(
                        "after {text:?} is not an event id (64 hex digits)"
                    ))
                })
            })
            .transpose()?;
        if let Some(cluster) = &self.inner.cluster {
            // A member holds replicas of some fragments only: each
            // fragment's leader lists its own.
            return list_dead_letters(cluster, self.inner.meta.fragments, &table, after, limit)
                .await;
        }
        self.blocking_expiry(move |_, store| {
            entries::list_dead_letters(&*store, &table, after.as_deref(), limit)
                .map_err(ExpiryError::from)
        })
        .await
    }

    /// Move dead letters of `table` back into the outbox as fresh events:
    /// those with the given hex ids (at most 10 000), or else up to 10 000
    /// of them. The table must be bound. Returns how many moved and whether
    /// more remain (redrive again).
    pub async fn redrive(
        &self,
        table: &str,
        ids: Option<Vec<String>>,
    ) -> Result<(usize, bool), ExpiryError> {
        self.redrive_handler(HandlerKind::Expiry, table, ids).await
    }

    /// Move dead letters of `table`'s handler of `kind` back into the
    /// outbox, as [`Node::redrive`] does for expiry handlers.
    pub async fn redrive_handler(
        &self,
        kind: HandlerKind,
        table: &str,
        ids: Option<Vec<String>>,
    ) -> Result<(usize, bool), ExpiryError> {
        let table = source(kind, table)?;
        if let Some(ids) = &ids
            && ids.len() > entries::MAX_REDRIVE
        {
            return Err(ExpiryError::Invalid(format!(
                "{} ids given; one redrive takes at most {}, send them in several requests",
                ids.len(),
                entries::MAX_REDRIVE
            )));
        }
        let ids = ids
            .map(|ids| {
                ids.iter()
                    .map(|text| {
                        parse_hex_id(text).ok_or_else(|| {
                            ExpiryError::Invalid(format!(
                                "{text:?} is not an event id (64 hex digits)"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        if let Some(cluster) = self.inner.cluster.clone() {
            if !self.inner.outbox.is_bound(&table) {
                return Err(binding::unbound_redrive(&table));
            }
            // Each fragment's leader moves its dead letters back through
            // the fragment's group, so every replica moves the same ones.
            let limit = ids.as_ref().map_or(entries::MAX_REDRIVE, Vec::len);
            let done = on_every_fragment(
                &cluster,
                self.inner.meta.fragments,
                &table,
                OutboxAction::Redrive { ids, limit },
            )
            .await?;
            return Ok((done.count, done.more));
        }
        self.blocking_expiry(move |node, store| {
            let _guard = node.inner.admin.bindings_lock.lock();
            if !node.inner.outbox.is_bound(&table) {
                return Err(binding::unbound_redrive(&table));
            }
            let outbox = &node.inner.outbox;
            let (revived, more) = entries::redrive(&*store, outbox, &table, ids.as_deref())?;
            let count = revived.len();
            outbox
                .stats(&table)
                .dead_letters
                .fetch_sub(count as u64, Ordering::Relaxed);
            outbox.deliver(revived);
            Ok((count, more))
        })
        .await
    }

    /// Validate, compile and store `bytes` as the next version of plugin
    /// `name`; bytes equal to the current version's store nothing and answer
    /// it `unchanged` (see [`crate::plugin::PluginRegistry::install_checked`]
    /// for the versions kept). Refused with [`PluginError::InUse`] when a
    /// table is bound to a function of `name` that the new version does not
    /// declare as an expiry handler, and with [`PluginError::Replicated`] on
    /// a cluster member (use [`Node::put_plugin`]). Blocking (compilation):
    /// call it from a blocking thread.
    pub fn install_plugin(&self, name: &str, bytes: &[u8]) -> Result<Installed, PluginError> {
        self.store().map_err(|_| shutting_down())?;
        if self.inner.cluster.is_some() {
            return Err(PluginError::Replicated);
        }
        self.inner.admin.install(name, bytes)
    }

    /// Remove plugin `name`. Refused with [`PluginError::InUse`] while an
    /// expiry binding uses it, and with [`PluginError::Replicated`] on a
    /// cluster member (use [`Node::delete_plugin`]). Blocking: call it from
    /// a blocking thread.
    pub fn remove_plugin(&self, name: &str) -> Result<(), PluginError> {
        self.store().map_err(|_| shutting_down())?;
        if self.inner.cluster.is_some() {
            return Err(PluginError::Replicated);
        }
        self.inner.admin.remove(name)
    }
}

fn shutting_down() -> PluginError {
    PluginError::Store(StoreError::Closed)
}

/// The handler source of `table` (a user's table name) for `kind`: the
/// table, or its change stream.
fn source(kind: HandlerKind, table: &str) -> Result<TableName, ExpiryError> {
    let table = TableName::new(table).map_err(|e| ExpiryError::Invalid(e.to_string()))?;
    Ok(match kind {
        HandlerKind::Expiry => table,
        HandlerKind::Change => table.changes(),
    })
}

impl ExpiryOutbox for Outbox {
    fn is_bound(&self, table: &TableName) -> bool {
        Outbox::is_bound(self, table)
    }

    fn emits_change(&self, table: &TableName, key: &str) -> bool {
        Outbox::emits_change(self, table, key)
    }

    fn next_seq(&self) -> u64 {
        Outbox::next_seq(self)
    }

    fn observe_seq(&self, seq: u64) {
        self.continue_after(seq)
    }

    fn deliver(&self, events: Vec<PendingEvent>) {
        Outbox::deliver(self, events)
    }
}

/// The node's tables as handlers read them through `ebb.get`: a
/// linearizable `get`, run to completion on the node's runtime from the
/// plugin thread that makes the call (never a tokio worker). Holds the node
/// weakly, as [`NodeActions`] does.
struct NodeReader {
    node: Weak<NodeInner>,
    runtime: tokio::runtime::Handle,
}

impl RecordReader for NodeReader {
    fn get(
        &self,
        table: &str,
        key: &str,
        timeout: Duration,
    ) -> Result<Option<abi::ReadRecord>, String> {
        let inner = self
            .node
            .upgrade()
            .ok_or_else(|| "the node is shutting down".to_string())?;
        let table = Node { inner }.table(table).map_err(|e| e.to_string())?;
        // The timer is made inside the runtime: it needs its reactor.
        let read = async move { tokio::time::timeout(timeout, table.get(key)).await };
        match self.runtime.block_on(read) {
            Err(_) => Err(format!(
                "no answer within the {} ms left of the call's deadline",
                timeout.as_millis()
            )),
            Ok(Err(error)) => Err(error.to_string()),
            Ok(Ok(entry)) => Ok(entry.map(|entry| abi::ReadRecord {
                value: entry.value,
                version: entry.version.to_string(),
                expires_at_ms: entry.expires_at_ms.unwrap_or(0),
            })),
        }
    }
}

/// The node's write path as the dispatcher writes handler actions: a batch
/// per table with `wal` durability. Holds the node weakly: the node owns
/// the dispatcher, and a node shutting down refuses the actions (not
/// charged to the events).
struct NodeActions(Weak<NodeInner>);

impl ActionWriter for NodeActions {
    fn write(
        &self,
        table: TableName,
        actions: Vec<Action>,
        origin: Origin,
    ) -> BoxFuture<'static, Result<Vec<Skipped>, ActionError>> {
        let inner = self.0.upgrade();
        Box::pin(async move {
            let inner = inner
                .ok_or_else(|| ActionError::Unavailable("the node is shutting down".into()))?;
            let items: Vec<BatchItem> = actions
                .into_iter()
                .map(|action| match action {
                    Action::Put {
                        key,
                        value,
                        ttl_ms,
                        condition,
                    } => BatchOp::Put {
                        key,
                        value,
                        expiry: match ttl_ms {
                            0 => Expiry::Never,
                            ms => Expiry::After(Duration::from_millis(ms)),
                        },
                    }
                    .when(condition),
                    Action::Delete { key, condition } => BatchOp::Delete { key }.when(condition),
                })
                .collect();
            let keys: Vec<String> = items.iter().map(|item| item.op.key().to_string()).collect();
            // A full node still applies handler actions: refusing them
            // would stall expiry, the way a full node frees memory.
            let mut handle = Node { inner }
                .table_handle(table.clone())
                .exempt_from_memory_bound();
            if origin == Origin::ChangeHandler {
                handle = handle.writing_as_change_handler();
            }
            let mut skipped = Vec::new();
            let outcomes = handle.batch_items(items, Durability::Wal).await;
            for (outcome, key) in outcomes.into_iter().zip(keys) {
                match outcome {
                    Ok(_) => {}
                    Err(Error::PreconditionFailed { current }) => skipped.push(Skipped {
                        table: table.clone(),
                        key,
                        current,
                    }),
                    Err(
                        error @ (Error::InvalidName(_)
                        | Error::ValueTooLarge { .. }
                        | Error::InvalidTtl(_)),
                    ) => return Err(ActionError::Rejected(error.to_string())),
                    Err(error) => return Err(ActionError::Unavailable(error.to_string())),
                }
            }
            Ok(skipped)
        })
    }
}
