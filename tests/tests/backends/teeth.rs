//! Teeth of the rig's checks: one small scenario for each bug of
//! `tracker/src/planted.rs`. Each passes on the tracker as it is; with its
//! bug planted, the rig's checks fail it, naming the invariant of docs/design.md
//! section 6 that the bug breaks (as the property driver names it,
//! `sigretire_scenarios::Check`). In a normal build they are plain
//! scenarios; built with `--cfg sigretire_planted` (the planted bugs exist
//! only there), each also runs again with its bug planted:
//!
//! ```sh
//! RUSTFLAGS="--cfg sigretire_planted" CARGO_TARGET_DIR=target/teeth \
//!   cargo test -p sigretire-scenarios --test backends teeth
//! ```
//!
//! A planted bug is switched on for the whole process, so a scenario runs
//! with its bug in a child process of this test binary (the switch read
//! from `TRACKER_PLANTED_BUG`), never beside the other scenarios.

use crate::support::{Backend, Machine, Rig, device_signals, on_every_backend};
use sigretire_tracker::{Config, Placement, Purpose, Request, Tracker};

on_every_backend! {
    adopted;
    a_held_signal_is_never_handed_out_again,
    the_read_index_passing_a_fence_does_not_complete_it,
    a_new_generations_fence_proves_nothing_about_an_old_use,
    stamps_asked_for_after_the_signal_moved_on_are_the_uses_own,
    every_rearm_of_a_device_signal_is_fenced_before_publication,
    a_host_ring_sees_every_rearm_flushed_before_publication,
    a_pin_outlives_the_use_before_its_consumer,
}

/// `RearmHeldSignal` breaks it: the held signal is re-armed at retirement
/// and handed out again ([`Check::RearmWhileHeld`](sigretire_scenarios::Check)).
fn a_held_signal_is_never_handed_out_again<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let event = rig.submit(true, Purpose::Event).unwrap();
    let held = rig.hold(&event).expect("pending");
    rig.run();
    rig.poll();
    // Round the ring of 64 twice.
    for _ in 0..128 {
        rig.submit(true, Purpose::Completion).unwrap();
        rig.run();
        rig.poll();
    }
    drop(held);
    rig.poll();
}

/// `TrustReadIndex` breaks it: the fence the read index passed counts as
/// complete without a load ([`Check::EarlyCompletion`](sigretire_scenarios::Check)).
fn the_read_index_passing_a_fence_does_not_complete_it<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    rig.submit(false, Purpose::Completion).unwrap();
    rig.submit(true, Purpose::Completion).unwrap();
    assert_eq!(rig.launch(), Ok(0));
    rig.complete(0).unwrap();
    assert_eq!(rig.launch(), Ok(1));
    // The processor consumed both packets; the fence has not completed.
    assert_eq!(rig.advance_read_index(), Ok(1));
    assert_eq!(rig.advance_read_index(), Ok(2));
    rig.poll();
    rig.complete(1).unwrap();
    rig.poll();
}

/// `RetireAcrossGenerations` breaks it: the new queue's fence proves the
/// old queue's use, which never ran
/// ([`Check::CrossGeneration`](sigretire_scenarios::Check)).
fn a_new_generations_fence_proves_nothing_about_an_old_use<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    rig.submit(false, Purpose::Completion).unwrap();
    let old_queue = rig.queue.clone();
    rig.change_queue(rig.gpu.queue());
    rig.submit(true, Purpose::Completion).unwrap();
    rig.run();
    rig.poll();
    rig.gpu.run(&old_queue);
    rig.poll();
}

/// `HarvestAfterRearm` breaks it: a use's stamps are read from its signal
/// when asked for, after a later use of the signal overwrote them
/// ([`Check::Timestamps`](sigretire_scenarios::Check)).
fn stamps_asked_for_after_the_signal_moved_on_are_the_uses_own<B: Backend>() {
    let config = Config {
        initial_size: 4,
        growth_limit: 1,
        ..device_signals()
    };
    let mut rig = Rig::<B, _>::retiring(config);
    let timed = |rig: &mut Rig<B, _>| {
        let request = Request::packet(rig.write_index()).barrier(true).timed(true);
        let u = rig.submit_request(request, &[]).unwrap();
        rig.run();
        rig.poll();
        u
    };
    let first = timed(&mut rig);
    let mut last = None;
    // Every slot of the ring serves other timed uses.
    for _ in 0..8 {
        last = Some(timed(&mut rig));
    }
    // The first use's stamps went with its slot (or are its own).
    rig.timestamps(&first);
    let last = last.unwrap();
    assert!(rig.timestamps(&last).is_some(), "its slot kept them");
}

