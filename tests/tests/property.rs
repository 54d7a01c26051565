//! The bounded property test: seeded random operation sequences, applied to
//! each tracker on the stepped simulator and to the reference model, every
//! invariant of DESIGN.md section 6 checked after every step, under every
//! small setup. A failure prints a shortened scenario and its seed.
//!
//! `SCENARIO_CASES` (scenarios per setup) and `SCENARIO_SEED` explore
//! further than CI does: `SCENARIO_CASES=5000 SCENARIO_SEED=7 cargo test
//! --release -p scenarios --test property`.

use scenarios::search::{PROPERTY_SEED, explore};
use scenarios::setup::setups;
use scenarios::{Coverage, TrackerKind};

/// Scenarios per setup in CI: a few seconds in a debug build.
const CASES: u64 = 60;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn explore_all(kind: TrackerKind) -> Coverage {
    let cases = env_or("SCENARIO_CASES", CASES);
    let seed = env_or("SCENARIO_SEED", PROPERTY_SEED);
    match explore(kind, &setups(), cases, seed) {
        Ok(coverage) => {
            eprintln!("{kind:?}: {coverage:?}");
            coverage
        }
        Err(case) => panic!("{}", case.report()),
    }
}

#[test]
fn the_retiring_tracker_keeps_every_invariant() {
    let c = explore_all(TrackerKind::Retiring);
    // The scenarios reach the states where the bugs would live.
    assert!(c.backpressure > 0, "the growth limit is reached: {c:?}");
    assert!(c.growths > 0, "rings grow: {c:?}");
    assert!(c.generation_wraps > 0, "generation counters wrap: {c:?}");
    assert!(
        c.parks > 0 && c.unparks > 0,
        "held signals park and return: {c:?}"
    );
    assert!(c.pins > 0, "GPU waiters pin signals: {c:?}");
    assert!(c.drains > 0, "queues drain: {c:?}");
    assert!(c.retired_by_fence > 0, "fences retire uses: {c:?}");
    assert!(c.retired_by_cpu_wait > 0, "CPU waits retire uses: {c:?}");
    assert!(c.retired_by_load > 0, "own loads retire uses: {c:?}");
    assert!(c.failed > 0, "queues fail: {c:?}");
    assert!(c.harvests > 0, "timestamps are harvested: {c:?}");
    assert!(c.flushes > 0, "rings in system memory need flushes: {c:?}");
    assert_reaches_every_kind_of_use(&c);
}

/// Several operations on one signal, copy engines, and submissions that
/// fail before or after issuing part of their work.
fn assert_reaches_every_kind_of_use(c: &Coverage) {
    assert!(c.multi_op_uses > 0, "uses of several operations: {c:?}");
    assert!(c.copy_uses > 0, "copy-engine uses: {c:?}");
    assert!(c.failed_submissions > 0, "submissions fail: {c:?}");
    assert!(
        c.partly_issued > 0,
        "some after issuing part of their work: {c:?}"
    );
}

#[test]
fn the_baseline_tracker_keeps_every_invariant() {
    let c = explore_all(TrackerKind::Baseline);
    assert!(c.backpressure > 0, "the baseline backs up: {c:?}");
    assert!(c.growths > 0, "the baseline grows: {c:?}");
    assert!(c.pins > 0, "GPU waiters pin signals: {c:?}");
    assert!(c.failed > 0, "queues fail: {c:?}");
    assert!(c.retired_by_load > 0, "own loads retire uses: {c:?}");
    assert_reaches_every_kind_of_use(&c);
}
