//! The queue layer is generic over the tracker: the same flows on CLR's
//! baseline tracker.

mod support;

use sigretire_queue::sim::SimPlatform;
use sigretire_queue::{CommandStatus, Device, DeviceConfig, HostQueue};
use sigretire_tracker::Status;
use support::*;

fn device(platform: &SimPlatform) -> Device<SimBaselineTracker> {
    Device::new(
        DeviceConfig::default(),
        baseline_tracker(platform),
        bounded(),
    )
    .unwrap()
}

#[test]
fn the_flows_run_on_the_baseline_tracker() {
    let platform = SimPlatform::stepped();
    let device = device(&platform);
    let producer: HostQueue<SimBaselineTracker> = device
        .create_queue(baseline_tracker(&platform), bounded())
        .unwrap();
    let consumer = device.default_queue();
    let flag = sigretire_sim::HostFlag::new();
    producer.launch(spin_kernel(&platform, &flag)).unwrap();
    let event = producer.record_event().unwrap();
    assert_eq!(consumer.wait_event(&event).unwrap().dependencies(), 1);
    let after = consumer.launch_empty().unwrap();

    let sync = {
        let consumer = consumer.clone();
        spawn(move || consumer.synchronize())
    };
    wait_until("the consumer's synchronize waits", || {
        consumer.stats().cpu_waits_in_progress == 1
    });
    assert_eq!(consumer.query().unwrap(), Status::Pending);
    flag.set();
    assert_eq!(drive(&platform, sync), Ok(()));
    assert_eq!(after.status(), CommandStatus::Complete);
    assert!(event.elapsed_to(&event).is_ok());
    assert!(platform.sim().violations().is_empty());
}
