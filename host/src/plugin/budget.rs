//! CPU-time budgets of plugin calls: a call's deadline counts the CPU time
//! its thread spends in the call, so a call the machine starved of CPU is
//! not failed as the plugin's fault.
//!
//! The epoch ticker fires a call's deadline on the wall clock; the store's
//! deadline callback then asks the call's [`Budget`] for a [`Verdict`]:
//! a call that used its whole deadline of CPU time is interrupted (the
//! plugin's failure, as before); one that got less CPU than that runs on
//! for what it has left, until it has run [`STARVED_AFTER`] times its
//! deadline on the wall clock, when it is interrupted as starved (the
//! host's failure: the node could not give it the CPU). Without load the
//! two clocks agree and nothing changes: a spinning plugin is stopped at
//! its deadline.
//!
//! Each call reads its thread's CPU clock when it starts (a system call:
//! about 0.6 µs here, which took a one-row call of `make bench-plugins`
//! from 1.5 to 2.4 µs). Reading it only at the first callback instead
//! would have to count the wall time before it as used, and a call
//! starved from its start would then fail as the plugin's fault.

use std::time::{Duration, Instant};

/// A call that has run this many times its deadline on the wall clock
/// without using its deadline of CPU time fails as starved.
pub(super) const STARVED_AFTER: u32 = 10;

/// The CPU time the calling thread has used since it started.
pub(super) fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to write; the clock id is a
    // constant every Linux supports.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if status != 0 {
        // Unreachable on Linux; without the clock, count nothing as used,
        // and the wall-clock cap still ends the call.
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// What a call whose deadline fired on the wall clock should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// It used its deadline of CPU time: interrupt it (the plugin's fault).
    Exceeded,
    /// It ran [`STARVED_AFTER`] times its deadline on the wall clock with
    /// CPU time left: interrupt it as starved (the host's fault).
    Starved,
    /// It has this much CPU time left: let it run on.
    Continue(Duration),
}

/// The deadline of the call running now in one store, and where it started.
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    deadline: Duration,
    cpu_at_start: Duration,
    started: Instant,
}

impl Budget {
    /// A budget of `deadline` of CPU time, starting now on this thread.
    pub(super) fn start(deadline: Duration) -> Self {
        Self {
            deadline,
            cpu_at_start: thread_cpu_time(),
            started: Instant::now(),
        }
    }

    /// The deadline the call was given.
    pub(super) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The verdict now, on the thread running the call.
    pub(super) fn verdict(&self) -> Verdict {
        self.judge(
            thread_cpu_time().saturating_sub(self.cpu_at_start),
            self.started.elapsed(),
        )
    }

    /// The verdict after `used` of CPU time over `elapsed` on the wall clock.
    fn judge(&self, used: Duration, elapsed: Duration) -> Verdict {
        if used >= self.deadline {
            Verdict::Exceeded
        } else if elapsed >= self.deadline * STARVED_AFTER {
            Verdict::Starved
        } else {
            Verdict::Continue(self.deadline - used)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(deadline_ms: u64) -> Budget {
        Budget::start(Duration::from_millis(deadline_ms))
    }

    #[test]
    fn a_call_that_used_its_cpu_is_interrupted_whatever_the_wall_clock_says() {
        let ms = Duration::from_millis;
        assert_eq!(budget(100).judge(ms(100), ms(100)), Verdict::Exceeded);
        assert_eq!(budget(100).judge(ms(150), ms(5_000)), Verdict::Exceeded);
    }

    #[test]
    fn a_starved_call_runs_on_for_its_cpu_left_until_the_wall_clock_cap() {
        let ms = Duration::from_millis;
        assert_eq!(
            budget(100).judge(ms(40), ms(100)),
            Verdict::Continue(ms(60))
        );
        assert_eq!(budget(100).judge(ms(99), ms(999)), Verdict::Continue(ms(1)));
        assert_eq!(budget(100).judge(ms(99), ms(1_000)), Verdict::Starved);
    }

    #[test]
    fn the_thread_clock_counts_this_threads_work_not_its_sleep() {
        let before = thread_cpu_time();
        std::thread::sleep(Duration::from_millis(50));
        let started = Instant::now();
        let asleep = thread_cpu_time();
        let slept = asleep - before;
        assert!(slept < Duration::from_millis(25), "{slept:?} while asleep");
        let mut x = 0u64;
        let mut used = Duration::ZERO;
        while used < Duration::from_millis(20) && started.elapsed() < Duration::from_secs(10) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            used = thread_cpu_time() - asleep;
        }
        assert!(
            used >= Duration::from_millis(20),
            "{used:?} after 10 s of spinning"
        );
        // The two clocks tick apart by a little: allow a millisecond.
        assert!(
            used <= started.elapsed() + Duration::from_millis(1),
            "{used:?} of CPU in {:?}",
            started.elapsed()
        );
    }
}
