//! Which tracker a scenario drives: a leaf that the driver, the model, the
//! search and the replay all name, so that the model does not name the
//! driver.

/// Which tracker a scenario drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrackerKind {
    /// [`RetiringTracker`](sigretire_tracker::RetiringTracker).
    Retiring,
    /// [`BaselineTracker`](sigretire_baseline::BaselineTracker), CLR's original design.
    Baseline,
}

impl TrackerKind {
    /// Both kinds.
    pub const ALL: [TrackerKind; 2] = [TrackerKind::Retiring, TrackerKind::Baseline];

    /// Whether the tracker proves retirement from fences the read index
    /// nominates. The baseline by design has one proof only, a load of the
    /// use's own signal: the model expects nothing of its `poll`.
    pub const fn probes_fences(self) -> bool {
        matches!(self, TrackerKind::Retiring)
    }

    /// Whether the tracker retires everything when told its queue drained.
    /// CLR's original tracker has no notion of a drained queue: the model
    /// expects nothing of the baseline's `note_drained`.
    pub const fn retires_on_drain(self) -> bool {
        matches!(self, TrackerKind::Retiring)
    }

    /// Whether the tracker answers a completed use's status from host
    /// memory once it knows it. CLR's original tracker does not: it loads
    /// the signal every time, so between loads it may answer "unknown"
    /// again (never a different outcome).
    pub const fn remembers_completions(self) -> bool {
        matches!(self, TrackerKind::Retiring)
    }

    /// Whether back-pressure comes only at the growth limit. The baseline
    /// grows only when the slot two ahead is busy, so with out-of-order
    /// completions the next slot can be busy first, and it pushes back below
    /// the limit (where CLR would block).
    pub const fn backpressure_only_at_limit(self) -> bool {
        matches!(self, TrackerKind::Retiring)
    }

    /// Whether every use leaves the ring once it is retired and reclaimed.
    /// The baseline keeps each slot's last use until the slot is reused.
    pub const fn empties_ring(self) -> bool {
        matches!(self, TrackerKind::Retiring)
    }
}
