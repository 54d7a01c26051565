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
    Config, Placement, Request, RetiringTracker, Tracker, Work,
    backend::{HardwareQueue, Publication},
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
    sigretire_tracker::backend::SignalMemory::allocate(&pool, 100, Placement::Device, &mut signals)
        .unwrap();
    standin.set_pool_exhausted(PoolKind::Device, true);
    standin.set_pool_exhausted(PoolKind::System, true);
    sigretire_tracker::backend::SignalMemory::allocate(&pool, 30, Placement::Device, &mut signals)
        .unwrap();
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

/// A stepped machine's queue options: nothing runs a drain, so none.
fn stepped_options() -> QueueOptions {
    QueueOptions {
        drain_timeout: Duration::ZERO,
        ..QueueOptions::default()
    }
}

/// What the stand-in has alive: (pool blocks, ROCr signals, KFD events).
fn alive(standin: &Standin) -> (u64, u64, u64) {
    let census = standin.census();
    (
        census.allocations,
        census.signals,
        standin.interrupts().live,
    )
}

/// Publishes one use of `tracker` on `queue` (a fence): `work`, completing
/// the use's signal.
fn publish_use(
    tracker: &mut RetiringTracker<SignalPool, AqlQueue>,
    queue: &AqlQueue,
    work: Work<'_>,
) -> sigretire_tracker::Acquired {
    let index = queue.reserve().unwrap();
    let acquired = tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    queue.publish(acquired.publication, work).unwrap();
    acquired
}

