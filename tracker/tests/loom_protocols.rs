//! Loom models of the tracker's concurrent protocols, run with
//! `RUSTFLAGS="--cfg loom" cargo test -p tracker --test loom_protocols --release --no-default-features`
//! (see `.ci/loom`). Each model runs the real tracker code on the crate's
//! host-memory backend ([`HostMemory`], loom-aware through the crate's
//! `sync` shim); the "GPU" is the model completing a packet's signal.
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tracker::{Config, HostMemory, QueueView, Request, RetiringTracker, Status, Tracker};

/// A queue whose read index the model sets.
struct ModelQueue(Arc<AtomicUsize>);

impl QueueView for ModelQueue {
    fn read_index(&self) -> u64 {
        self.0.load(Ordering::Acquire) as u64
    }

    fn ring_in_device_memory(&self) -> bool {
        true
    }
}

fn small_tracker(
    memory: &Arc<HostMemory>,
    signals: usize,
) -> (RetiringTracker<HostMemory, ModelQueue>, Arc<AtomicUsize>) {
    let read = Arc::new(AtomicUsize::new(0));
    let config = Config {
        initial_size: signals,
        growth_limit: 1,
        refill_batch: 1,
        ..Config::default()
    };
    let tracker = RetiringTracker::new(memory.clone(), ModelQueue(read.clone()), config).unwrap();
    (tracker, read)
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    // LOOM_MAX_PREEMPTIONS overrides; 3 explores every bug planted so far
    // and keeps CI's run to seconds.
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = builder.preemption_bound.or(Some(3));
    builder.check(f);
}

/// The last reference dropped on another thread while the tracker retires
/// the use and parks (or directly re-arms) its signal: the holder never sees
/// its signal re-armed, and the signal always comes back exactly once.
#[test]
fn last_reference_drop_versus_parking() {
    model(|| {
        let memory = Arc::new(HostMemory::new(4));
        let (mut tracker, read) = small_tracker(&memory, 2);
        let acquired = tracker.acquire(Request::packet(0).barrier(true)).unwrap();
        let event = tracker.hold(&acquired.ticket).unwrap().expect("pending");
        memory.complete(acquired.signal);
        read.store(1, Ordering::Release);

        let holder = {
            let memory = memory.clone();
            loom::thread::spawn(move || {
                // The holder still reads its use's outcome, never a re-arm.
                assert_eq!(event.status(), Status::Complete);
                assert_eq!(memory.value(event.packet_handle()), 0);
                drop(event);
            })
        };
        tracker.poll();
        holder.join().unwrap();
        tracker.reclaim();
        let census = tracker.census();
        assert_eq!(
            census.parked,
            0,
            "the parked signal came back: {census:?} {:?}",
            tracker.stats()
        );
        // Every signal is armed again: the ring's two slots, plus the spare
        // that took the parked signal's place if parking happened.
        assert_eq!(census.armed, census.created);
        assert!(census.is_balanced());
        assert_eq!(
            memory.value(acquired.signal),
            1,
            "re-armed exactly once, after the holder"
        );
    });
}

/// A GPU waiter's pin released (its consumer retired on another tracker's
/// thread) while the producer reclaims: the waiter's reads see the producer's
/// completion, never the re-arm, and the signal returns.
#[test]
fn pin_release_versus_rearm() {
    model(|| {
        let memory = Arc::new(HostMemory::new(6));
        let (mut producer, producer_read) = small_tracker(&memory, 2);
        let (mut consumer, consumer_read) = small_tracker(&memory, 2);
        let produced = producer.acquire(Request::packet(0).barrier(true)).unwrap();
        let pin = producer.pin(&produced.ticket).unwrap().expect("pending");
        let dependency = pin.packet_handle();
        let consuming = consumer.acquire(Request::packet(0).barrier(true)).unwrap();
        consumer.attach(&consuming.ticket, pin).unwrap();

        // The GPU: the producer completes, the consumer's barrier reads the
        // dependency at 0 and completes.
        memory.complete(produced.signal);
        producer_read.store(1, Ordering::Release);

        let consumer_thread = {
            let memory = memory.clone();
            loom::thread::spawn(move || {
                assert_eq!(
                    memory.value(dependency),
                    0,
                    "the waiter sees the completion it waits for"
                );
                memory.complete(consuming.signal);
                consumer_read.store(1, Ordering::Release);
                consumer.poll(); // retires the consumer: drops the pin
                consumer
            })
        };
        producer.poll();
        let consumer = consumer_thread.join().unwrap();
        producer.reclaim();
        assert_eq!(producer.census().parked, 0);
        assert_eq!(memory.value(produced.signal), 1);
        assert!(consumer.census().is_balanced());
    });
}

