//! The contract between the tracker and a backend: where signals live and
//! what touching them costs ([`SignalMemory`]), the hardware queue's read
//! index ([`QueueView`]) and publication ([`HardwareQueue`]), and the work a
//! packet carries.

use crate::publication::Publication;
use crate::registry;
use core::fmt::Debug;
use std::time::Duration;

/// Where a signal's memory lives, which decides what a host access costs.
///
/// ```
/// use sigretire_tracker::Placement;
/// assert_eq!(Placement::Device.index(), 1);
/// assert_eq!(Placement::ALL, [Placement::Host, Placement::Device]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Placement {
    /// System memory: host loads and stores are ordinary cached accesses.
    Host,
    /// GPU memory seen through a large BAR: a host load is an uncached PCIe
    /// read (about 1.1 us on MI300X), host stores are write-combined and need
    /// a store fence (and, for some consumers, an HDP flush) to be visible.
    Device,
}

impl Placement {
    /// Both placements, in index order.
    pub const ALL: [Placement; 2] = [Placement::Host, Placement::Device];

    /// 0 for host, 1 for device: the index of per-placement counters.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The other placement.
    pub const fn other(self) -> Placement {
        match self {
            Placement::Host => Placement::Device,
            Placement::Device => Placement::Host,
        }
    }
}

/// Start and end of a packet's execution in the GPU's clock (ticks).
///
/// ```
/// let t = sigretire_tracker::Timestamps { start: 100, end: 350 };
/// assert_eq!(t.ticks(), 250);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Timestamps {
    /// When the packet processor launched the packet.
    pub start: u64,
    /// When the packet completed.
    pub end: u64,
}

impl Timestamps {
    /// Elapsed GPU ticks (0 if the stamps are out of order).
    pub const fn ticks(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// The clock a backend's timestamps count in: a fact of its hardware (the
/// packet processor's counter, CUDA's `%globaltimer`), never a user's
/// setting, so no configuration can disagree with the stamps.
///
/// Stored as ticks per second, as ROCr reports it
/// (`HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`); converting ticks to a
/// [`Duration`] is exact to the nanosecond below and never saturates.
///
/// ```
/// use std::time::Duration;
/// use sigretire_tracker::TimestampClock;
/// let mi300x = TimestampClock::from_frequency(100_000_000).unwrap(); // 100 MHz
/// assert_eq!(mi300x.duration(250), Duration::from_nanos(2500));
/// assert_eq!(TimestampClock::NANOSECONDS.duration(1_000), Duration::from_micros(1));
/// assert_eq!(TimestampClock::from_period(Duration::from_nanos(10)), Some(mi300x));
/// // The longest count of ticks is still a finite, exact duration.
/// assert_eq!(TimestampClock::NANOSECONDS.duration(u64::MAX).as_nanos(), u128::from(u64::MAX));
/// assert_eq!(TimestampClock::from_frequency(0), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimestampClock {
    ticks_per_second: core::num::NonZeroU64,
}

impl TimestampClock {
    /// A clock that counts nanoseconds (CUDA's `%globaltimer`, ROCr's
    /// system domain).
    pub const NANOSECONDS: TimestampClock = TimestampClock {
        ticks_per_second: core::num::NonZeroU64::new(1_000_000_000).unwrap(),
    };

    /// A clock of `ticks_per_second` ticks a second; `None` for 0.
    pub const fn from_frequency(ticks_per_second: u64) -> Option<TimestampClock> {
        match core::num::NonZeroU64::new(ticks_per_second) {
            Some(ticks_per_second) => Some(TimestampClock { ticks_per_second }),
            None => None,
        }
    }

    /// The clock whose tick lasts `period`; `None` unless the period is a
    /// whole number of nanoseconds that divides one second (10 ns: 100 MHz).
    pub const fn from_period(period: Duration) -> Option<TimestampClock> {
        let nanos = period.as_nanos();
        if nanos == 0 || 1_000_000_000 % nanos != 0 {
            return None;
        }
        TimestampClock::from_frequency((1_000_000_000 / nanos) as u64)
    }

    /// Ticks per second.
    pub const fn frequency(&self) -> u64 {
        self.ticks_per_second.get()
    }

