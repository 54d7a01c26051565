//! Timestamps: harvested once, before the signal is re-armed, into host
//! memory, so no reader ever sees a re-armed signal's stamps and an event's
//! elapsed time costs no PCIe read.
//!
//! Uses that exist only so the profiler can time them get host-memory signals
//! (see [`Purpose::TimingOnly`](crate::Purpose::TimingOnly)), so harvesting
//! theirs costs no PCIe read either.

use crate::backend::{QueueView, SignalMemory, Timestamps};
use crate::error::Error;
use crate::planted::{self, Bug};
use crate::retiring::RetiringTracker;
use crate::ring::Slot;
use crate::share::CellPtr;
use crate::ticket::{Status, Ticket};

impl<M: SignalMemory, Q: QueueView> RetiringTracker<M, Q> {
    /// Reads use `seq`'s stamps from its signal into its cell.
    pub(crate) fn harvest(&mut self, seq: u64, cell: CellPtr<M::Signal>) {
        // SAFETY: the cell belongs to `self.shared`.
        let c = unsafe { cell.get() };
        self.stats.accesses[c.placement.index()].timestamp_reads += 1;
        // SAFETY: the signal came from this memory, which `self.shared` keeps alive.
        let stamps = unsafe { self.shared.memory.timestamps(c.signal) };
        c.store_stamps(seq, stamps);
        self.stats.harvests += 1;
    }

    pub(crate) fn timestamps_of(&mut self, ticket: &Ticket) -> Result<Option<Timestamps>, Error> {
        let cell = self.cell_of(ticket)?;
        // SAFETY: the cell belongs to `self.shared`.
        if let Some(stamps) = unsafe { cell.get() }.stamps(ticket.seq) {
            return Ok(Some(stamps));
        }
        let Some(slot) = self.ring.get(ticket.seq).copied() else {
            if planted::active(Bug::HarvestAfterRearm) {
                self.harvest(ticket.seq, cell);
                // SAFETY: as above.
                return Ok(unsafe { cell.get() }.stamps(ticket.seq));
            }
            // Reclaimed, and its cell serves another use now: the stamps are gone.
            return Ok(None);
        };
        if !slot.is(Slot::<M::Signal>::TIMED) || self.query_use(ticket)? != Status::Complete {
            return Ok(None);
        }
        // The query may have reclaimed (and harvested) it already.
        // SAFETY: the cell belongs to `self.shared`.
        if let Some(stamps) = unsafe { cell.get() }.stamps(ticket.seq) {
            return Ok(Some(stamps));
        }
        self.harvest(ticket.seq, slot.cell);
        if let Some(slot) = self.ring.get_mut(ticket.seq) {
            slot.flags |= Slot::<M::Signal>::HARVESTED;
        }
        // SAFETY: as above.
        Ok(unsafe { cell.get() }.stamps(ticket.seq))
    }
}
