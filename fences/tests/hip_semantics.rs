//! The surface a HIP runtime author expects: per-call deadlines
//! (`synchronize_timeout`, `wait_timeout`), a device-wide synchronize and
//! the list of a device's queues, cheap event clones, per-event flags
//! (`hipEventDisableTiming`, `hipEventBlockingSync`), events created before
//! they are recorded and recorded again (`hipEventCreate`, `hipEventRecord`),
//! and a launch that refuses a null kernel.

mod support;

use sigretire_queue::sim::SimTracker;
use sigretire_queue::tracker::{Status, Tracker};
use sigretire_queue::{
    CommandStatus, DeviceConfig, ElapsedError, Event, EventFlags, HostQueue, QueueConfig,
    RecordError, SyncError, TimestampsError, WaitError, WaitPolicy,
};
use sigretire_sim::HostFlag;
use std::time::{Duration, Instant};
use support::*;

const DEADLINE: Duration = Duration::from_millis(5);

/// `f` returned the deadline's timeout no sooner than the deadline, and
/// promptly after it.
#[track_caller]
fn times_out_on_time<E: PartialEq + std::fmt::Debug>(
    f: impl FnOnce() -> Result<(), E>,
    timed_out: E,
) {
    let start = Instant::now();
    let result = f();
    let took = start.elapsed();
    assert_eq!(result, Err(timed_out));
    assert!(
        (DEADLINE..Duration::from_millis(200)).contains(&took),
        "took {took:?} for a deadline of {DEADLINE:?}"
    );
}

#[test]
fn a_per_call_deadline_times_out_then_the_plain_synchronize_completes() {
    // The queue's own timeout is long (10 s): only the call's deadline can
    // end the wait in 5 ms.
    let (platform, device) = threaded();
    let queue = device.default_queue();
    let flag = HostFlag::new();
    let command = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let event = queue.record_event().unwrap();

    times_out_on_time(
        || queue.synchronize_timeout(DEADLINE),
        SyncError::TimedOut(DEADLINE),
    );
    times_out_on_time(
        || event.synchronize_timeout(DEADLINE),
        WaitError::TimedOut(DEADLINE),
    );
    times_out_on_time(
        || command.wait_timeout(DEADLINE),
        WaitError::TimedOut(DEADLINE),
    );
    // A query never waits, and the timeouts reported nothing complete.
    assert_eq!(queue.query(), Ok(Status::Pending));
    assert_eq!(event.query(), Status::Pending);
    assert!(!command.is_released());

    flag.set();
    assert_eq!(queue.synchronize(), Ok(()));
    assert_eq!(event.synchronize(), Ok(()));
    assert_eq!(command.wait(), Ok(()));
    assert_eq!(command.status(), CommandStatus::Complete);
    // The timed-out synchronize handed its batch to the completion thread,
    // which releases it (the plain synchronize joined its marker).
    wait_until("the batch is released", || command.is_released());
}

