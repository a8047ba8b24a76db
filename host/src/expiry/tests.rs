//! The dispatcher end to end over a memory store, with scripted handlers and
//! a scripted write path: which failures cost an event an attempt.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ebb_proto::plugin::v1 as abi;
use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::actions::{Action, ActionError, ActionWriter, Skipped};
use super::binding::Binding;
use super::deliver::{Batch, Context, Handlers};
use super::error::{Failure, HandlerFailed, HostFailed};
use super::outbox::Outbox;
use super::settle::StoreSettler;
use super::{ExpiryConfig, scheduler};
use crate::names::TableName;
use crate::plugin::threads::WorkFailed;
use crate::plugin::{CallCause, PluginCallError};
use crate::record::{Record, Version};
use crate::store::{Family, FamilyWrite, KvStore, MemoryStore, PendingEvent};
use crate::write::Origin;

/// What one handler call does.
enum Step {
    /// The plugin threads lost the job (a host panic, threads stopped).
    HostWork,
    /// No instance was free.
    NoInstance,
    /// The call future panics.
    Panic,
    /// The guest trapped: the handler's own failure.
    Trap,
    /// Answer with one archive put per event.
    Answer,
}

/// Handlers that follow a script (then answer), recording the attempt
/// number each call carried.
struct Scripted {
    steps: Mutex<VecDeque<Step>>,
    attempts: Mutex<Vec<u32>>,
}

impl Handlers for Scripted {
    fn call(
        &self,
        _binding: &Binding,
        batch: Batch,
    ) -> BoxFuture<'static, Result<abi::CallResponse, Failure>> {
        // (key, value, attempt) of each event, whatever its kind.
        let events: Vec<(String, Bytes, u32)> = match batch {
            Batch::Expiry(events) => events
                .into_iter()
                .map(|e| (e.key, e.value, e.attempt))
                .collect(),
            Batch::Change(events) => events
                .into_iter()
                .map(|e| (e.key, e.value, e.attempt))
                .collect(),
        };
        self.attempts
            .lock()
            .extend(events.iter().map(|(_, _, attempt)| *attempt));
        let step = self.steps.lock().pop_front().unwrap_or(Step::Answer);
        let call_error = |cause| PluginCallError {
            plugin: "p".into(),
            function: "h".into(),
            cause,
        };
        Box::pin(async move {
            match step {
                Step::HostWork => Err(HostFailed::Work(WorkFailed).into()),
                Step::NoInstance => Err(HostFailed::NoInstance(call_error(CallCause::NoInstance(
                    "pool full".into(),
                )))
                .into()),
                Step::Panic => panic!("a bug in the host"),
                Step::Trap => Err(HandlerFailed::Call(call_error(CallCause::Trap(
                    "unreachable".into(),
                )))
                .into()),
                Step::Answer => {
                    let actions = events
                        .iter()
                        .map(|(key, value, _)| abi::Action {
                            action: Some(abi::action::Action::Put(abi::Put {
                                table: "archive".into(),
                                key: key.clone(),
                                value: value.clone(),
                                ttl_ms: 0,
                                ..abi::Put::default()
                            })),
                        })
                        .collect();
                    Ok(abi::CallResponse {
                        result: Some(abi::call_response::Result::Expiry(abi::ExpiryResult {
                            actions,
                            failed: vec![],
                        })),
                    })
                }
            }
        })
    }
}

/// A write path that refuses as scripted (then writes), recording writes.
#[derive(Default)]
struct Writes {
    refusals: Mutex<VecDeque<ActionError>>,
    written: Mutex<Vec<(TableName, Action)>>,
    origins: Mutex<Vec<Origin>>,
}

impl ActionWriter for Writes {
    fn write(
        &self,
        table: TableName,
        actions: Vec<Action>,
        origin: Origin,
    ) -> BoxFuture<'static, Result<Vec<Skipped>, ActionError>> {
        self.origins.lock().push(origin);
        let result = match self.refusals.lock().pop_front() {
            Some(refusal) => Err(refusal),
            None => {
                let mut written = self.written.lock();
                written.extend(actions.into_iter().map(|a| (table.clone(), a)));
                Ok(Vec::new())
            }
        };
        Box::pin(async move { result })
    }
}

