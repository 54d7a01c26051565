//! Generations: a queue change (the runtime moved the stream to another
//! hardware queue) starts a new one, and each hardware queue's facts stay
//! its own. A failure of one hardware queue fails its uses and none of
//! another's; the previous queue's uses still retire, by their own
//! generation's fences, and the pins they hold as consumers go with them.

use sigretire_baseline::BaselineTracker;
use sigretire_sim::backend::{SimMemory, submit_barrier};
use sigretire_sim::{Queue, Sim, SimConfig, SimQueueConfig};
use sigretire_tracker::{
    Acquired, Config, CreateError, Generation, Placement, PublishError, Request, RetiringTracker,
    Status, Tracker, Work, backend::HardwareQueue,
};
use std::sync::Arc;

type Make<T> = fn(Arc<SimMemory>, Queue, Config) -> Result<T, CreateError>;

fn retiring(
    memory: Arc<SimMemory>,
    queue: Queue,
    config: Config,
) -> Result<RetiringTracker<SimMemory, Queue>, CreateError> {
    RetiringTracker::new(memory, queue, config)
}

fn baseline(
    memory: Arc<SimMemory>,
    queue: Queue,
    config: Config,
) -> Result<BaselineTracker<SimMemory, Queue>, CreateError> {
    BaselineTracker::new(memory, queue, config)
}

fn queue_on(sim: &Sim) -> Queue {
    sim.create_queue(SimQueueConfig {
        size: 256,
        ..SimQueueConfig::default()
    })
    .unwrap()
}

/// A tracker made by `make` on a stepped simulator's first queue, with
/// device-memory signals.
fn tracker_on<T>(make: Make<T>) -> (Sim, T, Queue) {
    let sim = Sim::new(SimConfig::default());
    let queue = queue_on(&sim);
    let memory = Arc::new(SimMemory::new(sim.clone(), queue.agent()));
    let config = Config {
        signals: Placement::Device,
        ..Config::default()
    };
    let tracker = make(memory, queue.clone(), config).unwrap();
    (sim, tracker, queue)
}

/// A barrier packet with the tracker's signal at `queue`'s next index.
fn submit<T: Tracker<Queue = Queue>>(tracker: &mut T, queue: &Queue) -> Acquired {
    let index = queue.reserve().unwrap();
    let acquired = tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    submit_barrier(queue, index, acquired.signal);
    acquired
}

fn value(sim: &Sim, acquired: &Acquired) -> i64 {
    let signal = sim
        .resolve(sigretire_sim::hsa_sys::hsa_signal_t {
            handle: acquired.signal,
        })
        .unwrap();
    sim.load(signal)
}

/// Three uses pending on the old hardware queue (generation 0), three on
/// the new one (generation 1); the queue of generation `failing` fails.
/// Only its uses fail; the other queue's stay pending, and their signals
/// are not re-armed while their packets still name them: they complete
/// when their queue runs.
fn a_queue_failure_fails_only_its_own_generation<T>(make: Make<T>, failing: u32, name: &str)
where
    T: Tracker<Memory = SimMemory, Queue = Queue>,
{
    let (sim, mut tracker, old) = tracker_on(make);
    let on_old: Vec<Acquired> = (0..3).map(|_| submit(&mut tracker, &old)).collect();
    let new = queue_on(&sim);
    tracker.note_queue_change(new.clone());
    let on_new: Vec<Acquired> = (0..3).map(|_| submit(&mut tracker, &new)).collect();
    assert_eq!(tracker.generation().value(), 1);
    let (failed, healthy, failed_queue, healthy_queue) = if failing == 0 {
        (&on_old, &on_new, &old, &new)
    } else {
        (&on_new, &on_old, &new, &old)
    };
    failed_queue.fail();
    assert_eq!(
        tracker.fail_queue_of(&failed[1].ticket),
        3,
        "{name}: generation {failing}'s three uses"
    );
    for _ in 0..2 {
        tracker.poll();
        tracker.reclaim();
    }
    for acquired in failed {
        assert_eq!(
            tracker.query(&acquired.ticket).unwrap(),
            Status::Failed,
            "{name}"
        );
    }
    for acquired in healthy {
        assert_eq!(
            tracker.known_status(&acquired.ticket).unwrap(),
            None,
            "{name}: the healthy queue's use is still pending"
        );
        assert_eq!(value(&sim, acquired), 1, "{name}: armed, not re-armed");
    }
    assert_eq!(tracker.stats().failed, 3, "{name}");
    healthy_queue.run_until_idle();
    for acquired in healthy {
        assert_eq!(
            tracker.query(&acquired.ticket).unwrap(),
            Status::Complete,
            "{name}"
        );
    }
    assert_eq!(
        tracker.fail_queue_of(&healthy[0].ticket),
        0,
        "{name}: nothing pending"
    );
    assert!(
        sim.violations().is_empty(),
        "{name}: {:?}",
        sim.violations()
    );
}

