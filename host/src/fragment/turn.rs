//! Whose turn it is to apply a worker slot's writes: the caller's own task, or the slot's worker.
//!
//! A write goes to the worker its key hashes to, so one key's writes apply
//! in the order they were admitted. Handing a write to the worker and its
//! outcome back costs two task wake-ups, often across threads, which is
//! more than the write itself (an in-memory merge under the partition lock).
//! So a write whose slot has nothing queued and nothing applying is applied
//! on the caller's task instead ([`Turn::inline`]). Invariants:
//!
//! - At most one of a slot's writes applies at a time: the inline path and
//!   the worker both hold [`Turn`]'s lock while they apply.
//! - A write never overtakes an earlier admitted write of its slot: it
//!   applies inline only if no operation of the slot is queued
//!   ([`Queued`] counts them from before they are sent until they are
//!   dropped: applied, refused, or lost with a dead worker).
//! - An inline write applies only while the fragment takes writes (its
//!   workers are published), checked under the lock; withdrawing the
//!   workers waits for every slot's lock ([`Turn::wait_idle`]), so a
//!   quiesce's final flush finds every write that was acknowledged.
//! - Nothing waits while holding the lock: it is taken and released around
//!   the in-memory apply only (the same rule as the partition locks), so a
//!   worker blocking on it waits for at most one write.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::{Mutex, MutexGuard};

/// The turn of one worker slot of a fragment.
#[derive(Debug, Default)]
pub(crate) struct Turn {
    /// Held while one of the slot's writes applies.
    applying: Mutex<()>,
    /// Operations of the slot sent toward its worker and not yet dropped.
    queued: AtomicUsize,
}

impl Turn {
    /// The right to apply a write on the caller's task now: `Some` only if
    /// no other write of the slot is applying and none is queued. Hold the
    /// guard while applying, and nothing else.
    pub(crate) fn inline(&self) -> Option<MutexGuard<'_, ()>> {
        let applying = self.applying.try_lock()?;
        (self.queued.load(Ordering::SeqCst) == 0).then_some(applying)
    }

    /// Wait until no write of the slot applies (at most one write's apply).
    pub(crate) fn wait_idle(&self) {
        drop(self.applying.lock());
    }
}

/// An operation's place in its slot's queue, taken before it is sent to
/// the worker; dropping it gives the place back.
#[derive(Debug)]
pub(crate) struct Queued(Arc<Turn>);

impl Queued {
    /// Count one more operation queued on `turn`.
    pub(crate) fn new(turn: Arc<Turn>) -> Self {
        turn.queued.fetch_add(1, Ordering::SeqCst);
        Self(turn)
    }

    /// Run `apply` (the worker's apply of this operation) holding the
    /// slot's lock, so no inline write runs at the same time.
    pub(crate) fn apply<T>(&self, apply: impl FnOnce() -> T) -> T {
        let _applying = self.0.applying.lock();
        apply()
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_goes_inline_only_when_nothing_of_its_slot_is_queued_or_applying() {
        let turn = Arc::new(Turn::default());
        {
            let _applying = turn.inline().expect("an idle slot");
            // Another write meanwhile must queue.
            assert!(turn.inline().is_none());
        }
        let queued = Queued::new(turn.clone());
        assert!(turn.inline().is_none(), "a queued operation goes first");
        let second = Queued::new(turn.clone());
        drop(queued);
        assert!(turn.inline().is_none(), "one still queued");
        drop(second);
        assert!(turn.inline().is_some(), "the queue is empty again");
    }

    #[test]
    fn a_worker_applying_excludes_inline_writes() {
        let turn = Arc::new(Turn::default());
        let queued = Queued::new(turn.clone());
        queued.apply(|| {
            assert!(turn.inline().is_none());
        });
        drop(queued);
        assert!(turn.inline().is_some());
    }

    #[test]
    fn inline_and_queued_writes_of_one_slot_never_overlap() {
        // Threads race inline writes against queued ones; a counter that
        // must never read other than 0 on entry proves the exclusion.
        let turn = Arc::new(Turn::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let applied = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|thread| {
                let (turn, inside, applied) = (turn.clone(), inside.clone(), applied.clone());
                std::thread::spawn(move || {
                    let enter = || {
                        assert_eq!(
                            inside.fetch_add(1, Ordering::SeqCst),
                            0,
                            "two applies at once"
                        );
                        std::hint::spin_loop();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        applied.fetch_add(1, Ordering::SeqCst);
                    };
                    for i in 0..2_000 {
                        if (i + thread) % 3 == 0 {
                            Queued::new(turn.clone()).apply(enter);
                        } else if let Some(_applying) = turn.inline() {
                            enter();
                        } else {
                            Queued::new(turn.clone()).apply(enter);
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(applied.load(Ordering::SeqCst), 8_000);
        assert_eq!(turn.queued.load(Ordering::SeqCst), 0);
    }
}
