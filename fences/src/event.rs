//! Events: create, record (and record again), query, synchronize, elapsed
//! time.
//!
//! An event exists before it is recorded, as `hipEventCreate` makes one:
//! [`Event::new`] gives an event of a device that was never recorded (its
//! query and synchronize answer at once, as CUDA's do; a wait on it is a
//! no-op; an elapsed time refuses it). [`HostQueue::record`](crate::HostQueue::record)
//! records it on any queue of its device, and records it again later, on the
//! same queue or another: the event then stands for the newest recording.
//!
//! Re-recording takes the event by `&mut`: an [`Event`] value *is* one
//! recording, and a clone is a snapshot of that recording, not a second name
//! for a shared, mutable slot. That keeps every read of an event free of a
//! lock and of an allocation (a clone copies the recording's fields, taking
//! one more reference on its queue and its signal), and it gives CUDA's rule
//! for waits for free: a wait captures the recording the event holds at the
//! time of the call, and re-recording the event later replaces that value
//! only, never the wait's pin. A program that wants one event re-recorded
//! by one thread and read by others shares it as it would any `&mut` value
//! (a lock of its own), or hands clones out after each record.
//!
//! Recording publishes a marker (barrier bit, [`Purpose::Event`], timed on a
//! profiled queue), or, right after a command on a queue that runs only
//! what it publishes, shares that command's completion (a marker there
//! would complete when the command does: every packet is a fence), and
//! keeps a [`SignalRef`] to its signal, so the tracker
//! parks the signal rather than re-arm it while the event lives: queries and
//! waits from any thread need no lock, and the harvested timestamps stay
//! readable from host memory (elapsed time costs no PCIe read).
//!
//! Event synchronize completes the queue's submission batch through the
//! event's marker once the marker is done (CLR's CompleteSubmissionBatch):
//! a record/sync loop then never keeps hundreds of commands referenced
//! until the batch limit. Once that is done, synchronizing the event again
//! takes no lock at all.

use crate::callback::CallbackRunner;
use crate::completion::Completion;
use crate::cpu_wait::{Wakes, look};
use crate::device_state::DeviceState;
use crate::error::{ElapsedError, Fault, TimestampsError, WaitError};
use crate::publish::{Packet, QueueTracker, Step};
use crate::stats::bump;
use crate::status::CommandStatus;
use crate::submission::{CompletionPoint, Held, Submission};
use crate::sync::Arc;
use sigretire_tracker::{
    Purpose, SignalRef, Status, Ticket, Timestamps, WaitPolicy, Work, backend::SignalMemory,
};
use std::time::Duration;

/// An event (`hipEvent_t`): created on a device ([`Event::new`], never
/// recorded yet) or recorded on one of its queues
/// ([`HostQueue::record_event`](crate::HostQueue::record_event)): a marker
/// on that queue, or the completion of the command just before it.
///
/// ```
/// use sigretire_queue::sim::SimPlatform;
/// use sigretire_queue::tracker::Status;
///
/// let platform = SimPlatform::stepped();
/// let device = platform.device(Default::default(), Default::default())?;
/// let queue = device.default_queue();
/// let start = queue.record_event()?;
/// queue.launch_empty()?;
/// let stop = queue.record_event()?;
/// assert_eq!(stop.query(), Status::Pending);
/// platform.run_while(|| stop.synchronize())?;
/// assert_eq!(start.query(), Status::Complete);
/// assert!(start.elapsed_to(&stop)? > std::time::Duration::ZERO);
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
///
/// Created first and recorded (again) later, as `hipEventCreateWithFlags`
/// and `hipEventRecord` do:
///
/// ```
/// use sigretire_queue::{Event, EventFlags};
/// use sigretire_queue::tracker::Status;
/// # let platform = sigretire_queue::sim::SimPlatform::stepped();
/// # let device = platform.device(Default::default(), Default::default())?;
/// let queue = device.default_queue();
/// let mut event = Event::new(&device, EventFlags::default());
/// assert!(!event.is_recorded());
/// assert_eq!(event.query(), Status::Complete); // never recorded: nothing to wait for
/// queue.record(&mut event)?;
/// assert_eq!(event.query(), Status::Pending);
/// platform.run_while(|| event.synchronize())?;
/// queue.launch_empty()?;
/// queue.record(&mut event)?; // now the newer work
/// assert_eq!(event.query(), Status::Pending);
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
///
/// Cheap to clone (`hipEvent_t` is a handle too), with no allocation: a
/// clone takes one more reference on its queue and on the marker's signal
/// (or on its device, never recorded), answers the same, and each clone
/// stays valid when the others are dropped. A clone is a snapshot of the
/// recording: recording the event again (which takes it by `&mut`) moves
/// that event alone to the new point, and the clone keeps answering for
/// the old one.
pub struct Event<T: QueueTracker> {
    /// What it was created with: every recording of it uses these.
    flags: EventFlags,
    state: State<T>,
}