struct Harness {
    store: Arc<MemoryStore>,
    outbox: Arc<Outbox>,
    handlers: Arc<Scripted>,
    writes: Arc<Writes>,
    table: TableName,
}

/// `events` events of table `t` in the outbox (stored and queued), bound
/// with `max_attempts`, the dispatcher running over `steps` and `refusals`.
fn start(events: u64, max_attempts: u32, steps: Vec<Step>, refusals: Vec<ActionError>) -> Harness {
    start_on(
        TableName::new("t").unwrap(),
        events,
        max_attempts,
        steps,
        refusals,
    )
}

/// [`start`] for the handler source `table`: a table's expiries, or the
/// change events of its change stream.
fn start_on(
    table: TableName,
    events: u64,
    max_attempts: u32,
    steps: Vec<Step>,
    refusals: Vec<ActionError>,
) -> Harness {
    let store = Arc::new(MemoryStore::new());
    let outbox = Arc::new(Outbox::new());
    outbox.set_binding(
        table.clone(),
        Some(Binding {
            plugin: "p".into(),
            function: "h".into(),
            max_batch: 256,
            max_attempts,
            created_ms: 0,
            config: None,
            prefix: None,
        }),
    );
    let record = |i: u64| {
        Record::live(
            Version {
                hlc_ms: 1,
                counter: i,
                writer: Arc::from("w"),
            },
            Bytes::from(format!("v{i}")),
            Some(5),
        )
    };
    let loaded: Vec<PendingEvent> = (0..events)
        .map(|i| match table.changes_of() {
            Some(of) => PendingEvent::change(0, i + 1, &of, &format!("k{i}"), None, &record(i)),
            None => PendingEvent::new(0, i + 1, &table, &format!("k{i}"), &record(i), 6),
        })
        .collect();
    let puts: Vec<FamilyWrite> = loaded
        .iter()
        .map(|e| FamilyWrite::Put(Family::ExpiryOutbox, e.key.clone(), e.encode()))
        .collect();
    store.write_entries(&puts, true).unwrap();
    let handlers = Arc::new(Scripted {
        steps: Mutex::new(steps.into()),
        attempts: Mutex::new(Vec::new()),
    });
    let writes = Arc::new(Writes {
        refusals: Mutex::new(refusals.into()),
        ..Writes::default()
    });
    let ctx = Arc::new(Context {
        outbox: outbox.clone(),
        settler: Arc::new(StoreSettler(store.clone())),
        handlers: handlers.clone(),
        actions: writes.clone(),
        config: ExpiryConfig {
            backoff_base: Duration::from_millis(1),
            backoff_max: Duration::from_millis(5),
            linger: Duration::ZERO,
            concurrency: 1,
            max_actions_per_event: 16,
        },
        max_value_bytes: 1 << 20,
    });
    let commands = outbox.take_receiver().unwrap();
    tokio::spawn(scheduler::run(ctx, commands, loaded, false));
    Harness {
        store,
        outbox,
        handlers,
        writes,
        table,
    }
}

impl Harness {
    /// The events in a family, decoded.
    fn entries(&self, family: Family) -> Vec<PendingEvent> {
        let mut out = Vec::new();
        self.store
            .scan_family(family, &[], &mut |key, value| {
                out.push(PendingEvent::decode(key, value)?);
                Ok(())
            })
            .unwrap();
        out
    }

