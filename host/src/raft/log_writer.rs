//! The one thread that writes every Raft group's log and vote: requests
//! queued while a write runs share the next one (group commit across
//! groups), fsynced when any of them asks for it.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;

use openraft::storage::IOFlushed;
use parking_lot::{Mutex, RwLock};
use tokio::sync::oneshot;

use super::types::TypeConfig;
use crate::store::{FamilyWrite, KvStore, StoreError};

/// Most requests merged into one store write; more wait for the next.
const MAX_MERGED: usize = 256;

/// One request: writes applied in order and atomically with the others of
/// the same store write.
struct Job {
    writes: Vec<FamilyWrite>,
    sync: bool,
    /// Answered once the write is in the store (readable; in the WAL).
    written: Option<oneshot::Sender<Result<(), StoreError>>>,
    /// Told once the write is as durable as `sync` asked.
    flushed: Option<IOFlushed<TypeConfig>>,
    /// Run on the writer thread once the write is in the store, before
    /// `flushed` is told.
    stored: Option<Box<dyn FnOnce() + Send>>,
}

/// Handle to the writer thread; clones share it. The thread ends after
/// [`LogWriter::close`] or when the last handle is dropped: both write the
/// requests already queued and wait for the thread to end, so the store it
/// holds is released by the time they return (a RocksDB database still
/// closing on a detached thread while the process exits aborts it).
#[derive(Clone)]
pub struct LogWriter {
    inner: Arc<Inner>,
}

struct Inner {
    /// `None` once closed. Senders share the read lock: a send may wake
    /// the writer thread (a system call), and under a mutex every other
    /// group's append waited (spinning, then yielding) behind that wake-up.
    jobs: RwLock<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl LogWriter {
    /// Start the writer thread over `store`.
    pub fn start(store: Arc<dyn KvStore>) -> Result<Self, std::io::Error> {
        let (jobs, queue) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("ebb-raft-log".into())
            .spawn(move || run(store.as_ref(), queue))?;
        Ok(Self {
            inner: Arc::new(Inner {
                jobs: RwLock::new(Some(jobs)),
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    /// Stop taking writes, write the ones already queued and end the thread,
    /// which drops its handle on the store (so the store can be closed and
    /// reopened). Later writes fail with [`StoreError::Closed`]. Blocking.
    pub fn close(&self) {
        self.inner.close();
    }

    /// Write `writes` atomically, in order after every request submitted
    /// before. Returns once they are in the store; `flushed` (if any) is told
    /// once they are durable: fsynced with `sync`, else in the WAL.
    pub(crate) async fn write(
        &self,
        writes: Vec<FamilyWrite>,
        sync: bool,
        flushed: Option<IOFlushed<TypeConfig>>,
    ) -> Result<(), StoreError> {
        let (written, done) = oneshot::channel();
        self.send(Job {
            writes,
            sync,
            written: Some(written),
            flushed,
            stored: None,
        })?;
        done.await.unwrap_or(Err(StoreError::Closed))
    }

    /// Queue `writes` in order after every request submitted before,
    /// without waiting: `stored` runs (on the writer thread) once they are
    /// in the store, then `flushed` is told once they are durable (fsynced
    /// with `sync`). A failed write tells `flushed` the error and never
    /// runs `stored`. Fails only when the writer is closed (`flushed` is
    /// told so too).
    pub(crate) fn append(
        &self,
        writes: Vec<FamilyWrite>,
        sync: bool,
        flushed: IOFlushed<TypeConfig>,
        stored: impl FnOnce() + Send + 'static,
    ) -> Result<(), StoreError> {
        self.send(Job {
            writes,
            sync,
            written: None,
            flushed: Some(flushed),
            stored: Some(Box::new(stored)),
        })
    }

    /// Hand `job` to the thread; when closed, tell its `flushed` so.
    fn send(&self, job: Job) -> Result<(), StoreError> {
        let sent = match self.inner.jobs.read().as_ref() {
            Some(jobs) => jobs.send(job),
            None => Err(mpsc::SendError(job)),
        };
        if let Err(mpsc::SendError(job)) = sent {
            if let Some(flushed) = job.flushed {
                flushed.io_completed(Err(std::io::Error::other(StoreError::Closed)));
            }
            return Err(StoreError::Closed);
        }
        Ok(())
    }

    /// Queue `writes` (not fsynced) in order after every request submitted
    /// before, without waiting for them: for what may be lost in a crash,
    /// such as the committed marker. Dropped if the writer is closed; a
    /// store failure shows in the next request that waits.
    pub(crate) fn submit(&self, writes: Vec<FamilyWrite>) {
        let _ = self.send(Job {
            writes,
            sync: false,
            written: None,
            flushed: None,
            stored: None,
        });
    }
}

impl Inner {
    fn close(&self) {
        drop(self.jobs.write().take());
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.close();
    }
}

fn run(store: &dyn KvStore, queue: mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut jobs = vec![first];
        while jobs.len() < MAX_MERGED {
            match queue.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let sync = jobs.iter().any(|job| job.sync);
        let writes: Vec<FamilyWrite> = jobs
            .iter_mut()
            .flat_map(|job| std::mem::take(&mut job.writes))
            .collect();
        let result = store.write_entries(&writes, sync);
        for job in jobs {
            if let (Ok(()), Some(stored)) = (&result, job.stored) {
                stored();
            }
            if let Some(flushed) = job.flushed {
                flushed.io_completed(result.clone().map_err(std::io::Error::other));
            }
            if let Some(written) = job.written {
                let _ = written.send(result.clone());
            }
        }
    }
}
