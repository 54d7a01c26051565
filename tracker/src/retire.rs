//! Retirement proofs, cheapest first:
//!
//! 1. a completed fence of the same generation with a later AQL index retires
//!    every earlier use, with no load for them at all;
//! 2. the read index nominates the newest fence it passed, and one load of
//!    that fence's signal confirms it (fence probing);
//! 3. a CPU wait saw the use's signal at 0 (recorded in its cell);
//! 4. a direct load of the use's own signal, the fallback.
//!
//! A drained queue retires everything. Generations keep fences of one
//! hardware queue from proving anything about another's uses: a use belongs
//! to the current generation exactly when its sequence number is at least the
//! generation's first, so no generation number is ever compared.

use crate::backend::{QueueView, SignalMemory};
use crate::error::Error;
use crate::retiring::RetiringTracker;
use crate::ring::Use;
use crate::share::CellPtr;
use crate::ticket::{Generation, Status, Ticket, aql_before};
use std::collections::VecDeque;

/// What the tracker knows about its queue's progress.
pub(crate) struct Proofs {
    generation: Generation,
    bits: u32,
    /// The first sequence number of the current generation.
    generation_start: u64,
    /// The AQL index of the current generation's newest use.
    last_aql: Option<u64>,
    /// Fences in flight, oldest first: (sequence number, AQL index).
    fences: VecDeque<(u64, u64)>,
    /// Every current-generation use up to this AQL index completed.
    proven: Option<u64>,
    /// Every use up to this sequence number completed (the queue drained).
    drained_through: u64,
}

impl Proofs {
    pub(crate) fn new(bits: u32, max_in_flight: usize) -> Self {
        Self {
            generation: Generation::new(0, bits),
            bits,
            generation_start: 1,
            last_aql: None,
            fences: VecDeque::with_capacity(max_in_flight),
            proven: None,
            drained_through: 0,
        }
    }

    pub(crate) fn generation(&self) -> Generation {
        self.generation
    }

    /// The generation of a use still in flight or just acquired.
    pub(crate) fn generation_of(&self, seq: u64) -> Generation {
        if seq >= self.generation_start {
            self.generation
        } else {
            // Older uses are reported one generation back: enough for a caller
            // to see they predate the queue change.
            Generation::new(self.generation.value().wrapping_sub(1), self.bits)
        }
    }

    pub(crate) fn new_generation(&mut self, start: u64) {
        self.generation = self.generation.next(self.bits);
        self.generation_start = start;
        self.last_aql = None;
        self.proven = None;
    }