#[test]
fn a_device_synchronize_waits_for_every_live_queue() {
    let (platform, device) = threaded();
    let stream = platform.create_queue(&device, bounded()).unwrap();
    let (a, b) = (HostFlag::new(), HostFlag::new());
    let on_default = device
        .default_queue()
        .launch(spin_kernel(&platform, &a))
        .unwrap();
    let on_stream = stream.launch(spin_kernel(&platform, &b)).unwrap();

    // With a deadline: the held kernels keep it from completing.
    times_out_on_time(
        || device.synchronize_timeout(DEADLINE),
        SyncError::TimedOut(DEADLINE),
    );

    std::thread::scope(|scope| {
        let synchronize = scope.spawn(|| device.synchronize());
        std::thread::sleep(Duration::from_millis(20));
        assert!(!synchronize.is_finished(), "returned with both held");
        a.set();
        wait_until("the default queue's kernel completes", || {
            on_default.status().is_done()
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(!synchronize.is_finished(), "returned with the stream held");
        b.set();
        assert_eq!(synchronize.join().unwrap(), Ok(()));
    });
    assert!(on_default.is_released() && on_stream.is_released());
    assert_eq!(device.synchronize_timeout(DEADLINE), Ok(()));
}

fn ids(queues: &[HostQueue<SimTracker>]) -> Vec<u64> {
    queues.iter().map(HostQueue::id).collect()
}

#[test]
fn the_device_lists_its_live_queues_and_forgets_a_dropped_one() {
    let (platform, device) = stepped();
    let first = platform.create_queue(&device, bounded()).unwrap();
    let second = platform.create_queue(&device, bounded()).unwrap();
    let default = device.default_queue().id();
    assert_eq!(
        ids(&device.queues()),
        [default, first.id(), second.id()],
        "the default queue, then the created ones"
    );

    let clone = first.clone();
    drop(first);
    assert_eq!(
        ids(&device.queues()),
        [default, clone.id(), second.id()],
        "a clone keeps it"
    );
    drop(clone);
    assert_eq!(ids(&device.queues()), [default, second.id()]);

    // A listed handle is a handle: the queue lives while it is held.
    let listed = device.queues().pop().unwrap();
    drop(second);
    assert_eq!(ids(&device.queues()), [default, listed.id()]);
    drop(listed);
    assert_eq!(ids(&device.queues()), [default]);
    assert_eq!(device.stats().queue_teardowns, 2, "no leak");
}

#[test]
fn an_event_clone_answers_as_the_event_and_outlives_it() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let start = queue.record_event().unwrap();
    queue.launch_empty().unwrap();
    let stop = queue.record_event().unwrap();
    let copy = stop.clone();
    assert_eq!((copy.seq(), copy.ticket()), (stop.seq(), stop.ticket()));
    assert_eq!(copy.query(), stop.query());
    assert_eq!(copy.timestamps(), Err(TimestampsError::NotReady));

    platform.sim().run_until_idle();
    assert_eq!(
        (copy.query(), stop.query()),
        (Status::Complete, Status::Complete)
    );
    assert_eq!(copy.timestamps(), stop.timestamps());
    let elapsed = start.elapsed_to(&stop).unwrap();

    drop(stop);
    assert_eq!(copy.synchronize(), Ok(()));
    assert_eq!(start.elapsed_to(&copy), Ok(elapsed));
    assert!(elapsed > Duration::ZERO);
}

#[test]
fn an_untimed_event_on_a_profiled_queue_has_no_stamps_and_harvests_none() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    assert!(queue.config().profiling);
    let harvests = || queue.with_tracker(|tracker| tracker.stats().harvests);

    let before = harvests();
    let untimed = queue.record_event_with(EventFlags::DISABLE_TIMING).unwrap();
    assert!(!untimed.is_timed());
    platform.run_while(|| untimed.synchronize()).unwrap();
    assert_eq!(untimed.timestamps(), Err(TimestampsError::NotTimed));
    assert_eq!(harvests(), before, "no stamp harvested");

    // The control: a timed event on the same queue is harvested.
    let timed = queue.record_event().unwrap();
    platform.run_while(|| timed.synchronize()).unwrap();
    assert!(timed.timestamps().is_ok());
    assert!(harvests() > before);
    assert_eq!(untimed.elapsed_to(&timed), Err(ElapsedError::NotTimed));
    assert_eq!(timed.elapsed_to(&untimed), Err(ElapsedError::NotTimed));
}

#[test]
fn timing_on_a_queue_that_does_not_profile_records_an_untimed_event() {
    let config = QueueConfig {
        profiling: false,
        ..bounded()
    };
    let (platform, device) = stepped_with(DeviceConfig::default(), config);
    let queue = device.default_queue();
    let event = queue.record_event_with(EventFlags::default()).unwrap();
    assert!(!event.is_timed(), "the queue writes no stamps: not timed");
    platform.sim().run_until_idle();
    assert_eq!(event.timestamps(), Err(TimestampsError::NotTimed));
    assert_eq!(event.elapsed_to(&event), Err(ElapsedError::NotTimed));
}

