//! Retirement proofs, cheapest first:
//!
//! 1. a completed fence of the same generation with a later AQL index retires
//!    every earlier use, with no load for them at all;
//! 2. the read index nominates the newest fence it passed, and one load of
//!    that fence's signal confirms it (fence probing);
//! 3. a CPU wait saw the use's signal at 0 (recorded in its cell);
//! 4. a direct load of the use's own signal, the fallback.
//!
//! A drained queue is a completed fence at its newest packet: it proves the
//! current generation's AQL uses, as a fence would, and nothing about an
//! older generation's or a copy engine's. Generations keep fences of one
//! hardware queue from proving anything about another's uses: a use belongs
//! to the current generation exactly when its sequence number is at least the
//! generation's first, so no generation number is ever compared.

use crate::backend::{QueueView, SignalMemory};
use crate::error::{AcquireError, FailSubmissionError, ForeignTicket};
use crate::planted::{self, Bug};
use crate::retiring::RetiringTracker;
use crate::ring::Slot;
use crate::share::CellPtr;
use crate::ticket::{Generation, Status, Ticket, aql_before};

/// What the tracker knows about its queue's progress.
pub(crate) struct Proofs {
    generation: Generation,
    bits: u32,
    /// The first sequence number of the current generation.
    generation_start: u64,
    /// The AQL index of the current generation's newest AQL use.
    last_aql: Option<u64>,
    /// That use's sequence number (0: none).
    last_aql_seq: u64,
    /// The sequence number of the current generation's newest fence (0: none).
    last_fence: u64,
    /// Every current-generation use up to this AQL index completed.
    proven: Option<u64>,
    /// The sequence number of the fence that proved `proven` (0: none). AQL
    /// indices grow along the ring, so every current-generation AQL use up to
    /// it is proven: the reclaim walk bounds itself with it once instead of
    /// comparing each use's index.
    proven_through: u64,
    /// The newest use a drain proved (0: none): only to tell, when counting
    /// retirements, which proof came from a drain.
    drained_through: u64,
    /// The read index when a probe last loaded a fence.
    probed_at: u64,
}

impl Proofs {
    pub(crate) fn new(bits: u32) -> Self {
        Self {
            generation: Generation::new(0, bits),
            bits,
            generation_start: 1,
            last_aql: None,
            last_aql_seq: 0,
            last_fence: 0,
            proven: None,
            proven_through: 0,
            drained_through: 0,
            probed_at: 0,
        }
    }

    pub(crate) fn generation(&self) -> Generation {
        self.generation
    }

    pub(crate) fn new_generation(&mut self, start: u64) {
        self.generation = self.generation.next(self.bits);
        self.generation_start = start;
        self.last_aql = None;
        self.last_aql_seq = 0;
        self.last_fence = 0;
        self.proven = None;
        self.proven_through = 0;
        // A new queue's read index starts afresh.
        self.probed_at = 0;
    }

    /// Whether AQL index `index` may follow the current generation's newest.
    #[inline]
    pub(crate) fn in_order(&self, index: u64) -> bool {
        match self.last_aql {
            Some(previous) => aql_before(previous, index),
            None => true,
        }
    }

    pub(crate) fn check_order(&self, index: u64) -> Result<(), AcquireError> {
        match self.last_aql {
            Some(previous) if !aql_before(previous, index) => {
                Err(AcquireError::AqlIndexOutOfOrder { index, previous })
            }
            _ => Ok(()),
        }
    }

    /// The newest AQL index (0 before any): what a copy-engine use records so
    /// that indices stay ordered along the ring.
    pub(crate) fn last_aql(&self) -> u64 {
        self.last_aql.unwrap_or(0)
    }

    pub(crate) fn last_fence(&self) -> u64 {
        self.last_fence
    }

    pub(crate) fn note_packet(&mut self, seq: u64, index: u64, barrier: bool) {
        self.last_aql = Some(index);
        self.last_aql_seq = seq;
        if barrier {
            self.last_fence = seq;
        }
    }

    /// Forgets a fence whose packet will not complete as a whole (its
    /// submission failed): if it was the newest, the newest is `previous`
    /// again, the fence before it (0: none), so new uses name that one. Not
    /// none: the read index, once past the failed packet, would then
    /// nominate nothing, and probing prove nothing until a newer fence.
    pub(crate) fn forget_fence(&mut self, seq: u64, previous: u64) {
        if self.last_fence == seq {
            self.last_fence = previous;
        }
    }