/// `SkipStoreFence` breaks it: re-armed device-memory signals are handed
/// out with no store fence before the packets that use them
/// ([`Check::PublishOrder`](sigretire_scenarios::Check)).
fn every_rearm_of_a_device_signal_is_fenced_before_publication<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    churn(&mut rig);
}

/// `SkipHdpFlush` breaks it: through a ring in system memory, re-armed
/// device-memory signals are fenced but not flushed
/// ([`Check::PublishOrder`](sigretire_scenarios::Check)).
fn a_host_ring_sees_every_rearm_flushed_before_publication<B: Backend>() {
    let machine = Machine {
        ring: Placement::Host,
        ..Machine::default()
    };
    let mut rig = Rig::<B, _>::retiring_on(device_signals(), machine);
    churn(&mut rig);
}

/// Uses enough for every slot of the ring to be re-armed and used again,
/// checked after each batch.
fn churn<B: Backend, T: Tracker<Memory = B::Memory, Queue = B::Queue>>(rig: &mut Rig<B, T>) {
    for i in 0..256 {
        rig.submit(i % 4 == 3, Purpose::Completion).unwrap();
        if i % 8 == 7 {
            rig.run();
            rig.poll();
        }
    }
}

/// `DropPinEarly` breaks it: the consumer's use before the one that waits
/// releases the pin, and the producer re-arms the signal while the
/// consumer's barrier still waits on it
/// ([`Check::RearmWhileInFlight`](sigretire_scenarios::Check)).
fn a_pin_outlives_the_use_before_its_consumer<B: Backend>() {
    let mut producer = Rig::<B, _>::retiring(device_signals());
    let mut consumer = producer.neighbour(device_signals());
    consumer.submit(true, Purpose::Completion).unwrap();
    consumer.run();
    producer.cross_queue_wait(&mut consumer);
    consumer.poll(); // retires the use before the consumer
    producer.run();
    producer.poll();
    // The producer goes on; its pinned signal must not be re-armed while
    // the consumer's barrier has not seen it.
    for _ in 0..128 {
        producer.submit(true, Purpose::Completion).unwrap();
        producer.run();
        producer.poll();
    }
    consumer.run();
    consumer.poll();
    producer.poll();
}

#[cfg(sigretire_planted)]
mod planted {
    use sigretire_scenarios::Check;
    use sigretire_tracker::planted::Bug;

    fn caught(bug: Bug, backend: &str, scenario: &str, check: Check) {
        crate::support::caught_in_child(bug, "teeth", backend, scenario, check);
    }

    /// One test per bug, running its scenario on the backends named (every
    /// backend unless said otherwise).
    macro_rules! teeth {
        ($($test:ident: $bug:ident in $scenario:ident names $check:ident $(on $($backend:literal),+)?;)*) => {
            $(
                #[test]
                fn $test() {
                    let backends: &[&str] = teeth!(@backends $($($backend),+)?);
                    for backend in backends {
                        caught(Bug::$bug, backend, stringify!($scenario), Check::$check);
                    }
                }
            )*
        };
        (@backends) => { &["sim", "rocr"] };
        (@backends $($backend:literal),+) => { &[$($backend),+] };
    }

    teeth! {
        rearm_held_signal: RearmHeldSignal
            in a_held_signal_is_never_handed_out_again names RearmWhileHeld;
        trust_read_index: TrustReadIndex
            in the_read_index_passing_a_fence_does_not_complete_it names EarlyCompletion;
        retire_across_generations: RetireAcrossGenerations
            in a_new_generations_fence_proves_nothing_about_an_old_use names CrossGeneration;
        harvest_after_rearm: HarvestAfterRearm
            in stamps_asked_for_after_the_signal_moved_on_are_the_uses_own names Timestamps;
        drop_pin_early: DropPinEarly
            in a_pin_outlives_the_use_before_its_consumer names RearmWhileInFlight;
        // The ROCr stand-in cannot see a missing store fence or HDP flush
        // (its stores to "VRAM" are plain host stores: rocr_standin's docs,
        // "What only real hardware can show"); the simulator can.
        skip_store_fence: SkipStoreFence
            in every_rearm_of_a_device_signal_is_fenced_before_publication names PublishOrder
            on "sim";
        skip_hdp_flush: SkipHdpFlush
            in a_host_ring_sees_every_rearm_flushed_before_publication names PublishOrder
            on "sim";
    }
}
