//! Bad input gets a typed error, the same one from both trackers, and
//! never a panic, an abort or a silently saturated value.

use sigretire_sim::Queue;
use sigretire_sim::backend::{self as sim_backend, SimMemory, submit_barrier};
use sigretire_tracker::{
    AcquireError, CreateError, FailSubmissionError, ForeignTicket, InvalidConfig, PinError,
    TimestampsError,
};
use sigretire_tracker::{BaselineTracker, Config, Request, RetiringTracker, Status, Tracker};
use std::sync::Arc;

type Retiring = RetiringTracker<SimMemory, Queue>;
type Baseline = BaselineTracker<SimMemory, Queue>;

/// Every configuration a tracker must refuse, with the field it names.
fn bad_configs() -> Vec<(&'static str, Config)> {
    let d = Config::default();
    vec![
        (
            "initial_size",
            Config {
                initial_size: 0,
                ..d
            },
        ),
        (
            "initial_size",
            Config {
                initial_size: usize::MAX,
                ..d
            },
        ),
        (
            "initial_size",
            Config {
                initial_size: 1 << 40,
                ..d
            },
        ),
        (
            "growth_limit",
            Config {
                growth_limit: 0,
                ..d
            },
        ),
        (
            "growth_limit",
            Config {
                growth_limit: usize::MAX,
                ..d
            },
        ),
        (
            "max_in_flight",
            Config {
                initial_size: 1 << 16,
                growth_limit: 1 << 10,
                ..d
            },
        ),
        (
            "refill_batch",
            Config {
                refill_batch: 0,
                ..d
            },
        ),
        (
            "refill_batch",
            Config {
                refill_batch: usize::MAX,
                ..d
            },
        ),
        (
            "timing_batch",
            Config {
                timing_batch: 0,
                ..d
            },
        ),
        (
            "timing_batch",
            Config {
                timing_batch: usize::MAX,
                ..d
            },
        ),
        (
            "generation_bits",
            Config {
                generation_bits: 0,
                ..d
            },
        ),
        (
            "generation_bits",
            Config {
                generation_bits: 33,
                ..d
            },
        ),
        (
            "backpressure_window",
            Config {
                backpressure_window: 0,
                ..d
            },
        ),
        (
            "backpressure_window",
            Config {
                backpressure_window: usize::MAX,
                ..d
            },
        ),
        (
            "probe_interval",
            Config {
                probe_interval: 0,
                ..d
            },
        ),
        (
            "probe_interval",
            Config {
                probe_interval: usize::MAX,
                ..d
            },
        ),
        (
            "stamp_history",
            Config {
                stamp_history: usize::MAX,
                ..d
            },
        ),
    ]
}

#[test]
fn out_of_range_configurations_are_refused_by_both_trackers() {
    for (field, config) in bad_configs() {
        let (sim, queue) = sim_backend::stepped_queue();
        let memory = Arc::new(SimMemory::new(sim, queue.agent()));
        let expect_refusal = |result: Result<(), CreateError>, tracker: &str| match result {
            Err(CreateError::InvalidConfig(InvalidConfig(message))) => {
                assert!(message.contains(field), "{tracker}: {field}: {message}")
            }
            other => panic!("{tracker} accepted {field} in {config:?}: {other:?}"),
        };
        expect_refusal(
            Retiring::new(memory.clone(), queue.clone(), config).map(drop),
            "retiring",
        );
        expect_refusal(Baseline::new(memory, queue, config).map(drop), "baseline");
        expect_refusal(config.validate().map_err(CreateError::from), "validate");
        expect_refusal(
            sim_backend::stepped_tracker(config).map(drop),
            "stepped_tracker",
        );
        expect_refusal(
            sim_backend::stepped_baseline(config).map(drop),
            "stepped_baseline",
        );
    }
}

#[test]
fn the_largest_configurations_allowed_are_accepted() {
    let config = Config {
        initial_size: 1 << 10,
        growth_limit: 1 << 10,
        backpressure_window: 1 << 20,
        probe_interval: 1 << 20,
        ..Config::default()
    };
    assert_eq!(config.validate(), Ok(()));
    assert_eq!(config.max_in_flight(), 1 << 20);
}

fn acquire_at<T: Tracker>(tracker: &mut T, index: u64) -> Result<(), AcquireError> {
    tracker
        .acquire(Request::packet(index).barrier(true))
        .map(drop)
}

