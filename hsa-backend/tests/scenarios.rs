//! The tracker's scenarios (tracker/tests) on the ROCr backend: signals are
//! blocks the backend allocated from ROCr pools, packets go through its
//! publication and doorbell, and every step is checked against the
//! stand-in's ground truth and violations.

mod support;

use rocr_standin::{Config as Machine, PoolKind};
use std::time::Duration;
use support::Rig;
use tracker::{Config, Error, Placement, Purpose, Request, Status, Tracker, WaitPolicy};

fn device() -> Config {
    Config {
        signals: Placement::Device,
        ..Config::default()
    }
}

// --- Retirement ---------------------------------------------------------

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
    assert_eq!(
        (stats.probes, stats.retired, stats.retired_by_fence),
        (1, 64, 64)
    );
}

#[test]
fn the_read_index_alone_is_never_trusted() {
    let mut rig = Rig::retiring(device());
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    // Consumed (the read index ROCr reports passes it) but not complete.
    assert_eq!(rig.control().launch(), Ok(0));
    assert_eq!(rig.control().advance_read_index(), Ok(1));
    assert_eq!(rig.queue.read_index(), 1);
    rig.tracker.poll();
    rig.check();
    assert_eq!(rig.tracker.known_status(&fence.ticket).unwrap(), None);
    assert_eq!(
        rig.tracker.stats().probes,
        1,
        "the nominated fence was loaded"
    );
    rig.control().complete(0).unwrap();
    rig.tracker.poll();
    rig.check();
    assert_eq!(
        rig.tracker.known_status(&fence.ticket).unwrap(),
        Some(Status::Complete)
    );
}

#[test]
fn out_of_order_completions_retire_only_through_a_fence_or_their_own_signal() {
    let machine = Machine {
        out_of_order: true,
        ..Machine::stepped()
    };
    let mut rig = Rig::retiring_on(device(), machine);
    let kernels: Vec<_> = (0..4)
        .map(|_| rig.submit(false, Purpose::Completion).unwrap())
        .collect();
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    for _ in 0..4 {
        rig.control().launch().unwrap();
        rig.control().advance_read_index().unwrap();
    }
    rig.control().complete(2).unwrap();
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
        rig.control().complete(i).unwrap();
    }
    rig.control().launch().unwrap();
    rig.control().complete(4).unwrap();
    rig.control().advance_read_index().unwrap();
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
    let new_queue = rig.new_queue();
    rig.tracker.note_queue_change(new_queue.clone());
    rig.queue = new_queue;
    let fence = rig.submit(true, Purpose::Completion).unwrap();
    assert_eq!(fence.ticket.generation().value(), 1);
    rig.gpu.control(&rig.queue).run_until_idle(); // only the new queue runs
    rig.tracker.poll();
    rig.check();
    assert_eq!(
        rig.tracker.known_status(&fence.ticket).unwrap(),
        Some(Status::Complete)
    );
    assert_eq!(rig.tracker.known_status(&old.ticket).unwrap(), None);
    rig.gpu.control(&old_queue).run_until_idle();
    assert_eq!(rig.tracker.query(&old.ticket).unwrap(), Status::Complete);
    assert_eq!(rig.tracker.stats().retired_by_load, 1);
    rig.check();
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
        waiter.wait(&ticket, Duration::from_secs(10), WaitPolicy::spin())
    });
    rig.control().run_until_idle();
    assert_eq!(thread.join().unwrap(), Ok(Status::Complete));
    let loads = rig.tracker.stats().device().loads;
    rig.tracker.poll();
    rig.check();
    assert!(
        kernels
            .iter()
            .all(|u| rig.tracker.known_status(&u.ticket).unwrap() == Some(Status::Complete))
    );
    assert_eq!(
        rig.tracker.stats().device().loads,
        loads,
        "no load after the wait"
    );
    assert_eq!(rig.tracker.stats().retired_by_cpu_wait, 1);
}

// --- Sharing and pins ---------------------------------------------------

