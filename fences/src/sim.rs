//! Devices and queues on the simulator (`sim` crate), for tests, examples
//! and doctests.
//!
//! Every queue of a [`SimPlatform`] is a hardware queue of one simulator, so
//! cross-queue waits resolve on its packet processor. In stepped mode the
//! caller drives the "GPU" ([`crate::sim::Sim::run_until_idle`]);
//! [`SimPlatform::run_while`] does it on the calling thread while a blocking
//! call (synchronize, a wait) runs on another.
//!
//! The queue layer's types on the simulator have names of their own, so no
//! generic parameter need be written: [`sim::Device`](Device),
//! [`sim::HostQueue`](HostQueue), [`sim::Event`](Event) and
//! [`sim::Command`](Command), aliases over [`SimTracker`].
//!
//! ```
//! use sigretire_queue::sim::{self, SimPlatform};
//! use sigretire_queue::{DeviceConfig, QueueConfig};
//!
//! let platform = SimPlatform::stepped();
//! let device: sim::Device = platform.device(DeviceConfig::default(), QueueConfig::default())?;
//! let queue: &sim::HostQueue = device.default_queue();
//! queue.launch_empty()?;
//! platform.run_while(|| queue.synchronize())?;
//! assert!(platform.sim().violations().is_empty());
//! # Ok::<(), sigretire_queue::Error>(())
//! ```

use crate::config::{DeviceConfig, QueueConfig};
use crate::error::Error;
/// The simulator crate, whole: queues, packets, ground truth.
pub use sigretire_sim as engine;
use sigretire_sim::Mode;
use sigretire_sim::backend::SimMemory;
pub use sigretire_sim::{
    AgentId, Compute, CostProfile, HostFlag, Kernel, KernelDispatch, Sim, SimConfig,
};
use sigretire_tracker::RetiringTracker;
// The tracker's `Arc` (std's): the simulator is not loom-aware.
use std::sync::Arc;

/// The retiring tracker on a simulated queue: what
/// [`SimPlatform::tracker`] makes and [`SimPlatform::device`]'s queues use.
///
/// ```
/// use sigretire_queue::sim::{SimPlatform, SimTracker};
/// use sigretire_queue::{Device, HostQueue};
/// let platform = SimPlatform::stepped();
/// let device: Device<SimTracker> = platform.device(Default::default(), Default::default())?;
/// let queue: HostQueue<SimTracker> = platform.create_queue(&device, Default::default())?;
/// assert_eq!(queue.with_tracker(|t| sigretire_queue::tracker::Tracker::stats(t).uses), 0);
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
pub type SimTracker = RetiringTracker<SimMemory, sigretire_sim::Queue>;

/// A device on the simulator ([`crate::Device`] over [`SimTracker`]): what
/// [`SimPlatform::device`] makes; clones are handles of the same device.
/// Use it through the module (`sim::Device`), as `std::io::Result` is
/// used.
///
/// ```
/// use sigretire_queue::sim::{self, SimPlatform, SimTracker};
///
/// let platform = SimPlatform::stepped();
/// let device: sim::Device = platform.device(Default::default(), Default::default())?;
/// let queue: sim::HostQueue = platform.create_queue(&device, Default::default())?;
/// let command: sim::Command = queue.launch_empty()?;
/// let event: sim::Event = queue.record_event()?;
/// let shared = event.clone(); // events and queues are cheap handles
/// platform.run_while(|| shared.synchronize())?;
/// assert_eq!(command.status(), sigretire_queue::CommandStatus::Complete);
/// assert_eq!(event.query(), sigretire_queue::tracker::Status::Complete);
/// // The aliases are the generic types: code written for either takes both.
/// fn first_queue(device: &sigretire_queue::Device<SimTracker>) -> u64 {
///     device.default_queue().id()
/// }
/// assert_eq!(first_queue(&device), device.default_queue().id());
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
pub type Device = crate::device::Device<SimTracker>;

/// A queue (a HIP stream) on a simulated hardware queue
/// ([`crate::HostQueue`] over [`SimTracker`]); clones share it.
pub type HostQueue = crate::queue::HostQueue<SimTracker>;

/// An event recorded on a simulated queue ([`crate::Event`] over
/// [`SimTracker`]); clones share its recording.
pub type Event = crate::event::Event<SimTracker>;

/// A submitted command's handle on the simulator ([`crate::Command`] over
/// the simulator's signal memory).
pub type Command = crate::command::Command<SimMemory>;

/// A simulator and how to make trackers for new queues on it.
///
/// ```
/// use sigretire_queue::sim::SimPlatform;
/// let platform = SimPlatform::stepped();
/// assert_eq!(platform.sim().mode(), sigretire_queue::sim::engine::Mode::Stepped);
/// ```
#[derive(Clone, Debug)]
pub struct SimPlatform {
    sim: Sim,
    tracker_config: sigretire_tracker::Config,
    sim_queue_config: sigretire_sim::SimQueueConfig,
    wake_relay: bool,
}

