//! The caller's own work through the queue layer: it gets the events,
//! synchronize, query and waits of the library's own launches; work a
//! backend refuses costs the queue nothing; a command of several
//! operations completes with all of them, or fails with what was issued.

mod support;

use sigretire_queue::tracker::{Status, Work, backend::Dispatch};
use sigretire_queue::{CommandStatus, SubmitError};
use support::*;

#[test]
fn a_callers_dispatch_gets_events_synchronize_and_elapsed_time() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let start = queue.record_event().unwrap();
    let dispatch = Dispatch::new(0)
        .kernarg_address(0x4000)
        .grid([1024, 1, 1])
        .workgroup([256, 1, 1]);
    let command = queue.submit(Work::Dispatch(dispatch)).unwrap();
    let stop = queue.record_event().unwrap();
    assert_eq!(command.status(), CommandStatus::Pending);
    platform.run_while(|| queue.synchronize()).unwrap();
    assert_eq!(command.status(), CommandStatus::Complete);
    assert_eq!(stop.query(), Status::Complete);
    assert!(start.elapsed_to(&stop).is_ok());
    // The packet reached the GPU as a kernel dispatch with the barrier bit
    // and the caller's sizes.
    let truth = queue
        .with_tracker(|t| sigretire_tracker::Tracker::queue(t).truth(command.aql_index()))
        .unwrap();
    assert!(truth.barrier);
    let words = truth.packet;
    // grid_size_x at byte 12, workgroup_size_x at byte 4, kernarg at byte 40.
    assert_eq!(
        (words.0[3], words.0[1] & 0xffff, words.u64_at(40)),
        (1024, 256, 0x4000)
    );
}

#[test]
fn work_a_backend_refuses_leaves_the_queue_working() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let six = [1u64; 6];
    let refused = queue.submit(Work::Wait(&six));
    assert!(matches!(refused, Err(SubmitError::Queue(_))), "{refused:?}");
    let empty: [u64; 0] = [];
    assert!(queue.submit(Work::WaitAny(&empty)).is_err());
    let after = queue.launch_empty().unwrap();
    platform.run_while(|| queue.synchronize()).unwrap();
    assert_eq!(after.status(), CommandStatus::Complete);
    assert_eq!(queue.query().unwrap(), Status::Complete);
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn a_command_of_several_operations_completes_with_the_last() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let rows = [0u64, 1, 2, 3]
        .map(|row| Work::Dispatch(Dispatch::new(0).kernarg_address(0x1000 + 64 * row)));
    let command = queue.submit_all(&rows).unwrap();
    assert_eq!(command.aql_index(), 3);
    let sim = platform.sim();
    let hw = queue.with_tracker(|t| sigretire_tracker::Tracker::queue(t).clone());
    hw.launch().unwrap();
    hw.complete(0).unwrap();
    assert_eq!(command.status(), CommandStatus::Pending, "three rows to go");
    sim.run_until_idle();
    platform.run_while(|| command.wait()).unwrap();
    assert_eq!(command.status(), CommandStatus::Complete);
}

#[test]
fn a_command_whose_operation_is_refused_fails_after_what_was_issued() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let six = [1u64; 6];
    let works = [
        Work::Kernel(0),
        Work::Kernel(0),
        Work::Wait(&six),
        Work::Kernel(0),
    ];
    let refused = queue.submit_all(&works);
    assert!(matches!(refused, Err(SubmitError::Queue(_))), "{refused:?}");
    // The slots all hold packets: the queue runs on.
    let after = queue.launch_empty().unwrap();
    platform.run_while(|| queue.synchronize()).unwrap();
    assert_eq!(after.status(), CommandStatus::Complete);
    assert!(platform.sim().violations().is_empty());
    let stats = queue.with_tracker(|t| sigretire_tracker::Tracker::stats(t));
    assert_eq!(stats.failed, 1, "the refused command's use");
}
