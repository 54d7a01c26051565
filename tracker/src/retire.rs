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
//! hardware queue from proving anything about another's uses: a generation's
//! uses are a run of sequence numbers (the current one's from its first on,
//! an older one's up to the next one's first), so no generation number is
//! ever compared. An older generation (a hardware queue the tracker no
//! longer watches) keeps what its fences proved and its newest fence, which
//! a poll probes with one load, until its last use retired; its queue's
//! failure fails its uses and no other's.
//!
//! [`Proofs`] holds what is proven; [`Prover`] runs the procedures that
//! prove more, over the uses in flight and the signals it may read.

use crate::backend::SignalMemory;
use crate::error::{AcquireError, FailSubmissionError};
use crate::keys::CellKey;
use crate::ring::{Ring, Slot};
use crate::share::Cell;
use crate::signals::Signals;
use crate::stats::Stats;
use crate::ticket::{Generation, Status, Ticket, aql_before, flag};
use std::collections::VecDeque;

/// What the tracker knows about its queue's progress.
pub(crate) struct Proofs {
    generation: Generation,
    bits: u32,
    /// The first sequence number of the current generation.
    generation_start: u64,
    /// The AQL index of the current generation's newest AQL use; only
    /// meaningful while `last_aql_seq` is not 0.
    last_aql: u64,
    /// That use's sequence number, 0 while the generation has none (uses
    /// are numbered from 1). The one record of whether there is one: an
    /// `Option` index beside it made every packet store its tag as well.
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
    /// The older generations that may still have uses in flight, oldest
    /// first.
    older: VecDeque<Older>,
}

/// What is known of an older generation: a hardware queue the tracker no
/// longer watches, whose uses still retire by its own fences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Older {
    /// Its first use.
    pub(crate) start: u64,
    /// The first use of the generation after it.
    pub(crate) end: u64,
    /// Its newest fence (0: none), the one a poll probes.
    newest_fence: u64,
    /// Every AQL use of it up to this one is proven complete (0: none):
    /// AQL indices grow along its uses, so a completed fence proves the
    /// uses before it by their sequence numbers.
    proven_through: u64,
}

impl Proofs {
    pub(crate) fn new(bits: u32) -> Self {
        Self {
            generation: Generation::new(0, bits),
            bits,
            generation_start: 1,
            last_aql: 0,
            last_aql_seq: 0,
            last_fence: 0,
            proven: None,
            proven_through: 0,
            drained_through: 0,
            probed_at: 0,
            older: VecDeque::new(),
        }
    }

    pub(crate) fn generation(&self) -> Generation {
        self.generation
    }

    /// Counts generations in `bits` bits from now on (a test's: a
    /// runtime's tracker counts in 32).
    pub(crate) fn narrow(&mut self, bits: u32) {
        self.bits = bits;
        self.generation = Generation::new(self.generation.value(), bits);
    }

    /// A queue change: the generation after this one starts at use
    /// `start`; `head` is the oldest use in flight.
    pub(crate) fn new_generation(&mut self, start: u64, head: u64) {
        self.forget_retired_generations(head);
        if head.max(self.generation_start) < start {
            // Its uses in flight run on on the old hardware queue: they keep
            // what its fences proved, and its newest fence, to retire by.
            self.older.push_back(Older {
                start: self.generation_start,
                end: start,
                newest_fence: self.last_fence,
                proven_through: self.proven_through,
            });
        }
        self.generation = self.generation.next(self.bits);
        self.generation_start = start;
        self.last_aql = 0;
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
        self.last_aql_seq == 0 || aql_before(self.last_aql, index)
    }

    /// The AQL index of the current generation's newest AQL use, if any.
    fn newest_aql(&self) -> Option<u64> {
        (self.last_aql_seq != 0).then_some(self.last_aql)
    }

    pub(crate) fn check_order(&self, index: u64) -> Result<(), AcquireError> {
        match self.newest_aql() {
            Some(previous) if !aql_before(previous, index) => {
                Err(AcquireError::AqlIndexOutOfOrder { index, previous })
            }
            _ => Ok(()),
        }
    }

