//! The interface both trackers implement, so the queue layer and every
//! benchmark run the retiring tracker and the baseline side by side.

use crate::backend::{HardwareQueue, Placement, QueueView, SignalMemory, Timestamps, Work};
use crate::error::{
    AcquireError, FailSubmissionError, ForeignTicket, PinError, PublishError, TimestampsError,
};
use crate::pin::{AttachError, Pin};
use crate::publication::Publication;
use crate::share::SignalRef;
use crate::stats::Stats;
use crate::ticket::{Generation, Request, Status, Ticket};
use crate::wait::Waiter;

/// A signal handed out for one use.
///
/// ```
/// use sigretire_tracker::{Placement, Request, Tracker};
/// use sigretire_sim::backend as sim_backend;
/// let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default()).unwrap();
/// let acquired = tracker.acquire(Request::packet(queue.reserve().unwrap())).unwrap();
/// assert_eq!(acquired.placement, Placement::Host);
/// assert_ne!(acquired.signal, 0); // the address of an amd_signal_t block
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acquired {
    /// The name of the use: ask about it, wait for it, hold or pin it.
    pub ticket: Ticket,
    /// The value for the packet's `completion_signal` field. The signal is
    /// armed and its arming is visible to the GPU: publish the packet as is.
    pub signal: u64,
    /// Where the signal lives.
    pub placement: Placement,
    /// How to publish the packet (or, for a use of several operations,
    /// each of its packets): the tracker's record of its index and barrier
    /// bit, and its signal.
    pub publication: Publication,
}

/// Where every signal a tracker created is now. A tracker that loses no
/// signal always has `in_flight + armed + parked + retired == created`.
///
/// ```
/// use sigretire_tracker::{Request, Tracker};
/// use sigretire_sim::backend as sim_backend;
/// let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default()).unwrap();
/// tracker.acquire(Request::packet(queue.reserve().unwrap())).unwrap();
/// let census = tracker.census();
/// assert_eq!((census.in_flight, census.armed, census.created), (1, 63, 64));
/// assert!(census.is_balanced());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// Signals serving a use in flight.
    pub in_flight: usize,
    /// Armed signals ready for the next uses.
    pub armed: usize,
    /// Signals set aside until their holders let go.
    pub parked: usize,
    /// Signals the tracker gave up for good (the baseline replaces shared
    /// signals with new ones; the retiring tracker never does).
    pub retired: usize,
    /// Signals ever created.
    pub created: usize,
    /// Pins this tracker keeps for its consumer uses (GPU waiters on other
    /// queues' signals), not yet released: 0 once every consumer retired or
    /// its queue drained.
    pub pins: usize,
}

impl Census {
    /// Whether every created signal is accounted for.
    pub const fn is_balanced(&self) -> bool {
        self.in_flight + self.armed + self.parked + self.retired == self.created
    }
}

/// A completion-signal tracker for one hardware queue.
///
/// The owner (the queue layer, under its submission lock) calls the `&mut`
/// methods; other threads use a [`Waiter`], a [`SignalRef`] or a [`Pin`],
/// which need no lock.
///
/// # Bad input
///
/// Both trackers answer it the same way, with each operation's own error
/// type, never a panic:
///
/// - a ticket this tracker did not issue as it is (another tracker's, a
///   zeroed one, one with a field changed or made up: tickets are plain
///   data, checked against the tracker's own state): [`ForeignTicket`],
///   from every method that takes one (`fail_queue_of` fails nothing);
/// - an AQL index that does not follow the previous use's in this queue
///   generation (repeated, lower, or 2^63 or more ahead, which is behind
///   modulo 2^64): [`AcquireError::AqlIndexOutOfOrder`], and nothing
///   changes;
/// - failing the submission of a use already known complete, failed or
///   retired, or one whose operations were all issued:
///   [`FailSubmissionError::InvalidState`];
/// - asking the timestamps of an untimed, pending or failed use: `Ok(None)`;
///   of a timed use whose stamps fell out of the history:
///   [`TimestampsError::Expired`];
/// - an out-of-range [`Config`](crate::Config):
///   [`CreateError::InvalidConfig`](crate::CreateError::InvalidConfig)
///   from the constructor.
///
/// A failed call (an allocation that could not be made, back-pressure)
/// leaves the tracker as it was: retrying is always safe.
///
/// Code written against the trait runs on any tracker (the workspace's
/// benchmarks run CLR's original design beside this crate's through it):
///
/// ```
/// use sigretire_tracker::{Config, Request, Status, Tracker};
/// use sigretire_sim::backend as sim_backend;
///
/// fn run<T: Tracker<Queue = sigretire_sim::Queue>>(tracker: &mut T, queue: &sigretire_sim::Queue) -> Status {
///     let index = queue.reserve().unwrap();
///     let acquired = tracker.acquire(Request::packet(index).barrier(true)).unwrap();
///     sim_backend::submit_barrier(queue, index, acquired.signal);
///     queue.run_until_idle();
///     tracker.query(&acquired.ticket).unwrap()
/// }
///
/// let (mut retiring, queue) = sim_backend::stepped_tracker(Config::default()).unwrap();
/// assert_eq!(run(&mut retiring, &queue), Status::Complete);
/// ```
pub trait Tracker: Send {
    /// Where the signals live.
    type Memory: SignalMemory;
    /// The hardware queue.
    type Queue: QueueView;

