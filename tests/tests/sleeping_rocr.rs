//! Waits that sleep, on ROCr (the stand-in): the queue layer's wake
//! signals are ROCr interrupt signals, made with the queue, and a blocking
//! synchronize sleeps on one in `hsa_signal_wait_scacquire` (the stand-in
//! models KFD's events and their budget); with the budget spent, ROCr's
//! signals poll and the waits still complete.

use sigretire_hsa::{AqlQueue, QueueOptions, Runtime, SignalPool};
use sigretire_queue::{Device, DeviceConfig, QueueConfig};
use sigretire_rocr_standin::{Kernel, Standin};
use sigretire_tracker::{Config, Placement, RetiringTracker, Status, WaitPolicy};
use std::sync::Arc;
use std::time::Duration;

type Tracker = RetiringTracker<SignalPool, AqlQueue>;

fn blocking() -> QueueConfig {
    QueueConfig {
        wait_policy: WaitPolicy::blocking(),
        wait_timeout: Some(Duration::from_secs(10)),
        ..QueueConfig::default()
    }
}

fn device(gpu: &sigretire_hsa::Agent) -> (Device<Tracker>, Arc<SignalPool>) {
    let queue = AqlQueue::new(gpu, QueueOptions::default()).unwrap();
    let pool = Arc::new(SignalPool::new(gpu));
    let config = Config {
        signals: Placement::Device,
        ..Config::default()
    };
    let tracker = RetiringTracker::new(pool.clone(), queue, config).unwrap();
    let device = Device::new(DeviceConfig::default(), tracker, blocking()).unwrap();
    (device, pool)
}

#[test]
fn a_blocking_event_synchronize_sleeps_in_rocr_on_an_interrupt_signal() {
    let standin = Standin::new(sigretire_rocr_standin::Config::default()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let gpu = runtime.device(0).unwrap();
    let (device, pool) = device(&gpu);
    let queue = device.default_queue();
    assert_eq!(queue.stats().wake_signals, 5);
    assert_eq!(pool.counters().wake_signals, 5);
    let made = standin.interrupts().created;
    let long = standin.register_kernel(Kernel::Duration(Duration::from_millis(3)));
    for _ in 0..4 {
        queue.launch(long).unwrap();
        let event = queue.record_event().unwrap();
        event.synchronize().unwrap();
        assert_eq!(event.query(), Status::Complete);
    }
    assert_eq!(queue.stats().sleeping_waits, 4);
    assert!(pool.counters().sleeps >= 4);
    let interrupts = standin.interrupts();
    assert!(interrupts.sleeps >= 4, "{interrupts:?}");
    assert_eq!(
        interrupts.created, made,
        "none made after the queue's creation"
    );
    drop((device, pool, gpu, runtime));
    standin.assert_no_violations();
}

#[test]
fn with_kfds_events_spent_the_wake_signals_poll_and_waits_still_complete() {
    let standin = Standin::new(sigretire_rocr_standin::Config::default()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let gpu = runtime.device(0).unwrap();
    assert!(standin.set_event_budget(0));
    let (device, pool) = device(&gpu);
    let queue = device.default_queue();
    // ROCr gave polling signals without saying so; the pool saw their empty
    // mailboxes and kept none: the queue has no wake signal.
    assert_eq!(pool.counters().wake_signals, 0);
    assert_eq!(
        pool.counters().polling_wake_signals,
        1,
        "it stops at the first"
    );
    assert_eq!(queue.stats().wake_signals, 0);
    assert_eq!(standin.interrupts().degraded, 1);
    let long = standin.register_kernel(Kernel::Duration(Duration::from_millis(2)));
    queue.launch(long).unwrap();
    let event = queue.record_event().unwrap();
    event.synchronize().unwrap();
    assert_eq!(event.query(), Status::Complete);
    assert_eq!(
        standin.interrupts().sleeps,
        0,
        "nothing to sleep on: ROCr polled"
    );
    drop((device, pool, gpu, runtime));
    standin.assert_no_violations();
}
