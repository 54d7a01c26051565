//! The completion thread never tears down a queue nor a signal's memory: a
//! job drops its signal reference first, then its queue reference, and a
//! queue whose last reference a job held is torn down on a thread of its
//! own. (That the signal goes first is checked deterministically by
//! `handler`'s unit tests; here, where the memory is destroyed end to end.)

mod support;

use sigretire_queue::sim::SimPlatform;
use sigretire_queue::{BatchLimits, Device, DeviceConfig, QueueConfig};
use sigretire_sim::backend::SimMemory;
use sigretire_tracker::{
    Placement, RetiringTracker, TimestampClock, Timestamps,
    backend::{AllocError, SignalMemory},
};
use std::sync::{Arc, Mutex};
use support::*;

fn small_batches() -> QueueConfig {
    QueueConfig {
        batch_limits: BatchLimits {
            host_signals: 2,
            device_signals: 2,
        },
        ..bounded()
    }
}

#[test]
fn a_queue_whose_last_reference_a_completion_job_holds_is_torn_down_elsewhere() {
    let (platform, device) = stepped();
    let queue = platform.create_queue(&device, small_batches()).unwrap();
    let flag = sigretire_sim::HostFlag::new();
    let spin = spin_kernel(&platform, &flag);
    let command = queue.launch(spin).unwrap();
    queue.launch(spin).unwrap(); // closes the batch: a job holds the queue
    assert_eq!(queue.batches_in_completion(), 1);

    drop(queue); // returns at once: it never waits for the GPU
    assert_eq!(device.stats().queue_teardowns, 0, "the job still holds it");
    flag.set();
    platform.sim().run_until_idle();
    wait_until("the queue was torn down", || {
        device.stats().queue_teardowns == 1
    });
    assert!(command.is_released());
    let stats = device.stats();
    assert!(stats.completion_thread_started);
    assert_eq!(stats.teardowns_on_completion_thread, 0);
    assert_eq!(stats.teardowns_leaked, 0);
}

#[test]
fn racing_drops_against_completions_never_tear_down_on_the_completion_thread() {
    let platform = SimPlatform::threaded(sigretire_sim::CostProfile::zero());
    let device = platform
        .device(DeviceConfig::default(), small_batches())
        .unwrap();
    for _ in 0..50 {
        let queue = platform.create_queue(&device, small_batches()).unwrap();
        for _ in 0..4 {
            queue.launch_empty().unwrap();
        }
        drop(queue); // while the completion thread may be finishing its jobs
    }
    wait_until("every queue was torn down", || {
        device.stats().queue_teardowns == 50
    });
    let stats = device.stats();
    assert_eq!(stats.queue_teardowns, 50);
    assert_eq!(stats.teardowns_on_completion_thread, 0);
}

#[test]
fn an_event_outliving_its_queue_handle_tears_the_queue_down_when_dropped() {
    let (platform, device) = stepped();
    let queue = platform.create_queue(&device, bounded()).unwrap();
    let event = queue.record_event().unwrap();
    drop(queue);
    assert_eq!(device.stats().queue_teardowns, 0);
    platform.run_while(|| event.synchronize()).unwrap();
    drop(event);
    // The queue's last handle went with its work pending: a marker after
    // it holds the queue (its tracker and pins) until the GPU ran it.
    wait_until("the queue's work ran and the queue went", || {
        platform.sim().run_until_idle();
        device.stats().queue_teardowns == 1
    });
    assert_eq!(device.stats().teardowns_on_completion_thread, 0);
}

#[test]
fn dropping_the_device_with_live_queues_is_safe() {
    let (platform, device) = stepped();
    let queue = platform.create_queue(&device, small_batches()).unwrap();
    queue.launch_empty().unwrap();
    queue.launch_empty().unwrap(); // a job on the completion thread
    drop(device);
    platform.sim().run_until_idle();
    platform.run_while(|| queue.synchronize()).unwrap();
    drop(queue);
}

/// The simulator's signal memory, noting the name of the thread that
/// destroys it.
struct Recorded {
    inner: SimMemory,
    destroyed_on: Arc<Mutex<Option<String>>>,
}

