//! Unit tests of the baseline's failed submissions, on the test GPU.

use super::*;
use crate::test_gpu::{TestMemory, TestQueue, on_a_test_gpu, submit_part};

type Baseline = BaselineTracker<TestMemory, TestQueue>;

fn baseline(config: Config) -> (Baseline, TestQueue) {
    on_a_test_gpu(config, BaselineTracker::new)
}

fn loads(tracker: &Baseline) -> u64 {
    tracker.stats().host().loads + tracker.stats().device().loads
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
        Err(crate::FailSubmissionError::InvalidState { .. })
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
    let first = queue.write_index();
    let acquired = tracker.acquire(Request::packet(first + 1).ops(2)).unwrap();
    queue.publish(acquired.signal);
    queue.run_until_idle();
    assert!(matches!(
        tracker.fail_submission(&acquired.ticket, 2),
        Err(crate::FailSubmissionError::InvalidState {
            state: "fully issued",
            ..
        })
    ));
    queue.publish(acquired.signal);
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
    let index = queue.write_index();
    let err = tracker.acquire(Request::packet(index)).unwrap_err();
    assert!(
        matches!(err, crate::AcquireError::Backpressure { wait_for, .. } if wait_for == failed),
        "{err}"
    );
    queue.run_until_idle();
    assert!(tracker.acquire(Request::packet(index)).is_ok());
    assert_eq!(tracker.query(&next).unwrap(), Status::Complete);
    assert_eq!(tracker.query(&failed).unwrap(), Status::Failed);
}
