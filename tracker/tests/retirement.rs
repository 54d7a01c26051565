//! Retirement proofs, generations and drains, each step checked against the
//! simulator's ground truth.

mod support;

use support::Rig;
use tracker::{Config, Error, Placement, Purpose, Request, Status, Tracker};

fn device() -> Config {
    Config {
        signals: Placement::Device,
        ..Config::default()
    }
}

#[test]
fn one_probe_of_the_newest_fence_retires_a_batch() {
    let mut rig = Rig::retiring(device());
    let uses: Vec<_> = (0..64)
        .map(|i| rig.submit(i % 8 == 7, Purpose::Completion).unwrap())
        .collect();
    rig.run();
    rig.tracker.poll();
    rig.check();
    for u in &uses {
        assert_eq!(
            rig.tracker.known_status(&u.ticket).unwrap(),
            Some(Status::Complete)
        );
    }
    let stats = rig.tracker.stats();
    assert_eq!(stats.device().loads, 1, "one load for the whole batch");
    assert_eq!(stats.probes, 1);
    assert_eq!(stats.retired, 64);
    assert_eq!(stats.retired_by_fence, 64);
}

#[test]
fn the_read_index_alone_is_never_trusted() {
    let mut rig = Rig::retiring(device());
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    // The processor consumes the packet (read index passes it) but it has
    // not completed.
    assert_eq!(rig.queue.launch().unwrap(), 0);
    rig.queue.advance_read_index().unwrap();
    assert_eq!(rig.queue.read_index(), 1);
    rig.tracker.poll();
    rig.check();
    assert_eq!(rig.tracker.known_status(&fence.ticket).unwrap(), None);
    assert_eq!(
        rig.tracker.stats().probes,
        1,
        "the nominated fence was loaded"
    );
    rig.queue.complete(0).unwrap();
    rig.tracker.poll();
    rig.check();
    assert_eq!(
        rig.tracker.known_status(&fence.ticket).unwrap(),
        Some(Status::Complete)
    );
}

#[test]
fn uses_after_the_nominated_fence_stay_pending() {
    let mut rig = Rig::retiring(device());
    let first = rig.submit(true, Purpose::Completion).unwrap();
    let later: Vec<_> = (0..3)
        .map(|_| rig.submit(false, Purpose::Completion).unwrap())
        .collect();
    // Complete only the fence.
    rig.queue.launch().unwrap();
    rig.queue.complete(0).unwrap();
    rig.queue.advance_read_index().unwrap();
    rig.tracker.poll();
    rig.check();
    assert_eq!(
        rig.tracker.known_status(&first.ticket).unwrap(),
        Some(Status::Complete)
    );
    for u in &later {
        assert_eq!(rig.tracker.known_status(&u.ticket).unwrap(), None);
    }
}

#[test]
fn out_of_order_completions_retire_only_through_a_fence_or_their_own_signal() {
    let config = sim::QueueConfig {
        out_of_order: true,
        ..support::queue_config()
    };
    let mut rig = Rig::retiring_on(device(), config);
    let kernels: Vec<_> = (0..4)
        .map(|_| rig.submit(false, Purpose::Completion).unwrap())
        .collect();
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    for _ in 0..4 {
        rig.queue.launch().unwrap();
    }
    for i in 0..4 {
        rig.queue.advance_read_index().unwrap();
        let _ = i;
    }
    // Kernel 2 finishes first: its own signal proves it, no one else.
    rig.queue.complete(2).unwrap();
    assert_eq!(rig.status(&kernels[2]), Status::Complete);
    rig.tracker.reclaim();
    rig.check();
    assert_eq!(rig.tracker.known_status(&kernels[0].ticket).unwrap(), None);
    assert_eq!(
        rig.tracker.stats().rearms,
        0,
        "reclaim stops at the first busy use"
    );
    for i in [0, 1, 3] {
        rig.queue.complete(i).unwrap();
    }
    rig.queue.launch().unwrap();
    rig.queue.complete(4).unwrap();
    rig.queue.advance_read_index().unwrap();
    rig.tracker.poll();
    rig.check();
    assert!(
        kernels
            .iter()
            .chain([&fence])
            .all(|u| rig.tracker.known_status(&u.ticket).unwrap() == Some(Status::Complete))
    );
    assert_eq!(rig.tracker.stats().rearms, 5);
}

#[test]
fn a_queue_change_keeps_fences_from_proving_another_generations_uses() {
    let mut rig = Rig::retiring(device());
    let old = rig.submit(false, Purpose::Completion).unwrap();
    let old_queue = rig.queue.clone();
    let new_queue = rig.sim.create_queue(support::queue_config()).unwrap();
    rig.tracker.note_queue_change(new_queue.clone());
    assert_eq!(rig.tracker.generation().value(), 1);
    rig.queue = new_queue;
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    assert_eq!(fence.ticket.generation().value(), 1);
    rig.run(); // the new queue's fence completes; the old use does not
    rig.tracker.poll();
    rig.check();
    assert_eq!(
        rig.tracker.known_status(&fence.ticket).unwrap(),
        Some(Status::Complete)
    );
    assert_eq!(rig.tracker.known_status(&old.ticket).unwrap(), None);
    // The old use retires by its own signal once its queue runs.
    old_queue.run_until_idle();
    assert_eq!(rig.tracker.query(&old.ticket).unwrap(), Status::Complete);
    assert_eq!(rig.tracker.stats().retired_by_load, 1);
}