/// Where an event stands: never recorded, or its newest recording.
enum State<T: QueueTracker> {
    /// Created ([`Event::new`]) and not recorded yet: the device whose
    /// queues may record it.
    Created(Arc<DeviceState>, Arc<CallbackRunner>),
    /// Its newest recording.
    Recorded(Recording<T>),
}

// A clone is the recording's fields again: one more reference on the
// queue's completion and on the marker's signal (a hold the tracker counts,
// as a second event of the same point would take), no allocation, so that
// recording an event stays allocation-free once warm.
impl<T: QueueTracker> Clone for Event<T> {
    fn clone(&self) -> Self {
        let state = match &self.state {
            State::Created(device, callbacks) => State::Created(device.clone(), callbacks.clone()),
            State::Recorded(r) => State::Recorded(Recording {
                completion: r.completion.clone(),
                seq: r.seq,
                index: r.index,
                ticket: r.ticket,
                signal: r.signal.clone(),
                timed: r.timed,
            }),
        };
        Self {
            flags: self.flags,
            state,
        }
    }
}

/// What a recorded event holds (each clone the same): the point it was
/// recorded at.
struct Recording<T: QueueTracker> {
    /// Its queue's completion, and through it the queue's submission: one
    /// reference, which keeps the queue alive.
    completion: Arc<Completion<T>>,
    seq: u64,
    index: u64,
    ticket: Ticket,
    /// `None` only if the tracker knew the marker complete at record time.
    signal: Option<SignalRef<T::Memory>>,
    /// Whether this recording carries stamps: the event's
    /// [`EventFlags::timing`], where its queue profiles.
    timed: bool,
}

impl<T: QueueTracker> Recording<T> {
    /// The submission of the queue it was recorded on.
    fn submission(&self) -> &Arc<Submission<T>> {
        self.completion.submission()
    }
}

/// How an event is recorded, every time it is: given when it is created
/// ([`Event::new`], [`HostQueue::record_event_with`](crate::HostQueue::record_event_with))
/// and kept by every recording of it, in place of its queue's defaults: HIP's `hipEventDisableTiming` and
/// `hipEventBlockingSync`. The default is a timed, spinning event, as
/// [`record_event`](crate::HostQueue::record_event) records on a queue of
/// the default configuration.
///
/// ```
/// use sigretire_queue::EventFlags;
/// assert_eq!(EventFlags::default(), EventFlags { timing: true, blocking_sync: false });
/// assert!(!EventFlags::DISABLE_TIMING.timing);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventFlags {
    /// The event carries timestamps, where its queue can write them (the
    /// queue profiles, [`QueueConfig::profiling`](crate::QueueConfig)). On
    /// a queue that does not profile the hardware writes no stamps, so the
    /// event is recorded untimed whatever this says: its
    /// [`is_timed`](Event::is_timed) answers `false` and
    /// [`elapsed_to`](Event::elapsed_to) [`ElapsedError::NotTimed`], never
    /// a wrong time. `false` (`hipEventDisableTiming`) on a profiled queue
    /// records an untimed event: no stamps, none harvested.
    pub timing: bool,
    /// The event's [`synchronize`](Event::synchronize) sleeps until the GPU
    /// wakes it ([`WaitPolicy::blocking`](crate::WaitPolicy::blocking),
    /// `hipEventBlockingSync`), whatever its queue's policy; where the
    /// queue has no wake signal free it sleep-polls. Its queries are
    /// unchanged.
    pub blocking_sync: bool,
}

impl EventFlags {
    /// An untimed event (`hipEventDisableTiming`), spinning as its queue does.
    pub const DISABLE_TIMING: Self = Self {
        timing: false,
        blocking_sync: false,
    };
}

