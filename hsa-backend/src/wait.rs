//! CPU waits on a single signal, both on the tracker's wait engine
//! ([`sigretire_tracker::wait::Wait`]).
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
use sigretire_tracker::{
    Placement, WaitPolicy,
    wait::{Wait, WakeSource},
};
use std::cell::Cell;
use std::time::Duration;

/// How a poll of a block's signal spends its time (the tracker's wait
/// engine runs it): a short burst of back-to-back loads (about 60 host
/// loads; in device memory about 30 PCIe reads at 1.1 us each), then loads
/// with a yield between them, then with sleeps that double up to 200 us,
/// which bounds the wake-up latency of a long wait.
const POLL: WaitPolicy = WaitPolicy {
    spin: Duration::from_micros(2),
    device_spin: Duration::from_micros(35),
    yield_for: Duration::from_micros(20),
    max_sleep: Duration::from_micros(200),
    interrupt: false,
    hybrid: None,
};

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
pub fn poll_until_change(load: impl FnMut() -> i64, observed: i64, timeout: Duration) -> i64 {
    poll_at(Placement::Host, load, observed, timeout)
}

/// As [`poll_until_change`], for a signal in `placement`: its spin is the
/// one for that memory.
pub(crate) fn poll_at(
    placement: Placement,
    mut load: impl FnMut() -> i64,
    observed: i64,
    timeout: Duration,
) -> i64 {
    let mut last = observed;
    let changed = Wait::new(POLL).at(placement).timeout(Some(timeout)).until(
        || {
            last = load();
            (last != observed).then_some(last)
        },
        || None::<core::convert::Infallible>,
    );
    changed.unwrap_or(last)
}

/// ROCr's own wait on a signal it created, as the wake of an engine wait:
/// each sleep records the value ROCr answered, for the wait's next look.
struct RocrWait<'a> {
    runtime: &'a Runtime,
    signal: hsa_signal_t,
    observed: i64,
    seen: &'a Cell<i64>,
}

impl WakeSource for RocrWait<'_> {
    fn sleep(&mut self, timeout: Duration) -> bool {
        let api = self.runtime.api();
        // SAFETY: the signal is live and this runtime's
        // (`rocr_wait_until_change`'s contract); the rest are plain values.
        let value = unsafe {
            api.hsa_signal_wait_scacquire(
                self.signal,
                HSA_SIGNAL_CONDITION_NE,
                self.observed,
                system_ticks(self.runtime, timeout),
                HSA_WAIT_STATE_BLOCKED,
            )
        };
        self.seen.set(value);
        value != self.observed
    }
}

/// Waits through ROCr until a signal ROCr created differs from `observed`,
/// or `timeout` passes; returns the value last observed.
///
/// ROCr sleeps from the first look on (no spin): `hsa_signal_wait_scacquire` may
/// return early (its contract allows it), and the engine then sleeps on it
/// again, with the time left.
///
/// # Safety
/// `signal` must be a live signal that `runtime`'s ROCr created.
pub(crate) unsafe fn rocr_wait_until_change(
    runtime: &Runtime,
    signal: hsa_signal_t,
    observed: i64,
    timeout: Duration,
) -> i64 {
    // SAFETY: as above. The wait's first look reads the value now, so a
    // wait given no time still answers what the signal holds.
    let seen = Cell::new(unsafe { runtime.api().hsa_signal_load_scacquire(signal) });
    let sleeps_at_once = WaitPolicy::blocking().with_spin(Duration::ZERO);
    let changed = Wait::new(sleeps_at_once)
        .timeout(Some(timeout))
        .until_woken(
            || Some(seen.get()).filter(|&value| value != observed),
            || None::<core::convert::Infallible>,
            || {
                Some(RocrWait {
                    runtime,
                    signal,
                    observed,
                    seen: &seen,
                })
            },
        );
    changed.unwrap_or(seen.get())
}

/// `duration` in system timestamp ticks, the unit of ROCr's timeout hints
/// (`u64::MAX`, "no limit", when it does not fit).
pub(crate) fn system_ticks(runtime: &Runtime, duration: Duration) -> u64 {
    let ticks = duration.as_nanos() * u128::from(runtime.timestamp_frequency()) / 1_000_000_000;
    u64::try_from(ticks).unwrap_or(u64::MAX)
}
