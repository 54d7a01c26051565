//! The invariants of docs/design.md section 6, each with a name, and the report
//! a broken one produces.

use core::fmt;
use sigretire_tracker::{Census, Status, Timestamps};

/// An invariant the driver checks, after every operation unless noted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    /// The simulator saw a packet published naming a device-memory signal
    /// whose re-arm was not fenced (or, through a ring in system memory,
    /// not flushed) before publication.
    PublishOrder,
    /// The simulator saw a store to a signal that an incomplete packet
    /// completes or a pending barrier packet (a GPU waiter) waits on.
    RearmWhileInFlight,
    /// A signal held by an event, an async handler or a GPU waiter's pin
    /// changed value (it was re-armed), or was handed out for a new use.
    RearmWhileHeld,
    /// `acquire` handed out a signal whose previous use has not finished.
    HandedOutBusySignal,
    /// A use was reported complete (by a status, a wait, a reference, an
    /// elided dependency) before its packets completed, and no other
    /// generation's fence explains it (see `CrossGeneration`).
    EarlyCompletion,
    /// What one generation (hardware queue) showed decided a use of
    /// another: a use was reported complete before its packets completed
    /// while a completed fence of another generation covers it by AQL
    /// index (and no fence of its own generation that the read index passed
    /// does), or reported failed while its own queue is fine and another
    /// generation's queue failed, or, asked about a use of an older
    /// generation whose queue failed it, the tracker read its signal and
    /// still said pending (it took that error for the current
    /// generation's). The final checks also run the older
    /// generations' queues to the end and ask about their newest fences
    /// with the current generation's work still pending, so a tracker that
    /// mixes generations has its chance to show it in every scenario.
    CrossGeneration,
    /// A use was reported failed although none of its packets failed (and
    /// its submission did not): in the stepped simulator a packet fails the
    /// moment its queue does, so this holds while it is pending too.
    FalseFailure,
    /// A ticket changed its answer (complete, then something else).
    TicketChanged,
    /// A completed use was not retired by the proof that covers it: its own
    /// query or wait, a probe of a completed fence the read index passed,
    /// or a drain.
    NotRetiredWhenProven,
    /// Timestamps differ from the packet processor's ground truth, or a
    /// held, completed, timed use has none.
    Timestamps,
    /// A packet completing a use reached the machine with another barrier
    /// bit or completion signal than the tracker recorded for the use.
    HeaderMismatch,
    /// The ring holds more uses than its bound, or back-pressure named a
    /// use that is already done, or named the same use again after the
    /// caller waited for it to complete.
    RingBound,
    /// A tracker kept a pin after its consumer's queue drained, or once
    /// every consumer finished (`Census::pins`).
    PinHeldTooLong,
    /// A signal is unaccounted for (`census().is_balanced()`), or one is
    /// still parked, or a use is still in flight, once everything finished
    /// and every holder let go.
    Leak,
    /// A packet never finished although every queue ran and nothing was
    /// stalled: a GPU waiter lost the completion it waited for.
    Hang,
    /// The tracker returned an error or panicked where the scenario gave it
    /// no reason to.
    Unexpected,
}

impl Check {
    /// Every check, in report order.
    pub const ALL: [Check; 16] = [
        Check::PublishOrder,
        Check::RearmWhileInFlight,
        Check::RearmWhileHeld,
        Check::HandedOutBusySignal,
        Check::EarlyCompletion,
        Check::CrossGeneration,
        Check::FalseFailure,
        Check::TicketChanged,
        Check::NotRetiredWhenProven,
        Check::Timestamps,
        Check::HeaderMismatch,
        Check::RingBound,
        Check::PinHeldTooLong,
        Check::Leak,
        Check::Hang,
        Check::Unexpected,
    ];

    /// A short name for tables.
    pub const fn name(self) -> &'static str {
        match self {
            Check::PublishOrder => "publish-order (sim: unfenced/unflushed)",
            Check::RearmWhileInFlight => "rearm-while-in-flight (sim)",
            Check::RearmWhileHeld => "rearm-while-held",
            Check::HandedOutBusySignal => "handed-out-busy-signal",
            Check::EarlyCompletion => "early-completion",
            Check::CrossGeneration => "cross-generation",
            Check::FalseFailure => "false-failure",
            Check::TicketChanged => "ticket-changed",
            Check::NotRetiredWhenProven => "not-retired-when-proven",
            Check::Timestamps => "timestamps",
            Check::HeaderMismatch => "header-mismatch",
            Check::RingBound => "ring-bound",
            Check::PinHeldTooLong => "pin-held-too-long",
            Check::Leak => "leak",
            Check::Hang => "hang",
            Check::Unexpected => "unexpected",
        }
    }
}

