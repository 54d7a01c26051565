//! What the calling thread itself spent: its CPU time
//! (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`, nanoseconds) and its voluntary
//! context switches (`getrusage(RUSAGE_THREAD).ru_nvcsw`: the times it went
//! to sleep in the kernel, in `nanosleep`, a futex or a blocking driver
//! call; a `sched_yield` that gives the core away counts as involuntary
//! and is not among them).
//!
//! Read on the thread that makes a timed call, just outside the wall-clock
//! window, so the figures are the waiting thread's own: what it cost the
//! machine to wait, next to how long the wait took.

use std::time::Duration;

/// The calling thread's CPU time and voluntary context switches so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadUsage {
    /// CPU time consumed by the thread (user and system).
    pub cpu: Duration,
    /// Voluntary context switches of the thread.
    pub voluntary_switches: u64,
}

impl ThreadUsage {
    /// The usage between `earlier` and `self` (both of the same thread).
    pub fn since(&self, earlier: &ThreadUsage) -> ThreadUsage {
        ThreadUsage {
            cpu: self.cpu.saturating_sub(earlier.cpu),
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(earlier.voluntary_switches),
        }
    }
}

/// Whether this platform reports per-thread usage (Linux); elsewhere
/// [`thread_usage`] answers zeros.
pub const MEASURED: bool = cfg!(target_os = "linux");

/// The calling thread's usage so far. The context switches are read first
/// and the CPU clock last, so that a window opened with this reading
/// counts as little of the readings' own cost as it can.
///
/// ```
/// let before = sigretire_bench::cpu::thread_usage();
/// let mut x = 0u64;
/// for i in 0..1_000_000u64 {
///     x = std::hint::black_box(x.wrapping_add(i));
/// }
/// let spent = sigretire_bench::cpu::thread_usage().since(&before);
/// assert!(!sigretire_bench::cpu::MEASURED || spent.cpu > std::time::Duration::ZERO);
/// ```
#[cfg(target_os = "linux")]
pub fn thread_usage() -> ThreadUsage {
    let voluntary_switches = voluntary_switches();
    ThreadUsage {
        cpu: thread_cpu_time(),
        voluntary_switches,
    }
}

/// The calling thread's usage so far (zeros: not measured here).
#[cfg(not(target_os = "linux"))]
pub fn thread_usage() -> ThreadUsage {
    ThreadUsage::default()
}

/// The same reading in the other order (CPU clock first, then the
/// context switches), to close a window opened with [`thread_usage`].
#[cfg(target_os = "linux")]
pub fn thread_usage_closing() -> ThreadUsage {
    let cpu = thread_cpu_time();
    ThreadUsage {
        cpu,
        voluntary_switches: voluntary_switches(),
    }
}

/// The same reading in the other order (zeros: not measured here).
#[cfg(not(target_os = "linux"))]
pub fn thread_usage_closing() -> ThreadUsage {
    ThreadUsage::default()
}

#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec that outlives the call;
    // CLOCK_THREAD_CPUTIME_ID is a clock every Linux since 2.6.12 has.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

#[cfg(target_os = "linux")]
fn voluntary_switches() -> u64 {
    // SAFETY: rusage is plain old data (integers and timevals), for which
    // all-zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage that outlives the call;
    // RUSAGE_THREAD (Linux 2.6.26 and later) asks about the calling thread.
    let status = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(status, 0, "getrusage(RUSAGE_THREAD) failed");
    usage.ru_nvcsw as u64
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_sleep_is_a_voluntary_switch_and_costs_little_cpu() {
        let before = thread_usage();
        std::thread::sleep(Duration::from_millis(20));
        let spent = thread_usage_closing().since(&before);
        assert!(spent.voluntary_switches >= 1, "{spent:?}");
        assert!(spent.cpu < Duration::from_millis(10), "{spent:?}");
    }

    #[test]
    fn a_spin_is_cpu_time_and_no_sleep() {
        let before = thread_usage();
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let spent = thread_usage_closing().since(&before);
        // Preemption may take the core away (an involuntary switch), never a
        // voluntary one; most of the 20 ms is this thread's CPU time unless
        // the machine is very busy.
        assert_eq!(spent.voluntary_switches, 0, "{spent:?}");
        assert!(spent.cpu > Duration::from_millis(2), "{spent:?}");
    }
}
