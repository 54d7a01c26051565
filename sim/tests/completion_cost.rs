//! What a completion costs the packet processor, by where its signal lives:
//! a PCIe atomic into host memory against an atomic in the GPU's own memory
//! (`CostProfile::completion_host` and `completion_device`).

mod common;

use common::{armed, eventually};
use sigretire_sim::{
    CostProfile, Mode, Placement, STEPPED_TICKS_PER_EVENT, Sim, SimConfig, SimQueueConfig, packets,
};
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(10);

fn profiled() -> SimQueueConfig {
    SimQueueConfig {
        profiling: true,
        ..SimQueueConfig::default()
    }
}

/// `end_ts - start_ts` of one kernel completing a signal at `placement`,
/// on a stepped simulator with `profile`.
fn stepped_run_ticks(profile: CostProfile, placement: Placement) -> u64 {
    let sim = Sim::new(SimConfig {
        profile,
        ..SimConfig::default()
    });
    let queue = sim.create_queue(profiled()).unwrap();
    let signal = armed(&sim, 1, placement)[0];
    let index = queue.submit(packets::kernel(0, Some(signal))).unwrap();
    queue.run_until_idle();
    let truth = queue.truth(index).unwrap();
    assert!(truth.completed);
    truth.end_ts.unwrap() - truth.start_ts.unwrap()
}

#[test]
fn stepped_completions_are_charged_by_placement() {
    let p = CostProfile::mi300x();
    let host = stepped_run_ticks(p, Placement::Host);
    let device = stepped_run_ticks(p, Placement::Device);
    let tick = p.gpu_tick.as_nanos() as u64;
    // One event's step, plus the write's cost in ticks, exactly.
    assert_eq!(
        host,
        STEPPED_TICKS_PER_EVENT + p.completion_host.as_nanos() as u64 / tick
    );
    assert_eq!(
        device,
        STEPPED_TICKS_PER_EVENT + p.completion_device.as_nanos() as u64 / tick
    );
    assert!(
        host > device,
        "the PCIe atomic costs more: {host} vs {device}"
    );
    // The zero profile charges nothing, wherever the signal lives.
    for placement in [Placement::Host, Placement::Device] {
        assert_eq!(
            stepped_run_ticks(CostProfile::zero(), placement),
            STEPPED_TICKS_PER_EVENT
        );
    }
}

#[test]
fn a_packet_without_a_completion_signal_pays_no_completion() {
    let sim = Sim::new(SimConfig {
        profile: CostProfile::mi300x(),
        ..SimConfig::default()
    });
    let queue = sim.create_queue(profiled()).unwrap();
    queue.submit(packets::kernel(0, None)).unwrap();
    queue.run_until_idle();
    assert_eq!(sim.now_ticks(), 2 * STEPPED_TICKS_PER_EVENT);
}

/// The GPU-side time from a kernel's launch to the completion of a
/// barrier-bit packet behind it (what an event synchronize after empty
/// work waits for), both completing signals at `placement`, on a threaded
/// simulator with `profile`.
fn kernel_then_marker(profile: CostProfile, placement: Placement) -> Duration {
    let sim = Sim::new(SimConfig {
        mode: Mode::Threaded,
        profile,
        ..SimConfig::default()
    });
    let queue = sim.create_queue(profiled()).unwrap();
    let signals = armed(&sim, 2, placement);
    let kernel = queue.submit(packets::kernel(0, Some(signals[0]))).unwrap();
    let marker = queue
        .submit(packets::with_barrier_bit(packets::kernel(
            0,
            Some(signals[1]),
        )))
        .unwrap();
    assert!(eventually(DEADLINE, || queue
        .truth(marker)
        .unwrap()
        .completed));
    let start = queue.truth(kernel).unwrap().start_ts.unwrap();
    let end = queue.truth(marker).unwrap().end_ts.unwrap();
    profile.gpu_tick * u32::try_from(end - start).unwrap()
}

#[test]
fn threaded_completions_wait_out_their_placements_cost() {
    // The MI300X difference (0.8 us a completion) is below what a loaded
    // 2-core machine's threads resolve, so the mechanism is shown with a
    // cost no scheduling delay can hide: a completion into host memory
    // that takes 20 ms. A loaded machine only adds time, to both.
    let slow_host = CostProfile {
        completion_host: Duration::from_millis(20),
        ..CostProfile::zero()
    };
    let host = kernel_then_marker(slow_host, Placement::Host);
    let device = kernel_then_marker(slow_host, Placement::Device);
    assert!(host >= 2 * slow_host.completion_host, "{host:?}");
    assert!(device < slow_host.completion_host, "{device:?}");
}
