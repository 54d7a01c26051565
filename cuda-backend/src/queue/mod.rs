//! The queue layer on CUDA, with no generic parameter to write: a
//! [`Device`], its [`HostQueue`]s (HIP's streams), their [`Event`]s and
//! [`Command`]s, each an alias of the queue layer's generic type over
//! [`CudaTracker`] (the retiring tracker on a CUDA stream), and the calls
//! that make them from what a CUDA program already has: a cudarc stream
//! ([`adopt`]), or a device ordinal ([`open`]).
//!
//! The aliases cost nothing: they are the queue layer's own types, so
//! launch, record and synchronize are the generic code, monomorphised for
//! CUDA, with no indirection. A device, a queue and an event are cheap to
//! clone (reference-counted handles of the same device, queue or
//! recording); a command is one handle, not cloned. The names are the
//! queue layer's words and
//! are meant to be used through the module (`queue::Device`, as
//! `std::io::Result` is), beside cudarc's `CudaStream` and `CudaEvent`,
//! which they never clash with.
//!
//! **From cudarc.** A runtime on cudarc keeps its context and its streams;
//! [`adopt`] hands one stream over: this library's context is built from
//! the stream's (the same primary context, checked:
//! [`CudaContext::from_cudarc`]), the stream becomes the device's default
//! queue (adopted, never destroyed: the queue holds the stream's `Arc`),
//! and the runtime may keep launching its own kernels and copies on it
//! through cudarc. Each of the queue layer's commands then lands after
//! whatever the runtime enqueued before it, so an event recorded after a
//! cudarc launch completes when that launch has. More streams join the
//! device with [`adopt_queue`].
//!
//! **Without cudarc.** [`open`] makes the device on GPU `ordinal`'s primary
//! context with a stream of its own; [`create_queue`] adds more.
//!
//! Both need the `queue` feature. Errors are [`OpenError`]: the CUDA side's
//! typed refusals (no driver, no device, a default stream, a stream of
//! another context, ...) or a queue configuration out of range; never a
//! panic.
//!
//! ```no_run
//! use sigretire_cuda::queue::{self, DeviceConfig, QueueConfig};
//! use std::time::Duration;
//!
//! // The runtime's own cudarc context and stream.
//! let context = cudarc::driver::CudaContext::new(0)?;
//! let stream = context.new_stream()?;
//!
//! // One call: a queue-layer device whose default queue is that stream.
//! let (device, host_queue) = queue::adopt(stream.clone(), DeviceConfig::default(), QueueConfig::default())?;
//!
//! // The runtime launches on `stream` through cudarc; the library records around it.
//! let start: queue::Event = host_queue.record_event()?;
//! for _ in 0..3 {
//!     host_queue.launch_empty()?; // the library's empty kernel: stands in for the runtime's own
//! }
//! let stop = host_queue.record_event()?;
//! stop.synchronize()?;
//! let elapsed: Duration = start.elapsed_to(&stop)?;
//! println!("three launches in {elapsed:?} of GPU time");
//! device.synchronize()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::context::CudaContext;
use crate::error::Error as CudaError;
use crate::hardware_queue::CudaQueue;
use crate::memory::CudaMemory;
use cudarc::driver::CudaStream;
use sigretire_tracker::{Config, RetiringTracker, Tracker};
use std::sync::Arc;

pub use sigretire_queue::prelude::*;

/// The retiring tracker on a CUDA stream, with signals in the context's
/// pinned memory: what every queue of this module runs on.
pub type CudaTracker = RetiringTracker<CudaMemory, CudaQueue>;

/// A GPU device of the queue layer on CUDA: its error state, its completion
/// thread, its default queue ([`sigretire_queue::Device`]); clones are
/// handles of the same device.
pub type Device = sigretire_queue::Device<CudaTracker>;

/// A queue of the queue layer (a HIP stream) on a CUDA stream
/// ([`sigretire_queue::HostQueue`]); clones share it.
pub type HostQueue = sigretire_queue::HostQueue<CudaTracker>;

/// An event recorded on a [`HostQueue`] ([`sigretire_queue::Event`]);
/// clones share its recording.
pub type Event = sigretire_queue::Event<CudaTracker>;

/// A submitted command's handle ([`sigretire_queue::Command`]).
pub type Command = sigretire_queue::Command<CudaMemory>;

