//! Heap allocations per use after warm-up, on every backend: zero, along the
//! whole path a use takes — acquire, reserve, publication with its doorbell,
//! hold and release, fence probing (the backend's loads), re-arming (its
//! stores, fences and flushes), timestamp harvest, query. A counting global
//! allocator counts only inside those calls, on the calling thread, so the
//! "GPU"'s bookkeeping is not counted: the simulator's packet processing
//! runs outside them, and the ROCr stand-in is a shared library with an
//! allocator of its own, as on hardware. One scenario in its own binary: it
//! installs a global allocator. Its count is per thread, so the backends'
//! runs of the scenario, in parallel, do not count each other's.

mod support;

use sigretire_tracker::{Config, HardwareQueue, Placement, Purpose, Request, Tracker, Work};
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
                .map_err(|e| sigretire_tracker::QueueError::Failed(e.to_string()))?;
            queue.publish(index, Work::Kernel(kernel), barrier, acquired.signal)?;
            Ok::<_, sigretire_tracker::QueueError>(acquired)
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
