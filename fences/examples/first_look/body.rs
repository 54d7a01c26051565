// The body of the crate-level example: shared by the crate docs, this
// example and tests/outside-user, so the three cannot drift apart.
use sigretire_queue::sim::SimPlatform;
use sigretire_queue::tracker::Status;
use sigretire_queue::{CommandStatus, DeviceConfig, QueueConfig};

fn main() -> Result<(), sigretire_queue::Error> {
    let platform = SimPlatform::stepped();
    let device = platform.device(DeviceConfig::default(), QueueConfig::default())?;
    let producer = platform.create_queue(&device, QueueConfig::default())?;
    let consumer = device.default_queue();

    let work = producer.launch_empty()?;
    let done = producer.record_event()?;
    let wait = consumer.wait_event(&done)?; // a barrier-AND on the consumer, pinned
    assert_eq!(wait.dependencies(), 1);
    let after = consumer.launch_empty()?;

    // Synchronize the consumer while the (stepped) GPU runs.
    platform.run_while(|| consumer.synchronize())?;
    assert_eq!(after.status(), CommandStatus::Complete);
    assert_eq!(work.status(), CommandStatus::Complete);
    assert_eq!(done.query(), Status::Complete);
    assert!(platform.sim().violations().is_empty());
    println!("the event is {:?}: the consumer ran after the producer", done.query());
    Ok(())
}
