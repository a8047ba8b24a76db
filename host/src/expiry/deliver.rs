//! Delivering one batch: call the bound handler (on the plugin threads,
//! within expiry's share) with an expiry or a change batch, validate its
//! answer, write its actions, then settle the events and report back to the
//! scheduler.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ebb_proto::plugin::v1 as abi;
use futures::future::BoxFuture;

use super::ExpiryConfig;
use super::actions::{ActionWriter, Skipped, apply, handler_outcome};
use super::binding::Binding;
use super::command::{Command, Finished};
use super::error::{Failure, HandlerFailed, HostFailed};
use super::outbox::Outbox;
use super::queue::Slot;
use super::settle::{Delivered, Settler, retry_after_host_failure, settle};
use crate::names::TableName;
use crate::plugin::{CallCause, HandlerKind, PluginCallError, PluginRegistry, RecordReader};
use crate::store::FragmentId;
use crate::write::Origin;

/// The events of one batch, as its handler gets them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Batch {
    /// Expired records, for an expiry handler.
    Expiry(Vec<abi::ExpiryEvent>),
    /// Writes and deletes, for a change handler.
    Change(Vec<abi::ChangeEvent>),
}

impl Batch {
    /// The batch of `slots` of `source` (a table, or its change stream),
    /// each event's attempt counting this delivery.
    fn of(source: &TableName, slots: &[Slot]) -> Self {
        if source.changes_of().is_some() {
            Batch::Change(
                slots
                    .iter()
                    .filter_map(|slot| slot.event.change_event().cloned())
                    .map(|mut event| {
                        event.attempt += 1;
                        event
                    })
                    .collect(),
            )
        } else {
            Batch::Expiry(
                slots
                    .iter()
                    .filter_map(|slot| slot.event.expiry_event().cloned())
                    .map(|mut event| {
                        event.attempt += 1;
                        event
                    })
                    .collect(),
            )
        }
    }

    fn len(&self) -> usize {
        match self {
            Batch::Expiry(events) => events.len(),
            Batch::Change(events) => events.len(),
        }
    }

    fn kind(&self) -> HandlerKind {
        match self {
            Batch::Expiry(_) => HandlerKind::Expiry,
            Batch::Change(_) => HandlerKind::Change,
        }
    }

    /// The call for a binding with settings `config`.
    fn into_call(self, config: String) -> abi::call_request::Call {
        match self {
            Batch::Expiry(events) => {
                abi::call_request::Call::Expiry(abi::ExpiryBatch { events, config })
            }
            Batch::Change(events) => {
                abi::call_request::Call::Change(abi::ChangeBatch { events, config })
            }
        }
    }
}

/// How a batch reaches its handler.
pub(crate) trait Handlers: Send + Sync + 'static {
    /// Call `binding`'s handler with `batch` and return its answer. A
    /// [`Failure::Host`] costs the events nothing.
    fn call(
        &self,
        binding: &Binding,
        batch: Batch,
    ) -> BoxFuture<'static, Result<abi::CallResponse, Failure>>;
}

/// The handlers of the installed plugins, called on the plugin threads
/// (within expiry's share of them) under the handler deadline.
pub(crate) struct PluginHandlers {
    /// The installed plugins.
    pub plugins: Arc<PluginRegistry>,
    /// Deadline of one call.
    pub deadline: Duration,
    /// Where the handlers' `ebb.get` reads.
    pub reader: Arc<dyn RecordReader>,
}

impl Handlers for PluginHandlers {
    fn call(
        &self,
        binding: &Binding,
        batch: Batch,
    ) -> BoxFuture<'static, Result<abi::CallResponse, Failure>> {
        let plugin = self.plugins.get(&binding.plugin);
        let runtime = self.plugins.runtime().clone();
        let binding = binding.clone();
        let deadline = self.deadline;
        let reader = self.reader.clone();
        Box::pin(async move {
            let plugin = plugin.ok_or_else(|| HandlerFailed::NotInstalled {
                plugin: binding.plugin.clone(),
            })?;
            let kind = batch.kind();
            if plugin.handler(&binding.function, kind).is_err() {
                return Err(HandlerFailed::NotAHandler {
                    plugin: binding.plugin,
                    version: plugin.info.version,
                    function: binding.function,
                    kind,
                }
                .into());
            }
            let call = batch.into_call(binding.config.clone().unwrap_or_default());
            let function = binding.function;
            runtime
                .run_expiry(move || plugin.call_handler(&function, call, deadline, reader))
                .await
                .map_err(HostFailed::Work)?
                .map_err(call_failure)
        })
    }
}

/// What a batch needs from the node.
pub(crate) struct Context {
    /// Bindings, statistics, the command channel.
    pub outbox: Arc<Outbox>,
    /// Where events are settled.
    pub settler: Arc<dyn Settler>,
    /// The handlers.
    pub handlers: Arc<dyn Handlers>,
    /// Where actions are written.
    pub actions: Arc<dyn ActionWriter>,
    /// Pacing.
    pub config: ExpiryConfig,
    /// Largest value an action may put.
    pub max_value_bytes: usize,
}

