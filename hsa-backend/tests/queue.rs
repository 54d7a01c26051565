//! The AQL queue: creation with profiling, reservation, publication in HSA
//! order with the doorbell, ROCr's read index, barrier-AND packets as empty
//! work and as cross-queue waits, barrier-value packets, queue errors, and
//! several producers at once.

mod support;

use hsa_sys::{HSA_PACKET_TYPE_BARRIER_AND, HSA_PACKET_TYPE_KERNEL_DISPATCH};
use sigretire_hsa::packet::MAX_DEPENDENCIES;
use sigretire_hsa::{AqlQueue, Error, QueueOptions, SignalPool};
use sigretire_rocr_standin::{Kernel, StepStatus};
use sigretire_tracker::{
    Placement, Work,
    backend::{
        Condition, HardwareQueue, Publication, QueueError, QueueView, SignalMemory, WaitValue,
    },
};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::Gpu;

fn options(size: u32) -> QueueOptions {
    QueueOptions {
        size,
        drain_timeout: Duration::ZERO,
        ..QueueOptions::default()
    }
}

/// An armed VRAM signal of `pool`, its arming fenced.
fn armed(pool: &SignalPool) -> u64 {
    let mut out = Vec::new();
    pool.allocate(1, Placement::Device, &mut out).unwrap();
    let (signal, _) = out[0];
    // SAFETY: a signal of `pool`.
    unsafe { pool.store(signal, 1) };
    pool.store_fence();
    pool.packet_handle(signal)
}

/// The value of the block at `handle`, which lives in `_pool`.
fn value(_pool: &SignalPool, handle: u64) -> i64 {
    // SAFETY: the handle is the address of a live block of `_pool` (which the
    // borrow keeps alive): read its value word atomically, as the backend does.
    unsafe { std::sync::atomic::AtomicI64::from_ptr((handle + 8) as *mut i64) }
        .load(std::sync::atomic::Ordering::Acquire)
}

#[test]
fn creation_enables_profiling_and_checks_the_size() {
    let gpu = Gpu::stepped();
    let queue = AqlQueue::new(&gpu.device, options(4)).unwrap();
    assert_eq!(queue.size(), 64, "ROCr rounds up to its minimum");
    assert!(queue.is_profiled());
    assert_eq!(gpu.standin.calls("hsa_queue_create"), 1);
    assert_eq!(
        gpu.standin.calls("hsa_amd_profiling_set_profiler_enabled"),
        1
    );
    assert!(!queue.ring_in_device_memory(), "the safe default");
    for size in [3, 1 << 18] {
        let error = AqlQueue::new(&gpu.device, options(size)).unwrap_err();
        assert_eq!(
            error,
            Error::InvalidQueueSize {
                size,
                min: 64,
                max: 1 << 17
            }
        );
        assert!(error.to_string().contains("power of two"), "{error}");
    }
    let unprofiled = AqlQueue::new(
        &gpu.device,
        QueueOptions {
            profiling: false,
            ..options(64)
        },
    )
    .unwrap();
    assert!(!unprofiled.is_profiled());
    assert_eq!(
        gpu.standin.calls("hsa_amd_profiling_set_profiler_enabled"),
        1
    );
    drop((queue, unprofiled));
    assert_eq!(gpu.standin.calls("hsa_queue_destroy"), 2);
    assert_eq!(gpu.standin.census().queues, 0);
}

#[test]
fn a_packet_reaches_the_packet_processor_at_its_doorbell() {
    let gpu = Gpu::stepped();
    let queue = gpu.queue(options(64));
    let pool = SignalPool::new(&gpu.device);
    let control = gpu.control(&queue);
    let completion = armed(&pool);
    assert_eq!(queue.write_index(), 0);
    let index = queue.reserve().unwrap();
    assert_eq!((index, queue.write_index()), (0, 1));
    assert_eq!(
        control.launch(),
        Err(StepStatus::NotLaunchable),
        "reserved, not published"
    );
    queue
        .publish(Publication::untracked(index, true, completion), Work::Empty)
        .unwrap();
    assert_eq!(
        gpu.standin.calls("hsa_signal_store_screlease"),
        1,
        "the doorbell"
    );
    let truth = control.truth(index).unwrap();
    assert!(truth.published && !truth.launched);
    assert_eq!(
        truth.packet_type, HSA_PACKET_TYPE_BARRIER_AND,
        "empty work is a barrier-AND"
    );
    assert!(truth.barrier);
    assert_eq!(truth.completion_signal, completion);
    assert_eq!(control.launch(), Ok(0));
    assert_eq!(queue.read_index(), 0, "launched, not consumed");
    assert_eq!(control.advance_read_index(), Ok(1));
    assert_eq!(
        queue.read_index(),
        1,
        "ROCr's read index is the processor's"
    );
    assert_eq!(value(&pool, completion), 1, "consumed, not complete");
    control.complete(0).unwrap();
    assert_eq!(value(&pool, completion), 0);
    assert!(gpu.standin.calls("hsa_queue_load_read_index_scacquire") >= 3);
    gpu.standin.assert_no_violations();
}

