//! The simulator (`sim` crate) as a tracker backend, and small helpers that
//! set one up for examples and tests.
//!
//! ```
//! use sigretire_tracker::{Config, Request, Status, Tracker};
//! use sigretire_sim::backend as sim_backend;
//!
//! let (mut tracker, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
//! let index = queue.reserve().unwrap();
//! let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
//! sim_backend::submit_barrier(&queue, index, acquired.signal);
//! assert_eq!(tracker.query(&acquired.ticket).unwrap(), Status::Pending);
//! queue.run_until_idle();
//! assert_eq!(tracker.query(&acquired.ticket).unwrap(), Status::Complete);
//! ```

use crate::{AgentId, Queue, Sim, SimConfig, SimQueueConfig};
use hsa_sys::{AqlWork, encode};
use sigretire_tracker::{
    Config, CreateError, Placement, RetiringTracker, TimestampClock, Timestamps, Work,
    backend::{AllocError, HardwareQueue, Publication, QueueError, QueueView, SignalMemory},
};
use std::sync::Arc;
use std::time::Duration;

/// Signal memory of one simulated agent.
///
/// ```
/// use sigretire_tracker::backend::SignalMemory;
/// use sigretire_tracker::Placement;
/// use sigretire_sim::backend as sim_backend;
///
/// let (sim, queue) = sim_backend::stepped_queue();
/// let memory = sim_backend::SimMemory::new(sim, queue.agent());
/// let mut out = Vec::new();
/// memory.allocate(1, Placement::Device, &mut out).unwrap();
/// let (signal, placement) = out[0];
/// assert_eq!(placement, Placement::Device);
/// // SAFETY: the signal came from this memory's `allocate`.
/// unsafe { memory.store(signal, 1) };
/// memory.store_fence();
/// // SAFETY: as above.
/// assert_eq!(unsafe { memory.load(signal) }, 1);
/// // A packet names the signal by its simulated handle.
/// assert_eq!(memory.packet_handle(signal), signal.handle().handle);
/// ```
#[derive(Clone, Debug)]
pub struct SimMemory {
    sim: Sim,
    agent: AgentId,
}

impl SimMemory {
    /// The memory of `agent` in `sim`.
    ///
    /// ```
    /// use sigretire_tracker::backend::SignalMemory;
    /// use sigretire_tracker::Placement;
    /// use sigretire_sim::backend as sim_backend;
    ///
    /// let (sim, queue) = sim_backend::stepped_queue();
    /// let memory = sim_backend::SimMemory::new(sim.clone(), queue.agent());
    /// let mut out = Vec::new();
    /// memory.allocate(2, Placement::Device, &mut out).unwrap();
    /// // Its signals belong to that agent, so its HDP flush covers them.
    /// assert!(out.iter().all(|&(signal, _)| sim.agent_of(signal) == queue.agent()));
    /// ```
    pub fn new(sim: Sim, agent: AgentId) -> Self {
        Self { sim, agent }
    }

    /// The simulator, for ground truth and counters.
    ///
    /// ```
    /// use sigretire_tracker::backend::SignalMemory;
    /// use sigretire_sim::backend as sim_backend;
    ///
    /// let (sim, queue) = sim_backend::stepped_queue();
    /// let memory = sim_backend::SimMemory::new(sim, queue.agent());
    /// let before = memory.sim().counters();
    /// memory.store_fence();
    /// memory.hdp_flush();
    /// let delta = memory.sim().counters().since(before);
    /// assert_eq!((delta.store_fences, delta.hdp_flushes), (1, 1));
    /// ```
    pub fn sim(&self) -> &Sim {
        &self.sim
    }
}

const fn to_sim(placement: Placement) -> crate::Placement {
    match placement {
        Placement::Host => crate::Placement::Host,
        Placement::Device => crate::Placement::Device,
    }
}

const fn from_sim(placement: crate::Placement) -> Placement {
    match placement {
        crate::Placement::Host => Placement::Host,
        crate::Placement::Device => Placement::Device,
    }
}

impl SignalMemory for SimMemory {
    type Signal = crate::Signal;

    fn allocate(
        &self,
        count: usize,
        placement: Placement,
        out: &mut Vec<(crate::Signal, Placement)>,
    ) -> Result<(), AllocError> {
        let signals = self
            .sim
            .allocate(count, to_sim(placement), self.agent)
            .map_err(|e| AllocError::OutOfMemory(e.to_string()))?;
        out.extend(
            signals
                .into_iter()
                .map(|s| (s, from_sim(self.sim.placement(s)))),
        );
        Ok(())
    }

    unsafe fn load(&self, signal: crate::Signal) -> i64 {
        self.sim.load(signal)
    }

    unsafe fn store(&self, signal: crate::Signal, value: i64) {
        self.sim.store(signal, value)
    }