/// A CPU wait outside the tracker's lock while the owner keeps submitting
/// and re-arming the same signals: the waiter never reports completion before
/// the GPU completed, and always learns it.
#[test]
fn cpu_wait_versus_concurrent_submit() {
    model(|| {
        let memory = Arc::new(HostMemory::new(4));
        let (mut tracker, read) = small_tracker(&memory, 1);
        let first = tracker.acquire(Request::packet(0).barrier(true)).unwrap();
        let gpu_done = Arc::new(AtomicUsize::new(0));
        let waiter = tracker.waiter();

        let waiting = {
            let gpu_done = gpu_done.clone();
            loom::thread::spawn(move || {
                loop {
                    match waiter.status(&first.ticket).unwrap() {
                        Status::Pending => loom::thread::yield_now(),
                        status => {
                            assert_eq!(
                                gpu_done.load(Ordering::Acquire),
                                1,
                                "completion reported early"
                            );
                            return status;
                        }
                    }
                }
            })
        };
        // The GPU completes the first use, then the owner proves it, re-arms
        // the only signal and hands it to the next use.
        gpu_done.store(1, Ordering::Release);
        memory.complete(first.signal);
        read.store(1, Ordering::Release);
        let second = loop {
            match tracker.acquire(Request::packet(1).barrier(true)) {
                Ok(acquired) => break acquired,
                Err(_) => loom::thread::yield_now(),
            }
        };
        assert_eq!(second.signal, first.signal, "one signal, re-armed");
        assert_eq!(waiting.join().unwrap(), Status::Complete);
        assert_eq!(tracker.query(&first.ticket).unwrap(), Status::Complete);
        assert_eq!(tracker.query(&second.ticket).unwrap(), Status::Pending);
        let _ = Duration::ZERO;
    });
}

/// An async handler's reference dropped on the handler thread while its
/// owner retires the use and then tears the tracker down: the handler reads
/// its use's outcome from live memory and never a re-arm, and whichever side
/// lets go last frees the tracker's shared state and the signal memory
/// exactly once (loom reports a leaked or doubly freed `Arc`, and any access
/// after free, as a failure).
#[test]
fn async_handler_reference_versus_teardown() {
    model(|| {
        let memory = Arc::new(HostMemory::new(4));
        let (mut tracker, read) = small_tracker(&memory, 2);
        let acquired = tracker.acquire(Request::packet(0).barrier(true)).unwrap();
        let handler_reference = tracker.hold(&acquired.ticket).unwrap().expect("pending");
        memory.complete(acquired.signal);
        read.store(1, Ordering::Release);

        let handler = {
            let memory = memory.clone();
            loom::thread::spawn(move || {
                assert_eq!(handler_reference.status(), Status::Complete);
                assert_eq!(
                    memory.value(handler_reference.packet_handle()),
                    0,
                    "the handler's signal is never re-armed under it"
                );
                drop(handler_reference);
            })
        };
        // The owner retires the use (parking the held signal, or re-arming
        // it if the handler already let go) and tears the queue down.
        tracker.poll();
        drop(tracker);
        handler.join().unwrap();
        assert_eq!(
            Arc::strong_count(&memory),
            1,
            "the tracker's and the handler's holds on the memory are gone"
        );
    });
}
