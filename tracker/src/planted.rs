//! Planted bugs: test-only hooks that prove the test suite has teeth.
//!
//! Each [`Bug`] names a mistake a tracker could plausibly make. The tracker
//! asks `planted!(X)` (lib.rs) at the one place that mistake would be made.
//! This module exists only in a test build with `--cfg sigretire_planted`
//! (which `.ci/teeth` sets; no cargo feature can turn it on, and the
//! published package leaves this file out): everywhere else the hook is
//! `false` and compiles away. Here at most one bug is active at a time: the
//! one named by the environment variable `TRACKER_PLANTED_BUG` (read once),
//! or set by [`plant`]. The `teeth` runner of the `scenarios` crate runs the
//! property scenarios once per bug and reports which check caught it. The
//! baseline tracker's two bugs and the queue layer's are listed here too:
//! their crates ask this switch.

/// A bug that can be planted in a tracker (the retiring one unless its name
/// says baseline).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bug {
    /// Reclaim re-arms a retired use's signal without checking whether an
    /// event, a handler or a pin still holds it.
    RearmHeldSignal,
    /// Fence probing trusts the read index: a fence it passed counts as
    /// complete without the confirming load.
    TrustReadIndex,
    /// Handing out a re-armed device-memory signal skips the store fence.
    SkipStoreFence,
    /// Handing out a re-armed device-memory signal for a queue whose ring is
    /// in system memory skips the HDP flush.
    SkipHdpFlush,
    /// A completed fence proves uses of earlier generations too (the
    /// generation check is skipped).
    RetireAcrossGenerations,
    /// Timestamps are not harvested before re-arm but read from the signal
    /// when asked, after it may have been re-armed and reused.
    HarvestAfterRearm,
    /// A consumer's pin is released when the use before the consumer
    /// retires, one use too early.
    DropPinEarly,
    /// A drain retires every use in flight: an older generation's (still
    /// on the old hardware queue) and a copy engine's too.
    DrainRetiresEverything,
    /// Making room ignores the CPU waits' record of the fence back-pressure
    /// named, so a caller that waited for it is pushed back again.
    NamedFenceUnconsulted,
    /// Making room gives up (out of signals) when every use it finds is
    /// done, without the walk that would free them: a waiter on another
    /// thread that learned the last completions turns a full ring into a
    /// hard error.
    GiveUpWhenAllDone,
    /// Asked for a retired use's timestamps, the tracker looks only at its
    /// signal's cell, which a later timed use has overwritten.
    StampsOnlyInTheCell,
    /// Baseline: the slot of a held signal is marked free before its
    /// replacement is allocated, so a failed allocation's retry re-arms the
    /// held signal.
    BaselineFreesBeforeReplacing,
    /// Baseline: pins attached to a consumer are released only when the
    /// consumer's slot is reused, not once it is known done or drained.
    BaselineKeepsPinsUntilReuse,
    /// Queue layer: work it did not publish after its newest packet (a
    /// runtime's own kernels on an adopted queue) is ignored under the
    /// lock, so a synchronize, a query, a shared completion or an elided
    /// cross-queue wait trusts a newest command that does not cover it.
    QueueIgnoresForeignWork,
    /// Queue layer: the lock-free synchronize and query ignore work the
    /// layer did not publish after its newest packet.
    LockFreeIgnoresForeignWork,
    /// Queue layer: a command refused after issuing part of its work is
    /// trusted as the stream's newest (its issued packets still run).
    QueueTrustsRefusedCommand,
    /// Queue layer: a failed newest command counts as done, so what is
    /// recorded after it shares its completion and reports success.
    QueueFailedCommandCountsDone,
    /// Queue layer: after a move, the old hardware queue's newest command is
    /// trusted for the new one, where nothing was published yet.
    QueueTrustsMovedCommand,
    /// Queue layer: a move owes the new hardware queue nothing, so the
    /// stream's next work there may run before its work on the old one.
    QueueMoveOwesNothing,
    /// Queue layer: a failure of the hardware queue a use ran on fails the
    /// current hardware queue's uses instead (wrong after a move).
    QueueFailsTheCurrentQueue,
    /// Queue layer: a wake signal counts free once its packet completed,
    /// though its sleeper may not have read it yet, so another wait lends
    /// it again and the sleeper misses its wake.
    WakeSignalLentUnderItsSleeper,
    /// A hybrid wait dozes until its guess itself rather than shortly
    /// before, so a right guess is answered a doze's overrun late.
    HybridWakesTooLate,
}

pub use switch::{active, current, plant};

impl Bug {
    /// Every bug, in report order.
    pub const ALL: [Bug; 22] = [
        Bug::RearmHeldSignal,
        Bug::TrustReadIndex,
        Bug::SkipStoreFence,
        Bug::SkipHdpFlush,
        Bug::RetireAcrossGenerations,
        Bug::HarvestAfterRearm,
        Bug::DropPinEarly,
        Bug::DrainRetiresEverything,
        Bug::NamedFenceUnconsulted,
        Bug::GiveUpWhenAllDone,
        Bug::StampsOnlyInTheCell,
        Bug::BaselineFreesBeforeReplacing,
        Bug::BaselineKeepsPinsUntilReuse,
        Bug::QueueIgnoresForeignWork,
        Bug::LockFreeIgnoresForeignWork,
        Bug::QueueTrustsRefusedCommand,
        Bug::QueueFailedCommandCountsDone,
        Bug::QueueTrustsMovedCommand,
        Bug::QueueMoveOwesNothing,
        Bug::QueueFailsTheCurrentQueue,
        Bug::WakeSignalLentUnderItsSleeper,
        Bug::HybridWakesTooLate,
    ];