#[test]
fn a_pool_no_packet_named_is_freed_at_once_while_queues_live() {
    let standin = Standin::new(Machine::stepped()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    let queue = AqlQueue::new(&device, stepped_options()).unwrap();
    let before = alive(&standin);
    let pool = SignalPool::new(&device);
    let mut signals = Vec::new();
    sigretire_tracker::backend::SignalMemory::allocate(&pool, 8, Placement::Device, &mut signals)
        .unwrap();
    let wakes: Vec<_> = (0..5)
        .map(|_| sigretire_tracker::backend::SignalMemory::create_wake_signal(&pool).unwrap())
        .collect();
    assert!(wakes.iter().all(Option::is_some));
    assert_eq!(alive(&standin), (before.0 + 1, before.1 + 5, before.2 + 5));
    drop(pool);
    assert_eq!(
        alive(&standin),
        before,
        "no packet named them: nothing to wait for"
    );
    assert_eq!(runtime.deferred_releases(), 0);
    drop((queue, device, runtime));
    assert_eq!(standin.census(), sigretire_rocr_standin::Census::default());
    standin.assert_no_violations();
}

#[test]
fn a_pool_named_on_its_own_queue_waits_only_for_that_queue() {
    let standin = Standin::new(Machine::default()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    let options = QueueOptions {
        drain_timeout: Duration::from_millis(20),
        ..QueueOptions::default()
    };
    // Another stream's queue, alive throughout.
    let other = AqlQueue::new(&device, options).unwrap();
    let before = alive(&standin);
    let queue = AqlQueue::new(&device, options).unwrap();
    let spin = standin.register_kernel(Kernel::SpinUntil(standin.new_flag()));
    let pool = Arc::new(SignalPool::new(&device));
    let mut tracker = RetiringTracker::new(pool.clone(), queue.clone(), device_signals()).unwrap();
    let wake = sigretire_tracker::backend::SignalMemory::create_wake_signal(&*pool).unwrap();
    assert!(wake.is_some());
    // A kernel that never finishes completes one of the pool's signals.
    publish_use(&mut tracker, &queue, Work::Kernel(spin));
    drop((tracker, pool));
    assert_eq!(
        runtime.deferred_releases(),
        2,
        "the batch and the wake signal: the queue may still write the batch"
    );
    assert_eq!(alive(&standin), (before.0 + 1, before.1 + 1, before.2 + 1));

    drop(queue); // a 20 ms drain, then the queue is destroyed
    assert_eq!(
        alive(&standin),
        before,
        "its queue is gone (and the drain's own signal with it)"
    );
    assert_eq!(runtime.deferred_releases(), 0);
    drop((other, device, runtime));
    assert_eq!(standin.census(), sigretire_rocr_standin::Census::default());
    standin.assert_no_violations();
}

/// A producer on a queue of its own, whose one use (empty work, pending
/// until the test runs the queue) a packet on `consumer` waits on: the
/// producer's pool, the consumer's use, and the producer's queue.
fn produce_for(
    device: &sigretire_hsa::Agent,
    consumer_tracker: &mut RetiringTracker<SignalPool, AqlQueue>,
    consumer: &AqlQueue,
) -> (Arc<SignalPool>, sigretire_tracker::Acquired, AqlQueue) {
    let producer = AqlQueue::new(device, stepped_options()).unwrap();
    let pool = Arc::new(SignalPool::new(device));
    let mut tracker =
        RetiringTracker::new(pool.clone(), producer.clone(), device_signals()).unwrap();
    let produced = publish_use(&mut tracker, &producer, Work::Empty);
    let pin = tracker.pin(&produced.ticket).unwrap().unwrap();
    let waits = publish_use(
        consumer_tracker,
        consumer,
        Work::Wait(&[pin.packet_handle()]),
    );
    consumer_tracker.attach(&waits.ticket, pin).unwrap();
    (pool, waits, producer)
}

#[test]
fn a_pool_another_live_queue_waited_on_goes_once_that_packet_completed() {
    // Stepped: the test runs each queue. The consumer queue and its tracker
    // live on (a default stream); the producer's tracker, pool and queue go.
    let standin = Standin::new(Machine::stepped()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    let consumer = AqlQueue::new(&device, stepped_options()).unwrap();
    let consumer_pool = Arc::new(SignalPool::new(&device));
    let mut consumer_tracker =
        RetiringTracker::new(consumer_pool.clone(), consumer.clone(), device_signals()).unwrap();
    publish_use(&mut consumer_tracker, &consumer, Work::Empty);
    standin.queue(consumer.raw()).run_until_idle();
    let before = alive(&standin);
    for _ in 0..3 {
        let (pool, waits, producer) = produce_for(&device, &mut consumer_tracker, &consumer);
        standin.queue(producer.raw()).run_until_idle();
        drop(producer); // destroyed: its packets ran
        standin.queue(consumer.raw()).run_until_idle();
        // The consumer proves its packet complete and lets go of its pin,
        // the pool's last holder but the test's.
        assert!(consumer_tracker.query(&waits.ticket).unwrap().is_done());
        consumer_tracker.poll();
        assert_eq!(Arc::strong_count(&pool), 1);
        drop(pool);
        assert_eq!(
            alive(&standin),
            before,
            "the one live queue that named the pool ran its packet"
        );
        assert_eq!(runtime.deferred_releases(), 0);
    }
    drop((consumer_tracker, consumer_pool, consumer, device, runtime));
    assert_eq!(standin.census(), sigretire_rocr_standin::Census::default());
    standin.assert_no_violations();
}

#[test]
fn a_pool_a_live_queue_still_waits_on_stays_until_that_packet_completed() {
    // The consumer's tracker goes while its packet still waits, and so lets
    // go of its pin; its queue lives on (the runtime keeps it). Nothing the
    // packet names may go before it completes.
    let standin = Standin::new(Machine::stepped()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    let consumer = AqlQueue::new(&device, stepped_options()).unwrap();
    let before = alive(&standin);
    let consumer_pool = Arc::new(SignalPool::new(&device));
    let mut consumer_tracker =
        RetiringTracker::new(consumer_pool.clone(), consumer.clone(), device_signals()).unwrap();
    let (pool, waits, producer) = produce_for(&device, &mut consumer_tracker, &consumer);
    drop((consumer_tracker, consumer_pool, pool));
    assert_eq!(
        runtime.deferred_releases(),
        2,
        "the producer's batch, which both queues' packets name, and the \
         consumer's, which its packet completes"
    );
    assert_eq!(alive(&standin), (before.0 + 2, before.1, before.2));
    standin.queue(producer.raw()).run_until_idle();
    drop(producer); // destroyed: its packet ran; the consumer's has not
    assert_eq!(runtime.deferred_releases(), 2);
    assert_eq!(alive(&standin), (before.0 + 2, before.1, before.2));
    let pending = standin
        .queue(consumer.raw())
        .truth(waits.publication.index());
    assert!(!pending.unwrap().completed);
    standin.queue(consumer.raw()).run_until_idle();
    // The next publication on the queue sees it complete.
    let index = consumer.reserve().unwrap();
    consumer
        .publish(Publication::unsignalled(index, true), Work::Empty)
        .unwrap();
    assert_eq!(alive(&standin), before, "its packet completed");
    assert_eq!(runtime.deferred_releases(), 0);
    standin.queue(consumer.raw()).run_until_idle();
    drop((consumer, device, runtime));
    assert_eq!(standin.census(), sigretire_rocr_standin::Census::default());
    standin.assert_no_violations();
}

#[test]
fn a_pool_named_on_an_adopted_queue_let_go_undrained_goes_once_a_fence_there_completed() {
    let standin = Standin::new(Machine::stepped()).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    let device = runtime.device(0).unwrap();
    let before = alive(&standin);
    // The runtime's own queue, adopted; let go of without a drain, so the
    // backend never learns from it that the packets finished.
    let mut raw: *mut hsa_sys::hsa_queue_t = std::ptr::null_mut();
    // SAFETY: a GPU agent of an initialised runtime; no callback.
    let status = unsafe {
        runtime.api().hsa_queue_create(
            device.agent(),
            256,
            hsa_sys::HSA_QUEUE_TYPE_MULTI,
            None,
            std::ptr::null_mut(),
            u32::MAX,
            u32::MAX,
            &raw mut raw,
        )
    };
    assert_eq!(status, hsa_sys::HSA_STATUS_SUCCESS);
    let options = sigretire_hsa::AdoptOptions {
        drain_timeout: Duration::ZERO,
        ..Default::default()
    };
    // SAFETY: a live queue of this device, destroyed below, after the
    // backend's last handle.
    let queue = unsafe { AqlQueue::adopt(&device, raw, options) }.unwrap();
    let pool = Arc::new(SignalPool::new(&device));
    let mut tracker = RetiringTracker::new(pool.clone(), queue.clone(), device_signals()).unwrap();
    publish_use(&mut tracker, &queue, Work::Empty);
    drop((tracker, pool, queue));
    assert_eq!(runtime.deferred_releases(), 1, "its packet has not run");
    assert_eq!(alive(&standin).0, before.0 + 1);

    standin.queue(raw).run_until_idle();
    // The next look (here, at a queue's creation) sees the fence complete.
    let other = AqlQueue::new(&device, stepped_options()).unwrap();
    assert_eq!(runtime.deferred_releases(), 0);
    assert_eq!(alive(&standin), before);
    // SAFETY: the runtime's own queue; the backend let go of it.
    let status = unsafe { runtime.api().hsa_queue_destroy(raw) };
    assert_eq!(status, hsa_sys::HSA_STATUS_SUCCESS);
    drop((other, device, runtime));
    assert_eq!(standin.census(), sigretire_rocr_standin::Census::default());
    standin.assert_no_violations();
}
