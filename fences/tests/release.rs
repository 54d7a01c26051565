//! Deferred release: values handed to a queue with the command whose
//! completion frees them are dropped once the batch's proof retired it —
//! never before the packet truly completed (the simulator's ground truth,
//! checked in each value's `Drop`), in queue order, at once when already
//! known done, with no memory read per value (the simulator's and the
//! tracker's counters), and bounded by the work in flight.

mod support;

use sigretire_queue::sim::{SimPlatform, SimTracker};
use sigretire_queue::tracker::{Config, Placement};
use sigretire_queue::{BatchLimits, DeviceConfig, HostQueue, QueueConfig};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use support::*;

/// What the values saw as they were dropped.
#[derive(Default)]
struct Log {
    /// The command number of each value, in drop order.
    dropped: Mutex<Vec<u64>>,
    /// Values dropped while the ground truth said their packet had not
    /// completed.
    early: AtomicUsize,
}

/// A value guarding the packet at `index`: its drop checks the ground truth.
struct Guarded {
    seq: u64,
    index: u64,
    hardware: sigretire_sim::Queue,
    log: Arc<Log>,
}

impl Drop for Guarded {
    fn drop(&mut self) {
        let done = self
            .hardware
            .truth(self.index)
            .is_none_or(|truth| truth.is_done());
        if !done {
            self.log.early.fetch_add(1, Ordering::SeqCst);
        }
        self.log.dropped.lock().unwrap().push(self.seq);
    }
}

fn hardware(queue: &HostQueue<SimTracker>) -> sigretire_sim::Queue {
    queue.with_tracker(|t| sigretire_tracker::Tracker::queue(t).clone())
}

/// Device-memory signals: every host load of one is a PCIe read.
fn device_signals(platform: SimPlatform) -> SimPlatform {
    platform.with_tracker_config(Config {
        signals: Placement::Device,
        ..Config::default()
    })
}

/// Device-memory loads so far, as the simulator counts them and as the
/// tracker does (its own proofs and its waiters' polls).
fn device_loads(platform: &SimPlatform, queue: &HostQueue<SimTracker>) -> (u64, u64) {
    let tracker = queue.with_tracker(|t| {
        let a = sigretire_tracker::Tracker::stats(t).accesses[Placement::Device.index()];
        a.loads + a.polls
    });
    (platform.sim().counters().device.loads, tracker)
}

