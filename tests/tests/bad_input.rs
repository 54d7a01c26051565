//! Bad input gets a typed error, the same one from both trackers, and
//! never a panic, an abort or a silently saturated value.

use sigretire_baseline::BaselineTracker;
use sigretire_sim::Queue;
use sigretire_sim::backend::{self as sim_backend, SimMemory, submit_barrier};
use sigretire_tracker::{
    AcquireError, CreateError, FailSubmissionError, ForeignTicket, InvalidConfig, PinError,
    PublishError, Ticket, TimestampsError, WaitError, WaitPolicy, backend::HardwareQueue,
};
use sigretire_tracker::{Config, Request, RetiringTracker, Status, Tracker};
use std::sync::Arc;
use std::time::Duration;

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
            sigretire_baseline::sim::stepped(config).map(drop),
            "sigretire_baseline::sim::stepped",
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
    indices_must_grow(
        sigretire_baseline::sim::stepped(Config::default())
            .unwrap()
            .0,
    );
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
    let (tracker, queue) = sigretire_baseline::sim::stepped(Config::default()).unwrap();
    no_failing_a_complete_use(tracker, queue);
}

#[test]
fn a_foreign_ticket_is_refused_by_both_trackers() {
    let (mut retiring, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
    let (mut baseline, _) = sigretire_baseline::sim::stepped(Config::default()).unwrap();
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

/// `good` with each of its fields changed, made up, or another tracker's
/// (`foreign`): the tickets a tracker that issued `good` must refuse.
fn altered(good: Ticket, foreign: Ticket) -> Vec<(&'static str, Ticket)> {
    vec![
        ("zeroed", Ticket::default()),
        ("another tracker's", foreign),
        (
            "seq + 1 (not issued)",
            Ticket {
                seq: good.seq + 1,
                ..good
            },
        ),
        ("seq 0", Ticket { seq: 0, ..good }),
        (
            "seq u64::MAX",
            Ticket {
                seq: u64::MAX,
                ..good
            },
        ),
        (
            "slot ^ 1",
            Ticket {
                slot: good.slot ^ 1,
                ..good
            },
        ),
        (
            "slot u32::MAX",
            Ticket {
                slot: u32::MAX,
                ..good
            },
        ),
        (
            "generation + 1",
            Ticket {
                generation: good.generation + 1,
                ..good
            },
        ),
        (
            "timed flipped",
            Ticket {
                flags: good.flags ^ Ticket::TIMED,
                ..good
            },
        ),
        (
            "an unknown flag",
            Ticket {
                flags: good.flags | 1,
                ..good
            },
        ),
        (
            "tracker + 1",
            Ticket {
                tracker: good.tracker + 1,
                ..good
            },
        ),
    ]
}

/// Every method that takes a ticket refuses `bad`, and changes nothing.
fn refuses_everywhere<T: Tracker<Queue = Queue>>(
    tracker: &mut T,
    bad: &Ticket,
    pin: sigretire_tracker::Pin<T::Memory>,
    why: &str,
) -> sigretire_tracker::Pin<T::Memory> {
    let waiter = tracker.waiter();
    assert_eq!(tracker.query(bad), Err(ForeignTicket), "{why}");
    assert_eq!(tracker.known_status(bad), Err(ForeignTicket), "{why}");
    assert!(matches!(tracker.hold(bad), Err(ForeignTicket)), "{why}");
    assert!(
        matches!(tracker.pin(bad), Err(PinError::Foreign(ForeignTicket))),
        "{why}"
    );
    assert_eq!(tracker.time(bad), Err(ForeignTicket), "{why}");
    assert_eq!(
        tracker.timestamps(bad),
        Err(TimestampsError::Foreign(ForeignTicket)),
        "{why}"
    );
    assert_eq!(
        tracker.fail_submission(bad, 0),
        Err(FailSubmissionError::Foreign(ForeignTicket)),
        "{why}"
    );
    assert_eq!(
        tracker.publication(bad),
        Err(PublishError::Ticket(ForeignTicket)),
        "{why}"
    );
    assert_eq!(tracker.fail_queue_of(bad), 0, "{why}");
    assert_eq!(waiter.known_status(bad), Err(ForeignTicket), "{why}");
    assert_eq!(waiter.status(bad), Err(ForeignTicket), "{why}");
    assert_eq!(waiter.placement(bad), Err(ForeignTicket), "{why}");
    assert_eq!(
        waiter.wait(bad, Duration::ZERO, WaitPolicy::spin()),
        Err(WaitError::Foreign(ForeignTicket)),
        "{why}"
    );
    let refused = tracker.attach(bad, pin).unwrap_err();
    assert_eq!(refused.error, ForeignTicket, "{why}");
    refused.pin
}

fn forged_and_altered_tickets_are_refused<T: Tracker<Queue = Queue>>(
    (mut tracker, queue): (T, Queue),
) {
    let (mut other, other_queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
    // Two uses in flight, on two signals: a ticket of the first altered to
    // name the second's signal must not read as retired.
    let first = tracker
        .acquire(Request::packet(queue.reserve().unwrap()).barrier(true))
        .unwrap();
    let second = tracker
        .acquire(Request::packet(queue.reserve().unwrap()).barrier(true))
        .unwrap();
    let foreign = other
        .acquire(Request::packet(other_queue.reserve().unwrap()))
        .unwrap()
        .ticket;
    assert_ne!(first.ticket.slot, second.ticket.slot);
    let mut tickets = altered(first.ticket, foreign);
    tickets.push((
        "the second use's slot",
        Ticket {
            slot: second.ticket.slot,
            ..first.ticket
        },
    ));
    // A pin to attach: refused attaches hand it back.
    let produced = tracker
        .acquire(Request::packet(queue.reserve().unwrap()).barrier(true))
        .unwrap();
    let mut pin = tracker.pin(&produced.ticket).unwrap().expect("pending");
    for (why, bad) in &tickets {
        pin = refuses_everywhere(&mut tracker, bad, pin, why);
    }
    drop(pin);
    // The genuine tickets still answer.
    assert_eq!(tracker.known_status(&first.ticket), Ok(None));
    for acquired in [&first, &second, &produced] {
        submit_barrier(&queue, acquired.publication.index(), acquired.signal);
    }
    queue.run_until_idle();
    assert_eq!(tracker.query(&first.ticket), Ok(Status::Complete));
    assert_eq!(tracker.query(&second.ticket), Ok(Status::Complete));
}

#[test]
fn forged_and_altered_tickets_are_refused_by_both_trackers() {
    forged_and_altered_tickets_are_refused(
        sim_backend::stepped_tracker(Config::default()).unwrap(),
    );
    forged_and_altered_tickets_are_refused(
        sigretire_baseline::sim::stepped(Config::default()).unwrap(),
    );
}

/// Tickets of uses whose signals served later uses since answer for their
/// own use, never for the signal's current one; a timed mark is a second
/// genuine ticket of the same use.
fn stale_tickets_answer_for_their_own_use<T: Tracker<Queue = Queue>>(
    (mut tracker, queue): (T, Queue),
) {
    let submit = |tracker: &mut T, run: bool| {
        let index = queue.reserve().unwrap();
        let acquired = tracker
            .acquire(Request::packet(index).barrier(true))
            .unwrap();
        if run {
            submit_barrier(&queue, index, acquired.signal);
            queue.run_until_idle();
            tracker.poll();
        }
        acquired.ticket
    };
    let complete = submit(&mut tracker, true);
    // A use whose submission failed (its slot filled with a packet that
    // completes nothing): its signal serves complete uses next.
    let index = queue.reserve().unwrap();
    let failed = tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap()
        .ticket;
    tracker.fail_submission(&failed, 0).unwrap();
    queue
        .publish(
            sigretire_tracker::backend::Publication::unsignalled(index, false),
            sigretire_tracker::Work::Marker,
        )
        .unwrap();
    let mut latest = Vec::new();
    for _ in 0..3 * 4 {
        latest.push(submit(&mut tracker, true));
    }
    let pending = submit(&mut tracker, false);
    let reused = |old: &Ticket| latest.iter().chain([&pending]).any(|t| t.slot == old.slot);
    assert!(
        reused(&complete) && reused(&failed),
        "their signals served later uses"
    );
    assert_eq!(tracker.query(&complete), Ok(Status::Complete));
    assert_eq!(tracker.query(&failed), Ok(Status::Failed));
    assert_eq!(
        tracker.waiter().known_status(&failed),
        Ok(Some(Status::Failed))
    );
    assert_eq!(tracker.known_status(&pending), Ok(None));
    // Marked timed after acquire: both the ticket it had and the marked one
    // name it.
    let timed = tracker.time(&pending).unwrap().expect("in flight");
    assert!(timed.is_timed() && !pending.is_timed());
    assert_eq!(tracker.known_status(&timed), Ok(None));
    assert_eq!(tracker.known_status(&pending), Ok(None));
}

#[test]
fn stale_tickets_answer_for_their_own_use_on_both_trackers() {
    let small = Config {
        initial_size: 4,
        growth_limit: 1,
        ..Config::default()
    };
    stale_tickets_answer_for_their_own_use(sim_backend::stepped_tracker(small).unwrap());
    stale_tickets_answer_for_their_own_use(sigretire_baseline::sim::stepped(small).unwrap());
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
