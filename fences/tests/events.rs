//! Events: untimed and pending events say so, and a recorded event holds
//! its signal until dropped. (Event synchronize, elapsed time against the
//! ground truth and the read-free completed event run on every backend:
//! tests/tests/backends/queue_layer.rs of the `scenarios` crate.)

mod support;

use fences::{DeviceConfig, Error, QueueConfig};
use support::*;
use tracker::Tracker;

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
