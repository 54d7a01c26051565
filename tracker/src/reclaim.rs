//! Re-arming: the ordered walk from the oldest use, and the store ordering
//! that makes re-armed signals visible to the GPU before any packet uses them.
//!
//! The walk re-arms each retired use's signal with one direct store and stops
//! at the first use not known retired, so a signal is never re-armed while an
//! earlier use may still be pending. It issues no fence: a re-armed signal is
//! tagged with its store's number, and [`make_visible`](RetiringTracker::make_visible)
//! fences only when a signal whose arming is not yet fenced is handed out.
//! One fence therefore covers every re-arm since the previous one — a whole
//! reclaim batch in steady state, not one per signal.

use crate::backend::{Placement, QueueView, SignalMemory};
use crate::planted::{self, Bug};
use crate::retire::Outcome;
use crate::retiring::RetiringTracker;
use crate::ring::{Slot, Spare};
use crate::share::CellPtr;
use arrayvec::ArrayVec;

/// The store ordering state: stores are numbered; fences and flushes cover
/// every store up to the number current when they were issued.
pub(crate) struct StoreOrder {
    pub(crate) stores_issued: u64,
    fenced_through: u64,
    flushed_through: u64,
    /// The queue's ring is in system memory: packets do not follow the signal
    /// stores through the BAR, so an HDP flush must come between them.
    flush_before_publish: bool,
    /// Device stores an AQL packet may rely on with no more work: the fenced
    /// ones, or the flushed ones when packets need a flush too. Kept as one
    /// number so the acquire fast path compares once.
    visible_through: u64,
}

impl StoreOrder {
    pub(crate) fn new(flush_before_publish: bool) -> Self {
        Self {
            stores_issued: 0,
            fenced_through: 0,
            flushed_through: 0,
            flush_before_publish,
            visible_through: 0,
        }
    }

    pub(crate) fn set_flush_before_publish(&mut self, flush: bool) {
        self.flush_before_publish = flush;
        self.update_visible();
    }

    fn update_visible(&mut self) {
        self.visible_through = if self.flush_before_publish {
            self.fenced_through.min(self.flushed_through)
        } else {
            self.fenced_through
        };
    }

    /// Whether an AQL packet may use a signal of `placement` armed by store
    /// `store` without a fence or flush first.
    #[inline]
    pub(crate) fn is_visible(&self, placement: Placement, store: u64) -> bool {
        placement != Placement::Device || store <= self.visible_through
    }
}

impl<M: SignalMemory, Q: QueueView> RetiringTracker<M, Q> {
    /// One counted load of a signal.
    pub(crate) fn load(&mut self, cell: CellPtr<M::Signal>) -> i64 {
        let c = self.shared.cell(cell);
        self.stats.accesses[c.placement.index()].loads += 1;
        // SAFETY: the signal came from this memory's `allocate`, and the
        // memory lives as long as `self.shared`.
        unsafe { self.shared.memory.load(c.signal) }
    }

    /// One counted store; returns nothing, but numbers the store.
    pub(crate) fn store(&mut self, cell: CellPtr<M::Signal>, value: i64) {
        let c = self.shared.cell(cell);
        self.stats.accesses[c.placement.index()].stores += 1;
        self.order.stores_issued += 1;
        // SAFETY: as in `load`.
        unsafe { self.shared.memory.store(c.signal, value) }
    }

    /// Makes the arming store `store` of a signal of `placement` visible to
    /// the GPU before the packet using it is published: a store fence for
    /// write-combined device memory, plus an HDP flush when the packet reaches
    /// the GPU by another path (a ring in system memory, or a copy engine).
    #[inline]
    pub(crate) fn make_visible(&mut self, placement: Placement, store: u64, copy_engine: bool) {
        if placement == Placement::Device
            && (store > self.order.fenced_through
                || ((copy_engine || self.order.flush_before_publish)
                    && store > self.order.flushed_through))
        {
            self.fence_and_flush(store, copy_engine);
        }
    }

    /// The slow half of `make_visible`: once per batch of re-arms.
    #[cold]
    #[inline(never)]
    fn fence_and_flush(&mut self, store: u64, copy_engine: bool) {
        let device = Placement::Device.index();
        let order = &mut self.order;
        if store > order.fenced_through {
            if !planted::active(Bug::SkipStoreFence) {
                self.shared.memory.store_fence();
            }
            order.fenced_through = order.stores_issued;
            self.stats.accesses[device].fences += 1;
        }
        if (copy_engine || order.flush_before_publish) && store > order.flushed_through {
            if !planted::active(Bug::SkipHdpFlush) {
                self.shared.memory.hdp_flush();
            }
            order.flushed_through = order.fenced_through;
            self.stats.accesses[device].flushes += 1;
        }
        order.update_visible();
    }

