//! The device: its error state, its completion thread, its default queue.
//!
//! Faults stay where they happen, as CUDA splits them: a queue whose work
//! fails on the GPU fails alone ([`HostQueue::has_failed`]: its waits,
//! events and synchronize answer `QueueFailed`, it takes no more work;
//! drop it and create a new one), and the device and its other queues keep
//! working. Only a device-wide fault is sticky for the whole device.
//!
//! The device's error state is explicit, one flag per device that every
//! wait checks, set for a device-wide fault only ([`Device::set_error`]: a
//! lost device, a GPU error the runtime judges device-wide). With
//! [`DeviceConfig::skip_abort_on_error`] (CLR's `HIP_SKIP_ABORT_ON_GPU_ERROR`)
//! waits then return `DeviceError` early ([`SyncError::DeviceError`](crate::SyncError::DeviceError)
//! and the like), without completion, and the batches they were completing
//! are released so nobody hangs; without it the device refuses all further
//! work (`Aborted`) where CLR would abort the process.

use crate::completion::DeviceShared;
use crate::config::{DeviceConfig, QueueConfig};
use crate::device_state::DeviceState;
use crate::error::InvalidConfig;
use crate::error::SyncError;
use crate::event::{Event, EventFlags};
use crate::publish::QueueTracker;
use crate::queue::{HostQueue, WeakQueue};
use crate::sync::{Arc, Ordering};
use std::time::{Duration, Instant};

/// Counters of a device, for tests and diagnostics.
///
/// ```
/// let stats = sigretire_queue::DeviceStats::default();
/// assert_eq!(stats.teardowns_on_completion_thread, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Queues torn down so far.
    pub queue_teardowns: u64,
    /// Of those, torn down on the completion thread: always 0 (a queue
    /// whose last reference a completion job held is torn down on a
    /// teardown thread of its own).
    pub teardowns_on_completion_thread: u64,
    /// Queues leaked because no teardown thread could be started (rather
    /// than torn down on the completion thread).
    pub teardowns_leaked: u64,
    /// Whether the completion thread has started (it starts with the first
    /// batch it is given).
    pub completion_thread_started: bool,
}

/// A GPU device: its error state, its completion thread and its default queue.
///
/// Generic over the tracker (and so the backend) its queues use; each
/// backend names it for its tracker (`sim::Device` here). Queues created
/// from it share its error state and completion thread. A clone is a
/// handle of the same device (three reference counts: its error state,
/// its default queue, its list of queues), not a new one.
///
/// ```
/// use sigretire_queue::sim::SimPlatform;
/// use sigretire_queue::{DeviceConfig, QueueConfig};
///
/// let platform = SimPlatform::stepped();
/// let device = platform.device(DeviceConfig::default(), QueueConfig::default())?;
/// let stream = platform.create_queue(&device, QueueConfig::default())?;
/// assert_ne!(device.default_queue().id(), stream.id());
/// assert!(device.error().is_none());
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
pub struct Device<T: QueueTracker> {
    shared: Arc<DeviceShared<T>>,
    default_queue: HostQueue<T>,
    /// The queues created from it, without keeping them alive: a dropped
    /// queue is forgotten (pruned as queues are created and listed). Shared
    /// by the device's clones.
    created: Arc<std::sync::Mutex<Vec<WeakQueue<T>>>>,
}

/// Another handle of the same device: the same error state, default queue
/// and queues.
///
/// ```
/// # let platform = sigretire_queue::sim::SimPlatform::stepped();
/// # let device = platform.device(Default::default(), Default::default())?;
/// let handle = device.clone();
/// let stream = platform.create_queue(&handle, Default::default())?;
/// assert_eq!(handle.default_queue().id(), device.default_queue().id());
/// assert_eq!(device.queues().len(), 2); // the clone's queue is the device's
/// handle.set_error("injected");
/// assert_eq!(device.error().as_deref(), Some("injected"));
/// # drop(stream);
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
impl<T: QueueTracker> Clone for Device<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            default_queue: self.default_queue.clone(),
            created: self.created.clone(),
        }
    }
}

