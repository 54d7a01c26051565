//! Events: record, query, synchronize, elapsed time.
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

use crate::completion::Completion;
use crate::cpu_wait::{Wakes, look};
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

/// A recorded event (`hipEventRecord`): a marker on its queue.
///
/// ```
/// use sigretire_queue::sim::SimPlatform;
/// use sigretire_queue::tracker::Status;
///
/// let platform = SimPlatform::stepped();
/// let device = platform.device(Default::default(), Default::default())?;
/// let queue = device.default_queue();
/// let start = queue.record_event()?;
/// queue.launch(0)?;
/// let stop = queue.record_event()?;
/// assert_eq!(stop.query(), Status::Pending);
/// platform.run_while(|| stop.synchronize())?;
/// assert_eq!(start.query(), Status::Complete);
/// assert!(start.elapsed_to(&stop)? > std::time::Duration::ZERO);
/// # Ok::<(), sigretire_queue::Error>(())
/// ```
///
/// Cheap to clone (`hipEvent_t` is a handle too), with no allocation: a
/// clone takes one more reference on its queue and on the marker's signal,
/// answers the same, and each clone stays valid when the others are
/// dropped.
pub struct Event<T: QueueTracker> {
    inner: Recording<T>,
}

// A clone is the recording's fields again: one more reference on the
// queue's completion and on the marker's signal (a hold the tracker counts,
// as a second event of the same point would take), no allocation, so that
// recording an event stays allocation-free once warm.
impl<T: QueueTracker> Clone for Event<T> {
    fn clone(&self) -> Self {
        let r = &self.inner;
        Self {
            inner: Recording {
                completion: r.completion.clone(),
                seq: r.seq,
                index: r.index,
                ticket: r.ticket,
                signal: r.signal.clone(),
                timed: r.timed,
                blocking_sync: r.blocking_sync,
            },
        }
    }
}

/// What an event holds (each clone the same): the point it was recorded at.
struct Recording<T: QueueTracker> {
    /// Its queue's completion, and through it the queue's submission: one
    /// reference, which keeps the queue alive.
    completion: Arc<Completion<T>>,
    seq: u64,
    index: u64,
    ticket: Ticket,
    /// `None` only if the tracker knew the marker complete at record time.
    signal: Option<SignalRef<T::Memory>>,
    timed: bool,
    /// Its synchronize sleeps whatever its queue's policy
    /// ([`EventFlags::blocking_sync`]).
    blocking_sync: bool,
}

