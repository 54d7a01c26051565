//! After warm-up, the simulator's per-packet work allocates nothing, so a
//! benchmark that counts the tracker's heap allocations per use is not
//! polluted by the backend. One test in its own binary: it installs a
//! counting global allocator.

use sigretire_sim::{AgentId, Placement, Sim, SimConfig, SimQueueConfig, packets};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the count
// is a thread-local `Cell` that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn steady_state_packet_traffic_allocates_nothing() {
    let sim = Sim::new(SimConfig::default());
    let q = sim
        .create_queue(SimQueueConfig {
            size: 64,
            truth_history: 256,
            profiling: true,
            ..SimQueueConfig::default()
        })
        .unwrap();
    let signals = sim.allocate(64, Placement::Device, AgentId(0)).unwrap();
    let round = |q: &sigretire_sim::Queue| {
        for &s in &signals {
            sim.store(s, 1);
        }
        sim.store_fence();
        for (i, &s) in signals.iter().enumerate() {
            let packet = packets::kernel(0, Some(s));
            q.submit(if i % 8 == 7 {
                packets::with_barrier_bit(packet)
            } else {
                packet
            })
            .unwrap();
        }
        q.run_until_idle();
        assert_eq!(sim.load(signals[63]), 0);
        sim.load_timestamps(signals[63]);
        assert!(q.truth(q.write_index() - 1).unwrap().completed);
    };
    for _ in 0..8 {
        round(&q); // warm-up: fills the history window
    }
    let before = allocations();
    for _ in 0..8 {
        round(&q);
    }
    assert_eq!(
        allocations() - before,
        0,
        "allocations in 512 packets' worth of traffic"
    );
    assert_eq!(sim.counters().device.stores, 16 * 64);
    // The counter does see allocations: a batch is one (plus its handles).
    let before = allocations();
    sim.allocate(4, Placement::Host, AgentId(0)).unwrap();
    assert!(allocations() > before);
}
