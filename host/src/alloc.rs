//! Handing memory that a thread freed back to the OS when the thread goes
//! idle.
//!
//! The `ebb` binary allocates with mimalloc, which keeps the pages a thread
//! freed in that thread's segments and returns them to the OS only on a
//! later allocator call of the same thread. A query thread or tokio worker
//! that goes idle right after a query that built large values would hold
//! that memory for as long as it stays idle (measured: 200 MiB still
//! resident 10 s after four 1 MB-parameter concatenations, BENCHMARKS.md).
//! [`release_idle_memory`] is called where a thread goes idle, and
//! [`release_thread_memory`] where one finishes a one-off bulk job.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Shortest time between two collections on one thread: a collection walks
/// the thread's heap, cheap but not free, and a busy thread goes idle often.
pub const RELEASE_INTERVAL: Duration = Duration::from_secs(1);

thread_local! {
    static LAST_RELEASE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Ask the allocator to return what this thread freed, at most once per
/// [`RELEASE_INTERVAL`] per thread. Cheap when called more often. When
/// mimalloc is not the global allocator (an embedding program's choice),
/// its heaps are empty and this does nothing.
pub fn release_idle_memory() {
    let now = Instant::now();
    let due = LAST_RELEASE.with(|last| {
        let due = last
            .get()
            .is_none_or(|at| now.duration_since(at) >= RELEASE_INTERVAL);
        if due {
            last.set(Some(now));
        }
        due
    });
    if due {
        // SAFETY: mi_collect takes no pointers; it frees unused pages of
        // the calling thread's heap and purges what the delay allows.
        unsafe { libmimalloc_sys::mi_collect(false) };
    }
}

/// Return to the OS, now and in full, what this thread freed: every page
/// visited (mimalloc's idle collection skips the ones it keeps as full)
/// and nothing left for a later purge. For a thread that just finished a
/// one-off bulk job, such as loading a fragment at boot (measured: the
/// resident size after boot 186 → 176 MiB at once, instead of when the idle
/// thread exits 10 s later). Costs a walk of the thread's heap.
pub fn release_thread_memory() {
    // SAFETY: as in `release_idle_memory`.
    unsafe { libmimalloc_sys::mi_collect(true) };
}
