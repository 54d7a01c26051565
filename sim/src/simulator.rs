//! The simulator handle: configuration, the shared core every queue and the
//! processor thread see, and the host-facing API (signal memory, queues,
//! kernels, ground truth).

use crate::clock::Clock;
use crate::counters::Counters;
use crate::error::SimError;
use crate::interrupt::InterruptStats;
use crate::kernel::{Kernel, KernelTable};
use crate::memory::{Memory, Signal};
use crate::place::{AgentId, Placement};
use crate::processor;
use crate::profile::CostProfile;
use crate::state::{Core, Mode};
use crate::threaded::Driver;
use crate::truth::{Violation, ViolationLog};
use crate::wake::Wake;
use hsa_sys::hsa_signal_t;
use parking_lot::RwLock;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The most agents a simulator may have.
///
/// ```
/// use sigretire_sim::{Sim, SimConfig, MAX_AGENTS};
///
/// assert!(Sim::try_new(SimConfig { agents: MAX_AGENTS, ..SimConfig::default() }).is_ok());
/// assert!(Sim::try_new(SimConfig { agents: MAX_AGENTS + 1, ..SimConfig::default() }).is_err());
/// ```
pub const MAX_AGENTS: u32 = 64;

/// How to build a [`Sim`].
///
/// ```
/// use sigretire_sim::{CostProfile, Mode, Sim, SimConfig, SimError};
///
/// // A threaded MI300X-like system of two GPUs, with a fixed seed for the
/// // out-of-order completion choices.
/// let config = SimConfig {
///     mode: Mode::Threaded,
///     profile: CostProfile::mi300x(),
///     agents: 2,
///     seed: 7,
/// };
/// let sim = Sim::try_new(config)?;
/// assert_eq!((sim.mode(), sim.agents()), (Mode::Threaded, 2));
/// assert_eq!(sim.profile(), CostProfile::mi300x());
///
/// let none = Sim::try_new(SimConfig { agents: 0, ..SimConfig::default() });
/// assert!(matches!(none, Err(SimError::InvalidConfig(_))));
/// # Ok::<(), SimError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SimConfig {
    /// Who drives the processor.
    pub mode: Mode,
    /// What each operation costs.
    pub profile: CostProfile,
    /// How many GPU agents (at least 1, at most [`MAX_AGENTS`]).
    pub agents: u32,
    /// Seeds the threaded processor's choices (the completion order of
    /// overlapping kernels on out-of-order queues).
    pub seed: u64,
}

impl Default for SimConfig {
    /// Stepped, free operations, one agent, seed 0.
    fn default() -> Self {
        Self {
            mode: Mode::Stepped,
            profile: CostProfile::zero(),
            agents: 1,
            seed: 0,
        }
    }
}

/// Simulator ids: never reused in a process, so a signal cannot be mistaken
/// for one of a later simulator.
static NEXT_SIM_ID: AtomicU64 = AtomicU64::new(1);

/// A simulated GPU system: signal memory, AQL queues and a packet processor.
///
/// Cheap to clone (the clones share one simulator), `Send` and `Sync`.
/// Dropping the last clone, and the last [`Queue`](crate::Queue) (which holds one), stops
/// the processor thread and frees all signal memory.
///
/// Host accesses cost the profile's durations (busy-waiting on the calling
/// thread) and are counted by placement ([`Sim::counters`]).
///
/// # Panics
/// Every method that takes a [`Signal`] panics if the signal was allocated by
/// another simulator: such a handle names memory this simulator does not own.
///
/// ```
/// use sigretire_sim::{AgentId, Placement, Sim, SimConfig};
///
/// let sim = Sim::new(SimConfig::default());
/// let signals = sim.allocate(2, Placement::Device, AgentId(0))?;
/// sim.store(signals[0], 1);
/// assert_eq!(sim.load(signals[0]), 1);
/// assert_eq!(sim.placement(signals[0]), Placement::Device);
/// assert!(sim.violations().is_empty());
/// # Ok::<(), sigretire_sim::SimError>(())
/// ```
#[derive(Clone)]
pub struct Sim {
    inner: Arc<SimInner>,
}

struct SimInner {
    /// Dropped first: stops and joins the processor thread.
    _driver: Option<Driver>,
    core: Arc<Core>,
}

impl Sim {
    /// A new simulator.
    ///
    /// # Panics
    /// If the configuration is invalid or the processor thread cannot start;
    /// [`Sim::try_new`] returns those as errors.
    pub fn new(config: SimConfig) -> Sim {
        match Sim::try_new(config) {
            Ok(sim) => sim,
            Err(error) => panic!("sim: {error}"),
        }
    }