/// Why [`adopt`], [`open`], [`adopt_queue`] or [`create_queue`] made no
/// device or queue.
///
/// ```
/// use sigretire_cuda::queue::{InvalidConfig, OpenError};
///
/// let missing = OpenError::from(sigretire_cuda::Error::LibraryMissing);
/// assert!(missing.to_string().contains("install the NVIDIA driver"));
/// assert!(missing.is_no_gpu());
/// let config = OpenError::from(InvalidConfig("batch limits must be at least 1"));
/// assert!(config.to_string().contains("batch limits"));
/// assert!(!config.is_no_gpu());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The CUDA side refused: no driver ([`LibraryMissing`](crate::Error::LibraryMissing)),
    /// no such device ([`NoDevice`](crate::Error::NoDevice)), a default
    /// stream ([`DefaultStream`](crate::Error::DefaultStream)), a stream or
    /// context other than the device's primary one
    /// ([`ForeignStream`](crate::Error::ForeignStream),
    /// [`ForeignContext`](crate::Error::ForeignContext)), a stream being
    /// captured, a driver error, or a tracker that could not start.
    #[error(transparent)]
    Cuda(#[from] CudaError),
    /// A queue configuration value is out of range.
    #[error(transparent)]
    Config(#[from] InvalidConfig),
}

impl OpenError {
    /// Whether the machine has no GPU to open: no driver, or no device of
    /// that ordinal. A program that can run without a GPU says so and goes
    /// on; any other error is worth reporting.
    pub fn is_no_gpu(&self) -> bool {
        matches!(
            self,
            OpenError::Cuda(CudaError::LibraryMissing | CudaError::NoDevice { .. })
        )
    }
}

/// A queue-layer device whose default queue is cudarc's `stream`, adopted,
/// and a handle of that queue, in one call: this library's context is the
/// stream's (`stream.context()`, through [`CudaContext::from_cudarc`]), and
/// the queue holds the stream's `Arc`, so the stream lives until the
/// device, its queues, events and commands are all gone, and is never
/// destroyed by the library
/// ([`CudaContext::adopt_cudarc_stream`]). The runtime keeps enqueueing on
/// the stream through cudarc; the queue layer's commands land after what
/// it enqueued before them.
///
/// The tracker has the default configuration and signals of its own;
/// build the device by hand ([`Device::new`] with a [`CudaTracker`]) for
/// another.
///
/// # Errors
/// No driver or no device ([`OpenError::is_no_gpu`]); a cudarc context that
/// is not the device's primary one ([`ForeignContext`](crate::Error::ForeignContext));
/// cudarc's default streams ([`DefaultStream`](crate::Error::DefaultStream));
/// a stream being captured into a graph; a configuration out of range
/// ([`OpenError::Config`]).
///
/// ```
/// use sigretire_cuda::queue::{self, DeviceConfig, QueueConfig};
///
/// if !sigretire_cuda::library_present() {
///     return Ok(()); // no driver: cudarc would panic
/// }
/// let Ok(context) = cudarc::driver::CudaContext::new(0) else {
///     return Ok(()); // no device
/// };
/// let stream = context.new_stream()?;
/// let (device, host_queue) = queue::adopt(stream.clone(), DeviceConfig::default(), QueueConfig::default())?;
/// assert_eq!(host_queue.id(), device.default_queue().id());
/// assert!(queue::is_adopted(&host_queue));
/// let command: queue::Command = host_queue.launch_empty()?;
/// host_queue.synchronize()?;
/// assert_eq!(command.status(), queue::CommandStatus::Complete);
///
/// // cudarc's default stream is no stream of the runtime's own.
/// let refused = queue::adopt(context.default_stream(), DeviceConfig::default(), QueueConfig::default());
/// assert!(matches!(
///     refused,
///     Err(queue::OpenError::Cuda(sigretire_cuda::Error::DefaultStream { handle: 0 }))
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn adopt(
    stream: Arc<CudaStream>,
    device: DeviceConfig,
    queue: QueueConfig,
) -> Result<(Device, HostQueue), OpenError> {
    queue.validate()?;
    let context = CudaContext::from_cudarc(stream.context())?;
    let tracker = tracker(context.adopt_cudarc_stream(stream)?)?;
    let device = Device::new(device, tracker, queue)?;
    let default_queue = device.default_queue().clone();
    Ok((device, default_queue))
}

/// A queue-layer device on GPU `ordinal` (its primary context), whose
/// default queue runs on a new stream of its own, and a handle of that
/// queue, in one call. For a program that has no CUDA runtime of its own;
/// a runtime on cudarc hands its stream over with [`adopt`] instead.
///
/// The tracker has the default configuration; build the device by hand
/// ([`Device::new`] with a [`CudaTracker`]) for another.
///
/// # Errors
/// No driver or no device ([`OpenError::is_no_gpu`]), a device without
/// what completion signals need, a driver error, a configuration out of
/// range ([`OpenError::Config`]).
///
/// ```
/// use sigretire_cuda::queue::{self, DeviceConfig, OpenError, QueueConfig};
///
/// // No driver or no device is a typed error, never a panic.
/// let missing = queue::open(u32::MAX, DeviceConfig::default(), QueueConfig::default());
/// assert!(missing.is_err_and(|error| error.is_no_gpu()));
///
/// let (device, host_queue) = match queue::open(0, DeviceConfig::default(), QueueConfig::default()) {
///     Err(error) if error.is_no_gpu() => return Ok(()), // no GPU here
///     opened => opened?,
/// };
/// assert!(!queue::is_adopted(&host_queue));
/// let start: queue::Event = host_queue.record_event()?;
/// host_queue.launch_empty()?;
/// let stop = host_queue.record_event()?;
/// stop.synchronize()?;
/// assert!(start.elapsed_to(&stop).is_ok());
/// device.synchronize()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open(
    ordinal: u32,
    device: DeviceConfig,
    queue: QueueConfig,
) -> Result<(Device, HostQueue), OpenError> {
    queue.validate()?;
    let context = CudaContext::new(ordinal)?;
    let tracker = tracker(context.create_queue()?)?;
    let device = Device::new(device, tracker, queue)?;
    let default_queue = device.default_queue().clone();
    Ok((device, default_queue))
}

