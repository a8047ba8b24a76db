//! The handler state shared by the node, its fragments and the dispatcher:
//! bindings (expiry and change handlers), the outbox sequence, per-source
//! statistics, and the channel that hands newly durable events to the
//! dispatcher.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use tokio::sync::mpsc;

use super::binding::Binding;
use super::command::Command;
use crate::metrics::Histogram;
use crate::names::TableName;
use crate::record::Record;
use crate::store::{FragmentId, PendingEvent};

/// Bucket bounds of the handler lag histogram, in seconds.
const LAG_BUCKETS: [f64; 17] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0,
    3600.0,
];

/// Delivery statistics of one table, kept since boot (dead letters: current).
#[derive(Debug)]
pub struct TableStats {
    /// Events handled successfully.
    pub handled: AtomicU64,
    /// Handler calls made.
    pub calls: AtomicU64,
    /// Event deliveries made (events passed to the handler, retries included).
    pub attempts: AtomicU64,
    /// Handler calls that failed as a whole (trap, deadline, guest error,
    /// invalid response, actions not applied).
    pub failed_calls: AtomicU64,
    /// Event deliveries that failed and were scheduled again or dead-lettered.
    pub failed_events: AtomicU64,
    /// Events now in dead letters.
    pub dead_letters: AtomicU64,
    /// Handler actions skipped because their condition did not hold.
    pub skipped_actions: AtomicU64,
    /// Deadline to successful handling.
    pub lag: Histogram,
    /// Largest lag seen, in ms.
    pub max_lag_ms: AtomicU64,
    /// The last failure, if any.
    pub last_error: Mutex<Option<String>>,
}

impl Default for TableStats {
    fn default() -> Self {
        Self {
            handled: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            attempts: AtomicU64::new(0),
            failed_calls: AtomicU64::new(0),
            failed_events: AtomicU64::new(0),
            dead_letters: AtomicU64::new(0),
            skipped_actions: AtomicU64::new(0),
            lag: Histogram::with_bounds(&LAG_BUCKETS),
            max_lag_ms: AtomicU64::new(0),
            last_error: Mutex::new(None),
        }
    }
}

impl TableStats {
    /// Record one successful handling `lag_ms` after the deadline.
    pub(crate) fn record_lag(&self, lag_ms: u64) {
        self.lag.observe(std::time::Duration::from_millis(lag_ms));
        self.max_lag_ms.fetch_max(lag_ms, Ordering::Relaxed);
    }
}

/// Shared expiry state. Fragments ask it whether a table is bound and for
/// new events; their write buffers hand it the events once durable (the
/// node wires it into them as their [`crate::fragment::flush::ExpiryOutbox`]).
pub(crate) struct Outbox {
    /// By source: a table (its expiry handler) or a change stream.
    bindings: RwLock<HashMap<TableName, Binding>>,
    /// The change handlers again, by the table whose writes they get:
    /// what every write of the table asks.
    changes: RwLock<HashMap<TableName, Binding>>,
    /// Whether `changes` holds anything: a write of a node without change
    /// handlers checks only this.
    any_changes: AtomicBool,
    next_seq: AtomicU64,
    commands: mpsc::UnboundedSender<Command>,
    receiver: Mutex<Option<mpsc::UnboundedReceiver<Command>>>,
    stats: RwLock<HashMap<TableName, Arc<TableStats>>>,
}

impl Default for Outbox {
    fn default() -> Self {
        let (commands, receiver) = mpsc::unbounded_channel();
        Self {
            bindings: RwLock::new(HashMap::new()),
            changes: RwLock::new(HashMap::new()),
            any_changes: AtomicBool::new(false),
            next_seq: AtomicU64::new(1),
            commands,
            receiver: Mutex::new(Some(receiver)),
            stats: RwLock::new(HashMap::new()),
        }
    }
}

