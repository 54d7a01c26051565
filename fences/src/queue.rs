//! The host queue (a HIP stream): the coordinator of one queue's
//! components. Each method is a few lines that ask them:
//!
//! - `submission`: the execution lock and what it protects (publication,
//!   the open batch, the newest command), and what threads without it read;
//! - `completion`: the batches that left the open batch, completed by the
//!   thread that finds them done or by the device's completion thread;
//! - `synchronize`, `query`, `event`, `cross_wait`, `move_queue`: each
//!   operation's protocol over those two;
//! - `frontier`: what the queue knows about its hardware queue, which every
//!   shortcut of those protocols asks.
//!
//! No thread holds the execution lock while it waits for the GPU, so a
//! synchronize on one thread never blocks another thread's submission.

use crate::command::Command;
use crate::completion::{Completion, DeviceShared};
use crate::config::QueueConfig;
use crate::cross_wait::{self, CrossWait, MAX_DEPENDENCIES_PER_PACKET};
use crate::error::{
    Fault, InvalidConfig, MoveError, RecordError, SubmitError, SyncError, WaitEventError,
};
use crate::event::{self, Event, EventFlags};
use crate::move_queue;
use crate::publish::{Packet, QueueTracker};
use crate::query;
use crate::stats::{QueueStats, add};
use crate::submission::Submission;
use crate::sync::{Arc, AtomicU64, Ordering};
use crate::synchronize::Synchronizer;
use sigretire_tracker::{Pin, Purpose, Status, Tracker, Work, backend::SignalMemory};
use std::collections::VecDeque;
use std::time::Duration;

/// Queue ids: unique in the process.
static NEXT_QUEUE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A host queue (a HIP stream) on one hardware queue.
///
/// Cheap to clone; clones share the queue. Its execution lock covers
/// submission only: `launch`, `record_event`, `wait_event` and `query` take
/// it for microseconds, and no thread holds it while it waits for the GPU,
/// so a synchronize on one thread never blocks another thread's submission.
///
/// Dropping the last handle never waits for the GPU: the queue lives on
/// while its events or the completion thread's jobs hold it, and is torn
/// down by whichever lets go last, except that the completion thread hands
/// its last reference to a teardown thread rather than destroy the queue
/// itself.
///
/// A queue whose work fails on the GPU (a queue error) is failed for good,
/// on its own ([`has_failed`](Self::has_failed)): its unfinished work, its
/// events and its synchronize answer the failure, and it takes no more work
/// (`QueueFailed`, naming it). The device and its other queues keep
/// working; drop the failed queue and create a new one. Only a device-wide
/// fault ([`Device::set_error`](crate::Device::set_error)) stops every
/// queue of the device.
///
/// ```
/// use sigretire_queue::sim::SimPlatform;
/// use sigretire_queue::tracker::Status;
///
/// let platform = SimPlatform::stepped();
/// let device = platform.device(Default::default(), Default::default())?;
/// let queue = device.default_queue();
/// let kernel = queue.launch_empty()?;
/// assert_eq!(queue.query()?, Status::Pending);
/// platform.run_while(|| queue.synchronize())?; // the stepped GPU runs meanwhile
/// assert_eq!(queue.query()?, Status::Complete);
/// assert!(kernel.is_released());
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
pub struct HostQueue<T: QueueTracker> {
    /// A std `Arc`, not the modelled one: the device lists its queues
    /// through weak references ([`WeakQueue`]), which loom's `Arc` lacks.
    /// Only the user's handles hold it (as many as `handles` counts).
    parts: std::sync::Arc<Parts<T>>,
}

/// A queue its device lists without keeping it alive.
pub(crate) struct WeakQueue<T: QueueTracker>(std::sync::Weak<Parts<T>>);

impl<T: QueueTracker> WeakQueue<T> {
    /// A handle of the queue, unless its last handle was dropped: never
    /// one made again after that (the queue's teardown began).
    pub(crate) fn upgrade(&self) -> Option<HostQueue<T>> {
        let parts = self.0.upgrade()?;
        // Relaxed as `clone`: a live handle's count only grows here.
        parts
            .handles
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |handles| {
                (handles > 0).then_some(handles + 1)
            })
            .ok()?;
        Some(HostQueue { parts })
    }

    /// Whether the queue's last handle is gone.
    pub(crate) fn is_gone(&self) -> bool {
        self.0.strong_count() == 0
    }
}