/// A new queue of `device` on cudarc's `stream`, adopted as [`adopt`]
/// adopts the first: for a runtime that hands over more than one stream.
/// The stream must be of the device's context.
///
/// # Errors
/// As [`adopt`]'s; a stream of another device is
/// [`ForeignStream`](crate::Error::ForeignStream).
///
/// ```
/// use sigretire_cuda::queue::{self, DeviceConfig, QueueConfig};
///
/// if !sigretire_cuda::library_present() {
///     return Ok(()); // no driver: cudarc would panic
/// }
/// let Ok(context) = cudarc::driver::CudaContext::new(0) else {
///     return Ok(()); // no device
/// };
/// let (device, producer) = queue::adopt(context.new_stream()?, DeviceConfig::default(), QueueConfig::default())?;
/// let consumer = queue::adopt_queue(&device, context.new_stream()?, QueueConfig::default())?;
/// assert_eq!(device.queues().len(), 2);
/// producer.launch_empty()?;
/// consumer.wait_event(&producer.record_event()?)?; // on the GPU
/// consumer.synchronize()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn adopt_queue(
    device: &Device,
    stream: Arc<CudaStream>,
    config: QueueConfig,
) -> Result<HostQueue, OpenError> {
    config.validate()?;
    let context = context_of(device);
    let tracker = tracker(context.adopt_cudarc_stream(stream)?)?;
    Ok(device.create_queue(tracker, config)?)
}

/// A new queue of `device` on a new stream of its own.
///
/// # Errors
/// A driver error, a tracker that could not start, a configuration out of
/// range ([`OpenError::Config`]).
///
/// ```
/// use sigretire_cuda::queue::{self, DeviceConfig, QueueConfig};
///
/// let (device, first) = match queue::open(0, DeviceConfig::default(), QueueConfig::default()) {
///     Err(error) if error.is_no_gpu() => return Ok(()), // no GPU here
///     opened => opened?,
/// };
/// let second: queue::HostQueue = queue::create_queue(&device, QueueConfig::default())?;
/// assert_ne!(first.id(), second.id());
/// assert_eq!(device.queues().len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn create_queue(device: &Device, config: QueueConfig) -> Result<HostQueue, OpenError> {
    config.validate()?;
    let context = context_of(device);
    let tracker = tracker(context.create_queue()?)?;
    Ok(device.create_queue(tracker, config)?)
}

/// Whether `queue` runs on a stream the runtime handed over ([`adopt`],
/// [`adopt_queue`]) rather than on one of its own ([`open`],
/// [`create_queue`]). Takes the queue's submission lock: not for a hot
/// path.
pub fn is_adopted(queue: &HostQueue) -> bool {
    queue.with_tracker(|tracker| tracker.queue().is_adopted())
}

/// The CUDA context of `device`'s queues (every queue of a device is of
/// its default queue's context).
fn context_of(device: &Device) -> Arc<CudaContext> {
    device
        .default_queue()
        .with_tracker(|tracker| tracker.queue().context().clone())
}

/// The retiring tracker on `queue`, with signals of its own, default
/// configuration.
fn tracker(queue: CudaQueue) -> Result<CudaTracker, CudaError> {
    let memory = Arc::new(CudaMemory::new(queue.context()));
    Ok(RetiringTracker::new(memory, queue, Config::default())?)
}
