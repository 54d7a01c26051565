//! Submission batches: closing after 1000 commands (64 with device-memory
//! signals, both configurable), completing through the completion thread,
//! and a record/sync loop that keeps no commands referenced.

mod support;

use sigretire_queue::sim::SimPlatform;
use sigretire_queue::{BatchLimits, DeviceConfig, QueueConfig};
use sigretire_tracker::{Config, Placement, Tracker};
use support::*;

#[test]
fn a_batch_closes_after_1000_commands_with_host_signals() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let first = queue.launch_empty().unwrap();
    for _ in 1..999 {
        queue.launch_empty().unwrap();
    }
    assert_eq!(queue.stats().batches_closed, 0);
    queue.launch_empty().unwrap();
    assert_eq!(queue.stats().batches_closed, 1);
    assert!(!first.is_released());
    platform.sim().run_until_idle();
    wait_until("the completion thread completed the batch", || {
        first.is_released()
    });
    assert_eq!(queue.stats().handler_batches, 1);
}

#[test]
fn a_batch_closes_after_64_commands_with_device_signals() {
    let platform = SimPlatform::stepped().with_tracker_config(Config {
        signals: Placement::Device,
        ..Config::default()
    });
    let device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    let queue = device.default_queue();
    for _ in 0..63 {
        queue.launch_empty().unwrap();
    }
    assert_eq!(queue.stats().batches_closed, 0);
    queue.launch_empty().unwrap();
    assert_eq!(queue.stats().batches_closed, 1);
    for _ in 0..64 {
        queue.launch_empty().unwrap();
    }
    assert_eq!(queue.stats().batches_closed, 2);
    platform.run_while(|| queue.synchronize()).unwrap();
    wait_until("both batches completed", || {
        queue.stats().handler_batches == 2
    });
}

#[test]
fn batch_limits_are_configurable() {
    let (_platform, device) = stepped_with(
        DeviceConfig::default(),
        QueueConfig {
            batch_limits: BatchLimits {
                host_signals: 3,
                device_signals: 2,
            },
            ..bounded()
        },
    );
    let queue = device.default_queue();
    for _ in 0..7 {
        queue.launch_empty().unwrap();
    }
    assert_eq!(queue.stats().batches_closed, 2);
}

#[test]
fn a_custom_device_signal_limit_applies_to_device_signals() {
    let platform = SimPlatform::stepped().with_tracker_config(Config {
        signals: Placement::Device,
        ..Config::default()
    });
    let config = QueueConfig {
        batch_limits: BatchLimits {
            host_signals: 3,
            device_signals: 5,
        },
        ..bounded()
    };
    let device = platform.device(DeviceConfig::default(), config).unwrap();
    let queue = device.default_queue();
    let first = queue.launch_empty().unwrap();
    for _ in 1..4 {
        queue.launch_empty().unwrap();
    }
    // Past the host-signal limit, not yet at the device-signal one.
    assert_eq!(queue.stats().batches_closed, 0);
    queue.launch_empty().unwrap();
    assert_eq!(queue.stats().batches_closed, 1);
    for _ in 0..5 {
        queue.launch_empty().unwrap();
    }
    assert_eq!(queue.stats().batches_closed, 2);
    platform.sim().run_until_idle();
    wait_until("the completion thread completed both batches", || {
        queue.stats().handler_batches == 2
    });
    assert!(first.is_released());
}

#[test]
fn closed_batches_complete_through_the_completion_thread_with_no_synchronize() {
    let (_platform, device) = {
        let platform = SimPlatform::threaded(sigretire_sim::CostProfile::zero());
        let device = platform
            .device(
                DeviceConfig::default(),
                QueueConfig {
                    batch_limits: BatchLimits {
                        host_signals: 4,
                        device_signals: 4,
                    },
                    ..bounded()
                },
            )
            .unwrap();
        (platform, device)
    };
    let queue = device.default_queue();
    let commands: Vec<_> = (0..8).map(|_| queue.launch_empty().unwrap()).collect();
    wait_until("the completion thread released every command", || {
        commands.iter().all(|c| c.is_released())
    });
    assert_eq!(queue.stats().handler_batches, 2);
    assert!(device.stats().completion_thread_started);
    wait_until("the jobs let go of the queue", || {
        queue.batches_in_completion() == 0
    });
}

#[test]
fn a_record_sync_loop_keeps_no_commands_referenced() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    for _ in 0..200 {
        let command = queue.launch_empty().unwrap();
        let event = queue.record_event().unwrap();
        platform.run_while(|| event.synchronize()).unwrap();
        assert!(command.is_released());
    }
    assert_eq!(queue.stats().batches_closed, 0);
    // Every use retired: nothing left in flight, nothing parked for long.
    queue.with_tracker(|t| t.poll());
    let census = queue.with_tracker(|t| t.census());
    assert!(census.in_flight <= 2, "{census:?}");
    assert!(census.is_balanced());
}
