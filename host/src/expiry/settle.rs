//! Settling a delivered batch: handled events leave the outbox; failed ones
//! get their attempt recorded and a backoff, or move to dead letters after
//! `max_attempts`. A host failure settles nothing: its events are retried
//! with backoff and keep their attempts.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::future::BoxFuture;
use rand::Rng;
use tokio::time::Instant;

use super::ExpiryConfig;
use super::binding::Binding;
use super::outbox::TableStats;
use super::queue::Slot;
use crate::clock::now_ms;
use crate::names::TableName;
use crate::store::outbox::dead_letter_key;
use crate::store::{Family, FamilyWrite, FragmentId, KvStore};

/// Where the writes that settle a batch of one fragment go: the store on
/// a single node; in a cluster, the fragment's group (a `Settle` command
/// its leader proposes, so every replica removes the same events).
pub(crate) trait Settler: Send + Sync + 'static {
    /// Write `writes` (outbox deletes and rewrites, dead letters) for
    /// events of `fragment`, fsynced with `sync` (a cluster's log entry is
    /// as durable as its group's writes); an error leaves the events in
    /// the outbox.
    fn settle(
        &self,
        fragment: FragmentId,
        writes: Vec<FamilyWrite>,
        sync: bool,
    ) -> BoxFuture<'static, Result<(), String>>;
}

/// A single node's settler: the writes go to the store directly.
pub(crate) struct StoreSettler(pub Arc<dyn KvStore>);

impl Settler for StoreSettler {
    fn settle(
        &self,
        _fragment: FragmentId,
        writes: Vec<FamilyWrite>,
        sync: bool,
    ) -> BoxFuture<'static, Result<(), String>> {
        let store = self.0.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || store.write_entries(&writes, sync))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())
        })
    }
}

/// A failed batch is retried in pieces of at most `1 / SPLIT` of its size,
/// so a poison event is alone after a few failures (256 → 32 → 4 → 1).
const SPLIT: usize = 8;
/// Tries of the store write that settles a batch before giving up (the
/// events then stay in the outbox and are delivered again after a restart).
const SETTLE_TRIES: u32 = 3;

/// Delay before attempt `attempt + 1` after `attempt` failures: doubling
/// from the base, capped, with jitter in [½, 1] of the delay.
pub(crate) fn backoff(config: &ExpiryConfig, attempt: u32) -> Duration {
    let doubled = config
        .backoff_base
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    let capped = doubled.min(config.backoff_max);
    capped.mul_f64(rand::rng().random_range(0.5..=1.0))
}

/// The events of a batch the host failed to deliver, to try again after a
/// backoff paced by their consecutive host failures. Nothing is written:
/// their stored attempts stay as they were.
pub(crate) fn retry_after_host_failure(config: &ExpiryConfig, slots: Vec<Slot>) -> Vec<Slot> {
    slots
        .into_iter()
        .map(|mut slot| {
            slot.host_failures += 1;
            slot.not_before = Instant::now() + backoff(config, slot.host_failures);
            slot
        })
        .collect()
}

/// How a batch the handler answered came out.
pub(crate) struct Delivered {
    /// Events handled: they leave the outbox.
    pub handled: Vec<Slot>,
    /// Events that failed (the handler listed them, or the call failed as a
    /// whole): each is charged an attempt.
    pub failed: Vec<Slot>,
    /// The call failed as a whole: its events are retried in pieces.
    pub whole_failure: bool,
    /// Events the batch held.
    pub batch_len: usize,
}

/// Persist the outcome of a batch: handled events leave the outbox; failed
/// events get their attempt and error recorded, or move to dead letters
/// after `max_attempts`. Returns the slots to deliver again.
pub(crate) async fn settle(
    settler: &Arc<dyn Settler>,
    fragment: FragmentId,
    config: &ExpiryConfig,
    stats: &TableStats,
    table: &TableName,
    binding: &Binding,
    delivered: Delivered,
) -> Vec<Slot> {
    let Delivered {
        handled,
        failed,
        whole_failure,
        batch_len,
    } = delivered;
    let now = now_ms();
    let mut writes = Vec::with_capacity(handled.len() + failed.len() * 2);
    for slot in &handled {
        writes.push(FamilyWrite::Delete(
            Family::ExpiryOutbox,
            slot.event.key.clone(),
        ));
        stats.record_lag(now.saturating_sub(slot.event.due_ms()));
    }
    stats
        .handled
        .fetch_add(handled.len() as u64, Ordering::Relaxed);
    let piece = if whole_failure {
        batch_len.div_ceil(SPLIT).max(1)
    } else {
        usize::MAX
    };
    let mut retry = Vec::new();
    let mut dead = 0u64;
    for mut slot in failed {
        slot.host_failures = 0;
        let stored = &mut slot.event.stored;
        if stored.last_error.is_empty() {
            stored.last_error = "the handler listed the event in `failed`".into();
        }
        stored.last_attempt_ms = now;
        let attempt = slot.event.attempt() + 1;
        slot.event.set_attempt(attempt);
        if attempt >= binding.max_attempts {
            slot.event.stored.dead_at_ms = now;
            writes.push(FamilyWrite::Delete(
                Family::ExpiryOutbox,
                slot.event.key.clone(),
            ));
            writes.push(FamilyWrite::Put(
                Family::DeadLetters,
                dead_letter_key(table, slot.event.id()),
                slot.event.encode(),
            ));
            dead += 1;
            tracing::warn!(%table, key = %slot.event.record_key(), attempt, error = %slot.event.stored.last_error, "handler event moved to dead letters");
        } else {
            writes.push(FamilyWrite::Put(
                Family::ExpiryOutbox,
                slot.event.key.clone(),
                slot.event.encode(),
            ));
            slot.not_before = Instant::now() + backoff(config, attempt);
            slot.piece = piece;
            retry.push(slot);
        }
    }
    stats
        .failed_events
        .fetch_add(retry.len() as u64 + dead, Ordering::Relaxed);
    stats.dead_letters.fetch_add(dead, Ordering::Relaxed);
    for attempt in 1..=SETTLE_TRIES {
        match settler.settle(fragment, writes.clone(), false).await {
            Ok(()) => break,
            Err(error) if attempt == SETTLE_TRIES => {
                // The events stay in the outbox as they were: a restart
                // (or in a cluster, the fragment's next leader) delivers
                // them again, which at-least-once allows.
                tracing::error!(%table, %error, "cannot settle expiry events; they will be delivered again after a restart or a change of leader");
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
}