/// docs/design.md section 2: body, store fence, header, then the doorbell; a ring
/// in VRAM is write-combined, and a release store orders nothing there. The
/// order around the fence is `AqlSlot::publish_with`'s (tested in hsa-sys);
/// here, that every way of publishing executes it, and the fence before the
/// doorbell, for every packet. The stand-in cannot see an `sfence` itself:
/// the queue counts what it executed.
#[test]
fn every_packet_is_fenced_before_its_header_and_before_its_doorbell() {
    let gpu = Gpu::new(sigretire_rocr_standin::Config {
        ring_in_device_memory: true,
        ..sigretire_rocr_standin::Config::default()
    });
    let queue = gpu.queue(QueueOptions {
        ring_in_device_memory: true,
        ..options(64)
    });
    let pool = SignalPool::new(&gpu.device);
    assert_eq!(queue.store_fences(), 0);
    let index = queue.reserve().unwrap();
    queue
        .publish(Publication::unsignalled(index, true), Work::Empty)
        .unwrap();
    assert_eq!(queue.store_fences(), 2);
    let index = queue.try_reserve().unwrap();
    let packet = sigretire_hsa::packet::kernel_dispatch(0, false, 0);
    queue
        .publish_packet(Publication::unsignalled(index, false), packet)
        .unwrap();
    assert_eq!(queue.store_fences(), 4);
    let index = queue.try_reserve().unwrap();
    let wait = WaitValue {
        signal: armed(&pool),
        condition: Condition::Equal,
        value: 1,
        mask: u64::MAX,
    };
    queue
        .publish(
            Publication::unsignalled(index, false),
            Work::WaitValue(wait),
        )
        .unwrap();
    assert_eq!(queue.store_fences(), 6);
    queue.drain(Duration::from_secs(10)).unwrap();
    assert_eq!(queue.store_fences(), 8, "the drain's barrier too");
    assert_eq!(pool.counters().store_fences, 1, "the pool counts its own");
    // A refused publication fences nothing and rings nothing.
    let doorbells = gpu.standin.calls("hsa_signal_store_screlease");
    assert!(
        queue
            .publish_packet(Publication::unsignalled(1000, false), packet)
            .is_err()
    );
    assert_eq!(queue.store_fences(), 8);
    assert_eq!(gpu.standin.calls("hsa_signal_store_screlease"), doorbells);
    drop(queue);
    gpu.standin.assert_no_violations();
}

#[test]
fn kernels_are_dispatch_packets_and_more_than_five_dependencies_are_refused() {
    let gpu = Gpu::stepped();
    let queue = gpu.queue(options(64));
    let kernel = gpu.standin.register_kernel(Kernel::Empty);
    let index = queue.reserve().unwrap();
    queue
        .publish(Publication::unsignalled(index, false), Work::Kernel(kernel))
        .unwrap();
    let truth = gpu.control(&queue).truth(index).unwrap();
    assert_eq!(
        (truth.packet_type, truth.barrier),
        (HSA_PACKET_TYPE_KERNEL_DISPATCH, false)
    );
    let index = queue.reserve().unwrap();
    let six = [1u64; MAX_DEPENDENCIES + 1];
    assert!(matches!(
        queue.publish(Publication::unsignalled(index, false), Work::Wait(&six)),
        Err(QueueError::Unsupported(_))
    ));
    // The reserved slot must still be published, or the queue stalls at it.
    queue
        .publish(Publication::unsignalled(index, false), Work::Empty)
        .unwrap();
    assert!(matches!(
        queue.publish_packet(
            Publication::unsignalled(99, false),
            sigretire_hsa::packet::barrier_and(&[], false, 0).unwrap()
        ),
        Err(QueueError::Unsupported(_))
    ));
    gpu.standin.run_until_idle();
    gpu.standin.assert_no_violations();
}