    /// `ticks` of this clock as a duration, rounded down to the nanosecond.
    pub const fn duration(&self, ticks: u64) -> Duration {
        let hz = self.ticks_per_second.get();
        let nanos = (ticks % hz) as u128 * 1_000_000_000 / hz as u128;
        Duration::new(ticks / hz, nanos as u32)
    }
}

/// A backend could not provide signals.
///
/// ```
/// let error = sigretire_tracker::backend::AllocError::OutOfMemory("VRAM and system pools exhausted".into());
/// assert!(error.to_string().contains("exhausted"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// The backend is out of memory (or out of signals) in every placement.
    #[error("out of signal memory: {0}")]
    OutOfMemory(String),
}

/// Memory that holds completion signals, as the host sees it.
///
/// A signal is a 64-bit value that the packet processor decrements when the
/// packet naming it completes; the host arms it by storing a positive value.
/// Implementations count nothing: the tracker counts every call it makes.
///
/// # Contract
/// The `unsafe` methods take a signal that [`allocate`](Self::allocate)
/// returned from this same memory; such a signal stays valid until the memory
/// is dropped. The tracker holds the memory (in an `Arc`) for as long as it or
/// anything it handed out (references, pins, waiters) may touch a signal.
///
/// A whole backend can be small: [`HostMemory`](super::HostMemory) (signals
/// as host atomics) is about forty lines.
///
/// ```
/// use sigretire_tracker::backend::{HostMemory, SignalMemory};
/// use sigretire_tracker::Placement;
///
/// fn arm_all<M: SignalMemory>(memory: &M, count: usize) -> Vec<M::Signal> {
///     let mut out = Vec::new();
///     memory.allocate(count, Placement::Device, &mut out).unwrap();
///     let signals: Vec<_> = out.into_iter().map(|(signal, _)| signal).collect();
///     // SAFETY: the signals came from this memory's `allocate`.
///     unsafe { memory.store_many(&signals, 1) };
///     memory.store_fence();
///     signals
/// }
///
/// let memory = HostMemory::new(4);
/// let signals = arm_all(&memory, 2);
/// // SAFETY: as above.
/// assert!(signals.iter().all(|&s| unsafe { memory.load(s) } == 1));
/// ```
pub trait SignalMemory: Send + Sync + 'static {
    /// A signal handle: cheap to copy, meaningful only to this memory.
    type Signal: Copy + Eq + Debug + Send + Sync + 'static;

    /// Appends `count` new signals to `out`, each with its actual placement.
    /// `placement` is a preference: a backend that cannot place a signal in
    /// device memory falls back to host memory and says so. The new signals
    /// may hold any value; the tracker arms them before use.
    fn allocate(
        &self,
        count: usize,
        placement: Placement,
        out: &mut Vec<(Self::Signal, Placement)>,
    ) -> Result<(), AllocError>;

    /// Loads the signal's value with acquire ordering.
    ///
    /// # Safety
    /// `signal` comes from this memory's [`allocate`](Self::allocate).
    unsafe fn load(&self, signal: Self::Signal) -> i64;

    /// Stores a value with release ordering (write-combined for device
    /// memory: not visible to the GPU before [`store_fence`](Self::store_fence)).
    ///
    /// # Safety
    /// As for [`load`](Self::load).
    unsafe fn store(&self, signal: Self::Signal, value: i64);

    /// Stores one value to several signals: a batched re-arm. The default
    /// stores them one by one; a backend whose per-call cost is high
    /// overrides it.
    ///
    /// # Safety
    /// As for [`load`](Self::load), for every signal.
    unsafe fn store_many(&self, signals: &[Self::Signal], value: i64) {
        for &signal in signals {
            // SAFETY: forwarded caller guarantee.
            unsafe { self.store(signal, value) }
        }
    }

    /// Orders every earlier store to device memory before later ones (x86 `sfence`).
    fn store_fence(&self);

    /// Makes fenced stores to device memory visible to readers that do not go
    /// through the BAR in order (an HDP flush: write the flush register, read it back).
    fn hdp_flush(&self);

    /// Reads the start and end timestamps the packet processor wrote for
    /// the signal's latest use, in ticks of [`timestamp_clock`](Self::timestamp_clock).
    /// `None` when nothing wrote any for it (a publication that ran no
    /// work on a backend that stamps only work it runs): a caller is never
    /// handed an earlier use's stamps.
    ///
    /// # Safety
    /// As for [`load`](Self::load).
    unsafe fn timestamps(&self, signal: Self::Signal) -> Option<Timestamps>;

    /// The clock the timestamps count in (a fact of the hardware).
    fn timestamp_clock(&self) -> TimestampClock;

    /// The value a packet's `completion_signal` (or `dep_signal`) field takes.
    fn packet_handle(&self, signal: Self::Signal) -> u64;

    /// Whether a packet on a queue of `other`'s device can name this
    /// memory's signals (wait on them, complete them): the same simulator,
    /// the same ROCr process, signal memory mapped for both CUDA contexts.
    /// A queue layer refuses a cross-queue wait on a signal its queue
    /// could not read, instead of publishing a packet that can never pass.
    fn shares_signals_with(&self, other: &Self) -> bool;

    /// Which signal memory the packets of this memory's queues can name: a
    /// queue whose [`QueueView::signal_domain`] differs cannot complete or
    /// wait on these signals (another simulator, another process's ROCr).
    /// `None` where every queue the backend makes reaches every signal it
    /// makes (one ROCr, or CUDA's portable pinned memory, per process), and
    /// for a backend that cannot tell.
    fn signal_domain(&self) -> Option<u64> {
        None
    }

    /// Waits up to `timeout` for the signal to leave `observed`, returning the
    /// value then seen (or `observed` after the timeout). The default spins on
    /// [`load`](Self::load) once; backends with a cheaper wait (ROCr's
    /// `hsa_signal_wait_scacquire` for its own signals) override it.
    ///
    /// # Safety
    /// As for [`load`](Self::load).
    unsafe fn wait_change(&self, signal: Self::Signal, observed: i64, timeout: Duration) -> i64 {
        let _ = (observed, timeout);
        // SAFETY: forwarded caller guarantee.
        unsafe { self.load(signal) }
    }

    /// A wake signal: one whose writes wake host threads sleeping in
    /// [`sleep_while`](Self::sleep_while) (an interrupt signal on ROCr, an
    /// event mailbox on the simulator), in host memory, value unspecified.
    /// A queue layer makes a few of them up front and has a packet complete
    /// one when a thread wants to sleep until some use is done. `Ok(None)`:
    /// the backend has none, or none is left (a process-wide budget spent);
    /// waits then poll. It counts as allocated from this memory (the
    /// `unsafe` methods take it) and lives as long as the memory.
    ///
    /// ```
    /// use sigretire_tracker::backend::{HostMemory, SignalMemory};
    /// assert_eq!(HostMemory::new(1).create_wake_signal(), Ok(None), "host atomics wake nobody");
    /// ```
    fn create_wake_signal(&self) -> Result<Option<Self::Signal>, AllocError> {
        Ok(None)
    }

    /// Sleeps, spending no CPU, until the wake signal leaves `observed` or
    /// `timeout` passes, and returns the value then seen. The default waits
    /// as [`wait_change`](Self::wait_change) does.
    ///
    /// # Safety
    /// As for [`load`](Self::load), and `signal` came from
    /// [`create_wake_signal`](Self::create_wake_signal).
    unsafe fn sleep_while(&self, signal: Self::Signal, observed: i64, timeout: Duration) -> i64 {
        // SAFETY: forwarded caller guarantee.
        unsafe { self.wait_change(signal, observed, timeout) }
    }
}