#[test]
fn a_blocking_sync_event_sleeps_on_a_spinning_queue() {
    let config = QueueConfig {
        wait_policy: WaitPolicy::spin(),
        ..bounded()
    };
    let (platform, device) = stepped_with(DeviceConfig::default(), config);
    let queue = device.default_queue();
    let flag = HostFlag::new();
    queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let flags = EventFlags {
        blocking_sync: true,
        ..EventFlags::default()
    };
    let event = queue.record_event_with(flags).unwrap();
    assert!(event.is_blocking_sync());
    let sleeps = queue.stats().sleeping_waits;
    let waiting = event.clone();
    let waiter = spawn(move || waiting.synchronize());
    wait_until("the event's synchronize sleeps on a wake signal", || {
        platform.sim().run_until_idle();
        queue.stats().sleeping_waits > sleeps
    });
    flag.set();
    assert_eq!(drive(&platform, waiter), Ok(()));

    // The control: a plain event on the same queue spins.
    let sleeps = queue.stats().sleeping_waits;
    queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let plain = queue.record_event().unwrap();
    assert!(!plain.is_blocking_sync());
    platform.run_while(|| plain.synchronize()).unwrap();
    assert_eq!(queue.stats().sleeping_waits, sleeps);
}

// Events created before they are recorded, and recorded again
// (`hipEventCreate`, `hipEventRecord` on an event recorded before).

#[test]
fn a_never_recorded_event_is_complete_at_once_and_publishes_nothing() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let flag = HostFlag::new();
    // Gated work on the queue: a recorded event would be pending.
    queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let event = Event::new(&device, EventFlags::default());
    assert!(!event.is_recorded());
    assert_eq!(event.query(), Status::Complete);
    let locks = queue.stats().lock_acquisitions;
    let waiting = event.clone();
    returns_promptly(
        "a never-recorded event's synchronize",
        move || waiting.synchronize(),
        || flag.set(),
    )
    .unwrap();
    assert_eq!(event.synchronize_timeout(Duration::ZERO), Ok(()));
    assert_eq!(queue.stats().lock_acquisitions, locks, "no lock taken");
    assert_eq!(queue.stats().markers, 0, "nothing published");
    assert_eq!(
        (
            event.queue_id(),
            event.seq(),
            event.aql_index(),
            event.ticket()
        ),
        (None, None, None, None)
    );
    assert!(!event.is_timed());
    assert_eq!(event.timestamps(), Err(TimestampsError::NotRecorded));
    flag.set();
    platform.run_while(|| queue.synchronize()).unwrap();
}

#[test]
fn a_wait_on_a_never_recorded_event_is_a_no_op() {
    let (platform, device) = stepped();
    let producer = platform.create_queue(&device, bounded()).unwrap();
    let consumer = device.default_queue();
    let event = Event::new(&device, EventFlags::default());
    let wait = consumer.wait_event(&event).unwrap();
    assert_eq!(
        (wait.packets(), wait.dependencies(), wait.elided()),
        (0, 0, 1)
    );
    // Beside a recorded one, only that one is waited for.
    let flag = HostFlag::new();
    producer.launch(spin_kernel(&platform, &flag)).unwrap();
    let recorded = producer.record_event().unwrap();
    let wait = consumer.wait_events(&[&event, &recorded]).unwrap();
    assert_eq!(
        (wait.packets(), wait.dependencies(), wait.elided()),
        (1, 1, 1)
    );
    assert_eq!(
        producer.stats().markers,
        0,
        "no marker for the unrecorded event"
    );
    flag.set();
    platform.run_while(|| consumer.synchronize()).unwrap();
}