#[test]
fn the_old_queue_failing_fails_only_its_uses_retiring() {
    a_queue_failure_fails_only_its_own_generation(retiring, 0, "retiring");
}

#[test]
fn the_new_queue_failing_fails_only_its_uses_retiring() {
    a_queue_failure_fails_only_its_own_generation(retiring, 1, "retiring");
}

#[test]
fn the_old_queue_failing_fails_only_its_uses_baseline() {
    a_queue_failure_fails_only_its_own_generation(baseline, 0, "baseline");
}

#[test]
fn the_new_queue_failing_fails_only_its_uses_baseline() {
    a_queue_failure_fails_only_its_own_generation(baseline, 1, "baseline");
}

/// A ticket of the current generation fails what `fail_queue` fails; a
/// copy engine's, or another tracker's, names no hardware queue of the
/// tracker's and fails nothing.
fn a_current_ticket_fails_the_queue_as_fail_queue_does<T>(make: Make<T>, name: &str)
where
    T: Tracker<Memory = SimMemory, Queue = Queue>,
{
    let (sim, mut tracker, queue) = tracker_on(make);
    let uses: Vec<Acquired> = (0..3).map(|_| submit(&mut tracker, &queue)).collect();
    let copy = tracker.acquire(Request::copy_engine()).unwrap();
    let (_, mut stranger, strangers_queue) = tracker_on(make);
    let foreign = submit(&mut stranger, &strangers_queue);
    queue.fail();
    assert_eq!(tracker.fail_queue_of(&copy.ticket), 0, "{name}");
    assert_eq!(tracker.fail_queue_of(&foreign.ticket), 0, "{name}");
    assert_eq!(
        tracker.known_status(&uses[0].ticket).unwrap(),
        None,
        "{name}"
    );
    assert_eq!(tracker.fail_queue_of(&uses[2].ticket), 3, "{name}");
    assert_eq!(tracker.fail_queue(), 0, "{name}: each use fails once");
    assert_eq!(
        tracker.known_status(&copy.ticket).unwrap(),
        None,
        "{name}: the copy engine's"
    );
    assert!(
        sim.violations().is_empty(),
        "{name}: {:?}",
        sim.violations()
    );
}

#[test]
fn a_current_ticket_fails_the_queue_as_fail_queue_does_retiring() {
    a_current_ticket_fails_the_queue_as_fail_queue_does(retiring, "retiring");
}

#[test]
fn a_current_ticket_fails_the_queue_as_fail_queue_does_baseline() {
    a_current_ticket_fails_the_queue_as_fail_queue_does(baseline, "baseline");
}

