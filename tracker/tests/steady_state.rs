//! The steady-state bars of DESIGN.md section 7, as exact counters, for the
//! retiring tracker and the baseline on the same workload. Run with
//! `cargo test -p tracker --test steady_state -- --nocapture` to see them.

mod support;

use support::Rig;
use tracker::{Config, Placement, Purpose, Stats, Tracker};

const WARMUP: usize = 4096;
const MEASURED: usize = 32768;

/// A stream of kernels with the barrier bit (as CLR dispatches them), the
/// GPU catching up every 8 submissions, one event recorded every 64.
fn workload<T: Tracker<Memory = tracker::sim_backend::SimMemory, Queue = sim::Queue>>(
    rig: &mut Rig<T>,
) -> Stats {
    let step = |rig: &mut Rig<T>, i: usize| {
        let purpose = if i % 64 == 63 {
            Purpose::Event
        } else {
            Purpose::Completion
        };
        rig.submit(true, purpose).unwrap();
        if i % 8 == 7 {
            rig.queue.run_until_idle();
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
    rig.queue.run_until_idle();
    rig.check();
    rig.tracker.stats().since(&before)
}

fn report(name: &str, s: &Stats) {
    println!(
        "{name:9} uses {:6} retired {:6} | device loads/retired use {:.5} | fences/re-arm {:.5} | flushes/re-arm {:.5} | signals created {} | loads {} stores {} fences {} flushes {} | probes {}",
        s.uses,
        s.retired,
        s.loads_per_retired_use(Placement::Device),
        s.fences_per_rearm(),
        s.flushes_per_rearm(),
        s.signals_created,
        s.device().loads,
        s.device().stores,
        s.store_fences(),
        s.hdp_flushes(),
        s.probes,
    );
}

#[test]
fn steady_state_bars_hold_for_the_retiring_tracker_and_not_for_the_baseline() {
    for ring in [sim::Placement::Device, sim::Placement::Host] {
        let config = Config {
            signals: Placement::Device,
            ..Config::default()
        };
        let queue = sim::QueueConfig {
            ring,
            ..support::queue_config()
        };
        let mut retiring = Rig::retiring_on(config, queue);
        let ours = workload(&mut retiring);
        let mut baseline = Rig::baseline_on(config, queue);
        let theirs = workload(&mut baseline);
        println!(
            "AQL ring in {ring:?} memory, device-memory signals, {MEASURED} uses after {WARMUP} of warm-up:"
        );
        report("retiring", &ours);
        report("baseline", &theirs);

        assert!(ours.loads_per_retired_use(Placement::Device) <= 1.0 / 32.0);
        assert!(ours.flushes_per_rearm() <= 1.0 / 32.0);
        assert!(ours.fences_per_rearm() <= 1.0 / 32.0);
        assert_eq!(ours.signals_created, 0);
        assert!(ours.retired >= MEASURED as u64 - 1024);
        assert!(theirs.loads_per_retired_use(Placement::Device) >= 1.0);
    }
}