/// Deliver one batch of `table`'s partition in `fragment` and settle its
/// events; always reports back with [`Command::Finished`].
pub(crate) async fn deliver(
    ctx: Arc<Context>,
    table: TableName,
    fragment: FragmentId,
    binding: Binding,
    slots: Vec<Slot>,
) {
    let events = slots.len();
    let stats = ctx.outbox.stats(&table);
    stats.calls.fetch_add(1, Ordering::Relaxed);
    stats.attempts.fetch_add(events as u64, Ordering::Relaxed);
    let mut delivered = Delivered {
        handled: Vec::new(),
        failed: Vec::new(),
        whole_failure: false,
        batch_len: events,
    };
    match call_and_apply(&ctx, &table, &binding, &slots).await {
        Ok(retry) => {
            for (index, slot) in slots.into_iter().enumerate() {
                if retry.contains(&(index as u32)) {
                    delivered.failed.push(slot);
                } else {
                    delivered.handled.push(slot);
                }
            }
        }
        Err(Failure::Handler(error)) => {
            let error = error.to_string();
            tracing::warn!(%table, fragment, events, %error, "expiry handler call failed; retrying");
            stats.failed_calls.fetch_add(1, Ordering::Relaxed);
            *stats.last_error.lock() = Some(error.clone());
            delivered.whole_failure = true;
            for mut slot in slots {
                slot.event.stored.last_error = error.clone();
                delivered.failed.push(slot);
            }
        }
        Err(Failure::Host(error)) => {
            tracing::warn!(%table, fragment, events, %error, "expiry batch not delivered on the host's side; retrying without charging an attempt");
            *stats.last_error.lock() = Some(error.to_string());
            let retry = retry_after_host_failure(&ctx.config, slots);
            ctx.outbox.send(Command::Finished(Finished {
                table,
                fragment,
                retry,
                events,
            }));
            return;
        }
    }
    let retry = settle(
        &ctx.settler,
        fragment,
        &ctx.config,
        &stats,
        &table,
        &binding,
        delivered,
    )
    .await;
    ctx.outbox.send(Command::Finished(Finished {
        table,
        fragment,
        retry,
        events,
    }));
}

/// Call `bound`'s handler and apply the actions it returned, counting and
/// logging the ones skipped because their condition did not hold. `Ok`
/// holds the indexes of events the handler asked to retry. A change
/// handler's actions are written as its own, so they emit no change events.
async fn call_and_apply(
    ctx: &Context,
    bound: &TableName,
    binding: &Binding,
    slots: &[Slot],
) -> Result<Vec<u32>, Failure> {
    let batch = Batch::of(bound, slots);
    let count = batch.len();
    let origin = match batch.kind() {
        HandlerKind::Expiry => Origin::Client,
        HandlerKind::Change => Origin::ChangeHandler,
    };
    let response = ctx.handlers.call(binding, batch).await?;
    let handler = format!("{}.{}", binding.plugin, binding.function);
    let outcome = handler_outcome(
        response,
        &handler,
        count,
        ctx.config.max_actions_per_event,
        ctx.max_value_bytes,
    )
    .map_err(HandlerFailed::from)?;
    let skipped = apply(&*ctx.actions, outcome.actions, origin).await?;
    if !skipped.is_empty() {
        ctx.outbox
            .stats(bound)
            .skipped_actions
            .fetch_add(skipped.len() as u64, Ordering::Relaxed);
        for Skipped {
            table,
            key,
            current,
        } in skipped
        {
            let current = current.map_or_else(|| "none".to_string(), |v| v.to_string());
            tracing::debug!(handler, %table, key, current, "handler action skipped: its condition did not hold");
        }
    }
    Ok(outcome.failed)
}

/// Whose failure a failed handler call is: the host's when no instance was
/// free or the call was starved of CPU (not charged to the events), else
/// the handler's.
fn call_failure(error: PluginCallError) -> Failure {
    match error.cause {
        CallCause::NoInstance(_) => HostFailed::NoInstance(error).into(),
        CallCause::Starved { .. } => HostFailed::Starved(error).into(),
        _ => HandlerFailed::Call(error).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_starved_of_cpu_or_without_an_instance_is_the_hosts_failure() {
        let failure = |cause| {
            call_failure(PluginCallError {
                plugin: "p".into(),
                function: "h".into(),
                cause,
            })
        };
        let starved = CallCause::Starved {
            deadline_ms: 1000,
            waited_ms: 10_000,
        };
        assert!(matches!(
            failure(starved),
            Failure::Host(HostFailed::Starved(_))
        ));
        assert!(matches!(
            failure(CallCause::NoInstance("full".into())),
            Failure::Host(HostFailed::NoInstance(_))
        ));
        for cause in [
            CallCause::Deadline(1000),
            CallCause::Trap("unreachable".into()),
        ] {
            assert!(matches!(
                failure(cause),
                Failure::Handler(HandlerFailed::Call(_))
            ));
        }
    }
}
