//! Pool priorities, bounded admission and counted shedding.
//!
//! Two pools per fragment. `high` admits client writes, which its worker
//! actors apply. `background` admits query pages, which run on the node's
//! query threads, not on worker actors: the pool is admission only (a
//! capacity and a shed count), so it has no workers.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::error::Shed;

/// Which pool admits an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Priority {
    /// Client writes, applied by the fragment's worker actors.
    High,
    /// Query pages, run on the query threads while they hold the permit.
    Background,
}

impl Priority {
    /// All priorities, in pool order.
    pub(crate) const ALL: [Priority; 2] = [Priority::High, Priority::Background];

    /// Short name used in health, metrics and errors.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Priority::High => "high",
            Priority::Background => "background",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Size of the `high` pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Worker actors in the pool (at least 1).
    pub workers: usize,
    /// Operations admitted and not yet finished, at most (at least 1). One
    /// more is shed.
    pub capacity: usize,
}

#[derive(Debug)]
struct Gauge {
    queued: AtomicUsize,
    shed: AtomicU64,
    capacity: usize,
}

/// Bounded admission to a fragment's pools. Every admitted operation holds a
/// [`Permit`] until it finishes (or is dropped with a dead worker), so the
/// bound covers the dispatcher's and the workers' mailboxes together (for
/// `high`) or the wait for and the run on a query thread (for `background`).
#[derive(Debug)]
pub(crate) struct Admission {
    fragment: u32,
    gauges: [Gauge; 2],
}

/// Proof of admission; releases its slot when dropped. It holds its
/// admission by `Arc` (an operation handed to another task or thread) or,
/// as `Permit<&Admission>`, borrowed: an operation that ends on the
/// caller's stack saves the `Arc`'s two atomic counts.
#[derive(Debug)]
pub(crate) struct Permit<A: Deref<Target = Admission> = Arc<Admission>> {
    admission: A,
    priority: Priority,
}

impl<A: Deref<Target = Admission>> Drop for Permit<A> {
    fn drop(&mut self) {
        self.admission.gauges[self.priority.index()]
            .queued
            .fetch_sub(1, Ordering::AcqRel);
    }
}

impl Admission {
    /// Admission for `fragment` with one capacity per pool, in [`Priority::ALL`] order.
    pub(crate) fn new(fragment: u32, capacities: [usize; 2]) -> Arc<Self> {
        let gauge = |capacity: usize| Gauge {
            queued: AtomicUsize::new(0),
            shed: AtomicU64::new(0),
            capacity: capacity.max(1),
        };
        Arc::new(Self {
            fragment,
            gauges: capacities.map(gauge),
        })
    }

    /// Admit one operation, or shed it (counted) when the pool is full.
    pub(crate) fn admit(self: &Arc<Self>, priority: Priority) -> Result<Permit, Shed> {
        self.enter(priority)?;
        Ok(Permit {
            admission: self.clone(),
            priority,
        })
    }

    /// [`Self::admit`], the permit borrowing this admission.
    pub(crate) fn admit_borrowed(&self, priority: Priority) -> Result<Permit<&Self>, Shed> {
        self.enter(priority)?;
        Ok(Permit {
            admission: self,
            priority,
        })
    }

    /// Take a slot of `priority`'s pool, or count a shed operation.
    fn enter(&self, priority: Priority) -> Result<(), Shed> {
        let gauge = &self.gauges[priority.index()];
        let queued = gauge.queued.fetch_add(1, Ordering::AcqRel);
        if queued >= gauge.capacity {
            gauge.queued.fetch_sub(1, Ordering::AcqRel);
            gauge.shed.fetch_add(1, Ordering::Relaxed);
            return Err(Shed {
                fragment: self.fragment,
                pool: priority.name(),
                capacity: gauge.capacity,
            });
        }
        Ok(())
    }

    /// Capacity of a pool.
    pub(crate) fn capacity(&self, priority: Priority) -> usize {
        self.gauges[priority.index()].capacity
    }

    /// Operations admitted and not finished, per pool.
    pub(crate) fn queued(&self, priority: Priority) -> usize {
        self.gauges[priority.index()].queued.load(Ordering::Acquire)
    }

    /// Operations shed since start, per pool.
    pub(crate) fn shed(&self, priority: Priority) -> u64 {
        self.gauges[priority.index()].shed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_is_bounded_and_shedding_is_counted_per_pool() {
        let admission = Admission::new(3, [2, 1]);
        let a = admission.admit(Priority::High).unwrap();
        let _b = admission.admit(Priority::High).unwrap();
        let shed = admission.admit(Priority::High).unwrap_err();
        assert_eq!(
            shed,
            Shed {
                fragment: 3,
                pool: "high",
                capacity: 2
            }
        );
        assert_eq!(admission.shed(Priority::High), 1);
        assert_eq!(admission.queued(Priority::High), 2);

        let page = admission
            .admit(Priority::Background)
            .expect("pools are independent");
        let shed = admission.admit(Priority::Background).unwrap_err();
        assert_eq!(
            shed,
            Shed {
                fragment: 3,
                pool: "background",
                capacity: 1
            }
        );
        assert_eq!(admission.shed(Priority::Background), 1);
        assert_eq!(admission.shed(Priority::High), 1, "counted in its own pool");
        drop(page);
        assert_eq!(admission.queued(Priority::Background), 0);
        assert!(admission.admit(Priority::Background).is_ok());

        drop(a);
        assert!(
            admission.admit(Priority::High).is_ok(),
            "a finished operation frees its slot"
        );
    }

    #[test]
    fn borrowed_permits_share_the_pools_of_owned_ones() {
        let admission = Admission::new(5, [1, 2]);
        let owned = admission.admit(Priority::Background).unwrap();
        let borrowed = admission.admit_borrowed(Priority::Background).unwrap();
        assert_eq!(admission.queued(Priority::Background), 2);
        assert_eq!(
            admission.admit_borrowed(Priority::Background).unwrap_err(),
            Shed {
                fragment: 5,
                pool: "background",
                capacity: 2
            },
            "a full pool sheds a borrowed permit too"
        );
        assert_eq!(admission.shed(Priority::Background), 1);
        drop(borrowed);
        assert_eq!(admission.queued(Priority::Background), 1);
        assert!(admission.admit(Priority::Background).is_ok());
        drop(owned);
        assert_eq!(admission.queued(Priority::Background), 0);
    }
}
