//! Harvested timestamps belong to the use, not to its signal: a completed
//! timed use answers with its own stamps after its signal served later
//! uses, on both trackers. An untimed use never answers with stamps.

use sigretire_sim::Queue;
use sigretire_sim::backend::{self as sim_backend, submit_barrier};
use sigretire_tracker::{Config, Request, Status, Ticket, Timestamps, Tracker};

/// Submits one barrier packet, timed or not, and returns its ticket and
/// AQL index.
fn submit<T: Tracker<Queue = Queue>>(tracker: &mut T, queue: &Queue, timed: bool) -> (Ticket, u64) {
    let index = queue.reserve().unwrap();
    let acquired = tracker
        .acquire(Request::packet(index).barrier(true).timed(timed))
        .unwrap();
    submit_barrier(queue, index, acquired.signal);
    (acquired.ticket, index)
}

fn truth(queue: &Queue, index: u64) -> Timestamps {
    let packet = queue.truth(index).unwrap();
    Timestamps {
        start: packet.start_ts.unwrap(),
        end: packet.end_ts.unwrap(),
    }
}

/// A timed use completes; then the ring wraps four times over with timed
/// and untimed uses; the first use's stamps are still its own.
fn stamps_survive_the_ring_wrapping<T: Tracker<Queue = Queue>>(mut tracker: T, queue: Queue) {
    let ring = Config::default().initial_size;
    let (first, first_index) = submit(&mut tracker, &queue, true);
    let (untimed, _) = submit(&mut tracker, &queue, false);
    queue.run_until_idle();
    assert_eq!(tracker.query(&first).unwrap(), Status::Complete);
    assert_eq!(tracker.query(&untimed).unwrap(), Status::Complete);
    let mut later = Vec::new();
    for round in 0..4 * ring {
        later.push(submit(&mut tracker, &queue, round % 2 == 0));
        queue.run_until_idle();
        tracker.poll();
        tracker.query(&later.last().unwrap().0).unwrap();
    }
    assert_eq!(
        tracker.timestamps(&first).unwrap(),
        Some(truth(&queue, first_index)),
        "the first use's stamps, after its signal served {} later uses",
        later.len()
    );
    assert_eq!(tracker.timestamps(&untimed).unwrap(), None, "never timed");
    for (i, (ticket, index)) in later.iter().enumerate() {
        let expected = (i % 2 == 0).then(|| truth(&queue, *index));
        assert_eq!(tracker.timestamps(ticket).unwrap(), expected, "use {i}");
    }
}