/// How an event is recorded ([`HostQueue::record_event_with`](crate::HostQueue::record_event_with)),
/// in place of its queue's defaults: HIP's `hipEventDisableTiming` and
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
    /// The event of `point`, recorded on the queue of `submission`.
    pub(crate) fn new(
        completion: Arc<Completion<T>>,
        point: CompletionPoint,
        signal: Option<SignalRef<T::Memory>>,
        timed: bool,
        blocking_sync: bool,
    ) -> Self {
        Self {
            inner: Recording {
                completion,
                seq: point.seq,
                index: point.index,
                ticket: point.ticket,
                signal,
                timed,
                blocking_sync,
            },
        }
    }

    /// The queue the event was recorded on.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let event = device.default_queue().record_event()?;
    /// assert_eq!(event.queue_id(), device.default_queue().id());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn queue_id(&self) -> u64 {
        self.submission().id()
    }

    /// The command number on its queue of the marker, or of the command
    /// whose completion the event shares.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// assert_eq!(queue.record_event()?.seq(), 1, "a marker");
    /// queue.wait_event(&queue.record_event()?)?; // the same point: a wait on it
    /// queue.launch(0)?;
    /// assert_eq!(queue.record_event()?.seq(), 3, "the launch after the wait");
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn seq(&self) -> u64 {
        self.inner.seq
    }

    /// The AQL index of the event's marker packet.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert_eq!(device.default_queue().record_event()?.aql_index(), 0);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn aql_index(&self) -> u64 {
        self.inner.index
    }

    /// The tracker's ticket for the marker's use.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert_eq!(device.default_queue().record_event()?.ticket().seq(), 1);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn ticket(&self) -> Ticket {
        self.inner.ticket
    }

    /// Whether the event carries timestamps (its queue profiles).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// assert!(device.default_queue().record_event()?.is_timed());
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn is_timed(&self) -> bool {
        self.inner.timed
    }

    /// Its queue's completion, and the event's position on it.
    #[cfg_attr(sigretire_loom, allow(dead_code))]
    pub(crate) fn position(&self) -> (&Arc<Completion<T>>, u64, Ticket) {
        (&self.inner.completion, self.inner.seq, self.inner.ticket)
    }

    /// The submission of the queue it was recorded on.
    pub(crate) fn submission(&self) -> &Arc<Submission<T>> {
        self.inner.completion.submission()
    }

    /// What is known without reading signal memory.
    pub(crate) fn known_status(&self) -> Option<Status> {
        match &self.inner.signal {
            Some(signal) => signal.known_status(),
            None => Some(Status::Complete),
        }
    }

    /// The event's status (`hipEventQuery`), with no lock: no memory read
    /// once the tracker knows, else one load of the marker's signal. Never
    /// waits, whatever the event's flags or its queue's timeout. A failed
    /// marker puts the device in the error state.
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
        let status = match &self.inner.signal {
            Some(signal) => signal.status(),
            None => Status::Complete,
        };
        if status == Status::Failed {
            self.submission().report_failure(&self.inner.ticket);
        }
        status
    }

    /// Waits for the event (`hipEventSynchronize`) without the queue's
    /// lock, then completes the queue's submission batch through the
    /// event's marker (taking the lock once, briefly). Returns without any
    /// lock when the marker already completed and its batch is done.
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let kernel = queue.launch(0)?;
    /// let event = queue.record_event()?;
    /// platform.run_while(|| event.synchronize())?;
    /// assert!(kernel.is_released()); // the batch through the marker completed
    /// let locks = queue.stats().lock_acquisitions;
    /// event.synchronize()?;
    /// assert_eq!(queue.stats().lock_acquisitions, locks);
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn synchronize(&self) -> Result<(), WaitError> {
        self.synchronize_within(self.submission().config().wait_timeout)
    }

    /// Waits for the event as [`synchronize`](Self::synchronize) does, but
    /// gives up after `timeout` (this call's deadline, in place of the
    /// queue's [`wait_timeout`](crate::QueueConfig::wait_timeout)) with
    /// [`WaitError::TimedOut`]: the event has not completed, and may still;
    /// nothing was reported complete. Synchronize again, or
    /// [`query`](Self::query) later. A zero `timeout` looks once.
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
        self.synchronize_within(Some(timeout))
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
        self.inner.blocking_sync
    }

    /// Synchronize, its waits for the GPU bounded by `timeout`.
    fn synchronize_within(&self, timeout: Option<Duration>) -> Result<(), WaitError> {
        let submission = self.submission();
        if self.known_status() == Some(Status::Complete)
            && submission.progress().taken_through() >= self.inner.seq
        {
            bump(&submission.stats().event_syncs_without_lock);
            return Ok(());
        }
        let ended = match &self.inner.signal {
            Some(signal) => {
                let wakes: &dyn Wakes<T::Memory> = &**submission;
                let mut wait = submission.use_wait();
                wait.settings.timeout = timeout;
                if self.inner.blocking_sync {
                    wait.settings.policy = WaitPolicy::blocking();
                }
                wait.run(
                    &self.inner.ticket,
                    || look(Ok(signal.status())),
                    Some(wakes),
                )?
            }
            None => Ok(CommandStatus::Complete),
        };
        if let Ok(outcome) = ended {
            // Released in the error state too, so nobody waiting on its
            // commands hangs; after a timeout the batch stays open. A wake
            // pin goes with the lock this takes.
            self.complete_batch_through(outcome);
        }
        // Unless no lock was taken, or the wake packet had not run then.
        submission.release_pending_wakes();
        submission.wait_result(ended, || submission.report_failure(&self.inner.ticket))
    }

    /// Completes the open batch's commands up to the event's marker.
    fn complete_batch_through(&self, outcome: CommandStatus) {
        let progress = self.submission().progress();
        if progress.taken_through() >= self.inner.seq {
            // Someone else took (and completes) that part of the batch.
            if outcome == CommandStatus::Complete {
                progress.note_synced(self.inner.seq);
            }
            return;
        }
        let batch = {
            let mut held = self.submission().lock();
            let batch = held.take_batch_through(self.inner.seq);
            progress.note_taken(self.inner.seq);
            if outcome == CommandStatus::Complete {
                held.process_timing(&batch);
            }
            batch
        };
        self.inner
            .completion
            .finish(batch, self.inner.seq, outcome, false);
    }

    /// The marker's timestamps, harvested once into host memory: no PCIe
    /// read, and no lock once harvested.
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
        if !self.inner.timed {
            return Err(TimestampsError::NotTimed);
        }
        let Some(signal) = &self.inner.signal else {
            // Known complete before a reference could be taken: only the
            // tracker may still have the stamps.
            return self.harvest();
        };
        // The status known (else loaded once), then the stamps of a
        // complete use: one look-up of the signal's cell for both.
        match signal.status_and_timestamps() {
            (Status::Pending, _) => Err(TimestampsError::NotReady),
            (Status::Failed, _) => Err(TimestampsError::EventFailed),
            (Status::Complete, Some(stamps)) => Ok(stamps),
            (Status::Complete, None) => self.harvest(),
        }
    }

    /// Asks the tracker (under the lock) to harvest the stamps.
    fn harvest(&self) -> Result<Timestamps, TimestampsError> {
        let stamps = self
            .submission()
            .lock()
            .tracker()
            .timestamps(&self.inner.ticket)?;
        stamps.ok_or(TimestampsError::NotReady)
    }

    /// GPU time from this event to `stop` (`hipEventElapsedTime`), from the
    /// markers' completion timestamps, in the clock they count in (the
    /// backend's: [`crate::tracker::backend::SignalMemory::timestamp_clock`]). Exact to the
    /// nanosecond below, never saturated. An event to itself (or to one
    /// that completed at the same tick) is zero.
    ///
    /// Errors: [`ElapsedError::DifferentDevices`] for events of two devices
    /// (their clocks are unrelated, as HIP and CUDA say too);
    /// [`ElapsedError::NotTimed`] or [`ElapsedError::NotReady`] or
    /// [`ElapsedError::EventFailed`] for either event (as
    /// [`timestamps`](Self::timestamps)); [`ElapsedError::StopBeforeStart`] when
    /// `stop` completed before this event (HIP would answer a negative time;
    /// a [`Duration`] cannot, and a silent 0 would hide the mistake).
    ///
    /// ```
    /// # let platform = sigretire_queue::sim::SimPlatform::stepped();
    /// # let device = platform.device(Default::default(), Default::default())?;
    /// let queue = device.default_queue();
    /// let start = queue.record_event()?;
    /// queue.launch(0)?;
    /// let stop = queue.record_event()?;
    /// platform.sim().run_until_idle();
    /// assert!(start.elapsed_to(&stop)? > std::time::Duration::ZERO);
    /// assert!(matches!(stop.elapsed_to(&start), Err(sigretire_queue::ElapsedError::StopBeforeStart { .. })));
    /// # Ok::<(), sigretire_queue::Error>(())
    /// ```
    pub fn elapsed_to<P: QueueTracker>(&self, stop: &Event<P>) -> Result<Duration, ElapsedError> {
        if !Arc::ptr_eq(self.submission().device(), stop.submission().device()) {
            return Err(ElapsedError::DifferentDevices);
        }
        // What can never be timed is refused before anything is read: a
        // caller would otherwise poll a pair that never answers.
        if !self.inner.timed || !stop.inner.timed {
            return Err(ElapsedError::NotTimed);
        }
        let start = self.timestamps()?;
        let end = stop.timestamps()?;
        let Some(ticks) = end.end.checked_sub(start.end) else {
            return Err(ElapsedError::StopBeforeStart {
                ticks: start.end - end.end,
            });
        };
        let clock = self.submission().memory().timestamp_clock();
        Ok(clock.duration(ticks))
    }
}

impl<T: QueueTracker> core::fmt::Debug for Event<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Event")
            .field("queue", &self.submission().id())
            .field("seq", &self.inner.seq)
            .field("aql_index", &self.inner.index)
            .field("timed", &self.inner.timed)
            .finish()
    }
}