    /// Hands out an armed signal for one use. Never blocks on the GPU: when
    /// the ring is at its limit it returns [`AcquireError::Backpressure`] naming the
    /// use to wait for.
    fn acquire(&mut self, request: Request) -> Result<Acquired, AcquireError>;

    /// The use's status, proving retirement as cheaply as it can (no memory
    /// read when already known).
    fn query(&mut self, ticket: &Ticket) -> Result<Status, ForeignTicket>;

    /// What is known about the use without reading signal memory.
    fn known_status(&self, ticket: &Ticket) -> Result<Option<Status>, ForeignTicket>;

    /// A handle for lock-free waits and queries from other threads.
    fn waiter(&self) -> Waiter<Self::Memory>;

    /// A counted reference that keeps the use's signal from being re-armed
    /// (for an event or an async handler). `None` when the use is already
    /// known done (complete or failed): there is nothing left to hold, and
    /// [`query`](Self::query) says which.
    fn hold(&mut self, ticket: &Ticket) -> Result<Option<SignalRef<Self::Memory>>, ForeignTicket>;

    /// The signal another queue's packet may wait on, pinned until that
    /// consumer lets go. `None` when the use is already known complete: emit
    /// no dependency at all.
    fn pin(&mut self, ticket: &Ticket) -> Result<Option<Pin<Self::Memory>>, PinError>;

    /// Keeps `pin` until the use `consumer` (the packet that waits on it, on
    /// this tracker's queue) has retired, or its queue drained. Dropped at
    /// once if the consumer already retired. On error the pin comes back in
    /// the [`AttachError`], still pinned.
    fn attach(
        &mut self,
        consumer: &Ticket,
        pin: Pin<Self::Memory>,
    ) -> Result<(), AttachError<Self::Memory>>;

    /// Proves what it can with at most one load (fence probing: the newest
    /// fence the read index nominates), without re-arming anything. Returns
    /// whether it proved anything new.
    fn probe(&mut self) -> bool;

    /// [`probe`](Self::probe), then [`reclaim`](Self::reclaim). Returns the
    /// number of signals re-armed. With [`Config::probe_interval`](crate::Config)
    /// above 1, the probe is skipped until the read index has passed that
    /// many packets since the last one, so frequent polls still cost one load
    /// per batch. After a queue change it also loads, once each, the newest
    /// fence of every older generation that still has uses in flight it
    /// would prove (their queues' read indices are not the tracker's to
    /// see).
    fn poll(&mut self) -> usize;

    /// Re-arms retired signals, oldest use first, stopping at the first use
    /// not known retired. Reads no signal memory. Returns the number re-armed.
    fn reclaim(&mut self) -> usize;

    /// The use's timestamps, harvested once into host memory, where they
    /// stay after its signal serves later uses (for the last
    /// [`Config::stamp_history`](crate::Config::stamp_history) timed uses,
    /// and, whatever that says, for as long as the use is held: a held use
    /// answers the same on every call). `None` while the use is pending, if
    /// it was not timed, if it failed, or if nothing stamped it: a marker on
    /// a backend that stamps only the work it runs, or work on a queue that
    /// writes no stamps (profiling off, which leaves a pair of zeros: never
    /// reported as stamps).
    fn timestamps(&mut self, ticket: &Ticket) -> Result<Option<Timestamps>, TimestampsError>;