    /// The newest AQL index (0 before any): what a copy-engine use records so
    /// that indices stay ordered along the ring.
    pub(crate) fn last_aql(&self) -> u64 {
        self.newest_aql().unwrap_or(0)
    }

    pub(crate) fn last_fence(&self) -> u64 {
        self.last_fence
    }

    pub(crate) fn note_packet(&mut self, seq: u64, index: u64, barrier: bool) {
        debug_assert_ne!(seq, 0, "uses are numbered from 1");
        self.last_aql = index;
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
        if seq >= self.generation_start {
            if self.last_fence == seq {
                self.last_fence = previous;
            }
        } else if let Some(older) = self.older_mut(seq)
            && older.newest_fence == seq
        {
            older.newest_fence = previous;
        }
    }

    /// The older generation use `seq` belongs to, if it is an older
    /// generation's still tracked.
    fn older_of(&self, seq: u64) -> Option<&Older> {
        let at = self.older.partition_point(|older| older.end <= seq);
        self.older.get(at).filter(|older| older.start <= seq)
    }

    fn older_mut(&mut self, seq: u64) -> Option<&mut Older> {
        let at = self.older.partition_point(|older| older.end <= seq);
        self.older.get_mut(at).filter(|older| older.start <= seq)
    }

    /// The uses of use `seq`'s generation: `start..end` (the current
    /// generation's end is `u64::MAX`). `None` for a use of an older
    /// generation no longer tracked: none of its uses is in flight.
    pub(crate) fn generation_of(&self, seq: u64) -> Option<core::ops::Range<u64>> {
        if seq >= self.generation_start {
            return Some(self.generation_start..u64::MAX);
        }
        self.older_of(seq).map(|older| older.start..older.end)
    }

    /// The older generations that may still have uses in flight.
    pub(crate) fn older(&self) -> &VecDeque<Older> {
        &self.older
    }

    /// Forgets the older generations none of whose uses is in flight any
    /// more (`head`: the oldest in flight).
    #[inline]
    pub(crate) fn forget_retired_generations(&mut self, head: u64) {
        while self.older.front().is_some_and(|older| older.end <= head) {
            self.older.pop_front();
        }
    }

    /// The current queue is idle: every packet published on it completed,
    /// the newest AQL use's included, which proves every AQL use of the
    /// generation as a completed fence there would.
    pub(crate) fn drain(&mut self) {
        if let Some(aql) = self.newest_aql() {
            self.prove(self.last_aql_seq, aql);
            self.drained_through = self.drained_through.max(self.last_aql_seq);
        }
    }

    /// Of the uses `first..first + count`, how many a drain proved (for
    /// counting retirements by proof).
    #[inline]
    pub(crate) fn drained_among(&self, first: u64, count: u64) -> u64 {
        (self.drained_through + 1).saturating_sub(first).min(count)
    }

    pub(crate) fn generation_start(&self) -> u64 {
        self.generation_start
    }

    /// Whether a fence of use `seq`'s own generation could ever prove it:
    /// any of the current generation's (a later fence may yet come), an
    /// older generation's only up to its newest fence. Never a copy
    /// engine's use.
    pub(crate) fn fences_can_prove<S>(&self, seq: u64, slot: &Slot<S>) -> bool {
        if slot.is(flag::COPY) {
            return false;
        }
        seq >= self.generation_start
            || planted!(RetireAcrossGenerations)
            || self
                .older_of(seq)
                .is_some_and(|older| seq <= older.newest_fence)
    }

    /// Whether uses `a` and `b` ran on one hardware queue (one generation).
    pub(crate) fn same_generation(&self, a: u64, b: u64) -> bool {
        self.generation_of(a).is_some_and(|uses| uses.contains(&b))
    }

