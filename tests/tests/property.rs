//! The bounded property test: seeded random operation sequences, applied to
//! each tracker on the stepped simulator and to the reference model, every
//! invariant of docs/design.md section 6 checked after every step, under every
//! small setup. A failure prints a shortened scenario and its seed.
//!
//! `SCENARIO_CASES` (scenarios per setup) and `SCENARIO_SEED` explore
//! further than CI does: `SCENARIO_CASES=5000 SCENARIO_SEED=7 cargo test
//! --release -p sigretire-scenarios --test property`.

use sigretire_scenarios::search::{PROPERTY_SEED, Threads, explore, explore_as};
use sigretire_scenarios::setup::setups;
use sigretire_scenarios::{Coverage, TrackerKind};

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
    assert_reaches_the_hard_cases(TrackerKind::Retiring, &c);
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
    assert!(
        c.caller_dispatches > 0 && c.any_waits > 0 && c.value_waits > 0,
        "the caller's own packet shapes: {c:?}"
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
    assert_reaches_the_hard_cases(TrackerKind::Baseline, &c);
}

/// The generators behind the wrong answers found from outside: drains of a
/// new queue beside an old generation's or a copy engine's pending work,
/// allocation failures under held signals, retries after waiting for the
/// use back-pressure named, and pins attached to a foreign ticket.
fn assert_reaches_the_hard_cases(kind: TrackerKind, c: &Coverage) {
    assert!(
        c.drains_beside_pending > 0,
        "drains beside pending work: {c:?}"
    );
    assert!(
        c.refused_allocations > 0,
        "allocation failures refuse: {c:?}"
    );
    assert!(c.refused_attaches > 0, "attaches to foreign tickets: {c:?}");
    // The baseline names the use it just loaded and found pending, which
    // a wait right after cannot see complete on the stepped simulator.
    if kind == TrackerKind::Retiring {
        assert!(c.retries_after_wait > 0, "waits for the named use: {c:?}");
    }
}

/// Scenarios per setup for the threaded variant (each starts a thread).
const OBSERVED_CASES: u64 = 30;

/// The threaded variant: another thread asks each tracker's `Waiter` and
/// clones of the held references about recent uses while the owner
/// acquires at the ring's limit. A completion learned there, at any
/// moment, must never turn into a hard error, an early answer or a leak.
fn explore_observed(kind: TrackerKind) -> Coverage {
    let cases = env_or("SCENARIO_OBSERVED_CASES", OBSERVED_CASES);
    let seed = env_or("SCENARIO_SEED", PROPERTY_SEED) ^ 0x0b5e_12ed;
    match explore_as(kind, &setups(), cases, seed, Threads::Observed) {
        Ok(coverage) => {
            eprintln!("{kind:?}, observed: {coverage:?}");
            coverage
        }
        Err(case) => panic!(
            "{kind:?} tracker, setup \"{}\", seed {:#x}, with an observer thread: {}",
            case.setup.name, case.seed, case.failure
        ),
    }
}

#[test]
fn the_retiring_tracker_keeps_every_invariant_with_another_thread_asking() {
    let c = explore_observed(TrackerKind::Retiring);
    assert!(c.observed_answers > 0, "the observer answered: {c:?}");
    assert!(
        c.backpressure > 0,
        "the owner meets the ring's limit: {c:?}"
    );
}

#[test]
fn the_baseline_tracker_keeps_every_invariant_with_another_thread_asking() {
    let c = explore_observed(TrackerKind::Baseline);
    assert!(c.observed_answers > 0, "the observer answered: {c:?}");
}
