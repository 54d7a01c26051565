//! Unit tests of the baseline's failed submissions, on the stepped
//! simulator.

use super::*;
use sigretire_sim::Queue;
use sigretire_sim::backend::SimMemory;
use sigretire_tracker::{Work, backend::HardwareQueue};

type Baseline = BaselineTracker<SimMemory, Queue>;

fn baseline(config: Config) -> (Baseline, Queue) {
    sim::stepped(config).expect("a valid test configuration")
}

fn loads(tracker: &Baseline) -> u64 {
    tracker.stats().host().loads + tracker.stats().device().loads
}

/// Acquires one use shared by `ops` packets and publishes them, naming its
/// signal in the first `issued` only (the rest complete nothing, as a
/// queue layer publishes a failed submission's unissued part). The caller
/// decides whether to fail it.
fn submit_part(tracker: &mut Baseline, queue: &Queue, ops: u32, issued: u32) -> Ticket {
    let indices: Vec<u64> = (0..ops).map(|_| queue.reserve().unwrap()).collect();
    let last = *indices.last().expect("at least one operation");
    let acquired = tracker.acquire(Request::packet(last).ops(ops)).unwrap();
    for (op, (part, &index)) in acquired.publication.operations().zip(&indices).enumerate() {
        let publication = if op < issued as usize {
            part
        } else {
            Publication::unsignalled(index, false)
        };
        queue.publish(publication, Work::Marker).unwrap();
    }
    acquired.ticket
}

#[test]
fn a_submission_fails_after_its_issued_part_ran() {
    let (mut tracker, queue) = baseline(Config::default());
    let ticket = submit_part(&mut tracker, &queue, 3, 2);
    queue.run_until_idle();
    let before = loads(&tracker);
    assert_eq!(tracker.fail_submission(&ticket, 2), Ok(()));
    assert_eq!(
        loads(&tracker),
        before,
        "the count it was armed with: no load"
    );
    assert_eq!(tracker.query(&ticket).unwrap(), Status::Failed);
    assert_eq!(tracker.stats().failed, 1);
    assert!(matches!(
        tracker.fail_submission(&ticket, 0),
        Err(FailSubmissionError::InvalidState { .. })
    ));
}

#[test]
fn a_submission_fails_after_a_queue_error_failed_its_issued_part() {
    let (mut tracker, queue) = baseline(Config::default());
    let ticket = submit_part(&mut tracker, &queue, 2, 1);
    queue.fail();
    assert_eq!(tracker.fail_submission(&ticket, 1), Ok(()));
    assert_eq!(tracker.query(&ticket).unwrap(), Status::Failed);
    assert_eq!(tracker.stats().failed, 1, "failed once");
}

#[test]
fn a_fully_issued_submission_is_refused_even_once_part_of_it_ran() {
    let (mut tracker, queue) = baseline(Config::default());
    let (first, second) = (queue.reserve().unwrap(), queue.reserve().unwrap());
    let acquired = tracker.acquire(Request::packet(second).ops(2)).unwrap();
    let mut parts = acquired.publication.operations();
    queue
        .publish(parts.next().expect("two parts"), Work::Marker)
        .unwrap();
    queue.run_until_idle();
    assert!(matches!(
        tracker.fail_submission(&acquired.ticket, 2),
        Err(FailSubmissionError::InvalidState {
            state: "fully issued",
            ..
        })
    ));
    let last = parts.next().expect("two parts");
    assert_eq!((first + 1, last.index()), (second, second));
    queue.publish(last, Work::Marker).unwrap();
    queue.run_until_idle();
    assert_eq!(tracker.query(&acquired.ticket).unwrap(), Status::Complete);
}

/// The failed use's slot is reset only once its issued part finished: the
/// signal then holds exactly the decrements that were never issued.
#[test]
fn the_slot_of_a_failed_submission_is_reused_once_its_issued_part_ran() {
    let config = Config {
        initial_size: 2,
        growth_limit: 1,
        ..Config::default()
    };
    let (mut tracker, queue) = baseline(config);
    let failed = submit_part(&mut tracker, &queue, 3, 2);
    tracker.fail_submission(&failed, 2).unwrap();
    let next = submit_part(&mut tracker, &queue, 1, 1);
    let index = queue.reserve().unwrap();
    let err = tracker.acquire(Request::packet(index)).unwrap_err();
    assert!(
        matches!(err, AcquireError::Backpressure { wait_for, .. } if wait_for == failed),
        "{err}"
    );
    queue.run_until_idle();
    let acquired = tracker.acquire(Request::packet(index)).unwrap();
    queue.publish(acquired.publication, Work::Marker).unwrap();
    assert_eq!(tracker.query(&next).unwrap(), Status::Complete);
    assert_eq!(tracker.query(&failed).unwrap(), Status::Failed);
}