/// Within a queue generation, AQL indices must grow; a repeated, a lower
/// and a far-ahead (2^63 or more: behind, modulo 2^64) index is refused.
fn indices_must_grow<T: Tracker>(mut tracker: T) {
    acquire_at(&mut tracker, 10).unwrap();
    for bad in [10, 9, 0, 10 + (1 << 63), u64::MAX - (1 << 62)] {
        let result = acquire_at(&mut tracker, bad);
        assert_eq!(
            result,
            Err(AcquireError::AqlIndexOutOfOrder {
                index: bad,
                previous: 10
            }),
            "index {bad}"
        );
    }
    acquire_at(&mut tracker, 11).unwrap();
    acquire_at(&mut tracker, 11 + (1 << 62)).unwrap();
    // A copy-engine use is off the AQL queue: no index to check.
    tracker.acquire(Request::copy_engine()).unwrap();
}

#[test]
fn aql_indices_out_of_order_are_refused_by_both_trackers() {
    indices_must_grow(sim_backend::stepped_tracker(Config::default()).unwrap().0);
    indices_must_grow(sim_backend::stepped_baseline(Config::default()).unwrap().0);
}

/// A use reported complete cannot have its submission failed afterwards.
fn no_failing_a_complete_use<T: Tracker<Queue = Queue>>(mut tracker: T, queue: Queue) {
    let index = queue.reserve().unwrap();
    let acquired = tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    submit_barrier(&queue, index, acquired.signal);
    queue.run_until_idle();
    assert_eq!(tracker.query(&acquired.ticket).unwrap(), Status::Complete);
    let refused = tracker.fail_submission(&acquired.ticket, 0);
    assert!(
        matches!(
            refused,
            Err(FailSubmissionError::InvalidState {
                state: "complete",
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(tracker.query(&acquired.ticket).unwrap(), Status::Complete);
    // And a fully issued submission cannot be failed either.
    let index = queue.reserve().unwrap();
    let acquired = tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    submit_barrier(&queue, index, acquired.signal);
    let refused = tracker.fail_submission(&acquired.ticket, 1);
    assert!(
        matches!(
            refused,
            Err(FailSubmissionError::InvalidState {
                state: "fully issued",
                ..
            })
        ),
        "{refused:?}"
    );
}

#[test]
fn failing_a_complete_use_is_refused_by_both_trackers() {
    let (tracker, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
    no_failing_a_complete_use(tracker, queue);
    let (tracker, queue) = sim_backend::stepped_baseline(Config::default()).unwrap();
    no_failing_a_complete_use(tracker, queue);
}

#[test]
fn a_foreign_ticket_is_refused_by_both_trackers() {
    let (mut retiring, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
    let (mut baseline, _) = sim_backend::stepped_baseline(Config::default()).unwrap();
    let index = queue.reserve().unwrap();
    let ticket = retiring.acquire(Request::packet(index)).unwrap().ticket;
    assert_eq!(baseline.query(&ticket), Err(ForeignTicket));
    assert_eq!(baseline.known_status(&ticket), Err(ForeignTicket));
    assert_eq!(
        baseline.timestamps(&ticket),
        Err(TimestampsError::Foreign(ForeignTicket))
    );
    assert_eq!(
        baseline.fail_submission(&ticket, 0),
        Err(FailSubmissionError::Foreign(ForeignTicket))
    );
    assert!(matches!(baseline.hold(&ticket), Err(ForeignTicket)));
    assert!(matches!(
        baseline.pin(&ticket),
        Err(PinError::Foreign(ForeignTicket))
    ));
}

#[test]
fn the_replay_example_answers_missing_or_bad_arguments_with_its_usage() {
    let bad: [&[&str]; 6] = [
        &[],
        &["retiring"],
        &["sideways", "crash-file"],
        &["retiring", "7", "0x1"],
        &["retiring", "0", "not-hex"],
        &["baseline", "0", "0x1", "extra"],
    ];
    for args in bad {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let refusal = sigretire_scenarios::replay::parse(&args).unwrap_err();
        assert!(refusal.contains("usage"), "{args:?}: {refusal}");
    }
    let args: Vec<String> = ["baseline", "1", "0x2a"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    let replay = sigretire_scenarios::replay::parse(&args).unwrap();
    assert_eq!(replay.kind, sigretire_scenarios::TrackerKind::Baseline);
    assert_eq!(replay.ops, sigretire_scenarios::search::generate(0x2a));
}
