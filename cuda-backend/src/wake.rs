//! Wake signals on CUDA: a pinned signal whose completion also wakes host
//! threads sleeping on it.
//!
//! A stream writes a signal with a memory operation, which wakes nobody.
//! So a publication completing a wake signal enqueues, after its memory
//! operations, a host function (`cuLaunchHostFunc`): the driver runs it on
//! its own thread once everything before it on the stream finished, and it
//! wakes the sleepers of the context's mailbox (the tracker's
//! [`WakeMailbox`], whose protocol loses no wake-up: a loom model checks it).

use parking_lot::Mutex;
use sigretire_tracker::backend::WakeMailbox;
use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// How many wake signals a context lists without a lock: five for each of
/// 200 queues at the default, more than a runtime makes. Past it, the rest
/// go to a locked set.
const LISTED: usize = 1024;

/// Slots of the lock-free table: twice [`LISTED`], so it is at most half
/// full and a lookup probes a slot or two.
const SLOTS: usize = 2 * LISTED;

/// The context's wake signals (by device address) and their mailbox.
///
/// Every publication asks [`is_wake`](Self::is_wake), so the question is
/// answered without a lock and in constant time: a context with no wake
/// signal reads one counter, one with some probes an open-addressing table
/// of atomics. Signals are only ever added (at a queue's creation, before
/// any publication can complete them), never removed, so a listed address
/// stays listed.
#[derive(Debug)]
pub(crate) struct Wakes {
    /// Device addresses by hash, 0 for an empty slot (no signal is at 0).
    table: Box<[AtomicU64]>,
    /// How many signals `table` holds.
    count: AtomicUsize,
    /// The writers' lock, and the signals past `LISTED`.
    overflow: Mutex<HashSet<u64>>,
    mailbox: Arc<WakeMailbox>,
}

impl Default for Wakes {
    fn default() -> Self {
        Self {
            table: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicUsize::new(0),
            overflow: Mutex::new(HashSet::new()),
            mailbox: Arc::default(),
        }
    }
}

/// The slots a lookup of `device` probes, in order: from its hash on,
/// wrapping. Signal blocks are 32-byte aligned, so the low bits say nothing.
fn probe(device: u64) -> impl Iterator<Item = usize> {
    let first = ((device >> 5).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 53) as usize;
    (0..SLOTS).map(move |k| (first + k) % SLOTS)
}

impl Wakes {
    /// `device` (a signal's device address) is a wake signal from now on.
    pub(crate) fn register(&self, device: u64) {
        let mut overflow = self.overflow.lock();
        if self.count.load(Ordering::Relaxed) >= LISTED {
            overflow.insert(device);
            return;
        }
        for slot in probe(device).map(|k| &self.table[k]) {
            match slot.load(Ordering::Relaxed) {
                0 => {
                    slot.store(device, Ordering::Release);
                    self.count.fetch_add(1, Ordering::Release);
                    return;
                }
                listed if listed == device => return,
                _ => {}
            }
        }
        unreachable!("the table is never more than half full");
    }

    /// Whether a publication completing `device` must wake sleepers.
    pub(crate) fn is_wake(&self, device: u64) -> bool {
        let count = self.count.load(Ordering::Acquire);
        if device == 0 || count == 0 {
            return false;
        }
        for slot in probe(device).map(|k| &self.table[k]) {
            match slot.load(Ordering::Acquire) {
                0 => break,
                listed if listed == device => return true,
                _ => {}
            }
        }
        count >= LISTED && self.overflow.lock().contains(&device)
    }

    /// The host function and its argument for `cuLaunchHostFunc`: one
    /// reference to the mailbox, given back when the function runs.
    pub(crate) fn host_function(&self) -> (unsafe extern "C" fn(*mut c_void), *mut c_void) {
        let data = Arc::into_raw(self.mailbox.clone())
            .cast_mut()
            .cast::<c_void>();
        (wake_sleepers, data)
    }

    /// Takes back the reference of a host function that was not enqueued.
    ///
    /// # Safety
    /// `data` came from [`host_function`](Self::host_function) and its
    /// function will not run.
    pub(crate) unsafe fn forget(&self, data: *mut c_void) {
        // SAFETY: the caller's contract: the one reference `host_function`
        // made, not taken back by `wake_sleepers`.
        drop(unsafe { Arc::from_raw(data.cast::<WakeMailbox>()) });
    }

    /// Sleeps until `value` leaves `observed` or `timeout` passes; returns
    /// the value then read.
    pub(crate) fn sleep_while(&self, value: &AtomicI64, observed: i64, timeout: Duration) -> i64 {
        self.mailbox
            .sleep_while(|| value.load(Ordering::Acquire), observed, timeout)
    }

    /// What the context's wake signals did.
    pub(crate) fn stats(&self) -> WakeStats {
        let (host_functions, sleeps) = self.mailbox.counts();
        WakeStats {
            signals: (self.count.load(Ordering::Acquire) + self.overflow.lock().len()) as u64,
            host_functions,
            sleeps,
        }
    }
}

/// What a context's wake signals did ([`CudaContext::wake_stats`](crate::CudaContext::wake_stats)).
///
/// ```
/// let stats = sigretire_cuda::WakeStats::default();
/// assert_eq!((stats.signals, stats.host_functions, stats.sleeps), (0, 0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WakeStats {
    /// Wake signals made.
    pub signals: u64,
    /// Host functions the driver ran (one per publication completing one).
    pub host_functions: u64,
    /// Times a host thread went to sleep on one.
    pub sleeps: u64,
}

/// The host function: the stream reached it, so the memory operations
/// before it (the wake signal's completion) are written.
unsafe extern "C" fn wake_sleepers(data: *mut c_void) {
    // SAFETY: `data` is the reference `Wakes::host_function` made for this
    // call, taken back exactly once, here.
    let mailbox = unsafe { Arc::from_raw(data.cast::<WakeMailbox>()) };
    mailbox.wrote();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_function_wakes_a_sleeper_once_the_value_changed() {
        let wakes = Arc::new(Wakes::default());
        let value = Arc::new(AtomicI64::new(1));
        let sleeper = {
            let (wakes, value) = (wakes.clone(), value.clone());
            std::thread::spawn(move || wakes.sleep_while(&value, 1, Duration::from_secs(10)))
        };
        while wakes.stats().sleeps == 0 {
            std::thread::yield_now();
        }
        value.store(0, Ordering::Release);
        let (function, data) = wakes.host_function();
        // SAFETY: what the driver would do: call it once with its data.
        unsafe { function(data) };
        assert_eq!(sleeper.join().unwrap(), 0);
        assert_eq!(wakes.stats().host_functions, 1);
        assert_eq!(
            Arc::strong_count(&wakes.mailbox),
            1,
            "its reference came back"
        );
    }

    #[test]
    fn registered_signals_are_told_apart() {
        let wakes = Wakes::default();
        wakes.register(0x1000);
        assert!(wakes.is_wake(0x1000) && !wakes.is_wake(0x2000) && !wakes.is_wake(0));
    }

    #[test]
    fn signals_past_the_lock_free_table_are_still_told_apart() {
        let wakes = Wakes::default();
        for device in 1..=(LISTED as u64 + 3) {
            wakes.register(device * 0x100);
        }
        assert!((1..=(LISTED as u64 + 3)).all(|device| wakes.is_wake(device * 0x100)));
        assert!(!wakes.is_wake(0x80) && !wakes.is_wake((LISTED as u64 + 4) * 0x100));
        assert_eq!(wakes.stats().signals, LISTED as u64 + 3);
    }
}
