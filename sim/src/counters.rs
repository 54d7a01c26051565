//! Counters of host accesses: every signal load and store by the placement of
//! the signal touched, every store fence and every HDP flush. The GPU side
//! (the packet processor) is never counted: these are the numbers docs/design.md
//! section 7's bars are stated in.

use crate::place::Placement;
use std::sync::atomic::{AtomicU64, Ordering};

/// Loads and stores of signals of one placement.
///
/// ```
/// use sigretire_sim::{Access, AgentId, Placement, Sim, SimConfig};
///
/// let sim = Sim::new(SimConfig::default());
/// let signal = sim.allocate(1, Placement::Host, AgentId(0))?[0];
/// sim.store(signal, 1);
/// sim.load_timestamps(signal); // one load: the pair is one 16-byte access
/// assert_eq!(sim.counters().of(Placement::Host), Access { loads: 1, stores: 1 });
/// assert_eq!(sim.counters().of(Placement::Device), Access::default());
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Access {
    /// Host loads (a pair of timestamps read by [`Sim::load_timestamps`](crate::Sim::load_timestamps) counts as one).
    pub loads: u64,
    /// Host stores.
    pub stores: u64,
}

/// A snapshot of the host-access counters of a [`Sim`](crate::Sim).
///
/// ```
/// use sigretire_sim::{AgentId, Placement, Sim, SimConfig};
///
/// let sim = Sim::new(SimConfig::default());
/// let signals = sim.allocate(2, Placement::Device, AgentId(0))?;
/// let before = sim.counters();
/// sim.store(signals[0], 1);
/// sim.store_fence();
/// assert_eq!(sim.load(signals[1]), 0);
/// let delta = sim.counters().since(before);
/// assert_eq!(delta.device.stores, 1);
/// assert_eq!(delta.device.loads, 1);
/// assert_eq!(delta.host.loads + delta.host.stores, 0);
/// assert_eq!(delta.store_fences, 1);
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counters {
    /// Accesses to host-memory signals.
    pub host: Access,
    /// Accesses to device-memory signals (each one a PCIe transaction).
    pub device: Access,
    /// Store fences ([`Sim::store_fence`](crate::Sim::store_fence)).
    pub store_fences: u64,
    /// HDP flushes ([`Sim::hdp_flush`](crate::Sim::hdp_flush)), of any agent.
    pub hdp_flushes: u64,
}

impl Counters {
    /// What happened between `earlier` and `self` (both snapshots of the same
    /// simulator, `earlier` taken first).
    pub fn since(&self, earlier: Counters) -> Counters {
        let access = |now: Access, then: Access| Access {
            loads: now.loads.wrapping_sub(then.loads),
            stores: now.stores.wrapping_sub(then.stores),
        };
        Counters {
            host: access(self.host, earlier.host),
            device: access(self.device, earlier.device),
            store_fences: self.store_fences.wrapping_sub(earlier.store_fences),
            hdp_flushes: self.hdp_flushes.wrapping_sub(earlier.hdp_flushes),
        }
    }

    /// The accesses to signals of `placement`.
    pub fn of(&self, placement: Placement) -> Access {
        match placement {
            Placement::Host => self.host,
            Placement::Device => self.device,
        }
    }
}

/// The live counters. Relaxed increments: a snapshot taken by the thread that
/// made the accesses sees all of them; other threads see them eventually.
#[derive(Debug, Default)]
pub(crate) struct CounterCells {
    host_loads: AtomicU64,
    host_stores: AtomicU64,
    device_loads: AtomicU64,
    device_stores: AtomicU64,
    store_fences: AtomicU64,
    hdp_flushes: AtomicU64,
}

impl CounterCells {
    pub(crate) fn loads(&self, placement: Placement, count: u64) {
        let cell = match placement {
            Placement::Host => &self.host_loads,
            Placement::Device => &self.device_loads,
        };
        cell.fetch_add(count, Ordering::Relaxed);
    }

    pub(crate) fn store(&self, placement: Placement) {
        self.stores(placement, 1);
    }

    pub(crate) fn stores(&self, placement: Placement, count: u64) {
        let cell = match placement {
            Placement::Host => &self.host_stores,
            Placement::Device => &self.device_stores,
        };
        cell.fetch_add(count, Ordering::Relaxed);
    }

    pub(crate) fn store_fence(&self) {
        self.store_fences.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn hdp_flush(&self) {
        self.hdp_flushes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Counters {
        let get = |cell: &AtomicU64| cell.load(Ordering::Relaxed);
        Counters {
            host: Access {
                loads: get(&self.host_loads),
                stores: get(&self.host_stores),
            },
            device: Access {
                loads: get(&self.device_loads),
                stores: get(&self.device_stores),
            },
            store_fences: get(&self.store_fences),
            hdp_flushes: get(&self.hdp_flushes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_subtracts_field_by_field() {
        let cells = CounterCells::default();
        cells.loads(Placement::Device, 2);
        let before = cells.snapshot();
        cells.loads(Placement::Device, 1);
        cells.loads(Placement::Host, 3);
        cells.store(Placement::Host);
        cells.store_fence();
        cells.hdp_flush();
        let delta = cells.snapshot().since(before);
        assert_eq!(
            delta.device,
            Access {
                loads: 1,
                stores: 0
            }
        );
        assert_eq!(
            delta.host,
            Access {
                loads: 3,
                stores: 1
            }
        );
        assert_eq!((delta.store_fences, delta.hdp_flushes), (1, 1));
        assert_eq!(delta.of(Placement::Host), delta.host);
    }
}
