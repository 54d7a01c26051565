//! The tracker's errors, one type per operation (what `acquire` can fail
//! with is not what `query` can), each variant saying what the caller can
//! do about it. [`Error`] is their union, for callers that pass any of them
//! on with `?`.

use crate::backend::{AllocError, QueueError};
use crate::publication::Publication;
use crate::ticket::{Generation, Status, Ticket};
use std::time::Duration;

/// The ticket is not one this tracker issued as it is: another tracker's,
/// or one whose fields were changed or made up (a ticket is plain data, so
/// the tracker checks each against its own state). The one error every
/// method that takes a ticket can fail with.
///
/// ```
/// use sigretire_tracker::{ForeignTicket, Request, Tracker};
/// use sigretire_sim::backend as sim_backend;
/// let (mut one, queue) = sim_backend::stepped_tracker(Default::default()).unwrap();
/// let (mut other, _) = sim_backend::stepped_tracker(Default::default()).unwrap();
/// let ticket = one.acquire(Request::packet(queue.reserve().unwrap())).unwrap().ticket;
/// assert_eq!(other.query(&ticket), Err(ForeignTicket));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error(
    "the ticket is not one this tracker issued as it is: another tracker's, or altered or made up"
)]
pub struct ForeignTicket;

/// A backend broke its contract ([`SignalMemory`](crate::backend::SignalMemory)):
/// not the caller's mistake, and not a shortage. Report it to the backend's
/// authors.
///
/// ```
/// let error = sigretire_tracker::BackendError("allocate returned 3 signals for 4".into());
/// assert!(error.to_string().contains("backend"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("the signal backend misbehaved: {0}")]
pub struct BackendError(pub String);

/// A configuration value is out of range ([`Config::validate`](crate::Config::validate)).
///
/// ```
/// use sigretire_tracker::Config;
/// let error = Config { initial_size: 0, ..Config::default() }.validate().unwrap_err();
/// assert!(error.to_string().contains("initial_size"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("invalid tracker configuration: {0}")]
pub struct InvalidConfig(pub &'static str);

/// Why a tracker could not be created.
///
/// ```
/// use sigretire_tracker::{Config, CreateError, RetiringTracker};
/// use sigretire_sim::backend as sim_backend;
/// let (sim, queue) = sim_backend::stepped_queue();
/// let memory = std::sync::Arc::new(sim_backend::SimMemory::new(sim, queue.agent()));
/// let bad = Config { initial_size: 0, ..Config::default() };
/// let err = RetiringTracker::new(memory, queue, bad).err().unwrap();
/// assert!(matches!(err, CreateError::InvalidConfig(_)));
/// assert!(err.to_string().contains("initial_size"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CreateError {
    /// A configuration value is out of range.
    #[error(transparent)]
    InvalidConfig(#[from] InvalidConfig),
    /// The first signals could not be allocated.
    #[error(transparent)]
    OutOfSignals(#[from] AllocError),
    /// The backend broke its contract.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// Why [`Tracker::acquire`](crate::Tracker::acquire) handed out no signal.
/// Nothing changed: retrying is safe.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AcquireError {
    /// Every slot up to the growth limit holds a use that has not retired.
    /// The tracker does not block: wait for `wait_for` outside your locks
    /// (its completion frees at least one slot), then retry.
    #[error(
        "signal ring full: {in_flight} uses in flight (the growth limit); wait for use {} outside your locks, then retry",
        wait_for.seq()
    )]
    Backpressure {
        /// The use whose completion frees room (a fence when one is near the front).
        wait_for: Ticket,
        /// Uses in flight.
        in_flight: usize,
    },
    /// Within one queue generation, AQL indices must increase: fence proofs
    /// depend on it. A new hardware queue needs
    /// [`Tracker::note_queue_change`](crate::Tracker::note_queue_change).
    #[error(
        "AQL index {index} does not follow {previous}, the previous use's index in this queue generation; call note_queue_change when the queue changes"
    )]
    AqlIndexOutOfOrder {
        /// The index given.
        index: u64,
        /// The previous use's index.
        previous: u64,
    },
    /// Every use in flight is done, but their signals are held (events,
    /// pins, handlers) and no spare could be allocated to take their
    /// places: let go of some references, or free memory, then retry.
    #[error(
        "every use in flight is done but {held} of their signals are still held and no spare could be allocated: drop held references (events, pins) or free memory, then retry"
    )]
    SignalsHeld {
        /// Uses in flight whose signals are held.
        held: usize,
    },
    /// A signal the use needs could not be allocated (the baseline's
    /// replacement of a held signal).
    #[error(transparent)]
    OutOfSignals(#[from] AllocError),
    /// The backend broke its contract.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// Why [`Tracker::pin`](crate::Tracker::pin) lent no signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// The ticket is another tracker's.
    #[error(transparent)]
    Foreign(#[from] ForeignTicket),
    /// The use failed: its packet will never complete, so nothing may wait
    /// on it.
    #[error("use {seq} failed: nothing can wait on it")]
    Failed {
        /// The use.
        seq: u64,
    },
}

/// Why [`Tracker::fail_submission`](crate::Tracker::fail_submission) refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FailSubmissionError {
    /// The ticket is another tracker's.
    #[error(transparent)]
    Foreign(#[from] ForeignTicket),
    /// The use is not in a state whose submission can fail: already known
    /// complete, failed or retired, or every operation was issued.
    #[error("use {seq} cannot fail its submission: it is already {state}")]
    InvalidState {
        /// The use.
        seq: u64,
        /// What it is: "complete", "failed", "retired" or "fully issued".
        state: &'static str,
    },
}

/// Why [`Tracker::timestamps`](crate::Tracker::timestamps) has no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimestampsError {
    /// The ticket is another tracker's.
    #[error(transparent)]
    Foreign(#[from] ForeignTicket),
    /// The use's timestamps were harvested, but more than
    /// [`Config::stamp_history`](crate::Config::stamp_history) timed uses
    /// followed it and its entry was dropped. Hold the use (an event's
    /// reference) to keep its stamps for as long as you need them.
    #[error(
        "the timestamps of use {seq} are no longer kept: more than Config::stamp_history timed uses followed it"
    )]
    Expired {
        /// The use.
        seq: u64,
    },
}

