//! CPU waits on a single signal.
//!
//! Signals the backend builds itself are raw memory that ROCr knows nothing
//! about, so they are waited for by polling: a burst of back-to-back loads
//! (lowest latency), then loads with a yield between them, then with sleeps
//! that double up to a cap, so a long wait neither burns a core nor, for a
//! VRAM signal, floods PCIe with uncached reads. Signals ROCr created are
//! waited for by ROCr (`hsa_signal_wait_scacquire`), which can sleep on their
//! interrupt event instead of polling at all.

use crate::runtime::Runtime;
use hsa_sys::{HSA_SIGNAL_CONDITION_NE, HSA_WAIT_STATE_BLOCKED, hsa_signal_t};
use std::time::{Duration, Instant};

/// Polls back to back this many times first (about 1 us of host-memory
/// loads, or 30 us of PCIe reads at 1.1 us each).
const SPIN_POLLS: u32 = 32;
/// Then this many polls with a yield between them.
const YIELD_POLLS: u32 = 64;
/// The longest sleep between polls: bounds the wake-up latency of a long wait.
const MAX_SLEEP: Duration = Duration::from_micros(200);

/// Polls `load` until its value differs from `observed` or `timeout` passes;
/// returns the value last loaded.
///
/// ```
/// use std::sync::atomic::{AtomicI64, Ordering};
/// use std::time::Duration;
///
/// let value = AtomicI64::new(1);
/// let seen = sigretire_hsa::poll_until_change(|| value.load(Ordering::Acquire), 1, Duration::from_millis(1));
/// assert_eq!(seen, 1); // timed out
/// value.store(0, Ordering::Release);
/// assert_eq!(sigretire_hsa::poll_until_change(|| value.load(Ordering::Acquire), 1, Duration::MAX), 0);
/// ```
pub fn poll_until_change(mut load: impl FnMut() -> i64, observed: i64, timeout: Duration) -> i64 {
    let start = Instant::now();
    let mut sleep = Duration::from_micros(1);
    let mut polls = 0u32;
    loop {
        let value = load();
        if value != observed {
            return value;
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return value;
        }
        polls = polls.saturating_add(1);
        if polls < SPIN_POLLS {
            std::hint::spin_loop();
        } else if polls < SPIN_POLLS + YIELD_POLLS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(sleep.min(timeout - waited));
            sleep = (sleep * 2).min(MAX_SLEEP);
        }
    }
}

/// Waits through ROCr until a signal ROCr created differs from `observed`,
/// or `timeout` passes; returns the value last observed.
///
/// `hsa_signal_wait_scacquire` may return early (its contract allows it), so
/// the wait is repeated with the time left.
///
/// # Safety
/// `signal` must be a live signal that `runtime`'s ROCr created.
pub(crate) unsafe fn rocr_wait_until_change(
    runtime: &Runtime,
    signal: hsa_signal_t,
    observed: i64,
    timeout: Duration,
) -> i64 {
    let api = runtime.api();
    let start = Instant::now();
    loop {
        let left = timeout.saturating_sub(start.elapsed());
        // SAFETY: the caller guarantees a live ROCr signal; the arguments are
        // plain values.
        let value = unsafe {
            api.hsa_signal_wait_scacquire(
                signal,
                HSA_SIGNAL_CONDITION_NE,
                observed,
                system_ticks(runtime, left),
                HSA_WAIT_STATE_BLOCKED,
            )
        };
        if value != observed || start.elapsed() >= timeout {
            return value;
        }
    }
}

/// `duration` in system timestamp ticks, the unit of ROCr's timeout hints
/// (`u64::MAX`, "no limit", when it does not fit).
pub(crate) fn system_ticks(runtime: &Runtime, duration: Duration) -> u64 {
    let ticks = duration.as_nanos() * u128::from(runtime.timestamp_frequency()) / 1_000_000_000;
    u64::try_from(ticks).unwrap_or(u64::MAX)
}
