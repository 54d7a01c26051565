//! Packet-processor semantics in stepped mode, where the test chooses every
//! event.

mod common;

use common::{armed, armed_on, queue, stepped};
use sigretire_sim::hsa_sys::{HSA_SIGNAL_CONDITION_EQ, HSA_SIGNAL_CONDITION_LT};
use sigretire_sim::{
    AgentId, Blocked, FAILED_SIGNAL_VALUE, HostFlag, Kernel, Placement, Queue,
    STEPPED_TICKS_PER_EVENT, Signal, SimError, SimQueueConfig, StepError, packets,
};

fn ooo() -> SimQueueConfig {
    SimQueueConfig {
        out_of_order: true,
        ..SimQueueConfig::default()
    }
}

#[test]
fn a_packet_launches_only_once_reserved_published_and_rung() {
    let sim = stepped(1);
    let q = queue(&sim, SimQueueConfig::default());
    let blocked = |reason| Err(StepError::NotLaunchable { index: 0, reason });
    assert_eq!(q.launch(), blocked(Blocked::NotReserved));
    let index = q.reserve().unwrap();
    assert_eq!(q.launch(), blocked(Blocked::NotPublished));
    q.write(index, packets::kernel(0, None));
    assert_eq!(q.launch(), blocked(Blocked::DoorbellNotRung));
    q.ring_doorbell(index);
    assert_eq!(q.launch(), Ok(0));
    let truth = q.truth(0).unwrap();
    assert!(truth.published && truth.launched && !truth.completed);
}

#[test]
fn the_barrier_bit_waits_for_every_earlier_packet() {
    let sim = stepped(1);
    let q = queue(&sim, ooo());
    let s = armed(&sim, 3, Placement::Host);
    q.submit(packets::kernel(0, Some(s[0]))).unwrap();
    q.submit(packets::kernel(0, Some(s[1]))).unwrap();
    let fence = q
        .submit(packets::with_barrier_bit(packets::barrier_and(
            &[],
            Some(s[2]),
        )))
        .unwrap();
    assert_eq!((q.launch(), q.launch()), (Ok(0), Ok(1)));
    q.complete(1).unwrap();
    let waiting = |waiting_for| {
        Err(StepError::NotLaunchable {
            index: fence,
            reason: Blocked::BarrierBit { waiting_for },
        })
    };
    assert_eq!(q.launch(), waiting(0));
    q.complete(0).unwrap();
    assert_eq!(q.launch(), Ok(fence));
    q.complete(fence).unwrap();
    assert_eq!(
        s.iter().map(|&s| sim.load(s)).collect::<Vec<_>>(),
        [0, 0, 0]
    );
}