    /// Waits (bounded) until the outbox in the store is empty.
    async fn drained(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !self.entries(Family::ExpiryOutbox).is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the outbox did not drain: attempts {:?}, last error {:?}",
                self.handlers.attempts.lock(),
                self.outbox.stats(&self.table).last_error.lock()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

#[tokio::test]
async fn host_failures_never_use_up_an_events_attempts() {
    // One attempt allowed: any failure charged to the events would move
    // them to dead letters at once.
    let harness = start(
        3,
        1,
        vec![
            Step::HostWork,
            Step::NoInstance,
            Step::Panic,
            Step::Answer,
            Step::Answer,
        ],
        vec![
            ActionError::Unavailable("fragment 0 is overloaded".into()),
            ActionError::Unavailable("the node is shutting down".into()),
        ],
    );
    harness.drained().await;
    assert!(
        harness.entries(Family::DeadLetters).is_empty(),
        "nothing dead-lettered"
    );
    assert!(
        harness.handlers.steps.lock().is_empty(),
        "every failure happened"
    );
    assert!(harness.writes.refusals.lock().is_empty());
    let attempts = harness.handlers.attempts.lock().clone();
    assert!(attempts.len() >= 6, "six calls at least: {attempts:?}");
    assert!(
        attempts.iter().all(|&a| a == 1),
        "every delivery was the events' first attempt: {attempts:?}"
    );
    let stats = harness.outbox.stats(&harness.table);
    assert_eq!(stats.handled.load(std::sync::atomic::Ordering::Relaxed), 3);
    assert_eq!(
        stats
            .dead_letters
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert_eq!(
        stats
            .failed_calls
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    let written: Vec<String> = harness
        .writes
        .written
        .lock()
        .iter()
        .map(|(table, action)| match action {
            Action::Put { key, .. } => format!("{table}/{key}"),
            Action::Delete { key, .. } => format!("-{table}/{key}"),
        })
        .collect();
    let mut written = written;
    written.sort();
    assert_eq!(written, vec!["archive/k0", "archive/k1", "archive/k2"]);
}

#[tokio::test]
async fn a_handler_failure_costs_an_attempt_and_a_rejected_action_too() {
    // Three attempts: a trap and a rejected action use two, the third
    // delivery succeeds.
    let harness = start(
        2,
        3,
        vec![Step::Trap],
        vec![ActionError::Rejected("invalid table name".into())],
    );
    harness.drained().await;
    assert!(harness.entries(Family::DeadLetters).is_empty());
    let attempts = harness.handlers.attempts.lock().clone();
    // The trap fails the batch of two; its retry goes out in pieces of one.
    assert_eq!(
        attempts.iter().filter(|&&a| a == 1).count(),
        2,
        "{attempts:?}"
    );
    assert!(
        attempts.contains(&2),
        "a charged failure counts: {attempts:?}"
    );
    assert!(attempts.iter().all(|&a| a <= 3), "{attempts:?}");

    // With one attempt, the same trap dead-letters both events.
    let harness = start(2, 1, vec![Step::Trap], vec![]);
    harness.drained().await;
    let dead = harness.entries(Family::DeadLetters);
    assert_eq!(dead.len(), 2);
    assert!(
        dead.iter()
            .all(|e| e.attempt() == 1 && e.stored.last_error.contains("trapped"))
    );
}

#[tokio::test]
async fn change_events_reach_their_handler_whose_actions_are_written_as_its_own() {
    let source = TableName::new("orders").unwrap().changes();
    let harness = start_on(source, 3, 2, vec![Step::Trap], vec![]);
    harness.drained().await;
    assert!(harness.entries(Family::DeadLetters).is_empty());
    let attempts = harness.handlers.attempts.lock().clone();
    assert!(
        attempts.contains(&1) && attempts.contains(&2),
        "a failed change batch is retried like an expiry batch: {attempts:?}"
    );
    let mut written: Vec<String> = harness
        .writes
        .written
        .lock()
        .iter()
        .map(|(table, action)| match action {
            Action::Put { key, value, .. } => {
                format!("{table}/{key}={}", String::from_utf8_lossy(value))
            }
            Action::Delete { key, .. } => format!("-{table}/{key}"),
        })
        .collect();
    written.sort();
    assert_eq!(
        written,
        vec!["archive/k0=v0", "archive/k1=v1", "archive/k2=v2"]
    );
    let origins = harness.writes.origins.lock().clone();
    assert!(
        !origins.is_empty() && origins.iter().all(|&o| o == Origin::ChangeHandler),
        "a change handler's actions emit no change events: {origins:?}"
    );
    let stats = harness.outbox.stats(&harness.table);
    assert_eq!(stats.handled.load(std::sync::atomic::Ordering::Relaxed), 3);
}
