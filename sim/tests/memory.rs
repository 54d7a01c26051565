//! Signal memory: batches, placements, counted host accesses, costs,
//! allocation failure injection and handle safety.

mod common;

use common::{queue, stepped};
use sigretire_sim::hsa_sys::AMD_SIGNAL_KIND_USER;
use sigretire_sim::{
    Access, AgentId, CostProfile, Counters, Placement, Sim, SimConfig, SimError, SimQueueConfig,
    packets,
};
use std::time::{Duration, Instant};

#[test]
fn counters_count_every_host_access_by_placement() {
    let sim = stepped(2);
    let host = sim.allocate(2, Placement::Host, AgentId(0)).unwrap();
    let device = sim.allocate(3, Placement::Device, AgentId(1)).unwrap();
    let before = sim.counters();
    sim.store(host[0], 1);
    sim.load(host[1]);
    sim.load(host[1]);
    for &s in &device {
        sim.store(s, 1);
    }
    sim.load(device[0]);
    sim.load_timestamps(device[1]); // one load: one 16-byte access
    sim.load_timestamps(host[0]); // one load
    sim.store_fence();
    sim.store_fence();
    sim.hdp_flush(AgentId(1));
    assert_eq!(
        sim.counters().since(before),
        Counters {
            host: Access {
                loads: 3,
                stores: 1
            },
            device: Access {
                loads: 2,
                stores: 3
            },
            store_fences: 2,
            hdp_flushes: 1,
        }
    );
}

#[test]
fn the_gpu_side_is_never_counted() {
    let sim = stepped(1);
    let q = queue(&sim, SimQueueConfig::default());
    let s = sim.allocate(2, Placement::Device, AgentId(0)).unwrap();
    sim.store(s[0], 1);
    sim.store(s[1], 1);
    sim.store_fence();
    let before = sim.counters();
    q.submit(packets::kernel(0, Some(s[0]))).unwrap();
    q.submit(packets::barrier_and(&[s[0]], Some(s[1]))).unwrap();
    q.run_until_idle();
    assert!(q.is_idle());
    assert_eq!(sim.counters().since(before), Counters::default());
}

#[test]
fn a_batch_is_contiguous_aligned_user_signals_at_zero() {
    let sim = stepped(1);
    let batch = sim.allocate(8, Placement::Device, AgentId(0)).unwrap();
    let base = batch[0].handle().handle;
    assert_eq!(base % 64, 0);
    for (i, &s) in batch.iter().enumerate() {
        assert_eq!(s.handle().handle, base + 64 * i as u64);
        assert_eq!(sim.load(s), 0);
        assert_eq!(sim.load_timestamps(s), (0, 0));
        assert_eq!(sim.placement(s), Placement::Device);
        assert_eq!(sim.agent_of(s), AgentId(0));
        assert_eq!(s.sim_id(), sim.id());
    }
    // The kind word is ABI: read it straight from the block.
    // SAFETY: the block is live while `sim` is; offset 0 holds `kind`, an
    // i64 nobody writes after allocation.
    let kind = unsafe { std::ptr::read(base as *const i64) };
    assert_eq!(kind, AMD_SIGNAL_KIND_USER);
    let other = sim.allocate(1, Placement::Device, AgentId(0)).unwrap()[0];
    assert!(!batch.contains(&other));
}

#[test]
fn device_allocations_fall_back_to_host_memory() {
    let sim = stepped(1);
    sim.set_device_memory_available(false);
    let fallback = sim.allocate(2, Placement::Device, AgentId(0)).unwrap();
    assert!(
        fallback
            .iter()
            .all(|&s| sim.placement(s) == Placement::Host)
    );
    let before = sim.counters();
    sim.load(fallback[0]);
    assert_eq!(sim.counters().since(before).host.loads, 1);
    sim.set_device_memory_available(true);
    let device = sim.allocate(1, Placement::Device, AgentId(0)).unwrap()[0];
    assert_eq!(sim.placement(device), Placement::Device);
}

#[test]
fn injected_allocation_failures_then_recovery() {
    let sim = stepped(1);
    sim.fail_allocations(2);
    assert_eq!(
        sim.allocate(4, Placement::Device, AgentId(0)),
        Err(SimError::OutOfMemory)
    );
    assert_eq!(
        sim.allocate(4, Placement::Host, AgentId(0)),
        Err(SimError::OutOfMemory)
    );
    assert_eq!(
        sim.allocate(4, Placement::Host, AgentId(0))
            .map(|v| v.len()),
        Ok(4)
    );
    assert_eq!(sim.allocate(0, Placement::Host, AgentId(0)), Ok(Vec::new()));
}

#[test]
fn bad_configurations_are_errors_that_say_what_to_do() {
    let sim = stepped(2);
    let unknown = sim.allocate(1, Placement::Host, AgentId(2)).unwrap_err();
    assert_eq!(
        unknown,
        SimError::UnknownAgent {
            agent: AgentId(2),
            agents: 2
        }
    );
    assert!(unknown.to_string().contains("agents 0 to 1"), "{unknown}");
    for size in [0, 3, 1, sigretire_sim::MAX_QUEUE_SIZE * 2] {
        let error = sim
            .create_queue(SimQueueConfig {
                size,
                ..SimQueueConfig::default()
            })
            .unwrap_err();
        assert!(
            matches!(error, SimError::InvalidConfig(_)),
            "{size}: {error}"
        );
    }
    let error = Sim::try_new(SimConfig {
        agents: 0,
        ..SimConfig::default()
    })
    .unwrap_err();
    assert!(matches!(error, SimError::InvalidConfig(_)));
}

#[test]
#[should_panic(expected = "only valid with the Sim that allocated it")]
fn a_signal_from_another_simulator_is_detected() {
    let first = stepped(1);
    let second = stepped(1);
    let foreign = first.allocate(1, Placement::Host, AgentId(0)).unwrap()[0];
    second.load(foreign);
}

#[test]
#[should_panic(expected = "only valid with the Sim that allocated it")]
fn a_signal_of_a_dropped_simulator_is_detected() {
    let dangling = stepped(1)
        .allocate(1, Placement::Device, AgentId(0))
        .unwrap()[0];
    let sim = stepped(1);
    sim.store(dangling, 1);
}

/// The mean cost of `op` over `n` runs.
fn mean(n: u32, mut op: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        op();
    }
    start.elapsed() / n
}

#[test]
fn the_mi300x_profile_charges_pcie_round_trips() {
    let sim = Sim::new(SimConfig {
        profile: CostProfile::mi300x(),
        ..SimConfig::default()
    });
    let device = sim.allocate(1, Placement::Device, AgentId(0)).unwrap()[0];
    let host = sim.allocate(1, Placement::Host, AgentId(0)).unwrap()[0];
    let device_load = mean(200, || {
        sim.load(device);
    });
    assert!(
        device_load >= Duration::from_nanos(1_100),
        "{device_load:?}"
    );
    let flush = mean(100, || sim.hdp_flush(AgentId(0)));
    assert!(flush >= Duration::from_nanos(1_100), "{flush:?}");
    let stamps = mean(100, || {
        sim.load_timestamps(device);
    });
    // The pair is one 16-byte access: one round trip (counted as one load
    // above; a timing upper bound would not hold on a loaded machine).
    assert!(stamps >= Duration::from_nanos(1_100), "{stamps:?}");
    // Host-memory loads cost far less (a loose bound: only the order matters).
    let host_load = mean(2_000, || {
        sim.load(host);
    });
    assert!(host_load < device_load, "{host_load:?} vs {device_load:?}");
}
