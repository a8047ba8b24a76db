//! The query threads: a fixed set fed from one queue that runs every page
//! of every query (and its merges and sorts, which may call plugins), so
//! neither scans nor the sandbox run on a tokio worker, and never on more
//! threads than [`PluginLimits::threads`](super::PluginLimits::threads).
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

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;

type Job = Box<dyn FnOnce() + Send>;

/// How much nicer the query threads are than the process (Linux nice
/// values; 19 is the lowest priority). At +10 a busy query thread gets about
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
                "cannot lower the query thread's priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// The work did not finish: it panicked (the thread survives and goes on
/// with the next job), or the threads had stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("plugin work panicked or its threads stopped")]
pub struct WorkFailed;

/// A fixed set of threads and their queue. Dropping it lets the threads
/// finish the queued jobs and exit.
pub struct PluginThreads {
    queue: Mutex<Option<mpsc::Sender<Job>>>,
}

impl PluginThreads {
    /// Start `count` threads (at least one).
    pub fn start(count: usize) -> std::io::Result<Self> {
        let (queue, jobs) = mpsc::channel::<Job>();
        let jobs = Arc::new(Mutex::new(jobs));
        for n in 0..count.max(1) {
            let jobs = jobs.clone();
            thread::Builder::new()
                .name(format!("ebb-query-{n}"))
                .spawn(move || {
                    lower_priority();
                    loop {
                        // The lock is held only while waiting for a job; a
                        // wait that times out lets an idle thread hand back
                        // what its last jobs freed.
                        let job = jobs
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .recv_timeout(crate::alloc::RELEASE_INTERVAL);
                        match job {
                            Ok(job) => {
                                job();
                                crate::alloc::release_idle_memory();
                            }
                            Err(mpsc::RecvTimeoutError::Timeout) => {
                                crate::alloc::release_idle_memory()
                            }
                            Err(mpsc::RecvTimeoutError::Disconnected) => return,
                        }
                    }
                })?;
        }
        Ok(Self {
            queue: Mutex::new(Some(queue)),
        })
    }

    /// Run `work` on one of the threads, after the jobs queued before it.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, WorkFailed> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            if let Ok(result) = catch_unwind(AssertUnwindSafe(work)) {
                let _ = reply.send(result);
            }
        });
        let sent = match &*self.queue.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(queue) => queue.send(job).is_ok(),
            None => false,
        };
        if !sent {
            return Err(WorkFailed);
        }
        answer.await.map_err(|_| WorkFailed)
    }
}

impl Drop for PluginThreads {
    fn drop(&mut self) {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).take();
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