/// What the tracker needs to know about the hardware queue.
///
/// ```
/// use sigretire_tracker::backend::QueueView;
/// let (_sim, queue) = sigretire_sim::backend::stepped_queue();
/// assert_eq!(QueueView::read_index(&queue), 0);
/// assert!(queue.ring_in_device_memory());
/// ```
pub trait QueueView: Send {
    /// The packet processor's read index (acquire). It says which packets were
    /// consumed, not which completed: the tracker only uses it to nominate a
    /// fence whose signal one load then confirms.
    fn read_index(&self) -> u64;

    /// Whether the queue's packet ring is in device memory. Then packets reach
    /// it through the same BAR after fenced signal stores, in order, and no
    /// HDP flush is needed before publishing; a ring in system memory needs one.
    fn ring_in_device_memory(&self) -> bool;

    /// Which signal memory this queue's packets can name (see
    /// [`SignalMemory::signal_domain`]): a tracker or queue layer refuses to
    /// move work to a queue of another domain. `None`: the backend's one
    /// domain, or it cannot tell.
    fn signal_domain(&self) -> Option<u64> {
        None
    }
}

/// Work published on a hardware queue: the body of a packet. The header
/// (packet type, barrier bit, memory scopes) and the completion signal come
/// from the [`Publication`], so the caller builds every
/// field of its packet but those.
///
/// ```
/// use sigretire_tracker::backend::{HardwareQueue, Publication};
/// use sigretire_tracker::Work;
/// let (_sim, queue) = sigretire_sim::backend::stepped_queue();
/// let index = HardwareQueue::reserve(&queue).unwrap();
/// queue.publish(Publication::unsignalled(index, true), Work::Marker).unwrap();
/// queue.run_until_idle();
/// assert!(queue.truth(index).unwrap().completed);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work<'a> {
    /// Empty work that runs like any other (an empty kernel where the
    /// backend launches kernels): completes as soon as it runs, with
    /// timestamps on a profiled queue. What a timed event records.
    Empty,
    /// No work at all, only the completion: the cheapest way to mark a
    /// point in the queue for a synchronize to wait on. Timestamps are not
    /// guaranteed (a backend may complete it without running anything).
    Marker,
    /// A kernel the backend knows by this handle (for the simulator, a
    /// registered kernel object; 0 is the empty kernel).
    Kernel(u64),
    /// Waits until every signal (packet handles, at most five) reaches 0:
    /// a barrier-AND packet on AQL queues.
    Wait(&'a [u64]),
    /// Waits until any of the signals (packet handles, one to five)
    /// reaches 0: a barrier-OR packet.
    WaitAny(&'a [u64]),
    /// A kernel dispatch the caller built (its own kernel object and
    /// kernel arguments, grid and workgroup).
    Dispatch(Dispatch),
    /// Waits until a signal's value satisfies a condition: AMD's
    /// barrier-value vendor packet.
    WaitValue(WaitValue),
}

/// A kernel dispatch packet's body, as the caller builds it: everything but
/// the header and the completion signal.
///
/// ```
/// let dispatch = sigretire_tracker::backend::Dispatch::new(0x7f00_1000)
///     .kernarg_address(0x7f00_2000)
///     .grid([1024, 1, 1])
///     .workgroup([256, 1, 1]);
/// assert_eq!(dispatch.dimensions, 1);
/// assert_eq!(dispatch.workgroup, [256, 1, 1]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dispatch {
    /// The kernel's code object handle (the simulator: a registered
    /// kernel; 0 is the empty kernel).
    pub kernel_object: u64,
    /// Where the kernel's arguments are (0: none).
    pub kernarg_address: u64,
    /// Work-items in each dimension.
    pub grid: [u32; 3],
    /// Work-items per workgroup in each dimension.
    pub workgroup: [u16; 3],
    /// How many of the three dimensions are used (1 to 3).
    pub dimensions: u16,
    /// Private memory per work-item, bytes.
    pub private_segment_size: u32,
    /// Group (LDS) memory per workgroup, bytes.
    pub group_segment_size: u32,
}

