//! The configurations scenarios run under: small enough that a few hundred
//! operations wrap the ring, hit the growth limit and wrap the generation
//! counter, as sharded-slab's tests use tiny pages.

use sigretire_sim::Placement as RingPlacement;
use sigretire_tracker::{Config, Placement};

/// A tracker configuration and the simulated queues it runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    /// A name for reports.
    pub name: &'static str,
    /// Both streams' tracker configuration.
    pub tracker: Config,
    /// Width of both trackers' generation counters: narrow, so that a few
    /// queue changes wrap it (a test-only setting, as sharded-slab's tests
    /// use a tiny configuration; runtimes count in 32 bits).
    pub generation_bits: u32,
    /// Where the first queue's AQL ring lives (`Host`: device-memory signal
    /// stores need an HDP flush before publication).
    pub first_ring: RingPlacement,
    /// Whether a queue change may move a stream to a ring in system memory.
    pub host_rings: bool,
    /// Whether non-barrier packets may complete out of order.
    pub out_of_order: bool,
}

/// Packets a simulated queue holds; scenarios never come near it.
pub const QUEUE_SIZE: u32 = 1 << 10;

/// Finished packets whose truth each queue keeps: more than a scenario
/// submits, so the oracle never forgets a use.
pub const TRUTH_HISTORY: usize = 1 << 14;

/// Every setup, in the order the property tests cycle through them.
// Every field is set today; `..Config::default()` keeps the setups
// compiling, with defaults, when the tracker gains a field.
#[allow(clippy::needless_update)]
pub fn setups() -> Vec<Setup> {
    vec![
        Setup {
            name: "tiny ring, 1-bit generations",
            tracker: Config {
                initial_size: 2,
                growth_limit: 2,
                signals: Placement::Device,
                refill_batch: 1,
                timing_batch: 1,
                backpressure_window: 2,
                ..Config::default()
            },
            generation_bits: 1,
            first_ring: RingPlacement::Device,
            host_rings: false,
            out_of_order: false,
        },
        Setup {
            name: "no growth, ring in system memory, out of order",
            tracker: Config {
                initial_size: 3,
                growth_limit: 1,
                signals: Placement::Device,
                refill_batch: 2,
                timing_batch: 1,
                backpressure_window: 1,
                ..Config::default()
            },
            generation_bits: 2,
            first_ring: RingPlacement::Host,
            host_rings: true,
            out_of_order: true,
        },
        Setup {
            name: "host signals, 2-bit generations",
            tracker: Config {
                initial_size: 4,
                growth_limit: 4,
                signals: Placement::Host,
                refill_batch: 3,
                timing_batch: 2,
                backpressure_window: 4,
                ..Config::default()
            },
            generation_bits: 2,
            first_ring: RingPlacement::Device,
            host_rings: true,
            out_of_order: false,
        },
        Setup {
            name: "roomier ring, mixed rings, out of order",
            tracker: Config {
                initial_size: 8,
                growth_limit: 2,
                signals: Placement::Device,
                refill_batch: 4,
                timing_batch: 4,
                backpressure_window: 8,
                ..Config::default()
            },
            generation_bits: 3,
            first_ring: RingPlacement::Device,
            host_rings: true,
            out_of_order: true,
        },
    ]
}