    /// The current queue is idle: every packet published on it completed,
    /// the newest AQL use's included, which proves every AQL use of the
    /// generation as a completed fence there would.
    pub(crate) fn drain(&mut self) {
        if let Some(aql) = self.last_aql {
            self.prove(self.last_aql_seq, aql);
            self.drained_through = self.drained_through.max(self.last_aql_seq);
        }
    }

    /// Of the uses `first..first + count`, how many a drain proved (for
    /// counting retirements by proof).
    pub(crate) fn drained_among(&self, first: u64, count: u64) -> u64 {
        (self.drained_through + 1).saturating_sub(first).min(count)
    }

    pub(crate) fn generation_start(&self) -> u64 {
        self.generation_start
    }

    /// Whether a fence of the current generation could ever prove use `seq`.
    pub(crate) fn fences_can_prove<S>(&self, seq: u64, slot: &Slot<S>) -> bool {
        (seq >= self.generation_start || planted::active(Bug::RetireAcrossGenerations))
            && !slot.is(Slot::<S>::COPY)
    }

    /// Whether a completed fence already proves use `seq` (proof 1).
    pub(crate) fn fence_proves<S>(&self, seq: u64, slot: &Slot<S>) -> bool {
        self.fences_can_prove(seq, slot) && self.is_proven(slot.aql)
    }

    /// What the proofs say about uses of the current generation, as plain
    /// values: (generation start, proven AQL index, newest use a drain proved).
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> (u64, Option<u64>, u64) {
        (self.generation_start, self.proven, self.drained_through)
    }

    /// The newest proven use's sequence number (0: none): every AQL use of
    /// the current generation up to it completed.
    pub(crate) fn proven_through(&self) -> u64 {
        self.proven_through
    }

    /// Fence `seq`, at AQL index `aql`, completed.
    fn prove(&mut self, seq: u64, aql: u64) {
        if self.proven.is_none_or(|p| aql_before(p, aql)) {
            self.proven = Some(aql);
            self.proven_through = seq;
        }
    }

    fn is_proven(&self, aql: u64) -> bool {
        self.proven.is_some_and(|p| !aql_before(p, aql))
    }
}

/// How a retired use ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Complete,
    Failed,
}

impl<M: SignalMemory, Q: QueueView> RetiringTracker<M, Q> {
    /// What is known about use `seq` without reading signal memory.
    pub(crate) fn known(&self, seq: u64, cell: CellPtr<M::Signal>) -> Option<Status> {
        let c = self.shared.cell(cell);
        if let Some(status) = self.shared.known_status(seq, c) {
            return Some(status);
        }
        let slot = self.ring.get(seq)?;
        self.proofs
            .fence_proves(seq, slot)
            .then_some(Status::Complete)
    }

    /// Fence probing (proofs 1 and 2): at most one load, of the newest fence
    /// the read index nominates, which retires every use up to it — and none
    /// unless the read index moved `min_batch` packets since the last load.
    /// Returns whether it proved anything new.
    pub(crate) fn probe_fence(&mut self, min_batch: u64) -> bool {
        let lo = self.ring.head().max(self.proofs.generation_start());
        let hi = self.ring.tail();
        if lo >= hi {
            return false;
        }
        // A CPU wait may already have seen the newest fence complete.
        let newest = self.proofs.last_fence();
        if newest >= lo && self.try_recorded_fence(newest) {
            return true;
        }
        let read_index = self.queue.read_index();
        // A batched poll waits for the read index to move a batch; any other
        // probe loads even at the same read index (its fence may have
        // completed since).
        if min_batch > 1 && read_index.wrapping_sub(self.proofs.probed_at) < min_batch {
            return false;
        }
        let Some(passed) = self
            .ring
            .last_where(lo, hi, |aql| aql_before(aql, read_index))
        else {
            return false;
        };
        let fence = self.ring.get(passed).expect("in flight").last_fence;
        if fence < lo {
            return false; // already reclaimed, or of an older generation
        }
        let slot = *self.ring.get(fence).expect("in flight");
        if !slot.is(Slot::<M::Signal>::FENCE) || self.proofs.is_proven(slot.aql) {
            return false;
        }
        if self.try_recorded_fence(fence) {
            return true;
        }
        if planted::active(Bug::TrustReadIndex) {
            self.proofs.prove(fence, slot.aql);
            return true;
        }
        self.stats.probes += 1;
        self.proofs.probed_at = read_index;
        let value = self.load(slot.cell);
        if value == 0 {
            self.proofs.prove(fence, slot.aql);
            return true;
        }
        if value < 0 {
            self.fail_pending();
            return false;
        }
        // Not yet: an older fence a CPU wait saw complete may still prove
        // something, without another load.
        self.prove_recorded_before(fence, lo)
    }

