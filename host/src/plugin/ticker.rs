//! The epoch ticker: the thread that advances both engines' epochs, every
//! [`TICK`] while plugin code may be running and every [`IDLE_TICK`] while
//! none is.
//!
//! Deadlines are epoch ticks, so the ticker must tick whenever wasm runs.
//! Every entry into wasm (instantiation, each export call) holds a
//! [`Running`] guard; while any guard lives the ticker ticks every [`TICK`].
//! Once none has lived for [`SETTLE_TICKS`] ticks (100 ms) it slows to
//! [`IDLE_TICK`]: an idle node wakes ten times a second instead of five
//! hundred, and under steady calls it never slows (so a call almost never
//! pays a wake-up). The slow ticks are a safety net: code that entered wasm
//! without a guard would still be interrupted, at [`IDLE_TICK`] per tick
//! instead of [`TICK`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle, Thread};
use std::time::Duration;

use wasmtime::Engine;

/// The epoch ticks this often while plugin code runs; deadlines are whole
/// ticks.
pub(super) const TICK: Duration = Duration::from_millis(2);
/// How often the epoch advances while no plugin code runs.
pub(super) const IDLE_TICK: Duration = Duration::from_millis(100);
/// Ticks without plugin code running before the ticker slows down.
const SETTLE_TICKS: u32 = 50;

/// The ticker thread and what it watches. The thread holds it weakly:
/// dropping the last handle (the runtime's and its instances') ends the
/// thread within one tick.
pub(super) struct Ticker {
    /// Guards alive now.
    running: AtomicUsize,
    /// Whether the thread is in its slow ticks (so a new guard must wake it).
    idle: AtomicBool,
    /// Ticks so far.
    ticks: AtomicU64,
    thread: Thread,
    /// The thread, never joined (see `Drop`); tests take it to watch it end.
    handle: parking_lot::Mutex<Option<JoinHandle<()>>>,
}

/// Plugin code may be running while this lives: the epochs advance every
/// [`TICK`].
pub(super) struct Running(Arc<Ticker>);

impl Ticker {
    /// Start the thread advancing `engines`' epochs.
    pub(super) fn start(engines: Vec<Engine>) -> std::io::Result<Arc<Self>> {
        let (sender, receiver) = std::sync::mpsc::channel::<Arc<Ticker>>();
        let handle = thread::Builder::new()
            .name("ebb-epoch".into())
            .spawn(move || {
                if let Ok(ticker) = receiver.recv() {
                    let weak = Arc::downgrade(&ticker);
                    drop(ticker);
                    run(&weak, &engines);
                }
            })?;
        let ticker = Arc::new(Self {
            running: AtomicUsize::new(0),
            idle: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
            thread: handle.thread().clone(),
            handle: parking_lot::Mutex::new(None),
        });
        let _ = sender.send(ticker.clone());
        *ticker.handle.lock() = Some(handle);
        Ok(ticker)
    }

    /// A guard for one entry into plugin code: the epochs advance every
    /// [`TICK`] until it drops.
    pub(super) fn running(self: &Arc<Self>) -> Running {
        // SeqCst pairs with the thread's store of `idle` then load of
        // `running`: either it sees this guard and keeps ticking fast, or
        // this sees it idle and wakes it.
        self.running.fetch_add(1, Ordering::SeqCst);
        if self.idle.load(Ordering::SeqCst) {
            self.thread.unpark();
        }
        Running(self.clone())
    }

    /// Whether the thread is in its slow ticks (for tests).
    #[cfg(test)]
    fn is_idle(&self) -> bool {
        self.idle.load(Ordering::SeqCst)
    }

    /// Ticks so far (for tests).
    #[cfg(test)]
    fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Ticker {
    /// Wakes the thread, which then finds no ticker and ends; not waited
    /// for: the last handle may drop on any thread, a tokio worker among
    /// them.
    fn drop(&mut self) {
        self.thread.unpark();
    }
}

fn run(ticker: &std::sync::Weak<Ticker>, engines: &[Engine]) {
    let mut quiet_ticks = 0u32;
    loop {
        let slow = {
            let Some(ticker) = ticker.upgrade() else {
                return;
            };
            if ticker.running.load(Ordering::SeqCst) > 0 {
                quiet_ticks = 0;
                false
            } else if quiet_ticks < SETTLE_TICKS {
                quiet_ticks += 1;
                false
            } else {
                ticker.idle.store(true, Ordering::SeqCst);
                // A guard taken before the store above is seen here; one
                // taken after it sees `idle` and unparks this thread.
                ticker.running.load(Ordering::SeqCst) == 0
            }
        };
        if slow {
            thread::park_timeout(IDLE_TICK);
        } else {
            thread::sleep(TICK);
        }
        if let Some(ticker) = ticker.upgrade() {
            ticker.idle.store(false, Ordering::SeqCst);
            if ticker.running.load(Ordering::SeqCst) > 0 {
                quiet_ticks = 0;
            }
            ticker.ticks.fetch_add(1, Ordering::Relaxed);
        }
        for engine in engines {
            engine.increment_epoch();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Waits (bounded) until `done` holds.
    fn until(what: &str, done: impl Fn() -> bool) {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(10), "{what}");
            thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_epoch_advances_every_tick_while_code_runs_and_slowly_while_none_does() {
        let ticker = Ticker::start(vec![Engine::default()]).unwrap();
        let epoch = || ticker.ticks();
        until("the ticker slows down with nothing running", || {
            ticker.is_idle()
        });
        // Idle: about one tick per IDLE_TICK (fewer if the thread oversleeps).
        let (before, started) = (epoch(), Instant::now());
        thread::sleep(IDLE_TICK * 3);
        let idle_ticks = epoch() - before;
        let most = (started.elapsed().as_millis() / IDLE_TICK.as_millis()) as u64 + 2;
        assert!(
            idle_ticks <= most,
            "{idle_ticks} ticks while idle for {:?}",
            started.elapsed()
        );
        // Running: woken at once, then a tick every TICK.
        let running = ticker.running();
        until("a guard wakes the ticker", || !ticker.is_idle());
        let (before, started) = (epoch(), Instant::now());
        until("20 ticks with code running", || epoch() >= before + 20);
        assert!(
            started.elapsed() < IDLE_TICK * 20,
            "20 ticks took {:?}: not the running pace",
            started.elapsed()
        );
        // Fast for a while after the guard drops, then slow again.
        drop(running);
        until("the ticker slows down again", || ticker.is_idle());
    }

    #[test]
    fn the_thread_ends_when_the_last_handle_drops() {
        let ticker = Ticker::start(vec![Engine::default()]).unwrap();
        let handle = ticker.handle.lock().take().unwrap();
        let guard = ticker.running();
        drop(ticker);
        thread::sleep(TICK * 5);
        assert!(!handle.is_finished(), "a guard keeps the ticker alive");
        drop(guard);
        until("the ticker thread ends", || handle.is_finished());
        handle.join().unwrap();
    }
}
