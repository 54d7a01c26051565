//! The ring: a circle of slots, each owning an armed signal. Uses take slots
//! in order at the tail; reclaim re-arms them in order at the head. A use's
//! slot is found from its sequence number by arithmetic, never by search.
//!
//! A slot keeps its signal across uses (re-armed in place) unless the signal
//! must leave: it is still held elsewhere (parked, replaced by a spare), or
//! the next use wants the other placement (swapped with a spare of that
//! placement, as a timing-only use takes a host signal). Spares wait in one
//! pool per placement. The ring grows, up to a limit, by doubling, with
//! signals from the spares first and then from a new batch.

use crate::backend::Placement;
use crate::share::Cell;
use crate::sync::Arc;
use crate::ticket::aql_before;

/// One slot: its signal, and the use it serves while the use is in flight.
pub(crate) struct Slot<S> {
    /// Its signal's cell (the tracker's own reference: its hot path reaches
    /// a cell with no lookup).
    pub(crate) cell: Arc<Cell<S>>,
    /// Where its signal lives (the cell's, kept beside its key so that the
    /// acquire fast path and the walk decide without the cell).
    pub(crate) placement: Placement,
    /// The number of the store that armed the signal; compared with the
    /// fences issued since, so a signal is fenced once before it is used.
    pub(crate) store: u64,
    /// The use's AQL index (for copy-engine uses, the previous AQL index, so
    /// indices stay ordered along the ring).
    pub(crate) aql: u64,
    /// The sequence number of the newest fence at or before this use (0: none).
    pub(crate) last_fence: u64,
    pub(crate) flags: u8,
    /// Operations that decrement the signal (its arming value).
    pub(crate) ops: u32,
    /// Decrements a failed submission's signal still expects once its issued
    /// part finished (0: none).
    pub(crate) residual: u32,
}

impl<S> Slot<S> {
    /// A slot whose signal is `spare`'s.
    pub(crate) fn new(spare: Spare<S>) -> Self {
        Self {
            cell: spare.cell,
            placement: spare.placement,
            store: spare.store,
            aql: 0,
            last_fence: 0,
            flags: 0,
            ops: 1,
            residual: 0,
        }
    }

