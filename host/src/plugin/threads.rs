//! The plugin threads: a fixed set (`ebb-query-N`,
//! [`PluginLimits::threads`](super::PluginLimits::threads) of them) and the
//! one place plugin code runs, so neither scans nor the sandbox run on a
//! tokio worker, and never on more threads than the limit. Two kinds of work
//! share them, each from its own FIFO queue ([`WorkClass`]):
//!
//! - **query** work: every page of every query, and its merges and sorts
//!   (which may call plugins);
//! - **expiry** work: expiry-handler calls.
//!
//! Each kind has a guaranteed share, so neither can starve the other, and
//! neither share is held idle when its kind has nothing to do:
//!
//! - while both kinds wait, a thread that becomes free takes the kind that
//!   did not go last (they alternate), so waiting expiry work gets at least
//!   every other thread that frees up, however many query jobs are queued:
//!   it starts once one running job ends;
//! - expiry work never holds more than `threads - 1` threads (with two or
//!   more), so at least one thread always serves queries, however many
//!   handler calls are queued; with one thread the two kinds alternate job
//!   by job.
//!
//! They run at a lower OS priority ([`QUERY_NICE`]) than the tokio workers
//! that accept and answer requests: while a heavy query runs, a point read
//! still gets a core when it needs one, and the query takes what is left.
//!
//! A fixed set rather than a semaphore in front of tokio's blocking pool:
//! a thread that finishes a job takes the next one straight from the queue,
//! warm, where a released permit races the thread back to idle and makes
//! tokio start a fresh one (on the plugins bench that took the filter from
//! 1.44x of native to 1.9x).

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread;

use parking_lot::{Condvar, Mutex};

type Job = Box<dyn FnOnce() + Send>;

/// How much nicer the plugin threads are than the process (Linux nice
/// values; 19 is the lowest priority). At +10 a busy plugin thread gets about
/// a tenth of the CPU time a request thread wants when both want the same
/// core, so requests are served first and queries still progress under
/// request load.
pub const QUERY_NICE: i32 = 10;

/// Lower the calling thread's priority by [`QUERY_NICE`] (to 19 at most).
/// Best effort: on failure (or off Linux) the thread keeps the process's.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid, getpriority and setpriority only read their
        // arguments; on Linux PRIO_PROCESS with a thread id names that one
        // thread.
        let done = unsafe {
            let tid = libc::gettid() as libc::id_t;
            let now = libc::getpriority(libc::PRIO_PROCESS, tid);
            libc::setpriority(libc::PRIO_PROCESS, tid, (now + QUERY_NICE).min(19))
        };
        if done != 0 {
            tracing::debug!(
                "cannot lower the plugin thread's priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// The work did not finish: it panicked (the thread survives and goes on
/// with the next job), or the threads had stopped. A failure of the host,
/// not of the plugin the work called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("plugin work panicked or its threads stopped")]
pub struct WorkFailed;

/// Which queue, and so which share of the threads, a job draws on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkClass {
    /// Query pages, merges, sorts and finishes.
    Query,
    /// Expiry-handler calls.
    Expiry,
}

impl WorkClass {
    fn other(self) -> Self {
        match self {
            WorkClass::Query => WorkClass::Expiry,
            WorkClass::Expiry => WorkClass::Query,
        }
    }
}

/// The queues and what runs, under one lock.
struct Queues {
    query: VecDeque<Job>,
    expiry: VecDeque<Job>,
    /// Expiry jobs running now.
    expiry_running: usize,
    /// Most expiry jobs that may run at once.
    expiry_cap: usize,
    /// The class of the job taken last; while both wait, the other goes next.
    last: WorkClass,
    /// Cleared when the owner is dropped: threads finish the queued jobs and exit.
    open: bool,
}

impl Queues {
    /// The next job a free thread runs, if any may run now.
    fn take(&mut self) -> Option<(WorkClass, Job)> {
        let query = !self.query.is_empty();
        let expiry = !self.expiry.is_empty() && self.expiry_running < self.expiry_cap;
        let class = match (query, expiry) {
            (true, true) => self.last.other(),
            (true, false) => WorkClass::Query,
            (false, true) => WorkClass::Expiry,
            (false, false) => return None,
        };
        self.last = class;
        let job = match class {
            WorkClass::Query => self.query.pop_front(),
            WorkClass::Expiry => {
                self.expiry_running += 1;
                self.expiry.pop_front()
            }
        }?;
        Some((class, job))
    }

    fn is_empty(&self) -> bool {
        self.query.is_empty() && self.expiry.is_empty()
    }
}

struct Shared {
    queues: Mutex<Queues>,
    /// Signalled when a job is queued, an expiry job ends or the set closes.
    ready: Condvar,
}

/// Most expiry jobs at once over `threads` threads: all but one, so a
/// query always has a thread (with one thread, the classes alternate).
fn expiry_cap(threads: usize) -> usize {
    threads.saturating_sub(1).max(1)
}

fn work_loop(shared: &Shared) {
    lower_priority();
    let mut queues = shared.queues.lock();
    loop {
        if let Some((class, job)) = queues.take() {
            drop(queues);
            job();
            crate::alloc::release_idle_memory();
            queues = shared.queues.lock();
            if class == WorkClass::Expiry {
                queues.expiry_running -= 1;
                // An expiry job held back by the cap may go now.
                shared.ready.notify_one();
            }
            continue;
        }
        if !queues.open && queues.is_empty() {
            return;
        }
        // A wait that times out lets an idle thread hand back what its
        // last jobs freed.
        if shared
            .ready
            .wait_for(&mut queues, crate::alloc::RELEASE_INTERVAL)
            .timed_out()
        {
            drop(queues);
            crate::alloc::release_idle_memory();
            queues = shared.queues.lock();
        }
    }
}

/// A fixed set of threads and their queues. Dropping it lets the threads
/// finish the queued jobs and exit.
pub struct PluginThreads {
    shared: Arc<Shared>,
}

impl PluginThreads {
    /// Start `count` threads (at least one).
    pub fn start(count: usize) -> std::io::Result<Self> {
        let count = count.max(1);
        let shared = Arc::new(Shared {
            queues: Mutex::new(Queues {
                query: VecDeque::new(),
                expiry: VecDeque::new(),
                expiry_running: 0,
                expiry_cap: expiry_cap(count),
                last: WorkClass::Query,
                open: true,
            }),
            ready: Condvar::new(),
        });
        for n in 0..count {
            let shared = shared.clone();
            thread::Builder::new()
                .name(format!("ebb-query-{n}"))
                .spawn(move || work_loop(&shared))?;
        }
        Ok(Self { shared })
    }

    /// Run query `work` on one of the threads, after the query work queued
    /// before it.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, WorkFailed> {
        self.run_as(WorkClass::Query, work).await
    }

    /// Run `work` of `class` on one of the threads, after the work of its
    /// class queued before it, within the class's share (see the module
    /// docs).
    pub async fn run_as<T: Send + 'static>(
        &self,
        class: WorkClass,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, WorkFailed> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.queue(
            class,
            Box::new(move || {
                if let Ok(result) = catch_unwind(AssertUnwindSafe(work)) {
                    let _ = reply.send(result);
                }
            }),
        )?;
        answer.await.map_err(|_| WorkFailed)
    }

    /// Queue `job` (which must not unwind) in `class`'s queue.
    fn queue(&self, class: WorkClass, job: Job) -> Result<(), WorkFailed> {
        {
            let mut queues = self.shared.queues.lock();
            if !queues.open {
                return Err(WorkFailed);
            }
            match class {
                WorkClass::Query => queues.query.push_back(job),
                WorkClass::Expiry => queues.expiry.push_back(job),
            }
        }
        self.shared.ready.notify_one();
        Ok(())
    }
}

