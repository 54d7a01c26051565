//! The processor thread's wake-up: a leaf that the host side (the
//! simulator, its queues, a kernel's host flag) notifies and the
//! [processor thread](crate::threaded) parks on, so that neither names the
//! other.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::time::Instant;

/// Parks and wakes the processor thread without losing a wake-up.
///
/// The host writes (memory, doorbell, flag), then [`Wake::notify`] fences
/// and checks `sleeping`; the thread sets `sleeping`, fences, and re-checks
/// every queue before it sleeps. With both fences sequentially consistent,
/// either the host sees `sleeping` and notifies, or the thread's re-check
/// sees the host's write.
#[derive(Debug, Default)]
pub(crate) struct Wake {
    sleeping: AtomicBool,
    notified: Mutex<bool>,
    condvar: Condvar,
    shutdown: AtomicBool,
}

impl Wake {
    /// Called by the host after any write that may unblock a queue.
    pub(crate) fn notify(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            *self.notified.lock() = true;
            self.condvar.notify_one();
        }
    }

    pub(crate) fn prepare_to_sleep(&self) {
        self.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    pub(crate) fn cancel_sleep(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
    }

    pub(crate) fn sleep(&self, until: Option<Instant>) {
        let mut notified = self.notified.lock();
        if !*notified && !self.is_shut_down() {
            match until {
                Some(deadline) => {
                    self.condvar.wait_until(&mut notified, deadline);
                }
                None => self.condvar.wait(&mut notified),
            }
        }
        *notified = false;
        drop(notified);
        self.sleeping.store(false, Ordering::Relaxed);
    }

    pub(crate) fn shut_down(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        *self.notified.lock() = true;
        self.condvar.notify_all();
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }
}