impl<T: QueueTracker> Device<T> {
    /// A device whose default queue runs on `default_tracker`'s hardware queue.
    /// Refuses an out-of-range `default_config` ([`InvalidConfig`]).
    ///
    /// ```
    /// use sigretire_queue::sim::SimPlatform;
    /// use sigretire_queue::{Device, DeviceConfig, QueueConfig};
    ///
    /// let platform = SimPlatform::stepped();
    /// let device = Device::new(DeviceConfig::default(), platform.tracker()?, QueueConfig::default())?;
    /// assert_eq!(device.default_queue().stats().commands, 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn new(
        config: DeviceConfig,
        default_tracker: T,
        default_config: QueueConfig,
    ) -> Result<Self, InvalidConfig> {
        default_config.validate()?;
        let state = Arc::new(DeviceState::new(config));
        let shared = Arc::new(DeviceShared::new(state));
        let default_queue = HostQueue::create(shared.clone(), default_tracker, default_config)?;
        Ok(Self {
            shared,
            default_queue,
            created: Arc::new(std::sync::Mutex::new(Vec::new())),
        })
    }

    /// The device-wide state its queues and events share (its identity).
    pub(crate) fn state(&self) -> &Arc<DeviceState> {
        self.shared.state()
    }

    /// The thread its queues' callbacks run on.
    pub(crate) fn callbacks(&self) -> &Arc<crate::callback::CallbackRunner> {
        self.shared.callbacks()
    }

    /// The device's default queue (HIP's null stream): it lives as long as
    /// the device.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue().clone();
    /// assert_eq!(queue.id(), device.default_queue().id());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn default_queue(&self) -> &HostQueue<T> {
        &self.default_queue
    }

    /// A new queue (a created stream) on `tracker`'s hardware queue.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.create_queue(platform.tracker()?, sigretire_queue::QueueConfig::default())?;
    /// assert_eq!(queue.query()?, sigretire_queue::tracker::Status::Complete); // nothing submitted
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn create_queue(
        &self,
        tracker: T,
        config: QueueConfig,
    ) -> Result<HostQueue<T>, InvalidConfig> {
        config.validate()?;
        let queue = HostQueue::create(self.shared.clone(), tracker, config)?;
        let mut created = self.created();
        created.retain(|queue| !queue.is_gone());
        created.push(queue.downgrade());
        Ok(queue)
    }

    /// The list of created queues, locked (a panic elsewhere leaves it
    /// whole: every change to it is one call).
    fn created(&self) -> std::sync::MutexGuard<'_, Vec<WeakQueue<T>>> {
        self.created
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Handles of the device's live queues: its default queue first, then
    /// every queue created from it ([`create_queue`](Self::create_queue))
    /// that some handle still holds, oldest first. The device does not keep
    /// its queues alive: once a queue's last handle is dropped it is no
    /// longer listed (its events may still hold its parts until they go).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let stream = platform.create_queue(&device, Default::default())?;
    /// let ids: Vec<u64> = device.queues().iter().map(|queue| queue.id()).collect();
    /// assert_eq!(ids, [device.default_queue().id(), stream.id()]);
    /// drop(stream);
    /// assert_eq!(device.queues().len(), 1);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn queues(&self) -> Vec<HostQueue<T>> {
        let mut created = self.created();
        created.retain(|queue| !queue.is_gone());
        let mut queues = Vec::with_capacity(created.len() + 1);
        queues.push(self.default_queue.clone());
        queues.extend(created.iter().filter_map(WeakQueue::upgrade));
        queues
    }

    /// Waits until everything submitted so far to every live queue of the
    /// device ([`queues`](Self::queues)) completed (`hipDeviceSynchronize`):
    /// each queue's [`synchronize`](HostQueue::synchronize) in turn, so
    /// the time it takes is the slowest queue's, each bounded by its
    /// queue's [`wait_timeout`](QueueConfig::wait_timeout). Queues created
    /// while it runs, and work submitted to a queue after its turn, are not
    /// waited for. Returns the first queue's error and stops there (the
    /// later queues are not synchronized).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let stream = platform.create_queue(&device, Default::default())?;
    /// let (a, b) = (device.default_queue().launch_empty()?, stream.launch_empty()?);
    /// platform.run_while(|| device.synchronize())?;
    /// assert!(a.is_released() && b.is_released());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn synchronize(&self) -> Result<(), SyncError> {
        for queue in self.queues() {
            queue.synchronize()?;
        }
        Ok(())
    }

    /// Synchronizes the device as [`synchronize`](Self::synchronize) does,
    /// but gives up once `timeout` has passed since the call, with
    /// [`SyncError::TimedOut`] (carrying `timeout`): the work has not all
    /// completed and may still; nothing was reported complete. Synchronize
    /// again, or query the queues later. A queue's turn gets what is left
    /// of `timeout` (at least one look).
    ///
    /// ```
    /// use sigretire_queue::SyncError;
    /// use std::time::Duration;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let stream = platform.create_queue(&device, Default::default())?;
    /// stream.launch_empty()?;
    /// // Nobody runs the stepped GPU: the wait gives up after 2 ms.
    /// let timeout = Duration::from_millis(2);
    /// assert_eq!(device.synchronize_timeout(timeout), Err(SyncError::TimedOut(timeout)));
    /// platform.run_while(|| device.synchronize())?;
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn synchronize_timeout(&self, timeout: Duration) -> Result<(), SyncError> {
        let start = Instant::now();
        for queue in self.queues() {
            let left = timeout.saturating_sub(start.elapsed());
            match queue.synchronize_within(Some(left)) {
                Err(SyncError::TimedOut(_)) => return Err(SyncError::TimedOut(timeout)),
                result => result?,
            }
        }
        Ok(())
    }

    /// Puts the device in the error state, as a device-wide fault (a lost
    /// device) would. The state is for good: waits on every queue of the
    /// device then return early (`DeviceError` with `skip_abort_on_error`,
    /// else `Aborted`, and an aborting device takes no more work);
    /// recreate the device. A failure of one queue's work does not call
    /// this: it fails that queue alone ([`HostQueue::has_failed`]).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// device.set_error("injected");
    /// assert_eq!(device.error().as_deref(), Some("injected"));
    /// assert!(matches!(device.default_queue().launch_empty(), Err(sigretire_queue::SubmitError::Aborted { .. })));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn set_error(&self, reason: impl Into<String>) {
        self.shared.state().report(reason.into());
    }

    /// Why the device is in the error state, if it is (only a device-wide
    /// fault puts it there: [`set_error`](Self::set_error)).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert_eq!(device.error(), None);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn error(&self) -> Option<String> {
        self.shared.state().reason()
    }

    /// The device's configuration.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert!(!device.config().skip_abort_on_error);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn config(&self) -> DeviceConfig {
        self.shared.state().config
    }

    /// The device's counters.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert!(!device.stats().completion_thread_started);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn stats(&self) -> DeviceStats {
        let state = self.shared.state();
        DeviceStats {
            queue_teardowns: state.queue_teardowns.load(Ordering::Relaxed),
            teardowns_on_completion_thread: state.teardowns_on_handler.load(Ordering::Relaxed),
            teardowns_leaked: state.teardowns_leaked.load(Ordering::Relaxed),
            completion_thread_started: state.handler_thread.get().is_some(),
        }
    }
}

