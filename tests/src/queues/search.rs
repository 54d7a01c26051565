//! Running queue scenarios: from a seed to operations, through the driver
//! with panics caught, and from a failing scenario to a short one that
//! fails the same way.

use super::check::{QueueCheck, QueueFailure};
use super::driver::{QueueCoverage, QueueDriver};
use super::gpu::Gpu;
use super::ops::{Op, QueueSetup, decode_ops, without};
use crate::search::quietly;
use arbitrary::Unstructured;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The base seed of the queue property test. `QUEUE_SCENARIO_SEED`
/// overrides it there, to explore new scenarios.
pub const QUEUE_PROPERTY_SEED: u64 = 0x5167_A11C_E5ED_0051;

/// The longest scenario a seed generates.
pub const MAX_QUEUE_OPS: usize = 64;

/// Runs `ops` on a fresh driver for `setup` on a new machine of kind `G`,
/// then its final checks. A panic (in the layer or the driver) is reported
/// as [`QueueCheck::Unexpected`] at the step it happened.
pub fn run<G: Gpu>(setup: QueueSetup, ops: &[Op]) -> Result<QueueCoverage, QueueFailure> {
    let (coverage, outcome) = run_counted::<G>(setup, ops);
    outcome.map(|()| coverage)
}

/// [`run`], with what the scenario reached even when it failed (up to the
/// failure; nothing after a panic).
pub fn run_counted<G: Gpu>(
    setup: QueueSetup,
    ops: &[Op],
) -> (QueueCoverage, Result<(), QueueFailure>) {
    let step = Cell::new(0);
    let reached = Cell::new(QueueCoverage::default());
    let outcome = quietly(|| {
        catch_unwind(AssertUnwindSafe(|| {
            let mut driver = QueueDriver::<G>::new(setup)?;
            for &op in ops {
                let applied = driver.apply(op);
                reached.set(driver.coverage());
                if let Err(failure) = applied {
                    driver.abandon();
                    return Err(failure);
                }
                step.set(step.get() + 1);
            }
            let coverage = driver.finish()?;
            reached.set(coverage);
            Ok(())
        }))
    });
    let outcome = outcome.unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into());
        Err(QueueFailure {
            check: QueueCheck::Unexpected,
            subject: "panic",
            step: step.get(),
            detail: format!("panicked: {message}"),
        })
    });
    (reached.get(), outcome)
}

/// SplitMix64, as the tracker's scenarios use.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The scenario a seed names: between 8 and [`MAX_QUEUE_OPS`] operations,
/// less the kinds `QUEUE_SCENARIO_WITHOUT` names ([`without`]).
pub fn generate(seed: u64) -> Vec<Op> {
    let mut state = seed;
    let len = 8 + (splitmix(&mut state) % (MAX_QUEUE_OPS as u64 - 7)) as usize;
    let bytes: Vec<u8> = (0..len * 2)
        .flat_map(|_| splitmix(&mut state).to_le_bytes())
        .collect();
    let ops = decode_ops(&mut Unstructured::new(&bytes), len);
    match std::env::var("QUEUE_SCENARIO_WITHOUT") {
        Ok(kinds) => without(ops, &kinds),
        Err(_) => ops,
    }
}

/// The seed of scenario `case` under setup `setup_index`.
pub fn seed_of(base: u64, case: u64, setup_index: usize) -> u64 {
    let mut state = base ^ case.rotate_left(23) ^ (setup_index as u64).rotate_left(47);
    splitmix(&mut state)
}

/// A scenario that broke a check, and how to replay it.
#[derive(Clone, Debug)]
pub struct QueueCase {
    /// The machine's name.
    pub machine: &'static str,
    /// How many scenarios ran, this one included.
    pub cases: u64,
    /// The scenario's seed ([`generate`]).
    pub seed: u64,
    /// Its setup.
    pub setup: QueueSetup,
    /// The operations it ran.
    pub ops: Vec<Op>,
    /// What broke.
    pub failure: QueueFailure,
}

impl QueueCase {
    /// A report: the failure, the seed, and the scenario shortened (by
    /// [`shrink`], on machine `G`) to operations that still fail the same
    /// way.
    pub fn report<G: Gpu>(&self) -> String {
        let (ops, failure) = shrink::<G>(self.setup, &self.ops, &self.failure);
        let mut text = format!(
            "queue layer on the {}, setup \"{}\", scenario {} (seed {:#x}) broke a check: {}\n\
             shortened from {} to {} operations, failing {}:\n",
            self.machine,
            self.setup.name,
            self.cases,
            self.seed,
            self.failure,
            self.ops.len(),
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
/// reached early) on machines of kind `G`, stopping at the first failure.
pub fn explore<G: Gpu>(
    setups: &[QueueSetup],
    cases: u64,
    base_seed: u64,
) -> Result<QueueCoverage, Box<QueueCase>> {
    let mut coverage = QueueCoverage::default();
    let mut ran = 0;
    for case in 0..cases {
        for (setup_index, &setup) in setups.iter().enumerate() {
            ran += 1;
            let seed = seed_of(base_seed, case, setup_index);
            let ops = generate(seed);
            match run::<G>(setup, &ops) {
                Ok(c) => coverage.add(&c),
                Err(failure) => {
                    return Err(Box::new(QueueCase {
                        machine: G::NAME,
                        cases: ran,
                        seed,
                        setup,
                        ops,
                        failure,
                    }));
                }
            }
        }
    }
    Ok(coverage)
}

/// Every failing scenario among `cases` per setup, one per class of
/// failure ([`QueueFailure::same_class`]), the first found of each: what a
/// run on code with several defects finds at once.
pub fn explore_all<G: Gpu>(
    setups: &[QueueSetup],
    cases: u64,
    base_seed: u64,
) -> (QueueCoverage, Vec<QueueCase>) {
    let mut coverage = QueueCoverage::default();
    let mut found: Vec<QueueCase> = Vec::new();
    let mut ran = 0;
    for case in 0..cases {
        for (setup_index, &setup) in setups.iter().enumerate() {
            ran += 1;
            let seed = seed_of(base_seed, case, setup_index);
            let ops = generate(seed);
            let (reached, outcome) = run_counted::<G>(setup, &ops);
            coverage.add(&reached);
            match outcome {
                Ok(()) => {}
                Err(failure) => {
                    if !found.iter().any(|f| f.failure.same_class(&failure)) {
                        found.push(QueueCase {
                            machine: G::NAME,
                            cases: ran,
                            seed,
                            setup,
                            ops,
                            failure,
                        });
                    }
                }
            }
        }
    }
    (coverage, found)
}

/// Removes operations while the scenario still fails the same way (the
/// same check about the same kind of answer): chunks of halving size.
pub fn shrink<G: Gpu>(
    setup: QueueSetup,
    ops: &[Op],
    failure: &QueueFailure,
) -> (Vec<Op>, QueueFailure) {
    let mut best: Vec<Op> = ops[..ops.len().min(failure.step + 1)].to_vec();
    let mut best_failure = failure.clone();
    let mut chunk = best.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        let mut progressed = false;
        while i < best.len() {
            let end = (i + chunk).min(best.len());
            let candidate: Vec<Op> = best[..i].iter().chain(&best[end..]).copied().collect();
            match run::<G>(setup, &candidate) {
                Err(f) if f.same_class(&best_failure) => {
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
