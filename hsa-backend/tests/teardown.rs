//! Teardown: no signal memory is given back while a queue could still touch
//! it, nothing hangs (a hung queue is destroyed after a bounded drain), and
//! when everything is dropped ROCr has nothing left and is shut down.
//!
//! The stand-in reports as violations any block freed or signal destroyed
//! while a packet that names it is pending on a live queue, and any queue,
//! block or signal still alive at `hsa_shut_down`.

mod support;

use sigretire_hsa::{AqlQueue, QueueOptions, Runtime, SignalPool};
use sigretire_rocr_standin::{Config as Machine, Kernel, PoolKind, Standin};
use sigretire_tracker::{
    Config, HardwareQueue, Placement, Publication, Request, RetiringTracker, Tracker, Work,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn device_signals() -> Config {
    Config {
        signals: Placement::Device,
        ..Config::default()
    }
}

#[test]
fn a_pool_dropped_under_a_busy_queue_is_freed_only_after_the_queue_is_destroyed() {
    let standin = Standin::new(Machine::default()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    let queue = AqlQueue::new(
        &device,
        QueueOptions {
            drain_timeout: Duration::from_millis(20),
            ..QueueOptions::default()
        },
    )
    .unwrap();
    let flag = standin.new_flag();
    let spin = standin.register_kernel(Kernel::SpinUntil(flag));
    let pool = Arc::new(SignalPool::new(&device));
    let mut tracker = RetiringTracker::new(pool.clone(), queue.clone(), device_signals()).unwrap();
    // A kernel that never finishes, completing one of the pool's signals.
    let index = queue.reserve().unwrap();
    let acquired = tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    queue
        .publish(acquired.publication, Work::Kernel(spin))
        .unwrap();
    let blocks = pool.batches().len();

    drop(tracker);
    drop(pool);
    assert_eq!(
        standin.calls("hsa_amd_memory_pool_free"),
        0,
        "the queue may still write them"
    );
    assert_eq!(runtime.deferred_releases(), blocks);

    let started = Instant::now();
    drop(queue); // drains for 20 ms, then destroys the queue anyway
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(standin.calls("hsa_queue_destroy"), 1);
    assert_eq!(standin.calls("hsa_amd_memory_pool_free") as usize, blocks);
    assert_eq!(runtime.deferred_releases(), 0);
    drop((device, runtime));
    assert_eq!(standin.census(), sigretire_rocr_standin::Census::default());
    standin.assert_no_violations();
}

#[test]
fn a_pool_dropped_with_no_queue_alive_is_freed_at_once() {
    let standin = Standin::new(Machine::stepped()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    let pool = SignalPool::new(&device);
    let mut signals = Vec::new();
    sigretire_tracker::SignalMemory::allocate(&pool, 100, Placement::Device, &mut signals).unwrap();
    standin.set_pool_exhausted(PoolKind::Device, true);
    standin.set_pool_exhausted(PoolKind::System, true);
    sigretire_tracker::SignalMemory::allocate(&pool, 30, Placement::Device, &mut signals).unwrap();
    // 100 signals take two 4 KiB pages (128 blocks); the 28 left over serve
    // 28 of the next 30, and ROCr makes the last 2.
    assert_eq!(standin.census().allocations, 1);
    assert_eq!(standin.census().signals, 2);
    drop(pool);
    assert_eq!(standin.census().allocations, 0);
    assert_eq!(standin.census().signals, 0);
    assert_eq!(runtime.deferred_releases(), 0);
    standin.assert_no_violations();
}

#[test]
fn a_graceful_teardown_drains_the_queue_first() {
    let standin = Standin::new(Machine::default()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    let queue = AqlQueue::new(&device, QueueOptions::default()).unwrap();
    let slow = standin.register_kernel(Kernel::Duration(Duration::from_millis(30)));
    let index = queue.reserve().unwrap();
    queue
        .publish(Publication::unsignalled(index, false), Work::Kernel(slow))
        .unwrap();
    let raw = queue.raw();
    let truth_before = standin.queue(raw).truth(index).unwrap();
    assert!(!truth_before.completed);
    // Dropping waits (within the drain timeout) for the kernel to finish.
    let ticket_queue = queue.clone();
    drop(queue);
    assert_eq!(standin.calls("hsa_queue_destroy"), 0, "a clone is alive");
    let started = Instant::now();
    drop(ticket_queue);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(standin.calls("hsa_queue_destroy"), 1);
    // The drain made and destroyed a signal of its own.
    assert_eq!(standin.calls("hsa_amd_signal_create"), 1);
    assert_eq!(standin.calls("hsa_signal_destroy"), 1);
    drop((device, runtime));
    assert_eq!(standin.census(), sigretire_rocr_standin::Census::default());
    standin.assert_no_violations();
}

#[test]
fn every_drop_order_leaves_nothing_behind_and_never_frees_busy_memory() {
    // Trackers with work in flight on a spinning kernel, their queues, pools,
    // devices and the runtime, dropped in several orders.
    for order in 0..4 {
        let standin = Standin::new(Machine::default()).unwrap();
        let runtime = Runtime::load_from(standin.library_path()).unwrap();
        let device = runtime.device(0).unwrap();
        let options = QueueOptions {
            drain_timeout: Duration::from_millis(10),
            ..QueueOptions::default()
        };
        let producer = AqlQueue::new(&device, options).unwrap();
        let consumer = AqlQueue::new(&device, options).unwrap();
        let flag = standin.new_flag();
        let spin = standin.register_kernel(Kernel::SpinUntil(flag));
        let pool = Arc::new(SignalPool::new(&device));
        let mut tracker =
            RetiringTracker::new(pool.clone(), producer.clone(), device_signals()).unwrap();
        let mut tickets = Vec::new();
        for _ in 0..8 {
            let index = producer.reserve().unwrap();
            let acquired = tracker
                .acquire(Request::packet(index).barrier(true))
                .unwrap();
            producer
                .publish(acquired.publication, Work::Kernel(spin))
                .unwrap();
            tickets.push(acquired);
        }
        // Another queue waits on the producer's last signal.
        let index = consumer.reserve().unwrap();
        let pin = tracker.pin(&tickets[7].ticket).unwrap().unwrap();
        consumer
            .publish(
                Publication::unsignalled(index, true),
                Work::Wait(&[pin.packet_handle()]),
            )
            .unwrap();
        let started = Instant::now();
        match order {
            0 => drop((tracker, pin, pool, producer, consumer, device, runtime)),
            1 => drop((consumer, producer, device, runtime, pin, tracker, pool)),
            2 => drop((runtime, device, pool, pin, tracker, consumer, producer)),
            _ => {
                // Release the kernel first: a graceful end.
                standin.set_flag(flag, true);
                drop((pin, tracker, pool, producer, consumer, device, runtime));
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "order {order}: {:?}",
            started.elapsed()
        );
        assert_eq!(
            standin.census(),
            sigretire_rocr_standin::Census::default(),
            "order {order}"
        );
        standin.assert_no_violations();
    }
}