impl Drop for Recorded {
    fn drop(&mut self) {
        let thread = std::thread::current();
        *self.destroyed_on.lock().unwrap() = Some(thread.name().unwrap_or("unnamed").to_string());
    }
}

impl SignalMemory for Recorded {
    type Signal = <SimMemory as SignalMemory>::Signal;

    fn allocate(
        &self,
        count: usize,
        placement: Placement,
        out: &mut Vec<(Self::Signal, Placement)>,
    ) -> Result<(), AllocError> {
        self.inner.allocate(count, placement, out)
    }

    unsafe fn load(&self, signal: Self::Signal) -> i64 {
        // SAFETY: forwarded caller guarantee (the signal came from `allocate`,
        // that is from `self.inner`).
        unsafe { self.inner.load(signal) }
    }

    unsafe fn store(&self, signal: Self::Signal, value: i64) {
        // SAFETY: as for `load`.
        unsafe { self.inner.store(signal, value) }
    }

    unsafe fn store_many(&self, signals: &[Self::Signal], value: i64) {
        // SAFETY: as for `load`, for every signal.
        unsafe { self.inner.store_many(signals, value) }
    }

    fn store_fence(&self) {
        self.inner.store_fence()
    }

    fn hdp_flush(&self) {
        self.inner.hdp_flush()
    }

    unsafe fn timestamps(&self, signal: Self::Signal) -> Option<Timestamps> {
        // SAFETY: as for `load`.
        unsafe { self.inner.timestamps(signal) }
    }

    fn timestamp_clock(&self) -> TimestampClock {
        self.inner.timestamp_clock()
    }

    fn packet_handle(&self, signal: Self::Signal) -> u64 {
        self.inner.packet_handle(signal)
    }

    fn shares_signals_with(&self, other: &Self) -> bool {
        self.inner.shares_signals_with(&other.inner)
    }
}

type RecordedTracker = RetiringTracker<Recorded, sigretire_sim::Queue>;

/// A tracker on a new hardware queue of `platform` whose signal memory
/// notes where it is destroyed.
fn recorded_tracker(platform: &SimPlatform) -> (RecordedTracker, Arc<Mutex<Option<String>>>) {
    let queue = platform
        .sim()
        .create_queue(platform.sim_queue_config())
        .unwrap();
    let destroyed_on = Arc::new(Mutex::new(None));
    let memory = Recorded {
        inner: SimMemory::new(platform.sim().clone(), queue.agent()),
        destroyed_on: destroyed_on.clone(),
    };
    let tracker = RetiringTracker::new(Arc::new(memory), queue, platform.tracker_config()).unwrap();
    (tracker, destroyed_on)
}

#[test]
fn signal_memory_a_completion_job_outlived_is_destroyed_with_its_queue_elsewhere() {
    let platform = SimPlatform::stepped();
    let (default_tracker, _) = recorded_tracker(&platform);
    let device = Device::new(DeviceConfig::default(), default_tracker, small_batches()).unwrap();
    let (tracker, destroyed_on) = recorded_tracker(&platform);
    let queue = device.create_queue(tracker, small_batches()).unwrap();
    let flag = sigretire_sim::HostFlag::new();
    // No command handles kept: each would keep the signal memory alive.
    queue.launch(spin_kernel(&platform, &flag)).unwrap();
    queue.launch_empty().unwrap(); // closes the batch: a job holds the queue and the fence's signal
    assert_eq!(queue.batches_in_completion(), 1);

    drop(queue);
    assert_eq!(
        *destroyed_on.lock().unwrap(),
        None,
        "the job keeps it alive"
    );
    flag.set();
    platform.sim().run_until_idle();
    wait_until("the signal memory was destroyed", || {
        destroyed_on.lock().unwrap().is_some()
    });
    assert_eq!(
        destroyed_on.lock().unwrap().as_deref(),
        Some("fences-teardown")
    );
    let stats = device.stats();
    assert_eq!(stats.queue_teardowns, 1);
    assert_eq!(stats.teardowns_on_completion_thread, 0);
}