    pub(crate) fn check_order(&self, index: u64) -> Result<(), Error> {
        match self.last_aql {
            Some(previous) if !aql_before(previous, index) => {
                Err(Error::AqlIndexOutOfOrder { index, previous })
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn note_packet(&mut self, seq: u64, index: u64, barrier: bool) {
        self.last_aql = Some(index);
        if barrier {
            self.fences.push_back((seq, index));
        }
    }

    /// Forgets a fence whose packet will not complete as a whole (its
    /// submission failed).
    pub(crate) fn forget_fence(&mut self, seq: u64) {
        if let Some(i) = self.fences.iter().rposition(|&(s, _)| s == seq) {
            self.fences.remove(i);
        }
    }

    /// Drops the fence entry of a use leaving the ring.
    pub(crate) fn retire_fence(&mut self, seq: u64) {
        if self.fences.front().is_some_and(|&(s, _)| s <= seq) {
            self.fences.pop_front();
        }
    }

    pub(crate) fn drain_through(&mut self, seq: u64) {
        self.drained_through = self.drained_through.max(seq);
    }

    pub(crate) fn drained(&self, seq: u64) -> bool {
        seq <= self.drained_through
    }

    /// Whether a fence of the current generation could ever prove `u`.
    pub(crate) fn fences_can_prove<S>(&self, u: &Use<S>) -> bool {
        u.seq >= self.generation_start && !u.is(Use::<S>::COPY)
    }

    /// Whether a completed fence already proves `u` (proof 1).
    pub(crate) fn fence_proves<S>(&self, u: &Use<S>) -> bool {
        self.fences_can_prove(u) && self.proven.is_some_and(|p| !aql_before(p, u.aql))
    }

    fn prove(&mut self, aql: u64) {
        if self.proven.is_none_or(|p| aql_before(p, aql)) {
            self.proven = Some(aql);
        }
    }

    /// The current generation's fences, as a range of indices into `fences`.
    fn current_fences(&self) -> (usize, usize) {
        let start = self
            .fences
            .partition_point(|&(seq, _)| seq < self.generation_start);
        (start, self.fences.len())
    }

    /// The newest current-generation fence the read index has passed.
    fn nominated(&self, read_index: u64) -> Option<(u64, u64)> {
        let (mut lo, mut hi) = self.current_fences();
        let start = lo;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if aql_before(self.fences[mid].1, read_index) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo > start).then(|| self.fences[lo - 1])
    }

    fn newest_fence(&self) -> Option<(u64, u64)> {
        let (start, end) = self.current_fences();
        (end > start).then(|| self.fences[end - 1])
    }

    fn is_proven(&self, aql: u64) -> bool {
        self.proven.is_some_and(|p| !aql_before(p, aql))
    }
}

impl<M: SignalMemory, Q: QueueView> RetiringTracker<M, Q> {
    /// What is known about use `seq` without reading signal memory.
    pub(crate) fn known(&self, seq: u64, cell: CellPtr<M::Signal>) -> Option<Status> {
        // SAFETY: the cell belongs to `self.shared`.
        let c = unsafe { cell.get() };
        if let Some(status) = self.shared.known_status(seq, c) {
            return Some(status);
        }
        if self.proofs.drained(seq) {
            return Some(Status::Complete);
        }
        let u = self.ring.get(seq)?;
        self.proofs.fence_proves(u).then_some(Status::Complete)
    }

    /// Fence probing (proofs 1 and 2): at most one load, of the newest fence
    /// the read index nominates, which retires every use up to it. Returns
    /// whether it proved anything new.
    pub(crate) fn probe(&mut self) -> bool {
        // A CPU wait may already have seen the newest fence complete.
        if let Some((seq, aql)) = self.proofs.newest_fence()
            && !self.proofs.is_proven(aql)
            && self.recorded_complete(seq)
        {
            self.proofs.prove(aql);
            return true;
        }
        let Some((seq, aql)) = self.proofs.nominated(self.queue.read_index()) else {
            return false;
        };
        if self.proofs.is_proven(aql) {
            return false;
        }
        if self.recorded_complete(seq) {
            self.proofs.prove(aql);
            return true;
        }
        let Some(u) = self.ring.get(seq).copied() else {
            return false;
        };
        self.stats.probes += 1;
        let value = self.load(u.cell);
        if value == 0 {
            self.proofs.prove(aql);
            return true;
        }
        if value < 0 {
            self.fail_pending();
        }
        false
    }

    fn recorded_complete(&self, seq: u64) -> bool {
        self.ring.get(seq).is_some_and(|u| {
            // SAFETY: the cell belongs to `self.shared`.
            let cell = unsafe { u.cell.get() };
            cell.phase_of(seq) == Some(Some(Status::Complete))
        })
    }

    /// Proof 4: one load of the use's own signal.
    pub(crate) fn load_own(&mut self, seq: u64) -> Status {
        let Some(u) = self.ring.get(seq).copied() else {
            return self.shared.outcome_of_retired(seq);
        };
        // SAFETY: the cell belongs to `self.shared`.
        let cell = unsafe { u.cell.get() };
        let value = self.load(u.cell);
        if value == 0 {
            if cell.complete(seq) {
                self.stats.retired += 1;
                self.stats.retired_by_load += 1;
            }
            if u.is(Use::<M::Signal>::FENCE) && self.proofs.fences_can_prove(&u) {
                self.proofs.prove(u.aql);
            }
            return Status::Complete;
        }
        if value < 0 {
            if self.proofs.fences_can_prove(&u) {
                self.fail_pending();
            } else if cell.fail(seq) {
                self.note_failed(seq);
            }
        }
        self.known(seq, u.cell).unwrap_or(Status::Pending)
    }

    pub(crate) fn query_use(&mut self, ticket: &Ticket) -> Result<Status, Error> {
        let cell = self.cell_of(ticket)?;
        if let Some(status) = self.known(ticket.seq, cell) {
            self.learn_fence(ticket.seq, status);
            return Ok(status);
        }
        if self.probe() {
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
            && let Some(u) = self.ring.get(seq)
            && u.is(Use::<M::Signal>::FENCE)
            && self.proofs.fences_can_prove(u)
        {
            let aql = u.aql;
            self.proofs.prove(aql);
        }
    }

    /// Decides whether the oldest use is retired, recording the proof (and
    /// counting it once). A failed submission's use is retired only once the
    /// part that was issued has finished.
    pub(crate) fn settle(&mut self, u: &Use<M::Signal>) -> bool {
        // SAFETY: the cell belongs to `self.shared`.
        let cell = unsafe { u.cell.get() };
        let (drained, fenced) = (self.proofs.drained(u.seq), self.proofs.fence_proves(u));
        match self.shared.known_status(u.seq, cell) {
            Some(Status::Complete) => true,
            Some(Status::Failed) => {
                u.residual == 0 || drained || fenced || self.issued_part_done(u)
            }
            _ if drained || fenced => {
                if cell.complete(u.seq) {
                    self.stats.retired += 1;
                    if drained {
                        self.stats.retired_by_drain += 1;
                    } else {
                        self.stats.retired_by_fence += 1;
                    }
                }
                true
            }
            _ => false,
        }
    }

    /// Whether a failed submission's issued operations all finished: the
    /// signal then holds exactly the decrements that were never issued.
    fn issued_part_done(&mut self, u: &Use<M::Signal>) -> bool {
        let value = self.load(u.cell);
        value < 0 || value == i64::from(u.residual)
    }

    /// Fails every pending use of the current generation (a queue error).
    pub(crate) fn fail_pending(&mut self) -> usize {
        let mut failed = 0;
        let first = self.ring.oldest().map_or(self.next_seq, |u| u.seq);
        for seq in first..self.next_seq {
            let u = *self
                .ring
                .get(seq)
                .expect("uses in flight are numbered consecutively");
            if !self.proofs.fences_can_prove(&u) || self.known(u.seq, u.cell).is_some() {
                continue;
            }
            // SAFETY: the cell belongs to `self.shared`.
            if unsafe { u.cell.get() }.fail(u.seq) {
                self.note_failed(u.seq);
                failed += 1;
            }
        }
        failed
    }

    pub(crate) fn note_failed(&mut self, _seq: u64) {
        self.stats.failed += 1;
    }

    /// A submission failed after issuing `issued` of the use's operations.
    pub(crate) fn fail_use(&mut self, ticket: &Ticket, issued: u32) -> Result<(), Error> {
        let cell = self.cell_of(ticket)?;
        let invalid = |state| Error::InvalidState {
            seq: ticket.seq,
            action: "fail its submission",
            state,
        };
        if let Some(status) = self.known(ticket.seq, cell) {
            return Err(invalid(if status == Status::Complete {
                "complete"
            } else {
                "failed"
            }));
        }
        let u = self.ring.get_mut(ticket.seq).ok_or(invalid("retired"))?;
        if issued >= u.ops {
            return Err(invalid("fully issued"));
        }
        u.residual = u.ops - issued;
        let fence = u.is(Use::<M::Signal>::FENCE);
        // SAFETY: the cell belongs to `self.shared`.
        if unsafe { cell.get() }.fail(ticket.seq) {
            self.note_failed(ticket.seq);
        }
        if fence {
            self.proofs.forget_fence(ticket.seq);
        }
        Ok(())
    }
}
