//! The drain signal every connection of a server watches: waiting for it
//! costs a connection one registration, not a lock at every wake-up.
//!
//! A connection's task watches its connection, its watchdog's timer and
//! this signal together, so the signal's future is polled whenever the
//! connection is (every request). A `tokio::sync::watch` receiver's
//! `changed()` locks the channel's list of waiters each time it is polled
//! while waiting: every connection on every worker took that one lock per
//! request. [`Drained`] registers its task's waker once (again only if the
//! task's waker changes) and otherwise reads a flag nobody writes until
//! the drain.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

/// A signal raised once, by [`Drain::raise`]; cloning shares it.
#[derive(Clone, Default)]
pub(super) struct Drain(Arc<Shared>);

#[derive(Default)]
struct Shared {
    raised: AtomicBool,
    next_id: AtomicU64,
    /// The wakers of the futures waiting, by their id.
    waiting: Mutex<std::collections::HashMap<u64, Waker>>,
}

impl Drain {
    /// Raise the signal: every [`Drained`] is ready from now on, and those
    /// waiting are woken.
    pub(super) fn raise(&self) {
        self.0.raised.store(true, Ordering::Release);
        let waiting = std::mem::take(&mut *self.0.waiting.lock());
        for (_, waker) in waiting {
            waker.wake();
        }
    }

    /// A future ready once the signal is raised.
    pub(super) fn wait(&self) -> Drained {
        Drained {
            drain: self.0.clone(),
            id: self.0.next_id.fetch_add(1, Ordering::Relaxed),
            registered: None,
        }
    }
}

/// Ready once its [`Drain`] is raised.
pub(super) struct Drained {
    drain: Arc<Shared>,
    id: u64,
    /// The waker registered under `id`, if any.
    registered: Option<Waker>,
}

impl Future for Drained {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.drain.raised.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if this
            .registered
            .as_ref()
            .is_some_and(|waker| waker.will_wake(cx.waker()))
        {
            return Poll::Pending;
        }
        this.drain
            .waiting
            .lock()
            .insert(this.id, cx.waker().clone());
        this.registered = Some(cx.waker().clone());
        // Raised between the check and the registration: `raise` may have
        // taken the wakers before this one went in.
        if this.drain.raised.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Drop for Drained {
    fn drop(&mut self) {
        if self.registered.is_some() {
            self.drain.waiting.lock().remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::Wake;

    use super::*;

    /// A waker counting its wake-ups.
    #[derive(Default)]
    struct Count(AtomicU64);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn poll(future: &mut Drained, waker: &Waker) -> Poll<()> {
        Pin::new(future).poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn waiters_register_once_are_woken_once_and_leave_nothing_behind() {
        let drain = Drain::default();
        let counts: Vec<Arc<Count>> = (0..3).map(|_| Arc::default()).collect();
        let wakers: Vec<Waker> = counts.iter().map(|c| Waker::from(c.clone())).collect();
        let mut futures: Vec<Drained> = (0..3).map(|_| drain.wait()).collect();
        for _ in 0..5 {
            for (future, waker) in futures.iter_mut().zip(&wakers) {
                assert_eq!(poll(future, waker), Poll::Pending);
            }
        }
        assert_eq!(drain.0.waiting.lock().len(), 3, "one registration each");
        // One is dropped before the drain: it leaves the list.
        futures.pop();
        assert_eq!(drain.0.waiting.lock().len(), 2);
        drain.raise();
        let woken: Vec<u64> = counts.iter().map(|c| c.0.load(Ordering::Relaxed)).collect();
        assert_eq!(woken, vec![1, 1, 0]);
        for (future, waker) in futures.iter_mut().zip(&wakers) {
            assert_eq!(poll(future, waker), Poll::Ready(()));
        }
        // A waiter that starts after the drain is ready at once.
        assert_eq!(poll(&mut drain.clone().wait(), &wakers[0]), Poll::Ready(()));
        assert!(drain.0.waiting.lock().is_empty());
    }

    #[test]
    fn a_new_waker_replaces_the_registered_one() {
        let drain = Drain::default();
        let (first, second) = (Arc::new(Count::default()), Arc::new(Count::default()));
        let mut future = drain.wait();
        assert_eq!(
            poll(&mut future, &Waker::from(first.clone())),
            Poll::Pending
        );
        assert_eq!(
            poll(&mut future, &Waker::from(second.clone())),
            Poll::Pending
        );
        assert_eq!(drain.0.waiting.lock().len(), 1);
        drain.raise();
        assert_eq!(first.0.load(Ordering::Relaxed), 0);
        assert_eq!(second.0.load(Ordering::Relaxed), 1);
    }
}