impl<T: QueueTracker> core::fmt::Debug for Device<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Device")
            .field("config", &self.shared.state().config)
            .field("error", &self.error())
            .field("default_queue", &self.default_queue.id())
            .finish()
    }
}

// An event is made on a device: its constructor lives with the device, the
// layer above events.
impl<T: QueueTracker> Event<T> {
    /// An event of `device`, never recorded (`hipEventCreateWithFlags`):
    /// record it on any queue of the device with
    /// [`HostQueue::record`](crate::HostQueue::record), as often as you
    /// like. Until then it is complete: [`query`](Event::query) answers
    /// [`Status::Complete`](crate::tracker::Status::Complete) and [`synchronize`](Event::synchronize) returns
    /// at once (as CUDA's `cudaEventQuery` does), a wait on it
    /// ([`HostQueue::wait_event`](crate::HostQueue::wait_event)) publishes
    /// nothing, and an elapsed time refuses it
    /// ([`ElapsedError::NotRecorded`](crate::ElapsedError::NotRecorded)). Takes one reference on the device,
    /// no allocation, no lock.
    ///
    /// ```
    /// use sigretire_queue::{ElapsedError, Event, EventFlags};
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let event = Event::new(&device, EventFlags::DISABLE_TIMING);
    /// event.synchronize()?; // returns at once
    /// assert_eq!(event.flags(), EventFlags::DISABLE_TIMING);
    /// assert_eq!(event.elapsed_to(&event), Err(ElapsedError::NotRecorded));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn new(device: &Device<T>, flags: EventFlags) -> Self {
        Event::created(device.state().clone(), device.callbacks().clone(), flags)
    }
}