impl Default for EventFlags {
    fn default() -> Self {
        Self {
            timing: true,
            blocking_sync: false,
        }
    }
}

/// What recording an event found: the point it completes with, and a
/// reference to its signal (`None` only if it is known complete already).
pub(crate) type Recorded<M> = (CompletionPoint, Option<SignalRef<M>>);

/// Under the lock: the point an event recorded now completes with, and a
/// reference to its signal. Right after a command whose completion a marker
/// would share (the frontier says), that command; else a marker of its own
/// (timed work where `timed`: a marker writes no stamps).
pub(crate) fn record<T: QueueTracker>(
    held: &mut Held<'_, T>,
    submission: &Submission<T>,
    timed: bool,
) -> Result<Step<Recorded<T::Memory>>, Fault> {
    if let Some(newest) = held.share_newest(timed)? {
        // Right after a command: its completion is the event's.
        let signal = held.tracker().hold(&newest.ticket)?;
        bump(&submission.stats().shared_completions);
        return Ok(Step::Done((newest, signal)));
    }
    let work = if timed { Work::Empty } else { Work::Marker };
    let packet = Packet::new(work, Purpose::Event).timed(timed).hold();
    let published = match held.publish(packet)?.or_retry() {
        Ok(published) => published,
        Err(retry) => return Ok(retry),
    };
    let point = CompletionPoint {
        seq: published.entry.seq,
        index: published.entry.index,
        ticket: published.entry.ticket,
    };
    held.push(published.entry, true);
    Ok(Step::Done((point, published.signal)))
}

impl<T: QueueTracker> Event<T> {
    /// An event of the device whose state and callback thread these are,
    /// never recorded ([`Event::new`], which the device's module defines:
    /// this module sits below the device's).
    pub(crate) fn created(
        device: Arc<DeviceState>,
        callbacks: Arc<CallbackRunner>,
        flags: EventFlags,
    ) -> Self {
        Self {
            flags,
            state: State::Created(device, callbacks),
        }
    }

    /// The event of `point`, recorded on the queue of `completion` with
    /// `flags` (`timed`: they asked for stamps and the queue profiles).
    pub(crate) fn recorded(
        completion: Arc<Completion<T>>,
        point: CompletionPoint,
        signal: Option<SignalRef<T::Memory>>,
        timed: bool,
        flags: EventFlags,
    ) -> Self {
        Self {
            flags,
            state: State::Recorded(Recording {
                completion,
                seq: point.seq,
                index: point.index,
                ticket: point.ticket,
                signal,
                timed,
            }),
        }
    }

    /// Makes `recorded` (a fresh recording with this event's flags) the
    /// event's newest recording; the previous one is let go (a wait that
    /// pinned it keeps its pin).
    pub(crate) fn replace(&mut self, recorded: Event<T>) {
        debug_assert_eq!(self.flags, recorded.flags);
        self.state = recorded.state;
    }

    /// The device the event belongs to: the one it was created on, which
    /// every queue it is recorded on belongs to.
    pub(crate) fn device(&self) -> &Arc<DeviceState> {
        match &self.state {
            State::Created(device, _) => device,
            State::Recorded(recording) => recording.submission().device(),
        }
    }

    /// Its newest recording, if it was recorded.
    fn recording(&self) -> Option<&Recording<T>> {
        match &self.state {
            State::Created(..) => None,
            State::Recorded(recording) => Some(recording),
        }
    }

