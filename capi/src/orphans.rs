//! Pins that outlive the consumer's tracker.
//!
//! A pin keeps a producer's signal from being re-armed while a packet on
//! another queue (the consumer) waits on it; the consumer's tracker keeps
//! it (`sigretire_tracker_attach`) until the consumer use retired. A C
//! runtime may destroy that tracker while the consumer's packet still
//! waits, and the tracker's pins go with it: the producer would then re-arm
//! the signal under the GPU waiter.
//!
//! So the library keeps its own reference to every pinned signal beside
//! the pin: a *shadow*, a hold of the producer's use taken with the pin.
//! Attached, the shadow stays with the consumer's tracker handle, next to
//! the ticket of the consumer use, and goes once that use is known done (as
//! the tracker lets the pin go). When the tracker is destroyed, each shadow
//! whose consumer is not known done becomes an *orphan*: the shadow and a
//! hold of the consumer use (whose signal, so held, is never re-armed and
//! stays allocated). An orphan goes once its consumer's signal says the
//! packet completed (or failed), checked with at most one load at every
//! later `sigretire_tracker_poll` and `sigretire_tracker_reclaim` of any
//! tracker, the producer's among them, before that tracker re-arms anything.
//!
//! What the orphans read is signal memory only (through the holds, which
//! keep it alive): never the destroyed tracker's queue, which the runtime
//! may destroy right after the tracker.

use crate::engine::{Core, HoldObject};
use ::sigretire_tracker::{Status, Ticket};
use parking_lot::Mutex;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A pinned producer signal a consumer tracker's pin also holds, kept by
/// the library beside it.
pub(crate) struct Shadow {
    /// The consumer use (the packet that waits on the signal).
    pub(crate) consumer: Ticket,
    /// A hold of the producer's use.
    pub(crate) producer: Box<dyn HoldObject>,
}

/// Drops the shadows whose consumer `core` knows done: its pin is gone or
/// going.
pub(crate) fn sweep_shadows(core: &dyn Core, shadows: &mut Vec<Shadow>) {
    shadows.retain(|shadow| {
        !matches!(
            core.known_status(&shadow.consumer),
            Ok(Some(Status::Complete | Status::Failed))
        )
    });
}

/// A shadow whose consumer's tracker is gone.
struct Orphan {
    /// A hold of the consumer use: its signal tells when its packet ran.
    /// `None` only for a tracker destroyed after a panic, whose state could
    /// not be asked: that orphan is kept for good (a signal lost rather
    /// than one re-armed under a waiter).
    consumer: Option<Box<dyn HoldObject>>,
    /// Keeps the producer's signal from being re-armed.
    _producer: Box<dyn HoldObject>,
}

impl Orphan {
    /// Whether the consumer's packet is done (at most one load).
    fn done(&self) -> bool {
        self.consumer.as_ref().is_some_and(|consumer| {
            consumer.known_status().is_some() || consumer.status() != Status::Pending
        })
    }
}

static ORPHANS: Mutex<Vec<Orphan>> = Mutex::new(Vec::new());
/// How many orphans there are: a sweep with none is one atomic load.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Turns the shadows of a tracker being destroyed into orphans, for the
/// consumers not known done (`core` is the tracker, still whole; `None`
/// for one that panicked, whose state is not asked).
pub(crate) fn adopt(core: Option<&mut dyn Core>, shadows: Vec<Shadow>) {
    let mut orphans = Vec::new();
    match core {
        Some(core) => {
            for shadow in shadows {
                // `None`: known done meanwhile, nothing to keep.
                if let Ok(Some(consumer)) = core.hold(&shadow.consumer) {
                    orphans.push(Orphan {
                        consumer: Some(consumer),
                        _producer: shadow.producer,
                    });
                }
            }
        }
        None => orphans.extend(shadows.into_iter().map(|shadow| Orphan {
            consumer: None,
            _producer: shadow.producer,
        })),
    }
    if orphans.is_empty() {
        return;
    }
    let mut all = ORPHANS.lock();
    all.extend(orphans);
    COUNT.store(all.len(), Ordering::Release);
}

thread_local! {
    /// Whether this thread is sweeping: a hook called from a sweep (a load,
    /// a release) that calls back into the library does not sweep again.
    static SWEEPING: Cell<bool> = const { Cell::new(false) };
}

/// Lets go of the orphans whose consumer's packet is done (waiting for a
/// sweep of another thread to finish first, so that every caller's sweep
/// has looked at every orphan by the time it returns).
pub(crate) fn sweep() {
    if COUNT.load(Ordering::Acquire) == 0 || SWEEPING.with(Cell::get) {
        return;
    }
    SWEEPING.with(|s| s.set(true));
    /// Clears the flag however the sweep ends.
    struct Swept;
    impl Drop for Swept {
        fn drop(&mut self) {
            SWEEPING.with(|s| s.set(false));
        }
    }
    let _swept = Swept;
    let mut all = ORPHANS.lock();
    all.retain(|orphan| !orphan.done());
    COUNT.store(all.len(), Ordering::Release);
}