    /// Whether the bug lives in the baseline tracker (else the retiring one).
    pub const fn in_baseline(self) -> bool {
        matches!(
            self,
            Bug::BaselineFreesBeforeReplacing | Bug::BaselineKeepsPinsUntilReuse
        )
    }

    /// Whether the bug lives in the queue layer (`sigretire-queue`, which
    /// asks this switch too): the queue layer's property driver, not the
    /// tracker's, must catch it.
    pub const fn in_queue_layer(self) -> bool {
        matches!(
            self,
            Bug::QueueIgnoresForeignWork
                | Bug::LockFreeIgnoresForeignWork
                | Bug::QueueTrustsRefusedCommand
                | Bug::QueueFailedCommandCountsDone
                | Bug::QueueTrustsMovedCommand
                | Bug::QueueMoveOwesNothing
                | Bug::QueueFailsTheCurrentQueue
                | Bug::WakeSignalLentUnderItsSleeper
        )
    }

    /// The bug's name, as `TRACKER_PLANTED_BUG` spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Bug::RearmHeldSignal => "rearm-held-signal",
            Bug::TrustReadIndex => "trust-read-index",
            Bug::SkipStoreFence => "skip-store-fence",
            Bug::SkipHdpFlush => "skip-hdp-flush",
            Bug::RetireAcrossGenerations => "retire-across-generations",
            Bug::HarvestAfterRearm => "harvest-after-rearm",
            Bug::DropPinEarly => "drop-pin-early",
            Bug::DrainRetiresEverything => "drain-retires-everything",
            Bug::NamedFenceUnconsulted => "named-fence-unconsulted",
            Bug::GiveUpWhenAllDone => "give-up-when-all-done",
            Bug::StampsOnlyInTheCell => "stamps-only-in-the-cell",
            Bug::BaselineFreesBeforeReplacing => "baseline-frees-before-replacing",
            Bug::BaselineKeepsPinsUntilReuse => "baseline-keeps-pins-until-reuse",
            Bug::QueueIgnoresForeignWork => "queue-ignores-foreign-work",
            Bug::LockFreeIgnoresForeignWork => "lock-free-ignores-foreign-work",
            Bug::QueueTrustsRefusedCommand => "queue-trusts-refused-command",
            Bug::QueueFailedCommandCountsDone => "queue-failed-command-counts-done",
            Bug::QueueTrustsMovedCommand => "queue-trusts-moved-command",
            Bug::QueueMoveOwesNothing => "queue-move-owes-nothing",
            Bug::QueueFailsTheCurrentQueue => "queue-fails-the-current-queue",
            Bug::WakeSignalLentUnderItsSleeper => "wake-signal-lent-under-its-sleeper",
            Bug::HybridWakesTooLate => "hybrid-wakes-too-late",
        }
    }

    /// The bug named `name`.
    pub fn from_name(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|bug| bug.name() == name)
    }
}

mod switch {
    use super::Bug;
    // A process-wide switch, not a protocol under test: plain std atomics,
    // outside the loom shim (never set under loom).
    use std::sync::atomic::{AtomicU8, Ordering};

    const UNREAD: u8 = u8::MAX;
    const NONE: u8 = 0;

    /// 0: no bug; `i + 1`: `Bug::ALL[i]`; `UNREAD`: the environment is not read yet.
    static ACTIVE: AtomicU8 = AtomicU8::new(UNREAD);

    fn encode(bug: Option<Bug>) -> u8 {
        bug.map_or(NONE, |bug| {
            Bug::ALL.iter().position(|&b| b == bug).expect("listed") as u8 + 1
        })
    }

    /// The planted bug, if any.
    ///
    /// # Panics
    /// If `TRACKER_PLANTED_BUG` names no bug: a typo must not silently run
    /// the suite without the bug it was meant to plant.
    pub fn current() -> Option<Bug> {
        let mut code = ACTIVE.load(Ordering::Relaxed);
        if code == UNREAD {
            let planted = std::env::var("TRACKER_PLANTED_BUG").ok().map(|name| {
                Bug::from_name(&name).unwrap_or_else(|| {
                    panic!(
                        "TRACKER_PLANTED_BUG={name} names no planted bug; see sigretire_tracker::planted::Bug"
                    )
                })
            });
            code = encode(planted);
            // Lose to a concurrent `plant`, which is more specific.
            code = match ACTIVE.compare_exchange(UNREAD, code, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => code,
                Err(set) => set,
            };
        }
        (code != NONE).then(|| Bug::ALL[usize::from(code - 1)])
    }

    /// Whether `bug` is the planted one.
    pub fn active(bug: Bug) -> bool {
        current() == Some(bug)
    }

    /// Plants `bug` (or none) for the whole process, overriding the environment.
    pub fn plant(bug: Option<Bug>) {
        ACTIVE.store(encode(bug), Ordering::Relaxed);
    }
}
