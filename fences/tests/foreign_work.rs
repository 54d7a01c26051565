//! The queue layer's shortcuts (a synchronize or a query answered by the
//! newest command, an elided cross-queue dependency, an event or a marker
//! sharing the newest command's completion) hold only where nothing the
//! layer did not publish runs after that command on its hardware queue, and
//! that command succeeded. These scenarios break each premise: a runtime's
//! own packets behind the layer's newest command (an adopted queue), a
//! `submit_all` refused after issuing part of its work, a command that
//! failed, a stream moved to another hardware queue, and check that every
//! answer waits for what really runs.

mod support;

use sigretire_queue::sim::{HostFlag, Kernel, SimPlatform, SimTracker};
use sigretire_queue::tracker::{
    Status, Tracker, Work,
    backend::{HardwareQueue, Publication},
};
use sigretire_queue::{
    CommandStatus, DeviceConfig, ElapsedError, HostQueue, MoveError, QueueConfig, SubmitError,
};
use std::time::Duration;
use support::*;

fn hardware(queue: &HostQueue<SimTracker>) -> sigretire_sim::Queue {
    queue.with_tracker(|t| t.queue().clone())
}

/// The runtime's own packet on the queue's hardware queue (as a runtime
/// that adopted the queue writes it): a kernel spinning until `flag`, with
/// no completion signal and the barrier bit. Returns its index.
fn runtime_packet(platform: &SimPlatform, queue: &HostQueue<SimTracker>, flag: &HostFlag) -> u64 {
    let hw = hardware(queue);
    let spin = platform
        .sim()
        .register_kernel(Kernel::SpinUntil(flag.clone()));
    let index = HardwareQueue::reserve(&hw).unwrap();
    hw.publish(Publication::unsignalled(index, true), Work::Kernel(spin))
        .unwrap();
    index
}

/// A finished command, then the runtime's own long kernel behind it: the
/// layer's newest command is done, the queue is not.
fn finished_command_then_runtime_work(
    platform: &SimPlatform,
    queue: &HostQueue<SimTracker>,
) -> (HostFlag, u64) {
    let command = queue.launch_empty().unwrap();
    platform.run_while(|| command.wait()).unwrap();
    let flag = HostFlag::new();
    let index = runtime_packet(platform, queue, &flag);
    platform.sim().run_until_idle();
    assert!(
        !hardware(queue).truth(index).unwrap().completed,
        "the runtime's kernel runs"
    );
    (flag, index)
}

#[test]
fn synchronize_waits_for_the_runtimes_work_after_the_newest_command() {
    for lock_free_first in [false, true] {
        let (platform, device) = stepped();
        let queue = device.default_queue();
        if lock_free_first {
            // A completed marker covers everything the layer published:
            // the lock-free answer must still see the runtime's packet.
            queue.launch_empty().unwrap();
            platform.run_while(|| queue.synchronize()).unwrap();
        }
        let (flag, index) = finished_command_then_runtime_work(&platform, queue);
        let sync = spawn_synchronize(queue);
        for _ in 0..50 {
            platform.sim().run_until_idle();
            std::thread::yield_now();
        }
        assert!(
            !sync.is_finished(),
            "synchronize returned while the runtime's kernel ran (lock-free first: {lock_free_first})"
        );
        flag.set();
        assert_eq!(drive(&platform, sync), Ok(()));
        assert!(hardware(queue).truth(index).unwrap().completed);
        assert!(platform.sim().violations().is_empty());
    }
}

#[test]
fn query_sees_the_runtimes_work_after_the_newest_command() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    queue.launch_empty().unwrap();
    platform.run_while(|| queue.synchronize()).unwrap();
    let (flag, _) = finished_command_then_runtime_work(&platform, queue);
    assert_eq!(queue.query(), Ok(Status::Pending));
    assert_eq!(queue.query(), Ok(Status::Pending), "asked again");
    flag.set();
    platform.sim().run_until_idle();
    assert_eq!(queue.query(), Ok(Status::Complete));
    assert!(platform.sim().violations().is_empty());
}

/// The runtime's own work failed the hardware queue after the layer's
/// newest command completed: nothing the layer published stands for the
/// queue, so the query publishes a marker there, which fails; from that
/// answer on the stream is failed (it refuses new work, naming itself),
/// as for any other answer that names its failure.
#[test]
fn a_query_that_finds_the_runtimes_work_failed_fails_the_stream_at_once() {
    let (platform, device) = stepped();
    let queue = platform.create_queue(&device, Default::default()).unwrap();
    let (_flag, _) = finished_command_then_runtime_work(&platform, &queue);
    hardware(&queue).fail();
    assert_eq!(queue.query(), Ok(Status::Failed));
    assert!(queue.has_failed(), "the stream says so");
    assert_eq!(
        queue.launch_empty().unwrap_err(),
        SubmitError::QueueFailed { queue: queue.id() }
    );
    assert!(!device.default_queue().has_failed());
    assert_eq!(device.error(), None);
}

