//! Interrupt signals: signals with an event mailbox, whose writes wake the
//! host threads sleeping on them, as ROCr's interrupt signals do through
//! KFD events.
//!
//! A host thread that sleeps on such a signal spends no CPU until a write
//! (a packet's completion, a failure, a host store) wakes it. The process
//! has a budget of events (KFD's 4094): past it a new interrupt signal gets
//! no mailbox and is polled, as ROCr then silently makes it a polling
//! signal; the simulator counts those ([`InterruptStats::degraded`]) and
//! says so ([`Sim::is_interrupt`](crate::Sim::is_interrupt)).
//!
//! No wake-up is lost: a sleeper reads the value under the mailbox lock
//! before it sleeps, and every write to an interrupt signal takes that lock
//! after the value is written, before it wakes the sleepers. It is the
//! protocol of the tracker's `WakeMailbox`, which a loom model checks; the
//! simulator, which does not depend on the tracker, keeps its own copy.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Events a process may hold (KFD's limit, which ROCr inherits).
///
/// ```
/// assert_eq!(sigretire_sim::EVENT_BUDGET, 4094);
/// ```
pub const EVENT_BUDGET: u32 = 4094;

/// What a simulator's interrupt signals did
/// ([`Sim::interrupt_stats`](crate::Sim::interrupt_stats)).
///
/// ```
/// let stats = sigretire_sim::InterruptStats::default();
/// assert_eq!((stats.created, stats.wakes), (0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InterruptStats {
    /// Interrupt signals created with a mailbox.
    pub created: u64,
    /// Asked for, but made polling signals: the event budget was spent.
    pub degraded: u64,
    /// Writes to interrupt signals that woke the mailbox's sleepers.
    pub wakes: u64,
    /// Times a host thread went to sleep on one (each sleep, not each call).
    pub sleeps: u64,
}

/// The simulator's event mailboxes.
pub(crate) struct Interrupts {
    budget_left: AtomicU32,
    created: AtomicU64,
    degraded: AtomicU64,
    wakes: AtomicU64,
    sleeps: AtomicU64,
    /// One lock and condition for every mailbox: interrupt signals are few,
    /// and a sleeper rechecks its own value after any wake.
    mailbox: Mutex<()>,
    written: Condvar,
}

impl Default for Interrupts {
    fn default() -> Self {
        Self {
            budget_left: AtomicU32::new(EVENT_BUDGET),
            created: AtomicU64::new(0),
            degraded: AtomicU64::new(0),
            wakes: AtomicU64::new(0),
            sleeps: AtomicU64::new(0),
            mailbox: Mutex::new(()),
            written: Condvar::new(),
        }
    }
}

impl Interrupts {
    /// Takes an event for a new interrupt signal; `false` once the budget
    /// is spent (the signal is then a polling one).
    pub(crate) fn take_event(&self) -> bool {
        let taken = self
            .budget_left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        let counter = if taken { &self.created } else { &self.degraded };
        counter.fetch_add(1, Ordering::Relaxed);
        taken
    }

    /// Sets how many events are left (a test exhausting the budget).
    pub(crate) fn set_budget(&self, left: u32) {
        self.budget_left.store(left, Ordering::Release);
    }

    /// An interrupt signal was written (after the value): wakes its sleepers.
    /// Out of line: host stores check for it on every signal, and inlined,
    /// its lock crowded their loops' registers.
    #[cold]
    #[inline(never)]
    pub(crate) fn wrote(&self) {
        drop(self.mailbox.lock());
        self.wakes.fetch_add(1, Ordering::Relaxed);
        self.written.notify_all();
    }

    /// Sleeps until `value` leaves `observed` or `timeout` passes; returns
    /// the value then read, and whether it slept before it saw the change.
    /// `read` is called for every read of the value (a host load the caller
    /// counts).
    ///
    /// A write wakes the sleeper only `wake_latency` later (the interrupt's
    /// path to the thread: the event, the kernel's wake-up, the scheduler),
    /// and only then does it read the value again, as a thread woken by a
    /// KFD event does: whatever was written meanwhile is what it sees.
    pub(crate) fn sleep_while(
        &self,
        value: &AtomicI64,
        observed: i64,
        timeout: Duration,
        wake_latency: Duration,
        mut read: impl FnMut(),
    ) -> (i64, bool) {
        let deadline = Instant::now() + timeout;
        let mut mailbox = self.mailbox.lock();
        let mut slept = false;
        loop {
            read();
            let now = value.load(Ordering::Acquire);
            if now != observed || Instant::now() >= deadline {
                return (now, slept && now != observed);
            }
            // Release: whoever sees the sleep counted sees what the sleeper
            // did before it (a test's count of its reads).
            self.sleeps.fetch_add(1, Ordering::Release);
            let woken = !self.written.wait_until(&mut mailbox, deadline).timed_out();
            slept = true;
            if woken && !wake_latency.is_zero() {
                parking_lot::MutexGuard::unlocked(&mut mailbox, || {
                    std::thread::sleep(wake_latency);
                });
            }
        }
    }

    pub(crate) fn stats(&self) -> InterruptStats {
        InterruptStats {
            created: self.created.load(Ordering::Relaxed),
            degraded: self.degraded.load(Ordering::Relaxed),
            wakes: self.wakes.load(Ordering::Relaxed),
            sleeps: self.sleeps.load(Ordering::Acquire),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_write_wakes_a_sleeper_that_spends_no_reads_meanwhile() {
        let interrupts = Arc::new(Interrupts::default());
        let value = Arc::new(AtomicI64::new(1));
        let reads = Arc::new(AtomicU64::new(0));
        let sleeper = {
            let (interrupts, value, reads) = (interrupts.clone(), value.clone(), reads.clone());
            std::thread::spawn(move || {
                interrupts
                    .sleep_while(&value, 1, Duration::from_secs(10), Duration::ZERO, || {
                        reads.fetch_add(1, Ordering::Relaxed);
                    })
                    .0
            })
        };
        while interrupts.stats().sleeps == 0 {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(reads.load(Ordering::Relaxed), 1, "asleep: no polling");
        value.store(0, Ordering::Release);
        interrupts.wrote();
        assert_eq!(sleeper.join().unwrap(), 0);
        assert_eq!(
            reads.load(Ordering::Relaxed),
            2,
            "one read before, one after"
        );
    }

    #[test]
    fn a_value_already_changed_returns_without_sleeping() {
        let interrupts = Interrupts::default();
        let value = AtomicI64::new(0);
        assert_eq!(
            interrupts.sleep_while(&value, 1, Duration::from_secs(10), Duration::ZERO, || {}),
            (0, false)
        );
        assert_eq!(interrupts.stats().sleeps, 0);
    }

    #[test]
    fn a_sleep_ends_at_its_deadline() {
        let interrupts = Interrupts::default();
        let value = AtomicI64::new(1);
        let start = Instant::now();
        assert_eq!(
            interrupts.sleep_while(&value, 1, Duration::from_millis(10), Duration::ZERO, || {}),
            (1, false),
            "timed out: no wake-up to pay for"
        );
        assert!(start.elapsed() >= Duration::from_millis(10));
    }

    #[test]
    fn past_the_budget_signals_are_polling_ones_and_counted() {
        let interrupts = Interrupts::default();
        interrupts.set_budget(2);
        assert!(interrupts.take_event() && interrupts.take_event());
        assert!(!interrupts.take_event());
        let stats = interrupts.stats();
        assert_eq!((stats.created, stats.degraded), (2, 1));
    }
}
