//! The device error state: with "do not abort" (CLR's
//! HIP_SKIP_ABORT_ON_GPU_ERROR) waits return early without completion,
//! timing and the reset are skipped, batches are released, nobody hangs;
//! without it the device refuses further work. A queue failure fails that
//! queue alone (the device and its other queues keep working) and reaches
//! the tracker even when the lock is busy as it is seen.

mod support;

use sigretire_queue::{
    BatchLimits, CommandStatus, DeviceConfig, QueueConfig, SubmitError, SyncError, WaitError,
    WaitEventError,
};
use sigretire_tracker::{Status, Tracker};
use support::*;

fn skip_abort() -> DeviceConfig {
    DeviceConfig {
        skip_abort_on_error: true,
    }
}

/// The early return of the device error state "injected", as the error
/// of whichever operation returned it.
fn injected<E: From<WaitError>>() -> E {
    WaitError::DeviceError {
        reason: "injected".into(),
    }
    .into()
}

#[test]
fn synchronize_returns_early_and_releases_its_batch() {
    let (platform, device) = stepped_with(skip_abort(), bounded());
    let queue = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    let spin = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let empty = queue.launch_empty().unwrap();

    let owner = spawn_synchronize(&queue);
    wait_until("the owner waits", || waiting(&queue) == 1);
    let joiner = spawn_synchronize(&queue);
    let command_waiter = spawn({
        let queue = queue.clone();
        move || {
            // A thread waiting on one of the batch's commands.
            let command = queue.launch_empty();
            command.map(|c| c.wait())
        }
    });
    wait_until("the joiner waits", || waiting(&queue) >= 2);

    device.set_error("injected");
    assert_eq!(owner.join().unwrap(), Err(injected()));
    assert_eq!(joiner.join().unwrap(), Err(injected()));
    assert_eq!(command_waiter.join().unwrap(), Ok(Err(injected())));
    // Released without completion; no timing, no reset.
    assert!(spin.is_released() && empty.is_released());
    assert_eq!(spin.status(), CommandStatus::DeviceError);
    assert_eq!(spin.wait(), Err(injected()));
    let stats = queue.stats();
    assert_eq!((stats.timing_passes, stats.state_resets), (0, 0));
    // The owner's and the joiner's synchronize (a command handle has no
    // queue counters).
    assert_eq!(stats.device_error_returns, 2);

    // The GPU finishes later; nothing was reported complete before it did.
    flag.set();
    platform.sim().run_until_idle();
    assert_eq!(queue.query().unwrap(), Status::Complete);
}

#[test]
fn a_batch_on_the_completion_thread_is_released_too() {
    let (platform, device) = stepped_with(
        skip_abort(),
        QueueConfig {
            cpu_sync_batch: 1,
            ..bounded()
        },
    );
    let queue = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    let commands: Vec<_> = (0..2)
        .map(|_| queue.launch(spin_kernel(&platform, &flag)).unwrap())
        .collect();
    let sync = spawn_synchronize(&queue);
    wait_until("the synchronize waits on the completion thread", || {
        queue.stats().syncs_by_handler == 1 && waiting(&queue) == 1
    });
    device.set_error("injected");
    assert_eq!(sync.join().unwrap(), Err(injected()));
    wait_until("the completion thread released the batch", || {
        commands.iter().all(|c| c.is_released())
    });
    assert!(
        commands
            .iter()
            .all(|c| c.status() == CommandStatus::DeviceError)
    );
    flag.set();
    platform.sim().run_until_idle();
}

#[test]
fn event_synchronize_returns_early_and_releases_the_batch_through_its_marker() {
    let (platform, device) = stepped_with(skip_abort(), bounded());
    let queue = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    let command = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let event = queue.record_event().unwrap();
    device.set_error("injected");
    assert_eq!(event.synchronize(), Err(injected()));
    assert!(command.is_released());
    assert_eq!(command.status(), CommandStatus::DeviceError);
    assert_eq!(event.query(), Status::Pending, "not reported complete");
    // Skip-abort keeps the queue usable.
    assert!(queue.launch_empty().is_ok());
    flag.set();
    platform.sim().run_until_idle();
}

