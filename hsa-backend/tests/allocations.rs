//! Heap allocations per use after warm-up on the ROCr backend: zero, along
//! the whole path a use takes — acquire, reserve, packet build and
//! publication with its doorbell, hold and release, fence probing (the
//! backend's loads), re-arming (its stores, fences and flushes), timestamp
//! harvest (its conversions), query. A counting global allocator counts only
//! inside those calls. The stand-in is a shared library with an allocator of
//! its own, so the "GPU"'s bookkeeping is not counted, as on hardware.

mod support;

use rocr_standin::Config as Machine;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use support::{Retiring, Rig};
use tracker::{Config, HardwareQueue, Placement, Purpose, Request, Tracker, Work};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator; counting has no effect on it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
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
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn counted<R>(f: impl FnOnce() -> R) -> R {
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    r
}

fn run(rig: &mut Rig<Retiring>, uses: usize) {
    let mut events = std::collections::VecDeque::new();
    for i in 0..uses {
        let purpose = match i % 16 {
            15 => Purpose::Event,
            7 => Purpose::TimingOnly,
            _ => Purpose::Completion,
        };
        let barrier = i % 2 == 1;
        let (queue, kernel) = (rig.queue.clone(), rig.empty_kernel);
        let acquired = counted(|| {
            let index = queue.reserve()?;
            let request = Request::packet(index)
                .barrier(barrier)
                .purpose(purpose)
                .timed(true);
            let acquired = rig
                .tracker
                .acquire(request)
                .map_err(|e| tracker::QueueError::Failed(e.to_string()))?;
            queue.publish(index, Work::Kernel(kernel), barrier, acquired.signal)?;
            Ok::<_, tracker::QueueError>(acquired)
        })
        .unwrap();
        if purpose == Purpose::Event {
            events.push_back(counted(|| rig.tracker.hold(&acquired.ticket)).unwrap());
            if events.len() > 4 {
                counted(|| drop(events.pop_front()));
            }
        }
        if i % 8 == 7 {
            rig.control().run_until_idle();
            counted(|| rig.tracker.poll());
        }
        counted(|| rig.tracker.query(&acquired.ticket)).unwrap();
        if purpose == Purpose::Event {
            counted(|| rig.tracker.timestamps(&acquired.ticket)).unwrap();
        }
    }
}

#[test]
fn no_heap_allocation_per_use_after_warm_up_on_the_backend() {
    for ring_in_device_memory in [true, false] {
        let config = Config {
            signals: Placement::Device,
            ..Config::default()
        };
        let machine = Machine {
            ring_in_device_memory,
            truth_history: 64,
            ..Machine::stepped()
        };
        let mut rig = Rig::retiring_on(config, machine);
        run(&mut rig, 2048);
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        run(&mut rig, 8192);
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(
            allocations, 0,
            "{allocations} allocations in 8192 uses after warm-up (ring in VRAM: {ring_in_device_memory})"
        );
        let stats = rig.tracker.stats();
        assert!(stats.store_fences() > 0 && stats.harvests > 0, "{stats:?}");
        assert_eq!(stats.hdp_flushes() > 0, !ring_in_device_memory, "{stats:?}");
        rig.standin().assert_no_violations();
    }
    // The counter does count: building a tracker allocates.
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    counted(|| drop(Rig::retiring(Config::default())));
    assert!(ALLOCATIONS.load(Ordering::Relaxed) > before);
}