#[test]
fn a_held_signal_is_parked_and_an_armed_spare_takes_its_place() {
    let mut rig = Rig::retiring(device());
    let event = rig.submit(true, Purpose::Event).unwrap();
    let reference = rig.tracker.hold(&event.ticket).unwrap().expect("pending");
    rig.run();
    rig.tracker.poll();
    rig.check();
    assert_eq!(rig.tracker.census().parked, 1);
    for _ in 0..200 {
        let u = rig.submit(true, Purpose::Completion).unwrap();
        assert_ne!(u.signal, event.signal, "a parked signal is never reused");
        rig.run();
        rig.tracker.poll();
    }
    std::thread::spawn(move || drop(reference)).join().unwrap();
    rig.tracker.reclaim();
    rig.check();
    assert_eq!(
        (rig.tracker.census().parked, rig.tracker.stats().unparks),
        (0, 1)
    );
}

#[test]
fn a_gpu_waiter_pins_the_signal_until_its_consumer_retires() {
    let mut producer = Rig::retiring(device());
    let mut consumer = producer.neighbour(device());
    let produced = producer.submit(true, Purpose::GpuWaiter).unwrap();
    let pin = producer
        .tracker
        .pin(&produced.ticket)
        .unwrap()
        .expect("pending");
    // A barrier-AND on the consumer's queue waits for the producer's signal.
    let consuming = consumer
        .submit_request(
            Request::packet(consumer.queue.write_index()).barrier(true),
            &[pin.packet_handle()],
        )
        .unwrap();
    consumer.tracker.attach(&consuming.ticket, pin).unwrap();
    assert_eq!(consumer.gpu.control(&consumer.queue).launch(), Ok(0));
    assert_eq!(
        consumer.gpu.control(&consumer.queue).complete(0),
        Err(rocr_standin::StepStatus::NotReady),
        "the barrier waits for the producer"
    );

    producer.gpu.control(&producer.queue).run_until_idle();
    producer.tracker.poll();
    producer.check();
    assert_eq!(producer.tracker.census().parked, 1, "retired but pinned");
    for _ in 0..100 {
        producer.submit(true, Purpose::Completion).unwrap();
        producer.gpu.control(&producer.queue).run_until_idle();
        producer.tracker.poll();
    }
    producer.check(); // the stand-in saw no re-arm under the waiting barrier
    consumer.gpu.control(&consumer.queue).run_until_idle();
    assert_eq!(consumer.status(&consuming), Status::Complete);
    consumer.tracker.reclaim();
    producer.tracker.reclaim();
    producer.check();
    consumer.check();
    assert_eq!(producer.tracker.census().parked, 0);
}

// --- Timing -------------------------------------------------------------

#[test]
fn timed_uses_that_wrap_the_ring_keep_their_own_stamps_in_the_system_domain() {
    let config = Config {
        initial_size: 8,
        growth_limit: 1,
        ..device()
    };
    let mut rig = Rig::retiring(config);
    let mut events = Vec::new();
    for i in 0..40 {
        let request = Request::packet(rig.queue.write_index())
            .barrier(true)
            .purpose(Purpose::Event)
            .timed(true);
        let u = rig.submit_request(request, &[]).unwrap();
        let reference = rig.tracker.hold(&u.ticket).unwrap().unwrap();
        events.push((u, reference));
        if i % 4 == 3 {
            rig.run();
            rig.tracker.poll();
        }
        rig.check();
    }
    rig.run();
    rig.tracker.poll();
    rig.check();
    for (u, reference) in &events {
        let truth = rig.truth(u).unwrap();
        let stamps = reference.timestamps().expect("harvested at retirement");
        let expected = (
            rig.standin().gpu_to_system(truth.start_ts),
            rig.standin().gpu_to_system(truth.end_ts),
        );
        assert_eq!((stamps.start, stamps.end), expected);
        assert_eq!(rig.tracker.timestamps(&u.ticket).unwrap(), Some(stamps));
    }
    let stats = rig.tracker.stats();
    assert_eq!(stats.harvests, 40, "exactly once each");
    assert_eq!(stats.device().timestamp_reads, 40);
}