/// What a queue's handles share.
struct Parts<T: QueueTracker> {
    submission: Arc<Submission<T>>,
    completion: Arc<Completion<T>>,
    synchronizer: Synchronizer,
    /// The user's handles of the queue ([`HostQueue`]s; its events and
    /// the completion thread's jobs hold its components, not a handle).
    handles: AtomicU64,
}

impl<T: QueueTracker> Clone for HostQueue<T> {
    fn clone(&self) -> Self {
        self.parts.handles.fetch_add(1, Ordering::Relaxed);
        Self {
            parts: self.parts.clone(),
        }
    }
}

impl<T: QueueTracker> Drop for HostQueue<T> {
    fn drop(&mut self) {
        // AcqRel: the last handle sees everything the others published.
        if self.parts.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            Completion::last_handle_gone(&self.parts.completion);
        }
    }
}

impl<T: QueueTracker> HostQueue<T> {
    /// A queue of `device` on `tracker`'s hardware queue.
    pub(crate) fn create(
        device: Arc<DeviceShared<T>>,
        tracker: T,
        config: QueueConfig,
    ) -> Result<Self, InvalidConfig> {
        config.validate()?;
        let id = NEXT_QUEUE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let submission = Arc::new(Submission::new(id, tracker, config, device.state().clone()));
        let completion = Arc::new(Completion::new(submission.clone(), device));
        let parts = Parts {
            submission,
            completion,
            synchronizer: Synchronizer::default(),
            handles: AtomicU64::new(1),
        };
        Ok(Self {
            parts: std::sync::Arc::new(parts),
        })
    }

    /// A reference to the queue that does not keep it alive.
    pub(crate) fn downgrade(&self) -> WeakQueue<T> {
        WeakQueue(std::sync::Arc::downgrade(&self.parts))
    }

    fn submission(&self) -> &Arc<Submission<T>> {
        &self.parts.submission
    }

    pub(crate) fn completion(&self) -> &Arc<Completion<T>> {
        &self.parts.completion
    }

