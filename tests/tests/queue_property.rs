//! The queue layer's property test: seeded random sequences of queue-layer
//! operations (`sigretire_scenarios::queues`), every answer judged after
//! every step against the machine's ground truth, on the stepped simulator
//! and on the ROCr backend over its stand-in, under every setup. A failure
//! prints its seed and a shortened scenario.
//!
//! `QUEUE_SCENARIO_CASES` (scenarios per setup) and `QUEUE_SCENARIO_SEED`
//! explore further than CI does: `QUEUE_SCENARIO_CASES=500
//! QUEUE_SCENARIO_SEED=7 cargo test --release -p sigretire-scenarios --test
//! queue_property`. `QUEUE_SCENARIO_ALL=1` reports every class of failure
//! found instead of stopping at the first.

use sigretire_scenarios::queues::search::{QUEUE_PROPERTY_SEED, explore, explore_all};
use sigretire_scenarios::queues::{Gpu, QueueCoverage, SimGpu, queue_setups};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn explore_on<G: Gpu>(cases: u64) -> QueueCoverage {
    let cases = env_or("QUEUE_SCENARIO_CASES", cases);
    let seed = env_or("QUEUE_SCENARIO_SEED", QUEUE_PROPERTY_SEED);
    if std::env::var_os("QUEUE_SCENARIO_ALL").is_some() {
        let (coverage, found) = explore_all::<G>(&queue_setups(), cases, seed);
        eprintln!("{}: {coverage:?}", G::NAME);
        let reports: Vec<String> = found.iter().map(|case| case.report::<G>()).collect();
        assert!(reports.is_empty(), "{}", reports.join("\n"));
        return coverage;
    }
    match explore::<G>(&queue_setups(), cases, seed) {
        Ok(coverage) => {
            eprintln!("{}: {coverage:?}", G::NAME);
            coverage
        }
        Err(case) => panic!("{}", case.report::<G>()),
    }
}

#[test]
fn the_queue_layer_answers_only_the_truth_on_the_simulator() {
    let c = explore_on::<SimGpu>(12);
    eprintln!("{c:#?}");
}
