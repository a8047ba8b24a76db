//! The order in which the partial aggregates of pipelined pages merge:
//! round by round (every partition's first page, then every partition's
//! second page, ...), whatever order the pages finish in. A query's result
//! then never depends on timing: merges need only be associative (not
//! commutative), and floating-point sums come out bit-identical run to run.

use std::collections::BTreeMap;

/// Pages that finished, held until every page before them in round order
/// has been handed on.
#[derive(Debug)]
pub(crate) struct MergeOrder<T> {
    /// Per scan: how many pages it produced in all, once its last arrived.
    finished: Vec<Option<u32>>,
    /// Per scan: pages arrived so far.
    arrived: Vec<u32>,
    /// Arrived pages not yet due, by (page number, scan).
    waiting: BTreeMap<(u32, usize), T>,
    /// The next page due: (page number, scan).
    next: (u32, usize),
}

impl<T> MergeOrder<T> {
    /// One entry per scan: `true` for a scan that has no pages at all.
    pub(crate) fn new(done: impl IntoIterator<Item = bool>) -> Self {
        let finished: Vec<Option<u32>> = done.into_iter().map(|d| d.then_some(0)).collect();
        MergeOrder {
            arrived: vec![0; finished.len()],
            finished,
            waiting: BTreeMap::new(),
            next: (0, 0),
        }
    }

    /// Page `item` of `scan` arrived (`last`: the scan has no more); the
    /// pages now due, in round order.
    pub(crate) fn arrive(&mut self, scan: usize, last: bool, item: T) -> Vec<T> {
        let page = self.arrived[scan];
        self.arrived[scan] += 1;
        if last {
            self.finished[scan] = Some(page + 1);
        }
        self.waiting.insert((page, scan), item);
        let mut due = Vec::new();
        loop {
            let (page, scan) = self.next;
            if scan == self.finished.len() {
                // End of a round: the next one exists while a scan may
                // still produce a page numbered `page + 1`.
                let more = self.finished.iter().any(|f| f.is_none_or(|n| n > page + 1));
                if !more {
                    break;
                }
                self.next = (page + 1, 0);
                continue;
            }
            if self.finished[scan].is_some_and(|n| page >= n) {
                self.next = (page, scan + 1);
                continue;
            }
            match self.waiting.remove(&(page, scan)) {
                Some(item) => {
                    due.push(item);
                    self.next = (page, scan + 1);
                }
                None => break,
            }
        }
        due
    }

    /// True when every page that arrived was handed on.
    pub(crate) fn is_drained(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    #[test]
    fn pages_come_out_in_round_order_whatever_order_they_arrive_in() {
        let mut rng = Rng(0x853c_49e6_748f_ea9b);
        for case in 0..500 {
            // Pages per scan; 0 means the scan had none.
            let pages: Vec<u32> = (0..1 + rng.below(6)).map(|_| rng.below(5) as u32).collect();
            let mut expected = Vec::new();
            for page in 0..pages.iter().copied().max().unwrap_or(0) {
                for (scan, &count) in pages.iter().enumerate() {
                    if page < count {
                        expected.push((page, scan));
                    }
                }
            }
            // Each scan's pages arrive in its own order (a scan has one page
            // in flight), scans interleaved at random.
            let mut next = vec![0u32; pages.len()];
            let mut order = MergeOrder::new(pages.iter().map(|&n| n == 0));
            let mut merged = Vec::new();
            while next.iter().zip(&pages).any(|(a, b)| a < b) {
                let scan = rng.below(pages.len() as u64) as usize;
                if next[scan] == pages[scan] {
                    continue;
                }
                let page = next[scan];
                next[scan] += 1;
                merged.extend(order.arrive(scan, page + 1 == pages[scan], (page, scan)));
            }
            assert_eq!(merged, expected, "case {case}: {pages:?}");
            assert!(order.is_drained());
        }
    }
}
