//! Retirement proofs, generations and drains, each step checked against the
//! backend's ground truth.

use crate::support::{Backend, Machine, Rig, device_signals, on_every_backend};
use sigretire_tracker::{AcquireError, ForeignTicket};
use sigretire_tracker::{Config, Purpose, Request, Status, Tracker, WaitPolicy};

on_every_backend! {
    adopted;
    one_probe_of_the_newest_fence_retires_a_batch,
    the_read_index_alone_is_never_trusted,
    uses_after_the_nominated_fence_stay_pending,
    out_of_order_completions_retire_only_through_a_fence_or_their_own_signal,
    a_queue_change_keeps_fences_from_proving_another_generations_uses,
    a_narrow_generation_counter_wraps_without_confusing_generations,
    a_drained_queue_retires_everything_without_loads,
    a_cpu_wait_that_saw_zero_is_a_proof,
    aql_indices_must_increase_within_a_generation,
    tickets_of_another_tracker_are_rejected,
    a_retired_tickets_status_costs_no_memory_read,
    a_batched_poll_loads_only_once_the_read_index_passed_a_batch,
}

fn one_probe_of_the_newest_fence_retires_a_batch<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let uses: Vec<_> = (0..64)
        .map(|i| rig.submit(i % 8 == 7, Purpose::Completion).unwrap())
        .collect();
    rig.run();
    rig.poll();
    for u in &uses {
        assert_eq!(
            rig.tracker.known_status(&u.ticket).unwrap(),
            Some(Status::Complete)
        );
    }
    let stats = rig.tracker.stats();
    assert_eq!(stats.device().loads, 1, "one load for the whole batch");
    assert_eq!(
        (stats.probes, stats.retired, stats.retired_by_fence),
        (1, 64, 64)
    );
}

fn the_read_index_alone_is_never_trusted<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    // The processor consumes the packet (the read index the backend reports
    // passes it) but it has not completed.
    assert_eq!(rig.launch(), Ok(0));
    assert_eq!(rig.advance_read_index(), Ok(1));
    assert_eq!(
        sigretire_tracker::backend::QueueView::read_index(&rig.queue),
        1
    );
    rig.poll();
    assert_eq!(rig.tracker.known_status(&fence.ticket).unwrap(), None);
    assert_eq!(
        rig.tracker.stats().probes,
        1,
        "the nominated fence was loaded"
    );
    rig.complete(0).unwrap();
    rig.poll();
    assert_eq!(
        rig.tracker.known_status(&fence.ticket).unwrap(),
        Some(Status::Complete)
    );
}

fn uses_after_the_nominated_fence_stay_pending<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let first = rig.submit(true, Purpose::Completion).unwrap();
    let later: Vec<_> = (0..3)
        .map(|_| rig.submit(false, Purpose::Completion).unwrap())
        .collect();
    // Complete only the fence.
    rig.launch().unwrap();
    rig.complete(0).unwrap();
    rig.advance_read_index().unwrap();
    rig.poll();
    assert_eq!(
        rig.tracker.known_status(&first.ticket).unwrap(),
        Some(Status::Complete)
    );
    for u in &later {
        assert_eq!(rig.tracker.known_status(&u.ticket).unwrap(), None);
    }
}

fn out_of_order_completions_retire_only_through_a_fence_or_their_own_signal<B: Backend>() {
    let machine = Machine {
        out_of_order: true,
        ..Machine::default()
    };
    let mut rig = Rig::<B, _>::retiring_on(device_signals(), machine);
    let kernels: Vec<_> = (0..4)
        .map(|_| rig.submit(false, Purpose::Completion).unwrap())
        .collect();
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    for _ in 0..4 {
        rig.launch().unwrap();
    }
    for _ in 0..4 {
        rig.advance_read_index().unwrap();
    }
    // Kernel 2 finishes first: its own signal proves it, no one else.
    rig.complete(2).unwrap();
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
        rig.complete(i).unwrap();
    }
    rig.launch().unwrap();
    rig.complete(4).unwrap();
    rig.advance_read_index().unwrap();
    rig.poll();
    assert!(
        kernels
            .iter()
            .chain([&fence])
            .all(|u| rig.tracker.known_status(&u.ticket).unwrap() == Some(Status::Complete))
    );
    assert_eq!(rig.tracker.stats().rearms, 5);
}

