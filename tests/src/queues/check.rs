//! What the queue driver checks, each with a name, and the failure a broken
//! check produces.

use crate::check::Check;
use core::fmt;

/// A property of the queue layer the driver checks against the machine's
/// ground truth and its reference model of what was published where.
///
/// "Its work" below is everything published on the stream's hardware
/// queues (every queue the stream ran on, up to the moment it left it)
/// before the call, the runtime's own packets included, everything the
/// stream was made to wait for on other queues, and the packets of the
/// call itself (a command's, an event's marker). The layer's own wake
/// packets (a barrier-AND without the barrier bit that only wakes a
/// sleeping thread) and the empty packets without a signal that fill slots
/// of a refused submission are not work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueCheck {
    /// Something was reported complete before its work truly completed: a
    /// command's status or its wait, an event's query, synchronize or
    /// timestamps, a queue's query or synchronize.
    EarlyCompletion,
    /// A cross-queue wait emitted no dependency for an event or queue whose
    /// work had not completed, or its consumer packet passed before the
    /// producer's work completed.
    ElidedDependency,
    /// Something was reported failed (a `Failed` status, `QueueFailed`,
    /// `EventFailed`) although no packet of its work failed.
    FalseFailure,
    /// A device error (`DeviceError`, `Aborted`, a command released as
    /// `DeviceError`) reported while the device is not in the error state.
    FalseDeviceError,
    /// A final status changed (complete, then failed; failed, then
    /// complete; or any other change).
    StatusChanged,
    /// Timestamps or an elapsed time differ from the packet processor's
    /// ground truth.
    Timestamps,
    /// A waiter did not return within the bound after its work completed
    /// (or after its device entered the error state), or a status stayed
    /// behind the truth once everything finished, or the machine never
    /// went idle with every flag released.
    Hang,
    /// A wait whose policy asks to sleep ([`WaitPolicy::blocking`](sigretire_tracker::WaitPolicy::blocking))
    /// blocked past its spin without sleeping on a wake signal and without
    /// counting that it polled instead (`QueueStats::sleeping_waits`,
    /// `wake_fallbacks`).
    PolicyIgnored,
    /// The machine recorded a violation: a signal re-armed while a packet,
    /// a pin or a sleeper still needed it, a re-arm not made visible before
    /// publication, a malformed packet.
    Machine(Check),
    /// Something was left behind once everything finished: an unbalanced
    /// census, uses still in flight or signals still parked on a queue that
    /// drained, pins kept, queues torn down on the completion thread or
    /// leaked, objects the machine still holds.
    Leak,
    /// A queue took new work (a launch, a submission, an event's record)
    /// after it had told the caller it failed (a `QueueFailed` naming it,
    /// a command or event of it `Failed`, its query `Failed`): a failed
    /// queue is failed for good, from the first answer that says so.
    WorkAfterFailure,
    /// An error or a panic the scenario gave the layer no reason for.
    Unexpected,
}

impl QueueCheck {
    /// A short name for reports and tables.
    pub fn name(self) -> String {
        match self {
            QueueCheck::EarlyCompletion => "early-completion".into(),
            QueueCheck::ElidedDependency => "elided-dependency".into(),
            QueueCheck::FalseFailure => "false-failure".into(),
            QueueCheck::FalseDeviceError => "false-device-error".into(),
            QueueCheck::StatusChanged => "status-changed".into(),
            QueueCheck::Timestamps => "timestamps".into(),
            QueueCheck::Hang => "hang".into(),
            QueueCheck::PolicyIgnored => "policy-ignored".into(),
            QueueCheck::Machine(check) => format!("machine: {}", check.name()),
            QueueCheck::Leak => "leak".into(),
            QueueCheck::WorkAfterFailure => "work-after-failure".into(),
            QueueCheck::Unexpected => "unexpected".into(),
        }
    }
}

impl fmt::Display for QueueCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A broken check: which one, after which operation, what was seen, and
/// what the call or answer that broke it was about (for grouping failures
/// into classes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueFailure {
    /// The check.
    pub check: QueueCheck,
    /// What broke it: the kind of answer (`"synchronize"`, `"event query"`,
    /// ...), so that two failures of one check and one subject are one
    /// class.
    pub subject: &'static str,
    /// The operation after which it broke (the number of operations applied
    /// before it; the scenario's length for the final checks).
    pub step: usize,
    /// What was seen.
    pub detail: String,
}

impl QueueFailure {
    /// Whether `other` is the same class of failure: the same check about
    /// the same kind of answer.
    pub fn same_class(&self, other: &QueueFailure) -> bool {
        self.check == other.check && self.subject == other.subject
    }
}

impl fmt::Display for QueueFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {} at step {}: {}",
            self.check, self.subject, self.step, self.detail
        )
    }
}

/// Shorthand for a broken check; the driver fills in the step.
pub(crate) fn broke<T>(
    check: QueueCheck,
    subject: &'static str,
    detail: impl Into<String>,
) -> Result<T, QueueFailure> {
    Err(QueueFailure {
        check,
        subject,
        step: 0,
        detail: detail.into(),
    })
}
