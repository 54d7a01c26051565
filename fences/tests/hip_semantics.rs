//! The surface a HIP runtime author expects: per-call deadlines
//! (`synchronize_timeout`, `wait_timeout`), a device-wide synchronize and
//! the list of a device's queues, cheap event clones, and per-event flags
//! (`hipEventDisableTiming`, `hipEventBlockingSync`).

mod support;

use sigretire_queue::sim::SimTracker;
use sigretire_queue::tracker::Tracker;
use sigretire_queue::{
    CommandStatus, DeviceConfig, ElapsedError, EventFlags, HostQueue, QueueConfig, Status,
    SyncError, TimestampsError, WaitError, WaitPolicy,
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
    queue.launch(0).unwrap();
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
