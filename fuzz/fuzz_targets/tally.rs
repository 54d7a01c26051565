//! Counts what a fuzz run did and prints it when libFuzzer exits, so the
//! throughput in operations per second (not just executions) is on record:
//! `scenarios: RUNS runs, OPS ops in SECONDS s (OPS/s ops/s)`.

use std::sync::Once;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

static RUNS: AtomicU64 = AtomicU64::new(0);
static OPS: AtomicU64 = AtomicU64::new(0);
static START: OnceLock<Instant> = OnceLock::new();

extern "C" fn report() {
    let seconds = START.get().map_or(0.0, |s| s.elapsed().as_secs_f64());
    let (runs, ops) = (RUNS.load(Ordering::Relaxed), OPS.load(Ordering::Relaxed));
    let rate = if seconds > 0.0 { ops as f64 / seconds } else { 0.0 };
    eprintln!("scenarios: {runs} runs, {ops} ops in {seconds:.1} s ({rate:.0} ops/s)");
}

/// Records one execution of `ops` operations.
pub fn record(ops: u64) {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        START.get_or_init(Instant::now);
        // SAFETY: `report` is an `extern "C" fn()` that touches only
        // statics; libFuzzer ends a timed run with `exit`, which runs it.
        unsafe { libc::atexit(report) };
    });
    RUNS.fetch_add(1, Ordering::Relaxed);
    OPS.fetch_add(ops, Ordering::Relaxed);
}
