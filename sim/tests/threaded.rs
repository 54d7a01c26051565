//! The real-time processor thread, end to end. Deadlines are generous (the
//! machine may be busy); what is asserted is completion, order and the lower
//! bounds the profile promises.

mod common;

use common::{armed, eventually};
use sigretire_sim::{
    AgentId, CostProfile, HostFlag, Kernel, Mode, Placement, Queue, Sim, SimConfig, SimQueueConfig,
    StepError, packets,
};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

fn threaded(profile: CostProfile) -> Sim {
    Sim::new(SimConfig {
        mode: Mode::Threaded,
        profile,
        agents: 2,
        seed: 42,
    })
}

fn all_done(sim: &Sim, signals: &[sigretire_sim::Signal]) -> bool {
    signals.iter().all(|&s| sim.load(s) == 0)
}

/// For every fence (barrier-bit packet): it started after every earlier
/// packet ended.
fn assert_fences_waited(q: &Queue, count: u64) {
    let truths: Vec<_> = (0..count).map(|i| q.truth(i).unwrap()).collect();
    for (i, fence) in truths.iter().enumerate().filter(|(_, t)| t.barrier) {
        let start = fence.start_ts.unwrap();
        for earlier in &truths[..i] {
            assert!(
                earlier.end_ts.unwrap() <= start,
                "fence {i} started before an earlier packet ended"
            );
        }
    }
}

