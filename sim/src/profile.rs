//! Cost profiles: how long each host operation and each GPU-side step takes.
//!
//! Host operations (signal loads and stores, store fences, HDP flushes,
//! doorbell writes) cost their duration by busy-waiting on the calling thread,
//! in both modes, so a benchmark that runs on the simulator pays what it would
//! pay on the hardware. GPU-side latencies (doorbell to launch, kernel
//! execution) only matter in [`Mode::Threaded`](crate::Mode::Threaded), where
//! the processor thread honours them in real time; in stepped mode the caller
//! decides when everything happens.

use crate::memory::Placement;
use std::time::{Duration, Instant};

/// What each simulated operation costs.
///
/// The fields are public so a test can build any profile it needs, e.g. the
/// MI300X profile with a slower PCIe read:
///
/// ```
/// use sigretire_sim::CostProfile;
/// use std::time::Duration;
///
/// let slow = CostProfile {
///     device_load: Duration::from_micros(2),
///     ..CostProfile::mi300x()
/// };
/// assert!(slow.device_load > CostProfile::mi300x().device_load);
/// assert_eq!(CostProfile::zero().device_load, Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CostProfile {
    /// Host load of a host-memory signal. MI300X: 30 ns, an estimate, not a
    /// measurement: meant as an upper bound for a load that misses the CPU
    /// caches because the GPU wrote the line (a snooped system-memory read;
    /// usually it hits the cache and costs less). The seed only bounds it:
    /// a whole hipEventQuery of a completed event with host-memory signals
    /// took 0.08 us (1.2 us with device-memory signals: one signal load).
    pub host_load: Duration,
    /// Host store to a host-memory signal. MI300X: 20 ns, an estimate with no
    /// measured source: a cached store that the GPU snoops (so no fence or
    /// flush is needed) retires into the store buffer without waiting for the
    /// memory system, so it is charged less than a cache-missing load.
    pub host_store: Duration,
    /// Host load of a device-memory signal: an uncached read of VRAM through
    /// the large BAR. MI300X: 1.1 us, the PCIe round trip measured in the seed
    /// (docs/design.md section 2).
    pub device_load: Duration,
    /// Host store to a device-memory signal. MI300X: 20 ns, an estimate with
    /// no measured source: the store lands in a write-combining buffer and
    /// leaves as a posted PCIe write, so the CPU does not wait for it (that is
    /// also why it needs a fence), and it is charged like a cached store.
    pub device_store: Duration,
    /// A store fence (x86 `sfence`). MI300X: 100 ns, an estimate with no
    /// measured source: the fence drains the write-combining buffers into
    /// posted PCIe writes without waiting for them to land, so it is charged
    /// far less than a PCIe round trip (`device_load`) but more than a store.
    pub store_fence: Duration,
    /// An HDP flush: write 1 to `HDP_MEM_FLUSH_CNTL` and read it back.
    /// MI300X: 1.1 us, estimated as one PCIe round trip of the seed's
    /// measured 1.1 us (the read-back is an uncached MMIO read, taken to be as
    /// slow as a device-memory load; the flush itself was not timed).
    pub hdp_flush: Duration,
    /// Ringing a queue's doorbell. MI300X: 100 ns, an estimate with no
    /// measured source: a posted MMIO write, so the CPU does not wait for the
    /// round trip, charged like a store fence (both push a write out of the
    /// core towards PCIe without waiting for it to land). It is part of the
    /// seed-checked submit-to-seen total (see `kernel_execution`), but small
    /// beside it.
    pub doorbell: Duration,
    /// From a doorbell write to the launch of the packets it covers: the
    /// command processor notices the doorbell, fetches the packets and
    /// dispatches. MI300X: 2 us (see `kernel_execution`). Only the sum of
    /// this and `kernel_execution` is checked against the seed; how it splits
    /// between the two is an estimate.
    pub launch_latency: Duration,
    /// Execution of an empty kernel dispatch, from launch to the completion
    /// signal's decrement (one wave, then the end-of-kernel release fence).
    /// MI300X: 1.5 us. With `launch_latency` and a 1.1 us `device_load`, "submit
    /// an empty kernel and see its completion from the host" takes about
    /// 4.7 us, matching the seed's measured hipEventSynchronize after an empty
    /// kernel on MI300X (4.5-5.3 us).
    pub kernel_execution: Duration,
    /// One GPU timestamp tick, in which `start_ts`/`end_ts` and
    /// [`Sim::now_ticks`](crate::Sim::now_ticks) count in threaded mode.
    /// MI300X: 10 ns, its 100 MHz system counter
    /// (`HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`).
    pub gpu_tick: Duration,
    /// From a write to an interrupt signal to a thread sleeping on it
    /// running again, beyond what the host's own wake-up of the thread
    /// costs (the condition variable the simulator's mailbox notifies: the
    /// scheduler's part, real and measured in every run). Paid asleep.
    /// MI300X: 0, not modelled: no AMD measurement exists (the seed measured
    /// no interrupt-driven wait: CLR's blocking-sync events spin), and a
    /// host sleep this short would cost the OS's timer slack (about 50 us on
    /// Linux) instead of itself. Set it to study a slower interrupt path.
    pub interrupt_wake: Duration,
}

