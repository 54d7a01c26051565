//! Store ordering: every re-arm of a device-memory signal is fenced (and
//! flushed where the consumer needs it) before a packet that uses it is
//! published, and no more often than once per batch. The machine flags any
//! packet published too early; the backend's own counters say what it
//! executed.

use crate::support::{Backend, Machine, Rig, device_signals, on_every_backend};
use sigretire_tracker::{Config, Placement, Purpose, Tracker};

on_every_backend! {
    adopted;
    a_device_ring_needs_one_fence_per_batch_and_no_flush,
    a_host_ring_gets_one_hdp_flush_per_batch,
    host_signals_need_neither_fence_nor_flush,
    the_baseline_fences_every_device_store,
}

fn ring_in_host_memory() -> Machine {
    Machine {
        ring: Placement::Host,
        ..Machine::default()
    }
}

fn churn<B: Backend, T: Tracker<Memory = B::Memory, Queue = B::Queue>>(
    rig: &mut Rig<B, T>,
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

fn a_device_ring_needs_one_fence_per_batch_and_no_flush<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring(device_signals());
    churn(&mut rig, 2048);
    rig.check();
    let stats = rig.tracker.stats();
    assert_eq!(stats.hdp_flushes(), 0);
    assert!(stats.fences_per_rearm() <= 1.0 / 32.0, "{stats:?}");
    assert_eq!(
        rig.executed().store_fences,
        stats.store_fences(),
        "every fence the tracker counts was executed"
    );
    if let Some(register) = rig.gpu.take_hdp_flush_register() {
        assert_eq!(register, 0, "the flush register was never written");
    }
}

fn a_host_ring_gets_one_hdp_flush_per_batch<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring_on(device_signals(), ring_in_host_memory());
    churn(&mut rig, 2048);
    rig.check(); // no Unflushed violation
    let stats = rig.tracker.stats();
    assert!(stats.hdp_flushes() > 0);
    assert!(stats.flushes_per_rearm() <= 1.0 / 32.0, "{stats:?}");
    assert_eq!(rig.executed().hdp_flushes, stats.hdp_flushes());
    if let Some(register) = rig.gpu.take_hdp_flush_register() {
        assert_eq!(register, 1, "1 written to HDP_MEM_FLUSH_CNTL");
    }
}

fn host_signals_need_neither_fence_nor_flush<B: Backend>() {
    let mut rig = Rig::<B, _>::retiring_on(Config::default(), ring_in_host_memory());
    churn(&mut rig, 512);
    rig.check();
    let stats = rig.tracker.stats();
    assert_eq!((stats.store_fences(), stats.hdp_flushes()), (0, 0));
}

fn the_baseline_fences_every_device_store<B: Backend>() {
    let mut rig = Rig::<B, _>::baseline(device_signals());
    churn(&mut rig, 256);
    rig.check();
    let stats = rig.tracker.stats();
    assert_eq!(stats.store_fences(), stats.uses, "one fence per re-arm");
}

/// On the simulator only: the scenario needs a copy engine's ring in system
/// memory beside a compute ring in VRAM, and the ROCr stand-in places every
/// ring of a machine alike (`sigretire_rocr_standin::Config::ring_in_device_memory`).
mod sim_only {
    use super::churn;
    use crate::support::{Backend, Rig, Simulator, device_signals};
    use sigretire_tracker::{Request, Status, Tracker, Work, backend::HardwareQueue};

    #[test]
    fn a_copy_engine_use_is_flushed_when_it_begins() {
        let mut rig = Rig::<Simulator, _>::retiring(device_signals());
        let copy_engine = rig
            .gpu
            .sim
            .create_queue(sigretire_sim::SimQueueConfig {
                ring: sigretire_sim::Placement::Host,
                ..rig.gpu.queue_config
            })
            .unwrap();
        churn(&mut rig, 200); // signals re-armed and fenced, never flushed
        assert_eq!(rig.tracker.stats().hdp_flushes(), 0);
        let copy = rig.tracker.acquire(Request::copy_engine()).unwrap();
        assert_eq!(rig.tracker.stats().hdp_flushes(), 1);
        let index = copy_engine.reserve().unwrap();
        // The stand-in for the copy engine decrements the copy use's signal.
        for packet in copy
            .publication
            .copy_engine_packets(index)
            .expect("a copy-engine use")
        {
            copy_engine.publish(packet, Work::Kernel(0)).unwrap();
        }
        rig.gpu.run(&copy_engine);
        rig.check();
        assert_eq!(rig.tracker.query(&copy.ticket).unwrap(), Status::Complete);
    }
}