    /// The queue's id, unique in the process.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert!(device.default_queue().id() > 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.submission().id()
    }

    /// The queue's configuration.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert_eq!(device.default_queue().config().cpu_sync_batch, 8);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn config(&self) -> QueueConfig {
        *self.submission().config()
    }

    /// Whether the queue failed: a use of it was seen failed on the GPU (by
    /// a wait, a query, an event or the completion thread). A failed queue
    /// stays failed and takes no more work (`QueueFailed`); drop it and
    /// create a new one ([`Device::create_queue`](crate::Device::create_queue)).
    /// The device and its other queues are not affected.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// use sigretire_queue::tracker::Tracker;
    /// let queue = platform.create_queue(&device, Default::default())?;
    /// queue.launch_empty()?;
    /// queue.with_tracker(|t| t.queue().fail()); // the simulator fails the queue
    /// assert!(queue.synchronize().is_err());
    /// assert!(queue.has_failed());
    /// assert_eq!(queue.launch_empty().unwrap_err().failed_queue(), Some(queue.id()));
    /// assert!(device.error().is_none()); // the device is not failed
    /// assert!(device.default_queue().launch_empty().is_ok());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn has_failed(&self) -> bool {
        self.submission().has_failed()
    }

    /// Dispatches the kernel the backend knows by `kernel_object` (on the
    /// simulator, what `Sim::register_kernel` returned). The packet carries
    /// the barrier bit (an in-order queue). Takes the lock for the
    /// publication only; under tracker back-pressure it waits for the named
    /// use *outside* the lock, then retries.
    ///
    /// Kernel object 0 names no kernel (a null `hipFunction_t`, an AQL
    /// dispatch with a null code object): it is refused with
    /// [`SubmitError::NullKernel`] and nothing is published. An empty
    /// packet, which runs and completes like a kernel, is
    /// [`launch_empty`](Self::launch_empty).
    ///
    /// # When the tracker's ring is full
    ///
    /// The tracker keeps at most `Config::max_in_flight()` uses in flight
    /// (`initial_size` x `growth_limit` of its [`Config`](sigretire_tracker::Config):
    /// 1024 by default). A launch past that waits for the use the tracker
    /// names (the oldest one it waits on, or a fence near it), outside the
    /// lock, for at most [`QueueConfig::wait_timeout`]. With the default
    /// `wait_timeout: None` it **blocks until that use completes**: behind
    /// a kernel that waits for the host (a gated kernel), the
    /// `max_in_flight() + 1`-th launch blocks until the kernel is released,
    /// and a program that releases it only after its launches hangs. With a
    /// timeout the launch answers [`SubmitError::InFlightLimit`], naming
    /// the limit, the use it waited for and the time it waited; nothing is
    /// submitted. [`submit`](Self::submit), [`submit_all`](Self::submit_all),
    /// [`record_event`](Self::record_event) and the calls that publish a
    /// marker or wait packets behave the same.
    ///
    /// # Errors
    ///
    /// [`SubmitError::QueueFailed`] once the queue failed (drop it, create
    /// a new one); [`SubmitError::Aborted`] on a device in its error state
    /// that aborts; [`SubmitError::InFlightLimit`] as above;
    /// [`SubmitError::RingFull`] when the hardware queue stayed full for
    /// the wait timeout; [`SubmitError::NullKernel`] for kernel object 0.
    ///
    /// ```
    /// use sigretire_queue::SubmitError;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let copy = platform.sim().register_kernel(sigretire_queue::sim::Kernel::Duration(std::time::Duration::from_micros(50)));
    /// let command = device.default_queue().launch(copy)?;
    /// assert_eq!(command.seq(), 1);
    /// assert_eq!(device.default_queue().launch(0).unwrap_err(), SubmitError::NullKernel);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn launch(&self, kernel_object: u64) -> Result<Command<T::Memory>, SubmitError> {
        if kernel_object == 0 {
            return Err(SubmitError::NullKernel);
        }
        self.submit(Work::Kernel(kernel_object))
    }

    /// Dispatches an empty packet ([`Work::Empty`]): it runs like a kernel
    /// that does nothing, completes as soon as it runs, and carries
    /// timestamps on a profiled queue. The same as
    /// `submit(Work::Empty)`; it waits and fails as
    /// [`launch`](Self::launch) does.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let command = device.default_queue().launch_empty()?;
    /// platform.run_while(|| command.wait())?;
    /// assert!(command.status().is_done());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn launch_empty(&self) -> Result<Command<T::Memory>, SubmitError> {
        self.submit(Work::Empty)
    }

    /// Publishes the caller's `work` (any packet body it builds: its own
    /// kernel dispatch with its kernel arguments, a barrier-OR, an AMD
    /// barrier-value wait) as one command, with the events, synchronize,
    /// query and cross-queue waits of any other. The header (with the
    /// barrier bit: an in-order queue) and the completion signal are the
    /// library's. A backend that cannot express the work refuses it
    /// ([`SubmitError::Queue`]); the queue keeps working.
    ///
    /// When the tracker has `Config::max_in_flight()` uses in flight, it
    /// waits for the use the tracker names, for at most
    /// [`QueueConfig::wait_timeout`] (with `None`, until that use
    /// completes), then answers [`SubmitError::InFlightLimit`]: see
    /// [`launch`](Self::launch). A failed queue answers
    /// [`SubmitError::QueueFailed`].
    ///
    /// ```
    /// use sigretire_queue::tracker::backend::Dispatch;
    /// use sigretire_queue::tracker::Work;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let dispatch = Dispatch::new(0).kernarg_address(0x1000).grid([256, 1, 1]).workgroup([64, 1, 1]);
    /// let command = queue.submit(Work::Dispatch(dispatch))?;
    /// platform.run_while(|| command.wait())?;
    /// assert!(command.status().is_done());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn submit(&self, work: Work<'_>) -> Result<Command<T::Memory>, SubmitError> {
        let packet = Packet::new(work, Purpose::Completion).command();
        let entry = Completion::publish(self.completion(), |held| held.submit(packet))?;
        Ok(Submission::command(self.submission(), entry))
    }

    /// Publishes `works` as one command of several operations (a copy done
    /// line by line, a kernel split in parts): consecutive packets sharing
    /// one completion signal, the command complete once every one of them
    /// is. If the backend refuses one of them, the rest are replaced with
    /// empty packets, the command fails once the issued ones have finished,
    /// and the refusal is returned.
    ///
    /// The command takes one use of the tracker: when the tracker has
    /// `Config::max_in_flight()` uses in flight, it waits for the use the
    /// tracker names, for at most [`QueueConfig::wait_timeout`] (with
    /// `None`, until that use completes), then answers
    /// [`SubmitError::InFlightLimit`]: see [`launch`](Self::launch). A
    /// failed queue answers [`SubmitError::QueueFailed`].
    ///
    /// ```
    /// use sigretire_queue::tracker::backend::Dispatch;
    /// use sigretire_queue::tracker::Work;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let rows = [0, 1, 2].map(|row| Work::Dispatch(Dispatch::new(0).kernarg_address(0x1000 + 64 * row)));
    /// let command = queue.submit_all(&rows)?;
    /// assert_eq!(command.aql_index(), 2, "its last packet");
    /// platform.run_while(|| command.wait())?;
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn submit_all(&self, works: &[Work<'_>]) -> Result<Command<T::Memory>, SubmitError> {
        let ops = u32::try_from(works.len())
            .ok()
            .filter(|&ops| ops >= 1)
            .ok_or(SubmitError::Operations(works.len()))?;
        let (entry, refused) =
            Completion::publish(self.completion(), |held| held.submit_all(works, ops))?;
        match refused {
            Some(error) => Err(error.into()),
            None => Ok(Submission::command(self.submission(), entry)),
        }
    }

    /// Records an event: a marker after everything submitted so far. Right
    /// after a command, on a queue that runs only what it publishes
    /// (nothing it did not publish follows: [`HardwareQueue::foreign_work_after`](sigretire_tracker::backend::HardwareQueue::foreign_work_after)),
    /// no marker is published: the event completes with that command (which
    /// a marker would wait for anyway), and a timed event reports its
    /// stamps, so elapsed time runs from end to end of the two points as it
    /// would with markers ([`QueueStats::shared_completions`](crate::QueueStats)).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let kernel = queue.launch_empty()?;
    /// let event = queue.record_event()?;
    /// assert_eq!(event.seq(), Some(kernel.seq()), "the kernel's completion is the event's");
    /// assert_eq!((queue.stats().markers, queue.stats().shared_completions), (0, 1));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    ///
    /// With nothing before it, an event is a marker of its own:
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let event = device.default_queue().record_event()?;
    /// assert!(event.is_timed()); // queues profile by default
    /// assert_eq!(device.default_queue().stats().markers, 1);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn record_event(&self) -> Result<Event<T>, SubmitError> {
        self.record_event_with(EventFlags::default())
    }

    /// Records an event as [`record_event`](Self::record_event) does, with
    /// its own [`EventFlags`] in place of the queue's: an untimed event on
    /// a profiled queue (`hipEventDisableTiming`: no stamps, none
    /// harvested, a marker with no timed work), or one whose synchronize
    /// sleeps on a spinning queue (`hipEventBlockingSync`). `timing` asks
    /// for stamps only where the queue writes them
    /// ([`QueueConfig::profiling`]); on a queue that does not profile the
    /// event is untimed ([`Event::is_timed`] answers `false`,
    /// [`Event::elapsed_to`] refuses with
    /// [`ElapsedError::NotTimed`](crate::ElapsedError::NotTimed)).
    ///
    /// ```
    /// use sigretire_queue::{ElapsedError, EventFlags};
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue(); // profiles
    /// let start = queue.record_event_with(EventFlags::DISABLE_TIMING)?;
    /// let stop = queue.record_event()?;
    /// assert!(!start.is_timed() && stop.is_timed());
    /// platform.sim().run_until_idle();
    /// assert_eq!(start.elapsed_to(&stop), Err(ElapsedError::NotTimed));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn record_event_with(&self, flags: EventFlags) -> Result<Event<T>, SubmitError> {
        Ok(self.recorded(flags)?)
    }

    /// Records `event` (`hipEventRecord`): created by [`Event::new`] on
    /// this queue's device, or recorded before on any queue of it (this
    /// one or another), it now stands for everything submitted to this
    /// queue so far, recorded as [`record_event`](Self::record_event)
    /// records, with the flags it was created with. Its previous recording
    /// is let go; a wait that already captured it
    /// ([`wait_event`](Self::wait_event)) keeps waiting for that one (the
    /// CUDA rule: a wait captures the event's newest recording at the time
    /// of the call), and so do clones taken before: a clone is a snapshot.
    ///
    /// Takes `&mut`: recording changes what the event stands for, so no
    /// other reference may be reading it meanwhile, and reads of an event
    /// need no lock. Once the queue is warm it allocates nothing, as
    /// [`record_event`](Self::record_event) does not: the event's fields
    /// are replaced in place.
    ///
    /// # Errors
    ///
    /// [`RecordError::OtherDevice`] for an event of another device (HIP
    /// and CUDA refuse it too); otherwise what
    /// [`record_event`](Self::record_event) can answer, under
    /// [`RecordError`]'s variants of the same names. On an error the event
    /// keeps its previous recording.
    ///
    /// ```
    /// use sigretire_queue::{Event, EventFlags, RecordError};
    /// use sigretire_queue::tracker::Status;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let stream = platform.create_queue(&device, Default::default())?;
    /// let mut event = Event::new(&device, EventFlags::default());
    /// device.default_queue().record(&mut event)?;
    /// platform.run_while(|| event.synchronize())?;
    /// stream.launch_empty()?;
    /// stream.record(&mut event)?; // again, on another queue of the device
    /// assert_eq!(event.queue_id(), Some(stream.id()));
    /// assert_eq!(event.query(), Status::Pending);
    ///
    /// let elsewhere = platform.device(Default::default(), Default::default())?;
    /// let refused = elsewhere.default_queue().record(&mut event);
    /// assert!(matches!(refused, Err(RecordError::OtherDevice { .. })));
    /// assert_eq!(event.queue_id(), Some(stream.id()), "unchanged");
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn record(&self, event: &mut Event<T>) -> Result<(), RecordError> {
        if !Arc::ptr_eq(event.device(), self.submission().device()) {
            return Err(RecordError::OtherDevice { queue: self.id() });
        }
        event.replace(self.recorded(event.flags())?);
        Ok(())
    }

    /// A new recording on this queue with `flags`: a marker after
    /// everything submitted so far, or the newest command's completion.
    fn recorded(&self, flags: EventFlags) -> Result<Event<T>, Fault> {
        let (submission, completion) = (self.submission(), self.completion());
        let timed = flags.timing && submission.config().profiling;
        let (point, signal) =
            Completion::publish(completion, |held| event::record(held, submission, timed))?;
        Ok(Event::recorded(
            completion.clone(),
            point,
            signal,
            timed,
            flags,
        ))
    }

    /// Waits until everything submitted to the queue so far completed
    /// (`hipStreamSynchronize`), never holding the execution lock while it
    /// waits for the GPU.
    ///
    /// - Nothing submitted since a completed marker: returns at once,
    ///   without the lock.
    /// - The newest command already done: completes the batch, no marker.
    /// - A marker in flight (another thread synchronizing): waits on it.
    /// - A small pending batch: a marker, waited for by this thread after
    ///   the lock is released; the lock is then taken once for timing and
    ///   the queue-state reset, and the batch completed without it.
    /// - A larger batch: a marker completed by the completion thread.
    ///
    /// Returns [`SyncError::DeviceError`] early (without completion) when the
    /// device enters the error state with `skip_abort_on_error`,
    /// [`SyncError::Aborted`] without it, [`SyncError::QueueFailed`] when the
    /// queue's work failed, or it failed before (for good: drop it and
    /// create a new one; the device's other queues are not affected),
    /// [`SyncError::TimedOut`] past the wait timeout.
    ///
    /// ```
    /// use sigretire_queue::sim::SimPlatform;
    ///
    /// let platform = SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let command = queue.launch_empty()?;
    /// platform.run_while(|| queue.synchronize())?; // the marker is waited for outside the lock
    /// assert!(command.is_released());
    /// let locks = queue.stats().lock_acquisitions;
    /// queue.synchronize()?; // the completed marker covers everything: no lock
    /// assert_eq!(queue.stats().lock_acquisitions, locks);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn synchronize(&self) -> Result<(), SyncError> {
        let timeout = self.submission().config().wait_timeout;
        self.synchronize_within(timeout)
    }

    /// Waits as [`synchronize`](Self::synchronize) does, but gives up after
    /// `timeout` (this call's deadline, in place of the queue's
    /// [`QueueConfig::wait_timeout`]) with [`SyncError::TimedOut`]: the
    /// work has not completed and may still; nothing was reported complete,
    /// and the completion thread completes the batch when the GPU does.
    /// Synchronize again (with or without a deadline), or
    /// [`query`](Self::query) later. The deadline bounds the waits for the
    /// GPU; publishing the marker under the lock is not a wait for the GPU,
    /// except on a full ring, which the queue's own timeout bounds. A zero
    /// `timeout` looks once.
    ///
    /// ```
    /// use sigretire_queue::SyncError;
    /// use std::time::Duration;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// queue.launch_empty()?;
    /// // Nobody runs the stepped GPU: the wait gives up after 1 ms.
    /// let timeout = Duration::from_millis(1);
    /// assert_eq!(queue.synchronize_timeout(timeout), Err(SyncError::TimedOut(timeout)));
    /// platform.run_while(|| queue.synchronize())?; // the plain call waits as long as it takes
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn synchronize_timeout(&self, timeout: Duration) -> Result<(), SyncError> {
        self.synchronize_within(Some(timeout))
    }

    /// Synchronize, its waits for the GPU bounded by `timeout`.
    pub(crate) fn synchronize_within(&self, timeout: Option<Duration>) -> Result<(), SyncError> {
        self.parts
            .synchronizer
            .synchronize(self.submission(), self.completion(), timeout)
    }

    /// Whether everything submitted so far completed: the status of the
    /// newest command (a fence), proven with at most one load. Takes the lock
    /// briefly (as `hipStreamQuery` does) unless a completed marker already
    /// covers everything submitted. Work seen failed marks the queue failed
    /// (not the device) and answers [`Status::Failed`]; a query that needs
    /// a marker on a queue already failed answers [`SyncError::QueueFailed`].
    ///
    /// Never waits for the GPU, whatever the queue's timeout: where it
    /// needs a marker (work the layer did not publish may run) and the
    /// marker cannot be published at once (the tracker named a use to wait
    /// for, or the ring is full), the queue is busy and it answers
    /// [`Status::Pending`].
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// queue.launch_empty()?;
    /// assert_eq!(queue.query()?, sigretire_queue::tracker::Status::Pending);
    /// platform.sim().run_until_idle();
    /// assert_eq!(queue.query()?, sigretire_queue::tracker::Status::Complete);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn query(&self) -> Result<Status, SyncError> {
        query::query(self.submission(), self.completion())
    }

    /// The runtime moved the stream to another hardware queue: later
    /// commands are published on `queue`, and the tracker starts a new
    /// generation for it ([`Tracker::note_queue_change`](sigretire_tracker::Tracker::note_queue_change)). The stream stays
    /// in order: while the old queue's newest command may still run, the
    /// first packet on the new queue is a barrier-AND waiting for it (its
    /// signal pinned until that wait retires), so nothing on the new queue
    /// overtakes what was submitted before the move. Commands, events and
    /// waits from before the move keep working. Publishes nothing itself.
    ///
    /// The queue layer keeps its handle of the old queue (so a backend that
    /// destroys a queue with its last handle does not destroy this one
    /// under the stream's work) until a later move finds everything before
    /// it finished, or until the host queue is dropped.
    ///
    /// The new queue must share signal memory with the old one: the
    /// tracker's signals are what its packets complete.
    ///
    /// ```
    /// use sigretire_queue::sim::{HostFlag, Kernel};
    /// use sigretire_queue::CommandStatus;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let sim = platform.sim();
    /// let queue = device.default_queue();
    /// let flag = HostFlag::new();
    /// let before = queue.launch(sim.register_kernel(Kernel::SpinUntil(flag.clone())))?;
    /// queue.move_to(sim.create_queue(Default::default()).unwrap())?;
    /// let after = queue.launch_empty()?;
    /// sim.run_until_idle();
    /// assert_eq!(after.status(), CommandStatus::Pending, "ordered behind the old queue");
    /// flag.set();
    /// platform.run_while(|| queue.synchronize())?;
    /// assert!(before.status().is_done() && after.status().is_done());
    /// assert_eq!((queue.stats().queue_changes, queue.stats().order_waits), (1, 1));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`MoveError::ForeignSignalMemory`] for a queue whose packets cannot
    /// name the tracker's signals; [`MoveError::Tracker`] if the tracker
    /// cannot pin the old queue's newest command; [`MoveError::QueueFailed`]
    /// (the device then in the error state) if the stream's work on the old
    /// queue failed: work after it in stream order may not run as if it had
    /// not. A stream whose hardware queue failed is dropped, and a new one
    /// made.
    pub fn move_to(&self, queue: T::Queue) -> Result<(), MoveError> {
        move_queue::move_to(self.submission(), self.completion(), queue)
    }

    /// Makes this queue wait, on the GPU, for `event` (recorded on any queue
    /// of the same signal memory): `hipStreamWaitEvent`. Emits nothing when
    /// the event is already known complete, or was never recorded (CUDA's
    /// rule: there is nothing to wait for). The wait captures the event's
    /// newest recording now: recording the event again later
    /// ([`record`](Self::record)) does not change what this wait waits for.
    ///
    /// ```
    /// use sigretire_queue::CommandStatus;
    /// use sigretire_queue::sim::SimPlatform;
    ///
    /// let platform = SimPlatform::stepped();
    /// let device = platform.device(Default::default(), Default::default())?;
    /// let producer = platform.create_queue(&device, Default::default())?;
    /// let consumer = device.default_queue();
    /// let flag = sigretire_queue::sim::HostFlag::new();
    /// let spin = platform.sim().register_kernel(sigretire_queue::sim::Kernel::SpinUntil(flag.clone()));
    /// producer.launch(spin)?;
    /// let event = producer.record_event()?;
    /// consumer.wait_event(&event)?;
    /// let after = consumer.launch_empty()?;
    /// platform.sim().run_until_idle();
    /// assert_eq!(after.status(), CommandStatus::Pending); // waits for the producer
    /// flag.set();
    /// platform.sim().run_until_idle();
    /// assert_eq!(after.status(), CommandStatus::Complete);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn wait_event<P>(&self, event: &Event<P>) -> Result<CrossWait<T::Memory>, WaitEventError>
    where
        P: QueueTracker + Tracker<Memory = T::Memory>,
    {
        self.wait_events(&[event])
    }

    /// Makes this queue wait for every event in `events`, with barrier-AND
    /// packets of at most [`MAX_DEPENDENCIES_PER_PACKET`] dependencies,
    /// chained.
    ///
    /// An event whose work is known failed is refused:
    /// [`WaitEventError::QueueFailed`] names its queue, nothing is
    /// published, and this queue is not failed by the refusal (it keeps
    /// working). A wait published before its producer fails waits on the
    /// GPU for a signal that goes failed: the barrier fails, and with it
    /// this queue's hardware queue, so this queue fails as its own work
    /// then does. A failed waiting queue answers
    /// [`WaitEventError::QueueFailed`] with its own id.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// # let other = platform.create_queue(&device, Default::default())?;
    /// let a = other.record_event()?;
    /// let b = other.record_event()?;
    /// let wait = device.default_queue().wait_events(&[&a, &b])?;
    /// assert_eq!((wait.packets(), wait.dependencies()), (1, 2));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn wait_events<P>(
        &self,
        events: &[&Event<P>],
    ) -> Result<CrossWait<T::Memory>, WaitEventError>
    where
        P: QueueTracker + Tracker<Memory = T::Memory>,
    {
        self.submission().device().check_accepting()?;
        let (pins, elided) = cross_wait::pin_events(events, self.submission().memory())?;
        self.wait_pins(pins, elided)
    }

    /// Makes this queue wait for everything submitted to `producer` so far:
    /// a marker on the producer ([`Purpose::GpuWaiter`]) whose signal this
    /// queue waits on, pinned; or the producer's newest command itself
    /// where a marker would complete with it (a queue that runs only what
    /// it publishes). Emits nothing when the producer's newest command is
    /// already known complete.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// # let producer = platform.create_queue(&device, Default::default())?;
    /// producer.launch_empty()?;
    /// let wait = device.default_queue().wait_queue(&producer)?;
    /// assert_eq!((wait.packets(), wait.dependencies()), (1, 1));
    /// // The waiting packet waits for the launch's own signal: no marker.
    /// assert_eq!((producer.stats().markers, producer.stats().shared_completions), (0, 1));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn wait_queue<P>(
        &self,
        producer: &HostQueue<P>,
    ) -> Result<CrossWait<T::Memory>, WaitEventError>
    where
        P: QueueTracker + Tracker<Memory = T::Memory>,
    {
        let of_producer = producer.submission();
        if !of_producer
            .memory()
            .shares_signals_with(self.submission().memory())
        {
            return Err(WaitEventError::ForeignSignalMemory);
        }
        let pin = Completion::publish(producer.completion(), |held| {
            cross_wait::pin_producer(of_producer, held)
        })?;
        let (pins, elided) = match pin {
            Some(pin) => (VecDeque::from([pin]), 0),
            None => (VecDeque::new(), 1),
        };
        self.wait_pins(pins, elided)
    }

    /// Publishes the chained barrier-AND packets for `pins` and attaches
    /// each pin to the packet that waits on it.
    fn wait_pins(
        &self,
        mut pins: VecDeque<Pin<T::Memory>>,
        elided: usize,
    ) -> Result<CrossWait<T::Memory>, WaitEventError> {
        let submission = self.submission();
        add(&submission.stats().dependencies_elided, elided as u64);
        let dependencies = pins.len();
        let mut entries = Vec::with_capacity(dependencies.div_ceil(MAX_DEPENDENCIES_PER_PACKET));
        if !pins.is_empty() {
            Completion::publish(self.completion(), |held| {
                cross_wait::publish_waits(submission, held, &mut pins, &mut entries)
            })?;
        }
        let commands = entries
            .into_iter()
            .map(|entry| Submission::command(submission, entry))
            .collect();
        Ok(CrossWait::new(commands, dependencies, elided))
    }

    /// A snapshot of the queue's counters.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// device.default_queue().launch_empty()?;
    /// assert_eq!(device.default_queue().stats().commands, 1);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn stats(&self) -> QueueStats {
        self.submission().stats().snapshot()
    }

    /// Runs `f` on the tracker under the execution lock (for diagnostics:
    /// its stats, its census). Do not wait for the GPU inside `f`.
    ///
    /// ```
    /// use sigretire_queue::tracker::Tracker;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// device.default_queue().launch_empty()?;
    /// let uses = device.default_queue().with_tracker(|t| t.stats().uses);
    /// assert_eq!(uses, 1);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn with_tracker<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(self.submission().lock().tracker())
    }

    /// How many closed batches the completion thread still holds for this
    /// queue.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert_eq!(device.default_queue().batches_in_completion(), 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn batches_in_completion(&self) -> usize {
        self.completion().pending_jobs()
    }
}

