//! The delivery queue of one table partition `(table, fragment)`: fresh
//! events in outbox order, retries by due time, and how the next batch is
//! taken from them.

use std::collections::{BTreeMap, VecDeque};

use tokio::time::Instant;

use crate::store::PendingEvent;
use crate::store::outbox::outbox_seq;

/// One event as the dispatcher holds it.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub event: PendingEvent,
    /// Not delivered again before this.
    pub not_before: Instant,
    /// Most events of the batch this slot may go out in.
    pub piece: usize,
    /// When the dispatcher heard of it (a partial batch lingers from here).
    pub arrived: Instant,
    /// Consecutive deliveries that failed on the host's side (not charged
    /// as attempts); paces their retries.
    pub host_failures: u32,
}

impl Slot {
    /// A fresh event, due at once.
    pub fn fresh(event: PendingEvent, now: Instant) -> Self {
        Slot {
            event,
            not_before: now,
            piece: usize::MAX,
            arrived: now,
            host_failures: 0,
        }
    }

    fn deadline(&self) -> u64 {
        self.event.due_ms()
    }
}

/// Events of one `(table, fragment)`. Every operation the scheduler runs
/// per message is O(1) or O(log n) in the queue's length, so a backlog of
/// any size costs nothing per event beyond its own delivery.
#[derive(Default)]
pub(crate) struct Queue {
    /// Not yet tried, in outbox order (which is close to deadline order).
    pub fresh: VecDeque<Slot>,
    /// Backing off, by `(not_before, outbox sequence)`.
    pub waiting: BTreeMap<(Instant, u64), Slot>,
    /// Events of the batch in flight (at most one batch per queue).
    pub in_flight: usize,
    /// Deadline of the oldest event in flight.
    pub oldest_in_flight_ms: Option<u64>,
}

impl Queue {
    /// A batch is in flight.
    pub fn busy(&self) -> bool {
        self.in_flight > 0
    }

    /// Nothing waits to be delivered (a batch may be in flight).
    pub fn is_empty(&self) -> bool {
        self.fresh.is_empty() && self.waiting.is_empty()
    }

    /// Hold `slot` until its `not_before`.
    pub fn wait(&mut self, slot: Slot) {
        let seq = outbox_seq(&slot.event.key).unwrap_or_default();
        self.waiting.insert((slot.not_before, seq), slot);
    }

    /// When the earliest retry is due.
    pub fn next_retry(&self) -> Option<Instant> {
        self.waiting.keys().next().map(|(at, _)| *at)
    }

    /// The scheduling priority: deadline of the oldest event at a queue
    /// end (an estimate that costs O(1); lower goes first).
    pub fn priority(&self) -> u64 {
        [
            self.fresh.front().map(Slot::deadline),
            self.waiting.values().next().map(Slot::deadline),
            self.oldest_in_flight_ms,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(u64::MAX)
    }

    /// The exact oldest deadline (O(n): for status requests only).
    pub fn oldest_deadline(&self) -> Option<u64> {
        self.fresh
            .iter()
            .chain(self.waiting.values())
            .map(Slot::deadline)
            .chain(self.oldest_in_flight_ms)
            .min()
    }

    /// The next batch: due retries first (in pieces), else fresh events.
    pub fn take_batch(&mut self, max_batch: usize, now: Instant) -> Vec<Slot> {
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

    /// Start delivering `batch` (taken from this queue).
    pub fn start(&mut self, batch: &[Slot]) {
        self.in_flight = batch.len();
        self.oldest_in_flight_ms = batch.iter().map(Slot::deadline).min();
    }

    /// The batch in flight finished; `retry` holds its events to try again.
    pub fn finish(&mut self, events: usize, retry: Vec<Slot>) {
        self.in_flight = self.in_flight.saturating_sub(events);
        self.oldest_in_flight_ms = None;
        for slot in retry {
            self.wait(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::names::TableName;

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
            not_before,
            piece,
            ..Slot::fresh(
                PendingEvent::new(0, seq, &table, &format!("k{seq}"), &record, 6),
                now,
            )
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
        let seqs: Vec<u64> = fresh
            .iter()
            .map(|slot| outbox_seq(&slot.event.key).unwrap())
            .collect();
        assert_eq!(seqs, vec![0, 1, 2, 3], "in outbox order");
        assert_eq!(queue.waiting.len(), 1, "the retry not yet due waits");
    }
}
