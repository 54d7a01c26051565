//! The tracker's errors: each one says what the caller can do about it.

use crate::backend::AllocError;
use crate::ticket::Ticket;
use std::time::Duration;

/// Everything a tracker call can report.
///
/// ```
/// use sigretire_tracker::{Config, Error, RetiringTracker, sim_backend};
/// let (sim, queue) = sim_backend::stepped_queue();
/// let memory = std::sync::Arc::new(sim_backend::SimMemory::new(sim, queue.agent()));
/// let bad = Config { initial_size: 0, ..Config::default() };
/// let err = RetiringTracker::new(memory, queue, bad).err().unwrap();
/// assert!(matches!(err, Error::InvalidConfig(_)));
/// assert!(err.to_string().contains("initial_size"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
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
    /// depend on it. A new hardware queue needs [`Tracker::note_queue_change`](crate::Tracker::note_queue_change).
    #[error(
        "AQL index {index} does not follow {previous}, the previous use's index in this queue generation; call note_queue_change when the queue changes"
    )]
    AqlIndexOutOfOrder {
        /// The index given.
        index: u64,
        /// The previous use's index.
        previous: u64,
    },
    /// The ticket was issued by another tracker.
    #[error("the ticket belongs to another tracker")]
    ForeignTicket,
    /// The ticket's use is not in a state that allows the call (for example,
    /// failing the submission of a use already known complete).
    #[error("use {seq} cannot {action}: it is already {state}")]
    InvalidState {
        /// The use.
        seq: u64,
        /// What was asked.
        action: &'static str,
        /// What it is.
        state: &'static str,
    },
    /// No signal could be allocated.
    #[error(transparent)]
    OutOfSignals(#[from] AllocError),
    /// A wait ran out of time; the use may still complete later.
    #[error("timed out after {0:?}; the use has not completed (it may still)")]
    TimedOut(Duration),
    /// A configuration value is out of range.
    #[error("invalid tracker configuration: {0}")]
    InvalidConfig(&'static str),
    /// The use's timestamps were harvested, but more than
    /// [`Config::stamp_history`](crate::Config::stamp_history) timed uses
    /// followed it and its entry was dropped. Hold the use (an event's
    /// reference) to keep its stamps for as long as you need them.
    #[error(
        "the timestamps of use {seq} are no longer kept: more than Config::stamp_history timed uses followed it"
    )]
    TimestampsExpired {
        /// The use.
        seq: u64,
    },
}
