//! TRACKER BUGS, found by the failed, partly issued and copy-engine
//! submissions the property driver now makes (`Op::FailSubmission`,
//! `Op::SubmitOps`, `Op::SubmitCopy`). Each test FAILS on the tracker as it
//! is and is ignored so that `cargo test` stays usable until the tracker is
//! fixed; run them with `cargo test -p scenarios --test backends --
//! --ignored tracker_bugs`. Remove the `#[ignore]` (and the matching guard
//! in `scenarios::driver`, `Driver::avoids_known_tracker_bug`) with the fix.

use crate::support::{Backend, Rig, device_signals};
use tracker::{Config, Error, HardwareQueue, Purpose, Request, Status, Tracker, Work};

/// One test per backend, ignored with the reason given.
macro_rules! tracker_bug {
    ($scenario:ident, $reason:literal) => {
        mod $scenario {
            #[test]
            #[ignore = $reason]
            fn sim() {
                super::$scenario::<crate::support::Simulator>();
            }

            #[test]
            #[ignore = $reason]
            fn rocr() {
                super::$scenario::<crate::support::Standin>();
            }
        }
    };
}

tracker_bug!(
    a_full_ring_waiting_on_a_failed_submissions_issued_part_pushes_back,
    "TRACKER BUG (retiring): OutOfSignals instead of back-pressure"
);

/// The retiring tracker. At the growth limit, with every use in flight
/// known done but the oldest a failed submission whose issued part still
/// runs (here on a copy engine), `acquire` fails with `OutOfSignals` ("drop
/// held references (events, pins) or free memory") though nothing is held:
/// the GPU finishing the issued part frees the slot, so it must push back
/// (`Tracker::acquire`: "when the ring is at its limit it returns
/// Error::Backpressure").
fn a_full_ring_waiting_on_a_failed_submissions_issued_part_pushes_back<B: Backend>() {
    let config = Config {
        initial_size: 2,
        growth_limit: 1,
        refill_batch: 1,
        ..device_signals()
    };
    let mut rig = Rig::<B, _>::retiring(config);
    let copy_engine = rig.gpu.queue();
    let copy = rig.tracker.acquire(Request::copy_engine().ops(2)).unwrap();
    let index = copy_engine.reserve().unwrap();
    copy_engine
        .publish(
            index,
            Work::Kernel(rig.gpu.empty_kernel()),
            false,
            copy.signal,
        )
        .unwrap();
    rig.tracker.fail_submission(&copy.ticket, 1).unwrap();
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    rig.run_queue();
    assert_eq!(rig.status(&fence), Status::Complete);
    rig.check();
    let err = rig
        .tracker
        .acquire(Request::packet(rig.write_index()).barrier(true))
        .unwrap_err();
    assert!(matches!(err, Error::Backpressure { .. }), "{err}");
    // Once the issued part ran, the slot is free.
    rig.gpu.run(&copy_engine);
    rig.submit(true, Purpose::Completion).unwrap();
    rig.run();
}