#[test]
fn without_skip_abort_the_device_refuses_further_work() {
    let (platform, device) = stepped();
    let queue = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let sync = spawn_synchronize(&queue);
    wait_until("the synchronize waits", || waiting(&queue) == 1);
    device.set_error("injected");
    let aborted = WaitError::Aborted {
        reason: "injected".into(),
    };
    assert_eq!(sync.join().unwrap(), Err(aborted.clone().into()));
    assert_eq!(
        queue.launch_empty().unwrap_err(),
        SubmitError::from(aborted.clone())
    );
    assert_eq!(
        queue.record_event().unwrap_err(),
        SubmitError::from(aborted.clone())
    );
    assert_eq!(queue.synchronize().unwrap_err(), SyncError::from(aborted));
    flag.set();
    platform.sim().run_until_idle();
}

/// A queue failure fails that queue alone (CUDA's split): a wait on
/// another queue, in progress as it fails, goes on and completes; the other
/// queue keeps working; the failed queue answers the failure for its waits,
/// its events and its new work, naming itself; a new queue works; and only
/// `Device::set_error` stops every queue. (Was: a queue failure put the
/// device in the error state and the other queue's wait returned early.)
fn a_queue_failure_fails_that_queue_alone(config: DeviceConfig) {
    let (platform, device) = stepped_with(config, bounded());
    let failing = platform.create_queue(&device, bounded()).unwrap();
    let other = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    let doomed = failing.launch(spin_kernel(&platform, &flag)).unwrap();
    let doomed_event = failing.record_event().unwrap();
    let gated = other.launch(spin_kernel(&platform, &flag)).unwrap();
    let sync_other = {
        let other = other.clone();
        spawn(move || other.synchronize())
    };
    wait_until("the other queue's synchronize waits", || {
        waiting(&other) == 1
    });

    failing.with_tracker(|t| t.queue().fail());
    assert_eq!(
        failing.synchronize(),
        Err(SyncError::QueueFailed {
            queue: failing.id()
        })
    );
    assert!(failing.has_failed());
    assert!(!other.has_failed());
    assert_eq!(doomed.status(), CommandStatus::Failed);
    assert_eq!(device.error(), None, "the device is not in the error state");

    // The failed queue: its waits, its events and its new work answer the
    // failure, naming it, and say what to do.
    assert_eq!(
        doomed.wait(),
        Err(WaitError::QueueFailed {
            queue: failing.id()
        })
    );
    assert_eq!(doomed_event.query(), Status::Failed);
    assert_eq!(
        doomed_event.synchronize(),
        Err(WaitError::QueueFailed {
            queue: failing.id()
        })
    );
    let refused = failing.launch_empty().unwrap_err();
    assert_eq!(
        refused,
        SubmitError::QueueFailed {
            queue: failing.id()
        }
    );
    assert!(!refused.is_device_error());
    assert_eq!(refused.failed_queue(), Some(failing.id()));
    assert!(
        refused
            .to_string()
            .contains("drop this queue and create a new one"),
        "{refused}"
    );
    assert_eq!(
        failing.record_event().unwrap_err(),
        SubmitError::QueueFailed {
            queue: failing.id()
        }
    );
    assert_eq!(
        failing.synchronize(),
        Err(SyncError::QueueFailed {
            queue: failing.id()
        })
    );
    // A wait on an event of the failed queue is refused, naming it, and
    // publishes nothing: the waiting queue is not failed by it.
    assert_eq!(
        other.wait_event(&doomed_event).unwrap_err(),
        WaitEventError::QueueFailed {
            queue: failing.id()
        }
    );
    assert!(!other.has_failed());

    // The other queue's wait goes on, and completes with its work.
    assert_eq!(gated.status(), CommandStatus::Pending);
    flag.set();
    platform.sim().run_until_idle();
    assert_eq!(sync_other.join().unwrap(), Ok(()));
    // The other queue keeps working: launches, waits, events, synchronize.
    let command = other.launch_empty().unwrap();
    let event = other.record_event().unwrap();
    platform.sim().run_until_idle();
    assert_eq!(command.wait(), Ok(()));
    assert_eq!(event.synchronize(), Ok(()));
    assert_eq!(other.synchronize(), Ok(()));
    assert_eq!(other.query(), Ok(Status::Complete));

    // Drop the failed queue, make a new one: it works.
    drop((doomed, doomed_event, failing));
    let fresh = platform.create_queue(&device, bounded()).unwrap();
    let command = fresh.launch_empty().unwrap();
    let event = fresh.record_event().unwrap();
    other.wait_event(&event).unwrap();
    let after = other.launch_empty().unwrap();
    platform.sim().run_until_idle();
    assert_eq!(command.wait(), Ok(()));
    assert_eq!(event.synchronize(), Ok(()));
    assert_eq!(fresh.synchronize(), Ok(()));
    assert_eq!(after.wait(), Ok(()));
    assert_eq!(device.error(), None);

    // A device-wide fault is sticky: every queue answers it.
    device.set_error("injected");
    let skip = config.skip_abort_on_error;
    for queue in [&other, &fresh] {
        let pending = queue.launch(spin_kernel(&platform, &flag));
        if skip {
            // Work is still taken; a wait for it returns early.
            let flag = sigretire_sim::HostFlag::new();
            let gated = queue.launch(spin_kernel(&platform, &flag)).unwrap();
            assert_eq!(gated.wait(), Err(injected()));
            assert_eq!(queue.synchronize(), Err(injected()));
            flag.set();
            assert!(pending.is_ok());
        } else {
            let aborted = WaitError::Aborted {
                reason: "injected".into(),
            };
            assert_eq!(pending.unwrap_err(), SubmitError::from(aborted.clone()));
            assert_eq!(
                queue.record_event().unwrap_err(),
                SubmitError::from(aborted)
            );
        }
    }
    assert_eq!(device.error().as_deref(), Some("injected"));
    platform.sim().run_until_idle();
}