    unsafe fn store_many(&self, signals: &[crate::Signal], value: i64) {
        self.sim.store_many(signals, value)
    }

    fn store_fence(&self) {
        self.sim.store_fence()
    }

    fn hdp_flush(&self) {
        self.sim.hdp_flush(self.agent)
    }

    /// The stamps the simulated packet processor wrote, as a real one
    /// does: on a profiled queue, for every packet it runs.
    unsafe fn timestamps(&self, signal: crate::Signal) -> Option<Timestamps> {
        let (start, end) = self.sim.load_timestamps(signal);
        Some(Timestamps { start, end })
    }

    /// The profile's GPU tick (10 ns, MI300X's 100 MHz counter, by
    /// default), to the nearest whole frequency when it does not divide a
    /// second.
    fn timestamp_clock(&self) -> TimestampClock {
        let tick = self.sim.profile().gpu_tick;
        TimestampClock::from_period(tick).unwrap_or_else(|| {
            let hz = 1_000_000_000 / tick.as_nanos().max(1);
            TimestampClock::from_frequency(u64::try_from(hz).unwrap_or(1).max(1))
                .expect("at least 1 Hz")
        })
    }

    fn packet_handle(&self, signal: crate::Signal) -> u64 {
        signal.handle().handle
    }

    /// An interrupt signal of the simulator ([`Sim::create_interrupt_signal`](crate::Sim::create_interrupt_signal));
    /// `None` once the process's event budget is spent (the simulator then
    /// made a polling signal, as ROCr silently would; it is not handed out).
    fn create_wake_signal(&self) -> Result<Option<crate::Signal>, AllocError> {
        let signal = self
            .sim
            .create_interrupt_signal(self.agent)
            .map_err(|e| AllocError::OutOfMemory(e.to_string()))?;
        Ok(self.sim.is_interrupt(signal).then_some(signal))
    }

    unsafe fn sleep_while(&self, signal: crate::Signal, observed: i64, timeout: Duration) -> i64 {
        self.sim.sleep_while(signal, observed, timeout)
    }

    /// Every agent of one simulator reads every signal of it (a
    /// barrier-AND on agent 1 may wait on agent 0's signal); another
    /// simulator's handles mean nothing to it.
    fn shares_signals_with(&self, other: &Self) -> bool {
        self.sim.id() == other.sim.id()
    }

    /// The simulator's: its queues name only its own signals.
    fn signal_domain(&self) -> Option<u64> {
        Some(self.sim.id())
    }
}

impl QueueView for Queue {
    fn read_index(&self) -> u64 {
        Queue::read_index(self)
    }

    fn ring_in_device_memory(&self) -> bool {
        self.ring_placement() == crate::Placement::Device
    }

    fn signal_domain(&self) -> Option<u64> {
        Some(self.sim_id())
    }
}

impl HardwareQueue for Queue {
    fn reserve(&self) -> Result<u64, QueueError> {
        Queue::reserve(self).map_err(|e| match e {
            crate::SimError::QueueFull => QueueError::Full,
            other => QueueError::Failed(other.to_string()),
        })
    }

    /// Every packet with system-scope acquire and release fences, its
    /// barrier bit and completion signal from `publication`, as the ROCr
    /// backend writes it: empty work and markers as barrier-AND packets
    /// with no dependency (stamped on a profiled queue, as every packet
    /// is), kernels as one-work-item dispatches, waits as barrier-AND or -OR
    /// packets, a caller's dispatch as it built it, a value wait as AMD's
    /// barrier-value packet.
    fn publish(&self, publication: Publication, work: Work<'_>) -> Result<(), QueueError> {
        QueueError::check_single(&publication)?;
        let packet = hsa_sys::aql_packet(work, &publication)?;
        self.write(publication.index(), packet);
        self.ring_doorbell(publication.index());
        Ok(())
    }

    /// On the queue's wake relay ([`Queue::add_wake_relay`]), if it has
    /// one: a barrier-AND on `dependency` completing `wake`, in the relay's
    /// ring. Refused once the relay failed (a dependency of one of its
    /// barriers failed), so that a waiter polls rather than arming wakes
    /// that fail at once.
    fn publish_wake_aside(&self, dependency: u64, wake: u64) -> Option<Result<(), QueueError>> {
        let relay = self.wake_relay()?;
        if relay.is_failed() {
            return Some(Err(QueueError::Failed("the wake relay failed".into())));
        }
        Some(HardwareQueue::reserve(&relay).and_then(|index| {
            let published = relay.publish(
                Publication::untracked(index, false, wake),
                sigretire_tracker::Work::Wait(&[dependency]),
            );
            if published.is_err() {
                // The slot still needs a packet, or the relay stalls at it.
                let _ = relay.publish(
                    Publication::unsignalled(index, true),
                    sigretire_tracker::Work::Marker,
                );
            }
            published
        }))
    }

