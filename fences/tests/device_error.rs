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
