//! Events, synchronizes and cross-queue waits right after a command share
//! its completion instead of publishing a marker (every packet is a fence,
//! so the marker would complete when the command does): the answers are
//! those a marker would give, timestamps included, on both trackers; a
//! marker is still published where sharing would be wrong or impossible.

mod support;

use sigretire_queue::sim::{Kernel, SimPlatform};
use sigretire_queue::tracker::{Config, Placement, Status, backend::SignalMemory};
use sigretire_queue::{Device, DeviceConfig, HostQueue, QueueConfig, QueueTracker};
use std::time::{Duration, Instant};
use support::*;

/// Runs `scenario` once on each tracker, with trackers made on new
/// hardware queues of `platform` as it asks for them.
fn on_both_trackers(
    platform: &SimPlatform,
    scenario_retiring: impl FnOnce(&dyn Fn() -> sigretire_queue::sim::SimTracker),
    scenario_baseline: impl FnOnce(&dyn Fn() -> SimBaselineTracker),
) {
    scenario_retiring(&|| platform.tracker().unwrap());
    scenario_baseline(&|| baseline_tracker(platform));
}

fn device<T: QueueTracker>(tracker: T, config: QueueConfig) -> Device<T> {
    Device::new(DeviceConfig::default(), tracker, config).unwrap()
}

/// A queue of `device` with profiling off, on a new hardware queue.
fn untimed_queue<T: QueueTracker>(device: &Device<T>, make: &dyn Fn() -> T) -> HostQueue<T> {
    let config = QueueConfig {
        profiling: false,
        ..bounded()
    };
    device.create_queue(make(), config).unwrap()
}

/// A stepped simulator whose trackers hand out device-memory signals.
fn device_signals_platform() -> SimPlatform {
    SimPlatform::stepped().with_tracker_config(Config {
        signals: Placement::Device,
        ..Config::default()
    })
}

fn kernel_end_bounds<T: QueueTracker>(platform: &SimPlatform, make: &dyn Fn() -> T) {
    let device = device(make(), bounded());
    let queue = device.default_queue();
    let tracker = std::any::type_name::<T>();
    let kernel = Duration::from_millis(3);
    let long = platform.sim().register_kernel(Kernel::Duration(kernel));
    for round in 0..3 {
        // The previous round's kernel is done, and the queue then idles:
        // the start event is a marker stamped when the GPU reaches it, not
        // that kernel's old end (which would add the idle time below).
        std::thread::sleep(Duration::from_millis(20));
        let markers = queue.stats().markers;
        let began = Instant::now();
        let start = queue.record_event().unwrap();
        assert_eq!(
            queue.stats().markers,
            markers + 1,
            "{tracker}: a marker of its own"
        );
        start.synchronize().unwrap();
        let markers = queue.stats().markers;
        let command = queue.launch(long).unwrap();
        let stop = queue.record_event().unwrap();
        assert_eq!(
            stop.seq(),
            Some(command.seq()),
            "{tracker}: the kernel's completion is the event's"
        );
        stop.synchronize().unwrap();
        let wall = began.elapsed();
        assert_eq!(
            queue.stats().markers,
            markers,
            "{tracker}: no marker for the stop event"
        );
        // The stop event's stamp is the kernel's end: the kernel lies
        // between the two events, and nothing longer than the host saw from
        // the start event's record to the stop event's completion.
        let elapsed = start.elapsed_to(&stop).unwrap();
        assert!(
            elapsed >= kernel && elapsed <= wall,
            "{tracker}, round {round}: {elapsed:?} between the events, a {kernel:?} kernel, {wall:?} on the host"
        );
        // And the stamps are the kernel's own: they span it.
        let stamps = stop.timestamps().unwrap();
        let clock = queue.with_tracker(|t| t.waiter().memory().timestamp_clock());
        let span = clock.duration(stamps.end - stamps.start);
        assert!(
            span >= kernel,
            "{tracker}, round {round}: stamps span {span:?}"
        );
    }
}

#[test]
fn a_timed_event_after_a_kernel_reports_the_kernels_end_on_both_trackers() {
    let platform = SimPlatform::threaded(sigretire_sim::CostProfile::zero());
    on_both_trackers(
        &platform,
        |make| kernel_end_bounds(&platform, make),
        |make| kernel_end_bounds(&platform, make),
    );
}

fn a_finished_launch_needs_a_marker<T: QueueTracker>(platform: &SimPlatform, make: &dyn Fn() -> T) {
    let tracker = std::any::type_name::<T>();
    let device = device(make(), bounded());
    let queue = device.default_queue();
    queue.launch_empty().unwrap();
    platform.run_while(|| queue.synchronize()).unwrap();
    // The launch finished: a timed event now is stamped when the GPU gets
    // to it, which only a marker of its own can say.
    let markers = queue.stats().markers;
    let event = queue.record_event().unwrap();
    assert_eq!(queue.stats().markers, markers + 1, "{tracker}");
    platform.sim().run_until_idle();
    let stamps = event.timestamps().unwrap();
    assert!(stamps.end >= stamps.start, "{tracker}");

    // An untimed event may share a finished command: it is simply complete.
    let untimed = untimed_queue(&device, make);
    untimed.launch_empty().unwrap();
    platform.run_while(|| untimed.synchronize()).unwrap();
    let markers = untimed.stats().markers;
    let event = untimed.record_event().unwrap();
    assert_eq!(
        (untimed.stats().markers, event.query()),
        (markers, Status::Complete),
        "{tracker}"
    );
    assert_eq!(
        event.timestamps(),
        Err(sigretire_queue::TimestampsError::NotTimed)
    );
}

