//! Shared signals: events and handlers hold references, GPU waiters hold
//! pins; retired held signals are parked and come back once released.

use crate::support::{Backend, Issued, Refused, Retiring, Rig, device_signals, on_every_backend};
use sigretire_tracker::{Config, Purpose, Status, Tracker, WaitPolicy};

on_every_backend! {
    adopted;
    a_held_signal_is_parked_and_an_armed_spare_takes_its_place,
    holding_a_complete_use_holds_nothing,
    references_wait_and_report_from_any_thread,
    no_signal_is_created_in_steady_state_with_events_held_and_released,
    a_gpu_waiter_pins_the_signal_until_its_consumer_retires,
    a_use_known_complete_yields_no_dependency,
    a_drained_consumer_queue_releases_its_pins,
    the_baseline_replaces_shared_signals_with_new_ones,
}

fn a_held_signal_is_parked_and_an_armed_spare_takes_its_place<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let event = rig.submit(true, Purpose::Event).unwrap();
    let reference = rig.hold(&event).expect("pending");
    rig.run();
    rig.poll();
    assert_eq!(rig.tracker.census().parked, 1);
    assert_eq!(rig.tracker.stats().parks, 1);
    // The holder reads its outcome from host memory: no load.
    let loads = rig.tracker.stats().device().loads;
    assert_eq!(reference.known_status(), Some(Status::Complete));
    assert_eq!(rig.tracker.stats().device().loads, loads);
    // New uses never get the parked signal.
    for _ in 0..200 {
        let u = rig.submit(true, Purpose::Completion).unwrap();
        assert_ne!(u.signal, event.signal, "a parked signal is never reused");
        rig.run();
        rig.poll();
    }
    // The last reference is dropped on another thread, without the lock.
    std::thread::spawn(move || drop(reference)).join().unwrap();
    rig.tracker.reclaim();
    rig.check();
    let census = rig.tracker.census();
    assert_eq!((census.parked, rig.tracker.stats().unparks), (0, 1));
}

fn holding_a_complete_use_holds_nothing<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let u = rig.submit(true, Purpose::Event).unwrap();
    rig.run();
    assert_eq!(rig.status(&u), Status::Complete);
    assert!(rig.hold(&u).is_none());
}

fn references_wait_and_report_from_any_thread<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let u = rig.submit(true, Purpose::Event).unwrap();
    let reference = rig.hold(&u).unwrap();
    let clone = reference.clone();
    let waiting = std::thread::spawn(move || {
        clone.wait(std::time::Duration::from_secs(10), WaitPolicy::blocking())
    });
    rig.run_queue();
    assert_eq!(waiting.join().unwrap(), Ok(Status::Complete));
    drop(reference);
    rig.poll();
    assert_eq!(
        rig.tracker.census().parked,
        0,
        "all references gone before the retirement: re-armed directly"
    );
}

fn no_signal_is_created_in_steady_state_with_events_held_and_released<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let mut held = std::collections::VecDeque::new();
    let mut created_after_warmup = None;
    for round in 0..2000 {
        let u = rig.submit(true, Purpose::Event).unwrap();
        held.push_back(rig.hold(&u).unwrap());
        if held.len() > 8 {
            held.pop_front(); // the user destroys an old event
        }
        rig.run_queue();
        if round % 16 == 0 {
            rig.poll();
        }
        if round == 500 {
            created_after_warmup = Some(rig.tracker.stats().signals_created);
        }
    }
    rig.check();
    assert_eq!(
        Some(rig.tracker.stats().signals_created),
        created_after_warmup
    );
    let stats = rig.tracker.stats();
    assert!(stats.unparks > 500, "{stats:?}");
    assert_eq!(
        stats.unparks,
        stats.parks - rig.tracker.census().parked as u64
    );
}

/// Two trackers on queues of one machine: the producer's GPU-waiter use,
/// pinned, is the dependency of a barrier-AND the consumer published (its
/// use, `consuming`, holds the pin).
struct Pinned<B: Backend> {
    producer: Rig<B, Retiring<B>>,
    consumer: Rig<B, Retiring<B>>,
    consuming: Issued<B::Queue>,
}

fn pinned<B: Backend>() -> Pinned<B> {
    let mut producer = Rig::<B, _>::retiring(device_signals());
    let mut consumer = producer.neighbour(device_signals());
    let consuming = producer.cross_queue_wait(&mut consumer);
    Pinned {
        producer,
        consumer,
        consuming,
    }
}

fn a_gpu_waiter_pins_the_signal_until_its_consumer_retires<B: Backend>() {
    let Pinned {
        mut producer,
        mut consumer,
        consuming,
    } = pinned::<B>();
    assert_eq!(consumer.launch(), Ok(0));
    assert_eq!(
        consumer.complete(0),
        Err(Refused::NotReady),
        "the barrier waits for the producer"
    );

    producer.run();
    producer.poll();
    assert_eq!(producer.tracker.census().parked, 1, "retired but pinned");
    // Producer keeps going: the pinned signal is never re-armed meanwhile.
    for _ in 0..100 {
        producer.submit(true, Purpose::Completion).unwrap();
        producer.run();
        producer.poll();
    }
    producer.check(); // no re-arm under the waiting barrier
    consumer.run();
    assert_eq!(consumer.status(&consuming), Status::Complete);
    consumer.tracker.reclaim(); // the consumer retires: the pin drops
    producer.tracker.reclaim();
    producer.check();
    consumer.check();
    assert_eq!(producer.tracker.census().parked, 0);
}

fn a_use_known_complete_yields_no_dependency<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let u = rig.submit(true, Purpose::GpuWaiter).unwrap();
    rig.run();
    rig.poll();
    assert!(rig.tracker.pin(&u.ticket).unwrap().is_none());
    assert_eq!(rig.tracker.stats().dependencies_elided, 1);
}

fn a_drained_consumer_queue_releases_its_pins<B: Backend>() {
    let Pinned {
        mut producer,
        mut consumer,
        ..
    } = pinned::<B>();
    producer.run();
    consumer.run();
    consumer.tracker.note_drained();
    producer.poll();
    consumer.check();
    assert_eq!(producer.tracker.census().parked, 0);
}

fn the_baseline_replaces_shared_signals_with_new_ones<B: Backend>() {
    let mut rig = Rig::<B, _>::baseline(Config {
        initial_size: 4,
        ..device_signals()
    });
    let event = rig.submit(true, Purpose::Event).unwrap();
    let _reference = rig.hold(&event).unwrap();
    let created = rig.tracker.stats().signals_created;
    for _ in 0..8 {
        rig.submit(true, Purpose::Completion).unwrap();
        rig.run();
    }
    rig.check();
    assert_eq!(
        rig.tracker.stats().signals_created,
        created + 1,
        "one new signal for the held one"
    );
    assert_eq!(rig.tracker.census().retired, 1);
}
