//! Events: record, query, synchronize (completing the batch through the
//! marker, then without the lock), elapsed time against the ground truth,
//! and no device-memory reads for a completed event.

mod support;

use fences::sim::SimPlatform;
use fences::{DeviceConfig, Error, QueueConfig};
use std::time::Duration;
use support::*;
use tracker::{Config, Placement, Status, Tracker};

#[test]
fn elapsed_time_matches_the_ground_truth() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let start = queue.record_event().unwrap();
    for _ in 0..3 {
        queue.launch(0).unwrap();
    }
    let stop = queue.record_event().unwrap();
    platform.run_while(|| stop.synchronize()).unwrap();

    let hw = queue.with_tracker(|t| t.queue().clone());
    let first = hw.truth(start.aql_index()).unwrap();
    let last = hw.truth(stop.aql_index()).unwrap();
    let ticks = last.end_ts.unwrap() - first.end_ts.unwrap();
    assert!(ticks > 0);
    assert_eq!(
        start.elapsed_to(&stop).unwrap(),
        Duration::from_nanos(ticks * 10)
    );
    assert_eq!(
        start.timestamps().unwrap(),
        tracker::Timestamps {
            start: first.start_ts.unwrap(),
            end: first.end_ts.unwrap()
        }
    );
}

#[test]
fn event_synchronize_completes_the_batch_through_its_marker_then_takes_no_lock() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let before: Vec<_> = (0..2).map(|_| queue.launch(0).unwrap()).collect();
    let event = queue.record_event().unwrap();
    let after = queue.launch(0).unwrap();
    platform.sim().run_until_idle();

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
}

#[test]
fn event_synchronize_waits_for_the_gpu() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let flag = sim::HostFlag::new();
    queue.launch(spin_kernel(&platform, &flag)).unwrap();
    let event = queue.record_event().unwrap();
    platform.sim().run_until_idle();
    assert_eq!(event.query(), Status::Pending);
    std::thread::scope(|scope| {
        let sync = scope.spawn(|| event.synchronize());
        // The lock is free while the event waits.
        let other = queue.launch(0).unwrap();
        assert_eq!(other.seq(), 3);
        flag.set();
        while !sync.is_finished() {
            platform.sim().run_until_idle();
            std::thread::yield_now();
        }
        assert_eq!(sync.join().unwrap(), Ok(()));
    });
    assert_eq!(event.query(), Status::Complete);
}

#[test]
fn a_completed_event_costs_no_device_memory_read() {
    let platform = SimPlatform::stepped().with_tracker_config(Config {
        signals: Placement::Device,
        ..Config::default()
    });
    let device = platform
        .device(DeviceConfig::default(), QueueConfig::default())
        .unwrap();
    let queue = device.default_queue();
    let start = queue.record_event().unwrap();
    queue.launch(0).unwrap();
    let stop = queue.record_event().unwrap();
    platform.run_while(|| stop.synchronize()).unwrap();
    start.synchronize().unwrap();
    let elapsed = start.elapsed_to(&stop).unwrap();

    let device_reads = |q: &fences::HostQueue<_>| {
        q.with_tracker(|t: &mut fences::sim::SimTracker| {
            let d = t.stats().device();
            (d.loads, d.polls, d.timestamp_reads)
        })
    };
    let reads = device_reads(queue);
    let counters = platform.sim().counters();
    for _ in 0..10 {
        assert_eq!(start.query(), Status::Complete);
        assert_eq!(stop.query(), Status::Complete);
        assert_eq!(start.elapsed_to(&stop).unwrap(), elapsed);
    }
    assert_eq!(device_reads(queue), reads);
    assert_eq!(platform.sim().counters().since(counters).device.loads, 0);
}

#[test]
fn untimed_and_pending_events_say_so() {
    let (platform, device) = stepped_with(
        DeviceConfig::default(),
        QueueConfig {
            profiling: false,
            ..bounded()
        },
    );
    let queue = device.default_queue();
    let event = queue.record_event().unwrap();
    assert!(!event.is_timed());
    assert_eq!(event.timestamps(), Err(Error::NotTimed));

    let timed_queue = platform.create_queue(&device, bounded()).unwrap();
    let pending = timed_queue.record_event().unwrap();
    assert_eq!(pending.timestamps(), Err(Error::NotReady));
    assert_eq!(event.elapsed_to(&pending), Err(Error::NotTimed));
    assert_eq!(pending.elapsed_to(&pending), Err(Error::NotReady));
}

#[test]
fn events_hold_their_signal_until_dropped() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let event = queue.record_event().unwrap();
    platform.run_while(|| queue.synchronize()).unwrap();
    queue.with_tracker(|t| t.poll());
    assert_eq!(queue.with_tracker(|t| t.census().parked), 1);
    drop(event);
    queue.with_tracker(|t| t.reclaim());
    assert_eq!(queue.with_tracker(|t| t.census().parked), 0);
}