    /// Walks the fence chain back from `fence` (not included) to `lo`, at most
    /// a back-pressure window of fences, and proves through the newest one a
    /// CPU wait recorded complete.
    fn prove_recorded_before(&mut self, fence: u64, lo: u64) -> bool {
        let mut seq = fence;
        for _ in 0..self.config.backpressure_window {
            if seq <= lo {
                return false;
            }
            seq = self.ring.get(seq - 1).map_or(0, |slot| slot.last_fence);
            if seq < lo {
                return false;
            }
            if self.try_recorded_fence(seq) {
                return true;
            }
        }
        false
    }

    /// Proves through fence `seq` if a CPU wait recorded it complete and
    /// it can prove anything: a fence of the current generation (an older
    /// generation's AQL indices mean nothing on this queue).
    pub(crate) fn try_recorded_fence(&mut self, seq: u64) -> bool {
        let Some(slot) = self.ring.get(seq).copied() else {
            return false;
        };
        if !slot.is(Slot::<M::Signal>::FENCE) || !self.proofs.fences_can_prove(seq, &slot) {
            return false;
        }
        let recorded = self.shared.cell(slot.cell).phase_of(seq) == Some(Some(Status::Complete));
        if recorded && !self.proofs.is_proven(slot.aql) {
            self.proofs.prove(seq, slot.aql);
            return true;
        }
        false
    }

    /// Proof 4: one load of the use's own signal.
    pub(crate) fn load_own(&mut self, seq: u64) -> Status {
        let Some(slot) = self.ring.get(seq).copied() else {
            return self.shared.outcome_of_retired(seq);
        };
        let value = self.load(slot.cell);
        let cell = self.shared.cell(slot.cell);
        if value == 0 {
            if cell.complete(seq) {
                self.stats.retired += 1;
                self.stats.retired_by_load += 1;
            }
            if slot.is(Slot::<M::Signal>::FENCE) && self.proofs.fences_can_prove(seq, &slot) {
                self.proofs.prove(seq, slot.aql);
            }
            return Status::Complete;
        }
        if value < 0 {
            if self.proofs.fences_can_prove(seq, &slot) {
                self.fail_pending();
            } else if cell.fail(seq) {
                self.stats.failed += 1;
            }
        }
        self.known(seq, slot.cell).unwrap_or(Status::Pending)
    }

    pub(crate) fn query_use(&mut self, ticket: &Ticket) -> Result<Status, ForeignTicket> {
        let cell = self.cell_of(ticket)?;
        if let Some(status) = self.known(ticket.seq, cell) {
            self.learn_fence(ticket.seq, status);
            return Ok(status);
        }
        if self.probe_fence(1) {
            // Publish what the probe proved, so waiters and holders on other
            // threads learn it without a load of their own.
            self.reclaim_uses();
        }
        if let Some(status) = self.known(ticket.seq, cell) {
            return Ok(status);
        }
        Ok(self.load_own(ticket.seq))
    }

    /// A fence learned complete by any means proves its predecessors.
    fn learn_fence(&mut self, seq: u64, status: Status) {
        if status == Status::Complete
            && let Some(slot) = self.ring.get(seq).copied()
            && slot.is(Slot::<M::Signal>::FENCE)
            && self.proofs.fences_can_prove(seq, &slot)
        {
            self.proofs.prove(seq, slot.aql);
        }
    }

    /// Decides whether use `seq` (the oldest) is retired, recording the proof
    /// and counting it once. A failed submission's use is retired only once
    /// the part that was issued has finished.
    pub(crate) fn settle(&mut self, seq: u64, slot: &Slot<M::Signal>) -> Option<Outcome> {
        let cell = self.shared.cell(slot.cell);
        if self.proofs.fence_proves(seq, slot) {
            if cell.complete(seq) {
                self.stats.retired += 1;
                if self.proofs.drained_among(seq, 1) == 1 {
                    self.stats.retired_by_drain += 1;
                } else {
                    self.stats.retired_by_fence += 1;
                }
                return Some(Outcome::Complete);
            }
            // Decided before: a CPU wait saw it complete, or it failed (and
            // the proof covers whatever part of it was issued).
            return Some(match cell.phase_of(seq) {
                Some(Some(Status::Failed)) => Outcome::Failed,
                _ => Outcome::Complete,
            });
        }
        match cell.phase_of(seq) {
            Some(Some(Status::Complete)) => Some(Outcome::Complete),
            Some(Some(Status::Failed)) if slot.residual == 0 || self.issued_part_done(slot) => {
                Some(Outcome::Failed)
            }
            _ => None,
        }
    }

