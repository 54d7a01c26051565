//! Cost profiles: how long each host operation and each GPU-side step takes.
//!
//! Host operations (signal loads and stores, store fences, HDP flushes,
//! doorbell writes) cost their duration by busy-waiting on the calling thread,
//! in both modes, so a benchmark that runs on the simulator pays what it would
//! pay on the hardware. GPU-side latencies (doorbell to launch, kernel
//! execution) only matter in [`Mode::Threaded`](crate::Mode::Threaded), where
//! the processor thread honours them in real time; in stepped mode the caller
//! decides when everything happens.

use crate::place::Placement;
use std::time::{Duration, Instant};

/// What each simulated operation costs.
///
/// # Sources
///
/// Every MI300X figure below says where it comes from, one of:
/// - **the CLR change**: the merged change to AMD's CLR runtime that moved
///   completion signals to device memory, whose description published
///   MI300X measurements (docs/design.md section 2 names it): an uncached
///   host read of device memory takes about 1.1 us, and two tables of event
///   and synchronize times with host and with device signals.
/// - **the fit**: the four figures no public source states for MI300X
///   (`launch_latency`, `kernel_execution`, `completion_device`, and the
///   split of the host-signal completion) were chosen so that the
///   simulator reproduces the CLR change's *first* table (six calls, both
///   placements); its second table is the unseen check.
///   `sigbench --seed-table` prints both beside the predictions
///   (`benches/results/seed-table.md`).
/// - **PCIe**: a non-posted PCIe request (a read, or an AtomicOp such as
///   the packet processor's decrement of a signal in system memory) waits
///   for its completion to come back across the link: one round trip, the
///   1.1 us the CLR change measured for the read. Posted writes (a
///   write-combined store, a doorbell) do not wait.
/// - **HSA**: a packet's completion is its release fence and then an atomic
///   decrement of its completion signal (HSA Platform System Architecture
///   1.2, "Signals" and "Architected Queuing Language"), wherever the
///   signal lives.
/// - **an estimate**, with the reasoning given, where nothing was measured:
///   the few nanosecond-scale host costs, bounded by what the PCIe Base
///   Specification says of posted requests (a memory write, and so a
///   write-combined store or a doorbell, returns no completion: the CPU does
///   not wait for the link) and by the x86 store buffer (Intel's
///   optimization reference manual: a store retires before it reaches
///   memory), each below the resolution of the first table.
///
/// # What the profile leaves out
///
/// The host software around these operations: a runtime's own bookkeeping
/// per API call is no hardware cost and is not here. The seed table charges
/// CLR's separately (`sigretire_bench::seed_table::CLR_HOST_COST`, fitted
/// from the first table's two calls that do no GPU work), and this
/// project's own is what the simulator measures it to be.
///
/// # Why device signals make waits faster
///
/// With host-memory signals every completion ends with an atomic across
/// PCIe into system memory (`completion_host`); with device-memory signals
/// it is an atomic in the GPU's own memory (`completion_device`), while the
/// host's polls get dearer (`device_load` against `host_load`). A wait for
/// work that completes several signals in order (a kernel, then the marker
/// behind it) gains once per completion and loses once per poll, which is
/// how the CLR change measured every synchronize getting faster with device
/// signals while a query got slower.
///
/// # How a CPU wait polls
///
/// A wait is a loop of host loads of the signal, each costing its
/// placement's load and reading the value when it returns (the simulator
/// does not model the return trip of a read separately from its request).
/// CLR's `WaitForSignal` spins that way for up to 100 us before it blocks,
/// for default and blocking-sync events alike (ROCr's busy-wait signals
/// ignore the hint), with no separate load before the wait for device
/// signals (the CLR change); `sigretire_bench::seed_table` drives CLR's
/// trackers that way.
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
    /// Host load of a host-memory signal. MI300X: 0, not charged: a poll
    /// hits the CPU's cache (the line stays there until the GPU writes it,
    /// and the one miss after that write is a DRAM access of about 0.1 us),
    /// a few nanoseconds, below what the simulator can charge (its
    /// busy-wait reads the clock twice, about 50 ns). Bounded by the CLR
    /// change: a whole hipEventQuery of a completed event, one such load and
    /// CLR's own bookkeeping, took 0.08 us with host signals.
    pub host_load: Duration,
    /// Host store to a host-memory signal. MI300X: 20 ns, an estimate: a
    /// cached store that the GPU snoops (so no fence or flush is needed)
    /// retires into the store buffer without waiting for the memory system
    /// (the x86 store buffer, Intel's optimization reference manual), so it
    /// is charged less than a load.
    pub host_store: Duration,
    /// Host load of a device-memory signal: an uncached read of VRAM through
    /// the large BAR. MI300X: 1.1 us, the PCIe round trip the CLR change
    /// measured (its event query went from 0.08 to 1.2 us with one such
    /// read).
    pub device_load: Duration,
    /// Host store to a device-memory signal. MI300X: 20 ns, an estimate: the
    /// store lands in a write-combining buffer and leaves as a posted PCIe
    /// write (PCIe Base Specification: a memory write returns no
    /// completion), so the CPU does not wait for it (that is also why it
    /// needs a fence), and it is charged like a cached store.
    pub device_store: Duration,
    /// A store fence (x86 `sfence`). MI300X: 100 ns, an estimate: the fence
    /// drains the write-combining buffers into posted PCIe writes without
    /// waiting for them to land, so it is charged far less than a PCIe round
    /// trip (`device_load`) but more than a store.
    pub store_fence: Duration,
    /// An HDP flush: write 1 to `HDP_MEM_FLUSH_CNTL` and read it back.
    /// MI300X: 1.1 us: the read-back is an uncached MMIO read, one PCIe
    /// round trip of the CLR change's measured 1.1 us (the flush itself was
    /// not timed).
    pub hdp_flush: Duration,
    /// Ringing a queue's doorbell. MI300X: 100 ns, an estimate: a posted MMIO
    /// write (PCIe Base Specification: no completion returns), so the CPU
    /// does not wait for the round trip, charged like a store fence (both
    /// push a write out of the core towards PCIe without waiting for it to
    /// land).
    pub doorbell: Duration,
    /// From a doorbell write to the launch of the packets it covers: the
    /// command processor notices the doorbell, fetches the packets over its
    /// path to the ring and dispatches. MI300X: 2.4 us, the fit (only the
    /// first table's synchronize rows constrain it, together with
    /// `kernel_execution`).
    pub launch_latency: Duration,
    /// Execution of an empty kernel dispatch, from launch until its
    /// completion signal may be written: one wave, then the end-of-kernel
    /// system-scope release. MI300X: 0.6 us, the fit (see `launch_latency`),
    /// made when the tracker adapter published empty work and markers as
    /// empty kernels; they are barrier-AND packets now (the packets the ROCr
    /// backend writes), which the simulator runs in no time.
    pub kernel_execution: Duration,
    /// What the packet processor spends writing a completion signal in host
    /// memory, after the packet's work: the decrement is a PCIe AtomicOp
    /// into system memory, a non-posted request, so the packet completes
    /// (for the host, and for a later barrier-bit packet) one PCIe round
    /// trip later. MI300X: 1.1 us, the CLR change's measured round trip
    /// (PCIe: an AtomicOp waits for its completion as a read does).
    pub completion_host: Duration,
    /// What the packet processor spends writing a completion signal in its
    /// own device memory: an atomic at the GPU's memory side, no PCIe.
    /// MI300X: 0.3 us, the fit, of the order of one access to local HBM
    /// (published pointer-chasing measurements of CDNA3 put an HBM access
    /// at several hundred nanoseconds).
    pub completion_device: Duration,
    /// One GPU timestamp tick, in which `start_ts`/`end_ts` and
    /// [`Sim::now_ticks`](crate::Sim::now_ticks) count in threaded mode.
    /// MI300X: 10 ns, its 100 MHz system counter
    /// (`HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`).
    pub gpu_tick: Duration,
    /// From a write to an interrupt signal to a thread sleeping on it
    /// running again, beyond what the host's own wake-up of the thread
    /// costs (the condition variable the simulator's mailbox notifies: the
    /// scheduler's part, real and measured in every run). Paid asleep.
    /// MI300X: 0, not modelled: no AMD measurement exists (the CLR change
    /// measured no interrupt-driven wait: CLR's blocking-sync events spin),
    /// and a host sleep this short would cost the OS's timer slack (about
    /// 50 us on Linux) instead of itself. Set it to study a slower interrupt
    /// path.
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
            completion_host: Duration::ZERO,
            completion_device: Duration::ZERO,
            gpu_tick: Duration::from_nanos(10),
            interrupt_wake: Duration::ZERO,
        }
    }

    /// An MI300X behind PCIe, with signals in VRAM reached through the large
    /// BAR. Each field's documentation gives its value and source.
    pub const fn mi300x() -> Self {
        Self {
            host_load: Duration::ZERO,
            host_store: Duration::from_nanos(20),
            device_load: Duration::from_nanos(1_100),
            device_store: Duration::from_nanos(20),
            store_fence: Duration::from_nanos(100),
            hdp_flush: Duration::from_nanos(1_100),
            doorbell: Duration::from_nanos(100),
            launch_latency: Duration::from_nanos(2_400),
            kernel_execution: Duration::from_nanos(600),
            completion_host: Duration::from_nanos(1_100),
            completion_device: Duration::from_nanos(300),
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

    /// What the packet processor spends writing a completion signal placed
    /// at `placement`.
    ///
    /// ```
    /// use sigretire_sim::{CostProfile, Placement};
    /// let mi300x = CostProfile::mi300x();
    /// // Across PCIe into system memory, against local HBM.
    /// assert!(mi300x.completion(Placement::Host) > mi300x.completion(Placement::Device));
    /// assert_eq!(CostProfile::zero().completion(Placement::Host), std::time::Duration::ZERO);
    /// ```
    pub const fn completion(&self, placement: Placement) -> Duration {
        match placement {
            Placement::Host => self.completion_host,
            Placement::Device => self.completion_device,
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
    fn the_zero_profile_charges_nothing_anywhere() {
        let zero = CostProfile::zero();
        for placement in [Placement::Host, Placement::Device] {
            assert_eq!(zero.load(placement), Duration::ZERO);
            assert_eq!(zero.store(placement), Duration::ZERO);
            assert_eq!(zero.completion(placement), Duration::ZERO);
        }
        let CostProfile {
            store_fence,
            hdp_flush,
            doorbell,
            launch_latency,
            kernel_execution,
            interrupt_wake,
            ..
        } = zero;
        for cost in [
            store_fence,
            hdp_flush,
            doorbell,
            launch_latency,
            kernel_execution,
            interrupt_wake,
        ] {
            assert_eq!(cost, Duration::ZERO);
        }
    }

    #[test]
    fn mi300x_costs_follow_the_placement_each_way() {
        let p = CostProfile::mi300x();
        // The host reads its own memory cheaply and the GPU's across PCIe
        // (the CLR change's 1.1 us round trip)...
        assert_eq!(p.load(Placement::Device), Duration::from_nanos(1_100));
        assert!(p.load(Placement::Host) * 10 < p.load(Placement::Device));
        // ...and the GPU writes its own memory cheaply and the host's with
        // a PCIe atomic: one round trip.
        assert_eq!(p.completion(Placement::Host), p.device_load);
        assert!(p.completion(Placement::Device) < p.completion(Placement::Host));
        // A poll of a device signal costs more than the completion saves:
        // only work that completes several signals in a row gains.
        let saved = p.completion(Placement::Host) - p.completion(Placement::Device);
        assert!(saved < p.device_load && saved * 2 > p.device_load - p.host_load);
    }

    #[test]
    fn pay_waits_at_least_the_cost() {
        let start = Instant::now();
        pay(Duration::from_micros(50));
        assert!(start.elapsed() >= Duration::from_micros(50));
    }
}
