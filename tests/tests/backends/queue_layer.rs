//! The queue layer (`fences`) on each backend: events, synchronize with the
//! CPU wait outside the lock, cross-queue waits, and many threads over many
//! queues. The queue layer's other tests (fences/tests) need only the
//! simulator's adapter and stay with it; these are the ones the ROCr backend
//! runs too, every packet published by its queue, every signal a block of
//! its pools.

use crate::support::{Backend, Platform, Watchdog, bounded, on_every_backend, wait_until, waiting};
use sigretire_queue::{CommandStatus, QueueConfig};
use sigretire_tracker::{
    Status, Timestamps, Tracker, Work,
    backend::{HardwareQueue, Publication},
};
use std::time::Duration;

on_every_backend! {
    adopted;
    elapsed_time_matches_the_ground_truth,
    event_synchronize_completes_the_batch_through_its_marker_then_takes_no_lock,
    event_synchronize_waits_for_the_gpu_without_the_lock,
    a_completed_event_costs_no_device_memory_read,
    the_small_batch_marker_is_waited_for_outside_the_lock,
    a_second_synchronizer_waits_on_the_marker_in_flight_outside_the_lock,
    a_cross_queue_wait_is_a_pinned_barrier_and_work_flows_on_a_threaded_gpu,
    many_threads_over_many_queues_make_progress_and_leave_nothing_behind,
    a_stream_moved_to_another_hardware_queue_stays_in_order,
    the_runtimes_own_work_after_the_newest_command_is_waited_for,
}

#[track_caller]
fn assert_no_violations<B: Backend>(platform: &Platform<B>) {
    let violations = platform.gpu.violations();
    assert!(violations.is_empty(), "the machine saw: {violations:#?}");
}

// --- Events -------------------------------------------------------------

fn elapsed_time_matches_the_ground_truth<B: Backend>() {
    let platform = Platform::<B>::stepped();
    let device = platform.device(bounded());
    let queue = device.default_queue();
    let start = queue.record_event().unwrap();
    for _ in 0..3 {
        queue.launch_empty().unwrap();
    }
    let stop = queue.record_event().unwrap();
    platform.run_while(|| stop.synchronize()).unwrap();

    let hw = Platform::<B>::hardware(queue);
    let truth = |index| platform.gpu.truth(&hw, index).unwrap();
    let (first, last) = (
        truth(start.aql_index().unwrap()),
        truth(stop.aql_index().unwrap()),
    );
    // Stamps in the domain the backend reports (GPU ticks on the simulator,
    // the system domain through ROCr), whose unit is the device's period.
    let reported = |tick: Option<u64>| platform.gpu.reported_time(tick.unwrap());
    let units = reported(last.end_ts) - reported(first.end_ts);
    assert!(units > 0);
    // The backend's own clock: the simulator's 100 MHz counter, ROCr's
    // system domain (the stand-in reports its frequency as ROCr does).
    let period = platform.gpu.timestamp_period();
    assert_eq!(
        start.elapsed_to(&stop).unwrap(),
        period * u32::try_from(units).unwrap()
    );
    assert_eq!(
        start.timestamps().unwrap(),
        Timestamps {
            start: reported(first.start_ts),
            end: reported(first.end_ts)
        }
    );
    assert_no_violations(&platform);
}

fn event_synchronize_completes_the_batch_through_its_marker_then_takes_no_lock<B: Backend>() {
    let platform = Platform::<B>::stepped();
    let device = platform.device(bounded());
    let queue = device.default_queue();
    let before: Vec<_> = (0..2).map(|_| queue.launch_empty().unwrap()).collect();
    let event = queue.record_event().unwrap();
    let after = queue.launch_empty().unwrap();
    platform.gpu.run_all();

    assert_eq!(event.synchronize(), Ok(()));
    assert!(before.iter().all(|c| c.is_released()));
    assert!(
        !after.is_released(),
        "commands after the marker stay in the batch"
    );
    assert_eq!(queue.stats().timing_passes, 1);

    let locks = queue.stats().lock_acquisitions;
    assert_eq!(event.synchronize(), Ok(()));
    assert_eq!(event.query(), Status::Complete);
    assert_eq!(queue.stats().lock_acquisitions, locks);
    assert_eq!(queue.stats().event_syncs_without_lock, 1);
    assert_no_violations(&platform);
}