fn a_queue_change_keeps_fences_from_proving_another_generations_uses<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let old = rig.submit(false, Purpose::Completion).unwrap();
    let old_queue = rig.queue.clone();
    let new_queue = rig.gpu.queue();
    rig.change_queue(new_queue);
    assert_eq!(rig.tracker.generation().value(), 1);
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    assert_eq!(fence.ticket.generation().value(), 1);
    rig.run(); // the new queue's fence completes; the old use does not
    rig.poll();
    assert_eq!(
        rig.tracker.known_status(&fence.ticket).unwrap(),
        Some(Status::Complete)
    );
    assert_eq!(rig.tracker.known_status(&old.ticket).unwrap(), None);
    // The old use retires by its own signal once its queue runs.
    rig.gpu.run(&old_queue);
    assert_eq!(rig.tracker.query(&old.ticket).unwrap(), Status::Complete);
    assert_eq!(rig.tracker.stats().retired_by_load, 1);
    rig.check();
}

fn a_narrow_generation_counter_wraps_without_confusing_generations<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    // A 1-bit counter (a test's: runtimes count in 32 bits).
    sigretire_tracker::kit::narrow_generations(&mut rig.tracker, 1);
    let mut pending = Vec::new();
    let mut queues = vec![rig.queue.clone()];
    for _ in 0..4 {
        pending.push(rig.submit(false, Purpose::Completion).unwrap());
        let queue = rig.gpu.queue();
        rig.change_queue(queue.clone());
        queues.push(queue);
    }
    assert_eq!(
        rig.tracker.generation().value(),
        0,
        "4 changes on a 1-bit counter wrap to 0"
    );
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    rig.run();
    rig.poll();
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

fn a_drained_queue_retires_everything_without_loads<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
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

fn a_cpu_wait_that_saw_zero_is_a_proof<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
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
            WaitPolicy::spin(),
        )
    });
    rig.run_queue();
    assert_eq!(thread.join().unwrap(), Ok(Status::Complete));
    let loads_before = rig.tracker.stats().device().loads;
    rig.poll();
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

fn aql_indices_must_increase_within_a_generation<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    rig.submit(true, Purpose::Completion).unwrap();
    let err = rig.tracker.acquire(Request::packet(0)).unwrap_err();
    assert_eq!(
        err,
        AcquireError::AqlIndexOutOfOrder {
            index: 0,
            previous: 0
        }
    );
    assert!(err.to_string().contains("note_queue_change"));
}

fn tickets_of_another_tracker_are_rejected<B: Backend>() {
    let mut a = Rig::<B, _>::retiring(device_signals());
    let mut b = Rig::<B, _>::retiring(device_signals());
    let u = a.submit(true, Purpose::Completion).unwrap();
    assert_eq!(b.tracker.query(&u.ticket), Err(ForeignTicket));
    assert_eq!(b.tracker.waiter().status(&u.ticket), Err(ForeignTicket));
    assert_eq!(b.tracker.hold(&u.ticket).unwrap_err(), ForeignTicket);
}

fn a_retired_tickets_status_costs_no_memory_read<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
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
        rig.poll();
    }
    assert_eq!(
        rig.tracker.waiter().known_status(&u.ticket),
        Ok(Some(Status::Complete))
    );
}

fn a_batched_poll_loads_only_once_the_read_index_passed_a_batch<B: Backend>() {
    let config = Config {
        probe_interval: 32,
        ..device_signals()
    };
    let mut rig = Rig::<B, _>::retiring(config);
    let first: Vec<_> = (0..10)
        .map(|_| rig.submit(true, Purpose::Completion).unwrap())
        .collect();
    rig.run();
    rig.poll();
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
    rig.poll();
    assert_eq!(
        rig.tracker.stats().probes,
        2,
        "40 more passed: one load for all of them"
    );
    assert_eq!(rig.tracker.stats().retired, 50);
}