#[test]
fn a_cross_queue_wait_orders_behind_the_runtimes_work() {
    let (platform, device) = stepped();
    let producer = device.default_queue();
    let consumer = platform.create_queue(&device, bounded()).unwrap();
    let (flag, _) = finished_command_then_runtime_work(&platform, producer);
    let wait = consumer.wait_queue(producer).unwrap();
    assert_eq!(wait.packets(), 1, "a dependency, not elided");
    let after = consumer.launch_empty().unwrap();
    platform.sim().run_until_idle();
    assert_eq!(after.status(), CommandStatus::Pending);
    flag.set();
    platform.sim().run_until_idle();
    assert_eq!(after.status(), CommandStatus::Complete);
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn an_event_after_the_runtimes_work_completes_after_it() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let flag = HostFlag::new();
    queue.launch_empty().unwrap();
    runtime_packet(&platform, queue, &flag);
    let event = queue.record_event().unwrap();
    platform.sim().run_until_idle();
    assert_eq!(event.query(), Status::Pending);
    flag.set();
    platform.run_while(|| event.synchronize()).unwrap();
    assert_eq!(event.query(), Status::Complete);
}

/// A `submit_all` whose second operation the backend refuses (a barrier
/// with more dependencies than a packet holds) after its first, a spinning
/// kernel, was issued.
fn partly_refused(platform: &SimPlatform, queue: &HostQueue<SimTracker>) -> (HostFlag, u64) {
    let flag = HostFlag::new();
    let spin = platform
        .sim()
        .register_kernel(Kernel::SpinUntil(flag.clone()));
    let six = [0u64; 6];
    let written = hardware(queue).write_index();
    let refused = queue.submit_all(&[Work::Kernel(spin), Work::Wait(&six)]);
    assert!(matches!(refused, Err(SubmitError::Queue(_))), "{refused:?}");
    (flag, written)
}

#[test]
fn synchronize_after_a_partly_refused_submission_waits_for_its_issued_work() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    queue.launch_empty().unwrap();
    let (flag, issued) = partly_refused(&platform, queue);
    assert_eq!(queue.query(), Ok(Status::Pending), "the issued kernel runs");
    let sync = spawn_synchronize(queue);
    for _ in 0..50 {
        platform.sim().run_until_idle();
        std::thread::yield_now();
    }
    assert!(
        !sync.is_finished(),
        "synchronize returned while the issued kernel ran"
    );
    // Nothing re-armed the refused command's signal under its issued
    // kernel, so a later command is not reported early.
    let later = queue.launch_empty().unwrap();
    assert_eq!(later.status(), CommandStatus::Pending);
    flag.set();
    let _ = drive(&platform, sync);
    assert!(hardware(queue).truth(issued).unwrap().completed);
    platform.run_while(|| queue.synchronize()).unwrap();
    assert_eq!(later.status(), CommandStatus::Complete);
    assert!(
        platform.sim().violations().is_empty(),
        "{:#?}",
        platform.sim().violations()
    );
}