fn event_synchronize_waits_for_the_gpu_without_the_lock<B: Backend>() {
    let platform = Platform::<B>::stepped();
    let device = platform.device(bounded());
    let queue = device.default_queue();
    let (spin, release) = platform.gpu.spin_kernel();
    queue.launch(spin).unwrap();
    let event = queue.record_event().unwrap();
    // On a queue that runs only what it publishes the event shares the
    // kernel's completion; on an adopted one it is a marker of its own.
    let shares = queue.with_tracker(|t| !t.queue().foreign_work_after(0));
    assert_eq!(event.seq(), Some(if shares { 1 } else { 2 }));
    platform.gpu.run_all();
    assert_eq!(event.query(), Status::Pending);
    std::thread::scope(|scope| {
        let sync = scope.spawn(|| event.synchronize());
        // The lock is free while the event waits.
        let other = queue.launch_empty().unwrap();
        assert_eq!(Some(other.seq()), event.seq().map(|seq| seq + 1));
        release();
        assert_eq!(platform.drive(sync), Ok(()));
    });
    assert_eq!(event.query(), Status::Complete);
    assert_no_violations(&platform);
}

fn a_completed_event_costs_no_device_memory_read<B: Backend>() {
    let platform = Platform::<B>::stepped().with_device_signals();
    let device = platform.device(QueueConfig::default());
    let queue = device.default_queue();
    let start = queue.record_event().unwrap();
    queue.launch_empty().unwrap();
    let stop = queue.record_event().unwrap();
    platform.run_while(|| stop.synchronize()).unwrap();
    start.synchronize().unwrap();
    let elapsed = start.elapsed_to(&stop).unwrap();

    let device_reads = || {
        queue.with_tracker(|t| {
            let d = t.stats().device();
            (d.loads, d.polls, d.timestamp_reads)
        })
    };
    let reads = device_reads();
    let seen = platform.gpu.device_loads_seen();
    for _ in 0..10 {
        assert_eq!(start.query(), Status::Complete);
        assert_eq!(stop.query(), Status::Complete);
        assert_eq!(start.elapsed_to(&stop).unwrap(), elapsed);
    }
    assert_eq!(device_reads(), reads);
    assert_eq!(platform.gpu.device_loads_seen(), seen);
    assert_no_violations(&platform);
}

// --- Synchronize ----------------------------------------------------------

fn the_small_batch_marker_is_waited_for_outside_the_lock<B: Backend>() {
    let platform = Platform::<B>::stepped();
    let device = platform.device(bounded());
    let queue = device.default_queue().clone();
    let (spin, release) = platform.gpu.spin_kernel();
    let kernel = queue.launch(spin).unwrap();

    let sync = {
        let queue = queue.clone();
        std::thread::spawn(move || queue.synchronize())
    };
    wait_until("the synchronizing thread waits for its marker", || {
        waiting(&queue) == 1
    });
    // The lock is free while the GPU wait runs: query and submit go through.
    assert_eq!(queue.query().unwrap(), Status::Pending);
    let (late_spin, late_release) = platform.gpu.spin_kernel();
    let late = queue.launch(late_spin).unwrap();
    assert!(!sync.is_finished());

    release();
    assert_eq!(platform.drive(sync), Ok(()));
    assert_eq!(kernel.status(), CommandStatus::Complete);
    assert!(kernel.is_released(), "the marker's batch was completed");
    // Work was submitted after the marker: no reset, and the late kernel is
    // not reported complete (a reset would have told the tracker the queue
    // drained).
    assert_eq!(late.status(), CommandStatus::Pending);
    assert_ne!(
        queue.with_tracker(|t| t.known_status(&late.ticket()).unwrap()),
        Some(Status::Complete)
    );
    assert!(!late.is_released());
    let stats = queue.stats();
    assert_eq!((stats.state_resets, stats.state_resets_skipped), (0, 1));

    late_release();
    platform.gpu.run_all();
    assert_eq!(queue.query().unwrap(), Status::Complete);
    assert_no_violations(&platform);
}