    /// From the write index: a packet of anyone else's (a test playing a
    /// runtime that writes its own packets) reserves its slot first.
    fn foreign_work_after(&self, newest: u64) -> bool {
        self.write_index() != newest.wrapping_add(1)
    }
}

/// Packets a stepped queue made by the helpers below can hold before the
/// "GPU" consumes any.
///
/// ```
/// use sigretire_sim::backend::{self as sim_backend, STEPPED_QUEUE_SIZE};
///
/// let (_sim, queue) = sim_backend::stepped_queue();
/// assert_eq!(queue.size(), STEPPED_QUEUE_SIZE);
/// for _ in 0..STEPPED_QUEUE_SIZE {
///     queue.reserve().unwrap();
/// }
/// assert!(queue.reserve().is_err(), "full until the GPU consumes a packet");
/// ```
pub const STEPPED_QUEUE_SIZE: u32 = 1 << 14;

/// A stepped simulator with one profiled queue whose ring is in device memory.
///
/// ```
/// use sigretire_sim::backend as sim_backend;
///
/// let (sim, queue) = sim_backend::stepped_queue();
/// assert_eq!(sim.mode(), sigretire_sim::Mode::Stepped);
/// assert!(queue.config().profiling);
/// assert_eq!(queue.ring_placement(), sigretire_sim::Placement::Device);
/// // Stepped: nothing runs until the caller drives the queue.
/// let index = queue.reserve().unwrap();
/// sim_backend::submit_barrier(&queue, index, 0);
/// assert!(!queue.truth(index).unwrap().completed);
/// queue.run_until_idle();
/// assert!(queue.truth(index).unwrap().completed);
/// ```
pub fn stepped_queue() -> (Sim, Queue) {
    let sim = Sim::new(SimConfig::default());
    let queue = sim
        .create_queue(SimQueueConfig {
            size: STEPPED_QUEUE_SIZE,
            profiling: true,
            ..SimQueueConfig::default()
        })
        .expect("a stepped queue of this size is valid");
    (sim, queue)
}

/// A retiring tracker on a fresh stepped simulator, and its queue.
///
/// ```
/// use sigretire_tracker::{Config, Request, Status, Tracker};
/// use sigretire_sim::backend as sim_backend;
///
/// let (mut tracker, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
/// assert_eq!(tracker.stats().signals_created, Config::default().initial_size as u64);
/// let index = queue.reserve().unwrap();
/// let acquired = tracker.acquire(Request::packet(index)).unwrap();
/// sim_backend::submit_kernel(&queue, index, acquired.signal, false);
/// queue.run_until_idle();
/// assert_eq!(tracker.query(&acquired.ticket).unwrap(), Status::Complete);
/// ```
pub fn stepped_tracker(
    config: Config,
) -> Result<(RetiringTracker<SimMemory, Queue>, Queue), CreateError> {
    let (sim, queue) = stepped_queue();
    let memory = Arc::new(SimMemory::new(sim, queue.agent()));
    let tracker = RetiringTracker::new(memory, queue.clone(), config)?;
    Ok((tracker, queue))
}

/// Publishes empty work at `index` (reserved with `queue.reserve()`): a
/// barrier-AND packet with no dependencies and the barrier bit, completing
/// `completion_signal`, then rings the doorbell.
///
/// ```
/// use sigretire_sim::backend as sim_backend;
///
/// let (_sim, queue) = sim_backend::stepped_queue();
/// let index = queue.reserve().unwrap();
/// sim_backend::submit_barrier(&queue, index, 0); // 0: no completion signal
/// let truth = queue.truth(index).unwrap();
/// assert!(truth.published && truth.barrier);
/// queue.run_until_idle();
/// assert!(queue.truth(index).unwrap().completed);
/// ```
pub fn submit_barrier(queue: &Queue, index: u64, completion_signal: u64) {
    submit_wait(queue, index, completion_signal, &[], true);
}

/// Publishes an empty kernel dispatch (kernel object 0) at `index`, with or
/// without the barrier bit, completing `completion_signal`, then rings the
/// doorbell. Unlike a barrier packet, a kernel without the barrier bit lets
/// later packets launch while it runs.
///
/// ```
/// use sigretire_sim::backend as sim_backend;
///
/// let (_sim, queue) = sim_backend::stepped_queue();
/// let [first, second, third] = [(); 3].map(|_| queue.reserve().unwrap());
/// sim_backend::submit_kernel(&queue, first, 0, false);
/// sim_backend::submit_kernel(&queue, second, 0, false);
/// sim_backend::submit_kernel(&queue, third, 0, true);
/// // Without the barrier bit the second launches while the first runs...
/// assert_eq!(queue.launch().unwrap(), first);
/// assert_eq!(queue.launch().unwrap(), second);
/// // ...with it, the third waits for both to complete.
/// assert!(queue.launch().is_err());
/// queue.run_until_idle();
/// assert!(queue.truth(third).unwrap().completed);
/// ```
pub fn submit_kernel(queue: &Queue, index: u64, completion_signal: u64, barrier: bool) {
    submit_kernel_object(queue, index, completion_signal, barrier, 0);
}

