//! A synchronize's marker: the packet whose completion proves everything
//! before it complete, and what the threads waiting for its verdict share
//! (the protocol around it is `synchronize`).

use crate::cpu_wait::{Outcome, WaitEnd, WaitSettings};
use crate::device_state::DeviceState;
use crate::sync::{AtomicBool, Condvar, Mutex, Ordering};
use sigretire_tracker::{Status, Ticket};
use std::time::Instant;

/// A synchronize marker: the newest command when it was published.
#[derive(Debug)]
pub(crate) struct Marker {
    pub(crate) seq: u64,
    pub(crate) ticket: Ticket,
    finished: AtomicBool,
    outcome: Mutex<Option<Outcome>>,
    done: Condvar,
}

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
    pub(crate) fn finish(&self, outcome: Outcome) {
        let mut slot = self.outcome.lock();
        if slot.is_none() {
            *slot = Some(outcome);
        }
        self.finished.store(true, Ordering::Release);
        self.done.notify_all();
    }

    /// Waits for the completion thread's verdict (holding no queue lock).
    pub(crate) fn wait_finished(&self, device: &DeviceState, settings: &WaitSettings) -> WaitEnd {
        let start = Instant::now();
        let mut slot = self.outcome.lock();
        loop {
            if let Some(outcome) = slot.as_ref() {
                return match outcome {
                    Outcome::Complete => WaitEnd::Done(Status::Complete),
                    Outcome::Failed => WaitEnd::Done(Status::Failed),
                    Outcome::DeviceError(error) => WaitEnd::DeviceError(error.clone()),
                };
            }
            if let Some(error) = device.wait_error() {
                return WaitEnd::DeviceError(error);
            }
            if let Some(timeout) = settings.timeout
                && start.elapsed() >= timeout
            {
                return WaitEnd::TimedOut(timeout);
            }
            self.done.wait_for(&mut slot, settings.slice);
        }
    }
}
