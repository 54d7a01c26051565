//! Events: untimed and pending events say so, elapsed time refuses a stop
//! event that completed first, and a recorded event holds its signal until
//! dropped. (Event synchronize, elapsed time against the
//! ground truth and the read-free completed event run on every backend:
//! tests/tests/backends/queue_layer.rs of the `scenarios` crate.)

mod support;

use sigretire_queue::{DeviceConfig, ElapsedError, QueueConfig, TimestampsError};
use sigretire_tracker::Tracker;
use support::*;

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
    assert_eq!(event.timestamps(), Err(TimestampsError::NotTimed));

    let timed_queue = platform.create_queue(&device, bounded()).unwrap();
    let pending = timed_queue.record_event().unwrap();
    assert_eq!(pending.timestamps(), Err(TimestampsError::NotReady));
    assert_eq!(event.elapsed_to(&pending), Err(ElapsedError::NotTimed));
    assert_eq!(pending.elapsed_to(&pending), Err(ElapsedError::NotReady));
}

#[test]
fn elapsed_time_with_the_events_reversed_is_an_error_not_zero() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let start = queue.record_event().unwrap();
    queue.launch_empty().unwrap();
    let stop = queue.record_event().unwrap();
    platform.run_while(|| stop.synchronize()).unwrap();
    let (a, b) = (start.timestamps().unwrap(), stop.timestamps().unwrap());
    assert!(b.end > a.end, "the simulator advances its clock per packet");

    let forward = start.elapsed_to(&stop).unwrap();
    // The simulator's clock ticks at 100 MHz (10 ns), as MI300X's does.
    assert_eq!(
        forward,
        std::time::Duration::from_nanos(10) * u32::try_from(b.end - a.end).unwrap()
    );
    assert_eq!(
        stop.elapsed_to(&start),
        Err(ElapsedError::StopBeforeStart {
            ticks: b.end - a.end
        })
    );
    // An event to itself is zero, not an error.
    assert_eq!(start.elapsed_to(&start), Ok(std::time::Duration::ZERO));
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

#[test]
fn elapsed_time_between_events_of_two_devices_is_refused() {
    let (platform, device) = stepped();
    let other_device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    let (other_platform, far_device) = stepped();
    let here = device.default_queue().record_event().unwrap();
    let there = other_device.default_queue().record_event().unwrap();
    let far = far_device.default_queue().record_event().unwrap();
    platform.sim().run_until_idle();
    other_platform.sim().run_until_idle();
    for (a, b) in [(&here, &there), (&there, &here)] {
        assert_eq!(a.elapsed_to(b), Err(ElapsedError::DifferentDevices));
    }
    assert_eq!(here.elapsed_to(&far), Err(ElapsedError::DifferentDevices));
    assert_eq!(far.elapsed_to(&here), Err(ElapsedError::DifferentDevices));
    // Each device's own events still time.
    assert_eq!(here.elapsed_to(&here), Ok(std::time::Duration::ZERO));
}

#[test]
fn elapsed_time_counts_in_the_clock_the_stamps_come_from() {
    // A simulated GPU whose counter ticks at 25 MHz (40 ns), not the
    // default 100 MHz: nothing but the backend says so.
    let sim = sigretire_sim::Sim::new(sigretire_sim::SimConfig {
        profile: sigretire_sim::CostProfile {
            gpu_tick: std::time::Duration::from_nanos(40),
            ..sigretire_sim::CostProfile::zero()
        },
        ..sigretire_sim::SimConfig::default()
    });
    let platform = sigretire_queue::sim::SimPlatform::new(sim);
    let device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    let queue = device.default_queue();
    let start = queue.record_event().unwrap();
    queue.launch_empty().unwrap();
    let stop = queue.record_event().unwrap();
    platform.run_while(|| stop.synchronize()).unwrap();
    let ticks = stop.timestamps().unwrap().end - start.timestamps().unwrap().end;
    assert!(ticks > 0);
    assert_eq!(
        start.elapsed_to(&stop).unwrap(),
        std::time::Duration::from_nanos(40 * ticks)
    );
}
