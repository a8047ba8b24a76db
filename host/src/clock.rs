//! The node-wide hybrid logical clock that issues record versions.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::record::Version;

/// Wall-clock time in Unix milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A hybrid logical clock. Every version it issues is greater than every
/// version it issued before and than the seed, even when the wall clock steps
/// back: the physical part never decreases and the counter breaks ties.
#[derive(Debug)]
pub struct HybridClock {
    writer: Arc<str>,
    last: Mutex<(u64, u64)>,
}

impl HybridClock {
    /// A clock for `writer` that issues versions above `(seed_ms, seed_counter)`,
    /// the highest version persisted before this boot.
    pub fn new(writer: Arc<str>, seed_ms: u64, seed_counter: u64) -> Self {
        Self {
            writer,
            last: Mutex::new((seed_ms, seed_counter)),
        }
    }

    /// The writer id stamped into versions.
    pub fn writer(&self) -> &Arc<str> {
        &self.writer
    }

    /// Issue the next version.
    pub fn tick(&self) -> Version {
        self.tick_at(now_ms())
    }

    /// Issue the next version given the wall clock reads `physical_ms`.
    pub fn tick_at(&self, physical_ms: u64) -> Version {
        let mut last = self.last.lock();
        *last = if physical_ms > last.0 {
            (physical_ms, 0)
        } else {
            (last.0, last.1 + 1)
        };
        Version {
            hlc_ms: last.0,
            counter: last.1,
            writer: self.writer.clone(),
        }
    }

    /// Raise the clock to at least `(hlc_ms, counter)`, a version applied
    /// from elsewhere, so every later tick issues a greater one.
    pub fn observe(&self, hlc_ms: u64, counter: u64) {
        let mut last = self.last.lock();
        if (hlc_ms, counter) > *last {
            *last = (hlc_ms, counter);
        }
    }

    /// The highest `(hlc_ms, counter)` issued so far.
    pub fn high_water(&self) -> (u64, u64) {
        *self.last.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_strictly_increase_even_when_the_wall_clock_steps_back() {
        let clock = HybridClock::new(Arc::from("n"), 0, 0);
        let a = clock.tick_at(100);
        let b = clock.tick_at(100);
        let c = clock.tick_at(50);
        let d = clock.tick_at(101);
        assert!(a < b && b < c && c < d);
        assert_eq!((c.hlc_ms, c.counter), (100, 2));
        assert_eq!((d.hlc_ms, d.counter), (101, 0));
    }

    #[test]
    fn a_seeded_clock_issues_versions_above_the_seed() {
        let clock = HybridClock::new(Arc::from("n"), 5_000, 7);
        let v = clock.tick_at(1_000);
        assert_eq!((v.hlc_ms, v.counter), (5_000, 8));
    }
}