#[test]
fn recording_again_moves_the_event_to_the_newer_work() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let mut event = Event::new(&device, EventFlags::default());
    queue.record(&mut event).unwrap();
    assert!(event.is_recorded());
    platform.run_while(|| event.synchronize()).unwrap();
    assert_eq!(event.query(), Status::Complete);
    let first = event.seq().unwrap();

    let flag = HostFlag::new();
    let gated = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    queue.record(&mut event).unwrap();
    assert!(event.seq().unwrap() >= gated.seq() && event.seq().unwrap() > first);
    platform.sim().run_until_idle();
    assert_eq!(event.query(), Status::Pending, "behind the gated kernel");
    assert_eq!(
        event.synchronize_timeout(DEADLINE),
        Err(WaitError::TimedOut(DEADLINE))
    );
    flag.set();
    platform.run_while(|| event.synchronize()).unwrap();
    assert_eq!(event.query(), Status::Complete);
    assert!(gated.status().is_done());
}

#[test]
fn recording_again_on_another_queue_of_the_device_and_clones_as_snapshots() {
    let (platform, device) = stepped();
    let stream = platform.create_queue(&device, bounded()).unwrap();
    let mut event = device.default_queue().record_event().unwrap();
    platform.run_while(|| event.synchronize()).unwrap();
    let before = event.clone();

    let flag = HostFlag::new();
    stream.launch(spin_kernel(&platform, &flag)).unwrap();
    stream.record(&mut event).unwrap();
    assert_eq!(event.queue_id(), Some(stream.id()));
    assert_eq!(before.queue_id(), Some(device.default_queue().id()));
    platform.sim().run_until_idle();
    assert_eq!(
        (before.query(), event.query()),
        (Status::Complete, Status::Pending),
        "the clone keeps the recording it was taken of"
    );
    flag.set();
    platform.run_while(|| event.synchronize()).unwrap();
}

#[test]
fn elapsed_time_across_a_re_record_uses_the_newest_stamps() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let start = queue.record_event().unwrap();
    let mut stop = Event::new(&device, EventFlags::default());
    assert_eq!(start.elapsed_to(&stop), Err(ElapsedError::NotRecorded));
    assert_eq!(stop.elapsed_to(&start), Err(ElapsedError::NotRecorded));
    assert_eq!(stop.elapsed_to(&stop), Err(ElapsedError::NotRecorded));

    queue.record(&mut stop).unwrap();
    platform.run_while(|| stop.synchronize()).unwrap();
    let first = start.elapsed_to(&stop).unwrap();
    let old = stop.clone();

    let long = platform
        .sim()
        .register_kernel(sigretire_sim::Kernel::Duration(Duration::from_micros(50)));
    queue.launch(long).unwrap();
    queue.record(&mut stop).unwrap();
    assert_eq!(start.elapsed_to(&stop), Err(ElapsedError::NotReady));
    platform.run_while(|| stop.synchronize()).unwrap();
    let newest = stop.timestamps().unwrap();
    assert!(newest.end > old.timestamps().unwrap().end);
    let second = start.elapsed_to(&stop).unwrap();
    assert!(second > first, "{second:?} is not past {first:?}");
    assert_eq!(old.elapsed_to(&stop).unwrap() + first, second);
    assert_eq!(
        start.elapsed_to(&old),
        Ok(first),
        "the clone: the old stamps"
    );
}

#[test]
fn recording_on_a_queue_of_another_device_is_refused() {
    let platform = sigretire_queue::sim::SimPlatform::stepped();
    let device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    let other = platform.device(DeviceConfig::default(), bounded()).unwrap();
    let elsewhere = other.default_queue();

    let mut fresh = Event::new(&device, EventFlags::default());
    assert_eq!(
        elsewhere.record(&mut fresh),
        Err(RecordError::OtherDevice {
            queue: elsewhere.id()
        })
    );
    assert!(!fresh.is_recorded(), "still never recorded");
    assert_eq!(elsewhere.stats().markers, 0, "nothing published");

    let mut recorded = device.default_queue().record_event().unwrap();
    let seq = recorded.seq();
    assert!(matches!(
        elsewhere.record(&mut recorded),
        Err(RecordError::OtherDevice { .. })
    ));
    assert_eq!(
        (recorded.queue_id(), recorded.seq()),
        (Some(device.default_queue().id()), seq),
        "the event keeps its recording"
    );
    // Events of two devices have no elapsed time, recorded or not.
    let theirs = Event::new(&other, EventFlags::default());
    assert_eq!(
        fresh.elapsed_to(&theirs),
        Err(ElapsedError::DifferentDevices)
    );
    assert_eq!(
        recorded.elapsed_to(&theirs),
        Err(ElapsedError::DifferentDevices)
    );
}

