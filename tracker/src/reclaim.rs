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
use crate::retiring::RetiringTracker;
use crate::ring::{Armed, Use};
use crate::share::CellPtr;
use crate::ticket::Status;

/// The store ordering state: stores are numbered; fences and flushes cover
/// every store up to the number current when they were issued.
pub(crate) struct StoreOrder {
    pub(crate) stores_issued: u64,
    fenced_through: u64,
    flushed_through: u64,
    /// The queue's ring is in system memory: packets do not follow the signal
    /// stores through the BAR, so an HDP flush must come between them.
    flush_before_publish: bool,
}

impl StoreOrder {
    pub(crate) fn new(flush_before_publish: bool) -> Self {
        Self {
            stores_issued: 0,
            fenced_through: 0,
            flushed_through: 0,
            flush_before_publish,
        }
    }

    pub(crate) fn set_flush_before_publish(&mut self, flush: bool) {
        self.flush_before_publish = flush;
    }
}

impl<M: SignalMemory, Q: QueueView> RetiringTracker<M, Q> {
    /// One counted load of a signal.
    pub(crate) fn load(&mut self, cell: CellPtr<M::Signal>) -> i64 {
        // SAFETY: the cell belongs to `self.shared`.
        let c = unsafe { cell.get() };
        self.stats.accesses[c.placement.index()].loads += 1;
        // SAFETY: the signal came from this memory's `allocate`, and the
        // memory lives as long as `self.shared`.
        unsafe { self.shared.memory.load(c.signal) }
    }

    /// One counted store; returns nothing, but numbers the store.
    pub(crate) fn store(&mut self, cell: CellPtr<M::Signal>, value: i64) {
        // SAFETY: the cell belongs to `self.shared`.
        let c = unsafe { cell.get() };
        self.stats.accesses[c.placement.index()].stores += 1;
        self.order.stores_issued += 1;
        // SAFETY: as in `load`.
        unsafe { self.shared.memory.store(c.signal, value) }
    }

    /// Arms a signal (value 1) and adds it to its pool.
    pub(crate) fn arm(&mut self, cell: CellPtr<M::Signal>) {
        self.store(cell, 1);
        // SAFETY: the cell belongs to `self.shared`.
        let placement = unsafe { cell.get() }.placement;
        self.ring.put_armed(
            placement,
            Armed {
                cell,
                store: self.order.stores_issued,
            },
        );
    }

    fn rearm(&mut self, cell: CellPtr<M::Signal>) {
        self.arm(cell);
        self.stats.rearms += 1;
    }

    /// Makes the arming store `store` of a signal of `placement` visible to
    /// the GPU before the packet using it is published: a store fence for
    /// write-combined device memory, plus an HDP flush when the packet reaches
    /// the GPU by another path (a ring in system memory, or a copy engine).
    pub(crate) fn make_visible(&mut self, placement: Placement, store: u64, copy_engine: bool) {
        if placement != Placement::Device {
            return;
        }
        let order = &mut self.order;
        if store > order.fenced_through {
            self.shared.memory.store_fence();
            order.fenced_through = order.stores_issued;
            self.stats.accesses[placement.index()].fences += 1;
        }
        if (copy_engine || order.flush_before_publish) && store > order.flushed_through {
            self.shared.memory.hdp_flush();
            order.flushed_through = order.fenced_through;
            self.stats.accesses[placement.index()].flushes += 1;
        }
    }

    /// The walk: retires uses oldest first while a proof holds, harvests
    /// their timestamps, releases the pins they held as consumers, and
    /// re-arms their signals (or parks those still held). Reads no signal
    /// memory except to confirm a failed submission's issued part finished.
    pub(crate) fn reclaim_uses(&mut self) -> usize {
        let mut rearmed = self.collect_returns();
        let mut last = None;
        while let Some(u) = self.ring.oldest().copied() {
            if !self.settle(&u) {
                break;
            }
            self.ring.pop_oldest();
            // SAFETY: the cell belongs to `self.shared`.
            let cell = unsafe { u.cell.get() };
            if cell.phase_of(u.seq) == Some(Some(Status::Failed)) {
                // Before the cell can serve another use, so the use's ticket
                // keeps answering `Failed`.
                self.shared.record_failures(u.seq, u.seq);
            }
            if u.is(Use::<M::Signal>::FENCE) {
                self.proofs.retire_fence(u.seq);
            }
            if u.is(Use::<M::Signal>::TIMED) && !u.is(Use::<M::Signal>::HARVESTED) {
                self.harvest(u.seq, u.cell);
            }
            self.attachments.release_through(u.seq);
            if cell.holds() > 0 && self.shared.park(cell) {
                self.parked.push(u.cell);
                self.stats.parks += 1;
            } else {
                self.rearm(u.cell);
                rearmed += 1;
            }
            last = Some(u.seq);
        }
        if let Some(seq) = last {
            self.shared.publish_retired_through(seq);
        }
        rearmed
    }

    /// Re-arms parked signals whose last holder let go. Cheap when nothing
    /// changed: it scans only after a holder left a hint.
    pub(crate) fn collect_returns(&mut self) -> usize {
        if self.parked.is_empty() || !self.shared.take_returns() {
            return 0;
        }
        let mut returned = 0;
        let mut i = 0;
        while i < self.parked.len() {
            let cell = self.parked[i];
            // SAFETY: the cell belongs to `self.shared`.
            let c = unsafe { cell.get() };
            if c.holds() == 0 {
                self.shared.unpark(c);
                self.parked.swap_remove(i);
                self.rearm(cell);
                self.stats.unparks += 1;
                returned += 1;
            } else {
                i += 1;
            }
        }
        returned
    }
}