fn a_second_synchronizer_waits_on_the_marker_in_flight_outside_the_lock<B: Backend>() {
    let platform = Platform::<B>::stepped();
    let device = platform.device(bounded());
    let queue = device.default_queue().clone();
    let (spin, release) = platform.gpu.spin_kernel();
    queue.launch(spin).unwrap();

    let first = {
        let queue = queue.clone();
        std::thread::spawn(move || queue.synchronize())
    };
    wait_until("the first synchronizer waits", || waiting(&queue) == 1);
    let second = {
        let queue = queue.clone();
        std::thread::spawn(move || queue.synchronize())
    };
    wait_until("the second synchronizer waits too", || waiting(&queue) == 2);
    let stats = queue.stats();
    assert_eq!(stats.marker_joins, 1);
    // The first waits for the spinning kernel itself where a marker would
    // complete with it, for a marker of its own on an adopted queue.
    let shares = queue.with_tracker(|t| !t.queue().foreign_work_after(0));
    assert_eq!(
        (stats.markers, stats.shared_completions),
        if shares { (0, 1) } else { (1, 0) },
        "the second thread sent no marker of its own"
    );
    // Both wait without the lock.
    assert_eq!(queue.query().unwrap(), Status::Pending);

    release();
    assert_eq!(platform.drive(first), Ok(()));
    assert_eq!(platform.drive(second), Ok(()));
    assert_eq!(queue.query().unwrap(), Status::Complete);
    assert_no_violations(&platform);
}

// --- Cross-queue waits ------------------------------------------------------

fn a_cross_queue_wait_is_a_pinned_barrier_and_work_flows_on_a_threaded_gpu<B: Backend>() {
    let platform = Platform::<B>::threaded().with_device_signals();
    let device = platform.device(bounded());
    let producer = platform.create_queue(&device, bounded());
    let consumer = device.default_queue();
    let (spin, release) = platform.gpu.spin_kernel();
    let work = producer.launch(spin).unwrap();
    let done = producer.record_event().unwrap();
    let wait = consumer.wait_event(&done).unwrap();
    assert_eq!(wait.dependencies(), 1);
    let after = consumer.launch_empty().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        after.status(),
        CommandStatus::Pending,
        "the consumer waits for the producer"
    );
    release();
    consumer.synchronize().unwrap();
    assert_eq!(after.status(), CommandStatus::Complete);
    assert_eq!(work.status(), CommandStatus::Complete);
    assert_eq!(done.query(), Status::Complete);
    // Many more, to cycle every signal through re-arming.
    for _ in 0..300 {
        producer.launch_empty().unwrap();
        let event = producer.record_event().unwrap();
        consumer.wait_event(&event).unwrap();
        consumer.launch_empty().unwrap();
    }
    consumer.synchronize().unwrap();
    producer.synchronize().unwrap();
    drop((producer, device));
    assert_no_violations(&platform);
}

// --- Stress -----------------------------------------------------------------

/// hip-tests' event-overflow shape: threads over queues recording, querying,
/// synchronizing and waiting across queues on a threaded GPU, under a
/// progress watchdog; afterwards every tracker's census is balanced,
/// nothing is left behind and the machine saw no violation. (The queue
/// layer's long, seeded stress on the simulator is tests/stress_queues.rs.)
fn many_threads_over_many_queues_make_progress_and_leave_nothing_behind<B: Backend>() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 500;
    let platform = Platform::<B>::threaded().with_device_signals();
    let device = platform.device(bounded());
    let queues: Vec<_> = (0..THREADS)
        .map(|_| platform.create_queue(&device, bounded()))
        .collect();
    let kernel = platform.gpu.timed_kernel(Duration::from_micros(5));
    let progress = std::sync::atomic::AtomicUsize::new(0);
    let watchdog = Watchdog::start(Duration::from_secs(60), || {});
    std::thread::scope(|scope| {
        for (t, queue) in queues.iter().enumerate() {
            let (queues, progress) = (&queues, &progress);
            scope.spawn(move || {
                let neighbour = &queues[(t + 1) % queues.len()];
                let mut events = std::collections::VecDeque::new();
                for round in 0..ROUNDS {
                    queue.launch(kernel).unwrap();
                    let event = queue.record_event().unwrap();
                    let _ = event.query();
                    if round % 5 == 0 {
                        neighbour.wait_event(&event).unwrap();
                    }
                    events.push_back(event);
                    if events.len() > 16 {
                        events.pop_front().unwrap().synchronize().unwrap();
                    }
                    if round % 25 == 24 {
                        queue.synchronize().unwrap();
                    }
                    progress.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                for event in events {
                    event.synchronize().unwrap();
                }
                queue.synchronize().unwrap();
            });
        }
    });
    assert!(!watchdog.disarm(), "no progress for a minute");
    assert_eq!(progress.into_inner(), THREADS * ROUNDS);
    for queue in &queues {
        queue.synchronize().unwrap();
        assert_eq!(queue.query().unwrap(), Status::Complete);
        let census = queue.with_tracker(|t| t.census());
        assert!(census.is_balanced(), "{census:?}");
        assert_eq!(
            queue.with_tracker(|t| t.stats().signals_created) as usize,
            census.created
        );
    }
    drop((queues, device));
    platform.gpu.tear_down();
}

