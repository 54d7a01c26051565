//! A wake mailbox: how a backend lets a host thread sleep until a wake
//! signal is written ([`SignalMemory::sleep_while`](crate::backend::SignalMemory::sleep_while)),
//! without losing a wake-up.
//!
//! The sleeper reads the signal under the mailbox lock before each sleep;
//! whoever writes the signal (a driver callback after the GPU's write, a
//! host store) takes the lock after the write, then wakes the sleepers. A
//! write is thus either seen by the read, or made after it, and then its
//! wake-up finds the sleeper already waiting (it released the lock only by
//! starting to wait). `tests/loom_protocols.rs` models exactly this code.

use crate::sync::{AtomicU64, Condvar, Mutex, Ordering};
use std::time::{Duration, Instant};

/// A lock and a condition for the sleepers of one or more wake signals.
///
/// ```
/// use sigretire_tracker::backend::WakeMailbox;
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicI64, Ordering};
/// use std::time::Duration;
///
/// let mailbox = Arc::new(WakeMailbox::new());
/// let signal = Arc::new(AtomicI64::new(1));
/// let writer = {
///     let (mailbox, signal) = (mailbox.clone(), signal.clone());
///     std::thread::spawn(move || {
///         signal.store(0, Ordering::Release); // the GPU's completion
///         mailbox.wrote(); // the interrupt, after it
///     })
/// };
/// let seen = mailbox.sleep_while(|| signal.load(Ordering::Acquire), 1, Duration::from_secs(10));
/// assert_eq!(seen, 0);
/// writer.join().unwrap();
/// ```
#[derive(Debug, Default)]
pub struct WakeMailbox {
    lock: Mutex<()>,
    written: Condvar,
    wakes: AtomicU64,
    sleeps: AtomicU64,
}

impl WakeMailbox {
    /// An empty mailbox.
    pub fn new() -> Self {
        Self {
            lock: Mutex::new(()),
            written: Condvar::new(),
            wakes: AtomicU64::new(0),
            sleeps: AtomicU64::new(0),
        }
    }

    /// A wake signal was written (call after the write): wakes every
    /// sleeper, which then reads its own signal again.
    pub fn wrote(&self) {
        drop(self.lock.lock());
        self.wakes.fetch_add(1, Ordering::Relaxed);
        self.written.notify_all();
    }

    /// Sleeps until `read` (a load of the wake signal) returns something
    /// other than `observed`, or `timeout` passes, and returns what it read
    /// last. `read` runs under the mailbox lock, once before every sleep.
    pub fn sleep_while(
        &self,
        mut read: impl FnMut() -> i64,
        observed: i64,
        timeout: Duration,
    ) -> i64 {
        let deadline = Instant::now() + timeout;
        let mut guard = self.lock.lock();
        loop {
            let now = read();
            if now != observed || Instant::now() >= deadline {
                return now;
            }
            self.sleeps.fetch_add(1, Ordering::Relaxed);
            guard = self.written.wait_until(guard, deadline);
        }
    }

    /// Wake-ups sent ([`wrote`](Self::wrote) calls) and sleeps begun.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.wakes.load(Ordering::Relaxed),
            self.sleeps.load(Ordering::Relaxed),
        )
    }
}