    /// A new simulator.
    ///
    /// # Errors
    /// [`SimError::InvalidConfig`] for 0 or more than [`MAX_AGENTS`] agents;
    /// [`SimError::ProcessorThread`] if the processor thread cannot start.
    pub fn try_new(config: SimConfig) -> Result<Sim, SimError> {
        if !(1..=MAX_AGENTS).contains(&config.agents) {
            return Err(SimError::InvalidConfig(format!(
                "agents is {}; a simulator has 1 to {MAX_AGENTS} agents",
                config.agents
            )));
        }
        let id = NEXT_SIM_ID.fetch_add(1, Ordering::Relaxed);
        let (clock, wake) = match config.mode {
            Mode::Stepped => (Clock::stepped(), None),
            Mode::Threaded => (
                Clock::real_time(config.profile.gpu_tick),
                Some(Arc::new(Wake::default())),
            ),
        };
        let core = Arc::new(Core {
            id,
            mode: config.mode,
            profile: config.profile,
            seed: config.seed,
            memory: Memory::new(id, config.agents, config.profile),
            clock,
            kernels: KernelTable::default(),
            violations: ViolationLog::default(),
            queues: RwLock::new(Vec::new()),
            wake: wake.clone(),
        });
        let driver = match wake {
            Some(wake) => Some(
                Driver::spawn(core.clone(), wake)
                    .map_err(|error| SimError::ProcessorThread(error.to_string()))?,
            ),
            None => None,
        };
        Ok(Sim {
            inner: Arc::new(SimInner {
                _driver: driver,
                core,
            }),
        })
    }

    pub(crate) fn core(&self) -> &Core {
        &self.inner.core
    }

    /// This simulator's id, unique in the process ([`Signal::sim_id`]).
    pub fn id(&self) -> u64 {
        self.core().id
    }

    /// Who drives the processor.
    pub fn mode(&self) -> Mode {
        self.core().mode
    }

    /// The cost profile.
    pub fn profile(&self) -> CostProfile {
        self.core().profile
    }

    /// How many agents the simulator has.
    pub fn agents(&self) -> u32 {
        self.core().memory.agents()
    }

    /// Allocates a batch of `count` new USER signals of `agent` at
    /// `placement`: one allocation of contiguous 64-byte aligned
    /// `amd_signal_t` blocks, value 0, zero timestamps. A cold path.
    ///
    /// If device memory is unavailable ([`Sim::set_device_memory_available`]),
    /// a `Device` request falls back to host memory; the returned signals
    /// report [`Placement::Host`]. `count == 0` returns no signals and
    /// allocates nothing.
    ///
    /// # Errors
    /// [`SimError::OutOfMemory`] (injected by [`Sim::fail_allocations`]),
    /// [`SimError::UnknownAgent`], [`SimError::InvalidConfig`] for a batch of
    /// more than 2^20 signals.
    ///
    /// ```
    /// use sigretire_sim::{AgentId, Placement, Sim, SimConfig, SimError};
    ///
    /// let sim = Sim::new(SimConfig::default());
    /// let batch = sim.allocate(3, Placement::Device, AgentId(0))?;
    /// // One contiguous allocation of 64-byte blocks, all complete (value 0).
    /// assert_eq!(batch[1].handle().handle - batch[0].handle().handle, 64);
    /// assert!(batch.iter().all(|&s| sim.load(s) == 0));
    ///
    /// sim.fail_allocations(1);
    /// assert_eq!(sim.allocate(1, Placement::Host, AgentId(0)), Err(SimError::OutOfMemory));
    /// assert!(sim.allocate(1, Placement::Host, AgentId(0)).is_ok(), "only one call failed");
    /// assert!(matches!(
    ///     sim.allocate(1, Placement::Host, AgentId(1)),
    ///     Err(SimError::UnknownAgent { .. })
    /// ));
    /// # Ok::<(), SimError>(())
    /// ```
    pub fn allocate(
        &self,
        count: usize,
        placement: Placement,
        agent: AgentId,
    ) -> Result<Vec<Signal>, SimError> {
        self.core().memory.allocate(count, placement, agent)
    }