    /// Whether the event was recorded (by [`record_event`](crate::HostQueue::record_event),
    /// or by [`HostQueue::record`](crate::HostQueue::record) once at least).
    ///
    /// ```
    /// use sigretire_queue::{Event, EventFlags};
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let mut event = Event::new(&device, EventFlags::default());
    /// assert!(!event.is_recorded());
    /// device.default_queue().record(&mut event)?;
    /// assert!(event.is_recorded());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn is_recorded(&self) -> bool {
        self.recording().is_some()
    }

    /// The flags the event was created with, which every recording of it
    /// keeps.
    ///
    /// ```
    /// use sigretire_queue::EventFlags;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let event = device.default_queue().record_event_with(EventFlags::DISABLE_TIMING)?;
    /// assert_eq!(event.flags(), EventFlags::DISABLE_TIMING);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn flags(&self) -> EventFlags {
        self.flags
    }

    /// The queue the event was last recorded on (`None`: never recorded).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let event = device.default_queue().record_event()?;
    /// assert_eq!(event.queue_id(), Some(device.default_queue().id()));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn queue_id(&self) -> Option<u64> {
        Some(self.recording()?.submission().id())
    }

    /// The command number on its queue of the marker, or of the command
    /// whose completion the event shares (`None`: never recorded).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// assert_eq!(queue.record_event()?.seq(), Some(1), "a marker");
    /// queue.wait_event(&queue.record_event()?)?; // the same point: a wait on it
    /// queue.launch_empty()?;
    /// assert_eq!(queue.record_event()?.seq(), Some(3), "the launch after the wait");
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn seq(&self) -> Option<u64> {
        Some(self.recording()?.seq)
    }

    /// The AQL index of the event's marker packet (`None`: never recorded).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert_eq!(device.default_queue().record_event()?.aql_index(), Some(0));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn aql_index(&self) -> Option<u64> {
        Some(self.recording()?.index)
    }

    /// The tracker's ticket for the marker's use (`None`: never recorded).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let event = device.default_queue().record_event()?;
    /// assert_eq!(event.ticket().map(|ticket| ticket.seq()), Some(1));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn ticket(&self) -> Option<Ticket> {
        Some(self.recording()?.ticket)
    }

    /// Whether the event's recording carries timestamps: its flags ask for
    /// them ([`EventFlags::timing`]) and the queue it was recorded on
    /// profiles. `false` for an event never recorded.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert!(device.default_queue().record_event()?.is_timed());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn is_timed(&self) -> bool {
        self.recording().is_some_and(|recording| recording.timed)
    }

    /// Its recording's queue's submission, for a recorded event (the
    /// layer's own callers ask after [`known_status`](Self::known_status)).
    pub(crate) fn submission(&self) -> Option<&Arc<Submission<T>>> {
        Some(self.recording()?.submission())
    }

    /// Its recording's queue's completion, and the recording's position on
    /// it; `None` for an event never recorded.
    #[cfg_attr(sigretire_loom, allow(dead_code))]
    pub(crate) fn position(&self) -> Option<(&Arc<Completion<T>>, u64, Ticket)> {
        let recording = self.recording()?;
        Some((&recording.completion, recording.seq, recording.ticket))
    }

    /// The thread callbacks of the event's device run on.
    #[cfg_attr(sigretire_loom, allow(dead_code))]
    pub(crate) fn callbacks(&self) -> &Arc<CallbackRunner> {
        match &self.state {
            State::Created(_, callbacks) => callbacks,
            State::Recorded(recording) => recording.completion.watchers().callbacks(),
        }
    }

    /// What is known without reading signal memory (complete for an event
    /// never recorded).
    pub(crate) fn known_status(&self) -> Option<Status> {
        match self.recording() {
            Some(Recording {
                signal: Some(signal),
                ..
            }) => signal.known_status(),
            _ => Some(Status::Complete),
        }
    }

    /// The event's status (`hipEventQuery`), with no lock: no memory read
    /// once the tracker knows, else one load of the marker's signal. Never
    /// waits, whatever the event's flags or its queue's timeout. A failed
    /// marker fails its queue. An event never recorded is complete (as
    /// CUDA answers `cudaSuccess` for one).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let event = device.default_queue().record_event()?;
    /// assert_eq!(event.query(), sigretire_queue::tracker::Status::Pending);
    /// platform.sim().run_until_idle();
    /// assert_eq!(event.query(), sigretire_queue::tracker::Status::Complete);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn query(&self) -> Status {
        let Some(recording) = self.recording() else {
            return Status::Complete;
        };
        let status = match &recording.signal {
            Some(signal) => signal.status(),
            None => Status::Complete,
        };
        if status == Status::Failed {
            recording.submission().report_failure(&recording.ticket);
        }
        status
    }

    /// Waits for the event (`hipEventSynchronize`) without the queue's
    /// lock, then completes the queue's submission batch through the
    /// event's marker (taking the lock once, briefly). Returns without any
    /// lock when the marker already completed and its batch is done, or
    /// when the event was never recorded.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let kernel = queue.launch_empty()?;
    /// let event = queue.record_event()?;
    /// platform.run_while(|| event.synchronize())?;
    /// assert!(kernel.is_released()); // the batch through the marker completed
    /// let locks = queue.stats().lock_acquisitions;
    /// event.synchronize()?;
    /// assert_eq!(queue.stats().lock_acquisitions, locks);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn synchronize(&self) -> Result<(), WaitError> {
        let Some(recording) = self.recording() else {
            return Ok(());
        };
        self.synchronize_within(recording, recording.submission().config().wait_timeout)
    }

    /// Waits for the event as [`synchronize`](Self::synchronize) does, but
    /// gives up after `timeout` (this call's deadline, in place of the
    /// queue's [`wait_timeout`](crate::QueueConfig::wait_timeout)) with
    /// [`WaitError::TimedOut`]: the event has not completed, and may still;
    /// nothing was reported complete. Synchronize again, or
    /// [`query`](Self::query) later. A zero `timeout` looks once. An event
    /// never recorded returns at once.
    ///
    /// ```
    /// use sigretire_queue::WaitError;
    /// use std::time::Duration;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let event = device.default_queue().record_event()?;
    /// // Nobody runs the stepped GPU: the wait gives up after 1 ms.
    /// let timeout = Duration::from_millis(1);
    /// assert_eq!(event.synchronize_timeout(timeout), Err(WaitError::TimedOut(timeout)));
    /// platform.sim().run_until_idle();
    /// event.synchronize_timeout(timeout)?;
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn synchronize_timeout(&self, timeout: Duration) -> Result<(), WaitError> {
        let Some(recording) = self.recording() else {
            return Ok(());
        };
        self.synchronize_within(recording, Some(timeout))
    }

    /// Whether the event's synchronize sleeps whatever its queue's policy
    /// ([`EventFlags::blocking_sync`]).
    ///
    /// ```
    /// use sigretire_queue::EventFlags;
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let flags = EventFlags { blocking_sync: true, ..EventFlags::default() };
    /// assert!(device.default_queue().record_event_with(flags)?.is_blocking_sync());
    /// assert!(!device.default_queue().record_event()?.is_blocking_sync());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn is_blocking_sync(&self) -> bool {
        self.flags.blocking_sync
    }

    /// Synchronize `recording`, its waits for the GPU bounded by `timeout`.
    fn synchronize_within(
        &self,
        recording: &Recording<T>,
        timeout: Option<Duration>,
    ) -> Result<(), WaitError> {
        let submission = recording.submission();
        if self.known_status() == Some(Status::Complete)
            && submission.progress().taken_through() >= recording.seq
        {
            bump(&submission.stats().event_syncs_without_lock);
            return Ok(());
        }
        let ended = match &recording.signal {
            Some(signal) => {
                let wakes: &dyn Wakes<T::Memory> = &**submission;
                let mut wait = submission.use_wait();
                wait.settings.timeout = timeout;
                if self.flags.blocking_sync {
                    wait.settings.policy = WaitPolicy::blocking();
                }
                wait.run(&recording.ticket, || look(Ok(signal.status())), Some(wakes))?
            }
            None => Ok(CommandStatus::Complete),
        };
        if let Ok(outcome) = ended {
            // Released in the error state too, so nobody waiting on its
            // commands hangs; after a timeout the batch stays open. A wake
            // pin goes with the lock this takes.
            Self::complete_batch_through(recording, outcome);
        }
        // Unless no lock was taken, or the wake packet had not run then.
        submission.release_pending_wakes();
        submission.wait_result(ended, || submission.report_failure(&recording.ticket))
    }

    /// Completes the open batch's commands up to the recording's marker.
    fn complete_batch_through(recording: &Recording<T>, outcome: CommandStatus) {
        let progress = recording.submission().progress();
        if progress.taken_through() >= recording.seq {
            // Someone else took (and completes) that part of the batch.
            if outcome == CommandStatus::Complete {
                progress.note_synced(recording.seq);
            }
            return;
        }
        let batch = {
            let mut held = recording.submission().lock();
            let batch = held.take_batch_through(recording.seq);
            progress.note_taken(recording.seq);
            if outcome == CommandStatus::Complete {
                held.process_timing(&batch);
            }
            batch
        };
        recording
            .completion
            .finish(batch, recording.seq, outcome, false);
    }

    /// The marker's timestamps, harvested once into host memory: no PCIe
    /// read, and no lock once harvested. An event never recorded has none
    /// ([`TimestampsError::NotRecorded`]).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let event = device.default_queue().record_event()?;
    /// assert_eq!(event.timestamps(), Err(sigretire_queue::TimestampsError::NotReady));
    /// platform.sim().run_until_idle();
    /// let stamps = event.timestamps()?;
    /// assert!(stamps.end >= stamps.start);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn timestamps(&self) -> Result<Timestamps, TimestampsError> {
        let recording = self.recording().ok_or(TimestampsError::NotRecorded)?;
        if !recording.timed {
            return Err(TimestampsError::NotTimed);
        }
        let Some(signal) = &recording.signal else {
            // Known complete before a reference could be taken: only the
            // tracker may still have the stamps.
            return Self::harvest(recording);
        };
        // The status known (else loaded once), then the stamps of a
        // complete use: one look-up of the signal's cell for both.
        match signal.status_and_timestamps() {
            (Status::Pending, _) => Err(TimestampsError::NotReady),
            (Status::Failed, _) => Err(TimestampsError::EventFailed),
            (Status::Complete, Some(stamps)) => Ok(stamps),
            (Status::Complete, None) => Self::harvest(recording),
        }
    }

    /// Asks the tracker (under the lock) to harvest the recording's stamps.
    fn harvest(recording: &Recording<T>) -> Result<Timestamps, TimestampsError> {
        let stamps = recording
            .submission()
            .lock()
            .tracker()
            .timestamps(&recording.ticket)?;
        stamps.ok_or(TimestampsError::NotReady)
    }

    /// GPU time from this event to `stop` (`hipEventElapsedTime`), from the
    /// newest recordings' completion timestamps, in the clock they count in
    /// (the backend's: [`crate::tracker::backend::SignalMemory::timestamp_clock`]).
    /// Exact to the nanosecond below, never saturated. An event to itself
    /// (or to one that completed at the same tick) is zero.
    ///
    /// Errors: [`ElapsedError::DifferentDevices`] for events of two devices
    /// (their clocks are unrelated, as HIP and CUDA say too);
    /// [`ElapsedError::NotRecorded`] for an event never recorded (CUDA's
    /// `cudaErrorInvalidResourceHandle`); [`ElapsedError::NotTimed`] or
    /// [`ElapsedError::NotReady`] or [`ElapsedError::EventFailed`] for
    /// either event (as [`timestamps`](Self::timestamps));
    /// [`ElapsedError::StopBeforeStart`] when `stop` completed before this
    /// event (HIP would answer a negative time; a [`Duration`] cannot, and a
    /// silent 0 would hide the mistake).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let start = queue.record_event()?;
    /// queue.launch_empty()?;
    /// let stop = queue.record_event()?;
    /// platform.sim().run_until_idle();
    /// assert!(start.elapsed_to(&stop)? > std::time::Duration::ZERO);
    /// assert!(matches!(stop.elapsed_to(&start), Err(sigretire_queue::ElapsedError::StopBeforeStart { .. })));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn elapsed_to<P: QueueTracker>(&self, stop: &Event<P>) -> Result<Duration, ElapsedError> {
        if !Arc::ptr_eq(self.device(), stop.device()) {
            return Err(ElapsedError::DifferentDevices);
        }
        let (Some(first), Some(last)) = (self.recording(), stop.recording()) else {
            return Err(ElapsedError::NotRecorded);
        };
        // What can never be timed is refused before anything is read: a
        // caller would otherwise poll a pair that never answers.
        if !first.timed || !last.timed {
            return Err(ElapsedError::NotTimed);
        }
        let start = self.timestamps()?;
        let end = stop.timestamps()?;
        let Some(ticks) = end.end.checked_sub(start.end) else {
            return Err(ElapsedError::StopBeforeStart {
                ticks: start.end - end.end,
            });
        };
        let clock = first.submission().memory().timestamp_clock();
        Ok(clock.duration(ticks))
    }
}

impl<T: QueueTracker> core::fmt::Debug for Event<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut f = f.debug_struct("Event");
        f.field("flags", &self.flags);
        match self.recording() {
            None => f.field("recorded", &false),
            Some(recording) => f
                .field("queue", &recording.submission().id())
                .field("seq", &recording.seq)
                .field("aql_index", &recording.index)
                .field("timed", &recording.timed),
        };
        f.finish()
    }
}