#[test]
fn timing_only_uses_get_host_signals_from_their_own_pool() {
    let mut rig = Rig::retiring(device());
    for _ in 0..100 {
        let u = rig
            .submit_request(
                Request::packet(rig.queue.write_index())
                    .barrier(true)
                    .purpose(Purpose::TimingOnly),
                &[],
            )
            .unwrap();
        rig.control().run_until_idle();
        assert!(rig.tracker.timestamps(&u.ticket).unwrap().is_some());
    }
    rig.tracker.poll();
    rig.check();
    let stats = rig.tracker.stats();
    assert_eq!(
        stats.device().timestamp_reads,
        0,
        "no PCIe read for the profiler's stamps"
    );
    assert_eq!(stats.host().timestamp_reads, 100);
    let sync = rig.submit(true, Purpose::CpuSync).unwrap();
    let batch = rig
        .memory
        .batches()
        .into_iter()
        .find(|b| (b.base..b.base + 64 * b.len as u64).contains(&sync.signal))
        .unwrap();
    assert_eq!(
        batch.placement,
        Placement::Device,
        "a sync use still gets VRAM"
    );
}

#[test]
fn a_vram_allocation_that_fell_back_keeps_a_working_host_signal() {
    let config = Config {
        initial_size: 4,
        refill_batch: 4,
        ..device()
    };
    let mut rig = Rig::retiring(config);
    // VRAM runs out: the rest of the first page goes elsewhere, then no more.
    rig.standin().set_pool_exhausted(PoolKind::Device, true);
    let mut elsewhere = Vec::new();
    while elsewhere
        .last()
        .is_none_or(|(_, p)| *p == Placement::Device)
    {
        tracker::SignalMemory::allocate(&*rig.memory, 1, Placement::Device, &mut elsewhere)
            .unwrap();
    }
    let mut placements = Vec::new();
    for _ in 0..60 {
        let u = rig.submit(true, Purpose::CpuSync).unwrap();
        let batch = rig
            .memory
            .batches()
            .into_iter()
            .find(|b| (b.base..b.base + 64 * b.len as u64).contains(&u.signal))
            .unwrap();
        placements.push(batch.placement);
    }
    rig.run();
    rig.tracker.poll();
    rig.check();
    assert!(
        placements.contains(&Placement::Host),
        "fell back to system memory"
    );
    assert!(rig.memory.counters().fallbacks > 0);
    assert_eq!(rig.tracker.stats().retired, 60);
}

// --- Failure ------------------------------------------------------------

#[test]
fn a_queue_error_fails_every_pending_use_once_and_wakes_waiters() {
    let mut rig = Rig::retiring(device());
    let uses: Vec<_> = (0..10)
        .map(|_| rig.submit(true, Purpose::Completion).unwrap())
        .collect();
    for i in 0..3 {
        rig.control().launch().unwrap();
        rig.control().complete(i).unwrap();
        rig.control().advance_read_index().unwrap();
    }
    rig.control().fail();
    // ROCr told the backend (its error callback, on another thread).
    let error = rig.queue.error().expect("the queue reported its error");
    assert_eq!(error.status(), hsa_sys::HSA_STATUS_ERROR_EXCEPTION);
    assert!(matches!(
        rig.queue.try_reserve(),
        Err(tracker::QueueError::Failed(_))
    ));
    let waiter = rig.tracker.waiter();
    let last = uses[9].ticket;
    let woken =
        std::thread::spawn(move || waiter.wait(&last, Duration::from_secs(10), WaitPolicy::spin()));
    assert_eq!(woken.join().unwrap(), Ok(Status::Failed));
    rig.tracker.poll();
    rig.check();
    for (i, u) in uses.iter().enumerate() {
        let expected = if i < 3 {
            Status::Complete
        } else {
            Status::Failed
        };
        assert_eq!(rig.status(u), expected, "use {i}");
    }
    assert_eq!(rig.tracker.fail_queue(), 0, "already failed: not again");
    assert_eq!(
        (rig.tracker.stats().failed, rig.tracker.stats().retired),
        (7, 3)
    );
    // The stream moves to a new hardware queue and goes on.
    let new_queue = rig.new_queue();
    rig.tracker.note_queue_change(new_queue.clone());
    rig.queue = new_queue;
    for _ in 0..100 {
        rig.submit(true, Purpose::Completion).unwrap();
        rig.run();
        rig.tracker.poll();
    }
    assert_eq!(
        rig.tracker.waiter().status(&uses[5].ticket),
        Ok(Status::Failed)
    );
    rig.check();
}