    /// An interrupt signal (ROCr's default kind: host memory with an event
    /// mailbox), value 0: a host thread can sleep on it
    /// ([`Sim::sleep_while`]) and is woken by its writes. Takes one of the
    /// process's [`EVENT_BUDGET`](crate::EVENT_BUDGET) events; past the
    /// budget it is a polling signal, as ROCr silently makes it
    /// ([`Sim::is_interrupt`] says which; [`Sim::interrupt_stats`] counts).
    ///
    /// ```
    /// use sigretire_sim::{AgentId, Sim, SimConfig};
    /// use std::time::Duration;
    ///
    /// let sim = Sim::new(SimConfig::default());
    /// let signal = sim.create_interrupt_signal(AgentId(0))?;
    /// assert!(sim.is_interrupt(signal));
    /// sim.store(signal, 1);
    /// let writer = { let sim = sim.clone(); std::thread::spawn(move || sim.store(signal, 0)) };
    /// assert_eq!(sim.sleep_while(signal, 1, Duration::from_secs(10)), 0);
    /// writer.join().unwrap();
    /// # Ok::<(), sigretire_sim::SimError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Sim::allocate`].
    pub fn create_interrupt_signal(&self, agent: AgentId) -> Result<Signal, SimError> {
        Ok(self.core().memory.allocate_interrupt(agent)?.0)
    }

    /// Whether `signal` has an event mailbox (an interrupt signal within
    /// the budget).
    pub fn is_interrupt(&self, signal: Signal) -> bool {
        self.core().memory.is_interrupt(signal)
    }

    /// Sleeps, spending no CPU, until the interrupt signal's value leaves
    /// `observed` or `timeout` passes, and returns the value then read
    /// (each read a counted host load: one before sleeping, one per wake).
    /// Any write wakes it: a packet's completion or failure, a host store.
    /// A polling signal is read once, without sleeping.
    pub fn sleep_while(&self, signal: Signal, observed: i64, timeout: Duration) -> i64 {
        self.core().memory.sleep_while(signal, observed, timeout)
    }

    /// What the interrupt signals did so far.
    pub fn interrupt_stats(&self) -> InterruptStats {
        self.core().memory.interrupts.stats()
    }

    /// Sets how many of the process's events are left for new interrupt
    /// signals (a test spending the budget).
    pub fn set_interrupt_budget(&self, left: u32) {
        self.core().memory.interrupts.set_budget(left);
    }

    /// Host load of the signal's value (acquire), counted; costs the
    /// profile's `host_load` or `device_load`.
    pub fn load(&self, signal: Signal) -> i64 {
        self.core().memory.load(signal)
    }

    /// Host store of the signal's value (release), counted; costs the
    /// profile's `host_store` or `device_store`.
    ///
    /// A store to a device-memory signal is write-combined: a packet
    /// published before a later [`Sim::store_fence`] (and, through a ring in
    /// system memory, a later [`Sim::hdp_flush`] of the signal's agent) may
    /// not see it ([`Violation::Unfenced`], [`Violation::Unflushed`]). A store
    /// to a signal that a pending packet completes or a pending barrier waits
    /// on is a [`Violation::StoreWhileInFlight`].
    pub fn store(&self, signal: Signal, value: i64) {
        let core = self.core();
        if let Some(in_flight) = core.memory.store(signal, value) {
            core.violations.record(Violation::StoreWhileInFlight {
                signal,
                value,
                completions: in_flight.completions,
                barriers: in_flight.barriers,
            });
        }
        if let Some(wake) = &core.wake {
            wake.notify();
        }
    }

    /// Host stores of one value to several signals (a batched re-arm): each
    /// is counted, costed and checked exactly as [`Sim::store`] would, with
    /// the bookkeeping shared by the batch.
    ///
    /// ```
    /// use sigretire_sim::{AgentId, Placement, Sim, SimConfig};
    /// let sim = Sim::new(SimConfig::default());
    /// let signals = sim.allocate(4, Placement::Device, AgentId(0)).unwrap();
    /// sim.store_many(&signals, 1);
    /// assert!(signals.iter().all(|&s| sim.load(s) == 1));
    /// assert_eq!(sim.counters().device.stores, 4);
    /// ```
    pub fn store_many(&self, signals: &[Signal], value: i64) {
        let core = self.core();
        core.memory.store_many(signals, value, |i, in_flight| {
            core.violations.record(Violation::StoreWhileInFlight {
                signal: signals[i],
                value,
                completions: in_flight.completions,
                barriers: in_flight.barriers,
            });
        });
        if let Some(wake) = &core.wake {
            wake.notify();
        }
    }

    /// A store fence (x86 `sfence`), counted: orders every earlier
    /// device-memory store before later publications.
    pub fn store_fence(&self) {
        self.core().memory.store_fence();
    }