    /// The walk: retires uses oldest first while a proof holds, harvests
    /// their timestamps, releases the pins they held as consumers, and
    /// re-arms their signals in place (or parks those still held and gives
    /// the slot a spare). Reads no signal memory except to confirm that a
    /// failed submission's issued part finished.
    pub(crate) fn reclaim_uses(&mut self) -> usize {
        let mut rearmed = if self.parked.is_empty() {
            0
        } else {
            self.collect_returns()
        };
        let first = self.ring.head();
        // The walk does not change the proofs: read them once.
        let generation_start = self.proofs.generation_start();
        let proven_through = self.proofs.proven_through();
        let mut batch = RearmBatch::new(self.order.stores_issued + 1);
        loop {
            // Fast path: plain uses a fence proves, whose signals nobody holds
            // and whose outcomes nobody recorded: count them and queue their
            // re-arms in place (stored together, a batch at a time). Every
            // current-generation AQL use up to the proven fence completed, so
            // the walk's end is worked out once, not use by use.
            let head = self.ring.head();
            if head >= generation_start && head <= proven_through && self.attachments.is_empty() {
                let proven = (proven_through + 1 - head) as usize;
                let Some(oldest) = self.ring.oldest() else {
                    break;
                };
                let placement = self.shared.cell(oldest.cell).placement;
                batch.begin(placement);
                let taken = self
                    .ring
                    .take_oldest_while(batch.room().min(proven), |seq, slot| {
                        if slot.flags & (Slot::<M::Signal>::COPY | Slot::<M::Signal>::TIMED) != 0 {
                            return false;
                        }
                        let cell = self.shared.cell(slot.cell);
                        if cell.holds() != 0 || cell.placement != placement || !cell.complete(seq) {
                            return false;
                        }
                        slot.store = batch.number;
                        batch.push(cell.signal);
                        true
                    });
                let by_drain = self.proofs.drained_among(head, taken as u64);
                self.stats.retired += taken as u64;
                self.stats.retired_by_fence += taken as u64 - by_drain;
                self.stats.retired_by_drain += by_drain;
                rearmed += taken;
                if batch.is_full() {
                    self.store_batch(&mut batch);
                    continue;
                }
            }
            let seq = self.ring.head();
            let Some(slot) = self.ring.oldest() else {
                break;
            };
            let slot = *slot;
            // Everything else stores on its own: the batch goes first.
            self.store_batch(&mut batch);
            let Some(outcome) = self.settle(seq, &slot) else {
                break;
            };
            match self.retire_special(seq, slot, outcome) {
                None => break, // held, and no spare to take its place: wait for one
                Some(true) => rearmed += 1,
                Some(false) => {}
            }
            self.ring.advance_head();
            batch.number = self.order.stores_issued + 1;
        }
        self.store_batch(&mut batch);
        if self.ring.head() > first {
            self.shared.publish_retired_through(self.ring.head() - 1);
        }
        if !self.attachments.is_empty() && self.ring.head() < self.ring.tail() {
            self.release_pins_of_completed_consumers();
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
    /// them.) Cold: only with pins attached.
    #[cold]
    fn release_pins_of_completed_consumers(&mut self) {
        let mut attachments = core::mem::take(&mut self.attachments);
        attachments.release_where(|consumer| {
            self.ring.get(consumer).is_some_and(|slot| {
                self.known(consumer, slot.cell) == Some(crate::ticket::Status::Complete)
            })
        });
        self.attachments = attachments;
    }

    /// Re-arms a batch of signals with one backend call, as one numbered store.
    fn store_batch(&mut self, batch: &mut RearmBatch<M::Signal>) {
        let Some(placement) = batch.placement.take() else {
            return;
        };
        if batch.signals.is_empty() {
            return;
        }
        let n = batch.signals.len() as u64;
        // SAFETY: every signal came from this memory, kept alive by `self.shared`.
        unsafe { self.shared.memory.store_many(&batch.signals, 1) };
        self.stats.accesses[placement.index()].stores += n;
        self.stats.rearms += n;
        self.order.stores_issued = batch.number;
        batch.signals.clear();
        batch.number += 1;
    }

    fn rearm_oldest(&mut self, cell: CellPtr<M::Signal>) {
        self.store(cell, 1);
        let store = self.order.stores_issued;
        self.ring.oldest_mut().expect("in flight").store = store;
        self.stats.rearms += 1;
    }

    /// Retires the oldest use in every case the fast path leaves out: a
    /// failure to record, timestamps to harvest, pins to release, a held
    /// signal to park. Returns `None` if it cannot retire yet, else whether
    /// it re-armed.
    fn retire_special(
        &mut self,
        seq: u64,
        slot: Slot<M::Signal>,
        outcome: Outcome,
    ) -> Option<bool> {
        let cell = self.shared.cell(slot.cell);
        // The use is done and every use before it retired: the pins it held
        // as a consumer go now, even if its own signal must wait for a
        // spare (two queues whose uses pin each other's signals would
        // otherwise keep each other parked while no spare can be had).
        let consumers_done = if planted::active(Bug::DropPinEarly) {
            seq + 1
        } else {
            seq
        };
        self.attachments.release_through(consumers_done);
        let held = !planted::active(Bug::RearmHeldSignal) && cell.holds() > 0;
        if held && !self.park_oldest(slot) {
            return None;
        }
        if outcome == Outcome::Failed {
            // Before the cell can serve another use, so the use's ticket
            // keeps answering `Failed`.
            self.shared.record_failures(seq, seq);
        }
        // Only a use that ran has stamps worth keeping.
        if outcome == Outcome::Complete
            && slot.flags & (Slot::<M::Signal>::TIMED | Slot::<M::Signal>::HARVESTED)
                == Slot::<M::Signal>::TIMED
            && !planted::active(Bug::HarvestAfterRearm)
        {
            self.harvest(seq, slot.cell);
        }
        if !held || self.ring.oldest().is_some_and(|s| s.cell == slot.cell) {
            // Not parked (or its holders let go meanwhile): re-arm in place.
            self.rearm_oldest(slot.cell);
            return Some(true);
        }
        Some(false)
    }

    /// Sets the oldest use's held signal aside and gives its slot an armed
    /// spare of the same placement (a new batch if there is none, the other
    /// placement if that fails). Returns false if no spare could be found.
    fn park_oldest(&mut self, slot: Slot<M::Signal>) -> bool {
        let placement = self.shared.cell(slot.cell).placement;
        if self.ring.spares(placement) == 0 {
            let _ = self.allocate_spares(self.config.refill_batch, placement);
        }
        let Some(spare) = self
            .ring
            .take_spare(placement)
            .or_else(|| self.ring.take_spare(placement.other()))
        else {
            return false;
        };
        if !self.shared.park(self.shared.cell(slot.cell)) {
            // Its holders let go meanwhile: re-arm it in place after all.
            let placement = self.shared.cell(spare.cell).placement;
            self.ring.put_spare(placement, spare);
            return true;
        }
        self.parked.push(slot.cell);
        let oldest = self.ring.oldest_mut().expect("in flight");
        oldest.cell = spare.cell;
        oldest.store = spare.store;
        self.stats.parks += 1;
        true
    }

    /// Re-arms parked signals whose last holder let go and returns them to
    /// the spares. Cheap when nothing changed: it scans only after a holder
    /// left a hint.
    pub(crate) fn collect_returns(&mut self) -> usize {
        if self.parked.is_empty() || !self.shared.take_returns() {
            return 0;
        }
        let mut returned = 0;
        let mut i = 0;
        while i < self.parked.len() {
            let cell = self.parked[i];
            let c = self.shared.cell(cell);
            if c.holds() == 0 {
                let placement = c.placement;
                self.shared.unpark(c);
                self.parked.swap_remove(i);
                self.store(cell, 1);
                self.ring.put_spare(
                    placement,
                    Spare {
                        cell,
                        store: self.order.stores_issued,
                    },
                );
                self.stats.rearms += 1;
                self.stats.unparks += 1;
                returned += 1;
            } else {
                i += 1;
            }
        }
        returned
    }
}

/// Signals re-armed together: one placement, one store number, one backend
/// call. Fences compare store numbers, so the batch counts as one store.
struct RearmBatch<S> {
    signals: ArrayVec<S, REARM_BATCH>,
    placement: Option<crate::backend::Placement>,
    /// The store number every slot in the batch records.
    number: u64,
}

/// Re-arms stored with one backend call.
pub(crate) const REARM_BATCH: usize = 32;

impl<S> RearmBatch<S> {
    fn new(number: u64) -> Self {
        Self {
            signals: ArrayVec::new(),
            placement: None,
            number,
        }
    }

    /// Starts a batch of `placement`'s signals (the walk checks each use's).
    /// The batch must be empty: its signals are stored with one placement.
    fn begin(&mut self, placement: crate::backend::Placement) {
        debug_assert!(self.signals.is_empty(), "a batch holds one placement");
        self.placement = Some(placement);
    }

    /// Adds a signal of the batch's placement.
    fn push(&mut self, signal: S) {
        debug_assert!(self.placement.is_some(), "begin the batch first");
        self.signals.push(signal);
    }

    fn is_full(&self) -> bool {
        self.signals.is_full()
    }

    fn room(&self) -> usize {
        self.signals.remaining_capacity()
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests;