#[test]
fn a_partly_issued_submission_waits_for_its_issued_part() {
    let mut rig = Rig::retiring(device());
    let index = rig.queue.write_index();
    let acquired = rig
        .tracker
        .acquire(Request::packet(index + 1).ops(3))
        .unwrap();
    for i in 0..2 {
        use tracker::HardwareQueue;
        assert_eq!(rig.queue.reserve().unwrap(), index + i);
        rig.queue
            .publish(
                index + i,
                tracker::Work::Kernel(rig.empty_kernel),
                false,
                acquired.signal,
            )
            .unwrap();
    }
    rig.tracker.fail_submission(&acquired.ticket, 2).unwrap();
    assert_eq!(rig.tracker.query(&acquired.ticket).unwrap(), Status::Failed);
    rig.tracker.poll();
    assert_eq!(rig.tracker.stats().rearms, 0);
    rig.control().launch().unwrap();
    rig.control().complete(0).unwrap();
    rig.tracker.poll();
    assert_eq!(
        rig.tracker.stats().rearms,
        0,
        "one issued operation still running"
    );
    rig.control().run_until_idle();
    rig.tracker.poll();
    assert_eq!(
        (rig.tracker.stats().rearms, rig.tracker.stats().failed),
        (1, 1)
    );
    rig.standin().assert_no_violations();
}

#[test]
fn an_allocation_failure_is_back_pressure_and_the_tracker_recovers() {
    let config = Config {
        initial_size: 2,
        growth_limit: 4,
        refill_batch: 2,
        ..device()
    };
    let mut rig = Rig::retiring(config);
    rig.submit(true, Purpose::Completion).unwrap();
    rig.submit(true, Purpose::Completion).unwrap();
    // Use up the batch's leftover blocks, then make every allocation fail.
    let mut spare = Vec::new();
    tracker::SignalMemory::allocate(&*rig.memory, 62, Placement::Device, &mut spare).unwrap();
    rig.standin().set_pool_exhausted(PoolKind::Device, true);
    rig.standin().set_pool_exhausted(PoolKind::System, true);
    rig.standin().fail_signal_creations(u64::MAX);
    let err = rig
        .tracker
        .acquire(Request::packet(rig.queue.write_index()).barrier(true))
        .unwrap_err();
    assert!(
        matches!(err, Error::Backpressure { in_flight: 2, .. }),
        "{err}"
    );
    rig.check();
    rig.run();
    rig.submit(true, Purpose::Completion).unwrap();
    rig.run();
    rig.check();
}

// --- Growth and back-pressure --------------------------------------------