    /// Asks, after the use was acquired, for its timestamps to be
    /// harvested: an event that shares the completion of the command before
    /// it, on a queue whose packets are all stamped (a profiled AQL queue,
    /// the kernels a CUDA queue launches). Returns the use's ticket marked
    /// timed, for [`timestamps`](Self::timestamps); `None` when its stamps
    /// can no longer be had (it retired untimed, and its signal may serve a
    /// later use already), so the caller times a use of its own.
    ///
    /// Costs no signal read: it only marks the use, which the tracker then
    /// harvests as it would a use acquired timed.
    fn time(&mut self, ticket: &Ticket) -> Result<Option<Ticket>, ForeignTicket>;

    /// The runtime moved the stream to another hardware queue: a new
    /// generation. The previous queue's uses keep retiring by their own
    /// generation's fences ([`poll`](Self::poll) probes the newest fence of
    /// each older generation with pending uses, one load each), never by
    /// the new queue's; a failure of the previous queue is
    /// [`fail_queue_of`](Self::fail_queue_of)'s.
    fn note_queue_change(&mut self, queue: Self::Queue);

    /// The queue the tracker watches now is known idle: every packet
    /// submitted to it so far completed. Retires the uses of the current
    /// generation's AQL packets, and releases the pins they held as
    /// consumers. Says nothing about an older generation's uses (they ran
    /// on another hardware queue) or a copy engine's.
    fn note_drained(&mut self);

    /// The queue the tracker watches reported an error: every pending use
    /// of the current generation fails (once), each settled by a load of
    /// its signal so that none that completed is reported failed. An older
    /// generation's uses ran on another hardware queue and do not fail
    /// (see [`fail_queue_of`](Self::fail_queue_of)); nor does a copy
    /// engine's use. Returns how many failed now. A use failed while its
    /// signal still reads armed is re-armed only once the signal shows the
    /// failure (or its completion): a processor writes the failure into
    /// the packets published behind the one that failed, some of which it
    /// may not have reached yet.
    fn fail_queue(&mut self) -> usize;

    /// The hardware queue that `ticket`'s use was published on reported an
    /// error: every pending use of that use's generation fails (once), as
    /// [`fail_queue`](Self::fail_queue) fails the current one's, and none
    /// of another generation (whose packets run on a healthy queue and
    /// still name their signals). A ticket of the current generation fails
    /// what `fail_queue` fails. Returns how many failed now: 0 when none of
    /// that generation's uses is pending any more, and for a ticket that
    /// names no hardware queue of this tracker's (another tracker's, or a
    /// pending copy-engine use's: fail that one with
    /// [`fail_submission`](Self::fail_submission)).
    ///
    /// ```
    /// use sigretire_tracker::{Request, Status, Tracker};
    /// use sigretire_sim::backend as sim_backend;
    ///
    /// let (mut tracker, old) = sim_backend::stepped_tracker(Default::default())?;
    /// let index = old.reserve()?;
    /// let before = tracker.acquire(Request::packet(index).barrier(true))?;
    /// sim_backend::submit_barrier(&old, index, before.signal);
    /// let new = old.sim().create_queue(Default::default())?;
    /// tracker.note_queue_change(new.clone());
    /// let index = new.reserve()?;
    /// let after = tracker.acquire(Request::packet(index).barrier(true))?;
    /// sim_backend::submit_barrier(&new, index, after.signal);
    ///
    /// old.fail(); // the previous hardware queue fails
    /// assert_eq!(tracker.fail_queue_of(&before.ticket), 1);
    /// assert_eq!(tracker.query(&before.ticket)?, Status::Failed);
    /// new.run_until_idle(); // the current one is healthy
    /// assert_eq!(tracker.query(&after.ticket)?, Status::Complete);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn fail_queue_of(&mut self, ticket: &Ticket) -> usize;

    /// The submission of the use failed after issuing `issued` of its
    /// operations: the use fails, and its signal is reset only once the
    /// issued part has finished.
    fn fail_submission(&mut self, ticket: &Ticket, issued: u32) -> Result<(), FailSubmissionError>;

    /// Whether `publication` may be published on the queue the tracker
    /// watches now: one this tracker made in its current generation, or
    /// one no tracker made ([`Publication::unsignalled`],
    /// [`Publication::untracked`]). A use acquired before a queue change
    /// reserved its index on the previous hardware queue: published on the
    /// new one it would fill another slot, leave its own unwritten (the old
    /// queue stalls there) and complete a use that never ran there
    /// ([`PublishError::Stale`]). Another tracker's is
    /// [`PublishError::Foreign`]. A copy-engine use's goes to its copy
    /// engine, whatever the generation. Reads nothing but the publication.
    fn check_publication(&self, publication: &Publication) -> Result<(), PublishError>;

