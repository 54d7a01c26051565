//! Simulated kernels and the host flags that spinning kernels wait on.
//!
//! A kernel dispatch packet's `kernel_object` picks a kernel registered with
//! [`Sim::register_kernel`](crate::Sim::register_kernel); 0 is the empty
//! kernel. Most kernels simulate only what a completion tracker can
//! observe: how long the kernel runs, or which host flag it spins on. A
//! [`Kernel::Compute`] kernel also does work, in host code, so a runtime's
//! tests and examples can check that what a kernel wrote is there once the
//! library says it completed.

use crate::wake::Wake;
use hsa_sys::{
    HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS, HSA_KERNEL_DISPATCH_PACKET_SETUP_WIDTH_DIMENSIONS,
    PacketWords, hsa_kernel_dispatch_packet_t,
};
use parking_lot::{Mutex, RwLock};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// What a kernel dispatch does between launch and completion.
///
/// A spinning kernel holds its completion (and, through a fence behind it,
/// its queue) until the host sets its flag:
///
/// ```
/// use sigretire_sim::{packets, HostFlag, Kernel, Sim, SimConfig, SimQueueConfig, StepError};
///
/// let sim = Sim::new(SimConfig::default());
/// let queue = sim.create_queue(SimQueueConfig::default())?;
/// let flag = HostFlag::new();
/// let spin = sim.register_kernel(Kernel::SpinUntil(flag.clone()));
/// let index = queue.submit(packets::kernel(spin, None))?;
/// queue.run_until_idle();
/// assert!(queue.truth(index).unwrap().launched);
/// assert_eq!(queue.complete(index), Err(StepError::NotReady { index }));
/// flag.set();
/// queue.run_until_idle();
/// assert!(queue.truth(index).unwrap().completed);
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone, Debug)]
pub enum Kernel {
    /// Nothing: completes after the profile's
    /// [`kernel_execution`](crate::CostProfile::kernel_execution) (threaded
    /// mode) or whenever the caller completes it (stepped mode).
    Empty,
    /// Runs this long in threaded mode; in stepped mode the caller chooses
    /// when it completes.
    Duration(Duration),
    /// Spins until the flag is set, as the seed's regression test's kernel
    /// does: it cannot complete before [`HostFlag::set`], in either mode.
    SpinUntil(HostFlag),
    /// Does real work: the packet processor calls the [`Compute`] callback
    /// with the fields the dispatch packet carried ([`KernelDispatch`]: its
    /// kernel arguments' address, grid and workgroup sizes, ...).
    ///
    /// **When:** as the kernel completes, before its `end_ts` and before the
    /// decrement of its completion signal. So whoever sees the completion
    /// (a host load of the signal, a barrier packet on another queue) sees
    /// everything the callback wrote, and nobody sees it earlier than a
    /// real kernel's results could be relied on. In threaded mode that is
    /// after the kernel's [run time](Compute::runs_for), on the processor
    /// thread; in stepped mode on the thread that completes the packet
    /// ([`Queue::complete`](crate::Queue::complete), `run_until_idle`). A
    /// packet that fails before completing (its queue failed) never runs
    /// its callback.
    ///
    /// **Context:** the callback runs under the queue's lock, one at a time
    /// per simulator in threaded mode (its own time adds to the kernel's).
    /// It may read and write its own state and the simulator's signals, but
    /// must not use the simulator's queues (it would deadlock). A callback
    /// that panics faults its queue, as a GPU memory fault would: every
    /// incomplete packet of the queue fails (its signal becomes
    /// [`FAILED_SIGNAL_VALUE`](crate::FAILED_SIGNAL_VALUE)); in stepped mode
    /// the panic then continues on the caller's thread, in threaded mode the
    /// processor thread carries on with the other queues.
    ///
    /// A vector add: its arguments are found by the kernarg address, in a
    /// table the test owns (no raw memory needed):
    ///
    /// ```
    /// use sigretire_sim::hsa_sys::{hsa_kernel_dispatch_packet_t, PacketHeader, PacketWords, HSA_PACKET_TYPE_KERNEL_DISPATCH};
    /// use sigretire_sim::{AgentId, Compute, Kernel, Placement, Sim, SimConfig, SimQueueConfig};
    /// use std::collections::HashMap;
    /// use std::sync::{Arc, Mutex};
    ///
    /// struct Add { x: Vec<f32>, y: Vec<f32>, out: Vec<f32> }
    /// let args: Arc<Mutex<HashMap<u64, Add>>> = Arc::default();
    ///
    /// let sim = Sim::new(SimConfig::default());
    /// let queue = sim.create_queue(SimQueueConfig::default())?;
    /// let table = args.clone();
    /// let add = sim.register_kernel(Kernel::Compute(Compute::new(move |dispatch| {
    ///     let mut table = table.lock().unwrap();
    ///     let add = table.get_mut(&dispatch.kernarg_address).expect("launched with its arguments");
    ///     // One work-item per element; the grid may be rounded up to whole workgroups.
    ///     for i in 0..dispatch.grid[0] as usize {
    ///         if i < add.out.len() {
    ///             add.out[i] = add.x[i] + add.y[i];
    ///         }
    ///     }
    /// })));
    ///
    /// args.lock().unwrap().insert(0x1000, Add { x: vec![1.0; 100], y: vec![2.0; 100], out: vec![0.0; 100] });
    /// let done = sim.allocate(1, Placement::Host, AgentId(0))?[0];
    /// sim.store(done, 1);
    /// let mut packet = hsa_kernel_dispatch_packet_t::single_item(
    ///     PacketHeader::new(HSA_PACKET_TYPE_KERNEL_DISPATCH),
    ///     add,
    ///     done.handle(),
    /// );
    /// packet.kernarg_address = 0x1000 as *mut _; // a key into `args`, never dereferenced
    /// (packet.grid_size_x, packet.workgroup_size_x) = (128, 64);
    /// queue.submit(PacketWords::from(packet))?;
    ///
    /// queue.run_until_idle();
    /// assert_eq!(sim.load(done), 0); // complete: the output is there
    /// assert!(args.lock().unwrap()[&0x1000].out.iter().all(|&v| v == 3.0));
    /// # Ok::<(), sigretire_sim::SimError>(())
    /// ```
    Compute(Compute),
}