/// 64 fences on the old hardware queue; the queue changes; the old queue
/// runs them all. One poll retires all 64 with one load (of the old
/// generation's newest fence), and the new generation's uses take their
/// slots: the ring does not grow.
#[test]
fn the_old_queue_retires_with_one_load_and_the_ring_does_not_grow() {
    let (sim, mut tracker, old) = tracker_on(retiring);
    let ring = Config::default().initial_size;
    let on_old: Vec<Acquired> = (0..ring).map(|_| submit(&mut tracker, &old)).collect();
    let new = queue_on(&sim);
    tracker.note_queue_change(new.clone());
    old.run_until_idle();
    let loads = tracker.stats().device().loads;
    tracker.poll();
    assert_eq!(tracker.stats().device().loads - loads, 1, "one load");
    assert_eq!(tracker.stats().retired, ring as u64);
    for acquired in &on_old {
        assert_eq!(
            tracker.known_status(&acquired.ticket).unwrap(),
            Some(Status::Complete)
        );
    }
    let on_new: Vec<Acquired> = (0..ring).map(|_| submit(&mut tracker, &new)).collect();
    assert_eq!(tracker.stats().ring_growths, 0);
    assert_eq!(tracker.census().created, ring);
    // The old generation's fences proved nothing of the new one's.
    for acquired in &on_new {
        assert_eq!(tracker.known_status(&acquired.ticket).unwrap(), None);
    }
    new.run_until_idle();
    tracker.poll();
    assert_eq!(tracker.stats().retired, 2 * ring as u64);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

/// A poll loads the newest fence of each older generation with pending
/// uses at most once, and proves nothing while it is pending.
#[test]
fn a_poll_loads_each_older_generation_once() {
    let (sim, mut tracker, first) = tracker_on(retiring);
    let on_first: Vec<Acquired> = (0..4).map(|_| submit(&mut tracker, &first)).collect();
    let second = queue_on(&sim);
    tracker.note_queue_change(second.clone());
    let on_second: Vec<Acquired> = (0..4).map(|_| submit(&mut tracker, &second)).collect();
    let third = queue_on(&sim);
    tracker.note_queue_change(third.clone());
    let loads = tracker.stats().device().loads;
    tracker.poll();
    assert_eq!(
        tracker.stats().device().loads - loads,
        2,
        "one per older generation"
    );
    assert_eq!(tracker.stats().retired, 0);
    second.run_until_idle();
    tracker.poll();
    assert_eq!(
        tracker.stats().retired,
        0,
        "oldest first: the first queue still runs"
    );
    for acquired in &on_second {
        assert_eq!(
            tracker.known_status(&acquired.ticket).unwrap(),
            Some(Status::Complete),
            "proven by its own generation's fence"
        );
    }
    first.run_until_idle();
    tracker.poll();
    assert_eq!(tracker.stats().retired, 8);
    assert!(
        on_first
            .iter()
            .all(|a| tracker.known_status(&a.ticket).unwrap() == Some(Status::Complete))
    );
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

/// A consumer that waits on a producer's pin, on the consumer's old queue:
/// once the old queue ran it, a poll retires it and its pin goes, so the
/// producer's signal comes back.
#[test]
fn an_old_generations_consumer_lets_go_of_its_pin_once_its_queue_ran_it() {
    let (sim, mut producer, producer_queue) = tracker_on(retiring);
    let consumer_old = queue_on(&sim);
    let memory = Arc::new(SimMemory::new(sim.clone(), consumer_old.agent()));
    let mut consumer =
        RetiringTracker::new(memory, consumer_old.clone(), Config::default()).unwrap();
    let produced = submit(&mut producer, &producer_queue);
    let pin = producer.pin(&produced.ticket).unwrap().expect("pending");
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
    let consumer_new = queue_on(&sim);
    consumer.note_queue_change(consumer_new.clone());
    producer_queue.run_until_idle();
    consumer_old.run_until_idle();
    producer.poll();
    assert_eq!(
        producer.census().parked,
        1,
        "pinned while the consumer is not known done"
    );
    consumer.poll();
    assert_eq!(consumer.census().pins, 0, "its consumer retired");
    producer.reclaim();
    assert_eq!(producer.census().parked, 0, "the pin was released");
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

/// A use acquired before a queue change, its slot reserved on the old
/// hardware queue: the tracker refuses to publish it on the new queue
/// (where its index is another slot) and writes nothing there. Published
/// on the queue it was reserved on, it runs and retires there. A current
/// use publishes; another tracker's publication is refused.
fn a_stale_publication_is_refused<T>(make: Make<T>, name: &str)
where
    T: Tracker<Memory = SimMemory, Queue = Queue>,
{
    let (sim, mut tracker, old) = tracker_on(make);
    let index = old.reserve().unwrap();
    let before = tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    let new = queue_on(&sim);
    tracker.note_queue_change(new.clone());
    let refused = tracker.publish(before.publication, Work::Kernel(0));
    assert_eq!(
        refused,
        Err(PublishError::Stale {
            index,
            made: Generation::new(0, 32),
            current: Generation::new(1, 32),
        }),
        "{name}"
    );
    assert!(
        refused.unwrap_err().to_string().contains("reserved on"),
        "{name}: says what to do"
    );
    assert_eq!(new.write_index(), 0, "{name}: nothing reserved there");
    assert!(
        !new.truth(index).is_some_and(|p| p.published),
        "{name}: nothing written"
    );

    // Where it was reserved, it runs.
    old.publish(before.publication, Work::Kernel(0)).unwrap();
    let index = new.reserve().unwrap();
    let after = tracker
        .acquire(Request::packet(index).barrier(true))
        .unwrap();
    assert_eq!(
        tracker.publish(after.publication, Work::Kernel(0)),
        Ok(()),
        "{name}"
    );
    sim.run_until_idle();
    tracker.poll();
    assert_eq!(
        tracker.query(&before.ticket).unwrap(),
        Status::Complete,
        "{name}"
    );
    assert_eq!(
        tracker.query(&after.ticket).unwrap(),
        Status::Complete,
        "{name}"
    );

    // Another tracker's publication.
    let (_, mut stranger, strangers_queue) = tracker_on(make);
    let index = strangers_queue.reserve().unwrap();
    let foreign = stranger.acquire(Request::packet(index)).unwrap();
    assert_eq!(
        tracker.publish(foreign.publication, Work::Kernel(0)),
        Err(PublishError::Foreign { index }),
        "{name}"
    );
    assert!(
        sim.violations().is_empty(),
        "{name}: {:?}",
        sim.violations()
    );
}

#[test]
fn a_stale_publication_is_refused_retiring() {
    a_stale_publication_is_refused(retiring, "retiring");
}

#[test]
fn a_stale_publication_is_refused_baseline() {
    a_stale_publication_is_refused(baseline, "baseline");
}
