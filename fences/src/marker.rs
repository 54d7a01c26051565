//! A synchronize's marker: the packet whose completion proves everything
//! before it complete, and what the threads waiting for its verdict share
//! (the protocol around it is `synchronize`).

use crate::device_state::DeviceState;
use crate::status::CommandStatus;
use crate::sync::{AtomicBool, Condvar, Mutex, Ordering};
use sigretire_tracker::{
    Ticket, TimedOut, WaitPolicy,
    wait::{Wait, WaitStop, WakeSource},
};
use std::time::Duration;

/// A synchronize marker: the newest command when it was published.
#[derive(Debug)]
pub(crate) struct Marker {
    pub(crate) seq: u64,
    pub(crate) ticket: Ticket,
    finished: AtomicBool,
    /// How its batch ended, once it did.
    outcome: Mutex<Option<CommandStatus>>,
    done: Condvar,
}

/// A wait for a verdict sleeps on the marker's condition variable from the
/// start: the verdict comes from another thread, which notifies it.
const SLEEP_AT_ONCE: WaitPolicy = WaitPolicy {
    spin: Duration::ZERO,
    device_spin: Duration::ZERO,
    yield_for: Duration::ZERO,
    max_sleep: Duration::from_millis(1),
    interrupt: true,
    hybrid: None,
};

impl Marker {
    pub(crate) fn new(seq: u64, ticket: Ticket) -> Self {
        Self {
            seq,
            ticket,
            finished: AtomicBool::new(false),
            outcome: Mutex::new(None),
            done: Condvar::new(),
        }
    }

    /// Whether the marker's batch was completed (by its owner or the
    /// completion thread).
    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Records how the marker's batch ended and wakes its waiters.
    pub(crate) fn finish(&self, outcome: CommandStatus) {
        let mut slot = self.outcome.lock();
        if slot.is_none() {
            *slot = Some(outcome);
        }
        self.finished.store(true, Ordering::Release);
        self.done.notify_all();
    }

    /// Waits for the verdict of whoever completes the marker's batch
    /// (holding no queue lock): how the batch ended, `DeviceError` once the
    /// device is in the error state, or the timeout.
    pub(crate) fn wait_finished(
        &self,
        device: &DeviceState,
        timeout: Option<Duration>,
        slice: Duration,
    ) -> Result<CommandStatus, TimedOut> {
        let verdict = Wait::new(SLEEP_AT_ONCE)
            .timeout(timeout)
            .slice(slice)
            .until_woken(
                || *self.outcome.lock(),
                || device.has_error().then_some(()),
                || Some(Verdict(self)),
            );
        match verdict {
            Ok(outcome) => Ok(outcome),
            Err(WaitStop::Halted(())) => Ok(CommandStatus::DeviceError),
            Err(WaitStop::TimedOut(timeout)) => Err(TimedOut(timeout)),
        }
    }
}

/// The marker's condition variable, as the wake of a wait for its verdict.
struct Verdict<'a>(&'a Marker);

impl WakeSource for Verdict<'_> {
    fn sleep(&mut self, timeout: Duration) -> bool {
        let mut slot = self.0.outcome.lock();
        if slot.is_none() {
            self.0.done.wait_for(&mut slot, timeout);
        }
        slot.is_some()
    }
}