#[test]
fn a_timed_event_after_a_finished_launch_times_a_marker_of_its_own() {
    let platform = SimPlatform::stepped();
    on_both_trackers(
        &platform,
        |make| a_finished_launch_needs_a_marker(&platform, make),
        |make| a_finished_launch_needs_a_marker(&platform, make),
    );
}

fn after_a_wait<T: QueueTracker>(platform: &SimPlatform, make: &dyn Fn() -> T) {
    let tracker = std::any::type_name::<T>();
    let device = device(make(), bounded());
    let producer = device.create_queue(make(), bounded()).unwrap();
    let consumer = device.default_queue();
    let flag = sigretire_sim::HostFlag::new();
    producer.launch(spin_kernel(platform, &flag)).unwrap();
    let produced = producer.record_event().unwrap();
    consumer.wait_event(&produced).unwrap();
    // The consumer's newest command is a wait, which no kernel stamps: a
    // timed event is a marker that runs work of its own.
    let markers = consumer.stats().markers;
    let timed = consumer.record_event().unwrap();
    assert_eq!(consumer.stats().markers, markers + 1, "{tracker}");
    // An event right after that one shares it (the same point).
    let again = consumer.record_event().unwrap();
    assert_eq!(
        (again.seq(), consumer.stats().markers),
        (timed.seq(), markers + 1),
        "{tracker}"
    );
    platform.sim().run_until_idle();
    assert_eq!(timed.query(), Status::Pending, "{tracker}: behind the wait");
    flag.set();
    platform.run_while(|| again.synchronize()).unwrap();
    assert_eq!(timed.query(), Status::Complete, "{tracker}");
    assert_eq!(
        timed.elapsed_to(&again).unwrap(),
        Duration::ZERO,
        "{tracker}"
    );
    assert!(
        produced.elapsed_to(&timed).unwrap() > Duration::ZERO,
        "{tracker}"
    );
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn an_event_after_a_wait_is_a_marker_and_the_next_one_shares_it() {
    let platform = SimPlatform::stepped();
    on_both_trackers(
        &platform,
        |make| after_a_wait(&platform, make),
        |make| after_a_wait(&platform, make),
    );
}

fn device_signals_sync<T: QueueTracker>(platform: &SimPlatform, make: &dyn Fn() -> T) {
    let tracker = std::any::type_name::<T>();
    let device = device(make(), bounded());
    let queue = device.default_queue();
    let flag = sigretire_sim::HostFlag::new();
    let before = queue.launch_empty().unwrap();
    let spinning = queue.launch(spin_kernel(platform, &flag)).unwrap();
    let sync = {
        let queue = queue.clone();
        std::thread::spawn(move || queue.synchronize())
    };
    wait_until("the synchronizer waits", || {
        queue.stats().cpu_waits_in_progress == 1
    });
    // It waits for the spinning kernel's own signal: nothing was published.
    let stats = queue.stats();
    assert_eq!(
        (stats.markers, stats.shared_completions),
        (0, 1),
        "{tracker}"
    );
    assert_eq!(spinning.status(), sigretire_queue::CommandStatus::Pending);
    flag.set();
    drive(platform, sync).unwrap();
    assert!(before.is_released() && spinning.is_released(), "{tracker}");
    assert_eq!(
        queue.stats().state_resets,
        1,
        "{tracker}: nothing followed it"
    );
}

#[test]
fn a_synchronize_waits_for_the_newest_commands_own_signal() {
    let platform = device_signals_platform();
    on_both_trackers(
        &platform,
        |make| device_signals_sync(&platform, make),
        |make| device_signals_sync(&platform, make),
    );
}

fn device_signals_time_a_marker<T: QueueTracker>(platform: &SimPlatform, make: &dyn Fn() -> T) {
    let tracker = std::any::type_name::<T>();
    let device = device(make(), bounded());
    let queue = device.default_queue();
    let flag = sigretire_sim::HostFlag::new();
    let kernel = queue.launch(spin_kernel(platform, &flag)).unwrap();
    // Still running, but its signal is in device memory: learning that is
    // a PCIe read and its stamps two more, so a timed event is a marker.
    let markers = queue.stats().markers;
    let timed = queue.record_event().unwrap();
    assert_eq!(queue.stats().markers, markers + 1, "{tracker}");
    assert_ne!(timed.seq(), Some(kernel.seq()), "{tracker}");
    // An untimed one shares the newest command whatever its placement.
    let untimed = untimed_queue(&device, make);
    let other = untimed.launch(spin_kernel(platform, &flag)).unwrap();
    let loads = platform.sim().counters().device.loads;
    let event = untimed.record_event().unwrap();
    assert_eq!(event.seq(), Some(other.seq()), "{tracker}");
    // (The baseline, as CLR's tracker, reads a signal to hold it.)
    if tracker.contains("Retiring") {
        assert_eq!(
            platform.sim().counters().device.loads,
            loads,
            "{tracker}: no read to share"
        );
    }
    flag.set();
    platform.run_while(|| event.synchronize()).unwrap();
    platform.run_while(|| timed.synchronize()).unwrap();
    assert!(
        kernel.status().is_done() && other.status().is_done(),
        "{tracker}"
    );
}

#[test]
fn with_device_memory_signals_a_timed_event_is_a_marker_and_an_untimed_one_shares() {
    let platform = device_signals_platform();
    on_both_trackers(
        &platform,
        |make| device_signals_time_a_marker(&platform, make),
        |make| device_signals_time_a_marker(&platform, make),
    );
}
