//! The queue layer on ROCr, with no generic parameter to write: a
//! [`Device`], its [`HostQueue`]s (HIP's streams), their [`Event`]s and
//! [`Command`]s, each an alias of the queue layer's generic type over
//! [`HsaTracker`] (the retiring tracker on an AQL queue), and the calls
//! that make them on an [`Agent`].
//!
//! The aliases cost nothing: they are the queue layer's own types,
//! monomorphised for ROCr, with no indirection on launch, record or
//! synchronize. A device, a queue and an event are cheap to clone
//! (reference-counted handles); a command is one handle. The names are the queue layer's words, meant
//! to be used through the module (`queue::Device`, as `std::io::Result`
//! is); the GPU agent itself is an [`Agent`].
//!
//! [`open`] makes a device whose default queue is a new AQL queue of the
//! agent; [`create_queue`] adds more. A runtime with queues of its own
//! (`hsa_queue_create`) adopts each ([`AqlQueue::adopt`]) and puts a
//! [`tracker`] on it, for [`Device::new`] or `Device::create_queue`.
//! Signals live in device memory (VRAM, or system memory where the host
//! cannot reach VRAM: [`SignalPool`]).
//!
//! Needs the `queue` feature.
//!
//! ```
//! # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
//! use sigretire_hsa::Runtime;
//! use sigretire_hsa::queue::{self, DeviceConfig, QueueConfig};
//!
//! let runtime = Runtime::load_from(standin.library_path())?; // Runtime::load() on ROCm
//! let agent = runtime.device(0)?;
//! let (device, host_queue) = queue::open(&agent, DeviceConfig::default(), QueueConfig::default())?;
//! let start: queue::Event = host_queue.record_event()?;
//! let command: queue::Command = host_queue.launch_empty()?;
//! let stop = host_queue.record_event()?;
//! stop.synchronize()?;
//! assert_eq!(command.status(), queue::CommandStatus::Complete);
//! assert!(start.elapsed_to(&stop).is_ok());
//! device.synchronize()?;
//! # drop((device, host_queue, start, stop, command));
//! # standin.assert_no_violations();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::agent::Agent;
use crate::aql_queue::{AqlQueue, QueueOptions};
use crate::error::Error as HsaError;
use crate::memory::SignalPool;
use sigretire_tracker::{Config, CreateError, Placement, RetiringTracker, Tracker};
use std::sync::Arc;

pub use sigretire_queue::prelude::*;
/// A kernel dispatch of the runtime's own ([`Work::Dispatch`]): its kernel
/// object, kernel arguments, grid and workgroup.
pub use sigretire_tracker::backend::Dispatch;

/// The retiring tracker on an AQL queue, with signals from a
/// [`SignalPool`]: what every queue of this module runs on.
pub type HsaTracker = RetiringTracker<SignalPool, AqlQueue>;

/// A GPU device of the queue layer on ROCr: its error state, its
/// completion thread, its default queue ([`sigretire_queue::Device`]);
/// clones are handles of the same device.
pub type Device = sigretire_queue::Device<HsaTracker>;

/// A queue of the queue layer (a HIP stream) on an AQL queue
/// ([`sigretire_queue::HostQueue`]); clones share it.
pub type HostQueue = sigretire_queue::HostQueue<HsaTracker>;

/// An event recorded on a [`HostQueue`] ([`sigretire_queue::Event`]);
/// clones share its recording.
pub type Event = sigretire_queue::Event<HsaTracker>;

/// A submitted command's handle ([`sigretire_queue::Command`]).
pub type Command = sigretire_queue::Command<SignalPool>;