impl Dispatch {
    /// One work-item of `kernel_object`, no arguments.
    pub const fn new(kernel_object: u64) -> Self {
        Self {
            kernel_object,
            kernarg_address: 0,
            grid: [1, 1, 1],
            workgroup: [1, 1, 1],
            dimensions: 1,
            private_segment_size: 0,
            group_segment_size: 0,
        }
    }

    /// With its kernel arguments at `address`.
    pub const fn kernarg_address(mut self, address: u64) -> Self {
        self.kernarg_address = address;
        self
    }

    /// With `grid` work-items; the dimensions used are those past which
    /// every size is 1.
    pub const fn grid(mut self, grid: [u32; 3]) -> Self {
        self.grid = grid;
        self.dimensions = if grid[2] > 1 {
            3
        } else if grid[1] > 1 {
            2
        } else {
            1
        };
        self
    }

    /// With workgroups of `workgroup` work-items.
    pub const fn workgroup(mut self, workgroup: [u16; 3]) -> Self {
        self.workgroup = workgroup;
        self
    }

    /// With these private (per work-item) and group (per workgroup) memory
    /// sizes.
    pub const fn segments(mut self, private: u32, group: u32) -> Self {
        self.private_segment_size = private;
        self.group_segment_size = group;
        self
    }
}

