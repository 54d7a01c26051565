//! Teeth: runs the property scenarios (the same seeds as `tests/property.rs`)
//! against the tracker a planted bug lives in, and prints one row of
//! the table `.ci/teeth` assembles: the bug, the check that caught it, how
//! many scenarios ran until then, and how long it took.
//!
//! ```sh
//! export RUSTFLAGS="--cfg sigretire_planted" CARGO_TARGET_DIR=target/teeth
//! TRACKER_PLANTED_BUG=trust-read-index cargo run --release -p sigretire-scenarios --bin teeth
//! cargo run --release -p sigretire-scenarios --bin teeth -- --list
//! ```
//!
//! A bug of the queue layer (`Bug::in_queue_layer`) runs the queue
//! layer's property driver instead (the seeds of `tests/queue_property.rs`,
//! on the stepped simulator).
//!
//! Exits 1 when the bug was not caught within `SCENARIO_TEETH_CASES`
//! scenarios per setup (default 500; `QUEUE_TEETH_CASES`, default 4000, for
//! the queue layer's), so a script notices a blunt check;
//! 2 when built without `--cfg sigretire_planted`, which has no bugs to
//! plant.

use std::process::ExitCode;

#[cfg(not(sigretire_planted))]
fn main() -> ExitCode {
    eprintln!(
        "teeth: built without --cfg sigretire_planted, the tracker has no planted bugs (run .ci/teeth)"
    );
    ExitCode::from(2)
}

#[cfg(sigretire_planted)]
fn main() -> ExitCode {
    use sigretire_scenarios::search::{PROPERTY_SEED, Threads, explore_as};
    use sigretire_scenarios::setup::setups;
    use sigretire_scenarios::{Coverage, TrackerKind};
    use sigretire_tracker::planted::{self, Bug};
    use std::time::Instant;

    if std::env::args().any(|a| a == "--list") {
        for bug in Bug::ALL {
            println!("{}", bug.name());
        }
        return ExitCode::SUCCESS;
    }
    let Some(bug) = planted::current() else {
        eprintln!("set TRACKER_PLANTED_BUG to one of the names `--list` prints");
        return ExitCode::FAILURE;
    };
    let cases: u64 = std::env::var("SCENARIO_TEETH_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    if bug.in_queue_layer() {
        // The queue layer's states are further from a scenario's start (a
        // move and a failure of the queue left, a sleeper racing a second
        // wait): more scenarios, each shorter to run.
        let cases = std::env::var("QUEUE_TEETH_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(4000);
        return queue_layer(bug, cases);
    }
    let setups = setups();
    let start = Instant::now();
    let kind = if bug.in_baseline() {
        TrackerKind::Baseline
    } else {
        TrackerKind::Retiring
    };
    let outcome = explore_as(kind, &setups, cases, PROPERTY_SEED, Threads::One);
    let seconds = start.elapsed().as_secs_f64();
    match outcome {
        Err(caught) => {
            eprintln!("{}", caught.report());
            println!(
                "| {} | {} | {} | {seconds:.2} |",
                bug.name(),
                caught.failure.check,
                caught.cases
            );
            ExitCode::SUCCESS
        }
        Ok(Coverage { ops, .. }) => {
            println!(
                "| {} | NOT CAUGHT ({ops} ops) | > {} | {seconds:.2} |",
                bug.name(),
                cases * setups.len() as u64
            );
            ExitCode::FAILURE
        }
    }
}

/// A bug of the queue layer: its property driver (the same seeds as
/// `tests/queue_property.rs`) on the stepped simulator, every setup, until a
/// judgment breaks.
#[cfg(sigretire_planted)]
fn queue_layer(bug: sigretire_tracker::planted::Bug, cases: u64) -> ExitCode {
    use sigretire_scenarios::queues::search::{QUEUE_PROPERTY_SEED, explore};
    use sigretire_scenarios::queues::{SimGpu, queue_setups};
    use std::time::Instant;

    let setups = queue_setups();
    let start = Instant::now();
    let outcome = explore::<SimGpu>(&setups, cases, QUEUE_PROPERTY_SEED);
    let seconds = start.elapsed().as_secs_f64();
    match outcome {
        Err(caught) => {
            eprintln!("{}", caught.report::<SimGpu>());
            println!(
                "| {} | queue driver: {} ({}) | {} | {seconds:.2} |",
                bug.name(),
                caught.failure.check.name(),
                caught.failure.subject,
                caught.cases
            );
            ExitCode::SUCCESS
        }
        Ok(_) => {
            println!(
                "| {} | NOT CAUGHT ({} queue scenarios) | > {} | {seconds:.2} |",
                bug.name(),
                cases * setups.len() as u64,
                cases * setups.len() as u64
            );
            ExitCode::FAILURE
        }
    }
}