/// Hardware queues of a platform hold this many packets by default (4096:
/// room for a full 1000-command batch several times over, so tests and
/// examples never hit a full ring unless they ask for a small one with
/// [`SimPlatform::with_sim_queue_config`]).
///
/// ```
/// use sigretire_queue::sim::{QUEUE_SIZE, SimPlatform};
/// assert_eq!(SimPlatform::stepped().sim_queue_config().size, QUEUE_SIZE);
/// assert!(QUEUE_SIZE.is_power_of_two()); // AQL rings are powers of two
/// ```
pub const QUEUE_SIZE: u32 = 1 << 12;

impl SimPlatform {
    /// A stepped simulator: the caller chooses when the GPU runs.
    ///
    /// ```
    /// let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// assert_eq!(platform.sim().mode(), sigretire_queue::sim::engine::Mode::Stepped);
    /// ```
    pub fn stepped() -> Self {
        Self::new(Sim::new(SimConfig::default()))
    }

    /// A threaded simulator: a processor thread runs the GPU in real time
    /// with `profile`'s latencies.
    ///
    /// ```
    /// let platform = sigretire_queue::sim::SimPlatform::threaded(sigretire_queue::sim::CostProfile::zero());
    /// assert_eq!(platform.sim().mode(), sigretire_queue::sim::engine::Mode::Threaded);
    /// ```
    pub fn threaded(profile: CostProfile) -> Self {
        Self::new(Sim::new(SimConfig {
            mode: Mode::Threaded,
            profile,
            ..SimConfig::default()
        }))
    }

    /// A platform on an existing simulator: profiled hardware queues of
    /// [`QUEUE_SIZE`] packets, ring in device memory; default tracker config.
    ///
    /// ```
    /// let sim = sigretire_queue::sim::Sim::new(sigretire_queue::sim::SimConfig::default());
    /// let platform = sigretire_queue::sim::SimPlatform::new(sim.clone());
    /// assert_eq!(platform.sim().id(), sim.id());
    /// ```
    pub fn new(sim: Sim) -> Self {
        Self {
            sim,
            tracker_config: sigretire_tracker::Config::default(),
            sim_queue_config: sigretire_sim::SimQueueConfig {
                size: QUEUE_SIZE,
                profiling: true,
                ..sigretire_sim::SimQueueConfig::default()
            },
            wake_relay: false,
        }
    }

