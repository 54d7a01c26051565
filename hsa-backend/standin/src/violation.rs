//! What the stand-in reports a caller did wrong: a kind, for tests to act
//! on, and a sentence, for people. The kinds cross the library boundary by
//! name (one line per violation, `Kind<TAB>text`), so the library and the
//! client, built from this one file, cannot disagree on them.

use core::fmt;

/// The kinds of host actions ROCr or the hardware would not forgive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ViolationKind {
    /// A packet named a device-memory signal whose last store was not
    /// fenced (or, through a ring in system memory, not HDP-flushed) before
    /// publication: the simulator's `Unfenced` and `Unflushed`.
    PublishOrder,
    /// A signal was stored to, or used again, while a packet that completes
    /// it or a barrier that waits on it is unfinished: the simulator's
    /// `StoreWhileInFlight`, the checker's re-armed-while-in-flight and
    /// re-armed-before-the-GPU-waiter.
    RearmWhileInFlight,
    /// Memory or a signal released while in use, released twice, or not
    /// the caller's to release.
    BadRelease,
    /// A handle that is not a live signal ROCr made (destroyed, in a freed
    /// block, not at a signal's start, never ROCr's).
    BadSignal,
    /// Memory an agent was never granted access to.
    NoAccess,
    /// A queue misused: its doorbell after destruction or with a bad packet
    /// id, a slot overwritten before the packet processor consumed it,
    /// profiling switched mid-stream, a queue that is not live.
    BadQueueUse,
    /// A ROCr call before `hsa_init`.
    BeforeInit,
    /// Objects still alive at `hsa_shut_down`.
    Leak,
    /// Anything else the simulator saw (a malformed packet, an unknown
    /// signal, an invalid write).
    Simulator,
    /// The stand-in itself failed (a panic, a callback's panic): its own
    /// bug, not necessarily the caller's.
    StandinBug,
}

impl ViolationKind {
    /// Every kind, in declaration order.
    pub const ALL: [ViolationKind; 10] = [
        ViolationKind::PublishOrder,
        ViolationKind::RearmWhileInFlight,
        ViolationKind::BadRelease,
        ViolationKind::BadSignal,
        ViolationKind::NoAccess,
        ViolationKind::BadQueueUse,
        ViolationKind::BeforeInit,
        ViolationKind::Leak,
        ViolationKind::Simulator,
        ViolationKind::StandinBug,
    ];

    /// Its name on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            ViolationKind::PublishOrder => "PublishOrder",
            ViolationKind::RearmWhileInFlight => "RearmWhileInFlight",
            ViolationKind::BadRelease => "BadRelease",
            ViolationKind::BadSignal => "BadSignal",
            ViolationKind::NoAccess => "NoAccess",
            ViolationKind::BadQueueUse => "BadQueueUse",
            ViolationKind::BeforeInit => "BeforeInit",
            ViolationKind::Leak => "Leak",
            ViolationKind::Simulator => "Simulator",
            ViolationKind::StandinBug => "StandinBug",
        }
    }

    /// The kind a name on the wire names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// The kind of a violation the simulator under the stand-in saw.
    pub fn of_simulator(violation: &sigretire_sim::Violation) -> Self {
        use sigretire_sim::Violation;
        match violation {
            Violation::Unfenced { .. } | Violation::Unflushed { .. } => ViolationKind::PublishOrder,
            Violation::StoreWhileInFlight { .. } => ViolationKind::RearmWhileInFlight,
            _ => ViolationKind::Simulator,
        }
    }
}

/// One violation: its kind and what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// What kind of mistake it was.
    pub kind: ViolationKind,
    /// What happened, for people.
    pub text: String,
}

impl Violation {
    /// A violation of `kind`, described by `text`.
    pub fn new(kind: ViolationKind, text: impl Into<String>) -> Self {
        Self {
            kind,
            text: text.into(),
        }
    }

    /// The line it travels as (newlines in the text become spaces).
    pub(crate) fn to_line(&self) -> String {
        format!("{}\t{}", self.kind.name(), self.text.replace('\n', " "))
    }

    /// A line as [`to_line`](Self::to_line) wrote it; a line of no known
    /// kind (a library of another build) is the stand-in's own bug.
    pub(crate) fn from_line(line: &str) -> Self {
        match line.split_once('\t') {
            Some((name, text)) => match ViolationKind::from_name(name) {
                Some(kind) => Self::new(kind, text),
                None => Self::new(ViolationKind::StandinBug, line),
            },
            None => Self::new(ViolationKind::StandinBug, line),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.kind.name(), self.text)
    }
}

/// The violations one runtime instance saw, in order: the sink the
/// instance's components (memory, queues, checker) record into, so that they
/// need only this, not the instance.
#[derive(Default)]
pub(crate) struct Violations(parking_lot::Mutex<Vec<Violation>>);

impl Violations {
    /// Records a host action that ROCr or the hardware would not forgive.
    pub(crate) fn record(&self, kind: ViolationKind, text: String) {
        self.0.lock().push(Violation::new(kind, text));
    }

    /// Every violation recorded so far.
    pub(crate) fn all(&self) -> Vec<Violation> {
        self.0.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_survives_the_wire() {
        for kind in ViolationKind::ALL {
            let sent = Violation::new(kind, "a\nb");
            let received = Violation::from_line(&sent.to_line());
            assert_eq!(received, Violation::new(kind, "a b"));
        }
        assert_eq!(
            Violation::from_line("Nonsense\tx").kind,
            ViolationKind::StandinBug
        );
    }
}