    /// Whether a failed submission's issued operations all finished: the
    /// signal then holds exactly the decrements that were never issued.
    fn issued_part_done(&mut self, slot: &Slot<M::Signal>) -> bool {
        let value = self.load(slot.cell);
        value < 0 || value == i64::from(slot.residual)
    }

    /// Whether use `seq` (in flight) still waits for the GPU: it is not
    /// known done, or it is a failed submission whose issued part may still
    /// run and that no proof settles yet (as in `settle`, one load tells).
    pub(crate) fn awaits_gpu(&mut self, seq: u64) -> bool {
        let Some(slot) = self.ring.get(seq).copied() else {
            return false;
        };
        match self.known(seq, slot.cell) {
            None | Some(Status::Pending) => true,
            Some(Status::Failed) => {
                slot.residual != 0
                    && !self.proofs.fence_proves(seq, &slot)
                    && !self.issued_part_done(&slot)
            }
            Some(Status::Complete) => false,
        }
    }

    /// A queue error: every use of the current generation not yet known done
    /// is settled by a load of its own signal — 0 means its packet completed
    /// before the error, anything else that it never will — so nothing that
    /// completed is reported failed. Cold: only after an error.
    pub(crate) fn fail_pending(&mut self) -> usize {
        let mut failed = 0;
        let first = self.ring.head().max(self.proofs.generation_start());
        for seq in first..self.ring.tail() {
            let slot = *self.ring.get(seq).expect("in flight");
            if !self.proofs.fences_can_prove(seq, &slot) || self.known(seq, slot.cell).is_some() {
                continue;
            }
            let value = self.load(slot.cell);
            let cell = self.shared.cell(slot.cell);
            if value == 0 {
                if cell.complete(seq) {
                    self.stats.retired += 1;
                    self.stats.retired_by_load += 1;
                }
            } else if cell.fail(seq) {
                self.stats.failed += 1;
                failed += 1;
            }
        }
        failed
    }

    /// Records in the cells what the current generation's fences proved, so
    /// it survives a queue change (which forgets the proofs themselves).
    pub(crate) fn record_fence_proofs(&mut self) {
        let first = self.ring.head().max(self.proofs.generation_start());
        for seq in first..self.ring.tail() {
            let slot = *self.ring.get(seq).expect("in flight");
            if self.proofs.fence_proves(seq, &slot) && self.shared.cell(slot.cell).complete(seq) {
                self.stats.retired += 1;
                self.stats.retired_by_fence += 1;
            }
        }
    }

    /// A submission failed after issuing `issued` of the use's operations.
    pub(crate) fn fail_use(
        &mut self,
        ticket: &Ticket,
        issued: u32,
    ) -> Result<(), FailSubmissionError> {
        let cell = self.cell_of(ticket)?;
        let invalid = |state| FailSubmissionError::InvalidState {
            seq: ticket.seq,
            state,
        };
        if let Some(status) = self.known(ticket.seq, cell) {
            return Err(invalid(if status == Status::Complete {
                "complete"
            } else {
                "failed"
            }));
        }
        let slot = self.ring.get_mut(ticket.seq).ok_or(invalid("retired"))?;
        if issued >= slot.ops {
            return Err(invalid("fully issued"));
        }
        slot.residual = slot.ops - issued;
        let was_fence = slot.is(Slot::<M::Signal>::FENCE);
        // It will never complete as a whole: it proves nothing.
        slot.flags &= !Slot::<M::Signal>::FENCE;
        if self.shared.cell(cell).fail(ticket.seq) {
            self.stats.failed += 1;
        }
        if was_fence {
            self.forget_fence(ticket.seq);
        }
        Ok(())
    }

    /// Use `seq`, a fence, failed: it and the uses after it that named it as
    /// their fence name the fence before it instead, so that the read index,
    /// once past them, nominates a fence that can still prove something.
    /// Cold: only after a failed submission.
    fn forget_fence(&mut self, seq: u64) {
        // The fence at or before the previous use, if that one is of this
        // generation and still in flight; else any earlier fence is retired
        // already, or of another queue, and none is as good.
        let previous = self
            .ring
            .get(seq - 1)
            .filter(|_| seq > self.proofs.generation_start())
            .map_or(0, |slot| slot.last_fence);
        // The uses naming it follow it directly (the failed use first): the
        // next fence, or a new generation, ends them.
        for later in seq..self.ring.tail() {
            let slot = self.ring.get_mut(later).expect("in flight");
            if slot.last_fence != seq {
                break;
            }
            slot.last_fence = previous;
        }
        self.proofs.forget_fence(seq, previous);
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests;
