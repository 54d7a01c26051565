//! Timestamps: harvested once, before the signal is re-armed, into host
//! memory, so no reader ever sees a re-armed signal's stamps and an event's
//! elapsed time costs no PCIe read.
//!
//! Uses that exist only so the profiler can time them get host-memory signals
//! (see [`Purpose::TimingOnly`](crate::Purpose::TimingOnly)), so harvesting
//! theirs costs no PCIe read either.

use crate::backend::{QueueView, SignalMemory, Timestamps};
use crate::error::TimestampsError;
use crate::planted::{self, Bug};
use crate::retiring::RetiringTracker;
use crate::ring::Slot;
use crate::share::CellPtr;
use crate::stamps::Kept;
use crate::ticket::{Status, Ticket};

impl<M: SignalMemory, Q: QueueView> RetiringTracker<M, Q> {
    /// Reads use `seq`'s stamps from its signal, once, into its cell (for
    /// lock-free readers while the signal serves it) and into the history
    /// (for its ticket, after the signal serves later uses).
    pub(crate) fn harvest(&mut self, seq: u64, cell: CellPtr<M::Signal>) {
        let c = self.shared.cell(cell);
        self.stats.accesses[c.placement.index()].timestamp_reads += 1;
        // SAFETY: the signal came from this memory, which `self.shared` keeps alive.
        let stamps = unsafe { self.shared.memory.timestamps(c.signal) };
        if let Some(stamps) = stamps {
            c.store_stamps(seq, stamps);
        }
        self.stamps.record(seq, stamps);
        self.stats.harvests += 1;
    }

    /// What the history says of a timed use, as an answer; `None` if it
    /// was never harvested.
    fn kept(&self, seq: u64) -> Option<Result<Option<Timestamps>, TimestampsError>> {
        match self.stamps.get(seq) {
            Kept::Stamps(stamps) => Some(Ok(Some(stamps))),
            Kept::Unstamped => Some(Ok(None)),
            Kept::Expired => Some(Err(TimestampsError::Expired { seq })),
            Kept::Unknown => None,
        }
    }

    pub(crate) fn timestamps_of(
        &mut self,
        ticket: &Ticket,
    ) -> Result<Option<Timestamps>, TimestampsError> {
        let cell = self.cell_of(ticket)?;
        if !ticket.timed {
            return Ok(None);
        }
        if let Some(stamps) = self.shared.cell(cell).stamps(ticket.seq) {
            return Ok(Some(stamps));
        }
        if let Some(slot) = self.ring.get(ticket.seq).copied() {
            // In flight: harvest it now if it is complete.
            if slot.is(Slot::<M::Signal>::HARVESTED) {
                return self.kept(ticket.seq).unwrap_or(Ok(None));
            }
            if self.query_use(ticket)? != Status::Complete {
                return Ok(None);
            }
            // The query may have reclaimed (and harvested) it already.
            if let Some(answer) = self.kept(ticket.seq) {
                return answer;
            }
            self.harvest(ticket.seq, slot.cell);
            if let Some(slot) = self.ring.get_mut(ticket.seq) {
                slot.flags |= Slot::<M::Signal>::HARVESTED;
            }
            return self.kept(ticket.seq).unwrap_or(Ok(None));
        }
        if self.known(ticket.seq, cell) == Some(Status::Failed)
            || planted::active(Bug::StampsOnlyInTheCell)
        {
            return Ok(None);
        }
        if planted::active(Bug::HarvestAfterRearm) && self.kept(ticket.seq).is_none() {
            self.harvest(ticket.seq, cell);
        }
        // Retired: harvested on the way out (a failed use has no stamps).
        self.kept(ticket.seq).unwrap_or(Ok(None))
    }
}