#[test]
fn an_event_after_a_failed_command_does_not_complete() {
    let config = QueueConfig {
        profiling: false,
        ..bounded()
    };
    let (platform, device) = stepped_with(
        DeviceConfig {
            skip_abort_on_error: true,
        },
        config,
    );
    let queue = device.default_queue();
    let flag = HostFlag::new();
    let spin = platform
        .sim()
        .register_kernel(Kernel::SpinUntil(flag.clone()));
    let command = queue.launch(spin).unwrap();
    hardware(queue).fail();
    assert_eq!(command.status(), CommandStatus::Failed);
    let event = queue.record_event();
    if let Ok(event) = &event {
        assert_ne!(event.query(), Status::Complete, "nothing ran after it");
        assert!(event.synchronize().is_err());
        assert_ne!(event.query(), Status::Complete);
    }
    assert_eq!(
        command.status(),
        CommandStatus::Failed,
        "a failed command stays failed"
    );
    platform.sim().run_until_idle();
    assert_eq!(command.status(), CommandStatus::Failed);
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn a_failure_of_the_previous_hardware_queue_leaves_the_current_ones_uses_alone() {
    let (platform, device) = stepped_with(
        DeviceConfig {
            skip_abort_on_error: true,
        },
        bounded(),
    );
    let sim = platform.sim();
    let queue = device.default_queue();
    let old = hardware(queue);
    let gate = HostFlag::new();
    let before = queue
        .launch(sim.register_kernel(Kernel::SpinUntil(gate.clone())))
        .unwrap();
    let old_event = queue.record_event().unwrap();
    let new = sim.create_queue(platform.sim_queue_config()).unwrap();
    queue.move_to(new.clone()).unwrap();
    let after = queue.launch_empty().unwrap();
    // The old queue fails; the layer sees it through an event there.
    old.fail();
    assert_eq!(before.status(), CommandStatus::Failed);
    assert_eq!(old_event.query(), Status::Failed);
    // The new queue has not run yet: its command is pending, and its
    // signal is armed under its packet.
    assert_eq!(after.status(), CommandStatus::Pending);
    assert!(
        sim.violations().is_empty(),
        "re-armed under a pending packet: {:#?}",
        sim.violations()
    );
    sim.run_until_idle();
    // Ordered behind the failed command, the new queue's work fails with
    // it (the barrier on a failed signal fails its queue): as the GPU says.
    let truth = new.truth(after.aql_index()).unwrap();
    assert_eq!(
        after.status(),
        if truth.completed {
            CommandStatus::Complete
        } else {
            CommandStatus::Failed
        }
    );
    assert!(sim.violations().is_empty(), "{:#?}", sim.violations());
}

#[test]
fn a_command_wait_sleeps_with_a_sleeping_policy() {
    let config = QueueConfig {
        wait_policy: sigretire_queue::WaitPolicy::blocking(),
        ..bounded()
    };
    let (platform, device) = stepped_with(DeviceConfig::default(), config);
    let queue = device.default_queue();
    let flag = HostFlag::new();
    let command = queue
        .launch(
            platform
                .sim()
                .register_kernel(Kernel::SpinUntil(flag.clone())),
        )
        .unwrap();
    let sleeps = queue.stats().sleeping_waits;
    let waiter = spawn(move || command.wait());
    wait_until("the command's wait sleeps on a wake signal", || {
        platform.sim().run_until_idle();
        queue.stats().sleeping_waits > sleeps
    });
    flag.set();
    assert_eq!(drive(&platform, waiter), Ok(()));
}

#[test]
fn a_move_to_a_queue_of_other_signal_memory_is_refused() {
    let (platform, device) = stepped();
    let other = SimPlatform::stepped();
    let foreign = other.sim().create_queue(other.sim_queue_config()).unwrap();
    let queue = device.default_queue();
    queue.launch_empty().unwrap();
    assert_eq!(queue.move_to(foreign), Err(MoveError::ForeignSignalMemory));
    // The stream stays where it was and keeps working.
    platform.run_while(|| queue.synchronize()).unwrap();
    assert_eq!(queue.stats().queue_changes, 0);
}

#[test]
fn elapsed_time_to_an_untimed_event_is_refused_before_anything_runs() {
    let (platform, device) = stepped();
    let timed = device.default_queue();
    let untimed = platform
        .create_queue(
            &device,
            QueueConfig {
                profiling: false,
                ..bounded()
            },
        )
        .unwrap();
    let start = timed.record_event().unwrap();
    let stop = untimed.record_event().unwrap();
    assert_eq!(start.elapsed_to(&stop), Err(ElapsedError::NotTimed));
    assert_eq!(stop.elapsed_to(&start), Err(ElapsedError::NotTimed));
    let _ = Duration::ZERO;
}

/// A sleeping wait's wake signal is its own until it woke: another wait
/// that starts between the GPU completing its wake packet and the sleeper
/// reading it must not re-lend it (the sleeper would then sleep on, until
/// an unrelated use completes).
#[test]
fn a_sleeping_wait_never_misses_its_wake() {
    // A woken thread reads its signal again only after the interrupt's
    // path to it (2 ms here): the window in which another wait could
    // re-lend the signal is wide open.
    let profile = sigretire_sim::CostProfile {
        interrupt_wake: Duration::from_millis(2),
        ..sigretire_sim::CostProfile::zero()
    };
    let platform = SimPlatform::threaded(profile);
    let config = QueueConfig {
        wait_policy: sigretire_queue::WaitPolicy::blocking(),
        wake_signals: 1,
        // A missed wake shows as a wait that outlives this by far.
        error_check_interval: Duration::from_secs(5),
        ..bounded()
    };
    let device = platform.device(DeviceConfig::default(), config).unwrap();
    let queue = device.default_queue();
    for round in 0..5 {
        let first_gate = HostFlag::new();
        let second_gate = HostFlag::new();
        let sim = platform.sim();
        queue
            .launch(sim.register_kernel(Kernel::SpinUntil(first_gate.clone())))
            .unwrap();
        let first = queue.record_event().unwrap();
        let sleeps = queue.stats().sleeping_waits;
        let first_wait = spawn(move || first.synchronize());
        wait_until("the first wait sleeps", || {
            queue.stats().sleeping_waits > sleeps
        });
        queue
            .launch(sim.register_kernel(Kernel::SpinUntil(second_gate.clone())))
            .unwrap();
        let second = queue.record_event().unwrap();
        // The first kernel ends, and at once a second sleeping wait starts.
        first_gate.set();
        let second_wait = spawn(move || second.synchronize());
        let started = std::time::Instant::now();
        while !first_wait.is_finished() {
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "round {round}: the first wait slept through its wake"
            );
            std::thread::sleep(Duration::from_micros(50));
        }
        assert_eq!(first_wait.join().unwrap(), Ok(()));
        second_gate.set();
        assert_eq!(second_wait.join().unwrap(), Ok(()));
    }
}