    /// The publication [`acquire`](Self::acquire) handed out with the use
    /// `ticket` names, for a caller that keeps only tickets (the C ABI):
    /// while the use is in flight and may still be published. Refuses a
    /// ticket this tracker did not issue ([`PublishError::Ticket`]), a use
    /// known complete or failed, or retired ([`PublishError::Settled`]),
    /// and an AQL use acquired before a queue change
    /// ([`PublishError::Stale`]: its index was reserved on the previous
    /// hardware queue). The last is decided by the use's sequence number,
    /// not by comparing generation numbers, so it holds however many queue
    /// changes came between. Reads nothing but host memory.
    ///
    /// ```
    /// use sigretire_tracker::{PublishError, Request, Tracker, Work};
    /// use sigretire_sim::backend as sim_backend;
    ///
    /// let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default())?;
    /// let index = queue.reserve()?;
    /// let acquired = tracker.acquire(Request::packet(index).barrier(true))?;
    /// assert_eq!(tracker.publication(&acquired.ticket)?, acquired.publication);
    /// tracker.publish(acquired.publication, Work::Kernel(0))?;
    /// queue.run_until_idle();
    /// tracker.poll();
    /// assert!(matches!(tracker.publication(&acquired.ticket), Err(PublishError::Settled { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Both trackers of this crate answer it; for a tracker of another
    /// crate that keeps no publications, the default refuses every ticket
    /// ([`QueueError::Unsupported`](crate::backend::QueueError::Unsupported)).
    fn publication(&self, ticket: &Ticket) -> Result<Publication, PublishError> {
        Err(PublishError::Queue(
            crate::backend::QueueError::Unsupported(format!(
                "this tracker keeps no publication for use {}: publish the one acquire handed out",
                ticket.seq
            )),
        ))
    }

    /// Publishes `work` on the queue the tracker watches, as `publication`
    /// says ([`HardwareQueue::publish`]), after
    /// [`check_publication`](Self::check_publication): the checked path
    /// for a publication the tracker made. On error nothing was written.
    ///
    /// ```
    /// use sigretire_tracker::{PublishError, Request, Tracker, Work};
    /// use sigretire_sim::backend as sim_backend;
    ///
    /// let (mut tracker, old) = sim_backend::stepped_tracker(Default::default())?;
    /// let index = old.reserve()?;
    /// let acquired = tracker.acquire(Request::packet(index).barrier(true))?;
    /// tracker.note_queue_change(old.sim().create_queue(Default::default())?);
    /// let refused = tracker.publish(acquired.publication, Work::Kernel(0));
    /// assert!(matches!(refused, Err(PublishError::Stale { .. })));
    /// // Where its index was reserved, it still goes.
    /// sigretire_tracker::backend::HardwareQueue::publish(&old, acquired.publication, Work::Kernel(0))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn publish(&self, publication: Publication, work: Work<'_>) -> Result<(), PublishError>
    where
        Self::Queue: HardwareQueue,
    {
        self.check_publication(&publication)?;
        Ok(self.queue().publish(publication, work)?)
    }

    /// The queue the tracker watches.
    fn queue(&self) -> &Self::Queue;

    /// The current queue generation.
    fn generation(&self) -> Generation;

    /// A snapshot of every counter.
    fn stats(&self) -> Stats;

    /// Where every signal is.
    fn census(&self) -> Census;

    /// Whether a use in flight may still run: one not known done whose own
    /// signal still says its packets have not finished (one load per such
    /// use; none once the tracker knows). What a queue layer asks before
    /// it lets go of a tracker whose uses may still run on a hardware
    /// queue other than its current one, pinning other trackers' signals
    /// and writing their own: a use whose hardware queue failed and never
    /// wrote its signal counts as running, so such a tracker is kept
    /// rather than a signal re-armed under a packet.
    ///
    /// ```
    /// use sigretire_tracker::{Request, Tracker};
    /// use sigretire_sim::backend as sim_backend;
    /// let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default()).unwrap();
    /// let index = queue.reserve().unwrap();
    /// let acquired = tracker.acquire(Request::packet(index)).unwrap();
    /// sim_backend::submit_barrier(&queue, index, acquired.signal);
    /// assert!(tracker.any_use_running());
    /// queue.run_until_idle();
    /// assert!(!tracker.any_use_running());
    /// ```
    fn any_use_running(&mut self) -> bool;
}