/// Publishes a dispatch of a registered kernel (see `Sim::register_kernel`).
///
/// ```
/// use sigretire_sim::{HostFlag, Kernel};
/// use sigretire_sim::backend as sim_backend;
///
/// let (sim, queue) = sim_backend::stepped_queue();
/// let flag = HostFlag::new();
/// let spinner = sim.register_kernel(Kernel::SpinUntil(flag.clone()));
/// let index = queue.reserve().unwrap();
/// sim_backend::submit_kernel_object(&queue, index, 0, true, spinner);
/// queue.run_until_idle();
/// assert!(!queue.truth(index).unwrap().completed, "it spins on the flag");
/// flag.set();
/// queue.run_until_idle();
/// assert!(queue.truth(index).unwrap().completed);
/// ```
pub fn submit_kernel_object(
    queue: &Queue,
    index: u64,
    completion_signal: u64,
    barrier: bool,
    kernel_object: u64,
) {
    let packet = encode(AqlWork::Kernel(kernel_object), barrier, completion_signal)
        .expect("a kernel dispatch");
    queue.write(index, packet);
    queue.ring_doorbell(index);
}

/// Publishes a barrier-AND packet at `index` that waits for up to five
/// signals (packet handles) and completes `completion_signal`.
///
/// # Panics
/// With more than five dependencies: an AQL barrier packet has five slots.
///
/// ```
/// use sigretire_tracker::backend::SignalMemory;
/// use sigretire_tracker::Placement;
/// use sigretire_sim::backend as sim_backend;
///
/// let (sim, queue) = sim_backend::stepped_queue();
/// let memory = sim_backend::SimMemory::new(sim, queue.agent());
/// let mut out = Vec::new();
/// memory.allocate(1, Placement::Host, &mut out).unwrap();
/// let dependency = out[0].0;
/// // SAFETY: the signal came from this memory's `allocate`.
/// unsafe { memory.store(dependency, 1) };
///
/// let index = queue.reserve().unwrap();
/// sim_backend::submit_wait(&queue, index, 0, &[memory.packet_handle(dependency)], true);
/// queue.run_until_idle();
/// assert!(!queue.truth(index).unwrap().completed, "waits for the dependency");
/// // SAFETY: as above.
/// unsafe { memory.store(dependency, 0) };
/// queue.run_until_idle();
/// assert!(queue.truth(index).unwrap().completed);
/// ```
pub fn submit_wait(
    queue: &Queue,
    index: u64,
    completion_signal: u64,
    dependencies: &[u64],
    barrier: bool,
) {
    let packet = encode(
        AqlWork::BarrierAnd(dependencies),
        barrier,
        completion_signal,
    )
    .expect("at most five dependencies");
    queue.write(index, packet);
    queue.ring_doorbell(index);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Compute, Kernel, KernelDispatch};
    use parking_lot::Mutex;
    use sigretire_tracker::{Request, Status, Tracker, backend::Dispatch};

    #[test]
    fn a_callers_dispatch_reaches_its_compute_kernel_field_for_field() {
        let (mut tracker, queue) = stepped_tracker(Config::default()).unwrap();
        let calls: Arc<Mutex<Vec<KernelDispatch>>> = Arc::default();
        let log = calls.clone();
        let kernel = queue
            .sim()
            .register_kernel(Kernel::Compute(Compute::new(move |dispatch| {
                log.lock().push(*dispatch)
            })));
        let dispatch = Dispatch::new(kernel)
            .kernarg_address(0x7f12_3456_7000)
            .grid([1000, 3, 1])
            .workgroup([256, 1, 1])
            .segments(32, 2048);
        let index = queue.reserve().unwrap();
        let acquired = tracker.acquire(Request::packet(index)).unwrap();
        queue
            .publish(acquired.publication, Work::Dispatch(dispatch))
            .unwrap();
        queue.run_until_idle();
        assert_eq!(tracker.query(&acquired.ticket).unwrap(), Status::Complete);
        assert_eq!(
            *calls.lock(),
            [KernelDispatch {
                queue: queue.id(),
                index,
                kernel_object: kernel,
                kernarg_address: 0x7f12_3456_7000,
                dimensions: 2,
                grid: [1000, 3, 1],
                workgroup: [256, 1, 1],
                private_segment_size: 32,
                group_segment_size: 2048,
            }]
        );
    }
}