#[test]
fn stamps_survive_the_ring_wrapping_retiring() {
    let (tracker, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
    stamps_survive_the_ring_wrapping(tracker, queue);
}

#[test]
fn stamps_survive_the_ring_wrapping_baseline() {
    let (tracker, queue) = sigretire_baseline::sim::stepped(Config::default()).unwrap();
    stamps_survive_the_ring_wrapping(tracker, queue);
}

/// An untimed use whose held signal the tracker replaced answers no stamps
/// (the signal's stamps belong to whatever it did last).
fn untimed_held_use_has_no_stamps<T: Tracker<Queue = Queue>>(mut tracker: T, queue: Queue) {
    let (untimed, _) = submit(&mut tracker, &queue, false);
    let reference = tracker.hold(&untimed).unwrap().expect("pending");
    queue.run_until_idle();
    assert_eq!(tracker.query(&untimed).unwrap(), Status::Complete);
    for _ in 0..3 * Config::default().initial_size {
        let (ticket, _) = submit(&mut tracker, &queue, true);
        queue.run_until_idle();
        tracker.query(&ticket).unwrap();
        tracker.poll();
    }
    assert_eq!(tracker.timestamps(&untimed).unwrap(), None);
    assert_eq!(reference.timestamps(), None);
}

#[test]
fn an_untimed_held_use_has_no_stamps_retiring() {
    let (tracker, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
    untimed_held_use_has_no_stamps(tracker, queue);
}

#[test]
fn an_untimed_held_use_has_no_stamps_baseline() {
    let (tracker, queue) = sigretire_baseline::sim::stepped(Config::default()).unwrap();
    untimed_held_use_has_no_stamps(tracker, queue);
}

/// A use acquired untimed and timed afterwards ([`Tracker::time`]) answers
/// its own stamps once complete, after its signal served later uses; one
/// asked for only after its signal moved on answers that it cannot be.
fn timed_after_the_fact<T: Tracker<Queue = Queue>>(mut tracker: T, queue: Queue, name: &str) {
    let (untimed, index) = submit(&mut tracker, &queue, false);
    assert!(!untimed.is_timed());
    let timed = tracker
        .time(&untimed)
        .unwrap()
        .expect("pending: still timeable");
    assert!(timed.is_timed());
    assert_eq!(timed.seq(), untimed.seq());
    assert_eq!(
        tracker.time(&timed).unwrap(),
        Some(timed),
        "{name}: idempotent"
    );
    queue.run_until_idle();
    assert_eq!(tracker.query(&timed).unwrap(), Status::Complete);
    // Its signal serves many later (untimed) uses.
    let mut last = None;
    for _ in 0..3 * Config::default().initial_size {
        let (ticket, _) = submit(&mut tracker, &queue, false);
        queue.run_until_idle();
        tracker.query(&ticket).unwrap();
        tracker.poll();
        last = Some(ticket);
    }
    assert_eq!(
        tracker.timestamps(&timed).unwrap(),
        Some(truth(&queue, index)),
        "{name}: harvested before its signal was re-armed"
    );
    assert_eq!(
        tracker.timestamps(&untimed).unwrap(),
        None,
        "{name}: the untimed ticket"
    );
    // Asked for again through the untimed ticket, long after its signal
    // moved on: too late.
    assert_eq!(tracker.time(&untimed).unwrap(), None, "{name}");
    // Without the request, the stamps of an untimed use were never kept.
    let late = last.expect("later uses");
    assert_eq!(tracker.timestamps(&late).unwrap(), None, "{name}");
}

#[test]
fn a_use_timed_after_acquisition_keeps_its_own_stamps_retiring() {
    let (tracker, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
    timed_after_the_fact(tracker, queue, "retiring");
}

#[test]
fn a_use_timed_after_acquisition_keeps_its_own_stamps_baseline() {
    let (tracker, queue) = sigretire_baseline::sim::stepped(Config::default()).unwrap();
    timed_after_the_fact(tracker, queue, "baseline");
}

/// A held timed use keeps answering its own stamps, through its ticket and
/// its reference, on every call, however short the history: its ticket can
/// still be asked. `stamp_history` 0 keeps no other use's; the later timed
/// uses fill and overflow a history of 2.
fn a_held_use_keeps_its_stamps<T: Tracker<Queue = Queue>>(
    mut tracker: T,
    queue: Queue,
    name: &str,
) {
    let (held, index) = submit(&mut tracker, &queue, true);
    let reference = tracker.hold(&held).unwrap().expect("pending");
    queue.run_until_idle();
    // Asked first, before anything else learned it complete.
    let expected = Some(truth(&queue, index));
    for call in 0..2 {
        assert_eq!(
            tracker.timestamps(&held),
            Ok(expected),
            "{name}: call {call}"
        );
    }
    assert_eq!(tracker.query(&held).unwrap(), Status::Complete);
    assert_eq!(reference.timestamps(), expected, "{name}: its reference");
    for _ in 0..3 * Config::default().initial_size {
        let (ticket, _) = submit(&mut tracker, &queue, true);
        queue.run_until_idle();
        tracker.query(&ticket).unwrap();
        tracker.timestamps(&ticket).unwrap();
        tracker.poll();
    }
    for call in 0..2 {
        assert_eq!(
            tracker.timestamps(&held),
            Ok(expected),
            "{name}: call {call}, after its signal's slot moved on"
        );
    }
    assert_eq!(
        reference.timestamps(),
        expected,
        "{name}: its reference, after"
    );
}

#[test]
fn a_held_use_keeps_its_stamps_retiring() {
    for stamp_history in [0, 2] {
        let config = Config {
            stamp_history,
            ..Config::default()
        };
        let (tracker, queue) = sim_backend::stepped_tracker(config).unwrap();
        a_held_use_keeps_its_stamps(tracker, queue, &format!("history {stamp_history}"));
    }
}

#[test]
fn a_held_use_keeps_its_stamps_baseline() {
    for stamp_history in [0, 2] {
        let config = Config {
            stamp_history,
            ..Config::default()
        };
        let (tracker, queue) = sigretire_baseline::sim::stepped(config).unwrap();
        a_held_use_keeps_its_stamps(tracker, queue, &format!("history {stamp_history}"));
    }
}

/// A timed use on a queue that writes no timestamps (profiling off) has no
/// stamps, and says so: `None`, never a pair of zeros passed off as stamps,
/// whether asked before or after its signal's slot moved on, or held.
fn an_unprofiled_queue_stamps_nothing<T: Tracker<Queue = Queue>>(
    mut tracker: T,
    queue: Queue,
    name: &str,
) {
    let (held, _) = submit(&mut tracker, &queue, true);
    let reference = tracker.hold(&held).unwrap().expect("pending");
    let (asked_late, _) = submit(&mut tracker, &queue, true);
    queue.run_until_idle();
    assert!(queue.truth(0).unwrap().start_ts.is_some(), "it ran");
    assert_eq!(tracker.query(&held).unwrap(), Status::Complete);
    assert_eq!(tracker.timestamps(&held), Ok(None), "{name}");
    assert_eq!(reference.timestamps(), None, "{name}");
    for _ in 0..3 * Config::default().initial_size {
        let (ticket, _) = submit(&mut tracker, &queue, true);
        queue.run_until_idle();
        tracker.query(&ticket).unwrap();
        tracker.poll();
    }
    assert_eq!(tracker.timestamps(&held), Ok(None), "{name}: held, later");
    assert_eq!(
        tracker.timestamps(&asked_late),
        Ok(None),
        "{name}: asked late"
    );
}

fn unprofiled() -> (
    sigretire_sim::Sim,
    Queue,
    std::sync::Arc<sim_backend::SimMemory>,
) {
    let (sim, _) = sim_backend::stepped_queue();
    let queue = sim
        .create_queue(sigretire_sim::SimQueueConfig {
            size: 1024,
            profiling: false,
            ..sigretire_sim::SimQueueConfig::default()
        })
        .unwrap();
    let memory = std::sync::Arc::new(sim_backend::SimMemory::new(sim.clone(), queue.agent()));
    (sim, queue, memory)
}

#[test]
fn an_unprofiled_queue_stamps_nothing_retiring() {
    let (_sim, queue, memory) = unprofiled();
    let tracker =
        sigretire_tracker::RetiringTracker::new(memory, queue.clone(), Config::default()).unwrap();
    an_unprofiled_queue_stamps_nothing(tracker, queue, "retiring");
}

#[test]
fn an_unprofiled_queue_stamps_nothing_baseline() {
    let (_sim, queue, memory) = unprofiled();
    let tracker =
        sigretire_baseline::BaselineTracker::new(memory, queue.clone(), Config::default()).unwrap();
    an_unprofiled_queue_stamps_nothing(tracker, queue, "baseline");
}
