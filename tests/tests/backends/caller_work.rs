//! Work the caller builds (its own kernel dispatch, barrier-OR, AMD
//! barrier-value packets, several operations on one signal), published as
//! the tracker recorded its use: every step checked against the machine's
//! ground truth, the header the machine received included.

use crate::support::{Backend, Rig, device_signals, on_every_backend};
use sigretire_tracker::{
    Purpose, Request, Status, Tracker, Work,
    backend::{Condition, Dispatch, HardwareQueue, Publication, QueueError, WaitValue},
};

on_every_backend! {
    adopted;
    the_published_barrier_bit_is_the_one_the_tracker_recorded,
    a_callers_dispatch_completes_its_use,
    waits_of_every_shape_complete_when_their_dependency_does,
    a_use_of_several_operations_completes_with_its_last,
    a_publication_of_several_operations_at_once_is_refused,
    a_header_the_tracker_did_not_make_is_refused,
}

/// The class of the barrier-claim bug: the request says whether the packet
/// is a fence, and the packet reaches the machine with exactly that bit
/// (the rig checks the header of every packet it publishes). A non-fence is
/// never taken for one: the use after it stays pending until its own
/// packet completes.
fn the_published_barrier_bit_is_the_one_the_tracker_recorded<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let plain = rig.submit(false, Purpose::Completion).unwrap();
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    for (issued, barrier) in [(&plain, false), (&fence, true)] {
        let truth = rig.gpu.truth(&rig.queue, issued.index).unwrap();
        assert_eq!(truth.barrier, barrier);
        assert_eq!(truth.completion, issued.signal);
    }
    rig.run();
    rig.poll();
    assert_eq!(rig.status(&fence), Status::Complete);
    assert_eq!(rig.status(&plain), Status::Complete);
    rig.check();
}

fn a_callers_dispatch_completes_its_use<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let kernel = rig.gpu.empty_kernel();
    let dispatch = Dispatch::new(kernel)
        .kernarg_address(0x1000)
        .grid([256, 4, 1])
        .workgroup([64, 1, 1])
        .segments(0, 1024);
    assert_eq!(dispatch.dimensions, 2);
    let issued = rig
        .submit_work(
            Request::packet(rig.write_index()).barrier(true),
            Work::Dispatch(dispatch),
        )
        .unwrap();
    assert_eq!(rig.status(&issued), Status::Pending);
    rig.run();
    assert_eq!(rig.status(&issued), Status::Complete);
    rig.check();
}

fn waits_of_every_shape_complete_when_their_dependency_does<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let mut producer =
        Rig::<B, _>::try_retiring_with(rig.gpu.clone(), device_signals(), |_, _| {}).unwrap();
    let produced = producer.submit(true, Purpose::GpuWaiter).unwrap();
    let pin = producer.tracker.pin(&produced.ticket).unwrap().unwrap();
    let handle = [pin.packet_handle()];
    let any = rig
        .submit_work(
            Request::packet(rig.write_index()).barrier(true),
            Work::WaitAny(&handle),
        )
        .unwrap();
    let value = rig
        .submit_work(
            Request::packet(rig.write_index()).barrier(true),
            Work::WaitValue(WaitValue {
                signal: handle[0],
                condition: Condition::Less,
                value: 1,
                mask: u64::MAX,
            }),
        )
        .unwrap();
    rig.run();
    assert_eq!(
        rig.status(&any),
        Status::Pending,
        "the producer has not run"
    );
    assert_eq!(rig.status(&value), Status::Pending);
    producer.run();
    rig.run();
    assert_eq!(rig.status(&any), Status::Complete);
    assert_eq!(rig.status(&value), Status::Complete);
    drop(pin);
    rig.check();
    producer.check();
}

/// A copy split in three, one signal: each operation is its own packet,
/// and the use completes once the last one did.
fn a_use_of_several_operations_completes_with_its_last<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let first = rig.write_index();
    let acquired = rig
        .tracker
        .acquire(Request::packet(first + 2).ops(3).barrier(true))
        .unwrap();
    let parts: Vec<_> = acquired.publication.operations().collect();
    assert_eq!(
        parts.iter().map(|p| p.index()).collect::<Vec<_>>(),
        [first, first + 1, first + 2]
    );
    for part in parts {
        assert_eq!(rig.queue.reserve().unwrap(), part.index());
        rig.publish(part);
    }
    rig.launch().unwrap();
    rig.complete(first).unwrap();
    rig.tracker.poll();
    assert_eq!(
        rig.tracker.query(&acquired.ticket).unwrap(),
        Status::Pending,
        "two of three decrements outstanding"
    );
    rig.run();
    assert_eq!(
        rig.tracker.query(&acquired.ticket).unwrap(),
        Status::Complete
    );
}

fn a_publication_of_several_operations_at_once_is_refused<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let first = rig.write_index();
    let acquired = rig
        .tracker
        .acquire(Request::packet(first + 1).ops(2))
        .unwrap();
    for _ in 0..2 {
        rig.queue.reserve().unwrap();
    }
    let refused = rig
        .queue
        .publish(acquired.publication, Work::Kernel(rig.gpu.empty_kernel()));
    assert!(
        matches!(refused, Err(QueueError::Unsupported(_))),
        "{refused:?}"
    );
    for part in acquired.publication.operations() {
        rig.publish(part);
    }
    rig.run();
    assert_eq!(
        rig.tracker.query(&acquired.ticket).unwrap(),
        Status::Complete
    );
}

/// The barrier-claim bug, done on purpose through the escape hatch: the
/// request says "fence", the caller publishes the tracker's signal with a
/// header of its own without the bit (`Publication::untracked`). The queue
/// refuses it and writes nothing: a tracker's signal is published only as
/// the tracker recorded its use, so a fence the tracker trusts is one.
/// Published as the tracker made it, the same use runs.
fn a_header_the_tracker_did_not_make_is_refused<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let claimed = Request::packet(rig.write_index()).barrier(true);
    let queue = rig.queue.clone();
    let issued = rig
        .submit_work_as(claimed, Work::Kernel(0), |acquired| {
            let index = acquired.publication.index();
            for barrier in [false, true] {
                let refused = queue.publish(
                    Publication::untracked(index, barrier, acquired.signal),
                    Work::Kernel(0),
                );
                match refused {
                    Err(QueueError::Unsupported(why)) => {
                        assert!(why.contains("Acquired::publication"), "{why}")
                    }
                    other => panic!("a tracker's signal under a header of the caller's: {other:?}"),
                }
            }
            acquired.publication
        })
        .unwrap();
    rig.run();
    assert_eq!(rig.status(&issued), Status::Complete);
    // The same header, as the tracker made it, passes.
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    rig.run();
    assert_eq!(rig.status(&fence), Status::Complete);
}