    /// An HDP flush of `agent`, counted: makes the device-memory stores that
    /// a store fence covered before it visible to readers that need it (an
    /// AQL ring in system memory).
    ///
    /// # Panics
    /// If `agent` is not one of this simulator's agents.
    ///
    /// ```
    /// use sigretire_sim::{packets, AgentId, Placement, Sim, SimConfig, SimQueueConfig, Violation};
    ///
    /// let sim = Sim::new(SimConfig { agents: 2, ..SimConfig::default() });
    /// // A ring in system memory, like a copy engine's.
    /// let ring_in_host = SimQueueConfig { ring: Placement::Host, ..SimQueueConfig::default() };
    /// let queue = sim.create_queue(ring_in_host)?;
    /// let signal = sim.allocate(1, Placement::Device, AgentId(1))?[0];
    ///
    /// // Fenced, but flushed on the wrong agent: the packet may read the old value.
    /// sim.store(signal, 1);
    /// sim.store_fence();
    /// sim.hdp_flush(AgentId(0));
    /// queue.submit(packets::kernel(0, Some(signal)))?;
    /// assert!(matches!(
    ///     sim.take_violations()[..],
    ///     [Violation::Unflushed { agent: AgentId(1), .. }]
    /// ));
    /// queue.run_until_idle();
    ///
    /// // Flushing the signal's own agent after the fence makes it visible.
    /// sim.store(signal, 1);
    /// sim.store_fence();
    /// sim.hdp_flush(AgentId(1));
    /// queue.submit(packets::kernel(0, Some(signal)))?;
    /// assert!(sim.violations().is_empty());
    /// assert_eq!(sim.counters().hdp_flushes, 2);
    /// # Ok::<(), sigretire_sim::SimError>(())
    /// ```
    pub fn hdp_flush(&self, agent: AgentId) {
        self.core().memory.hdp_flush(agent);
    }

    /// Host read of the signal's `start_ts` and `end_ts`, an adjacent
    /// 16-byte aligned pair, with one access: counts as one load of its
    /// placement, and costs one (one PCIe read for a signal in VRAM).
    ///
    /// ```
    /// use sigretire_sim::{AgentId, Placement, Sim, SimConfig};
    ///
    /// let sim = Sim::new(SimConfig::default());
    /// let signal = sim.allocate(1, Placement::Device, AgentId(0))?[0];
    /// assert_eq!(sim.load_timestamps(signal), (0, 0));
    /// assert_eq!(sim.counters().device.loads, 1);
    /// assert_eq!(sim.load_timestamps_one_by_one(signal), (0, 0));
    /// assert_eq!(sim.counters().device.loads, 3);
    /// # Ok::<(), sigretire_sim::SimError>(())
    /// ```
    pub fn load_timestamps(&self, signal: Signal) -> (u64, u64) {
        self.core().memory.load_timestamps(signal)
    }

    /// The same pair read as two 8-byte loads, as ROCr's
    /// `hsa_amd_profiling_get_dispatch_time` reads them: counts and costs
    /// two loads (for a model of a runtime that reads them so).
    pub fn load_timestamps_one_by_one(&self, signal: Signal) -> (u64, u64) {
        let memory = &self.core().memory;
        let (start, _) = memory.load_timestamps(signal);
        let (_, end) = memory.load_timestamps(signal);
        (start, end)
    }

    /// Where the signal lives (after any fallback at allocation).
    pub fn placement(&self, signal: Signal) -> Placement {
        self.core().memory.meta(signal).placement
    }

    /// The agent the signal was allocated for.
    pub fn agent_of(&self, signal: Signal) -> AgentId {
        self.core().memory.meta(signal).agent
    }

    /// The signal of this simulator whose block is at `handle`, if any
    /// (never dereferences `handle`).
    pub fn resolve(&self, handle: hsa_signal_t) -> Option<Signal> {
        self.core().memory.resolve(handle)
    }

    /// A snapshot of the host-access counters.
    pub fn counters(&self) -> Counters {
        self.core().memory.counters().snapshot()
    }