    /// How many uses from `head` on (the oldest in flight) a completed
    /// fence proves, copy-engine uses aside (the walk skips those itself):
    /// the same proof as [`fence_proves`](Self::fence_proves), use by use,
    /// worked out for a run at once. AQL indices grow along the ring, so
    /// every current-generation use up to the proving fence has an index up
    /// to the proven one.
    #[inline]
    pub(crate) fn proven_run(&self, head: u64) -> u64 {
        if head >= self.generation_start {
            if head <= self.proven_through {
                return self.proven_through + 1 - head;
            }
            return 0;
        }
        self.older_proven_run(head)
    }

    /// `proven_run` where the oldest use is an older generation's: up to
    /// the fence its own generation's proof reached (the walk forgets the
    /// generations behind it, so its own is the first).
    #[cold]
    fn older_proven_run(&self, head: u64) -> u64 {
        match self.older_of(head) {
            Some(older) if head <= older.proven_through => older.proven_through + 1 - head,
            _ => 0,
        }
    }

    /// What is known about use `seq`, whose signal's cell is `cell`, without
    /// reading signal memory: what the cell recorded, else what a fence
    /// proves.
    pub(crate) fn known<M: SignalMemory>(
        &self,
        seq: u64,
        cell: &Cell<M::Signal>,
        ring: &Ring<M::Signal>,
        signals: &Signals<M>,
    ) -> Option<Status> {
        if let Some(status) = signals.shared().known_status(seq, cell) {
            return Some(status);
        }
        let slot = ring.get(seq)?;
        self.fence_proves(seq, slot).then_some(Status::Complete)
    }

    /// Whether a completed fence of its own generation already proves use
    /// `seq` (proof 1).
    pub(crate) fn fence_proves<S>(&self, seq: u64, slot: &Slot<S>) -> bool {
        if slot.is(flag::COPY) {
            return false;
        }
        if seq >= self.generation_start || planted!(RetireAcrossGenerations) {
            if self.is_proven(slot.aql) {
                return true;
            }
            if seq >= self.generation_start {
                return false;
            }
        }
        self.older_of(seq)
            .is_some_and(|older| seq <= older.proven_through)
    }

    /// What the proofs say about uses of the current generation, as plain
    /// values: (generation start, proven AQL index, newest use a drain proved).
    #[cfg(test)]
    pub(crate) fn snapshot(&self) -> (u64, Option<u64>, u64) {
        (self.generation_start, self.proven, self.drained_through)
    }

    /// Fence `seq` (of any generation still tracked), at AQL index `aql`,
    /// completed: it proves its own generation's earlier uses.
    pub(crate) fn prove_in_generation(&mut self, seq: u64, aql: u64) {
        if seq >= self.generation_start {
            self.prove(seq, aql);
        } else if let Some(older) = self.older_mut(seq) {
            older.proven_through = older.proven_through.max(seq);
        }
    }

    /// Fence `seq`, of the current generation, at AQL index `aql`, completed.
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

/// The proof procedures: they read the uses in flight and, where nothing
/// cheaper answers, their signals; they record what they prove in
/// [`Proofs`] and in the cells, and count it.
pub(crate) struct Prover<'a, M: SignalMemory> {
    pub(crate) proofs: &'a mut Proofs,
    pub(crate) ring: &'a mut Ring<M::Signal>,
    pub(crate) signals: &'a mut Signals<M>,
    pub(crate) stats: &'a mut Stats,
}