/// The callback of a [`Kernel::Compute`], and how long the kernel runs.
///
/// Clones share the callback. A callback that holds a clone of the
/// [`Sim`](crate::Sim) it is registered with keeps that simulator alive
/// for good (the simulator holds its kernels): capture what the work needs
/// instead.
///
/// ```
/// use sigretire_sim::Compute;
/// use std::time::Duration;
///
/// let kernel = Compute::new(|dispatch| assert!(dispatch.grid[0] > 0));
/// assert_eq!(kernel.run_time(), None); // the profile's kernel_execution
/// let slow = kernel.runs_for(Duration::from_millis(5));
/// assert_eq!(slow.run_time(), Some(Duration::from_millis(5)));
/// ```
#[derive(Clone)]
pub struct Compute {
    work: Arc<dyn Fn(&KernelDispatch) + Send + Sync>,
    run_time: Option<Duration>,
}

impl Compute {
    /// A kernel whose work is `work`, called once per dispatch with the
    /// dispatch's fields (see [`Kernel::Compute`] for when and where). It
    /// runs for the profile's
    /// [`kernel_execution`](crate::CostProfile::kernel_execution) in
    /// threaded mode unless [`runs_for`](Self::runs_for) says otherwise.
    pub fn new(work: impl Fn(&KernelDispatch) + Send + Sync + 'static) -> Self {
        Self {
            work: Arc::new(work),
            run_time: None,
        }
    }

    /// Runs this long in threaded mode before its work is done and it
    /// completes (the callback's own time comes on top); in stepped mode
    /// the caller chooses when it completes.
    pub fn runs_for(mut self, run_time: Duration) -> Self {
        self.run_time = Some(run_time);
        self
    }

    /// The run time [`runs_for`](Self::runs_for) set, if any.
    pub fn run_time(&self) -> Option<Duration> {
        self.run_time
    }

    /// Does the kernel's work for `dispatch`.
    pub(crate) fn run(&self, dispatch: &KernelDispatch) {
        (self.work)(dispatch)
    }
}

impl fmt::Debug for Compute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compute")
            .field("run_time", &self.run_time)
            .finish_non_exhaustive()
    }
}

