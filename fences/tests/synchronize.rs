//! Synchronize: the one re-lock for timing and reset, the reset only when
//! nothing followed the marker, the no-lock answer of a completed marker,
//! and the completion-thread path. (The small-batch marker waited for
//! outside the lock and a second synchronizer joining the marker in flight
//! run on every backend: tests/tests/backends/queue_layer.rs of the
//! `scenarios` crate.)

mod support;

use sigretire_queue::{CommandStatus, QueueConfig, QueueStats, SyncError};
use sigretire_tracker::{Status, Tracker};
use std::sync::mpsc;
use std::time::Duration;
use support::*;

#[test]
fn the_reset_runs_when_nothing_followed_the_marker_and_the_lock_is_retaken_once() {
    let (platform, device) = stepped();
    let queue = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    let mut commands: Vec<_> = (0..2).map(|_| queue.launch_empty().unwrap()).collect();
    commands.push(queue.launch(spin_kernel(&platform, &flag)).unwrap());
    let before = queue.stats();
    let sync = spawn_synchronize(&queue);
    wait_until("the synchronizer waits", || waiting(&queue) == 1);
    flag.set();
    drive(&platform, sync).unwrap();
    let after = queue.stats();
    // One lock to choose what to wait for, one after the wait: never
    // during it. The spinning kernel is the newest command: a marker after
    // it would complete with it, so none is published.
    assert_eq!(after.lock_acquisitions - before.lock_acquisitions, 2);
    assert_eq!(after.markers - before.markers, 0);
    assert_eq!(after.shared_completions - before.shared_completions, 1);
    assert_eq!(after.cpu_waits, 1);
    assert_eq!(after.state_resets, 1);
    assert_eq!(after.state_resets_skipped, 0);
    assert_eq!(after.timing_passes, 1);
    assert!(commands.iter().all(|c| c.is_released()));
    assert!(
        commands
            .iter()
            .all(|c| c.status() == CommandStatus::Complete)
    );
    // The reset told the tracker the queue drained: everything retired.
    assert_eq!(queue.with_tracker(|t| t.census().in_flight), 0);
}

/// Synchronizes a queue whose pending small batch waits for a spinning
/// kernel, from a thread that holds another queue's execution lock
/// throughout when `under_a_lock` (a test double of the old behaviour,
/// which waited and completed its batch under the lock); returns the
/// queue's counters afterwards.
fn synchronize_small_batch(under_a_lock: bool) -> QueueStats {
    let (platform, device) = stepped_with(Default::default(), bounded());
    let queue = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    let kernel = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let sync = if under_a_lock {
        let holder = platform.create_queue(&device, bounded()).unwrap();
        let queue = queue.clone();
        spawn(move || holder.with_tracker(|_| queue.synchronize()))
    } else {
        spawn_synchronize(&queue)
    };
    wait_until("the synchronizer waits", || waiting(&queue) == 1);
    flag.set();
    assert_eq!(drive(&platform, sync), Ok(()));
    assert!(kernel.is_released());
    queue.stats()
}

#[test]
fn the_marker_batch_is_completed_without_the_lock() {
    let stats = synchronize_small_batch(false);
    assert_eq!(stats.batches_completed, 1);
    assert_eq!(stats.batches_completed_under_lock, 0);
    // The counter sees a completion under a lock: the old behaviour's.
    let old = synchronize_small_batch(true);
    assert_eq!(old.batches_completed, 1);
    assert_eq!(old.batches_completed_under_lock, 1);
}

#[test]
fn a_completed_marker_answers_synchronize_without_the_lock() {
    let (platform, device) = stepped();
    let queue = device.default_queue().clone();
    queue.launch_empty().unwrap();
    platform.run_while(|| queue.synchronize()).unwrap();

    // Another thread holds the execution lock; synchronize must not need it.
    let (entered, holding) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let holder = {
        let queue = queue.clone();
        spawn(move || {
            queue.with_tracker(|_| {
                entered.send(()).unwrap();
                released.recv().unwrap();
            })
        })
    };
    holding.recv().unwrap();
    let locks = queue.stats().lock_acquisitions;
    // If synchronize or query needed the lock they would wait for the
    // holder forever: the watchdog lets the holder go and fails the test.
    let answers = returns_promptly(
        "synchronize and query of a queue whose marker completed",
        {
            let queue = queue.clone();
            move || (queue.synchronize(), queue.query())
        },
        || {
            let _ = release.send(());
        },
    );
    assert_eq!(answers, (Ok(()), Ok(Status::Complete)));
    assert_eq!(queue.stats().lock_acquisitions, locks);
    assert_eq!(queue.stats().syncs_without_lock, 1);
    release.send(()).unwrap();
    holder.join().unwrap();
}

#[test]
fn synchronize_with_nothing_submitted_takes_no_lock() {
    let (_platform, device) = stepped();
    let queue = device.default_queue();
    assert_eq!(queue.synchronize(), Ok(()));
    assert_eq!(queue.stats().lock_acquisitions, 0);
}

#[test]
fn synchronize_on_completed_work_sends_no_marker() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let command = queue.launch_empty().unwrap();
    platform.sim().run_until_idle();
    assert_eq!(queue.synchronize(), Ok(()));
    let stats = queue.stats();
    assert_eq!(
        (stats.markers, stats.syncs_inline, stats.cpu_waits),
        (0, 1, 0)
    );
    assert_eq!(stats.state_resets, 1);
    assert!(command.is_released());
}

