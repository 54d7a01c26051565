//! Heap allocations per use after warm-up: zero. A counting global allocator
//! counts only inside tracker calls (the simulated GPU's own bookkeeping is
//! not the tracker's).

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use support::Rig;
use tracker::{Config, Placement, Purpose, Request, Tracker};

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

fn run<T: Tracker<Memory = tracker::sim_backend::SimMemory, Queue = sim::Queue>>(
    rig: &mut Rig<T>,
    uses: usize,
) {
    let mut events = std::collections::VecDeque::new();
    for i in 0..uses {
        let index = rig.queue.write_index();
        let purpose = match i % 16 {
            15 => Purpose::Event,
            7 => Purpose::TimingOnly,
            _ => Purpose::Completion,
        };
        let acquired = counted(|| {
            rig.tracker
                .acquire(Request::packet(index).barrier(i % 2 == 1).purpose(purpose))
        })
        .unwrap();
        rig.queue.reserve().unwrap();
        tracker::sim_backend::submit_kernel(&rig.queue, index, acquired.signal, i % 2 == 1);
        if purpose == Purpose::Event {
            events.push_back(counted(|| rig.tracker.hold(&acquired.ticket)).unwrap());
            if events.len() > 4 {
                counted(|| drop(events.pop_front()));
            }
        }
        if i % 8 == 7 {
            rig.queue.run_until_idle();
            counted(|| rig.tracker.poll());
        }
        counted(|| rig.tracker.query(&acquired.ticket)).unwrap();
    }
}

#[test]
fn no_heap_allocation_per_use_after_warm_up() {
    let config = Config {
        signals: Placement::Device,
        ..Config::default()
    };
    let queue = sim::QueueConfig {
        truth_history: 64,
        ..support::queue_config()
    };
    let mut rig = Rig::retiring_on(config, queue);
    run(&mut rig, 4096);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    run(&mut rig, 16384);
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(
        allocations, 0,
        "{allocations} allocations in 16384 uses after warm-up"
    );
    // The counter does count: a growing tracker allocates.
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    counted(|| {
        let _ = Rig::retiring(config);
    });
    assert!(ALLOCATIONS.load(Ordering::Relaxed) > before);
}