    /// Hardware queues made from now on have a wake relay
    /// ([`Queue::add_wake_relay`](sigretire_sim::Queue::add_wake_relay)):
    /// the queue layer's wake packets run on it rather than in the queue's
    /// ring, as a CUDA queue's run on its relay stream, so no sleeping wait
    /// and no callback puts a packet in the queue's way.
    ///
    /// ```
    /// use sigretire_queue::sim::SimPlatform;
    /// use sigretire_queue::tracker::Tracker;
    /// let platform = SimPlatform::stepped().with_wake_relay();
    /// let tracker = platform.tracker()?;
    /// assert!(tracker.queue().wake_relay().is_some());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn with_wake_relay(mut self) -> Self {
        self.wake_relay = true;
        self
    }

    /// Trackers made from now on use `config` (e.g. device-memory signals,
    /// a tiny ring to provoke back-pressure).
    ///
    /// ```
    /// use sigretire_queue::tracker::{Config, Placement};
    /// let platform = sigretire_queue::sim::SimPlatform::stepped()
    ///     .with_tracker_config(Config { signals: Placement::Device, ..Config::default() });
    /// assert_eq!(platform.tracker_config().signals, Placement::Device);
    /// ```
    pub fn with_tracker_config(mut self, config: sigretire_tracker::Config) -> Self {
        self.tracker_config = config;
        self
    }

    /// Hardware queues made from now on use `config` (the simulated
    /// hardware queue's, not a host queue's [`QueueConfig`]).
    ///
    /// ```
    /// let platform = sigretire_queue::sim::SimPlatform::stepped()
    ///     .with_sim_queue_config(sigretire_queue::sim::engine::SimQueueConfig { size: 4, ..sigretire_queue::sim::engine::SimQueueConfig::default() });
    /// assert_eq!(platform.sim_queue_config().size, 4);
    /// ```
    pub fn with_sim_queue_config(mut self, config: sigretire_sim::SimQueueConfig) -> Self {
        self.sim_queue_config = config;
        self
    }

    /// The same simulator, with the hardware queues made from now on (and
    /// so the devices, queues and trackers made from the returned platform)
    /// on GPU `agent`: for cross-device waits between agents of one
    /// simulator, whose signal memory every agent reads. A device-memory
    /// signal belongs to the agent of the queue whose tracker allocated it.
    /// An agent the simulator does not have is refused when a queue is made
    /// ([`Error::Queue`]).
    ///
    /// ```
    /// use sigretire_queue::sim::{AgentId, HostFlag, Kernel, Sim, SimConfig, SimPlatform};
    /// use sigretire_queue::tracker::{Config, Placement};
    /// use sigretire_queue::CommandStatus;
    ///
    /// let gpu0 = SimPlatform::new(Sim::new(SimConfig { agents: 2, ..SimConfig::default() }))
    ///     .with_tracker_config(Config { signals: Placement::Device, ..Config::default() });
    /// let gpu1 = gpu0.on_agent(AgentId(1));
    /// assert_eq!(gpu1.sim().id(), gpu0.sim().id());
    /// let (device0, device1) = (gpu0.device(Default::default(), Default::default())?,
    ///                           gpu1.device(Default::default(), Default::default())?);
    /// let flag = HostFlag::new();
    /// device0.default_queue().launch(gpu0.sim().register_kernel(Kernel::SpinUntil(flag.clone())))?;
    /// let produced = device0.default_queue().record_event()?;
    /// // Agent 1's queue waits, on the GPU, for agent 0's device-memory signal.
    /// device1.default_queue().wait_event(&produced)?;
    /// let after = device1.default_queue().launch_empty()?;
    /// gpu0.sim().run_until_idle();
    /// assert_eq!(after.status(), CommandStatus::Pending);
    /// flag.set();
    /// gpu0.sim().run_until_idle();
    /// assert_eq!(after.status(), CommandStatus::Complete);
    /// assert!(gpu0.sim().violations().is_empty());
    /// // A third agent this simulator lacks: no queue.
    /// assert!(gpu0.on_agent(AgentId(2)).tracker().is_err());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn on_agent(&self, agent: AgentId) -> Self {
        let mut platform = self.clone();
        platform.sim_queue_config.agent = agent;
        platform
    }

    /// The simulator.
    ///
    /// ```
    /// let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// assert!(platform.sim().violations().is_empty());
    /// ```
    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// The tracker configuration new queues get.
    ///
    /// ```
    /// assert_eq!(sigretire_queue::sim::SimPlatform::stepped().tracker_config().initial_size, 64);
    /// ```
    pub fn tracker_config(&self) -> sigretire_tracker::Config {
        self.tracker_config
    }

    /// The hardware-queue configuration new queues get.
    ///
    /// ```
    /// assert!(sigretire_queue::sim::SimPlatform::stepped().sim_queue_config().profiling);
    /// ```
    pub fn sim_queue_config(&self) -> sigretire_sim::SimQueueConfig {
        self.sim_queue_config
    }

    fn hardware_queue(&self) -> Result<(sigretire_sim::Queue, Arc<SimMemory>), Error> {
        let queue = self.sim.create_queue(self.sim_queue_config).map_err(|e| {
            Error::Queue(sigretire_tracker::backend::QueueError::Failed(
                e.to_string(),
            ))
        })?;
        if self.wake_relay {
            queue.add_wake_relay().map_err(|e| {
                Error::Queue(sigretire_tracker::backend::QueueError::Failed(
                    e.to_string(),
                ))
            })?;
        }
        let memory = Arc::new(SimMemory::new(self.sim.clone(), queue.agent()));
        Ok((queue, memory))
    }

    /// A retiring tracker on a new hardware queue.
    ///
    /// ```
    /// use sigretire_queue::tracker::Tracker;
    /// let tracker = sigretire_queue::sim::SimPlatform::stepped().tracker()?;
    /// assert_eq!(tracker.census().armed, 64);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn tracker(&self) -> Result<SimTracker, Error> {
        let (queue, memory) = self.hardware_queue()?;
        Ok(RetiringTracker::new(memory, queue, self.tracker_config)?)
    }

    /// A device whose default queue is a new hardware queue.
    ///
    /// ```
    /// let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// assert!(device.error().is_none());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn device(
        &self,
        config: DeviceConfig,
        default_queue: QueueConfig,
    ) -> Result<Device, Error> {
        Ok(Device::new(config, self.tracker()?, default_queue)?)
    }

    /// A created queue of `device` on a new hardware queue.
    ///
    /// ```
    /// let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let queue = platform.create_queue(&device, Default::default())?;
    /// assert_ne!(queue.id(), device.default_queue().id());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn create_queue(&self, device: &Device, config: QueueConfig) -> Result<HostQueue, Error> {
        Ok(device.create_queue(self.tracker()?, config)?)
    }

    /// Runs `f` on another thread while this thread drives a stepped
    /// simulator (threaded: just runs `f`). For blocking calls in stepped
    /// tests and examples.
    ///
    /// ```
    /// let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let command = device.default_queue().launch_empty()?;
    /// platform.run_while(|| command.wait())?;
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn run_while<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        if self.sim.mode() == Mode::Threaded {
            return f();
        }
        std::thread::scope(|scope| {
            let worker = scope.spawn(f);
            while !worker.is_finished() {
                self.sim.run_until_idle();
                std::thread::yield_now();
            }
            match worker.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }
}
