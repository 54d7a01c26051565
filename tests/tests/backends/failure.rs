//! Failure: queue errors, failed and partly issued submissions, allocation
//! failure. Each affected use fails exactly once; nothing reports a
//! completion that did not happen.

use crate::support::{Backend, Rig, device_signals, on_every_backend};
use sigretire_tracker::{
    AcquireError, CreateError, FailSubmissionError, TimedOut, WaitError, backend::Publication,
};
use sigretire_tracker::{
    Config, Purpose, Request, Status, Tracker, WaitPolicy, Work,
    backend::{HardwareQueue, QueueView},
};
use std::time::Duration;

on_every_backend! {
    adopted;
    a_queue_error_fails_every_pending_use_once,
    a_partly_issued_submission_waits_for_its_issued_part,
    failing_a_submission_that_was_fully_issued_is_refused,
    a_failed_fence_submission_does_not_blind_fence_probing,
    the_baseline_fails_a_submission_whose_issued_part_already_ran,
    a_full_ring_waiting_on_a_failed_submissions_issued_part_pushes_back,
    an_allocation_failure_is_a_typed_error_and_the_tracker_recovers,
    waits_time_out_with_a_typed_error_and_never_report_false_completion,
    the_baseline_reports_failures_too,
}

fn a_queue_error_fails_every_pending_use_once<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let uses: Vec<_> = (0..10)
        .map(|_| rig.submit(true, Purpose::Completion).unwrap())
        .collect();
    for i in 0..3 {
        rig.launch().unwrap();
        rig.complete(i).unwrap();
        rig.advance_read_index().unwrap();
    }
    rig.gpu.fail(&rig.queue);
    // A waiter on another thread is woken with the failure.
    let waiter = rig.tracker.waiter();
    let last = uses[9].ticket;
    let woken =
        std::thread::spawn(move || waiter.wait(&last, Duration::from_secs(10), WaitPolicy::spin()));
    assert_eq!(woken.join().unwrap(), Ok(Status::Failed));
    // The probe sees a negative value and fails the rest.
    rig.poll();
    for (i, u) in uses.iter().enumerate() {
        let expected = if i < 3 {
            Status::Complete
        } else {
            Status::Failed
        };
        assert_eq!(rig.status(u), expected, "use {i}");
    }
    assert_eq!(rig.tracker.fail_queue(), 0, "already failed: not again");
    let stats = rig.tracker.stats();
    assert_eq!((stats.failed, stats.retired), (7, 3));
    // The stream moves to a new hardware queue and goes on; reclaimed and
    // reused, the failed tickets still answer `Failed`.
    rig.change_queue(rig.gpu.queue());
    for _ in 0..200 {
        rig.submit(true, Purpose::Completion).unwrap();
        rig.run();
        rig.poll();
    }
    assert_eq!(
        rig.tracker.waiter().status(&uses[5].ticket),
        Ok(Status::Failed)
    );
    assert_eq!(
        rig.tracker.waiter().status(&uses[1].ticket),
        Ok(Status::Complete)
    );
    rig.check();
}

fn a_partly_issued_submission_waits_for_its_issued_part<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    // One use shared by three operations; the submission fails after two.
    let index = rig.write_index();
    let acquired = rig
        .tracker
        .acquire(Request::packet(index + 2).ops(3))
        .unwrap();
    for (i, part) in acquired.publication.operations().take(2).enumerate() {
        assert_eq!(
            sigretire_tracker::backend::HardwareQueue::reserve(&rig.queue),
            Ok(index + i as u64)
        );
        rig.publish(part);
    }
    rig.tracker.fail_submission(&acquired.ticket, 2).unwrap();
    assert_eq!(rig.tracker.query(&acquired.ticket).unwrap(), Status::Failed);
    // Its issued operations are still running: the slot is not reset.
    rig.tracker.poll();
    assert_eq!(rig.tracker.stats().rearms, 0);
    rig.launch().unwrap();
    rig.complete(0).unwrap();
    rig.tracker.poll();
    assert_eq!(
        rig.tracker.stats().rearms,
        0,
        "one issued operation still running"
    );
    rig.run_queue();
    rig.tracker.poll();
    assert_eq!(
        (rig.tracker.stats().rearms, rig.tracker.stats().failed),
        (1, 1)
    );
    rig.assert_no_violations();
    assert_eq!(rig.tracker.query(&acquired.ticket).unwrap(), Status::Failed);
    assert!(matches!(
        rig.tracker.fail_submission(&acquired.ticket, 0),
        Err(FailSubmissionError::InvalidState { .. })
    ));
}

fn failing_a_submission_that_was_fully_issued_is_refused<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let u = rig.submit(true, Purpose::Completion).unwrap();
    assert!(matches!(
        rig.tracker.fail_submission(&u.ticket, 1),
        Err(FailSubmissionError::InvalidState { .. })
    ));
    rig.run();
    assert_eq!(rig.status(&u), Status::Complete);
}

/// A fence whose submission failed proves nothing, but the fence before it
/// still does: once the read index passed both, one probe proves the earlier
/// one (docs/design.md section 3, proof 2: "the read index nominates the newest
/// fence it passed"). Was: the failed fence's slot still named itself as its
/// fence and the tracker's newest fence became none, so probing proved
/// nothing until a newer fence was submitted and passed.
fn a_failed_fence_submission_does_not_blind_fence_probing<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    // The next fence's submission fails before issuing anything: its slot
    // gets an empty packet, as the queue layer does.
    let index = rig.write_index();
    let failed = rig
        .tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    assert_eq!(rig.queue.reserve().unwrap(), index);
    rig.queue
        .publish(Publication::unsignalled(index, true), Work::Marker)
        .unwrap();
    rig.tracker.fail_submission(&failed.ticket, 0).unwrap();
    rig.run_queue();
    assert!(rig.queue.read_index() > index, "the read index passed both");
    rig.tracker.poll();
    rig.check();
    assert_eq!(
        rig.tracker.known_status(&fence.ticket).unwrap(),
        Some(Status::Complete),
        "the read index passed a fence that completed: one probe proves it"
    );
}