/// Why [`Tracker::publish`](crate::Tracker::publish) published nothing.
/// Nothing was written to any queue.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    /// The publication was made by another tracker: its slot and its
    /// signal are that tracker's.
    #[error(
        "the publication (AQL index {index}) was made by another tracker: publish it through that tracker, on its queue"
    )]
    Foreign {
        /// Its AQL index.
        index: u64,
    },
    /// The publication was made for an earlier queue generation: its slot
    /// was reserved on the hardware queue the tracker watched then, not on
    /// the one it watches now, where its index means another slot.
    #[error(
        "the publication of AQL index {index} was made for queue generation {}, but the tracker now watches generation {} (a queue change came between): publish it on the hardware queue it was reserved on, or fail its use (Tracker::fail_submission) and fill that queue's slot with an unsignalled packet",
        made.value(),
        current.value()
    )]
    Stale {
        /// Its AQL index, reserved on the earlier queue.
        index: u64,
        /// The generation it was made for.
        made: Generation,
        /// The tracker's generation now.
        current: Generation,
    },
    /// The queue refused the packet.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The ticket is not one this tracker issued
    /// ([`Tracker::publication`](crate::Tracker::publication)).
    #[error(transparent)]
    Ticket(#[from] ForeignTicket),
    /// The use is known complete or failed, or retired already: nothing of
    /// it is published (again)
    /// ([`Tracker::publication`](crate::Tracker::publication)).
    #[error("use {seq} is {status:?} already: nothing of it can be published (again)")]
    Settled {
        /// The use.
        seq: u64,
        /// What is known of it.
        status: Status,
    },
}

impl PublishError {
    /// Whether tracker `tracker`, whose queue generation is `current`, may
    /// publish `publication` on the queue it watches: one no tracker made
    /// (`unsignalled`, `untracked`), or one of its own made in this
    /// generation. A copy-engine use's goes to its copy engine, whatever
    /// the generation.
    pub(crate) fn check(
        publication: &Publication,
        tracker: u64,
        current: Generation,
    ) -> Result<(), PublishError> {
        let Some(made) = publication.generation() else {
            return Ok(());
        };
        if publication.is_copy() {
            return Ok(());
        }
        let index = publication.index();
        if !publication.made_by(tracker) {
            return Err(PublishError::Foreign { index });
        }
        if made != current {
            return Err(PublishError::Stale {
                index,
                made,
                current,
            });
        }
        Ok(())
    }
}

/// A wait ran out of time; the use may still complete later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("timed out after {0:?}; the use has not completed (it may still)")]
pub struct TimedOut(pub Duration);

/// Why a [`Waiter::wait`](crate::Waiter::wait) ended without an outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// The ticket is another tracker's.
    #[error(transparent)]
    Foreign(#[from] ForeignTicket),
    /// The deadline passed first.
    #[error(transparent)]
    TimedOut(#[from] TimedOut),
}

/// Any tracker error: each operation's own error converts into it, for a
/// caller that passes them on with `?`.
///
/// ```
/// use sigretire_tracker::{Error, Request, Tracker};
/// use sigretire_sim::backend as sim_backend;
/// fn submit_and_ask() -> Result<(), Error> {
///     let (mut tracker, queue) = sim_backend::stepped_tracker(Default::default())?;
///     let acquired = tracker.acquire(Request::packet(queue.reserve().unwrap()))?;
///     tracker.query(&acquired.ticket)?;
///     Ok(())
/// }
/// assert!(submit_and_ask().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A ticket of another tracker.
    #[error(transparent)]
    Foreign(#[from] ForeignTicket),
    /// Creating a tracker failed.
    #[error(transparent)]
    Create(#[from] CreateError),
    /// An acquire handed out no signal.
    #[error(transparent)]
    Acquire(#[from] AcquireError),
    /// A pin was refused.
    #[error(transparent)]
    Pin(#[from] PinError),
    /// A failed submission was refused.
    #[error(transparent)]
    FailSubmission(#[from] FailSubmissionError),
    /// Timestamps were refused.
    #[error(transparent)]
    Timestamps(#[from] TimestampsError),
    /// A publication was refused.
    #[error(transparent)]
    Publish(#[from] PublishError),
    /// A wait ended without an outcome.
    #[error(transparent)]
    Wait(#[from] WaitError),
    /// A configuration value is out of range.
    #[error(transparent)]
    InvalidConfig(#[from] InvalidConfig),
}