#[test]
fn a_queue_failure_fails_that_queue_alone_with_skip_abort() {
    a_queue_failure_fails_that_queue_alone(skip_abort());
}

#[test]
fn a_queue_failure_fails_that_queue_alone_on_an_aborting_device() {
    a_queue_failure_fails_that_queue_alone(DeviceConfig::default());
}

#[test]
fn a_failure_seen_while_the_lock_is_busy_still_reaches_the_tracker() {
    let (platform, device) = stepped_with(
        skip_abort(),
        QueueConfig {
            batch_limits: BatchLimits {
                host_signals: 2,
                device_signals: 2,
            },
            ..bounded()
        },
    );
    let queue = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    queue.launch(spin_kernel(&platform, &flag)).unwrap();
    queue.launch_empty().unwrap(); // closes the batch: a completion-thread job
    // In the open batch: nothing loads its signal, so only the tracker's
    // fail_queue can mark it failed.
    let later = queue.launch_empty().unwrap();
    assert_eq!(queue.batches_in_completion(), 1);

    queue.with_tracker(|tracker| {
        // This thread holds the execution lock while the completion thread
        // sees the queue fail and finishes the batch.
        tracker.queue().fail();
        wait_until("the completion thread finished the failed batch", || {
            queue.batches_in_completion() == 0
        });
        assert_eq!(tracker.known_status(&later.ticket()).unwrap(), None);
    });
    // The queue failed, not the device (was: `device.error().is_some()`).
    assert!(queue.has_failed());
    assert_eq!(device.error(), None);
    // Passed on to the tracker when the lock was let go.
    assert_eq!(
        queue.with_tracker(|t| t.known_status(&later.ticket()).unwrap()),
        Some(Status::Failed)
    );
    assert_eq!(later.status(), CommandStatus::Failed);
    flag.set();
}

#[test]
fn work_that_did_complete_is_still_reported_complete() {
    let (platform, device) = stepped_with(skip_abort(), bounded());
    let queue = device.default_queue();
    let command = queue.launch_empty().unwrap();
    let event = queue.record_event().unwrap();
    platform.sim().run_until_idle();
    device.set_error("injected");
    assert_eq!(event.synchronize(), Ok(()));
    assert_eq!(queue.synchronize(), Ok(()));
    assert_eq!(command.status(), CommandStatus::Complete);
}

