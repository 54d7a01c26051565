//! A drain (`Tracker::note_drained`) is a fact about one hardware queue: the
//! one the tracker watches now. It retires that queue's uses, and says
//! nothing about an older generation's (still on the old hardware queue) or
//! a copy engine's (another engine altogether). A drained consumer queue
//! also lets go of the pins its uses held.

use sigretire_baseline::BaselineTracker;
use sigretire_sim::backend::{SimMemory, submit_barrier, submit_kernel};
use sigretire_sim::{Placement as RingPlacement, Queue, Sim, SimConfig, SimQueueConfig};
use sigretire_tracker::{
    Config, CreateError as TrackerError, Request, RetiringTracker, Status, Ticket, Tracker,
};
use std::sync::Arc;

fn queue_on(sim: &Sim, ring: RingPlacement) -> Queue {
    sim.create_queue(SimQueueConfig {
        size: 256,
        ring,
        profiling: true,
        ..SimQueueConfig::default()
    })
    .unwrap()
}

/// A tracker of kind `T` on a fresh stepped simulator's first queue.
fn tracker_on<T: Tracker<Memory = SimMemory, Queue = Queue>>(
    make: fn(Arc<SimMemory>, Queue, Config) -> Result<T, TrackerError>,
) -> (Sim, T, Queue) {
    let sim = Sim::new(SimConfig::default());
    let queue = queue_on(&sim, RingPlacement::Device);
    let memory = Arc::new(SimMemory::new(sim.clone(), queue.agent()));
    let tracker = make(memory, queue.clone(), Config::default()).unwrap();
    (sim, tracker, queue)
}

fn submit_fence<T: Tracker<Queue = Queue>>(tracker: &mut T, queue: &Queue) -> Ticket {
    let index = queue.reserve().unwrap();
    let acquired = tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    submit_barrier(queue, index, acquired.signal);
    acquired.ticket
}

fn retiring(
    memory: Arc<SimMemory>,
    queue: Queue,
    config: Config,
) -> Result<RetiringTracker<SimMemory, Queue>, TrackerError> {
    RetiringTracker::new(memory, queue, config)
}

fn baseline(
    memory: Arc<SimMemory>,
    queue: Queue,
    config: Config,
) -> Result<BaselineTracker<SimMemory, Queue>, TrackerError> {
    BaselineTracker::new(memory, queue, config)
}