    /// Whether the slot has `flag` (one of [`flag`](crate::ticket::flag)'s).
    pub(crate) fn is(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Gives the slot `spare`'s signal; returns its own as a spare.
    pub(crate) fn swap_signal(&mut self, spare: Spare<S>) -> Spare<S> {
        let old = Spare {
            cell: core::mem::replace(&mut self.cell, spare.cell),
            placement: self.placement,
            store: self.store,
        };
        self.placement = spare.placement;
        self.store = spare.store;
        old
    }
}

/// A spare signal, where it lives, and the number of the store that armed
/// it.
pub(crate) struct Spare<S> {
    pub(crate) cell: Arc<Cell<S>>,
    pub(crate) placement: Placement,
    pub(crate) store: u64,
}

pub(crate) struct Ring<S> {
    slots: Vec<Slot<S>>,
    /// The position of the oldest use's slot.
    head_pos: usize,
    /// The position of the next use's slot.
    tail_pos: usize,
    /// The oldest use not yet reclaimed.
    head: u64,
    /// The sequence number the next use gets.
    tail: u64,
    limit: usize,
    spares: [Vec<Spare<S>>; 2],
}

impl<S> Ring<S> {
    /// A ring of `slots` (armed signals), which may grow to `limit` slots.
    pub(crate) fn new(slots: Vec<Slot<S>>, limit: usize) -> Self {
        Self {
            slots,
            head_pos: 0,
            tail_pos: 0,
            head: 1,
            tail: 1,
            limit,
            spares: [Vec::new(), Vec::new()],
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn in_flight(&self) -> usize {
        (self.tail - self.head) as usize
    }

    pub(crate) fn is_full(&self) -> bool {
        self.in_flight() >= self.slots.len()
    }

    /// The oldest use not yet reclaimed (equal to `tail` when none is).
    pub(crate) fn head(&self) -> u64 {
        self.head
    }

    /// The sequence number of the next use.
    pub(crate) fn tail(&self) -> u64 {
        self.tail
    }

    fn position(&self, seq: u64) -> usize {
        let pos = self.head_pos + (seq - self.head) as usize;
        if pos >= self.slots.len() {
            pos - self.slots.len()
        } else {
            pos
        }
    }

    /// The slot of use `seq`, if it is in flight.
    pub(crate) fn get(&self, seq: u64) -> Option<&Slot<S>> {
        (self.head..self.tail)
            .contains(&seq)
            .then(|| &self.slots[self.position(seq)])
    }

    pub(crate) fn get_mut(&mut self, seq: u64) -> Option<&mut Slot<S>> {
        if !(self.head..self.tail).contains(&seq) {
            return None;
        }
        let pos = self.position(seq);
        Some(&mut self.slots[pos])
    }

    /// The slot the next use takes (the ring must not be full).
    pub(crate) fn next_mut(&mut self) -> &mut Slot<S> {
        debug_assert!(!self.is_full());
        &mut self.slots[self.tail_pos]
    }

    /// Hands the next slot to a use; returns its sequence number.
    pub(crate) fn advance_tail(&mut self) -> u64 {
        let seq = self.tail;
        self.tail += 1;
        self.tail_pos = self.wrap(self.tail_pos + 1);
        seq
    }

    /// The oldest use's slot, if any use is in flight.
    pub(crate) fn oldest(&self) -> Option<&Slot<S>> {
        (self.head < self.tail).then(|| &self.slots[self.head_pos])
    }

    pub(crate) fn oldest_mut(&mut self) -> Option<&mut Slot<S>> {
        (self.head < self.tail).then(|| &mut self.slots[self.head_pos])
    }

    /// The oldest use leaves; its slot (re-armed by the caller) is free again.
    pub(crate) fn advance_head(&mut self) {
        debug_assert!(self.head < self.tail);
        self.head += 1;
        self.head_pos = self.wrap(self.head_pos + 1);
    }

    /// Retires uses oldest first while `take` accepts them, at most `max`:
    /// the head moves past every accepted use. Returns how many it took.
    ///
    /// The reclaim walk's inner loop: it runs over the slots as (at most
    /// two) contiguous runs, so a retired use costs its own checks and
    /// little else.
    #[inline]
    pub(crate) fn take_oldest_while(
        &mut self,
        max: usize,
        mut take: impl FnMut(u64, &mut Slot<S>) -> bool,
    ) -> usize {
        let wanted = (self.tail - self.head).min(max as u64) as usize;
        let mut taken = 0;
        while taken < wanted {
            let pos = self.head_pos;
            let run = (wanted - taken).min(self.slots.len() - pos);
            let first = self.head;
            let mut seq = first;
            for slot in &mut self.slots[pos..pos + run] {
                if !take(seq, slot) {
                    break;
                }
                seq += 1;
            }
            let in_run = (seq - first) as usize;
            taken += in_run;
            self.head = seq;
            self.head_pos = self.wrap(pos + in_run);
            if in_run < run {
                break;
            }
        }
        taken
    }

    fn wrap(&self, pos: usize) -> usize {
        if pos == self.slots.len() { 0 } else { pos }
    }

    /// The last in-flight use within `lo..hi` whose AQL index is before
    /// `index`, if any.
    ///
    /// Indices never decrease along the ring (a copy-engine use repeats the
    /// index before it), so the answer is the boundary of a run. Uses of one
    /// packet each, published back to back, put it `index - aql(lo)` uses
    /// after `lo`: that guess is checked first, with two looks, and only a
    /// wrong guess (packets of several operations, foreign packets between
    /// uses, copy-engine uses) pays a binary search, of the side it leaves.
    /// The fence probe asks this once per probe: the search it replaces
    /// took log2 of the uses in flight (10 looks at 1024).
    #[inline]
    pub(crate) fn last_before(&self, lo: u64, hi: u64, index: u64) -> Option<u64> {
        let before = |seq: u64| aql_before(self.slots[self.position(seq)].aql, index);
        if lo >= hi || !before(lo) {
            return None;
        }
        // Everything below `low` is before `index`, nothing from `high` on.
        let (mut low, mut high) = (lo + 1, hi);
        let distance = index.wrapping_sub(self.slots[self.position(lo)].aql);
        let guess = lo.saturating_add(distance - 1).min(hi - 1);
        if guess > lo {
            if before(guess) {
                if guess + 1 == hi || !before(guess + 1) {
                    return Some(guess);
                }
                low = guess + 2;
            } else {
                high = guess;
            }
        }
        while low < high {
            let mid = low + (high - low) / 2;
            if before(mid) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        Some(low - 1)
    }

    pub(crate) fn take_spare(&mut self, placement: Placement) -> Option<Spare<S>> {
        self.spares[placement.index()].pop()
    }

    pub(crate) fn put_spare(&mut self, spare: Spare<S>) {
        self.spares[spare.placement.index()].push(spare);
    }

    pub(crate) fn spares(&self, placement: Placement) -> usize {
        self.spares[placement.index()].len()
    }

    /// Doubles the ring (up to its limit) with `fill` new armed slots taken
    /// from the spares of `placement` (the caller made sure there are enough,
    /// or gives fewer). Returns how many slots were added.
    pub(crate) fn grow(&mut self, placement: Placement) -> usize {
        let wanted = (self.slots.len() * 2).min(self.limit) - self.slots.len();
        let extra = wanted.min(self.spares[placement.index()].len());
        if extra == 0 {
            return 0;
        }
        // The oldest use at position 0, then the armed slots after the
        // newest, then the new ones.
        self.slots.rotate_left(self.head_pos);
        self.slots.reserve_exact(extra);
        for _ in 0..extra {
            let spare = self.spares[placement.index()].pop().expect("counted above");
            self.slots.push(Slot::new(spare));
        }
        self.head_pos = 0;
        self.tail_pos = self.in_flight();
        extra
    }

    /// Adds up to `count` slots to an empty ring from the spares, preferring
    /// `placement`. Returns the ring's size.
    pub(crate) fn fill(&mut self, count: usize, placement: Placement) -> usize {
        debug_assert_eq!(self.in_flight(), 0);
        for p in [placement, placement.other()] {
            while self.slots.len() < count
                && let Some(spare) = self.spares[p.index()].pop()
            {
                self.slots.push(Slot::new(spare));
            }
        }
        self.tail_pos = self.wrap(self.tail_pos);
        self.slots.len()
    }

    pub(crate) fn can_grow(&self) -> bool {
        self.slots.len() < self.limit
    }

    /// How many slots the next growth adds.
    pub(crate) fn growth_step(&self) -> usize {
        (self.slots.len() * 2).min(self.limit) - self.slots.len()
    }
}

#[cfg(all(test, not(sigretire_loom)))]
mod tests;
