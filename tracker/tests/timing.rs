//! Timestamps: harvested once, before re-arm, into host memory, and equal to
//! the packet processor's ground truth.

mod support;

use support::Rig;
use tracker::{Config, Placement, Purpose, Request, Tracker};

#[test]
fn timed_uses_that_wrap_the_ring_keep_their_own_stamps() {
    // A graph launch under a profiler: more timed uses than ring slots, each
    // event held while later uses re-arm the ring around it.
    let config = Config {
        initial_size: 8,
        growth_limit: 1,
        signals: Placement::Device,
        ..Config::default()
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
        assert_eq!(
            (Some(stamps.start), Some(stamps.end)),
            (truth.start_ts, truth.end_ts)
        );
        assert_eq!(rig.tracker.timestamps(&u.ticket).unwrap(), Some(stamps));
    }
    let stats = rig.tracker.stats();
    assert_eq!(stats.harvests, 40, "exactly once each");
    assert_eq!(stats.device().timestamp_reads, 40);
}

#[test]
fn timing_only_uses_get_host_signals_from_their_own_pool() {
    let config = Config {
        signals: Placement::Device,
        ..Config::default()
    };
    let mut rig = Rig::retiring(config);
    let mut uses = Vec::new();
    for _ in 0..100 {
        let index = rig.queue.write_index();
        let acquired = rig
            .tracker
            .acquire(
                Request::packet(index)
                    .barrier(true)
                    .purpose(Purpose::TimingOnly),
            )
            .unwrap();
        assert_eq!(acquired.placement, Placement::Host);
        rig.queue.reserve().unwrap();
        tracker::sim_backend::submit_kernel(&rig.queue, index, acquired.signal, true);
        uses.push((index, acquired.ticket));
        rig.queue.run_until_idle();
        assert!(rig.tracker.timestamps(&acquired.ticket).unwrap().is_some());
    }
    rig.tracker.poll();
    let stats = rig.tracker.stats();
    assert_eq!(
        stats.device().timestamp_reads,
        0,
        "no PCIe read for the profiler's stamps"
    );
    assert_eq!(stats.host().timestamp_reads, 100);
    assert_eq!(stats.device().loads, 0);
    assert_eq!(
        stats.spare_swaps, 64,
        "each of the 64 slots swapped once, then kept its host signal"
    );
    // A sync use still gets a device signal.
    let sync = rig.submit(true, Purpose::CpuSync).unwrap();
    let _ = sync;
    assert_eq!(
        rig.sim.placement(
            rig.sim
                .resolve(hsa_sys::hsa_signal_t {
                    handle: sync.signal
                })
                .unwrap()
        ),
        sim::Placement::Device
    );
}

#[test]
fn elapsed_time_of_an_event_costs_no_pcie_read() {
    let config = Config {
        signals: Placement::Device,
        ..Config::default()
    };
    let mut rig = Rig::retiring(config);
    let start = rig
        .submit_request(
            Request::packet(rig.queue.write_index())
                .barrier(true)
                .purpose(Purpose::Event)
                .timed(true),
            &[],
        )
        .unwrap();
    let start_ref = rig.tracker.hold(&start.ticket).unwrap().unwrap();
    let end = rig
        .submit_request(
            Request::packet(rig.queue.write_index())
                .barrier(true)
                .purpose(Purpose::Event)
                .timed(true),
            &[],
        )
        .unwrap();
    let end_ref = rig.tracker.hold(&end.ticket).unwrap().unwrap();
    rig.run();
    rig.tracker.poll();
    let reads = rig.tracker.stats().device();
    for _ in 0..10 {
        let elapsed = end_ref.timestamps().unwrap().end - start_ref.timestamps().unwrap().start;
        assert!(elapsed > 0);
    }
    assert_eq!(rig.tracker.stats().device(), reads);
}

#[test]
fn a_device_allocation_that_fell_back_keeps_a_working_host_signal() {
    let config = Config {
        initial_size: 4,
        refill_batch: 4,
        signals: Placement::Device,
        ..Config::default()
    };
    let mut rig = Rig::retiring(config);
    rig.sim.set_device_memory_available(false);
    let mut placements = Vec::new();
    for _ in 0..12 {
        let u = rig.submit(true, Purpose::CpuSync).unwrap(); // ring grows past its 4 device signals
        placements.push(
            rig.sim.placement(
                rig.sim
                    .resolve(hsa_sys::hsa_signal_t { handle: u.signal })
                    .unwrap(),
            ),
        );
    }
    rig.run();
    rig.tracker.poll();
    rig.check();
    assert!(
        placements.contains(&sim::Placement::Host),
        "fell back to host memory"
    );
    assert!(placements[..4].iter().all(|p| *p == sim::Placement::Device));
    assert_eq!(rig.tracker.stats().retired, 12);
}

#[test]
fn a_backend_without_device_memory_settles_on_host_signals() {
    // The device gives no device memory at all: the tracker finds out once,
    // then stops asking (it used to allocate a batch per use).
    let (sim, queue) = tracker::sim_backend::stepped_queue();
    sim.set_device_memory_available(false);
    let memory = std::sync::Arc::new(tracker::sim_backend::SimMemory::new(
        sim.clone(),
        queue.agent(),
    ));
    let config = Config {
        signals: Placement::Device,
        ..Config::default()
    };
    let mut tracker = tracker::RetiringTracker::new(memory, queue.clone(), config).unwrap();
    for _ in 0..200 {
        let index = queue.reserve().unwrap();
        let acquired = tracker
            .acquire(
                Request::packet(index)
                    .barrier(true)
                    .purpose(Purpose::CpuSync),
            )
            .unwrap();
        assert_eq!(acquired.placement, Placement::Host);
        tracker::sim_backend::submit_kernel(&queue, index, acquired.signal, true);
        queue.run_until_idle();
    }
    tracker.poll();
    let stats = tracker.stats();
    assert_eq!(stats.signals_created, 64, "the initial ring only");
    assert_eq!(stats.retired, 200);
}
