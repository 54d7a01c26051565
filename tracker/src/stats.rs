//! Counters: exact, so tests can assert them and benchmarks can divide them.

use crate::Placement;
use crate::sync::{AtomicU64, Ordering};

/// Host accesses to signals of one placement.
///
/// ```
/// let host = sigretire_tracker::Accesses { loads: 2, polls: 5, ..Default::default() };
/// assert_eq!(host.loads + host.polls, 7);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accesses {
    /// Loads of a signal value by the tracker itself: fence probes, direct
    /// proofs, confirming a failed submission's issued part.
    pub loads: u64,
    /// Loads by CPU waits and reference holders polling for completion
    /// ([`Waiter`](crate::Waiter), [`SignalRef`](crate::SignalRef)): the cost
    /// of waiting, not of proving retirement.
    pub polls: u64,
    /// Stores of a signal value (arming and re-arming).
    pub stores: u64,
    /// Timestamp pairs read from signals of this placement (counted here,
    /// not in `loads`): one read each, as `start_ts` and `end_ts` are one
    /// 16-byte aligned pair that a backend reads with one access.
    pub timestamp_reads: u64,
    /// Store fences issued to make stores to these signals visible (only
    /// write-combined device memory needs them).
    pub fences: u64,
    /// HDP flushes issued for these signals (device memory only).
    pub flushes: u64,
}

/// Everything a tracker counts. Obtained from [`Tracker::stats`](crate::Tracker::stats).
///
/// ```
/// let stats = sigretire_tracker::Stats::default();
/// assert_eq!(stats.device().loads, 0);
/// assert_eq!(stats.loads_per_retired_use(sigretire_tracker::Placement::Device), 0.0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Host accesses, fences and flushes per placement, indexed by
    /// [`Placement::index`].
    pub accesses: [Accesses; 2],
    /// Signals created (allocated from the backend), warm-up included.
    pub signals_created: u64,
    /// Uses handed out.
    pub uses: u64,
    /// Uses proven complete (by any proof).
    pub retired: u64,
    /// Uses that failed (each counted once).
    pub failed: u64,
    /// Signals re-armed for reuse.
    pub rearms: u64,
    /// Probes: loads of a fence's signal nominated by the read index.
    pub probes: u64,
    /// Uses retired because a later fence of their generation completed (or
    /// was confirmed by a probe), without a load of their own.
    pub retired_by_fence: u64,
    /// Uses retired because a CPU wait saw their signal at 0.
    pub retired_by_cpu_wait: u64,
    /// Uses retired by a direct load of their own signal (the fallback).
    pub retired_by_load: u64,
    /// Uses retired because their queue drained.
    pub retired_by_drain: u64,
    /// Times the ring grew.
    pub ring_growths: u64,
    /// Times a retired signal still held elsewhere (an event, a pin, a
    /// handler) was set aside (parked) and an armed spare took its place.
    pub parks: u64,
    /// Slots whose signal was exchanged for a spare of the placement the next
    /// use wanted (a timing-only use given a host signal by a device-memory
    /// tracker, and the slot it leaves going back to device memory).
    pub spare_swaps: u64,
    /// Parked signals that came back, re-armed, once their last holder let go.
    pub unparks: u64,
    /// Times acquire found the ring at its limit and returned a ticket to wait for.
    pub backpressure: u64,
    /// GPU-waiter requests answered with no dependency because the use was
    /// already known retired.
    pub dependencies_elided: u64,
    /// Pins handed out to GPU waiters.
    pub pins: u64,
    /// Timestamp pairs harvested into host memory.
    pub harvests: u64,
}

impl Stats {
    /// Host accesses to host-memory signals.
    pub const fn host(&self) -> Accesses {
        self.accesses[0]
    }

    /// Host accesses to device-memory signals.
    pub const fn device(&self) -> Accesses {
        self.accesses[1]
    }

    /// Store fences, all placements.
    pub const fn store_fences(&self) -> u64 {
        self.accesses[0].fences + self.accesses[1].fences
    }

    /// HDP flushes, all placements.
    pub const fn hdp_flushes(&self) -> u64 {
        self.accesses[0].flushes + self.accesses[1].flushes
    }

    /// The tracker's own loads (timestamp pair reads included, one each) of
    /// `placement` signals per retired use: the cost of proving retirement,
    /// without the polls of CPU waits. 0 when nothing retired.
    pub fn loads_per_retired_use(&self, placement: Placement) -> f64 {
        let a = self.accesses[placement.index()];
        ratio(a.loads + a.timestamp_reads, self.retired)
    }

    /// HDP flushes per re-armed signal; 0 when nothing was re-armed.
    pub fn flushes_per_rearm(&self) -> f64 {
        ratio(self.hdp_flushes(), self.rearms)
    }

    /// Store fences per re-armed signal; 0 when nothing was re-armed.
    pub fn fences_per_rearm(&self) -> f64 {
        ratio(self.store_fences(), self.rearms)
    }

    /// The counters accumulated since `earlier` (field by field).
    pub fn since(&self, earlier: &Stats) -> Stats {
        let mut d = *self;
        for (a, b) in d.accesses.iter_mut().zip(&earlier.accesses) {
            a.loads -= b.loads;
            a.polls -= b.polls;
            a.stores -= b.stores;
            a.timestamp_reads -= b.timestamp_reads;
            a.fences -= b.fences;
            a.flushes -= b.flushes;
        }
        macro_rules! sub { ($($f:ident),*) => { $(d.$f -= earlier.$f;)* } }
        sub!(
            signals_created,
            uses,
            retired,
            failed,
            rearms,
            probes,
            retired_by_fence,
            retired_by_cpu_wait,
            retired_by_load,
            retired_by_drain,
            ring_growths,
            parks,
            spare_swaps,
            unparks,
            backpressure,
            dependencies_elided,
            pins,
            harvests
        );
        d
    }
}

fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 { 0.0 } else { n as f64 / d as f64 }
}

/// The counters that threads other than the tracker's owner bump: polls by
/// lock-free waiters and holders, completions and failures they observe.
#[derive(Debug, Default)]
pub(crate) struct SharedCounters {
    loads: [AtomicU64; 2],
    pub(crate) retired_by_cpu_wait: AtomicU64,
    pub(crate) failed: AtomicU64,
}

impl SharedCounters {
    pub(crate) fn load(&self, placement: Placement) {
        self.loads[placement.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds these counters into a snapshot of the owner's.
    pub(crate) fn add_to(&self, stats: &mut Stats) {
        for p in Placement::ALL {
            stats.accesses[p.index()].polls += self.loads[p.index()].load(Ordering::Relaxed);
        }
        let cpu = self.retired_by_cpu_wait.load(Ordering::Relaxed);
        stats.retired_by_cpu_wait += cpu;
        stats.retired += cpu;
        stats.failed += self.failed.load(Ordering::Relaxed);
    }
}
