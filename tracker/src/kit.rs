//! What a tracker built outside this crate needs of the machinery its
//! answers go through: the cells that waiters, references and pins read
//! without a lock, the record of retired uses, the history of stamps, the
//! pins a consumer keeps, and the tickets and publications it hands out.
//!
//! Not part of the API a runtime uses (hidden from the documentation, no
//! stability promise): the workspace builds its comparison tracker on it,
//! CLR's original design (the unpublished `sigretire-baseline` crate), so
//! that the baseline answers through the same [`Waiter`], [`SignalRef`]
//! and [`Pin`] as [`RetiringTracker`](crate::RetiringTracker) while its
//! code stays out of this crate. The tests narrow a retiring tracker's
//! generation counter through it ([`narrow_generations`]) to make its
//! wrap-around happen in a scenario.

use crate::backend::{QueueView, SignalMemory};
use crate::error::PublishError;
use crate::pin::Pin;
use crate::publication::{self, Publication};
use crate::retiring::RetiringTracker;
use crate::share::SignalRef;
use crate::stats::Stats;
use crate::ticket::{Engine, Generation, Request, Ticket};
use crate::wait::Waiter;

pub use crate::keys::CellKey;
pub use crate::pin::Attachments;
pub use crate::share::{Cell, Shared, label, label_base};
pub use crate::stamps::{Kept, StampHistory, written};
/// The `Arc` the cells are shared through (loom's under the loom models).
pub use sigretire_sync::Arc;

/// A waiter on `shared`'s uses.
#[inline]
pub fn waiter<M: SignalMemory>(shared: &Arc<Shared<M>>) -> Waiter<M> {
    Waiter {
        shared: shared.clone(),
    }
}

/// A counted reference to use `seq` of the cell of `key` (one `shared`
/// adopted), which keeps its signal from being re-armed.
#[inline]
pub fn hold<M: SignalMemory>(shared: &Arc<Shared<M>>, key: CellKey, seq: u64) -> SignalRef<M> {
    SignalRef::new(shared, shared.cell(key), seq)
}

/// `reference`, lent to a GPU waiter on another queue.
#[inline]
pub fn pin<M: SignalMemory>(reference: SignalRef<M>) -> Pin<M> {
    Pin::new(reference)
}

/// The ticket of use `seq` of tracker `tracker`, whose signal's cell is
/// `key`, acquired in `generation`, timed or not.
#[inline]
pub fn ticket(tracker: u64, seq: u64, key: CellKey, generation: Generation, timed: bool) -> Ticket {
    Ticket::issue(tracker, seq, key.slot(), generation, timed)
}

/// What tracker `tracker`'s publications of `generation` carry.
#[inline]
pub fn origin(tracker: u64, generation: Generation) -> u64 {
    publication::origin(tracker, generation)
}

/// The publication of an AQL use: its last packet's `index`, its barrier
/// bit, its signal's packet handle, its operations, its tracker's
/// [`origin`].
#[inline]
pub fn publication_of_use(
    index: u64,
    barrier: bool,
    completion: u64,
    ops: u32,
    origin: u64,
) -> Publication {
    Publication::of_use(index, barrier, completion, ops, origin)
}

/// The publication of a copy engine's use.
#[inline]
pub fn publication_of_copy(completion: u64, ops: u32, origin: u64) -> Publication {
    Publication::of_copy(completion, ops, origin)
}

/// Whether tracker `tracker`, in generation `current`, may publish
/// `publication` on its queue ([`Tracker::check_publication`](crate::Tracker::check_publication)).
#[inline]
pub fn check_publication(
    publication: &Publication,
    tracker: u64,
    current: Generation,
) -> Result<(), PublishError> {
    PublishError::check(publication, tracker, current)
}

/// The AQL index `request` names, or `None` for a copy engine's work.
#[inline]
pub fn aql_index(request: &Request) -> Option<u64> {
    match request.engine() {
        Engine::Aql { index, .. } => Some(index),
        Engine::Copy => None,
    }
}

/// How many operations decrement the signal of `request`'s use.
#[inline]
pub fn ops(request: &Request) -> u32 {
    request.ops
}

/// Whether AQL index `a` comes before `b`, wrap-safely.
#[inline]
pub fn aql_before(a: u64, b: u64) -> bool {
    crate::ticket::aql_before(a, b)
}

/// Adds what other threads counted on `shared` (completions a waiter saw,
/// failures) to `stats`.
#[inline]
pub fn add_shared_counters<M: SignalMemory>(shared: &Shared<M>, stats: &mut Stats) {
    shared.counters.add_to(stats);
}

/// Narrows `tracker`'s generation counter to `bits` bits (1 to 32), so a
/// test sees it wrap within a few queue changes (retirement never compares
/// generation numbers; a runtime's tracker counts in 32 bits). Call it
/// before the first queue change.
///
/// # Panics
/// For `bits` outside 1..=32.
pub fn narrow_generations<M: SignalMemory, Q: QueueView>(
    tracker: &mut RetiringTracker<M, Q>,
    bits: u32,
) {
    assert!((1..=32).contains(&bits), "generation bits: 1 to 32");
    tracker.narrow_generations(bits);
}