#[test]
fn reserve_says_full_instead_of_blocking_and_recovers() {
    let gpu = Gpu::stepped();
    let queue = gpu.queue(options(64));
    for _ in 0..64 {
        let index = queue.reserve().unwrap();
        queue
            .publish(Publication::unsignalled(index, false), Work::Empty)
            .unwrap();
    }
    assert_eq!(queue.reserve(), Err(QueueError::Full));
    assert_eq!(
        queue.write_index(),
        64,
        "a refused reservation takes nothing"
    );
    gpu.control(&queue).run_until_idle();
    assert_eq!(queue.reserve(), Ok(64));
    queue
        .publish(Publication::unsignalled(64, false), Work::Empty)
        .unwrap();
    gpu.standin.assert_no_violations();
}

#[test]
fn a_barrier_and_waits_for_another_queues_signal() {
    let gpu = Gpu::stepped();
    let producer = gpu.queue(options(64));
    let consumer = gpu.queue(options(64));
    let pool = SignalPool::new(&gpu.device);
    let flag = gpu.standin.new_flag();
    let spin = gpu.standin.register_kernel(Kernel::SpinUntil(flag));
    let produced = armed(&pool);
    let consumed = armed(&pool);
    let index = producer.reserve().unwrap();
    producer
        .publish(
            Publication::untracked(index, true, produced),
            Work::Kernel(spin),
        )
        .unwrap();
    let index = consumer.reserve().unwrap();
    consumer
        .publish(
            Publication::untracked(index, true, consumed),
            Work::Wait(&[produced]),
        )
        .unwrap();
    gpu.standin.run_until_idle();
    assert_eq!(
        (value(&pool, produced), value(&pool, consumed)),
        (1, 1),
        "both wait for the kernel"
    );
    gpu.standin.set_flag(flag, true);
    gpu.standin.run_until_idle();
    assert_eq!((value(&pool, produced), value(&pool, consumed)), (0, 0));
    gpu.standin.assert_no_violations();
}

/// A barrier-value packet compares a masked value, not just zero: here it
/// waits until two kernels on another queue have counted a signal down from
/// 2 to 1, while the second kernel still runs. (A gate the host sets through
/// ROCr, as `hipStreamWaitValue` uses, is the other use; the simulator counts
/// any host store to a signal a pending barrier watches as a violation, so
/// the stand-in cannot show that one.)
#[test]
fn a_barrier_value_packet_completes_once_its_condition_holds() {
    let gpu = Gpu::stepped();
    let producer = gpu.queue(options(64));
    let consumer = gpu.queue(options(64));
    let pool = SignalPool::new(&gpu.device);
    let flag = gpu.standin.new_flag();
    let spin = gpu.standin.register_kernel(Kernel::SpinUntil(flag));
    let empty = gpu.standin.register_kernel(Kernel::Empty);
    let gate = armed(&pool);
    // SAFETY: `gate` is a block of `pool`; arm it to 2 for two decrements.
    unsafe { std::sync::atomic::AtomicI64::from_ptr((gate + 8) as *mut i64) }
        .store(2, std::sync::atomic::Ordering::Release);
    pool.store_fence();
    let completion = armed(&pool);
    let index = consumer.reserve().unwrap();
    let wait = WaitValue {
        signal: gate,
        condition: Condition::Equal,
        value: 1,
        mask: 0xF,
    };
    consumer
        .publish(
            Publication::untracked(index, true, completion),
            Work::WaitValue(wait),
        )
        .unwrap();
    for kernel in [empty, spin] {
        let index = producer.reserve().unwrap();
        producer
            .publish(
                Publication::untracked(index, false, gate),
                Work::Kernel(kernel),
            )
            .unwrap();
    }
    gpu.standin.run_until_idle();
    assert_eq!(value(&pool, gate), 1, "one of two decrements");
    assert_eq!(value(&pool, completion), 0, "the barrier saw 1 & 0xF == 1");
    gpu.standin.set_flag(flag, true);
    gpu.standin.run_until_idle();
    assert_eq!(value(&pool, gate), 0);
    drop((producer, consumer));
    gpu.standin.assert_no_violations();
}