#[test]
fn a_pending_barrier_packet_halts_later_launches() {
    let sim = stepped(1);
    let (a, b) = (
        queue(&sim, SimQueueConfig::default()),
        queue(&sim, SimQueueConfig::default()),
    );
    let s = armed(&sim, 2, Placement::Device);
    let barrier = a.submit(packets::barrier_and(&[s[0]], None)).unwrap();
    let after = a.submit(packets::kernel(0, None)).unwrap();
    assert_eq!(a.launch(), Ok(barrier));
    assert_eq!(
        a.launch(),
        Err(StepError::NotLaunchable {
            index: after,
            reason: Blocked::BarrierPacket { index: barrier }
        })
    );
    assert_eq!(
        a.complete(barrier),
        Err(StepError::NotReady { index: barrier })
    );
    // Another queue's kernel completes the dependency.
    b.submit(packets::kernel(0, Some(s[0]))).unwrap();
    b.run_until_idle();
    a.complete(barrier).unwrap();
    assert_eq!(a.launch(), Ok(after));
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn an_in_order_queue_completes_its_oldest_packet_first() {
    let sim = stepped(1);
    let q = queue(&sim, SimQueueConfig::default());
    for _ in 0..3 {
        q.submit(packets::kernel(0, None)).unwrap();
    }
    for _ in 0..3 {
        q.launch().unwrap();
    }
    assert_eq!(
        q.complete(2),
        Err(StepError::OutOfOrder {
            index: 2,
            oldest: 0
        })
    );
    q.complete(0).unwrap();
    assert_eq!(q.complete(0), Err(StepError::AlreadyComplete { index: 0 }));
    assert_eq!(
        q.complete(2),
        Err(StepError::OutOfOrder {
            index: 2,
            oldest: 1
        })
    );
    q.complete(1).unwrap();
    q.complete(2).unwrap();
    assert_eq!(q.complete(3), Err(StepError::NotLaunched { index: 3 }));
}

#[test]
fn an_out_of_order_queue_completes_launched_packets_in_any_order() {
    let sim = stepped(1);
    let q = queue(&sim, ooo());
    let s = armed(&sim, 3, Placement::Host);
    for &signal in &s {
        q.submit(packets::kernel(0, Some(signal))).unwrap();
        q.launch().unwrap();
    }
    q.complete(2).unwrap();
    assert_eq!(
        s.iter().map(|&s| sim.load(s)).collect::<Vec<_>>(),
        [1, 1, 0]
    );
    q.complete(0).unwrap();
    q.complete(1).unwrap();
    assert!(q.is_idle());
}

#[test]
fn the_read_index_runs_ahead_of_completion_but_never_past_launches() {
    let sim = stepped(1);
    let q = queue(
        &sim,
        SimQueueConfig {
            size: 4,
            ..SimQueueConfig::default()
        },
    );
    let s = armed(&sim, 3, Placement::Host);
    for &signal in &s {
        q.submit(packets::kernel(0, Some(signal))).unwrap();
    }
    assert_eq!(
        q.advance_read_index(),
        Err(StepError::NotLaunched { index: 0 })
    );
    q.launch().unwrap();
    q.launch().unwrap();
    assert_eq!(q.advance_read_index(), Ok(1));
    assert_eq!(q.advance_read_index(), Ok(2));
    assert_eq!(
        q.advance_read_index(),
        Err(StepError::NotLaunched { index: 2 })
    );
    assert_eq!(q.read_index(), 2);
    // Consumed, yet nothing completed: the read index proves nothing.
    for (i, &signal) in s.iter().enumerate() {
        assert!(!q.truth(i as u64).unwrap().completed);
        assert_eq!(sim.load(signal), 1);
    }
    assert!(!q.is_idle());
}

#[test]
fn a_full_queue_frees_slots_only_as_the_read_index_moves() {
    let sim = stepped(1);
    let q = queue(
        &sim,
        SimQueueConfig {
            size: 2,
            ..SimQueueConfig::default()
        },
    );
    q.submit(packets::kernel(0, None)).unwrap();
    q.submit(packets::kernel(0, None)).unwrap();
    assert_eq!(q.reserve(), Err(SimError::QueueFull));
    q.run_until_idle(); // launches, completes, consumes both
    assert_eq!(q.read_index(), 2);
    // The slots were invalidated on consumption, so they can be reused.
    assert_eq!(q.submit(packets::kernel(0, None)), Ok(2));
    assert_eq!(q.submit(packets::kernel(0, None)), Ok(3));
    assert_eq!(q.reserve(), Err(SimError::QueueFull));
    q.run_until_idle();
    assert!(q.truth(3).unwrap().completed);
}

/// A waiter queue and an out-of-order producer queue, with five armed
/// dependency signals, each completed by its own producer kernel (indices
/// `0..5` of the producer, slot order). Returns the producer too, so a test
/// completes exactly the slots it chooses.
fn five_dependencies() -> (sigretire_sim::Sim, Queue, Queue, Vec<Signal>) {
    let sim = stepped(1);
    let (waiter, producer) = (queue(&sim, SimQueueConfig::default()), queue(&sim, ooo()));
    let deps = armed(&sim, 5, Placement::Device);
    for &dep in &deps {
        producer.submit(packets::kernel(0, Some(dep))).unwrap();
        producer.launch().unwrap();
    }
    (sim, waiter, producer, deps)
}

#[test]
fn barrier_and_honours_each_of_its_five_dependency_slots() {
    // For each slot k, every dependency but slot k's completes: the barrier
    // must hold until slot k does. A processor that skipped any one slot would
    // complete it early in that round.
    for k in 0..5 {
        let (sim, waiter, producer, deps) = five_dependencies();
        let done = armed(&sim, 1, Placement::Device)[0];
        let barrier = waiter
            .submit(packets::barrier_and(&deps, Some(done)))
            .unwrap();
        waiter.launch().unwrap();
        for slot in (0..5).filter(|&slot| slot != k) {
            producer.complete(slot).unwrap();
        }
        assert_eq!(
            waiter.complete(barrier),
            Err(StepError::NotReady { index: barrier }),
            "slot {k} is still 1"
        );
        assert_eq!(sim.load(done), 1, "slot {k}");
        producer.complete(k).unwrap();
        waiter.complete(barrier).unwrap();
        assert_eq!(sim.load(done), 0, "slot {k}");
        assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    }
}

#[test]
fn barrier_or_is_released_by_each_of_its_five_dependency_slots_alone() {
    // For each slot k, only slot k's dependency completes: the barrier must
    // wait before it and complete after it. A processor that skipped slot k
    // would never release the barrier in that round.
    for k in 0..5 {
        let (sim, waiter, producer, deps) = five_dependencies();
        let done = armed(&sim, 1, Placement::Device)[0];
        let barrier = waiter
            .submit(packets::barrier_or(&deps, Some(done)))
            .unwrap();
        waiter.launch().unwrap();
        assert_eq!(
            waiter.complete(barrier),
            Err(StepError::NotReady { index: barrier }),
            "no dependency completed yet (slot {k})"
        );
        assert_eq!(sim.load(done), 1, "slot {k}");
        producer.complete(k).unwrap();
        waiter.complete(barrier).unwrap();
        assert_eq!(sim.load(done), 0, "slot {k}");
        let others = (0..5).filter(|&slot| slot != k);
        assert!(
            others
                .map(|slot| deps[slot as usize])
                .all(|d| sim.load(d) == 1),
            "slot {k} released the barrier alone"
        );
        assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    }
}

#[test]
fn barriers_without_dependencies_complete_at_once() {
    let sim = stepped(1);
    let q = queue(&sim, SimQueueConfig::default());
    let s = armed(&sim, 2, Placement::Host);
    q.submit(packets::barrier_and(&[], Some(s[0]))).unwrap();
    q.submit(packets::barrier_or(&[], Some(s[1]))).unwrap();
    q.run_until_idle();
    assert!(q.is_idle());
    assert_eq!((sim.load(s[0]), sim.load(s[1])), (0, 0));
}

#[test]
fn barrier_value_compares_the_masked_value() {
    let sim = stepped(1);
    let (waiter, producer) = (
        queue(&sim, SimQueueConfig::default()),
        queue(&sim, SimQueueConfig::default()),
    );
    let counter = sim.allocate(1, Placement::Device, AgentId(0)).unwrap()[0];
    sim.store(counter, 3);
    sim.store_fence();
    // Waits until the low bit is clear: 3 -> 2.
    let even = waiter
        .submit(packets::barrier_value(
            counter,
            HSA_SIGNAL_CONDITION_EQ,
            0,
            1,
            None,
        ))
        .unwrap();
    // Then until the value drops below 1: 2 -> 1 -> 0.
    let drained = waiter
        .submit(packets::barrier_value(
            counter,
            HSA_SIGNAL_CONDITION_LT,
            1,
            -1,
            None,
        ))
        .unwrap();
    waiter.launch().unwrap();
    for _ in 0..3 {
        producer.submit(packets::kernel(0, Some(counter))).unwrap();
    }
    assert_eq!(
        waiter.complete(even),
        Err(StepError::NotReady { index: even })
    );
    producer.launch().unwrap();
    producer.complete(0).unwrap(); // 2
    waiter.complete(even).unwrap();
    waiter.launch().unwrap();
    producer.launch().unwrap();
    producer.complete(1).unwrap(); // 1
    assert_eq!(
        waiter.complete(drained),
        Err(StepError::NotReady { index: drained })
    );
    producer.run_until_idle(); // 0
    waiter.complete(drained).unwrap();
}

#[test]
fn a_queue_on_one_agent_waits_for_another_agents_signal() {
    let sim = stepped(2);
    let gpu0 = queue(&sim, SimQueueConfig::default());
    let gpu1 = queue(
        &sim,
        SimQueueConfig {
            agent: AgentId(1),
            ..SimQueueConfig::default()
        },
    );
    let produced = armed_on(&sim, 1, Placement::Device, AgentId(0))[0];
    let consumed = armed_on(&sim, 1, Placement::Device, AgentId(1))[0];
    gpu1.submit(packets::barrier_and(&[produced], None))
        .unwrap();
    gpu1.submit(packets::kernel(0, Some(consumed))).unwrap();
    gpu1.run_until_idle();
    assert_eq!(gpu1.truth(1).map(|t| t.launched), Some(false));
    gpu0.submit(packets::kernel(0, Some(produced))).unwrap();
    sim.run_until_idle(); // drives both queues
    assert!(gpu0.is_idle() && gpu1.is_idle());
    assert_eq!((sim.load(produced), sim.load(consumed)), (0, 0));
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn a_spinning_kernel_completes_only_after_its_flag_is_set() {
    let sim = stepped(1);
    let q = queue(&sim, SimQueueConfig::default());
    let flag = HostFlag::new();
    let spin = sim.register_kernel(Kernel::SpinUntil(flag.clone()));
    let s = armed(&sim, 1, Placement::Host)[0];
    let index = q.submit(packets::kernel(spin, Some(s))).unwrap();
    q.run_until_idle();
    assert_eq!(q.complete(index), Err(StepError::NotReady { index }));
    assert_eq!(sim.load(s), 1);
    flag.set();
    q.run_until_idle();
    assert_eq!(sim.load(s), 0);
}

#[test]
fn a_failed_queue_sets_negative_values_and_stops() {
    let sim = stepped(1);
    let q = queue(&sim, ooo());
    let s = armed(&sim, 4, Placement::Device);
    for &signal in &s[..3] {
        q.submit(packets::kernel(0, Some(signal))).unwrap();
    }
    q.launch().unwrap();
    q.launch().unwrap();
    q.complete(1).unwrap(); // completed before the failure: stays 0
    q.fail();
    assert_eq!(
        s[..3].iter().map(|&s| sim.load(s)).collect::<Vec<_>>(),
        [FAILED_SIGNAL_VALUE, 0, FAILED_SIGNAL_VALUE]
    );
    let truths: Vec<_> = (0..3).map(|i| q.truth(i).unwrap()).collect();
    assert!(truths[0].failed && truths[0].launched && !truths[0].completed);
    assert!(truths[1].completed && !truths[1].failed);
    assert!(truths[2].failed && !truths[2].launched);
    assert!(q.is_failed() && q.is_idle());
    assert_eq!(q.launch(), Err(StepError::QueueFailed));
    assert_eq!(q.complete(0), Err(StepError::QueueFailed));
    assert_eq!(q.advance_read_index(), Err(StepError::QueueFailed));
    // Work published later fails at once, so nobody waits for it forever.
    let late = q.submit(packets::kernel(0, Some(s[3]))).unwrap();
    assert!(q.truth(late).unwrap().failed);
    assert_eq!(sim.load(s[3]), FAILED_SIGNAL_VALUE);
    // Re-arming signals of failed packets is not a violation.
    sim.store(s[0], 1);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn a_negative_dependency_fails_the_waiting_queue() {
    let sim = stepped(1);
    let (waiter, producer) = (
        queue(&sim, SimQueueConfig::default()),
        queue(&sim, SimQueueConfig::default()),
    );
    let s = armed(&sim, 2, Placement::Device);
    producer.submit(packets::kernel(0, Some(s[0]))).unwrap();
    let barrier = waiter
        .submit(packets::barrier_and(&[s[0]], Some(s[1])))
        .unwrap();
    waiter.launch().unwrap();
    producer.fail();
    assert_eq!(waiter.complete(barrier), Err(StepError::QueueFailed));
    assert!(waiter.is_failed());
    assert_eq!(sim.load(s[1]), FAILED_SIGNAL_VALUE);
}

#[test]
fn a_stalled_queue_makes_no_progress_until_released() {
    let sim = stepped(1);
    let q = queue(&sim, SimQueueConfig::default());
    q.submit(packets::kernel(0, None)).unwrap();
    q.launch().unwrap();
    q.submit(packets::kernel(0, None)).unwrap();
    q.stall(true);
    assert_eq!(q.launch(), Err(StepError::Stalled));
    assert_eq!(q.complete(0), Err(StepError::Stalled));
    assert_eq!(q.advance_read_index(), Err(StepError::Stalled));
    q.run_until_idle();
    assert!(!q.is_idle());
    q.stall(false);
    q.run_until_idle();
    assert!(q.is_idle());
}

#[test]
fn profiled_queues_write_the_true_timestamps_into_the_signal() {
    let sim = stepped(1);
    let profiled = queue(
        &sim,
        SimQueueConfig {
            profiling: true,
            ..SimQueueConfig::default()
        },
    );
    let s = armed(&sim, 4, Placement::Device);
    for &signal in &s[..3] {
        profiled.submit(packets::kernel(0, Some(signal))).unwrap();
    }
    profiled.run_until_idle();
    let mut previous: Option<(u64, u64)> = None;
    for (i, &signal) in s[..3].iter().enumerate() {
        let truth = profiled.truth(i as u64).unwrap();
        let (start, end) = sim.load_timestamps(signal);
        assert_eq!((truth.start_ts, truth.end_ts), (Some(start), Some(end)));
        assert!(start < end);
        if let Some((previous_start, previous_end)) = previous {
            assert!(
                previous_start < start && previous_end < end,
                "in-order packets: monotone stamps"
            );
        }
        previous = Some((start, end));
    }
    // Timestamps are GPU ticks of the stepped clock.
    assert_eq!(sim.now_ticks() % STEPPED_TICKS_PER_EVENT, 0);
    assert!(sim.now_ticks() >= previous.unwrap().1);

    // An unprofiled queue leaves the block's stamps alone; the truth still has them.
    let plain = queue(&sim, SimQueueConfig::default());
    plain.submit(packets::kernel(0, Some(s[3]))).unwrap();
    plain.run_until_idle();
    assert_eq!(sim.load_timestamps(s[3]), (0, 0));
    assert!(plain.truth(0).unwrap().end_ts.is_some());
}

#[test]
fn stepped_runs_are_reproducible() {
    let run = || {
        let sim = stepped(1);
        let q = queue(
            &sim,
            SimQueueConfig {
                out_of_order: true,
                profiling: true,
                ..SimQueueConfig::default()
            },
        );
        let s = armed(&sim, 6, Placement::Host);
        for (i, &signal) in s.iter().enumerate() {
            let packet = packets::kernel(0, Some(signal));
            q.submit(if i % 3 == 2 {
                packets::with_barrier_bit(packet)
            } else {
                packet
            })
            .unwrap();
        }
        q.run_until_idle();
        (0..6).map(|i| q.truth(i).unwrap()).collect::<Vec<_>>()
    };
    let first = run();
    let handles_differ = |a: &sigretire_sim::PacketTruth, b: &sigretire_sim::PacketTruth| {
        a.completion_signal != b.completion_signal
    };
    let second = run();
    for (a, b) in first.iter().zip(&second) {
        assert!(handles_differ(a, b)); // different memory ...
        assert_eq!(
            (a.start_ts, a.end_ts, a.completed),
            (b.start_ts, b.end_ts, b.completed)
        ); // ... same history
    }
}

#[test]
fn the_truth_history_forgets_only_old_finished_packets() {
    let sim = stepped(1);
    let q = queue(
        &sim,
        SimQueueConfig {
            size: 8,
            truth_history: 4,
            ..SimQueueConfig::default()
        },
    );
    for _ in 0..20 {
        q.submit(packets::kernel(0, None)).unwrap();
        q.run_until_idle();
    }
    assert_eq!(q.truth(0), None);
    assert!(q.truth(19).unwrap().completed);
    assert!(q.truth(16).unwrap().completed);
    assert!(q.truth(20).is_none(), "never reserved");
    let reserved = q.reserve().unwrap();
    assert!(!q.truth(reserved).unwrap().published);
    assert_eq!(q.complete(0), Err(StepError::AlreadyComplete { index: 0 }));
}

#[test]
fn a_queue_failing_while_running_to_idle_releases_its_waiters() {
    // q1 waits on q2's packet; q2 fails while the simulator runs every queue
    // (its barrier meets a negative dependency). q1 must then see the
    // negative value and fail too, in the same run, not hang.
    let sim = stepped(1);
    let q1 = queue(&sim, SimQueueConfig::default());
    let q2 = queue(&sim, SimQueueConfig::default());
    let q3 = queue(&sim, SimQueueConfig::default());
    let s = armed(&sim, 3, Placement::Device);
    sim.store_fence();
    let waiter = q1.submit(packets::barrier_and(&[s[1]], None)).unwrap();
    q2.submit(packets::barrier_and(&[s[2]], Some(s[1])))
        .unwrap();
    q3.submit(packets::kernel(0, Some(s[2]))).unwrap();
    for q in [&q1, &q2] {
        q.launch().unwrap();
        q.advance_read_index().unwrap();
    }
    q3.fail(); // s[2] goes negative: q2's barrier will fail its queue
    sim.run_until_idle();
    assert!(q2.is_failed());
    assert!(q1.is_failed(), "the waiter saw its dependency fail");
    assert!(q1.truth(waiter).unwrap().failed);
}