impl<M: SignalMemory> Prover<'_, M> {
    /// What is known about use `seq` (whose cell is `cell`) without reading
    /// signal memory.
    pub(crate) fn known(&self, seq: u64, cell: &Cell<M::Signal>) -> Option<Status> {
        self.proofs.known(seq, cell, self.ring, self.signals)
    }

    /// Fence probing (proofs 1 and 2): at most one load, of the newest fence
    /// the read index nominates, which retires every use up to it — and none
    /// unless the read index moved `min_batch` packets since the last load.
    /// `read_index` reads the queue's. Going back from a fence not yet done,
    /// at most `window` older fences are consulted for what CPU waits saw.
    /// Returns whether it proved anything new.
    pub(crate) fn probe(
        &mut self,
        min_batch: u64,
        window: usize,
        read_index: impl FnOnce() -> u64,
    ) -> bool {
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
        let read_index = read_index();
        // A batched poll waits for the read index to move a batch; any other
        // probe loads even at the same read index (its fence may have
        // completed since).
        if min_batch > 1 && read_index.wrapping_sub(self.proofs.probed_at) < min_batch {
            return false;
        }
        let Some(passed) = self.ring.last_before(lo, hi, read_index) else {
            return false;
        };
        let fence = self.ring.get(passed).expect("in flight").last_fence;
        if fence < lo {
            return false; // already reclaimed, or of an older generation
        }
        let slot = self.ring.get(fence).expect("in flight");
        let aql = slot.aql;
        if !slot.is(flag::FENCE) || self.proofs.is_proven(aql) {
            return false;
        }
        if self.try_recorded_fence(fence) {
            return true;
        }
        if planted!(TrustReadIndex) {
            self.proofs.prove(fence, aql);
            return true;
        }
        self.stats.probes += 1;
        self.proofs.probed_at = read_index;
        let cell = &self.ring.get(fence).expect("in flight").cell;
        let value = self.signals.load(cell);
        if value == 0 {
            self.proofs.prove(fence, aql);
            return true;
        }
        if value < 0 {
            self.fail_pending();
            return false;
        }
        // Not yet: an older fence a CPU wait saw complete may still prove
        // something, without another load.
        self.prove_recorded_before(fence, lo, window)
    }

    /// Walks the fence chain back from `fence` (not included) to `lo`, at most
    /// `window` fences, and proves through the newest one a CPU wait
    /// recorded complete.
    fn prove_recorded_before(&mut self, fence: u64, lo: u64, window: usize) -> bool {
        let mut seq = fence;
        for _ in 0..window {
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
    /// it proves anything new: within its own generation (AQL indices of
    /// one hardware queue mean nothing on another).
    #[inline]
    pub(crate) fn try_recorded_fence(&mut self, seq: u64) -> bool {
        let Some(slot) = self.ring.get(seq) else {
            return false;
        };
        // Most often nothing was recorded: one load of its cell says so.
        if !slot.is(flag::FENCE) || slot.cell.phase_of(seq) != Some(Some(Status::Complete)) {
            return false;
        }
        prove_recorded(self.proofs, seq, slot)
    }

    /// Fence probing for the older generations (hardware queues the
    /// tracker no longer watches, whose read index it cannot see): at most
    /// one load each, of its newest fence, for those that still have uses
    /// in flight that the fence would prove. A completed fence retires its
    /// generation's uses before it; a negative one is its queue's failure,
    /// which fails its generation's pending uses and no other's. Returns
    /// whether it proved anything new. Cold: only after a queue change.
    #[cold]
    pub(crate) fn probe_older(&mut self) -> bool {
        let head = self.ring.head();
        let mut proved = false;
        for at in 0..self.proofs.older().len() {
            let older = self.proofs.older()[at];
            let fence = older.newest_fence;
            if older.end <= head || fence < head.max(older.start) {
                continue; // nothing in flight that its fence would prove
            }
            let Some(slot) = self.ring.get(fence) else {
                continue;
            };
            let aql = slot.aql;
            if !slot.is(flag::FENCE) || self.proofs.fence_proves(fence, slot) {
                continue;
            }
            if self.try_recorded_fence(fence) {
                proved = true;
                continue;
            }
            self.stats.probes += 1;
            let cell = &self.ring.get(fence).expect("in flight").cell;
            let value = self.signals.load(cell);
            if value == 0 {
                self.proofs.prove_in_generation(fence, aql);
                proved = true;
            } else if value < 0 {
                self.fail_range(older.start..older.end);
            }
        }
        proved
    }

    /// Proof 4: one load of the use's own signal.
    pub(crate) fn load_own(&mut self, seq: u64) -> Status {
        let Some(slot) = self.ring.get(seq) else {
            return self.signals.shared().outcome_of_retired(seq);
        };
        let value = self.signals.load(&slot.cell);
        if value == 0 {
            if slot.cell.complete(seq) {
                self.stats.retired += 1;
                self.stats.retired_by_load += 1;
            }
            if slot.is(flag::FENCE) && self.proofs.fences_can_prove(seq, slot) {
                self.proofs.prove_in_generation(seq, slot.aql);
            }
            return Status::Complete;
        }
        if value < 0 {
            // Its hardware queue failed: its generation's pending uses fail
            // (a copy engine's use alone).
            match self.proofs.generation_of(seq) {
                Some(uses) if !slot.is(flag::COPY) => {
                    self.fail_range(uses);
                }
                _ => {
                    if slot.cell.fail(seq) {
                        self.stats.failed += 1;
                    }
                }
            }
        }
        let slot = self.ring.get(seq).expect("in flight");
        self.known(seq, &slot.cell).unwrap_or(Status::Pending)
    }

    /// A fence learned complete by any means proves its predecessors.
    pub(crate) fn learn_fence(&mut self, seq: u64, status: Status) {
        if status == Status::Complete
            && let Some(slot) = self.ring.get(seq)
            && slot.is(flag::FENCE)
            && self.proofs.fences_can_prove(seq, slot)
        {
            self.proofs.prove_in_generation(seq, slot.aql);
        }
    }

    /// Decides whether use `seq` (the oldest) is retired, recording the proof
    /// and counting it once. A failed submission's use is retired only once
    /// the part that was issued has finished.
    pub(crate) fn settle(&mut self, seq: u64) -> Option<Outcome> {
        let slot = self.ring.oldest().expect("in flight");
        let cell = &slot.cell;
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
            // A failed use's packet may still be processed (a processor
            // writes the failure into the signals of packets published
            // behind the one that failed, or fetched before the error):
            // re-armed only once its signal shows it, so that no write of
            // the failure lands on the next use's arming.
            Some(Some(Status::Failed)) if issued_part_done(self.signals, slot) => {
                Some(Outcome::Failed)
            }
            _ => None,
        }
    }

    /// Whether use `seq` (in flight) still waits for the GPU: it is not
    /// known done, or it is a failed submission whose issued part may still
    /// run and that no proof settles yet (as in `settle`, one load tells).
    pub(crate) fn awaits_gpu(&mut self, seq: u64) -> bool {
        let Some(slot) = self.ring.get(seq) else {
            return false;
        };
        match self.proofs.known(seq, &slot.cell, self.ring, self.signals) {
            None | Some(Status::Pending) => true,
            Some(Status::Failed) => {
                slot.residual != 0
                    && !self.proofs.fence_proves(seq, slot)
                    && !issued_part_done(self.signals, slot)
            }
            Some(Status::Complete) => false,
        }
    }

    /// A queue error on the hardware queue the tracker watches: the current
    /// generation's pending uses fail (see [`fail_range`](Self::fail_range)).
    pub(crate) fn fail_pending(&mut self) -> usize {
        self.fail_range(self.proofs.generation_start()..u64::MAX)
    }

    /// A queue error on the hardware queue of the uses `uses` (one
    /// generation's): each of them in flight and not yet known done is
    /// settled by a load of its own signal — 0 means its packet completed
    /// before the error, anything else that it never will — so nothing
    /// that completed is reported failed. A copy engine's use is not the
    /// queue's. Returns how many failed now. Cold: only after an error.
    pub(crate) fn fail_range(&mut self, uses: core::ops::Range<u64>) -> usize {
        let mut failed = 0;
        let first = self.ring.head().max(uses.start);
        for seq in first..self.ring.tail().min(uses.end) {
            let slot = self.ring.get(seq).expect("in flight");
            if slot.is(flag::COPY)
                || self
                    .proofs
                    .known(seq, &slot.cell, self.ring, self.signals)
                    .is_some()
            {
                continue;
            }
            let cell = &slot.cell;
            let value = self.signals.load(cell);
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
            let slot = self.ring.get(seq).expect("in flight");
            if self.proofs.fence_proves(seq, slot) && slot.cell.complete(seq) {
                self.stats.retired += 1;
                self.stats.retired_by_fence += 1;
            }
        }
    }

    /// A submission failed after issuing `issued` of use `seq`'s operations
    /// (`cell`: its signal's).
    pub(crate) fn fail_use(
        &mut self,
        seq: u64,
        cell: CellKey,
        issued: u32,
    ) -> Result<(), FailSubmissionError> {
        let invalid = |state| FailSubmissionError::InvalidState { seq, state };
        if let Some(status) = self.known(seq, self.signals.shared().cell(cell)) {
            return Err(invalid(if status == Status::Complete {
                "complete"
            } else {
                "failed"
            }));
        }
        let slot = self.ring.get_mut(seq).ok_or(invalid("retired"))?;
        if issued >= slot.ops {
            return Err(invalid("fully issued"));
        }
        slot.residual = slot.ops - issued;
        let was_fence = slot.is(flag::FENCE);
        // It will never complete as a whole: it proves nothing.
        slot.flags &= !flag::FENCE;
        if slot.cell.fail(seq) {
            self.stats.failed += 1;
        }
        if was_fence {
            self.forget_fence(seq);
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
            .filter(|_| self.proofs.same_generation(seq, seq - 1))
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

    /// Where back-pressure looks for a fence to name: the `window` uses from
    /// the oldest (only fences of the current generation qualify).
    fn backpressure_candidates(&self, window: usize) -> core::ops::Range<u64> {
        let oldest = self.ring.head();
        oldest..oldest.saturating_add(window as u64).min(self.ring.tail())
    }

    /// What to do when the ring is full and cannot grow: name a use whose
    /// completion frees room. That is the oldest use that still waits for
    /// the GPU (not known done, or a failed submission whose issued part
    /// still runs: known failed, but its slot frees only once that part
    /// finished) — or, when fences can prove that use, the newest fence near
    /// it that is not known done, which retires everything before it at
    /// once (whose recorded completion the retry consults).
    /// A fence proves nothing about a copy-engine use or another
    /// generation's, so it is named only for a use of its own generation
    /// that it can prove; for the others the use itself is named. `None` if
    /// no use in flight waits for the GPU.
    pub(crate) fn backpressure(&mut self, window: usize) -> Option<AcquireError> {
        let tail = self.ring.tail();
        let oldest = (self.ring.head()..tail).find(|&seq| self.awaits_gpu(seq))?;
        let slot = self.ring.get(oldest).expect("in flight");
        let fence = if self.proofs.fences_can_prove(oldest, slot) {
            let candidates = self.backpressure_candidates(window);
            (oldest.max(candidates.start)..candidates.end)
                .rev()
                .find(|&seq| {
                    self.ring.get(seq).is_some_and(|slot| {
                        slot.is(flag::FENCE)
                            && self.proofs.same_generation(oldest, seq)
                            && self.proofs.fences_can_prove(seq, slot)
                            && self.known(seq, &slot.cell).is_none()
                    })
                })
        } else {
            None
        };
        let seq = fence.unwrap_or(oldest);
        let slot = self.ring.get(seq).expect("in flight");
        let cell = &slot.cell;
        Some(AcquireError::Backpressure {
            wait_for: Ticket::issue(
                self.signals.shared().id,
                seq,
                cell.key.0,
                cell.generation(),
                slot.is(flag::TIMED),
            ),
            in_flight: self.ring.in_flight(),
        })
    }
}

/// Proves through fence `seq` (`slot`), which a CPU wait recorded
/// complete, if it can prove anything new.
#[cold]
#[inline(never)]
fn prove_recorded<S>(proofs: &mut Proofs, seq: u64, slot: &Slot<S>) -> bool {
    if !proofs.fences_can_prove(seq, slot) || proofs.fence_proves(seq, slot) {
        return false;
    }
    proofs.prove_in_generation(seq, slot.aql);
    true
}

/// Whether a failed submission's issued operations all finished: the
/// signal then holds exactly the decrements that were never issued.
fn issued_part_done<M: SignalMemory>(signals: &mut Signals<M>, slot: &Slot<M::Signal>) -> bool {
    let value = signals.load(&slot.cell);
    value < 0 || value == i64::from(slot.residual)
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests;