/// How a barrier-value packet compares a signal's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Condition {
    /// `value & mask == expected`.
    Equal,
    /// `value & mask != expected`.
    NotEqual,
    /// `value & mask < expected`.
    Less,
    /// `value & mask >= expected`.
    GreaterEqual,
}

/// The body of an AMD barrier-value packet: wait until `signal`'s value,
/// masked, satisfies `condition` against `value`.
///
/// ```
/// use sigretire_tracker::backend::{Condition, WaitValue};
/// let wait = WaitValue { signal: 0x4000, condition: Condition::Equal, value: 0, mask: u64::MAX };
/// assert_eq!(wait.condition, Condition::Equal);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WaitValue {
    /// The signal (a packet handle).
    pub signal: u64,
    /// The comparison.
    pub condition: Condition,
    /// The value compared with.
    pub value: i64,
    /// Which bits of the signal's value are compared.
    pub mask: u64,
}

/// A hardware queue that accepts work: what a queue layer needs beyond the
/// tracker's [`QueueView`].
///
/// Publication follows HSA order: the packet body, then its header by a
/// release store, then the doorbell. The header's barrier bit and the
/// completion signal are the [`Publication`]'s, so a
/// packet completing a use is published exactly as its tracker recorded it.
/// The completion signal must already be armed and its arming visible,
/// which [`Tracker::acquire`](crate::Tracker::acquire) guarantees for the
/// signals it hands out.
///
/// ```
/// use sigretire_tracker::backend::{HardwareQueue, Publication, QueueError};
/// use sigretire_tracker::Work;
/// let (_sim, queue) = sigretire_sim::backend::stepped_queue();
/// let index = HardwareQueue::reserve(&queue).unwrap();
/// let six = [0u64; 6];
/// let refused = queue.publish(Publication::unsignalled(index, true), Work::Wait(&six));
/// assert!(matches!(refused, Err(QueueError::Unsupported(_))));
/// ```
pub trait HardwareQueue: QueueView + Clone + Send + Sync + 'static {
    /// Reserves the next packet slot and returns its index. Every reserved
    /// slot must be published, or the queue stalls at it.
    fn reserve(&self) -> Result<u64, QueueError>;

    /// Publishes `work` as `publication` says (at its index, reserved; with
    /// its barrier bit; completing its signal) and rings the doorbell. A
    /// publication of several operations is refused
    /// ([`QueueError::Unsupported`]): publish each of
    /// [`operations`](crate::backend::Publication::operations); so is a copy-engine
    /// use's.
    fn publish(&self, publication: Publication, work: Work<'_>) -> Result<(), QueueError>;

    /// Whether work its user did not publish through
    /// [`publish`](Self::publish) may run on the queue after the packet at
    /// `newest` (the newest packet the user published, of any kind): a
    /// runtime's own packets on an adopted AQL queue, its own launches on an
    /// adopted CUDA stream, work enqueued through a raw handle.
    ///
    /// Only where this answers `false` does the completion of the user's
    /// newest fence prove everything on the queue done, so that a queue
    /// layer may answer a synchronize or a query with it, or let an event
    /// share its completion instead of publishing a marker of its own.
    /// `true` unless the backend can tell, which is always safe. An AQL
    /// queue tells from its write index: any producer reserves a slot
    /// before it writes a packet, so a write index one past `newest` proves
    /// nobody else reserved one since.
    fn foreign_work_after(&self, newest: u64) -> bool {
        let _ = newest;
        true
    }

    /// Whether everything enqueued on the queue, by anyone, has completed,
    /// where the backend can ask the hardware (a CUDA stream:
    /// `cuStreamQuery`); `None` where it cannot (an AQL queue: its read
    /// index says what was consumed, not what completed), or the question
    /// failed. A queue layer asks this only where work it did not publish
    /// may follow its newest command, before it publishes a marker to
    /// find out.
    fn idle(&self) -> Option<bool> {
        None
    }

    /// Completes `wake` (a wake signal's packet handle: its value goes to
    /// 0, and its sleepers wake) once the signal `dependency` (a packet
    /// handle) completes, on a channel beside the queue that holds none of
    /// its work up: nothing takes a place in the queue's order. Waits so
    /// published complete in the order they were published, each after the
    /// ones before it.
    ///
    /// `None` where the backend has no such channel (the default): a queue
    /// layer then publishes a barrier-AND on `dependency` completing `wake`
    /// in the queue itself, which later work runs behind. `Some(Err(_))`:
    /// nothing was enqueued, so nothing reads `dependency` or writes `wake`.
    /// A CUDA stream has one (a relay stream of the queue's waits for the
    /// signal and runs the wake's host function): there, a wake in the
    /// stream delays the next kernel by its memory operations, a few
    /// microseconds on an H200.
    ///
    /// ```
    /// use sigretire_tracker::backend::HardwareQueue;
    /// let (_sim, queue) = sigretire_sim::backend::stepped_queue();
    /// assert!(queue.publish_wake_aside(0, 0).is_none()); // in the queue on the simulator
    /// ```
    fn publish_wake_aside(&self, dependency: u64, wake: u64) -> Option<Result<(), QueueError>> {
        let _ = (dependency, wake);
        None
    }
}

