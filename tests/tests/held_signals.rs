//! A signal someone else holds (an event's reference, a GPU waiter's pin)
//! is never re-armed, whatever fails around it: an allocation of its
//! replacement, a wrong call to `attach`.

use sigretire_baseline::BaselineTracker;
use sigretire_sim::Sim;
use sigretire_sim::backend::{SimMemory, submit_kernel};
use sigretire_tracker::{AcquireError, ForeignTicket};
use sigretire_tracker::{
    Config, Placement, Request, RetiringTracker, Status, Tracker, Work,
    backend::{HardwareQueue, Publication},
};
use std::sync::Arc;

type Baseline = BaselineTracker<SimMemory, sigretire_sim::Queue>;
type Retiring = RetiringTracker<SimMemory, sigretire_sim::Queue>;

fn stepped(
    initial_size: usize,
    growth_limit: usize,
) -> (Sim, sigretire_sim::Queue, Arc<SimMemory>, Config) {
    let (sim, queue) = sigretire_sim::backend::stepped_queue();
    let memory = Arc::new(SimMemory::new(sim.clone(), queue.agent()));
    let config = Config {
        initial_size,
        growth_limit,
        signals: Placement::Device,
        refill_batch: 1,
        ..Config::default()
    };
    (sim, queue, memory, config)
}

/// Acquires one use for an empty kernel at the queue's next index and
/// publishes it (not run).
fn submit<T: Tracker<Queue = sigretire_sim::Queue>>(
    tracker: &mut T,
    queue: &sigretire_sim::Queue,
) -> Result<sigretire_tracker::Acquired, AcquireError> {
    let index = queue.write_index();
    let acquired = tracker.acquire(Request::packet(index).barrier(true))?;
    assert_eq!(queue.reserve().unwrap(), index);
    submit_kernel(queue, index, acquired.signal, true);
    Ok(acquired)
}

#[test]
fn the_baseline_never_rearms_a_held_signal_when_its_replacement_cannot_be_allocated() {
    let (sim, queue, memory, config) = stepped(2, 1);
    let mut baseline = Baseline::new(memory, queue.clone(), config).unwrap();
    let held_use = submit(&mut baseline, &queue).unwrap();
    let event = baseline.hold(&held_use.ticket).unwrap().expect("pending");
    submit(&mut baseline, &queue).unwrap();
    queue.run_until_idle();
    let held = sim
        .resolve(sigretire_sim::hsa_sys::hsa_signal_t {
            handle: held_use.signal,
        })
        .unwrap();
    assert_eq!(sim.load(held), 0, "its use completed");

    // The next use takes the held signal's slot: its replacement cannot be
    // allocated, twice in a row.
    for _ in 0..2 {
        sim.fail_allocations(1);
        let refused = baseline.acquire(Request::packet(queue.write_index()).barrier(true));
        assert!(
            matches!(refused, Err(AcquireError::OutOfSignals(_))),
            "{refused:?}"
        );
        assert_eq!(sim.load(held), 0, "the held signal was not re-armed");
    }
    let acquired = submit(&mut baseline, &queue).unwrap();
    assert_ne!(
        acquired.signal, held_use.signal,
        "a new signal, not the held one"
    );
    assert_eq!(sim.load(held), 0);
    assert_eq!(event.status(), Status::Complete);
    queue.run_until_idle();
    assert_eq!(baseline.query(&acquired.ticket).unwrap(), Status::Complete);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    assert!(baseline.census().is_balanced(), "{:?}", baseline.census());
}