#[test]
fn the_ring_grows_to_its_limit_then_names_a_fence_to_wait_for() {
    let config = Config {
        initial_size: 4,
        growth_limit: 4,
        refill_batch: 4,
        backpressure_window: 4,
        ..device()
    };
    let mut rig = Rig::retiring(config);
    let mut uses = Vec::new();
    for i in 0..16 {
        uses.push(rig.submit(i % 4 == 3, Purpose::Completion).unwrap());
        rig.check();
    }
    assert_eq!(rig.tracker.stats().ring_growths, 2, "4 -> 8 -> 16");
    let Err(Error::Backpressure {
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
    let waiter = rig.tracker.waiter();
    let thread = std::thread::spawn(move || {
        waiter.wait(&wait_for, Duration::from_secs(10), WaitPolicy::spin())
    });
    for _ in 0..4 {
        rig.control().launch().unwrap();
        let i = rig.queue.read_index();
        rig.control().complete(i).unwrap();
        rig.control().advance_read_index().unwrap();
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

#[test]
fn the_baseline_runs_the_same_scenario_with_a_load_per_use() {
    let mut rig = Rig::baseline(device());
    for i in 0..64 {
        rig.submit(i % 8 == 7, Purpose::Completion).unwrap();
        if i % 8 == 7 {
            rig.run();
        }
    }
    rig.run();
    rig.check();
    let stats = rig.tracker.stats();
    assert_eq!(stats.store_fences(), stats.uses, "one fence per re-arm");
}

// --- Store ordering ------------------------------------------------------

fn churn<T: Tracker<Memory = hsa_backend::SignalPool, Queue = hsa_backend::AqlQueue>>(
    rig: &mut Rig<T>,
    uses: usize,
) {
    for i in 0..uses {
        rig.submit(i % 4 == 3, Purpose::Completion).unwrap();
        if i % 8 == 7 {
            rig.run();
        }
    }
    rig.run();
}

#[test]
fn a_vram_ring_needs_one_fence_per_batch_and_no_flush() {
    let mut rig = Rig::retiring(device()); // the stand-in's rings are in VRAM
    churn(&mut rig, 2048);
    rig.check();
    let stats = rig.tracker.stats();
    assert_eq!(stats.hdp_flushes(), 0);
    assert!(stats.fences_per_rearm() <= 1.0 / 32.0, "{stats:?}");
    let executed = rig.memory.counters();
    assert_eq!(
        executed.store_fences,
        stats.store_fences(),
        "every fence the tracker asked for ran"
    );
    assert_eq!(
        rig.standin().take_hdp_flush(0),
        Some(0),
        "the flush register was never written"
    );
}

#[test]
fn a_system_memory_ring_gets_one_hdp_flush_per_batch_through_the_register() {
    let machine = Machine {
        ring_in_device_memory: false,
        ..Machine::stepped()
    };
    let mut rig = Rig::retiring_on(device(), machine);
    churn(&mut rig, 2048);
    rig.check();
    let stats = rig.tracker.stats();
    assert!(stats.hdp_flushes() > 0);
    assert!(stats.flushes_per_rearm() <= 1.0 / 32.0, "{stats:?}");
    assert_eq!(rig.memory.counters().hdp_flushes, stats.hdp_flushes());
    assert_eq!(
        rig.standin().take_hdp_flush(0),
        Some(1),
        "1 written to HDP_MEM_FLUSH_CNTL"
    );
}

// --- Steady state ---------------------------------------------------------

#[test]
fn steady_state_bars_hold_on_the_backend_for_the_retiring_tracker_only() {
    const WARMUP: usize = 1024;
    const MEASURED: usize = 8192;
    fn workload<T: Tracker<Memory = hsa_backend::SignalPool, Queue = hsa_backend::AqlQueue>>(
        rig: &mut Rig<T>,
    ) -> tracker::Stats {
        let step = |rig: &mut Rig<T>, i: usize| {
            let purpose = if i % 64 == 63 {
                Purpose::Event
            } else {
                Purpose::Completion
            };
            rig.submit(true, purpose).unwrap();
            if i % 8 == 7 {
                rig.control().run_until_idle();
            }
        };
        for i in 0..WARMUP {
            step(rig, i);
        }
        rig.issued.clear();
        let before = rig.tracker.stats();
        for i in 0..MEASURED {
            step(rig, i);
        }
        rig.control().run_until_idle();
        rig.check();
        rig.tracker.stats().since(&before)
    }
    let mut retiring = Rig::retiring(device());
    let ours = workload(&mut retiring);
    let mut baseline = Rig::baseline(device());
    let theirs = workload(&mut baseline);
    assert!(
        ours.loads_per_retired_use(Placement::Device) <= 1.0 / 32.0,
        "{ours:?}"
    );
    assert!(ours.fences_per_rearm() <= 1.0 / 32.0, "{ours:?}");
    assert_eq!(ours.signals_created, 0);
    assert!(
        theirs.loads_per_retired_use(Placement::Device) >= 1.0,
        "{theirs:?}"
    );
    assert_eq!(retiring.memory.counters().rocr_signals, 0);
}