impl Check {
    /// The invariant a violation the simulator recorded breaks.
    pub fn of_simulator(violation: &sigretire_sim::Violation) -> Check {
        use sigretire_sim::Violation;
        match violation {
            Violation::Unfenced { .. } | Violation::Unflushed { .. } => Check::PublishOrder,
            Violation::StoreWhileInFlight { .. } => Check::RearmWhileInFlight,
            _ => Check::Unexpected,
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A broken invariant: which one, at which step, and what was seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The invariant.
    pub check: Check,
    /// The operation after which it broke (the number of operations
    /// applied before it; the scenario's length for the final checks).
    pub step: usize,
    /// What was seen.
    pub detail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] at step {}: {}", self.check, self.step, self.detail)
    }
}

/// Shorthand for a failed check, filled in with its step by the driver.
pub(crate) fn fail<T>(check: Check, detail: impl Into<String>) -> Result<T, Failure> {
    Err(Failure {
        check,
        step: 0,
        detail: detail.into(),
    })
}

/// Whether a report about a use is truthful: complete only if it
/// completed, failed only if it failed (no report is always truthful). The
/// model and the backend scenarios' rig judge every report with it (the
/// model then tells cross-generation cases apart).
pub fn truthful(said: Option<Status>, completed: bool, failed: bool) -> Result<(), Check> {
    match said {
        Some(Status::Complete) if !completed => Err(Check::EarlyCompletion),
        Some(Status::Failed) if !failed => Err(Check::FalseFailure),
        _ => Ok(()),
    }
}

/// A final answer does not change ([`Check::TicketChanged`]): `Ok` with the
/// answer to remember, or `Err` with the earlier one `said` contradicts.
pub fn steady(
    before: Option<Status>,
    said: Option<Status>,
) -> Result<Option<Status>, Option<Status>> {
    match before {
        Some(_) if said != before => Err(before),
        Some(_) => Ok(before),
        None => Ok(said.filter(|s| s.is_done())),
    }
}

/// What the oracle knows of a use's packets, whatever machine ran them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketTruth {
    /// Every packet of the use completed.
    pub completed: bool,
    /// A packet of it failed, or its submission did.
    pub failed: bool,
}

/// A report that breaks the oracle's rules: the invariant, and why (the
/// earlier answer it contradicts, or what another generation showed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wrong {
    /// The invariant broken.
    pub check: Check,
    /// The earlier answer contradicted, or another generation's evidence.
    pub why: Option<String>,
}

/// The oracle's rule for a report made without reading memory (a known
/// status, a held reference's, an answer to `hold` or `pin`): it may know
/// less than the truth, never more, and never changes its mind — except
/// that a tracker that keeps no host-side record (`forgets`: the baseline)
/// may say "unknown" again after "complete". `truth`: `None` when the
/// machine no longer remembers the packets (nothing to compare with).
/// `other_generation` explains a false report by what another generation
/// (another hardware queue of the stream) showed, which makes it a
/// [`Check::CrossGeneration`]. `answered` is the use's last final answer,
/// updated. The property model and the backend scenarios' rig both judge
/// every report here.
pub fn judge_report(
    answered: &mut Option<Status>,
    said: Option<Status>,
    truth: Option<PacketTruth>,
    forgets: bool,
    other_generation: impl FnOnce(Check) -> Option<String>,
) -> Result<(), Wrong> {
    if let Some(truth) = truth
        && let Err(check) = truthful(said, truth.completed, truth.failed)
    {
        return Err(match other_generation(check) {
            Some(why) => Wrong {
                check: Check::CrossGeneration,
                why: Some(why),
            },
            None => Wrong { check, why: None },
        });
    }
    if forgets && said.is_none() && *answered == Some(Status::Complete) {
        return Ok(());
    }
    *answered = steady(*answered, said).map_err(|before| Wrong {
        check: Check::TicketChanged,
        why: Some(format!("it said {before:?} before")),
    })?;
    Ok(())
}

/// Every signal a tracker created is accounted for ([`Check::Leak`]) and
/// its ring holds at most `max_in_flight` uses ([`Check::RingBound`]).
pub fn census(census: &Census, max_in_flight: usize) -> Result<(), Failure> {
    if !census.is_balanced() {
        return fail(
            Check::Leak,
            format!("a signal is unaccounted for: {census:?}"),
        );
    }
    if census.in_flight > max_in_flight {
        return fail(
            Check::RingBound,
            format!("{census:?} is past the limit of {max_in_flight} in flight"),
        );
    }
    Ok(())
}

/// Whether timestamps a tracker gave are the ground truth's
/// ([`Check::Timestamps`]): the launch and completion times of a packet
/// that completed.
pub fn stamps_match(stamps: Timestamps, start: Option<u64>, end: Option<u64>) -> bool {
    start == Some(stamps.start) && end == Some(stamps.end)
}