#[test]
fn the_baseline_uses_a_free_slot_when_growth_cannot_allocate() {
    let (sim, queue, memory, config) = stepped(4, 4);
    let mut baseline = Baseline::new(memory, queue.clone(), config).unwrap();
    // Three pending uses: the slot two ahead of the next one is busy, so
    // the baseline would grow; the slot after the newest is still free.
    for _ in 0..3 {
        submit(&mut baseline, &queue).unwrap();
    }
    sim.fail_allocations(1);
    let acquired = submit(&mut baseline, &queue).expect("a free slot needs no new signal");
    assert_eq!(baseline.census().in_flight, 4);
    queue.run_until_idle();
    assert_eq!(baseline.query(&acquired.ticket).unwrap(), Status::Complete);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

/// Attach a pin to a ticket `consumer` does not own: the call fails, and
/// the caller gets the pin back, still holding the producer's signal.
fn attach_to_a_foreign_ticket_returns_the_pin<C>(consumer: &mut C, sim: &Sim)
where
    C: Tracker<Memory = SimMemory, Queue = sigretire_sim::Queue>,
{
    let (_other_sim, other_queue) = sigretire_sim::backend::stepped_queue();
    let producer_queue = sim
        .create_queue(sigretire_sim::SimQueueConfig {
            size: 64,
            ..sigretire_sim::SimQueueConfig::default()
        })
        .unwrap();
    let memory = Arc::new(SimMemory::new(sim.clone(), producer_queue.agent()));
    let mut producer = Retiring::new(memory, producer_queue.clone(), Config::default()).unwrap();
    let produced = submit(&mut producer, &producer_queue).unwrap();
    let pin = producer.pin(&produced.ticket).unwrap().expect("pending");

    let (mut stranger, _) = sigretire_sim::backend::stepped_tracker(Config::default()).unwrap();
    let foreign = submit(&mut stranger, &other_queue).unwrap().ticket;
    let refused = consumer.attach(&foreign, pin).unwrap_err();
    assert_eq!(refused.error, ForeignTicket);
    let pin = refused.pin;

    producer_queue.run_until_idle();
    producer.poll();
    assert_eq!(
        producer.census().parked,
        1,
        "the pin still holds the signal"
    );
    let producer_signal = sim
        .resolve(sigretire_sim::hsa_sys::hsa_signal_t {
            handle: produced.signal,
        })
        .unwrap();
    assert_eq!(sim.load(producer_signal), 0, "not re-armed under the pin");
    drop(pin);
    producer.reclaim();
    assert_eq!(producer.census().parked, 0);
}

#[test]
fn attach_to_a_foreign_ticket_returns_the_pin_retiring() {
    let (sim, queue, memory, config) = stepped(4, 1);
    let mut consumer = Retiring::new(memory, queue, config).unwrap();
    attach_to_a_foreign_ticket_returns_the_pin(&mut consumer, &sim);
}

#[test]
fn attach_to_a_foreign_ticket_returns_the_pin_baseline() {
    let (sim, queue, memory, config) = stepped(4, 1);
    let mut consumer = Baseline::new(memory, queue, config).unwrap();
    attach_to_a_foreign_ticket_returns_the_pin(&mut consumer, &sim);
}

#[test]
fn the_retiring_tracker_keeps_a_held_signal_when_no_spare_can_be_allocated() {
    let (sim, queue, memory, config) = stepped(2, 1);
    let mut retiring = Retiring::new(memory, queue.clone(), config).unwrap();
    let held_use = submit(&mut retiring, &queue).unwrap();
    let event = retiring.hold(&held_use.ticket).unwrap().expect("pending");
    submit(&mut retiring, &queue).unwrap();
    queue.run_until_idle();
    let held = sim
        .resolve(sigretire_sim::hsa_sys::hsa_signal_t {
            handle: held_use.signal,
        })
        .unwrap();
    // The held use's slot can only be freed with a spare in its place.
    sim.fail_allocations(u64::MAX);
    for _ in 0..2 {
        let refused = retiring.acquire(Request::packet(queue.write_index()).barrier(true));
        assert!(
            matches!(refused, Err(AcquireError::SignalsHeld { held: 1 })),
            "{refused:?}"
        );
        assert_eq!(sim.load(held), 0, "the held signal was not re-armed");
    }
    drop(event);
    let next = submit(&mut retiring, &queue).unwrap();
    queue.run_until_idle();
    assert_eq!(retiring.query(&next.ticket).unwrap(), Status::Complete);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

/// A consumer whose submission failed after issuing its barrier-AND on a
/// pinned producer use: asking about the failed consumer (`query`, `hold`,
/// `pin`), or attaching the pin only after the failure (`attached_late`),
/// lets go of nothing while that barrier still waits. The producer's use
/// completes meanwhile: its signal stays parked, not re-armed under the
/// barrier, until the consumer's issued packet has passed.
fn a_failed_consumer_keeps_its_pin_while_its_issued_barrier_waits<C>(attached_late: bool)
where
    C: Tracker<Memory = SimMemory, Queue = sigretire_sim::Queue>,
    C: MadeOnTheSimulator,
{
    let (sim, consumer_queue, memory, config) = stepped(4, 1);
    let producer_queue = sim
        .create_queue(sigretire_sim::SimQueueConfig {
            size: 64,
            ..sigretire_sim::SimQueueConfig::default()
        })
        .unwrap();
    let mut producer = Retiring::new(memory.clone(), producer_queue.clone(), config).unwrap();
    let mut consumer = C::make(memory, consumer_queue.clone(), config);
    let produced = submit(&mut producer, &producer_queue).unwrap();
    let pin = producer.pin(&produced.ticket).unwrap().expect("pending");

    // One use of two operations on the consumer: only the first, the
    // barrier-AND on the producer's signal, was issued.
    let first = consumer_queue.reserve().unwrap();
    let last = consumer_queue.reserve().unwrap();
    let consumed = consumer.acquire(Request::packet(last).ops(2)).unwrap();
    let parts: Vec<Publication> = consumed.publication.operations().collect();
    assert_eq!(parts[0].index(), first);
    consumer_queue
        .publish(parts[0], Work::Wait(&[pin.packet_handle()]))
        .unwrap();
    consumer_queue
        .publish(parts[1].without_completion(), Work::Marker)
        .unwrap();
    let pin = if attached_late {
        Some(pin)
    } else {
        consumer.attach(&consumed.ticket, pin).unwrap();
        None
    };
    consumer.fail_submission(&consumed.ticket, 1).unwrap();
    if let Some(pin) = pin {
        consumer.attach(&consumed.ticket, pin).unwrap();
    }
    assert_eq!(consumer.query(&consumed.ticket).unwrap(), Status::Failed);
    assert!(consumer.hold(&consumed.ticket).unwrap().is_none());
    assert!(consumer.pin(&consumed.ticket).is_err());
    consumer.poll();
    assert_eq!(
        consumer.census().pins,
        1,
        "the issued barrier still waits on the producer's signal"
    );

    // The producer's use completes: its signal must not be re-armed while
    // the consumer's barrier still waits on it.
    producer_queue.run_until_idle();
    producer.poll();
    assert_eq!(producer.census().parked, 1, "parked under the pin");
    let producer_signal = sim
        .resolve(sigretire_sim::hsa_sys::hsa_signal_t {
            handle: produced.signal,
        })
        .unwrap();
    assert_eq!(
        sim.load(producer_signal),
        0,
        "not re-armed under the barrier"
    );

    // The barrier passes: now the pin goes.
    consumer_queue.run_until_idle();
    assert_eq!(consumer.query(&consumed.ticket).unwrap(), Status::Failed);
    consumer.poll();
    let next = submit(&mut consumer, &consumer_queue).unwrap();
    consumer_queue.run_until_idle();
    assert_eq!(consumer.query(&next.ticket).unwrap(), Status::Complete);
    assert_eq!(consumer.census().pins, 0, "its issued part passed");
    producer.reclaim();
    assert_eq!(producer.census().parked, 0);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

/// A tracker made on a stepped simulator, for the tests generic over both.
trait MadeOnTheSimulator {
    fn make(memory: Arc<SimMemory>, queue: sigretire_sim::Queue, config: Config) -> Self;
}

impl MadeOnTheSimulator for Retiring {
    fn make(memory: Arc<SimMemory>, queue: sigretire_sim::Queue, config: Config) -> Self {
        Retiring::new(memory, queue, config).unwrap()
    }
}

impl MadeOnTheSimulator for Baseline {
    fn make(memory: Arc<SimMemory>, queue: sigretire_sim::Queue, config: Config) -> Self {
        Baseline::new(memory, queue, config).unwrap()
    }
}

#[test]
fn a_failed_consumer_keeps_its_pin_while_its_issued_barrier_waits_retiring() {
    a_failed_consumer_keeps_its_pin_while_its_issued_barrier_waits::<Retiring>(false);
    a_failed_consumer_keeps_its_pin_while_its_issued_barrier_waits::<Retiring>(true);
}

#[test]
fn a_failed_consumer_keeps_its_pin_while_its_issued_barrier_waits_baseline() {
    a_failed_consumer_keeps_its_pin_while_its_issued_barrier_waits::<Baseline>(false);
}

#[test]
fn a_failed_consumer_attached_late_keeps_its_pin_baseline() {
    a_failed_consumer_keeps_its_pin_while_its_issued_barrier_waits::<Baseline>(true);
}