#[test]
fn a_wait_captured_before_a_re_record_is_not_affected_by_it() {
    let (platform, device) = stepped();
    let producer = platform.create_queue(&device, bounded()).unwrap();
    let consumer = device.default_queue();
    let (first, second) = (HostFlag::new(), HostFlag::new());

    producer.launch(spin_kernel(&platform, &first)).unwrap();
    let mut event = producer.record_event().unwrap();
    let wait = consumer.wait_event(&event).unwrap();
    assert_eq!(wait.dependencies(), 1);
    let after = consumer.launch_empty().unwrap();

    // Recorded again behind newer gated work: the wait above still waits
    // for the first recording only.
    producer.launch(spin_kernel(&platform, &second)).unwrap();
    producer.record(&mut event).unwrap();
    first.set();
    platform.run_while(|| after.wait()).unwrap();
    assert_eq!(after.status(), CommandStatus::Complete);
    assert_eq!(event.query(), Status::Pending, "the new recording waits");

    // A wait made now captures the new recording.
    let later = consumer.wait_event(&event).unwrap();
    assert_eq!(later.dependencies(), 1);
    let behind = consumer.launch_empty().unwrap();
    platform.sim().run_until_idle();
    assert_eq!(behind.status(), CommandStatus::Pending);
    second.set();
    platform.run_while(|| consumer.synchronize()).unwrap();
    assert_eq!(behind.status(), CommandStatus::Complete);
}

#[test]
fn flags_persist_across_records() {
    let (platform, device) = stepped();
    let stream = platform.create_queue(&device, bounded()).unwrap();
    let flags = EventFlags {
        timing: false,
        blocking_sync: true,
    };
    let mut event = Event::new(&device, flags);
    assert_eq!(event.flags(), flags);
    assert!(event.is_blocking_sync());
    for queue in [device.default_queue(), &stream, device.default_queue()] {
        assert!(queue.config().profiling);
        queue.record(&mut event).unwrap();
        assert_eq!(event.flags(), flags);
        assert!(!event.is_timed(), "untimed on a profiled queue, every time");
        assert!(event.is_blocking_sync());
        platform.run_while(|| event.synchronize()).unwrap();
        assert_eq!(event.timestamps(), Err(TimestampsError::NotTimed));
    }
    // The one-call form's flags are the event's too.
    let mut timed = stream.record_event().unwrap();
    device.default_queue().record(&mut timed).unwrap();
    assert_eq!(timed.flags(), EventFlags::default());
    assert!(timed.is_timed() && !timed.is_blocking_sync());
    let mut untimed = stream
        .record_event_with(EventFlags::DISABLE_TIMING)
        .unwrap();
    stream.record(&mut untimed).unwrap();
    assert!(!untimed.is_timed());
}

#[test]
fn a_launch_of_kernel_object_zero_is_refused_and_the_empty_packet_is_its_own_call() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    assert_eq!(
        queue.launch(0).unwrap_err(),
        sigretire_queue::SubmitError::NullKernel
    );
    assert_eq!(queue.stats().commands, 0, "nothing published");
    assert!(!queue.has_failed(), "the queue keeps working");
    let empty = queue.launch_empty().unwrap();
    platform.run_while(|| empty.wait()).unwrap();
    assert_eq!(empty.status(), CommandStatus::Complete);
}