#[test]
fn releasing_reads_no_signal_memory_and_a_batch_proof_frees_every_value() {
    const VALUES: u64 = 1000;
    const ROUNDS: u64 = 8;
    let platform = device_signals(SimPlatform::stepped());
    // Batches this large keep the commands in the open batch: nothing but
    // the releases runs between the two counts.
    let config = QueueConfig {
        batch_limits: BatchLimits {
            host_signals: 4096,
            device_signals: 4096,
        },
        ..bounded()
    };
    let device = platform.device(DeviceConfig::default(), config).unwrap();
    let queue = device.default_queue();
    let log = Arc::new(Log::default());
    let hw = hardware(queue);
    let start = device_loads(&platform, queue);
    for round in 0..ROUNDS {
        let commands: Vec<_> = (0..VALUES).map(|_| queue.launch_empty().unwrap()).collect();
        let before = (device_loads(&platform, queue), platform.sim().counters());
        for command in &commands {
            command.release_after(Guarded {
                seq: command.seq(),
                index: command.aql_index(),
                hardware: hw.clone(),
                log: log.clone(),
            });
        }
        let after = (device_loads(&platform, queue), platform.sim().counters());
        assert_eq!(before.0, after.0, "releasing read a device signal");
        assert_eq!(
            after.1.since(before.1).host.loads,
            0,
            "releasing read a host signal"
        );
        assert_eq!(queue.values_held(), VALUES as usize);
        drive(&platform, spawn_synchronize(queue)).unwrap();
        assert_eq!(
            queue.values_held(),
            0,
            "round {round}: one proof freed them all"
        );
    }
    let end = device_loads(&platform, queue);
    let released = VALUES * ROUNDS;
    let (sim_loads, tracker_loads) = (end.0 - start.0, end.1 - start.1);
    println!(
        "{released} values released with {sim_loads} device loads (tracker: {tracker_loads}): {:.4} per value",
        sim_loads as f64 / released as f64
    );
    assert!(
        sim_loads * 32 <= released,
        "{sim_loads} device loads for {released} values: more than 1/32 per value"
    );
    assert_eq!(log.early.load(Ordering::SeqCst), 0, "a value went early");
    assert_eq!(log.dropped.lock().unwrap().len() as u64, released);
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn values_are_dropped_in_queue_order_and_never_before_their_packet_completed() {
    let platform = device_signals(SimPlatform::threaded(sigretire_sim::CostProfile::zero()));
    let device = platform.device(DeviceConfig::default(), bounded()).unwrap();
    let queues: Vec<_> = (0..3)
        .map(|_| platform.create_queue(&device, bounded()).unwrap())
        .collect();
    let mut most_held = 0;
    let logs: Vec<_> = queues.iter().map(|_| Arc::new(Log::default())).collect();
    for _ in 0..5000 {
        for (queue, log) in queues.iter().zip(&logs) {
            let command = queue.launch_empty().unwrap();
            command.release_after(Guarded {
                seq: command.seq(),
                index: command.aql_index(),
                hardware: hardware(queue),
                log: log.clone(),
            });
            most_held = most_held.max(queue.values_held());
        }
    }
    for queue in &queues {
        queue.synchronize().unwrap();
        assert_eq!(queue.values_held(), 0);
    }
    for log in &logs {
        let dropped = log.dropped.lock().unwrap();
        assert_eq!(dropped.len(), 5000);
        assert!(dropped.is_sorted(), "out of queue order");
        assert_eq!(log.early.load(Ordering::SeqCst), 0, "a value went early");
    }
    println!("at most {most_held} values held at once (of 5000 per queue)");
    // Batches close every 64 commands with device signals and the
    // completion thread frees them as they complete: a few batches' worth.
    assert!(most_held < 5000, "nothing was freed before the end");
    assert!(platform.sim().violations().is_empty());
}

#[test]
fn a_value_of_work_already_known_done_is_dropped_at_once() {
    let (platform, device) = stepped();
    let queue = device.default_queue();
    let command = queue.launch_empty().unwrap();
    drive(&platform, spawn_synchronize(queue)).unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let loads = platform.sim().counters();
    command.release_after(Flag(dropped.clone()));
    assert!(
        dropped.load(Ordering::SeqCst),
        "dropped before the call returned"
    );
    let since = platform.sim().counters().since(loads);
    assert_eq!(since.host.loads + since.device.loads, 0);
    dropped.store(false, Ordering::SeqCst);
    queue.release_after_all(Flag(dropped.clone()));
    assert!(
        dropped.load(Ordering::SeqCst),
        "everything was already done"
    );
    assert_eq!(queue.values_held(), 0);
}

#[test]
fn a_failed_batch_frees_its_values_and_a_device_error_keeps_them() {
    // A failure: nothing at or before the failed fence runs any more.
    let (platform, device) = stepped();
    let queue = platform.create_queue(&device, bounded()).unwrap();
    let flag = sigretire_sim::HostFlag::new();
    let log = Arc::new(Log::default());
    let command = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    command.release_after(Guarded {
        seq: command.seq(),
        index: command.aql_index(),
        hardware: hardware(&queue),
        log: log.clone(),
    });
    queue.with_tracker(|t| sigretire_tracker::Tracker::queue(t).fail());
    let _ = drive(&platform, spawn_synchronize(&queue));
    wait_until("the failed batch freed its value", || {
        queue.values_held() == 0
    });
    assert_eq!(log.early.load(Ordering::SeqCst), 0);
    flag.set();

    // The device error state: the GPU may still read the value.
    let (platform, device) = stepped_with(
        DeviceConfig {
            skip_abort_on_error: true,
        },
        bounded(),
    );
    let queue = device.default_queue();
    let flag = sigretire_sim::HostFlag::new();
    let log = Arc::new(Log::default());
    let command = queue.launch(spin_kernel(&platform, &flag)).unwrap();
    command.release_after(Guarded {
        seq: command.seq(),
        index: command.aql_index(),
        hardware: hardware(queue),
        log: log.clone(),
    });
    device.set_error("injected");
    let _ = queue.synchronize();
    assert_eq!(
        queue.values_held(),
        1,
        "kept while the GPU may still read it"
    );
    assert!(log.dropped.lock().unwrap().is_empty());
    flag.set();
}
