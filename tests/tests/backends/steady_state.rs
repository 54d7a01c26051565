//! The steady-state bars of docs/design.md section 7, as exact counters, for the
//! retiring tracker and the baseline on the same workload. Run with
//! `cargo test -p sigretire-scenarios --test backends steady_state -- --nocapture` to
//! see them.

use crate::support::{Backend, Machine, Rig, device_signals, on_every_backend};
use sigretire_tracker::{Placement, Purpose, Stats, Tracker};

on_every_backend! {
    adopted;
    steady_state_bars_hold_for_the_retiring_tracker_and_not_for_the_baseline,
    the_bars_hold_while_the_gpu_keeps_most_of_the_ring_busy,
}

const WARMUP: usize = 4096;
const MEASURED: usize = 32768;

/// A stream of kernels with the barrier bit (as CLR dispatches them), the
/// GPU catching up every 8 submissions, one event recorded every 64.
fn workload<B: Backend, T: Tracker<Memory = B::Memory, Queue = B::Queue>>(
    rig: &mut Rig<B, T>,
) -> Stats {
    let step = |rig: &mut Rig<B, T>, i: usize| {
        let purpose = if i % 64 == 63 {
            Purpose::Event
        } else {
            Purpose::Completion
        };
        rig.submit(true, purpose).unwrap();
        if i % 8 == 7 {
            rig.run(); // checks every invariant, reading no signal
        }
    };
    for i in 0..WARMUP {
        step(rig, i);
    }
    rig.forget_issued();
    let before = rig.tracker.stats();
    for i in 0..MEASURED {
        step(rig, i);
    }
    rig.run_queue();
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

fn steady_state_bars_hold_for_the_retiring_tracker_and_not_for_the_baseline<B: Backend>() {
    for ring in [Placement::Device, Placement::Host] {
        let config = device_signals();
        let machine = Machine {
            ring,
            ..Machine::default()
        };
        let mut retiring = Rig::<B, _>::retiring_on(config, machine);
        let ours = workload(&mut retiring);
        let mut baseline = Rig::<B, _>::baseline_on(config, machine);
        let theirs = workload(&mut baseline);
        println!(
            "{}: AQL ring in {ring:?} memory, device-memory signals, {MEASURED} uses after {WARMUP} of warm-up:",
            std::any::type_name::<B>()
        );
        report("retiring", &ours);
        report("baseline", &theirs);

        assert!(
            ours.loads_per_retired_use(Placement::Device) <= 1.0 / 32.0,
            "{ours:?}"
        );
        assert!(ours.flushes_per_rearm() <= 1.0 / 32.0, "{ours:?}");
        assert!(ours.fences_per_rearm() <= 1.0 / 32.0, "{ours:?}");
        assert_eq!(ours.signals_created, 0);
        assert!(ours.retired >= MEASURED as u64 - 1024);
        assert!(
            theirs.loads_per_retired_use(Placement::Device) >= 1.0,
            "{theirs:?}"
        );
        if let Some(runtime_signals) = retiring.executed().runtime_signals {
            assert_eq!(runtime_signals, 0, "every signal carved from a pool");
        }
    }
}

/// A GPU that always keeps `outstanding` packets unfinished: the oldest
/// completes only once more than that many are queued. With 48 or 60 of the
/// initial 64 slots busy, each refill of the first ring frees only 16 or 4
/// uses; the ring must grow so that refills (a probe, a fence) still come a
/// batch at a time.
fn the_bars_hold_while_the_gpu_keeps_most_of_the_ring_busy<B: Backend>() {
    for outstanding in [48u64, 60] {
        let mut rig = Rig::<B, _>::retiring(device_signals());
        let (mut submitted, mut completed) = (0u64, 0u64);
        let mut step = |rig: &mut Rig<B, _>| {
            rig.submit(true, Purpose::Completion).unwrap();
            submitted += 1;
            while submitted - completed > outstanding {
                let index = rig.launch().unwrap();
                rig.complete(index).unwrap();
                rig.advance_read_index().unwrap();
                completed += 1;
            }
            if submitted % 8 == 0 {
                rig.check();
            }
        };
        for _ in 0..WARMUP {
            step(&mut rig);
        }
        let before = rig.tracker.stats();
        for _ in 0..MEASURED / 4 {
            step(&mut rig);
        }
        let s = rig.tracker.stats().since(&before);
        report(&format!("busy {outstanding}"), &s);
        assert!(
            s.loads_per_retired_use(Placement::Device) <= 1.0 / 32.0,
            "{outstanding} outstanding: {s:?}"
        );
        assert!(
            s.fences_per_rearm() <= 1.0 / 32.0,
            "{outstanding} outstanding: {s:?}"
        );
        assert_eq!(s.signals_created, 0, "{outstanding} outstanding");
        assert_eq!(s.backpressure, 0, "{outstanding} outstanding");
        rig.forget_issued();
        rig.run_queue();
        rig.check();
    }
}
