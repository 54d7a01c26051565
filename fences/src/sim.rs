//! Devices and queues on the simulator (`sim` crate), for tests, examples
//! and doctests.
//!
//! Every queue of a [`SimPlatform`] is a hardware queue of one simulator, so
//! cross-queue waits resolve on its packet processor. In stepped mode the
//! caller drives the "GPU" ([`sim::Sim::run_until_idle`]);
//! [`SimPlatform::run_while`] does it on the calling thread while a blocking
//! call (synchronize, a wait) runs on another.
//!
//! ```
//! use fences::sim::SimPlatform;
//! use fences::{DeviceConfig, QueueConfig};
//!
//! let platform = SimPlatform::stepped();
//! let device = platform.device(DeviceConfig::default(), QueueConfig::default())?;
//! let queue = device.default_queue();
//! queue.launch(0)?;
//! platform.run_while(|| queue.synchronize())?;
//! assert!(platform.sim().violations().is_empty());
//! # Ok::<(), fences::Error>(())
//! ```

use crate::config::{DeviceConfig, QueueConfig};
use crate::device::Device;
use crate::error::Error;
use crate::queue::HostQueue;
use sim::{CostProfile, Mode, Sim, SimConfig};
use std::sync::Arc;
use tracker::sim_backend::SimMemory;
use tracker::{BaselineTracker, RetiringTracker};

/// The retiring tracker on a simulated queue: what
/// [`SimPlatform::tracker`] makes and [`SimPlatform::device`]'s queues use.
///
/// ```
/// use fences::sim::{SimPlatform, SimTracker};
/// use fences::{Device, HostQueue};
/// let platform = SimPlatform::stepped();
/// let device: Device<SimTracker> = platform.device(Default::default(), Default::default())?;
/// let queue: HostQueue<SimTracker> = platform.create_queue(&device, Default::default())?;
/// assert_eq!(queue.with_tracker(|t| tracker::Tracker::stats(t).uses), 0);
/// # Ok::<(), fences::Error>(())
/// ```
pub type SimTracker = RetiringTracker<SimMemory, sim::Queue>;

/// The baseline tracker (CLR's original design) on a simulated queue: what
/// [`SimPlatform::baseline_tracker`] makes. The queue layer runs on it
/// unchanged.
///
/// ```
/// use fences::sim::{SimBaselineTracker, SimPlatform};
/// use fences::{Device, DeviceConfig, QueueConfig};
/// let platform = SimPlatform::stepped();
/// let device: Device<SimBaselineTracker> =
///     Device::new(DeviceConfig::default(), platform.baseline_tracker()?, QueueConfig::default())?;
/// let command = device.default_queue().launch(0)?;
/// platform.run_while(|| device.default_queue().synchronize())?;
/// assert!(command.is_released());
/// # Ok::<(), fences::Error>(())
/// ```
pub type SimBaselineTracker = BaselineTracker<SimMemory, sim::Queue>;

/// A simulator and how to make trackers for new queues on it.
///
/// ```
/// use fences::sim::SimPlatform;
/// let platform = SimPlatform::stepped();
/// assert_eq!(platform.sim().mode(), sim::Mode::Stepped);
/// ```
#[derive(Clone, Debug)]
pub struct SimPlatform {
    sim: Sim,
    tracker_config: tracker::Config,
    queue_config: sim::QueueConfig,
}

/// Hardware queues of a platform hold this many packets by default (4096:
/// room for a full 1000-command batch several times over, so tests and
/// examples never hit a full ring unless they ask for a small one with
/// [`SimPlatform::with_queue_config`]).
///
/// ```
/// use fences::sim::{QUEUE_SIZE, SimPlatform};
/// assert_eq!(SimPlatform::stepped().queue_config().size, QUEUE_SIZE);
/// assert!(QUEUE_SIZE.is_power_of_two()); // AQL rings are powers of two
/// ```
pub const QUEUE_SIZE: u32 = 1 << 12;

impl SimPlatform {
    /// A stepped simulator: the caller chooses when the GPU runs.
    ///
    /// ```
    /// let platform = fences::sim::SimPlatform::stepped();
    /// assert_eq!(platform.sim().mode(), sim::Mode::Stepped);
    /// ```
    pub fn stepped() -> Self {
        Self::new(Sim::new(SimConfig::default()))
    }

    /// A threaded simulator: a processor thread runs the GPU in real time
    /// with `profile`'s latencies.
    ///
    /// ```
    /// let platform = fences::sim::SimPlatform::threaded(sim::CostProfile::zero());
    /// assert_eq!(platform.sim().mode(), sim::Mode::Threaded);
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
    /// let sim = sim::Sim::new(sim::SimConfig::default());
    /// let platform = fences::sim::SimPlatform::new(sim.clone());
    /// assert_eq!(platform.sim().id(), sim.id());
    /// ```
    pub fn new(sim: Sim) -> Self {
        Self {
            sim,
            tracker_config: tracker::Config::default(),
            queue_config: sim::QueueConfig {
                size: QUEUE_SIZE,
                profiling: true,
                ..sim::QueueConfig::default()
            },
        }
    }