// --- Queue changes ------------------------------------------------------

/// The runtime moves the stream to another hardware queue of the device
/// while a kernel spins on the old one: later work waits for it on the GPU,
/// and the events before and after the move both complete.
fn a_stream_moved_to_another_hardware_queue_stays_in_order<B: Backend>() {
    let platform = Platform::<B>::stepped();
    let device = platform.device(bounded());
    let queue = device.default_queue();
    let (spin, release) = platform.gpu.spin_kernel();
    let before = queue.launch(spin).unwrap();
    let old_event = queue.record_event().unwrap();
    // The stream's only handle of the old queue is the queue layer's: it
    // must keep the queue alive while the spin kernel runs there.
    let new = platform.gpu.queue();
    queue.move_to(new.clone()).unwrap();
    let after = queue.launch_empty().unwrap();
    let new_event = queue.record_event().unwrap();
    platform.gpu.run_all();
    assert_eq!(after.status(), CommandStatus::Pending);
    let truth = platform.gpu.truth(&new, after.aql_index()).unwrap();
    assert!(!truth.completed, "ran before the work on the old queue");
    release();
    platform.run_while(|| new_event.synchronize()).unwrap();
    assert_eq!(old_event.query(), Status::Complete);
    assert!(before.status().is_done() && after.status().is_done());
    assert_eq!(queue.stats().order_waits, 1);
    assert_no_violations(&platform);
}

/// The runtime writes a packet of its own (a kernel spinning until it is
/// released) behind the layer's newest command, which already completed:
/// the queue is not idle, and neither a synchronize, a query nor a
/// cross-queue wait may answer from that command.
fn the_runtimes_own_work_after_the_newest_command_is_waited_for<B: Backend>() {
    let platform = Platform::<B>::stepped();
    let device = platform.device(bounded());
    let queue = device.default_queue();
    let consumer = platform.create_queue(&device, bounded());
    let command = queue.launch_empty().unwrap();
    platform.run_while(|| command.wait()).unwrap();
    platform.run_while(|| queue.synchronize()).unwrap();

    let hw = Platform::<B>::hardware(queue);
    let (spin, release) = platform.gpu.spin_kernel();
    let index = hw.reserve().unwrap();
    hw.publish(Publication::unsignalled(index, true), Work::Kernel(spin))
        .unwrap();
    platform.gpu.run_all();
    assert!(!platform.gpu.truth(&hw, index).unwrap().completed);

    assert_eq!(queue.query().unwrap(), Status::Pending);
    let wait = consumer.wait_queue(queue).unwrap();
    assert_eq!(wait.packets(), 1, "a dependency on the runtime's work");
    let after = consumer.launch_empty().unwrap();
    let sync = {
        let queue = queue.clone();
        std::thread::spawn(move || queue.synchronize())
    };
    for _ in 0..50 {
        platform.gpu.run_all();
        std::thread::yield_now();
    }
    assert!(
        !sync.is_finished(),
        "synchronize returned before the runtime's kernel ended"
    );
    assert_eq!(after.status(), CommandStatus::Pending);
    release();
    assert_eq!(platform.drive(sync), Ok(()));
    assert!(platform.gpu.truth(&hw, index).unwrap().completed);
    platform.run_while(|| consumer.synchronize()).unwrap();
    assert_eq!(after.status(), CommandStatus::Complete);
    assert_no_violations(&platform);
}
