//! The per-use workload: a producer keeps a fixed number of uses in flight
//! on a stepped, zero-cost simulator; the "GPU" completes the oldest packets
//! as fast as new ones arrive. Only the tracker's own calls (acquire, poll,
//! reclaim) are the measured host work; publishing packets and the simulated
//! GPU are outside it, the same for both trackers.

use sigretire_baseline::BaselineTracker;
use sigretire_sim::backend::{SimMemory, submit_kernel};
use sigretire_sim::{Queue, Sim, SimConfig, SimQueueConfig};
use sigretire_tracker::{Config, Placement, Request, RetiringTracker, Tracker};
use std::hint::black_box;
use std::sync::Arc;

/// Uses submitted between two GPU catch-ups.
pub const BURST: usize = 32;

/// Which tracker a workload drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The retiring tracker.
    Retiring,
    /// CLR's original tracker.
    Baseline,
}

impl Kind {
    /// Both, in report order.
    pub const ALL: [Kind; 2] = [Kind::Retiring, Kind::Baseline];

    /// The name used in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Retiring => "retiring",
            Kind::Baseline => "baseline",
        }
    }
}

/// A tracker with a steady number of uses in flight on a stepped simulator.
pub struct Steady {
    tracker: Either,
    queue: Queue,
    in_flight: usize,
    /// The AQL index the next acquired signal is for: uses may be acquired
    /// ahead of publication (a batch of acquires, then their packets), so
    /// the queue's write index is not it.
    next_index: u64,
}

/// The tracker, called as the queue layer calls it: statically, so the
/// compiler may inline its fast path into the caller (a `dyn Tracker` call
/// would add the same call overhead to both trackers' figures, which no real
/// caller pays). Held inline, not boxed, for the same reason: one is made
/// per run, so the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
enum Either {
    Retiring(RetiringTracker<SimMemory, Queue>),
    Baseline(BaselineTracker<SimMemory, Queue>),
}

impl Steady {
    /// A tracker of `kind` whose ring can hold `in_flight` uses (its initial
    /// size is `in_flight / 16`, so it may grow to exactly that), filled with
    /// `in_flight` uses of empty kernels with the barrier bit, as CLR
    /// dispatches them. Device-memory signals on a device-memory ring.
    pub fn new(kind: Kind, in_flight: usize) -> Self {
        assert!(
            in_flight >= 2 * BURST && in_flight.is_power_of_two(),
            "in_flight: a power of two >= {}",
            2 * BURST
        );
        let sim = Sim::new(SimConfig::default());
        let queue_size = (2 * in_flight).next_power_of_two().max(1024) as u32;
        let queue = sim
            .create_queue(SimQueueConfig {
                size: queue_size,
                truth_history: 64,
                ..SimQueueConfig::default()
            })
            .expect("valid queue");
        let memory = Arc::new(SimMemory::new(sim, queue.agent()));
        let config = Config {
            initial_size: (in_flight / 16).max(BURST),
            signals: Placement::Device,
            ..Config::default()
        };
        let tracker = match kind {
            Kind::Retiring => Either::Retiring(
                RetiringTracker::new(memory, queue.clone(), config).expect("valid config"),
            ),
            Kind::Baseline => Either::Baseline(
                BaselineTracker::new(memory, queue.clone(), config).expect("valid config"),
            ),
        };
        let next_index = queue.write_index();
        let mut steady = Self {
            tracker,
            queue,
            in_flight,
            next_index,
        };
        for _ in 0..in_flight {
            let signal = steady.acquire_one();
            steady.publish(signal);
        }
        steady
    }

    /// The tracker, for its counters.
    pub fn tracker(&self) -> &dyn Tracker<Memory = SimMemory, Queue = Queue> {
        match &self.tracker {
            Either::Retiring(tracker) => tracker,
            Either::Baseline(tracker) => tracker,
        }
    }

    /// Uses kept in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The measured host work for one use: acquire a signal for the next
    /// packet (which re-arms and retires as the tracker needs). Publish the
    /// acquired signals with [`publish`](Self::publish) in the same order.
    #[inline(never)]
    pub fn acquire_one(&mut self) -> u64 {
        // `black_box`: the compiler must read the request at run time and
        // build the whole result, as for a caller that keeps the ticket.
        let request = black_box(Request::packet(self.next_index).barrier(true));
        self.next_index += 1;
        let acquired = match &mut self.tracker {
            Either::Retiring(tracker) => tracker.acquire(request),
            Either::Baseline(tracker) => tracker.acquire(request),
        };
        black_box(acquired.expect("the GPU keeps up")).signal
    }

    /// Publishes the packet for the oldest acquired, unpublished signal (not
    /// measured).
    #[inline(never)]
    pub fn publish(&mut self, signal: u64) {
        let index = self.queue.reserve().expect("queue sized for the workload");
        assert!(index < self.next_index, "publish follows acquire");
        submit_kernel(&self.queue, index, signal, true);
    }

    /// The GPU completes the oldest `BURST` packets (not measured).
    #[inline(never)]
    pub fn gpu_completes_burst(&mut self) {
        for _ in 0..BURST {
            let index = self.queue.launch().expect("a published packet");
            self.queue.complete(index).expect("in order");
            self.queue.advance_read_index().expect("launched");
        }
    }

    /// One burst: the GPU completes `BURST` packets, the producer submits
    /// `BURST` more. Returns the number of uses submitted.
    pub fn burst(&mut self) -> usize {
        self.gpu_completes_burst();
        for _ in 0..BURST {
            let signal = self.acquire_one();
            self.publish(signal);
        }
        BURST
    }
}