/// A hardware queue refused work.
///
/// ```
/// let error = sigretire_tracker::backend::QueueError::too_many_dependencies(7);
/// assert!(error.to_string().contains("at most 5"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// Every packet slot is taken by work the processor has not consumed.
    #[error("the hardware queue is full; wait for it to drain, then retry")]
    Full,
    /// The queue reported an error and accepts no more work.
    #[error("the hardware queue failed: {0}")]
    Failed(String),
    /// The work cannot be expressed on this queue (for example, more than
    /// five dependencies in one packet).
    #[error("unsupported work: {0}")]
    Unsupported(String),
}

impl QueueError {
    /// Why `publication` cannot be published as one AQL packet, if it
    /// cannot: every backend's first check. Among the reasons: an untracked
    /// publication ([`Publication::untracked`]) naming a signal a live
    /// tracker owns, whose header would say what its tracker never recorded.
    ///
    /// ```
    /// use sigretire_tracker::backend::{Publication, QueueError};
    /// use sigretire_tracker::{Request, Tracker};
    /// use sigretire_sim::backend as sim_backend;
    /// let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default())?;
    /// let acquired = tracker.acquire(Request::packet(queue.reserve()?).barrier(true))?;
    /// let header_of_mine = Publication::untracked(acquired.publication.index(), false, acquired.signal);
    /// assert!(matches!(QueueError::check_single(&header_of_mine), Err(QueueError::Unsupported(_))));
    /// assert_eq!(QueueError::check_single(&acquired.publication), Ok(()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_single(publication: &Publication) -> Result<(), QueueError> {
        if publication.names_signal_untracked() && registry::is_a_trackers(publication.completion())
        {
            return Err(QueueError::Unsupported(format!(
                "signal {:#x} belongs to a tracker: publish its use with the Publication its acquire handed out (Acquired::publication, each of its operations()), whose barrier bit and index are the ones the tracker recorded",
                publication.completion()
            )));
        }
        if publication.is_copy() {
            return Err(QueueError::Unsupported(
                "a copy-engine use is completed by its copy engine, not by an AQL packet".into(),
            ));
        }
        if publication.ops() != 1 {
            return Err(QueueError::Unsupported(format!(
                "a use of {} operations: publish each of its operations()",
                publication.ops()
            )));
        }
        Ok(())
    }

    /// More dependencies than one AQL barrier packet holds (five).
    pub fn too_many_dependencies(count: usize) -> Self {
        QueueError::Unsupported(format!(
            "{count} dependencies in one barrier-AND packet (at most 5: chain packets)"
        ))
    }
}
