//! The synchronize of the old behaviour, as a test double: the queue layer
//! has no such mode, and no user can configure one.
//!
//! Before the fix (AMD CLR's "wait for a small-batch sync marker after
//! releasing lock"), a synchronizing thread waited for its marker while it
//! held the queue's execution lock. This double does the same from outside
//! the layer: [`HostQueue::with_tracker`] runs its closure under that lock,
//! and the closure waits, on the tracker's lock-free waiter, for a marker
//! after everything submitted; only then does it synchronize. Every other
//! thread that submits to or queries the queue meanwhile blocks on the lock
//! for as long as the GPU takes, and deadlocks if the GPU waits for one of
//! them: the regression the tests show they catch.
//!
//! One file for every test and example that needs it (included with
//! `#[path]`): it uses the public API only.
// Not every includer reads every part (the example counts no waits).
#![allow(dead_code)]

use sigretire_queue::tracker::{Status, WaitError, WaitPolicy, wait::WaitGauge};
use sigretire_queue::{HostQueue, QueueTracker};
use std::time::Duration;

/// The old synchronize, and how many of its lock-held waits run now.
#[derive(Debug, Default)]
pub struct OldSynchronize {
    waiting: WaitGauge,
}

impl OldSynchronize {
    /// Synchronizes `queue` as the old behaviour did: the GPU wait for a
    /// marker after everything submitted runs under the queue's execution
    /// lock, bounded by the queue's wait timeout.
    pub fn synchronize<T: QueueTracker>(
        &self,
        queue: &HostQueue<T>,
    ) -> Result<(), sigretire_queue::Error> {
        // With nothing pending the old synchronize waited for nothing (it
        // took the lock to find that out, as the query does).
        if queue.query()? == Status::Complete {
            return Ok(queue.synchronize()?);
        }
        let marker = queue.record_event()?.ticket().expect("a recorded event");
        let config = queue.config();
        // The tracker's waiter publishes nothing, so it cannot sleep on a
        // wake packet: it polls as the queue's policy says.
        let policy = WaitPolicy {
            interrupt: false,
            ..config.wait_policy
        };
        let timeout = config.wait_timeout.unwrap_or(Duration::MAX);
        let waited = queue.with_tracker(|tracker| {
            self.waiting
                .track(|| tracker.waiter().wait(&marker, timeout, policy))
        });
        match waited {
            Ok(_) => Ok(queue.synchronize()?),
            Err(WaitError::TimedOut(_)) => Err(sigretire_queue::Error::TimedOut(timeout)),
            Err(error) => Err(sigretire_queue::tracker::Error::from(error).into()),
        }
    }

    /// Lock-held waits in progress now (the fixed synchronize's count is
    /// the queue's `cpu_waits_in_progress`).
    pub fn waiting(&self) -> u64 {
        self.waiting.in_progress()
    }
}
