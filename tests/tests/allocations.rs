//! Heap allocations per use after warm-up, on every backend: zero, along the
//! whole path a use takes — acquire, reserve, publication with its doorbell,
//! hold and release, fence probing (the backend's loads), re-arming (its
//! stores, fences and flushes), timestamp harvest, query. A counting global
//! allocator counts only inside those calls, on the calling thread, so the
//! "GPU"'s bookkeeping is not counted: the simulator's packet processing
//! runs outside them, and the ROCr stand-in is a shared library with an
//! allocator of its own, as on hardware. The queue layer above it is held
//! to the same bar, per launch, with completions on the calling thread and
//! on the completion thread: its commands' status cells, batch buffers, job
//! boxes and markers are pooled per queue. One binary of its own: it
//! installs a global allocator. Its count is per thread, so the scenarios,
//! in parallel, do not count each other's.

mod support;

use sigretire_tracker::{
    Config, Placement, Purpose, Request, Tracker, Work, backend::HardwareQueue,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use support::{Backend, Machine, Retiring, Rig, device_signals, on_every_backend};

on_every_backend! {
    no_heap_allocation_per_use_after_warm_up,
}

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; counting (thread-local cells
// that never allocate) has no effect on it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations counted on this thread so far.
fn counted_so_far() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

fn counted<R>(f: impl FnOnce() -> R) -> R {
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    r
}

const WARMUP: usize = 4096;
const MEASURED: usize = 16384;

fn run<B: Backend>(rig: &mut Rig<B, Retiring<B>>, uses: usize) {
    let mut events = std::collections::VecDeque::new();
    for i in 0..uses {
        let purpose = match i % 16 {
            15 => Purpose::Event,
            7 => Purpose::TimingOnly,
            _ => Purpose::Completion,
        };
        let barrier = i % 2 == 1;
        // Timed and untimed uses both.
        let timed = i % 3 != 2;
        let (queue, kernel) = (rig.queue.clone(), rig.gpu.empty_kernel());
        let acquired = counted(|| {
            let index = queue.reserve()?;
            let request = Request::packet(index)
                .barrier(barrier)
                .purpose(purpose)
                .timed(timed);
            let acquired = rig
                .tracker
                .acquire(request)
                .map_err(|e| sigretire_tracker::backend::QueueError::Failed(e.to_string()))?;
            queue.publish(acquired.publication, Work::Kernel(kernel))?;
            Ok::<_, sigretire_tracker::backend::QueueError>(acquired)
        })
        .unwrap();
        if purpose == Purpose::Event {
            events.push_back(counted(|| rig.tracker.hold(&acquired.ticket)).unwrap());
            if events.len() > 4 {
                counted(|| drop(events.pop_front()));
            }
        }
        if i % 8 == 7 {
            rig.run_queue();
            counted(|| rig.tracker.poll());
        }
        counted(|| rig.tracker.query(&acquired.ticket)).unwrap();
        if purpose == Purpose::Event {
            counted(|| rig.tracker.timestamps(&acquired.ticket)).unwrap();
        }
    }
}

fn no_heap_allocation_per_use_after_warm_up<B: Backend>() {
    for ring in [Placement::Device, Placement::Host] {
        let config = device_signals();
        let machine = Machine {
            ring,
            truth_history: 64,
            ..Machine::default()
        };
        let mut rig = Rig::<B, _>::retiring_on(config, machine);
        run(&mut rig, WARMUP);
        let before = counted_so_far();
        run(&mut rig, MEASURED);
        let allocations = counted_so_far() - before;
        assert_eq!(
            allocations, 0,
            "{allocations} allocations in {MEASURED} uses after warm-up (AQL ring in {ring:?} memory)"
        );
        let stats = rig.tracker.stats();
        assert!(stats.store_fences() > 0 && stats.harvests > 0, "{stats:?}");
        assert_eq!(
            stats.hdp_flushes() > 0,
            ring == Placement::Host,
            "{stats:?}"
        );
        rig.assert_no_violations();
    }
    // The counter does count: building a tracker allocates.
    let before = counted_so_far();
    counted(|| drop(Rig::<B, _>::retiring(Config::default())));
    assert!(counted_so_far() > before);
}

/// Through the queue layer, completions on the calling thread: a runtime's
/// loop of launches with an event recorded and synchronized every 16 (a
/// new one, and one event recorded again, with a clone of it), and a
/// stream synchronize a few launches after each fourth event (a small
/// pending batch: a marker the calling thread waits for, or none if the GPU
/// is already done), on the threaded simulator. Its processor thread plays
/// the GPU and is not counted; the simulated queue's ground-truth window is
/// kept small so that the "GPU"'s own record of packets stops growing
/// within the warm-up (the simulator's memory, not ours).
#[test]
fn no_heap_allocation_per_launch_through_the_queue_layer_after_warm_up() {
    use sigretire_queue::sim::{CostProfile, SimPlatform, engine};
    use sigretire_queue::{DeviceConfig, Event, EventFlags, QueueConfig};
    let platform =
        SimPlatform::threaded(CostProfile::zero()).with_sim_queue_config(engine::SimQueueConfig {
            truth_history: 1024,
            ..Default::default()
        });
    let device = platform
        .device(DeviceConfig::default(), QueueConfig::default())
        .unwrap();
    let queue = device.default_queue();
    // An event created once and recorded again every 16 launches, with a
    // clone taken of each recording.
    let mut reused = counted(|| Event::new(&device, EventFlags::default()));
    let mut run = |launches: usize| {
        for i in 0..launches {
            let command = counted(|| queue.launch_empty()).unwrap();
            counted(|| drop(command));
            if i % 16 == 15 {
                let event = counted(|| queue.record_event()).unwrap();
                counted(|| event.synchronize()).unwrap();
                counted(|| drop(event));
            }
            if i % 16 == 7 {
                counted(|| queue.record(&mut reused)).unwrap();
                let copy = counted(|| reused.clone());
                counted(|| copy.synchronize()).unwrap();
                counted(|| drop(copy));
            }
            if i % 64 == 3 {
                counted(|| queue.synchronize()).unwrap();
            }
        }
    };
    run(4096);
    let syncs = queue.stats();
    let before = counted_so_far();
    const LAUNCHES: usize = 16384;
    run(LAUNCHES);
    let allocations = counted_so_far() - before;
    let stats = queue.stats();
    // The paths this claims to cover were taken.
    assert!(stats.cpu_waits > syncs.cpu_waits || stats.syncs_inline > syncs.syncs_inline);
    assert_eq!(
        allocations,
        0,
        "{allocations} allocations in {LAUNCHES} launches ({:.4} per launch) after warm-up",
        allocations as f64 / LAUNCHES as f64
    );
}

/// Through the queue layer, completions on the completion thread: rounds
/// of launches alone, so batches close at their limit and the completion
/// thread completes them, on the stepped simulator (the GPU runs only
/// between rounds, so every round has the same batches in flight: the
/// count is deterministic however the completion thread is scheduled).
#[test]
fn no_heap_allocation_per_launch_when_batches_complete_on_the_completion_thread() {
    use sigretire_queue::sim::{SimPlatform, engine};
    use sigretire_queue::{BatchLimits, DeviceConfig, QueueConfig};
    // A small ground-truth window, as above.
    let platform = SimPlatform::stepped().with_sim_queue_config(engine::SimQueueConfig {
        truth_history: 1024,
        ..Default::default()
    });
    // Batches of 32: four close in each round of 128 launches.
    let config = QueueConfig {
        batch_limits: BatchLimits {
            host_signals: 32,
            device_signals: 32,
        },
        ..QueueConfig::default()
    };
    let device = platform.device(DeviceConfig::default(), config).unwrap();
    let queue = device.default_queue();
    const ROUND: usize = 128;
    let round = || {
        for _ in 0..ROUND {
            drop(counted(|| queue.launch_empty()).unwrap());
        }
        platform.sim().run_until_idle();
        // The completion thread finishes the closed batches (not counted:
        // its thread is not this one) before the synchronize, so every
        // round has the same buffers out at each step.
        while queue.batches_in_completion() > 0 {
            std::thread::yield_now();
        }
        counted(|| queue.synchronize()).unwrap();
    };
    for _ in 0..8 {
        round();
    }
    let closed = queue.stats().batches_closed;
    let before = counted_so_far();
    const ROUNDS: usize = 128;
    for _ in 0..ROUNDS {
        round();
    }
    let allocations = counted_so_far() - before;
    let closed = queue.stats().batches_closed - closed;
    assert!(
        closed >= 4 * ROUNDS as u64,
        "batches closed through the completion thread: {closed}"
    );
    assert_eq!(
        allocations,
        0,
        "{allocations} allocations in {} launches and {closed} closed batches after warm-up",
        ROUNDS * ROUND
    );
}