impl<T: QueueTracker> core::fmt::Debug for HostQueue<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HostQueue")
            .field("id", &self.id())
            .field("config", self.submission().config())
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(all(test, feature = "sim", not(sigretire_loom)))]
mod tests {
    use crate::sim::SimPlatform;

    /// The cause of a warm queue's rare allocation on the threaded
    /// simulator: an event recorded right after a launch shares the
    /// launch's completion while it is pending, but publishes a marker of
    /// its own once the GPU finished it, and that marker took a status cell
    /// (which nothing reads: no handle is made for it). How many cells a
    /// loop of launches and events needed so depended on the GPU's timing,
    /// and a warm-up that never saw the GPU ahead fell one short. Here the
    /// stepped GPU is ahead only where the test says.
    #[test]
    fn an_events_marker_takes_no_status_cell() {
        let platform = SimPlatform::stepped();
        let device = platform
            .device(Default::default(), Default::default())
            .unwrap();
        let queue = device.default_queue();
        let round = |gpu_ahead: bool| {
            let shared = queue.stats().shared_completions;
            for _ in 0..16 {
                drop(queue.launch_empty().unwrap());
            }
            if gpu_ahead {
                platform.sim().run_until_idle();
            }
            let event = queue.record_event().unwrap();
            platform.run_while(|| event.synchronize()).unwrap();
            // Every command's batch completed and every handle is gone:
            // every cell the queue made is back.
            let marker = queue.stats().shared_completions == shared;
            (queue.submission().cells_kept(), marker)
        };
        assert_eq!(round(false), (16, false), "the event shares the launch's");
        assert_eq!(round(true), (16, true), "the event's own marker");
        assert_eq!(round(false), (16, false));
    }
}
