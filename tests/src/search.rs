//! Running scenarios: from a seed to operations, through the driver with
//! panics caught, and from a failing scenario to a short one that fails the
//! same check.

use crate::check::{Check, Failure};
use crate::driver::{Coverage, Driver, SimTracker, TrackerKind};
use crate::ops::{Op, decode_ops};
use crate::setup::Setup;
use arbitrary::Unstructured;
use sigretire_baseline::BaselineTracker;
use sigretire_sim::Queue;
use sigretire_sim::backend::SimMemory;
use sigretire_tracker::RetiringTracker;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

/// The base seed of the property tests (and of the teeth runner, so its
/// counts are the property tests' counts). `SCENARIO_SEED` overrides it in
/// the property tests, to explore new scenarios.
pub const PROPERTY_SEED: u64 = 0x5167_A11C_E5ED_0004;

/// The longest scenario a seed generates.
pub const MAX_OPS: usize = 256;

/// Runs `ops` on a fresh driver for `kind` under `setup`, then its final
/// checks. A panic in the tracker (or the driver) is reported as
/// [`Check::Unexpected`] at the step it happened.
pub fn run(kind: TrackerKind, setup: Setup, ops: &[Op]) -> Result<Coverage, Failure> {
    run_as(kind, setup, ops, Threads::One)
}

/// Who runs a scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    /// The driver's thread alone: every interleaving is the seed's.
    One,
    /// With an observer thread asking the trackers' waiters and clones of
    /// the scenario's references about recent uses all the while (see
    /// `Driver::with_observer`). Not reproducible step for step.
    Observed,
}

/// [`run`], with or without the observer thread.
pub fn run_as(
    kind: TrackerKind,
    setup: Setup,
    ops: &[Op],
    threads: Threads,
) -> Result<Coverage, Failure> {
    match kind {
        TrackerKind::Retiring => run_with::<RetiringTracker<SimMemory, Queue>>(setup, ops, threads),
        TrackerKind::Baseline => run_with::<BaselineTracker<SimMemory, Queue>>(setup, ops, threads),
    }
}

fn run_with<T: SimTracker>(
    setup: Setup,
    ops: &[Op],
    threads: Threads,
) -> Result<Coverage, Failure> {
    let step = Cell::new(0);
    let outcome = quietly(|| {
        catch_unwind(AssertUnwindSafe(|| {
            let mut driver = match threads {
                Threads::One => Driver::<T>::new(setup)?,
                Threads::Observed => Driver::<T>::with_observer(setup)?,
            };
            for &op in ops {
                driver.apply(op)?;
                step.set(step.get() + 1);
            }
            driver.finish()
        }))
    });
    outcome.unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into());
        Err(Failure {
            check: Check::Unexpected,
            step: step.get(),
            detail: format!("panicked: {message}"),
        })
    })
}

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with the panic message of this thread suppressed (a caught
/// panic is reported as a failure; shrinking would print hundreds).
pub(crate) fn quietly<R>(f: impl FnOnce() -> R) -> R {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let result = f();
    QUIET.with(|q| q.set(false));
    result
}

/// SplitMix64: a tiny, well-mixed generator, so a seed names a scenario
/// on every platform without a dependency.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The scenario a seed names: between 16 and [`MAX_OPS`] operations.
pub fn generate(seed: u64) -> Vec<Op> {
    let mut state = seed;
    let len = 16 + (splitmix(&mut state) % (MAX_OPS as u64 - 15)) as usize;
    // Generously many bytes: an operation takes at most a dozen.
    let bytes: Vec<u8> = (0..len * 2)
        .flat_map(|_| splitmix(&mut state).to_le_bytes())
        .collect();
    decode_ops(&mut Unstructured::new(&bytes), len)
}

/// The seed of scenario `case` under setup `setup_index`.
pub fn seed_of(base: u64, case: u64, setup_index: usize) -> u64 {
    let mut state = base ^ case.rotate_left(17) ^ (setup_index as u64).rotate_left(41);
    splitmix(&mut state)
}

/// A scenario that broke an invariant, and how to replay it.
#[derive(Clone, Debug)]
pub struct CaseFailure {
    /// How many scenarios ran, this one included.
    pub cases: u64,
    /// The scenario's seed ([`generate`]).
    pub seed: u64,
    /// Its tracker.
    pub kind: TrackerKind,
    /// Its setup.
    pub setup: Setup,
    /// What broke.
    pub failure: Failure,
}

impl CaseFailure {
    /// A report with a shortened scenario that fails the same check.
    pub fn report(&self) -> String {
        let (ops, failure) = shrink(self.kind, self.setup, &generate(self.seed), &self.failure);
        let mut text = format!(
            "{:?} tracker, setup \"{}\", scenario {} (seed {:#x}) broke an invariant: {}\n\
             shortened to {} operations, failing {}:\n",
            self.kind,
            self.setup.name,
            self.cases,
            self.seed,
            self.failure,
            ops.len(),
            failure
        );
        for (i, op) in ops.iter().enumerate() {
            text.push_str(&format!("  {i:3}: {op:?}\n"));
        }
        text
    }
}

/// Runs `cases` scenarios for each setup (case-major, so every setup is
/// reached early), stopping at the first failure.
pub fn explore(
    kind: TrackerKind,
    setups: &[Setup],
    cases: u64,
    base_seed: u64,
) -> Result<Coverage, Box<CaseFailure>> {
    explore_as(kind, setups, cases, base_seed, Threads::One)
}

/// [`explore`], with or without the observer thread.
pub fn explore_as(
    kind: TrackerKind,
    setups: &[Setup],
    cases: u64,
    base_seed: u64,
    threads: Threads,
) -> Result<Coverage, Box<CaseFailure>> {
    let mut coverage = Coverage::default();
    let mut ran = 0;
    for case in 0..cases {
        for (setup_index, &setup) in setups.iter().enumerate() {
            ran += 1;
            let seed = seed_of(base_seed, case, setup_index);
            match run_as(kind, setup, &generate(seed), threads) {
                Ok(c) => coverage.add(&c),
                Err(failure) => {
                    return Err(Box::new(CaseFailure {
                        cases: ran,
                        seed,
                        kind,
                        setup,
                        failure,
                    }));
                }
            }
        }
    }
    Ok(coverage)
}

/// Removes operations while the scenario still fails the same check:
/// chunks of halving size (a simple delta debugging).
pub fn shrink(
    kind: TrackerKind,
    setup: Setup,
    ops: &[Op],
    failure: &Failure,
) -> (Vec<Op>, Failure) {
    let mut best: Vec<Op> = ops[..ops.len().min(failure.step + 1)].to_vec();
    let mut best_failure = failure.clone();
    let mut chunk = best.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        let mut progressed = false;
        while i < best.len() {
            let end = (i + chunk).min(best.len());
            let candidate: Vec<Op> = best[..i].iter().chain(&best[end..]).copied().collect();
            match run(kind, setup, &candidate) {
                Err(f) if f.check == best_failure.check => {
                    best = candidate;
                    best.truncate(f.step + 1);
                    best_failure = f;
                    progressed = true;
                }
                _ => i += chunk,
            }
        }
        if chunk == 1 && !progressed {
            return (best, best_failure);
        }
        if !progressed {
            chunk = chunk.div_ceil(2);
        }
    }
}