    /// Trackers made from now on use `config` (e.g. device-memory signals,
    /// a tiny ring to provoke back-pressure).
    ///
    /// ```
    /// use tracker::{Config, Placement};
    /// let platform = fences::sim::SimPlatform::stepped()
    ///     .with_tracker_config(Config { signals: Placement::Device, ..Config::default() });
    /// assert_eq!(platform.tracker_config().signals, Placement::Device);
    /// ```
    pub fn with_tracker_config(mut self, config: tracker::Config) -> Self {
        self.tracker_config = config;
        self
    }

    /// Hardware queues made from now on use `config`.
    ///
    /// ```
    /// let platform = fences::sim::SimPlatform::stepped()
    ///     .with_queue_config(sim::QueueConfig { size: 4, ..sim::QueueConfig::default() });
    /// assert_eq!(platform.queue_config().size, 4);
    /// ```
    pub fn with_queue_config(mut self, config: sim::QueueConfig) -> Self {
        self.queue_config = config;
        self
    }

    /// The simulator.
    ///
    /// ```
    /// let platform = fences::sim::SimPlatform::stepped();
    /// assert!(platform.sim().violations().is_empty());
    /// ```
    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// The tracker configuration new queues get.
    ///
    /// ```
    /// assert_eq!(fences::sim::SimPlatform::stepped().tracker_config().initial_size, 64);
    /// ```
    pub fn tracker_config(&self) -> tracker::Config {
        self.tracker_config
    }

    /// The hardware-queue configuration new queues get.
    ///
    /// ```
    /// assert!(fences::sim::SimPlatform::stepped().queue_config().profiling);
    /// ```
    pub fn queue_config(&self) -> sim::QueueConfig {
        self.queue_config
    }

    fn hardware_queue(&self) -> Result<(sim::Queue, Arc<SimMemory>), Error> {
        let queue = self
            .sim
            .create_queue(self.queue_config)
            .map_err(|e| Error::Queue(tracker::QueueError::Failed(e.to_string())))?;
        let memory = Arc::new(SimMemory::new(self.sim.clone(), queue.agent()));
        Ok((queue, memory))
    }

    /// A retiring tracker on a new hardware queue.
    ///
    /// ```
    /// use tracker::Tracker;
    /// let tracker = fences::sim::SimPlatform::stepped().tracker()?;
    /// assert_eq!(tracker.census().armed, 64);
    /// # Ok::<(), fences::Error>(())
    /// ```
    pub fn tracker(&self) -> Result<SimTracker, Error> {
        let (queue, memory) = self.hardware_queue()?;
        Ok(RetiringTracker::new(memory, queue, self.tracker_config)?)
    }

    /// A baseline tracker (CLR's original design) on a new hardware queue.
    ///
    /// ```
    /// use tracker::Tracker;
    /// let tracker = fences::sim::SimPlatform::stepped().baseline_tracker()?;
    /// assert_eq!(tracker.census().in_flight, 0);
    /// # Ok::<(), fences::Error>(())
    /// ```
    pub fn baseline_tracker(&self) -> Result<SimBaselineTracker, Error> {
        let (queue, memory) = self.hardware_queue()?;
        Ok(BaselineTracker::new(memory, queue, self.tracker_config)?)
    }

    /// A device whose default queue is a new hardware queue.
    ///
    /// ```
    /// let platform = fences::sim::SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// assert!(device.error().is_none());
    /// # Ok::<(), fences::Error>(())
    /// ```
    pub fn device(
        &self,
        config: DeviceConfig,
        default_queue: QueueConfig,
    ) -> Result<Device<SimTracker>, Error> {
        Device::new(config, self.tracker()?, default_queue)
    }

    /// A created queue of `device` on a new hardware queue.
    ///
    /// ```
    /// let platform = fences::sim::SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let queue = platform.create_queue(&device, Default::default())?;
    /// assert_ne!(queue.id(), device.default_queue().id());
    /// # Ok::<(), fences::Error>(())
    /// ```
    pub fn create_queue(
        &self,
        device: &Device<SimTracker>,
        config: QueueConfig,
    ) -> Result<HostQueue<SimTracker>, Error> {
        device.create_queue(self.tracker()?, config)
    }

    /// Runs `f` on another thread while this thread drives a stepped
    /// simulator (threaded: just runs `f`). For blocking calls in stepped
    /// tests and examples.
    ///
    /// ```
    /// let platform = fences::sim::SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let command = device.default_queue().launch(0)?;
    /// platform.run_while(|| command.wait())?;
    /// # Ok::<(), fences::Error>(())
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