    /// Registers a kernel and returns the `kernel_object` value that names it
    /// in a dispatch packet (never 0, which is the empty kernel).
    ///
    /// ```
    /// use sigretire_sim::{packets, Kernel, Mode, Sim, SimConfig, SimQueueConfig, Violation};
    /// use std::time::{Duration, Instant};
    ///
    /// let sim = Sim::new(SimConfig { mode: Mode::Threaded, ..SimConfig::default() });
    /// let queue = sim.create_queue(SimQueueConfig::default())?;
    /// let five_ms = sim.register_kernel(Kernel::Duration(Duration::from_millis(5)));
    /// assert_ne!(five_ms, 0);
    ///
    /// let start = Instant::now();
    /// let index = queue.submit(packets::kernel(five_ms, None))?;
    /// queue.run_until_idle();
    /// assert!(queue.truth(index).unwrap().completed);
    /// assert!(start.elapsed() >= Duration::from_millis(5));
    ///
    /// // A kernel object nobody registered makes a malformed packet.
    /// queue.submit(packets::kernel(five_ms + 1, None))?;
    /// assert!(matches!(sim.violations()[..], [Violation::MalformedPacket { .. }]));
    /// # Ok::<(), sigretire_sim::SimError>(())
    /// ```
    pub fn register_kernel(&self, kernel: Kernel) -> u64 {
        let core = self.core();
        core.kernels.register(kernel, core.wake.as_ref())
    }

    /// Every violation observed so far, in order.
    pub fn violations(&self) -> Vec<Violation> {
        self.core().violations.snapshot()
    }

    /// Every violation observed so far, clearing the log.
    pub fn take_violations(&self) -> Vec<Violation> {
        self.core().violations.take()
    }

    /// The GPU clock in ticks: real time since the simulator started in
    /// threaded mode (ticks of the profile's `gpu_tick`), the virtual clock in
    /// stepped mode.
    pub fn now_ticks(&self) -> u64 {
        self.core().clock.now_ticks()
    }

    /// Failure injection: while `false`, `Device` allocations fall back to
    /// host memory.
    pub fn set_device_memory_available(&self, available: bool) {
        self.core().memory.set_device_memory_available(available);
    }

    /// Failure injection: the next `calls` calls of [`Sim::allocate`] (with a
    /// nonzero count) fail with [`SimError::OutOfMemory`].
    pub fn fail_allocations(&self, calls: u64) {
        self.core().memory.fail_allocations(calls);
    }

    /// How many calls of [`Sim::allocate`] an injected failure refused so
    /// far ([`Sim::fail_allocations`]): a caller that saw an allocation
    /// fail can tell an injected failure from a real one.
    ///
    /// ```
    /// use sigretire_sim::{AgentId, Placement, Sim, SimConfig};
    /// let sim = Sim::new(SimConfig::default());
    /// sim.fail_allocations(1);
    /// assert!(sim.allocate(1, Placement::Host, AgentId(0)).is_err());
    /// assert!(sim.allocate(1, Placement::Host, AgentId(0)).is_ok());
    /// assert_eq!(sim.allocations_refused(), 1);
    /// ```
    pub fn allocations_refused(&self) -> u64 {
        self.core().memory.allocations_refused()
    }

    /// Interleaving injection: runs `hook` at the start of the next call of
    /// [`Sim::allocate`] (with a nonzero count), before that call does
    /// anything, as another thread might act while a tracker allocates.
    /// Replaces a hook not yet run.
    ///
    /// ```
    /// use sigretire_sim::{AgentId, Placement, Sim, SimConfig};
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// let sim = Sim::new(SimConfig::default());
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let flag = ran.clone();
    /// sim.on_next_allocation(move || flag.store(true, Ordering::Relaxed));
    /// sim.allocate(1, Placement::Host, AgentId(0))?;
    /// assert!(ran.load(Ordering::Relaxed));
    /// # Ok::<(), sigretire_sim::SimError>(())
    /// ```
    pub fn on_next_allocation(&self, hook: impl FnOnce() + Send + 'static) {
        self.core().memory.on_next_allocation(Box::new(hook));
    }

    /// Stepped mode: runs every queue until none can progress, so cross-queue
    /// waits resolve. Threaded mode: waits until no queue can progress
    /// without a host action.
    pub fn run_until_idle(&self) {
        let core = self.core();
        loop {
            let progressed = match core.mode {
                Mode::Stepped => core.queues.read().iter().fold(false, |any, q| {
                    processor::run_until_idle(core, q, &mut q.state.lock()) | any
                }),
                Mode::Threaded => {
                    let busy = core
                        .queues
                        .read()
                        .iter()
                        .any(|q| processor::can_progress(core, q, &q.state.lock()));
                    if busy {
                        std::thread::yield_now();
                    }
                    busy
                }
            };
            if !progressed {
                return;
            }
        }
    }
}

impl fmt::Debug for Sim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let core = self.core();
        f.debug_struct("Sim")
            .field("id", &core.id)
            .field("mode", &core.mode)
            .field("agents", &core.memory.agents())
            .field("queues", &core.queues.read().len())
            .finish()
    }
}

// Handles cross threads freely.
const _: fn() = || {
    fn check<T: Send + Sync>() {}
    check::<Sim>();
    check::<Signal>();
};