/// A stream records work, its hardware queue fails, and it moves to a new
/// one (the failure not yet seen), where it waits on another queue's newest
/// work: the move's order wait there waits on the failed queue's (now
/// negative) signal, so the new hardware queue fails as it reaches it, and
/// the cross-queue wait behind it never runs. Once the failure is known,
/// the stream's uses there fail too and retire, letting go of what their
/// packets pinned, the other queue's signal among them: whether the new
/// queue failed before the failure was seen
/// (`known_after_the_new_queue_failed`), or after, when the failed stream's
/// lock is next taken. (Was: the failure named the old hardware queue
/// only, the failed stream took no more work, and nothing looked at the
/// new queue again: its two uses stayed in flight and the other queue kept
/// its signal parked for as long as the failed stream lived.)
fn a_wait_behind_a_move_off_a_failed_queue_lets_go_of_its_producer(
    known_after_the_new_queue_failed: bool,
) {
    let (platform, device) = stepped();
    let sim = platform.sim();
    let producer = device.default_queue().clone();
    let stream = platform.create_queue(&device, bounded()).unwrap();
    let produced = producer.record_event().unwrap();
    let doomed = stream.record_event().unwrap();
    stream.with_tracker(|t| t.queue().fail());
    let new = sim.create_queue(platform.sim_queue_config()).unwrap();
    stream.move_to(new.clone()).unwrap();
    let wait = stream.wait_queue(&producer).unwrap();
    assert_eq!(wait.dependencies(), 1, "the producer's newest work, pinned");
    assert_eq!(stream.with_tracker(|t| t.census().pins), 2);

    if known_after_the_new_queue_failed {
        sim.run_until_idle();
        assert!(new.is_failed(), "the order wait failed the new queue");
        assert_eq!(doomed.query(), Status::Failed);
    } else {
        // Known while the new queue still holds its packets: they may
        // still run, and keep their pins.
        assert_eq!(doomed.query(), Status::Failed);
        assert_eq!(stream.with_tracker(|t| t.census().pins), 2);
        sim.run_until_idle();
        assert!(new.is_failed(), "the order wait failed the new queue");
    }
    assert!(stream.has_failed());
    assert!(!producer.has_failed());
    assert_eq!(wait.commands()[0].status(), CommandStatus::Failed);
    assert_eq!(
        stream.synchronize(),
        Err(SyncError::QueueFailed { queue: stream.id() })
    );

    // Nothing on the failed queues will ever read a signal again: once
    // the stream's tracker is walked, it holds no pin and no use in flight.
    let census = stream.with_tracker(|t| {
        t.poll();
        t.census()
    });
    assert_eq!((census.in_flight, census.pins), (0, 0), "{census:?}");
    // The producer, healthy, finishes its work and keeps nothing parked.
    platform.run_while(|| producer.synchronize()).unwrap();
    assert_eq!(produced.query(), Status::Complete);
    drop((produced, doomed, wait));
    // The completion thread may still hold a fence's signal of a batch the
    // synchronize proved, until it finishes that batch.
    wait_until("the completion thread finished its batches", || {
        producer.batches_in_completion() == 0
    });
    let census = producer.with_tracker(|t| {
        t.poll();
        t.reclaim();
        t.census()
    });
    assert_eq!((census.in_flight, census.parked), (0, 0), "{census:?}");
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn a_wait_behind_a_move_off_a_failed_queue_lets_go_once_the_failure_is_known() {
    a_wait_behind_a_move_off_a_failed_queue_lets_go_of_its_producer(true);
}

#[test]
fn a_wait_behind_a_move_off_a_failed_queue_lets_go_once_its_new_queue_failed_too() {
    a_wait_behind_a_move_off_a_failed_queue_lets_go_of_its_producer(false);
}

/// A command seen failed through its own handle (its wait, or its status)
/// fails its queue there and then, as a wait on the queue does: the queue
/// says so and refuses new work at once, not only once the completion
/// thread comes to the batch. (Was: the command's wait named the queue as
/// failed while the queue still took launches, each failing at once.)
#[test]
fn a_command_seen_failed_through_its_handle_fails_its_queue_at_once() {
    for (round, through_status) in [false, true].into_iter().cycle().take(40).enumerate() {
        let (platform, device) = stepped_with(Default::default(), bounded());
        let failing = platform.create_queue(&device, bounded()).unwrap();
        let flag = sigretire_sim::HostFlag::new();
        let doomed = failing.launch(spin_kernel(&platform, &flag)).unwrap();
        failing.with_tracker(|t| t.queue().fail());
        let named = failing.id();
        if through_status {
            assert_eq!(doomed.status(), CommandStatus::Failed, "round {round}");
        } else {
            assert_eq!(
                doomed.wait(),
                Err(WaitError::QueueFailed { queue: named }),
                "round {round}"
            );
        }
        assert!(failing.has_failed(), "round {round}: the queue says so");
        assert_eq!(
            failing.launch_empty().unwrap_err(),
            SubmitError::QueueFailed { queue: named },
            "round {round}"
        );
        assert_eq!(
            failing.record_event().unwrap_err(),
            SubmitError::QueueFailed { queue: named },
            "round {round}"
        );
        assert_eq!(device.error(), None, "the device is not in the error state");
        assert!(!device.default_queue().has_failed());
    }
}

/// A command that outlived its queue still answers its failure, naming the
/// queue it ran on.
#[test]
fn a_command_that_outlived_its_failed_queue_still_answers_its_failure() {
    let (platform, device) = stepped_with(Default::default(), bounded());
    let failing = platform.create_queue(&device, bounded()).unwrap();
    let flag = sigretire_sim::HostFlag::new();
    let doomed = failing.launch(spin_kernel(&platform, &flag)).unwrap();
    let named = failing.id();
    failing.with_tracker(|t| t.queue().fail());
    drop(failing);
    assert_eq!(doomed.wait(), Err(WaitError::QueueFailed { queue: named }));
    assert_eq!(doomed.status(), CommandStatus::Failed);
    drop(device);
}

/// A stream waits on another's gated work (its barrier, on the hardware
/// queue it runs on, pins the producer's signal), moves to a new hardware
/// queue, which fails, and its last handle goes, the failure known or
/// not. The barrier on the old queue, which did not fail, still waits: the
/// stream's tracker, its pin with it, must outlive the handle until that
/// barrier ran, or the producer re-arms a signal a waiting packet names.
/// (Was: the failed queue's tracker was torn down with its last handle, or
/// with the failed marker that handle's drop published, and the producer
/// re-armed the signal under the waiting barrier.)
fn a_dropped_failed_stream_keeps_its_pins_while_its_old_queue_waits(failure_known: bool) {
    let (platform, device) = stepped();
    let sim = platform.sim();
    let producer = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    producer.launch(spin_kernel(&platform, &flag)).unwrap();
    let stream = platform.create_queue(&device, bounded()).unwrap();
    let old = stream.with_tracker(|t| t.queue().clone());
    let wait = stream.wait_queue(&producer).unwrap();
    assert_eq!(wait.dependencies(), 1);
    let new = sim.create_queue(platform.sim_queue_config()).unwrap();
    stream.move_to(new.clone()).unwrap();
    new.fail();
    if failure_known {
        assert!(stream.synchronize().is_err());
        assert!(stream.has_failed());
    }
    drop((wait, stream));

    // The producer's work completes; its signal stays pinned by the
    // barrier, which has not run (nothing ran the old queue).
    flag.set();
    let producer_queue = producer.with_tracker(|t| t.queue().clone());
    producer_queue.run_until_idle();
    producer.synchronize().unwrap();
    let census = producer.with_tracker(|t| {
        t.poll();
        t.reclaim();
        t.census()
    });
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    assert_eq!(
        census.parked, 1,
        "parked under the pin, not re-armed: {census:?}"
    );
    assert!(!old.truth(0).unwrap().completed, "the barrier still waits");

    // The barrier runs: the completion thread lets go of the stream, and
    // the producer takes its signal back.
    old.run_until_idle();
    assert!(old.truth(0).unwrap().completed);
    wait_until("the producer's signal came back", || {
        producer.with_tracker(|t| {
            t.poll();
            t.reclaim();
            t.census().parked == 0
        })
    });
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn a_dropped_failed_stream_keeps_its_pins_while_its_old_queue_waits_failure_known() {
    a_dropped_failed_stream_keeps_its_pins_while_its_old_queue_waits(true);
}

#[test]
fn a_dropped_failed_stream_keeps_its_pins_while_its_old_queue_waits_failure_unknown() {
    a_dropped_failed_stream_keeps_its_pins_while_its_old_queue_waits(false);
}
