//! The completion thread never tears down a queue (nor, through it, a
//! signal): a job drops its signal reference first, then its queue
//! reference, and the queue's last handle waits for its jobs, so the final
//! teardown runs on a user thread.

mod support;

use fences::sim::SimPlatform;
use fences::{BatchLimits, DeviceConfig, QueueConfig};
use support::*;

fn small_batches() -> QueueConfig {
    QueueConfig {
        batch_limits: BatchLimits {
            host_signals: 2,
            device_signals: 2,
        },
        ..bounded()
    }
}

#[test]
fn a_queue_whose_last_reference_a_completion_job_holds_is_torn_down_elsewhere() {
    let (platform, device) = stepped();
    let queue = platform.create_queue(&device, small_batches()).unwrap();
    let flag = sim::HostFlag::new();
    let spin = spin_kernel(&platform, &flag);
    let command = queue.launch(spin).unwrap();
    queue.launch(spin).unwrap(); // closes the batch: a job holds the queue
    assert_eq!(queue.batches_in_completion(), 1);

    drop(queue); // returns at once: it never waits for the GPU
    assert_eq!(device.stats().queue_teardowns, 0, "the job still holds it");
    flag.set();
    platform.sim().run_until_idle();
    wait_until("the queue was torn down", || {
        device.stats().queue_teardowns == 1
    });
    assert!(command.is_released());
    let stats = device.stats();
    assert!(stats.completion_thread_started);
    assert_eq!(stats.teardowns_on_completion_thread, 0);
    assert_eq!(stats.teardowns_leaked, 0);
}

#[test]
fn racing_drops_against_completions_never_tear_down_on_the_completion_thread() {
    let platform = SimPlatform::threaded(sim::CostProfile::zero());
    let device = platform
        .device(DeviceConfig::default(), small_batches())
        .unwrap();
    for _ in 0..50 {
        let queue = platform.create_queue(&device, small_batches()).unwrap();
        for _ in 0..4 {
            queue.launch(0).unwrap();
        }
        drop(queue); // while the completion thread may be finishing its jobs
    }
    wait_until("every queue was torn down", || {
        device.stats().queue_teardowns == 50
    });
    let stats = device.stats();
    assert_eq!(stats.queue_teardowns, 50);
    assert_eq!(stats.teardowns_on_completion_thread, 0);
}

#[test]
fn an_event_outliving_its_queue_handle_tears_the_queue_down_when_dropped() {
    let (platform, device) = stepped();
    let queue = platform.create_queue(&device, bounded()).unwrap();
    let event = queue.record_event().unwrap();
    drop(queue);
    assert_eq!(device.stats().queue_teardowns, 0);
    platform.run_while(|| event.synchronize()).unwrap();
    drop(event);
    assert_eq!(device.stats().queue_teardowns, 1);
    assert_eq!(device.stats().teardowns_on_completion_thread, 0);
}

#[test]
fn dropping_the_device_with_live_queues_is_safe() {
    let (platform, device) = stepped();
    let queue = platform.create_queue(&device, small_batches()).unwrap();
    queue.launch(0).unwrap();
    queue.launch(0).unwrap(); // a job on the completion thread
    drop(device);
    platform.sim().run_until_idle();
    platform.run_while(|| queue.synchronize()).unwrap();
    drop(queue);
}