/// The baseline fails a submission whose issued operations already ran,
/// knowing how many operations the use was armed with. Was: it read that
/// count from the signal's current value, which the issued operations had
/// lowered (or a queue error had made negative), refused the call as "fully
/// issued", and the use, its unissued decrements never coming, stayed
/// pending for ever.
fn the_baseline_fails_a_submission_whose_issued_part_already_ran<B: Backend>() {
    let mut rig = Rig::<B, _>::baseline(device_signals());
    let first = rig.write_index();
    let acquired = rig
        .tracker
        .acquire(Request::packet(first + 2).ops(3))
        .unwrap();
    for i in 0..3 {
        assert_eq!(rig.queue.reserve().unwrap(), first + i);
    }
    for part in acquired.publication.operations().take(2) {
        rig.publish(part);
    }
    rig.queue
        .publish(Publication::unsignalled(first + 2, false), Work::Marker)
        .unwrap();
    // The GPU runs the issued part before the runtime notices the failure.
    rig.run_queue();
    assert_eq!(
        rig.tracker.fail_submission(&acquired.ticket, 2),
        Ok(()),
        "two of three operations were issued"
    );
    assert_eq!(rig.tracker.query(&acquired.ticket).unwrap(), Status::Failed);
    rig.check();
}

/// At the growth limit, with every use in flight known done but the oldest
/// a failed submission whose issued part still runs (here on a copy
/// engine), `acquire` pushes back naming that use: the GPU finishing the
/// issued part frees its slot (`Tracker::acquire`: "when the ring is at its
/// limit it returns AcquireError::Backpressure"). Was: `OutOfSignals` ("drop held
/// references (events, pins) or free memory"), though nothing was held,
/// because back-pressure looked only for uses not known done.
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
    // The stand-in for the copy engine decrements the copy use's signal: no
    // AQL queue of the tracker's records it.
    // Its first operation only: the second is never issued.
    let packet = copy
        .publication
        .copy_engine_packets(index)
        .and_then(|mut packets| packets.next())
        .expect("a copy-engine use's first packet");
    copy_engine
        .publish(packet, Work::Kernel(rig.gpu.empty_kernel()))
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
    let AcquireError::Backpressure { wait_for, .. } = err else {
        panic!("{err}");
    };
    assert_eq!(
        wait_for, copy.ticket,
        "the failed use's issued part frees room"
    );
    // Once the issued part ran, the slot is free.
    rig.gpu.run(&copy_engine);
    rig.submit(true, Purpose::Completion).unwrap();
    rig.run();
}

fn an_allocation_failure_is_a_typed_error_and_the_tracker_recovers<B: Backend>() {
    // Creating a tracker allocates its ring: a failure there is an error.
    let gpu = B::new(Default::default());
    let err = Rig::try_retiring_with(gpu, device_signals(), |gpu, memory| {
        gpu.fail_allocations(memory)
    })
    .err()
    .expect("allocation failed");
    assert!(matches!(err, CreateError::OutOfSignals(_)), "{err}");

    // A full ring that cannot grow for want of memory does not fail the
    // submission: it names the use to wait for, and recovers.
    let config = Config {
        initial_size: 2,
        growth_limit: 4,
        refill_batch: 2,
        ..device_signals()
    };
    let mut rig = Rig::<B, _>::retiring(config);
    rig.submit(true, Purpose::Completion).unwrap();
    rig.submit(true, Purpose::Completion).unwrap();
    rig.gpu.fail_allocations(&rig.memory);
    let err = rig
        .tracker
        .acquire(Request::packet(rig.write_index()).barrier(true))
        .unwrap_err();
    assert!(
        matches!(err, AcquireError::Backpressure { in_flight: 2, .. }),
        "{err}"
    );
    assert_eq!(rig.tracker.stats().ring_growths, 0);
    rig.check();
    rig.run();
    rig.submit(true, Purpose::Completion).unwrap();
    rig.run();
    rig.check();
    assert_eq!(
        rig.tracker.stats().signals_created,
        2,
        "completed work freed signals: none created"
    );
}

fn waits_time_out_with_a_typed_error_and_never_report_false_completion<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let u = rig.submit(true, Purpose::CpuSync).unwrap();
    let started = std::time::Instant::now();
    let result =
        rig.tracker
            .waiter()
            .wait(&u.ticket, Duration::from_millis(20), WaitPolicy::blocking());
    assert_eq!(
        result,
        Err(WaitError::TimedOut(TimedOut(Duration::from_millis(20))))
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(rig.status(&u), Status::Pending);
    rig.run();
    assert_eq!(
        rig.tracker
            .waiter()
            .wait(&u.ticket, Duration::from_secs(1), WaitPolicy::spin()),
        Ok(Status::Complete)
    );
}

fn the_baseline_reports_failures_too<B: Backend>() {
    let mut rig = Rig::<B, _>::baseline(device_signals());
    let uses: Vec<_> = (0..4)
        .map(|_| rig.submit(true, Purpose::Completion).unwrap())
        .collect();
    rig.gpu.fail(&rig.queue);
    for u in &uses {
        assert_eq!(rig.status(u), Status::Failed);
    }
    assert_eq!(rig.tracker.stats().failed, 4);
}