impl Drop for PluginThreads {
    fn drop(&mut self) {
        self.shared.queues.lock().open = false;
        self.shared.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn work_runs_on_at_most_count_threads_and_returns_its_result() {
        let threads = Arc::new(PluginThreads::start(2).unwrap());
        let (started, running, most) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
        );
        let jobs: Vec<_> = (0..8)
            .map(|i| {
                let threads = threads.clone();
                let (started, running, most) = (started.clone(), running.clone(), most.clone());
                tokio::spawn(async move {
                    threads
                        .run(move || {
                            started.fetch_add(1, Ordering::SeqCst);
                            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            // The first job waits for a second one to start,
                            // so two threads are seen running together.
                            let waited = std::time::Instant::now();
                            while started.load(Ordering::SeqCst) < 2
                                && waited.elapsed() < Duration::from_secs(5)
                            {
                                thread::sleep(Duration::from_millis(1));
                            }
                            thread::sleep(Duration::from_millis(5));
                            running.fetch_sub(1, Ordering::SeqCst);
                            (i, thread::current().name().map(str::to_string))
                        })
                        .await
                })
            })
            .collect();
        let mut names = HashSet::new();
        for (i, job) in jobs.into_iter().enumerate() {
            let (value, name) = job.await.unwrap().unwrap();
            assert_eq!(value, i);
            names.insert(name.unwrap());
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert!(
            names.iter().all(|n| n.starts_with("ebb-query-")),
            "{names:?}"
        );
        assert!(names.len() <= 2, "{names:?}");
    }

    #[tokio::test]
    async fn a_panic_fails_its_job_and_the_thread_goes_on() {
        let threads = PluginThreads::start(1).unwrap();
        let failed = threads.run(|| -> u32 { panic!("boom") }).await;
        assert_eq!(failed, Err(WorkFailed));
        assert_eq!(threads.run(|| 7).await, Ok(7));
    }

    /// A latch the test opens; jobs wait on it (bounded, so a broken
    /// scheduler fails the test instead of hanging it).
    #[derive(Clone, Default)]
    struct Latch(Arc<(Mutex<bool>, Condvar)>);

    impl Latch {
        fn open(&self) {
            *self.0.0.lock() = true;
            self.0.1.notify_all();
        }

        fn wait(&self) {
            let mut open = self.0.0.lock();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !*open && std::time::Instant::now() < deadline {
                self.0.1.wait_until(&mut open, deadline);
            }
        }
    }

    /// Jobs that record their class, in the order they ran.
    type Order = Arc<Mutex<Vec<WorkClass>>>;

    fn recording(order: &Order, class: WorkClass, then: Option<Latch>) -> Job {
        let order = order.clone();
        Box::new(move || {
            order.lock().push(class);
            if let Some(latch) = then {
                latch.wait();
            }
        })
    }

    /// Waits (bounded) until `order` holds `n` jobs.
    fn wait_for_jobs(order: &Order, n: usize) -> Vec<WorkClass> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let now = order.lock().clone();
            if now.len() >= n || std::time::Instant::now() > deadline {
                return now;
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn waiting_expiry_work_does_not_queue_behind_query_work() {
        let threads = PluginThreads::start(2).unwrap();
        let (order, busy) = (Order::default(), Latch::default());
        // Both threads busy with queries, twenty more queued, then a handler call.
        for _ in 0..2 {
            threads
                .queue(
                    WorkClass::Query,
                    recording(&order, WorkClass::Query, Some(busy.clone())),
                )
                .unwrap();
        }
        assert_eq!(
            wait_for_jobs(&order, 2).len(),
            2,
            "both threads took a query"
        );
        for _ in 0..20 {
            threads
                .queue(WorkClass::Query, recording(&order, WorkClass::Query, None))
                .unwrap();
        }
        threads
            .queue(
                WorkClass::Expiry,
                recording(&order, WorkClass::Expiry, None),
            )
            .unwrap();
        busy.open();
        let ran = wait_for_jobs(&order, 23);
        assert_eq!(ran.len(), 23);
        let at = ran.iter().position(|c| *c == WorkClass::Expiry).unwrap();
        assert!(
            at <= 3,
            "the handler call ran as job {at} of {ran:?}, behind the queued queries"
        );
    }

    #[test]
    fn a_storm_of_expiry_work_leaves_a_thread_to_queries() {
        for count in [2, 4] {
            let threads = PluginThreads::start(count).unwrap();
            let (order, stuck) = (Order::default(), Latch::default());
            // More slow handler calls than threads, all stuck until the end.
            for _ in 0..count * 3 {
                threads
                    .queue(
                        WorkClass::Expiry,
                        recording(&order, WorkClass::Expiry, Some(stuck.clone())),
                    )
                    .unwrap();
            }
            assert_eq!(wait_for_jobs(&order, count - 1).len(), count - 1);
            threads
                .queue(WorkClass::Query, recording(&order, WorkClass::Query, None))
                .unwrap();
            let ran = wait_for_jobs(&order, count);
            stuck.open();
            assert_eq!(
                ran.iter().filter(|c| **c == WorkClass::Expiry).count(),
                count - 1,
                "expiry work holds all threads but one: {ran:?}"
            );
            assert!(
                ran.contains(&WorkClass::Query),
                "the query ran while every handler call was stuck: {ran:?}"
            );
        }
    }

    #[test]
    fn one_thread_alternates_between_the_classes() {
        let threads = PluginThreads::start(1).unwrap();
        let (order, busy) = (Order::default(), Latch::default());
        threads
            .queue(
                WorkClass::Query,
                recording(&order, WorkClass::Query, Some(busy.clone())),
            )
            .unwrap();
        assert_eq!(wait_for_jobs(&order, 1).len(), 1);
        for _ in 0..3 {
            threads
                .queue(
                    WorkClass::Expiry,
                    recording(&order, WorkClass::Expiry, None),
                )
                .unwrap();
        }
        for _ in 0..3 {
            threads
                .queue(WorkClass::Query, recording(&order, WorkClass::Query, None))
                .unwrap();
        }
        busy.open();
        use WorkClass::{Expiry as E, Query as Q};
        assert_eq!(wait_for_jobs(&order, 7), vec![Q, E, Q, E, Q, E, Q]);
    }

    #[tokio::test]
    async fn dropped_threads_finish_queued_work_then_refuse_more() {
        let threads = PluginThreads::start(1).unwrap();
        let (order, busy) = (Order::default(), Latch::default());
        threads
            .queue(
                WorkClass::Expiry,
                recording(&order, WorkClass::Expiry, Some(busy.clone())),
            )
            .unwrap();
        threads
            .queue(WorkClass::Query, recording(&order, WorkClass::Query, None))
            .unwrap();
        let shared = threads.shared.clone();
        drop(threads);
        busy.open();
        assert_eq!(wait_for_jobs(&order, 2).len(), 2, "queued work still runs");
        let closed = PluginThreads { shared };
        assert_eq!(
            closed.run_as(WorkClass::Expiry, || 1).await,
            Err(WorkFailed)
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn query_threads_run_below_the_priority_of_request_threads() {
        let niceness = || {
            // SAFETY: getpriority only reads its arguments.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
        };
        let threads = PluginThreads::start(1).unwrap();
        let query = threads.run(niceness).await.unwrap();
        assert_eq!(query, (niceness() + QUERY_NICE).min(19));
        assert!(query > niceness(), "query {query}, request {}", niceness());
    }
}
