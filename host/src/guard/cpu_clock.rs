//! The guard's time limit counts the guest's own CPU time, not the wall clock's: a busy
//! machine (a build beside it, a hundred tests at once) must not fail a well-behaved
//! adapter, while a guest that spins is stopped at the same limit as before. The epoch
//! ticker still measures wall time, so the check runs only when a wall-clock deadline
//! passes; a cap of [`WALL_SLACK`] times the limit bounds a guest that is starved or
//! waits instead of computing.

use std::time::{Duration, Instant};

use rustix::time::{ClockId, clock_gettime};
use wasmtime::UpdateDeadline;

/// How often the epoch advances while guests run; the deadline overshoots by at most this.
pub(super) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// How many times its limit a call may take by the wall clock before it is cut anyway.
pub(super) const WALL_SLACK: u32 = 4;

/// When one guest call began, by the thread's CPU clock and the wall clock, and its limit.
#[derive(Clone, Copy, Debug)]
pub(super) struct CallClock {
    cpu_at_start: Duration,
    wall_at_start: Instant,
    limit: Duration,
}

impl CallClock {
    /// Starts timing a call on this thread (guest code runs on the caller's thread).
    pub(super) fn start(limit: Duration) -> CallClock {
        CallClock {
            cpu_at_start: thread_cpu(),
            wall_at_start: Instant::now(),
            limit,
        }
    }

    /// Epoch ticks until the first check: the limit, on the wall clock.
    pub(super) fn first_ticks(&self) -> u64 {
        ticks(self.limit)
    }

    /// Called when the wall-clock deadline passes: stop the guest if it has used its
    /// limit of CPU time or [`WALL_SLACK`] times it on the wall clock, else check again
    /// when the CPU time it has left could be spent.
    pub(super) fn on_deadline(&self) -> UpdateDeadline {
        self.decide(thread_cpu(), self.wall_at_start.elapsed())
    }

    fn decide(&self, cpu_now: Duration, wall: Duration) -> UpdateDeadline {
        let cpu = cpu_now.saturating_sub(self.cpu_at_start);
        if cpu >= self.limit || wall >= self.limit.saturating_mul(WALL_SLACK) {
            UpdateDeadline::Interrupt
        } else {
            UpdateDeadline::Continue(ticks(self.limit - cpu))
        }
    }
}

/// Epoch ticks in `d`, at least one.
fn ticks(d: Duration) -> u64 {
    u64::try_from(d.as_millis() / EPOCH_TICK.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(limit_ms: u64) -> CallClock {
        CallClock {
            cpu_at_start: Duration::from_millis(500),
            wall_at_start: Instant::now(),
            limit: Duration::from_millis(limit_ms),
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_guest_that_used_its_cpu_time_is_stopped() {
        let c = clock(1000);
        assert!(matches!(
            c.decide(ms(1500), ms(1000)),
            UpdateDeadline::Interrupt
        ));
        assert!(matches!(
            c.decide(ms(1700), ms(1200)),
            UpdateDeadline::Interrupt
        ));
    }

    #[test]
    fn a_starved_guest_gets_the_cpu_time_it_has_left() {
        let c = clock(1000);
        // 300 ms of CPU in a second of wall time: 700 ms left, 70 ticks of 10 ms.
        match c.decide(ms(800), ms(1000)) {
            UpdateDeadline::Continue(n) => assert_eq!(n, ticks(ms(700))),
            _ => panic!("a starved guest was stopped"),
        }
    }

    #[test]
    fn a_guest_that_waits_is_stopped_by_the_wall_clock_cap() {
        let c = clock(1000);
        assert!(matches!(
            c.decide(ms(500), ms(3999)),
            UpdateDeadline::Continue(_)
        ));
        assert!(matches!(
            c.decide(ms(500), ms(4000)),
            UpdateDeadline::Interrupt
        ));
    }

    #[test]
    fn the_thread_cpu_clock_moves_with_work_not_with_sleep() {
        let before = thread_cpu();
        std::thread::sleep(ms(50));
        let slept = thread_cpu() - before;
        assert!(slept < ms(25), "sleeping used {slept:?} of CPU");
        let start = thread_cpu();
        let wall = Instant::now();
        let mut x = 0u64;
        while thread_cpu() - start < ms(20) && wall.elapsed() < Duration::from_secs(60) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(
            thread_cpu() - start >= ms(20),
            "a minute of spinning used no CPU"
        );
    }
}
