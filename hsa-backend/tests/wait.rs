//! Polling waits back off: a burst of loads, then yields, then sleeps that
//! double up to a cap. A busy spin would pass every test that only checks
//! what a wait returns, so these count what a long wait costs: loads (each an
//! uncached PCIe read for a VRAM signal) and CPU time. And the cap bounds how
//! late a long wait notices a change.

mod support;

use sigretire_hsa::{SignalPool, poll_until_change};
use sigretire_tracker::{Placement, backend::SignalMemory};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::Gpu;

/// A 50 ms wait that sees no change: about 32 + 64 loads, then one per
/// sleep (at least 200 us each, so at most ~250 more). A spin makes
/// millions.
#[test]
fn a_long_poll_makes_hundreds_of_loads_not_millions() {
    let loads = AtomicU64::new(0);
    let started = Instant::now();
    let value = poll_until_change(
        || {
            loads.fetch_add(1, Ordering::Relaxed);
            1
        },
        1,
        Duration::from_millis(50),
    );
    let waited = started.elapsed();
    let loads = loads.into_inner();
    assert_eq!(value, 1, "nothing changed");
    assert!(waited >= Duration::from_millis(50), "{waited:?}");
    assert!(
        loads <= 1_000,
        "{loads} loads in {waited:?}: the wait does not back off"
    );
    assert!(loads >= 32, "{loads} loads: not even the first burst");
}

/// The sleeps stop doubling at a cap: a change 300 ms into a wait is seen
/// within a few milliseconds (uncapped doubling would be sleeping ~260 ms by
/// then).
#[test]
fn a_long_poll_notices_a_change_soon_after_it_happens() {
    let value = Arc::new(AtomicI64::new(1));
    let writer = value.clone();
    let changed_at = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        writer.store(0, Ordering::Release);
        Instant::now()
    });
    let seen = poll_until_change(|| value.load(Ordering::Acquire), 1, Duration::from_secs(30));
    let noticed_at = Instant::now();
    let changed_at = changed_at.join().unwrap();
    assert_eq!(seen, 0);
    let late = noticed_at.saturating_duration_since(changed_at);
    assert!(late < Duration::from_millis(60), "noticed {late:?} late");
}

/// This thread's CPU time so far (Linux: `/proc/thread-self/schedstat`,
/// nanoseconds on a CPU).
#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat")
        .expect("/proc/thread-self/schedstat (Linux with scheduler statistics)");
    let nanos = text
        .split_whitespace()
        .next()
        .and_then(|field| field.parse().ok())
        .expect("schedstat starts with the time on a CPU in nanoseconds");
    Duration::from_nanos(nanos)
}

/// The pool's own wait on a VRAM batch signal (the path the tracker's CPU
/// waits take) sleeps through most of a long wait: a busy spin would spend
/// the whole 200 ms on a CPU.
#[cfg(target_os = "linux")]
#[test]
fn a_pools_long_wait_on_a_vram_signal_mostly_sleeps() {
    let gpu = Gpu::stepped();
    let pool = SignalPool::new(&gpu.device);
    let mut signals = Vec::new();
    pool.allocate(1, Placement::Device, &mut signals).unwrap();
    let (signal, _) = signals[0];
    // SAFETY: the pool's own signal.
    unsafe { pool.store(signal, 1) };
    let cpu = thread_cpu_time();
    let started = Instant::now();
    // SAFETY: as above; nothing completes it (the machine is stepped).
    let value = unsafe { pool.wait_change(signal, 1, Duration::from_millis(200)) };
    let (waited, spent) = (started.elapsed(), thread_cpu_time() - cpu);
    assert_eq!(value, 1);
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    assert!(
        spent < Duration::from_millis(40),
        "{spent:?} on a CPU during a {waited:?} wait: the wait does not back off"
    );
    assert_eq!(pool.counters().polled_waits, 1);
}