impl CostProfile {
    /// Every operation is free and the GPU is infinitely fast: the profile for
    /// functional tests. The tick stays at 10 ns, so timestamps keep the
    /// MI300X unit.
    pub const fn zero() -> Self {
        Self {
            host_load: Duration::ZERO,
            host_store: Duration::ZERO,
            device_load: Duration::ZERO,
            device_store: Duration::ZERO,
            store_fence: Duration::ZERO,
            hdp_flush: Duration::ZERO,
            doorbell: Duration::ZERO,
            launch_latency: Duration::ZERO,
            kernel_execution: Duration::ZERO,
            gpu_tick: Duration::from_nanos(10),
            interrupt_wake: Duration::ZERO,
        }
    }

    /// An MI300X behind PCIe, with signals in VRAM reached through the large
    /// BAR. Each field's documentation gives its value and source.
    pub const fn mi300x() -> Self {
        Self {
            host_load: Duration::from_nanos(30),
            host_store: Duration::from_nanos(20),
            device_load: Duration::from_nanos(1_100),
            device_store: Duration::from_nanos(20),
            store_fence: Duration::from_nanos(100),
            hdp_flush: Duration::from_nanos(1_100),
            doorbell: Duration::from_nanos(100),
            launch_latency: Duration::from_micros(2),
            kernel_execution: Duration::from_nanos(1_500),
            gpu_tick: Duration::from_nanos(10),
            interrupt_wake: Duration::ZERO,
        }
    }

    /// The cost of one host load of a signal placed at `placement`.
    pub(crate) const fn load(&self, placement: Placement) -> Duration {
        match placement {
            Placement::Host => self.host_load,
            Placement::Device => self.device_load,
        }
    }

    /// The cost of one host store to a signal placed at `placement`.
    pub(crate) const fn store(&self, placement: Placement) -> Duration {
        match placement {
            Placement::Host => self.host_store,
            Placement::Device => self.device_store,
        }
    }
}

impl Default for CostProfile {
    /// [`CostProfile::zero`].
    fn default() -> Self {
        Self::zero()
    }
}

/// Busy-waits for `cost`: host operations are paid on the calling thread, as
/// a real uncached load stalls the core that issues it. Free when `cost` is
/// zero (no clock read).
pub(crate) fn pay(cost: Duration) {
    if cost.is_zero() {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < cost {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mi300x_round_trip_matches_the_seed() {
        let p = CostProfile::mi300x();
        let submit_to_seen = p.doorbell + p.launch_latency + p.kernel_execution + p.device_load;
        // The seed measured 4.5-5.3 us for hipEventSynchronize after an empty kernel.
        assert!(
            submit_to_seen >= Duration::from_nanos(4_500),
            "{submit_to_seen:?}"
        );
        assert!(
            submit_to_seen <= Duration::from_nanos(5_300),
            "{submit_to_seen:?}"
        );
    }

    #[test]
    fn pay_waits_at_least_the_cost() {
        let start = Instant::now();
        pay(Duration::from_micros(50));
        assert!(start.elapsed() >= Duration::from_micros(50));
    }
}