#[test]
fn a_larger_batch_completes_through_the_completion_thread() {
    let (platform, device) = stepped_with(
        Default::default(),
        QueueConfig {
            cpu_sync_batch: 2,
            ..bounded()
        },
    );
    let queue = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    let spin = spin_kernel(&platform, &flag);
    let commands: Vec<_> = (0..3).map(|_| queue.launch(spin).unwrap()).collect();

    let sync = spawn_synchronize(&queue);
    wait_until("the batch went to the completion thread", || {
        queue.stats().syncs_by_handler == 1 && waiting(&queue) == 1
    });
    assert!(device.stats().completion_thread_started);
    assert_eq!(queue.batches_in_completion(), 1);
    assert_eq!(queue.query().unwrap(), Status::Pending); // no lock held
    assert!(commands.iter().all(|c| !c.is_released()));

    flag.set();
    assert_eq!(drive(&platform, sync), Ok(()));
    assert!(commands.iter().all(|c| c.is_released()));
    assert_eq!(queue.stats().handler_batches, 1);
    assert_eq!(queue.stats().cpu_waits, 1);
    wait_until("the job let go of the queue", || {
        queue.batches_in_completion() == 0
    });
}

/// Synchronizes a queue of the default batching configuration with
/// `pending` commands the (stepped) GPU has not run; returns the queue's
/// counters and whether the completion thread started.
fn synchronize_with_pending(pending: usize) -> (QueueStats, bool) {
    let (platform, device) = stepped();
    let queue = device.default_queue().clone();
    assert_eq!(queue.config().cpu_sync_batch, 8, "the default under test");
    let commands: Vec<_> = (0..pending)
        .map(|_| queue.launch_empty().unwrap())
        .collect();
    let sync = spawn_synchronize(&queue);
    wait_until("the synchronizer waits", || waiting(&queue) == 1);
    assert_eq!(drive(&platform, sync), Ok(()));
    assert!(commands.iter().all(|c| c.is_released()));
    (queue.stats(), device.stats().completion_thread_started)
}

#[test]
fn seven_pending_commands_are_waited_for_on_the_calling_thread() {
    // Fewer than cpu_sync_batch (8): the small-batch path.
    let (stats, handler_started) = synchronize_with_pending(7);
    assert_eq!((stats.syncs_by_handler, stats.handler_batches), (0, 0));
    assert_eq!(
        (stats.cpu_waits, stats.markers, stats.shared_completions),
        (1, 0, 1)
    );
    assert_eq!(
        stats.state_resets, 1,
        "the calling thread reset the queue state"
    );
    assert!(!handler_started);
}

#[test]
fn eight_pending_commands_go_to_the_completion_thread() {
    // cpu_sync_batch (8) or more: the completion thread completes the batch.
    let (stats, handler_started) = synchronize_with_pending(8);
    assert_eq!((stats.syncs_by_handler, stats.handler_batches), (1, 1));
    assert_eq!(
        (stats.cpu_waits, stats.markers, stats.shared_completions),
        (1, 0, 1)
    );
    assert_eq!(stats.state_resets, 0, "only the small-batch path resets");
    assert!(handler_started);
}

#[test]
fn cpu_sync_batch_zero_sends_every_batch_to_the_completion_thread() {
    let (platform, device) = stepped_with(
        Default::default(),
        QueueConfig {
            cpu_sync_batch: 0,
            ..bounded()
        },
    );
    let queue = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let sync = spawn_synchronize(&queue);
    wait_until("the batch went to the completion thread", || {
        queue.stats().syncs_by_handler == 1
    });
    flag.set();
    drive(&platform, sync).unwrap();
    assert_eq!(queue.stats().syncs_by_handler, 1);
    assert_eq!(queue.stats().handler_batches, 1);
}

#[test]
fn the_old_behaviour_holds_the_lock_across_the_gpu_wait() {
    let (platform, device) = stepped();
    let queue = device.default_queue().clone();
    let flag = sigretire_sim::HostFlag::new();
    queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let old = std::sync::Arc::new(OldSynchronize::default());
    let sync = {
        let (queue, old) = (queue.clone(), old.clone());
        spawn(move || old.synchronize(&queue))
    };
    wait_until("the synchronizer waits", || old.waiting() == 1);
    let query = {
        let queue = queue.clone();
        spawn(move || queue.query())
    };
    // A negative check needs some time to pass: the query cannot finish
    // while the GPU spins, however long we give it.
    std::thread::sleep(Duration::from_millis(50));
    assert!(!query.is_finished(), "the query must block on the lock");
    flag.set();
    assert_eq!(drive(&platform, sync), Ok(()));
    assert_eq!(query.join().unwrap(), Ok(Status::Complete));
}

#[test]
fn a_timed_out_synchronize_leaves_its_batch_to_the_completion_thread() {
    let (platform, device) = stepped_with(
        Default::default(),
        QueueConfig {
            wait_timeout: Some(Duration::from_millis(20)),
            ..QueueConfig::default()
        },
    );
    let queue = device.default_queue();
    let flag = sigretire_sim::HostFlag::new();
    let command = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    assert_eq!(
        queue.synchronize(),
        Err(SyncError::TimedOut(Duration::from_millis(20)))
    );
    assert!(!command.is_released());
    assert_eq!(command.status(), CommandStatus::Pending);
    flag.set();
    platform.sim().run_until_idle();
    wait_until("the completion thread completed the batch", || {
        command.is_released()
    });
    assert_eq!(command.status(), CommandStatus::Complete);
    assert_eq!(queue.synchronize(), Ok(()));
}