#[test]
fn submitted_packets_all_complete() {
    let sim = threaded(CostProfile::zero());
    let q = sim.create_queue(SimQueueConfig::default()).unwrap();
    let signals = armed(&sim, 1000, Placement::Device);
    for (i, &s) in signals.iter().enumerate() {
        let packet = packets::kernel(0, Some(s));
        let packet = if i % 10 == 9 {
            packets::with_barrier_bit(packet)
        } else {
            packet
        };
        while q.submit(packet).is_err() {
            std::thread::yield_now(); // queue full: the processor will drain it
        }
    }
    assert!(eventually(DEADLINE, || all_done(&sim, &signals)));
    assert!(eventually(DEADLINE, || q.is_idle()));
    assert_eq!(q.read_index(), 1000);
    assert!((0..1000).all(|i| q.truth(i).unwrap().completed));
    assert_fences_waited(&q, 1000);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn out_of_order_queues_complete_everything_and_fences_still_wait() {
    let sim = threaded(CostProfile::zero());
    let q = sim
        .create_queue(SimQueueConfig {
            out_of_order: true,
            profiling: true,
            ..SimQueueConfig::default()
        })
        .unwrap();
    let short = sim.register_kernel(Kernel::Duration(Duration::from_micros(50)));
    let signals = armed(&sim, 200, Placement::Host);
    for (i, &s) in signals.iter().enumerate() {
        let packet = packets::kernel(if i % 3 == 0 { short } else { 0 }, Some(s));
        q.submit(if i % 25 == 24 {
            packets::with_barrier_bit(packet)
        } else {
            packet
        })
        .unwrap();
    }
    assert!(eventually(DEADLINE, || all_done(&sim, &signals)));
    assert_fences_waited(&q, 200);
}

#[test]
fn out_of_order_queues_really_complete_out_of_order() {
    // 64 empty kernels on a zero-cost profile run for no time. Released
    // together from a stall (the processor skips a stalled queue), they all
    // become ready in the same pass however late the processor thread gets
    // to run, and only its seeded shuffle decides their completion order: a
    // shuffle of 64 is the identity with probability 1/64!. Without the
    // shuffle they complete in index order, and no pair below is inverted.
    // The GPU clock ticks every nanosecond, so completions a few hundred
    // nanoseconds apart get distinct `end_ts`.
    let sim = Sim::new(SimConfig {
        mode: Mode::Threaded,
        profile: CostProfile {
            gpu_tick: Duration::from_nanos(1),
            ..CostProfile::zero()
        },
        agents: 1,
        seed: 42,
    });
    let q = sim
        .create_queue(SimQueueConfig {
            out_of_order: true,
            ..SimQueueConfig::default()
        })
        .unwrap();
    let signals = armed(&sim, 64, Placement::Host);
    q.stall(true);
    for &s in &signals {
        q.submit(packets::kernel(0, Some(s))).unwrap();
    }
    q.stall(false);
    assert!(eventually(DEADLINE, || all_done(&sim, &signals)));
    let end: Vec<u64> = (0..64)
        .map(|i| q.truth(i).unwrap().end_ts.unwrap())
        .collect();
    let inverted = (0..64)
        .flat_map(|i| (i + 1..64).map(move |j| (i, j)))
        .filter(|&(i, j)| end[i] > end[j])
        .count();
    assert!(
        inverted > 0,
        "every packet completed in submission order: {end:?}"
    );
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn a_spinning_kernel_holds_its_queue_until_the_flag_is_set() {
    let sim = threaded(CostProfile::zero());
    let q = sim.create_queue(SimQueueConfig::default()).unwrap();
    let flag = HostFlag::new();
    let spin = sim.register_kernel(Kernel::SpinUntil(flag.clone()));
    let s = armed(&sim, 2, Placement::Device);
    q.submit(packets::kernel(spin, Some(s[0]))).unwrap();
    q.submit(packets::with_barrier_bit(packets::barrier_and(
        &[],
        Some(s[1]),
    )))
    .unwrap();
    // Long enough for the processor to park: the flag must wake it.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!((sim.load(s[0]), sim.load(s[1])), (1, 1));
    let truth = q.truth(0).unwrap();
    assert!(truth.launched && !truth.completed);
    assert_eq!(q.read_index(), 1, "consumed at launch, ahead of completion");
    flag.set();
    assert!(eventually(DEADLINE, || all_done(&sim, &s)));
}

#[test]
fn a_cross_queue_wait_resolves_in_real_time() {
    let sim = threaded(CostProfile::zero());
    let producer = sim.create_queue(SimQueueConfig::default()).unwrap();
    let consumer = sim
        .create_queue(SimQueueConfig {
            agent: AgentId(1),
            ..SimQueueConfig::default()
        })
        .unwrap();
    let flag = HostFlag::new();
    let spin = sim.register_kernel(Kernel::SpinUntil(flag.clone()));
    let s = armed(&sim, 2, Placement::Device);
    producer.submit(packets::kernel(spin, Some(s[0]))).unwrap();
    consumer
        .submit(packets::barrier_and(&[s[0]], None))
        .unwrap();
    consumer.submit(packets::kernel(0, Some(s[1]))).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        !consumer.truth(1).unwrap().launched,
        "held by the pending barrier"
    );
    flag.set();
    assert!(eventually(DEADLINE, || all_done(&sim, &s)));
    let (produced, consumed) = (producer.truth(0).unwrap(), consumer.truth(1).unwrap());
    assert!(produced.end_ts.unwrap() <= consumed.start_ts.unwrap());
}

#[test]
fn the_mi300x_profile_delays_completion_by_launch_and_execution() {
    let sim = threaded(CostProfile::mi300x());
    let q = sim.create_queue(SimQueueConfig::default()).unwrap();
    let s = armed(&sim, 1, Placement::Device)[0];
    let start = Instant::now();
    q.submit(packets::kernel(0, Some(s))).unwrap();
    while sim.load(s) != 0 {
        assert!(start.elapsed() < DEADLINE);
    }
    let profile = CostProfile::mi300x();
    let floor = profile.launch_latency + profile.kernel_execution;
    assert!(
        start.elapsed() >= floor,
        "{:?} < {floor:?}",
        start.elapsed()
    );
}

#[test]
fn a_duration_kernel_runs_at_least_its_duration() {
    let sim = threaded(CostProfile::zero());
    let q = sim
        .create_queue(SimQueueConfig {
            profiling: true,
            ..SimQueueConfig::default()
        })
        .unwrap();
    let long = sim.register_kernel(Kernel::Duration(Duration::from_millis(30)));
    let s = armed(&sim, 1, Placement::Host)[0];
    let start = Instant::now();
    q.submit(packets::kernel(long, Some(s))).unwrap();
    q.run_until_idle();
    assert!(start.elapsed() >= Duration::from_millis(30));
    assert_eq!(sim.load(s), 0);
    let (begin, end) = sim.load_timestamps(s);
    // 30 ms in 10 ns ticks.
    assert!(end - begin >= 3_000_000, "{begin} .. {end}");
}

#[test]
fn stall_failure_and_step_calls_in_threaded_mode() {
    let sim = threaded(CostProfile::zero());
    let q = sim.create_queue(SimQueueConfig::default()).unwrap();
    assert_eq!(q.launch(), Err(StepError::WrongMode));
    assert_eq!(q.complete(0), Err(StepError::WrongMode));
    assert_eq!(q.advance_read_index(), Err(StepError::WrongMode));

    let s = armed(&sim, 3, Placement::Device);
    q.stall(true);
    q.submit(packets::kernel(0, Some(s[0]))).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(!q.truth(0).unwrap().launched);
    q.stall(false);
    assert!(eventually(DEADLINE, || sim.load(s[0]) == 0));

    let flag = HostFlag::new();
    let spin = sim.register_kernel(Kernel::SpinUntil(flag.clone()));
    q.submit(packets::kernel(spin, Some(s[1]))).unwrap();
    q.submit(packets::kernel(0, Some(s[2]))).unwrap();
    assert!(eventually(DEADLINE, || q.truth(1).unwrap().launched));
    q.fail();
    assert_eq!((sim.load(s[1]), sim.load(s[2])), (-1, -1));
    flag.set();
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(sim.load(s[1]), -1, "a failed queue completes nothing");
    assert!(q.is_idle());
}

#[test]
fn many_producers_share_one_queue() {
    let sim = threaded(CostProfile::zero());
    let q = sim.create_queue(SimQueueConfig::default()).unwrap();
    let per_thread = 200;
    let signals: Vec<Vec<sigretire_sim::Signal>> = (0..4)
        .map(|_| armed(&sim, per_thread, Placement::Device))
        .collect();
    std::thread::scope(|scope| {
        for mine in &signals {
            let q = q.clone();
            scope.spawn(move || {
                for &s in mine {
                    while q.submit(packets::kernel(0, Some(s))).is_err() {
                        std::thread::yield_now();
                    }
                }
            });
        }
    });
    let all: Vec<_> = signals.concat();
    assert!(eventually(DEADLINE, || all_done(&sim, &all)));
    assert_eq!(q.write_index(), 4 * per_thread as u64);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[test]
fn run_until_idle_waits_for_the_processor() {
    let sim = threaded(CostProfile::mi300x());
    let q = sim.create_queue(SimQueueConfig::default()).unwrap();
    let s = armed(&sim, 10, Placement::Host);
    for &signal in &s {
        q.submit(packets::kernel(0, Some(signal))).unwrap();
    }
    sim.run_until_idle();
    assert!(q.is_idle());
    assert!(all_done(&sim, &s));
}

#[test]
fn a_packet_published_after_its_doorbell_still_runs() {
    let sim = threaded(CostProfile::zero());
    let q = sim.create_queue(SimQueueConfig::default()).unwrap();
    let s = armed(&sim, 1, Placement::Host)[0];
    let index = q.reserve().unwrap();
    q.ring_doorbell(index); // out of HSA order: the header is still INVALID
    std::thread::sleep(Duration::from_millis(20)); // the processor parks
    assert!(!q.truth(index).unwrap().launched);
    q.write(index, packets::kernel(0, Some(s)));
    assert!(eventually(DEADLINE, || sim.load(s) == 0));
}