#[test]
fn a_drain_of_the_new_queue_leaves_the_old_generation_pending() {
    let (sim, mut tracker, old) = tracker_on(retiring);
    let before_change = [
        submit_fence(&mut tracker, &old),
        submit_fence(&mut tracker, &old),
    ];
    let new = queue_on(&sim, RingPlacement::Device);
    tracker.note_queue_change(new.clone());
    // The new queue's AQL indices start at 0 again: a later use there sits
    // below the old uses' indices, and must not count for them either.
    let after_change = submit_fence(&mut tracker, &new);
    new.run_until_idle();
    tracker.note_drained();

    assert_eq!(tracker.query(&after_change).unwrap(), Status::Complete);
    for ticket in &before_change {
        assert_eq!(tracker.known_status(ticket).unwrap(), None);
        assert_eq!(tracker.query(ticket).unwrap(), Status::Pending);
    }
    // A later drain (of the same new queue) still says nothing of them.
    tracker.note_drained();
    assert_eq!(tracker.query(&before_change[1]).unwrap(), Status::Pending);

    old.run_until_idle();
    for ticket in &before_change {
        assert_eq!(tracker.query(ticket).unwrap(), Status::Complete);
    }
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn a_drain_says_nothing_of_a_pending_copy_engine_use() {
    let (sim, mut tracker, queue) = tracker_on(retiring);
    let copy_engine = queue_on(&sim, RingPlacement::Host);
    let before = submit_fence(&mut tracker, &queue);
    let copy = tracker.acquire(Request::copy_engine()).unwrap();
    let index = copy_engine.reserve().unwrap();
    submit_kernel(&copy_engine, index, copy.signal, false);
    let after = submit_fence(&mut tracker, &queue);
    queue.run_until_idle();
    tracker.note_drained();

    assert_eq!(tracker.query(&before).unwrap(), Status::Complete);
    assert_eq!(tracker.query(&after).unwrap(), Status::Complete);
    assert_eq!(tracker.known_status(&copy.ticket).unwrap(), None);
    assert_eq!(tracker.query(&copy.ticket).unwrap(), Status::Pending);
    // Its signal was not re-armed under the copy engine either.
    copy_engine.run_until_idle();
    assert_eq!(tracker.query(&copy.ticket).unwrap(), Status::Complete);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

/// A producer (retiring, so its census shows a pinned signal as parked)
/// whose use a consumer of kind `T` waits on, on the same simulator.
fn pinned_across<T: Tracker<Memory = SimMemory, Queue = Queue>>(
    make: fn(Arc<SimMemory>, Queue, Config) -> Result<T, TrackerError>,
) -> (RetiringTracker<SimMemory, Queue>, T, Ticket, Sim) {
    let (sim, mut producer, producer_queue) = tracker_on(retiring);
    let consumer_queue = queue_on(&sim, RingPlacement::Device);
    let memory = Arc::new(SimMemory::new(sim.clone(), consumer_queue.agent()));
    let mut consumer = make(memory, consumer_queue.clone(), Config::default()).unwrap();

    let produced = submit_fence(&mut producer, &producer_queue);
    let pin = producer.pin(&produced).unwrap().expect("pending");
    let index = consumer_queue.reserve().unwrap();
    let waiting = consumer
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    sigretire_sim::backend::submit_wait(
        &consumer_queue,
        index,
        waiting.signal,
        &[pin.packet_handle()],
        true,
    );
    consumer.attach(&waiting.ticket, pin).unwrap();
    sim.run_until_idle();
    producer.poll();
    assert_eq!(
        producer.census().parked,
        1,
        "retired, and pinned by the consumer"
    );
    (producer, consumer, waiting.ticket, sim)
}

#[test]
fn a_drained_baseline_consumer_releases_its_pins() {
    let (mut producer, mut consumer, _waiting, sim) = pinned_across(baseline);
    consumer.note_drained();
    producer.reclaim();
    assert_eq!(producer.census().parked, 0, "the pin was released");
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn a_drained_retiring_consumer_releases_its_pins() {
    let (mut producer, mut consumer, _waiting, sim) = pinned_across(retiring);
    consumer.note_drained();
    producer.reclaim();
    assert_eq!(producer.census().parked, 0, "the pin was released");
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn a_baseline_consumer_releases_a_pin_once_it_knows_its_consumer_complete() {
    let (mut producer, mut consumer, waiting, sim) = pinned_across(baseline);
    assert_eq!(consumer.query(&waiting).unwrap(), Status::Complete);
    producer.reclaim();
    assert_eq!(producer.census().parked, 0, "the pin was released");
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn a_drain_retires_the_current_queue_and_releases_nothing_it_cannot_prove() {
    // The pin's consumer runs on the consumer's *old* queue: a drain of
    // the new queue must keep the pin.
    let (sim, mut producer, producer_queue) = tracker_on(retiring);
    let consumer_old = queue_on(&sim, RingPlacement::Device);
    let memory = Arc::new(SimMemory::new(sim.clone(), consumer_old.agent()));
    let mut consumer =
        RetiringTracker::new(memory, consumer_old.clone(), Config::default()).unwrap();
    let produced = submit_fence(&mut producer, &producer_queue);
    let pin = producer.pin(&produced).unwrap().expect("pending");
    let index = consumer_old.reserve().unwrap();
    let waiting = consumer
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    sigretire_sim::backend::submit_wait(
        &consumer_old,
        index,
        waiting.signal,
        &[pin.packet_handle()],
        true,
    );
    consumer.attach(&waiting.ticket, pin).unwrap();
    let consumer_new = queue_on(&sim, RingPlacement::Device);
    consumer.note_queue_change(consumer_new.clone());
    let later = submit_fence(&mut consumer, &consumer_new);
    producer_queue.run_until_idle();
    consumer_new.run_until_idle();
    consumer.note_drained();
    producer.poll();
    assert_eq!(consumer.query(&later).unwrap(), Status::Complete);
    assert_eq!(consumer.query(&waiting.ticket).unwrap(), Status::Pending);
    assert_eq!(
        producer.census().parked,
        1,
        "the old queue's consumer still waits"
    );
    consumer_old.run_until_idle();
    assert_eq!(consumer.query(&waiting.ticket).unwrap(), Status::Complete);
    consumer.reclaim();
    producer.reclaim();
    assert_eq!(producer.census().parked, 0);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}
