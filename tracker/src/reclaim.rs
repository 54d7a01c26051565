//! The reclaim walk: retires uses oldest first while a proof holds, and
//! gets their signals ready for new uses — re-armed in place, a batch of
//! stores at a time, or, if someone still holds one, set aside (parked)
//! while an armed spare takes its slot, to come back once its last holder
//! lets go.

use crate::backend::SignalMemory;
use crate::pin::Attachments;
use crate::retire::{Outcome, Prover};
use crate::ring::Spare;
use crate::share::Cell;
use crate::stamps::StampHistory;
use crate::supply::Supply;
use crate::sync::Arc;
use crate::ticket::{Status, flag};

/// Signals of retired uses still held elsewhere, waiting to come back.
pub(crate) struct Parked<S> {
    cells: Vec<Arc<Cell<S>>>,
}

impl<S> Default for Parked<S> {
    fn default() -> Self {
        Self { cells: Vec::new() }
    }
}

/// What parking a held signal came to.
enum Park<S> {
    /// Set aside, its cell here; an armed spare took its slot.
    Aside(Arc<Cell<S>>),
    /// Its holders let go meanwhile: it stays, to be re-armed in place.
    Stays,
}

impl<S> Parked<S> {
    pub(crate) fn len(&self) -> usize {
        self.cells.len()
    }
}

/// The walk, over what it retires (the prover's ring and proofs), what it
/// releases (pins, parked signals), what it keeps (timestamps) and where
/// spares come from when a held signal must leave its slot.
pub(crate) struct Reclaimer<'a, M: SignalMemory> {
    pub(crate) prover: Prover<'a, M>,
    pub(crate) attachments: &'a mut Attachments<M>,
    pub(crate) parked: &'a mut Parked<M::Signal>,
    pub(crate) stamps: &'a mut StampHistory,
    pub(crate) supply: &'a mut Supply<M>,
}