/// Why [`open`], [`create_queue`] or [`tracker`] made no device, queue or
/// tracker.
///
/// ```
/// use sigretire_hsa::queue::{InvalidConfig, OpenError};
///
/// let config = OpenError::from(InvalidConfig("batch limits must be at least 1"));
/// assert!(config.to_string().contains("batch limits"));
/// let rocr = OpenError::from(sigretire_hsa::Error::NoGpu);
/// assert!(matches!(rocr, OpenError::Hsa(sigretire_hsa::Error::NoGpu)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// ROCr refused the queue (a size out of the agent's limits, a failed
    /// `hsa_queue_create` or profiling call).
    #[error(transparent)]
    Hsa(#[from] HsaError),
    /// The tracker could not start (no signals to arm).
    #[error(transparent)]
    Tracker(#[from] CreateError),
    /// A queue configuration value is out of range.
    #[error(transparent)]
    Config(#[from] InvalidConfig),
}

/// The retiring tracker on `queue` (owned or adopted), with a signal pool
/// of its own on the queue's agent and signals in device memory: what
/// [`open`] and [`create_queue`] build on, for a queue made another way
/// (adopted: [`AqlQueue::adopt`]).
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
/// use sigretire_hsa::queue::{self, DeviceConfig, QueueConfig};
/// use sigretire_hsa::{AqlQueue, QueueOptions, Runtime};
///
/// let agent = Runtime::load_from(standin.library_path())?.device(0)?;
/// // A queue made another way (a runtime would adopt its own).
/// let aql = AqlQueue::new(&agent, QueueOptions::default())?;
/// let tracker: queue::HsaTracker = queue::tracker(aql)?;
/// let device = queue::Device::new(DeviceConfig::default(), tracker, QueueConfig::default())?;
/// assert_eq!(device.default_queue().stats().commands, 0);
/// # drop(device);
/// # standin.assert_no_violations();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn tracker(queue: AqlQueue) -> Result<HsaTracker, OpenError> {
    let signals = Arc::new(SignalPool::new(queue.device()));
    let config = Config {
        signals: Placement::Device,
        ..Config::default()
    };
    Ok(RetiringTracker::new(signals, queue, config)?)
}

/// A queue-layer device on `agent`, whose default queue is a new AQL queue
/// ([`QueueOptions::default`]), and a handle of that queue, in one call.
///
/// # Errors
/// ROCr refusing the queue ([`OpenError::Hsa`]), a tracker that could not
/// start, a configuration out of range ([`OpenError::Config`]).
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
/// use sigretire_hsa::queue::{self, BatchLimits, DeviceConfig, OpenError, QueueConfig};
///
/// let agent = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
/// let (device, host_queue) = queue::open(&agent, DeviceConfig::default(), QueueConfig::default())?;
/// assert_eq!(host_queue.id(), device.default_queue().id());
/// let bad = QueueConfig { batch_limits: BatchLimits { host_signals: 0, device_signals: 0 }, ..QueueConfig::default() };
/// assert!(matches!(queue::open(&agent, DeviceConfig::default(), bad), Err(OpenError::Config(_))));
/// # drop((device, host_queue));
/// # standin.assert_no_violations();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open(
    agent: &Agent,
    device: DeviceConfig,
    queue: QueueConfig,
) -> Result<(Device, HostQueue), OpenError> {
    queue.validate()?;
    let tracker = tracker(AqlQueue::new(agent, QueueOptions::default())?)?;
    let device = Device::new(device, tracker, queue)?;
    let default_queue = device.default_queue().clone();
    Ok((device, default_queue))
}

/// A new queue of `device` on a new AQL queue of its default queue's agent.
///
/// # Errors
/// As [`open`]'s.
///
/// ```
/// # let standin = sigretire_rocr_standin::Standin::new(sigretire_rocr_standin::Config::default())?;
/// use sigretire_hsa::queue::{self, DeviceConfig, QueueConfig};
///
/// let agent = sigretire_hsa::Runtime::load_from(standin.library_path())?.device(0)?;
/// let (device, producer) = queue::open(&agent, DeviceConfig::default(), QueueConfig::default())?;
/// let consumer: queue::HostQueue = queue::create_queue(&device, QueueConfig::default())?;
/// assert_eq!(device.queues().len(), 2);
/// producer.launch_empty()?;
/// consumer.wait_event(&producer.record_event()?)?; // on the GPU
/// consumer.synchronize()?;
/// # drop((device, producer, consumer));
/// # standin.assert_no_violations();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn create_queue(device: &Device, config: QueueConfig) -> Result<HostQueue, OpenError> {
    config.validate()?;
    let agent = device
        .default_queue()
        .with_tracker(|tracker| tracker.queue().device().clone());
    let tracker = tracker(AqlQueue::new(&agent, QueueOptions::default())?)?;
    Ok(device.create_queue(tracker, config)?)
}