/// What a [`Kernel::Compute`] callback is told about its dispatch: the
/// fields of the kernel dispatch packet as the processor read them from the
/// ring, and where the packet was.
///
/// The addresses are the packet's values, not pointers the simulator
/// checked: the callback decides what its kernarg address names (a key
/// into its own argument table is enough for a simulated kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelDispatch {
    /// The queue's [`id`](crate::Queue::id).
    pub queue: u64,
    /// The packet's index in the queue.
    pub index: u64,
    /// The packet's `kernel_object`: the value
    /// [`Sim::register_kernel`](crate::Sim::register_kernel) returned.
    pub kernel_object: u64,
    /// The packet's `kernarg_address` (0: none).
    pub kernarg_address: u64,
    /// How many dimensions the packet's `setup` says are used (1 to 3).
    pub dimensions: u16,
    /// Work-items in each dimension (`grid_size_x`, `_y`, `_z`).
    pub grid: [u32; 3],
    /// Work-items per workgroup in each dimension (`workgroup_size_x`, ...).
    pub workgroup: [u16; 3],
    /// Private memory per work-item, bytes.
    pub private_segment_size: u32,
    /// Group (LDS) memory per workgroup, bytes.
    pub group_segment_size: u32,
}

impl KernelDispatch {
    /// The fields of kernel dispatch packet `words`, published at `index` on
    /// queue `queue`.
    pub(crate) fn decode(queue: u64, index: u64, words: PacketWords) -> Self {
        let packet = hsa_kernel_dispatch_packet_t::from(words);
        Self {
            queue,
            index,
            kernel_object: packet.kernel_object,
            // The packet's value, as a number: nothing dereferences it.
            kernarg_address: packet.kernarg_address as usize as u64,
            dimensions: (packet.setup >> HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS)
                & ((1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_WIDTH_DIMENSIONS) - 1),
            grid: [packet.grid_size_x, packet.grid_size_y, packet.grid_size_z],
            workgroup: [
                packet.workgroup_size_x,
                packet.workgroup_size_y,
                packet.workgroup_size_z,
            ],
            private_segment_size: packet.private_segment_size,
            group_segment_size: packet.group_segment_size,
        }
    }
}

/// A flag in host memory that a [`Kernel::SpinUntil`] polls.
///
/// Clones share the flag. Setting it wakes the processor thread of every
/// threaded simulator that registered a kernel spinning on it.
///
/// ```
/// use sigretire_sim::HostFlag;
///
/// let flag = HostFlag::new();
/// let seen_by_kernel = flag.clone();
/// assert!(!seen_by_kernel.is_set());
/// flag.set();
/// assert!(seen_by_kernel.is_set());
/// ```
#[derive(Clone, Default)]
pub struct HostFlag {
    inner: Arc<FlagInner>,
}

#[derive(Default)]
struct FlagInner {
    set: AtomicBool,
    /// Processor threads to wake when the flag is set.
    watchers: Mutex<Vec<Weak<Wake>>>,
}

impl HostFlag {
    /// A new, unset flag.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag (a release store) and wakes the processors that watch it.
    pub fn set(&self) {
        self.inner.set.store(true, Ordering::Release);
        for watcher in self.inner.watchers.lock().iter() {
            if let Some(wake) = watcher.upgrade() {
                wake.notify();
            }
        }
    }

    /// Clears the flag, so kernels launched from now on spin again.
    pub fn clear(&self) {
        self.inner.set.store(false, Ordering::Release);
    }

    /// Whether the flag is set (an acquire load).
    pub fn is_set(&self) -> bool {
        self.inner.set.load(Ordering::Acquire)
    }

    fn watch(&self, wake: &Arc<Wake>) {
        let mut watchers = self.inner.watchers.lock();
        watchers.retain(|w| w.strong_count() > 0);
        if !watchers
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(wake)))
        {
            watchers.push(Arc::downgrade(wake));
        }
    }
}

impl fmt::Debug for HostFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostFlag")
            .field("set", &self.is_set())
            .finish()
    }
}

/// The kernels registered with one simulator; `kernel_object` N > 0 names
/// the N-th.
#[derive(Debug, Default)]
pub(crate) struct KernelTable {
    kernels: RwLock<Vec<Kernel>>,
}