impl<M: SignalMemory> Reclaimer<'_, M> {
    /// The walk: retires uses oldest first while a proof holds, harvests
    /// their timestamps, releases the pins they held as consumers, and
    /// re-arms their signals in place (or parks those still held and gives
    /// the slot a spare). Reads no signal memory except to confirm that a
    /// failed submission's issued part finished. Returns the signals
    /// re-armed.
    pub(crate) fn walk(&mut self) -> usize {
        if self.finds_nothing() {
            return 0;
        }
        let mut rearmed = if self.parked.cells.is_empty() {
            0
        } else {
            self.collect_returns()
        };
        loop {
            rearmed += self.walk_from_head();
            // Stopped before the end of the ring (at a use not yet proven,
            // or held with no spare to take its place): the pins of the
            // consumers behind it that are known complete go now. If they
            // held the use it stopped at, that use is free: walk on, or
            // the caller would be told its signal is held by pins already
            // gone.
            if self.attachments.is_empty()
                || self.prover.ring.head() == self.prover.ring.tail()
                || !self.release_pins_of_completed_consumers()
            {
                return rearmed;
            }
        }
    }

    /// Whether a walk would retire and release nothing: no parked signal
    /// to take back, no pin to release, and the oldest use neither proven
    /// (what the walk's first step asks: the fast path's run and
    /// [`settle`](Prover::settle)'s fence proof) nor known done or failed
    /// by its cell. A full ring walks before it probes, in case something
    /// proved room already; most times nothing did, and these few looks
    /// are then all it costs.
    #[inline]
    fn finds_nothing(&self) -> bool {
        if !self.parked.cells.is_empty() || !self.attachments.is_empty() {
            return false;
        }
        let head = self.prover.ring.head();
        let Some(oldest) = self.prover.ring.oldest() else {
            return true;
        };
        self.prover.proofs.proven_run(head) == 0
            && !self.prover.proofs.fence_proves(head, oldest)
            && oldest.cell.phase_of(head).is_none()
    }

    /// One pass of the walk, from the oldest use to the first it cannot
    /// retire.
    #[inline(always)]
    fn walk_from_head(&mut self) -> usize {
        let mut rearmed = 0;
        let first = self.prover.ring.head();
        let mut batch = self.prover.signals.rearm_batch();
        loop {
            // Fast path: plain uses a fence proves, whose signals nobody holds
            // and whose outcomes nobody recorded: count them and queue their
            // re-arms in place (stored together, a batch at a time). How far
            // the proof reaches is worked out once, not use by use.
            let head = self.prover.ring.head();
            let proven = self.prover.proofs.proven_run(head) as usize;
            if proven > 0 && self.attachments.is_empty() {
                let Some(oldest) = self.prover.ring.oldest() else {
                    break;
                };
                let placement = oldest.placement;
                batch.begin(placement);
                let number = batch.number();
                let room = batch.room();
                let mut filler = batch.filler();
                let taken = self
                    .prover
                    .ring
                    .take_oldest_while(room.min(proven), |seq, slot| {
                        if slot.flags & (flag::COPY | flag::TIMED) != 0
                            || slot.placement != placement
                        {
                            return false;
                        }
                        let cell: &Cell<M::Signal> = &slot.cell;
                        if cell.holds() != 0 || !cell.complete(seq) {
                            return false;
                        }
                        slot.store = number;
                        // SAFETY: the run takes at most `room` uses, one
                        // signal each, and asked for the room above.
                        unsafe { filler.push(cell.signal) };
                        true
                    });
                drop(filler);
                let stats = &mut *self.prover.stats;
                let by_drain = self.prover.proofs.drained_among(head, taken as u64);
                stats.retired += taken as u64;
                stats.retired_by_fence += taken as u64 - by_drain;
                stats.retired_by_drain += by_drain;
                rearmed += taken;
                if batch.is_full() {
                    self.store_batch(&mut batch);
                    continue;
                }
            }
            let seq = self.prover.ring.head();
            if self.prover.ring.oldest().is_none() {
                break;
            }
            // Everything else stores on its own: the batch goes first.
            self.store_batch(&mut batch);
            let Some(outcome) = self.prover.settle(seq) else {
                break;
            };
            match self.retire_special(seq, outcome) {
                None => break, // held, and no spare to take its place: wait for one
                Some(true) => rearmed += 1,
                Some(false) => {}
            }
            self.prover.ring.advance_head();
            batch.renumber(self.prover.signals.stores_issued());
        }
        self.store_batch(&mut batch);
        let head = self.prover.ring.head();
        if head > first {
            self.prover
                .signals
                .shared()
                .publish_retired_through(head - 1);
            if !self.prover.proofs.older().is_empty() {
                self.prover.proofs.forget_retired_generations(head);
            }
        }
        rearmed
    }

    /// The walk stopped before the end of the ring (at a use not yet
    /// proven, or held with no spare to take its place): the consumers
    /// behind it that are known complete have passed all the same, so
    /// their pins go now. Otherwise two queues whose uses pin each other's
    /// signals could keep each other's walks stopped for as long as no
    /// spare can be had. (A failed consumer keeps its pins until the walk
    /// reaches it: a failed submission's issued part may still wait on
    /// them.) Returns whether any pin went. Cold: only with pins attached.
    #[cold]
    fn release_pins_of_completed_consumers(&mut self) -> bool {
        let prover = &self.prover;
        let before = self.attachments.len();
        self.attachments.release_where(|consumer| {
            prover
                .ring
                .get(consumer)
                .is_some_and(|slot| prover.known(consumer, &slot.cell) == Some(Status::Complete))
        });
        self.attachments.len() < before
    }

    /// Re-arms a batch of signals with one backend call, as one numbered store.
    fn store_batch(&mut self, batch: &mut crate::signals::RearmBatch<M::Signal>) {
        self.prover.stats.rearms += self.prover.signals.store_batch(batch);
    }

    /// Re-arms the oldest use's signal in place.
    fn rearm_oldest(&mut self) {
        let Prover { ring, signals, .. } = &mut self.prover;
        let oldest = ring.oldest_mut().expect("in flight");
        oldest.store = signals.store(&oldest.cell, 1);
        self.prover.stats.rearms += 1;
    }

    /// Retires the oldest use (`seq`) in every case the fast path leaves
    /// out: a failure to record, timestamps to harvest, pins to release, a
    /// held signal to park. Returns `None` if it cannot retire yet, else
    /// whether it re-armed.
    fn retire_special(&mut self, seq: u64, outcome: Outcome) -> Option<bool> {
        // The use is done and every use before it retired: the pins it held
        // as a consumer go now, even if its own signal must wait for a
        // spare (two queues whose uses pin each other's signals would
        // otherwise keep each other parked while no spare can be had).
        let consumers_done = if planted!(DropPinEarly) { seq + 1 } else { seq };
        self.attachments.release_through(consumers_done);
        let slot = self.prover.ring.oldest().expect("in flight");
        let flags = slot.flags;
        let held = !planted!(RearmHeldSignal) && slot.cell.holds() > 0;
        // Its own cell, which parking moves out of the slot (a reference
        // count, taken only on this path).
        let parked = if held {
            Some(self.park_oldest()?)
        } else {
            None
        };
        let Prover {
            ring,
            signals,
            stats,
            ..
        } = &mut self.prover;
        let cell = match &parked {
            Some(Park::Aside(cell)) => cell,
            _ => &ring.oldest().expect("in flight").cell,
        };
        if outcome == Outcome::Failed {
            // Before the cell can serve another use, so the use's ticket
            // keeps answering `Failed`.
            signals.shared().record_failure(seq);
        }
        // Only a use that ran has stamps worth keeping.
        if outcome == Outcome::Complete
            && flags & (flag::TIMED | flag::HARVESTED) == flag::TIMED
            && !planted!(HarvestAfterRearm)
        {
            self.stamps.harvest(seq, cell, signals, stats);
        }
        if matches!(parked, Some(Park::Aside(_))) {
            return Some(false);
        }
        // Not parked (or its holders let go meanwhile): re-arm in place.
        self.rearm_oldest();
        Some(true)
    }

    /// Sets the oldest use's held signal aside and gives its slot an armed
    /// spare of the same placement (a new batch if there is none, the other
    /// placement if that fails). Returns `None` if no spare could be found,
    /// and whether the signal went aside (its holders may have let go
    /// meanwhile: then it stays, to be re-armed in place).
    fn park_oldest(&mut self) -> Option<Park<M::Signal>> {
        let Prover {
            ring,
            signals,
            stats,
            ..
        } = &mut self.prover;
        let placement = ring.oldest().expect("in flight").placement;
        if ring.spares(placement) == 0 {
            let _ =
                self.supply
                    .allocate(self.supply.refill_batch(), placement, signals, ring, stats);
        }
        let spare = ring
            .take_spare(placement)
            .or_else(|| ring.take_spare(placement.other()))?;
        let oldest = ring.oldest_mut().expect("in flight");
        if !signals.shared().park(&oldest.cell) {
            // Its holders let go meanwhile: re-arm it in place after all.
            ring.put_spare(spare);
            return Some(Park::Stays);
        }
        let aside = oldest.swap_signal(spare).cell;
        self.parked.cells.push(aside.clone());
        stats.parks += 1;
        Some(Park::Aside(aside))
    }

    /// Re-arms parked signals whose last holder let go and returns them to
    /// the spares. Cheap when nothing changed: it scans only after a holder
    /// left a hint.
    pub(crate) fn collect_returns(&mut self) -> usize {
        let Prover {
            ring,
            signals,
            stats,
            ..
        } = &mut self.prover;
        if self.parked.cells.is_empty() || !signals.shared().take_returns() {
            return 0;
        }
        let mut returned = 0;
        let mut i = 0;
        while i < self.parked.cells.len() {
            if self.parked.cells[i].holds() == 0 {
                let cell = self.parked.cells.swap_remove(i);
                let placement = cell.placement;
                signals.shared().unpark(&cell);
                let store = signals.store(&cell, 1);
                ring.put_spare(Spare {
                    cell,
                    placement,
                    store,
                });
                stats.rearms += 1;
                stats.unparks += 1;
                returned += 1;
            } else {
                i += 1;
            }
        }
        returned
    }
}
