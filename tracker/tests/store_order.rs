//! Store ordering: every re-arm of a device-memory signal is fenced (and
//! flushed where the consumer needs it) before a packet that uses it is
//! published, and no more often than once per batch. The simulator flags
//! any packet published too early.

mod support;

use sim::QueueConfig;
use support::Rig;
use tracker::{Config, Placement, Purpose, Request, Tracker};

fn device() -> Config {
    Config {
        signals: Placement::Device,
        ..Config::default()
    }
}

fn churn<T: Tracker<Memory = tracker::sim_backend::SimMemory, Queue = sim::Queue>>(
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
fn a_device_ring_needs_one_fence_per_batch_and_no_flush() {
    let mut rig = Rig::retiring(device());
    churn(&mut rig, 2048);
    rig.check();
    let stats = rig.tracker.stats();
    assert_eq!(stats.hdp_flushes(), 0);
    assert!(stats.fences_per_rearm() <= 1.0 / 32.0, "{stats:?}");
    assert_eq!(
        rig.sim.counters().store_fences,
        stats.store_fences(),
        "the tracker counts what the hardware sees"
    );
}

#[test]
fn a_host_ring_gets_one_hdp_flush_per_batch() {
    let ring_in_host = QueueConfig {
        ring: sim::Placement::Host,
        ..support::queue_config()
    };
    let mut rig = Rig::retiring_on(device(), ring_in_host);
    churn(&mut rig, 2048);
    rig.check(); // no Unflushed violation
    let stats = rig.tracker.stats();
    assert!(stats.hdp_flushes() > 0);
    assert!(stats.flushes_per_rearm() <= 1.0 / 32.0, "{stats:?}");
    assert_eq!(rig.sim.counters().hdp_flushes, stats.hdp_flushes());
}

#[test]
fn host_signals_need_neither_fence_nor_flush() {
    let ring_in_host = QueueConfig {
        ring: sim::Placement::Host,
        ..support::queue_config()
    };
    let mut rig = Rig::retiring_on(Config::default(), ring_in_host);
    churn(&mut rig, 512);
    rig.check();
    let stats = rig.tracker.stats();
    assert_eq!((stats.store_fences(), stats.hdp_flushes()), (0, 0));
}

#[test]
fn a_copy_engine_use_is_flushed_when_it_begins() {
    let mut rig = Rig::retiring(device());
    // A copy engine's ring is in system memory.
    let copy_engine = rig
        .sim
        .create_queue(QueueConfig {
            ring: sim::Placement::Host,
            ..support::queue_config()
        })
        .unwrap();
    churn(&mut rig, 200); // signals re-armed and fenced, never flushed
    assert_eq!(rig.tracker.stats().hdp_flushes(), 0);
    let copy = rig.tracker.acquire(Request::copy_engine()).unwrap();
    assert_eq!(rig.tracker.stats().hdp_flushes(), 1);
    let index = copy_engine.reserve().unwrap();
    tracker::sim_backend::submit_kernel(&copy_engine, index, copy.signal, true);
    copy_engine.run_until_idle();
    rig.check();
    assert_eq!(
        rig.tracker.query(&copy.ticket).unwrap(),
        tracker::Status::Complete
    );
}

#[test]
fn the_baseline_fences_every_device_store() {
    let mut rig = Rig::baseline(device());
    churn(&mut rig, 256);
    rig.check();
    let stats = rig.tracker.stats();
    assert_eq!(stats.store_fences(), stats.uses, "one fence per re-arm");
}