#[test]
fn a_queue_error_reaches_the_backend_through_rocrs_callback() {
    let gpu = Gpu::stepped();
    let queue = gpu.queue(options(64));
    let pool = SignalPool::new(&gpu.device);
    let completion = armed(&pool);
    let index = queue.reserve().unwrap();
    queue
        .publish(Publication::untracked(index, true, completion), Work::Empty)
        .unwrap();
    assert!(queue.error().is_none());
    gpu.control(&queue).fail();
    let error = queue.error().expect("reported");
    assert_eq!(error.status(), hsa_sys::HSA_STATUS_ERROR_EXCEPTION);
    assert!(
        error.to_string().contains("HSA_STATUS_ERROR_EXCEPTION"),
        "{error}"
    );
    assert_eq!(value(&pool, completion), -1, "the pending packet failed");
    let QueueError::Failed(text) = queue.reserve().unwrap_err() else {
        panic!("a failed queue takes no reservation");
    };
    assert!(text.contains("HSA_STATUS_ERROR_EXCEPTION"), "{text}");
}

#[test]
fn several_producers_reserve_and_publish_at_once() {
    const THREADS: usize = 4;
    const EACH: usize = 500;
    let gpu = Gpu::threaded();
    let queue = gpu.queue(QueueOptions {
        size: 256,
        ..QueueOptions::default()
    });
    let pool = Arc::new(SignalPool::new(&gpu.device));
    let mut signals = Vec::new();
    pool.allocate(THREADS, Placement::Device, &mut signals)
        .unwrap();
    let threads: Vec<_> = signals
        .iter()
        .map(|&(signal, _)| {
            let queue = queue.clone();
            let pool = pool.clone();
            std::thread::spawn(move || {
                let mut indices = Vec::new();
                for _ in 0..EACH {
                    // One packet at a time per signal: arm, publish, wait.
                    // SAFETY: a signal of `pool`, idle.
                    unsafe { pool.store(signal, 1) };
                    pool.store_fence();
                    let index = loop {
                        match queue.reserve() {
                            Ok(index) => break index,
                            Err(QueueError::Full) => std::thread::yield_now(),
                            Err(error) => panic!("{error}"),
                        }
                    };
                    queue
                        .publish(
                            Publication::untracked(index, false, pool.packet_handle(signal)),
                            Work::Empty,
                        )
                        .unwrap();
                    // SAFETY: as above.
                    let seen = unsafe { pool.wait_change(signal, 1, Duration::from_secs(10)) };
                    assert_eq!(seen, 0);
                    indices.push(index);
                }
                indices
            })
        })
        .collect();
    let mut all: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), THREADS * EACH, "every reservation was unique");
    assert_eq!(queue.write_index(), (THREADS * EACH) as u64);
    queue.drain(Duration::from_secs(10)).unwrap();
    drop(queue);
    gpu.standin.assert_no_violations();
}

#[test]
fn drain_waits_for_the_work_and_times_out_on_a_hung_kernel() {
    let gpu = Gpu::threaded();
    let queue = gpu.queue(QueueOptions {
        drain_timeout: Duration::from_millis(50),
        ..QueueOptions::default()
    });
    let slow = gpu
        .standin
        .register_kernel(Kernel::Duration(Duration::from_millis(20)));
    let index = queue.reserve().unwrap();
    queue
        .publish(Publication::unsignalled(index, false), Work::Kernel(slow))
        .unwrap();
    queue.drain(Duration::from_secs(10)).unwrap();
    assert!(gpu.control(&queue).truth(index).unwrap().completed);

    let flag = gpu.standin.new_flag();
    let spin = gpu.standin.register_kernel(Kernel::SpinUntil(flag));
    let index = queue.reserve().unwrap();
    queue
        .publish(Publication::unsignalled(index, false), Work::Kernel(spin))
        .unwrap();
    let started = Instant::now();
    assert_eq!(
        queue.drain(Duration::from_millis(30)),
        Err(Error::TimedOut(Duration::from_millis(30)))
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // Dropping the queue drains within its bound, then destroys it anyway.
    let started = Instant::now();
    drop(queue);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(gpu.standin.census().queues, 0);
    gpu.standin.assert_no_violations();
}