#[test]
fn a_narrow_generation_counter_wraps_without_confusing_generations() {
    let config = Config {
        generation_bits: 1,
        ..device()
    };
    let mut rig = Rig::retiring(config);
    let mut pending = Vec::new();
    let mut queues = vec![rig.queue.clone()];
    for _ in 0..4 {
        pending.push(rig.submit(false, Purpose::Completion).unwrap());
        let queue = rig.sim.create_queue(support::queue_config()).unwrap();
        rig.tracker.note_queue_change(queue.clone());
        rig.queue = queue.clone();
        queues.push(queue);
    }
    assert_eq!(
        rig.tracker.generation().value(),
        0,
        "4 changes on a 1-bit counter wrap to 0"
    );
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    rig.run();
    rig.tracker.poll();
    rig.check();
    assert_eq!(
        rig.tracker.known_status(&fence.ticket).unwrap(),
        Some(Status::Complete)
    );
    for u in &pending {
        assert_eq!(
            rig.tracker.known_status(&u.ticket).unwrap(),
            None,
            "same counter value, other generation"
        );
    }
}

#[test]
fn a_drained_queue_retires_everything_without_loads() {
    let mut rig = Rig::retiring(device());
    let uses: Vec<_> = (0..10)
        .map(|_| rig.submit(false, Purpose::Completion).unwrap())
        .collect();
    rig.run();
    rig.tracker.note_drained();
    rig.check();
    assert!(
        uses.iter()
            .all(|u| rig.tracker.known_status(&u.ticket).unwrap() == Some(Status::Complete))
    );
    let stats = rig.tracker.stats();
    assert_eq!(
        (stats.device().loads, stats.retired_by_drain, stats.rearms),
        (0, 10, 10)
    );
}

#[test]
fn a_cpu_wait_that_saw_zero_is_a_proof() {
    let mut rig = Rig::retiring(device());
    let kernels: Vec<_> = (0..3)
        .map(|_| rig.submit(false, Purpose::Completion).unwrap())
        .collect();
    let marker = rig.submit(true, Purpose::CpuSync).unwrap();
    let waiter = rig.tracker.waiter();
    let ticket = marker.ticket;
    let thread = std::thread::spawn(move || {
        waiter.wait(
            &ticket,
            std::time::Duration::from_secs(10),
            tracker::WaitPolicy::spin(),
        )
    });
    rig.queue.run_until_idle();
    assert_eq!(thread.join().unwrap(), Ok(Status::Complete));
    let loads_before = rig.tracker.stats().device().loads;
    rig.tracker.poll();
    rig.check();
    // The marker is a fence: its observed completion retires the kernels too.
    assert!(
        kernels
            .iter()
            .all(|u| rig.tracker.known_status(&u.ticket).unwrap() == Some(Status::Complete))
    );
    assert_eq!(
        rig.tracker.stats().device().loads,
        loads_before,
        "no load after the wait"
    );
    assert_eq!(rig.tracker.stats().retired_by_cpu_wait, 1);
}

#[test]
fn aql_indices_must_increase_within_a_generation() {
    let mut rig = Rig::retiring(device());
    rig.submit(true, Purpose::Completion).unwrap();
    let err = rig.tracker.acquire(Request::packet(0)).unwrap_err();
    assert_eq!(
        err,
        Error::AqlIndexOutOfOrder {
            index: 0,
            previous: 0
        }
    );
    assert!(err.to_string().contains("note_queue_change"));
}

#[test]
fn tickets_of_another_tracker_are_rejected() {
    let mut a = Rig::retiring(device());
    let mut b = Rig::retiring(device());
    let u = a.submit(true, Purpose::Completion).unwrap();
    assert_eq!(b.tracker.query(&u.ticket), Err(Error::ForeignTicket));
    assert_eq!(
        b.tracker.waiter().status(&u.ticket),
        Err(Error::ForeignTicket)
    );
    assert_eq!(b.tracker.hold(&u.ticket).unwrap_err(), Error::ForeignTicket);
}

#[test]
fn a_retired_tickets_status_costs_no_memory_read() {
    let mut rig = Rig::retiring(device());
    let u = rig.submit(true, Purpose::Event).unwrap();
    rig.run();
    assert_eq!(rig.status(&u), Status::Complete);
    let loads = rig.tracker.stats().device().loads;
    for _ in 0..100 {
        assert_eq!(rig.status(&u), Status::Complete);
        assert_eq!(rig.tracker.waiter().status(&u.ticket), Ok(Status::Complete));
    }
    assert_eq!(rig.tracker.stats().device().loads, loads);
    // Still answered after its signal moved on to other uses.
    for _ in 0..200 {
        rig.submit(true, Purpose::Completion).unwrap();
        rig.run();
        rig.tracker.poll();
    }
    assert_eq!(
        rig.tracker.waiter().known_status(&u.ticket),
        Ok(Some(Status::Complete))
    );
}

#[test]
fn a_batched_poll_loads_only_once_the_read_index_passed_a_batch() {
    let config = Config {
        probe_batch: 32,
        ..device()
    };
    let mut rig = Rig::retiring(config);
    let first: Vec<_> = (0..10)
        .map(|_| rig.submit(true, Purpose::Completion).unwrap())
        .collect();
    rig.run();
    rig.tracker.poll();
    assert_eq!(
        rig.tracker.stats().probes,
        0,
        "10 packets passed: not worth a load yet"
    );
    assert_eq!(rig.tracker.known_status(&first[0].ticket).unwrap(), None);
    // A query is never held back.
    assert_eq!(rig.status(&first[9]), Status::Complete);
    assert_eq!(rig.tracker.stats().probes, 1);
    for _ in 0..40 {
        rig.submit(true, Purpose::Completion).unwrap();
    }
    rig.run();
    rig.tracker.poll();
    rig.check();
    assert_eq!(
        rig.tracker.stats().probes,
        2,
        "40 more passed: one load for all of them"
    );
    assert_eq!(rig.tracker.stats().retired, 50);
}