impl Outbox {
    /// No bindings, sequence starting at 1.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Whether `table` has a handler (its expiries produce events).
    pub(crate) fn is_bound(&self, table: &TableName) -> bool {
        self.bindings.read().contains_key(table)
    }

    /// The binding of `table`.
    pub(crate) fn binding(&self, table: &TableName) -> Option<Binding> {
        self.bindings.read().get(table).cloned()
    }

    /// Every binding.
    pub(crate) fn bindings(&self) -> Vec<(TableName, Binding)> {
        let mut all: Vec<_> = self
            .bindings
            .read()
            .iter()
            .map(|(t, b)| (t.clone(), b.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Bind `source` (a table's expiries or its change stream) to
    /// `binding`, or unbind it.
    pub(crate) fn set_binding(&self, source: TableName, binding: Option<Binding>) {
        if let Some(table) = source.changes_of() {
            let mut changes = self.changes.write();
            match &binding {
                Some(binding) => changes.insert(table, binding.clone()),
                None => changes.remove(&table),
            };
            self.any_changes
                .store(!changes.is_empty(), Ordering::Release);
        }
        let mut bindings = self.bindings.write();
        match binding {
            Some(binding) => bindings.insert(source, binding),
            None => bindings.remove(&source),
        };
    }

    /// Whether a write of `key` in `table` produces a change event: the
    /// table has a change handler whose prefix `key` matches.
    pub(crate) fn emits_change(&self, table: &TableName, key: &str) -> bool {
        self.any_changes.load(Ordering::Acquire)
            && self
                .changes
                .read()
                .get(table)
                .is_some_and(|binding| binding.covers(key))
    }

    /// Continue the outbox sequence after `seq` (boot, after scanning it).
    pub(crate) fn continue_after(&self, seq: u64) {
        self.next_seq.fetch_max(seq + 1, Ordering::AcqRel);
    }

    /// The next outbox sequence number.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::AcqRel)
    }

    /// A new event for the expiry of `record` (the live record being
    /// converted) at `key` of `table` in `fragment`.
    pub(crate) fn event(
        &self,
        fragment: FragmentId,
        table: &TableName,
        key: &str,
        record: &Record,
        observed_at_ms: u64,
    ) -> PendingEvent {
        PendingEvent::new(
            fragment,
            self.next_seq(),
            table,
            key,
            record,
            observed_at_ms,
        )
    }

    /// Hand events that are now durable in the outbox to the dispatcher.
    /// Before the dispatcher starts they wait in the channel; after it
    /// stopped they stay in the store for the next boot.
    pub(crate) fn deliver(&self, events: Vec<PendingEvent>) {
        if !events.is_empty() {
            let _ = self.commands.send(Command::Events(events));
        }
    }

    pub(crate) fn send(&self, command: Command) -> bool {
        self.commands.send(command).is_ok()
    }

    /// Whether the dispatcher (or the channel before it starts) still
    /// takes commands; `false` once it stopped.
    pub(crate) fn is_open(&self) -> bool {
        !self.commands.is_closed()
    }

    pub(crate) fn take_receiver(&self) -> Option<mpsc::UnboundedReceiver<Command>> {
        self.receiver.lock().take()
    }

    /// Statistics of `table`, created on first use.
    pub(crate) fn stats(&self, table: &TableName) -> Arc<TableStats> {
        if let Some(stats) = self.stats.read().get(table) {
            return stats.clone();
        }
        self.stats.write().entry(table.clone()).or_default().clone()
    }

    /// Statistics of `table`, if it has any.
    pub(crate) fn existing_stats(&self, table: &TableName) -> Option<Arc<TableStats>> {
        self.stats.read().get(table).cloned()
    }

    /// Statistics of every table that has any, by name.
    pub(crate) fn all_stats(&self) -> Vec<(TableName, Arc<TableStats>)> {
        let mut all: Vec<_> = self
            .stats
            .read()
            .iter()
            .map(|(t, s)| (t.clone(), s.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}