impl KernelTable {
    /// Registers `kernel` and returns its `kernel_object`. A spinning kernel's
    /// flag learns to wake `wake` (the processor thread, if any).
    pub(crate) fn register(&self, kernel: Kernel, wake: Option<&Arc<Wake>>) -> u64 {
        if let (Kernel::SpinUntil(flag), Some(wake)) = (&kernel, wake) {
            flag.watch(wake);
        }
        let mut kernels = self.kernels.write();
        kernels.push(kernel);
        kernels.len() as u64
    }

    /// The kernel a dispatch's `kernel_object` names: 0 is [`Kernel::Empty`].
    pub(crate) fn get(&self, kernel_object: u64) -> Option<Kernel> {
        match kernel_object {
            0 => Some(Kernel::Empty),
            n => {
                let index = usize::try_from(n - 1).ok()?;
                self.kernels.read().get(index).cloned()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        AgentId, FAILED_SIGNAL_VALUE, Mode, Placement, Signal, Sim, SimConfig, SimQueueConfig,
        StepError,
    };
    use hsa_sys::{HSA_PACKET_TYPE_KERNEL_DISPATCH, PacketHeader};
    use std::panic::AssertUnwindSafe;
    use std::time::Instant;

    /// A dispatch packet with every field the callback is told about set to
    /// a distinct value, completing `done`.
    fn dispatch_packet(kernel_object: u64, done: Signal) -> hsa_kernel_dispatch_packet_t {
        hsa_kernel_dispatch_packet_t {
            header: PacketHeader::new(HSA_PACKET_TYPE_KERNEL_DISPATCH)
                .barrier(true)
                .bits(),
            setup: 3 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS,
            workgroup_size_x: 64,
            workgroup_size_y: 4,
            workgroup_size_z: 2,
            reserved0: 0,
            grid_size_x: 320,
            grid_size_y: 8,
            grid_size_z: 6,
            private_segment_size: 48,
            group_segment_size: 4096,
            kernel_object,
            kernarg_address: std::ptr::without_provenance_mut(0x7f00_dead_b000),
            reserved2: 0,
            completion_signal: done.handle(),
        }
    }

    #[test]
    fn compute_sees_its_packets_fields_before_its_completion_is_visible() {
        let sim = Sim::new(SimConfig::default());
        let queue = sim.create_queue(SimQueueConfig::default()).unwrap();
        let done = sim.allocate(1, Placement::Device, AgentId(0)).unwrap()[0];
        // The callback reads the completion signal through the simulator; a
        // slot the test empties at the end, so the kernel table does not keep
        // the simulator alive.
        let reader: Arc<Mutex<Option<Sim>>> = Arc::new(Mutex::new(Some(sim.clone())));
        let calls: Arc<Mutex<Vec<(KernelDispatch, i64)>>> = Arc::default();
        let (slot, log) = (reader.clone(), calls.clone());
        let kernel = sim.register_kernel(Kernel::Compute(Compute::new(move |dispatch| {
            let seen = slot.lock().as_ref().map(|sim| sim.load(done));
            log.lock()
                .push((*dispatch, seen.expect("the test holds the slot")));
        })));
        sim.store(done, 1);
        sim.store_fence();
        let packet = dispatch_packet(kernel, done);
        let index = queue.submit(PacketWords::from(packet)).unwrap();

        assert_eq!(queue.launch(), Ok(index));
        assert!(calls.lock().is_empty(), "the work is done at completion");
        queue.complete(index).unwrap();
        let expected = KernelDispatch {
            queue: queue.id(),
            index,
            kernel_object: kernel,
            kernarg_address: 0x7f00_dead_b000,
            dimensions: 3,
            grid: [320, 8, 6],
            workgroup: [64, 4, 2],
            private_segment_size: 48,
            group_segment_size: 4096,
        };
        assert_eq!(*calls.lock(), [(expected, 1)], "once, before the decrement");
        assert_eq!(sim.load(done), 0);
        // The ring's copy of the packet says the same as the callback was told.
        let truth = queue.truth(index).unwrap();
        assert_eq!(
            KernelDispatch::decode(queue.id(), index, truth.packet),
            expected
        );
        assert!(truth.completed);
        assert!(sim.violations().is_empty(), "{:?}", sim.violations());
        reader.lock().take();
    }

    #[test]
    fn compute_work_is_visible_once_its_completion_is_seen_in_real_time() {
        let sim = Sim::new(SimConfig {
            mode: Mode::Threaded,
            ..SimConfig::default()
        });
        let queue = sim.create_queue(SimQueueConfig::default()).unwrap();
        let out: Arc<Mutex<Vec<u64>>> = Arc::default();
        let buffer = out.clone();
        let run_time = Duration::from_millis(5);
        let kernel = sim.register_kernel(Kernel::Compute(
            Compute::new(move |dispatch| {
                // Slow work: a completion seen before it ended would be caught.
                std::thread::sleep(Duration::from_millis(2));
                buffer.lock().push(dispatch.kernarg_address);
            })
            .runs_for(run_time),
        ));
        let signals = sim.allocate(3, Placement::Host, AgentId(0)).unwrap();
        sim.store_many(&signals, 1);
        let start = Instant::now();
        for (k, &done) in signals.iter().enumerate() {
            let mut packet = dispatch_packet(kernel, done);
            packet.kernarg_address = std::ptr::without_provenance_mut(0x1000 * (k + 1));
            queue.submit(PacketWords::from(packet)).unwrap();
        }
        for (k, &done) in signals.iter().enumerate() {
            while sim.load(done) != 0 {
                assert!(start.elapsed() < Duration::from_secs(30), "never completed");
                std::thread::yield_now();
            }
            // Its work and every earlier packet's, in order; a later packet's
            // may be there too (the host may look late: under Miri, by more
            // than the next packet's run time).
            let expected: Vec<u64> = (1..=k as u64 + 1).map(|n| 0x1000 * n).collect();
            let seen = out.lock().clone();
            assert!(
                seen.len() >= expected.len() && seen[..expected.len()] == expected[..],
                "packet {k}'s work, in order: {seen:?}"
            );
        }
        // Barrier bits: each ran for its run time after the one before.
        assert!(start.elapsed() >= run_time * 3);
    }

    #[test]
    fn a_panicking_compute_kernel_faults_its_queue() {
        for mode in [Mode::Stepped, Mode::Threaded] {
            let sim = Sim::new(SimConfig {
                mode,
                ..SimConfig::default()
            });
            let faulty = sim.create_queue(SimQueueConfig::default()).unwrap();
            let healthy = sim.create_queue(SimQueueConfig::default()).unwrap();
            let boom = sim.register_kernel(Kernel::Compute(Compute::new(|dispatch| {
                panic!("kernel at {:#x} faulted", dispatch.kernarg_address)
            })));
            let signals = sim.allocate(3, Placement::Host, AgentId(0)).unwrap();
            sim.store_many(&signals, 1);
            faulty
                .submit(PacketWords::from(dispatch_packet(boom, signals[0])))
                .unwrap();
            faulty
                .submit(crate::packets::kernel(0, Some(signals[1])))
                .unwrap();
            let ran = std::panic::catch_unwind(AssertUnwindSafe(|| faulty.run_until_idle()));
            // Stepped: the panic reaches the caller; threaded: the processor
            // thread survives it.
            assert_eq!(ran.is_err(), mode == Mode::Stepped, "{mode:?}");
            assert!(faulty.is_failed(), "{mode:?}");
            assert_eq!(sim.load(signals[0]), FAILED_SIGNAL_VALUE);
            assert_eq!(sim.load(signals[1]), FAILED_SIGNAL_VALUE);
            let index = healthy
                .submit(crate::packets::kernel(0, Some(signals[2])))
                .unwrap();
            healthy.run_until_idle();
            assert!(healthy.truth(index).unwrap().completed, "{mode:?}");
            assert_eq!(sim.load(signals[2]), 0);
            if mode == Mode::Stepped {
                assert_eq!(faulty.launch(), Err(StepError::QueueFailed));
            }
        }
    }

    #[test]
    fn kernel_objects_count_from_one() {
        let table = KernelTable::default();
        let a = table.register(Kernel::Duration(Duration::from_millis(1)), None);
        let b = table.register(Kernel::Empty, None);
        assert_eq!((a, b), (1, 2));
        assert!(matches!(table.get(0), Some(Kernel::Empty)));
        assert!(matches!(table.get(a), Some(Kernel::Duration(_))));
        assert!(table.get(3).is_none());
        assert!(table.get(u64::MAX).is_none());
    }
}
