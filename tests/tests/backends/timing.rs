//! Timestamps: harvested once, before re-arm, into host memory, and equal to
//! the packet processor's ground truth (in the time domain the backend
//! reports: GPU ticks on the simulator, the system domain through ROCr).
//! Signal placement: timing-only uses and device-memory fallback.

use crate::support::{Backend, Held, Issued, Retiring, Rig, device_signals, on_every_backend};
use sigretire_tracker::{Config, Placement, Purpose, Request, Tracker};

on_every_backend! {
    adopted;
    timed_uses_that_wrap_the_ring_keep_their_own_stamps,
    timing_only_uses_get_host_signals_from_their_own_pool,
    elapsed_time_of_an_event_costs_no_pcie_read,
    a_device_allocation_that_fell_back_keeps_a_working_host_signal,
    a_backend_without_device_memory_settles_on_host_signals,
    after_a_fallback_the_device_signals_stay_in_use,
}

/// A timed event use (a barrier), and a reference held on it.
#[track_caller]
fn held_timed_event<B: Backend>(
    rig: &mut Rig<B, Retiring<B>>,
) -> (Issued<B::Queue>, Held<B::Memory>) {
    let request = Request::packet(rig.write_index())
        .barrier(true)
        .purpose(Purpose::Event)
        .timed(true);
    let u = rig.submit_request(request, &[]).unwrap();
    let reference = rig.hold(&u).unwrap();
    (u, reference)
}

fn timed_uses_that_wrap_the_ring_keep_their_own_stamps<B: Backend>() {
    // A graph launch under a profiler: more timed uses than ring slots, each
    // event held while later uses re-arm the ring around it.
    let config = Config {
        initial_size: 8,
        growth_limit: 1,
        ..device_signals()
    };
    let mut rig = Rig::<B, _>::retiring(config);
    let mut events = Vec::new();
    for i in 0..40 {
        events.push(held_timed_event(&mut rig));
        if i % 4 == 3 {
            rig.run();
            rig.poll();
        }
        rig.check(); // each held reference's stamps are the ground truth
    }
    rig.run();
    rig.poll();
    for (u, reference) in &events {
        let stamps = reference.timestamps().expect("harvested at retirement");
        // The tracker's answer is the reference's, and the ground truth.
        assert_eq!(rig.timestamps(u), Some(stamps));
    }
    let stats = rig.tracker.stats();
    assert_eq!(stats.harvests, 40, "exactly once each");
    assert_eq!(stats.device().timestamp_reads, 40);
}

fn timing_only_uses_get_host_signals_from_their_own_pool<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    for _ in 0..100 {
        let u = rig
            .submit_request(
                Request::packet(rig.write_index())
                    .barrier(true)
                    .purpose(Purpose::TimingOnly),
                &[],
            )
            .unwrap();
        assert_eq!(u.placement, Placement::Host);
        rig.run_queue();
        assert!(rig.timestamps(&u).is_some());
    }
    rig.poll();
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
    let sync = rig.submit(true, Purpose::CpuSync).unwrap();
    assert_eq!(
        rig.placement(&sync),
        Placement::Device,
        "a sync use still gets a device signal"
    );
}

fn elapsed_time_of_an_event_costs_no_pcie_read<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    let (_, start_ref) = held_timed_event(&mut rig);
    let (_, end_ref) = held_timed_event(&mut rig);
    rig.run();
    rig.poll();
    let reads = rig.tracker.stats().device();
    for _ in 0..10 {
        let elapsed = end_ref.timestamps().unwrap().end - start_ref.timestamps().unwrap().start;
        assert!(elapsed > 0);
        rig.check(); // the stamps are the ground truth; checking reads nothing
    }
    assert_eq!(rig.tracker.stats().device(), reads);
}

fn a_device_allocation_that_fell_back_keeps_a_working_host_signal<B: Backend>() {
    let config = Config {
        initial_size: 4,
        refill_batch: 4,
        ..device_signals()
    };
    let mut rig = Rig::<B, _>::retiring(config);
    rig.gpu.exhaust_device_memory(&rig.memory);
    let mut placements = Vec::new();
    for _ in 0..60 {
        let u = rig.submit(true, Purpose::CpuSync).unwrap(); // the ring grows past its 4 device signals
        placements.push(rig.placement(&u));
    }
    rig.run();
    rig.poll();
    assert!(
        placements.contains(&Placement::Host),
        "fell back to host memory"
    );
    assert!(placements[..4].iter().all(|p| *p == Placement::Device));
    if let Some(fallbacks) = rig.executed().fallbacks {
        assert!(fallbacks > 0);
    }
    assert_eq!(rig.tracker.stats().retired, 60);
}

fn a_backend_without_device_memory_settles_on_host_signals<B: Backend>() {
    // The device gives no device memory at all: the tracker finds out once,
    // then stops asking (it used to allocate a batch per use).
    let gpu = B::new(Default::default());
    let mut rig = Rig::try_retiring_with(gpu, device_signals(), |gpu, memory| {
        gpu.exhaust_device_memory(memory);
    })
    .unwrap();
    for _ in 0..200 {
        let u = rig.submit(true, Purpose::CpuSync).unwrap();
        assert_eq!(u.placement, Placement::Host);
        rig.run_queue();
    }
    rig.poll();
    let stats = rig.tracker.stats();
    assert_eq!(stats.signals_created, 64, "the initial ring only");
    assert_eq!(stats.retired, 200);
}

fn after_a_fallback_the_device_signals_stay_in_use<B: Backend>() {
    // The ring's first 4 signals are in device memory; growing it runs the
    // device dry, so the rest come back in host memory. From then on nothing
    // is swapped: the 4 device signals keep serving syncs in their slots,
    // and the host signals serve in theirs.
    let config = Config {
        initial_size: 4,
        refill_batch: 4,
        ..device_signals()
    };
    let mut rig = Rig::<B, _>::retiring(config);
    rig.gpu.exhaust_device_memory(&rig.memory);
    for _ in 0..16 {
        rig.submit(true, Purpose::CpuSync).unwrap(); // grows to 16 slots
    }
    rig.run();
    rig.poll();
    let before = rig.tracker.stats();
    let mut device = 0;
    for _ in 0..160 {
        let u = rig.submit(true, Purpose::CpuSync).unwrap();
        if u.placement == Placement::Device {
            device += 1;
        }
        rig.run();
    }
    rig.poll();
    let stats = rig.tracker.stats().since(&before);
    assert_eq!(stats.spare_swaps, 0, "no slot gave its signal away");
    assert_eq!(stats.signals_created, 0);
    assert_eq!(device, 40, "the 4 device signals serve every 16-slot round");
}
