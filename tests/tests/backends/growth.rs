//! Growth and back-pressure: the ring grows up to its limit, then the
//! tracker says which use to wait for instead of blocking.

use crate::support::{Backend, Rig, device_signals, on_every_backend};
use sigretire_tracker::AcquireError;
use sigretire_tracker::{Config, Purpose, Status, Tracker, WaitPolicy, backend::QueueView};
use std::time::Duration;

on_every_backend! {
    adopted;
    the_ring_grows_to_its_limit_then_names_a_fence_to_wait_for,
    the_baseline_grows_when_the_slot_two_ahead_is_busy,
}

fn the_ring_grows_to_its_limit_then_names_a_fence_to_wait_for<B: Backend>() {
    let config = Config {
        initial_size: 4,
        growth_limit: 4,
        refill_batch: 4,
        backpressure_window: 4,
        ..device_signals()
    };
    let mut rig = Rig::<B, _>::retiring(config);
    let mut uses = Vec::new();
    for i in 0..16 {
        uses.push(rig.submit(i % 4 == 3, Purpose::Completion).unwrap());
        rig.check();
    }
    assert_eq!(rig.tracker.stats().ring_growths, 2, "4 -> 8 -> 16");
    let Err(AcquireError::Backpressure {
        wait_for,
        in_flight,
    }) = rig.submit(true, Purpose::Completion)
    else {
        panic!("expected back-pressure");
    };
    assert_eq!(in_flight, 16);
    assert_eq!(
        wait_for.seq(),
        uses[3].ticket.seq(),
        "the newest fence near the front"
    );
    assert_eq!(rig.tracker.stats().backpressure, 1);
    // The caller waits outside its locks, then retries.
    let waiter = rig.tracker.waiter();
    let thread = std::thread::spawn(move || {
        waiter.wait(&wait_for, Duration::from_secs(10), WaitPolicy::spin())
    });
    for _ in 0..4 {
        rig.launch().unwrap();
        let i = rig.queue.read_index();
        rig.complete(i).unwrap();
        rig.advance_read_index().unwrap();
    }
    assert_eq!(thread.join().unwrap(), Ok(Status::Complete));
    rig.submit(true, Purpose::Completion).unwrap();
    rig.check();
    assert_eq!(
        rig.tracker.stats().rearms,
        4,
        "the fence retired the four uses up to it"
    );
}

fn the_baseline_grows_when_the_slot_two_ahead_is_busy<B: Backend>() {
    let config = Config {
        initial_size: 4,
        growth_limit: 4,
        ..Config::default()
    };
    let mut rig = Rig::<B, _>::baseline(config);
    for _ in 0..16 {
        rig.submit(true, Purpose::Completion).unwrap();
    }
    assert!(rig.tracker.stats().ring_growths >= 12);
    assert!(matches!(
        rig.submit(true, Purpose::Completion),
        Err(AcquireError::Backpressure { .. })
    ));
    rig.run();
    rig.submit(true, Purpose::Completion).unwrap();
    rig.check();
}
